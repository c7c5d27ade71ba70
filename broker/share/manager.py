"""The share coordinator of one broker (KIP-932): share groups, share sessions and share partitions.

``ShareCoordinator`` serves ShareGroupHeartbeat and ShareGroupDescribe (membership,
``groups.py``) and ShareFetch and ShareAcknowledge (records, ``partition.py``), and keeps each
share partition's state in ``__share_group_state`` (``state_log.py``).

Share sessions
--------------
A member's ShareFetch requests form a share session, keyed by group and member: epoch 0 opens
it with the partitions of the request, every later request names the session's next epoch and
adds partitions (or forgets some), and epoch -1 closes it after its acknowledgements.  A fetch
acquires records from every partition of the session.  When a session closes, or its member
leaves the group or stops heartbeating, the records it holds are released at once.

Share partitions
----------------
As in Kafka 4.2, a share partition is initialized in two steps.  When a subscription first
names its topic, the heartbeat writes it to ``__share_group_state`` with start offset -1 (not
yet known), and the topic to the group's ShareGroupStatePartitionMetadata record, before the
member hears of its assignment.  The first ShareFetch then finds the start offset that the
group's ``share.auto.offset.reset`` gives at that moment (``latest`` by default: the high
watermark; ``earliest``: the log start offset; ``by_duration:<ISO-8601 duration>``: the first
offset at or after that long ago) and writes it.  Acknowledgements, released records and locks
that run out are written there before the request that caused them is answered (locks: within
``LOCK_TICK_S``).

All state changes happen on the event loop without awaiting in between; the only awaits are the
writes to ``__share_group_state`` and the long poll.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid

from broker.group.modern_records import epoch_value, target_member_value
from broker.replica import Wakeable
from broker.share import group_records as SR
from broker.share.groups import EMPTY_HASH, ShareGroup, ShareMember, simple_assign
from broker.share.partition import REJECT, RENEW, InvalidRecordState, InvalidRequest, SharePartition
from broker.share.state_log import TOPIC as STATE_TOPIC, ShareStateLog
from protocol.errors import ErrorCode as E, code_for_exception
from storage.errors import OffsetOutOfRangeError
from storage.scan import walk_headers
from storage.segment import FileRegion

log = logging.getLogger("odradek.share")

LOCK_TICK_S = 0.1
FINAL_EPOCH, INITIAL_EPOCH = -1, 0
PARTITION_READ_BYTES = 1 << 20
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_duration_ms(text: str) -> int | None:
    """An ISO-8601 duration as Java's Duration.parse reads the common forms (PnDTnHnMn.nS)."""
    m = _DURATION.match(text.strip().upper())
    if m is None or text.strip().upper() in ("P", "PT"):
        return None
    d, h, mi, s = m.groups()
    return int(((int(d or 0) * 24 + int(h or 0)) * 60 + int(mi or 0)) * 60_000 + float(s or 0) * 1000)


class ShareSession:
    __slots__ = ("group", "member", "epoch", "partitions", "last_used_ms", "connection", "rotation")

    def __init__(self, group: str, member: str, connection=None):
        self.group = group
        self.member = member
        self.connection = connection          # the connection that opened it: its close ends it
        self.rotation = 0                     # where the next fetch starts among the partitions
        self.epoch = 1                        # the epoch the next request must carry
        self.partitions: dict = {}            # (topic id, partition) -> topic name
        self.last_used_ms = 0


def _next_epoch(e: int) -> int:
    return 1 if e >= 0x7FFFFFFF else e + 1


class ShareCoordinator(Wakeable):
    """A ``Wakeable``: share fetches park on it for records that come free."""

    def __init__(self, broker):
        super().__init__()
        self.broker = broker
        self.cfg = broker.config
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[tuple, SharePartition] = {}     # (group, topic id, partition)
        self.sessions: dict[tuple, ShareSession] = {}         # (group, member id)
        # share partitions whose locks a request found run out (and released): the tick writes
        # them, as it writes the ones it finds itself
        self._expired: set = set()
        self.state = ShareStateLog(broker)
        self._task: asyncio.Task | None = None

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._tick_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):     # noqa: BLE001
                pass
            self._task = None

    def enabled(self) -> bool:
        """Share groups are served by a broker on the embedded metadata store with
        ``group.share.enable`` (Kafka 4.2: on by default); not yet in a ZooKeeper cluster."""
        return bool(self.cfg.get("group.share.enable")) and not self.cfg.zookeeper_connect

    # ------------------------------------------------------------------ configs
    def _group_config(self, group: str, name: str, broker_key: str | None, default=None):
        """A share group config: the group's own value (IncrementalAlterConfigs on the GROUP
        resource), else the broker's ``broker_key``, else ``default``."""
        own = self.broker.controller.group_configs(group)
        base = self.cfg.get(broker_key) if broker_key is not None else default
        if name in own:
            v = own[name]
            return int(v) if isinstance(base, int) else v
        return base

    def lock_ms(self, group: str) -> int:
        return self._group_config(group, "share.record.lock.duration.ms", "group.share.record.lock.duration.ms")

    def _new_partition(self, group: str, start: int, state_epoch: int = 0, batches=()) -> SharePartition:
        kw = dict(delivery_limit=self._group_config(group, "share.delivery.count.limit",
                                                    "group.share.delivery.count.limit"),
                  max_in_flight=self._group_config(group, "share.partition.max.record.locks",
                                                   "group.share.partition.max.record.locks"),
                  lock_ms=self.lock_ms(group), state_epoch=state_epoch)
        if batches:
            return SharePartition.restore(start, batches, **kw)
        return SharePartition(start, **kw)

    # ------------------------------------------------------------------ groups
    def _coordinator_error(self, group: str) -> int:
        coord = self.broker.groups
        if coord is None:
            return E.COORDINATOR_NOT_AVAILABLE
        return coord._validate_group_status(group, "share")

    def _other_group_type(self, group: str) -> str | None:
        g = self.broker.groups.groups.get(group) if self.broker.groups is not None else None
        if g is None or g.state == "Dead":
            return None
        return g.modern.kind if g.modern is not None else "classic"

    def _topics_of(self, names) -> dict:
        out = {}
        for n in names:
            info = self.broker.controller.topic(n)
            if info is not None:
                out[n] = (info.topic_id, len(info.partitions))
        return out

    async def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id, subscribed,
                        client_id: str, client_host: str) -> dict:
        out = {"error": E.NONE, "message": None, "member_id": member_id, "member_epoch": 0,
               "heartbeat_interval_ms": 0, "assignment": None}

        def fail(code, message=None):
            out.update(error=code, message=message, member_id=None, member_epoch=0, heartbeat_interval_ms=0,
                       assignment=None)
            return out
        if not member_id or len(member_id) > 36:        # Kafka 4.2: 1 to 36 characters, no message
            return fail(E.INVALID_REQUEST)
        if not group_id:
            return fail(E.INVALID_REQUEST, "GroupId can't be empty.")
        if rack_id is not None and not rack_id:
            return fail(E.INVALID_REQUEST, "RackId can't be empty.")
        if member_epoch < -1:
            return fail(E.INVALID_REQUEST, "MemberEpoch is invalid.")
        if member_epoch == 0 and not subscribed:
            return fail(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        err = self._coordinator_error(group_id)
        if err:
            return fail(err)
        other = self._other_group_type(group_id)
        if other is not None:
            return fail(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        group = self.groups.get(group_id)
        now = _now_ms()
        interval = self._group_config(group_id, "share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms")
        session_ms = self._group_config(group_id, "share.session.timeout.ms", "group.share.session.timeout.ms")
        out["heartbeat_interval_ms"] = interval
        if group is None and member_epoch != 0:
            # A group known only by the share partitions it left in __share_group_state (from
            # before its members were written to __consumer_offsets) exists, with no members.
            if not self.has_group(group_id):
                return fail(E.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            return fail(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        if member_epoch == -1:
            if member_id not in group.members:
                return fail(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            await self._remove_member(group, member_id)
            err = await self._write_group(group)
            if err:
                return fail(err)
            out["member_epoch"] = -1
            return out
        member = group.members.get(member_id) if group is not None else None
        if member_epoch == 0:
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            if member is None:
                if len(group.members) >= self.cfg.get("group.share.max.size"):
                    return fail(E.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum capacity of "
                                                          f"{self.cfg.get('group.share.max.size')} members.")
                member = group.members[member_id] = ShareMember(member_id, rack_id, client_id, client_host)
                group.epoch += 1
            member.epoch = 0
            member.previous_epoch = -1
            member.sent_epoch = -1
        else:
            if member is None:
                return fail(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            if member_epoch != member.epoch and member_epoch != member.previous_epoch:
                # the previous epoch is the member's if the answer that moved it on was lost
                word = "greater" if member_epoch > member.epoch else "smaller"
                return fail(E.FENCED_MEMBER_EPOCH, f"The share group member has a {word} member epoch "
                                                   f"({member_epoch}) than the one known by the group coordinator "
                                                   f"({member.epoch}). The member must abandon all its partitions and rejoin.")
            if member_epoch != member.epoch or subscribed is not None:
                member.sent_epoch = -1          # tell it its assignment again (a full request, or a lost answer)
        member.deadline_ms = now + session_ms
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed is not None and tuple(sorted(set(subscribed))) != member.subscribed:
            member.subscribed = tuple(sorted(set(subscribed)))
            group.epoch += 1
        seen = self._topics_of(group.subscribed_topics())
        if seen != group.topics_seen:
            group.topics_seen = seen
            digest = SR.topics_hash(seen)
            if digest != group.metadata_hash:       # not after a restart, if the topics stayed as they were
                group.metadata_hash = digest
                group.epoch += 1
        while group.assignment_epoch != group.epoch:
            # the writes of _initialize let other heartbeats in: a target computed for an epoch
            # that moved on meanwhile is computed again
            epoch = group.epoch
            target = simple_assign(list(group.members), {m.member_id: m.subscribed for m in group.members.values()},
                                   group.topics_seen, {mid: m.assigned for mid, m in group.members.items()})
            await self._initialize(group)
            if group.epoch != epoch or group.assignment_epoch == epoch:
                continue
            for mid, m in group.members.items():
                m.assigned = target.get(mid, {})
            group.assignment_epoch = epoch
        if member.sent_epoch != group.assignment_epoch or member.epoch != group.assignment_epoch:
            if member.epoch != group.assignment_epoch:
                member.previous_epoch = member.epoch
            member.epoch = group.assignment_epoch
            member.sent_epoch = group.assignment_epoch
            member.current = member.assigned
            out["assignment"] = member.assigned
        err = await self._write_group(group)
        if err:
            return fail(err)
        out["member_epoch"] = member.epoch
        return out

    async def _initialize(self, group: ShareGroup) -> None:
        """Initialize the share partitions of every partition of the subscribed topics that has
        none: a snapshot with start offset -1 in ``__share_group_state`` (the first ShareFetch
        finds the real start), and the topic in ``group.initialized`` (record 15), as Kafka's
        group coordinator asks its share coordinator to."""
        gid = group.group_id
        for tid in [t for t in group.initialized if self.topic_name(t) is None]:
            del group.initialized[tid]         # the topic was deleted
        for name, (tid, count) in sorted(group.topics_seen.items()):
            have = set(group.initialized.get(tid, (name, ()))[1])
            for p in range(count):
                if p in have:
                    continue
                key = (gid, tid, p)
                try:
                    if key not in self.partitions:
                        await self.state.ensure_created()
                        if self.state.read(gid, tid, p) is None:
                            await self.state.write(gid, tid, p, group.epoch, -1, -1)
                except Exception as e:     # noqa: BLE001 - the next heartbeat tries again
                    log.warning("share partition %s %s-%d not initialized: %r", gid, name, p, e)
                    continue
                have.add(p)
            if have:
                group.initialized[tid] = (name, tuple(sorted(have)))

    async def _share_partition(self, group: str, tid: uuid.UUID, topic: str | None, p: int,
                               create: bool = True) -> SharePartition:
        """The share partition, from memory or ``__share_group_state``; a new one only with
        ``create`` (an assignment or AlterShareGroupOffsets), as in Kafka, where ShareFetch and
        ShareAcknowledge never create share-partition state (_PartitionError otherwise)."""
        key = (group, tid, p)
        sp = self.partitions.get(key)
        if sp is not None:
            return sp
        await self.state.ensure_created()
        snap = self.state.read(group, tid, p)
        if snap is not None and snap["start"] >= 0:
            sp = self._new_partition(group, snap["start"], snap["state_epoch"], snap["batches"])
        elif snap is None and not create:
            raise _PartitionError(E.UNKNOWN_SERVER_ERROR, "Read operation on uninitialized share partition "
                                                          "not allowed.")
        else:       # new, or initialized by a heartbeat with start -1: its start is found now
            part = self.broker.replicas.get(topic, p) if topic is not None else None
            if part is None or part.log is None:
                raise _PartitionError(E.UNKNOWN_TOPIC_OR_PARTITION)
            sp = self._new_partition(group, self._initial_offset(group, part),
                                     snap["state_epoch"] if snap is not None else 0)
        if key in self.partitions:             # another request got there during the read
            return self.partitions[key]
        self.partitions[key] = sp
        if snap is None or snap["start"] < 0:
            await self._persist(group, tid, p, sp)
        return sp

    def _initial_offset(self, group: str, part) -> int:
        reset = str(self._group_config(group, "share.auto.offset.reset", None, "latest")).strip()
        lg = part.log
        if reset.lower() == "earliest":
            return lg.log_start_offset
        if reset.lower().startswith("by_duration:"):
            ms = parse_duration_ms(reset.split(":", 1)[1])
            if ms is not None:
                found = lg.offset_for_timestamp(_now_ms() - ms)
                return found[1] if found is not None else part.high_watermark
        return part.high_watermark

    async def _remove_member(self, group: ShareGroup, member_id: str) -> None:
        group.members.pop(member_id, None)
        group.epoch += 1
        # As in Kafka, leaving the group releases nothing by itself: the member's share session
        # ends with its last ShareFetch or ShareAcknowledge (epoch -1) or when its connection
        # closes, and whatever it still holds is released then (or when the locks run out).
        if not group.members:
            group.assignment_epoch = group.epoch
            group.topics_seen = {}
            group.metadata_hash = EMPTY_HASH

    async def _close_session(self, group: str, member_id: str) -> None:
        s = self.sessions.pop((group, member_id), None)
        if s is not None:
            await self._release_member(group, member_id, s.partitions)

    async def _release_member(self, group: str, member_id: str, partitions) -> None:
        """Release what ``member_id`` holds in ``partitions`` ((topic id, partition) keys: the
        partitions of its share session, as Kafka releases a closing session's)."""
        changed = []
        for tid, p in list(partitions):
            sp = self.partitions.get((group, tid, p))
            if sp is not None and sp.release_member(member_id):
                changed.append((tid, p, sp))
        for tid, p, sp in changed:
            await self._persist_quietly(group, tid, p, sp)
        if changed:
            self.wake()

    def describe(self, group_id: str):
        err = self._coordinator_error(group_id)
        if err:
            return err, None, None
        group = self.groups.get(group_id)
        if group is None:
            if self._other_group_type(group_id) is not None:
                return E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
            if group_id in self._persisted_groups():
                return E.NONE, None, ShareGroup(group_id)
            return E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        return E.NONE, None, group

    def _persisted_groups(self) -> set:
        if self.broker.controller.topic("__share_group_state") is None:
            return set()
        return self.state.groups()

    def has_group(self, group_id: str) -> bool:
        """Asked by the group coordinator for every join and offset commit: no copies."""
        if group_id in self.groups:
            return True
        return self.broker.controller.topic("__share_group_state") is not None and self.state.has_group(group_id)

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group coordinated here."""
        out = {gid: g.state for gid, g in self.groups.items()}
        for gid in self._persisted_groups():
            out.setdefault(gid, "Empty")
        coord = self.broker.groups
        return sorted((g, s) for g, s in out.items()
                      if coord is None or coord._owns(coord.partition_for(g)))

    # ------------------------------------------------------------------ membership records
    @staticmethod
    def _records(group: ShareGroup) -> tuple[list, dict]:
        """The records that take ``__consumer_offsets`` from ``group.persisted`` to the group as
        it is now (in Kafka's order: members gone, member metadata, group epoch, targets, target
        epoch, current assignments, then the initialized share partitions), and the snapshot
        they leave."""
        gid = group.group_id
        old = group.persisted or {"epoch": None, "assignment_epoch": None, "members": {}}
        snaps = {mid: (SR.MemberMetadata(m.rack_id, m.client_id, m.client_host, m.subscribed), _frozen(m.assigned),
                       (m.epoch, m.previous_epoch, _frozen(m.current)))
                 for mid, m in group.members.items()}
        changed = {mid: old["members"].get(mid) or (None, None, None) for mid in sorted(snaps)}
        recs = [(SR.key(k, gid, mid), None) for mid in sorted(set(old["members"]) - set(snaps)) for k in SR.MEMBER_KINDS]
        recs += [(SR.key(SR.MEMBER_METADATA, gid, mid), SR.member_metadata_value(snaps[mid][0]))
                 for mid, o in changed.items() if o[0] != snaps[mid][0]]
        epoch = (group.epoch, group.metadata_hash)
        if epoch != old["epoch"]:
            recs.append((SR.key(SR.GROUP_METADATA, gid), SR.group_metadata_value(*epoch)))
        recs += [(SR.key(SR.TARGET_MEMBER, gid, mid), target_member_value(group.members[mid].assigned))
                 for mid, o in changed.items() if o[1] != snaps[mid][1]]
        if group.assignment_epoch != old["assignment_epoch"]:
            recs.append((SR.key(SR.TARGET_METADATA, gid), epoch_value(group.assignment_epoch)))
        for mid, o in changed.items():
            if o[2] != snaps[mid][2]:
                m = group.members[mid]
                recs.append((SR.key(SR.CURRENT_ASSIGNMENT, gid, mid), SR.current_assignment_value(
                    SR.CurrentAssignment(m.epoch, m.previous_epoch, m.current))))
        init = _frozen({t: ps for t, (_, ps) in group.initialized.items()})
        if init != old.get("init", ()):
            recs.append((SR.key(SR.STATE_PARTITION_METADATA, gid), SR.state_partition_metadata_value(group.initialized)))
        return recs, {"epoch": epoch, "assignment_epoch": group.assignment_epoch, "members": snaps, "init": init}

    async def _write_group(self, group: ShareGroup) -> int:
        """Write what changed in ``group``'s membership to ``__consumer_offsets``; the error a
        member should see (0 if all is written)."""
        coord = self.broker.groups
        if coord is None:
            return E.COORDINATOR_NOT_AVAILABLE
        async with group.write_lock:
            recs, snap = self._records(group)
            if not recs:
                return E.NONE
            err = await coord.append_records(group.group_id, recs)
            if err:
                return coord._modern_write_error(err)
            group.persisted = snap
            return E.NONE

    async def _write_quietly(self, group: ShareGroup) -> None:
        err = await self._write_group(group)
        if err:
            log.warning("could not write share group %s to __consumer_offsets: error %d (written with its next "
                        "change)", group.group_id, err)

    def load_groups(self, data: dict) -> None:
        """The share groups read from a partition of ``__consumer_offsets`` ({group id: {"epoch",
        "assignment_epoch", "members": {member id: {record type: value}}}}: the last value of
        each key).  Every member's session starts again now, as in Kafka."""
        now = _now_ms()
        for gid, d in data.items():
            if d.get("epoch") is None:
                continue
            epoch, digest = d["epoch"]
            group = ShareGroup(gid, epoch=epoch, assignment_epoch=d.get("assignment_epoch") or 0,
                               metadata_hash=digest)
            for tid, name, parts in (d.get("metadata") or {}).get("initialized", ()):
                group.initialized[tid] = (name, tuple(sorted(parts)))
            session_ms = self._group_config(gid, "share.session.timeout.ms", "group.share.session.timeout.ms")
            for mid, recs in sorted(d["members"].items()):
                meta = recs.get(SR.MEMBER_METADATA)
                if meta is None:
                    continue
                current = recs.get(SR.CURRENT_ASSIGNMENT) or SR.CurrentAssignment(0, -1, {})
                group.members[mid] = ShareMember(
                    mid, meta.rack_id, meta.client_id, meta.client_host, tuple(sorted(set(meta.subscribed))),
                    epoch=current.epoch, previous_epoch=current.previous_epoch,
                    assigned=_lists(recs.get(SR.TARGET_MEMBER) or {}), current=_lists(current.assigned),
                    deadline_ms=now + session_ms)
            group.persisted = self._records(group)[1]
            self.groups[gid] = group
            log.info("loaded share group %s (epoch %d) with %d members", gid, epoch, len(group.members))

    def unload_groups(self, belongs) -> None:
        """Forget the groups for which ``belongs(group id)`` holds (their partition of
        ``__consumer_offsets`` moved away)."""
        for gid in [g for g in self.groups if belongs(g)]:
            del self.groups[gid]

    # ------------------------------------------------------------------ fetch and acknowledge
    def _session_for(self, group: str, member: str, epoch: int, now: int, connection=None):
        """(error, session) for a request of share session epoch ``epoch``.  Epoch 0 replaces
        the member's session, if any, without releasing what it holds."""
        key = (group, member)
        if epoch == INITIAL_EPOCH:
            s = self.sessions.pop(key, None)
            if len(self.sessions) >= self.cfg.get("group.share.max.share.sessions"):
                return E.SHARE_SESSION_LIMIT_REACHED, None
            s = ShareSession(group, member, connection)
            s.last_used_ms = now
            self.sessions[key] = s
            return E.NONE, s
        s = self.sessions.get(key)
        if s is None:
            return E.SHARE_SESSION_NOT_FOUND, None
        if epoch == FINAL_EPOCH:
            return E.NONE, s
        if epoch != s.epoch:
            return E.INVALID_SHARE_SESSION_EPOCH, None
        s.epoch = _next_epoch(s.epoch)
        s.last_used_ms = now
        return E.NONE, s

    def connection_closed(self, connection) -> None:
        """A client connection closed: the share sessions it opened end, and the records their
        members hold are released."""
        closed = [self.sessions.pop(k) for k, s in list(self.sessions.items()) if s.connection is connection]
        if closed:
            asyncio.ensure_future(self._release_all(closed))

    async def _release_all(self, sessions) -> None:
        for s in sessions:
            await self._release_member(s.group, s.member, s.partitions)

    def topic_name(self, tid: uuid.UUID) -> str | None:
        info = self.broker.controller.topic_by_id(tid)
        return info.name if info is not None else None

    async def acknowledge(self, group: str, member: str, acks: list, now: int, renew: bool = False) -> dict:
        """Apply [(topic id, partition, [(first, last, types)])]; {(topic id, partition): (error,
        message)} for each partition named.  ``renew``: the request may renew locks (type 4,
        ShareFetch/ShareAcknowledge v2 with IsRenewAck)."""
        out = {}
        for tid, p, batches in acks:
            try:
                _check_batches(batches, renew)   # malformed batches first, as Kafka's KafkaApis
            except InvalidRequest as e:
                out[(tid, p)] = (E.INVALID_REQUEST, str(e))
                continue
            name = self.topic_name(tid)
            if name is None:
                out[(tid, p)] = (E.UNKNOWN_TOPIC_ID, None)
                continue
            sp = self.partitions.get((group, tid, p))
            if sp is None:
                try:
                    sp = await self._share_partition(group, tid, name, p, create=False)
                except _PartitionError:
                    out[(tid, p)] = (E.UNKNOWN_TOPIC_OR_PARTITION, None)    # not loaded here
                    continue
                except Exception as e:      # noqa: BLE001
                    out[(tid, p)] = (code_for_exception(e), str(e))
                    continue
            if sp.expire_locks(now):
                self._expired.add((group, tid, p))
            code, message = E.NONE, None
            try:
                sp.acknowledge_all(member, [(a, z, list(t)) for a, z, t in batches], now)
            except InvalidRecordState as e:
                code, message = E.INVALID_RECORD_STATE, str(e)
            except InvalidRequest as e:
                code, message = E.INVALID_REQUEST, str(e)
            if code == E.NONE:
                try:
                    await self._persist(group, tid, p, sp)
                except Exception as e:      # noqa: BLE001
                    code, message = code_for_exception(e), str(e)
            out[(tid, p)] = (code, message)
        if out:
            self.wake()
        return out

    def acquire(self, group: str, member: str, tid: uuid.UUID, topic: str, p: int, sp: SharePartition,
                max_records: int, max_bytes: int, now: int, batch_size: int = 0, record_limit: bool = False):
        """(error, records as a file region, [(first, last, delivery count)]) for one partition."""
        part = self.broker.replicas.get(topic, p)
        if part is None or part.log is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, None, []
        if not part.is_leader:
            return E.NOT_LEADER_OR_FOLLOWER, None, []
        lg = part.log
        if sp.expire_locks(now):
            self._expired.add((group, tid, p))
        if lg.log_start_offset > sp.start:
            sp.move_start(lg.log_start_offset)
        committed = str(self._group_config(group, "share.isolation.level", None,
                                           "read_uncommitted")).lower() == "read_committed"
        limit = lg.last_stable_offset() if committed else part.high_watermark
        offset = sp.next_fetch_offset()
        if offset >= limit or max_records <= 0:
            return E.NONE, None, []
        try:
            data = lg.read(offset, max(max_bytes, 1), max_offset=limit, min_one_message=True, whole_first=True)
        except OffsetOutOfRangeError:
            sp.move_start(lg.log_start_offset)
            return E.NONE, None, []
        if not data.regions:
            return E.NONE, None, []
        # the batch headers alone, read from the file (Log.read answers from one segment: one
        # region); the records go out as a file region with sendfile, as Fetch sends them
        region = data.regions[0]
        headers = list(walk_headers(region.fd, region.position, region.position + region.length))
        skip = _aborted_batches(lg, headers, offset, limit) if committed else set()
        runs = sp.acquire(member, [(h.base_offset, h.last_offset, h.is_control or h.base_offset in skip)
                                   for h in headers], now, max_records, batch_size, record_limit)
        if not runs:
            return E.NONE, None, []
        lo, hi = runs[0][0], runs[-1][1]
        start = end = None
        for h in headers:
            if h.last_offset >= lo and start is None:
                start = h.pos
            if h.base_offset <= hi:
                end = h.pos + h.size
        return E.NONE, FileRegion(region.fd, start, end - start), runs

    def readable_bytes(self, session: ShareSession, enough: int) -> int:
        """The bytes a fetch of ``session`` could read from its partitions' next fetch offsets to
        their high watermarks (last stable offsets in a read_committed group), counted up to
        ``enough``; Kafka's measure for MinBytes, which counts records others hold as well."""
        committed = str(self._group_config(session.group, "share.isolation.level", None,
                                           "read_uncommitted")).lower() == "read_committed"
        total = 0
        for (tid, p), name in session.partitions.items():
            part = self.broker.replicas.get(name, p) if name is not None else None
            if part is None or part.log is None or not part.is_leader:
                continue
            sp = self.partitions.get((session.group, tid, p))
            if sp is None:              # not read from __share_group_state yet: the fetch does that
                return enough
            limit = part.log.last_stable_offset() if committed else part.high_watermark
            try:
                total += part.log.read(sp.next_fetch_offset(), enough - total, max_offset=limit).length
            except OffsetOutOfRangeError:
                continue
            if total >= enough:
                break
        return total

    async def _persist(self, group: str, tid: uuid.UUID, p: int, sp: SharePartition) -> None:
        await self.state.write(group, tid, p, sp.state_epoch, -1, sp.start, sp.state_batches())

    async def _persist_quietly(self, group, tid, p, sp) -> None:
        try:
            await self._persist(group, tid, p, sp)
        except Exception as e:      # noqa: BLE001 - what it changed is redelivered at worst
            log.warning("could not write the share state of %s %s-%d: %r", group, tid, p, e)

    # ------------------------------------------------------------------ waiting
    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(LOCK_TICK_S)
            try:
                await self._tick(_now_ms())
            except asyncio.CancelledError:
                raise
            except Exception:      # noqa: BLE001
                log.exception("share coordinator tick failed")

    async def _tick(self, now: int) -> None:
        for group in list(self.groups.values()):
            gone = False
            for mid, m in list(group.members.items()):
                if m.deadline_ms and m.deadline_ms < now:
                    log.info("share group %s: member %s left (session timed out)", group.group_id, mid)
                    await self._remove_member(group, mid)
                    gone = True
            if gone:
                await self._write_quietly(group)
        expired, self._expired = self._expired, set()
        for key, sp in list(self.partitions.items()):
            d = sp.next_deadline()
            if d is not None and d <= now and sp.expire_locks(now):
                expired.add(key)
        for key in sorted(expired, key=lambda k: (k[0], str(k[1]), k[2])):
            sp = self.partitions.get(key)
            if sp is not None:
                await self._persist_quietly(*key, sp)
        if expired:
            self.wake()

    # ------------------------------------------------------------------ offsets (admin)
    def start_offsets(self, group_id: str) -> dict:
        """{(topic id, partition): (start offset, records done inside the window)} of every share
        partition of the group, from memory or ``__share_group_state``."""
        out = {}
        for key in (self.state.keys_of(group_id) if group_id in self._persisted_groups() else ()):
            snap = self.state.read(*key)
            if snap is not None:
                done = sum(b[1] - b[0] + 1 for b in snap["batches"] if b[2] in (2, 4))
                out[(key[1], key[2])] = (snap["start"], done)
        for (g, tid, p), sp in self.partitions.items():
            if g == group_id:
                done = sum(b[1] - b[0] + 1 for b in sp.state_batches() if b[2] in (2, 4))
                out[(tid, p)] = (sp.start, done)
        return out

    async def alter_start_offsets(self, group_id: str, offsets: dict) -> dict:
        """Set the start offsets {(topic id, partition): offset} of an empty group's share
        partitions: nothing is in flight afterwards.  {(topic id, partition): (error, message)}."""
        out = {}
        if group_id not in self.groups:         # created empty, as Kafka does
            await self._write_quietly(self.groups.setdefault(group_id, ShareGroup(group_id)))
        for (tid, p), offset in offsets.items():
            name = self.topic_name(tid)
            part = self.broker.replicas.get(name, p) if name is not None else None
            if part is None or part.log is None:
                out[(tid, p)] = (E.UNKNOWN_TOPIC_OR_PARTITION, None)
                continue
            if offset == -1:                    # Kafka: start again by share.auto.offset.reset
                offset = self._initial_offset(group_id, part)
            try:
                sp = await self._share_partition(group_id, tid, name, p)
                sp.reset(offset)
                sp.state_epoch += 1
                await self._persist(group_id, tid, p, sp)
                out[(tid, p)] = (E.NONE, None)
            except Exception as e:      # noqa: BLE001
                out[(tid, p)] = (code_for_exception(e), str(e))
        g = self.groups[group_id]       # as Kafka, the partitions set are initialized (record 15)
        for (tid, p), (code, _) in out.items():
            if code == E.NONE:
                name, have = g.initialized.get(tid, (self.topic_name(tid), ()))
                g.initialized[tid] = (name, tuple(sorted(set(have) | {p})))
        await self._write_quietly(g)
        return out

    async def delete_start_offsets(self, group_id: str, tids) -> None:
        """Forget the share partitions of these topics: the group starts over on them by its
        ``share.auto.offset.reset``."""
        tids = set(tids)
        keys = {k for k in self.partitions if k[0] == group_id and k[1] in tids}
        if group_id in self._persisted_groups():
            keys |= {k for k in self.state.keys_of(group_id) if k[1] in tids}
        for k in sorted(keys, key=lambda k: (str(k[1]), k[2])):
            self.partitions.pop(k, None)
            await self.state.write(k[0], k[1], k[2], 0, -1, None)
        g = self.groups.get(group_id)
        if g is not None:
            for t in tids:
                g.initialized.pop(t, None)
            g.epoch += 1            # members, if any later, get the deleted partitions afresh
            await self._write_quietly(g)

    # ------------------------------------------------------------------ deletion
    async def on_topics_deleted(self, tids) -> None:
        """Forget deleted topics as Kafka 4.2 does: a tombstone for every share partition of
        theirs in ``__share_group_state`` (its share coordinator), and each group's initialized
        partitions (record 15) without them (its group coordinator; the group epoch stays)."""
        tids = set(tids)
        if not tids or not self.enabled():
            return
        keys = {k for k in self.partitions if k[1] in tids}
        try:
            if self.broker.controller.topic(STATE_TOPIC) is not None:
                keys |= set(self.state.keys_of_topics(tids))
        except Exception as e:     # noqa: BLE001 - the partitions in memory are still forgotten
            log.warning("share state of deleted topics not read: %r", e)
        for k in sorted(keys, key=lambda k: (k[0], str(k[1]), k[2])):
            self.partitions.pop(k, None)
            try:
                await self.state.write(k[0], k[1], k[2], 0, -1, None)
            except Exception as e:     # noqa: BLE001
                log.warning("share state of %s %s-%d (a deleted topic) not removed: %r", k[0], k[1], k[2], e)
        for group in list(self.groups.values()):
            if tids & set(group.initialized):
                for tid in tids:
                    group.initialized.pop(tid, None)
                await self._write_quietly(group)
        if keys:
            log.info("forgot %d share partitions of %d deleted topics", len(keys), len(tids))

    async def delete_group(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is not None and group.members:
            return E.NON_EMPTY_GROUP
        keys = [k for k in self.partitions if k[0] == group_id]
        persisted = self.state.keys_of(group_id) if group_id in self._persisted_groups() else []
        if group is not None and group.persisted is not None:
            async with group.write_lock:
                # Kafka's order: current assignments, targets, target epoch, subscriptions, the
                # initialized partitions (record 15), the group epoch
                mids = sorted(group.persisted["members"])
                recs = [(SR.key(SR.CURRENT_ASSIGNMENT, group_id, mid), None) for mid in mids]
                recs += [(SR.key(SR.TARGET_MEMBER, group_id, mid), None) for mid in mids]
                recs.append((SR.key(SR.TARGET_METADATA, group_id), None))
                recs += [(SR.key(SR.MEMBER_METADATA, group_id, mid), None) for mid in mids]
                recs += [(SR.key(SR.STATE_PARTITION_METADATA, group_id), None), (SR.key(SR.GROUP_METADATA, group_id), None)]
                err = await self.broker.groups.append_records(group_id, recs)
                if err:
                    return self.broker.groups._modern_write_error(err)
                group.persisted = None
        for k in set(keys) | set(persisted):
            self.partitions.pop(k, None)
            await self.state.write(k[0], k[1], k[2], 0, -1, None)
        self.groups.pop(group_id, None)
        return E.NONE


class _PartitionError(Exception):
    def __init__(self, code: int, message: str | None = None):
        super().__init__(message or E(code).name)
        self.code = code
        self.message = message


def _aborted_batches(lg, headers, start: int, end: int) -> set:
    """Base offsets of the batches among ``headers`` that belong to aborted transactions
    (read_committed share groups archive them, as Kafka does, instead of delivering them)."""
    aborted = sorted(lg.aborted_transactions(start, end), key=lambda t: t[1])
    if not aborted:
        return set()
    out, open_, i = set(), set(), 0
    for h in headers:
        while i < len(aborted) and aborted[i][1] <= h.base_offset:
            open_.add(aborted[i][0])
            i += 1
        if h.is_control:
            open_.discard(h.producer_id)
        elif h.is_transactional and h.producer_id in open_:
            out.add(h.base_offset)
    return out


def _check_batches(batches, renew: bool = False) -> None:
    """Kafka's validateAcknowledgementBatches: ranges of offsets (first >= 0, last >= first) in
    order (a batch may start where the last one ended: the state check refuses that offset
    then), one type or one per offset, types up to REJECT (3) or, in a renew request, RENEW (4)."""
    prev = None
    top = RENEW if renew else REJECT
    for first, last, types in batches:
        if first < 0 or last < first or (prev is not None and first < prev):
            raise InvalidRequest("acknowledgement batches must be ranges of offsets in order")
        if not types or (len(types) != 1 and len(types) != last - first + 1):
            raise InvalidRequest("acknowledge types must be one, or one per offset")
        if any(not 0 <= t <= top for t in types):
            raise InvalidRequest(f"unknown acknowledge type in {list(types)}")
        prev = last


def _frozen(assignment: dict) -> tuple:
    return tuple(sorted((str(t), tuple(sorted(ps))) for t, ps in assignment.items() if ps))


def _lists(assignment: dict) -> dict:
    return {t: sorted(ps) for t, ps in assignment.items() if ps}


def _now_ms() -> int:
    return int(time.time() * 1000)

"""The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat, ConsumerGroupDescribe): mixin of
GroupCoordinator.

How it works
------------
A group that a member joins with ``ConsumerGroupHeartbeat`` is a ``Group`` (the same object that
holds committed offsets) with ``group.modern`` set to a ``ModernGroup``.  There is no JoinGroup /
SyncGroup round: the coordinator assigns partitions itself.

* **Group epoch.** Bumped when a member joins, leaves or is fenced, when a subscription changes
  and when the partition count or id of a subscribed topic changes (checked on every heartbeat).
* **Target assignment.** When the group epoch is ahead of the assignment epoch, the group's
  assignor (``assignors.py``; the one most members name in ``ServerAssignor``, else the first of
  ``group.consumer.assignors``) computes a new target for every member, at the group epoch.
* **Reconciliation** (``_reconcile``, Kafka's current-assignment builder).  Each member moves
  towards its target one heartbeat at a time.  Partitions it must give up are first revoked: it
  keeps its epoch and state ``unrevoked_partitions`` until a heartbeat reports it no longer owns
  them (or its rebalance timeout passes and it is fenced).  Partitions it gains are handed over
  only once no other member still owns them (``owners``: partition -> epoch of its holder);
  until then it is ``unreleased_partitions``, at the target epoch.
* **Liveness.** Every heartbeat re-arms the member's session timer
  (``group.consumer.session.timeout.ms``); when it fires the member is fenced (removed, epoch
  bump).  ``MemberEpoch -1`` leaves; ``-2`` is a static member's temporary leave: it keeps its
  partitions until it rejoins with the same instance id or its session times out.
* **Fencing.** A heartbeat must carry the member's epoch.  An older epoch is accepted only if it
  is the member's previous epoch and the reported partitions are a subset of its assignment (the
  member missed the last response); anything else is FENCED_MEMBER_EPOCH, and the client rejoins.

The group state reported by ListGroups and ConsumerGroupDescribe is Empty (no members),
Assigning (group epoch ahead of the target), Reconciling (a member not yet stable at the target
epoch) or Stable.

Persistence: every change is written to ``__consumer_offsets`` as Kafka's records
(``modern_records.py``: group epoch, subscription metadata, member metadata, target assignment
and its epoch, current assignment; tombstones when a member goes or the group is deleted) before
the heartbeat is answered.  What to write is the difference between the group now and
``ModernGroup.persisted``, the state the log holds.  A coordinator that becomes leader of the
partition rebuilds the groups from those records and starts their members' session timers, so
members go on at their epochs after a restart or a coordinator move.

A non-empty classic group is not converted online (Kafka's migration); an empty one is.
"""
from __future__ import annotations

import logging
import re
import uuid
from collections import Counter

from protocol.errors import ErrorCode as E

from broker.group import modern_records as MR
from broker.group import records as R
from broker.group.assignors import ASSIGNORS, assignor_name
from broker.group.group import DEAD, EMPTY, Group
from controller.api import is_internal_topic

log = logging.getLogger("odradek.group")

CONSUMER = "consumer"
ASSIGNING, RECONCILING, MODERN_STABLE = "Assigning", "Reconciling", "Stable"
# member states (Kafka's MemberState)
M_STABLE, M_UNREVOKED, M_UNRELEASED, M_UNKNOWN = "stable", "unrevoked_partitions", "unreleased_partitions", "unknown"
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2



def partition_racks(info, racks_of: dict) -> tuple:
    """((partition, (rack, ...)), ...) for the partitions of ``info`` whose replicas' brokers have
    racks, as Kafka 3.9 records them in a group's subscription metadata (a rack moving changes
    the metadata, and so bumps the group epoch)."""
    if not racks_of:
        return ()
    out = []
    for p in sorted(info.partitions):
        racks = sorted({racks_of[b] for b in getattr(info.partitions[p], "replicas", ()) or () if racks_of.get(b)})
        if racks:
            out.append((p, tuple(racks)))
    return tuple(out)

class HeartbeatError(Exception):
    def __init__(self, code: int, message: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message


class ModernMember:
    __slots__ = ("member_id", "instance_id", "rack_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "subscribed", "regex", "server_assignor", "state", "epoch", "previous_epoch", "assigned", "revoking",
                 "classic", "session_timer", "rebalance_timer", "join_timer", "sync_timer")

    def __init__(self, member_id: str):
        self.member_id = member_id
        self.instance_id: str | None = None
        self.rack_id: str | None = None
        self.client_id = ""
        self.client_host = ""
        self.rebalance_timeout_ms = -1
        self.subscribed: tuple[str, ...] = ()
        self.regex: str | None = None         # SubscribedTopicRegex (v1), matched against whole names
        self.server_assignor: str | None = None
        self.state = M_STABLE
        self.epoch = 0
        self.previous_epoch = -1
        self.assigned: dict = {}      # topic id -> set of partitions the member may use
        self.revoking: dict = {}      # topic id -> partitions it must give up first
        # a member that speaks JoinGroup/SyncGroup/Heartbeat (online migration, migration.py):
        # (session timeout ms, ((protocol name, metadata), ...)) as it last joined; None otherwise
        self.classic: tuple | None = None
        self.session_timer = None
        self.rebalance_timer = None
        self.join_timer = None        # classic members: rejoin within the rebalance timeout
        self.sync_timer = None        # classic members: SyncGroup within the rebalance timeout

    def cancel_timers(self) -> None:
        for h in (self.session_timer, self.rebalance_timer, self.join_timer, self.sync_timer):
            if h is not None:
                h.cancel()
        self.session_timer = self.rebalance_timer = self.join_timer = self.sync_timer = None


class ModernGroup:
    """The KIP-848 state of one group."""
    kind = CONSUMER

    def __init__(self):
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ModernMember] = {}
        self.static: dict[str, str] = {}          # instance id -> member id
        self.target: dict[str, dict] = {}         # member id -> {topic id: set}
        self.owners: dict[tuple, int] = {}        # (topic id, partition) -> epoch of the holder
        self.metadata: dict[str, tuple] = {}      # subscribed topic -> (topic id, partitions)
        self.assignor = ""
        self.regex_matches: dict[str, frozenset] = {}   # regex -> topic names it matches now
        self.persisted: dict | None = None       # _snapshot() of what the log holds (None: nothing)
        self.dirty: dict[str, int] = {}          # member id -> changes not yet written (see touch)
        self.classic_record = False              # a classic GroupMetadata record to delete

    def touch(self, member_id: str) -> None:
        """Mark a member whose records (metadata, target, current assignment) may have changed,
        or that is gone; the next write compares only marked members."""
        self.dirty[member_id] = self.dirty.get(member_id, 0) + 1

    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        for m in self.members.values():
            if m.state != M_STABLE or m.epoch != self.assignment_epoch:
                return RECONCILING
        return MODERN_STABLE

    def subscribed_topics(self) -> set[str]:
        """Every topic some member subscribes to (by name or through its regex)."""
        out: set[str] = set()
        for m in self.members.values():
            out.update(self.topics_of(m))
        return out

    def topics_of(self, member: ModernMember) -> set[str]:
        out = set(member.subscribed)
        if member.regex is not None:
            out.update(self.regex_matches.get(member.regex, ()))
        return out

    # partition -> holder epoch, kept in step with every member change
    def release(self, member: ModernMember) -> None:
        for parts in (member.assigned, member.revoking):
            for tid, ps in parts.items():
                for p in ps:
                    self.owners.pop((tid, p), None)

    def hold(self, member: ModernMember) -> None:
        for parts in (member.assigned, member.revoking):
            for tid, ps in parts.items():
                for p in ps:
                    self.owners[(tid, p)] = member.epoch


def _as_assignment(topic_partitions) -> dict:
    out: dict = {}
    for tp in topic_partitions or ():
        if tp.partitions:
            out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return out


def _is_subset(owned, assigned: dict) -> bool:
    for tp in owned:
        have = assigned.get(tp.topic_id, ())
        if any(p not in have for p in tp.partitions):
            return False
    return True


def _owns_any(owned, partitions: dict) -> bool:
    """Whether the partitions a heartbeat reports include any of ``partitions`` (no report: yes)."""
    if owned is None:
        return True
    for tp in owned:
        pending = partitions.get(tp.topic_id)
        if pending and any(p in pending for p in tp.partitions):
            return True
    return False


def _blank(s: str | None) -> bool:
    return s is not None and s.strip() == ""


class ConsumerProtocolMixin:
    consumer_rebalances = 0         # group epoch bumps, for the metrics
    # ------------------------------------------------------------------ configuration
    def consumer_protocol_enabled(self) -> bool:
        return CONSUMER in self._cfg("group.coordinator.rebalance.protocols")

    def _assignors(self) -> list[str]:
        return [n for n in (assignor_name(a) for a in self._cfg("group.consumer.assignors")) if n]

    # ------------------------------------------------------------------ ConsumerGroupHeartbeat
    async def consumer_group_heartbeat(self, **kw) -> dict:
        """Returns {error, message, member_id, member_epoch, heartbeat_interval_ms, assignment}
        where assignment is None or {topic id: set(partition)}.  The answer goes out once the
        records of what changed are in ``__consumer_offsets`` (as Kafka answers after its write)."""
        out = self._heartbeat(**kw)
        if out["error"] == E.NONE:
            group = self.groups.get(kw["group_id"])
            err = await self._persist_modern(group) if group is not None else E.NONE
            if err:
                out.update(error=err, message=None, member_id=None, member_epoch=0, heartbeat_interval_ms=0,
                           assignment=None)
        return out

    def _heartbeat(self, *, group_id: str, member_id: str, member_epoch: int,
                   instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                   subscribed: list[str] | None, server_assignor: str | None, owned,
                   client_id: str = "", client_host: str = "", regex: str | None = None,
                   api_version: int = 0) -> dict:
        interval = self._group_cfg(group_id, "consumer.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms")
        out = {"error": E.NONE, "message": None, "member_id": member_id or None, "member_epoch": member_epoch,
               "heartbeat_interval_ms": 0, "assignment": None}
        try:
            self._validate_heartbeat(group_id, member_id, member_epoch, instance_id, rack_id,
                                     rebalance_timeout_ms, subscribed, server_assignor, owned, regex, api_version)
            err = self._validate_group_status(group_id, "heartbeat")
            if err:
                raise HeartbeatError(err)
            if self.is_share_group(group_id):
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                mid, epoch = self._modern_leave(group_id, member_id, member_epoch, instance_id)
                out.update(member_id=mid, member_epoch=epoch)
                return out
            member, assignment = self._modern_heartbeat(
                group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms, subscribed,
                server_assignor, owned, client_id, client_host, regex)
            out.update(member_id=member.member_id, member_epoch=member.epoch, heartbeat_interval_ms=interval,
                       assignment=assignment)
        except HeartbeatError as e:      # Kafka's error answer: only the code and the message
            out.update(error=e.code, message=e.message, member_id=None, member_epoch=0)
        return out

    def _validate_heartbeat(self, group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms,
                            subscribed, server_assignor, owned, regex=None, api_version=0) -> None:
        def bad(msg):
            raise HeartbeatError(E.INVALID_REQUEST, msg)
        if not self.consumer_protocol_enabled():
            raise HeartbeatError(E.UNSUPPORTED_VERSION,
                                 "The new consumer group protocol is not enabled (group.coordinator.rebalance.protocols).")
        if group_id is None or group_id.strip() == "":
            bad("GroupId can't be empty.")
        if _blank(instance_id):
            bad("InstanceId can't be empty.")
        if _blank(rack_id):
            bad("RackId can't be empty.")
        if member_epoch > 0 or member_epoch == LEAVE_EPOCH or (member_epoch == 0 and api_version >= 1):
            if not member_id or not member_id.strip():       # v1: the client makes its member id
                bad("MemberId can't be empty.")
        if member_epoch == 0:
            if rebalance_timeout_ms == -1:
                bad("RebalanceTimeoutMs must be provided in first request.")
            if owned is None or len(owned) != 0:
                bad("TopicPartitions must be empty when (re-)joining.")
            if not subscribed and not regex:
                bad("SubscribedTopicNames must be set in first request." if api_version < 1 else
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        if regex is not None:
            try:
                re.compile(regex)
            except re.error as e:
                raise HeartbeatError(E.INVALID_REGULAR_EXPRESSION,
                                     f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.")
        if member_epoch == STATIC_LEAVE_EPOCH:
            if not member_id or not member_id.strip():
                bad("MemberId can't be empty.")
            if instance_id is None:
                bad("InstanceId can't be null.")
        elif member_epoch < LEAVE_EPOCH:
            bad("MemberEpoch is invalid.")
        if server_assignor is not None and server_assignor not in self._assignors():
            raise HeartbeatError(E.UNSUPPORTED_ASSIGNOR,
                                 f"ServerAssignor {server_assignor} is not supported. Supported assignors: "
                                 f"{', '.join(self._assignors())}.")

    def _modern_group(self, group_id: str, create: bool, member_id: str | None = None,
                      instance_id: str | None = None) -> Group:
        group = self.groups.get(group_id)
        if group is not None and group.is_(DEAD):
            group = None
        if group is None:
            if not create:
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            group = self._add_group(Group(group_id, self.timers.now_ms()))
        if group.modern is not None and group.modern.kind != CONSUMER:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if group.modern is None:
            if create and group.is_(EMPTY):
                self._make_modern(group)
            elif create and self._can_upgrade(group):
                limit = self._cfg("group.consumer.max.size")
                # joins that Kafka would refuse after converting (discarding the conversion) are
                # refused before: the group stays classic
                if group.size >= limit:
                    raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum "
                                                                   f"capacity of {limit} members.")
                holder = group.current_static_member_id(instance_id) if instance_id is not None else None
                if holder is not None:
                    raise HeartbeatError(
                        E.UNRELEASED_INSTANCE_ID,
                        f"Static member {member_id or '<new>'} with instance id {instance_id} cannot join the group "
                        f"because the instance id is owned by {holder} member.")
                self._upgrade_to_consumer(group)      # online migration, migration.py
            else:
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return group

    def _make_modern(self, group: Group) -> None:
        """An empty classic group (offsets only) becomes a consumer-protocol group; offsets stay."""
        self._cancel_join_op(group)
        self._cancel_sync_op(group)
        had_record = group.generation_id > 0
        group.modern = ModernGroup()
        group.modern.classic_record = had_record     # its GroupMetadata record gets a tombstone
        group.protocol_type = CONSUMER
        group.protocol_name = None
        group.generation_id = 0
        group.leader_id = None
        if group.offsets:
            log.info("group %s now uses the consumer group protocol", group.group_id)

    def _make_classic(self, group: Group) -> None:
        """An empty consumer-protocol group joined with JoinGroup becomes a classic group (its
        consumer-protocol records get tombstones, written before anything the join writes)."""
        tombstones = self._modern_tombstones(group)
        if tombstones:
            self._spawn(self._append(group, tombstones))
        group.modern = None
        group.protocol_type = None
        group.subscribed = None
        group.state = EMPTY
        log.info("group %s now uses the classic group protocol", group.group_id)

    def _modern_heartbeat(self, group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms,
                          subscribed, server_assignor, owned, client_id, client_host, regex=None):
        group = self._modern_group(group_id, create=member_epoch == 0, member_id=member_id, instance_id=instance_id)
        mg: ModernGroup = group.modern
        member = self._modern_member(group, mg, member_id, member_epoch, instance_id, owned)
        before = {t: set(ps) for t, ps in member.assigned.items()}
        bump = False
        # the fields a heartbeat may change (null / -1: unchanged)
        if instance_id is not None:
            member.instance_id = instance_id
        if rack_id is not None:
            member.rack_id = rack_id
        if rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if server_assignor is not None:
            member.server_assignor = server_assignor
        member.client_id, member.client_host = client_id, client_host
        member.classic = None             # a heartbeat makes it a consumer-protocol member
        if subscribed is not None and tuple(sorted(set(subscribed))) != member.subscribed:
            member.subscribed = tuple(sorted(set(subscribed)))
            bump = True
        if regex is not None and regex != (member.regex or ""):
            member.regex = regex or None     # an empty regex clears it
            bump = True
        self._admit_and_retarget(mg, member, bump, group_id)
        self._reconcile(group, mg, member, owned)
        mg.touch(member.member_id)
        self._arm_session(group, member)
        self._sync_group_fields(group)
        full = member_epoch == 0 or (rebalance_timeout_ms != -1 and subscribed is not None and owned is not None)
        changed = before != member.assigned
        return member, (member.assigned if full or changed else None)

    def _admit_and_retarget(self, mg: ModernGroup, member: ModernMember, bump: bool, group_id: str,
                            how: str = "") -> None:
        """Add ``member`` if it is new; bump the group epoch if its subscription changed (``bump``)
        or the subscribed topics did; recompute the target if the group epoch is ahead of it."""
        if member.member_id not in mg.members:
            mg.members[member.member_id] = member
            if member.instance_id is not None:
                mg.static[member.instance_id] = member.member_id
            log.info("member %s joined consumer group %s%s (instance %s)", member.member_id, group_id, how,
                     member.instance_id)
        metadata = self._subscription_metadata(mg)
        if metadata != mg.metadata:
            mg.metadata = metadata
            bump = True
        if bump:
            mg.group_epoch += 1
            self.consumer_rebalances += 1
        if mg.group_epoch > mg.assignment_epoch:
            self._compute_target(mg)

    def _modern_member(self, group, mg: ModernGroup, member_id, member_epoch, instance_id, owned) -> ModernMember:
        if member_epoch == 0:
            if instance_id is not None and instance_id in mg.static:
                old = mg.members[mg.static[instance_id]]
                if old.epoch != STATIC_LEAVE_EPOCH:
                    raise HeartbeatError(
                        E.UNRELEASED_INSTANCE_ID,
                        f"Static member {member_id or '<new>'} with instance id {instance_id} cannot join the group "
                        f"because the instance id is owned by {old.member_id} member.")
                return self._replace_static(mg, old, member_id or _new_member_id())
            if member_id and member_id in mg.members:
                member = mg.members[member_id]
                self._check_epoch(member, member_epoch, owned)
                return member
            if len(mg.members) >= self._cfg("group.consumer.max.size"):
                raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED,
                                     f"The consumer group has reached its maximum capacity of "
                                     f"{self._cfg('group.consumer.max.size')} members.")
            return ModernMember(member_id or _new_member_id())
        member = self._known_member(mg, group.group_id, member_id, instance_id)
        self._check_epoch(member, member_epoch, owned)
        return member

    @staticmethod
    def _known_member(mg: ModernGroup, group_id: str, member_id: str, instance_id: str | None) -> ModernMember:
        """The member a heartbeat (epoch > 0) or a leave names; a static member's instance id must
        be held by that member id."""
        if instance_id is not None:
            holder = mg.static.get(instance_id)
            if holder is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if holder != member_id:
                raise HeartbeatError(E.FENCED_INSTANCE_ID,
                                     f"Static member {member_id} with instance id {instance_id} was fenced by "
                                     f"member {holder}.")
        member = mg.members.get(member_id)
        if member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        return member

    @staticmethod
    def _check_epoch(member: ModernMember, received: int, owned) -> None:
        if received > member.epoch:
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a greater member epoch ({received}) than the "
                                 f"one known by the group coordinator ({member.epoch}). The member must abandon "
                                 f"all its partitions and rejoin.")
        if received < member.epoch:
            if received != member.previous_epoch or owned is None or not _is_subset(owned, member.assigned):
                raise HeartbeatError(E.FENCED_MEMBER_EPOCH,
                                     f"The consumer group member has a smaller member epoch ({received}) than the "
                                     f"one known by the group coordinator ({member.epoch}). The member must "
                                     f"abandon all its partitions and rejoin.")

    def _replace_static(self, mg: ModernGroup, old: ModernMember, new_id: str) -> ModernMember:
        """A static member back after a temporary leave: the new member id takes over the old
        member's partitions and target."""
        old.cancel_timers()
        mg.release(old)
        del mg.members[old.member_id]
        new = ModernMember(new_id)
        for attr in ("instance_id", "rack_id", "rebalance_timeout_ms", "subscribed", "regex", "server_assignor",
                     "classic"):
            setattr(new, attr, getattr(old, attr))
        new.assigned = old.assigned
        new.epoch = new.previous_epoch = 0
        if old.member_id in mg.target:
            mg.target[new_id] = mg.target.pop(old.member_id)
        mg.members[new_id] = new
        mg.static[new.instance_id] = new_id
        mg.hold(new)
        mg.touch(old.member_id)
        mg.touch(new_id)
        log.info("static member %s of group with instance %s replaced by %s", old.member_id, new.instance_id, new_id)
        return new

    def _subscription_metadata(self, mg: ModernGroup) -> dict:
        regexes = {m.regex for m in mg.members.values() if m.regex is not None}
        mg.regex_matches = {}
        if regexes and self.topic_names is not None:
            names = [t for t in self.topic_names() if not is_internal_topic(t)]
            for rx in regexes:
                pattern = re.compile(rx)
                mg.regex_matches[rx] = frozenset(t for t in names if pattern.fullmatch(t))
        out = {}
        racks_of = self.broker_racks() if self.broker_racks is not None else {}
        for name in mg.subscribed_topics():
            info = self.topic_lookup(name) if self.topic_lookup is not None else None
            if info is not None:
                out[name] = (info.topic_id, len(info.partitions), partition_racks(info, racks_of))
        return out

    def _compute_target(self, mg: ModernGroup) -> None:
        names = self._assignors()
        votes = Counter(m.server_assignor for m in mg.members.values() if m.server_assignor in names)
        mg.assignor = votes.most_common(1)[0][0] if votes else names[0]
        subs = {mid: {mg.metadata[t][0] for t in mg.topics_of(m) if t in mg.metadata}
                for mid, m in mg.members.items()}
        topics = {meta[0]: meta[1] for meta in mg.metadata.values()}
        before = mg.target
        mg.target = ASSIGNORS[mg.assignor](subs, topics, mg.target)
        for mid in set(before) | set(mg.target):
            if before.get(mid) != mg.target.get(mid):
                mg.touch(mid)
        mg.assignment_epoch = mg.group_epoch
        log.info("consumer group target assignment at epoch %d computed by %s for %d members",
                 mg.assignment_epoch, mg.assignor, len(mg.members))

    def _reconcile(self, group: Group, mg: ModernGroup, member: ModernMember, owned) -> None:
        """Kafka's CurrentAssignmentBuilder: move ``member`` one step towards its target."""
        if member.epoch == STATIC_LEAVE_EPOCH:
            return
        target_epoch = mg.assignment_epoch
        if member.state == M_STABLE:
            if member.epoch == target_epoch:
                return self._after_reconcile(group, mg, member)
            nxt = self._next_assignment(mg, member, member.epoch, target_epoch, owned)
        elif member.state == M_UNREVOKED:
            if _owns_any(owned, member.revoking):
                return self._after_reconcile(group, mg, member)
            nxt = self._next_assignment(mg, member, member.epoch + 1, target_epoch, owned)
        elif member.state == M_UNKNOWN:        # read from a record with a state this version lacks
            if owned is None or len(owned):
                raise HeartbeatError(E.FENCED_MEMBER_EPOCH, "The consumer group member is in a unknown state. "
                                                            "The member must abandon all its partitions and rejoin.")
            nxt = self._next_assignment(mg, member, target_epoch, target_epoch, owned)
        else:
            nxt = self._next_assignment(mg, member, member.epoch, target_epoch, owned)
        if nxt != (member.state, member.epoch, member.assigned, member.revoking):
            state, epoch, assigned, revoking = nxt
            mg.release(member)
            member.previous_epoch, member.epoch = member.epoch, epoch
            member.state, member.assigned, member.revoking = state, assigned, revoking
            mg.hold(member)
            if member.rebalance_timer is not None:      # a new revocation gets a new timer
                member.rebalance_timer.cancel()
                member.rebalance_timer = None
        self._after_reconcile(group, mg, member)

    @staticmethod
    def _next_assignment(mg: ModernGroup, member: ModernMember, epoch: int, target_epoch: int, owned):
        target = mg.target.get(member.member_id, {})
        assigned: dict = {}
        revoking: dict = {}
        pending: dict = {}
        unreleased = False
        for tid in set(target) | set(member.assigned):
            want = target.get(tid, set())
            have = member.assigned.get(tid, set())
            keep = have & want
            gone = have - keep
            new = set()
            for p in want - keep:
                holder = mg.owners.get((tid, p))
                if holder is None:
                    new.add(p)
                else:
                    unreleased = True
            if keep:
                assigned[tid] = keep
            if gone:
                revoking[tid] = gone
            if new:
                pending[tid] = new
        if revoking and _owns_any(owned, revoking):
            return M_UNREVOKED, epoch, assigned, revoking
        for tid, ps in pending.items():
            assigned.setdefault(tid, set()).update(ps)
        return (M_UNRELEASED if unreleased else M_STABLE), target_epoch, assigned, {}

    def _after_reconcile(self, group: Group, mg: ModernGroup, member: ModernMember) -> None:
        """The rebalance timer runs while the member has partitions to revoke (a classic member
        has its join and sync timers instead, ``migration.py``)."""
        self._rebalance_timer(group, member, member.state == M_UNREVOKED and member.classic is None,
                              lambda: mg.members.get(member.member_id) is member and member.state == M_UNREVOKED,
                              lambda: self._fence(group, member), lambda: self._persist_modern(group), "partitions")

    def _rebalance_timer(self, group: Group, member, revoking: bool, still_revoking, fence, persist,
                         what: str) -> None:
        """Keep ``member``'s rebalance timer running while it has ``what`` to revoke (``revoking``,
        consumer and streams groups alike): if the member still has them (``still_revoking()``) at
        the same epoch when its rebalance timeout passes, it is fenced (``fence()``) and the group
        written (``persist()``)."""
        if not revoking:
            if member.rebalance_timer is not None:
                member.rebalance_timer.cancel()
                member.rebalance_timer = None
            return
        if member.rebalance_timer is not None:
            return
        epoch = member.epoch

        def expired():
            member.rebalance_timer = None
            if still_revoking() and member.epoch == epoch:
                log.info("member %s of group %s did not revoke its %s within %d ms; fenced", member.member_id,
                         group.group_id, what, member.rebalance_timeout_ms)
                fence()
                self._spawn(persist())
        member.rebalance_timer = self.timers.call_later(max(member.rebalance_timeout_ms, 0), expired)

    def _arm_session(self, group: Group, member: ModernMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()

        if member.classic is not None:      # a classic member keeps the session timeout it joined with
            timeout = member.classic[0]
        else:
            timeout = self._group_cfg(group.group_id, "consumer.session.timeout.ms",
                                      "group.consumer.session.timeout.ms")

        def expired():
            member.session_timer = None
            if group.modern is not None and group.modern.members.get(member.member_id) is member:
                log.info("member %s of group %s has not heartbeated within %d ms; fenced", member.member_id,
                         group.group_id, timeout)
                self._fence(group, member)
                self._spawn(self._persist_modern(group))
        member.session_timer = self.timers.call_later(timeout, expired)

    def _fence(self, group: Group, member: ModernMember) -> None:
        """Remove ``member`` (left, expired or fenced) and bump the group epoch; when the last
        consumer-protocol member goes and classic members remain, the group may become a classic
        group again instead (``migration.py``)."""
        mg = group.modern
        if self._can_downgrade(group, member):
            self._downgrade_to_classic(group, member)
            return
        self._drop_member(mg, member)
        mg.group_epoch += 1
        self.consumer_rebalances += 1
        self._sync_group_fields(group)

    @staticmethod
    def _drop_member(mg: ModernGroup, member: ModernMember) -> None:
        """Take ``member`` and its partitions, target and timers out of the group (no epoch bump)."""
        member.cancel_timers()
        mg.release(member)
        mg.members.pop(member.member_id, None)
        mg.target.pop(member.member_id, None)
        mg.touch(member.member_id)
        if member.instance_id is not None and mg.static.get(member.instance_id) == member.member_id:
            del mg.static[member.instance_id]

    def _modern_leave(self, group_id, member_id, member_epoch, instance_id):
        group = self._modern_group(group_id, create=False)
        mg: ModernGroup = group.modern
        member = self._known_member(mg, group_id, member_id, instance_id)
        if member_epoch == STATIC_LEAVE_EPOCH:
            # keeps its partitions (not the ones being revoked) until it rejoins or times out
            mg.release(member)
            member.revoking = {}
            member.state = M_STABLE
            member.previous_epoch, member.epoch = member.epoch, STATIC_LEAVE_EPOCH
            mg.hold(member)
            mg.touch(member.member_id)
            if member.rebalance_timer is not None:
                member.rebalance_timer.cancel()
                member.rebalance_timer = None
            log.info("static member %s (instance %s) of group %s left temporarily", member_id, instance_id, group_id)
            self._sync_group_fields(group)
            return member.member_id, STATIC_LEAVE_EPOCH
        log.info("member %s left consumer group %s", member_id, group_id)
        self._fence(group, member)
        return member_id, LEAVE_EPOCH

    def _sync_group_fields(self, group: Group) -> None:
        """The classic fields other code reads: state (Empty makes the group deletable and its
        offsets expirable) and the subscribed topics (OffsetDelete)."""
        mg = group.modern
        state = mg.state()
        if state != group.state:        # offsets of an Empty group expire counted from here
            group.state_timestamp = self.timers.now_ms()
        group.state = state
        group.subscribed = mg.subscribed_topics()

    # ------------------------------------------------------------------ persistence
    @staticmethod
    def _member_snapshot(mg: ModernGroup, m: ModernMember) -> tuple:
        """(metadata, target, current assignment) of ``m`` as its three records hold them."""
        def frozen(parts):
            return frozenset((t, p) for t, ps in parts.items() for p in ps)
        return ((m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed, m.regex,
                 m.rebalance_timeout_ms, m.server_assignor, m.classic),
                frozen(mg.target.get(m.member_id, {})),
                (m.epoch, m.previous_epoch, m.state, frozen(m.assigned), frozen(m.revoking)))

    def _snapshot(self, mg: ModernGroup) -> dict:
        """What the records of ``mg`` say, to compare with what the log has (``mg.persisted``)."""
        return {"epoch": mg.group_epoch, "assignment_epoch": mg.assignment_epoch, "metadata": dict(mg.metadata),
                "members": {mid: self._member_snapshot(mg, m) for mid, m in mg.members.items()}}

    def _modern_diff(self, group: Group, mg: ModernGroup):
        """(records, snapshot, dirty marks handled): the records that bring the log from
        ``mg.persisted`` to now, in Kafka's order (member metadata, partition metadata, group
        epoch, targets, target epoch, current assignments; tombstones for members gone).  Only
        members marked dirty (``ModernGroup.touch``) are compared, so a heartbeat costs the same
        in a group of three members as in one of a thousand."""
        old = mg.persisted
        if old is None:
            old = {"epoch": None, "assignment_epoch": None, "metadata": None, "members": {}}
            marks = dict(mg.dirty)
            dirty = set(mg.members) | set(marks)
        else:
            marks = dict(mg.dirty)
            dirty = set(marks)
        gid = group.group_id
        members, meta_recs, target_recs, current_recs, tombstones = member_record_diff(
            gid, old["members"], mg.members, dirty, lambda m: self._member_snapshot(mg, m), MR.key,
            (MR.MEMBER_METADATA, MR.TARGET_MEMBER, MR.CURRENT_ASSIGNMENT),
            (lambda m, snap: MR.member_metadata_value(MR.MemberMetadata(*snap[0])),
             lambda m, snap: MR.target_member_value(mg.target.get(m.member_id, {})),
             lambda m, snap: MR.current_assignment_value(
                 MR.CurrentAssignment(m.epoch, m.previous_epoch, m.state, m.assigned, m.revoking))))
        new = {"epoch": mg.group_epoch, "assignment_epoch": mg.assignment_epoch, "metadata": mg.metadata,
               "members": members}
        recs = [(R.group_key(gid), None)] if mg.classic_record else []
        recs += tombstones + meta_recs
        if new["metadata"] != old["metadata"]:
            new["metadata"] = dict(mg.metadata)
            recs.append((MR.key(MR.PARTITION_METADATA, gid), MR.partition_metadata_value(new["metadata"])))
        else:
            new["metadata"] = old["metadata"]
        if new["epoch"] != old["epoch"]:
            recs.append((MR.key(MR.GROUP_METADATA, gid), MR.epoch_value(new["epoch"])))
        recs += target_recs
        if new["assignment_epoch"] != old["assignment_epoch"]:
            recs.append((MR.key(MR.TARGET_METADATA, gid), MR.epoch_value(new["assignment_epoch"])))
        recs += current_recs
        return recs, new, marks

    async def _persist_modern(self, group: Group) -> int:
        """Write what changed in ``group`` since its last write; the error a member should see."""
        mg = group.modern
        if mg is None:
            return E.NONE
        diff = self._modern_diff if mg.kind == CONSUMER else self._streams_diff
        async with group.write_lock:
            if group.modern is not mg:
                return E.NONE
            recs, snap, marks = diff(group, mg)
            if recs:
                err = await self._append_unlocked(group, recs)
                if err:
                    return self._modern_write_error(err)
            mg.persisted = snap
            mg.classic_record = False
            for mid, n in marks.items():          # unless touched again during the write
                if mg.dirty.get(mid) == n:
                    del mg.dirty[mid]
            return E.NONE

    def _modern_tombstones(self, group: Group) -> list:
        """Tombstones for every consumer-protocol record the log holds for ``group``."""
        mg = group.modern
        if mg is not None and mg.kind != CONSUMER:
            return self._streams_tombstones(group)
        if mg is None or mg.persisted is None:
            return []
        out = self._modern_tombstones_for(group.group_id, mg.persisted["members"])
        mg.persisted = None
        return out

    @staticmethod
    def _modern_tombstones_for(gid: str, member_ids) -> list:
        """Tombstones for the consumer-protocol records of group ``gid`` and of ``member_ids``."""
        out = []
        for mid in sorted(member_ids):
            out += [(MR.key(MR.CURRENT_ASSIGNMENT, gid, mid), None), (MR.key(MR.TARGET_MEMBER, gid, mid), None),
                    (MR.key(MR.MEMBER_METADATA, gid, mid), None)]
        out += [(MR.key(MR.TARGET_METADATA, gid), None), (MR.key(MR.PARTITION_METADATA, gid), None),
                (MR.key(MR.GROUP_METADATA, gid), None)]
        return out

    def _load_modern(self, group: Group, data: dict) -> None:
        """Rebuild a consumer-protocol group from its records (``data``: the last value of each
        key, see ``coordinator._load``); the members' session timers start in ``_on_group_loaded``."""
        mg = ModernGroup()
        mg.group_epoch = data["epoch"]
        mg.assignment_epoch = data.get("assignment_epoch") or 0
        mg.metadata = data.get("metadata") or {}
        for mid, recs in data.get("members", {}).items():
            meta = recs.get(MR.MEMBER_METADATA)
            if meta is None:
                continue
            m = ModernMember(mid)
            (m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed, m.regex, m.rebalance_timeout_ms,
             m.server_assignor, m.classic) = (meta.instance_id, meta.rack_id, meta.client_id, meta.client_host,
                                              tuple(meta.subscribed), meta.regex, meta.rebalance_timeout_ms,
                                              meta.server_assignor, meta.classic)
            cur = recs.get(MR.CURRENT_ASSIGNMENT)
            if cur is not None:
                m.epoch, m.previous_epoch, m.state, m.assigned, m.revoking = (
                    cur.epoch, cur.previous_epoch, cur.state, cur.assigned, cur.revoking)
            if recs.get(MR.TARGET_MEMBER) is not None:
                mg.target[mid] = recs[MR.TARGET_MEMBER]
            mg.members[mid] = m
            if m.instance_id is not None:
                mg.static[m.instance_id] = mid
            mg.hold(m)
        if mg.assignment_epoch:
            names = self._assignors()
            votes = Counter(m.server_assignor for m in mg.members.values() if m.server_assignor in names)
            mg.assignor = votes.most_common(1)[0][0] if votes else (names[0] if names else "")
        mg.persisted = self._snapshot(mg)
        group.modern = mg
        group.protocol_type = CONSUMER
        self._sync_group_fields(group)
        if mg.members:
            log.info("loaded consumer group %s at epoch %d: %d members (%d classic)", group.group_id,
                     mg.group_epoch, len(mg.members), sum(m.classic is not None for m in mg.members.values()))

    def _on_modern_loaded(self, group: Group) -> None:
        if group.modern.kind != CONSUMER:
            return self._on_streams_loaded(group)
        for m in group.modern.members.values():
            self._arm_session(group, m)
            self._after_reconcile(group, group.modern, m)

    def _unload_modern(self, group: Group) -> None:
        if group.modern is not None:
            for m in group.modern.members.values():
                m.cancel_timers()
            timer = getattr(group.modern, "delay_timer", None)
            if timer is not None:
                timer.cancel()
                group.modern.delay_timer = None

    # ------------------------------------------------------------------ offsets of modern groups
    def _validate_modern_commit(self, group: Group, member_id: str, member_epoch: int,
                                api_version: int | None, transactional: bool = False) -> int:
        mg = group.modern
        if mg.kind != CONSUMER:
            return self._validate_streams_commit(group, member_id, member_epoch, api_version, transactional)
        if member_epoch < 0 and not mg.members:
            return E.NONE
        member = mg.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if not transactional and member.classic is None and api_version is not None and api_version < 9:
            return E.UNSUPPORTED_VERSION
        if member_epoch != member.epoch:      # a classic member's generation id is its epoch
            return E.ILLEGAL_GENERATION if transactional or member.classic is not None else E.STALE_MEMBER_EPOCH
        return E.NONE

    def validate_modern_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        group = self.groups.get(group_id)
        if group is None or group.modern is None or (member_id is None and member_epoch < 0):
            return E.NONE
        member = group.modern.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != member.epoch:
            return E.STALE_MEMBER_EPOCH if member.classic is None else E.ILLEGAL_GENERATION
        return E.NONE

    # ------------------------------------------------------------------ ConsumerGroupDescribe
    def consumer_group_describe(self, group_id: str):
        """(error, summary) with summary a dict: state, group_epoch, assignment_epoch, assignor,
        members [ModernMember, target assignment]; for GROUP_ID_NOT_FOUND the summary is the
        error message Kafka 4.x sends ("Group g not found." or "Group g is not a consumer
        group.")."""
        if not group_id:
            return E.INVALID_GROUP_ID, None
        err = self._validate_group_status(group_id, "describe")
        if err:
            return err, None
        group = self.groups.get(group_id)
        if group is None or group.modern is None or group.modern.kind != CONSUMER or group.is_(DEAD):
            other = (group is not None and not group.is_(DEAD)) or self.is_share_group(group_id)
            return E.GROUP_ID_NOT_FOUND, (f"Group {group_id} is not a consumer group." if other
                                          else f"Group {group_id} not found.")
        mg = group.modern
        return E.NONE, {"state": mg.state(), "group_epoch": mg.group_epoch, "assignment_epoch": mg.assignment_epoch,
                        "assignor": mg.assignor or self._assignors()[0],
                        "members": [(m, mg.target.get(m.member_id, {})) for m in mg.members.values()]}


def member_record_diff(gid: str, old_members: dict, live: dict, dirty, snapshot, key, kinds, values):
    """The per-member records of a consumer or streams group that bring the log from
    ``old_members`` (member id -> snapshot, as last written) to ``live`` for the members in
    ``dirty``.  A snapshot is a 3-tuple, one part per record kind in ``kinds`` (metadata, target
    assignment, current assignment); ``values[i](member, snapshot)`` is the value of kind i.
    Returns (new snapshots, metadata records, target records, current records, tombstones of the
    members gone)."""
    members = dict(old_members)
    out: tuple = ([], [], [], [])
    for mid in sorted(dirty):
        o = old_members.get(mid)
        m = live.get(mid)
        if m is None:
            if o is not None:
                out[3].extend((key(k, gid, mid), None) for k in reversed(kinds))
                del members[mid]
            continue
        snap = members[mid] = snapshot(m)
        for i, k in enumerate(kinds):
            if o is None or o[i] != snap[i]:
                out[i].append((key(k, gid, mid), values[i](m, snap)))
    return (members, *out)


def _new_member_id() -> str:
    """Kafka's Uuid.toString(): 22 characters of URL-safe base64, no padding."""
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


__all__ = ["ConsumerProtocolMixin", "ModernGroup", "ModernMember", "CONSUMER"]

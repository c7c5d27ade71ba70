"""GroupCoordinator: classic consumer groups and committed offsets, kept in ``__consumer_offsets``.

How this works
--------------
The coordinator of a group is the leader of ``__consumer_offsets`` partition
``partition_for(group_id)`` (``hashing.py``).  The broker tells the coordinator which partitions it
leads (``on_become_leader`` / ``on_resign``); becoming leader replays the partition's records into
groups and offsets (last value per key wins, null values delete), resigning drops those groups
and answers their waiting requests with NOT_COORDINATOR.  A partition that the log reports as led
but that was never announced is loaded on first use.

Requests for a group whose partition this broker does not lead get NOT_COORDINATOR; before
``start`` and after ``stop`` everything gets COORDINATOR_NOT_AVAILABLE.

The membership protocol is in ``membership.py``, offsets in ``offsets.py``; both are mixins of
this class and follow the same concurrency rule (see ``membership.py``): state changes happen
synchronously on the event loop, appends are the only awaits, and appends of one group are
serialised by the group's write lock.  The coordinator is owned by the event loop; it is not
thread-safe.

The broker provides (``GroupLog``)::

    num_partitions: int                       # offsets.topic.num.partitions of the topic
    def is_leader(partition) -> bool
    async def append(partition, [(key, value | None), ...]) -> None   # raises on failure
    def read(partition) -> Iterable[(offset, key, value | None)]       # every record, for loading
    async def ensure_created() -> None        # optional: create __consumer_offsets if missing
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Iterable, Protocol, runtime_checkable

from protocol.errors import ErrorCode as E, code_for_exception

from broker.background import BackgroundTasks
from broker.group import modern_records as MR
from broker.share import group_records as SR
from broker.group import records as R
from broker.group.group import DEAD, EMPTY, STABLE, STATES, Group, OffsetAndMetadata
from broker.group.hashing import partition_for
from broker.group.consumer_protocol import ConsumerProtocolMixin
from broker.group import streams_records as STR
from broker.group.streams_protocol import StreamsProtocolMixin
from broker.group.member import Member
from broker.group.membership import MembershipMixin
from broker.group.migration import MigrationMixin
from broker.group.offsets import OffsetsMixin
from broker.group.txn_offsets import TxnOffsetsMixin
from broker.group.timers import LoopTimers

log = logging.getLogger("odradek.group")

GROUP_METADATA_TOPIC = "__consumer_offsets"
# offset APIs that a share group's id refuses (Kafka's ShareGroup.validateOffset*); OffsetFetch
# is not among them: Kafka's fetchOffsets swallows that GroupIdNotFoundException and answers as
# for a group with no offsets
_OFFSET_APIS = frozenset({"commit", "offset_delete", "txn_commit"})


@runtime_checkable
class GroupLog(Protocol):
    """The ``__consumer_offsets`` topic as the broker sees it."""
    num_partitions: int

    def is_leader(self, partition: int) -> bool: ...

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None: ...

    def read(self, partition: int) -> Iterable[tuple[int, bytes | None, bytes | None]]: ...


class Node(Protocol):
    node_id: int
    host: str
    port: int


# Kafka 3.9's classic group coordinator maps the append error of a group-metadata write to the
# error a member sees ...
_STORE_GROUP_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.REQUEST_TIMED_OUT: E.REBALANCE_IN_PROGRESS,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.INVALID_FETCH_SIZE: E.UNKNOWN_SERVER_ERROR,
}
# The groups of the new protocols (KIP-848 consumer groups, the classic members inside them,
# KIP-932 share groups) are Kafka's new coordinator's, which maps a failed write the way its
# runtime does (handleOperationException): a write that timed out is COORDINATOR_NOT_AVAILABLE,
# which members retry, not the classic table's REBALANCE_IN_PROGRESS, which Java's consumer
# takes as fatal on a ConsumerGroupHeartbeat.  NOT_ENOUGH_REPLICAS_AFTER_APPEND (an acks=all
# wait here; Kafka's runtime appends with acks=1 and waits for the high watermark, which times
# out instead) is COORDINATOR_NOT_AVAILABLE as well.
_WRITE_NOT_HERE = {
    **dict.fromkeys((E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                     E.REQUEST_TIMED_OUT), E.COORDINATOR_NOT_AVAILABLE),
    **dict.fromkeys((E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR), E.NOT_COORDINATOR),
    E.NETWORK_EXCEPTION: E.COORDINATOR_LOAD_IN_PROGRESS,
}
_TOO_LARGE = (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE)
_MODERN_WRITE_ERRORS = {**_WRITE_NOT_HERE, **dict.fromkeys(_TOO_LARGE, E.UNKNOWN_SERVER_ERROR)}
# ... and of an offset commit (the same, but too large is INVALID_COMMIT_OFFSET_SIZE).
_COMMIT_ERRORS = {**_WRITE_NOT_HERE, **dict.fromkeys(_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE)}

# records read in one go when loading a partition (then the event loop gets a turn)
LOAD_SLICE_RECORDS = 1000

# APIs that accept an empty group id (Kafka keeps them usable for the "" group)
_EMPTY_ID_OK = {"commit", "fetch", "describe", "delete"}


class GroupCoordinator(MembershipMixin, MigrationMixin, ConsumerProtocolMixin, StreamsProtocolMixin, OffsetsMixin,
                       TxnOffsetsMixin):
    """Owns every group of the ``__consumer_offsets`` partitions this broker leads."""

    def __init__(self, config, group_log: GroupLog, node_lookup: Callable[[int], "Node | None"],
                 clock: Callable[[], float] = time.monotonic, *, timers=None):
        self.config = config
        self.log = group_log
        self.node_lookup = node_lookup
        self.clock = clock
        self.timers = timers if timers is not None else LoopTimers()
        self.share = None               # the broker's share coordinator (broker/share/manager.py), if any
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, list] = {}      # partition -> marker completions seen while loading
        self.active = False
        self._bg = BackgroundTasks("group coordinator")
        self._expiry_handle = None
        # topic name -> TopicInfo | None (the broker's metadata), for consumer-protocol groups
        self.topic_lookup: Callable | None = None
        self.topic_by_id: Callable | None = None
        self.topic_names: Callable | None = None       # () -> iterable of every topic name
        self.group_configs: Callable | None = None     # group id -> its dynamic configs (KIP-848)
        self.broker_racks: Callable | None = None      # () -> {broker id: rack} of the brokers with one
        self.create_topics: Callable | None = None     # async ([CreatableTopic]) -> [TopicResult] (streams groups)

    # ------------------------------------------------------------------ configuration
    def _cfg(self, name):
        return self.config.get(name)

    def _group_cfg(self, group_id: str, name: str, broker_key: str) -> int:
        """A group's own config (``consumer.session.timeout.ms``, ...; IncrementalAlterConfigs on
        its GROUP resource), else the broker's ``broker_key``."""
        own = self.group_configs(group_id).get(name) if self.group_configs is not None else None
        return int(own) if own not in (None, "") else self._cfg(broker_key)

    def _min_session_ms(self) -> int:
        return self._cfg("group.min.session.timeout.ms")

    def _max_session_ms(self) -> int:
        return self._cfg("group.max.session.timeout.ms")

    def _initial_rebalance_delay_ms(self) -> int:
        return self._cfg("group.initial.rebalance.delay.ms")

    def _max_group_size(self) -> int:
        return self._cfg("group.max.size")

    def _offsets_retention_ms(self) -> int:
        return self._cfg("offsets.retention.minutes") * 60_000

    def _max_metadata_bytes(self) -> int:
        return self._cfg("offset.metadata.max.bytes")

    # ------------------------------------------------------------------ lifecycle
    @property
    def num_partitions(self) -> int:
        return self.log.num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    async def start(self) -> None:
        self.active = True
        self._schedule_expiry()
        log.info("group coordinator started (%d partitions of %s)", self.num_partitions, GROUP_METADATA_TOPIC)

    async def stop(self) -> None:
        self.active = False
        if self._expiry_handle is not None:
            self._expiry_handle.cancel()
            self._expiry_handle = None
        for p in sorted(self.owned | set(self.loading)):
            self.on_resign(p)
        tasks = list(self._bg.tasks)
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        for t in tasks:
            if not t.done():
                t.cancel()
        log.info("group coordinator stopped")

    def _schedule_expiry(self) -> None:
        interval = self._cfg("offsets.retention.check.interval.ms")

        def fire():
            self._expiry_handle = None
            if not self.active:
                return
            self._spawn(self.expire_offsets())
            self._schedule_expiry()
        self._expiry_handle = self.timers.call_later(interval, fire)

    def _spawn(self, coro) -> asyncio.Task:
        return self._bg.spawn(coro)

    async def idle(self) -> None:
        """Wait until every background write has finished (tests use this)."""
        await self._bg.idle()

    # ------------------------------------------------------------------ ownership and loading
    def _owns(self, partition: int) -> bool:
        """Led by this broker (loaded or still loading)."""
        if partition in self.owned or partition in self.loading:
            return True
        try:
            leader = self.log.is_leader(partition)
        except Exception:   # the topic may not exist yet
            return False
        if leader:
            self.on_become_leader(partition)
            return True
        return False

    def _validate_group_status(self, group_id, api: str) -> int:
        if group_id is None or (group_id == "" and api not in _EMPTY_ID_OK):
            return E.INVALID_GROUP_ID
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if not self._owns(partition):
            return E.NOT_COORDINATOR
        if partition in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if api in _OFFSET_APIS and self.is_share_group(group_id):
            return E.GROUP_ID_NOT_FOUND         # Kafka: "Group g is not a consumer group."
        return E.NONE

    def _add_group(self, group: Group) -> Group:
        return self.groups.setdefault(group.group_id, group)

    def _remove_group(self, group: Group) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def on_become_leader(self, partition: int) -> None:
        """Load the groups and offsets of ``partition`` (idempotent).  The first
        ``LOAD_SLICE_RECORDS`` records are read right away; a longer log is read on in the
        background, a slice at a time, and until it is loaded the partition's groups get
        COORDINATOR_LOAD_IN_PROGRESS (Heartbeat: NONE), as in Kafka."""
        if partition in self.owned or partition in self.loading:
            return
        mine = self.loading[partition] = []
        steps = self._load(partition, mine)
        try:
            if next(steps, None) is None:
                return
        except Exception:
            if self.loading.get(partition) is mine:
                del self.loading[partition]                 # the next request tries again
            raise
        try:
            asyncio.get_running_loop()
        except RuntimeError:            # no event loop (unit tests): finish here
            for _ in steps:
                pass
            return
        self._spawn(self._load_in_background(partition, steps, mine))

    async def _load_in_background(self, partition: int, steps, mine: list) -> None:
        try:
            for _ in steps:
                await asyncio.sleep(0)
                if self.loading.get(partition) is not mine:     # resigned meanwhile
                    steps.close()
                    return
        except Exception:
            log.exception("loading %s-%d failed", GROUP_METADATA_TOPIC, partition)
            if self.loading.get(partition) is mine:
                del self.loading[partition]                     # the next request tries again

    def _load(self, partition: int, mine: list):
        """Generator: reads ``partition``, yielding after every ``LOAD_SLICE_RECORDS`` records,
        then installs what it read (``mine``: the completions list of this load)."""
        started = time.monotonic()
        offsets: dict[tuple[str, str, int], R.OffsetValue] = {}
        groups: dict[str, R.GroupValue] = {}
        modern: dict[str, dict] = {}        # consumer-protocol groups: key version -> last value
        share: dict[str, dict] = {}         # share groups, the same way (broker/share/group_records.py)
        streams: dict[str, dict] = {}       # streams groups, the same way (streams_records.py)
        removed: set[str] = set()
        count = 0
        for _offset, key, value in self.log.read(partition):
            count += 1
            if count % LOAD_SLICE_RECORDS == 0:
                yield True
            if key is None:
                continue
            try:
                k = R.parse_key(key)
                if k is None:
                    mk = MR.parse_key(key)
                    if mk is not None:
                        self._load_modern_record(modern, mk, value)
                        continue
                    sk = SR.parse_key(key)
                    if sk is not None:
                        if sk.kind in SR.PARSERS:
                            self._load_modern_record(share, sk, value, SR.PARSERS, SR.GROUP_METADATA,
                                                     SR.TARGET_METADATA)
                        continue
                    tk = STR.parse_key(key)
                    if tk is not None:
                        if tk.kind != STR.OLD_PARTITION_METADATA:
                            # the topology (a group-level record that is not an epoch) lands in "metadata"
                            self._load_modern_record(streams, tk, value, STR.PARSERS, STR.GROUP_METADATA,
                                                     STR.TARGET_METADATA)
                        continue
                if isinstance(k, R.OffsetKey):
                    gtp = (k.group, k.topic, k.partition)
                    if value is None:
                        offsets.pop(gtp, None)
                    else:
                        offsets[gtp] = R.parse_offset_value(value)
                elif isinstance(k, R.GroupKey):
                    if value is None:
                        groups.pop(k.group, None)
                        removed.add(k.group)
                    else:
                        groups[k.group] = R.parse_group_value(value)
                        removed.discard(k.group)
                else:
                    log.warning("unknown key version in %s-%d; ignored", GROUP_METADATA_TOPIC, partition)
            except (R.RecordFormatError, ValueError) as e:
                log.warning("unreadable record in %s-%d: %s; ignored", GROUP_METADATA_TOPIC, partition, e)
        if self.loading.get(partition) is not mine:         # resigned meanwhile
            return
        del self.loading[partition]
        self.owned.add(partition)
        by_group: dict[str, dict] = {}
        for (gid, topic, p), v in offsets.items():
            by_group.setdefault(gid, {})[(topic, p)] = OffsetAndMetadata(
                v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
        loaded = 0
        modern = {gid: d for gid, d in modern.items() if d.get("epoch") is not None}
        streams = {gid: d for gid, d in streams.items() if d.get("epoch") is not None and gid not in modern}
        for gid in set(groups) | set(by_group) | set(modern) | set(streams):
            if self.partition_for(gid) != partition:
                log.warning("group %s found in %s-%d but belongs to partition %d; ignored", gid,
                            GROUP_METADATA_TOPIC, partition, self.partition_for(gid))
                continue
            group = self._group_from_value(gid, groups.get(gid) if gid not in modern and gid not in streams else None)
            if gid in modern:
                self._load_modern(group, modern[gid])
            elif gid in streams:
                self._load_streams(group, streams[gid])
            group.offsets.update(by_group.get(gid, {}))
            self.groups[gid] = group
            self._on_group_loaded(group)
            loaded += 1
        if self.share is not None:
            self.share.load_groups({gid: d for gid, d in share.items() if self.partition_for(gid) == partition})
        self._load_open_txn_offsets(partition)
        for producer_id, commit in mine:                  # markers appended after the loaded range
            self.complete_txn(producer_id, [partition], commit)
        log.info("loaded %d groups from %s-%d (%d records) in %.1f ms", loaded, GROUP_METADATA_TOPIC, partition,
                 count, (time.monotonic() - started) * 1000)

    def _group_from_value(self, group_id: str, value: R.GroupValue | None) -> Group:
        now = self.timers.now_ms()
        if value is None:
            return Group(group_id, now)
        group = Group(group_id, now, STABLE if value.members else EMPTY)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        for mv in value.members:
            protocols = [(value.protocol, mv.subscription)] if value.protocol is not None else []
            m = Member(mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host, mv.rebalance_timeout,
                       mv.session_timeout, value.protocol_type, protocols, mv.assignment)
            group.members[mv.member_id] = m
            group.supported_protocols.update(m.protocol_names())
            if mv.group_instance_id is not None:
                group.static_members[mv.group_instance_id] = mv.member_id
        if group.leader_id is not None and group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.subscribed = group.compute_subscribed_topics()
        return group

    @staticmethod
    def _load_modern_record(modern: dict, k, value, parsers=MR.PARSERS, epoch_kind=MR.GROUP_METADATA,
                            target_kind=MR.TARGET_METADATA) -> None:
        """One consumer-protocol (or, with share ``parsers`` and kinds, share group) record into
        ``modern`` (last value wins, a tombstone deletes)."""
        d = modern.setdefault(k.group, {"members": {}})
        field = {epoch_kind: "epoch", target_kind: "assignment_epoch"}.get(k.kind)
        if field is None and k.member is None:       # ConsumerGroupPartitionMetadata (4) or, in a
            field = "metadata"                        # share group, ShareGroupStatePartitionMetadata (15)
        parsed = None if value is None else parsers[k.kind](value)
        if field is not None:
            d[field] = parsed
        elif parsed is None:
            d["members"].get(k.member, {}).pop(k.kind, None)
        else:
            d["members"].setdefault(k.member, {})[k.kind] = parsed

    def _on_group_loaded(self, group: Group) -> None:
        if group.modern is not None:
            self._on_modern_loaded(group)
            return
        if group.size > self._max_group_size():
            self._prepare_rebalance(group, "freshly loaded group is over capacity")
        for m in list(group.members.values()):
            self._complete_and_schedule_heartbeat(group, m)

    def on_resign(self, partition: int) -> None:
        """Drop the groups of ``partition``; their waiting requests get NOT_COORDINATOR."""
        self.owned.discard(partition)
        self.loading.pop(partition, None)
        if self.share is not None:
            self.share.unload_groups(lambda gid: self.partition_for(gid) == partition)
        for gid, group in list(self.groups.items()):
            if self.partition_for(gid) == partition:
                self._on_group_unloaded(group)
                del self.groups[gid]

    def _on_group_unloaded(self, group: Group) -> None:
        from broker.group.member import JoinResult, SyncResult
        log.info("unloading group %s (generation %d)", group.group_id, group.generation_id)
        group.state = DEAD
        self._unload_modern(group)
        self._cancel_join_op(group)
        self._cancel_sync_op(group)
        for h in group.pending_timers.values():
            h.cancel()
        group.pending_timers.clear()
        for m in group.members.values():
            self._invoke_join(m, JoinResult(E.NOT_COORDINATOR, m.member_id))
            self._invoke_sync(m, SyncResult(E.NOT_COORDINATOR))
            m.cancel_heartbeat()

    # ------------------------------------------------------------------ persistence
    def _group_record(self, group: Group, assignment: dict[str, bytes]) -> tuple[bytes, bytes]:
        members = []
        for mid, m in group.members.items():
            members.append(R.MemberValue(
                mid, m.client_id, m.client_host, m.session_timeout_ms,
                m.metadata(group.protocol_name) if group.protocol_name is not None else b"",
                assignment.get(mid, b""), m.rebalance_timeout_ms, m.group_instance_id))
        value = R.GroupValue(group.protocol_type or "", group.generation_id, group.protocol_name,
                             group.leader_id if group.members else None,
                             group.state_timestamp if group.state_timestamp is not None else -1, members)
        return R.group_key(group.group_id), R.group_value(value)

    async def _append(self, group: Group, records) -> int:
        """Append ``records`` to the group's partition under the group's write lock; returns the
        error code of a failure (0 on success)."""
        async with group.write_lock:
            return await self._append_unlocked(group, records)

    async def _append_unlocked(self, group: Group, records) -> int:
        return await self.append_records(group.group_id, records)

    async def append_records(self, group_id: str, records) -> int:
        """Append ``records`` to the partition of ``group_id`` (the caller keeps the writes of a
        group in order); the error code of a failure, 0 on success."""
        partition = self.partition_for(group_id)
        if partition not in self.owned:
            return E.NOT_LEADER_OR_FOLLOWER
        try:
            await self.log.append(partition, records)
            return E.NONE
        except asyncio.CancelledError:
            raise
        except Exception as e:
            code = code_for_exception(e)
            log.warning("append to %s-%d failed: %r (error %d)", GROUP_METADATA_TOPIC, partition, e, code)
            return code

    @staticmethod
    def _store_group_error(code: int) -> int:
        return _STORE_GROUP_ERRORS.get(code, code)

    @staticmethod
    def _modern_write_error(code: int) -> int:
        return _MODERN_WRITE_ERRORS.get(code, code)

    @staticmethod
    def _commit_error(code: int) -> int:
        return _COMMIT_ERRORS.get(code, code)

    # ------------------------------------------------------------------ share groups (broker/share)
    def is_share_group(self, group_id: str) -> bool:
        """A share group of that id exists (KIP-932 shares the group id namespace)."""
        return self.share is not None and self.share.has_group(group_id)

    # ------------------------------------------------------------------ ListGroups / DescribeGroups
    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()):
        """Returns (error, [(group_id, protocol_type, state, group_type)])."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE, []
        err = E.COORDINATOR_LOAD_IN_PROGRESS if self.loading else E.NONE
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        out = []
        for gid, g in sorted(self.groups.items()):
            if g.is_(DEAD) or self.partition_for(gid) not in self.owned:
                continue
            if wanted_states and g.state.lower() not in wanted_states and g.state != "NotReady":
                continue
            gtype = g.modern.kind if g.modern is not None else "classic"
            if wanted_types and gtype not in wanted_types:
                continue
            if wanted_states and g.state.lower() not in wanted_states and not (
                    g.state == "NotReady" and "not_ready" in wanted_states):
                continue
            out.append((gid, g.protocol_type or "", g.state, gtype))
        if self.share is not None and (not wanted_types or "share" in wanted_types):
            for gid, state in self.share.list_groups():
                if not wanted_states or state.lower() in wanted_states:
                    out.append((gid, "share", state, "share"))
        return err, out

    def describe_group(self, group_id: str):
        """Returns (error, summary) where summary is a dict: state, protocol_type, protocol,
        members [(member_id, group_instance_id, client_id, client_host, metadata, assignment)],
        and for a group that is not a classic one here, "not_found": the v6 error message."""
        err = self._validate_group_status(group_id, "describe")
        if err:
            return err, {"state": "", "protocol_type": "", "protocol": "", "members": []}
        group = self.groups.get(group_id)
        if group is None or group.modern is not None or group.is_(DEAD):
            # Kafka: Dead, and from v6 GROUP_ID_NOT_FOUND with why ("not_found")
            other = (group is not None and group.modern is not None) or self.is_share_group(group_id)
            why = f"Group {group_id} is not a classic group." if other else f"Group {group_id} not found."
            return E.NONE, {"state": DEAD, "protocol_type": "", "protocol": "", "members": [], "not_found": why}
        stable = group.is_(STABLE)
        members = []
        for mid, m in group.members.items():
            if stable:
                members.append((mid, m.group_instance_id, m.client_id, m.client_host,
                                m.metadata(group.protocol_name), m.assignment))
            else:
                members.append((mid, m.group_instance_id, m.client_id, m.client_host, b"", b""))
        return E.NONE, {"state": group.state, "protocol_type": group.protocol_type or "",
                        "protocol": (group.protocol_name or "") if stable else "", "members": members}


__all__ = ["GroupCoordinator", "GroupLog", "Node", "GROUP_METADATA_TOPIC", "STATES"]

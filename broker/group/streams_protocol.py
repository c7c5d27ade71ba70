"""Streams groups (KIP-1071): StreamsGroupHeartbeat and StreamsGroupDescribe, a mixin of
GroupCoordinator.  Kafka Streams 4.2 with ``group.protocol=streams`` speaks it.

How it works
------------
A streams group is a ``Group`` (the object that also holds the committed offsets) whose
``modern`` is a ``StreamsGroup`` (``kind`` "streams"; a consumer-protocol group's is a
``ModernGroup``, kind "consumer").  The coordinator does what the client-side StreamsPartitionAssignor
does in the classic protocol:

* **Topology.** The first member to join initialises the group's topology (subtopologies with
  their source, repartition and changelog topics).  A member joining with a lower topology epoch
  gets status STALE_TOPOLOGY; a different topology at the same or a higher epoch is refused
  ("Topology updates are not supported yet.", as in Kafka 4.2).
* **Configuring it** (``streams_topology.configure``): the partition counts of the internal
  topics are derived from the source topics; missing source topics, wrongly partitioned topics and
  missing internal topics are reported in the heartbeat's Status, and the coordinator creates the
  missing internal topics (in the background, as Kafka's broker does; the next heartbeat sees
  them).  Only a ready topology gets tasks; the group is NotReady until then.
* **Group epoch.** Bumped when a member joins, leaves or is fenced, when a member's metadata
  changes, when the partition counts of the topology's topics change (a digest of them is kept),
  when the topology becomes ready, and when ``streams.num.standby.replicas`` changes.  The first
  bump of a new group goes to epoch 2.
* **Initial delay.** The first member of an empty group starts a timer of
  ``group.streams.initial.rebalance.delay.ms`` (3 s): until it fires members get status
  ASSIGNMENT_DELAYED and no tasks at epoch 1, then the target is computed for everyone who joined.
* **Target assignment** (``streams_topology.assign``) at the group epoch, sticky to the last target.
* **Reconciliation** (Kafka's current-assignment builder, per kind of task): tasks a member
  must give up are revoked first (state unrevoked, epoch kept, rebalance timer running); tasks it
  gains are handed over once no other member holds them (an active task: no member holds it as
  active, and its own process holds no standby or warm-up of it; a standby: its process holds it
  in no role), otherwise it waits in state unreleased at the target epoch.  Each active task
  remembers the epoch it was assigned at: an OffsetCommit with an older member epoch is accepted
  for partitions of tasks held since that epoch.
* **Liveness.** Every heartbeat re-arms the member's session timer
  (``streams.session.timeout.ms``); when it fires, or when the rebalance timeout passes with tasks
  unrevoked, the member is fenced.  ``MemberEpoch -1`` leaves.  Static membership, warm-up tasks,
  task offsets and source topic patterns are not supported (INVALID_REQUEST, as in Kafka 4.2).
* **Interactive queries.** Members with a user endpoint learn which partitions every endpoint
  serves (``PartitionsByUserEndpoint``) when the group's endpoint epoch moved since theirs.

Persistence: the group's records (``streams_records.py``) are written to ``__consumer_offsets``
before the heartbeat is answered; a coordinator that loads the partition rebuilds the group, its
topology and its members, and starts their session timers.
"""
from __future__ import annotations

import asyncio
import logging

from protocol.errors import ErrorCode as E

from broker.group import streams_records as SR
from broker.group import streams_topology as ST
from broker.group.consumer_protocol import HeartbeatError, member_record_diff
from broker.group.group import DEAD, EMPTY, Group
from controller.api import CreatableTopic, is_internal_topic, validate_topic_name

log = logging.getLogger("odradek.group")

STREAMS = "streams"
NOT_READY, ASSIGNING, RECONCILING, STREAMS_STABLE = "NotReady", "Assigning", "Reconciling", "Stable"
# member states, with Kafka's codes for the streams protocol
S_STABLE, S_UNREVOKED, S_UNRELEASED, S_UNKNOWN = 1, 2, 3, 127
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2
_EMPTY_TASKS = ({}, {}, {})


class StreamsMember:
    __slots__ = ("member_id", "instance_id", "rack_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "topology_epoch", "process_id", "user_endpoint", "client_tags", "state", "epoch", "previous_epoch",
                 "active", "standby", "warmup", "rev_active", "rev_standby", "rev_warmup", "session_timer",
                 "rebalance_timer")
    classic = None          # the shared offset code asks every modern member whether it is a classic one

    def __init__(self, member_id: str):
        self.member_id = member_id
        self.instance_id: str | None = None
        self.rack_id: str | None = None
        self.client_id = ""
        self.client_host = ""
        self.rebalance_timeout_ms = -1
        self.topology_epoch = 0
        self.process_id = ""
        self.user_endpoint: tuple | None = None      # (host, port)
        self.client_tags: dict = {}
        self.state = S_STABLE
        self.epoch = 0
        self.previous_epoch = -1
        self.active: dict = {}        # subtopology -> {partition: epoch it was assigned at}
        self.standby: dict = {}       # subtopology -> set(partition)
        self.warmup: dict = {}
        self.rev_active: dict = {}    # pending revocation, the same shapes
        self.rev_standby: dict = {}
        self.rev_warmup: dict = {}
        self.session_timer = None
        self.rebalance_timer = None

    def metadata(self) -> tuple:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
                self.topology_epoch, self.process_id, self.user_endpoint, tuple(sorted(self.client_tags.items())))

    def assigned(self) -> tuple:
        return (_frozen(self.active), _frozen(self.standby), _frozen(self.warmup))

    def current(self) -> tuple:
        return (self.epoch, self.previous_epoch, self.state,
                frozenset((s, p, e) for s, ps in self.active.items() for p, e in ps.items()),
                _frozen(self.standby), _frozen(self.warmup),
                frozenset((s, p, e) for s, ps in self.rev_active.items() for p, e in ps.items()),
                _frozen(self.rev_standby), _frozen(self.rev_warmup))

    def cancel_timers(self) -> None:
        for h in (self.session_timer, self.rebalance_timer):
            if h is not None:
                h.cancel()
        self.session_timer = self.rebalance_timer = None


def _frozen(tasks: dict) -> frozenset:
    return frozenset((s, p) for s, ps in tasks.items() for p in ps)


class StreamsGroup:
    """The KIP-1071 state of one group."""
    kind = STREAMS

    def __init__(self):
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.metadata_hash = 0
        self.validated_epoch = -1
        self.assignment_configs: dict = {}
        self.topology: ST.Topology | None = None
        self.configured: ST.Configured | None = None
        self.members: dict[str, StreamsMember] = {}
        self.target: dict[str, tuple] = {}        # member id -> (active, standby, warmup) {sid: set}
        self.endpoint_epoch = 0
        self.shutdown_member: str | None = None
        self.delay_timer = None
        self.persisted: dict | None = None       # _streams_snapshot() of what the log holds
        self.dirty: dict[str, int] = {}
        self.classic_record = False              # a classic GroupMetadata record to delete
        self.creating: set[str] = set()          # internal topics being created
        self.create_errors: dict[str, tuple] = {}   # topic -> (error text, until ms)

    def touch(self, member_id: str) -> None:
        self.dirty[member_id] = self.dirty.get(member_id, 0) + 1

    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.topology is None or self.topology.epoch != self.validated_epoch:
            return NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        for m in self.members.values():
            if m.state != S_STABLE or m.epoch != self.assignment_epoch:
                return RECONCILING
        return STREAMS_STABLE

    def subscribed_topics(self) -> set[str]:
        if self.topology is None or not self.members:
            return set()
        return set(self.topology.source_topic_map())


def _task_sets(items) -> dict:
    out: dict = {}
    for t in items or ():
        out.setdefault(t.subtopology_id, set()).update(t.partitions)
    return out


def _contains_any(owned: tuple, pending: tuple) -> bool:
    for have, want in zip(owned, pending):
        for sid, ps in want.items():
            got = have.get(sid)
            if got and any(p in got for p in ps):
                return True
    return False


def _subset(owned: dict, assigned: dict) -> bool:
    return all(p in assigned.get(sid, ()) for sid, ps in owned.items() for p in ps)


class StreamsProtocolMixin:
    streams_rebalances = 0

    # ------------------------------------------------------------------ configuration
    def streams_protocol_enabled(self) -> bool:
        return STREAMS in self._cfg("group.coordinator.rebalance.protocols")

    def _streams_cfg(self, group_id: str, name: str) -> int:
        return self._group_cfg(group_id, f"streams.{name}", f"group.streams.{name}")

    # ------------------------------------------------------------------ StreamsGroupHeartbeat
    async def streams_group_heartbeat(self, **kw) -> dict:
        """Returns the answer's fields (error, message, member_id, member_epoch,
        heartbeat_interval_ms, status [(code, detail)], tasks (active, standby, warmup) or None,
        endpoint_epoch, endpoints or None) and ``create``: the internal topics the caller should
        create ({name: TopicInfo}) once it has checked the client may.  The answer goes out once
        the group's records are in ``__consumer_offsets``."""
        out = self._streams_heartbeat(**kw)
        if out["error"] == E.NONE:
            group = self.groups.get(kw["group_id"])
            err = await self._persist_modern(group) if group is not None else E.NONE
            if err:
                out = self._streams_error(err, None)
        return out

    @staticmethod
    def _streams_error(code: int, message: str | None) -> dict:
        return {"error": code, "message": message, "member_id": "", "member_epoch": 0, "heartbeat_interval_ms": 0,
                "status": None, "tasks": None, "endpoint_epoch": 0, "endpoints": None, "create": {}}

    def _streams_heartbeat(self, *, group_id, member_id, member_epoch, endpoint_epoch=-1, instance_id=None,
                           rack_id=None, rebalance_timeout_ms=-1, topology=None, active=None, standby=None,
                           warmup=None, process_id=None, user_endpoint=None, client_tags=None, task_offsets=None,
                           task_end_offsets=None, shutdown=False, client_id="", client_host="") -> dict:
        try:
            if not self.streams_protocol_enabled():
                raise HeartbeatError(E.UNSUPPORTED_VERSION, "The streams group protocol is not enabled "
                                                            "(group.coordinator.rebalance.protocols).")
            self._validate_streams_heartbeat(group_id, member_id, member_epoch, instance_id, rack_id,
                                             rebalance_timeout_ms, topology, active, standby, warmup,
                                             task_offsets, task_end_offsets)
            err = self._validate_group_status(group_id, "heartbeat")
            if err:
                raise HeartbeatError(err)
            if self.is_share_group(group_id):
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
            owned = None
            if active is not None:
                owned = (_task_sets(active), _task_sets(standby), _task_sets(warmup))
            if member_epoch == LEAVE_EPOCH:
                return self._streams_leave(group_id, member_id, shutdown)
            return self._streams_join_or_beat(
                group_id, member_id, member_epoch, endpoint_epoch, rack_id, rebalance_timeout_ms, topology, owned,
                process_id, user_endpoint, client_tags, shutdown, client_id, client_host)
        except HeartbeatError as e:
            return self._streams_error(e.code, e.message)
        except ST.InvalidTopology as e:
            return self._streams_error(E.STREAMS_INVALID_TOPOLOGY, str(e))

    def _validate_streams_heartbeat(self, group_id, member_id, member_epoch, instance_id, rack_id,
                                    rebalance_timeout_ms, topology, active, standby, warmup, task_offsets,
                                    task_end_offsets) -> None:
        def bad(msg):
            raise HeartbeatError(E.INVALID_REQUEST, msg)
        # what Kafka 4.2 does not support yet
        if instance_id is not None:
            bad("Static membership is not yet supported.")
        if task_offsets is not None:
            bad("TaskOffsets are not supported yet.")
        if task_end_offsets is not None:
            bad("TaskEndOffsets are not supported yet.")
        if warmup:
            bad("WarmupTasks are not supported yet.")
        if topology is not None:
            for s in topology.subtopologies or ():
                if s.source_topic_regex:
                    bad("Regular expressions for source topics are not supported yet.")
        # what is invalid
        for value, what in ((member_id, "MemberId"), (group_id, "GroupId"), (instance_id, "InstanceId"),
                            (rack_id, "RackId")):
            if value is not None and value.strip() == "":
                bad(f"{what} can't be empty.")
        if member_epoch == 0:
            if rebalance_timeout_ms == -1:
                bad("RebalanceTimeoutMs must be provided in first request.")
            for tasks, name in ((active, "ActiveTasks"), (standby, "StandbyTasks"), (warmup, "WarmupTasks")):
                if tasks:
                    bad(f"{name} must be empty when (re-)joining.")
            if topology is None:
                bad("Topology must be non-null when (re-)joining.")
            for s in topology.subtopologies or ():
                for t in s.state_changelog_topics or ():
                    if t.partitions != 0:
                        raise HeartbeatError(E.STREAMS_INVALID_TOPOLOGY,
                                             f"Changelog topic {t.name} must have an undefined partition count, "
                                             f"but it is set to {t.partitions}.")
        elif member_epoch == STATIC_LEAVE_EPOCH:
            bad("InstanceId can't be null.")
        elif member_epoch < STATIC_LEAVE_EPOCH:
            bad(f"MemberEpoch is {member_epoch}, but must be greater than or equal to -2.")
        if active is not None or standby is not None or warmup is not None:
            if active is None or standby is None or warmup is None:
                bad("If one task-type is non-null, all must be non-null.")
        if member_epoch != 0 and topology is not None:
            bad("Topology can only be provided when (re-)joining.")
        if topology is not None:
            names = sorted({t for s in topology.subtopologies or ()
                            for t in list(s.source_topics or ()) + list(s.repartition_sink_topics or ())
                            + [x.name for x in s.repartition_source_topics or ()]
                            + [x.name for x in s.state_changelog_topics or ()]})
            internal = [t for t in names if is_internal_topic(t)]
            if internal:
                raise HeartbeatError(E.STREAMS_INVALID_TOPOLOGY, f"Use of Kafka internal topics "
                                                                 f"{','.join(internal)} in a Kafka Streams topology "
                                                                 f"is prohibited.")
            invalid = [t for t in names if validate_topic_name(t) is not None]
            if invalid:
                raise HeartbeatError(E.STREAMS_INVALID_TOPOLOGY,
                                     f"Topic names {','.join(invalid)} are not valid topic names.")

    def _streams_group(self, group_id: str, create: bool) -> tuple[Group, bool]:
        """(group, new): the streams group of ``group_id``; a new one (``create``) is not in
        ``self.groups`` until the heartbeat commits it; an empty classic group is converted."""
        group = self.groups.get(group_id)
        if group is not None and group.is_(DEAD):
            group = None
        if group is None:
            if not create:
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")
            group = Group(group_id, self.timers.now_ms())
            group.modern = StreamsGroup()
            group.protocol_type = STREAMS
            return group, True
        if group.modern is None and create and group.is_(EMPTY):
            return group, True          # converted at commit (_commit_streams_group)
        if group.modern is None or group.modern.kind != STREAMS:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
        return group, False

    def _commit_streams_group(self, group: Group) -> None:
        if group.modern is None:        # an empty classic group becomes a streams group
            self._cancel_join_op(group)
            self._cancel_sync_op(group)
            had_record = group.generation_id > 0
            group.modern = StreamsGroup()
            group.modern.classic_record = had_record
            group.protocol_type = STREAMS
            group.protocol_name = None
            group.generation_id = 0
            group.leader_id = None
            log.info("group %s now uses the streams group protocol", group.group_id)
        self._add_group(group)

    def _partitions_of(self, name: str) -> int | None:
        info = self.topic_lookup(name) if self.topic_lookup is not None else None
        return len(info.partitions) if info is not None else None

    def _streams_join_or_beat(self, group_id, member_id, member_epoch, endpoint_epoch, rack_id,
                              rebalance_timeout_ms, topology_msg, owned, process_id, user_endpoint, client_tags,
                              shutdown, client_id, client_host) -> dict:
        joining = member_epoch == 0
        group, new_group = self._streams_group(group_id, create=joining)
        sg: StreamsGroup = group.modern if group.modern is not None else StreamsGroup()
        limit = self._cfg("group.streams.max.size")
        if joining and len(sg.members) >= limit:
            raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED,
                                 f"The streams group has reached its maximum capacity of {limit} members.")
        member = sg.members.get(member_id)
        if member is None:
            if not joining:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            member = StreamsMember(member_id)
        elif not joining:
            self._check_streams_epoch(member, member_epoch, owned)
        if member.state == S_UNKNOWN and (owned is None or any(owned)):
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, "The streams group member is in a unknown state. The "
                                                        "member must abandon all its tasks and rejoin.")
        # 1. the member's metadata (null / -1: unchanged)
        meta = {"rack_id": rack_id, "process_id": process_id,
                "rebalance_timeout_ms": None if rebalance_timeout_ms == -1 else rebalance_timeout_ms,
                "topology_epoch": topology_msg.epoch if topology_msg is not None else None,
                "client_tags": None if client_tags is None else {kv.key: kv.value for kv in client_tags},
                "user_endpoint": None if user_endpoint is None else (user_endpoint.host, user_endpoint.port)}
        before_meta = member.metadata() if member.member_id in sg.members else None
        # 2. the topology (checked before anything changes)
        topo = sg.topology
        new_topology = False
        if topology_msg is not None:
            asked = ST.topology_from_message(topology_msg)
            if topo is None:
                topo, new_topology = asked, True
                log.info("member %s initialised the topology of streams group %s at epoch %d", member_id, group_id,
                         asked.epoch)
            elif topo.epoch <= asked.epoch and topo != asked:
                raise HeartbeatError(E.INVALID_REQUEST, "Topology updates are not supported yet.")
        if topo is None:
            raise HeartbeatError(E.INVALID_REQUEST, "The topology is null and the group topology is also null.")
        # 3. configure it against the topics (may raise InvalidTopology: nothing has changed yet)
        h = ST.metadata_hash(topo, self._partitions_of)
        configured = sg.configured
        if new_topology or configured is None or configured.epoch != topo.epoch or h != sg.metadata_hash:
            configured = ST.configure(topo, self._partitions_of, h)
        if configured.ready and owned is not None:
            for tasks in owned:
                for sid, ps in tasks.items():
                    n = configured.tasks.get(sid)
                    if n is None:
                        raise HeartbeatError(E.INVALID_REQUEST, f"Subtopology {sid} does not exist in the topology.")
                    for p in sorted(ps):
                        if not 0 <= p < n:
                            raise HeartbeatError(E.INVALID_REQUEST, f"Task {p} for subtopology {sid} is invalid. "
                                                                    f"Number of tasks for this subtopology: {n}")
        # ---- commit
        if new_group:
            self._commit_streams_group(group)
            sg = group.modern
        was_empty = not sg.members
        before_tasks = member.assigned() if member.member_id in sg.members else None
        for k, v in meta.items():
            if v is not None:
                setattr(member, k, v)
        member.client_id, member.client_host = client_id, client_host
        if member.member_id not in sg.members:
            sg.members[member.member_id] = member
            log.info("member %s joined streams group %s", member_id, group_id)
        bump = before_meta != member.metadata()
        if new_topology:
            sg.topology = topo
        sg.configured = configured
        if h != sg.metadata_hash:
            bump = True
        validated = topo.epoch if configured.ready else -1
        if validated != sg.validated_epoch:
            bump = True
        configs = {"num.standby.replicas": str(self._streams_cfg(group_id, "num.standby.replicas"))}
        if configs != sg.assignment_configs:
            bump = True
        if bump:
            sg.group_epoch = 2 if sg.group_epoch == 0 else sg.group_epoch + 1
            sg.metadata_hash, sg.validated_epoch, sg.assignment_configs = h, validated, configs
            self.streams_rebalances += 1
        status = []
        if member.topology_epoch < topo.epoch:
            status.append((ST.STALE_TOPOLOGY, f"The member's topology epoch {member.topology_epoch} is behind the "
                                              f"group's topology epoch {topo.epoch}."))
        delay = self._streams_cfg(group_id, "initial.rebalance.delay.ms")
        if was_empty and delay > 0 and sg.delay_timer is None:
            self._start_streams_delay(group, sg, delay)
        if sg.group_epoch > sg.assignment_epoch:
            if sg.delay_timer is not None:
                target_epoch, target = max(1, sg.assignment_epoch), _EMPTY_TASKS
                status.append((ST.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance "
                                                      "delay."))
            else:
                self._compute_streams_target(group_id, sg)
                target_epoch, target = sg.assignment_epoch, sg.target.get(member_id, _EMPTY_TASKS)
        else:
            target_epoch, target = sg.assignment_epoch, sg.target.get(member_id, _EMPTY_TASKS)
        # 5. reconcile
        self._streams_reconcile(group, sg, member, target_epoch, target, owned)
        sg.touch(member_id)
        self._arm_streams_session(group, member)
        if shutdown and sg.shutdown_member is None:
            log.info("member %s of streams group %s asked to shut the application down", member_id, group_id)
            sg.shutdown_member = member_id
        self._sync_streams_fields(group)
        out = {"error": E.NONE, "message": None, "member_id": member_id, "member_epoch": member.epoch,
               "heartbeat_interval_ms": self._streams_cfg(group_id, "heartbeat.interval.ms"), "tasks": None,
               "endpoints": None, "create": {}}
        if joining or before_tasks != member.assigned():
            out["tasks"] = (member.active, member.standby, member.warmup)
            if member.user_endpoint is not None:
                sg.endpoint_epoch += 1
        if sg.endpoint_epoch != endpoint_epoch:
            out["endpoints"] = self._endpoints(sg, member)
        out["endpoint_epoch"] = 0 if new_group else sg.endpoint_epoch
        if configured.status is not None:
            code, detail = configured.status
            if configured.to_create:
                out["create"] = dict(configured.to_create)
                failed = self._streams_create_errors(sg, configured.to_create)
                if failed:
                    detail += f"; Creation failed: {failed}."
            status.append((code, detail))
        if sg.shutdown_member is not None:
            status.append((ST.SHUTDOWN_APPLICATION, f"Streams group member {sg.shutdown_member} encountered a fatal "
                                                    f"error and requested a shutdown for the entire application."))
        out["status"] = status
        return out

    @staticmethod
    def _check_streams_epoch(member: StreamsMember, received: int, owned) -> None:
        if received > member.epoch:
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH,
                                 f"The streams group member has a greater member epoch ({received}) than the one "
                                 f"known by the group coordinator ({member.epoch}). The member must abandon all its "
                                 f"partitions and rejoin.")
        if received < member.epoch:
            if (received != member.previous_epoch or owned is None or not _subset(owned[0], member.active)
                    or not _subset(owned[1], member.standby) or not _subset(owned[2], member.warmup)):
                raise HeartbeatError(E.FENCED_MEMBER_EPOCH,
                                     f"The streams group member has a smaller member epoch ({received}) than the one "
                                     f"known by the group coordinator ({member.epoch}). The member must abandon all "
                                     f"its partitions and rejoin.")

    def _compute_streams_target(self, group_id: str, sg: StreamsGroup) -> None:
        configured = sg.configured
        tasks = configured.tasks if configured is not None and configured.ready else {}
        stateful = {s.subtopology_id for s in sg.topology.subtopologies if s.stateful} if sg.topology else set()
        before = sg.target
        standby = int(sg.assignment_configs.get("num.standby.replicas", "0") or 0)
        sg.target = ST.assign({mid: m.process_id for mid, m in sg.members.items()}, tasks, stateful, standby,
                              before)
        for mid in set(before) | set(sg.target):
            if before.get(mid) != sg.target.get(mid):
                sg.touch(mid)
        sg.assignment_epoch = sg.group_epoch
        log.info("streams group %s target assignment at epoch %d for %d members (%d tasks)", group_id,
                 sg.assignment_epoch, len(sg.members), sum(tasks.values()))

    def _start_streams_delay(self, group: Group, sg: StreamsGroup, delay: int) -> None:
        def fire():
            sg.delay_timer = None
            if group.modern is not sg or not sg.members or sg.group_epoch <= sg.assignment_epoch:
                return
            self._compute_streams_target(group.group_id, sg)
            self._sync_streams_fields(group)
            self._spawn(self._persist_modern(group))
        sg.delay_timer = self.timers.call_later(delay, fire)

    # ------------------------------------------------------------------ reconciliation
    @staticmethod
    def _task_owners(sg: StreamsGroup):
        """(active owner process, standby processes, warm-up processes) per task, over what every
        member holds or is still revoking."""
        active, standby, warmup = {}, {}, {}
        for m in sg.members.values():
            for parts in (m.active, m.rev_active):
                for sid, ps in parts.items():
                    for p in ps:
                        active[(sid, p)] = m.process_id
            for parts, into in ((m.standby, standby), (m.rev_standby, standby), (m.warmup, warmup),
                                (m.rev_warmup, warmup)):
                for sid, ps in parts.items():
                    for p in ps:
                        into.setdefault((sid, p), set()).add(m.process_id)
        return active, standby, warmup

    def _streams_reconcile(self, group: Group, sg: StreamsGroup, member: StreamsMember, target_epoch: int,
                           target: tuple, owned) -> None:
        pending = (member.rev_active, member.rev_standby, member.rev_warmup)
        if member.state == S_STABLE:
            if member.epoch == target_epoch:
                return self._after_streams_reconcile(group, sg, member)
            nxt = self._next_tasks(sg, member, member.epoch, target_epoch, target, owned)
        elif member.state == S_UNREVOKED:
            if owned is None or _contains_any(owned, pending):
                return self._after_streams_reconcile(group, sg, member)
            nxt = self._next_tasks(sg, member, member.epoch + 1, target_epoch, target, owned)
        elif member.state == S_UNRELEASED:
            nxt = self._next_tasks(sg, member, member.epoch, target_epoch, target, owned)
        else:
            nxt = self._next_tasks(sg, member, target_epoch, target_epoch, target, owned)
        state, epoch, tasks, revoking = nxt
        if (state, epoch) != (member.state, member.epoch) or tasks != (member.active, member.standby, member.warmup) \
                or revoking != pending:
            member.previous_epoch, member.epoch = member.epoch, epoch
            member.state = state
            member.active, member.standby, member.warmup = tasks
            member.rev_active, member.rev_standby, member.rev_warmup = revoking
            if member.rebalance_timer is not None:       # a new revocation gets a new timer
                member.rebalance_timer.cancel()
                member.rebalance_timer = None
        self._after_streams_reconcile(group, sg, member)

    def _next_tasks(self, sg: StreamsGroup, member: StreamsMember, epoch: int, target_epoch: int, target: tuple,
                    owned):
        active_owner, standby_procs, warmup_procs = self._task_owners(sg)
        me = member.process_id

        def held_here(t):
            return me in standby_procs.get(t, ()) or me in warmup_procs.get(t, ())

        def unreleased_active(t):
            return t in active_owner or held_here(t)

        def unreleased_other(t):
            return active_owner.get(t) == me or held_here(t)

        keep_a, rev_a, new_a = {}, {}, {}
        unreleased = False
        for sid in set(target[0]) | set(member.active):
            want = target[0].get(sid, set())
            have = member.active.get(sid, {})
            keep = {p: e for p, e in have.items() if p in want}
            gone = {p: e for p, e in have.items() if p not in want}
            add = {}
            for p in want:
                if p in keep:
                    continue
                if unreleased_active((sid, p)):
                    unreleased = True
                else:
                    add[p] = target_epoch
            for d, v in ((keep_a, keep), (rev_a, gone), (new_a, add)):
                if v:
                    d[sid] = v
        sets = []
        for want_all, have_all in ((target[1], member.standby), (target[2], member.warmup)):
            keep_s, rev_s, new_s = {}, {}, {}
            for sid in set(want_all) | set(have_all):
                want = want_all.get(sid, set())
                have = have_all.get(sid, set())
                keep = have & want
                gone = have - want
                add = set()
                for p in want - keep:
                    if unreleased_other((sid, p)):
                        unreleased = True
                    else:
                        add.add(p)
                for d, v in ((keep_s, keep), (rev_s, gone), (new_s, add)):
                    if v:
                        d[sid] = set(v)
            sets.append((keep_s, rev_s, new_s))
        (keep_st, rev_st, new_st), (keep_w, rev_w, new_w) = sets
        revoking = (rev_a, rev_st, rev_w)
        if any(revoking) and (owned is None or _contains_any(owned, revoking)):
            return S_UNREVOKED, epoch, (keep_a, keep_st, keep_w), revoking
        if new_a or new_st or new_w:
            for sid, ps in new_a.items():
                keep_a.setdefault(sid, {}).update(ps)
            for into, add in ((keep_st, new_st), (keep_w, new_w)):
                for sid, ps in add.items():
                    into.setdefault(sid, set()).update(ps)
        return (S_UNRELEASED if unreleased else S_STABLE), target_epoch, (keep_a, keep_st, keep_w), ({}, {}, {})

    def _after_streams_reconcile(self, group: Group, sg: StreamsGroup, member: StreamsMember) -> None:
        self._rebalance_timer(group, member, member.state == S_UNREVOKED,
                              lambda: sg.members.get(member.member_id) is member and member.state == S_UNREVOKED,
                              lambda: self._fence_streams(group, member), lambda: self._persist_modern(group),
                              "tasks")

    def _arm_streams_session(self, group: Group, member: StreamsMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        timeout = self._streams_cfg(group.group_id, "session.timeout.ms")

        def expired():
            member.session_timer = None
            sg = group.modern
            if sg is not None and sg.kind == STREAMS and sg.members.get(member.member_id) is member:
                log.info("member %s of streams group %s has not heartbeated within %d ms; fenced", member.member_id,
                         group.group_id, timeout)
                self._fence_streams(group, member)
                self._spawn(self._persist_modern(group))
        member.session_timer = self.timers.call_later(timeout, expired)

    def _fence_streams(self, group: Group, member: StreamsMember) -> None:
        sg: StreamsGroup = group.modern
        member.cancel_timers()
        sg.members.pop(member.member_id, None)
        sg.target.pop(member.member_id, None)
        sg.touch(member.member_id)
        sg.group_epoch += 1
        self.streams_rebalances += 1
        if not sg.members:
            sg.shutdown_member = None
        self._sync_streams_fields(group)

    def _streams_leave(self, group_id: str, member_id: str, shutdown: bool) -> dict:
        group, _ = self._streams_group(group_id, create=False)
        sg: StreamsGroup = group.modern
        member = sg.members.get(member_id)
        if member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        if shutdown and sg.shutdown_member is None:
            sg.shutdown_member = member_id
        log.info("member %s left streams group %s", member_id, group_id)
        self._fence_streams(group, member)
        return {"error": E.NONE, "message": None, "member_id": member_id, "member_epoch": LEAVE_EPOCH,
                "heartbeat_interval_ms": 0, "status": [], "tasks": None, "endpoint_epoch": 0, "endpoints": None,
                "create": {}}

    def _sync_streams_fields(self, group: Group) -> None:
        sg = group.modern
        state = sg.state()
        if state != group.state:
            group.state_timestamp = self.timers.now_ms()
        group.state = state
        group.subscribed = sg.subscribed_topics()

    # ------------------------------------------------------------------ interactive queries
    def _endpoints(self, sg: StreamsGroup, member: StreamsMember) -> list:
        """[(endpoint, active {topic: [partitions]}, standby {...})], the asking member last."""
        others = [m for mid, m in sg.members.items() if mid != member.member_id]
        out = []
        for m in others + [member]:
            if m.user_endpoint is None:
                continue
            out.append((m.user_endpoint, self._task_partitions(sg, m.active), self._task_partitions(sg, m.standby)))
        return out

    def _task_partitions(self, sg: StreamsGroup, tasks: dict) -> list:
        out = []
        subs = sg.topology.by_id() if sg.topology is not None else {}
        for sid in sorted(tasks):
            s = subs.get(sid)
            if s is None:
                continue
            for topic in sorted(s.input_topics()):
                n = self._partitions_of(topic)
                if n is None:
                    continue
                ps = sorted(p for p in tasks[sid] if p < n)
                if ps:
                    out.append((topic, ps))
        return out

    # ------------------------------------------------------------------ internal topics
    def _streams_create_errors(self, sg: StreamsGroup, topics: dict) -> str:
        now = self.timers.now_ms()
        errs = [f"{t} ({e})" for t, (e, until) in sorted(sg.create_errors.items()) if t in topics and until > now]
        if not errs:
            return ""
        return ", ".join(errs[:3]) + (f" and {len(errs) - 3} more" if len(errs) > 3 else "")

    def create_streams_topics(self, group_id: str, topics: dict) -> None:
        """Create ``topics`` (name -> TopicInfo) in the background, once each at a time; a failure
        is remembered for two heartbeat intervals and shown in the status detail."""
        group = self.groups.get(group_id)
        if group is None or group.modern is None or group.modern.kind != STREAMS or self.create_topics is None:
            return
        sg = group.modern
        todo = {n: t for n, t in topics.items() if n not in sg.creating}
        if not todo:
            return
        sg.creating.update(todo)
        ttl = 2 * self._streams_cfg(group_id, "heartbeat.interval.ms")

        async def run():
            try:
                specs = [CreatableTopic(t.name, t.partitions, t.replication_factor or -1, None, dict(t.configs))
                         for t in todo.values()]
                results = await self.create_topics(specs)
                for r in results:
                    if r.error_code and r.error_code != E.TOPIC_ALREADY_EXISTS:
                        try:
                            text = E(r.error_code).name
                        except ValueError:
                            text = str(r.error_code)
                        sg.create_errors[r.name] = (f"{text}: {r.error_message}" if r.error_message else text,
                                                    self.timers.now_ms() + ttl)
                        log.warning("creating internal topic %s of streams group %s failed: %s", r.name, group_id,
                                    r.error_message or text)
                    else:
                        sg.create_errors.pop(r.name, None)
                        log.info("created internal topic %s of streams group %s", r.name, group_id)
            except asyncio.CancelledError:
                raise
            except Exception as e:        # the controller's own failure: remembered like a refusal
                for n in todo:
                    sg.create_errors[n] = (repr(e), self.timers.now_ms() + ttl)
                log.warning("creating internal topics of streams group %s failed: %r", group_id, e)
            finally:
                sg.creating.difference_update(todo)
        self._spawn(run())

    # ------------------------------------------------------------------ persistence
    @staticmethod
    def _streams_member_snapshot(sg: StreamsGroup, m: StreamsMember) -> tuple:
        t = sg.target.get(m.member_id, _EMPTY_TASKS)
        return (m.metadata(), tuple(_frozen(x) for x in t), m.current())

    def _streams_snapshot(self, sg: StreamsGroup) -> dict:
        return {"meta": (sg.group_epoch, sg.metadata_hash, sg.validated_epoch,
                         tuple(sorted(sg.assignment_configs.items()))),
                "topology": sg.topology, "assignment_epoch": sg.assignment_epoch,
                "members": {mid: self._streams_member_snapshot(sg, m) for mid, m in sg.members.items()}}

    def _streams_diff(self, group: Group, sg: StreamsGroup):
        old = sg.persisted
        marks = dict(sg.dirty)
        if old is None:
            old = {"meta": None, "topology": None, "assignment_epoch": None, "members": {}}
            dirty = set(sg.members) | set(marks)
        else:
            dirty = set(marks)
        gid = group.group_id
        members, meta_recs, target_recs, current_recs, tombstones = member_record_diff(
            gid, old["members"], sg.members, dirty, lambda m: self._streams_member_snapshot(sg, m), SR.key,
            (SR.MEMBER_METADATA, SR.TARGET_MEMBER, SR.CURRENT_ASSIGNMENT),
            (lambda m, snap: self._member_record(m),
             lambda m, snap: self._target_record(sg.target.get(m.member_id, _EMPTY_TASKS)),
             lambda m, snap: self._current_record(m)))
        new = {"meta": (sg.group_epoch, sg.metadata_hash, sg.validated_epoch,
                        tuple(sorted(sg.assignment_configs.items()))),
               "topology": sg.topology, "assignment_epoch": sg.assignment_epoch, "members": members}
        recs = [(group_key_record(gid), None)] if sg.classic_record else []
        recs += tombstones + meta_recs
        if new["topology"] is not None and new["topology"] != old["topology"]:
            cls = SR.value_class(SR.TOPOLOGY)
            recs.append((SR.key(SR.TOPOLOGY, gid), SR.encode(SR.TOPOLOGY, ST.topology_to_message(cls, sg.topology))))
        if new["meta"] != old["meta"]:
            cls = SR.value_class(SR.GROUP_METADATA)
            recs.append((SR.key(SR.GROUP_METADATA, gid), SR.encode(SR.GROUP_METADATA, cls(
                epoch=sg.group_epoch, metadata_hash=sg.metadata_hash, validated_topology_epoch=sg.validated_epoch,
                last_assignment_configs=[cls.LastAssignmentConfig(key=k, value=v)
                                         for k, v in sorted(sg.assignment_configs.items())]))))
        recs += target_recs
        if new["assignment_epoch"] != old["assignment_epoch"]:
            cls = SR.value_class(SR.TARGET_METADATA)
            recs.append((SR.key(SR.TARGET_METADATA, gid),
                         SR.encode(SR.TARGET_METADATA, cls(assignment_epoch=sg.assignment_epoch))))
        recs += current_recs
        return recs, new, marks

    @staticmethod
    def _member_record(m: StreamsMember) -> bytes:
        cls = SR.value_class(SR.MEMBER_METADATA)
        ep = None if m.user_endpoint is None else cls.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1])
        return SR.encode(SR.MEMBER_METADATA, cls(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms, topology_epoch=m.topology_epoch, process_id=m.process_id,
            user_endpoint=ep, client_tags=[cls.KeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())]))

    @staticmethod
    def _target_record(t: tuple) -> bytes:
        cls = SR.value_class(SR.TARGET_MEMBER)
        return SR.encode(SR.TARGET_MEMBER, cls(active_tasks=SR.task_ids(cls.TaskIds, t[0]),
                                               standby_tasks=SR.task_ids(cls.TaskIds, t[1]),
                                               warmup_tasks=SR.task_ids(cls.TaskIds, t[2])))

    @staticmethod
    def _current_record(m: StreamsMember) -> bytes:
        cls = SR.value_class(SR.CURRENT_ASSIGNMENT)
        T = cls.TaskIds
        return SR.encode(SR.CURRENT_ASSIGNMENT, cls(
            member_epoch=m.epoch, previous_member_epoch=m.previous_epoch, state=m.state,
            active_tasks=SR.task_ids(T, m.active, epochs=True), standby_tasks=SR.task_ids(T, m.standby),
            warmup_tasks=SR.task_ids(T, m.warmup),
            active_tasks_pending_revocation=SR.task_ids(T, m.rev_active, epochs=True),
            standby_tasks_pending_revocation=SR.task_ids(T, m.rev_standby),
            warmup_tasks_pending_revocation=SR.task_ids(T, m.rev_warmup)))

    def _streams_tombstones(self, group: Group) -> list:
        sg = group.modern
        if sg is None or sg.persisted is None:
            return []
        gid = group.group_id
        out = []
        for mid in sorted(sg.persisted["members"]):
            out += [(SR.key(SR.CURRENT_ASSIGNMENT, gid, mid), None), (SR.key(SR.TARGET_MEMBER, gid, mid), None),
                    (SR.key(SR.MEMBER_METADATA, gid, mid), None)]
        out += [(SR.key(SR.TARGET_METADATA, gid), None), (SR.key(SR.GROUP_METADATA, gid), None),
                (SR.key(SR.TOPOLOGY, gid), None)]
        sg.persisted = None
        return out

    def _load_streams(self, group: Group, data: dict) -> None:
        """Rebuild a streams group from its records (``data``: the last value of each key)."""
        sg = StreamsGroup()
        meta = data["epoch"]
        sg.group_epoch, sg.metadata_hash = meta.epoch, meta.metadata_hash
        sg.validated_epoch = meta.validated_topology_epoch
        sg.assignment_configs = {kv.key: kv.value for kv in meta.last_assignment_configs or ()}
        target_meta = data.get("assignment_epoch")
        sg.assignment_epoch = target_meta.assignment_epoch if target_meta is not None else 0
        topo = data.get("metadata")
        sg.topology = ST.topology_from_message(topo) if topo is not None else None
        for mid, recs in data.get("members", {}).items():
            mm = recs.get(SR.MEMBER_METADATA)
            if mm is None:
                continue
            m = StreamsMember(mid)
            m.instance_id, m.rack_id, m.client_id, m.client_host = mm.instance_id, mm.rack_id, mm.client_id, \
                mm.client_host
            m.rebalance_timeout_ms, m.topology_epoch, m.process_id = mm.rebalance_timeout_ms, mm.topology_epoch, \
                mm.process_id
            m.user_endpoint = None if mm.user_endpoint is None else (mm.user_endpoint.host, mm.user_endpoint.port)
            m.client_tags = {kv.key: kv.value for kv in mm.client_tags or ()}
            cur = recs.get(SR.CURRENT_ASSIGNMENT)
            if cur is not None:
                m.epoch, m.previous_epoch = cur.member_epoch, cur.previous_member_epoch
                m.state = cur.state if cur.state in (S_STABLE, S_UNREVOKED, S_UNRELEASED) else S_UNKNOWN
                m.active = SR.read_tasks(cur.active_tasks, True, m.epoch)
                m.standby, m.warmup = SR.read_tasks(cur.standby_tasks), SR.read_tasks(cur.warmup_tasks)
                m.rev_active = SR.read_tasks(cur.active_tasks_pending_revocation, True, m.epoch)
                m.rev_standby = SR.read_tasks(cur.standby_tasks_pending_revocation)
                m.rev_warmup = SR.read_tasks(cur.warmup_tasks_pending_revocation)
            tgt = recs.get(SR.TARGET_MEMBER)
            if tgt is not None:
                sg.target[mid] = (SR.read_tasks(tgt.active_tasks), SR.read_tasks(tgt.standby_tasks),
                                  SR.read_tasks(tgt.warmup_tasks))
            sg.members[mid] = m
        if sg.topology is not None:
            try:
                sg.configured = ST.configure(sg.topology, self._partitions_of)
            except ST.InvalidTopology:
                sg.configured = None
        sg.persisted = self._streams_snapshot(sg)
        group.modern = sg
        group.protocol_type = STREAMS
        self._sync_streams_fields(group)
        if sg.members:
            log.info("loaded streams group %s at epoch %d: %d members", group.group_id, sg.group_epoch,
                     len(sg.members))

    def _on_streams_loaded(self, group: Group) -> None:
        for m in group.modern.members.values():
            self._arm_streams_session(group, m)
            self._after_streams_reconcile(group, group.modern, m)

    # ------------------------------------------------------------------ offsets
    def _validate_streams_commit(self, group: Group, member_id: str, member_epoch: int, api_version: int | None,
                                 transactional: bool):
        """0, an error for the whole commit, or a function (topic, partition) -> error for a commit
        with an older member epoch (Kafka 4.2: accepted for the partitions of active tasks the
        member has held, or is revoking, since that epoch)."""
        sg: StreamsGroup = group.modern
        if member_epoch < 0 and not sg.members:
            return E.NONE
        if transactional and member_epoch == -1 and not member_id:
            return E.NONE
        member = sg.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if not transactional and api_version is not None and api_version < 9:
            return E.UNSUPPORTED_VERSION
        if member_epoch == member.epoch:
            return E.NONE
        if member_epoch > member.epoch or sg.topology is None:
            return E.STALE_MEMBER_EPOCH
        sources = sg.topology.source_topic_map()

        def check(topic: str, partition: int) -> int:
            sid = sources.get(topic)
            if sid is None:
                return E.STALE_MEMBER_EPOCH
            since = member.active.get(sid, {}).get(partition)
            if since is None:
                since = member.rev_active.get(sid, {}).get(partition)
            return E.STALE_MEMBER_EPOCH if since is None or member_epoch < since else E.NONE
        return check

    # ------------------------------------------------------------------ StreamsGroupDescribe
    def streams_group_describe(self, group_id: str):
        """(error, summary or message)."""
        if not group_id:
            return E.INVALID_GROUP_ID, None
        err = self._validate_group_status(group_id, "describe")
        if err:
            return err, None
        group = self.groups.get(group_id)
        if group is None or group.modern is None or group.modern.kind != STREAMS or group.is_(DEAD):
            other = (group is not None and not group.is_(DEAD)) or self.is_share_group(group_id)
            return E.GROUP_ID_NOT_FOUND, (f"Group {group_id} is not a streams group." if other
                                          else f"Group {group_id} not found.")
        sg: StreamsGroup = group.modern
        return E.NONE, {"state": sg.state(), "group_epoch": sg.group_epoch, "assignment_epoch": sg.assignment_epoch,
                        "topology": sg.topology, "configured": sg.configured,
                        "members": [(m, sg.target.get(m.member_id, _EMPTY_TASKS)) for m in sg.members.values()]}


def group_key_record(group_id: str) -> bytes:
    from broker.group import records as R
    return R.group_key(group_id)


__all__ = ["StreamsProtocolMixin", "StreamsGroup", "StreamsMember", "STREAMS", "NOT_READY"]

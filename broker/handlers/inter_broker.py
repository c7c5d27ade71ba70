"""ZooKeeper-mode cluster APIs.

Controller -> broker: LeaderAndIsr (4) v0-7, StopReplica (5) v0-4, UpdateMetadata (6) v0-8 —
applied by ``broker.replication`` / the metadata cache after the controller-epoch and
broker-epoch checks (STALE_CONTROLLER_EPOCH, STALE_BROKER_EPOCH).

Broker -> controller: ControlledShutdown (7) v0-3, AlterPartition (56) v0-3, AllocateProducerIds
(67) v0 — answered only by the active controller (NOT_CONTROLLER elsewhere), through its event
queue.  Odradek's brokers take their producer id blocks by writing /latest_producer_id_block
themselves (Kafka's way below IBP 3.0); the controller answers the request for any broker that
asks.

Admin -> controller: ElectLeaders (43) v0-2, AlterPartitionReassignments (45) v0,
ListPartitionReassignments (46) v0 — NOT_CONTROLLER unless this broker is the controller.
On the embedded store (one broker) AlterPartitionReassignments accepts the one possible
assignment, this broker, as already complete.

Without ZooKeeper (single node) the controller -> broker requests are refused with
STALE_CONTROLLER_EPOCH, ControlledShutdown succeeds at once, elections are never needed and
there is never a reassignment in progress.
"""
from __future__ import annotations


from broker.dispatch import handler
from broker.security import acl as A
from controller.api import reassignment_replicas_error
from protocol.errors import ErrorCode as E
from protocol.messages import (AllocateProducerIdsResponse, AlterPartitionReassignmentsResponse,
                               AlterPartitionResponse, ControlledShutdownResponse, ElectLeadersResponse, LeaderAndIsrResponse,
                               ListPartitionReassignmentsResponse, StopReplicaResponse,
                               UpdateMetadataResponse)


def _role(broker):
    role = getattr(broker.controller, "role", None)
    return role if role is not None and role.active else None


# ----------------------------------------------------------------------------- controller -> broker

@handler(4, 0, 7)
async def leader_and_isr(ctx, req):
    repl = ctx.broker.replicas.replication if ctx.broker.replicas else None
    if repl is None:
        return LeaderAndIsrResponse(error_code=E.STALE_CONTROLLER_EPOCH)
    return await repl.leader_and_isr(req, ctx.api_version)


@handler(5, 0, 4)
async def stop_replica(ctx, req):
    repl = ctx.broker.replicas.replication if ctx.broker.replicas else None
    if repl is None:
        return StopReplicaResponse(error_code=E.STALE_CONTROLLER_EPOCH)
    return repl.stop_replica(req, ctx.api_version)


@handler(6, 0, 8)
async def update_metadata(ctx, req):
    broker = ctx.broker
    repl = broker.replicas.replication if broker.replicas else None
    ctrl = broker.controller
    if repl is None or not hasattr(ctrl, "apply_update_metadata"):
        return UpdateMetadataResponse(error_code=E.STALE_CONTROLLER_EPOCH)
    err = repl._check_epochs(req.controller_epoch, req.broker_epoch)
    if err:
        return UpdateMetadataResponse(error_code=err)
    if ctx.api_version < 5:
        # group the old ungrouped layout by topic
        from protocol.messages import UpdateMetadataRequest as U
        grouped: dict[str, list] = {}
        for ps in req.ungrouped_partition_states:
            grouped.setdefault(ps.topic_name, []).append(ps)
        req.topic_states = [U.UpdateMetadataTopicState(topic_name=t, partition_states=ps)
                            for t, ps in grouped.items()]
    ctrl.apply_update_metadata(req)
    return UpdateMetadataResponse(error_code=0)


# ----------------------------------------------------------------------------- broker -> controller

@handler(7, 0, 3)
async def controlled_shutdown(ctx, req):
    R = ControlledShutdownResponse
    ctrl = ctx.broker.controller
    if not hasattr(ctrl, "role"):
        return R(error_code=0, remaining_partitions=[])
    role = _role(ctx.broker)
    if role is None:
        return R(error_code=E.NOT_CONTROLLER, remaining_partitions=[])
    epoch = req.broker_epoch if ctx.api_version >= 2 else -1
    try:
        err, remaining = await role.call("controlled_shutdown", req.broker_id, epoch)
    except Exception:
        return R(error_code=E.NOT_CONTROLLER, remaining_partitions=[])
    return R(error_code=err, remaining_partitions=[R.RemainingPartition(topic_name=t, partition_index=p)
                                                   for t, p in remaining])


@handler(67, 0, 0)
async def allocate_producer_ids(ctx, req):
    """AllocateProducerIds (67) v0: the next block of producer ids (/latest_producer_id_block) for
    a live broker at its current epoch, from the active controller; CLUSTER_ACTION on the
    cluster, else CLUSTER_AUTHORIZATION_FAILED.  The embedded store's broker answers for
    itself."""
    R = AllocateProducerIdsResponse

    def fail(code):
        return R(throttle_time_ms=0, error_code=code, producer_id_start=0, producer_id_len=0)

    if not ctx.authorize(A.CLUSTER_ACTION, A.CLUSTER, A.CLUSTER_NAME):
        return fail(E.CLUSTER_AUTHORIZATION_FAILED)
    ctrl = ctx.broker.controller
    if not hasattr(ctrl, "role"):
        if req.broker_id != ctx.broker.broker_id:
            return fail(E.BROKER_ID_NOT_REGISTERED)
        start, length = await ctrl.allocate_producer_ids(req.broker_id)
        return R(throttle_time_ms=0, error_code=0, producer_id_start=start, producer_id_len=length)
    role = _role(ctx.broker)
    if role is None:
        return fail(E.NOT_CONTROLLER)
    try:
        err, start, length = await role.call("allocate_producer_ids", req.broker_id, req.broker_epoch)
    except Exception:
        return fail(E.NOT_CONTROLLER)
    if err:
        return fail(err)
    return R(throttle_time_ms=0, error_code=0, producer_id_start=start, producer_id_len=length)


@handler(56, 0, 3)
async def alter_partition(ctx, req):
    R = AlterPartitionResponse
    role = _role(ctx.broker)
    if role is None:
        return R(throttle_time_ms=0, error_code=E.NOT_CONTROLLER, topics=[])
    v = ctx.api_version
    items = []
    names_by_id = {a.topic_id: t for t, a in role.assign.items() if a.topic_id is not None}
    unknown_ids = []
    for t in req.topics:
        name = t.topic_name if v < 2 else names_by_id.get(t.topic_id)
        if name is None:
            unknown_ids.append(t)
            continue
        for p in t.partitions:
            isr = list(p.new_isr) if v < 3 else [b.broker_id for b in p.new_isr_with_epochs]
            items.append((name, p.partition_index, p.leader_epoch, isr, p.leader_recovery_state,
                          p.partition_epoch))
    try:
        top, out = await role.call("alter_partition", req.broker_id, req.broker_epoch, items)
    except Exception:
        return R(throttle_time_ms=0, error_code=E.NOT_CONTROLLER, topics=[])
    if top:
        return R(throttle_time_ms=0, error_code=top, topics=[])
    by_topic: dict[str, list] = {}
    for (t, p), (err, s) in out.items():
        pd = R.PartitionData(partition_index=p, error_code=err, leader_id=-1, leader_epoch=-1, isr=[],
                             leader_recovery_state=0, partition_epoch=-1)
        if not err and s is not None:
            pd.leader_id, pd.leader_epoch, pd.isr = s.leader, s.leader_epoch, list(s.isr)
            pd.leader_recovery_state, pd.partition_epoch = s.leader_recovery_state, s.zk_version
        by_topic.setdefault(t, []).append(pd)
    topics = [R.TopicData(topic_name=t, topic_id=role.assign[t].topic_id if t in role.assign else None,
                          partitions=ps) for t, ps in by_topic.items()]
    for t in unknown_ids:
        topics.append(R.TopicData(topic_name="", topic_id=t.topic_id, partitions=[
            R.PartitionData(partition_index=p.partition_index, error_code=E.UNKNOWN_TOPIC_ID, leader_id=-1,
                            leader_epoch=-1, isr=[], partition_epoch=-1) for p in t.partitions]))
    return R(throttle_time_ms=0, error_code=0, topics=topics)


# ----------------------------------------------------------------------------- admin -> controller

@handler(43, 0, 2)
async def elect_leaders(ctx, req):
    R = ElectLeadersResponse
    v = ctx.api_version
    etype = req.election_type if v >= 1 else 0
    role = _role(ctx.broker)
    ctrl = ctx.broker.controller
    if req.topic_partitions is None:
        tps = None
    else:
        tps = [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
    if not hasattr(ctrl, "role"):
        # single node: the only replica always leads
        res = {}
        for tp in tps if tps is not None else [(n, p) for n, info in ctrl.topics().items() for p in info.partitions]:
            info = ctrl.topic(tp[0])
            res[tp] = E.ELECTION_NOT_NEEDED if info and tp[1] in info.partitions else E.UNKNOWN_TOPIC_OR_PARTITION
    elif role is None:
        return R(throttle_time_ms=0, error_code=E.NOT_CONTROLLER, replica_election_results=[])
    else:
        try:
            res = await role.call("elect_leaders", etype, tps)
        except Exception:
            return R(throttle_time_ms=0, error_code=E.NOT_CONTROLLER, replica_election_results=[])
    by_topic: dict[str, list] = {}
    for (t, p), err in sorted(res.items()):
        if tps is None and err == E.ELECTION_NOT_NEEDED:
            continue                      # Kafka leaves these out of an all-partitions answer
        by_topic.setdefault(t, []).append(R.PartitionResult(partition_id=p, error_code=err,
                                                            error_message=_election_message(err)))
    return R(throttle_time_ms=0, error_code=0, replica_election_results=[
        R.ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()])


def _election_message(err):
    return {0: None, E.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
            E.PREFERRED_LEADER_NOT_AVAILABLE: "Failed to elect leader for partition: preferred replica is not "
                                              "available or not in the ISR",
            E.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Failed to elect leader for partition: no eligible replica",
            E.UNKNOWN_TOPIC_OR_PARTITION: "The partition does not exist."}.get(err)


@handler(45, 0, 1)
async def alter_partition_reassignments(ctx, req):
    """v1 (Kafka 4.0, KIP-860): with AllowReplicationFactorChange false, a valid target whose
    size differs from the partition's replica set (or from the target of the reassignment in
    progress) is INVALID_REPLICATION_FACTOR, and nothing is done for it."""
    R = AlterPartitionReassignmentsResponse
    allow = ctx.api_version < 1 or req.allow_replication_factor_change
    # Kafka reads the request into a map: a partition named twice counts once, as its last entry
    last = {(t.name, p.partition_index): None if p.replicas is None else list(p.replicas)
            for t in req.topics for p in t.partitions}
    items = [(t, p, target) for (t, p), target in last.items()]
    refused = {} if allow else _replication_factor_changes(ctx.broker, items)
    todo = [i for i in items if (i[0], i[1]) not in refused]
    if not hasattr(ctx.broker.controller, "role"):
        out = _single_node_reassignments(ctx.broker, todo)
    else:
        role = _role(ctx.broker)
        if role is None:
            return R(throttle_time_ms=0, allow_replication_factor_change=allow, error_code=E.NOT_CONTROLLER,
                     error_message="This is not the correct controller for this cluster.", responses=[])
        try:
            out = await role.call("alter_reassignments", todo) if todo else {}
        except Exception:
            return R(throttle_time_ms=0, allow_replication_factor_change=allow, error_code=E.NOT_CONTROLLER,
                     error_message=None, responses=[])
    out = {**out, **refused}
    by_topic: dict[str, list] = {}
    for t, p, _ in items:
        err, msg = out.get((t, p), (0, None))
        by_topic.setdefault(t, []).append(R.ReassignablePartitionResponse(partition_index=p, error_code=err,
                                                                          error_message=msg))
    return R(throttle_time_ms=0, allow_replication_factor_change=allow, error_code=0, error_message=None, responses=[
        R.ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()])


def _replication_factor_changes(broker, items) -> dict:
    """{(topic, partition): (INVALID_REPLICATION_FACTOR, message)} for the valid targets that
    would change the partition's replication factor (Kafka's
    validatePartitionReplicationFactorUnchanged: the replica set, or the target of a
    reassignment in progress, against the new target).  Targets that are not valid are left to
    the usual checks, which Kafka makes first."""
    ctrl = broker.controller
    live = {b.id for b in ctrl.brokers()}
    out = {}
    for t, p, target in items:
        info = ctrl.topic(t)
        if target is None or info is None or p not in info.partitions:
            continue
        st = info.partitions[p]
        original = [r for r in st.replicas if r not in st.adding_replicas]
        if reassignment_replicas_error(original, target, live):
            continue
        current = (set(st.replicas) | set(st.adding_replicas)) - set(st.removing_replicas)
        if len(current) != len(target):
            out[(t, p)] = (E.INVALID_REPLICATION_FACTOR,
                           f"The replication factor is changed from {len(current)} to {len(target)}")
    return out


def _single_node_reassignments(broker, items) -> dict:
    """A single broker on the embedded store is its own controller: the only assignment a
    partition can have is this broker, so a valid reassignment changes nothing and completes at
    once (kafka-reassign-partitions.sh moving replicas between log dirs sends one), and nothing
    is ever in progress to cancel.  The checks and messages are the ZooKeeper controller's."""
    out = {}
    for t, p, target in items:
        info = broker.controller.topic(t)
        if info is None or p not in info.partitions:
            out[(t, p)] = (E.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
        elif target is None:
            out[(t, p)] = (E.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment in progress for this partition.")
        elif why := reassignment_replicas_error(info.partitions[p].replicas, target, {broker.broker_id}):
            out[(t, p)] = (E.INVALID_REPLICA_ASSIGNMENT, why)
        else:
            out[(t, p)] = (E.NONE, None)
    return out


@handler(46, 0, 0)
async def list_partition_reassignments(ctx, req):
    R = ListPartitionReassignmentsResponse
    ctrl = ctx.broker.controller
    if not hasattr(ctrl, "role"):
        return R(throttle_time_ms=0, error_code=0, error_message=None, topics=[])
    role = _role(ctx.broker)
    if role is None:
        return R(throttle_time_ms=0, error_code=E.NOT_CONTROLLER,
                 error_message="This is not the correct controller for this cluster.", topics=[])
    tps = None if req.topics is None else {(t.name, p) for t in req.topics for p in t.partition_indexes}
    try:
        rows = await role.call("list_reassignments", tps)
    except Exception:
        return R(throttle_time_ms=0, error_code=E.NOT_CONTROLLER, error_message=None, topics=[])
    by_topic: dict[str, list] = {}
    for t, p, reps, adding, removing in rows:
        by_topic.setdefault(t, []).append(R.OngoingPartitionReassignment(
            partition_index=p, replicas=reps, adding_replicas=adding, removing_replicas=removing))
    return R(throttle_time_ms=0, error_code=0, error_message=None, topics=[
        R.OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()])

"""Consumer-group APIs, served by the group coordinator (``ctx.broker.groups``).

Versions (Kafka 3.9's, and the newer ones Kafka 4.x clients send) and what differs between them:

* OffsetCommit (8) v0-10: v1 adds generation, member id and a per-partition commit timestamp
  (v1 only); v2-4 a retention time (-1: broker default); v6 leader epochs; v7 group instance id;
  v8+ flexible.  v0 is handled like v1 (Kafka kept v0 offsets in ZooKeeper).  v10 (Kafka 4.1)
  topics by id (``broker/handlers/topic_ids.py``).
* OffsetFetch (9) v0-10: v2 null topics = all partitions and a top-level error; v5 leader epochs;
  v6+ flexible; v7 ``require_stable``; v8 several groups per request; v9 member id/epoch (checked
  for consumer-protocol groups: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); v10 (Kafka 4.1) topics by id.
* FindCoordinator (10) v0-6: v1 key type and error message; v3+ flexible; v4 batched keys.
  Key type 0 (group) is answered; 1 (transaction) through ``ctx.broker.txns.find_coordinator``
  when the broker has one, else COORDINATOR_NOT_AVAILABLE; other types INVALID_REQUEST.
* JoinGroup (11) v0-9: v1 rebalance timeout (v0 uses the session timeout); v4 MEMBER_ID_REQUIRED
  for new members; v5 group instance id; v6+ flexible; v7 protocol type in the response (and a
  null protocol name); v8 reason; v9 ``skip_assignment`` for static leaders.
* Heartbeat (12) v0-4, LeaveGroup (13) v0-5, SyncGroup (14) v0-5: v3 (v3/v3/v3) group instance
  id; LeaveGroup v3 leaves several members at once, v5 reasons; SyncGroup v5 protocol type/name.
* DescribeGroups (15) v0-6: v3 authorized operations; v4 group instance ids; v5+ flexible; v6
  GROUP_ID_NOT_FOUND for a group that does not exist or is not classic.
* ListGroups (16) v0-5: v3+ flexible; v4 state filter; v5 type filter (classic or consumer).
* ConsumerGroupHeartbeat (68) v0-1 and ConsumerGroupDescribe (69) v0-1: the consumer group protocol of
  KIP-848 (``broker/group/consumer_protocol.py``); UNSUPPORTED_VERSION unless ``consumer`` is in
  ``group.coordinator.rebalance.protocols``.
* DeleteGroups (42) v0-2, OffsetDelete (47) v0.
"""
from __future__ import annotations

import logging

from broker.dispatch import handler
from broker.group.group import OffsetAndMetadata
from broker.group.hashing import partition_for
from broker.handlers.topic_ids import name_topics, topic_id_of
from protocol.errors import ErrorCode as E, error_message
from protocol.primitives import UUID0
from protocol.messages import (DeleteGroupsResponse, DescribeGroupsResponse, FindCoordinatorResponse,
                               HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, ListGroupsResponse,
                               OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse,
                               SyncGroupResponse)

log = logging.getLogger("odradek.group")

INT_MIN = -2147483648
# READ(3), DELETE(6), DESCRIBE(8): the operations a group supports, all allowed without an authorizer
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
GROUP_KEY, TXN_KEY = 0, 1


def _coordinator(ctx):
    return getattr(ctx.broker, "groups", None)


def _client_host(ctx) -> str:
    """Kafka records a member's host as Java's ``InetAddress.toString()``: ``/127.0.0.1``."""
    host = str(ctx.client_host or "")
    return host if host.startswith("/") else "/" + host


def _partition_exists(broker, topic: str, partition: int) -> bool:
    ctrl = getattr(broker, "controller", None)
    if ctrl is None:
        return True
    info = ctrl.topic(topic)
    return info is not None and partition in info.partitions


# ====================================================================== FindCoordinator
def _on_listener(ctx, node):
    """(node_id, host, port) of ``node`` on the listener this request came in on (Kafka answers
    with the coordinator's endpoint for the client's listener)."""
    listener = getattr(getattr(ctx, "connection", None), "listener_name", None)
    ctrl = getattr(ctx.broker, "controller", None)
    if listener and ctrl is not None:
        for b in ctrl.brokers():
            if b.id == node.node_id:
                for name, host, port, _proto in b.endpoints:
                    if name == listener:
                        return E.NONE, node.node_id, host, port
    return E.NONE, node.node_id, node.host, node.port


async def _find_one(ctx, key: str, key_type: int):
    """(error, node_id, host, port) for one coordinator key."""
    if key_type == GROUP_KEY:
        coord = _coordinator(ctx)
        if coord is None or not coord.active:
            return E.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        ensure = getattr(coord.log, "ensure_created", None)
        if ensure is not None:
            try:
                await ensure()
            except Exception as e:   # creation failed or is still in progress
                log.info("cannot create __consumer_offsets yet: %r", e)
                return E.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        node = coord.node_lookup(partition_for(key, coord.num_partitions))
        if node is None:
            return E.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return _on_listener(ctx, node)
    if key_type == TXN_KEY:
        txns = getattr(ctx.broker, "txns", None)
        finder = getattr(txns, "find_coordinator", None)
        if finder is None:
            return E.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        err, node = await finder(key)
        if err or node is None:
            return err or E.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return _on_listener(ctx, node)
    return E.INVALID_REQUEST, -1, "", -1


@handler(10, 0, 6)
async def find_coordinator(ctx, req):
    v = ctx.api_version
    if v >= 4:
        out = []
        for key in req.coordinator_keys:
            err, nid, host, port = await _find_one(ctx, key, req.key_type)
            out.append(FindCoordinatorResponse.Coordinator(
                key=key, node_id=nid, host=host, port=port, error_code=err,
                error_message=error_message(err) if err else None))
        return FindCoordinatorResponse(coordinators=out)
    err, nid, host, port = await _find_one(ctx, req.key, req.key_type if v >= 1 else GROUP_KEY)
    return FindCoordinatorResponse(error_code=err, error_message=error_message(err) if err else None,
                                   node_id=nid, host=host, port=port)


# ====================================================================== JoinGroup
@handler(11, 0, 9)
async def join_group(ctx, req):
    v = ctx.api_version
    coord = _coordinator(ctx)
    if coord is None:
        return _join_error(v, req.member_id, E.COORDINATOR_NOT_AVAILABLE)
    result = await coord.join_group(
        req.group_id, req.member_id, req.group_instance_id if v >= 5 else None,
        client_id=ctx.client_id or "", client_host=_client_host(ctx),
        rebalance_timeout_ms=req.session_timeout_ms if v == 0 else req.rebalance_timeout_ms,
        session_timeout_ms=req.session_timeout_ms, protocol_type=req.protocol_type,
        protocols=[(p.name, p.metadata) for p in req.protocols],
        require_known_member_id=v >= 4, support_skip_assignment=v >= 9,
        reason=req.reason if v >= 8 else None)
    members = [JoinGroupResponse.JoinGroupResponseMember(member_id=mid, group_instance_id=iid, metadata=meta)
               for mid, iid, meta in result.members]
    return JoinGroupResponse(
        error_code=result.error, generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if v >= 7 else (result.protocol_name or ""),
        leader=result.leader or "", skip_assignment=result.skip_assignment,
        member_id=result.member_id or "", members=members)


def _join_error(v, member_id, err):
    return JoinGroupResponse(error_code=err, generation_id=-1, protocol_type=None,
                             protocol_name=None if v >= 7 else "", leader="", member_id=member_id or "")


# ====================================================================== SyncGroup
@handler(14, 0, 5)
async def sync_group(ctx, req):
    v = ctx.api_version
    coord = _coordinator(ctx)
    if coord is None:
        return SyncGroupResponse(error_code=E.COORDINATOR_NOT_AVAILABLE)
    assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
    result = await coord.sync_group(
        req.group_id, req.generation_id, req.member_id, req.group_instance_id if v >= 3 else None,
        assignments, protocol_type=req.protocol_type if v >= 5 else None,
        protocol_name=req.protocol_name if v >= 5 else None)
    return SyncGroupResponse(error_code=result.error, protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment or b"")


# ====================================================================== Heartbeat
@handler(12, 0, 4)
async def heartbeat(ctx, req):
    coord = _coordinator(ctx)
    if coord is None:
        return HeartbeatResponse(error_code=E.COORDINATOR_NOT_AVAILABLE)
    err = coord.heartbeat(req.group_id, req.member_id, req.group_instance_id if ctx.api_version >= 3 else None,
                          req.generation_id)
    return HeartbeatResponse(error_code=err)


# ====================================================================== LeaveGroup
@handler(13, 0, 5)
async def leave_group(ctx, req):
    v = ctx.api_version
    coord = _coordinator(ctx)
    if v >= 3:
        leaving = [(m.member_id, m.group_instance_id, m.reason if v >= 5 else None) for m in req.members]
    else:
        leaving = [(req.member_id, None, None)]
    if coord is None:
        err, errors = E.COORDINATOR_NOT_AVAILABLE, []
    else:
        err, errors = await coord.leave_group(req.group_id, leaving)
    if v >= 3:
        members = [] if err else [
            LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=e)
            for (mid, iid, _), e in zip(leaving, errors)]
        return LeaveGroupResponse(error_code=err, members=members)
    if not err:
        err = next((e for e in errors if e), E.NONE)
    return LeaveGroupResponse(error_code=err)


# ====================================================================== OffsetCommit
def _java_long(n: int) -> int:
    """``n`` wrapped to a signed 64-bit integer, as Java's long arithmetic does."""
    return (n + (1 << 63)) % (1 << 64) - (1 << 63)


@handler(8, 0, 10)
async def offset_commit(ctx, req):
    """v10 (Kafka 4.1) names topics by id: an id of no topic is UNKNOWN_TOPIC_ID, answered
    first, as Kafka's response builder has it."""
    v = ctx.api_version
    coord = _coordinator(ctx)
    ctrl = ctx.broker.controller
    R = OffsetCommitResponse
    named, unknown = req.topics, []
    if v >= 10:
        name_topics(ctrl, req.topics)
        named = [t for t in req.topics if t.name]
        unknown = [R.OffsetCommitResponseTopic(topic_id=t.topic_id, partitions=[
            R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=E.UNKNOWN_TOPIC_ID)
            for p in t.partitions]) for t in req.topics if not t.name]
    now = coord.timers.now_ms() if coord is not None else 0
    retention = req.retention_time_ms if 2 <= v <= 4 else -1
    # Kafka adds the two as Java longs: a huge retention wraps to a negative expire timestamp,
    # stored as such and expired at the next check (-1 alone means none)
    expire = _java_long(now + retention) if retention != -1 else -1
    results: dict = {}
    order: list = []
    offsets = {}
    for t in named:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if not _partition_exists(ctx.broker, t.name, p.partition_index):
                results[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
                continue
            commit_ts = p.commit_timestamp if v == 1 and p.commit_timestamp != -1 else now
            offsets[tp] = OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch if v >= 6 else -1,
                                            p.committed_metadata or "", commit_ts, expire)
    if offsets:
        if coord is None:
            results.update({tp: E.COORDINATOR_NOT_AVAILABLE for tp in offsets})
        else:
            results.update(await coord.commit_offsets(
                req.group_id, req.member_id if v >= 1 else "", req.group_instance_id if v >= 7 else None,
                req.generation_id_or_member_epoch if v >= 1 else -1, offsets, api_version=v))
    topics: dict[str, list] = {}
    for tp in dict.fromkeys(order):
        topics.setdefault(tp[0], []).append(R.OffsetCommitResponsePartition(
            partition_index=tp[1], error_code=results.get(tp, E.UNKNOWN_SERVER_ERROR)))
    return R(topics=unknown + [R.OffsetCommitResponseTopic(
        name=n, topic_id=topic_id_of(ctrl, n) if v >= 10 else UUID0, partitions=ps) for n, ps in topics.items()])


# ====================================================================== OffsetFetch
def _fetch_group(coord, group_id, topics, require_stable, member=None):
    """(group error, {topic: [(partition, offset, epoch, metadata, error)]}).  ``member``:
    (member id, member epoch) of a v9 request, checked against a consumer-protocol group."""
    if coord is None:
        return E.COORDINATOR_NOT_AVAILABLE, {}
    if member is not None and not coord._validate_group_status(group_id, "fetch"):
        err = coord.validate_modern_fetch(group_id, *member)
        if err:
            return err, {}
    # a partition asked twice is answered once (Kafka collects the answers in a map)
    partitions = None if topics is None else \
        list(dict.fromkeys((t.name, p) for t in topics for p in t.partition_indexes))
    err, rows = coord.fetch_offsets(group_id, partitions, require_stable)
    out: dict[str, list] = {}
    if err:
        for t, p in partitions or []:
            out.setdefault(t, []).append((p, -1, -1, "", err))
        return err, out
    for (t, p), om, e in rows:
        if om is None:
            out.setdefault(t, []).append((p, -1, -1, "", e))
        else:
            out.setdefault(t, []).append((p, om.offset, om.leader_epoch, om.metadata, e))
    return E.NONE, out


@handler(9, 0, 10)
async def offset_fetch(ctx, req):
    """v10 (Kafka 4.1) names topics by id: an id of no topic is answered UNKNOWN_TOPIC_ID after
    the others; asked for all its offsets, a group's topics that no longer exist are left out
    (without an id they cannot be named), as Kafka does."""
    v = ctx.api_version
    coord = _coordinator(ctx)
    ctrl = ctx.broker.controller
    R = OffsetFetchResponse
    if v >= 8:
        groups = []
        for g in req.groups:
            asked, unknown = g.topics, []
            if v >= 10 and asked is not None:
                name_topics(ctrl, asked)
                unknown = [R.OffsetFetchResponseTopics(topic_id=t.topic_id, partitions=[
                    R.OffsetFetchResponsePartitions(partition_index=p, committed_offset=-1,
                                                    error_code=E.UNKNOWN_TOPIC_ID) for p in t.partition_indexes])
                    for t in asked if not t.name]
                asked = [t for t in asked if t.name]
            err, topics = _fetch_group(coord, g.group_id, asked, req.require_stable,
                                       (g.member_id, g.member_epoch) if v >= 9 else None)
            answered = [] if err else [R.OffsetFetchResponseTopics(
                name=n, topic_id=topic_id_of(ctrl, n) if v >= 10 else UUID0, partitions=[
                    R.OffsetFetchResponsePartitions(partition_index=p, committed_offset=o, committed_leader_epoch=le,
                                                    metadata=m, error_code=e) for p, o, le, m, e in ps])
                for n, ps in topics.items()]
            if v >= 10:
                answered = [t for t in answered if t.topic_id != UUID0]
            groups.append(R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=err,
                                                     topics=[] if err else answered + unknown))
        return R(groups=groups)
    # before v2 there is no top-level error: every requested partition carries it
    err, topics = _fetch_group(coord, req.group_id, req.topics, req.require_stable if v >= 7 else False)
    resp_topics = [R.OffsetFetchResponseTopic(name=n, partitions=[
        R.OffsetFetchResponsePartition(partition_index=p, committed_offset=o, committed_leader_epoch=le,
                                       metadata=m, error_code=e) for p, o, le, m, e in ps])
        for n, ps in topics.items()]
    if v >= 2 and err:
        resp_topics = []
    return R(error_code=err if v >= 2 else 0, topics=resp_topics)


# ====================================================================== OffsetDelete
@handler(47, 0, 0)
async def offset_delete(ctx, req):
    coord = _coordinator(ctx)
    R = OffsetDeleteResponse
    if coord is None:
        return R(error_code=E.COORDINATOR_NOT_AVAILABLE)
    results: dict = {}
    order = []
    wanted = []
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if _partition_exists(ctx.broker, t.name, p.partition_index):
                wanted.append(tp)
            else:
                results[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
    err, per = await coord.delete_offsets(req.group_id, wanted)
    if err:
        return R(error_code=err)
    results.update(per)
    topics: dict[str, list] = {}
    for tp in dict.fromkeys(order):
        topics.setdefault(tp[0], []).append(R.OffsetDeleteResponsePartition(
            partition_index=tp[1], error_code=results.get(tp, E.NONE)))
    return R(error_code=E.NONE, topics=[R.OffsetDeleteResponseTopic(name=n, partitions=ps)
                                        for n, ps in topics.items()])


# ====================================================================== DescribeGroups / ListGroups / DeleteGroups
@handler(15, 0, 6)
async def describe_groups(ctx, req):
    """From v6 (KIP-1043) a group that does not exist, or is not a classic group, is
    GROUP_ID_NOT_FOUND with Kafka's message; before, it is Dead with no error."""
    v = ctx.api_version
    coord = _coordinator(ctx)
    R = DescribeGroupsResponse
    ops = GROUP_AUTHORIZED_OPERATIONS if v >= 3 and req.include_authorized_operations else INT_MIN
    out = []
    for gid in req.groups:
        if coord is None:
            out.append(R.DescribedGroup(error_code=E.COORDINATOR_NOT_AVAILABLE, group_id=gid,
                                        authorized_operations=INT_MIN))
            continue
        err, s = coord.describe_group(gid)
        message = None
        if v >= 6 and not err and s.get("not_found"):
            err, message = E.GROUP_ID_NOT_FOUND, s["not_found"]
        members = [R.DescribedGroupMember(member_id=mid, group_instance_id=iid, client_id=cid, client_host=host,
                                          member_metadata=meta, member_assignment=asg)
                   for mid, iid, cid, host, meta, asg in s["members"]]
        out.append(R.DescribedGroup(error_code=err, error_message=message, group_id=gid, group_state=s["state"],
                                    protocol_type=s["protocol_type"], protocol_data=s["protocol"],
                                    members=members, authorized_operations=INT_MIN if err else ops))
    return R(groups=out)


@handler(16, 0, 5)
async def list_groups(ctx, req):
    v = ctx.api_version
    coord = _coordinator(ctx)
    if coord is None:
        return ListGroupsResponse(error_code=E.COORDINATOR_NOT_AVAILABLE)
    err, groups = coord.list_groups(req.states_filter if v >= 4 else (), req.types_filter if v >= 5 else ())
    return ListGroupsResponse(error_code=err, groups=[
        ListGroupsResponse.ListedGroup(group_id=gid, protocol_type=pt, group_state=st, group_type=gt)
        for gid, pt, st, gt in groups])


@handler(42, 0, 2)
async def delete_groups(ctx, req):
    coord = _coordinator(ctx)
    names = list(dict.fromkeys(req.groups_names))
    if coord is None:
        res = {g: E.COORDINATOR_NOT_AVAILABLE for g in names}
    else:
        res = await coord.delete_groups(names)
    return DeleteGroupsResponse(results=[DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=res[g])
                                         for g in names])

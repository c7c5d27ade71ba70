"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat (68) v0-1 and ConsumerGroupDescribe
(69) v0-1, served by the group coordinator (``broker/group/consumer_protocol.py``).  Heartbeat v1
(Kafka 4.0) adds SubscribedTopicRegex and has the client make its member id.  Describe v1 (Kafka
4.0, KIP-1099) says of each member whether it speaks the classic protocol (a member of a migrated
group, still joining and syncing) or the consumer protocol.

Both are advertised by ApiVersions as Kafka does; with ``consumer`` left out of
``group.coordinator.rebalance.protocols`` they answer UNSUPPORTED_VERSION.
"""
from __future__ import annotations

from broker.dispatch import handler
from broker.handlers.groups import GROUP_AUTHORIZED_OPERATIONS, INT_MIN, _client_host, _coordinator
from protocol.errors import ErrorCode as E
from protocol.messages import ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse

CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1       # ConsumerGroupDescribe v1 MemberType


@handler(68, 0, 1)
async def consumer_group_heartbeat(ctx, req):
    R = ConsumerGroupHeartbeatResponse
    coord = _coordinator(ctx)
    if coord is None:
        return R(error_code=E.COORDINATOR_NOT_AVAILABLE)
    out = await coord.consumer_group_heartbeat(
        group_id=req.group_id, member_id=req.member_id, member_epoch=req.member_epoch,
        instance_id=req.instance_id, rack_id=req.rack_id, rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed=req.subscribed_topic_names, server_assignor=req.server_assignor, owned=req.topic_partitions,
        client_id=ctx.client_id or "", client_host=_client_host(ctx),
        regex=req.subscribed_topic_regex if ctx.api_version >= 1 else None, api_version=ctx.api_version)
    assignment = None
    if out["assignment"] is not None:
        assignment = R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=tid, partitions=sorted(ps))
            for tid, ps in sorted(out["assignment"].items(), key=lambda kv: str(kv[0])) if ps])
    return R(error_code=out["error"], error_message=out["message"], member_id=out["member_id"],
             member_epoch=out["member_epoch"], heartbeat_interval_ms=out["heartbeat_interval_ms"],
             assignment=assignment)


def _described_assignment(coord, parts: dict):
    D = ConsumerGroupDescribeResponse
    out = []
    for tid, ps in sorted(parts.items(), key=lambda kv: str(kv[0])):
        info = coord.topic_by_id(tid) if coord.topic_by_id is not None else None
        if info is None or not ps:
            continue
        out.append(D.TopicPartitions(topic_id=tid, topic_name=info.name, partitions=sorted(ps)))
    return D.Assignment(topic_partitions=out)


@handler(69, 0, 1)
async def consumer_group_describe(ctx, req):
    D = ConsumerGroupDescribeResponse
    coord = _coordinator(ctx)
    ops = GROUP_AUTHORIZED_OPERATIONS if req.include_authorized_operations else INT_MIN
    groups = []
    for gid in req.group_ids:
        if coord is None:
            groups.append(D.DescribedGroup(error_code=E.COORDINATOR_NOT_AVAILABLE, group_id=gid, group_state="",
                                           assignor_name=""))
            continue
        if not coord.consumer_protocol_enabled():
            groups.append(D.DescribedGroup(error_code=E.UNSUPPORTED_VERSION, group_id=gid, group_state="",
                                           assignor_name=""))
            continue
        err, s = coord.consumer_group_describe(gid)
        if err:
            groups.append(D.DescribedGroup(error_code=err, error_message=s if isinstance(s, str) else None,
                                           group_id=gid, group_state="", assignor_name=""))
            continue
        members = [D.Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                            member_epoch=m.epoch, client_id=m.client_id, client_host=m.client_host,
                            subscribed_topic_names=list(m.subscribed), subscribed_topic_regex=m.regex,
                            assignment=_described_assignment(coord, m.assigned),
                            target_assignment=_described_assignment(coord, target),
                            member_type=CLASSIC_MEMBER if m.classic is not None else CONSUMER_MEMBER)
                   for m, target in s["members"]]
        groups.append(D.DescribedGroup(error_code=E.NONE, group_id=gid, group_state=s["state"],
                                       group_epoch=s["group_epoch"], assignment_epoch=s["assignment_epoch"],
                                       assignor_name=s["assignor"], members=members,
                                       authorized_operations=ops))
    return D(groups=groups)

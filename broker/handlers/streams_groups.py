"""Streams groups (KIP-1071, Kafka 4.2): StreamsGroupHeartbeat (88) v0 and StreamsGroupDescribe (89)
v0, served by the group coordinator (``broker/group/streams_protocol.py``).

Both are advertised as Kafka 4.2 advertises them; with ``streams`` left out of
``group.coordinator.rebalance.protocols`` they answer UNSUPPORTED_VERSION.  A heartbeat whose
group misses internal topics (repartition and changelog topics) starts their creation when the
client may create topics (CREATE on the cluster, else on each topic; always without an
authorizer), else the status says which it may not create.
"""
from __future__ import annotations

from broker.dispatch import handler
from broker.handlers.groups import GROUP_AUTHORIZED_OPERATIONS, INT_MIN, _client_host, _coordinator
from broker.security import acl as A
from protocol.errors import ErrorCode as E
from protocol.messages import StreamsGroupDescribeResponse, StreamsGroupHeartbeatResponse

_MISSING_INTERNAL_TOPICS = 3


def _task_ids(cls, tasks: dict) -> list:
    return [cls(subtopology_id=sid, partitions=sorted(ps)) for sid, ps in sorted(tasks.items()) if ps]


@handler(88, 0, 0)
async def streams_group_heartbeat(ctx, req):
    R = StreamsGroupHeartbeatResponse
    coord = _coordinator(ctx)
    if coord is None:
        return R(error_code=E.COORDINATOR_NOT_AVAILABLE, member_id="")
    out = await coord.streams_group_heartbeat(
        group_id=req.group_id, member_id=req.member_id, member_epoch=req.member_epoch,
        endpoint_epoch=req.endpoint_information_epoch, instance_id=req.instance_id, rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms, topology=req.topology, active=req.active_tasks,
        standby=req.standby_tasks, warmup=req.warmup_tasks, process_id=req.process_id,
        user_endpoint=req.user_endpoint, client_tags=req.client_tags, task_offsets=req.task_offsets,
        task_end_offsets=req.task_end_offsets, shutdown=req.shutdown_application, client_id=ctx.client_id or "",
        client_host=_client_host(ctx))
    if out["error"]:
        return R(error_code=out["error"], error_message=out["message"], member_id="")
    status = [list(s) for s in out["status"]]
    if out["create"]:
        allowed = ctx.authorize(A.CREATE, A.CLUSTER, A.CLUSTER_NAME)
        denied = [] if allowed else sorted(t for t in out["create"] if not ctx.authorize(A.CREATE, A.TOPIC, t))
        if denied:
            note = f"Unauthorized to CREATE on topics {', '.join(denied)}."
            for s in status:
                if s[0] == _MISSING_INTERNAL_TOPICS:
                    s[1] += "; " + note
                    break
            else:
                status.append([_MISSING_INTERNAL_TOPICS, note])
        else:
            coord.create_streams_topics(req.group_id, out["create"])
    resp = R(error_code=E.NONE, member_id=out["member_id"], member_epoch=out["member_epoch"],
             heartbeat_interval_ms=out["heartbeat_interval_ms"], endpoint_information_epoch=out["endpoint_epoch"],
             status=[R.Status(status_code=c, status_detail=d) for c, d in status])
    if out["tasks"] is not None:
        active, standby, warmup = out["tasks"]
        resp.active_tasks = _task_ids(R.TaskIds, active)
        resp.standby_tasks = _task_ids(R.TaskIds, standby)
        resp.warmup_tasks = _task_ids(R.TaskIds, warmup)
    if out["endpoints"] is not None:
        resp.partitions_by_user_endpoint = [R.EndpointToPartitions(
            user_endpoint=R.Endpoint(host=host, port=port),
            active_partitions=[R.TopicPartition(topic=t, partitions=ps) for t, ps in act],
            standby_partitions=[R.TopicPartition(topic=t, partitions=ps) for t, ps in stb])
            for (host, port), act, stb in out["endpoints"]]
    return resp


def _describe_topology(D, topology, configured):
    if topology is None:
        return None
    if configured is not None and configured.ready:
        subs = []
        for s in sorted(topology.subtopologies, key=lambda s: s.subtopology_id):
            def info(t):
                got = configured.internal.get(t.name, t)
                return D.TopicInfo(name=t.name, partitions=got.partitions, replication_factor=t.replication_factor,
                                   topic_configs=[D.KeyValue(key=k, value=v) for k, v in sorted(t.configs)])
            subs.append(D.Subtopology(
                subtopology_id=s.subtopology_id, source_topics=sorted(s.source_topics),
                repartition_sink_topics=sorted(s.repartition_sink_topics),
                state_changelog_topics=[info(t) for t in sorted(s.state_changelog_topics, key=lambda t: t.name)],
                repartition_source_topics=[info(t) for t in sorted(s.repartition_source_topics,
                                                                   key=lambda t: t.name)]))
        return D.Topology(epoch=topology.epoch, subtopologies=subs)

    def raw(t):
        return D.TopicInfo(name=t.name, partitions=t.partitions, replication_factor=t.replication_factor,
                           topic_configs=[D.KeyValue(key=k, value=v) for k, v in t.configs])
    return D.Topology(epoch=topology.epoch, subtopologies=[D.Subtopology(
        subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
        repartition_sink_topics=list(s.repartition_sink_topics),
        state_changelog_topics=[raw(t) for t in s.state_changelog_topics],
        repartition_source_topics=[raw(t) for t in s.repartition_source_topics]) for s in topology.subtopologies])


def _assignment(D, tasks: tuple):
    active, standby, warmup = tasks
    return D.Assignment(active_tasks=_task_ids(D.TaskIds, active), standby_tasks=_task_ids(D.TaskIds, standby),
                        warmup_tasks=_task_ids(D.TaskIds, warmup))


@handler(89, 0, 0)
async def streams_group_describe(ctx, req):
    D = StreamsGroupDescribeResponse
    coord = _coordinator(ctx)
    ops = GROUP_AUTHORIZED_OPERATIONS if req.include_authorized_operations else INT_MIN
    groups = []
    for gid in req.group_ids:
        if coord is None or not coord.streams_protocol_enabled():
            code = E.COORDINATOR_NOT_AVAILABLE if coord is None else E.UNSUPPORTED_VERSION
            groups.append(D.DescribedGroup(error_code=code, group_id=gid, group_state=""))
            continue
        err, s = coord.streams_group_describe(gid)
        if err:
            groups.append(D.DescribedGroup(error_code=err, error_message=s if isinstance(s, str) else None,
                                           group_id=gid, group_state=""))
            continue
        members = []
        for m, target in s["members"]:
            ep = None if m.user_endpoint is None else D.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1])
            members.append(D.Member(
                member_id=m.member_id, member_epoch=m.epoch, instance_id=m.instance_id, rack_id=m.rack_id,
                client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch,
                process_id=m.process_id, user_endpoint=ep,
                client_tags=[D.KeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())],
                task_offsets=[], task_end_offsets=[],
                assignment=_assignment(D, (m.active, m.standby, m.warmup)), target_assignment=_assignment(D, target),
                is_classic=False))
        groups.append(D.DescribedGroup(error_code=E.NONE, group_id=gid, group_state=s["state"],
                                       group_epoch=s["group_epoch"], assignment_epoch=s["assignment_epoch"],
                                       topology=_describe_topology(D, s["topology"], s["configured"]),
                                       members=members, authorized_operations=ops))
    return D(groups=groups)

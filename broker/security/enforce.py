"""Authorization of every request, in one place, with Kafka's per-API rules and error codes.

When an authorizer is configured, the connection hands each request to ``Enforcer.handle``
instead of calling the handler directly.  A rule per API key either answers the whole request
with an authorization error, or hands the handler a request stripped of the items the principal
may not touch and then adds those items back to the response with the item's error
(TOPIC_AUTHORIZATION_FAILED 29, GROUP_AUTHORIZATION_FAILED 30, CLUSTER_AUTHORIZATION_FAILED 31,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED 53).  The handlers themselves stay unaware of
authorization, so with no authorizer nothing changes at all.

Rules (the operation checked, on which resource):

* Produce: WRITE on each topic; WRITE on the transactional id when one is set.
* Fetch: from a follower CLUSTER_ACTION on the cluster (without it every partition is answered
  TOPIC_AUTHORIZATION_FAILED, as Kafka does); from a consumer READ on each topic, checked by the
  handler itself because an incremental fetch reads partitions its request does not name.
* ListOffsets, OffsetForLeaderEpoch (consumers): DESCRIBE on each topic.
* Metadata: DESCRIBE on each topic — unauthorized topics are left out of an all-topics answer
  and answered TOPIC_AUTHORIZATION_FAILED when named; auto-creation needs CREATE on the cluster
  or the topic.  The authorized-operations bitfields are filled in when asked for.
* Group APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit): READ on the group;
  OffsetCommit also READ on each topic.  OffsetFetch: DESCRIBE on the group, DESCRIBE on the
  topics (unauthorized ones are dropped from an all-partitions answer).  DescribeGroups:
  DESCRIBE per group.  ConsumerGroupHeartbeat: READ on the group and DESCRIBE on every
  subscribed topic (TOPIC_AUTHORIZATION_FAILED naming them); ConsumerGroupDescribe: DESCRIBE per
  group.  ListGroups: DESCRIBE on the cluster lists every group, otherwise the
  groups the principal may DESCRIBE.  DeleteGroups: DELETE per group.  OffsetDelete: DELETE on
  the group and READ on the topics.  FindCoordinator: DESCRIBE on the group/transactional id.
* CreateTopics: CREATE on the cluster or the topic.  DeleteTopics, DeleteRecords: DELETE on the
  topic.  CreatePartitions: ALTER on the topic.
* DescribeConfigs: DESCRIBE_CONFIGS, AlterConfigs/IncrementalAlterConfigs: ALTER_CONFIGS, on the
  topic, the group or (brokers, broker loggers, client metrics subscriptions) the cluster.
  ListClientMetricsResources: DESCRIBE_CONFIGS on the cluster.
* InitProducerId: WRITE on the transactional id; without one IDEMPOTENT_WRITE on the cluster or
  WRITE on some topic (KIP-679).
* DescribeCluster, DescribeLogDirs, ListPartitionReassignments, DescribeQuorum: DESCRIBE on the
  cluster (DescribeQuorum's refusal carries Kafka's top-level error message);
  ElectLeaders, AlterPartitionReassignments, AlterReplicaLogDirs: ALTER on the cluster; inter-broker APIs
  (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, AlterPartition):
  CLUSTER_ACTION on the cluster.
* AddPartitionsToTxn: below v4 WRITE on the transactional id and on each topic (one refused
  topic fails the whole transaction's request: 29 for it, OPERATION_NOT_ATTEMPTED for the rest);
  v4+ (broker to broker) CLUSTER_ACTION.  AddOffsetsToTxn: WRITE on the transactional id, READ on
  the group.  EndTxn: WRITE on the transactional id.  TxnOffsetCommit: WRITE on the
  transactional id, READ on the group and on each topic.  DescribeTransactions: DESCRIBE per
  transactional id (topics the principal may not DESCRIBE are left out); ListTransactions:
  the ids the principal may DESCRIBE.  WriteTxnMarkers: CLUSTER_ACTION.
* DescribeProducers: READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).
* DescribeClientQuotas: DESCRIBE_CONFIGS on the cluster; AlterClientQuotas: ALTER_CONFIGS on the
  cluster (CLUSTER_AUTHORIZATION_FAILED for the whole request / every entry).
* ApiVersions, SASL, the ACL, SCRAM and delegation token APIs, UpdateFeatures (ALTER on the
  cluster) and AllocateProducerIds (CLUSTER_ACTION) check for themselves.  Any other API (a handler
  added later without a rule here) needs CLUSTER_ACTION, or the connection is closed — closed by
  default rather than open by default.
"""
from __future__ import annotations

import logging

from broker.handlers.topic_ids import name_topics
from broker.security import acl as A
from controller.api import is_internal_topic
from protocol.messages import RESPONSES
from protocol.primitives import UUID0

log = logging.getLogger("odradek.authorizer")

T_AUTH, G_AUTH, C_AUTH, TX_AUTH = 29, 30, 31, 53
UNKNOWN_TOPIC, NOT_ATTEMPTED = 3, 55
INT_MIN = -2147483648
# 75: DESCRIBE per topic, before paging; 71/72 (KIP-714 telemetry): no ACL guards them in Kafka
SELF_CHECKING = {17, 18, 29, 30, 31, 36, 38, 39, 40, 41, 50, 51, 57, 67, 71, 72, 75}


class Enforcer:
    def __init__(self, authorizer):
        self.authorizer = authorizer

    async def handle(self, ctx, key: int, req, call):
        if key in SELF_CHECKING:
            return await call(ctx, req)
        rule = RULES.get(key)
        if rule is None:
            if ctx.authorize(A.CLUSTER_ACTION, A.CLUSTER, A.CLUSTER_NAME):
                return await call(ctx, req)
            log.info("closing connection of %s: %s has no authorization rule and the principal lacks "
                     "CLUSTER_ACTION", ctx.principal, type(req).__name__)
            ctx.connection.close()
            return None
        return await rule(ctx, req, call)


# ----------------------------------------------------------------------------------- helpers
def _ok(ctx, op, rtype, name) -> bool:
    return ctx.authorize(op, rtype, name)


def _cluster(ctx, op) -> bool:
    return ctx.authorize(op, A.CLUSTER, A.CLUSTER_NAME)


def _resp(ctx, key, **fields):
    return RESPONSES[key](**fields)


def _whole(op, rtype, name_of, code, key):
    """A rule that allows or refuses the whole request (top-level error_code)."""
    async def rule(ctx, req, call):
        if _ok(ctx, op, rtype, name_of(req)):
            return await call(ctx, req)
        return _resp(ctx, key, error_code=code)
    return rule


def _cluster_rule(op, key, error_field="error_code", deny=None):
    async def rule(ctx, req, call):
        if _cluster(ctx, op):
            return await call(ctx, req)
        if deny is not None:
            return deny(ctx, req)
        return _resp(ctx, key, **{error_field: C_AUTH})
    return rule


def _topic_names_by_id(ctx):
    return {t.topic_id: name for name, t in ctx.broker.controller.topics().items()}


# ----------------------------------------------------------------------------------- data path
async def _produce(ctx, req, call):
    R = RESPONSES[0]
    v = ctx.api_version
    if v >= 13:                  # topics by id: named first; an unknown id is left to the handler
        name_topics(ctx.broker.controller, req.topic_data)
    txn = getattr(req, "transactional_id", None)
    if txn and not _ok(ctx, A.WRITE, A.TRANSACTIONAL_ID, txn):
        return R(responses=[R.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
            R.PartitionProduceResponse(index=p.index, error_code=TX_AUTH) for p in t.partition_data])
            for t in req.topic_data])
    denied = [t for t in req.topic_data
              if (t.name or v < 13) and not _ok(ctx, A.WRITE, A.TOPIC, t.name)]
    if not denied:
        return await call(ctx, req)
    req.topic_data = [t for t in req.topic_data if t not in denied]
    resp = await call(ctx, req) if req.topic_data else (None if req.acks == 0 else R(responses=[]))
    if resp is None:
        return None
    resp.responses = list(resp.responses) + [R.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
        R.PartitionProduceResponse(index=p.index, error_code=T_AUTH) for p in t.partition_data]) for t in denied]
    return resp


async def _fetch(ctx, req, call):
    R = RESPONSES[1]
    v = ctx.api_version
    replica = req.replica_id if v < 15 else req.replica_state.replica_id
    def refused(topics):
        out = []
        for t in topics:
            parts = [R.PartitionData(partition_index=p.partition, error_code=T_AUTH, high_watermark=-1,
                                     last_stable_offset=-1, log_start_offset=-1, records=None) for p in t.partitions]
            out.append(R.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=parts)
                       if v >= 13 else R.FetchableTopicResponse(topic=t.topic, partitions=parts))
        return out

    if replica is not None and replica >= 0:
        if _cluster(ctx, A.CLUSTER_ACTION):
            return await call(ctx, req)
        # as Kafka: a follower without CLUSTER_ACTION gets TOPIC_AUTHORIZATION_FAILED for every partition
        log.debug("follower fetch of broker %d refused: %s lacks CLUSTER_ACTION", replica, ctx.principal)
        return R(error_code=0, responses=refused(req.topics))
    # a consumer: READ on each topic is checked by the handler, for the partitions of its fetch
    # session too (broker/handlers/fetch.py)
    return await call(ctx, req)


def _per_topic_rule(key, op, topics_attr, name_attr, resp_topics_attr, make_topic):
    """Strip unauthorized topics from the request, answer them with TOPIC_AUTHORIZATION_FAILED."""
    async def rule(ctx, req, call):
        topics = getattr(req, topics_attr)
        denied = [t for t in topics if not _ok(ctx, op, A.TOPIC, getattr(t, name_attr))]
        if not denied:
            return await call(ctx, req)
        setattr(req, topics_attr, [t for t in topics if t not in denied])
        R = RESPONSES[key]
        resp = await call(ctx, req) if getattr(req, topics_attr) else R()
        setattr(resp, resp_topics_attr, list(getattr(resp, resp_topics_attr)) + [make_topic(R, t) for t in denied])
        return resp
    return rule


async def _list_offsets(ctx, req, call):
    if req.replica_id is not None and req.replica_id >= 0 and not _cluster(ctx, A.CLUSTER_ACTION):
        pass    # Kafka checks topics only; followers use the same DESCRIBE rule
    return await _list_offsets_topics(ctx, req, call)

_list_offsets_topics = _per_topic_rule(
    2, A.DESCRIBE, "topics", "name", "topics",
    lambda R, t: R.ListOffsetsTopicResponse(name=t.name, partitions=[
        R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=T_AUTH, timestamp=-1,
                                       offset=-1, leader_epoch=-1) for p in t.partitions]))


async def _offset_for_leader_epoch(ctx, req, call):
    if getattr(req, "replica_id", -1) >= 0 and ctx.api_version >= 3:
        if _cluster(ctx, A.CLUSTER_ACTION):
            return await call(ctx, req)
    return await _ofle_topics(ctx, req, call)

_ofle_topics = _per_topic_rule(
    23, A.DESCRIBE, "topics", "topic", "topics",
    lambda R, t: R.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
        R.EpochEndOffset(error_code=T_AUTH, partition=p.partition, leader_epoch=-1, end_offset=-1)
        for p in t.partitions]))


async def _metadata(ctx, req, call):
    R = RESPONSES[3]
    v = ctx.api_version
    ctrl = ctx.broker.controller
    existing = ctrl.topics()
    denied = []
    denied_ids = []
    if req.topics is not None and req.topics and v >= 12 and any(t.topic_id != UUID0 for t in req.topics):
        # by topic id (names ignored, as by the handler): an unknown id is the handler's
        # UNKNOWN_TOPIC_ID; a known one needs DESCRIBE, else TOPIC_AUTHORIZATION_FAILED with the
        # id and no name (Kafka: topic ids are not sensitive)
        names = _topic_names_by_id(ctx)
        keep = []
        for t in req.topics:
            name = names.get(t.topic_id)
            if name is not None and not _ok(ctx, A.DESCRIBE, A.TOPIC, name):
                if t.topic_id not in denied_ids:
                    denied_ids.append(t.topic_id)
            elif t.topic_id != UUID0:
                keep.append(t)
        req.topics = keep   # every id denied: an empty list, which asks for no topics
    elif req.topics is not None and req.topics:
        names = _topic_names_by_id(ctx) if v >= 10 else {}
        keep = []
        for t in req.topics:
            name = t.name if t.name is not None else names.get(t.topic_id)
            if name is None:
                keep.append(t)
                continue
            if name in existing:
                ok = _ok(ctx, A.DESCRIBE, A.TOPIC, name)
            else:       # would be auto-created: needs CREATE (and DESCRIBE to see it)
                ok = (_cluster(ctx, A.CREATE) or _ok(ctx, A.CREATE, A.TOPIC, name)) \
                    and _ok(ctx, A.DESCRIBE, A.TOPIC, name)
            (keep if ok else denied).append(t if ok else name)
        req.topics = keep       # an empty list asks for no topics (v1+)
    resp = await call(ctx, req)
    topics = [t for t in resp.topics if t.error_code == T_AUTH or t.name is None
              or _ok(ctx, A.DESCRIBE, A.TOPIC, t.name)]
    for name in denied:
        topics.append(R.MetadataResponseTopic(error_code=T_AUTH, name=name, is_internal=False, partitions=[],
                                              topic_authorized_operations=INT_MIN))
    for tid in denied_ids:
        topics.append(R.MetadataResponseTopic(error_code=T_AUTH, name=None, topic_id=tid, is_internal=False,
                                              partitions=[], topic_authorized_operations=INT_MIN))
    authz = ctx.authorizer
    if v >= 8:
        for t in topics:
            if req.include_topic_authorized_operations and t.error_code != T_AUTH and t.name:
                t.topic_authorized_operations = authz.authorized_operations(ctx.principal, ctx.client_host,
                                                                            A.TOPIC, t.name)
        if 8 <= v <= 10 and req.include_cluster_authorized_operations:
            resp.cluster_authorized_operations = authz.authorized_operations(ctx.principal, ctx.client_host,
                                                                             A.CLUSTER, A.CLUSTER_NAME)
    resp.topics = topics
    return resp


# ----------------------------------------------------------------------------------- groups
def _group_rule(key, op=A.READ):
    return _whole(op, A.GROUP, lambda r: r.group_id, G_AUTH, key)


async def _offset_commit(ctx, req, call):
    R = RESPONSES[8]
    v = ctx.api_version
    if v >= 10:                  # topics by id: named first; an unknown id is left to the handler
        name_topics(ctx.broker.controller, req.topics)
    if not _ok(ctx, A.READ, A.GROUP, req.group_id):
        return R(topics=[R.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
            R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=G_AUTH)
            for p in t.partitions]) for t in req.topics])
    denied = [t for t in req.topics if (t.name or v < 10) and not _ok(ctx, A.READ, A.TOPIC, t.name)]
    if not denied:
        return await call(ctx, req)
    req.topics = [t for t in req.topics if t not in denied]
    resp = await call(ctx, req) if req.topics else R(topics=[])
    resp.topics = list(resp.topics) + [R.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
        R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=T_AUTH)
        for p in t.partitions]) for t in denied]
    return resp


async def _offset_fetch(ctx, req, call):
    R = RESPONSES[9]
    v = ctx.api_version
    if v <= 7:
        if not _ok(ctx, A.DESCRIBE, A.GROUP, req.group_id):
            return R(error_code=G_AUTH, topics=[])
        denied = []
        if req.topics is not None:
            denied = [t for t in req.topics if not _ok(ctx, A.DESCRIBE, A.TOPIC, t.name)]
            req.topics = [t for t in req.topics if t not in denied]
        resp = await call(ctx, req)
        resp.topics = [t for t in resp.topics if _ok(ctx, A.DESCRIBE, A.TOPIC, t.name)] + [
            R.OffsetFetchResponseTopic(name=t.name, partitions=[
                R.OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, error_code=T_AUTH)
                for p in t.partition_indexes]) for t in denied]
        return resp
    by_id = v >= 10              # topics by id: named first; an unknown id is left to the handler

    def checked(t):              # an unknown id (no name) is answered UNKNOWN_TOPIC_ID, unchecked
        return not (by_id and not t.name)
    denied_groups = [g for g in req.groups if not _ok(ctx, A.DESCRIBE, A.GROUP, g.group_id)]
    req.groups = [g for g in req.groups if g not in denied_groups]
    denied_topics = {}
    for g in req.groups:
        if g.topics is not None:
            if by_id:
                name_topics(ctx.broker.controller, g.topics)
            denied_topics[g.group_id] = [t for t in g.topics
                                         if checked(t) and not _ok(ctx, A.DESCRIBE, A.TOPIC, t.name)]
            g.topics = [t for t in g.topics if t not in denied_topics[g.group_id]]
    resp = await call(ctx, req) if req.groups else R(groups=[])
    for g in resp.groups:
        g.topics = [t for t in g.topics if not checked(t) or _ok(ctx, A.DESCRIBE, A.TOPIC, t.name)] + [
            R.OffsetFetchResponseTopics(name=t.name, topic_id=t.topic_id, partitions=[
                R.OffsetFetchResponsePartitions(partition_index=p, committed_offset=-1, error_code=T_AUTH)
                for p in t.partition_indexes]) for t in denied_topics.get(g.group_id, [])]
    resp.groups = list(resp.groups) + [R.OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=G_AUTH)
                                       for g in denied_groups]
    return resp


async def _find_coordinator(ctx, req, call):
    R = RESPONSES[10]
    v = ctx.api_version
    key_type = req.key_type if v >= 1 else 0
    rtype = A.TRANSACTIONAL_ID if key_type == 1 else A.GROUP
    code = TX_AUTH if key_type == 1 else G_AUTH
    if v <= 3:
        if _ok(ctx, A.DESCRIBE, rtype, req.key):
            return await call(ctx, req)
        return R(error_code=code, error_message=None, node_id=-1, host="", port=-1)
    denied = [k for k in req.coordinator_keys if not _ok(ctx, A.DESCRIBE, rtype, k)]
    if not denied:
        return await call(ctx, req)
    req.coordinator_keys = [k for k in req.coordinator_keys if k not in denied]
    resp = await call(ctx, req) if req.coordinator_keys else R(coordinators=[])
    resp.coordinators = list(resp.coordinators) + [
        R.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=None) for k in denied]
    return resp


async def _describe_groups(ctx, req, call):
    R = RESPONSES[15]
    denied = [g for g in req.groups if not _ok(ctx, A.DESCRIBE, A.GROUP, g)]
    req.groups = [g for g in req.groups if g not in denied]
    resp = await call(ctx, req) if req.groups else R(groups=[])
    authz = ctx.authorizer
    for g in resp.groups:
        if ctx.api_version >= 3 and req.include_authorized_operations:
            g.authorized_operations = authz.authorized_operations(ctx.principal, ctx.client_host, A.GROUP, g.group_id)
    resp.groups = list(resp.groups) + [R.DescribedGroup(error_code=G_AUTH, group_id=g, group_state="",
                                                        protocol_type="", protocol_data="", members=[],
                                                        authorized_operations=INT_MIN) for g in denied]
    return resp


async def _share_records(ctx, req, call):
    """ShareFetch and ShareAcknowledge: READ on the group, READ on each topic (its partitions are
    answered TOPIC_AUTHORIZATION_FAILED and left out of the share session)."""
    R = RESPONSES[ctx.header.request_api_key]
    if not _ok(ctx, A.READ, A.GROUP, req.group_id):
        return R(error_code=G_AUTH, responses=[])
    names = _topic_names_by_id(ctx)
    denied = [t for t in req.topics or () if not _ok(ctx, A.READ, A.TOPIC, names.get(t.topic_id, ""))]
    if not denied:
        return await call(ctx, req)
    req.topics = [t for t in req.topics if t not in denied]
    resp = await call(ctx, req)
    if resp.error_code:
        return resp
    P = R.PartitionData
    extra = {}
    for t in denied:
        for p in t.partitions:
            kw = dict(acknowledge_error_code=T_AUTH, records=b"", acquired_records=[]) if ctx.header.request_api_key == 78 else {}
            extra.setdefault(t.topic_id, []).append(P(partition_index=p.partition_index, error_code=T_AUTH,
                                                      current_leader=R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                                                      **kw))
    T = R.ShareFetchableTopicResponse if ctx.header.request_api_key == 78 else R.ShareAcknowledgeTopicResponse
    resp.responses = list(resp.responses) + [T(topic_id=tid, partitions=ps) for tid, ps in extra.items()]
    return resp


async def _describe_share_group_offsets(ctx, req, call):
    """DescribeShareGroupOffsets: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for it) and
    on each topic named (TOPIC_AUTHORIZATION_FAILED for its partitions)."""
    R = RESPONSES[90]
    denied = [g for g in req.groups if not _ok(ctx, A.DESCRIBE, A.GROUP, g.group_id)]
    req.groups = [g for g in req.groups if g not in denied]
    hidden = {}
    for g in req.groups:
        for t in g.topics or ():
            if not _ok(ctx, A.DESCRIBE, A.TOPIC, t.topic_name):
                hidden.setdefault(g.group_id, []).append(t)
        if g.group_id in hidden:
            g.topics = [t for t in g.topics if t not in hidden[g.group_id]]
    all_topics = {g.group_id for g in req.groups if g.topics is None}
    resp = await call(ctx, req) if req.groups else R(groups=[])
    for g in resp.groups:
        if g.group_id in all_topics:          # every topic of the group: leave out the hidden ones
            g.topics = [t for t in g.topics if _ok(ctx, A.DESCRIBE, A.TOPIC, t.topic_name)]
        for t in hidden.get(g.group_id, ()):
            g.topics.append(R.DescribeShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=UUID0, partitions=[R.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1, error_code=T_AUTH)
                    for p in t.partitions]))
    resp.groups = list(resp.groups) + [R.DescribeShareGroupOffsetsResponseGroup(
        group_id=g.group_id, topics=[], error_code=G_AUTH) for g in denied]
    return resp


async def _consumer_group_heartbeat(ctx, req, call):
    R = RESPONSES[ctx.header.request_api_key]
    if not _ok(ctx, A.READ, A.GROUP, req.group_id):
        return R(error_code=G_AUTH)
    denied = [t for t in req.subscribed_topic_names or () if not _ok(ctx, A.DESCRIBE, A.TOPIC, t)]
    if denied:
        return R(error_code=T_AUTH,
                 error_message=f"The following topics are not authorized: {', '.join(sorted(set(denied)))}")
    return await call(ctx, req)


async def _consumer_group_describe(ctx, req, call):
    R = RESPONSES[ctx.header.request_api_key]
    denied = [g for g in req.group_ids if not _ok(ctx, A.DESCRIBE, A.GROUP, g)]
    req.group_ids = [g for g in req.group_ids if g not in denied]
    resp = await call(ctx, req) if req.group_ids else R(groups=[])
    if req.include_authorized_operations:
        for g in resp.groups:
            if not g.error_code:
                g.authorized_operations = ctx.authorizer.authorized_operations(ctx.principal, ctx.client_host,
                                                                               A.GROUP, g.group_id)
    resp.groups = list(resp.groups) + [R.DescribedGroup(error_code=G_AUTH, group_id=g, group_state="",
                                                        assignor_name="") for g in denied]
    return resp


def _topology_topics(subtopologies) -> set:
    out = set()
    for st in subtopologies or ():
        out.update(st.source_topics or ())
        out.update(st.repartition_sink_topics or ())
        out.update(t.name for t in st.repartition_source_topics or ())
        out.update(t.name for t in st.state_changelog_topics or ())
    return out


async def _streams_group_heartbeat(ctx, req, call):
    """StreamsGroupHeartbeat: READ on the group; DESCRIBE on every topic of the topology (topics
    that are internal or not valid names are the coordinator's to refuse: STREAMS_INVALID_TOPOLOGY).
    CREATE for the internal topics is checked by the handler."""
    R = RESPONSES[88]
    if not _ok(ctx, A.READ, A.GROUP, req.group_id):
        return R(error_code=G_AUTH, member_id="")
    if req.topology is not None:
        from controller.api import validate_topic_name
        topics = [t for t in _topology_topics(req.topology.subtopologies)
                  if not is_internal_topic(t) and validate_topic_name(t) is None]
        if any(not _ok(ctx, A.DESCRIBE, A.TOPIC, t) for t in topics):
            return R(error_code=T_AUTH, member_id="")
    return await call(ctx, req)


async def _streams_group_describe(ctx, req, call):
    """StreamsGroupDescribe: DESCRIBE on each group; a group whose topology names a topic the
    client may not describe is answered TOPIC_AUTHORIZATION_FAILED, as Kafka 4.2 does."""
    R = RESPONSES[89]
    denied = [g for g in req.group_ids if not _ok(ctx, A.DESCRIBE, A.GROUP, g)]
    req.group_ids = [g for g in req.group_ids if g not in denied]
    resp = await call(ctx, req) if req.group_ids else R(groups=[])
    groups = []
    for g in resp.groups:
        if not g.error_code and g.topology is not None and ctx.authorizer is not None and any(
                not _ok(ctx, A.DESCRIBE, A.TOPIC, t) for t in _topology_topics(g.topology.subtopologies)):
            g = R.DescribedGroup(group_id=g.group_id, error_code=T_AUTH, group_state="",
                                 error_message="The described group uses topics that the client is not "
                                               "authorized to describe.")
        elif not g.error_code and req.include_authorized_operations:
            g.authorized_operations = ctx.authorizer.authorized_operations(ctx.principal, ctx.client_host,
                                                                           A.GROUP, g.group_id)
        groups.append(g)
    resp.groups = [R.DescribedGroup(error_code=G_AUTH, group_id=g, group_state="") for g in denied] + groups
    return resp


async def _list_groups(ctx, req, call):
    resp = await call(ctx, req)
    if not _cluster(ctx, A.DESCRIBE):
        resp.groups = [g for g in resp.groups if _ok(ctx, A.DESCRIBE, A.GROUP, g.group_id)]
    return resp


async def _delete_groups(ctx, req, call):
    R = RESPONSES[42]
    denied = [g for g in req.groups_names if not _ok(ctx, A.DELETE, A.GROUP, g)]
    req.groups_names = [g for g in req.groups_names if g not in denied]
    resp = await call(ctx, req) if req.groups_names else R(results=[])
    resp.results = list(resp.results) + [R.DeletableGroupResult(group_id=g, error_code=G_AUTH) for g in denied]
    return resp


async def _offset_delete(ctx, req, call):
    R = RESPONSES[47]
    if not _ok(ctx, A.DELETE, A.GROUP, req.group_id):
        return R(error_code=G_AUTH, topics=[])
    return await _offset_delete_topics(ctx, req, call)

_offset_delete_topics = _per_topic_rule(
    47, A.READ, "topics", "name", "topics",
    lambda R, t: R.OffsetDeleteResponseTopic(name=t.name, partitions=[
        R.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=T_AUTH)
        for p in t.partitions]))


# ----------------------------------------------------------------------------------- admin
async def _create_topics(ctx, req, call):
    if _cluster(ctx, A.CREATE):
        return await call(ctx, req)
    return await _create_topics_each(ctx, req, call)

_create_topics_each = _per_topic_rule(
    19, A.CREATE, "topics", "name", "topics",
    lambda R, t: R.CreatableTopicResult(name=t.name, error_code=T_AUTH, error_message="Authorization failed.",
                                        num_partitions=-1, replication_factor=-1, configs=None))


async def _delete_topics(ctx, req, call):
    R = RESPONSES[20]
    if ctx.api_version >= 6:
        names = _topic_names_by_id(ctx)
        denied = [t for t in req.topics
                  if not _ok(ctx, A.DELETE, A.TOPIC, t.name if t.name is not None else names.get(t.topic_id, ""))]
        req.topics = [t for t in req.topics if t not in denied]
        resp = await call(ctx, req) if req.topics else R(responses=[])
        resp.responses = list(resp.responses) + [R.DeletableTopicResult(
            name=t.name if t.name is not None else names.get(t.topic_id), topic_id=t.topic_id, error_code=T_AUTH,
            error_message="Authorization failed.") for t in denied]
        return resp
    denied = [n for n in req.topic_names if not _ok(ctx, A.DELETE, A.TOPIC, n)]
    req.topic_names = [n for n in req.topic_names if n not in denied]
    resp = await call(ctx, req) if req.topic_names else R(responses=[])
    resp.responses = list(resp.responses) + [R.DeletableTopicResult(name=n, error_code=T_AUTH) for n in denied]
    return resp


_create_partitions = _per_topic_rule(
    37, A.ALTER, "topics", "name", "results",
    lambda R, t: R.CreatePartitionsTopicResult(name=t.name, error_code=T_AUTH, error_message="Authorization failed."))

def _deny_write_txn_markers(ctx, req):
    """Kafka's WriteTxnMarkersRequest.getErrorResponse: every partition of every marker gets 31."""
    R = RESPONSES[27]
    return R(markers=[R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
        R.WritableTxnMarkerTopicResult(name=t.name, partitions=[
            R.WritableTxnMarkerPartitionResult(partition_index=p, error_code=C_AUTH) for p in t.partition_indexes])
        for t in m.topics]) for m in req.markers])


_describe_producers = _per_topic_rule(
    61, A.READ, "topics", "name", "topics",
    lambda R, t: R.TopicResponse(name=t.name, partitions=[
        R.PartitionResponse(partition_index=p, error_code=T_AUTH, error_message="Topic authorization failed.",
                            active_producers=[])
        for p in t.partition_indexes]))

_delete_records = _per_topic_rule(
    21, A.DELETE, "topics", "name", "topics",
    lambda R, t: R.DeleteRecordsTopicResult(name=t.name, partitions=[
        R.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=T_AUTH)
        for p in t.partitions]))


def _config_rule(key, op, resources_attr, results_attr, make):
    TOPIC_RES, BROKER_RES, BROKER_LOGGER_RES, CLIENT_METRICS_RES, GROUP_RES = 2, 4, 8, 16, 32

    def allowed(ctx, r):
        if r.resource_type == TOPIC_RES:
            return _ok(ctx, op, A.TOPIC, r.resource_name)
        if r.resource_type == GROUP_RES:        # KIP-848 group configs: the GROUP ACL resource
            return _ok(ctx, op, A.GROUP, r.resource_name)
        if r.resource_type in (BROKER_RES, BROKER_LOGGER_RES, CLIENT_METRICS_RES):
            return _cluster(ctx, op)
        return True

    async def rule(ctx, req, call):
        res = getattr(req, resources_attr)
        denied = [r for r in res if not allowed(ctx, r)]
        if not denied:
            return await call(ctx, req)
        setattr(req, resources_attr, [r for r in res if r not in denied])
        R = RESPONSES[key]
        resp = await call(ctx, req) if getattr(req, resources_attr) else R()
        setattr(resp, results_attr, list(getattr(resp, results_attr)) + [
            make(R, r, T_AUTH if r.resource_type == TOPIC_RES else G_AUTH if r.resource_type == GROUP_RES else C_AUTH)
            for r in denied])
        return resp
    return rule


_describe_configs = _config_rule(
    32, A.DESCRIBE_CONFIGS, "resources", "results",
    lambda R, r, code: R.DescribeConfigsResult(error_code=code, error_message="Authorization failed.",
                                               resource_type=r.resource_type, resource_name=r.resource_name,
                                               configs=[]))
_alter_configs = _config_rule(
    33, A.ALTER_CONFIGS, "resources", "responses",
    lambda R, r, code: R.AlterConfigsResourceResponse(error_code=code, error_message="Authorization failed.",
                                                      resource_type=r.resource_type, resource_name=r.resource_name))
_incremental_alter_configs = _config_rule(
    44, A.ALTER_CONFIGS, "resources", "responses",
    lambda R, r, code: R.AlterConfigsResourceResponse(error_code=code, error_message="Authorization failed.",
                                                      resource_type=r.resource_type, resource_name=r.resource_name))


async def _init_producer_id(ctx, req, call):
    R = RESPONSES[22]
    txn = req.transactional_id
    if txn:
        if _ok(ctx, A.WRITE, A.TRANSACTIONAL_ID, txn):
            return await call(ctx, req)
        return R(error_code=TX_AUTH, producer_id=-1, producer_epoch=-1)
    authz = ctx.authorizer
    if _cluster(ctx, A.IDEMPOTENT_WRITE) or authz.authorize_any(ctx.principal, ctx.client_host, A.WRITE, A.TOPIC):
        return await call(ctx, req)
    return R(error_code=C_AUTH, producer_id=-1, producer_epoch=-1)


async def _describe_cluster(ctx, req, call):
    R = RESPONSES[60]
    if not _cluster(ctx, A.DESCRIBE):
        return R(error_code=C_AUTH, error_message=None, brokers=[], cluster_authorized_operations=INT_MIN)
    resp = await call(ctx, req)
    if req.include_cluster_authorized_operations:
        resp.cluster_authorized_operations = ctx.authorizer.authorized_operations(
            ctx.principal, ctx.client_host, A.CLUSTER, A.CLUSTER_NAME)
    return resp


def _deny_alter_log_dirs(ctx, req):
    R = RESPONSES[34]
    by_topic: dict[str, list] = {}
    for d in req.dirs:
        for t in d.topics:
            by_topic.setdefault(t.name, []).extend(
                R.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=C_AUTH)
                for p in t.partitions)
    return R(throttle_time_ms=0, results=[R.AlterReplicaLogDirTopicResult(topic_name=t, partitions=ps)
                                          for t, ps in by_topic.items()])


def _deny_log_dirs(ctx, req):
    R = RESPONSES[35]
    return R(error_code=C_AUTH, results=[])


def _deny_describe_quotas(ctx, req):
    return RESPONSES[48](throttle_time_ms=0, error_code=C_AUTH, error_message="Cluster authorization failed.",
                         entries=None)


def _deny_describe_quorum(ctx, req):
    # Kafka's DescribeQuorumRequest.getErrorResponse: the top-level error and its message, no topics
    return RESPONSES[55](error_code=C_AUTH, error_message="Cluster authorization failed.", topics=[])


def _deny_alter_quotas(ctx, req):
    R = RESPONSES[49]
    return R(throttle_time_ms=0, entries=[
        R.EntryData(error_code=C_AUTH, error_message="Cluster authorization failed.",
                    entity=[R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in req.entries])


def _deny_elect(ctx, req):
    R = RESPONSES[43]
    parts = req.topic_partitions or []
    return R(error_code=C_AUTH, replica_election_results=[R.ReplicaElectionResult(topic=t.topic, partition_result=[
        R.PartitionResult(partition_id=p, error_code=C_AUTH, error_message=None) for p in t.partitions])
        for t in parts])


async def _add_partitions_to_txn(ctx, req, call):
    """v4+ (brokers verifying a produce): CLUSTER_ACTION.  Below v4 (producers): WRITE on the
    transactional id, else every partition fails with 53; WRITE on each topic (internal topics are
    never writable this way) — if any is refused, nothing is added: refused partitions 29, those
    of unknown topics 3, the rest OPERATION_NOT_ATTEMPTED."""
    R = RESPONSES[24]
    if ctx.api_version >= 4:
        if _cluster(ctx, A.CLUSTER_ACTION):
            return await call(ctx, req)
        return R(throttle_time_ms=0, error_code=C_AUTH, results_by_transaction=[])

    def answer(code_of):
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=[R.AddPartitionsToTxnTopicResult(
            name=t.name, results_by_partition=[R.AddPartitionsToTxnPartitionResult(
                partition_index=p, partition_error_code=code_of(t.name, p)) for p in t.partitions])
            for t in req.v3_and_below_topics])

    if not _ok(ctx, A.WRITE, A.TRANSACTIONAL_ID, req.v3_and_below_transactional_id):
        return answer(lambda t, p: TX_AUTH)
    denied = {t.name for t in req.v3_and_below_topics
              if is_internal_topic(t.name) or not _ok(ctx, A.WRITE, A.TOPIC, t.name)}
    if not denied:
        return await call(ctx, req)
    ctrl = ctx.broker.controller

    def code_of(t, p):
        if t in denied:
            return T_AUTH
        info = ctrl.topic(t)
        return UNKNOWN_TOPIC if info is None or p not in info.partitions else NOT_ATTEMPTED
    return answer(code_of)


async def _txn_offset_commit(ctx, req, call):
    """WRITE on the transactional id (else 53 everywhere), READ on the group (else 30 everywhere),
    READ on each topic (refused topics 29, the others committed)."""
    R = RESPONSES[28]

    def answer(code, topics):
        return [R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in topics]

    if not _ok(ctx, A.WRITE, A.TRANSACTIONAL_ID, req.transactional_id):
        return R(throttle_time_ms=0, topics=answer(TX_AUTH, req.topics))
    if not _ok(ctx, A.READ, A.GROUP, req.group_id):
        return R(throttle_time_ms=0, topics=answer(G_AUTH, req.topics))
    denied = [t for t in req.topics if not _ok(ctx, A.READ, A.TOPIC, t.name)]
    if not denied:
        return await call(ctx, req)
    req.topics = [t for t in req.topics if t not in denied]
    resp = await call(ctx, req) if req.topics else R(throttle_time_ms=0, topics=[])
    resp.topics = list(resp.topics) + answer(T_AUTH, denied)
    return resp


async def _describe_transactions(ctx, req, call):
    """DESCRIBE on each transactional id (else 53 for it); partitions of topics the principal may
    not DESCRIBE are left out of the states."""
    R = RESPONSES[65]
    denied = [t for t in req.transactional_ids if not _ok(ctx, A.DESCRIBE, A.TRANSACTIONAL_ID, t)]
    req.transactional_ids = [t for t in req.transactional_ids if t not in denied]
    resp = await call(ctx, req) if req.transactional_ids else R(throttle_time_ms=0, transaction_states=[])
    for st in resp.transaction_states:
        st.topics = [td for td in st.topics if _ok(ctx, A.DESCRIBE, A.TOPIC, td.topic)]
    resp.transaction_states = list(resp.transaction_states) + [R.TransactionState(
        error_code=TX_AUTH, transactional_id=t, transaction_state="", transaction_timeout_ms=0,
        transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]) for t in denied]
    return resp


async def _list_transactions(ctx, req, call):
    """Only the transactional ids the principal may DESCRIBE."""
    resp = await call(ctx, req)
    resp.transaction_states = [s for s in resp.transaction_states
                               if _ok(ctx, A.DESCRIBE, A.TRANSACTIONAL_ID, s.transactional_id)]
    return resp


async def _add_offsets_to_txn(ctx, req, call):
    R = RESPONSES[25]
    if not _ok(ctx, A.WRITE, A.TRANSACTIONAL_ID, req.transactional_id):
        return R(error_code=TX_AUTH)
    if not _ok(ctx, A.READ, A.GROUP, req.group_id):
        return R(error_code=G_AUTH)
    return await call(ctx, req)


RULES = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    4: _cluster_rule(A.CLUSTER_ACTION, 4),
    5: _cluster_rule(A.CLUSTER_ACTION, 5),
    6: _cluster_rule(A.CLUSTER_ACTION, 6),
    7: _cluster_rule(A.CLUSTER_ACTION, 7),
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _group_rule(11),
    12: _group_rule(12),
    13: _group_rule(13),
    14: _group_rule(14),
    15: _describe_groups,
    16: _list_groups,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    22: _init_producer_id,
    23: _offset_for_leader_epoch,
    32: _describe_configs,
    33: _alter_configs,
    34: _cluster_rule(A.ALTER, 34, deny=_deny_alter_log_dirs),
    35: _cluster_rule(A.DESCRIBE, 35, deny=_deny_log_dirs),
    37: _create_partitions,
    42: _delete_groups,
    43: _cluster_rule(A.ALTER, 43, deny=_deny_elect),
    44: _incremental_alter_configs,
    45: _cluster_rule(A.ALTER, 45),
    46: _cluster_rule(A.DESCRIBE, 46),
    47: _offset_delete,
    48: _cluster_rule(A.DESCRIBE_CONFIGS, 48, deny=_deny_describe_quotas),
    49: _cluster_rule(A.ALTER_CONFIGS, 49, deny=_deny_alter_quotas),
    55: _cluster_rule(A.DESCRIBE, 55, deny=_deny_describe_quorum),
    56: _cluster_rule(A.CLUSTER_ACTION, 56),
    60: _describe_cluster,
    24: _add_partitions_to_txn,
    25: _add_offsets_to_txn,
    26: _whole(A.WRITE, A.TRANSACTIONAL_ID, lambda r: r.transactional_id, TX_AUTH, 26),
    27: _cluster_rule(A.CLUSTER_ACTION, 27, deny=_deny_write_txn_markers),
    28: _txn_offset_commit,
    61: _describe_producers,
    65: _describe_transactions,
    66: _list_transactions,
    68: _consumer_group_heartbeat,
    69: _consumer_group_describe,
    88: _streams_group_heartbeat,
    89: _streams_group_describe,
    76: _consumer_group_heartbeat,         # ShareGroupHeartbeat: the same rules
    77: _consumer_group_describe,          # ShareGroupDescribe
    78: _share_records,
    79: _share_records,
    90: _describe_share_group_offsets,
    91: _whole(A.READ, A.GROUP, lambda r: r.group_id, G_AUTH, 91),
    92: _whole(A.DELETE, A.GROUP, lambda r: r.group_id, G_AUTH, 92),
    74: _cluster_rule(A.DESCRIBE_CONFIGS, 74),
}

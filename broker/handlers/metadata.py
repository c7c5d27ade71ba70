"""Metadata (key 3), v0-12.

v0: an empty topic list means all topics.  v1+: null means all, and brokers carry racks, the
response the controller id and ``is_internal``.  v2+ cluster id.  v4+ ``allow_auto_topic_creation``.
v5+ offline replicas.  v7+ leader epochs.  v8-10 authorized operations (not computed: INT_MIN).
v9+ flexible.  v10+ topic ids.  v12 topics may be looked up by id.  A v10-11 request naming a
topic by id, or with a null name, is Kafka's InvalidRequestException: every requested topic is
answered INVALID_REQUEST (a null name as ""), with no brokers.

Unknown topics are created when ``auto.create.topics.enable`` is true and the request allows it
(v4+; always for older versions) — with ``num.partitions`` and ``default.replication.factor``.
Their partitions count against the client's ``controller_mutation_rate`` quota as in Kafka
(permissively: the creation is never refused or throttled for it, later CreateTopics feel it).
"""
from __future__ import annotations

from broker.dispatch import handler
from broker.endpoints import on_listener
from broker.handlers.cluster import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from controller.api import CreatableTopic, is_internal_topic, validate_topic_name
from protocol.errors import ErrorCode as E
from protocol.messages import MetadataResponse
from protocol.primitives import UUID0

R = MetadataResponse
INT_MIN = -2147483648


def broker_list(broker, listener_name):
    return [R.MetadataResponseBroker(node_id=b.id, host=host, port=port, rack=b.rack)
            for b, host, port in on_listener(broker, listener_name)]


def offline_replicas(broker, name: str, p: int, s, live: set[int] | None) -> list[int]:
    """The replicas of a partition that are offline: in a cluster (``live``: ``live_broker_ids``),
    those on brokers that are not alive or on failed log dirs (the controller's UpdateMetadata
    says which); on a single broker, this one when the partition's log dir has failed."""
    rm = broker.replicas
    if rm is None:
        return []
    if live is not None:
        return [r for r in s.replicas if r not in live or r in s.offline_replicas]
    part = rm.partitions.get((name, p))
    return [broker.broker_id] if part is not None and part.offline else []


def live_broker_ids(broker) -> set[int] | None:
    """The brokers alive now in a cluster (a replica elsewhere is offline); None on a single
    broker, where every replica is this one."""
    if broker.replicas is None or broker.replicas.replication is None:
        return None
    return {b.id for b in broker.controller.brokers()}


def topic_entry(info, version, error=0):
    parts = []
    for p in sorted(info.partitions):
        s = info.partitions[p]
        parts.append(R.MetadataResponsePartition(
            error_code=E.LEADER_NOT_AVAILABLE if s.leader < 0 else 0,
            partition_index=p, leader_id=s.leader, leader_epoch=s.leader_epoch,
            replica_nodes=list(s.replicas), isr_nodes=list(s.isr), offline_replicas=[]))
    return R.MetadataResponseTopic(error_code=error, name=info.name, topic_id=info.topic_id,
                                   is_internal=info.internal, partitions=parts,
                                   topic_authorized_operations=INT_MIN)


@handler(3, 0, 13)
async def metadata(ctx, req):
    broker = ctx.broker
    ctrl = broker.controller
    v = ctx.api_version
    topics_out = []
    if req.topics is None or (v == 0 and not req.topics):
        for name, info in sorted(ctrl.topics().items()):
            topics_out.append(topic_entry(info, v))
    elif v < 12 and any(t.name is None or t.topic_id != UUID0 for t in req.topics):
        return R(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1,
                 cluster_authorized_operations=INT_MIN, topics=[R.MetadataResponseTopic(
                     error_code=E.INVALID_REQUEST, name=t.name or "", topic_id=t.topic_id,
                     is_internal=False, partitions=[], topic_authorized_operations=INT_MIN)
                     for t in req.topics])
    elif any(t.topic_id != UUID0 for t in req.topics):
        # as Kafka: once any topic id is given, the ids alone say which topics are meant (the
        # Java client sends name "" beside each id); an id asked twice is answered once
        for tid in dict.fromkeys(t.topic_id for t in req.topics if t.topic_id != UUID0):
            info = ctrl.topic_by_id(tid)
            if info is None:
                topics_out.append(R.MetadataResponseTopic(
                    error_code=E.UNKNOWN_TOPIC_ID, name=None, topic_id=tid, topic_authorized_operations=INT_MIN))
            else:
                topics_out.append(topic_entry(info, v))
    else:
        auto = broker.config.get("auto.create.topics.enable") and (v < 4 or req.allow_auto_topic_creation)
        to_create = []
        for name in dict.fromkeys(t.name for t in req.topics):    # a name asked twice: once
            if name is None:         # v12+: neither a name nor an id
                topics_out.append(R.MetadataResponseTopic(
                    error_code=E.UNKNOWN_TOPIC_ID, name=None, topic_id=UUID0, topic_authorized_operations=INT_MIN))
                continue
            info = ctrl.topic(name)
            if info is not None:
                topics_out.append(topic_entry(info, v))
            elif validate_topic_name(name) is not None:
                topics_out.append(R.MetadataResponseTopic(
                    error_code=E.INVALID_TOPIC_EXCEPTION, name=name, topic_id=UUID0,
                    topic_authorized_operations=INT_MIN))
            elif auto and not is_internal_topic(name):   # any valid name, as Kafka; the coordinators
                # create their own topics (with their partition counts and configs)
                to_create.append(name)
                topics_out.append(name)      # placeholder, filled below
            else:
                topics_out.append(R.MetadataResponseTopic(
                    error_code=E.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=UUID0,
                    topic_authorized_operations=INT_MIN))
        refused = {}
        if to_create and broker.policies is not None and broker.policies.create_topic is not None:
            from broker.handlers.topics import create_policy_verdicts
            verdicts = await create_policy_verdicts(broker, [CreatableTopic(n) for n in to_create])
            refused = {n: v[0] for n, v in zip(to_create, verdicts) if v is not None}
            to_create = [n for n in to_create if n not in refused]
        if refused:
            # Kafka answers an automatic creation the policy refused with the policy's error
            for i, entry in enumerate(topics_out):
                if isinstance(entry, str) and entry in refused:
                    topics_out[i] = R.MetadataResponseTopic(
                        error_code=refused[entry], name=entry, topic_id=UUID0,
                        topic_authorized_operations=INT_MIN)
        if to_create:
            results = await ctrl.create_topics([CreatableTopic(n) for n in to_create])
            mq = broker.mutation_quota
            quota = mq.quota_for(ctx, strict=False) if mq is not None else None
            if quota is not None:   # counted against the client's mutation quota, never throttled here
                for r in results:
                    if not r.error_code:
                        quota.admit(r.num_partitions)
            errors = {r.name: r.error_code for r in results}
            for i, entry in enumerate(topics_out):
                if isinstance(entry, str):
                    info = ctrl.topic(entry)
                    err = errors.get(entry, 0)
                    if info is not None and err in (0, E.TOPIC_ALREADY_EXISTS):
                        topics_out[i] = topic_entry(info, v)
                    else:
                        code = E.LEADER_NOT_AVAILABLE if err == 0 else (
                            E.INVALID_REPLICATION_FACTOR if err == E.INVALID_REPLICATION_FACTOR
                            else E.UNKNOWN_TOPIC_OR_PARTITION)
                        topics_out[i] = R.MetadataResponseTopic(
                            error_code=code, name=entry, topic_id=UUID0,
                            topic_authorized_operations=INT_MIN)
    rm = broker.replicas
    offline_known = rm is not None and (rm.replication is not None or broker.log_manager.offline_dirs)
    live = live_broker_ids(broker)
    for t in topics_out if offline_known else ():   # offline replicas (v5+)
        info = ctrl.topic(t.name) if t.name is not None and t.partitions else None
        for p in t.partitions or ():
            s = info.partitions.get(p.partition_index) if info is not None else None
            if s is None:
                continue
            p.offline_replicas = offline_replicas(broker, t.name, p.partition_index, s, live)
            if p.offline_replicas and p.leader_id in p.offline_replicas:
                # the leader's replica is offline (single broker): no leader, as Kafka answers
                p.leader_id = -1
                p.error_code = E.LEADER_NOT_AVAILABLE
    cluster_ops = INT_MIN
    if v >= 8 and ctx.authorizer is None:
        # as Kafka with no authorizer: every operation the resource supports (with one, the
        # authorizer's answer is filled in by broker/security/enforce.py)
        if req.include_topic_authorized_operations:
            for t in topics_out:
                if t.name is not None and t.topic_authorized_operations == INT_MIN:
                    t.topic_authorized_operations = TOPIC_OPERATIONS
        if v <= 10 and req.include_cluster_authorized_operations:
            cluster_ops = CLUSTER_OPERATIONS
    return R(throttle_time_ms=0, brokers=broker_list(broker, ctx.connection.listener_name),
             cluster_id=ctrl.cluster_id, controller_id=ctrl.controller_id, topics=topics_out,
             cluster_authorized_operations=cluster_ops)

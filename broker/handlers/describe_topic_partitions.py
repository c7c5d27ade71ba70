"""DescribeTopicPartitions (key 75), v0: Metadata's topic part, in pages.

Java's admin client (3.8+) describes topics with it when the broker offers it, and warns and falls
back to Metadata when not.  The request names topics (none = every topic), a cursor (the topic and
partition to start from) and how many partitions one answer may carry (capped by
``max.request.partition.size.limit``, at least 1).  Topics are answered in name order; when the
limit runs out the answer carries ``next_cursor``: the next partition of a topic cut in the middle,
or partition 0 of the next topic.

As Kafka does: a cursor whose topic is not in a given topic list, or whose partition is negative,
is INVALID_REQUEST for the whole request; topics named before the cursor's are left out; a named
topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an invalid
name) while listing every topic leaves nothing to report; with an authorizer, a named topic the
principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED (with a zero topic id, after the others)
and an unnamed one is left out.  Leader, epoch, replicas, ISR and offline replicas are Metadata's;
eligible leader replicas and the last known ELR (KRaft's KIP-966) are always empty lists here --
not null, which the schema allows but Java's admin client (3.8) does not survive.
"""
from __future__ import annotations

from broker.dispatch import handler
from broker.security import acl as A
from broker.handlers.cluster import TOPIC_OPERATIONS
from broker.handlers.metadata import live_broker_ids, offline_replicas
from controller.api import is_internal_topic, validate_topic_name
from protocol.errors import ErrorCode as E
from protocol.messages import DescribeTopicPartitionsResponse as R
from protocol.primitives import UUID0

INT_MIN = -2147483648


def _partitions(broker, info, start: int, room: int, live: set[int] | None):
    """Up to ``room`` partition entries of ``info`` from index ``start``; and the index to go on
    from, or -1 when the topic is done."""
    indexes = sorted(p for p in info.partitions if p >= start)
    out = []
    for p in indexes[:room]:
        s = info.partitions[p]
        offline = offline_replicas(broker, info.name, p, s, live)
        leader = -1 if s.leader in offline else s.leader
        out.append(R.DescribeTopicPartitionsResponsePartition(
            error_code=E.LEADER_NOT_AVAILABLE if leader < 0 else 0, partition_index=p,
            leader_id=leader, leader_epoch=s.leader_epoch, replica_nodes=list(s.replicas),
            isr_nodes=list(s.isr), eligible_leader_replicas=[], last_known_elr=[],
            offline_replicas=offline))
    return out, (indexes[room] if len(indexes) > room else -1)


@handler(75, 0, 0)
async def describe_topic_partitions(ctx, req):
    ctrl = ctx.broker.controller
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    every = not req.topics
    if every:
        names = {n for n in ctrl.topics() if n >= cursor_topic}
    else:
        names = {t.name for t in req.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            return _invalid(req)
    if cursor is not None and cursor.partition_index < 0:
        return _invalid(req)
    denied = []
    allowed = []
    for name in sorted(names):
        if ctx.authorize(A.DESCRIBE, A.TOPIC, name):
            allowed.append(name)
        elif not every:
            denied.append(R.DescribeTopicPartitionsResponseTopic(
                error_code=E.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=UUID0, is_internal=False,
                partitions=[], topic_authorized_operations=INT_MIN))
    room = max(min(ctx.broker.config.get("max.request.partition.size.limit"), req.response_partition_limit), 1)
    live = live_broker_ids(ctx.broker)
    topics, next_cursor = [], None
    for name in allowed:
        if room <= 0:
            next_cursor = R.Cursor(topic_name=name, partition_index=0)
            break
        info = ctrl.topic(name)
        if info is None:
            if not every:
                code = E.INVALID_TOPIC_EXCEPTION if validate_topic_name(name) is not None \
                    else E.UNKNOWN_TOPIC_OR_PARTITION
                topics.append(R.DescribeTopicPartitionsResponseTopic(
                    error_code=code, name=name, topic_id=UUID0, is_internal=is_internal_topic(name),
                    partitions=[], topic_authorized_operations=INT_MIN))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        parts, go_on = _partitions(ctx.broker, info, start, room, live)
        topics.append(R.DescribeTopicPartitionsResponseTopic(
            error_code=0, name=name, topic_id=info.topic_id, is_internal=info.internal, partitions=parts,
            topic_authorized_operations=_operations(ctx, name)))
        if go_on >= 0:
            next_cursor = R.Cursor(topic_name=name, partition_index=go_on)
            break
        room -= len(parts)
    return R(throttle_time_ms=0, topics=topics + denied, next_cursor=next_cursor)


def _operations(ctx, name: str) -> int:
    authz = ctx.authorizer
    if authz is None:       # as Kafka: every operation a topic supports
        return TOPIC_OPERATIONS
    return authz.authorized_operations(ctx.principal, ctx.client_host, A.TOPIC, name)


def _invalid(req):
    """Kafka fails the whole request with INVALID_REQUEST; this response has no top-level error
    code, so (as Kafka's generic error response does) every requested topic carries it."""
    topics = [R.DescribeTopicPartitionsResponseTopic(
        error_code=E.INVALID_REQUEST, name=t.name, topic_id=UUID0, is_internal=False, partitions=[],
        topic_authorized_operations=INT_MIN) for t in req.topics]
    return R(throttle_time_ms=0, topics=topics, next_cursor=None)

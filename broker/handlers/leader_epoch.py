"""OffsetForLeaderEpoch (key 23), v0-4.

For each partition: the largest epoch ≤ the requested ``leader_epoch`` that this log knows
and the offset where it ends (the start of the next epoch, or the log end offset for the
latest epoch) — ``Log.end_offset_for_epoch``.  An epoch the log cannot answer for gives
leader epoch -1 and end offset -1 with no error.

v1+ the response carries the leader epoch.  v2+ the request carries the sender's
``current_leader_epoch``: older than this broker's is FENCED_LEADER_EPOCH, newer is
UNKNOWN_LEADER_EPOCH, -1 skips the check.  v3+ ``replica_id`` (-1 consumer, -2 debug, a
broker id for a follower); only the leader answers either way.  v4 flexible.
Unknown partitions: UNKNOWN_TOPIC_OR_PARTITION; known but not hosted or not led here:
NOT_LEADER_OR_FOLLOWER.
"""
from __future__ import annotations

from broker.dispatch import handler
from broker.replica import not_leader_error
from protocol.errors import ErrorCode as E
from protocol.messages import OffsetForLeaderEpochResponse

R = OffsetForLeaderEpochResponse
NO_EPOCH = -1


def _answer(broker, topic, p) -> R.EpochEndOffset:
    out = R.EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1)
    info = broker.controller.topic(topic)
    if info is None or p.partition not in info.partitions:
        out.error_code = E.UNKNOWN_TOPIC_OR_PARTITION
        return out
    part = broker.replicas.get(topic, p.partition)
    if part is None or part.offline:
        out.error_code = not_leader_error(part)
        return out
    out.error_code = part.check_leader_epoch(p.current_leader_epoch)
    if out.error_code:
        return out
    if not part.is_leader:
        out.error_code = E.NOT_LEADER_OR_FOLLOWER
        return out
    epoch, end = part.log.end_offset_for_epoch(p.leader_epoch)
    out.leader_epoch, out.end_offset = epoch, end
    return out


@handler(23, 0, 4)
async def offset_for_leader_epoch(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if v < 2:
                p.current_leader_epoch = NO_EPOCH
            parts.append(_answer(broker, t.topic, p))
        topics.append(R.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)

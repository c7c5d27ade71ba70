"""DeleteRecords (key 21), v0-2.

Moves a partition's log start offset forward; the answer is the new low watermark (on one
broker: the leader's log start offset).  v1 as v0, v2 flexible.

Per partition: offset -1 means the high watermark; an offset below -1 or above the high
watermark is OFFSET_OUT_OF_RANGE; a topic whose ``cleanup.policy`` lacks ``delete`` is
POLICY_VIOLATION; internal topics are INVALID_TOPIC_EXCEPTION; unknown partitions
UNKNOWN_TOPIC_OR_PARTITION; a partition this broker does not lead NOT_LEADER_OR_FOLLOWER.
Every failed partition reports low watermark -1.  Whole segments below the new start offset
are removed by the next retention pass, as in Kafka.
"""
from __future__ import annotations

import logging

from broker.dispatch import handler
from broker.handlers.duplicates import by_partition
from broker.replica import not_leader_error
from controller.api import is_internal_topic
from protocol.errors import ErrorCode as E
from protocol.messages import DeleteRecordsResponse
from storage.errors import OffsetOutOfRangeError, StorageError

log = logging.getLogger("odradek.admin")
R = DeleteRecordsResponse
HIGH_WATERMARK = -1


def _delete(broker, topic, partition, offset) -> tuple[int, int]:
    """(error code, low watermark) for one partition."""
    info = broker.controller.topic(topic)
    if info is None or partition not in info.partitions:
        return E.UNKNOWN_TOPIC_OR_PARTITION, -1
    if is_internal_topic(topic):
        return E.INVALID_TOPIC_EXCEPTION, -1
    part = broker.replicas.get(topic, partition)
    if part is None or not part.is_leader:
        return not_leader_error(part), -1
    lg = part.log
    if not lg.config.delete_enabled:
        return E.POLICY_VIOLATION, -1
    target = part.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0:
        return E.OFFSET_OUT_OF_RANGE, -1
    try:
        low = lg.delete_records(target)
    except OffsetOutOfRangeError:
        return E.OFFSET_OUT_OF_RANGE, -1
    except (StorageError, OSError) as exc:
        log.error("delete records of %s-%d failed: %s", topic, partition, exc)
        broker.log_manager.report_error((topic, partition), exc)
        return E.KAFKA_STORAGE_ERROR, -1
    part.wake()
    return E.NONE, low


@handler(21, 0, 2)
async def delete_records(ctx, req):
    broker = ctx.broker
    topics = []
    requested = by_partition(req.topics, "name", "partitions", "partition_index") or \
        [(t.name, t.partitions) for t in req.topics]
    for name, partitions in requested:
        parts = []
        for p in partitions:
            code, low = _delete(broker, name, p.partition_index, p.offset)
            parts.append(R.DeleteRecordsPartitionResult(partition_index=p.partition_index,
                                                        low_watermark=low, error_code=code))
            if code == E.NONE:
                log.info("log start offset of %s-%d is now %d (requested %d by %s)", name,
                         p.partition_index, low, p.offset, ctx.client_id)
        topics.append(R.DeleteRecordsTopicResult(name=name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)

"""DescribeProducers (key 61), v0 (flexible), as Kafka 3.9 answers it (KIP-664).

Per requested partition: the producers in the local log's producer state (``Log.producer_state``,
``storage/producer_state.py``) — producer id, epoch, last sequence, last timestamp, coordinator
epoch and the first offset of its open transaction; -1 where unknown (no batch with a sequence
yet, no marker seen, no open transaction).

Errors, per partition, in Kafka's order: an illegal topic name is INVALID_TOPIC_EXCEPTION (with
Kafka's message), a topic that does not exist or a partition index it does not have
UNKNOWN_TOPIC_OR_PARTITION, a partition with no replica on this broker NOT_LEADER_OR_FOLLOWER.
Like Kafka, any replica answers, leader or follower (so ``kafka-transactions.sh
describe-producers --broker-id N`` can ask a follower); clients ask the leader by default.
Authorization (READ on each topic, TOPIC_AUTHORIZATION_FAILED) is in ``broker/security/enforce.py``.
"""
from __future__ import annotations

from broker.dispatch import handler
from broker.replica import not_leader_error
from controller.api import validate_topic_name
from protocol.errors import ErrorCode as E
from protocol.messages import DescribeProducersResponse as R


def _active_producers(lg) -> list:
    out = []
    for pid, e in sorted(lg.producer_state.producers.items()):
        out.append(R.ProducerState(producer_id=pid, producer_epoch=e.producer_epoch,
                                   last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                                   coordinator_epoch=e.coordinator_epoch,
                                   current_txn_start_offset=e.current_txn_first_offset))
    return out


def _partition(broker, topic: str, index: int, topic_error):
    if topic_error is not None:
        code, message = topic_error
        return R.PartitionResponse(partition_index=index, error_code=code, error_message=message,
                                   active_producers=[])
    info = broker.controller.topic(topic)
    part = broker.replicas.get(topic, index)
    if part is None or part.offline:
        code = (E.UNKNOWN_TOPIC_OR_PARTITION if info is None or index not in info.partitions
                else not_leader_error(part))
        return R.PartitionResponse(partition_index=index, error_code=code, active_producers=[])
    return R.PartitionResponse(partition_index=index, error_code=E.NONE,
                               active_producers=_active_producers(part.log))


@handler(61, 0, 0)
async def describe_producers(ctx, req):
    broker = ctx.broker
    topics = []
    for t in req.topics:
        bad = validate_topic_name(t.name)
        if bad is not None:
            topic_error = (E.INVALID_TOPIC_EXCEPTION, bad)
        elif broker.controller.topic(t.name) is None:
            topic_error = (E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        else:
            topic_error = None
        parts = [_partition(broker, t.name, p, topic_error) for p in t.partition_indexes]
        topics.append(R.TopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)

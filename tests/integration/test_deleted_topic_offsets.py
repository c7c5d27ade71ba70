"""A deleted topic's committed offsets leave the groups (Kafka's onPartitionsDeleted), so that a
topic created again under the same name does not inherit them: Kafka Streams' application reset
deletes its internal topics, and the next instance, which recreates them, must read them from the
start (a stale offset made it skip records)."""
from __future__ import annotations

import time
import uuid

import pytest

pytestmark = pytest.mark.integration


def committed_offsets_forgotten(bootstrap: str) -> None:
    """Commit offsets of two topics in a group, delete one, create it again: its offsets are gone,
    the other topic's are kept."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    gone, kept, group = (f"{x}-{uuid.uuid4().hex[:6]}" for x in ("gone", "kept", "g"))
    for f in admin.create_topics([NewTopic(gone, 2, 1), NewTopic(kept, 1, 1)]).values():
        f.result(30)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(gone, 0, 7), TopicPartition(gone, 1, 9), TopicPartition(kept, 0, 5)]
        c.commit(offsets=tps, asynchronous=False)

        def committed():
            return {(tp.topic, tp.partition): tp.offset
                    for tp in c.committed([TopicPartition(t, p) for t, p in ((gone, 0), (gone, 1), (kept, 0))], 30)}
        assert committed() == {(gone, 0): 7, (gone, 1): 9, (kept, 0): 5}
        admin.delete_topics([gone])[gone].result(30)
        deadline = time.monotonic() + 30
        while True:             # the deletion may take a moment to finish (a cluster's controller)
            try:
                admin.create_topics([NewTopic(gone, 2, 1)])[gone].result(30)
                break
            except Exception:
                assert time.monotonic() < deadline
                time.sleep(0.3)
        assert committed() == {(gone, 0): -1001, (gone, 1): -1001, (kept, 0): 5}    # OFFSET_INVALID
    finally:
        c.close()


def test_offsets_of_a_deleted_topic_are_forgotten(broker):
    committed_offsets_forgotten(broker.bootstrap)

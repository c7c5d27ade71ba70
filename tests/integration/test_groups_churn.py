"""Churn: 20 confluent-kafka consumers join and leave one group in random order for a minute while a
producer writes.  At the end every record was consumed at least once, and after a final consumer
reads to the end and commits, the committed offsets reported for the group are exactly the log end
offsets.  Marked slow (about 90 s)."""
from __future__ import annotations

import random
import threading
import time

import pytest

from tests.integration.test_groups import (ThreadedConsumer, create_topic, kafka, unique,  # noqa: F401
                                           wait_owns_all)

PARTITIONS = 8
MEMBERS = 20
DURATION = 60


def committing_consumer(bootstrap, topic, group):
    from confluent_kafka import Consumer, KafkaException

    def factory():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        c.subscribe([topic])
        return c

    def poll(c):
        m = c.poll(0.1)
        if m is None or m.error():
            return []
        try:
            c.commit(message=m, asynchronous=False)
        except KafkaException:
            pass                    # a rebalance is under way: the record may be read again
        return [m.value().decode()]

    return ThreadedConsumer(factory, poll, lambda c: {tp.partition for tp in c.assignment()}, lambda c: c.close())


@pytest.mark.slow
def test_churn_twenty_consumers_for_a_minute(kafka):   # noqa: F811
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    topic, group = unique("churn"), unique("g")
    create_topic(kafka.bootstrap, topic, PARTITIONS)
    produced: list[str] = []
    stop = threading.Event()

    def producer():
        p = KafkaProducer(bootstrap_servers=kafka.bootstrap, linger_ms=5)
        i = 0
        while not stop.is_set():
            v = f"r{i}"
            p.send(topic, v.encode(), partition=i % PARTITIONS)
            produced.append(v)
            i += 1
            time.sleep(0.004)
        p.flush()
        p.close()

    pt = threading.Thread(target=producer, daemon=True)
    pt.start()
    rnd = random.Random(4)
    live: list[ThreadedConsumer] = []
    gone: list[ThreadedConsumer] = []
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < DURATION:
            if len(live) < MEMBERS and (not live or rnd.random() < 0.6):
                live.append(committing_consumer(kafka.bootstrap, topic, group))
            elif len(live) > 1:
                c = live.pop(rnd.randrange(len(live)))
                c.close()
                gone.append(c)
            time.sleep(rnd.uniform(0.2, 2.0))
    finally:
        stop.set()
        pt.join(30)
        for c in live:
            c.close()
        gone.extend(live)
    # a last member reads whatever is left and commits
    final = committing_consumer(kafka.bootstrap, topic, group)
    try:
        wait_owns_all(final, PARTITIONS, timeout=60)
        deadline = time.monotonic() + 60
        want = set(produced)
        while time.monotonic() < deadline:
            seen = {v for c in gone + [final] for v in c.snapshot()[1]}
            if want <= seen:
                break
            time.sleep(0.5)
        seen = {v for c in gone + [final] for v in c.snapshot()[1]}
        assert want <= seen, f"{len(want - seen)} records never consumed"
        time.sleep(1)
    finally:
        final.close()
    end = KafkaConsumer(bootstrap_servers=kafka.bootstrap)
    try:
        ends = end.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
    finally:
        end.close()
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        committed = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    assert {tp.partition: o.offset for tp, o in committed.items()} == {tp.partition: o for tp, o in ends.items()}
    assert sum(ends.values()) == len(produced)

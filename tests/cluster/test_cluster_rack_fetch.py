"""KIP-392 on a cluster: with ``replica.selector.class`` set to Kafka's RackAwareReplicaSelector,
the leader names the in-sync replica in a consumer's rack (``client.rack``) as its preferred read
replica, and librdkafka, kafka-python and aiokafka then read from that follower.  Which broker sent the records is read
from each broker's BytesOut counter for the topic."""
from __future__ import annotations

import time

import pytest

from broker.replica_selector import RACK_AWARE
from tests.support.metrics import expose, scrape, val

pytestmark = pytest.mark.cluster

N = 2_000
VALUE = b"v" * 200


def _consume(bootstrap, rack):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    conf = {"bootstrap.servers": bootstrap, "group.id": f"rack-{rack or 'none'}", "enable.auto.commit": False}
    if rack is not None:
        conf["client.rack"] = rack
    c = Consumer(conf)
    c.assign([TopicPartition("rr", 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < N and time.monotonic() < deadline:
        got += [m.offset() for m in c.consume(1000, timeout=0.5) if m.error() is None]
    c.close()
    return got


def _consume_kp(bootstrap, rack):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, client_rack=rack)
    tp = TopicPartition("rr", 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = []
    deadline = time.monotonic() + 60
    while len(got) < N and time.monotonic() < deadline:
        for recs in c.poll(500).values():
            got += [r.offset for r in recs]
    c.close()
    return got


def _consume_aio(bootstrap, rack):
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, client_rack=rack)
        await c.start()
        got = []
        try:
            tp = TopicPartition("rr", 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            deadline = time.monotonic() + 60
            while len(got) < N and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=500)).values():
                    got += [r.offset for r in recs]
        finally:
            await c.stop()
        return got
    return asyncio.run(run())


def test_consumers_read_the_replica_in_their_rack(cluster_factory):
    c = cluster_factory(3, start=False, racks={1: "r1", 2: "r2", 3: "r3"},
                        props={"replica.selector.class": RACK_AWARE})
    ports = expose(c.brokers)
    c.start()
    c.create_topic("rr", assignment={0: [1, 2, 3]})
    c.wait_for_isr("rr", 0, [1, 2, 3])
    assert c.leader("rr", 0) == 1

    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(N):
        p.produce("rr", VALUE, partition=0)
    assert p.flush(30) == 0

    def bytes_out():
        return {i: val(scrape(f"http://127.0.0.1:{port}/metrics"), "kafka_server_brokertopicmetrics_bytesout_total",
                       topic="rr") for i, port in ports.items()}

    total = N * len(VALUE)
    before = bytes_out()
    assert _consume(c.bootstrap, "r3") == list(range(N))
    after = bytes_out()
    sent = {i: after[i] - before[i] for i in after}
    assert sent[3] >= total and sent[1] == 0 and sent[2] == 0, sent       # all from the follower in r3

    for consume, rack, broker in ((_consume, "r1", 1), (_consume, None, 1), (_consume, "elsewhere", 1),
                                  (_consume, "r2", 2), (_consume_kp, "r2", 2), (_consume_aio, "r3", 3)):
        before = bytes_out()
        assert consume(c.bootstrap, rack) == list(range(N)), (consume.__name__, rack)
        after = bytes_out()
        sent = {i: after[i] - before[i] for i in after}
        assert sent[broker] >= total and all(v == 0 for i, v in sent.items() if i != broker), \
            (consume.__name__, rack, sent)

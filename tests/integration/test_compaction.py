"""Log compaction end to end: a compacted topic created with CreateTopics, written by
kafka-python, cleaned by the broker's background cleaner, read back from offset 0."""
from __future__ import annotations

import glob
import os
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = pytest.mark.integration

TOPIC = "compacted"


def _read_all(bootstrap, end):
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      consumer_timeout_ms=2000)
    tp = TopicPartition(TOPIC, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    out = []
    deadline = time.monotonic() + 20
    while c.position(tp) < end and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=500).values():
            out.extend(recs)
    c.close()
    return out


def test_compacted_topic_keeps_latest_value_per_key(broker_factory):
    b = broker_factory(overrides={"log.cleaner.backoff.ms": "200"})
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={
        "cleanup.policy": "compact", "segment.bytes": "1024", "segment.ms": "1500",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100"})])
    admin.close()

    p = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=0, acks=1)
    latest = {}
    for i in range(300):
        key = b"key-%d" % (i % 12)
        md = p.send(TOPIC, key=key, value=b"value-%d" % i).get(timeout=10)
        latest[key] = (md.offset, b"value-%d" % i)
    md = p.send(TOPIC, key=b"gone", value=b"x").get(timeout=10)
    md = p.send(TOPIC, key=b"gone", value=None).get(timeout=10)
    latest[b"gone"] = (md.offset, None)
    time.sleep(1.6)                       # segment.ms: the next append rolls the segment
    md = p.send(TOPIC, key=b"zz-end", value=b"end").get(timeout=10)
    latest[b"zz-end"] = (md.offset, b"end")
    end = md.offset + 1
    with pytest.raises(Exception) as err:            # Kafka: INVALID_RECORD, not retriable
        p.send(TOPIC, key=None, value=b"no key").get(timeout=10)
    assert "InvalidRecord" in type(err.value).__name__ or "87" in str(err.value)
    p.close()

    expect = sorted((off, k, v) for k, (off, v) in latest.items())
    got = None
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        got = [(r.offset, r.key, r.value) for r in _read_all(b.bootstrap, end)]
        if got == expect:
            break
        time.sleep(0.5)
    assert got == expect
    # the broker recorded the cleaned position
    cps = glob.glob(os.path.join(b.workdir, "**", "cleaner-offset-checkpoint"), recursive=True)
    assert cps and any(f"{TOPIC} 0 " in open(p).read() for p in cps)
    assert "cleaned log compacted-0" in b.log_tail(400)

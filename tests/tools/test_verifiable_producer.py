"""kafka-verifiable-producer.sh against a real broker: Kafka's JSON event lines (startup, one per
acknowledged send with its partition and offset, errors with Kafka's exception class, shutdown,
tool_data), keys and value prefixes as Kafka's tool makes them, the records really stored (read
back with kafka-python), a throttled run ended by SIGTERM still flushing and summing up, and an
invalid topic failing every send at once."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid

from kafka import KafkaConsumer, TopicPartition

from tests.tools.conftest import BIN, tool


def events(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_events_and_records(kafka):
    topic = "vp-" + uuid.uuid4().hex[:6]
    r = tool("kafka-verifiable-producer", "--bootstrap-server", kafka.bootstrap, "--topic", topic,
             "--max-messages", 20, "--repeating-keys", 3, "--value-prefix", 7, "--acks", -1)
    assert r.rc == 0, r
    ev = events(r.out)
    assert [e["name"] for e in ev] == ["startup_complete"] + ["producer_send_success"] * 20 + \
        ["shutdown_complete", "tool_data"]
    assert list(ev[1]) == ["timestamp", "name", "key", "value", "topic", "partition", "offset"]
    sends = ev[1:21]
    assert [e["value"] for e in sends] == [f"7.{i}" for i in range(20)]
    assert [e["key"] for e in sends] == [str(i % 3) for i in range(20)]
    assert {e["topic"] for e in sends} == {topic}
    tool_data = ev[-1]
    assert (tool_data["sent"], tool_data["acked"], tool_data["target_throughput"]) == (20, 20, -1)
    assert list(tool_data) == ["timestamp", "name", "sent", "acked", "target_throughput", "avg_throughput"]
    # what the events say was acknowledged is in the log, at those offsets
    c = KafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted({e["partition"] for e in sends})]
        c.assign(tps)
        c.seek_to_beginning()
        got = {}
        deadline = time.monotonic() + 20
        while len(got) < 20 and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                for m in recs:
                    got[(m.partition, m.offset)] = (m.key.decode(), m.value.decode())
    finally:
        c.close()
    assert got == {(e["partition"], e["offset"]): (e["key"], e["value"]) for e in sends}


def test_message_create_time(kafka):
    """--message-create-time: the first record carries that timestamp, as CreateTime."""
    topic = "vp-" + uuid.uuid4().hex[:6]
    r = tool("kafka-verifiable-producer", "--bootstrap-server", kafka.bootstrap, "--topic", topic,
             "--max-messages", 1, "--message-create-time", 1600000000000)
    assert r.rc == 0 and events(r.out)[-1]["acked"] == 1, r
    c = KafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False)
    try:
        c.assign([TopicPartition(topic, 0)])
        c.seek_to_beginning()
        recs = []
        deadline = time.monotonic() + 20
        while not recs and time.monotonic() < deadline:
            recs = [m for ms in c.poll(timeout_ms=500).values() for m in ms]
    finally:
        c.close()
    assert [(m.value, m.timestamp, m.timestamp_type) for m in recs] == [(b"0", 1600000000000, 0)]


def test_throttled_until_sigterm(kafka):
    topic = "vp-" + uuid.uuid4().hex[:6]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.Popen([str(BIN / "kafka-verifiable-producer.sh"), "--bootstrap-server", kafka.bootstrap,
                          "--topic", topic, "--throughput", "100"], stdout=subprocess.PIPE, text=True, env=env)
    time.sleep(2.5)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0
    ev = events(out)
    assert ev[-2]["name"] == "shutdown_complete" and ev[-1]["name"] == "tool_data"
    data = ev[-1]
    acked = [e for e in ev if e["name"] == "producer_send_success"]
    assert data["target_throughput"] == 100 and data["sent"] == data["acked"] == len(acked)
    assert 50 <= data["sent"] <= 300, data          # about 100 a second, over about 2 s


def test_usage_errors():
    r = tool("kafka-verifiable-producer", "--topic", "t", "--bootstrap-server", "h:1", "--acks", "all")
    assert r.rc == 1 and "verifiable-producer: error: argument --acks: invalid int value: 'all'" in r.err, r
    r = tool("kafka-verifiable-producer", "--bootstrap-server", "h:1")
    assert r.rc == 1 and "verifiable-producer: error: argument --topic is required" in r.err, r


def test_invalid_topic_fails_each_send(kafka):
    r = tool("kafka-verifiable-producer", "--bootstrap-server", kafka.bootstrap, "--topic", "bad topic!",
             "--max-messages", 2, timeout=30)
    assert r.rc == 0, r
    ev = events(r.out)
    errors = [e for e in ev if e["name"] == "producer_send_error"]
    assert [e["value"] for e in errors] == ["0", "1"]
    assert {e["exception"] for e in errors} == {"class org.apache.kafka.common.errors.InvalidTopicException"}
    assert ev[-1]["sent"] == 2 and ev[-1]["acked"] == 0

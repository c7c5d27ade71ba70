"""The log cleaner as an operator runs it: its keys changed dynamically at the cluster default
with ``kafka-configs.sh --entity-default`` (``log.cleaner.threads`` and
``log.cleaner.io.max.bytes.per.second``; confluent-kafka's and kafka-python's admin clients
refuse a broker resource without a name), read back with confluent-kafka's DescribeConfigs, two cleaner threads cleaning two topics, the throttle
seen in the cleaner's stats, and Kafka's LogCleaner / LogCleanerManager gauges on the
Prometheus endpoint."""
from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.support.metrics import expose, scrape, val

pytestmark = pytest.mark.integration

_CLEANED = re.compile(r"cleaned log (\S+)-0 \(dirty section \[\d+, \d+\)\) on cleaner thread (\d+): "
                      r".*throttled ([\d.]+) s")


def _wait(futures):
    return {k: f.result(timeout=30) for k, f in futures.items()}


BIN = Path(__file__).resolve().parents[2] / "bin"


def _configs(b, *args):
    cp = subprocess.run([str(BIN / "kafka-configs.sh"), "--bootstrap-server", b.bootstrap,
                         "--entity-type", "brokers", "--entity-default", "--alter", *args],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def _passes(b, after: str | None = None):
    """(topic, cleaner thread, seconds throttled) of every pass in the broker's log (after the
    first line holding ``after``)."""
    text = b.log_tail(5000)
    if after is not None:
        text = text[text.index(after):] if after in text else ""
    return [(m.group(1), int(m.group(2)), float(m.group(3))) for m in _CLEANED.finditer(text)]


def _fill(bootstrap, topics, seconds, per_second=300):
    """About ``per_second`` 1 KB records a second into each topic (20 keys) for ``seconds``,
    so the cleaner has work all along, as under a steady load."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "1"})
    value = b"v" * 1000
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < seconds:
        for t in topics:
            p.produce(t, key=b"key-%d" % (i % 20), value=value)
        i += 1
        if i % 30 == 0:
            p.poll(0)
            ahead = start + i / per_second - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    assert p.flush(30) == 0


def test_dynamic_cleaner_threads_throttle_and_gauges(broker_factory):
    b = broker_factory(start=False, overrides={"log.cleaner.backoff.ms": "200"})
    port = expose({0: b})[0]
    b.start()
    url = f"http://127.0.0.1:{port}/metrics"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    topics = ["cleaned-a", "cleaned-b"]
    conf = {"cleanup.policy": "compact", "segment.bytes": "50000",
            "min.cleanable.dirty.ratio": "0.01"}
    assert set(_wait(admin.create_topics([NewTopic(t, 1, 1, config=conf) for t in topics])).values()) == {None}

    # 200 KB/s for all cleaner threads together, and a second thread, as cluster defaults
    _configs(b, "--add-config", "log.cleaner.io.max.bytes.per.second=200000,log.cleaner.threads=2")
    described = _wait(admin.describe_configs([ConfigResource("broker", "0")]))
    (entries,) = described.values()
    assert entries["log.cleaner.threads"].value == "2"
    assert entries["log.cleaner.threads"].source == 3          # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert float(entries["log.cleaner.io.max.bytes.per.second"].value) == 200000.0

    # Kafka's throttle looks every 300 ms: a pass shorter than that after an idle spell runs
    # free, and the next one pays for it; so the load goes on for a while.  While one thread
    # sleeps off its log's bytes, the other takes the other log.
    _fill(b.bootstrap, topics, seconds=4)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        passes = _passes(b)
        if {t for t, _, _ in passes} == {"cleaned-a", "cleaned-b"} and {n for _, n, _ in passes} == {0, 1}:
            break
        time.sleep(0.5)
    passes = _passes(b)
    assert {t for t, _, _ in passes} == {"cleaned-a", "cleaned-b"}, passes
    assert {n for _, n, _ in passes} == {0, 1}, passes       # both threads cleaned
    assert any(s > 0 for _, _, s in passes), passes          # and the throttle held them back
    assert "log cleaner reconfigured" in b.log_tail(5000)

    m = scrape(url)
    assert val(m, "kafka_log_logcleaner_deadthreadcount") == 0
    assert 0 < val(m, "kafka_log_logcleaner_cleaner_recopy_percent") < 100     # it compacted
    assert ("kafka_log_logcleaner_max_clean_time_secs", ()) in m
    assert ("kafka_log_logcleaner_max_buffer_utilization_percent", ()) in m
    assert ("kafka_log_logcleaner_max_compaction_delay_secs", ()) in m
    assert ("kafka_log_logcleanermanager_max_dirty_percent", ()) in m
    assert 0 <= val(m, "kafka_log_logcleanermanager_time_since_last_run_ms") < 30_000
    dirs = [dict(labels)["logDirectory"] for (name, labels) in m
            if name == "kafka_log_logcleanermanager_uncleanable_partitions_count"]
    assert dirs == [str(b.log_dir)]
    assert val(m, "kafka_log_logcleanermanager_uncleanable_partitions_count", logDirectory=str(b.log_dir)) == 0
    assert val(m, "kafka_log_logcleanermanager_uncleanable_bytes", logDirectory=str(b.log_dir)) == 0

    # the throttle taken away again: it ends the sleeps under way, and the passes begun after
    # it are not held back
    _configs(b, "--delete-config", "log.cleaner.io.max.bytes.per.second")
    change = "log cleaner reconfigured: io_max_bytes_per_second=1.7976931348623157e+308"
    _fill(b.bootstrap, topics, seconds=2)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_passes(b, change)) < 6:
        time.sleep(0.5)
    later = _passes(b, change)
    assert len(later) >= 6, later
    # (each of the two threads may finish one pass begun before the change)
    for thread in (0, 1):
        mine = [s for _, n, s in later if n == thread][1:]
        assert mine == [0.0] * len(mine), later

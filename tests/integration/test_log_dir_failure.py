"""A log dir whose disk fails under a real broker (Kafka's LogDirFailureChannel).

The failing disk is real I/O (tests/support/failing_disk.py): the kernel reports the failed
writes at the next fsync, as it reports a dying disk.  With a flush after every message, the
broker meets it at once.  Needs root and loop devices; skipped without.

* Two log dirs, one on the failing disk: its partitions go offline (KAFKA_STORAGE_ERROR for
  produce, fetch and ListOffsets; Metadata: no leader, this broker's replica offline;
  DescribeLogDirs: the dir with KAFKA_STORAGE_ERROR), the other dir's partitions keep working
  for confluent-kafka and kafka-python, and the records acknowledged there are all read back.
* One log dir, on the failing disk: the broker stops with exit status 1, as Kafka halts.
"""
from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient

from protocol.errors import ErrorCode as E
from protocol.records import build_batch, iter_batches
from tests.support import BrokerProcess
from tests.support.failing_disk import FailingDisk
from tests.support.rawkafka import RawConnection

pytestmark = pytest.mark.integration

TOPIC = "disks"


@pytest.fixture
def disk(tmp_path):
    d = FailingDisk(tmp_path).setup()
    try:
        yield d
    finally:
        d.cleanup()


def _broker(tmp_path, dirs, partitions=4):
    b = BrokerProcess(tmp_path / "broker", props={
        "num.partitions": partitions,
        "log.flush.interval.messages": 1,          # every append is fsynced by the flusher
        "log.flush.scheduler.interval.ms": 50,
    })
    b.overrides["log.dirs"] = ",".join(str(d) for d in dirs)
    return b


def _batch(tag: bytes):
    return build_batch([(b"k", tag + os.urandom(2000), [], int(time.time() * 1000))])


def _values(c, partition):
    out, offset = [], 0
    while True:
        pd = c.fetch(TOPIC, partition, offset)
        assert pd.error_code == 0, pd.error_code
        hs = list(iter_batches(bytes(pd.records)))
        if not hs:
            return out
        for h in hs:
            out.append(h.base_offset)
        offset = hs[-1].last_offset + 1


def test_a_failed_log_dir_goes_offline_and_the_others_keep_serving(tmp_path, disk):
    healthy = tmp_path / "healthy"
    failing = disk.mount_point / "logs"
    b = _broker(tmp_path, [healthy, failing])
    b.start()
    try:
        c = RawConnection(b.host, b.port)
        md = c.metadata([TOPIC])
        assert md.topics[0].error_code == 0 and len(md.topics[0].partitions) == 4
        for p in range(4):
            assert c.produce(TOPIC, p, _batch(b"first"), acks=1).error_code == 0
        on_disk = sorted(p for p in range(4) if (failing / f"{TOPIC}-{p}").is_dir())
        kept = sorted(set(range(4)) - set(on_disk))
        assert on_disk and kept, (on_disk, kept)
        acked = {p: [0] for p in kept}

        disk.break_()
        deadline = time.monotonic() + 20
        failed = False
        while not failed and time.monotonic() < deadline:
            for p in on_disk:
                r = c.produce(TOPIC, p, _batch(b"more"), acks=1)
                failed = failed or r.error_code == E.KAFKA_STORAGE_ERROR
            for p in kept:
                r = c.produce(TOPIC, p, _batch(b"kept"), acks=1)
                assert r.error_code == 0, r.error_code      # the healthy dir never fails
                acked[p].append(r.base_offset)
            time.sleep(0.05)
        assert failed, "the failing disk was never noticed"
        time.sleep(0.2)
        for p in on_disk:
            assert c.produce(TOPIC, p, _batch(b"late"), acks=1).error_code == E.KAFKA_STORAGE_ERROR
            assert c.fetch(TOPIC, p, 0).error_code == E.KAFKA_STORAGE_ERROR
            assert c.list_offsets(TOPIC, p, -1).error_code == E.KAFKA_STORAGE_ERROR
        for p in kept:
            assert _values(c, p) == acked[p]
        parts = {x.partition_index: x for x in c.metadata([TOPIC]).topics[0].partitions}
        for p in on_disk:
            assert (parts[p].leader_id, parts[p].error_code) == (-1, E.LEADER_NOT_AVAILABLE)
            assert parts[p].offline_replicas == [0]
        for p in kept:
            assert (parts[p].leader_id, parts[p].error_code, parts[p].offline_replicas) == (0, 0, [])
        c.close()

        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)
        try:
            (entry,) = admin.describe_log_dirs()
            errors = {d["log_dir"]: d["error_code"] for d in entry["log_dirs"]}
            assert errors == {str(healthy): 0, str(failing): E.KAFKA_STORAGE_ERROR}
        finally:
            admin.close()

        # librdkafka: the healthy partitions take records, the offline ones refuse them
        outcome = {}
        prod = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "message.timeout.ms": 4000,
                         "retry.backoff.ms": 100})
        for p in range(4):
            prod.produce(TOPIC, b"v%d" % p, partition=p,
                         on_delivery=lambda err, msg: outcome.__setitem__(msg.partition(), err))
        prod.flush(15)
        assert sorted(outcome) == list(range(4))
        assert all(outcome[p] is None for p in kept), outcome
        assert all(outcome[p] is not None for p in on_disk), outcome

        log_text = b.log_path.read_text(errors="replace")
        assert "offline due to failure on log directory " + str(failing) in log_text
        assert b.stop() == 0
        assert (healthy / ".kafka_cleanshutdown").exists()
    finally:
        b.kill()


def test_the_broker_stops_when_its_only_log_dir_fails(tmp_path, disk):
    b = _broker(tmp_path, [disk.mount_point / "logs"], partitions=1)
    b.start()
    try:
        c = RawConnection(b.host, b.port)
        assert c.metadata([TOPIC]).topics[0].error_code == 0
        assert c.produce(TOPIC, 0, _batch(b"first"), acks=1).error_code == 0
        disk.break_()
        deadline = time.monotonic() + 20
        while b.returncode is None and time.monotonic() < deadline:
            try:
                c.produce(TOPIC, 0, _batch(b"more"), acks=1)
            except Exception:
                pass                # the broker going away
            time.sleep(0.05)
        assert b.returncode == 1
        assert "Shutdown broker because all log dirs in" in b.log_path.read_text(errors="replace")
    finally:
        b.kill()

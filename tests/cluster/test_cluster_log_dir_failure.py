"""A failed log dir in a three-broker ZooKeeper cluster (Kafka's LogDirFailureHandler and the
controller's LogDirEventNotification).

Broker 1 has two log dirs, one on a disk that fails on demand (tests/support/failing_disk.py).
When it fails, broker 1 writes /log_dir_event_notification; the controller asks broker 1 with
LeaderAndIsr which replicas are offline; broker 1 answers KAFKA_STORAGE_ERROR for those on the
failed dir; the controller moves their leadership away and drops broker 1 from their ISRs.  An
idempotent acks=all producer goes on through it, and every acknowledged record is read back
exactly once.  Broker 1 keeps serving its other dir.  Restarted with the disk gone from its
log.dirs, broker 1 is given those replicas back, empty, and catches up from the leaders."""
from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient

from tests.cluster.workload import NumberedProducer, check_no_loss, read_all
from tests.support.failing_disk import FailingDisk
from tests.support.rawkafka import RawConnection

pytestmark = pytest.mark.cluster

TOPIC = "failing"
PARTS = 6


def test_a_failed_log_dir_moves_leadership_and_loses_nothing(cluster_factory, tmp_path):
    disk = FailingDisk(tmp_path).setup()
    try:
        c = cluster_factory(3, start=False)
        b1 = c.brokers[1]
        healthy = b1.workdir / "d1"
        failing = disk.mount_point / "logs"
        b1.overrides["log.dirs"] = f"{healthy},{failing}"
        b1.props["log.flush.interval.messages"] = "1"
        b1.props["log.flush.scheduler.interval.ms"] = "50"
        c.start()
        c.create_topic(TOPIC, partitions=PARTS, rf=3)
        for p in range(PARTS):
            c.wait_for_isr(TOPIC, p, [1, 2, 3])
        on_disk = sorted(p for p in range(PARTS) if (failing / f"{TOPIC}-{p}").is_dir())
        assert on_disk and len(on_disk) < PARTS, on_disk
        led_there = [p for p in on_disk if c.leader(TOPIC, p) == 1]

        prod = NumberedProducer(c.bootstrap, TOPIC, PARTS).start()
        try:
            prod.wait_acked(600, 60)
            disk.break_()

            def moved():
                return all(c.leader(TOPIC, p) not in (1, -1) and 1 not in c.isr(TOPIC, p)
                           for p in on_disk)
            c.wait_for(moved, 60, "leadership and ISRs off the failed dir", interval=0.2)
            prod.wait_acked(600, 60)            # produce goes on
        finally:
            prod.stop()
        assert not prod.failed, prod.failed[:5]
        assert b1.returncode is None                        # its other dir still serves
        for p in set(range(PARTS)) - set(on_disk):
            assert 1 in c.isr(TOPIC, p)
        # every broker's Metadata lists broker 1's replicas on the failed dir as offline
        for i, b in c.brokers.items():
            rc = RawConnection(b.host, b.port)
            try:
                parts = {x.partition_index: x for x in rc.metadata([TOPIC]).topics[0].partitions}
            finally:
                rc.close()
            for p in range(PARTS):
                assert parts[p].offline_replicas == ([1] if p in on_disk else []), (i, p)
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=15000)
        try:
            (entry,) = admin.describe_log_dirs(brokers=[1])
            errors = {d["log_dir"]: d["error_code"] for d in entry["log_dirs"]}
            assert errors == {str(healthy): 0, str(failing): 56}
        finally:
            admin.close()
        log = read_all(c.bootstrap_of([2, 3]), TOPIC, PARTS)
        report = check_no_loss(prod.acked, log)
        assert report["n_problems"] == 0 and report["acked"] >= 1200, report
        assert led_there == [] or all(c.leader(TOPIC, p) != 1 for p in led_there)

        # the disk is replaced by nothing: broker 1 restarts with its healthy dir alone and
        # gets the lost replicas back from the leaders
        c.stop(1)
        b1.overrides["log.dirs"] = str(healthy)
        c.start_broker(1)
        for p in range(PARTS):
            c.wait_for_isr(TOPIC, p, [1, 2, 3])
    finally:
        disk.cleanup()

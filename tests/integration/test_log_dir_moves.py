"""AlterReplicaLogDirs against a real broker with two log dirs: kafka-python's admin client moves
a replica while confluent-kafka produces to it with acks=all; every acknowledged record is read
back in order from the new dir, after a clean restart too, and a move cut short by kill -9 goes
on after the restart.  Error answers, and DescribeLogDirs during and after a move."""
from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition as CTP
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.errors import LogDirNotFoundError, NoError, UnknownTopicOrPartitionError

from tests.support import BrokerProcess

pytestmark = pytest.mark.integration


def _broker(tmp_path):
    b = BrokerProcess(tmp_path, props={"log.segment.delete.delay.ms": "200",
                                       "file.delete.delay.ms": "200",
                                       "log.retention.check.interval.ms": "300"})
    b.dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    b.overrides["log.dirs"] = ",".join(b.dirs)
    return b


def _admin(b):
    return KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)


def _where(admin, topic):
    """{log dir: [(partition, is_future, size, lag)]} for ``topic``."""
    (entry,) = admin.describe_log_dirs(topic_partitions=[topic])
    out = {}
    for d in entry["log_dirs"]:
        for t in d["topics"]:
            if t["name"] == topic:
                out[d["log_dir"]] = [(p["partition_index"], p["is_future_key"], p["partition_size"],
                                      p["offset_lag"]) for p in t["partitions"]]
    return out


def _wait_moved(admin, topic, dest, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        where = _where(admin, topic)
        if list(where) == [dest] and not any(f for _, f, _, _ in where[dest]):
            return where
        time.sleep(0.1)
    raise AssertionError(f"{topic} not moved to {dest}: {_where(admin, topic)}")


def _produce(b, topic, n, size=1000, acks="all"):
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": acks, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, b"%08d" % i + bytes(size - 8), partition=0)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def _read_all(b, topic, expected):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([CTP(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for m in c.consume(10000, timeout=1.0):
            if m.error():
                if m.error().code() == -191 and len(out) >= expected:      # partition EOF
                    c.close()
                    return out
                continue
            out.append((m.offset(), m.value()))
    c.close()
    raise AssertionError(f"read {len(out)} of {expected} records")


@contextlib.contextmanager
def _topic_on_broker(tmp_path, topic, records, partitions=1, acks="all"):
    """A started broker with two log dirs, and ``topic`` holding ``records`` of 1,000 bytes."""
    b = _broker(tmp_path)
    b.start()
    admin = None
    try:
        admin = _admin(b)
        admin.create_topics({topic: {"num_partitions": partitions}})
        _produce(b, topic, records, acks=acks)
        yield b, admin
    finally:
        if admin is not None:
            admin.close()
        b.stop()


def _source_and_target(admin, b, topic):
    (src,) = _where(admin, topic)
    return src, next(d for d in b.dirs if d != src)


def test_move_while_producing_keeps_every_acked_record(tmp_path):
    topic = "move-under-load"
    with _topic_on_broker(tmp_path, topic, 30000) as (b, admin):     # 30 MB to copy
        src, dest = _source_and_target(admin, b, topic)
        acked, stop = [], threading.Event()

        def producer():
            p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 1,
                          "enable.idempotence": True})
            i = 0
            while not stop.is_set():        # about 20,000 records a second
                for _ in range(20):
                    p.produce(topic, b"live-%08d" % i, partition=0,
                              on_delivery=lambda err, m: err is None and acked.append((m.offset(), m.value())))
                    i += 1
                p.poll(0.001)
            assert p.flush(30) == 0
            flushed.set()           # every ack is in ``acked`` now

        seen, errors, flushed = [], [], threading.Event()

        def consumer():                 # reads the tail through the swap, long-polling
            c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g-" + uuid.uuid4().hex,
                          "enable.auto.commit": False, "fetch.wait.max.ms": 500})
            c.assign([CTP(topic, 0, 30000)])
            # until the producer has flushed (its last acks arrive in the flush) and every ack
            # is seen, or 30 s after the stop
            while not flushed.is_set() or len(seen) < len(acked):
                for m in c.consume(1000, timeout=0.2):
                    if m.error():
                        errors.append(m.error())
                    else:
                        seen.append((m.offset(), m.value()))
                if stop.is_set() and time.monotonic() > stopped_at[0] + 30:
                    break
            c.close()

        stopped_at = [float("inf")]
        threads = [threading.Thread(target=producer), threading.Thread(target=consumer)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        res = admin.alter_replica_log_dirs({(topic, 0, 0): dest})
        assert list(res.values()) == [NoError]
        _wait_moved(admin, topic, dest)
        time.sleep(0.3)                             # some records after the swap too
        stop.set()
        stopped_at[0] = time.monotonic()
        for t in threads:
            t.join()
        assert list(_where(admin, topic)) == [dest]
        assert os.path.isdir(os.path.join(dest, f"{topic}-0"))
        assert not os.path.exists(os.path.join(src, f"{topic}-0"))
        acked.sort()
        assert len(acked) > 100 and acked[-1][0] > 30000
        records = _read_all(b, topic, 30000 + len(acked))
        assert [o for o, _ in records] == list(range(len(records)))      # no gap, no repeat
        assert records[:30000] == [(i, b"%08d" % i + bytes(992)) for i in range(30000)]
        assert all(records[o] == (o, v) for o, v in acked)               # every ack, in place
        # the reader following the tail saw every record once, in order, and no error
        assert not errors and seen == records[30000:30000 + len(seen)] and len(seen) >= len(acked)
        b.restart(clean=True)
        with contextlib.closing(_admin(b)) as again:
            assert list(_where(again, topic)) == [dest]
        assert _read_all(b, topic, len(records)) == records


def test_a_move_cut_short_by_kill_goes_on_after_restart(tmp_path):
    topic = "move-killed"
    with _topic_on_broker(tmp_path, topic, 120000, acks="1") as (b, admin):  # a copy that takes a while
        src, dest = _source_and_target(admin, b, topic)
        assert list(admin.alter_replica_log_dirs({(topic, 0, 0): dest}).values()) == [NoError]
        b.kill()
        left = os.listdir(dest)         # killed during the copy: both copies on disk
        assert any(n.startswith(f"{topic}-0.") and n.endswith("-future") for n in left), left
        assert os.path.isdir(os.path.join(src, f"{topic}-0"))
        b.start()
        with contextlib.closing(_admin(b)) as again:
            _wait_moved(again, topic, dest)
        records = _read_all(b, topic, 120000)
        assert [(o, v[:8]) for o, v in records] == [(i, b"%08d" % i) for i in range(120000)]


def test_alter_replica_log_dirs_answers(tmp_path):
    topic = "answers"
    with _topic_on_broker(tmp_path, topic, 10, partitions=2) as (b, admin):
        where = {p: d for d, ps in _where(admin, topic).items() for p, _, _, _ in ps}
        assert set(where) == {0, 1} and where[0] != where[1]    # spread: fewest partitions first
        other = next(d for d in b.dirs if d != where[0])
        res = admin.alter_replica_log_dirs({
            (topic, 0, 0): str(tmp_path / "not-a-log-dir"),
            (topic, 1, 0): where[1],                # where it is already: nothing to do
            ("no-such-topic", 0, 0): other,
        })
        by = {(k.topic, k.partition): v for k, v in res.items()}
        assert by == {(topic, 0): LogDirNotFoundError, (topic, 1): NoError,
                      ("no-such-topic", 0): UnknownTopicOrPartitionError}     # as Kafka: not in the metadata
        assert {p: d for d, ps in _where(admin, topic).items() for p, f, _, _ in ps if not f} == where
        # a replica created after the request goes to the dir it named (Kafka's preferred dir)
        admin.create_topics({"no-such-topic": {"num_partitions": 1}})
        deadline = time.monotonic() + 10
        while list(_where(admin, "no-such-topic")) != [other] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(_where(admin, "no-such-topic")) == [other]


def test_a_throttled_move_shows_in_describe_log_dirs(tmp_path):
    """replica.alter.log.dirs.io.max.bytes.per.second (a dynamic broker config) paces the copy;
    meanwhile DescribeLogDirs lists the replica in its dir and its future copy, behind, in the
    other; lifting the throttle lets the move finish."""
    topic = "throttled-move"
    with _topic_on_broker(tmp_path, topic, 5000) as (b, admin):
        src, dest = _source_and_target(admin, b, topic)
        key = "replica.alter.log.dirs.io.max.bytes.per.second"
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0", configs={key: "300000"})])
        assert list(admin.alter_replica_log_dirs({(topic, 0, 0): dest}).values()) == [NoError]

        def copy_state(after=0):
            """(copied bytes, lag) of the future replica once it has copied more than ``after``."""
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                where = _where(admin, topic)
                if dest in where and where[dest][0][2] > after:
                    ((p, future, copied, lag),) = where[dest]
                    assert (p, future) == (0, True)
                    ((p, future, size, current_lag),) = where[src]     # still the current copy
                    assert (p, future, current_lag) == (0, False, 0) and size > 5_000_000
                    return copied, lag
                time.sleep(0.1)
            raise AssertionError(f"no progress past {after} bytes: {_where(admin, topic)}")
        copied, lag = copy_state()
        assert 0 < lag < 5000 and copied < 4_000_000     # at 300 KB/s the 5 MB take ~17 s
        later, less = copy_state(copied)
        assert later < 4_500_000 and less < lag          # going on, at the throttle's pace
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0", configs={key: str(2**63 - 1)})])
        _wait_moved(admin, topic, dest, timeout=20)
        records = _read_all(b, topic, 5000)
        assert [(o, v[:8]) for o, v in records] == [(i, b"%08d" % i) for i in range(5000)]


def test_reassign_partitions_tool_moves_between_log_dirs(tmp_path):
    """kafka-reassign-partitions.sh with a log dir in "log_dirs": --execute starts the move with
    its throttle, --verify follows it with Kafka's lines and clears the throttle at the end."""
    import json

    from tests.tools.conftest import tool
    topic = "tool-move"
    with _topic_on_broker(tmp_path, topic, 5000) as (b, admin):
        src, dest = _source_and_target(admin, b, topic)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [0], "log_dirs": [dest]}]}))
        r = tool("kafka-reassign-partitions", "--bootstrap-server", b.bootstrap, "--execute",
                 "--reassignment-json-file", plan, "--replica-alter-log-dirs-throttle", "500000")
        assert r.rc == 0, r
        assert json.loads(r.lines[2])["partitions"] == [
            {"topic": topic, "partition": 0, "replicas": [0], "log_dirs": ["any"]}]
        assert r.lines[3:] == [
            "", "Save this to use as the --reassignment-json-file option during rollback",
            "Warning: You must run --verify periodically, until the reassignment completes, to "
            "ensure the throttle is removed.",
            "The replica-alter-dir throttle limit was set to 500000 B/s",
            f"Successfully started partition reassignment for {topic}-0",
            f"Successfully started log directory move for: {topic}-0-0"]
        key = "replica.alter.log.dirs.io.max.bytes.per.second"

        def throttle():
            res = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")])
            entries = [v for by_name in res.values() for cfgs in by_name.values() for k, v in cfgs.items()
                       if k == key]
            return entries[0]["value"] if entries else None
        assert throttle() == "500000"
        v = tool("kafka-reassign-partitions", "--bootstrap-server", b.bootstrap, "--verify",
                 "--reassignment-json-file", plan)
        assert v.rc == 0 and v.lines == ["Status of partition reassignment:",
                                         f"Reassignment of partition {topic}-0 is completed.",
                                         f"Reassignment of replica {topic}-0-0 is still in progress."], v
        assert throttle() == "500000"           # kept while the move runs
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0", configs={key: str(2**63 - 1)})])
        _wait_moved(admin, topic, dest, timeout=20)
        v = tool("kafka-reassign-partitions", "--bootstrap-server", b.bootstrap, "--verify",
                 "--reassignment-json-file", plan)
        assert v.rc == 0 and v.lines == ["Status of partition reassignment:",
                                         f"Reassignment of partition {topic}-0 is completed.",
                                         f"Reassignment of replica {topic}-0-0 completed successfully.",
                                         "Clearing broker-level throttles on broker 0",
                                         f"Clearing topic-level throttles on topic {topic}"], v
        assert throttle() is None               # cleared: back to the default, not listed as modified
        # back where it came from, then a plan naming a dir that is not one
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [0], "log_dirs": [src]}]}))
        r = tool("kafka-reassign-partitions", "--bootstrap-server", b.bootstrap, "--execute",
                 "--reassignment-json-file", plan)
        assert r.rc == 0 and r.lines[-1] == f"Successfully started log directory move for: {topic}-0-0", r
        _wait_moved(admin, topic, src, timeout=20)
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [0], "log_dirs": [str(tmp_path / "nope")]}]}))
        r = tool("kafka-reassign-partitions", "--bootstrap-server", b.bootstrap, "--execute",
                 "--reassignment-json-file", plan)
        assert r.rc == 1 and f"Error: Failed to alter dir for {topic}-0-0" in r.out, r
        records = _read_all(b, topic, 5000)
        assert [(o, v[:8]) for o, v in records] == [(i, b"%08d" % i) for i in range(5000)]


def test_single_broker_reassignment_answers(tmp_path):
    """The embedded store's AlterPartitionReassignments: its one possible assignment completes at
    once, anything else gets the ZooKeeper controller's answers (kafka-python's admin)."""
    from kafka import TopicPartition
    from kafka.errors import (InvalidReplicationAssignmentError, NoReassignmentInProgressError,
                              UnknownTopicOrPartitionError)
    topic = "reassign-one"
    with _topic_on_broker(tmp_path, topic, 10) as (b, admin):
        res = admin.alter_partition_reassignments({
            TopicPartition(topic, 0): [0],
            TopicPartition("no-such-topic", 0): [0],
        })
        assert res[TopicPartition(topic, 0)] in (None, NoError)
        assert res[TopicPartition("no-such-topic", 0)] is UnknownTopicOrPartitionError
        for replicas, error in (([0, 1], InvalidReplicationAssignmentError),   # broker 1 is not alive
                                ([0, 0], InvalidReplicationAssignmentError),   # duplicate
                                (None, NoReassignmentInProgressError)):    # nothing to cancel
            res = admin.alter_partition_reassignments({TopicPartition(topic, 0): replicas})
            assert res[TopicPartition(topic, 0)] is error, (replicas, res)
        assert not admin.list_partition_reassignments()

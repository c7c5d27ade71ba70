"""kafka-mirror-maker.sh between two real brokers: the records of the included topics (keys,
values, headers, timestamps, per-key order) arrive on the target, offsets are committed on the
source only for what was copied, a restart copies only what is new, a failed send stops it
without committing (exit 255), a Python message handler rewrites records, and bad command lines
are refused."""
from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.support import BrokerProcess, broker_command_available
from tests.support.broker import running
from tests.tools.conftest import BIN, tool


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    ok, why = broker_command_available()
    if not ok:
        pytest.skip(why)
    with running(BrokerProcess(tmp_path_factory.mktemp("mm-source"), name="mm-source")) as source, \
            running(BrokerProcess(tmp_path_factory.mktemp("mm-target"), name="mm-target")) as target:
        yield source, target


def create(broker, topic, partitions=1, configs=None):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})])
    finally:
        admin.close()


def write(broker, topic, n, start=0, size=0):
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    sent = []
    for i in range(start, start + n):
        key, value = f"k{i % 7}".encode(), (f"v{i}-" + "x" * size).encode()
        headers, ts = [("h", f"{i}".encode())], 1_700_000_000_000 + i
        p.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts)
        sent.append((key, value, headers, ts))
    p.flush()
    p.close()
    return sent


def read_all(broker, topic, expect, timeout=30.0):
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    got = []
    try:
        parts = None
        deadline = time.monotonic() + timeout
        while not parts and time.monotonic() < deadline:
            parts = c.partitions_for_topic(topic)
            if not parts:
                time.sleep(0.2)
        if not parts:
            return got
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        c.assign(tps)
        c.seek_to_beginning()
        while len(got) < expect and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=300).values():
                got.extend(recs)
    finally:
        c.close()
    return got


def committed(broker, group):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        return {(tp.topic, tp.partition): om.offset for tp, om in admin.list_group_offsets(group)[group].items()}
    finally:
        admin.close()


def configs(tmp_path, source, target, group, **consumer):
    c, p = tmp_path / "consumer.properties", tmp_path / "producer.properties"
    extra = "".join(f"{k.replace('_', '.')}={v}\n" for k, v in consumer.items())
    c.write_text(f"bootstrap.servers={source.bootstrap}\ngroup.id={group}\nauto.offset.reset=earliest\n{extra}")
    p.write_text(f"bootstrap.servers={target.bootstrap}\n")
    return c, p


def start(c, p, *args, env=None):
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    e.update(env or {})
    return subprocess.Popen([str(BIN / "kafka-mirror-maker.sh"), "--consumer.config", str(c),
                             "--producer.config", str(p), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, cwd="/")


def stop(proc) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


def test_copies_included_topics_and_commits(clusters, tmp_path):
    source, target = clusters
    tag = uuid.uuid4().hex[:6]
    a, b, skipped = f"mma-{tag}", f"mmb-{tag}", f"skip-{tag}"
    create(source, a, 3)
    create(source, b, 1)
    create(source, skipped, 1)
    sent_a, sent_b = write(source, a, 300), write(source, b, 50)
    write(source, skipped, 5)
    group = "mm-" + tag
    c, p = configs(tmp_path, source, target, group,
                   partition_assignment_strategy="org.apache.kafka.clients.consumer.RoundRobinAssignor")
    proc = start(c, p, "--include", f" '{a}, {b}' ", "--num.streams", 2, "--offset.commit.interval.ms", 500)
    try:
        got_a, got_b = read_all(target, a, 300), read_all(target, b, 50)
    finally:
        rc, err = stop(proc)
    assert rc == 0, err
    assert "WARNING" not in err              # a strategy was given
    for sent, got in ((sent_a, got_a), (sent_b, got_b)):
        assert sorted((r.key, r.value, [(k, bytes(v)) for k, v in r.headers], r.timestamp) for r in got) == \
            sorted((k, v, h, ts) for k, v, h, ts in sent)
        # a key's records keep their order (one request in flight, one partition per key)
        for key in {k for k, *_ in sent}:
            assert [r.value for r in sorted(got, key=lambda r: (r.partition, r.offset)) if r.key == key] == \
                [v for k, v, *_ in sent if k == key]
    assert read_all(target, skipped, 1, timeout=2) == []
    ends = {(a, 0): 0, (a, 1): 0, (a, 2): 0}
    src = read_all(source, a, 300)
    for r in src:
        ends[(a, r.partition)] = max(ends[(a, r.partition)], r.offset + 1)
    ends[(b, 0)] = 50
    assert committed(source, group) == ends

    # a second run copies only what came since
    more = write(source, b, 20, start=50)
    proc = start(c, p, "--include", b)
    try:
        got_b = read_all(target, b, 70)
        time.sleep(1.0)                      # anything copied twice would show up by now
        got_b = read_all(target, b, 71, timeout=2)
    finally:
        rc, err = stop(proc)
    assert rc == 0, err
    assert "WARNING" not in err
    assert sorted(r.value for r in got_b) == sorted(v for _, v, _, _ in sent_b + more)
    assert committed(source, group)[(b, 0)] == 70


def test_send_failure_aborts_without_commit(clusters, tmp_path):
    source, target = clusters
    tag = uuid.uuid4().hex[:6]
    topic = f"mmbig-{tag}"
    create(source, topic, 1)
    create(target, topic, 1, {"max.message.bytes": "200"})
    write(source, topic, 10, size=1000)
    group = "mm-" + tag
    c, p = configs(tmp_path, source, target, group)
    proc = start(c, p, "--whitelist", topic)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 255, err
    assert "org.apache.kafka.common.errors.RecordTooLargeException" in err, err
    assert "WARNING: with no partition.assignment.strategy" in err
    assert (topic, 0) not in committed(source, group)
    assert read_all(target, topic, 1, timeout=2) == []


HANDLER = '''
class Upper:
    def __init__(self, args=None):
        self.prefix = args or "copy-"

    def handle(self, r):
        return [(self.prefix + r.topic, None, r.timestamp, r.key, r.value.upper(), r.headers),
                (self.prefix + r.topic, None, r.timestamp, r.key, r.value, r.headers)]
'''


def test_message_handler(clusters, tmp_path):
    source, target = clusters
    tag = uuid.uuid4().hex[:6]
    topic = f"mmh-{tag}"
    create(source, topic, 1)
    write(source, topic, 5)
    (tmp_path / "mm_handler.py").write_text(HANDLER)
    c, p = configs(tmp_path, source, target, "mm-" + tag)
    proc = start(c, p, "--include", topic, "--message.handler", "mm_handler.Upper",
                 "--message.handler.args", "h-", env={"PYTHONPATH": str(tmp_path)})
    try:
        got = read_all(target, f"h-{topic}", 10)
    finally:
        rc, err = stop(proc)
    assert rc == 0, err
    assert sorted(r.value for r in got) == sorted([f"V{i}-".encode() for i in range(5)]
                                                  + [f"v{i}-".encode() for i in range(5)])


def test_bad_command_lines(clusters, tmp_path):
    source, target = clusters
    c, p = configs(tmp_path, source, target, "g")
    r = tool("kafka-mirror-maker", "--consumer.config", c)
    assert r.rc == 1 and 'Missing required argument "[producer.config]"' in r.err, r
    r = tool("kafka-mirror-maker", "--consumer.config", c, "--producer.config", p)
    assert r.rc == 1 and "include list must be specified" in r.err, r
    r = tool("kafka-mirror-maker", "--consumer.config", c, "--producer.config", p, "--include", "a(")
    assert r.rc == 1 and "a( is an invalid regex." in r.err, r
    r = tool("kafka-mirror-maker", "--consumer.config", c, "--producer.config", p, "--include", "a",
             "--message.handler", "kafka.tools.MirrorMaker.IdentityHandler")
    assert r.rc == 1 and "Class kafka.tools.MirrorMaker.IdentityHandler cannot be found" in r.err, r
    nogroup = tmp_path / "nogroup.properties"
    nogroup.write_text(f"bootstrap.servers={source.bootstrap}\n")
    r = tool("kafka-mirror-maker", "--consumer.config", nogroup, "--producer.config", p, "--include", "a")
    assert r.rc == 1 and "you must provide a valid group.id" in r.err, r
    r = tool("kafka-mirror-maker", "--help")
    assert r.rc == 0 and "--offset.commit.interval.ms" in r.out, r


def test_new_matching_topic_is_picked_up(clusters, tmp_path):
    """A topic created after the start that matches --include is copied once the consumers'
    metadata (metadata.max.age.ms) shows it: the group rebalances to take it in."""
    source, target = clusters
    tag = uuid.uuid4().hex[:6]
    first, later = f"mmn-{tag}-1", f"mmn-{tag}-2"
    create(source, first, 1)
    write(source, first, 3)
    c, p = configs(tmp_path, source, target, "mm-" + tag, metadata_max_age_ms=1000)
    proc = start(c, p, "--include", f"mmn-{tag}-.*")
    try:
        assert len(read_all(target, first, 3)) == 3
        create(source, later, 2)
        write(source, later, 8)
        got = read_all(target, later, 8)
    finally:
        rc, err = stop(proc)
    assert rc == 0, err
    assert sorted(r.value for r in got) == sorted(f"v{i}-".encode() for i in range(8))

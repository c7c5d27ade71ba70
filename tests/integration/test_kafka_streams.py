"""Apache Kafka Streams against a real broker (marker ``java``, not in the default tier).

``tests/java/StreamsWordCount.java`` (ours) is a word count under exactly_once_v2: lines in,
a repartition topic, an in-memory store with its changelog, every new count out.  It is compiled
against ``ODRADEK_KAFKA_STREAMS_CP`` (the kafka-streams jar and the RocksDB Java classes it
compiles against; the in-memory store never loads RocksDB's native library) joined to
``ODRADEK_KAFKA_CLIENTS_CP`` (tests/integration/test_java_client.py), and run as processes that
the tests start, crash and stop.  README.md, "The Java client", says how the jars were built.

Under exactly-once, a consumer reading the output with read_committed sees, for every word,
the counts 1, 2, ..., n with no gap and no repeat -- also when an instance is killed with
SIGKILL mid-transaction, or a broker is, and the work moves to the other instance.
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import threading
import time
import uuid

import pytest

from tests.integration.test_java_client import _classpath
from tests.support import BrokerProcess
from tests.support.broker import running

pytestmark = pytest.mark.java

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(os.path.dirname(HERE), "java", "StreamsWordCount.java")
WORDS = [f"w{i:02d}" for i in range(40)]


def _streams_classpath() -> str:
    clients = _classpath()
    streams = os.environ.get("ODRADEK_KAFKA_STREAMS_CP", "")
    if not streams:
        pytest.fail("ODRADEK_KAFKA_STREAMS_CP is not set: it must name the kafka-streams jar and the "
                    "RocksDB Java classes it compiles against (see this module's docstring)")
    return clients + os.pathsep + streams


class App:
    """One StreamsWordCount process; its output lines are collected by a thread."""

    def __init__(self, work, cp: str, classes, bootstrap: str, app_id: str, name: str, rf: int, delay_ms: int = 0,
                 protocol: str = "classic"):
        self.name = name
        self.app_id = app_id
        self.lines: list[str] = []
        state = work / f"state-{name}"
        self.err = open(work / f"{name}.err", "w")
        self.proc = subprocess.Popen(
            ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", f"{cp}{os.pathsep}{classes}",
             "StreamsWordCount", bootstrap, app_id, str(state), "lines", "counts", str(rf), str(delay_ms), protocol],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def check(self):
        failed = [x for x in self.lines if x.startswith("FAILED")]
        assert not failed, f"{self.name}: {failed}"
        assert self.proc.poll() is None, f"{self.name} exited with {self.proc.returncode}: {self.lines}"

    def state(self) -> str | None:
        states = [x.split()[1] for x in self.lines if x.startswith("STATE ")]
        return states[-1] if states else None

    def kill(self):
        self.proc.kill()
        self.proc.wait(30)
        self.err.close()

    def close(self) -> int:
        """Close its standard input: it closes KafkaStreams, which must stop within 60 s."""
        self.proc.stdin.close()
        rc = self.proc.wait(90)
        self._reader.join(30)
        self.err.close()
        assert "CLOSED true" in self.lines, (self.name, rc, self.lines[-5:])
        return rc


class Counts:
    """Reads the output topic from the start (read_committed unless told): word -> counts, in order."""

    def __init__(self, bootstrap: str, partitions: int, isolation: str = "read_committed"):
        from confluent_kafka import Consumer, TopicPartition
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-" + uuid.uuid4().hex[:6],
                           "isolation.level": isolation, "enable.auto.commit": False})
        self.c.assign([TopicPartition("counts", p, 0) for p in range(partitions)])
        self.seen: dict[str, list[int]] = {}

    def poll(self):
        for m in self.c.consume(1000, 0.5):
            if m.error():
                continue
            self.seen.setdefault(m.key().decode(), []).append(int.from_bytes(m.value(), "big", signed=True))
        return self.seen

    def close(self):
        self.c.close()


def wait_for(cond, timeout: float, what: str, apps=()):
    deadline = time.monotonic() + timeout
    while True:
        for a in apps:
            a.check()
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def produce_lines(bootstrap: str, rng: random.Random, n: int, expected: dict[str, int]):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(5)]
        for w in words:
            expected[w] = expected.get(w, 0) + 1
        p.produce("lines", value=" ".join(words).encode())
    assert p.flush(60) == 0


def reached(counts: Counts, expected: dict[str, int]) -> bool:
    seen = counts.poll()
    return all(seen.get(w, [0])[-1] >= n for w, n in expected.items())


def exactly_once(counts: Counts, expected: dict[str, int]):
    seen = counts.poll()
    assert set(seen) == set(expected)
    for w, n in expected.items():
        assert seen[w] == list(range(1, n + 1)), (w, seen[w][:20], len(seen[w]), n)


def read_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[str, int]]:
    """Every committed record of ``topic`` from the start, as (key, long value)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "all-" + uuid.uuid4().hex[:6],
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out, idle = [], 0
        while idle < 4:
            msgs = [m for m in c.consume(5000, 0.5) if not m.error()]
            idle = 0 if msgs else idle + 1
            out += [(m.key().decode(), int.from_bytes(m.value(), "big", signed=True)) for m in msgs]
        return out
    finally:
        c.close()


def transaction_states(bootstrap: str, app_id: str) -> dict[str, str]:
    """The application's transactional ids and their states, by kafka-transactions.sh list."""
    root = os.path.dirname(os.path.dirname(HERE))
    out = subprocess.run([os.path.join(root, "bin", "kafka-transactions.sh"), "--bootstrap-server", bootstrap,
                          "list"], capture_output=True, text=True, timeout=60, check=True).stdout
    return {f[0]: f[3] for f in (line.split() for line in out.splitlines()[1:])
            if len(f) >= 4 and f[0].startswith(app_id + "-")}


def compile_app(work) -> tuple[str, object]:
    cp = _streams_classpath()
    for tool in ("javac", "java"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} not found (a JDK is needed)")
    classes = work / "classes"
    subprocess.run(["javac", "-d", str(classes), "-cp", cp, SOURCE], check=True, timeout=300)
    return cp, classes


def run_two_instances(work, bootstrap: str, rf: int, partitions: int, fault, aborts: bool, reset: bool = False,
                      protocol: str = "classic"):
    """Instance a alone, then a and b, then ``fault(a)`` while lines keep coming; b ends the
    work.  ``aborts``: the fault leaves a transaction open, which the coordinator aborts.
    ``reset``: then kafka-streams-application-reset.sh resets the application, and a third
    instance counts every line again from the start."""
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
    cp, classes = compile_app(work)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, partitions, rf) for t in ("lines", "counts")]).values():
        f.result(30)
    app_id = "wc-" + uuid.uuid4().hex[:6]
    rng, expected = random.Random(7), {}
    counts = Counts(bootstrap, partitions)
    a = App(work, cp, classes, bootstrap, app_id, "a", rf, delay_ms=1, protocol=protocol)
    apps = [a]
    try:
        wait_for(lambda: a.state() == "RUNNING", 90, "instance a RUNNING", apps)
        produce_lines(bootstrap, rng, 600, expected)
        wait_for(lambda: reached(counts, expected), 90, "the counts of the first lines", apps)
        a_ids = set(transaction_states(bootstrap, app_id))         # a is alone: these are its own

        b = App(work, cp, classes, bootstrap, app_id, "b", rf, delay_ms=1, protocol=protocol)
        apps.append(b)
        wait_for(lambda: a.state() == b.state() == "RUNNING" and
                 sum(x == "STATE REBALANCING" for x in a.lines) >= 2, 90, "both instances RUNNING", apps)
        produce_lines(bootstrap, rng, 600, expected)
        wait_for(lambda: reached(counts, expected), 90, "the counts with two instances", apps)
        if protocol == "streams":
            check_streams_group_admin(cp, classes, bootstrap, app_id, partitions)

        before = transaction_states(bootstrap, app_id)
        assert before and "CompleteAbort" not in before.values(), before
        more = threading.Thread(target=produce_lines, args=(bootstrap, rng, 1200, expected))
        more.start()
        time.sleep(1.0)
        if aborts:          # strike while a has a transaction open, so there is one to abort
            wait_for(lambda: any(st == "Ongoing" for t, st in transaction_states(bootstrap, app_id).items()
                                 if t in a_ids), 30, "a transaction of instance a open", apps)
        fault(a)
        apps.remove(a)
        at_fault = transaction_states(bootstrap, app_id)
        more.join(120)
        wait_for(lambda: reached(counts, expected), 180, "every count after the fault", apps)
        exactly_once(counts, expected)
        if aborts:
            # the coordinator aborts what the killed instance left open (kafka-transactions.sh
            # list); the kill may also fall between two of its transactions, leaving none open
            left_open = {t for t, st in at_fault.items() if t in a_ids and st not in ("Empty", "CompleteCommit")}
            wait_for(lambda: all(transaction_states(bootstrap, app_id)[t] == "CompleteAbort" for t in left_open),
                     60, "the killed instance's open transactions aborted")
        # the internal topics Streams created, with its configs, and the purged repartition topic
        names = set(admin.list_topics(timeout=30).topics)
        repart, changelog = f"{app_id}-words-repartition", f"{app_id}-counts-changelog"

        # the cleaner compacted the transactional changelog (aborted data and markers in it),
        # and what is left still holds every word's last count
        updates = sum(expected.values())

        def compacted():
            records = read_all(bootstrap, changelog, partitions)
            return records if len(records) < updates / 2 else None
        records = wait_for(compacted, 120, "the changelog compacted", apps)
        assert dict(records) == expected
        assert {repart, changelog} <= names, names
        res = admin.describe_configs([ConfigResource("topic", changelog), ConfigResource("topic", repart)])
        cfg = {r.name: {k: v.value for k, v in f.result(30).items()} for r, f in res.items()}
        assert cfg[changelog]["cleanup.policy"] == "compact"
        assert cfg[repart]["cleanup.policy"] == "delete" and cfg[repart]["retention.ms"] == "-1"
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
        try:
            def purged():
                return all(c.get_watermark_offsets(TopicPartition(repart, p), timeout=30)[0] > 0
                           for p in range(partitions))
            wait_for(purged, 30, "Streams to purge its repartition topic with DeleteRecords", apps)
        finally:
            c.close()

        apps.remove(b)
        assert b.close() == 0, b.lines
        if reset:
            reset_and_count_again(work, cp, classes, bootstrap, app_id, rf, admin, counts, expected, apps)
    finally:
        counts.close()
        for x in apps:
            if x.proc.poll() is None:
                x.kill()


def check_streams_group_admin(cp, classes, bootstrap: str, app_id: str, partitions: int) -> None:
    """Java's admin client (4.1+) on the streams group of two instances of two threads each:
    listGroups, describeStreamsGroups (every task active on one member, with a standby on the
    other instance's) and listStreamsGroupOffsets (the committed input partitions)."""
    def run():
        out = subprocess.run(["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
                              f"{cp}{os.pathsep}{classes}", "StreamsWordCount", "--describe", bootstrap, app_id],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout.splitlines()
    # Stable, and a commit made for every input partition (EOS commits every 100 ms, once a
    # task has had records; right after a broker kill a task may not have committed yet)
    lines = wait_for(lambda: (lambda ls: ls if any(x.startswith("GROUP Stable ") for x in ls)
                              and f"OFFSETS {2 * partitions}" in ls else None)(run()),
                     60, "the streams group Stable with every input partition committed")
    assert "LISTED Streams Stable" in lines, lines
    group = next(x.split() for x in lines if x.startswith("GROUP "))
    assert group[1] == "Stable" and group[2] == group[3] and group[5:] == ["4", "2"], group
    members = [x.split() for x in lines if x.startswith("MEMBER ")]
    assert len(members) == 4 and {m[1] for m in members} == {group[2]}
    active = [t for m in members for t in m[3].split(",") if t != "-"]
    assert sorted(active) == sorted(f"{s}:{p}" for s in "01" for p in range(partitions)), members
    standby = {t: m[2] for m in members for t in m[4].split(",") if t != "-"}
    owner = {t: m[2] for m in members for t in m[3].split(",") if t != "-"}
    assert sorted(standby) == [f"1:{p}" for p in range(partitions)]    # the store's subtopology
    assert all(standby[t] != owner[t] for t in standby)                   # on the other process
    assert f"OFFSETS {2 * partitions}" in lines, lines     # lines and the repartition topic


def reset_and_count_again(work, cp, classes, bootstrap, app_id, rf, admin, counts, expected, apps):
    """Odradek's kafka-streams-application-reset.sh on a real application: the input offsets go
    back to the start and the internal topics are deleted, so a new instance with empty state
    counts every word from 1 again."""
    root = os.path.dirname(os.path.dirname(HERE))
    # --force: b's member stays in the group until its session times out (Streams does not
    # leave the group when it closes); the tool removes it
    out = subprocess.run([os.path.join(root, "bin", "kafka-streams-application-reset.sh"), "--bootstrap-server",
                          bootstrap, "--application-id", app_id, "--input-topics", "lines", "--force"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    internal = {f"{app_id}-words-repartition", f"{app_id}-counts-changelog"}
    assert not internal & set(admin.list_topics(timeout=30).topics)
    c = App(work, cp, classes, bootstrap, app_id, "c", rf)
    apps.append(c)
    wait_for(lambda: all(len(counts.poll().get(w, ())) >= 2 * n for w, n in expected.items()), 180,
             "the counts of every line again after the reset", apps)
    for w, n in expected.items():
        assert counts.seen[w] == 2 * list(range(1, n + 1)), (w, len(counts.seen[w]), n)
    assert c.close() == 0, c.lines


def test_streams_exactly_once_through_an_instance_crash(tmp_path):
    """Instance a is killed with SIGKILL while lines keep coming: its open transactions are
    aborted, b takes its tasks, restores the store from the changelog and carries on; every
    word's counts are 1..n once each.  Then the application is reset with
    kafka-streams-application-reset.sh and counts everything again."""
    props = {"num.partitions": 1, "log.cleaner.backoff.ms": 200}
    with running(BrokerProcess(tmp_path / "b", name="broker", props=props)) as b:
        run_two_instances(tmp_path, b.bootstrap, 1, 3, lambda a: a.kill(), aborts=True, reset=True)


# The streams group protocol's timings, as short as the classic runs' consumer settings: a killed
# instance's member is fenced after 6 s; one standby per stateful task, as the app asks for.
STREAMS_GROUP_PROPS = {"group.streams.session.timeout.ms": 6000, "group.streams.min.session.timeout.ms": 6000,
                       "group.streams.heartbeat.interval.ms": 1000, "group.streams.min.heartbeat.interval.ms": 1000,
                       "group.streams.num.standby.replicas": 1}


def test_streams_group_protocol_exactly_once_through_an_instance_crash(tmp_path):
    """The same run with ``group.protocol=streams`` (KIP-1071, kafka-streams 4.1+): the broker
    creates the repartition and changelog topics, assigns the tasks and moves them when b joins
    and when a is killed; every word's counts are 1..n once each."""
    props = {"num.partitions": 1, "log.cleaner.backoff.ms": 200, **STREAMS_GROUP_PROPS}
    with running(BrokerProcess(tmp_path / "b", name="broker", props=props)) as b:
        run_two_instances(tmp_path, b.bootstrap, 1, 3, lambda a: a.kill(), aborts=True, protocol="streams")


@pytest.mark.parametrize("protocol", ["classic", "streams"])
def test_streams_exactly_once_on_a_cluster_through_a_broker_kill(tmp_path, zookeeper, protocol):
    """Three brokers, everything replicated three times (min.insync.replicas=2): a broker leading
    some partitions is killed with SIGKILL while lines keep coming and the instances go on with
    the new leaders; then instance a is stopped and b ends the work.  With the streams protocol
    the killed broker may be the group's coordinator: another one loads the group from its
    records and the members go on at their epochs."""
    from tests.support.cluster import Cluster
    c = Cluster(tmp_path / "c", zookeeper, 3, props={
        "min.insync.replicas": 2, "offsets.topic.replication.factor": 3, "log.cleaner.backoff.ms": 200,
        "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
        **(STREAMS_GROUP_PROPS if protocol == "streams" else {})})
    try:
        c.start()

        def fault(a):
            victim = next(i for i in (1, 2, 3) if i != c.controller_id())
            if protocol == "streams":       # the group's coordinator: another broker loads the group
                from protocol.messages import FindCoordinatorRequest as F
                from tests.support.rawkafka import send_once
                victim = send_once(c.bootstrap.split(",")[0], F(key=a.app_id, key_type=0, coordinator_keys=[a.app_id]),
                                   4).coordinators[0].node_id
            c.kill(victim)
            time.sleep(5)
            assert a.close() == 0, a.lines
            c.start_broker(victim)
        run_two_instances(tmp_path, c.bootstrap, 3, 3, fault, aborts=False, protocol=protocol)
    finally:
        c.shutdown()

"""kafka-verifiable-consumer.sh against a real broker: Kafka's JSON event lines, the records and
offsets they name checked against what kafka-python wrote and what the group committed, and
groups of two members under each classic assignor (eager ones revoke everything, the cooperative
one only what moves), with a kafka-python member in the group, and under the consumer group
protocol of KIP-848."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from tests.support import BrokerProcess, broker_command_available
from tests.support.broker import running
from tests.support.verifiable import Member, wait_until
from tests.tools.conftest import tool

PARTITIONS = 4
PROPS = {
    # heartbeats short enough for the tests (Kafka's defaults are 3 s classic, 5 s consumer)
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 500,
}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    ok, why = broker_command_available()
    if not ok:
        pytest.skip(why)
    with running(BrokerProcess(tmp_path_factory.mktemp("vc-broker"), name="vc-broker", props=PROPS)) as b:
        yield b


def events(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def topic_with_records(kafka, n: int) -> tuple[str, dict]:
    """A topic of PARTITIONS partitions holding ``n`` keyed records written by kafka-python;
    returns it and {(partition, offset): (key, value)}."""
    topic = "vc-" + uuid.uuid4().hex[:6]
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all")
    futures = [(f"k{i % 37}", f"value-{i}", p.send(topic, key=f"k{i % 37}".encode(), value=f"value-{i}".encode()))
               for i in range(n)]
    p.flush()
    written = {}
    for k, v, f in futures:
        md = f.get(timeout=10)
        written[(md.partition, md.offset)] = (k, v)
    p.close()
    return topic, written


def committed(kafka, group: str, topic: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic}


def test_events_records_and_commits(kafka):
    topic, written = topic_with_records(kafka, 300)
    group = "vc-g-" + uuid.uuid4().hex[:6]
    r = tool("kafka-verifiable-consumer", "--bootstrap-server", kafka.bootstrap, "--topic", topic,
             "--group-id", group, "--max-messages", 300, "--verbose", timeout=60)
    assert r.rc == 0, r
    ev = events(r.out)
    names = [e["name"] for e in ev]
    assert names[:2] == ["startup_complete", "partitions_assigned"], names
    assert names[-2:] == ["partitions_revoked", "shutdown_complete"], names
    assert list(ev[0]) == ["timestamp", "name"]
    everything = [{"topic": topic, "partition": p} for p in range(PARTITIONS)]
    assert ev[1]["partitions"] == everything
    assert ev[-2]["partitions"] == everything
    # every record once, as written, each batch summed up after its records and committed after
    seen = {}
    commits = {}
    pending = {}
    for e in ev[2:-2]:
        if e["name"] == "record_data":
            assert list(e) == ["timestamp", "name", "key", "value", "topic", "partition", "offset"]
            assert e["topic"] == topic
            key = (e["partition"], e["offset"])
            assert key not in seen
            seen[key] = (e["key"], e["value"])
            pending.setdefault(e["partition"], []).append(e["offset"])
        elif e["name"] == "records_consumed":
            assert e["count"] == sum(len(v) for v in pending.values())
            for s in e["partitions"]:
                offs = pending.pop(s["partition"])
                assert (s["topic"], s["count"], s["minOffset"], s["maxOffset"]) == \
                    (topic, len(offs), offs[0], offs[-1])
            assert not pending
        elif e["name"] == "offsets_committed":
            assert e["success"] is True and "error" not in e
            for o in e["offsets"]:
                commits[o["partition"]] = o["offset"]
        else:
            pytest.fail(f"unexpected event {e}")
    assert seen == written
    ends = {p: 1 + max(o for (q, o) in written if q == p) for p, _ in written}
    assert commits == ends
    assert committed(kafka, group, topic) == ends


def test_no_offset_and_reset_none(kafka):
    """--reset-policy none on a group with no offsets: the error goes to stderr, the consumer is
    closed, and the exit status is 0, as Kafka's tool (which catches every error in its loop)."""
    topic, _ = topic_with_records(kafka, 10)
    r = tool("kafka-verifiable-consumer", "--bootstrap-server", kafka.bootstrap, "--topic", topic,
             "--group-id", "vc-none-" + uuid.uuid4().hex[:6], "--reset-policy", "none", timeout=60)
    assert r.rc == 0, r
    assert "Undefined offset with no reset policy for partition" in r.err
    names = [e["name"] for e in events(r.out)]
    assert names[0] == "startup_complete" and names[-1] == "shutdown_complete"
    assert "records_consumed" not in names


def test_bad_options(kafka):
    r = tool("kafka-verifiable-consumer", "--bootstrap-server", kafka.bootstrap, "--topic", "t",
             "--group-id", "g", "--assignment-strategy", "org.example.NoSuchAssignor")
    assert r.rc == 1 and "Class org.example.NoSuchAssignor cannot be found" in r.err, r
    r = tool("kafka-verifiable-consumer", "--bootstrap-server", kafka.bootstrap, "--topic", "t",
             "--group-id", "g", "--group-protocol", "share")
    assert r.rc == 1 and "Invalid value share for configuration group.protocol" in r.err, r
    r = tool("kafka-verifiable-consumer", "--bootstrap-server", kafka.bootstrap, "--topic", "t")
    assert r.rc != 0 and "--group-id" in r.err, r


def split_between(a: Member, b: Member) -> bool:
    oa, ob = a.owned(), b.owned()
    return bool(oa) and bool(ob) and not oa & ob and oa | ob == set(range(PARTITIONS))


@pytest.mark.parametrize("strategy", ["org.apache.kafka.clients.consumer.RangeAssignor",
                                      "roundrobin",
                                      "org.apache.kafka.clients.consumer.StickyAssignor",
                                      "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"])
def test_two_members_classic(kafka, strategy):
    topic, written = topic_with_records(kafka, 200)
    group = "vc-2-" + uuid.uuid4().hex[:6]
    a = Member(kafka, topic, group, "--assignment-strategy", strategy, "--enable-autocommit")
    b = None
    try:
        wait_until(lambda: a.owned() == set(range(PARTITIONS)), what="the first member's assignment")
        b = Member(kafka, topic, group, "--assignment-strategy", strategy, "--enable-autocommit")
        wait_until(lambda: split_between(a, b), what="the partitions split between two members")
        revoked = [{p["partition"] for p in e["partitions"]} for e in a.named("partitions_revoked")]
        if "Cooperative" in strategy:
            # only what moved to the new member was revoked, in one step
            assert revoked == [b.owned()], (a.events, b.events)
            # and handed over only in the round after the revocation (KIP-429): the round b
            # joined in gave it nothing, as all four partitions were a's
            assert b.named("partitions_assigned")[0]["partitions"] == [], (a.events, b.events)
        else:
            # an eager member gives up everything before it joins again
            assert revoked[0] == set(range(PARTITIONS)), a.events
    finally:
        err_a = a.stop()
        err_b = b.stop() if b else ""
    assert a.events[-1]["name"] == "shutdown_complete", err_a
    assert b.events[-1]["name"] == "shutdown_complete", err_b
    consumed = {(s["partition"], o) for m in (a, b) for e in m.named("records_consumed")
                for s in e["partitions"] for o in range(s["minOffset"], s["maxOffset"] + 1)}
    assert consumed == set(written)


# The kafka-python member runs in a process of its own (in the test process, clients other tests
# left behind compete for the interpreter) and polls with a one-second timeout.  With 100 ms polls
# kafka-python 3.0.12 sometimes lost its own rebalance: the offset commit it makes before
# rejoining takes its deadline from the poll's timeout, timed out while in flight, and after the
# next SyncGroup the consumer never took its assignment ("not part of an active group" until it
# closed; seen in CI and in about one run in five alone).  It prints its assignment (a JSON list of
# partitions) each time it changes and closes when its stdin does.
KAFKA_PYTHON_MEMBER = r"""
import json, sys, threading
from kafka import KafkaConsumer
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
bootstrap, topic, group, partitions = sys.argv[1:5]
kp = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                   partition_assignment_strategy=[RoundRobinPartitionAssignor],
                   heartbeat_interval_ms=300, auto_offset_reset="earliest")
# the topic's metadata first: kafka-python, leading a group before it knows the topic, assigns
# nothing and relies on a later metadata refresh to rejoin
assert kp.partitions_for_topic(topic) == set(range(int(partitions)))
kp.subscribe([topic])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
last = None
while not stop.is_set():
    kp.poll(timeout_ms=1000)
    now = sorted(tp.partition for tp in kp.assignment())
    if now != last:
        print(json.dumps(now), flush=True)
        last = now
kp.close()
"""


def test_classic_group_with_kafka_python(kafka):
    """Our member and a kafka-python member in one roundrobin group: whichever leads, the
    other's subscription (ours is ConsumerProtocol v2 with owned partitions) is understood."""
    topic, _ = topic_with_records(kafka, 40)
    group = "vc-kp-" + uuid.uuid4().hex[:6]
    kp = subprocess.Popen([sys.executable, "-c", KAFKA_PYTHON_MEMBER, kafka.bootstrap, topic, group, str(PARTITIONS)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    theirs: list[set] = [set()]

    def follow():
        for line in kp.stdout:
            theirs[0] = set(json.loads(line))
    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    m = None
    try:
        wait_until(lambda: theirs[0] == set(range(PARTITIONS)), what="kafka-python's assignment")
        m = Member(kafka, topic, group, "--assignment-strategy", "roundrobin", "--enable-autocommit")

        def split():
            mine = m.owned()
            return len(mine) == 2 and len(theirs[0]) == 2 and mine | theirs[0] == set(range(PARTITIONS))
        wait_until(split, what="the split with kafka-python")
    finally:
        if m is not None:
            m.stop()
        kp.stdin.close()
        try:
            kp.wait(timeout=20)
        except subprocess.TimeoutExpired:
            kp.kill()
            kp.wait()
        reader.join(timeout=5)
    assert kp.returncode == 0, kp.stderr.read()[-2000:]


def test_consumer_group_protocol(kafka):
    topic, written = topic_with_records(kafka, 200)
    group = "vc-848-" + uuid.uuid4().hex[:6]
    a = Member(kafka, topic, group, "--group-protocol", "consumer")
    b = None
    try:
        wait_until(lambda: a.owned() == set(range(PARTITIONS)), what="the first member's assignment")
        b = Member(kafka, topic, group, "--group-protocol", "CONSUMER", "--group-remote-assignor", "uniform")
        wait_until(lambda: split_between(a, b), what="the partitions split between two members")
        # revocation before reassignment: b never held a partition a still held
        for e in b.named("partitions_assigned"):
            assert e["partitions"] == [] or e["timestamp"] >= a.named("partitions_revoked")[0]["timestamp"]
    finally:
        err_a = a.stop()
        err_b = b.stop() if b else ""
    assert a.events[-1]["name"] == "shutdown_complete", err_a
    assert b.events[-1]["name"] == "shutdown_complete", err_b
    commits = [e for m in (a, b) for e in m.named("offsets_committed")]
    assert commits and all(e["success"] for e in commits), commits
    consumed = {(s["partition"], o) for m in (a, b) for e in m.named("records_consumed")
                for s in e["partitions"] for o in range(s["minOffset"], s["maxOffset"] + 1)}
    assert consumed == set(written)
    final = committed(kafka, group, topic)
    ends = {p: 1 + max(o for (q, o) in written if q == p) for p, _ in written}
    assert final == ends

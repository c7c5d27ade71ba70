"""kafka-reassign-partitions.sh, kafka-leader-election.sh and kafka-topics.sh's partition
reports against a real 4-broker ZooKeeper cluster (one cluster for the module; each test leaves
every broker running)."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import _track
from tests.support.cluster import Cluster

from .workload import NumberedProducer, check_no_loss, read_all

pytestmark = pytest.mark.cluster

BIN = Path(__file__).resolve().parents[2] / "bin"


class Result:
    def __init__(self, cp):
        self.rc, self.out, self.err = cp.returncode, cp.stdout, cp.stderr

    @property
    def lines(self):
        return self.out.splitlines()

    def __repr__(self):
        return f"rc={self.rc}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def tool(name, *args, timeout=60) -> Result:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return Result(subprocess.run([str(BIN / f"{name}.sh"), *map(str, args)], capture_output=True,
                                 text=True, timeout=timeout, env=env, cwd="/"))


@pytest.fixture(scope="module")
def c4(tmp_path_factory, zookeeper):
    c = Cluster(tmp_path_factory.mktemp("cluster-tools"), zookeeper, 4)
    try:
        c.start()
        yield c
    finally:
        c.shutdown()


@pytest.fixture(autouse=True)
def _logs(request, c4):
    for b in c4.brokers.values():       # broker log tails in failure reports
        _track(request, b)


def non_controllers(c: Cluster) -> list[int]:
    ctl = c.controller_id()
    return [b for b in sorted(c.brokers) if b != ctl]


def partition_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("\tTopic:")]


def write_json(tmp_path, name, doc) -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


# ----------------------------------------------------------------------------- reassignment

def test_generate_execute_verify_123_to_234_keeps_data(c4, tmp_path):
    c4.create_topic("move", assignment={0: [1, 2, 3], 1: [1, 2, 3]})
    bs = c4.bootstrap
    topics = write_json(tmp_path, "topics.json", {"topics": [{"topic": "move"}], "version": 1})
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--generate",
             "--topics-to-move-json-file", topics, "--broker-list", "2,3,4")
    assert r.rc == 0, r
    assert r.lines[0] == "Current partition replica assignment"
    assert json.loads(r.lines[1]) == {"version": 1, "partitions": [
        {"topic": "move", "partition": p, "replicas": [1, 2, 3], "log_dirs": ["any"] * 3}
        for p in (0, 1)]}
    assert r.lines[1].startswith('{"version":1,"partitions":[{"topic":"move","partition":0,')
    assert r.lines[2] == "" and r.lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(r.lines[4])
    assert [p["partition"] for p in proposed["partitions"]] == [0, 1]
    for p in proposed["partitions"]:
        assert sorted(p["replicas"]) == [2, 3, 4] and p["log_dirs"] == ["any"] * 3

    shrink = write_json(tmp_path, "shrink.json", {"version": 1, "partitions": [
        {"topic": "move", "partition": 0, "replicas": [2, 3]}]})
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
             "--reassignment-json-file", shrink, "--disallow-replication-factor-change")
    assert r.rc == 1 and r.lines[-2:] == ["Error reassigning partition(s):",
                                          "move-0: The replication factor is changed from 3 to 2"], r
    plan = write_json(tmp_path, "plan.json", {"version": 1, "partitions": [
        {"topic": "move", "partition": p, "replicas": [2, 3, 4]} for p in (0, 1)]})
    prod = NumberedProducer(bs, "move", 2).start()
    try:
        prod.wait_acked(300, 60)
        r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
                 "--reassignment-json-file", plan, "--throttle", "50000000")
        assert r.rc == 0, r
        assert r.lines[:2] == ["Current partition replica assignment", ""]
        rollback = json.loads(r.lines[2])
        assert rollback["partitions"] == [{"topic": "move", "partition": p, "replicas": [1, 2, 3],
                                           "log_dirs": ["any"] * 3} for p in (0, 1)]
        assert r.lines[3:] == [
            "", "Save this to use as the --reassignment-json-file option during rollback",
            "Warning: You must run --verify periodically, until the reassignment completes, to "
            "ensure the throttle is removed.",
            "The inter-broker throttle limit was set to 50000000 B/s",
            "Successfully started partition reassignments for move-0,move-1"]
        cfg = c4.get_json("/config/topics/move")["config"]
        assert cfg["leader.replication.throttled.replicas"] == "0:1,0:2,0:3,1:1,1:2,1:3"
        assert cfg["follower.replication.throttled.replicas"] == "0:4,1:4"
        for b in (1, 2, 3, 4):
            bc = c4.get_json(f"/config/brokers/{b}")["config"]
            assert bc["leader.replication.throttled.rate"] == "50000000"
            assert bc["follower.replication.throttled.rate"] == "50000000"

        def verified():
            v = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--verify",
                     "--reassignment-json-file", plan)
            assert v.rc == 0, v
            return v if "still in progress" not in v.out else None
        v = c4.wait_for(verified, 90, "verify to report completion", interval=0.5)
        assert v.lines == ["Status of partition reassignment:",
                           "Reassignment of partition move-0 is completed.",
                           "Reassignment of partition move-1 is completed.",
                           "",
                           "Clearing broker-level throttles on brokers 1,2,3,4",
                           "Clearing topic-level throttles on topic move"], v
        prod.wait_acked(300, 60)
    finally:
        prod.stop()
    assert not prod.failed
    res = check_no_loss(prod.acked, read_all(bs, "move", 2))
    assert res["n_problems"] == 0, res
    cfg = c4.get_json("/config/topics/move")["config"]
    assert not any("throttled" in k for k in cfg), cfg
    for b in (1, 2, 3, 4):
        assert not any("throttled" in k for k in c4.get_json(f"/config/brokers/{b}")["config"])
    d = tool("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", "move")
    assert d.rc == 0, d
    for line in partition_lines(d.out):
        assert "\tReplicas: 2,3,4\t" in line, d
    # the rollback file brings it back; verify then reports the difference to the old plan
    back = write_json(tmp_path, "back.json", rollback)
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
             "--reassignment-json-file", back)
    assert r.rc == 0 and r.lines[-1] == "Successfully started partition reassignments for move-0,move-1", r
    c4.wait_for(lambda: "still in progress" not in tool(
        "kafka-reassign-partitions", "--bootstrap-server", bs, "--verify",
        "--reassignment-json-file", back, "--preserve-throttles").out, 90, "rollback", interval=0.5)
    v = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--verify",
             "--reassignment-json-file", plan, "--preserve-throttles")
    assert v.lines[1] == ("There is no active reassignment of partition move-0, but replica set "
                          "is 1,2,3 rather than 2,3,4."), v
    assert not any("Clearing" in line for line in v.lines)


def test_cancel_and_list(c4, tmp_path):
    free = non_controllers(c4)
    victim = free[-1]                               # the replica being added; it will hang
    others = [b for b in sorted(c4.brokers) if b != victim]
    c4.create_topic("cx", assignment={0: others[:3]})
    target = others[1:3] + [victim]
    bs = c4.bootstrap_of(others)                    # a paused broker would stall bootstrap
    plan = write_json(tmp_path, "cx.json", {"version": 1, "partitions": [
        {"topic": "cx", "partition": 0, "replicas": target, "log_dirs": ["any"] * 3}]})
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--list")
    assert r.rc == 0 and r.lines == ["No partition reassignments found."], r
    c4.pause(victim)
    try:
        r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
                 "--reassignment-json-file", plan)
        assert r.rc == 0 and r.lines[-1] == "Successfully started partition reassignment for cx-0", r
        r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--list")
        all_replicas = target + [others[0]]
        assert r.lines == ["Current partition reassignments:",
                           f"cx-0: replicas: {','.join(map(str, all_replicas))}. adding: {victim}. "
                           f"removing: {others[0]}."], r
        d = tool("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", "cx")
        assert f"\tAdding Replicas: {victim}\tRemoving Replicas: {others[0]}\t" in d.out, d
        assert "\tReplicationFactor: 3\t" in d.out, d
        # a second --execute without --additional is refused
        r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
                 "--reassignment-json-file", plan)
        assert r.rc == 1 and r.out.startswith("Cannot execute because there is an existing "
                                              "partition assignment."), r
        r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--verify",
                 "--reassignment-json-file", plan)
        assert r.rc == 0 and r.lines[:2] == ["Status of partition reassignment:",
                                             "Reassignment of partition cx-0 is still in progress."], r
        assert "Clearing" not in r.out
        r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--cancel",
                 "--reassignment-json-file", plan, "--preserve-throttles")
        assert r.rc == 0, r
        assert r.lines == ["Successfully cancelled partition reassignment for: cx-0",
                           "None of the specified partition moves are active."], r
        r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--list")
        assert r.lines == ["No partition reassignments found."], r
    finally:
        c4.resume(victim)
    # as in Kafka, a cancelled move keeps the original replicas in the reassignment's order
    assert sorted(c4.get_json("/brokers/topics/cx")["partitions"]["0"]) == others[:3]
    r = tool("kafka-reassign-partitions", "--bootstrap-server", c4.bootstrap, "--cancel",
             "--reassignment-json-file", plan)
    assert r.rc == 0, r
    assert r.lines[:2] == ["None of the specified partition reassignments are active.",
                           "None of the specified partition moves are active."], r
    assert r.lines[2].startswith("Clearing broker-level throttles on brokers 1,2,3,4"), r
    c4.wait_for_isr("cx", 0, others[:3])


def test_reassign_errors(c4, tmp_path):
    bs = c4.bootstrap
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs)
    assert r.rc == 1 and r.err.splitlines()[0] == (
        "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list")
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--verify")
    assert r.rc == 1 and r.err.splitlines()[0] == 'Missing required argument "[reassignment-json-file]"'
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--list", "--throttle", "5")
    assert r.rc == 1 and r.err.splitlines()[0] == 'Option "[throttle]" can\'t be used with action "[list]"'
    r = tool("kafka-reassign-partitions", "--list")
    assert r.rc == 1 and "--bootstrap-server" in r.err.splitlines()[0]
    bad = write_json(tmp_path, "bad.json", {"version": 1, "partitions": [
        {"topic": "nosuch", "partition": 0, "replicas": [1, 9]}]})
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
             "--reassignment-json-file", bad)
    assert r.rc == 1 and r.lines[-1] == "Error: Unknown broker id 9", r
    bad = write_json(tmp_path, "bad2.json", {"version": 1, "partitions": [
        {"topic": "nosuch", "partition": 0, "replicas": [1, 2]}]})
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
             "--reassignment-json-file", bad)
    assert r.rc == 1 and "Unable to find partition: nosuch-0" in r.out, r
    dup = write_json(tmp_path, "dup.json", {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 1]}]})
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
             "--reassignment-json-file", dup)
    assert r.rc == 1 and r.lines == ["Error: Partition replica lists may not contain duplicate "
                                     "entries: t-0 contains multiple entries for 1"], r
    topics = write_json(tmp_path, "t.json", {"topics": [{"topic": "nosuch"}], "version": 1})
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--generate",
             "--topics-to-move-json-file", topics, "--broker-list", "1,2,2")
    assert r.rc == 1 and r.lines == ["Error: Broker list contains duplicate entries: [2]"], r
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--generate",
             "--topics-to-move-json-file", topics, "--broker-list", "1,2")
    assert r.rc == 1 and r.lines == ["Error: org.apache.kafka.common.errors."
                                     "UnknownTopicOrPartitionException: Topic nosuch not found."], r


# ----------------------------------------------------------------------------- leader election

def test_preferred_election_after_the_leader_moved(c4, tmp_path):
    a, b = non_controllers(c4)[:2]
    rest = [x for x in sorted(c4.brokers) if x not in (a, b)]
    c4.create_topic("pref", assignment={0: [a, b, rest[0]], 1: [b, a, rest[0]]})
    c4.wait_for_isr("pref", 0, [a, b, rest[0]])
    c4.kill(a)
    c4.wait_for_leader("pref", 0, not_in={a})
    c4.start_broker(a)
    c4.wait_for_isr("pref", 0, [a])
    assert c4.leader("pref", 0) != a
    bs = c4.bootstrap
    r = tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred",
             "--topic", "pref", "--partition", "0")
    assert r.rc == 0 and r.lines == [
        "Successfully completed leader election (PREFERRED) for partitions pref-0"], r
    c4.wait_for(lambda: c4.leader("pref", 0) == a, 30, "preferred leader back")
    f = write_json(tmp_path, "e.json", {"partitions": [{"topic": "pref", "partition": 0},
                                                       {"topic": "pref", "partition": 1}]})
    r = tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "PREFERRED",
             "--path-to-json-file", f)
    assert r.rc == 0 and r.lines == [
        "Valid replica already elected for partitions pref-0, pref-1"], r
    r = tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred",
             "--all-topic-partitions")
    assert r.rc == 0, r
    assert not any(x.startswith("Error") for x in r.lines), r
    r = tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred",
             "--topic", "pref", "--partition", "9")
    assert r.rc == 1, r
    assert r.lines == ["Error completing leader election (PREFERRED) for partition: pref-9: "
                       "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
                       "The partition does not exist."], r
    assert r.err.strip() == "1 replica(s) could not be elected"


def test_unclean_election_on_an_offline_partition(c4):
    x, y = non_controllers(c4)[:2]
    c4.create_topic("unc", assignment={0: [x, y]}, configs={"min.insync.replicas": "1"})
    c4.wait_for_isr("unc", 0, [x, y])
    c4.kill(y)
    c4.wait_for(lambda: c4.isr("unc", 0) == [x], 30, "ISR [x]")
    c4.kill(x)
    c4.wait_for(lambda: c4.leader("unc", 0) == -1, 30, "partition offline")
    c4.start_broker(y)
    time.sleep(1)
    assert c4.leader("unc", 0) == -1                 # y is not in the ISR: stays offline
    live = [b for b in sorted(c4.brokers) if b != x]
    bs = c4.bootstrap_of(live)
    d = c4.wait_for(lambda: (lambda r: r if "unc" in r.out else None)(tool(
        "kafka-topics", "--bootstrap-server", bs, "--describe", "--unavailable-partitions")),
        20, "unc listed as unavailable")
    assert d.rc == 0 and [line for line in partition_lines(d.out) if "Topic: unc\t" in line] == [
        f"\tTopic: unc\tPartition: 0\tLeader: none\tReplicas: {x},{y}\tIsr: {x}"
        "\tElr: N/A\tLastKnownElr: N/A"], d
    assert not d.out.startswith("Topic:")             # report mode: no topic lines
    r = tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred",
             "--topic", "unc", "--partition", "0")
    assert r.rc == 1 and r.lines[0].startswith(
        "Error completing leader election (PREFERRED) for partition: unc-0: "), r
    r = tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "unclean",
             "--topic", "unc", "--partition", "0")
    assert r.rc == 0 and r.lines == [
        "Successfully completed leader election (UNCLEAN) for partitions unc-0"], r
    c4.wait_for(lambda: c4.leader("unc", 0) == y, 30, "unclean leader y")
    r = tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "unclean",
             "--topic", "unc", "--partition", "0")
    assert r.rc == 0 and r.lines == ["Valid replica already elected for partitions unc-0"], r
    c4.start_broker(x)
    c4.wait_for_isr("unc", 0, [x, y])


def test_leader_election_usage_errors(c4):
    bs = c4.bootstrap
    r = tool("kafka-leader-election", "--bootstrap-server", bs, "--all-topic-partitions")
    assert r.rc == 1 and r.err.strip() == "Missing required option(s): election-type", r
    r = tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred")
    assert r.rc == 1 and r.err.strip() == ("One and only one of the following options is required: "
                                           "topic, all-topic-partitions, path-to-json-file"), r
    r = tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred",
             "--topic", "t")
    assert r.rc == 1 and r.err.strip() == "Missing required option(s): partition", r
    r = tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "sideways",
             "--all-topic-partitions")
    assert r.rc == 1 and "election-type" in r.err, r


# ----------------------------------------------------------------------------- kafka-topics reports

def test_under_replicated_and_min_isr_reports_after_a_broker_dies(c4):
    k = non_controllers(c4)[0]
    reps = [k] + [b for b in non_controllers(c4)[1:]] + [c4.controller_id()]
    reps = reps[:3]
    c4.create_topic("ur", assignment={0: reps, 1: reps[::-1]}, configs={"min.insync.replicas": "2"})
    c4.create_topic("ur3", assignment={0: reps}, configs={"min.insync.replicas": "3"})
    for t in ("ur", "ur3"):
        c4.wait_for_isr(t, 0, reps)
    c4.wait_for_isr("ur", 1, reps)
    live = [b for b in sorted(c4.brokers) if b != k]
    bs = c4.bootstrap_of(live)

    def report(flag, topic="ur.*"):
        r = tool("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", topic, flag)
        assert r.rc == 0, r
        return r
    assert report("--under-replicated-partitions").out == ""
    at_min = report("--at-min-isr-partitions", "ur")
    assert at_min.out == ""
    c4.kill(k)
    c4.wait_for(lambda: all(k not in c4.isr(t, p) for t, p in (("ur", 0), ("ur", 1), ("ur3", 0))),
                30, "ISR shrink")
    r = c4.wait_for(lambda: (lambda r: r if len(partition_lines(r.out)) == 3 else None)(
        report("--under-replicated-partitions")), 20, "metadata shows the shrink")
    assert all(line.startswith("\tTopic: ur") for line in r.lines), r   # no topic lines
    assert [line.split("\t")[1:3] for line in r.lines] == [
        ["Topic: ur", "Partition: 0"], ["Topic: ur", "Partition: 1"], ["Topic: ur3", "Partition: 0"]]
    assert report("--under-min-isr-partitions").lines == [
        line for line in r.lines if "Topic: ur3\t" in line]
    assert [line.split("\t")[1] for line in report("--at-min-isr-partitions").lines] == [
        "Topic: ur", "Topic: ur"]
    assert report("--unavailable-partitions").out == ""
    c4.start_broker(k)
    for t, p in (("ur", 0), ("ur", 1), ("ur3", 0)):
        c4.wait_for_isr(t, p, reps)
    c4.wait_for(lambda: report("--under-replicated-partitions").out == "", 20,
                "no under-replicated partitions")


# ----------------------------------------------------------------------------- replica verification

class Running:
    """A tool left running; its stdout lines read as they come."""

    def __init__(self, name, *args):
        import threading
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen([str(BIN / f"{name}.sh"), *map(str, args)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env, cwd="/")
        self.lines: list[str] = []
        self._t = threading.Thread(target=lambda: self.lines.extend(
            line.rstrip("\n") for line in iter(self.proc.stdout.readline, "")), daemon=True)
        self._t.start()

    def stop(self):
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err


def test_replica_verification(c4):
    """kafka-replica-verification.sh reads every replica as the debugging consumer (followers
    answer it), finds them equal (lag 0 once caught up), and reports a batch whose stored CRC
    differs on one follower."""
    from kafka import KafkaProducer
    reps = non_controllers(c4)[:3]
    c4.create_topic("rv", assignment={0: reps, 1: reps[::-1]})
    for p in (0, 1):
        c4.wait_for_isr("rv", p, reps)
    prod = KafkaProducer(bootstrap_servers=c4.bootstrap, acks="all", linger_ms=5)
    for i in range(200):
        prod.send("rv", key=str(i).encode(), value=b"x" * 100)
    prod.flush()
    prod.close()
    args = ("--broker-list", c4.bootstrap, "--topics-include", "rv", "--time", -2, "--report-interval-ms", 300,
            "--max-wait-ms", 200)
    run = Running("kafka-replica-verification", *args)
    try:
        c4.wait_for(lambda: any("max lag is 0 for partition rv-" in x and "among 2 partitions" in x
                                for x in run.lines), 30, "lag 0 reported")
    finally:
        rc, err = run.stop()
    assert rc == 0, err
    assert run.lines[0].endswith(": verification process is started"), run.lines
    assert not any("checksum" in x or "doesn't match" in x for x in run.lines), run.lines
    # the first batch of partition 0 on its last follower gets another CRC in its header
    follower = reps[2]
    seg = c4.brokers[follower].log_dir / "rv-0" / ("0" * 20 + ".log")
    with open(seg, "r+b") as f:
        f.seek(17)
        crc = f.read(4)
        f.seek(17)
        f.write(bytes(b ^ 0xFF for b in crc))
    run = Running("kafka-replica-verification", *args)
    try:
        c4.wait_for(lambda: any("has unmatched checksum at offset" in x for x in run.lines), 30,
                    "the checksum report")
    finally:
        rc, err = run.stop()
    assert rc == 0, err
    line = next(x for x in run.lines if "has unmatched checksum" in x)
    assert "partition rv-0 has unmatched checksum at offset " in line and f"replica {follower}'s checksum " in line


def test_follower_reads(c4):
    """As Kafka: a consumer's Fetch v11+ may be answered by a follower (up to its high watermark),
    an older one only by the leader; ListOffsets answers the debugging replica id (-2) on any
    replica, with the log end offset, and consumers (-1) only on the leader."""
    from kafka import KafkaProducer

    from protocol.errors import ErrorCode as E
    from tests.support.rawkafka import RawConnection
    reps = non_controllers(c4)[:2]
    c4.create_topic("fr", assignment={0: reps})
    c4.wait_for_isr("fr", 0, reps)
    prod = KafkaProducer(bootstrap_servers=c4.bootstrap, acks="all")
    for i in range(10):
        prod.send("fr", value=f"v{i}".encode())
    prod.flush()
    prod.close()
    follower = c4.brokers[reps[1]]
    with RawConnection(follower.host, follower.port) as conn:
        got = c4.wait_for(lambda: (lambda p: p if p.high_watermark == 10 else None)(conn.fetch("fr", 0, 0)),
                          20, "the follower's high watermark")
        assert got.error_code == 0 and got.records, got
        assert conn.fetch("fr", 0, 0, version=10).error_code == E.NOT_LEADER_OR_FOLLOWER
        r = conn.list_offsets("fr", 0, -1, replica_id=-2)
        assert (r.error_code, r.offset) == (0, 10), r
        assert conn.list_offsets("fr", 0, -1).error_code == E.NOT_LEADER_OR_FOLLOWER

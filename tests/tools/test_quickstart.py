"""The classic Kafka quick-start, with Odradek in place of Kafka, through bin/kafka-*.sh.

The steps that need APIs the broker does not have yet skip with the API named. The group
steps: consume in group my-first-application, list and describe groups, reset the group's
offsets --to-earliest and --shift-by -2 (each checked by consuming in the group again)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.tools.conftest import BIN, tool


def test_quickstart_walkthrough(kafka, needs):
    b = kafka.bootstrap
    needs(19)                                   # CreateTopics
    r = tool("kafka-topics", "--bootstrap-server", b, "--create", "--topic", "first_topic",
             "--partitions", 3, "--replication-factor", 1)
    assert r.rc == 0 and r.lines[-1] == "Created topic first_topic.", r
    r = tool("kafka-topics", "--bootstrap-server", b, "--list")
    assert "first_topic" in r.lines
    lines = ["hello world", "my name is odradek", "I love Kafka", "learning Kafka"]
    r = tool("kafka-console-producer", "--bootstrap-server", b, "--topic", "first_topic",
             "--producer-property", "acks=all", input="\n".join(lines) + "\n")
    assert r.rc == 0, r
    r = tool("kafka-console-consumer", "--bootstrap-server", b, "--topic", "first_topic",
             "--from-beginning", "--max-messages", len(lines), "--timeout-ms", 5000)
    assert r.rc == 0 and sorted(r.lines) == sorted(lines), r
    assert f"Processed a total of {len(lines)} messages" in r.err
    r = tool("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", "first_topic")
    assert r.rc == 0 and re.match(r"Topic: first_topic\tTopicId: \S+\tPartitionCount: 3\t"
                                  r"ReplicationFactor: 1\tConfigs: ", r.lines[0]), r
    for p in range(3):
        assert r.lines[1 + p].startswith(f"\tTopic: first_topic\tPartition: {p}\tLeader: 0\t"
                                         f"Replicas: 0\tIsr: 0")

    # -- the group part ---------------------------------------------------------------------
    needs(10, 11, 14, 12, 8, 9, 15, 16)         # FindCoordinator, Join/Sync/Heartbeat, OffsetCommit/Fetch, Describe/ListGroups
    r = tool("kafka-console-consumer", "--bootstrap-server", b, "--topic", "first_topic",
             "--group", "my-first-application", "--from-beginning",
             "--max-messages", len(lines), "--timeout-ms", 15000)
    assert r.rc == 0 and sorted(r.lines) == sorted(lines), r
    group = "my-first-application"
    r = tool("kafka-consumer-groups", "--bootstrap-server", b, "--list")
    assert r.rc == 0 and group in r.lines, r
    r = tool("kafka-consumer-groups", "--bootstrap-server", b, "--describe", "--group", group)
    assert r.rc == 0 and f"Consumer group '{group}' has no active members." in r.err, r
    table = [ln.split() for ln in r.lines if ln.startswith(group + " ")]
    assert r.lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                  "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert [x[1:3] for x in table] == [["first_topic", str(p)] for p in range(3)], r
    ends = {int(x[2]): int(x[4]) for x in table}
    assert sum(ends.values()) == len(lines)
    assert all(x[3] == x[4] and x[5] == "0" for x in table), r     # everything consumed

    def group_consume(n):
        r = tool("kafka-console-consumer", "--bootstrap-server", b, "--topic", "first_topic",
                 "--group", group, "--property", "print.partition=true", "--property",
                 "print.offset=true", "--max-messages", n, "--timeout-ms", 3000)
        got = {}
        for ln in r.lines:
            m = re.match(r"Partition:(\d+)\tOffset:(\d+)\t(.*)$", ln)
            assert m, r
            got.setdefault(int(m.group(1)), []).append(int(m.group(2)))
        return r, got

    r = tool("kafka-consumer-groups", "--bootstrap-server", b, "--group", group,
             "--reset-offsets", "--to-earliest", "--execute", "--topic", "first_topic")
    assert r.rc == 0, r
    assert [x.split() for x in r.lines if x.startswith(group)] == [
        [group, "first_topic", str(p), "0"] for p in range(3)], r
    r, got = group_consume(len(lines))             # the whole topic again, from offset 0
    assert r.rc == 0 and {p: offs[0] for p, offs in got.items()} == {
        p: 0 for p, e in ends.items() if e}, r
    assert sum(len(v) for v in got.values()) == len(lines)
    r = tool("kafka-consumer-groups", "--bootstrap-server", b, "--group", group,
             "--reset-offsets", "--shift-by", "-2", "--execute", "--topic", "first_topic")
    assert r.rc == 0, r
    back = {p: max(e - 2, 0) for p, e in ends.items()}
    assert [x.split() for x in r.lines if x.startswith(group)] == [
        [group, "first_topic", str(p), str(back[p])] for p in range(3)], r
    r = tool("kafka-consumer-groups", "--bootstrap-server", b, "--describe", "--group", group)
    assert [x.split()[5] for x in r.lines if x.startswith(group + " ")] == [
        str(ends[p] - back[p]) for p in range(3)], r
    want = sum(ends[p] - back[p] for p in range(3))
    r, got = group_consume(want)                   # the last (up to) two of each partition
    assert r.rc == 0 and got == {p: list(range(back[p], ends[p])) for p in range(3)
                                 if ends[p] > back[p]}, r
    r = tool("kafka-consumer-groups", "--bootstrap-server", b, "--describe", "--group", group,
             "--state")
    s = r.lines[2].split()
    assert r.rc == 0 and s[0] == group and s[4:] == ["Empty", "0"], r


def test_server_start_stop_scripts(tmp_path):
    import os
    import subprocess
    import time
    from tests.support import broker_command_available, free_port, kafka_ready
    ok, why = broker_command_available()
    if not ok:
        pytest.skip(why)
    port = free_port()
    props = tmp_path / "server.properties"
    props.write_text("broker.id=0\nnum.partitions=1\noffsets.topic.replication.factor=1\n"
                     "group.initial.rebalance.delay.ms=0\n")
    env = dict(os.environ, ODRADEK_RUN_DIR=str(tmp_path / "run"), LOG_DIR=str(tmp_path / "logs"))
    env.pop("PYTHONPATH", None)
    r = subprocess.run([str(BIN / "kafka-server-start.sh"), "-daemon", str(props),
                        "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                        "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                        "--override", f"log.dirs={tmp_path / 'data'}"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r
    pidfiles = list((tmp_path / "run").glob("odradek-*.pid"))
    assert len(pidfiles) == 1
    pid = int(pidfiles[0].read_text())
    try:
        deadline = time.monotonic() + 30
        while kafka_ready("127.0.0.1", port) is None:
            assert time.monotonic() < deadline, (tmp_path / "logs" / "server.out").read_text()
            time.sleep(0.2)
        assert (tmp_path / "logs" / "server.out").exists()
        r = subprocess.run([str(BIN / "kafka-server-stop.sh")], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r
        assert not list((tmp_path / "run").glob("odradek-*.pid"))
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        r = subprocess.run([str(BIN / "kafka-server-stop.sh")], env=env, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 1 and "No kafka server to stop" in r.stdout
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    r = subprocess.run([str(BIN / "kafka-server-start.sh")], env=env, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1 and "USAGE" in r.stderr
    assert Path(BIN / "kafka-server-stop.sh").read_text().count("pkill") == 0

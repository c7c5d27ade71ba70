"""The classic Kafka quick-start, with Odradek in place of Kafka, through bin/kafka-*.sh.

The steps that need APIs the broker does not have yet skip with the API named; the group
steps (consumer groups, kafka-consumer-groups.sh) need the group coordinator and the
consumer-groups tool, which belong to the consumer-group issue."""
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
    needs(10, 11, 14, 12, 8)                    # FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit
    r = tool("kafka-console-consumer", "--bootstrap-server", b, "--topic", "first_topic",
             "--group", "my-first-application", "--from-beginning",
             "--max-messages", len(lines), "--timeout-ms", 15000)
    assert r.rc == 0 and sorted(r.lines) == sorted(lines), r
    if not (BIN / "kafka-consumer-groups.sh").exists():
        pytest.skip("kafka-consumer-groups.sh (list/describe groups, --reset-offsets "
                    "--to-earliest / --shift-by -2) comes with the consumer-group issue")
    r = tool("kafka-consumer-groups", "--bootstrap-server", b, "--list")
    assert "my-first-application" in r.lines
    r = tool("kafka-consumer-groups", "--bootstrap-server", b, "--describe", "--group",
             "my-first-application")
    assert r.rc == 0 and "first_topic" in r.out
    r = tool("kafka-consumer-groups", "--bootstrap-server", b, "--group", "my-first-application",
             "--reset-offsets", "--to-earliest", "--execute", "--topic", "first_topic")
    assert r.rc == 0, r
    r = tool("kafka-consumer-groups", "--bootstrap-server", b, "--group", "my-first-application",
             "--reset-offsets", "--shift-by", "-2", "--execute", "--topic", "first_topic")
    assert r.rc == 0, r


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

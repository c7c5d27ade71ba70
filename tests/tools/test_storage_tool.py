"""bin/kafka-storage.sh (Kafka 3.9's StorageTool) and Kafka's KRaft quickstart against Odradek:
random-uuid, format (--standalone or controller.quorum.voters), the broker started with
bin/kafka-server-start.sh on the KRaft file, data and cluster id kept over a restart; info's
report; Kafka's refusals (legacy config, bad cluster id, already formatted, feature levels,
release versions, SCRAM arguments) and --add-scram credentials a SCRAM client logs in with."""
from __future__ import annotations

import base64
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support import BrokerProcess, broker_command_available, free_port
from tests.support.broker import running
from tests.tools.conftest import BIN, tool

UUID_RE = re.compile(r"[A-Za-z0-9_-]{22}")


class KraftConfig:
    """A KRaft properties file (``str()`` is its path) and its PLAINTEXT port."""

    def __init__(self, path: Path, port: int):
        self.path, self.port = path, port

    def __str__(self) -> str:
        return str(self.path)

    def read_text(self) -> str:
        return self.path.read_text()

    def write_text(self, text: str) -> None:
        self.path.write_text(text)


def kraft_config(path: Path, logs, *, standalone: bool = True, port: int | None = None,
                 extra: dict | None = None) -> KraftConfig:
    """A copy of Kafka 3.9's config/kraft/reconfig-server.properties (``standalone``) or
    server.properties (controller.quorum.voters) with free ports and ``logs`` as log.dirs."""
    port = port or free_port("127.0.0.1")
    ctl = free_port("127.0.0.1")
    quorum = (f"controller.quorum.bootstrap.servers=localhost:{ctl}" if standalone
              else f"controller.quorum.voters=1@localhost:{ctl}")
    text = f"""process.roles=broker,controller
node.id=1
{quorum}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{ctl}
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{ctl}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
log.dirs={logs if isinstance(logs, (str, Path)) else ",".join(map(str, logs))}
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
"""
    for k, v in (extra or {}).items():
        text += f"{k}={v}\n"
    path.write_text(text)
    return KraftConfig(path, port)


def meta(d: Path) -> dict:
    out = {}
    for line in (d / "meta.properties").read_text().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k] = v
    return out


def new_id() -> str:
    r = tool("kafka-storage", "random-uuid")
    assert r.rc == 0, r
    return r.out.strip()


def kraft_broker(tmp_path: Path, cfg: KraftConfig) -> BrokerProcess:
    """The quickstart's ``bin/kafka-server-start.sh <cfg>``, with nothing overridden."""
    run_dir = tmp_path / "run"
    return BrokerProcess(tmp_path / "proc", port=cfg.port, use_defaults=False, name="kraft-broker",
                         cmd=lambda b: [str(BIN / "kafka-server-start.sh"), str(cfg)],
                         env={"ODRADEK_RUN_DIR": str(run_dir)})


@pytest.fixture
def broker_ok():
    ok, why = broker_command_available()
    if not ok:
        pytest.skip(why)


# ------------------------------------------------------------------------------------ random-uuid
def test_random_uuid_is_a_kafka_uuid():
    ids = {new_id() for _ in range(3)}
    assert len(ids) == 3
    for i in ids:
        assert UUID_RE.fullmatch(i) and not i.startswith("-"), i
        assert len(base64.urlsafe_b64decode(i + "==")) == 16


def test_usage_errors():
    r = tool("kafka-storage")
    assert r.rc == 1 and "too few arguments" in r.err, r
    r = tool("kafka-storage", "format", "-c", "/nonexistent.properties")
    assert r.rc == 1 and "argument --cluster-id/-t is required" in r.err, r
    r = tool("kafka-storage", "format", "-t", "x", "-c", "y", "--standalone", "--no-initial-controllers")
    assert r.rc == 1 and "not allowed with argument --standalone/-s" in r.err, r
    r = tool("kafka-storage", "--help")
    assert r.rc == 0 and "random-uuid" in r.out


# ------------------------------------------------------------------------------------ quickstart
def test_quickstart_standalone_then_restart(tmp_path, broker_ok):
    """Kafka 3.9's quickstart verbatim: random-uuid, format --standalone on the reconfig file,
    kafka-server-start.sh; produce, consume, restart: records and cluster id are kept."""
    kafka = pytest.importorskip("kafka")
    logs = tmp_path / "kraft-combined-logs"
    cfg = kraft_config(tmp_path / "reconfig-server.properties", logs)
    cid = new_id()

    r = tool("kafka-storage", "info", "-c", cfg)
    assert r.rc == 1 and r.out == f"Found problem:\n  {logs} does not exist\n\n", r

    r = tool("kafka-storage", "format", "--standalone", "-t", cid, "-c", cfg)
    assert r.rc == 0, r
    assert r.lines == [f"Formatting dynamic metadata voter directory {logs} with metadata.version 3.9-IV0."], r
    m = meta(logs)
    assert m["version"] == "1" and m["node.id"] == "1" and m["cluster.id"] == cid, m
    assert UUID_RE.fullmatch(m["directory.id"])

    r = tool("kafka-storage", "info", "-c", cfg)
    assert r.rc == 0, r
    assert r.out == (f"Found log directory:\n  {logs}\n\nFound metadata: {{cluster.id={cid}, "
                     f"directory.id={m['directory.id']}, node.id=1, version=1}}\n\n"), r

    b = kraft_broker(tmp_path, cfg)
    with running(b):
        p = kafka.KafkaProducer(bootstrap_servers=b.bootstrap)
        for i in range(5):
            p.send("quickstart-events", value=b"event %d" % i).get(timeout=30)
        p.close()
        r = tool("kafka-cluster", "cluster-id", "--bootstrap-server", b.bootstrap)
        assert r.out.strip() == f"Cluster ID: {cid}", r
        b.restart()
        r = tool("kafka-cluster", "cluster-id", "--bootstrap-server", b.bootstrap)
        assert r.out.strip() == f"Cluster ID: {cid}", r
        c = kafka.KafkaConsumer("quickstart-events", bootstrap_servers=b.bootstrap,
                                auto_offset_reset="earliest", consumer_timeout_ms=10000)
        got = [rec.value for rec in c]
        c.close()
        assert got == [b"event %d" % i for i in range(5)]
    assert meta(logs) == m                      # the broker keeps the formatted identity


def test_static_voters_config_formats_without_flags(tmp_path, broker_ok):
    """The older quickstart: server.properties with controller.quorum.voters, no --standalone."""
    logs = tmp_path / "logs"
    cfg = kraft_config(tmp_path / "server.properties", logs, standalone=False)
    cid = new_id()
    r = tool("kafka-storage", "format", "-t", cid, "-c", cfg)
    assert r.rc == 0 and r.lines == [f"Formatting metadata directory {logs} with metadata.version 3.9-IV0."], r
    b = kraft_broker(tmp_path, cfg)
    with running(b):
        r = tool("kafka-cluster", "cluster-id", "--bootstrap-server", b.bootstrap)
        assert r.out.strip() == f"Cluster ID: {cid}", r


def test_unformatted_kraft_config_does_not_start(tmp_path):
    logs = tmp_path / "logs"
    cfg = kraft_config(tmp_path / "server.properties", logs)
    cp = subprocess.run([str(BIN / "kafka-server-start.sh"), str(cfg)], capture_output=True, text=True,
                        timeout=60, env=dict(os.environ, ODRADEK_RUN_DIR=str(tmp_path / "run")))
    assert cp.returncode != 0
    assert (f"No `meta.properties` found in {logs} (have you run `kafka-storage.sh` to format the "
            "directory?)") in cp.stdout + cp.stderr


def test_standalone_needs_a_controller_listener_without_quorum_flags(tmp_path):
    cfg = kraft_config(tmp_path / "server.properties", tmp_path / "logs")
    r = tool("kafka-storage", "format", "-t", new_id(), "-c", cfg)
    assert r.rc == 1 and r.err.strip() == (
        "Because controller.quorum.voters is not set on this controller, you must specify one of the following: "
        "--standalone, --initial-controllers, or --no-initial-controllers."), r
    assert not (tmp_path / "logs").exists()
    r = tool("kafka-storage", "format", "-t", new_id(), "-c", cfg, "-N")
    assert r.rc == 0 and "Formatting metadata directory" in r.out, r


# ------------------------------------------------------------------------------------ already formatted
def test_format_twice_and_ignore_formatted(tmp_path):
    a, b, mdir = tmp_path / "a", tmp_path / "b", tmp_path / "meta"
    cfg = kraft_config(tmp_path / "server.properties", [a, b], extra={"metadata.log.dir": mdir})
    cid = new_id()
    r = tool("kafka-storage", "format", "-t", cid, "-c", cfg, "--standalone")
    assert r.rc == 0, r
    assert sorted(r.lines) == sorted([
        f"Formatting data directory {a} with metadata.version 3.9-IV0.",
        f"Formatting data directory {b} with metadata.version 3.9-IV0.",
        f"Formatting dynamic metadata voter directory {mdir} with metadata.version 3.9-IV0."]), r
    ids = {meta(d)["directory.id"] for d in (a, b, mdir)}
    assert len(ids) == 3

    r = tool("kafka-storage", "format", "-t", cid, "-c", cfg, "--standalone")
    assert r.rc == 1 and r.err.strip() == (f"Log directory {a} is already formatted. Use --ignore-formatted to "
                                           "ignore this directory and format the others."), r
    r = tool("kafka-storage", "format", "-t", cid, "-c", cfg, "--standalone", "--ignore-formatted")
    assert r.rc == 0 and r.lines == ["All of the log directories are already formatted."], r

    # a directory added later is formatted, the others are left alone
    c = tmp_path / "c"
    cfg = kraft_config(tmp_path / "server.properties", [a, b, c], extra={"metadata.log.dir": mdir})
    r = tool("kafka-storage", "format", "-t", cid, "-c", cfg, "-N", "-g")
    assert r.rc == 0 and r.lines == [f"Formatting data directory {c} with metadata.version 3.9-IV0."], r
    assert meta(c)["directory.id"] not in ids and meta(c)["cluster.id"] == cid
    r = tool("kafka-storage", "info", "-c", cfg)
    assert r.rc == 0 and r.lines[:5] == ["Found log directories:", f"  {a}", f"  {b}", f"  {c}", f"  {mdir}"], r

    # another cluster id, even with --ignore-formatted
    other = new_id()
    r = tool("kafka-storage", "format", "-t", other, "-c", cfg, "-N", "-g")
    assert r.rc == 1 and r.err.strip() == (f"Invalid cluster.id in: {a}/meta.properties. Expected {other}, "
                                           f"but read {cid}"), r


def test_info_reports_problems(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    cfg = kraft_config(tmp_path / "server.properties", [a, b])
    r = tool("kafka-storage", "format", "-t", new_id(), "-c", cfg, "-N")
    assert r.rc == 0, r
    # b: unformatted; then formatted for another cluster
    (b / "meta.properties").unlink()
    r = tool("kafka-storage", "info", "-c", cfg)
    assert r.rc == 1, r
    assert r.lines[:3] == ["Found log directories:", f"  {a}", f"  {b}"]
    assert r.out.endswith(f"Found problem:\n  {b} is not formatted.\n\n"), r
    (b / "meta.properties").write_text(f"version=1\nnode.id=1\ncluster.id={new_id()}\n")
    r = tool("kafka-storage", "info", "-c", cfg)
    assert r.rc == 1 and "  Mismatched cluster IDs between storage directories." in r.lines, r
    (b / "meta.properties").write_text(f"version=1\nnode.id=7\ncluster.id={meta(a)['cluster.id']}\n")
    r = tool("kafka-storage", "info", "-c", cfg)
    assert r.rc == 1 and "  Mismatched node IDs between storage directories." in r.lines, r
    (b / "meta.properties").write_text("version=1\nnode.id=1\n")
    r = tool("kafka-storage", "info", "-c", cfg)
    assert r.rc == 1 and f"  Error loading {b}/meta.properties: cluster.id was not found." in r.lines, r
    # a file where a directory should be
    (b / "meta.properties").unlink()
    b.rmdir()
    b.write_text("")
    r = tool("kafka-storage", "info", "-c", cfg)
    assert r.rc == 1 and f"  {b} is not a directory" in r.lines, r


def test_info_legacy_and_kraft_mismatches(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "meta.properties").write_text("#\nversion=0\nbroker.id=1\ncluster.id=abc\n")
    cfg = kraft_config(tmp_path / "kraft.properties", logs)
    r = tool("kafka-storage", "info", "-c", cfg)
    assert r.rc == 1, r
    assert r.out == (f"Found log directory:\n  {logs}\n\nFound metadata: {{broker.id=1, cluster.id=abc, version=0}}\n\n"
                     "Found problem:\n  The kafka configuration file appears to be for a cluster in KRaft mode, but "
                     "the directories are formatted for legacy mode.\n\n"), r
    legacy = tmp_path / "legacy.properties"
    legacy.write_text(f"broker.id=1\nlog.dirs={logs}\n")
    r = tool("kafka-storage", "info", "-c", legacy)
    assert r.rc == 0 and "Found problem" not in r.out, r
    (logs / "meta.properties").write_text(f"version=1\nnode.id=1\ncluster.id={new_id()}\n")
    r = tool("kafka-storage", "info", "-c", legacy)
    assert r.rc == 1 and ("  The kafka configuration file appears to be for a legacy cluster, but the directories "
                          "are formatted for a cluster in KRaft mode.") in r.lines, r


# ------------------------------------------------------------------------------------ refusals
def test_legacy_config_and_bad_cluster_id(tmp_path):
    legacy = tmp_path / "legacy.properties"
    legacy.write_text(f"broker.id=0\nlog.dirs={tmp_path / 'legacy-logs'}\n")
    r = tool("kafka-storage", "format", "-t", new_id(), "-c", legacy)
    assert r.rc == 1 and r.err.strip() == ("The kafka configuration file appears to be for a legacy cluster. "
                                           "Formatting is only supported for clusters in KRaft mode."), r
    cfg = kraft_config(tmp_path / "server.properties", tmp_path / "logs")
    r = tool("kafka-storage", "format", "-t", "invalid", "-c", cfg, "-s")
    assert r.rc == 1 and r.err.strip() == (
        "Cluster ID string invalid does not appear to be a valid UUID: Input string `invalid` decoded as 5 bytes, "
        "which is not equal to the expected 16 bytes of a base64-encoded UUID"), r
    r = tool("kafka-storage", "format", "-t", "x" * 30, "-c", cfg, "-s")
    assert r.rc == 1 and "is too long to be decoded as a base64 UUID" in r.err, r
    bad = tmp_path / "bad.properties"
    bad.write_text("process.roles=broker,controller\nnode.id=1\n")
    r = tool("kafka-storage", "format", "-t", new_id(), "-c", bad, "-s")
    assert r.rc == 1 and "controller.quorum.voters" in r.err and "Traceback" not in r.err, r
    assert not (tmp_path / "logs").exists() and not (tmp_path / "legacy-logs").exists()


@pytest.mark.parametrize("args,message", [
    (["-r", "3.0-IV0"], "metadata.version 3.0-IV0 is too old to be supported."),
    (["-r", "4.0-IV0"], "metadata.version 4.0-IV0 is not yet stable."),
    (["-r", "9.9"], "Version 9.9 is not a valid version"),
    (["-f", "foo.version=1"], "Unsupported feature: foo.version. Supported features are: kraft.version, "
                              "transaction.version"),
    (["-f", "transaction.version=1"], "No feature:transaction.version with feature level 1"),
    (["-f", "kraft.version=0"], "Cannot set kraft.version to 0 if KIP-853 configuration is present. "
                                "Try removing the --feature flag for kraft.version."),
    (["-f", "metadata.version=21", "-r", "3.9"], "Use --release-version instead of --feature metadata.version=X "
                                                 "to avoid ambiguity."),
    (["-f", "kraft.version"], "Can't parse feature=level string kraft.version: equals sign not found."),
    (["-r", "3.8"], "kraft.version could not be set to 1 because it depends on metadata.version level 21"),
    (["-N", "-r", "3.5-IV1", "-S", "SCRAM-SHA-256=[name=a,password=b]"],
     "SCRAM is only supported in metadata.version 3.5-IV2 or later."),
    (["-S", "SCRAM-SHA-1=[name=a,password=b]"], "The add-scram mechanism SCRAM-SHA-1 is not supported."),
    (["-S", "SCRAM-SHA-256=[password=b]"], "You must supply 'name' to add-scram"),
    (["-S", "SCRAM-SHA-256=[name=a]"], "You must supply one of 'password' or 'saltedpassword' to add-scram"),
    (["-S", "SCRAM-SHA-256=[name=a,password=b,iterations=1024]"],
     "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_256"),
    (["-S", "SCRAM-SHA-512=[name=a,password=b,color=red]"], "Unknown SCRAM configurations: color"),
])
def test_format_refusals_write_nothing(tmp_path, args, message):
    logs = tmp_path / "logs"
    cfg = kraft_config(tmp_path / "server.properties", logs)
    quorum = [] if "-N" in args else ["--standalone"]
    r = tool("kafka-storage", "format", "-t", new_id(), "-c", cfg, *quorum, *args)
    assert r.rc == 1 and r.err.strip() == message and r.out == "", r
    assert not logs.exists()


def test_accepted_levels_and_initial_controllers(tmp_path):
    logs = tmp_path / "logs"
    cfg = kraft_config(tmp_path / "server.properties", logs)
    dir_id = new_id()
    r = tool("kafka-storage", "format", "-t", new_id(), "-c", cfg, "-I", f"1@localhost:9093:{dir_id},2@h:9093:{dir_id}")
    assert r.rc == 1 and "quorum of one" in r.err and "node.id=1" in r.err, r
    r = tool("kafka-storage", "format", "-t", new_id(), "-c", cfg, "-I", "1@localhost:9093")
    assert r.rc == 1 and r.err.strip() == "No colon following port could be found.", r
    r = tool("kafka-storage", "format", "-t", new_id(), "-c", cfg, "-I", f"1@localhost:9093:{dir_id}",
             "-r", "3.7-IV4", "-f", "transaction.version=0")
    assert r.rc == 1 and "depends on metadata.version level 21" in r.err, r
    r = tool("kafka-storage", "format", "-t", new_id(), "-c", cfg, "-I", f"1@localhost:9093:{dir_id}",
             "-r", "3.9", "-f", "transaction.version=0", "-f", "kraft.version=1")
    assert r.rc == 0 and r.lines == [f"Formatting dynamic metadata voter directory {logs} with metadata.version "
                                     "3.9-IV0."], r
    assert meta(logs)["directory.id"] == dir_id        # the voter's directory id, as Kafka
    r = tool("kafka-storage", "format", "-t", new_id(), "-c", cfg, "-N", "-r", "3.3-IV3", "-g",
             "-f", "kraft.version=0")
    assert r.rc == 1 and "Invalid cluster.id in:" in r.err, r


# ------------------------------------------------------------------------------------ --add-scram
def test_add_scram_credentials_log_in(tmp_path, broker_ok):
    pytest.importorskip("confluent_kafka")
    from tests.support.sasl import login_error
    logs = tmp_path / "logs"
    sasl_port = free_port("127.0.0.1")
    cfg = kraft_config(tmp_path / "server.properties", logs, extra={"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"})
    text = cfg.read_text()
    ctl = re.search(r"CONTROLLER://127.0.0.1:(\d+)", text).group(1)
    text = re.sub(r"^(advertised\.)?listeners=.*$",
                  lambda m: f"{m.group(1) or ''}listeners=PLAINTEXT://127.0.0.1:{cfg.port},"
                            f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},CONTROLLER://127.0.0.1:{ctl}",
                  text, flags=re.M)
    cfg.write_text(text)
    r = tool("kafka-storage", "format", "-t", new_id(), "-c", cfg, "--standalone",
             "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
             "-S", 'SCRAM-SHA-512=[name=bob,iterations=8192,salt="N3E=",saltedpassword="YCE="]')
    assert r.rc == 0 and len(r.lines) == 1, r
    b = kraft_broker(tmp_path, cfg)
    with running(b):
        base = {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_PLAINTEXT"}
        alice = dict(base, **{"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                              "sasl.password": "alice-secret"})
        assert login_error(alice, timeout=15) is None
        assert login_error(dict(alice, **{"sasl.password": "wrong"})) is not None
        r = tool("kafka-configs", "--bootstrap-server", b.bootstrap, "--describe", "--entity-type", "users")
        assert "SCRAM-SHA-256=iterations=4096" in r.out and "SCRAM-SHA-512=iterations=8192" in r.out, r

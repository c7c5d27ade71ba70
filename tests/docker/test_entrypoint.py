"""The Docker image's entrypoint (docker/entrypoint.py) and compose file, without a Docker
engine: the script runs on the host with a chosen environment.

* --print-config: KAFKA_* -> properties the Confluent way (``_`` . / ``__`` _ / ``___`` -),
  launcher variables left out, container defaults, listeners derived from advertised
  listeners, escaping that round-trips through the broker's own parser, invalid values refused.
* --write-config writes ODRADEK_CONFIG_FILE; the default mode execs a real broker from it,
  which serves Kafka and metrics, and --healthcheck sees it.
* docker-compose.yml (with PyYAML, if installed): ZooKeeper + three brokers with distinct ids,
  host ports matching their EXTERNAL listeners, healthchecks; each broker's environment goes
  through the entrypoint and gives a valid config.
* Dockerfile: the required base image, user, volume, ports and entrypoint.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from broker.config import load_properties, parse_properties
from tests.support.net import free_port, kafka_ready, port_open

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "docker" / "entrypoint.py"


def run(env: dict[str, str], *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    base = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(ENTRYPOINT), *args], env={**base, **env},
                          capture_output=True, text=True, timeout=timeout)


@contextlib.contextmanager
def entrypoint_broker(env: dict[str, str], log_path: Path, port: int):
    """The default mode, as in the image: the entrypoint writes the file and execs ``python -m
    broker`` on it; yields once the broker answers on ``port``, then stops it with SIGTERM (which
    the exec'd broker gets itself, as from docker) and checks it exited cleanly."""
    base = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, str(ENTRYPOINT)], env={**base, **env}, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while not (port_open("127.0.0.1", port) and kafka_ready("127.0.0.1", port)):
                assert proc.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, "broker did not start"
                time.sleep(0.1)
            yield proc
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                assert proc.wait(30) == 0
            finally:
                if proc.poll() is None:
                    proc.kill()


def config(env: dict[str, str]) -> dict[str, str]:
    r = run(env, "--print-config")
    assert r.returncode == 0, r.stderr
    return parse_properties(r.stdout)


def test_confluent_style_environment():
    props = config({
        "KAFKA_BROKER_ID": "2",
        "KAFKA_ZOOKEEPER_CONNECT": "zookeeper:2181/odradek",
        "KAFKA_ADVERTISED_LISTENERS": "INTERNAL://broker-2:19092,EXTERNAL://localhost:9093",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "INTERNAL",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "3",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "2",
        "KAFKA_HEAP_OPTS": "-Xmx1G", "KAFKA_OPTS": "-javaagent:x.jar", "KAFKA_JMX_PORT": "9999",
        "KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN", "KAFKA_LOG4J_LOGGERS": "kafka=INFO",
        "KAFKA_VERSION": "7.6.0", "OTHER_VARIABLE": "x", "ZOO_MY_ID": "1",
    })
    assert props == {
        "broker.id": "2",
        "zookeeper.connect": "zookeeper:2181/odradek",
        "advertised.listeners": "INTERNAL://broker-2:19092,EXTERNAL://localhost:9093",
        # no KAFKA_LISTENERS: bind the advertised listeners on every interface
        "listeners": "INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9093",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "offsets.topic.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "log.dirs": "/var/lib/kafka/data",                  # the image's volume
        "odradek.metrics.prometheus.port": "9404",          # the image's metrics port
        "socket.send.buffer.bytes": "2097152",              # the shipped server.properties' buffers
        "socket.receive.buffer.bytes": "-1",
    }


def test_underscore_conventions_and_overrides():
    props = config({
        "KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:29092",
        "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka.example:29092",
        "KAFKA_CONFLUENT_SUPPORT___METRICS__ENABLE": "false",    # ___ -> -, __ -> _
        "KAFKA_LOG_DIRS": "/data/a,/data/b",                      # replaces the default
        "KAFKA_ODRADEK_METRICS_PROMETHEUS_PORT": "-1",            # metrics off
        "KAFKA_LOG_RETENTION_HOURS": "1",
    })
    assert props["listeners"] == "PLAINTEXT://0.0.0.0:29092"      # an explicit value is kept
    assert props["confluent.support-metrics_enable"] == "false"
    assert props["log.dirs"] == "/data/a,/data/b"
    assert props["odradek.metrics.prometheus.port"] == "-1"
    assert props["log.retention.hours"] == "1"


def test_escaping_round_trips():
    tricky = {
        "KAFKA_SASL_JAAS_CONFIG": 'org.Foo required username="a b" password="x=y:z\\\\w#!";',
        "KAFKA_SSL_KEY_PASSWORD": " leading space, tab\tand newline\nend ",
        "KAFKA_BROKER_RACK": "zürich-1",
    }
    props = config(tricky)
    assert props["sasl.jaas.config"] == tricky["KAFKA_SASL_JAAS_CONFIG"]
    assert props["ssl.key.password"] == tricky["KAFKA_SSL_KEY_PASSWORD"]
    assert props["broker.rack"] == "zürich-1"


def test_base_config_file_under_environment(tmp_path):
    base = tmp_path / "base.properties"
    base.write_text("num.partitions=5\nlog.dirs=/srv/kafka\nlisteners=PLAINTEXT://:9095\n")
    props = config({"ODRADEK_BASE_CONFIG": str(base), "KAFKA_NUM_PARTITIONS": "7",
                    "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://h:9095"})
    assert props["num.partitions"] == "7"
    assert props["log.dirs"] == "/srv/kafka"
    assert props["listeners"] == "PLAINTEXT://:9095"        # from the file: not derived


@pytest.mark.parametrize("env, key", [
    ({"KAFKA_NUM_PARTITIONS": "three"}, "num.partitions"),
    ({"KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
    ({"KAFKA_ADVERTISED_LISTENERS": "not a listener"}, "advertised.listeners"),
    ({"KAFKA_ODRADEK_METRICS_PROMETHEUS_PORT": "70000"}, "odradek.metrics.prometheus.port"),
    ({"KAFKA_LISTENERS": "A://:1", "KAFKA_INTER_BROKER_LISTENER_NAME": "B",
      "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "A:PLAINTEXT,B:PLAINTEXT"}, "inter.broker.listener.name"),
])
def test_invalid_configuration_refused(env, key, tmp_path):
    target = tmp_path / "server.properties"
    r = run({**env, "ODRADEK_CONFIG_FILE": str(target)})
    assert r.returncode == 1
    assert r.stderr.startswith("ERROR: ") and key in r.stderr
    assert not target.exists()          # nothing written, no broker started


def test_write_config(tmp_path):
    target = tmp_path / "etc" / "server.properties"
    r = run({"ODRADEK_CONFIG_FILE": str(target), "KAFKA_BROKER_ID": "4"}, "--write-config")
    assert r.returncode == 0, r.stderr
    assert load_properties(target)["broker.id"] == "4"


def test_starts_a_broker_and_healthcheck(tmp_path):
    """The default mode: write the file and exec ``python -m broker`` on it (as in the image);
    --healthcheck sees the broker; metrics are served on the configured port."""
    port, mport = free_port(), free_port()
    target = tmp_path / "server.properties"
    env = {
        "ODRADEK_CONFIG_FILE": str(target),
        "KAFKA_BROKER_ID": "1",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_LOG_DIRS": str(tmp_path / "data"),
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_ODRADEK_METRICS_PROMETHEUS_PORT": str(mport),
        "KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN",
    }
    assert run(env, "--healthcheck").returncode == 1           # nothing written yet
    with entrypoint_broker(env, tmp_path / "broker.log", port):
        assert load_properties(target)["listeners"] == f"PLAINTEXT://0.0.0.0:{port}"
        assert run(env, "--healthcheck").returncode == 0
        with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as r:
            assert b"kafka_server_kafkaserver_brokerstate 3.0" in r.read()
    assert run(env, "--healthcheck").returncode == 1           # stopped
    out = (tmp_path / "broker.log").read_text()
    assert "starting the broker" in out
    assert " INFO " not in out              # KAFKA_LOG4J_ROOT_LOGLEVEL=WARN reached the broker


def test_compose_file():
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load((REPO / "docker" / "docker-compose.yml").read_text())
    services = doc["services"]
    assert services["zookeeper"]["image"].startswith("zookeeper:")
    assert "healthcheck" in services["zookeeper"]
    brokers = {k: v for k, v in services.items() if k.startswith("broker-")}
    assert len(brokers) == 3
    ids, host_ports = set(), set()
    for name, svc in brokers.items():
        env = {k: str(v) for k, v in svc["environment"].items()}
        props = config(env)                 # the entrypoint accepts it, and the broker's checks pass
        ids.add(props["broker.id"])
        assert props["zookeeper.connect"] == "zookeeper:2181"
        assert svc["depends_on"]["zookeeper"]["condition"] == "service_healthy"
        assert svc["healthcheck"]["test"][-1] == "--healthcheck"
        assert svc["build"]["dockerfile"] == "docker/Dockerfile"
        advertised = dict(e.split("://", 1) for e in props["advertised.listeners"].split(","))
        assert advertised["INTERNAL"] == f"{name}:19092"               # reachable on the network
        external_port = advertised["EXTERNAL"].rsplit(":", 1)[1]
        assert advertised["EXTERNAL"].startswith("localhost:")
        published = {p.split(":")[1]: p.split(":")[0] for p in svc["ports"]}
        assert published[external_port] == external_port              # host port = advertised port
        host_ports.add(external_port)
        assert published["9404"] in {"9404", "9405", "9406"}          # metrics
        assert any(v.endswith(":/var/lib/kafka/data") for v in svc["volumes"])
        assert props["offsets.topic.replication.factor"] == "3"
    assert ids == {"1", "2", "3"}
    assert host_ports == {"9092", "9093", "9094"}
    prom = yaml.safe_load((REPO / "docker" / "prometheus.yml").read_text())
    targets = prom["scrape_configs"][0]["static_configs"][0]["targets"]
    assert sorted(targets) == [f"{b}:9404" for b in sorted(brokers)]


def test_dockerfile():
    text = (REPO / "docker" / "Dockerfile").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[0] == "FROM python:3.11-slim"
    assert any(ln.startswith("RUN pip install .") for ln in lines)
    user = [ln for ln in lines if ln.startswith("USER ")]
    assert user and user[-1] not in ("USER root", "USER 0")
    assert 'VOLUME ["/var/lib/kafka/data"]' in lines
    assert any(ln.startswith("EXPOSE") and "9092" in ln.split() for ln in lines)
    assert 'ENTRYPOINT ["odradek-entrypoint"]' in lines
    assert "COPY docker/entrypoint.py /usr/local/bin/odradek-entrypoint" in lines
    # every directory the Dockerfile copies exists (a typo would only show in a real build)
    for ln in lines:
        if ln.startswith("COPY "):
            for src in ln.split()[1:-1]:
                assert (REPO / src).exists(), src


def test_kraft_environment_formats_and_starts(tmp_path):
    """KRaft variables, as for the Confluent and Apache images: without CLUSTER_ID the entrypoint
    refuses; with it the data directory is formatted before the first start (and left alone on
    the next), and the broker serves with the node id."""
    port, ctl = free_port(), free_port()
    env = {
        "ODRADEK_CONFIG_FILE": str(tmp_path / "server.properties"),
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_NODE_ID": "3",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": f"3@127.0.0.1:{ctl}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENERS": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{ctl}",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "KAFKA_LOG_DIRS": str(tmp_path / "data"),
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
    }
    r = run(env)
    assert r.returncode == 1 and "CLUSTER_ID is required when KAFKA_PROCESS_ROLES is set" in r.stderr
    r = run({**env, "CLUSTER_ID": "not-an-id"})
    assert r.returncode == 1 and "CLUSTER_ID not-an-id is not a Kafka cluster id" in r.stderr
    cluster = "MkU3OEVBNTcwNTJENDM2Qk"
    for attempt in (1, 2):
        with entrypoint_broker({**env, "CLUSTER_ID": cluster}, tmp_path / f"broker{attempt}.log", port):
            pass
        out = (tmp_path / f"broker{attempt}.log").read_text()
        assert ("formatted" in out) == (attempt == 1), out
        assert f"[KafkaServer id=3] started (cluster id {cluster})" in out
    meta = load_properties(tmp_path / "data" / "meta.properties")
    assert meta["version"] == "1" and meta["node.id"] == "3" and meta["cluster.id"] == cluster

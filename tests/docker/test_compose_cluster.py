"""The image and the compose cluster run for real: docker/Dockerfile built and
docker/docker-compose.yml brought up with podman (``scripts/test.sh --container``, which first
runs scripts/container-images.sh), then driven from the host the way its README says.

* ZooKeeper and three brokers come up; each container's own healthcheck passes (podman without
  systemd does not schedule healthchecks, so the test runs them); exactly one broker reports
  itself the active controller on its metrics port.
* A topic created from the host gets replication factor 3 and min.insync.replicas=2 from the
  compose environment; an idempotent acks=all producer's records are acknowledged.
* ``podman stop`` (SIGTERM through the entrypoint's exec) makes a broker shut down in a controlled
  way: it leads nothing afterwards and acks=all produce goes on; it rejoins the ISR after a
  restart.  A broker killed with SIGKILL: produce goes on, and it catches up after a restart.
* Preferred leader election from the host's kafka-leader-election.sh, the tools inside a
  container over the INTERNAL listener, and every acknowledged record read back exactly once,
  in order per partition.
* The ``monitoring`` profile's Prometheus scrapes all three brokers with docker/prometheus.yml:
  its query API reports the three targets up and one active controller.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.support.metrics import scrape, val
from tests.support.net import port_open, wait_for

pytestmark = [pytest.mark.container]

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker" / "docker-compose.yml"
PROJECT = "odradek-test"
BROKERS = {1: 9092, 2: 9093, 3: 9094}
METRICS = {1: 9404, 2: 9405, 3: 9406}
BOOTSTRAP = ",".join(f"localhost:{p}" for p in BROKERS.values())
ENV = {**os.environ, "CONTAINERS_CONF": os.environ.get(
    "ODRADEK_CONTAINERS_CONF", str(REPO / "docker" / "standin" / "containers.conf"))}


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    r = subprocess.run(["podman", *args], env=ENV, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r


def compose(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["podman-compose", "-p", PROJECT, "-f", str(COMPOSE), *args], env=ENV,
                          capture_output=True, text=True, timeout=timeout, cwd=COMPOSE.parent)


def container(service: str) -> str:
    r = podman("ps", "-a", "--format", "{{.Names}}", "--filter", f"label=com.docker.compose.project={PROJECT}",
               "--filter", f"label=com.docker.compose.service={service}")
    names = r.stdout.split()
    assert len(names) == 1, (service, names)
    return names[0]


def healthy(name: str) -> bool:
    return podman("healthcheck", "run", name, check=False, timeout=30).returncode == 0


def metrics(broker: int) -> dict:
    return scrape(f"http://127.0.0.1:{METRICS[broker]}/metrics")


def describe(admin, topic: str) -> dict:
    md = admin.list_topics(topic, timeout=10).topics[topic]
    assert md.error is None, md.error
    return {p: (pm.leader, list(pm.replicas), sorted(pm.isrs)) for p, pm in md.partitions.items()}


def produce(tag: str, n: int) -> list[tuple[int, int, bytes]]:
    from confluent_kafka import Producer
    acked, errors = [], []
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 60000})

    def done(err, msg):
        (errors.append(err) if err else acked.append((msg.partition(), msg.offset(), msg.value())))
    for i in range(n):
        p.produce("demo", key=b"%s-%d" % (tag.encode(), i), value=b"%s-%d" % (tag.encode(), i), on_delivery=done)
        p.poll(0)
    assert p.flush(90) == 0
    assert errors == []
    assert len(acked) == n
    return acked


def prometheus_query(q: str) -> list:
    url = "http://127.0.0.1:9090/api/v1/query?" + urllib.parse.urlencode({"query": q})
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
    except OSError:
        return []
    assert body["status"] == "success", body
    return body["data"]["result"]


def under_replicated() -> float:
    return sum(val(metrics(b), "kafka_server_replicamanager_underreplicatedpartitions") for b in BROKERS)


@pytest.fixture(scope="module")
def cluster():
    for tool in ("podman", "podman-compose"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not found: run scripts/container-images.sh (scripts/test.sh --container does)")
    for image in ("localhost/odradek:latest", "docker.io/library/zookeeper:3.8"):
        if podman("image", "exists", image, check=False).returncode != 0:
            pytest.fail(f"image {image} missing: run scripts/container-images.sh")
    busy = [p for p in [*BROKERS.values(), *METRICS.values(), 9090] if port_open("127.0.0.1", p)]
    if busy:
        pytest.fail(f"host ports {busy} are taken; the compose file publishes 9092-9094, 9404-9406 and 9090")
    compose("down", "-v")
    # podman-compose 1.0.x ignores profiles and health conditions: name the services, in order
    up = compose("up", "-d", "zookeeper", "broker-1", "broker-2", "broker-3", "prometheus")
    try:
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        names = {s: container(s) for s in ("zookeeper", "broker-1", "broker-2", "broker-3")}
        for s, name in names.items():
            wait_for(lambda: healthy(name), timeout=120, interval=2, what=f"{s}'s healthcheck")
        yield names
    finally:
        for s in ("broker-1", "broker-2", "broker-3", "zookeeper"):
            r = podman("ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}",
                       "--filter", f"label=com.docker.compose.service={s}", check=False)
            for cid in r.stdout.split():
                out = podman("logs", "--tail", "40", cid, check=False)
                print(f"--- {s} (last lines)\n{out.stdout}{out.stderr}")
        down = compose("down", "-v")
        assert down.returncode == 0, down.stderr[-2000:]


def test_compose_cluster(cluster):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    # one active controller among the three
    wait_for(lambda: sum(val(metrics(b), "kafka_controller_kafkacontroller_activecontrollercount")
                         for b in BROKERS) == 1, timeout=60, interval=1, what="one active controller")

    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    admin.create_topics([NewTopic("demo", num_partitions=6)])["demo"].result(30)
    parts = wait_for(lambda: (d := describe(admin, "demo")) and all(len(i) == 3 for _, _, i in d.values()) and d,
                     timeout=30, interval=0.5, what="demo fully in sync")
    assert all(len(r) == 3 for _, r, _ in parts.values())
    cfg = admin.describe_configs([ConfigResource("topic", "demo")])
    (entries,) = [f.result(10) for f in cfg.values()]
    assert entries["min.insync.replicas"].value == "2"

    acked = produce("first", 3000)

    # controlled shutdown of broker 1: SIGTERM reaches the broker through the entrypoint's exec
    b1 = cluster["broker-1"]
    podman("stop", "-t", "60", b1)
    logs = podman("logs", b1).stderr + podman("logs", b1).stdout
    assert "controlled shutdown succeeded" in logs, logs[-3000:]
    moved = describe(admin, "demo")
    assert all(leader != 1 and 1 not in isr for leader, _, isr in moved.values()), moved
    acked += produce("one-down", 1000)
    podman("start", b1)
    wait_for(lambda: healthy(b1), timeout=60, interval=1, what="broker 1 healthy again")
    wait_for(lambda: all(1 in isr for _, _, isr in describe(admin, "demo").values()), timeout=120, interval=1,
             what="broker 1 back in every ISR")

    # broker 2 killed: produce goes on with two in sync; it catches up after a restart
    b2 = cluster["broker-2"]
    podman("kill", "-s", "KILL", b2)
    acked += produce("killed", 1000)
    podman("start", b2)
    wait_for(lambda: all(2 in isr for _, _, isr in describe(admin, "demo").values()), timeout=120, interval=1,
             what="broker 2 back in every ISR")
    wait_for(lambda: under_replicated() == 0, timeout=60, interval=1, what="no under-replicated partitions")

    # preferred leaders back, from the host's tool
    r = subprocess.run([str(REPO / "bin" / "kafka-leader-election.sh"), "--bootstrap-server", "localhost:9092",
                        "--election-type", "preferred", "--topic", "demo", "--partition", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    subprocess.run([str(REPO / "bin" / "kafka-leader-election.sh"), "--bootstrap-server", "localhost:9093",
                    "--election-type", "preferred", "--all-topic-partitions"],
                   capture_output=True, text=True, timeout=60)
    wait_for(lambda: all(leader == replicas[0] for leader, replicas, _ in describe(admin, "demo").values()),
             timeout=30, interval=0.5, what="preferred leaders")

    # the tools inside a container, over the INTERNAL listener
    r = podman("exec", cluster["broker-3"], "kafka-topics.sh", "--bootstrap-server", "broker-3:19092",
               "--describe", "--topic", "demo")
    assert r.stdout.count("Partition:") == 6 and "ReplicationFactor: 3" in r.stdout, r.stdout

    # every acknowledged record, exactly once, in order per partition
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "compose-check", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("demo", p, 0) for p in range(6)])
    seen = []
    deadline = time.monotonic() + 90
    while len(seen) < len(acked) and time.monotonic() < deadline:
        for m in c.consume(500, timeout=1):
            assert m.error() is None, m.error()
            seen.append((m.partition(), m.offset(), m.value()))
    c.close()
    assert sorted(seen) == sorted(acked)
    # per partition, each producer's records in the order it sent them
    order: dict = {}
    for p, _, v in sorted(seen, key=lambda t: (t[0], t[1])):
        tag, i = v.decode().rsplit("-", 1)
        order.setdefault((p, tag), []).append(int(i))
    assert all(ix == sorted(ix) for ix in order.values())
    by_partition = {p: sum(1 for q, _, _ in seen if q == p) for p in range(6)}
    print(json.dumps({"records": len(seen), "partitions": by_partition}))

    # Prometheus (profile "monitoring") scrapes the three brokers: all up, one active controller
    def scraped():
        up = prometheus_query('up{job="odradek"}')
        ctl = prometheus_query("sum(kafka_controller_kafkacontroller_activecontrollercount)")
        return (len(up) == 3 and all(r["value"][1] == "1" for r in up) and ctl and ctl[0]["value"][1] == "1"
                and sorted(r["metric"]["instance"] for r in up))
    assert wait_for(scraped, timeout=90, interval=2, what="Prometheus scraping three brokers") == \
        ["broker-1:9404", "broker-2:9404", "broker-3:9404"]

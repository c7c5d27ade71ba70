"""Client quotas in a ZooKeeper cluster: a quota set through one broker lands in Kafka's layout
(/config/clients/<c>, /config/users/<u>[/clients/<c>] plus a /config/changes notification),
every broker applies it (a producer on another broker is throttled), a user's quota and SCRAM
credentials share /config/users/<u>, and a node written straight into ZooKeeper with a
notification (as ``kafka-configs.sh --zookeeper`` does) is picked up; a controller_mutation_rate
quota refuses kafka-python's topics past the bucket with THROTTLING_QUOTA_EXCEEDED."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cluster import Cluster

BIN = Path(__file__).resolve().parents[2] / "bin"
QUOTA = 20_000


def configs(c: Cluster, broker_id: int, *args):
    return subprocess.run([str(BIN / "kafka-configs.sh"), "--bootstrap-server", c.brokers[broker_id].bootstrap,
                           *args], capture_output=True, text=True, timeout=60)


def describe_lines(c, broker_id, *args):
    r = configs(c, broker_id, "--describe", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


@pytest.mark.slow     # ~30 s: the slow tier, to keep .ci/run's default tier well inside its limit
def test_quota_set_through_one_broker_applies_at_another(cluster_factory):
    ck = pytest.importorskip("confluent_kafka")
    c = cluster_factory(2, props={"quota.window.num": 2})
    r = configs(c, 1, "--alter", "--client", "zk-slow", "--add-config", f"producer_byte_rate={QUOTA}")
    assert r.returncode == 0, r.stderr
    assert c.get_json("/config/clients/zk-slow") == {"version": 1, "config": {"producer_byte_rate": str(QUOTA)}}
    changes = [c.get_json(f"/config/changes/{ch}") for ch in c.zk().get_children("/config/changes")]
    assert {"version": 2, "entity_path": "clients/zk-slow"} in changes
    want = [f"Quota configs for client-id 'zk-slow' are producer_byte_rate={float(QUOTA)}"]
    Cluster.wait_for(lambda: describe_lines(c, 2, "--client", "zk-slow") == want, 20, "quota visible at broker 2")
    # a topic led by broker 2 only: the throttle must come from broker 2's own quota view
    r = subprocess.run([str(BIN / "kafka-topics.sh"), "--bootstrap-server", c.brokers[1].bootstrap, "--create",
                        "--topic", "zkq", "--replica-assignment", "2"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    c.wait_for_leader("zkq", 0)
    throttles = []
    p = ck.Producer({"bootstrap.servers": c.brokers[2].bootstrap, "client.id": "zk-slow", "linger.ms": 5,
                     "queue.buffering.max.kbytes": 64,
                     "throttle_cb": lambda ev: throttles.append((ev.broker_id, ev.throttle_time))})
    acked = [0]

    def done(err, msg):
        if err is None:
            acked[0] += len(msg.value())
    p.produce("zkq", b"x" * 1000, callback=done)
    p.flush(20)
    acked[0] = 0
    start = time.monotonic()
    while time.monotonic() - start < 3.0:
        try:
            p.produce("zkq", b"x" * 1000, callback=done)
        except BufferError:
            p.poll(0.01)
            continue
        p.poll(0)
    rate = acked[0] / (time.monotonic() - start)
    p.purge(in_queue=True)
    p.flush(20)
    assert throttles and all(b == 2 for b, _ in throttles) and max(t for _, t in throttles) > 0, throttles
    assert rate < QUOTA * 2.5, rate


def test_user_quota_and_scram_share_the_user_node(cluster_factory):
    c = cluster_factory(2)
    r = configs(c, 1, "--alter", "--user", "dora", "--add-config", "SCRAM-SHA-256=[password=dora-secret]")
    assert r.returncode == 0, r.stderr
    r = configs(c, 2, "--alter", "--user", "dora", "--add-config", "consumer_byte_rate=4096")
    assert r.returncode == 0, r.stderr
    node = c.get_json("/config/users/dora")["config"]
    assert node["consumer_byte_rate"] == "4096" and node["SCRAM-SHA-256"].startswith("salt=")
    r = configs(c, 1, "--alter", "--user", "dora", "--client", "app", "--add-config", "request_percentage=25")
    assert r.returncode == 0, r.stderr
    assert c.get_json("/config/users/dora/clients/app") == {"version": 1, "config": {"request_percentage": "25.0"}}
    want = ["Quota configs for user-principal 'dora' are consumer_byte_rate=4096.0",
            "SCRAM credential configs for user-principal 'dora' are SCRAM-SHA-256=iterations=4096"]
    Cluster.wait_for(lambda: describe_lines(c, 1, "--user", "dora") == want, 20, "user quota + SCRAM at broker 1")
    # removing the quota keeps the credential
    r = configs(c, 1, "--alter", "--user", "dora", "--delete-config", "consumer_byte_rate")
    assert r.returncode == 0, r.stderr
    assert set(c.get_json("/config/users/dora")["config"]) == {"SCRAM-SHA-256"}
    Cluster.wait_for(lambda: describe_lines(c, 2, "--user", "dora") == want[1:], 20, "quota gone at broker 2")


def test_node_written_into_zookeeper_is_picked_up(cluster_factory):
    c = cluster_factory(2)
    zk = c.zk()
    zk.create("/config/clients/%3Cdefault%3E-not-default", json.dumps(
        {"version": 1, "config": {"producer_byte_rate": "1000"}}).encode(), makepath=True)
    zk.create("/config/users/<default>/clients/<default>", json.dumps(
        {"version": 1, "config": {"consumer_byte_rate": "2000"}}).encode(), makepath=True)
    for path in ("clients/%3Cdefault%3E-not-default", "users/<default>/clients/<default>"):
        zk.create("/config/changes/config_change_", json.dumps({"version": 2, "entity_path": path}).encode(),
                  sequence=True)
    want = ["Quota configs for the default user-principal, the default client-id are consumer_byte_rate=2000.0",
            "Quota configs for user-principal 'x', client-id 'y' are producer_byte_rate=3.0"]
    r = configs(c, 1, "--alter", "--user", "x", "--client", "y", "--add-config", "producer_byte_rate=3")
    assert r.returncode == 0, r.stderr
    for b in (1, 2):
        Cluster.wait_for(lambda b=b: describe_lines(c, b, "--entity-type", "users", "--entity-type", "clients") == want,
                         20, f"quotas at broker {b}")
        Cluster.wait_for(lambda b=b: describe_lines(c, b, "--entity-type", "clients") == [
            "Quota configs for client-id '<default>-not-default' are producer_byte_rate=1000.0"], 20, "client quota")


def test_mutation_quota_in_a_cluster(cluster_factory):
    """controller_mutation_rate set through broker 1 is stored in ZooKeeper and held by the
    broker kafka-python's admin sends CreateTopics (v7, strict) to: the topics after the bucket ran
    dry get THROTTLING_QUOTA_EXCEEDED and are not created."""
    kafka_admin = pytest.importorskip("kafka")
    c = cluster_factory(2, props={"controller.quota.window.num": 2})
    r = configs(c, 1, "--alter", "--client", "zk-mut", "--add-config", "controller_mutation_rate=2")
    assert r.returncode == 0, r.stderr
    assert c.get_json("/config/clients/zk-mut") == {"version": 1, "config": {"controller_mutation_rate": "2.0"}}
    want = ["Quota configs for client-id 'zk-mut' are controller_mutation_rate=2.0"]
    for b in (1, 2):
        Cluster.wait_for(lambda b=b: describe_lines(c, b, "--client", "zk-mut") == want, 20, f"quota at broker {b}")
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=c.brokers[2].bootstrap, client_id="zk-mut")
    try:
        names = [f"zk-mut-{i}" for i in range(8)]
        result = admin.create_topics({n: {"num_partitions": 1, "replication_factor": 2} for n in names},
                                     raise_errors=False)
    finally:
        admin.close()
    codes = {t["name"]: t["error_code"] for t in result["topics"]}
    admitted = [n for n in names if codes[n] == 0]
    assert admitted + [n for n in names if codes[n] == 89] == names, codes
    assert 5 <= len(admitted) <= 6, codes                  # bucket 2 x 2 = 4: 4 -> ... -> -1, then refused
    for n in admitted:
        c.wait_for_leader(n, 0)
    in_zk = set(c.zk().get_children("/brokers/topics"))
    assert set(admitted) <= in_zk and not in_zk & (set(names) - set(admitted))


def test_ip_connection_rate_quota_in_a_cluster(cluster_factory):
    """An IP quota set through broker 1 lands in /config/ips/<ip> with a change notification, as
    Kafka writes it; broker 2 applies it to the connections it accepts, and an IP node written
    straight into ZooKeeper (the default entity here) is picked up too."""
    from tests.support.rawkafka import RawConnection
    c = cluster_factory(2, props={"quota.window.num": 2, "quota.window.size.seconds": 1})
    r = configs(c, 1, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.1",
                "--add-config", "connection_creation_rate=2")
    assert r.returncode == 0, r.stderr
    assert c.get_json("/config/ips/127.0.0.1") == {"version": 1, "config": {"connection_creation_rate": "2"}}
    changes = [c.get_json(f"/config/changes/{ch}") for ch in c.zk().get_children("/config/changes")]
    assert {"version": 2, "entity_path": "ips/127.0.0.1"} in changes
    want = ["Quota configs for ip '127.0.0.1' are connection_creation_rate=2.0"]
    Cluster.wait_for(lambda: describe_lines(c, 2, "--ip", "127.0.0.1") == want, 20, "IP quota visible at broker 2")
    time.sleep(2.5)         # the tool's connections leave the windows
    b2 = c.brokers[2]
    conns = [RawConnection(b2.host, b2.port, timeout=3.0) for _ in range(8)]
    closed = 0
    for conn in conns:
        try:
            conn.metadata([], auto_create=False)
        except (OSError, ConnectionError):
            closed += 1
        finally:
            conn.close()
    assert closed >= 4, f"only {closed} of 8 connections over 2/s were closed by broker 2"
    time.sleep(2.5)
    zk = c.zk()
    zk.create("/config/ips/<default>", json.dumps({"version": 1, "config": {"connection_creation_rate": "7"}})
              .encode(), makepath=True)
    zk.create("/config/changes/config_change_", json.dumps({"version": 2, "entity_path": "ips/<default>"})
              .encode(), sequence=True)
    Cluster.wait_for(lambda: describe_lines(c, 2, "--ip-defaults") == [
        "Quota configs for the default ip are connection_creation_rate=7.0"], 20, "default IP quota at broker 2")


def test_quota_callback_hears_quotas_and_leaders_on_every_broker(cluster_factory, tmp_path):
    """client.quota.callback.class in ZooKeeper mode: a quota set through broker 1 reaches both
    brokers' callbacks (update_quota, through the change notification), and each callback's
    update_cluster_metadata sees a topic led by broker 2 (tests/integration/quota_callbacks.py)."""
    record = tmp_path / "calls.jsonl"
    c = cluster_factory(2, props={"client.quota.callback.class": "tests.integration.quota_callbacks.TeamQuotas",
                                  "odradek.test.quota.record": str(record)})

    def calls(kind):
        lines = record.read_text().splitlines() if record.exists() else []
        return [r for r in map(json.loads, lines) if r["kind"] == kind]
    assert {r["broker"] for r in calls("configure")} == {1, 2}
    r = configs(c, 1, "--alter", "--client", "team", "--add-config", f"producer_byte_rate={QUOTA}")
    assert r.returncode == 0, r.stderr
    Cluster.wait_for(lambda: {r["broker"] for r in calls("update")
                              if r["entity"] == [["CLIENT_ID", "team"]] and r["value"] == QUOTA} == {1, 2},
                     20, "both callbacks told of the quota")
    r = subprocess.run([str(BIN / "kafka-topics.sh"), "--bootstrap-server", c.brokers[1].bootstrap, "--create",
                        "--topic", "cbq", "--replica-assignment", "2"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    c.wait_for_leader("cbq", 0)
    Cluster.wait_for(lambda: {r["broker"] for r in calls("cluster") if r["leaders"].get("cbq-0") == 2} == {1, 2},
                     20, "both callbacks seeing the new topic's leader")

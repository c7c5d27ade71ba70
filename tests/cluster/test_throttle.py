"""Replication throttles (broker/quota.py) on a real 4-broker cluster: a reassignment run with
``kafka-reassign-partitions.sh --throttle`` copies the moving partition no faster than the rate,
a partition that is not throttled replicates at full speed meanwhile (over the same fetcher),
and once ``--verify`` has removed the throttles a new move runs at full speed.

A behaviour test, not a benchmark: the bounds are generous (the throttled copy must take at
least half of bytes/rate; the unthrottled ones a quarter of it at most)."""
from __future__ import annotations

import json
import time

import pytest

from tests.support.net import free_port

from .test_cluster_metrics import scrape
from .test_cluster_tools import tool, write_json

pytestmark = pytest.mark.cluster

RATE = 100_000                  # bytes/s, leader and follower
SIZE = 2_000_000                # bytes in the moving partition
CHUNK = 65536                   # replica.fetch.max.bytes: how much one fetch may overshoot


def replica_bytes(c, broker: int, topic: str, partition: int) -> int:
    d = c.brokers[broker].log_dir / f"{topic}-{partition}"
    if not d.is_dir():
        return 0
    return sum(f.stat().st_size for f in d.glob("*.log"))


def produce(bootstrap: str, topic: str, partition: int, nbytes: int, value_size: int = 10_000) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "batch.size": 16384, "compression.type": "none"})
    errors = []
    value = b"x" * value_size
    for _ in range(nbytes // value_size):
        while True:
            try:
                p.produce(topic, value, partition=partition,
                          on_delivery=lambda err, _m: err is not None and errors.append(err))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors


def wait_copied(c, topic, partition, leader, follower, timeout, interval=0.1) -> float:
    """Seconds until ``follower``'s copy has as many bytes as ``leader``'s."""
    t0 = time.monotonic()
    want = replica_bytes(c, leader, topic, partition)
    assert want > 0
    c.wait_for(lambda: replica_bytes(c, follower, topic, partition) >= want, timeout,
               f"{topic}-{partition} on broker {follower} to reach {want} bytes", interval=interval)
    return time.monotonic() - t0


def verify(c, plan):
    def done():
        v = tool("kafka-reassign-partitions", "--bootstrap-server", c.bootstrap, "--verify",
                 "--reassignment-json-file", plan)
        assert v.rc == 0, v
        return v if "still in progress" not in v.out else None
    return c.wait_for(done, 60, "verify to report completion", interval=0.5)


@pytest.mark.slow     # ~30 s: the slow tier, to keep .ci/run's default tier well inside its limit
def test_throttled_reassignment_runs_at_the_rate_and_others_do_not(cluster_factory, tmp_path):
    c = cluster_factory(4, props={"replica.fetch.max.bytes": CHUNK}, start=False)
    ports = {}
    for i in (1, 4):
        ports[i] = free_port()
        c.brokers[i].props["odradek.metrics.prometheus.port"] = str(ports[i])
        c.brokers[i].props["odradek.metrics.prometheus.host"] = "127.0.0.1"
    c.start()
    bs = c.bootstrap
    c.create_topic("slow", assignment={0: [1, 2, 3]})
    c.create_topic("busy", assignment={0: [1, 4, 2]})      # follower 4 fetches it from 1 too
    c.wait_for_leader("slow", 0)
    c.wait_for_leader("busy", 0)
    produce(bs, "slow", 0, SIZE)
    size = replica_bytes(c, 1, "slow", 0)
    assert size >= SIZE

    plan = write_json(tmp_path, "plan.json", {"version": 1, "partitions": [
        {"topic": "slow", "partition": 0, "replicas": [1, 2, 4]}]})
    t0 = time.monotonic()
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
             "--reassignment-json-file", plan, "--throttle", RATE)
    assert r.rc == 0, r
    assert f"The inter-broker throttle limit was set to {RATE} B/s" in r.lines, r
    cfg = c.get_json("/config/topics/slow")["config"]
    assert cfg["follower.replication.throttled.replicas"] == "0:4"

    # meanwhile an unthrottled partition, fetched by broker 4 from broker 1 over the same
    # fetcher, keeps up at full speed
    c.wait_for(lambda: replica_bytes(c, 4, "slow", 0) > 0, 20, "the move to start")
    t_busy = time.monotonic()
    produce(bs, "busy", 0, 1_000_000)      # acks=all: broker 4 is in its ISR
    wait_copied(c, "busy", 0, 1, 4, 30)
    busy = time.monotonic() - t_busy
    assert busy < 0.25 * 1_000_000 / RATE, busy
    moved = replica_bytes(c, 4, "slow", 0)
    elapsed = time.monotonic() - t0
    assert moved < size, "the throttled copy finished already"
    assert moved <= RATE * elapsed * 2 + 4 * CHUNK, (moved, elapsed)
    # the throttled bytes show in the quota rates (kafka.server:type=Leader/FollowerReplication)
    follower = scrape(ports[4])["kafka_server_followerreplication_byte_rate"]
    leader = scrape(ports[1])["kafka_server_leaderreplication_byte_rate"]
    assert 0 < follower <= 2 * RATE + CHUNK, follower
    assert 0 < leader <= 2 * RATE + CHUNK, leader

    wait_copied(c, "slow", 0, 1, 4, 60, interval=0.2)
    took = time.monotonic() - t0
    assert took >= 0.5 * size / RATE, (took, size)
    v = verify(c, plan)
    assert "Reassignment of partition slow-0 is completed." in v.lines, v
    assert "Clearing topic-level throttles on topic slow" in v.lines, v
    assert not any("throttled" in k for k in c.get_json("/config/topics/slow")["config"])
    for b in (1, 2, 3, 4):
        assert not any("throttled" in k for k in c.get_json(f"/config/brokers/{b}")["config"])

    # throttles gone: moving the partition back to broker 3 (its copy was deleted) is fast,
    # although broker 1 still leads it and just sent the whole partition under its quota
    back = write_json(tmp_path, "back.json", {"version": 1, "partitions": [
        {"topic": "slow", "partition": 0, "replicas": [1, 2, 3]}]})
    c.wait_for(lambda: replica_bytes(c, 3, "slow", 0) == 0, 30, "broker 3 to delete its copy")
    t1 = time.monotonic()
    r = tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
             "--reassignment-json-file", back)
    assert r.rc == 0, r
    c.wait_for(lambda: replica_bytes(c, 3, "slow", 0) > 0, 20, "the move back to start")
    wait_copied(c, "slow", 0, 1, 3, 30)
    fast = time.monotonic() - t1
    assert fast < 0.25 * size / RATE, (fast, took)
    verify(c, back)
    print(json.dumps({"throttled_s": round(took, 2), "ideal_s": round(size / RATE, 2),
                      "unthrottled_s": round(fast, 2), "busy_s": round(busy, 2)}))

"""Metrics of a three-broker ZooKeeper cluster (broker/metrics.py): exactly one active
controller, leaders and partitions add up, replication bytes flow, and killing a broker shows
as ISR shrinks and under-replicated partitions on the surviving leaders."""
from __future__ import annotations

import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.support.metrics import expose

RM = "kafka_server_replicamanager_"
KC = "kafka_controller_kafkacontroller_"


def scrape(port: int) -> dict[str, float]:
    """Unlabelled samples only: {name: value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {s.name: s.value for fam in text_string_to_metric_families(text)
            for s in fam.samples if not s.labels}


def wait_until(cond, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_cluster_metrics(cluster_factory):
    c = cluster_factory(3, start=False)
    ports = expose(c.brokers)
    c.start()
    c.create_topic("m", partitions=6, rf=3)
    for p in range(6):
        c.wait_for_isr("m", p, [1, 2, 3])

    def all_scrapes(ids=(1, 2, 3)):
        return {i: scrape(ports[i]) for i in ids}

    def steady():
        s = all_scrapes()
        if sum(x[KC + "activecontrollercount"] for x in s.values()) != 1:
            return None
        if any(x[RM + "underreplicatedpartitions"] for x in s.values()):
            return None
        # The controller writes a new partition's state with the full ISR before its
        # LeaderAndIsr reaches the brokers, so wait_for_isr can return before every broker
        # has taken up its replicas: wait until every partition is hosted and led.
        total = max(x[KC + "globalpartitioncount"] for x in s.values())
        if sum(x[RM + "leadercount"] for x in s.values()) != total:
            return None
        if sum(x[RM + "partitioncount"] for x in s.values()) != 3 * total:
            return None
        return s
    s = wait_until(steady, what="one active controller, every partition led and hosted by its three "
                                "replicas, and no under-replicated partitions")
    ctrl = next(i for i, x in s.items() if x[KC + "activecontrollercount"] == 1)
    assert ctrl == c.controller_id()
    for i, x in s.items():
        if i != ctrl:       # controller gauges are reported by the active controller only
            assert x[KC + "globalpartitioncount"] == 0
    assert s[ctrl][KC + "offlinepartitionscount"] == 0
    assert s[ctrl][KC + "globalpartitioncount"] >= 6
    # (steady() waited until the leader and partition counts add up to the controller's count)

    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(600):
        p.produce("m", value=b"x" * 200, partition=i % 6)
    assert p.flush(60) == 0

    def replicated():
        s = all_scrapes()
        out = sum(x["kafka_server_brokertopicmetrics_replicationbytesout_total"] for x in s.values())
        inn = sum(x["kafka_server_brokertopicmetrics_replicationbytesin_total"] for x in s.values())
        return s if out > 0 and inn > 0 else None
    wait_until(replicated, what="replication bytes in and out")
    # nothing is throttled: the replication quota rates are there, at zero
    for x in all_scrapes().values():
        assert x["kafka_server_leaderreplication_byte_rate"] == 0
        assert x["kafka_server_followerreplication_byte_rate"] == 0

    # every follower replica is fetched through a fetch session with its leader (KIP-227)
    FS = "kafka_server_fetchsessioncache_"

    def in_sessions():
        s = all_scrapes()
        followers = sum(x[RM + "partitioncount"] - x[RM + "leadercount"] for x in s.values())
        cached = sum(x[FS + "numincrementalfetchpartitionscached"] for x in s.values())
        sessions = sum(x[FS + "numincrementalfetchsessions"] for x in s.values())
        return (followers, cached, sessions) if cached == followers else None
    followers, cached, sessions = wait_until(in_sessions, what="follower fetch sessions")
    assert followers >= 12 and 2 <= sessions <= 6, (followers, sessions)

    victim = next(i for i in (1, 2, 3) if i != ctrl)
    shrinks_before = {i: x[RM + "isrshrinks_total"] for i, x in all_scrapes().items()}
    c.kill(victim)
    survivors = [i for i in (1, 2, 3) if i != victim]

    def degraded():
        s = all_scrapes(survivors)
        under = sum(x[RM + "underreplicatedpartitions"] for x in s.values())
        shrinks = sum(x[RM + "isrshrinks_total"] - shrinks_before[i] for i, x in s.items())
        return s if under >= 6 and shrinks >= 1 else None
    s = wait_until(degraded, 90, "ISR shrinks and under-replicated partitions after a kill")
    assert sum(x[KC + "activecontrollercount"] for x in s.values()) == 1
    # per partition (kafka.cluster:type=Partition): each of "m"'s partitions is under-replicated
    # on its leader, with an ISR of two of three replicas; a follower reports 0 for both counts
    from tests.support.metrics import scrape as scrape_labelled
    from tests.support.metrics import val
    P = "kafka_cluster_partition_"
    per = {i: scrape_labelled(f"http://127.0.0.1:{ports[i]}/metrics") for i in survivors}
    for part in range(6):
        leader = c.leader("m", part)
        assert leader in survivors
        lm = per[leader]
        got = [val(lm, P + k, topic="m", partition=str(part))
               for k in ("underreplicated", "insyncreplicascount", "replicascount", "underminisr", "atminisr")]
        assert got == [1, 2, 3, 0, 1], (part, leader, got)           # min.insync.replicas 2
        follower = next(i for i in survivors if i != leader)
        assert val(per[follower], P + "replicascount", topic="m", partition=str(part)) == 0
        assert val(per[follower], "kafka_log_log_logendoffset", topic="m", partition=str(part)) == \
            val(lm, "kafka_log_log_logendoffset", topic="m", partition=str(part)) == 100
    # all of "m" is led by the two survivors; nothing offline (2 replicas left of 3)
    assert s[ctrl][KC + "offlinepartitionscount"] == 0

    c.start_broker(victim)
    expands_before = {i: x[RM + "isrexpands_total"] for i, x in s.items()}

    def healed():
        s = all_scrapes()
        if any(x[RM + "underreplicatedpartitions"] for x in s.values()):
            return None
        return s if sum(s[i][RM + "isrexpands_total"] - expands_before[i] for i in survivors) >= 1 else None
    wait_until(healed, 90, "ISR expands and no under-replicated partitions after the restart")

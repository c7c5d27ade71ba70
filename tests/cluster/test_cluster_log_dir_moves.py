"""AlterReplicaLogDirs in a two-broker ZooKeeper cluster: the leader's and the follower's
replicas move to their brokers' other log dirs while an idempotent acks=all producer writes;
the follower keeps replicating into its new copy (the ISR stays whole), and after the leader is
killed the moved follower leads with every acknowledged record."""
from __future__ import annotations

import time

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import NoError

from tests.cluster.workload import NumberedProducer, check_no_loss, read_all

pytestmark = pytest.mark.cluster


def _dirs_of(admin, broker, topic):
    """{partition: (current dir, future dir or None)} on ``broker``."""
    (entry,) = admin.describe_log_dirs(topic_partitions=[topic], brokers=[broker])
    out = {}
    for d in entry["log_dirs"]:
        for t in d["topics"]:
            if t["name"] == topic:
                for p in t["partitions"]:
                    cur, fut = out.get(p["partition_index"], (None, None))
                    if p["is_future_key"]:
                        fut = d["log_dir"]
                    else:
                        cur = d["log_dir"]
                    out[p["partition_index"]] = (cur, fut)
    return out


def test_replicas_move_between_log_dirs_under_acks_all(cluster_factory):
    c = cluster_factory(2, start=False)
    dirs = {}
    for i, b in c.brokers.items():
        dirs[i] = [str(b.workdir / "d1"), str(b.workdir / "d2")]
        b.overrides["log.dirs"] = ",".join(dirs[i])
    c.start()
    topic = "moving"
    c.create_topic(topic, partitions=1, rf=2, configs={"min.insync.replicas": "1"})   # acks=all after a kill
    leader = c.wait_for_leader(topic, 0)
    follower = 3 - leader
    c.wait_for_isr(topic, 0, [1, 2])
    prod = NumberedProducer(c.bootstrap, topic, 1).start()
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=15000)
    try:
        prod.wait_acked(1000, 60)
        targets = {}
        for b in (follower, leader):
            (cur, _), = _dirs_of(admin, b, topic).values()
            targets[b] = next(d for d in dirs[b] if d != cur)
        res = admin.alter_replica_log_dirs({(topic, 0, b): d for b, d in targets.items()})
        assert set(res.values()) == {NoError}

        def moved():
            return all(_dirs_of(admin, b, topic).get(0) == (d, None) for b, d in targets.items())
        c.wait_for(moved, 60, "both replicas in their new log dirs", interval=0.2)
        prod.wait_acked(500, 60)                # replication goes on into the new copies
        assert sorted(c.isr(topic, 0)) == [1, 2]
        c.kill(leader)
        assert c.wait_for_leader(topic, 0, not_in=[leader]) == follower
        prod.wait_acked(300, 90)                # acks=all from the moved follower, now leader
    finally:
        prod.stop()
        admin.close()
    assert not prod.failed, prod.failed[:5]
    log = read_all(c.bootstrap_of([follower]), topic, 1)
    report = check_no_loss(prod.acked, log)
    assert report["n_problems"] == 0 and report["acked"] > 1800, report
    c.start_broker(leader)
    c.wait_for_isr(topic, 0, [1, 2])
    time.sleep(0.5)
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
    try:
        assert _dirs_of(admin, leader, topic)[0] == (targets[leader], None)
    finally:
        admin.close()

"""Online group migration on a ZooKeeper cluster: a mixed group (a classic member and a
consumer-protocol member, both confluent-kafka) keeps reading and committing while its
coordinator is shut down and started again.  The coordinator that takes over rebuilds the group
from ``__consumer_offsets``, classic member included (its ClassicMemberMetadata), so neither
member joins again; nothing acknowledged is lost and nothing below the commits was skipped."""
from __future__ import annotations

import re
import time
from collections import defaultdict

import pytest

from broker.group.hashing import partition_for
from tests.cluster.workload import GroupReader, NumberedProducer, check_group, check_no_loss, read_all

pytestmark = pytest.mark.cluster

PROPS = {"group.consumer.heartbeat.interval.ms": 500, "group.consumer.min.heartbeat.interval.ms": 500,
         "group.consumer.session.timeout.ms": 6000, "group.consumer.min.session.timeout.ms": 6000,
         "offsets.topic.num.partitions": 6}


class _Both:
    """What check_group needs of the two readers together."""

    def __init__(self, a: GroupReader, b: GroupReader):
        self.seen = defaultdict(dict)
        for r in (a, b):
            for p, offs in r.seen.items():
                self.seen[p].update(offs)
        self.committed = a.committed


def _joins(cluster, group, how=""):
    return sum(b.log_text().count(f"joined consumer group {group}{how}") for b in cluster.brokers.values())


def test_mixed_group_survives_a_coordinator_move(cluster_factory):
    cluster = cluster_factory(3, props=PROPS)
    topic, group = "mixed", "mixed-group"
    cluster.create_topic(topic, partitions=4, rf=3)
    prod = NumberedProducer(cluster.bootstrap, topic, 4).start()
    classic = GroupReader(cluster.bootstrap, topic, group).start()
    modern = None
    try:
        prod.wait_acked(100, 60)
        deadline = time.monotonic() + 60
        while len(classic.seen) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(classic.seen) == 4, "the classic member does not read every partition"
        modern = GroupReader(cluster.bootstrap, topic, group, protocol="consumer").start()
        deadline = time.monotonic() + 60
        while not modern.seen and time.monotonic() < deadline:
            time.sleep(0.2)
        assert modern.seen, "the consumer-protocol member never read"
        assert _joins(cluster, group, " with the classic protocol") == 0     # upgraded, not rejoined

        coordinator = cluster.leader("__consumer_offsets", partition_for(group, 6))
        assert cluster.stop(coordinator) == 0
        cluster.start_broker(coordinator)
        cluster.wait_for_isr("__consumer_offsets", partition_for(group, 6), [1, 2, 3], timeout=90)
        prod.wait_acked(200, 60)
        before = (sum(map(len, classic.seen.values())), sum(map(len, modern.seen.values())))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (sum(map(len, classic.seen.values())) > before[0]
                                                   and sum(map(len, modern.seen.values())) > before[1]):
            time.sleep(0.2)
        assert sum(map(len, classic.seen.values())) > before[0], "the classic member stopped reading"
        assert sum(map(len, modern.seen.values())) > before[1], "the consumer-protocol member stopped reading"
    finally:
        prod.stop()
        time.sleep(2)
        if modern is not None:
            modern.stop()
        classic.stop()
    log = read_all(cluster.bootstrap, topic, 4)
    res = check_no_loss(prod.acked, log)
    assert res["n_problems"] == 0, res
    assert check_group(_Both(classic, modern), log, 4) == []
    # the group's records moved with the coordinator: each member joined once
    assert _joins(cluster, group, " (instance") == 1
    assert _joins(cluster, group, " with the classic protocol") == 0
    assert sum("upgraded to a consumer group" in b.log_text() for b in cluster.brokers.values()) == 1
    # another broker took the group over with its classic member
    taken_over = [i for i, b in cluster.brokers.items() if i != coordinator and
                  re.search(rf"loaded consumer group {group} at epoch \d+: 2 members \(1 classic\)", b.log_text())]
    assert taken_over, "no other broker loaded the mixed group"

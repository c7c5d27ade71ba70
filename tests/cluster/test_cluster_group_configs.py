"""KIP-848 group configs in a ZooKeeper cluster (the single-broker test is
tests/integration/test_group_configs.py)."""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode as E
from tests.integration.test_consumer_protocol import heartbeat
from tests.integration.test_group_configs import PROPS, configs_tool
from tests.integration.test_groups import WAIT, unique
from tests.support.net import wait_for
from tests.support.rawkafka import RawConnection

pytestmark = pytest.mark.cluster


def test_group_configs_reach_the_coordinator_in_a_cluster(cluster_factory):
    """Written through one broker (/config/groups/<group> and a change notification), used by the
    group's coordinator, whichever broker that is."""
    from protocol.messages import FindCoordinatorRequest
    c = cluster_factory(2, props={**PROPS, "offsets.topic.replication.factor": 2,
                                  "transaction.state.log.replication.factor": 2, "min.insync.replicas": 1})
    topic = unique("gcc")
    c.create_topic(topic, partitions=2, rf=2)
    groups = [unique("g") for _ in range(6)]          # some of them land on each coordinator
    for g in groups:
        r = configs_tool(c.brokers[1], "--entity-type", "groups", "--entity-name", g, "--alter", "--add-config",
                         "consumer.heartbeat.interval.ms=400")
        assert r.returncode == 0, r.stdout + r.stderr
    coordinators = set()
    for g in groups:
        b1 = c.brokers[1]

        def coordinator():
            with RawConnection(b1.host, b1.port) as conn:
                r = conn.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[g])).coordinators[0]
                return (r.host, r.port) if r.error_code == E.NONE else None
        host, port = wait_for(coordinator, WAIT, what=f"the coordinator of {g}")
        coordinators.add(port)

        def interval():
            with RawConnection(host, port) as conn:
                r = conn.request(68, 1, heartbeat(g, "x" * 22, 0, [topic]))
                return r.heartbeat_interval_ms if r.error_code == E.NONE else None
        assert wait_for(lambda: interval() == 400, 15, what=f"{g}'s heartbeat interval")
    print(f"coordinators used: {sorted(coordinators)}")

"""The request fuzz of tests/integration/test_request_fuzz.py against a two-broker ZooKeeper
cluster, sent to the controller: the cluster-mode paths (the ZooKeeper controller's topic,
partition, reassignment and election handling, the inter-broker APIs a client may forge).
Each request gets an answer, no answer or a closed connection, never an exception out of a
handler, and both brokers keep running and answering.  Forged controller requests
(LeaderAndIsr, StopReplica...) may change what a broker hosts, as they may in Kafka without an
authorizer; this module checks only that nothing breaks."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from tests.integration.test_request_fuzz import (EVERY_API, FUZZ_SETTINGS, _exchange, _handler_errors,
                                                 draw_frame)
from tests.support.cluster import Cluster
from tests.support.rawkafka import RawConnection

TOPIC = "fuzzed"


@pytest.fixture(scope="module")
def fuzz_cluster(tmp_path_factory, zookeeper):
    c = Cluster(tmp_path_factory.mktemp("fuzz-cluster"), zookeeper, 2, props={
        "num.partitions": 2, "default.replication.factor": 2, "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 2, "transaction.state.log.replication.factor": 2,
        "transaction.state.log.min.isr": 1})
    try:
        c.start()
        c.wait_for(lambda: c.controller_id() in c.brokers, 60, "a controller")
        with RawConnection(c.brokers[1].host, c.brokers[1].port) as conn:
            c.wait_for(lambda: conn.metadata([TOPIC]).topics[0].error_code == 0, 60, "the topic")
        yield c
    finally:
        c.shutdown()


@EVERY_API
@FUZZ_SETTINGS
@given(data=st.data())
def test_random_requests_to_the_controller(fuzz_cluster, key, lo, hi, data):
    c = fuzz_cluster
    target = c.brokers.get(c.controller_id()) or c.brokers[1]
    frame = draw_frame(data, key, lo, hi)
    seen = {i: len(b.log_text()) for i, b in c.brokers.items()}
    _exchange(target, frame)
    for i, b in c.brokers.items():
        assert b.alive, b.log_tail(40)
        assert _handler_errors(b, seen[i]) == [], b.log_tail(80)


@pytest.mark.parametrize("name", ["", f"{TOPIC}/partitions", "absent"])
def test_create_partitions_of_a_name_that_is_no_topic(fuzz_cluster, name):
    """The fuzz's first cluster finding: CreatePartitions for "" read the /brokers/topics node
    itself and raised.  A name that is no topic (a path, or no name) is UNKNOWN_TOPIC_OR_PARTITION,
    as for any absent topic, and the connection stays open."""
    from protocol.messages import CreatePartitionsRequest as C
    c = fuzz_cluster
    target = c.brokers.get(c.controller_id()) or c.brokers[1]
    with RawConnection(target.host, target.port) as conn:
        resp = conn.request(37, 3, C(topics=[C.CreatePartitionsTopic(name=name, count=3, assignments=None)],
                                     timeout_ms=5000, validate_only=False))
        assert [(r.name, r.error_code) for r in resp.results] == [(name, 3)]
        assert conn.metadata([TOPIC], auto_create=False).topics[0].error_code == 0


def test_both_brokers_still_answer(fuzz_cluster):
    for b in fuzz_cluster.brokers.values():
        assert b.alive
        with RawConnection(b.host, b.port) as conn:
            md = conn.metadata(None)
        assert {x.node_id for x in md.brokers} <= set(fuzz_cluster.brokers)
        assert _handler_errors(b) == [], b.log_tail(80)

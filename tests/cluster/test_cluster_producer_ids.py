"""AllocateProducerIds (67) in ZooKeeper mode, as Kafka 3.9's controller answers it: a live broker
at its current epoch (the czxid of its /brokers/ids node) gets the next block of
/latest_producer_id_block; a stale epoch STALE_BROKER_EPOCH, an unregistered broker
BROKER_ID_NOT_REGISTERED, any broker but the controller NOT_CONTROLLER.  The blocks the brokers
take for themselves (an idempotent producer's InitProducerId) come from the same node, so no id
is handed out twice."""
from __future__ import annotations

import json

import pytest

from protocol.messages import AllocateProducerIdsRequest
from tests.support.cluster import Cluster
from tests.support.rawkafka import RawConnection, send_once

pytestmark = pytest.mark.cluster

NOT_CONTROLLER, STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED = 41, 77, 102


def allocate(b, broker_id, epoch):
    r = send_once(b.bootstrap, AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=epoch), 0)
    return r.error_code, r.producer_id_start, r.producer_id_len


def test_allocate_producer_ids(cluster_factory):
    c: Cluster = cluster_factory(2)
    zk = c.zk()
    ctrl = c.controller_id()
    other = next(i for i in c.brokers if i != ctrl)

    def serves(b):
        # a broker answers clients once the controller's first UpdateMetadata arrived; before that
        # a request waits (once, in CI, past this test's 10 s: the NOT_CONTROLLER check timed out)
        with RawConnection(b.host, b.port) as conn:
            return len(conn.metadata([]).brokers) == 2
    for b in c.brokers.values():
        c.wait_for(lambda b=b: serves(b), 60, "the broker to serve clients")
    epoch = {i: zk.exists(f"/brokers/ids/{i}").czxid for i in c.brokers}
    before = json.loads(zk.get("/latest_producer_id_block")[0] or b"null")
    first = allocate(c.brokers[ctrl], other, epoch[other])
    assert first[0] == 0 and first[2] == 1000
    assert first[1] == (0 if before is None else int(before["block_end"]) + 1)
    node = json.loads(zk.get("/latest_producer_id_block")[0])
    assert node == {"version": 1, "broker": other, "block_start": str(first[1]),
                    "block_end": str(first[1] + 999)}
    second = allocate(c.brokers[ctrl], ctrl, epoch[ctrl])
    assert second == (0, first[1] + 1000, 1000)
    assert allocate(c.brokers[ctrl], other, epoch[other] - 1) == (STALE_BROKER_EPOCH, 0, 0)
    assert allocate(c.brokers[ctrl], 7, 1) == (BROKER_ID_NOT_REGISTERED, 0, 0)
    assert allocate(c.brokers[other], other, epoch[other]) == (NOT_CONTROLLER, 0, 0)

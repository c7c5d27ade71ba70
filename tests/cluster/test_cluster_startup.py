"""A broker that restarts before ZooKeeper has expired its previous session waits (up to 1.5 ×
the session timeout) for the old /brokers/ids node to go; its listeners are already open so the
controller can reach it, but client requests are held until it has registered (Kafka enables
request processing last) and for the controller's first UpdateMetadata, so no client is told in
the meantime that the cluster has no topics."""
from __future__ import annotations

import time

import pytest

from tests.support.rawkafka import RawConnection

pytestmark = pytest.mark.cluster


def test_client_requests_wait_for_a_restarted_broker_to_register(cluster_factory):
    c = cluster_factory(3)
    c.create_topic("held", partitions=3, rf=3)
    c.kill(2)
    b = c.brokers[2]
    b.start()                      # ready = ApiVersions answered; the old session's node is still there
    t0 = time.monotonic()
    with RawConnection(b.host, b.port, timeout=30) as conn:
        md = conn.metadata(None, auto_create=False)
        waited = time.monotonic() - t0
    # answered only once the broker had registered again (a new ephemeral node) and had the
    # controller's picture: every topic, every partition, every broker
    assert c.get_json("/brokers/ids/2") is not None and 2 in c.registered()
    names = {t.name for t in md.topics}
    assert "held" in names, (names, waited)
    held = next(t for t in md.topics if t.name == "held")
    assert held.error_code == 0 and len(held.partitions) == 3
    assert {x.node_id for x in md.brokers} == set(c.brokers), md.brokers

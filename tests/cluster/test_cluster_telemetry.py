"""KIP-714 telemetry across a ZooKeeper cluster: a client that got its subscription from one
broker may push to another (both compute the same subscription id for its instance), and a
subscription changed through one broker makes the other refuse the stale id, so the client asks
again there and gets the new metrics (single broker: tests/integration/test_client_telemetry.py)."""
from __future__ import annotations

import uuid

import pytest

from protocol.messages import GetTelemetrySubscriptionsRequest as G, PushTelemetryRequest as P
from tests.integration.test_client_telemetry import lines, subscribe
from tests.support.rawkafka import RawConnection

pytestmark = pytest.mark.cluster
pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")

RECEIVER = "tests.integration.telemetry_receivers.RecordingTelemetry"


def get(b, iid=uuid.UUID(int=0)):
    with RawConnection(b.host, b.port, client_id="fleet-app") as c:
        return c.request(71, 0, G(client_instance_id=iid))


def push(b, iid, sid):
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
    body = pb.MetricsData(resource_metrics=[pb.ResourceMetrics(scope_metrics=[pb.ScopeMetrics(metrics=[
        pb.Metric(name="org.apache.kafka.producer.x", gauge=pb.Gauge(data_points=[pb.NumberDataPoint(as_double=1)]))])])])
    with RawConnection(b.host, b.port, client_id="fleet-app") as c:
        return c.request(72, 0, P(client_instance_id=iid, subscription_id=sid, terminating=False, compression_type=0,
                                  metrics=body.SerializeToString())).error_code


def test_a_client_may_push_to_any_broker(cluster_factory, tmp_path):
    record = tmp_path / "pushes.jsonl"
    c = cluster_factory(2, props={"metric.reporters": RECEIVER, "odradek.test.telemetry.record": str(record)})
    b1, b2 = c.brokers[1], c.brokers[2]
    subscribe(b1, "fleet", metrics="org.apache.kafka.producer.", interval_ms="100", match="client_id=fleet-.*")
    c.wait_for(lambda: get(b2).requested_metrics == ["org.apache.kafka.producer."], 15,
               what="broker 2 to know the subscription")
    r = get(b1)
    iid, sid = r.client_instance_id, r.subscription_id
    assert push(b2, iid, sid) == 0              # broker 2 never saw this instance
    assert [p["client_instance_id"] for p in lines(record)] == [str(iid)]

    # a change through broker 1: broker 2 refuses the old id, then answers the new subscription
    subscribe(b1, "fleet", metrics="org.apache.kafka.producer.,org.apache.kafka.consumer.", interval_ms="100",
              match="client_id=fleet-.*")

    def refused():
        return push(b2, iid, sid) == 117        # UNKNOWN_SUBSCRIPTION_ID
    c.wait_for(refused, 15, interval=0.15, what="broker 2 to refuse the stale subscription id")
    r2 = get(b2, iid)
    assert r2.error_code == 0 and r2.client_instance_id == iid and r2.subscription_id != sid
    assert sorted(r2.requested_metrics) == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    assert push(b1, iid, r2.subscription_id) == 0

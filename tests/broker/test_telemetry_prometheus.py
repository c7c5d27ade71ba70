"""The Prometheus telemetry receiver (broker/telemetry_prometheus.py) on OTLP payloads built with
the opentelemetry-proto classes: gauges keep their last value, delta sums add up, cumulative
sums replace, labels come from the broker and the attributes, histograms are skipped, a
terminating push or silence drops the instance, and the broker's families serve them."""
from __future__ import annotations

import types
import uuid

import pytest

pb = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
from opentelemetry.proto.common.v1 import common_pb2  # noqa: E402

from broker.client_metrics import TelemetryPayload  # noqa: E402
from broker.metrics import _client_metric_families  # noqa: E402
from broker.telemetry_prometheus import PrometheusTelemetry, prometheus_name  # noqa: E402
from protocol import compression  # noqa: E402


def kv(key, value):
    if isinstance(value, bool):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(bool_value=value))
    if isinstance(value, int):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(int_value=value))
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))


def payload(metrics, resource=(), terminating=False, iid=None, codec=compression.NONE):
    data = pb.MetricsData(resource_metrics=[pb.ResourceMetrics(
        resource={"attributes": [kv(k, v) for k, v in resource]},
        scope_metrics=[pb.ScopeMetrics(metrics=metrics)])])
    raw = data.SerializeToString()
    if codec != compression.NONE:
        raw = compression.compress(codec, raw)
    return TelemetryPayload(iid or IID, terminating, codec, raw)


def gauge(name, value, attrs=()):
    return pb.Metric(name=name, description="a gauge", gauge=pb.Gauge(data_points=[
        pb.NumberDataPoint(as_double=value, attributes=[kv(k, v) for k, v in attrs])]))


def total(name, value, temporality=1, monotonic=True):
    return pb.Metric(name=name, description="a sum", sum=pb.Sum(
        aggregation_temporality=temporality, is_monotonic=monotonic,
        data_points=[pb.NumberDataPoint(as_int=value)]))


IID = uuid.UUID("4831e92d-70ce-4e13-942e-0e10084b88c9")
CTX = types.SimpleNamespace(client_id="app-1", client_software_name="librdkafka", client_software_version="2.16.0")


class Clock:
    t = 100.0

    def __call__(self):
        return self.t


def series(r):
    return {(name, tuple(sorted((k, v) for k, v in labels.items() if k.startswith("node") or k == "group_id"))):
            (kind, value) for name, kind, _doc, labels, value in r.prometheus_snapshot()}


def test_gauges_replace_delta_sums_add_cumulative_sums_replace():
    r = PrometheusTelemetry()
    r.export_metrics(CTX, payload([gauge("org.apache.kafka.producer.node.request.latency.avg", 1.5,
                                         [("node.id", "0")]),
                                   total("org.apache.kafka.producer.connection.creation.total", 2),
                                   total("c.cumulative", 10, temporality=2),
                                   total("c.updown", 3, monotonic=False)], resource=[("group_id", "g")]))
    r.export_metrics(CTX, payload([gauge("org.apache.kafka.producer.node.request.latency.avg", 0.5,
                                         [("node.id", "0")]),
                                   total("org.apache.kafka.producer.connection.creation.total", 3),
                                   total("c.cumulative", 12, temporality=2)], resource=[("group_id", "g")],
                                  codec=compression.ZSTD))
    got = series(r)
    g = (("group_id", "g"),)
    assert got[("org_apache_kafka_producer_node_request_latency_avg", g + (("node_id", "0"),))] == ("gauge", 0.5)
    assert got[("org_apache_kafka_producer_connection_creation_total", g)] == ("counter", 5.0)
    assert got[("c_cumulative", g)] == ("counter", 12.0)
    assert got[("c_updown", g)] == ("gauge", 3.0)
    labels = r.prometheus_snapshot()[0][3]
    assert labels["client_instance_id"] == str(IID) and labels["client_id"] == "app-1"
    assert labels["client_software_name"] == "librdkafka" and labels["client_software_version"] == "2.16.0"


def test_the_brokers_labels_win_and_histograms_are_skipped():
    r = PrometheusTelemetry()
    hist = pb.Metric(name="h", histogram=pb.Histogram(data_points=[pb.HistogramDataPoint(count=1)]))
    r.export_metrics(CTX, payload([gauge("g", 1.0, [("client_id", "spoofed"), ("ok", True)]), hist]))
    [(name, kind, _doc, labels, value)] = r.prometheus_snapshot()
    assert labels["client_id"] == "app-1" and labels["ok"] == "true"
    assert r.skipped_points == 1


def test_terminating_and_silent_instances_are_dropped():
    clock = Clock()
    r = PrometheusTelemetry(clock=clock)
    r.configure({"odradek.telemetry.prometheus.expiry.ms": "1000"})
    r.export_metrics(CTX, payload([gauge("g", 1.0)]))
    other = uuid.uuid4()
    r.export_metrics(CTX, payload([gauge("g", 2.0)], iid=other))
    assert len(r.instances) == 2
    r.export_metrics(CTX, payload([gauge("g", 3.0)], iid=other, terminating=True))
    assert list(r.instances) == [IID]
    clock.t += 1.001
    assert r.prometheus_snapshot() == [] and r.instances == {}
    with pytest.raises(ValueError):
        PrometheusTelemetry().configure({"odradek.telemetry.prometheus.expiry.ms": "0"})


def test_names_and_the_broker_families():
    assert prometheus_name("org.apache.kafka.consumer.fetch-manager.x") == "org_apache_kafka_consumer_fetch_manager_x"
    assert prometheus_name("9lives") == "_9lives"
    r = PrometheusTelemetry()
    r.export_metrics(CTX, payload([gauge("a.b", 1.0), total("c.d.total", 4)]))
    snap = types.SimpleNamespace(client_metrics=(1, 0, 0, 1, 0.001, 0), client_series=r.prometheus_snapshot())
    fams = {f.name: f for f in _client_metric_families(snap)}
    assert fams["kafka_server_client_metrics_instance_count"].samples[0].value == 1
    assert fams["a_b"].type == "gauge" and fams["a_b"].samples[0].value == 1.0
    assert fams["c_d"].type == "counter" and fams["c_d"].samples[0].name == "c_d_total"
    assert fams["c_d"].samples[0].value == 4

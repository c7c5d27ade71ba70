"""KIP-714 client telemetry with unmodified clients (broker/client_metrics.py): a broker with a
telemetry receiver in ``metric.reporters`` (tests/integration/telemetry_receivers.py) advertises
GetTelemetrySubscriptions / PushTelemetry; confluent-kafka (librdkafka) producers subscribed by a
client-metrics resource push their OTLP metrics to it, compressed, at the subscription's
interval, and a last terminating push when they close; the Prometheus receiver serves them at the
broker's endpoint until then; a broker without a receiver answers the
APIs but does not advertise them; a receiver's failure is INVALID_RECORD; a reporter that cannot
serve stops start-up."""
from __future__ import annotations

import json
import uuid

import pytest

from protocol.messages import (GetTelemetrySubscriptionsRequest, IncrementalAlterConfigsRequest,
                               PushTelemetryRequest)
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.metrics import scrape
from tests.support.net import free_port, wait_for
from tests.support.rawkafka import RawConnection

ck = pytest.importorskip("confluent_kafka")
pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")

RECEIVERS = "tests.integration.telemetry_receivers"
CLIENT_METRICS = 16
GET, PUSH = 71, 72


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    return tmp_path_factory.mktemp("telemetry") / "pushes.jsonl"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory, record):
    b = BrokerProcess(tmp_path_factory.mktemp("telemetry-broker"), name="telemetry-broker",
                      props={"metric.reporters": f"{RECEIVERS}.RecordingTelemetry",
                             "odradek.test.telemetry.record": str(record),
                             "odradek.test.telemetry.fail.client.id": "refused"})
    with running(b):
        yield b


def lines(record, kind="push"):
    out = []
    for line in record.read_text().splitlines() if record.exists() else []:
        r = json.loads(line)
        if r.pop("kind") == kind:
            out.append(r)
    return out


def subscribe(b, name, **configs):
    """Set (or, with no configs, delete) a client-metrics subscription with IncrementalAlterConfigs."""
    I = IncrementalAlterConfigsRequest
    ops = [I.AlterableConfig(name=k.replace("_", "."), config_operation=0, value=v) for k, v in configs.items()]
    if not configs:
        ops = [I.AlterableConfig(name=k, config_operation=1, value=None) for k in ("metrics", "interval.ms", "match")]
    with RawConnection(b.host, b.port) as raw:
        resp = raw.request(44, 1, I(resources=[I.AlterConfigsResource(
            resource_type=CLIENT_METRICS, resource_name=name, configs=ops)], validate_only=False))
    assert [(r.error_code, r.error_message) for r in resp.responses] == [(0, None)]


def test_telemetry_is_advertised_with_a_receiver(kafka):
    keys = kafka.api_versions().api_keys
    assert keys[GET] == (0, 0) and keys[PUSH] == (0, 0)


def test_librdkafka_pushes_subscribed_metrics_to_the_receiver(kafka, record):
    subscribe(kafka, "producers", metrics="org.apache.kafka.producer.", interval_ms="500",
              match="client_id=telemetry-app.*")
    try:
        p = ck.Producer({"bootstrap.servers": kafka.bootstrap, "client.id": "telemetry-app-1",
                         "linger.ms": 5})
        for i in range(100):
            p.produce("telemetry-topic", value=b"v%d" % i)
        p.flush(10)
        pushes = wait_for(lambda: [r for r in lines(record) if r["client_id"] == "telemetry-app-1"
                                   and r["metrics"]], timeout=20, what="a push from librdkafka")
        first = pushes[0]
        assert all(m.startswith("org.apache.kafka.producer.") for m in first["metrics"]), first["metrics"]
        assert first["content_type"] == "application/x-protobuf"
        assert first["compression_type"] in (1, 2, 3, 4)     # it compresses with one we offered
        assert first["software"][0] in ("confluent-kafka-python", "librdkafka")
        assert first["principal"] == "User:ANONYMOUS" and first["security_protocol"] == "PLAINTEXT"
        assert first["address"] == "127.0.0.1"
        uuid.UUID(first["client_instance_id"])
        assert not first["terminating"]
        # pushes keep coming at about the interval
        wait_for(lambda: len([r for r in lines(record) if r["client_id"] == "telemetry-app-1"]) >= 3,
                 timeout=20, what="three pushes")
        n = len(lines(record))
        del p               # closing the producer: its last push says so
        wait_for(lambda: any(r["terminating"] for r in lines(record)[n - 1:]
                             if r["client_id"] == "telemetry-app-1"), timeout=20, what="the terminating push")
        ids = {r["client_instance_id"] for r in lines(record) if r["client_id"] == "telemetry-app-1"}
        assert len(ids) == 1
    finally:
        subscribe(kafka, "producers")


def test_the_prometheus_receiver_serves_what_librdkafka_pushes(tmp_path):
    port = free_port()
    b = BrokerProcess(tmp_path / "b", name="prometheus-telemetry",
                      props={"metric.reporters": "broker.telemetry_prometheus.PrometheusTelemetry",
                             "odradek.metrics.prometheus.port": port,
                             "odradek.metrics.prometheus.host": "127.0.0.1"})
    url = f"http://127.0.0.1:{port}/metrics"

    def pushed():
        return {k: v for k, v in scrape(url).items() if k[0].startswith("org_apache_kafka_producer_")
                and ("client_id", "prom-app") in k[1]}

    with running(b):
        subscribe(b, "producers", metrics="org.apache.kafka.producer.", interval_ms="500")
        p = ck.Producer({"bootstrap.servers": b.bootstrap, "client.id": "prom-app"})
        for i in range(50):
            p.produce("prom-topic", value=b"v%d" % i)
        p.flush(10)
        got = wait_for(lambda: {k: v for k, v in pushed().items()
                                if k[0] == "org_apache_kafka_producer_node_request_latency_avg"},
                       timeout=20, what="librdkafka's request latency at /metrics")
        (name, labels), _value = next(iter(got.items()))
        labels = dict(labels)
        assert labels["client_software_name"] == "confluent-kafka-python" and labels["node_id"] == "0"
        uuid.UUID(labels["client_instance_id"])
        assert scrape(url)[("kafka_server_client_metrics_instance_count", ())] >= 1
        assert scrape(url)[("kafka_server_client_metrics_plugin_export_total", ())] >= 1
        del p               # its terminating push takes its series away
        wait_for(lambda: not pushed(), timeout=20, what="the series to go")


def _get(raw, iid=uuid.UUID(int=0)):
    return raw.request(GET, 0, GetTelemetrySubscriptionsRequest(client_instance_id=iid))


def _push(raw, iid, sid, metrics=b"", terminating=False, compression_type=0):
    return raw.request(PUSH, 0, PushTelemetryRequest(
        client_instance_id=iid, subscription_id=sid, terminating=terminating,
        compression_type=compression_type, metrics=metrics)).error_code


def test_raw_exchange_checks_as_kafka_does(kafka):
    subscribe(kafka, "raw", metrics="*", interval_ms="100000", match="client_id=raw-.*")
    try:
        with RawConnection(kafka.host, kafka.port, client_id="raw-1") as raw:
            r = _get(raw)
            assert r.error_code == 0 and r.requested_metrics == ["*"] and r.push_interval_ms == 100000
            assert r.accepted_compression_types == [4, 3, 1, 2] and r.delta_temporality
            assert r.telemetry_max_bytes == 1048576
            iid, sid = r.client_instance_id, r.subscription_id
            assert _get(raw, iid).error_code == 89            # THROTTLING_QUOTA_EXCEEDED
            assert _push(raw, uuid.UUID(int=0), sid) == 42    # INVALID_REQUEST
            assert _push(raw, iid, sid + 1) == 117            # UNKNOWN_SUBSCRIPTION_ID
            assert _get(raw, iid).error_code == 0             # may ask again at once after it
            assert _push(raw, iid, sid, compression_type=7) == 76      # UNSUPPORTED_COMPRESSION_TYPE
            assert _get(raw, iid).error_code == 0
            assert _push(raw, iid, sid, metrics=b"y" * 1048577) == 118  # TELEMETRY_TOO_LARGE
            assert _push(raw, iid, sid) == 89
            assert _push(raw, iid, sid, terminating=True) == 0
            assert _push(raw, iid, sid, terminating=True) == 42
        with RawConnection(kafka.host, kafka.port, client_id="refused") as raw:
            r = _get(raw)
            assert r.requested_metrics == []                 # "raw" does not match this client
            assert _push(raw, r.client_instance_id, r.subscription_id, metrics=b"\x0a\x00") == 87  # INVALID_RECORD
    finally:
        subscribe(kafka, "raw")


def test_without_a_receiver_the_apis_are_answered_but_not_advertised(tmp_path):
    b = BrokerProcess(tmp_path / "b", name="no-receiver",
                      props={"metric.reporters": f"{RECEIVERS}.PlainReporter,"
                                                 "org.apache.kafka.common.metrics.JmxReporter"})
    with running(b):
        keys = b.api_versions().api_keys
        assert GET not in keys and PUSH not in keys
        with RawConnection(b.host, b.port) as raw:
            r = _get(raw)
            assert r.error_code == 0 and r.requested_metrics == [] and r.push_interval_ms == 300000
        # metric.reporters is a cluster-wide dynamic setting: a receiver added later is served
        set_cluster_default(b, "metric.reporters", f"{RECEIVERS}.RecordingTelemetry")
        wait_for(lambda: GET in b.api_versions().api_keys, timeout=10, what="71 advertised")
        set_cluster_default(b, "metric.reporters", None)
        wait_for(lambda: GET not in b.api_versions().api_keys, timeout=10, what="71 hidden again")
        # one that does not load is refused when it is set, not found broken later
        I = IncrementalAlterConfigsRequest
        with RawConnection(b.host, b.port) as raw:
            resp = raw.request(44, 1, I(resources=[I.AlterConfigsResource(
                resource_type=4, resource_name="", configs=[I.AlterableConfig(
                    name="metric.reporters", config_operation=0, value=f"{RECEIVERS}.Missing")])],
                validate_only=False))
        assert resp.responses[0].error_code == 42, resp        # INVALID_REQUEST
        assert "Class tests.integration.telemetry_receivers.Missing cannot be found" in resp.responses[0].error_message


def set_cluster_default(b, key, value):
    I = IncrementalAlterConfigsRequest
    op = I.AlterableConfig(name=key, config_operation=0 if value is not None else 1, value=value)
    with RawConnection(b.host, b.port) as raw:
        resp = raw.request(44, 1, I(resources=[I.AlterConfigsResource(
            resource_type=4, resource_name="", configs=[op])], validate_only=False))
    assert [(r.error_code, r.error_message) for r in resp.responses] == [(0, None)]


@pytest.mark.parametrize("cls,message", [
    ("BadReceiver", "its client_receiver() has no export_metrics(context, payload) method"),
    ("Missing", "Class tests.integration.telemetry_receivers.Missing cannot be found"),
])
def test_a_reporter_that_cannot_serve_stops_start_up(tmp_path, cls, message):
    b = BrokerProcess(tmp_path / "b", name="bad-reporter", props={"metric.reporters": f"{RECEIVERS}.{cls}"})
    with pytest.raises(Exception):
        b.start()
    b.stop()
    assert message in b.log_text()

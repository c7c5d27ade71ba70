"""A telemetry receiver that serves the metrics clients push (KIP-714) at the broker's
Prometheus endpoint: ``metric.reporters=broker.telemetry_prometheus.PrometheusTelemetry``.

Kafka ships no receiver (a plug-in of one's own forwards the OTLP payloads to a collector); this
one lets a Prometheus server that already scrapes the broker see its clients too.  It reads the
OTLP ``MetricsData`` with the ``opentelemetry-proto`` classes (``pip install
'odradek[telemetry]'``; without them the broker does not start with this reporter).

What it serves, per client instance that has pushed (docs/metrics.md, "Client metrics"):

* a **gauge** data point -> a gauge sample, its latest value;
* a **sum** -> a counter when it is monotonic, else a gauge.  The broker asks clients for delta
  temporality, as Kafka does: each delta is added to what the instance sent before; a
  cumulative point replaces it;
* histograms and summaries are not served (the Java client and librdkafka send none);
* names: the OTLP name with every character outside ``[a-zA-Z0-9_]`` made ``_``
  (``org.apache.kafka.producer.record.queue.time.avg`` ->
  ``org_apache_kafka_producer_record_queue_time_avg``); a counter gets ``_total``;
* labels: ``client_instance_id``, ``client_id``, ``client_software_name`` and
  ``client_software_version`` from the broker, then the resource's and the data point's
  attributes (names made safe the same way; the broker's four win a clash).

An instance's series are dropped after its terminating push, and when it has not pushed for
``odradek.telemetry.prometheus.expiry.ms`` (default 900,000: three of Kafka's default five-minute
push intervals).
"""
from __future__ import annotations

import logging
import re
import time

log = logging.getLogger("odradek.client_metrics")

EXPIRY_KEY = "odradek.telemetry.prometheus.expiry.ms"
DEFAULT_EXPIRY_MS = 900_000
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")
_DELTA = 1          # AGGREGATION_TEMPORALITY_DELTA


def prometheus_name(otlp_name: str) -> str:
    name = _UNSAFE.sub("_", otlp_name)
    return "_" + name if name[:1].isdigit() else name


def _value(point) -> float:
    return float(point.as_int) if point.WhichOneof("value") == "as_int" else point.as_double


def _attrs(kvs) -> dict[str, str]:
    out = {}
    for kv in kvs:
        v = kv.value
        kind = v.WhichOneof("value")
        if kind is None or kind in ("array_value", "kvlist_value", "bytes_value"):
            continue
        out[prometheus_name(kv.key)] = str(getattr(v, kind)).lower() if kind == "bool_value" \
            else str(getattr(v, kind))
    return out


class _Instance:
    __slots__ = ("labels", "series", "last_push")

    def __init__(self, labels):
        self.labels = labels
        self.series: dict[tuple, list] = {}   # (name, label items) -> [kind, help, value]
        self.last_push = 0.0


class PrometheusTelemetry:
    """The reporter (``client_receiver()`` is itself) and the store the broker's scrape reads."""

    def __init__(self, clock=time.monotonic):
        from opentelemetry.proto.metrics.v1 import metrics_pb2      # the [telemetry] extra
        self._metrics_data = metrics_pb2.MetricsData
        self._clock = clock
        self.expiry_s = DEFAULT_EXPIRY_MS / 1000
        self.instances: dict = {}
        self.skipped_points = 0         # histogram / summary points, not served

    def configure(self, configs):
        raw = configs.get(EXPIRY_KEY)
        if raw is not None:
            ms = int(raw)
            if ms < 1:
                raise ValueError(f"{EXPIRY_KEY} must be at least 1, not {ms}")
            self.expiry_s = ms / 1000

    def client_receiver(self):
        return self

    def export_metrics(self, context, payload):
        data = self._metrics_data()
        data.ParseFromString(payload.data())
        iid = payload.client_instance_id
        inst = self.instances.get(iid)
        if inst is None:
            inst = self.instances[iid] = _Instance({
                "client_instance_id": str(iid), "client_id": context.client_id or "",
                "client_software_name": context.client_software_name,
                "client_software_version": context.client_software_version})
        for rm in data.resource_metrics:
            resource = _attrs(rm.resource.attributes)
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    self._take(inst, resource, metric)
        inst.last_push = self._clock()
        if payload.is_terminating:
            del self.instances[iid]
        self._expire()

    def _take(self, inst: _Instance, resource: dict, metric) -> None:
        kind = metric.WhichOneof("data")
        name = prometheus_name(metric.name)
        if kind == "gauge":
            points, ptype, delta = metric.gauge.data_points, "gauge", False
        elif kind == "sum":
            s = metric.sum
            points, ptype = s.data_points, "counter" if s.is_monotonic else "gauge"
            delta = s.aggregation_temporality == _DELTA
        else:
            self.skipped_points += 1
            return
        for p in points:
            labels = {**resource, **_attrs(p.attributes), **inst.labels}
            key = (name, tuple(sorted(labels.items())))
            entry = inst.series.get(key)
            value = _value(p)
            if entry is None or entry[0] != ptype:
                inst.series[key] = [ptype, metric.description, value]
            elif delta:
                entry[2] += value
            else:
                entry[2] = value

    def _expire(self) -> None:
        now = self._clock()
        for iid in [i for i, inst in self.instances.items() if now - inst.last_push > self.expiry_s]:
            del self.instances[iid]

    # -- the broker's scrape (broker/metrics.py) ---------------------------------------------------
    def prometheus_snapshot(self) -> list[tuple[str, str, str, dict, float]]:
        """(name, type, help, labels, value) of every series; taken on the event loop."""
        self._expire()
        return [(name, kind, doc, dict(labels), value)
                for inst in self.instances.values()
                for (name, labels), (kind, doc, value) in inst.series.items()]

"""Metric reporters loaded by the broker processes of tests/integration/test_client_telemetry.py
(``metric.reporters``, broker/client_metrics.py).  The recording one writes each push it gets,
one JSON object per line, to the file named by ``odradek.test.telemetry.record``."""
from __future__ import annotations

import json
import threading


class RecordingTelemetry:
    """A ClientTelemetry reporter: its receiver is itself; each push becomes one line with the
    context, the payload's fields and the names of the metrics in the OTLP MetricsData."""

    def __init__(self):
        self._lock = threading.Lock()
        self.record = None
        self.fail_client = None

    def configure(self, configs):
        self.record = configs.get("odradek.test.telemetry.record")
        # a client id whose pushes make export_metrics raise (the broker answers INVALID_RECORD)
        self.fail_client = configs.get("odradek.test.telemetry.fail.client.id")
        self._write({"kind": "configure"})

    def client_receiver(self):
        return self

    def export_metrics(self, context, payload):
        if self.fail_client is not None and context.client_id == self.fail_client:
            raise RuntimeError("this receiver refuses that client")
        from opentelemetry.proto.metrics.v1 import metrics_pb2
        data = metrics_pb2.MetricsData()
        data.ParseFromString(payload.data())
        names = sorted({m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics})
        resource = {kv.key: kv.value.string_value for rm in data.resource_metrics
                    for kv in rm.resource.attributes}
        self._write({"kind": "push", "client_instance_id": str(payload.client_instance_id),
                     "terminating": payload.is_terminating, "content_type": payload.content_type,
                     "compression_type": payload.compression_type, "metrics": names, "resource": resource,
                     "client_id": context.client_id, "principal": context.principal,
                     "listener": context.listener_name, "security_protocol": context.security_protocol,
                     "software": [context.client_software_name, context.client_software_version],
                     "address": context.client_address})

    def close(self):
        self._write({"kind": "close"})

    def _write(self, obj):
        if self.record is None:
            return
        with self._lock, open(self.record, "a") as f:
            f.write(json.dumps(obj) + "\n")


class PlainReporter:
    """A reporter without client_receiver(): loaded, but telemetry stays unadvertised."""

    def configure(self, configs):
        pass


class BadReceiver:
    """client_receiver() returns something without export_metrics: start-up stops."""

    def client_receiver(self):
        return object()

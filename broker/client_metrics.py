"""Client metrics (KIP-714): telemetry subscriptions and the metrics clients push.

Clients that support KIP-714 (the Java client from 3.7, librdkafka from 2.5) ask the broker
which of their metrics it wants (GetTelemetrySubscriptions, key 71) and then push them at the
interval it names (PushTelemetry, key 72), as OpenTelemetry (OTLP) protobuf ``MetricsData``.
The broker only brokers: it hands each payload to the receivers configured in
``metric.reporters`` and keeps nothing else.

What is wanted is set with CLIENT_METRICS config resources ("subscriptions",
``kafka-client-metrics.sh``, kept by the controller): each names metric prefixes (``metrics``,
``*`` for all), a push interval (``interval.ms``) and the clients it is for (``match``: regular
expressions on the client instance id, client id, software name and version, source address and
port; a client must match all of them, and every client matches a subscription without one).

How the broker answers, as a Kafka 3.9 broker does
---------------------------------------------------
* A client's first GetTelemetrySubscriptions carries the zero id; the broker gives it a new
  random *client instance id*.  The broker keeps one record per instance (at most 16,384, least
  recently used first out; one is dropped when it has not been heard from for the larger of a
  minute and three push intervals).  A record holds what the client matched when it was made:
  the union of the matching subscriptions' metrics (just ``*`` when one of them asks for all),
  their smallest interval (5 minutes when none matched) and a *subscription id* computed from
  those two and the instance id.  The id is a pure function of them, so every broker of a
  cluster computes the same one and a client may push to any broker.
* When a subscription changes, a record made before the change is made again, from the new
  subscriptions, at that client's next request; its next push then carries a stale subscription
  id and gets UNKNOWN_SUBSCRIPTION_ID, and the client asks again.
* GetTelemetrySubscriptions sooner than an interval after the client's last request is answered
  THROTTLING_QUOTA_EXCEEDED, except right after an UNKNOWN_SUBSCRIPTION_ID or
  UNSUPPORTED_COMPRESSION_TYPE: a client that must ask again is not made to wait, and its next
  push is then accepted at once (Kafka 3.9's test for that exception is written so that it never
  holds, which reads as a slip; there such a client waits a whole interval).
* PushTelemetry is checked in Kafka's order: the reserved ids (zero, the metadata topic's) ->
  INVALID_REQUEST; after a push marked ``terminating`` -> INVALID_REQUEST; sooner than the
  interval after the last push (unless a GetTelemetrySubscriptions came in between, or this push
  is the terminating one) -> THROTTLING_QUOTA_EXCEEDED; a subscription id other than the
  record's -> UNKNOWN_SUBSCRIPTION_ID; a compression type that is not one of Kafka's (0-4) ->
  UNSUPPORTED_COMPRESSION_TYPE; a payload over ``telemetry.max.bytes`` (as sent) ->
  TELEMETRY_TOO_LARGE.  Then each receiver gets it; a receiver that raises (or a payload that
  cannot be decompressed when the receiver reads it) -> INVALID_RECORD.
* The answer offers compression ZSTD, LZ4, GZIP and SNAPPY, delta temporality and the broker's
  ``telemetry.max.bytes``.  Both APIs are answered whether or not a receiver is configured, as a
  Kafka KRaft broker answers them; ApiVersions advertises them only when one is, so clients do
  not collect metrics nobody reads.

Receivers
---------
``metric.reporters`` lists Python classes (``package.module.Class``), built at start-up with no
arguments and given ``configure(configs)`` (the broker's settings) when they have it; a class
that cannot be imported stops the start-up.  Kafka's own ``JmxReporter`` may stay in the list
(it is skipped: the broker's metrics are served to Prometheus, docs/metrics.md).  A reporter with
a ``client_receiver()`` method is a telemetry reporter (Kafka's ClientTelemetry): the object that
method returns gets ``export_metrics(context, payload)`` for every accepted push that carries
metrics, on the broker's event loop (a slow receiver delays the broker: hand the work to a
thread).  ``context`` is a ``TelemetryContext``, ``payload`` a ``TelemetryPayload`` (below);
``payload.data()`` is the decompressed OTLP ``MetricsData`` (content type
``application/x-protobuf``).  A reporter's ``close()``, when it has one, is called when the
broker stops or the list changes (``metric.reporters`` is a cluster-wide dynamic setting, as
in Kafka: the receivers are rebuilt when it changes).
"""
from __future__ import annotations

import collections
import logging
import time
import uuid
from dataclasses import dataclass, field

import crc32c

from protocol import compression
from protocol.errors import ErrorCode as E

log = logging.getLogger("odradek.client_metrics")

REPORTERS_KEY = "metric.reporters"
MAX_BYTES_KEY = "telemetry.max.bytes"
# Kafka's order of preference, as its brokers answer: ZSTD, LZ4, GZIP, SNAPPY
ACCEPTED_COMPRESSION = (compression.ZSTD, compression.LZ4, compression.GZIP, compression.SNAPPY)
KNOWN_COMPRESSION = frozenset((compression.NONE,) + ACCEPTED_COMPRESSION)
CONTENT_TYPE = "application/x-protobuf"
DEFAULT_INTERVAL_MS = 300_000
CACHE_MAX = 16_384
CACHE_EXPIRY_MS = 60_000
ALL_METRICS = "*"
_JAVA_REPORTERS = frozenset({"org.apache.kafka.common.metrics.JmxReporter"})
_RESERVED_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})
_ASK_AGAIN = frozenset({E.UNKNOWN_SUBSCRIPTION_ID, E.UNSUPPORTED_COMPRESSION_TYPE})


class TelemetryError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class TelemetryContext:
    """Who pushed: what Kafka's AuthorizableRequestContext tells a receiver."""
    listener_name: str
    security_protocol: str
    principal: str                   # "User:alice"; "User:ANONYMOUS" without authentication
    client_address: str
    client_id: str | None
    client_software_name: str
    client_software_version: str
    request_api_version: int
    correlation_id: int


class TelemetryPayload:
    """One push: the client instance, whether the client is closing, and its metrics."""
    __slots__ = ("client_instance_id", "is_terminating", "content_type", "compression_type", "_raw", "_data")

    def __init__(self, client_instance_id: uuid.UUID, terminating: bool, compression_type: int, raw: bytes):
        self.client_instance_id = client_instance_id
        self.is_terminating = terminating
        self.content_type = CONTENT_TYPE
        self.compression_type = compression_type
        self._raw = raw
        self._data = None

    def data(self) -> bytes:
        """The OTLP MetricsData bytes, decompressed (compression.CompressionError when they
        cannot be)."""
        if self._data is None:
            if self.compression_type == compression.NONE:
                self._data = bytes(self._raw)
            else:
                self._data = compression.decompress(self.compression_type, self._raw)
        return self._data


@dataclass(frozen=True)
class Subscription:
    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: dict           # selector -> compiled pattern


@dataclass
class ClientInstance:
    instance_id: uuid.UUID
    attributes: dict[str, str | None]
    subscription_id: int
    version: int                    # the subscriptions' version it was made from
    metrics: tuple[str, ...]
    interval_ms: int
    # never: a new instance may ask and push at once (the clock is monotonic, its zero arbitrary)
    last_get_ms: float = float("-inf")
    last_push_ms: float = float("-inf")
    terminating: bool = False
    last_error: int = 0
    touched_ms: float = field(default=0.0)

    def expiry_ms(self) -> float:
        return max(CACHE_EXPIRY_MS, 3 * self.interval_ms)

    def may_get(self, now: float) -> bool:
        if now - max(self.last_get_ms, self.last_push_ms) >= self.interval_ms:
            self.last_get_ms = now
            return True
        return False

    def may_push(self, now: float) -> bool:
        # a push right after a GetTelemetrySubscriptions is accepted whenever it comes: the
        # client's first push after one is jittered (0.5-1.5 intervals)
        ok = self.last_get_ms > self.last_push_ms or now - self.last_push_ms >= self.interval_ms
        if ok:
            self.last_push_ms = now
        return ok


def java_uuid_hash(u: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode: the two 64-bit halves xor'ed, folded to a signed 32-bit int."""
    h = (u.int >> 64) ^ (u.int & 0xFFFF_FFFF_FFFF_FFFF)
    return _int32((h >> 32) ^ (h & 0xFFFF_FFFF))


def _int32(v: int) -> int:
    v &= 0xFFFF_FFFF
    return v - (1 << 32) if v & 0x8000_0000 else v


def subscription_id(metrics, interval_ms: int, instance_id: uuid.UUID) -> int:
    """CRC32C of the metrics (sorted, so every broker agrees) and the interval, xor the id's hash."""
    text = "[" + ", ".join(sorted(metrics)) + "]" + str(interval_ms)
    return _int32(crc32c.crc32c(text.encode()) ^ java_uuid_hash(instance_id))


def _split_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in str(value).split(",") if v.strip()]


def build_subscriptions(configs: dict[str, dict[str, str]]) -> list[Subscription]:
    """The controller's CLIENT_METRICS resources as subscriptions; one that does not parse
    (it was checked when it was set) is left out with a warning."""
    from controller.api import parse_client_metrics_match
    out = []
    for name, cfg in sorted(configs.items()):
        try:
            interval = int(cfg.get("interval.ms", DEFAULT_INTERVAL_MS))
            match = parse_client_metrics_match(_split_list(cfg.get("match")))
        except (ValueError, TypeError) as e:
            log.warning("client metrics subscription %s left out: %s", name, e)
            continue
        out.append(Subscription(name, frozenset(_split_list(cfg.get("metrics"))), interval, match))
    return out


def load_receivers(cfg) -> tuple[list, list]:
    """(reporters, receivers) for ``metric.reporters``; ConfigError when a class cannot be
    loaded or its client_receiver() gives nothing with export_metrics."""
    from broker.config import ConfigError
    from broker.security.builder import broker_settings, instantiate
    reporters, receivers = [], []
    settings = None
    for path in _split_list(cfg.get(REPORTERS_KEY)):
        if path in _JAVA_REPORTERS:
            log.info("%s %s is Kafka's JMX reporter: skipped (metrics are served to Prometheus)",
                     REPORTERS_KEY, path)
            continue
        if settings is None:
            settings = broker_settings(cfg)
        reporter = instantiate(path, REPORTERS_KEY, settings)
        reporters.append(reporter)
        if callable(getattr(reporter, "client_receiver", None)):
            receiver = reporter.client_receiver()
            if not callable(getattr(receiver, "export_metrics", None)):
                close_reporters(reporters)
                raise ConfigError(f"Invalid value {path} for configuration {REPORTERS_KEY}: its "
                                  "client_receiver() has no export_metrics(context, payload) method",
                                  REPORTERS_KEY)
            receivers.append(receiver)
    return reporters, receivers


def close_reporters(reporters) -> None:
    for r in reporters:
        close = getattr(r, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                log.exception("closing metric reporter %r failed", r)


class ClientMetricsManager:
    """The broker's client instances and subscriptions; owned by the event loop."""

    def __init__(self, broker, reporters=(), receivers=(), clock=time.monotonic):
        self.broker = broker
        self.reporters = list(reporters)
        self.receivers = list(receivers)
        self._reporter_paths = _split_list(broker.config.get(REPORTERS_KEY)) if broker is not None else []
        self._clock = clock
        self.subscriptions: list[Subscription] = []
        self.version = 0
        self.instances: collections.OrderedDict[uuid.UUID, ClientInstance] = collections.OrderedDict()
        self._next_sweep = 0.0
        # counters for the Prometheus endpoint (Kafka's client-metrics group)
        self.unknown_subscription_requests = 0
        self.throttled = 0
        self.plugin_exports = 0
        self.plugin_export_seconds = 0.0
        self.plugin_errors = 0

    @property
    def receiver_configured(self) -> bool:
        return bool(self.receivers)

    @staticmethod
    def accepted_compression() -> tuple[int, ...]:
        return ACCEPTED_COMPRESSION

    def _now_ms(self) -> float:
        return self._clock() * 1000.0

    # -- subscriptions -----------------------------------------------------------------------
    def subscriptions_changed(self, configs: dict[str, dict[str, str]]) -> None:
        self.subscriptions = build_subscriptions(configs)
        self.version += 1
        log.info("client metrics subscriptions: %s", ", ".join(s.name for s in self.subscriptions) or "none")

    def reporters_changed(self) -> None:
        """``metric.reporters`` may have changed (a dynamic broker config): rebuild the receivers."""
        paths = _split_list(self.broker.config.get(REPORTERS_KEY))
        if paths == self._reporter_paths:
            return
        try:
            reporters, receivers = load_receivers(self.broker.config)
        except Exception as e:
            log.error("%s not applied: %s", REPORTERS_KEY, e)
            return
        old, self.reporters, self.receivers = self.reporters, reporters, receivers
        self._reporter_paths = paths
        close_reporters(old)
        log.info("%s now %s (%d telemetry receivers)", REPORTERS_KEY, paths, len(receivers))

    def close(self) -> None:
        close_reporters(self.reporters)
        self.reporters, self.receivers = [], []
        self.instances.clear()

    # -- instances -----------------------------------------------------------------------------
    def expire(self) -> None:
        """Drop the instances that have been silent too long (also run before a metrics scrape, so
        the instance count does not wait for the next telemetry request)."""
        self._next_sweep = 0.0
        self._sweep(self._now_ms())

    def _sweep(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + 5000
        for iid in [i for i, c in self.instances.items() if now - c.touched_ms > c.expiry_ms()]:
            del self.instances[iid]

    def _make(self, instance_id: uuid.UUID, attributes: dict) -> ClientInstance:
        metrics: set[str] = set()
        interval = DEFAULT_INTERVAL_MS
        everything = False
        for s in self.subscriptions:
            if all(attributes.get(sel) is not None and pat.fullmatch(attributes[sel])
                   for sel, pat in s.match.items()):
                everything = everything or ALL_METRICS in s.metrics
                metrics |= s.metrics
                interval = min(interval, s.interval_ms)
        if everything:
            metrics = {ALL_METRICS}
        return ClientInstance(instance_id, attributes, subscription_id(metrics, interval, instance_id),
                              self.version, tuple(sorted(metrics)), interval)

    def _instance(self, instance_id: uuid.UUID, ctx, now: float) -> ClientInstance:
        self._sweep(now)
        inst = self.instances.get(instance_id)
        if inst is None:
            inst = self._make(instance_id, _attributes(instance_id, ctx))
        elif inst.version < self.version:
            # made before the subscriptions changed: made again, keeping who the client is
            inst = self._make(instance_id, inst.attributes)
        self.instances[instance_id] = inst
        self.instances.move_to_end(instance_id)
        while len(self.instances) > CACHE_MAX:
            self.instances.popitem(last=False)
        inst.touched_ms = now
        return inst

    def _new_id(self) -> uuid.UUID:
        from controller.api import random_kafka_uuid
        while True:
            u = random_kafka_uuid()
            if u not in self.instances:
                return u

    # -- requests ------------------------------------------------------------------------------
    def get_subscriptions(self, ctx, instance_id: uuid.UUID) -> tuple[int, ClientInstance | None, str]:
        """(error code, instance, message) for a GetTelemetrySubscriptions."""
        now = self._now_ms()
        if instance_id is None or instance_id.int == 0:
            instance_id = self._new_id()
        inst = self._instance(instance_id, ctx, now)
        if not inst.may_get(now):
            if inst.last_error not in _ASK_AGAIN:
                self.throttled += 1
                return (E.THROTTLING_QUOTA_EXCEEDED, inst,
                        f"Request from the client [{instance_id}] arrived before the next push interval time")
            inst.last_get_ms = now      # asked again after an error: its next push is welcome at once
        inst.last_error = E.NONE
        return E.NONE, inst, ""

    def push(self, ctx, req) -> tuple[int, str]:
        """(error code, message) for a PushTelemetry; hands the payload to the receivers."""
        iid = req.client_instance_id
        if iid is None or iid in _RESERVED_IDS:
            return E.INVALID_REQUEST, f"Invalid request from the client [{iid}], invalid client instance id"
        now = self._now_ms()
        inst = self._instance(iid, ctx, now)
        code, msg = self._check_push(inst, req, now)
        if req.terminating:
            inst.terminating = True
        if code:
            inst.last_error = code
            return code, msg
        if req.metrics:
            payload = TelemetryPayload(iid, bool(req.terminating), req.compression_type, req.metrics)
            tctx = telemetry_context(ctx)
            t0 = time.perf_counter()
            try:
                for r in self.receivers:
                    r.export_metrics(tctx, payload)
            except Exception as e:
                self.plugin_errors += 1
                inst.last_error = E.INVALID_RECORD
                log.error("exporting the metrics of client instance %s failed: %s", iid, e,
                          exc_info=not isinstance(e, compression.CompressionError))
                return E.INVALID_RECORD, str(e)
            self.plugin_exports += 1
            self.plugin_export_seconds += time.perf_counter() - t0
        inst.last_error = E.NONE
        return E.NONE, ""

    def _check_push(self, inst: ClientInstance, req, now: float) -> tuple[int, str]:
        iid = req.client_instance_id
        if inst.terminating:
            return (E.INVALID_REQUEST, f"Client [{iid}] sent the previous request with state terminating "
                                       "to TRUE, can not accept any requests after that")
        if not inst.may_push(now) and not req.terminating:
            self.throttled += 1
            return (E.THROTTLING_QUOTA_EXCEEDED,
                    f"Request from the client [{iid}] arrived before the next push interval time")
        if req.subscription_id != inst.subscription_id:
            self.unknown_subscription_requests += 1
            return E.UNKNOWN_SUBSCRIPTION_ID, f"Unknown client subscription id for the client [{iid}]"
        if req.compression_type not in KNOWN_COMPRESSION:
            return (E.UNSUPPORTED_COMPRESSION_TYPE, f"Unknown compression type [{req.compression_type}] "
                                                    f"is received in telemetry request from [{iid}]")
        limit = self.broker.config.get(MAX_BYTES_KEY) if self.broker is not None else 1 << 20
        if req.metrics is not None and len(req.metrics) > limit:
            return (E.TELEMETRY_TOO_LARGE, f"Telemetry request from [{iid}] is larger than the maximum "
                                           f"allowed size [{limit}]")
        return E.NONE, ""


_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _attributes(instance_id: uuid.UUID, ctx) -> dict[str, str | None]:
    """What a subscription's ``match`` may test, as Kafka names it."""
    name, version = getattr(ctx.connection, "client_software", None) or ("unknown", "unknown")
    peer = getattr(ctx.connection, "peer", None) or (None, None)
    return {"client_instance_id": str(instance_id), "client_id": ctx.client_id,
            "client_software_name": name, "client_software_version": version,
            "client_source_address": peer[0], "client_source_port": None if peer[1] is None else str(peer[1])}


def telemetry_context(ctx) -> TelemetryContext:
    conn = ctx.connection
    name, version = getattr(conn, "client_software", None) or ("unknown", "unknown")
    listener = getattr(conn, "listener_name", "") or ""
    protocol = ctx.broker.config.security_protocol_map().get(listener.upper(), listener.upper())
    if protocol not in _SECURITY_PROTOCOLS:
        protocol = "PLAINTEXT"
    return TelemetryContext(listener, protocol, ctx.principal, conn.peer_host, ctx.client_id, name, version,
                            ctx.api_version, ctx.header.correlation_id)


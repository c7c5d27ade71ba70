"""Broker metrics for Prometheus, with Kafka's meanings (docs/metrics.md lists every series).

How this works
--------------
Three parts; the first two run on the broker's event loop:

* **Counting (hot path).**  Handlers call a few ``BrokerMetrics`` methods per request; each one
  adds to plain ``int``/``float`` attributes of slotted objects (``_TopicStats``,
  ``_RequestStats``).  No locks, no prometheus-client objects, no label lookups, nothing per
  record: a Produce partition costs one dict lookup and two additions, a request's latency one
  ``bisect`` and three additions.  Counts that are not on the request path (ISR changes, bytes
  appended by replica fetchers) are single additions too.
* **Collecting (scrape time).**  ``take_snapshot`` copies those numbers and computes every gauge
  from the broker's state at that moment (hosted and led partitions, ISR sizes, active
  controller, offline partitions, connections); nothing updates a gauge on the hot path.  A
  custom collector registered in the broker's own ``CollectorRegistry`` (never the process-global
  one, so several brokers in one process and the tests do not mix) turns a snapshot into counter,
  histogram and gauge families; prometheus-client's process, platform and GC collectors sit in
  the same registry.
* **Serving.**  A small asyncio HTTP/1.1 server on the broker's loop answers ``GET /metrics``
  (text format 0.0.4, or OpenMetrics when the scraper asks for it).  The snapshot is taken on the
  loop, because it reads state the loop owns (the replica manager's partitions, the controller's
  metadata cache, the connection set): there it is one consistent picture and needs no locks,
  where prometheus-client's exporter thread could iterate a dict the loop is resizing.  Building
  the families and encoding the text, which is most of the cost (about 0.1 s of CPU for 1,000
  topics), then runs in the loop's default executor, so a scrape does not stall the loop for
  that long; the snapshot is handed to the collector through a thread-local.

Enabled by ``odradek.metrics.prometheus.port`` (-1, the default, = off; 0 = any free port, for
tests) and ``odradek.metrics.prometheus.host`` (empty = all interfaces).
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from bisect import bisect_left

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.samples import Sample

from broker.replica import effective_min_isr
from protocol.errors import ErrorCode as E

log = logging.getLogger("odradek.metrics")

# Upper bounds (seconds) of the request latency buckets: sub-millisecond requests up to long
# polls (fetch.max.wait.ms is 500 by default, a JoinGroup may wait for the rebalance timeout).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                   5.0, 10.0, 30.0)

# Partition errors Kafka does *not* count in FailedProduceRequestsPerSec: that meter is for
# unexpected failures of an append, not for a client talking to the wrong broker or sending a
# batch that is too large or corrupt (ReplicaManager.appendToLocalLog's "known exceptions"),
# nor for what happens after the append (acks=all waits) or before it (acks validation).
_PRODUCE_NOT_FAILED = frozenset({
    E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.MESSAGE_TOO_LARGE,
    E.RECORD_LIST_TOO_LARGE, E.CORRUPT_MESSAGE, E.KAFKA_STORAGE_ERROR, E.INVALID_TOPIC_EXCEPTION,
    E.INVALID_REQUIRED_ACKS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT,
    E.TOPIC_AUTHORIZATION_FAILED,
})
_PRODUCE_REJECTED = frozenset({E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE})

# Same for FailedFetchRequestsPerSec (ReplicaManager.readFromLocalLog's known exceptions).
_FETCH_NOT_FAILED = frozenset({
    E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_ID, E.NOT_LEADER_OR_FOLLOWER,
    E.FENCED_LEADER_EPOCH, E.UNKNOWN_LEADER_EPOCH, E.OFFSET_OUT_OF_RANGE, E.REPLICA_NOT_AVAILABLE,
    E.KAFKA_STORAGE_ERROR, E.INCONSISTENT_TOPIC_ID, E.TOPIC_AUTHORIZATION_FAILED,
})

# Kafka's BrokerState values (kafka.server:type=KafkaServer,name=BrokerState).
STARTING, RUNNING, SHUTTING_DOWN = 1, 3, 7


class _TopicStats:
    """BrokerTopicMetrics of one topic, as running totals."""
    __slots__ = ("messages_in", "bytes_in", "bytes_out", "bytes_rejected", "produce_requests",
                 "failed_produce_requests", "fetch_requests", "failed_fetch_requests",
                 "produce_conversions", "fetch_conversions")

    def __init__(self):
        self.messages_in = self.bytes_in = self.bytes_out = self.bytes_rejected = 0
        self.produce_requests = self.failed_produce_requests = 0
        self.fetch_requests = self.failed_fetch_requests = 0
        self.produce_conversions = self.fetch_conversions = 0


class _RequestStats:
    """RequestMetrics of one request name: count, latency sum and per-bucket counts
    (not cumulative; the last slot is +Inf)."""
    __slots__ = ("count", "seconds", "buckets")

    def __init__(self):
        self.count = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)


class BrokerMetrics:
    """The broker's metrics.  Owned by the event loop, like everything else in the broker."""

    def __init__(self, broker):
        self.broker = broker
        self.topics: dict[str, _TopicStats] = {}
        self.requests: dict[str, _RequestStats] = {}
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.invalid_records = dict.fromkeys(INVALID_KINDS, 0)
        self._last_fetch_from_follower = False
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = _BrokerCollector(self)
        self.registry.register(self.collector)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.server: asyncio.AbstractServer | None = None
        self.port: int | None = None

    # -- hot path -------------------------------------------------------------------------------
    def _new_topic(self, topic: str) -> _TopicStats:
        s = self.topics[topic] = _TopicStats()
        return s

    def produced(self, topic: str, nbytes: int, messages: int) -> None:
        """A Produce partition was appended: its records' size as received, and its record count."""
        s = self.topics.get(topic) or self._new_topic(topic)
        s.bytes_in += nbytes
        s.messages_in += messages

    def produce_converted(self, topic: str, records: int) -> None:
        """Records of a Produce partition rewritten before the append: legacy messages made v2,
        or batches stored in the topic's compression.type (ProduceMessageConversionsPerSec)."""
        s = self.topics.get(topic) or self._new_topic(topic)
        s.produce_conversions += records

    def fetch_converted(self, topic: str, records: int) -> None:
        """Records down-converted to a legacy message set for Fetch v0-3."""
        s = self.topics.get(topic) or self._new_topic(topic)
        s.fetch_conversions += records

    def invalid(self, exc) -> None:
        """A refused append whose exception names one of Kafka's invalid-record meters
        (``invalid_kind``, ``invalid_count``: protocol.records.tagged)."""
        kind = getattr(exc, "invalid_kind", None)
        if kind in self.invalid_records:
            self.invalid_records[kind] += getattr(exc, "invalid_count", 1)

    def produce_request(self, req, responses) -> None:
        """Once per Produce request, after the appends: requests and failures per partition,
        bytes refused as too large.  ``responses`` is in the order of ``req.topic_data``."""
        ctrl = self.broker.controller
        topics = self.topics
        for td, tr in zip(req.topic_data, responses):
            s = topics.get(td.name)
            if s is None:
                if ctrl is None or ctrl.topic(td.name) is None:
                    continue        # no series for names of topics that do not exist
                s = self._new_topic(td.name)
            parts = tr.partition_responses
            s.produce_requests += len(parts)
            for pd, pr in zip(td.partition_data, parts):
                code = pr.error_code
                if code:
                    if code not in _PRODUCE_NOT_FAILED:
                        s.failed_produce_requests += 1
                    elif code in _PRODUCE_REJECTED and pd.records is not None:
                        s.bytes_rejected += len(pd.records)

    def fetched(self, responses, from_follower: bool) -> None:
        """Once per Fetch request, with the response about to be sent: bytes out per topic
        (consumers) or replication bytes out (followers), requests and failures per partition."""
        self._last_fetch_from_follower = from_follower
        topics = self.topics
        ctrl = self.broker.controller
        for tr in responses:
            s = topics.get(tr.topic)
            if s is None:
                if not tr.topic or ctrl is None or ctrl.topic(tr.topic) is None:
                    continue
                s = self._new_topic(tr.topic)
            nbytes = 0
            for pd in tr.partitions:
                code = pd.error_code
                if code and code not in _FETCH_NOT_FAILED:
                    s.failed_fetch_requests += 1
                r = pd.records
                if r is not None:
                    n = getattr(r, "length", None)     # a file region (or several)
                    nbytes += len(r) if n is None else n
            s.fetch_requests += len(tr.partitions)
            if from_follower:
                self.replication_bytes_out += nbytes
            else:
                s.bytes_out += nbytes

    def observe_request(self, name: str, seconds: float) -> None:
        """Called by the connection after every handled request (receipt to response built)."""
        if name == "Fetch":
            # As Kafka: fetches are reported as FetchConsumer or FetchFollower.  fetched() ran
            # just before, with no await between it and this call.
            name = "FetchFollower" if self._last_fetch_from_follower else "FetchConsumer"
            self._last_fetch_from_follower = False
        s = self.requests.get(name)
        if s is None:
            s = self.requests[name] = _RequestStats()
        s.count += 1
        s.seconds += seconds
        s.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1

    def isr_changed(self, old, new) -> None:
        """The leader's ISR changed (AlterPartition accepted)."""
        if set(old) - set(new):
            self.isr_shrinks += 1
        if set(new) - set(old):
            self.isr_expands += 1

    def replicated_in(self, nbytes: int) -> None:
        """A replica fetcher received ``nbytes`` of records from a leader."""
        self.replication_bytes_in += nbytes

    # -- exporter -------------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._serve, host or None, port,
                                                 reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]
        log.info("Prometheus metrics on http://%s:%d/metrics", host or "0.0.0.0", self.port)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The metrics in the format ``accept`` asks for: (body, content type).  On the loop."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type

    async def scrape(self, accept: str = "") -> tuple[bytes, str]:
        """Like ``exposition``, but only the snapshot is taken on the loop; building the families
        and encoding them (most of the cost: ~0.1 s for 1,000 topics) run in a worker thread."""
        snap = take_snapshot(self)
        encoder, content_type = choose_encoder(accept)

        def encode():
            self.collector.local.snapshot = snap
            try:
                return encoder(self.registry)
            finally:
                self.collector.local.snapshot = None
        body = await asyncio.get_running_loop().run_in_executor(None, encode)
        return body, content_type

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One HTTP exchange per connection (``Connection: close``)."""
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                    ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split()
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                writer.write(_response(400, b"bad request\n"))
                return
            method, target = parts[0], parts[1]
            headers = {}
            for line in lines[1:]:
                k, sep, v = line.partition(":")
                if sep:
                    headers[k.strip().lower()] = v.strip()
            path = target.split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                writer.write(_response(405, b"only GET and HEAD\n", extra=[("Allow", "GET, HEAD")]))
            elif path == "/metrics":
                try:
                    body, ctype = await self.scrape(headers.get("accept", ""))
                except Exception:
                    log.exception("collecting metrics failed")
                    writer.write(_response(500, b"collecting metrics failed\n"))
                else:
                    writer.write(_response(200, body, ctype, head_only=method == "HEAD"))
            elif path == "/":
                writer.write(_response(200, b"Odradek broker metrics: /metrics\n",
                                       head_only=method == "HEAD"))
            else:
                writer.write(_response(404, b"not found; metrics are at /metrics\n"))
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error"}


def _response(status: int, body: bytes, content_type: str = "text/plain; charset=utf-8",
              head_only: bool = False, extra=()) -> bytes:
    head = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in extra]
    out = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
    return out if head_only else out + body


class _Snapshot:
    """Every number of one scrape, taken on the loop; plain data, safe to read from any thread."""
    __slots__ = ("topics", "requests", "replication_bytes_in", "replication_bytes_out", "isr_shrinks",
                 "isr_expands", "queued", "replica", "controller", "connections", "accept_rates", "state", "quotas",
                 "exempt_request_time", "replication_throttle_rates", "groups", "group_epoch_bumps", "fetch_sessions", "offline_dirs",
                 "client_metrics", "client_series", "share_sessions", "invalid_records", "cleaner",
                 "partition_gauges", "log_gauges")


def take_snapshot(m: BrokerMetrics) -> _Snapshot:
    """Copy the counters and compute the gauges from the broker's state.  Runs on the loop: it
    reads the partitions, the controller's cache and the connection set."""
    broker = m.broker
    snap = _Snapshot()
    ctrl = broker.controller
    if ctrl is not None:
        # Kafka drops a topic's meters when the topic is deleted; so do we.
        for name in [t for t in m.topics if ctrl.topic(t) is None]:
            del m.topics[name]
    snap.topics = sorted((name, (s.messages_in, s.bytes_in, s.bytes_out, s.bytes_rejected, s.produce_requests,
                                 s.failed_produce_requests, s.fetch_requests, s.failed_fetch_requests,
                                 s.produce_conversions, s.fetch_conversions))
                         for name, s in m.topics.items())
    snap.requests = sorted((name, s.count, s.seconds, tuple(s.buckets)) for name, s in m.requests.items())
    snap.replication_bytes_in = m.replication_bytes_in
    snap.replication_bytes_out = m.replication_bytes_out
    snap.isr_shrinks = m.isr_shrinks
    snap.isr_expands = m.isr_expands
    snap.invalid_records = dict(m.invalid_records)
    snap.queued = sum(len(c.queue) for c in broker.connections)

    partitions = leaders = under = under_min = at_min = 0
    per_partition = []      # kafka.cluster:type=Partition, one tuple per hosted partition
    rm = broker.replicas
    if rm is not None:
        for part in rm.partitions.values():
            partitions += 1
            lg = part.log
            lso_lag = lg.high_watermark - lg.last_stable_offset() if lg is not None and not lg.closed else 0
            if not part.is_leader or lg is None:
                per_partition.append((part.topic, part.partition, 0, 0, 0, 0, 0, lso_lag))
                continue
            leaders += 1
            isr = len(part.isr)
            rf = _replication_factor(ctrl, part)
            if isr < rf:
                under += 1
            min_isr = effective_min_isr(part)
            if isr < min_isr:
                under_min += 1
            elif isr == min_isr:
                at_min += 1
            per_partition.append((part.topic, part.partition, int(isr < rf), isr, rf,
                                  int(isr < min_isr), int(isr == min_isr), lso_lag))
    snap.replica = (partitions, leaders, under, under_min, at_min)
    snap.partition_gauges = sorted(per_partition)

    active = False
    offline = total_partitions = topics = imbalance = 0
    if ctrl is not None:
        flag = getattr(ctrl, "is_active_controller", None)
        active = bool(flag) if flag is not None else ctrl.controller_id == broker.broker_id
    if active:
        live = _live_brokers(ctrl)
        for info in ctrl.topics().values():
            topics += 1
            for ps in info.partitions.values():
                total_partitions += 1
                if ps.leader < 0 or ps.leader not in live:
                    offline += 1
                elif ps.replicas and ps.leader != ps.replicas[0]:
                    imbalance += 1
    snap.controller = (1 if active else 0, offline, imbalance, topics, total_partitions)

    per_listener = {name: 0 for name in _listener_names(broker)}
    for c in broker.connections:
        per_listener[c.listener_name] = per_listener.get(c.listener_name, 0) + 1
    snap.connections = sorted(per_listener.items())
    cq = getattr(broker, "connection_quotas", None)
    now = time.monotonic()
    snap.accept_rates = sorted((name, lst.rate.rate(now), lst.blocked_seconds(),
                                lst.rate_throttle.value(now), lst.ip_throttle.value(now))
                               for name, lst in cq.listeners.items()) if cq is not None else []
    snap.state = SHUTTING_DOWN if broker._stopping else RUNNING if broker.servers else STARTING
    fs = getattr(broker, "fetch_sessions", None)
    snap.fetch_sessions = (fs.num_sessions, fs.num_partitions, fs.evictions) if fs is not None \
        else (0, 0, 0)
    snap.quotas = _quota_values(broker)
    rq = broker.request_quota
    snap.exempt_request_time = rq.exempt_time.rate(rq.clock()) if rq is not None else None
    rm = getattr(getattr(broker, "replicas", None), "replication", None)     # cluster mode only
    snap.replication_throttle_rates = (rm.leader_quota.current_rate(), rm.follower_quota.current_rate()) \
        if rm is not None and getattr(rm, "leader_quota", None) is not None else None
    snap.groups, snap.group_epoch_bumps = _group_counts(broker)
    share = getattr(broker, "share", None)
    snap.share_sessions = (len(share.sessions), sum(len(s.partitions) for s in share.sessions.values())) \
        if share is not None else (0, 0)
    lm = getattr(broker, "log_manager", None)
    snap.offline_dirs = len(lm.offline_dirs) if lm is not None else 0
    snap.cleaner = _cleaner_values(broker.log_cleaner) if getattr(broker, "log_cleaner", None) else None
    # kafka.log:type=Log, one tuple per log this broker holds (not the future copy of a log
    # being moved to another log dir)
    snap.log_gauges = sorted((t, p, lg.size(), len(lg.segments), lg.log_start_offset, lg.log_end_offset)
                             for (t, p), lg in list(lm.logs.items()) if not lg.closed) if lm is not None else []
    cm = getattr(broker, "client_metrics", None)
    if cm is not None:
        cm.expire()
    snap.client_metrics = (len(cm.instances), cm.unknown_subscription_requests, cm.throttled, cm.plugin_exports,
                           cm.plugin_export_seconds, cm.plugin_errors) if cm is not None else None
    # what telemetry receivers serve (broker/telemetry_prometheus.py)
    snap.client_series = [s for r in (cm.receivers if cm is not None else ())
                          if callable(getattr(r, "prometheus_snapshot", None)) for s in r.prometheus_snapshot()]
    return snap


def _replication_factor(ctrl, part) -> int:
    """Kafka's replicationFactor of a partition: its replicas but those a reassignment is still
    adding (Kafka's SimpleAssignmentState), from the controller's view of the partition."""
    info = ctrl.topic(part.topic) if ctrl is not None else None
    st = info.partitions.get(part.partition) if info is not None else None
    adding = getattr(st, "adding_replicas", None) or ()
    return len([r for r in part.replicas if r not in adding]) if adding else len(part.replicas)


def _cleaner_values(c) -> tuple:
    """Kafka's LogCleaner and LogCleanerManager gauges, from ``storage.cleaner.LogCleaner``:
    the maxima are over the cleaner threads' last passes, as Kafka takes them."""
    stats = list(c.last_stats.values())
    read = sum(s.bytes_read for s in stats)
    written = sum(s.bytes_written for s in stats)
    return (int(max((s.buffer_utilization for s in stats), default=0.0) * 100),
            int(100 * written / max(read, 1)),
            int(max((s.elapsed for s in stats), default=0.0)),
            int(max(c.last_delay_ms.values(), default=0) / 1000),
            c.dead_threads,
            int(100 * c.dirtiest_ratio),
            max(0, int(time.time() * 1000) - c.time_of_last_run),
            sorted(c.uncleanable_by_dir().items()))


CLASSIC_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
CONSUMER_STATES = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")
SHARE_STATES = ("Empty", "Stable", "Dead")
STREAMS_STATES = ("Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead")


def _group_counts(broker):
    """{(protocol, state): groups} over the groups this broker coordinates, and the rebalances
    (group epoch bumps) so far of the consumer and the streams protocol: {protocol: count}."""
    coord = getattr(broker, "groups", None)
    counts = {("classic", s): 0 for s in CLASSIC_STATES}
    counts.update({("consumer", s): 0 for s in CONSUMER_STATES})
    counts.update({("streams", s): 0 for s in STREAMS_STATES})
    if coord is None:
        return counts, {"consumer": 0, "streams": 0}
    for g in coord.groups.values():
        proto = g.modern.kind if g.modern is not None else "classic"
        counts[(proto, g.state)] = counts.get((proto, g.state), 0) + 1
    counts.update({("share", s): 0 for s in SHARE_STATES})
    share = getattr(broker, "share", None)
    if share is not None and share.enabled():
        for _, state in share.list_groups():
            counts[("share", state)] = counts.get(("share", state), 0) + 1
    return counts, {"consumer": getattr(coord, "consumer_rebalances", 0),
                    "streams": getattr(coord, "streams_rebalances", 0)}


def _quota_values(broker) -> list:
    """Per-client quota metrics (Kafka's Produce / Fetch / Request / ControllerMutation
    groups): only while a quota of that type is configured, as Kafka records nothing otherwise."""
    out = []
    for mgr, group, rate_name in ((broker.produce_quota, "produce", "byte_rate"),
                                  (broker.fetch_quota, "fetch", "byte_rate"),
                                  (broker.request_quota, "request", "request_time"),
                                  (broker.mutation_quota, "controllermutation", "mutation_rate")):
        if mgr is None:
            continue
        rows = mgr.metric_values()
        tokens = [mgr.tokens(tags) for tags, _, _ in rows] if group == "controllermutation" else None
        out.append((group, rate_name, rows, tokens))
    return out


def _quota_sample(family, tags: tuple, value: float) -> None:
    """A quota series: user / client_id labels, or a quota callback's own tags as labels."""
    from broker.quota_callback import is_user_client, metric_labels
    if is_user_client(tags):
        family.add_metric(list(tags), value)
    else:
        family.samples.append(Sample(family.name, metric_labels(tags), value))


_TOPIC_FAMILIES = (     # in the order of _Snapshot.topics' tuples
    ("messagesin", "Records appended by Produce requests (MessagesInPerSec)."),
    ("bytesin", "Record bytes received in Produce requests from clients (BytesInPerSec)."),
    ("bytesout", "Record bytes sent in Fetch responses to consumers (BytesOutPerSec)."),
    ("bytesrejected", "Record bytes refused as too large (BytesRejectedPerSec)."),
    ("totalproducerequests", "Produce partition requests, one per partition in a request (TotalProduceRequestsPerSec)."),
    ("failedproducerequests", "Produce partition requests that failed unexpectedly (FailedProduceRequestsPerSec)."),
    ("totalfetchrequests", "Fetch partition requests, consumers and followers (TotalFetchRequestsPerSec)."),
    ("failedfetchrequests", "Fetch partition requests that failed unexpectedly (FailedFetchRequestsPerSec)."),
    ("producemessageconversions", "Records rewritten on produce: legacy messages made v2, batches stored in "
                                  "the topic's compression.type (ProduceMessageConversionsPerSec)."),
    ("fetchmessageconversions", "Records down-converted to legacy message sets for Fetch v0-3 "
                                "(FetchMessageConversionsPerSec)."),
)
# Kafka's all-topics meters of records refused on produce, by why (BrokerTopicMetrics)
INVALID_KINDS = {
    "no_key_compacted": ("nokeycompactedtopicrecords", "Records without a key refused by compacted topics "
                                                       "(NoKeyCompactedTopicRecordsPerSec)."),
    "invalid_message_crc": ("invalidmessagecrcrecords", "Batches refused for a CRC that does not match "
                                                        "(InvalidMessageCrcRecordsPerSec)."),
    "invalid_magic_number": ("invalidmagicnumberrecords", "Batches refused for an unknown or mixed magic "
                                                          "(InvalidMagicNumberRecordsPerSec)."),
    "invalid_offset_or_sequence": ("invalidoffsetorsequencerecords", "Batches refused for an offset range, record "
                                                                     "count or sequence that does not hold "
                                                                     "(InvalidOffsetOrSequenceRecordsPerSec)."),
}
_QUOTA_RATE_DOC = {
    "produce": "Record bytes per second this client (or the user / client id sharing its quota) "
               "produced, over the quota windows (byte-rate).",
    "fetch": "Record bytes per second answered to this client's fetches, over the quota windows (byte-rate).",
    "request": "Percent of one second of event-loop time this client's requests took, per second, over "
               "the quota windows (request-time).",
    "controllermutation": "Partitions created or deleted per second by this client, over the quota windows "
                          "(mutation-rate).",
}
_BOUNDS = tuple(repr(b) for b in LATENCY_BUCKETS) + ("+Inf",)


def families(snap: _Snapshot):
    """The metric families of a snapshot (any thread)."""
    # kafka.server:type=BrokerTopicMetrics
    for i, (short, doc) in enumerate(_TOPIC_FAMILIES):
        fam = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{short}", doc, labels=["topic"])
        for topic, values in snap.topics:
            fam.add_metric([topic], values[i])
        yield fam
    for kind, (short, doc) in INVALID_KINDS.items():
        yield CounterMetricFamily(f"kafka_server_brokertopicmetrics_{short}", doc,
                                  value=snap.invalid_records.get(kind, 0))
    yield CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesin",
                              "Record bytes this broker's replica fetchers received from leaders "
                              "(ReplicationBytesInPerSec).", value=snap.replication_bytes_in)
    yield CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesout",
                              "Record bytes sent to follower replicas in Fetch responses "
                              "(ReplicationBytesOutPerSec).", value=snap.replication_bytes_out)

    # kafka.network:type=RequestMetrics
    reqs = CounterMetricFamily("kafka_network_requestmetrics_requests",
                               "Requests handled, by request name; fetches are FetchConsumer or "
                               "FetchFollower (RequestsPerSec).", labels=["request"])
    hist = HistogramMetricFamily("kafka_network_requestmetrics_totaltime_seconds",
                                 "Time from receiving a request to its response being ready, "
                                 "long-poll and acks=all waits included (TotalTimeMs).", labels=["request"])
    for name, count, seconds, counts in snap.requests:
        reqs.add_metric([name], count)
        cum, buckets = 0, []
        for le, n in zip(_BOUNDS, counts):
            cum += n
            buckets.append((le, cum))
        hist.add_metric([name], buckets, seconds)
    yield reqs
    yield hist
    yield GaugeMetricFamily("kafka_network_requestchannel_requestqueuesize",
                            "Requests received and waiting to be handled (RequestQueueSize).", value=snap.queued)

    # kafka.server:type=ReplicaManager
    partitions, leaders, under, under_min, at_min = snap.replica
    g = "kafka_server_replicamanager_"
    yield GaugeMetricFamily(g + "partitioncount", "Partitions with a replica on this broker (PartitionCount).",
                            value=partitions)
    yield GaugeMetricFamily(g + "leadercount", "Partitions this broker leads (LeaderCount).", value=leaders)
    yield GaugeMetricFamily(g + "underreplicatedpartitions",
                            "Led partitions whose ISR is smaller than the replica set "
                            "(UnderReplicatedPartitions).", value=under)
    yield GaugeMetricFamily(g + "underminisrpartitioncount",
                            "Led partitions whose ISR is below min.insync.replicas "
                            "(UnderMinIsrPartitionCount).", value=under_min)
    yield GaugeMetricFamily(g + "atminisrpartitioncount",
                            "Led partitions whose ISR is exactly min.insync.replicas "
                            "(AtMinIsrPartitionCount).", value=at_min)
    yield CounterMetricFamily(g + "isrshrinks", "Times a led partition's ISR lost replicas (IsrShrinksPerSec).",
                              value=snap.isr_shrinks)
    yield CounterMetricFamily(g + "isrexpands", "Times a led partition's ISR gained replicas (IsrExpandsPerSec).",
                              value=snap.isr_expands)

    yield from _per_partition_families(snap)

    # kafka.controller:type=KafkaController
    active, offline, imbalance, topics, total = snap.controller
    c = "kafka_controller_kafkacontroller_"
    yield GaugeMetricFamily(c + "activecontrollercount",
                            "1 on the broker that is the active controller, else 0 "
                            "(ActiveControllerCount; sum over the cluster should be 1).", value=active)
    yield GaugeMetricFamily(c + "offlinepartitionscount",
                            "Partitions without a live leader; reported by the active controller only "
                            "(OfflinePartitionsCount).", value=offline)
    yield GaugeMetricFamily(c + "preferredreplicaimbalancecount",
                            "Partitions whose leader is not the preferred replica; active controller only "
                            "(PreferredReplicaImbalanceCount).", value=imbalance)
    yield GaugeMetricFamily(c + "globaltopiccount", "Topics in the cluster; active controller only "
                            "(GlobalTopicCount).", value=topics)
    yield GaugeMetricFamily(c + "globalpartitioncount", "Partitions in the cluster; active controller only "
                            "(GlobalPartitionCount).", value=total)

    # kafka.server:type=group-coordinator-metrics (Kafka's new group coordinator, KIP-848)
    gc = "kafka_server_group_coordinator_metrics_"
    fam = GaugeMetricFamily(gc + "group_count", "Groups this broker coordinates, by protocol (group-count).",
                            labels=["protocol"])
    for proto in ("classic", "consumer", "share", "streams"):
        fam.add_metric([proto], sum(n for (p, _), n in snap.groups.items() if p == proto))
    yield fam
    for proto in ("classic", "consumer", "share", "streams"):
        fam = GaugeMetricFamily(gc + f"{proto}_group_count", f"{proto.capitalize()} groups by state "
                                f"({proto}-group-count).", labels=["state"])
        for (p, state), n in sorted(snap.groups.items()):
            if p == proto:      # Kafka's lower-case state names (NotReady: not_ready)
                fam.add_metric(["not_ready" if state == "NotReady" else state.lower()], n)
        yield fam
    for proto in ("consumer", "streams"):
        yield CounterMetricFamily(gc + f"{proto}_group_rebalance", f"Group epoch bumps of {proto}-protocol groups "
                                  f"({proto}-group-rebalance-count).", value=snap.group_epoch_bumps[proto])

    # kafka.server:type=socket-server-metrics, kafka.server:type=KafkaServer
    fam = GaugeMetricFamily("kafka_server_socketservermetrics_connection_count",
                            "Open client connections, by listener (connection-count).", labels=["listener"])
    for name, n in snap.connections:
        fam.add_metric([name], n)
    yield fam
    fam = GaugeMetricFamily("kafka_server_socketservermetrics_connection_accept_rate",
                            "Connections accepted per second over the quota windows, by listener "
                            "(connection-accept-rate; what max.connection.creation.rate limits).",
                            labels=["listener"])
    for name, r, *_ in snap.accept_rates:
        fam.add_metric([name], r)
    yield fam
    for i, fname, doc in (
            (2, "kafka_network_acceptor_blocked_seconds", "Seconds the listener did not accept because "
             "of max.connections or a creation rate (AcceptorBlockedPercent, as time)."),
            (3, "kafka_server_socketservermetrics_connection_accept_throttle_time", "Mean non-zero delay in "
             "ms before accepting, for the broker or listener creation rate, over the quota windows; NaN "
             "when none (connection-accept-throttle-time)."),
            (4, "kafka_server_socketservermetrics_ip_connection_accept_throttle_time", "Mean non-zero "
             "delay in ms before closing a connection over its IP's connection_creation_rate; NaN when "
             "none (ip-connection-accept-throttle-time).")):
        if i == 2:
            fam = CounterMetricFamily(fname, doc, labels=["listener"])
        else:
            fam = GaugeMetricFamily(fname, doc, labels=["listener"])
        for row in snap.accept_rates:
            fam.add_metric([row[0]], row[i])
        yield fam
    # kafka.server:type=Produce|Fetch|Request|ControllerMutation,user=U,client-id=C
    for group, rate_name, rows, tokens in snap.quotas:
        what = _QUOTA_RATE_DOC[group]
        rate = GaugeMetricFamily(f"kafka_server_{group}_{rate_name}", what, labels=["user", "client_id"])
        thr = GaugeMetricFamily(f"kafka_server_{group}_throttle_time",
                                "Mean throttle time in ms of this client's throttled requests over the quota "
                                "windows, NaN when none was throttled (throttle-time).",
                                labels=["user", "client_id"])
        for tags, value, throttle_ms in rows:
            _quota_sample(rate, tags, value)
            _quota_sample(thr, tags, throttle_ms)
        yield rate
        yield thr
        if tokens is not None:
            tok = GaugeMetricFamily("kafka_server_controllermutation_tokens",
                                    "Credits left in this client's mutation token bucket (tokens).",
                                    labels=["user", "client_id"])
            for (tags, _, _), t in zip(rows, tokens):
                _quota_sample(tok, tags, t)
            yield tok
    # kafka.server:type=Request exempt-request-time
    if snap.replication_throttle_rates is not None:
        # kafka.server:type=LeaderReplication / FollowerReplication, name=byte-rate
        for kind, rate in zip(("leader", "follower"), snap.replication_throttle_rates):
            yield GaugeMetricFamily(f"kafka_server_{kind}replication_byte_rate",
                                    f"Bytes per second of throttled replicas' data this broker "
                                    f"{'sent to followers' if kind == 'leader' else 'fetched as a follower'}, "
                                    f"over the replication quota windows ({kind}.replication.throttled.rate "
                                    f"caps it).", value=rate)
    if snap.exempt_request_time is not None:
        yield GaugeMetricFamily("kafka_server_request_exempt_request_time",
                                "Time of requests exempt from the request quota (inter-broker, follower "
                                "fetches, acks=0 produces, SASL) in percent of one second per second over "
                                "the quota windows (exempt-request-time).", value=snap.exempt_request_time)
    # kafka.server:type=ShareSessionCache (KIP-932)
    yield GaugeMetricFamily("kafka_server_sharesessioncache_sharesessioncount",
                            "Share sessions in the cache (ShareSessionCount).", value=snap.share_sessions[0])
    yield GaugeMetricFamily("kafka_server_sharesessioncache_sharepartitionscount",
                            "Partitions in all the cached share sessions (SharePartitionsCount).",
                            value=snap.share_sessions[1])
    # kafka.server:type=FetchSessionCache
    sessions, cached, evictions = snap.fetch_sessions
    yield GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                            "Incremental fetch sessions in the cache (NumIncrementalFetchSessions).",
                            value=sessions)
    yield GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                            "Partitions in all the cached fetch sessions "
                            "(NumIncrementalFetchPartitionsCached).", value=cached)
    yield CounterMetricFamily("kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
                              "Fetch sessions evicted to make room for new ones "
                              "(IncrementalFetchSessionEvictionsPerSec).", value=evictions)
    yield GaugeMetricFamily("kafka_log_logmanager_offlinelogdirectorycount",
                            "Log dirs taken offline after an I/O error (OfflineLogDirectoryCount).",
                            value=snap.offline_dirs)
    yield from _cleaner_families(snap)
    yield from _client_metric_families(snap)
    yield GaugeMetricFamily("kafka_server_kafkaserver_brokerstate",
                            "Broker state as Kafka numbers it: 1 starting, 3 running, 7 shutting down "
                            "(BrokerState).", value=snap.state)


_PARTITION_GAUGES = (
    ("underreplicated", "1 when this broker leads the partition and its ISR is smaller than the "
                        "replica set (UnderReplicated)"),
    ("insyncreplicascount", "ISR size, on the leader; 0 elsewhere (InSyncReplicasCount)"),
    ("replicascount", "Replica count, on the leader; 0 elsewhere (ReplicasCount)"),
    ("underminisr", "1 when the leader's ISR is below min.insync.replicas (UnderMinIsr)"),
    ("atminisr", "1 when the leader's ISR is exactly min.insync.replicas (AtMinIsr)"),
    ("laststableoffsetlag", "High watermark minus last stable offset: how far open transactions hold "
                            "read_committed consumers back (LastStableOffsetLag)"),
)
_LOG_GAUGES = (
    ("size", "Bytes of the partition's log segments on disk (Size)"),
    ("numlogsegments", "Segments of the log (NumLogSegments)"),
    ("logstartoffset", "First offset of the log (LogStartOffset)"),
    ("logendoffset", "Offset the next record appended gets (LogEndOffset)"),
)


def _per_partition_families(snap: _Snapshot):
    """kafka.cluster:type=Partition and kafka.log:type=Log, labelled topic and partition."""
    for i, (name, doc) in enumerate(_PARTITION_GAUGES):
        fam = GaugeMetricFamily("kafka_cluster_partition_" + name, doc + ".", labels=["topic", "partition"])
        for row in snap.partition_gauges:
            fam.add_metric([row[0], str(row[1])], row[2 + i])
        yield fam
    for i, (name, doc) in enumerate(_LOG_GAUGES):
        fam = GaugeMetricFamily("kafka_log_log_" + name, doc + ".", labels=["topic", "partition"])
        for row in snap.log_gauges:
            fam.add_metric([row[0], str(row[1])], row[2 + i])
        yield fam


def _cleaner_families(snap: _Snapshot):
    """kafka.log:type=LogCleaner and type=LogCleanerManager (only while the cleaner runs, as
    Kafka registers them with it)."""
    if snap.cleaner is None:
        return
    util, recopy, clean_secs, delay_secs, dead, dirty, since_ms, dirs = snap.cleaner
    for name, doc, value in (
            ("logcleaner_max_buffer_utilization_percent",
             "Largest share of its offset map a cleaner thread filled in its last pass "
             "(max-buffer-utilization-percent).", util),
            ("logcleaner_cleaner_recopy_percent",
             "Bytes written per 100 bytes read in the threads' last passes (cleaner-recopy-percent).",
             recopy),
            ("logcleaner_max_clean_time_secs",
             "Longest last pass of a cleaner thread, in seconds (max-clean-time-secs).", clean_secs),
            ("logcleaner_max_compaction_delay_secs",
             "Longest time a log's oldest dirty data was past max.compaction.lag.ms when a thread "
             "last picked a log (max-compaction-delay-secs).", delay_secs),
            ("logcleaner_deadthreadcount", "Cleaner threads that died (DeadThreadCount).", dead),
            ("logcleanermanager_max_dirty_percent",
             "Dirty ratio of the dirtiest compacted log at the last look (max-dirty-percent).", dirty),
            ("logcleanermanager_time_since_last_run_ms",
             "Milliseconds since a cleaner thread last looked for a log to clean "
             "(time-since-last-run-ms).", since_ms)):
        yield GaugeMetricFamily("kafka_log_" + name, doc, value=value)
    count = GaugeMetricFamily("kafka_log_logcleanermanager_uncleanable_partitions_count",
                              "Partitions of the log dir the cleaner gave up on after an error "
                              "(uncleanable-partitions-count).", labels=["logDirectory"])
    nbytes = GaugeMetricFamily("kafka_log_logcleanermanager_uncleanable_bytes",
                               "Cleanable bytes of those partitions (uncleanable-bytes).",
                               labels=["logDirectory"])
    for d, (n, b) in dirs:
        count.add_metric([os.path.abspath(d)], n)
        nbytes.add_metric([os.path.abspath(d)], b)
    yield count
    yield nbytes


def _client_metric_families(snap: _Snapshot):
    """Kafka's client-metrics group (KIP-714, broker/client_metrics.py) and the series a telemetry
    receiver serves."""
    if snap.client_metrics is not None:
        instances, unknown, throttled, exports, export_s, errors = snap.client_metrics
        c = "kafka_server_client_metrics_"
        yield GaugeMetricFamily(c + "instance_count", "Client instances the broker keeps telemetry state for "
                                "(instance-count).", value=instances)
        yield CounterMetricFamily(c + "unknown_subscription_request", "Pushes with a stale or unknown "
                                  "subscription id (unknown-subscription-request).", value=unknown)
        yield CounterMetricFamily(c + "throttle", "Telemetry requests answered THROTTLING_QUOTA_EXCEEDED "
                                  "(throttle).", value=throttled)
        yield CounterMetricFamily(c + "plugin_export", "Pushes handed to the receivers (plugin-export).",
                                  value=exports)
        yield CounterMetricFamily(c + "plugin_export_time_seconds", "Time the receivers took with them.",
                                  value=export_s)
        yield CounterMetricFamily(c + "plugin_error", "Pushes a receiver failed on (plugin-error).", value=errors)
    by_name: dict[str, Metric] = {}
    for name, kind, doc, labels, value in snap.client_series:
        if kind == "counter" and name.endswith("_total"):
            name = name[:-6]        # the family's name; its sample gets the _total back
        fam = by_name.get(name)
        if fam is None:
            fam = by_name[name] = Metric(name, doc or f"Pushed by clients ({name}).", kind)
        elif fam.type != kind:
            continue            # one family, one type: the first seen wins
        fam.add_sample(name + ("_total" if kind == "counter" else ""), labels, value)
    yield from by_name.values()


class _BrokerCollector:
    """The broker's families for the registry.  An HTTP scrape takes the snapshot on the loop
    and encodes in a worker thread, handing the snapshot over in a thread-local; any other caller
    of ``registry.collect()`` must be on the loop (the snapshot is then taken here)."""

    def __init__(self, metrics: BrokerMetrics):
        self.m = metrics
        self.local = threading.local()

    def describe(self):
        return []       # names are not registered up front: the families vary with the topics

    def collect(self):
        snap = getattr(self.local, "snapshot", None)
        return families(snap if snap is not None else take_snapshot(self.m))


def _live_brokers(ctrl) -> set[int]:
    live = getattr(ctrl, "live_broker_ids", None)
    if live is not None:
        return set(live())
    return {b.id for b in ctrl.brokers()}


def _listener_names(broker) -> list[str]:
    try:
        return [ep.listener_name for ep in broker.config.listeners()]
    except Exception:
        return []


async def start_metrics(broker) -> BrokerMetrics | None:
    """The broker's metrics with their HTTP endpoint started, or None when disabled
    (``odradek.metrics.prometheus.port`` < 0)."""
    cfg = broker.config
    port = cfg.get("odradek.metrics.prometheus.port")
    if port is None or port < 0:
        return None
    metrics = BrokerMetrics(broker)
    await metrics.start(cfg.get("odradek.metrics.prometheus.host") or "", port)
    return metrics

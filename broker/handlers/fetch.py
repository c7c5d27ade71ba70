"""Fetch (key 1), v0-18.

v0-3 consumers need legacy message sets (magic 0 for v0-1, magic 1 for v2-3): batches are
down-converted per partition unless ``message.downconversion.enable`` is false (then
UNSUPPORTED_VERSION for that partition).  v3+ ``max_bytes`` (KIP-74: the first partition with
data always gets at least one whole batch; a later one whose first batch does not fit in what
is left gets no records, Kafka's ``firstEntryIncomplete`` rule).  v4+ isolation level, last stable offset and aborted
transactions.  v5+ log start offset.  v7+ incremental fetch sessions (KIP-227,
``broker/fetch_session.py``): the request's session id and epoch pick the partitions read, and
an incremental answer carries only the partitions with news.  v9+ current leader
epoch checks.  v11+ rack id / preferred read replica: with ``replica.selector.class`` set, the
leader names the replica a consumer should read (``broker/replica_selector.py``) and answers that
partition with no records; from v11 a consumer may read a follower (KIP-392), up to that
replica's high watermark.  v12+ flexible, and a fetcher may name
the epoch of its last batch (``last_fetched_epoch``): if its log parted from this one, the
partition is answered a diverging epoch (where to truncate) in place of records, at once, and a
follower's fetch so answered does not count as its position (``_diverging``).  An offset
outside the log is OFFSET_OUT_OF_RANGE with the watermarks and log start offset -1, as Kafka
answers it (the fetcher asks ListOffsets for the bounds).  v13+ topic ids
instead of names.  v15+ replica state in place of replica id.  v16 (KIP-951): a partition
answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries its current leader and the answer
that leader's endpoint (``leader_hints.py``).  v17 (KIP-853) adds a follower's
directory id as a tagged field; Kafka's brokers use it only between KRaft voters, so it is read
and ignored here, as a Kafka 3.9 broker does for a fetch of a partition.  v18 (KIP-1166) adds the
fetcher's high watermark, another tagged field that only KRaft voters read; ignored too.

Replica fetches (replica id set, cluster mode) are subject to the leader replication throttle
(``broker/quota.py``): while the leader quota is exceeded, throttled partitions of a follower
outside the ISR are answered without records (offsets and watermarks still filled in); the bytes
sent for throttled partitions are counted once the answer is final.

Records are answered as file regions (``storage.segment.FileRegion``), not bytes: the
connection writes the response header and then the region.  A fetch that finds fewer than
``min_bytes`` parks until an append to one of its partitions wakes it, or ``max_wait_ms`` passes.
"""
from __future__ import annotations

import asyncio
import time

from broker.configdefs import LONG_MAX
from broker.dispatch import handler
from broker.endpoints import on_listener
from broker.fetch_session import FetchContext, new_context, records_size
from broker.handlers.leader_hints import FETCH_HINTED, add_hints
from broker.replica import not_leader_error, wait_for_wake
from broker.replication import now_ms
from broker.security import acl as A
from protocol import records as rec
from protocol.errors import ErrorCode as E
from protocol.messages import FetchResponse
from protocol.primitives import UUID0
from storage.errors import OffsetOutOfRangeError

R = FetchResponse
READ_COMMITTED = 1


def _read_all(ctx, req, plan, follower=False, throttled=None, conversions=None):
    """One pass over the requested partitions; returns (responses, bytes found).
    A follower (replica fetch) reads up to the log end offset, consumers up to the HW/LSO.
    ``throttled(part)`` true: answer that partition without records (replication throttle).
    ``conversions``: topic -> records down-converted for Fetch v0-3, added to."""
    v = ctx.api_version
    remaining = req.max_bytes if v >= 3 else 0x7FFFFFFF
    total = 0
    responses = []
    isolation = req.isolation_level
    me = ctx.broker.broker_id
    chooser = _chooser(ctx, req) if not follower and v >= 11 else None
    for topic, info, terr, parts in plan:
        out = []
        for fp, part, cp in parts:
            if cp is not None and part is not None and not terr and (chooser is None or not part.is_leader) \
                    and _unchanged(cp, fp, part, v, isolation, follower, me):
                continue        # (with a replica selector the leader asks it every time, as Kafka)
            pd = R.PartitionData(partition_index=fp.partition, error_code=0, high_watermark=-1,
                                 last_stable_offset=-1, log_start_offset=-1,
                                 aborted_transactions=None if v < 4 else [],
                                 preferred_read_replica=-1, records=b"")
            out.append(pd)
            if terr:
                pd.error_code = terr
                continue
            if part is None:
                pd.error_code = (E.UNKNOWN_TOPIC_OR_PARTITION if fp.partition not in info.partitions
                                 else E.NOT_LEADER_OR_FOLLOWER)
                continue
            if not part.is_leader and (follower or v < 11 or part.offline or part.log is None):
                # from v11 a consumer may read a follower, up to that follower's high watermark
                # (KIP-392; Kafka serves any hosted replica then, though it names no preferred one)
                pd.error_code = not_leader_error(part)
                continue
            if v >= 9:
                pd.error_code = part.check_leader_epoch(fp.current_leader_epoch)
                if pd.error_code:
                    continue
            lg = part.log
            if v < 10 and not follower and lg.config.compression_type == "zstd":
                pd.error_code = E.UNSUPPORTED_COMPRESSION_TYPE      # as Kafka's maybeConvertFetchedData
                continue
            hw = part.high_watermark
            lso = lg.last_stable_offset()
            pd.high_watermark = hw
            pd.last_stable_offset = lso
            pd.log_start_offset = lg.log_start_offset
            if chooser is not None and part.is_leader:
                pd.preferred_read_replica = chooser(part, fp.fetch_offset)
                if pd.preferred_read_replica >= 0:
                    continue            # the consumer reads there (KIP-392): no records from here
            if v >= 12 and not _agrees(lg, fp, cp):
                div = _diverging(lg, fp)
                if isinstance(div, int):
                    _out_of_range(pd)
                else:
                    pd.diverging_epoch = div
                continue
            if throttled is not None and throttled(part):
                continue
            limit = lg.log_end_offset if follower else (lso if req.isolation_level == READ_COMMITTED else hw)
            max_bytes = min(fp.partition_max_bytes, remaining) if v >= 3 else fp.partition_max_bytes
            try:
                data = lg.read(fp.fetch_offset, max(max_bytes, 0), max_offset=limit,
                               min_one_message=(total == 0 or v < 3), whole_first=v >= 3)
            except OffsetOutOfRangeError:
                _out_of_range(pd)
                continue
            if not data.regions:
                pd.records = b""
                continue
            if v < 4:
                if not lg.config.message_downconversion_enable:
                    pd.error_code = E.UNSUPPORTED_VERSION
                    continue
                raw = data.read()
                pd.records = rec.v2_to_legacy(raw, 0 if v < 2 else 1)
                size = len(pd.records)
                if conversions is not None:
                    conversions[topic.topic] = conversions.get(topic.topic, 0) + sum(
                        h.records_count for h in rec.iter_batches(raw) if not h.is_control)
            else:
                region = data.regions[0] if len(data.regions) == 1 else _Joined(data.regions)
                pd.records = region
                size = region.length
            if req.isolation_level == READ_COMMITTED and v >= 4 and not follower:
                pd.aborted_transactions = _aborted(lg, fp.fetch_offset, limit)
            total += size
            remaining -= size
        responses.append(R.FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id,
                                                  partitions=out))
    return responses, total


def _chooser(ctx, req):
    """(partition, fetch offset) -> the replica ``replica.selector.class`` names for this
    consumer, or -1; None when no selector is configured (broker/replica_selector.py)."""
    broker = ctx.broker
    selector = getattr(broker, "replica_selector", None)
    if selector is None or broker.replicas.replication is None:
        return None
    from broker import replica_selector as RS
    conn = ctx.connection
    client = RS.ClientMetadata(req.rack_id or "", ctx.client_id or "", ctx.client_host or "",
                               ctx.principal, conn.listener_name)
    endpoints = None
    now = _now_ms()

    def choose(part, fetch_offset):
        nonlocal endpoints
        if endpoints is None:
            endpoints = {b.id: RS.Endpoint(b.id, host, port, b.rack)
                         for b, host, port in on_listener(broker, conn.listener_name)}
        return RS.preferred_read_replica(broker, selector, part, client, fetch_offset, now, endpoints)
    return choose


def _out_of_range(pd) -> None:
    """OFFSET_OUT_OF_RANGE as Kafka answers it: no watermarks or log start offset (-1); the
    fetcher asks ListOffsets where the log begins and ends."""
    pd.error_code = E.OFFSET_OUT_OF_RANGE
    pd.high_watermark = pd.last_stable_offset = pd.log_start_offset = -1


def _diverging(lg, fp):
    """v12+ truncation on fetch (KIP-595, what Kafka's followers use instead of
    OffsetForLeaderEpoch): the fetcher names the epoch of the last batch it holds.  None when
    this log agrees with it up to the fetch offset; OFFSET_OUT_OF_RANGE when this log cannot
    say where that epoch ends, or the fetch offset is below the log start; else the epoch and
    end offset to truncate to, answered in place of records."""
    if fp.last_fetched_epoch == lg.epoch_cache.latest_epoch and \
            lg.log_start_offset <= fp.fetch_offset <= lg.log_end_offset:
        return None         # the common case, cheaply: the epoch of this log's end
    epoch, end = lg.end_offset_for_epoch(fp.last_fetched_epoch)
    if epoch < 0 or end < 0 or fp.fetch_offset < lg.log_start_offset:
        return E.OFFSET_OUT_OF_RANGE
    if epoch < fp.last_fetched_epoch or end < fp.fetch_offset:
        return R.EpochEndOffset(epoch=epoch, end_offset=end)
    return None


def _agrees(lg, fp, cp) -> bool:
    """No diverging epoch (nor OFFSET_OUT_OF_RANGE for it) for the request entry ``fp``.  A
    session partition remembers the entry it found agreeing (``agreed``): a quiet partition of a
    follower's session is checked when its entry changes, not on every fetch."""
    if fp.last_fetched_epoch < 0 or (cp is not None and cp.agreed is fp):
        return True
    if _diverging(lg, fp) is not None:
        return False
    if cp is not None:
        cp.agreed = fp
    return True


def _unchanged(cp, fp, part, v, isolation_level, follower, broker_id) -> bool:
    """Whether a partition of an incremental fetch session has nothing to tell: no records past
    its fetch position, and the high watermark and log start offset its client last saw.  Such
    a partition is left out of the answer (KIP-227) before anything is built for it; with a
    thousand quiet partitions that is most of the fetch (attributes are read directly here:
    this runs for every partition of every session fetch)."""
    if part.leader_id != broker_id:
        return False
    if v >= 9:
        epoch = fp.current_leader_epoch
        if epoch != -1 and epoch != part.leader_epoch:
            return False
    lg = part.log
    hw = lg.high_watermark
    if hw != cp.high_watermark or lg.log_start_offset != cp.log_start_offset:
        return False
    if v >= 12 and not _agrees(lg, fp, cp):
        return False        # _read_all answers where it diverged
    if follower:
        return fp.fetch_offset == lg.log_end_offset
    return fp.fetch_offset == (lg.last_stable_offset() if isolation_level == READ_COMMITTED else hw)


def _aborted(lg, start, end):
    collect = getattr(lg, "aborted_transactions", None)
    if collect is None:
        return []
    return [R.AbortedTransaction(producer_id=pid, first_offset=first)
            for pid, first in collect(start, end)]


class _Joined:
    """Several regions answered as one records field."""

    def __init__(self, regions):
        self.regions = regions
        self.length = sum(r.length for r in regions)

    def read(self):
        return b"".join(r.read() for r in self.regions)


class _Topic:
    """A topic of the fetch as answered: its name and id (either may be unknown)."""
    __slots__ = ("topic", "topic_id")

    def __init__(self, topic, topic_id):
        self.topic = topic
        self.topic_id = topic_id


def _plan(ctx, entries, follower_request: bool):
    """Group (topic name, topic id, request partition, session partition) entries into runs of
    one topic, each resolved: [(topic, info, topic error, [(request partition, replica or None,
    session partition or None)])].  Topics the principal may not READ (consumers, with an
    authorizer) come last, answered TOPIC_AUTHORIZATION_FAILED, as Kafka puts its erroneous
    partitions after the others."""
    broker = ctx.broker
    ctrl = broker.controller
    v = ctx.api_version
    check = ctx.authorizer is not None and not follower_request
    hosted = broker.replicas.partitions
    plan, denied = [], []
    run_key = object()
    parts = None
    for name, tid, fp, cp in entries:
        key = tid if v >= 13 else name
        if key != run_key or parts is None:
            run_key = key
            if v >= 13:
                info = ctrl.topic_by_id(tid) if tid != UUID0 else None
                terr = E.UNKNOWN_TOPIC_ID if info is None else 0
            else:
                info = ctrl.topic(name)
                terr = E.UNKNOWN_TOPIC_OR_PARTITION if info is None else 0
            topic = _Topic(info.name if info is not None else name,
                           info.topic_id if info is not None else tid)
            parts = []
            target = plan
            if check and (info is not None or v < 13) and \
                    not ctx.authorize(A.READ, A.TOPIC, topic.topic):
                terr, info, target = E.TOPIC_AUTHORIZATION_FAILED, None, denied
            target.append((topic, info, terr, parts))
        part = hosted.get((info.name, fp.partition)) if info is not None else None
        parts.append((fp, part, cp))
    return plan + denied


@handler(1, 0, 18)
async def fetch(ctx, req):
    broker = ctx.broker
    ctrl = broker.controller
    v = ctx.api_version
    replica_id = req.replica_state.replica_id if v >= 15 else req.replica_id
    resolve_id = (lambda tid: _name_of(ctrl, tid)) if v >= 13 else None
    sessions = broker.fetch_sessions
    fctx = new_context(sessions, v, req, replica_id >= 0, resolve_id, _now_ms())
    if fctx.kind == FetchContext.ERROR:
        return R(throttle_time_ms=0, error_code=fctx.error, session_id=0, responses=[])
    plan = _plan(ctx, fctx.entries, replica_id >= 0)
    follower = _replica_fetch(broker, req, v, plan)
    throttled = _leader_throttle(broker, req, v) if follower else None
    quota = None if follower else broker.fetch_quota        # client quotas: broker/client_quota.py
    if quota is not None and v >= 3:
        quota.cap_fetch(ctx, req)
    conversions = {} if v < 4 else None
    responses, total = _read_all(ctx, req, plan, follower, throttled, conversions)
    if total < req.min_bytes and req.max_wait_ms > 0 and not _must_answer(responses):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + req.max_wait_ms / 1000
        hosted = [p for _, _, _, parts in plan for _, p, _ in parts if p is not None]
        while total < req.min_bytes:
            remaining = deadline - loop.time()
            if remaining <= 0 or ctx.connection.closed or ctx.broker.stopping:
                break
            await wait_for_wake(hosted, deadline)
            conversions = {} if v < 4 else None
            responses, total = _read_all(ctx, req, plan, follower, throttled, conversions)
            if _must_answer(responses):
                break
    if throttled is not None:
        _record_throttled(broker.replicas.replication.leader_quota, responses)
    if quota is not None and quota.on_fetch(ctx, total):
        # over quota: answer nothing (the session, if any, learns nothing either)
        error, session_id = fctx.throttled(sessions)
        return R(throttle_time_ms=ctx.connection.throttle_ms, error_code=error,
                 session_id=session_id, responses=[])
    error, session_id, responses = fctx.finish(sessions, responses, _now_ms())
    if broker.metrics is not None:
        broker.metrics.fetched(responses, follower)
        for name, n in (conversions or {}).items():
            broker.metrics.fetch_converted(name, n)
    resp = R(throttle_time_ms=0, error_code=error, session_id=session_id, responses=responses)
    if v >= 16 and _has_error(responses):
        add_hints(ctx, resp, ((t.topic, p.partition_index, p) for t in responses for p in t.partitions),
                  FETCH_HINTED)
    return resp


def _name_of(ctrl, topic_id):
    info = ctrl.topic_by_id(topic_id) if topic_id != UUID0 else None
    return info.name if info is not None else None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _replica_fetch(broker, req, v, plan) -> bool:
    """A fetch from a follower broker (replica id set, cluster mode): record each follower's
    position with the leader (ISR and high watermark follow from it)."""
    replica_id = req.replica_state.replica_id if v >= 15 else req.replica_id
    repl = broker.replicas.replication
    if replica_id < 0 or repl is None:
        return False
    me = broker.broker_id
    now = now_ms()
    for _topic, _info, _terr, parts in plan:
        for fp, part, cp in parts:
            if part is None or part.leader_id != me:
                continue
            if v >= 9 and fp.current_leader_epoch >= 0 and fp.current_leader_epoch != part.leader_epoch:
                continue
            lg = part.log
            if lg is None or not lg.log_start_offset <= fp.fetch_offset <= lg.log_end_offset:
                continue        # answered OFFSET_OUT_OF_RANGE: no position, as in Kafka
            if v >= 12 and not _agrees(lg, fp, cp):
                continue        # its log ends elsewhere than ours: its offset is no position
            repl.on_follower_fetch(part, replica_id, fp.fetch_offset, now, fp.log_start_offset if v >= 5 else -1)
    return True


def _leader_throttle(broker, req, v):
    """The leader-side throttle check for this replica fetch, or None when no rate is set."""
    quota = broker.replicas.replication.leader_quota
    if quota.bound >= LONG_MAX:
        return None
    replica_id = req.replica_state.replica_id if v >= 15 else req.replica_id

    def throttled(part):
        return quota.should_throttle(part.topic, part.partition, replica_id in part.isr)
    return throttled


def _record_throttled(quota, responses):
    """Count the record bytes answered for throttled partitions against the leader quota."""
    size = 0
    for tr in responses:
        for pd in tr.partitions:
            n = records_size(pd.records)
            if n and quota.is_throttled(tr.topic, pd.partition_index):
                size += n
    quota.record(size)


def _has_error(responses):
    return any(pd.error_code for t in responses for pd in t.partitions)


def _must_answer(responses):
    """An error, a diverging epoch or a preferred read replica answers the fetch at once,
    whatever min_bytes says (as Kafka's fetchMessages)."""
    return any(pd.error_code or pd.diverging_epoch.epoch >= 0 or pd.preferred_read_replica >= 0
               for t in responses for pd in t.partitions)

"""Incremental fetch sessions (KIP-227), the broker's side.

A client that sends Fetch v7+ with session epoch 0 asks for a session: the broker answers the
full fetch and, when its cache has a slot, a session id.  The client's next fetches name that
id and the next epoch, and carry only the partitions whose fetch position or limits changed
(plus those to forget).  The broker reads every partition of the session, and answers only
those with something new: records, a changed high watermark or log start offset, or an error.
A consumer of a few partitions saves little; a Java consumer or a follower of thousands saves
the whole partition list in both directions on every fetch.

What follows Kafka's rules (``FetchSession.scala`` in Apache Kafka, read for behaviour):

* epoch -1 (final) with id 0: a plain sessionless fetch; epoch -1 or 0 with an id: that session
  is closed first; epoch 0: a new session when a slot is free or one can be evicted, otherwise
  the answer carries session id 0 and the client goes on sessionless;
* epoch > 0: FETCH_SESSION_ID_NOT_FOUND (70) for an unknown id, INVALID_FETCH_SESSION_EPOCH (71)
  for an epoch other than the session's, FETCH_SESSION_TOPIC_ID_ERROR (106) when the session was
  made with topic ids (v13+) and the request cannot name them or the other way round; each is
  a top-level error with no partitions;
* a session left with no partitions after its forgotten ones are removed is closed, and the
  request is answered sessionless;
* partitions that returned records move to the end of the session, so a partition that filled
  ``max_bytes`` does not starve the ones after it next time;
* the cache holds ``max.incremental.fetch.session.cache.slots`` sessions (default 1000).  A new
  session may evict one unused for 120 s; failing that, a session created over 120 s ago (or any
  consumer's session, when the new one is a follower's) that is smaller, or of equal size and
  smaller id.  Eligibility is settled when a session is used, as Kafka does.

Used from the event loop only.
"""
from __future__ import annotations

import random
from collections import OrderedDict

from protocol.errors import ErrorCode as E

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000       # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, not configurable


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


class CachedPartition:
    """One partition of a session: the fetch parameters last sent for it (``req``, the request's
    partition entry) and what the last answer told the client (high watermark, log start)."""
    __slots__ = ("topic", "topic_id", "req", "high_watermark", "log_start_offset", "agreed")

    def __init__(self, topic, topic_id, req):
        self.topic = topic          # name; None for a topic id this broker does not know
        self.topic_id = topic_id
        self.req = req
        self.high_watermark = -1
        self.log_start_offset = -1
        self.agreed = None          # the ``req`` whose last fetched epoch was found to agree with the log

    def must_respond(self, pd) -> bool:
        """Whether the answer ``pd`` for this partition is news to the client; it becomes what
        the client knows."""
        respond = records_size(pd.records) > 0
        if pd.high_watermark != self.high_watermark:
            self.high_watermark = pd.high_watermark
            respond = True
        if pd.log_start_offset != self.log_start_offset:
            self.log_start_offset = pd.log_start_offset
            respond = True
        if pd.error_code:
            self.high_watermark = -1        # sent again once the error is gone
            respond = True
        if pd.preferred_read_replica >= 0 or pd.diverging_epoch.epoch >= 0:
            respond = True                  # where to read (KIP-392), where to truncate (KIP-595)
        return respond


def records_size(records) -> int:
    """Bytes of a partition answer's records: bytes, a file region, or several joined."""
    if records is None:
        return 0
    n = getattr(records, "length", None)        # a file region, or several joined
    return len(records) if n is None else n


class FetchSession:
    __slots__ = ("id", "privileged", "partitions", "uses_topic_ids", "creation_ms",
                 "last_used_ms", "epoch", "cached_size", "evictable_by_all",
                 "evictable_by_privileged")

    def __init__(self, sid: int, privileged: bool, partitions: OrderedDict, uses_topic_ids: bool,
                 now_ms: int):
        self.id = sid
        self.privileged = privileged
        self.partitions = partitions        # key → CachedPartition, in fetch order
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = 0
        self.evictable_by_all = False
        self.evictable_by_privileged = False

    def evictable_key(self):
        return (self.privileged, self.cached_size, self.id)


def partition_key(uses_topic_ids: bool, topic_name, topic_id, partition: int):
    return (topic_id if uses_topic_ids else topic_name, partition)


class FetchSessionCache:
    def __init__(self, max_entries: int = 1000, eviction_ms: int = EVICTION_MS,
                 rng: random.Random | None = None):
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        self._rng = rng or random.Random()

    # -- figures (metrics) ----------------------------------------------------------------
    @property
    def num_sessions(self) -> int:
        return len(self.sessions)

    @property
    def num_partitions(self) -> int:
        return sum(s.cached_size for s in self.sessions.values())

    # -- lifecycle --------------------------------------------------------------------------
    def get(self, sid: int) -> FetchSession | None:
        return self.sessions.get(sid)

    def remove(self, sid: int) -> FetchSession | None:
        return self.sessions.pop(sid, None)

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old
        session.evictable_by_all = old

    def maybe_create(self, now_ms: int, privileged: bool, partitions: OrderedDict,
                     uses_topic_ids: bool) -> int:
        """A new session holding ``partitions`` and its id, or INVALID_SESSION_ID when the cache
        is full and nothing in it may be evicted for this one."""
        if len(self.sessions) >= self.max_entries and \
                not self._try_evict(privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        sid = self._new_id()
        session = FetchSession(sid, privileged, partitions, uses_topic_ids, now_ms)
        self.sessions[sid] = session
        self.touch(session, now_ms)
        return sid

    def _new_id(self) -> int:
        while True:
            sid = self._rng.randint(1, 0x7FFFFFFF)
            if sid not in self.sessions:
                return sid

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            self._evict(stalest)
            return True
        pool = [s for s in self.sessions.values()
                if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not pool:
            return False
        victim = min(pool, key=FetchSession.evictable_key)
        if (privileged, size, 0) < victim.evictable_key():
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.sessions.pop(session.id, None)
        self.evictions += 1


class FetchContext:
    """How one Fetch request relates to sessions: which partitions to read (``entries``: (topic
    name or None, topic id, request partition, session partition or None) in order), and how to
    shape the answer."""
    __slots__ = ("kind", "error", "session", "entries", "request_epoch", "uses_topic_ids",
                 "privileged")

    SESSIONLESS, FULL, INCREMENTAL, ERROR = range(4)

    def __init__(self, kind, entries=(), error=0, session=None, request_epoch=0,
                 uses_topic_ids=False, privileged=False):
        self.kind = kind
        self.entries = entries
        self.error = error
        self.session = session
        self.request_epoch = request_epoch
        self.uses_topic_ids = uses_topic_ids
        self.privileged = privileged

    # -- the answer -------------------------------------------------------------------------
    def finish(self, cache: FetchSessionCache, responses: list, now_ms: int) -> tuple[int, int, list]:
        """(error code, session id, responses) to send, the session updated from them."""
        if self.kind == FetchContext.INCREMENTAL:
            s = self.session
            if s.epoch != next_epoch(self.request_epoch) or cache.get(s.id) is not s:
                # another fetch of this session was answered while this one waited
                return E.INVALID_FETCH_SESSION_EPOCH, s.id, []
            parts = s.partitions
            kept = []
            for tr in responses:
                out = []
                for pd in tr.partitions:
                    key = partition_key(s.uses_topic_ids, tr.topic, tr.topic_id, pd.partition_index)
                    cp = parts.get(key)
                    if cp is None or not cp.must_respond(pd):
                        continue
                    out.append(pd)
                    if records_size(pd.records) > 0:
                        parts.move_to_end(key)
                if out:
                    tr.partitions = out
                    kept.append(tr)
            return 0, s.id, kept
        if self.kind == FetchContext.FULL:        # a full fetch with epoch 0 asks for a session
            asked = {partition_key(self.uses_topic_ids, name, tid, fp.partition): fp
                     for name, tid, fp, _ in self.entries}
            parts = OrderedDict()
            for tr in responses:
                for pd in tr.partitions:
                    key = partition_key(self.uses_topic_ids, tr.topic, tr.topic_id, pd.partition_index)
                    req = asked.get(key)
                    if req is None:
                        continue
                    cp = CachedPartition(tr.topic or None, tr.topic_id, req)
                    cp.high_watermark = pd.high_watermark
                    cp.log_start_offset = pd.log_start_offset
                    parts[key] = cp
            return 0, cache.maybe_create(now_ms, self.privileged, parts, self.uses_topic_ids), responses
        return 0, INVALID_SESSION_ID, responses

    def throttled(self, cache: FetchSessionCache) -> tuple[int, int]:
        """(error code, session id) of an answer with no partitions (a client quota throttles)."""
        if self.kind == FetchContext.INCREMENTAL:
            s = self.session
            if s.epoch != next_epoch(self.request_epoch) or cache.get(s.id) is not s:
                return E.INVALID_FETCH_SESSION_EPOCH, s.id
            return 0, s.id
        return 0, INVALID_SESSION_ID


def new_context(cache: FetchSessionCache, version: int, req, privileged: bool, resolve_id,
                now_ms: int) -> FetchContext:
    """The FetchContext of a request.  ``resolve_id(topic_id)`` gives a topic's name or None
    (v13+).  Request topics name their topics as the request version does."""
    uses_ids = version >= 13
    if version < 7:
        return FetchContext(FetchContext.SESSIONLESS, _entries(req, uses_ids, resolve_id))
    sid, epoch = req.session_id, req.session_epoch
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if sid != INVALID_SESSION_ID:
            cache.remove(sid)
        entries = _entries(req, uses_ids, resolve_id)
        if epoch == FINAL_EPOCH:
            return FetchContext(FetchContext.SESSIONLESS, entries)
        return FetchContext(FetchContext.FULL, entries, uses_topic_ids=uses_ids,
                            privileged=privileged)
    session = cache.get(sid)
    if session is None:
        return FetchContext(FetchContext.ERROR, error=E.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return FetchContext(FetchContext.ERROR, error=E.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != uses_ids:
        return FetchContext(FetchContext.ERROR, error=E.FETCH_SESSION_TOPIC_ID_ERROR)
    entries = _entries(req, uses_ids, resolve_id)
    parts = session.partitions
    for name, tid, fp, _ in entries:
        key = partition_key(uses_ids, name, tid, fp.partition)
        cp = parts.get(key)
        if cp is None:
            parts[key] = CachedPartition(name, tid, fp)
        else:
            cp.req = fp
    for ft in req.forgotten_topics_data or ():
        t = ft.topic_id if uses_ids else ft.topic
        for p in ft.partitions:
            parts.pop((t, p), None)
    if not parts:
        cache.remove(session.id)
        return FetchContext(FetchContext.SESSIONLESS, entries)
    cache.touch(session, now_ms)
    session.epoch = next_epoch(session.epoch)
    entries = []
    for cp in parts.values():
        if uses_ids and cp.topic is None:
            cp.topic = resolve_id(cp.topic_id)
        entries.append((cp.topic, cp.topic_id, cp.req, cp))
    return FetchContext(FetchContext.INCREMENTAL, entries, session=session, request_epoch=epoch,
                        uses_topic_ids=uses_ids, privileged=privileged)


def _entries(req, uses_ids: bool, resolve_id) -> list:
    out = []
    for t in req.topics:
        if uses_ids:
            name, tid = resolve_id(t.topic_id), t.topic_id
        else:
            name, tid = t.topic, None
        for fp in t.partitions:
            out.append((name, tid, fp, None))
    if len(out) > 1:
        # Kafka reads the request into an insertion-ordered map: a partition named twice is
        # fetched once, where it first appears, at the position the last entry asks for
        merged: dict = {}
        for e in out:
            key = (e[1] if uses_ids else e[0], e[2].partition)
            merged[key] = (merged[key][0], merged[key][1], e[2], None) if key in merged else e
        if len(merged) < len(out):
            out = list(merged.values())
    return out

"""One partition as a share group sees it (KIP-932): which records are in flight, who holds them.

A share partition keeps a window of offsets ``[start, end)``: ``start`` is the share-partition
start offset (SPSO), the first offset not yet done with, and ``end`` is one past the last offset
ever handed out (or skipped).  Every offset of the window has a state:

========== =====================================================================================
AVAILABLE  may be handed out (again): released, or its acquisition lock ran out
ACQUIRED   handed out to one member until its lock runs out (``lock_ms``)
ACKNOWLEDGED  accepted by the member that held it: done
ARCHIVED   done without being accepted: rejected, a gap, or delivered ``delivery_limit`` times
========== =====================================================================================

Offsets before ``start`` are all done; the window moves on over the done offsets at its head.
The window holds at most ``max_in_flight`` offsets: a fetch acquires no new offsets beyond
that until the head is done.

The window is kept as runs: contiguous ranges of offsets in one state, with one delivery count,
holder and lock deadline.  A fetch that acquires a thousand records makes one run, and an
acknowledgement of all of them changes one run; a run is split only where an acknowledgement or
a release covers part of it.  ``tests/group/share_model.py`` keeps the same machine with one
object per offset, and a property test holds the two to the same answers.

This module is the state machine alone, on plain integers; it does no I/O.  Time is passed in
(milliseconds), so that tests can drive it without waiting.
"""
from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import deque

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
STATE_NAMES = {AVAILABLE: "Available", ACQUIRED: "Acquired", ACKNOWLEDGED: "Acknowledged",
               ARCHIVED: "Archived"}

# acknowledgement types of ShareFetch and ShareAcknowledge
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
ACK_TYPES = (GAP, ACCEPT, RELEASE, REJECT, RENEW)


class InvalidRecordState(Exception):
    """An acknowledgement of an offset the member does not hold (INVALID_RECORD_STATE)."""


class InvalidRequest(Exception):
    """A malformed acknowledgement batch (INVALID_REQUEST)."""


class _Run:
    """Offsets ``first``..``last`` (inclusive) of the window, all in one state."""
    __slots__ = ("first", "last", "state", "count", "member", "deadline")

    def __init__(self, first: int, last: int, state: int, count: int, member: str | None = None,
                 deadline: int = 0):
        self.first = first
        self.last = last
        self.state = state
        self.count = count          # delivery count: how many times it was acquired
        self.member = member        # the member holding it while ACQUIRED
        self.deadline = deadline    # while ACQUIRED: when its lock runs out (ms)

    def copy_from(self, first: int) -> "_Run":
        return _Run(first, self.last, self.state, self.count, self.member, self.deadline)


def _first(r: _Run) -> int:
    return r.first


def _segments(first: int, last: int, types):
    """(first, last, type) ranges of one acknowledgement batch, one type each."""
    if len(types) == 1:
        return [(first, last, types[0])]
    out = []
    for i, t in enumerate(types):
        o = first + i
        if out and out[-1][2] == t:
            out[-1] = (out[-1][0], o, t)
        else:
            out.append((o, o, t))
    return out


class SharePartition:
    def __init__(self, start: int, *, delivery_limit: int = 5, max_in_flight: int = 2000,
                 lock_ms: int = 30_000, state_epoch: int = 0):
        self.start = start
        self.end = start
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        self.lock_ms = lock_ms
        self.state_epoch = state_epoch
        self.runs: list[_Run] = []       # covering [start, end) without a hole, in order
        # (deadline, first offset, last offset) of each acquisition or renewal, oldest first;
        # parts acknowledged, released or renewed since are skipped when it comes up
        self._locks: list = []
        # (first, last) of each range of offsets as it entered the window (a log batch, or the
        # hole before one), oldest first, until the start offset passes its end: Kafka's cache
        # of in-flight batches, which decides whether an acknowledgement below the start offset
        # is skipped or not found (_check_in_window)
        self._cached: deque = deque()

    # -- reading the state ------------------------------------------------------------------

    def state_of(self, offset: int):
        """(state, delivery count, member, deadline) of an offset of the window, or None."""
        if not self.start <= offset < self.end:
            return None
        r = self.runs[self._index(offset)]
        return r.state, r.count, r.member, r.deadline

    def next_fetch_offset(self) -> int:
        """The first offset a fetch could acquire: the lowest AVAILABLE one, or ``end``."""
        for r in self.runs:
            if r.state == AVAILABLE:
                return r.first
        return self.end

    def has_available(self) -> bool:
        return self.next_fetch_offset() < self.end

    def acquired_by(self, member: str) -> int:
        return sum(r.last - r.first + 1 for r in self.runs if r.state == ACQUIRED and r.member == member)

    def next_deadline(self) -> int | None:
        """When the earliest acquisition lock runs out, or None when nothing is acquired."""
        locks = self._locks
        while locks:
            deadline, first, last = locks[0]
            if any(True for _ in self._held(first, last, deadline)):
                return deadline
            heapq.heappop(locks)
        return None

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """The window as runs of (first offset, last offset, state, delivery count); an acquired
        offset counts as AVAILABLE, as its lock does not outlive this broker."""
        out: list = []
        for r in self.runs:
            st = AVAILABLE if r.state == ACQUIRED else r.state
            if out and out[-1][2] == st and out[-1][3] == r.count:
                out[-1] = (out[-1][0], r.last, st, r.count)
            else:
                out.append((r.first, r.last, st, r.count))
        return out

    @classmethod
    def restore(cls, start: int, batches, **kw) -> "SharePartition":
        """A share partition from persisted state: its start offset and state batches.  Offsets
        between batches inside the window were handed out and are AVAILABLE again.  An offset
        AVAILABLE at the delivery limit was out on its last attempt when the snapshot was
        written (``state_batches``): that attempt ended with the broker, so it is archived, as
        a lock running out on a last attempt archives it."""
        sp = cls(start, **kw)
        at = start
        for first, last, state, count in sorted(batches):
            first = max(first, at)
            if last < first:
                continue
            if first > at:
                sp.runs.append(_Run(at, first - 1, AVAILABLE, 0))
            if state in (AVAILABLE, ACQUIRED):
                state = ARCHIVED if count >= sp.delivery_limit else AVAILABLE
            sp.runs.append(_Run(first, last, state, count))
            at = last + 1
        sp.end = at
        if at > start:
            sp._cached.append((start, at - 1))
        sp._advance()
        return sp

    # -- changing it ------------------------------------------------------------------------

    def acquire(self, member: str, batches, now_ms: int, max_records: int, batch_size: int = 0,
                record_limit: bool = False) -> list[tuple[int, int, int]]:
        """Acquire for ``member`` the offsets it may have among ``batches``, the (base offset,
        last offset, is control) of the record batches a log read found, in order.  Returns the
        acquired runs as (first offset, last offset, delivery count).

        As Kafka's default (batch-optimized) acquire mode, whole record batches are acquired:
        ``max_records`` is reached at the end of a batch, and a run is cut at a batch boundary
        once it holds ``batch_size`` records.  ``record_limit`` (ShareFetch v2's record-limit
        mode) stops at ``max_records`` exactly.

        Offsets with no record (before a batch, where compaction or the log start left a hole)
        and the offsets of control batches are never delivered: they are archived as they enter
        the window.

        Redelivery is throttled as in Kafka 4.2: from half the delivery limit on, a batch is
        handed out in smaller parts (halved with each further delivery) and alone in its fetch,
        and a record on its last attempt goes alone, so that one bad record spends only its own
        attempts."""
        out: list = []
        n = 0
        deadline = now_ms + self.lock_ms
        limit = self.delivery_limit
        throttle = max(2, -(-limit // 2))
        stop = False

        def took(a: int, b: int, count: int, cut: bool) -> bool:
            if out and not cut and out[-1][1] == a - 1 and out[-1][2] == count:
                out[-1] = (out[-1][0], b, count)
            else:
                out.append((a, b, count))
            return False
        for base, last, control in batches:
            if n >= max_records or stop:
                break
            if last < self.start:
                continue
            if base > self.end:
                if self._full():            # nothing new fits: the window is at its limit
                    break
                self._append(_Run(self.end, base - 1, ARCHIVED, 0))      # no records there
            cut = batch_size > 0 and bool(out) and out[-1][1] - out[-1][0] + 1 >= batch_size
            lo = max(base, self.start)
            if lo < self.end and not control:                          # offsets seen before
                cap, here, first_seen = None, 0, False
                i = self._index(lo)
                while i < len(self.runs) and self.runs[i].first <= last:
                    if record_limit and n >= max_records:
                        break
                    r = self.runs[i]
                    if r.state != AVAILABLE:
                        i += 1
                        continue
                    c = r.count
                    if not first_seen:
                        first_seen = True
                        if c >= throttle and n > 0:         # a throttled batch waits its turn
                            stop = True
                            break
                    if limit > 2 and c == limit - 1 and n > 0:      # a last attempt goes alone
                        stop = True
                        break
                    if c >= throttle and cap is None:
                        cap = max(1, (last - base + 1) >> (c - throttle + 1))
                    a, b = max(r.first, lo), min(r.last, last)
                    if record_limit:
                        b = min(b, a + max_records - n - 1)
                    if cap is not None:
                        b = min(b, a + cap - here - 1)
                    if limit > 2 and c + 1 == limit:
                        b = a
                    i = self._isolate(i, a, b)
                    r = self.runs[i]
                    r.state, r.member, r.deadline = ACQUIRED, member, deadline
                    r.count += 1
                    cut = took(a, b, r.count, cut)
                    n += b - a + 1
                    here += b - a + 1
                    if (limit > 2 and r.count == limit) or (cap is not None and here >= cap):
                        stop = True
                        break
                    i += 1
            if stop:
                break
            a = max(lo, self.end)
            if a > last or (record_limit and n >= max_records):
                continue
            b = min(last, self.start + self.max_in_flight - 1)                # new offsets
            if b < a:
                continue
            if control:
                self._append(_Run(a, b, ARCHIVED, 0))
                continue
            if record_limit:
                b = min(b, a + max_records - n - 1)
            self._append(_Run(a, b, ACQUIRED, 1, member, deadline))
            cut = took(a, b, 1, cut)
            n += b - a + 1
        for a, b, _ in out:
            heapq.heappush(self._locks, (deadline, a, b))
        self._advance()
        return out

    def acknowledge(self, member: str, first: int, last: int, types, now_ms: int = 0) -> None:
        """Apply one acknowledgement batch of ``member`` (see ``acknowledge_all``)."""
        self.acknowledge_all(member, [(first, last, types)], now_ms)

    def acknowledge_all(self, member: str, batches, now_ms: int = 0) -> None:
        """Apply the acknowledgement batches (first, last, types) of one partition of a request,
        all or nothing: each has one type for its whole range or one per offset, and every offset
        must be held by ``member`` (a gap may also name an offset archived as one); otherwise
        nothing changes and InvalidRecordState (or InvalidRequest, for a malformed batch or an
        offset never handed out) is raised.  A batch wholly below the window is
        InvalidRecordState; the part below the window of one that reaches into it is skipped.  A
        renew (4) restarts the offset's lock."""
        segments = []
        prev = None
        for first, last, types in batches:
            self._check_batch(first, last, types)
            self._check_in_window(first, last)
            for seg in _segments(first, last, types):
                self._check(member, *seg)
                segments.append(seg)
            if prev is not None and first <= prev:
                # a batch starting where the last one ended names that offset twice: by then
                # it is no longer acquired (Kafka: INVALID_RECORD_STATE)
                raise InvalidRecordState(f"offset {first} is acknowledged twice")
            prev = last
        for a, b, t in segments:
            a, b = max(a, self.start), min(b, self.end - 1)
            if a > b:
                continue
            i = self._index(a)
            while i < len(self.runs) and self.runs[i].first <= b:
                r = self.runs[i]
                if r.state == ACQUIRED:
                    i = self._isolate(i, max(r.first, a), min(r.last, b))
                    r = self.runs[i]
                    if t == ACCEPT:
                        r.state, r.member = ACKNOWLEDGED, None
                    elif t in (GAP, REJECT):
                        r.state, r.member = ARCHIVED, None
                    elif t == RELEASE:
                        self._release(r)
                    elif t == RENEW:
                        r.deadline = now_ms + self.lock_ms
                        heapq.heappush(self._locks, (r.deadline, r.first, r.last))
                i += 1
        self._advance()

    @staticmethod
    def _check_batch(first: int, last: int, types) -> None:
        if first < 0 or last < first:
            raise InvalidRequest(f"the batch {first}..{last} is not a range of offsets")
        if not types or (len(types) != 1 and len(types) != last - first + 1):
            raise InvalidRequest("acknowledge types must be one, or one per offset")
        if any(t not in ACK_TYPES for t in types):
            raise InvalidRequest(f"unknown acknowledge type in {list(types)}")

    def _check_in_window(self, first: int, last: int) -> None:
        """A batch wholly below the start offset that begins before the ranges still cached
        names records that are done and gone, as from Kafka's cache of in-flight batches:
        INVALID_RECORD_STATE (so a member whose lock ran out learns that its late acknowledgement
        did not count).  Otherwise the part below the start offset is skipped, as Kafka skips
        offsets below it in a batch it still caches, or in one that reaches the start offset."""
        if last < self.start and (not self._cached or first < self._cached[0][0]):
            raise InvalidRecordState(f"Batch record not found: offsets {first}..{last} are below the start offset "
                                     f"{self.start}")

    def _check(self, member: str, a: int, b: int, t: int) -> None:
        """Offsets a..b, acknowledged as ``t``, in order: below the window they are done and
        skipped (as Kafka skips them), inside it they must be held by ``member``, and past it
        they were never handed out (INVALID_REQUEST, or INVALID_RECORD_STATE while nothing is
        in flight, as Kafka, which then finds no batch at all)."""
        lo, hi = max(a, self.start), min(b, self.end - 1)
        if lo <= hi:
            i = self._index(lo)
            while i < len(self.runs) and self.runs[i].first <= hi:
                r = self.runs[i]
                if not (r.state == ACQUIRED and r.member == member):
                    o = max(r.first, lo)
                    raise InvalidRecordState(f"offset {o} is {STATE_NAMES[r.state].lower()}"
                                             + ("" if r.state != ACQUIRED else " by another member"))
                i += 1
        if b >= self.end:
            o = max(a, self.end)
            if self.start == self.end:
                raise InvalidRecordState(f"offset {o} was never handed out")
            raise InvalidRequest(f"offset {o} is past the last offset handed out ({self.end - 1})")

    def release_member(self, member: str) -> int:
        """Make every offset ``member`` holds available again (its share session ended or it
        left the group); returns how many."""
        n = 0
        for r in self.runs:
            if r.state == ACQUIRED and r.member == member:
                self._release(r)
                n += r.last - r.first + 1
        self._advance()
        return n

    def expire_locks(self, now_ms: int) -> int:
        """Release every offset whose acquisition lock ran out; returns how many."""
        n = 0
        locks = self._locks
        while locks and locks[0][0] <= now_ms:
            deadline, first, last = heapq.heappop(locks)
            lo = max(first, self.start)
            if lo > last or lo >= self.end:
                continue
            i = self._index(lo)
            while i < len(self.runs) and self.runs[i].first <= last:
                r = self.runs[i]
                if r.state == ACQUIRED and r.deadline == deadline:
                    i = self._isolate(i, max(r.first, first), min(r.last, last))
                    r = self.runs[i]
                    self._release(r)
                    n += r.last - r.first + 1
                i += 1
        if n:
            self._advance()
        return n

    def move_start(self, offset: int) -> None:
        """The log start offset moved to ``offset`` (retention, DeleteRecords) or an operator set
        the start offset: offsets before it are gone; any in flight there are dropped."""
        if offset <= self.start:
            return
        if offset < self.end:
            i = self._index(offset)
            if self.runs[i].first < offset:
                self.runs[i] = self.runs[i].copy_from(offset)
            del self.runs[:i]
        else:
            self.runs.clear()
            self.end = offset
        self.start = offset
        self._advance()

    def reset(self, offset: int) -> None:
        """Start over at ``offset`` with nothing in flight (AlterShareGroupOffsets)."""
        self.runs.clear()
        self._locks.clear()
        self._cached.clear()
        self.start = self.end = offset

    # -- internals --------------------------------------------------------------------------

    def _full(self) -> bool:
        return self.end - self.start >= self.max_in_flight

    def _index(self, offset: int) -> int:
        """The index of the run holding ``offset`` (start <= offset < end)."""
        return bisect_right(self.runs, offset, key=_first) - 1

    def _isolate(self, i: int, a: int, b: int) -> int:
        """Split run ``i`` so that a..b (inside it) is a run of its own; returns its index."""
        r = self.runs[i]
        if b < r.last:
            self.runs.insert(i + 1, r.copy_from(b + 1))
            r.last = b
        if a > r.first:
            self.runs.insert(i + 1, r.copy_from(a))
            r.last = a - 1
            i += 1
        return i

    def _held(self, first: int, last: int, deadline: int):
        """Indexes of the runs within first..last still acquired under that lock deadline."""
        lo = max(first, self.start)
        if lo > last or lo >= self.end:
            return
        i = self._index(lo)
        while i < len(self.runs) and self.runs[i].first <= last:
            r = self.runs[i]
            if r.state == ACQUIRED and r.deadline == deadline:
                yield i
            i += 1

    def _append(self, run: _Run) -> None:
        self.runs.append(run)
        self._cached.append((run.first, run.last))
        self.end = run.last + 1

    def _release(self, r: _Run) -> None:
        r.member = None
        r.state = ARCHIVED if r.count >= self.delivery_limit else AVAILABLE

    def _advance(self) -> None:
        runs = self.runs
        k = 0
        while k < len(runs) and runs[k].state in (ACKNOWLEDGED, ARCHIVED):
            k += 1
        if k:
            del runs[:k]
        self.start = runs[0].first if runs else self.end
        cached = self._cached
        while cached and cached[0][1] < self.start:
            cached.popleft()

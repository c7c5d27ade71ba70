"""The per-offset share-partition state machine the broker used first, kept as the model that
tests/group/test_share_partition.py checks broker/share/partition.py against: one object per
offset, simple enough to read as the specification."""
from __future__ import annotations

import heapq

from broker.share.partition import (ACCEPT, ACK_TYPES, ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, GAP, REJECT,
                                    RELEASE, RENEW, STATE_NAMES, InvalidRecordState, InvalidRequest)


class _Offset:
    __slots__ = ("state", "count", "member", "deadline")

    def __init__(self, state: int, count: int, member: str | None = None, deadline: int = 0):
        self.state = state
        self.count = count          # delivery count: how many times it was acquired
        self.member = member        # the member holding it while ACQUIRED
        self.deadline = deadline    # while ACQUIRED: when its lock runs out (ms)


class ModelSharePartition:
    def __init__(self, start: int, *, delivery_limit: int = 5, max_in_flight: int = 2000,
                 lock_ms: int = 30_000, state_epoch: int = 0):
        self.start = start
        self.end = start
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        self.lock_ms = lock_ms
        self.state_epoch = state_epoch
        self.offsets: dict[int, _Offset] = {}   # every offset in [start, end)
        # (deadline, first offset, last offset) of each acquisition or renewal, oldest first;
        # entries whose offsets were acknowledged, released or renewed since are skipped
        self._locks: list = []
        self.cached: list = []                  # (first, last) ranges as they entered the window

    # -- reading the state ------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """The first offset a fetch could acquire: the lowest AVAILABLE one, or ``end``."""
        for o in range(self.start, self.end):
            if self.offsets[o].state == AVAILABLE:
                return o
        return self.end

    def has_available(self) -> bool:
        return self.next_fetch_offset() < self.end

    def acquired_by(self, member: str) -> int:
        return sum(1 for r in self.offsets.values() if r.state == ACQUIRED and r.member == member)

    def next_deadline(self) -> int | None:
        """When the earliest acquisition lock runs out, or None when nothing is acquired."""
        locks = self._locks
        while locks:
            deadline, first, last = locks[0]
            if any(self._holds(o, deadline) for o in range(first, last + 1)):
                return deadline
            heapq.heappop(locks)
        return None

    def _holds(self, o: int, deadline: int) -> bool:
        r = self.offsets.get(o)
        return r is not None and r.state == ACQUIRED and r.deadline == deadline

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """The window as runs of (first offset, last offset, state, delivery count); an acquired
        offset counts as AVAILABLE, as its lock does not outlive this broker."""
        out: list = []
        for o in range(self.start, self.end):
            r = self.offsets[o]
            st = AVAILABLE if r.state == ACQUIRED else r.state
            if out and out[-1][1] == o - 1 and out[-1][2] == st and out[-1][3] == r.count:
                out[-1] = (out[-1][0], o, st, r.count)
            else:
                out.append((o, o, st, r.count))
        return out

    @classmethod
    def restore(cls, start: int, batches, **kw) -> "ModelSharePartition":
        """A share partition from persisted state: its start offset and state batches.  Offsets
        between batches inside the window were handed out and are AVAILABLE again."""
        sp = cls(start, **kw)
        for first, last, state, count in sorted(batches):
            if state in (AVAILABLE, ACQUIRED):          # out on its last attempt at the snapshot
                state = ARCHIVED if count >= sp.delivery_limit else AVAILABLE
            for o in range(max(first, start), last + 1):
                sp.offsets[o] = _Offset(state, count)
            sp.end = max(sp.end, last + 1)
        for o in range(sp.start, sp.end):
            if o not in sp.offsets:
                sp.offsets[o] = _Offset(AVAILABLE, 0)
        if sp.end > start:
            sp.cached.append((start, sp.end - 1))
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
        runs: list = []
        n = 0
        deadline = now_ms + self.lock_ms
        limit = self.delivery_limit
        throttle = max(2, -(-limit // 2))
        stop = False
        for base, last, control in batches:
            if n >= max_records or stop:
                break
            if last < self.start:
                continue
            if base > self.end:
                if self._full():
                    break
                for o in range(self.end, base):          # no records there
                    self.offsets[o] = _Offset(ARCHIVED, 0)
                self.cached.append((self.end, base - 1))
                self.end = base
            new_from = self.end
            cut = batch_size > 0 and runs and runs[-1][1] - runs[-1][0] + 1 >= batch_size
            cap, here, first_seen = None, 0, False
            for o in range(max(base, self.start), last + 1):
                if record_limit and n >= max_records:
                    break
                if o < self.end:
                    r = self.offsets[o]
                    if r.state != AVAILABLE or control:
                        continue
                    c = r.count
                    if not first_seen:
                        first_seen = True
                        if c >= throttle and n > 0:             # a throttled batch waits its turn
                            stop = True
                            break
                    if limit > 2 and c == limit - 1 and n > 0:  # a last attempt goes alone
                        stop = True
                        break
                    if c >= throttle and cap is None:
                        cap = max(1, (last - base + 1) >> (c - throttle + 1))
                    r.state, r.member, r.deadline = ACQUIRED, member, deadline
                    r.count += 1
                    here += 1
                    if (limit > 2 and r.count == limit) or (cap is not None and here >= cap):
                        stop = True
                else:
                    if self._full():
                        break
                    self.end = o + 1
                    if control:
                        self.offsets[o] = _Offset(ARCHIVED, 0)
                        continue
                    r = self.offsets[o] = _Offset(ACQUIRED, 1, member, deadline)
                if runs and not cut and runs[-1][1] == o - 1 and runs[-1][2] == r.count:
                    runs[-1] = (runs[-1][0], o, r.count)
                else:
                    runs.append((o, o, r.count))
                cut = False
                n += 1
                if stop:
                    break
            if self.end > new_from:
                self.cached.append((new_from, self.end - 1))
        for first, last, _ in runs:
            heapq.heappush(self._locks, (deadline, first, last))
        self._advance()
        return runs

    def acknowledge(self, member: str, first: int, last: int, types, now_ms: int = 0) -> None:
        """Apply one acknowledgement batch of ``member`` (see ``acknowledge_all``)."""
        self.acknowledge_all(member, [(first, last, types)], now_ms)

    def acknowledge_all(self, member: str, batches, now_ms: int = 0) -> None:
        """Apply the acknowledgement batches (first, last, types) of one partition of a request,
        all or nothing: each has one type for its whole range or one per offset, and every offset
        must be held by ``member`` (a gap may also name an offset archived as one); otherwise
        nothing changes and InvalidRecordState (or InvalidRequest, for a malformed batch or an
        offset never handed out) is raised.  A renew (4) restarts the offset's lock."""
        prev = None
        for first, last, types in batches:
            self._check(member, first, last, types)
            if prev is not None and first <= prev:
                raise InvalidRecordState(f"offset {first} is acknowledged twice")
            prev = last
        for first, last, types in batches:
            one = types[0] if len(types) == 1 else None
            for i, o in enumerate(range(first, last + 1)):
                t = one if one is not None else types[i]
                r = self.offsets.get(o)
                if r is None or r.state != ACQUIRED:
                    continue
                if t == ACCEPT:
                    r.state, r.member = ACKNOWLEDGED, None
                elif t in (GAP, REJECT):
                    r.state, r.member = ARCHIVED, None
                elif t == RELEASE:
                    self._release(r)
                elif t == RENEW:
                    r.deadline = now_ms + self.lock_ms
                    heapq.heappush(self._locks, (r.deadline, o, o))
        self._advance()

    def _check(self, member: str, first: int, last: int, types) -> None:
        if first < 0 or last < first:
            raise InvalidRequest(f"the batch {first}..{last} is not a range of offsets")
        if not types or (len(types) != 1 and len(types) != last - first + 1):
            raise InvalidRequest("acknowledge types must be one, or one per offset")
        if any(t not in ACK_TYPES for t in types):
            raise InvalidRequest(f"unknown acknowledge type in {list(types)}")
        if last < self.start and (not self.cached or first < self.cached[0][0]):     # not cached any more
            raise InvalidRecordState(f"Batch record not found: offsets {first}..{last} are below the start offset "
                                     f"{self.start}")
        one = types[0] if len(types) == 1 else None
        for i, o in enumerate(range(first, last + 1)):
            t = one if one is not None else types[i]
            r = self.offsets.get(o)
            if r is None:
                if o >= self.end:
                    if self.start == self.end:
                        raise InvalidRecordState(f"offset {o} was never handed out")
                    raise InvalidRequest(f"offset {o} is past the last offset handed out ({self.end - 1})")
                continue                        # below the window: done, skipped
            if r.state == ACQUIRED and r.member == member:
                continue
            raise InvalidRecordState(f"offset {o} is {STATE_NAMES[r.state].lower()}"
                                     + ("" if r.state != ACQUIRED else " by another member"))

    def release_member(self, member: str) -> int:
        """Make every offset ``member`` holds available again (its share session ended or it
        left the group); returns how many."""
        n = 0
        for r in self.offsets.values():
            if r.state == ACQUIRED and r.member == member:
                self._release(r)
                n += 1
        self._advance()
        return n

    def expire_locks(self, now_ms: int) -> int:
        """Release every offset whose acquisition lock ran out; returns how many."""
        n = 0
        locks = self._locks
        while locks and locks[0][0] <= now_ms:
            deadline, first, last = heapq.heappop(locks)
            for o in range(first, last + 1):
                if self._holds(o, deadline):
                    self._release(self.offsets[o])
                    n += 1
        if n:
            self._advance()
        return n

    def move_start(self, offset: int) -> None:
        """The log start offset moved to ``offset`` (retention, DeleteRecords) or an operator set
        the start offset: offsets before it are gone; any in flight there are dropped."""
        if offset <= self.start:
            return
        for o in range(self.start, min(offset, self.end)):
            self.offsets.pop(o, None)
        self.start = offset
        if self.end < offset:
            self.end = offset
        self._advance()

    def reset(self, offset: int) -> None:
        """Start over at ``offset`` with nothing in flight (AlterShareGroupOffsets)."""
        self.offsets.clear()
        self._locks.clear()
        self.cached.clear()
        self.start = self.end = offset

    # -- internals --------------------------------------------------------------------------

    def _full(self) -> bool:
        return self.end - self.start >= self.max_in_flight

    def _release(self, r: _Offset) -> None:
        r.member = None
        r.state = ARCHIVED if r.count >= self.delivery_limit else AVAILABLE

    def _advance(self) -> None:
        offsets = self.offsets
        o = self.start
        while o < self.end and offsets[o].state in (ACKNOWLEDGED, ARCHIVED):
            del offsets[o]
            o += 1
        self.start = o
        while self.cached and self.cached[0][1] < self.start:
            del self.cached[0]

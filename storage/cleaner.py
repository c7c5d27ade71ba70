"""Log compaction (Kafka's log cleaner) for logs whose ``cleanup.policy`` contains ``compact``.

How this works (Kafka 3.x rules):

* **Dirty section.**  ``cleaner-offset-checkpoint`` (one per log dir, entries ``topic partition
  offset``) records where each log's dirty section starts.  A checkpoint below the log start
  offset or above the log end offset is reset to the log start offset.  Cleaning never reaches
  the first uncleanable offset: the minimum of the last stable offset (open transactions, high
  watermark), the active segment's base offset and — with ``min.compaction.lag.ms`` — the first
  segment whose largest timestamp is younger than the lag; rounded down to a segment base.
* **Choice.**  A log is cleanable when its dirty ratio (dirty bytes / (clean + dirty bytes),
  whole segments) is **greater** than ``min.cleanable.dirty.ratio`` (Kafka compares with ``>``)
  or when ``max.compaction.lag.ms`` has passed for its oldest dirty segment and there is
  something to clean.  The filthiest log goes first; each of ``log.cleaner.threads`` workers
  cleans one log at a time, never one another worker has.
* **Offset map.**  key → latest offset over the dirty section (keys of 16 bytes or more are
  stored as 16-byte BLAKE2b digests, like Kafka's MD5 map).  Records of aborted transactions
  are not mapped (the ``.txnindex`` entries are collected up front).  The map holds at most
  ``log.cleaner.dedupe.buffer.size / 24 × log.cleaner.io.buffer.load.factor`` keys; when full,
  the pass ends at the last whole batch mapped.  The map's last offset + 1 is the new
  checkpoint.
* **Rewrite.**  Every segment below that offset (clean and dirty) is rewritten, in groups whose
  total ``.log`` size stays within ``segment.bytes`` (and index sizes within
  ``segment.index.bytes``, offsets within an int32 of the group's base), into one
  ``<base>.log.cleaned`` per group.  A record survives if it is past the map, or it has a key
  and no later record with that key is mapped; a tombstone (null value) survives until the
  batch's delete horizon.  The first cleaning that keeps a tombstone (or a removable marker)
  stamps its batch with ``hasDeleteHorizonMs`` and baseTimestamp = now + ``delete.retention.ms``;
  a later cleaning after that time drops it.  Keyless records are dropped.
* **Transactions.**  Batches of aborted transactions are dropped.  A COMMIT marker goes when no
  batch of its transaction was seen in the pass, an ABORT marker when the same holds; either
  only after its delete horizon.  The last batch of each active producer is kept (emptied if
  need be) to preserve its sequence/epoch; so is the batch ending at the uncleanable offset.
* **Batches** keep base offset, last offset delta, base sequence, producer id/epoch, leader
  epoch and codec; a batch with nothing removed and no horizon to set is copied byte for byte.
  Offsets never change.
* **Swap** (``Log.replace_segments``, on the loop): ``.cleaned`` → ``.swap`` → old files become
  ``.deleted`` → ``.swap`` → final name.  On start, ``complete_swaps`` deletes ``.cleaned``
  files and ``.swap`` files at or above the lowest ``.cleaned`` base (an unfinished set), and
  completes the other ``.swap`` files: segments whose base lies in the swap's offset range are
  deleted and the ``.swap`` names lose their suffix.

Threading / ownership rule.  A ``Log`` is owned by the event loop.  A cleaning pass is split:

1. ``CleanJob(log, ...)`` — **loop**.  Picks the inactive segments below the uncleanable
   offset and records, for each, a duplicated descriptor, its size and index entry counts;
   snapshots the aborted-transaction entries, the active producers' last batches and the
   configuration.  Nothing shared is referenced afterwards.
2. ``job.run()`` — **executor thread**.  Reads only through the duplicated descriptors (the
   inactive ``.log`` files are immutable; if retention or truncation touches them meanwhile,
   step 3 notices) and writes only new ``*.cleaned`` files in the log directory.  It never
   touches the Log, its segments or producer state.  ``job.abort()`` (any thread) stops it;
   it then deletes its files.
3. ``job.finish(log)`` — **loop**.  For each group, ``Log.replace_segments`` checks that the
   old segments are still in place with the sizes read, then swaps; otherwise the job's files
   are deleted and the checkpoint is left alone.

``LogCleaner`` drives this for a ``LogManager``: checkpoints, choice, ``log.cleaner.threads``
workers (each an asyncio task with a thread of its own, sleeping ``log.cleaner.backoff.ms``
when nothing was cleanable), the shared I/O ``Throttler``, and ``run()``, which the broker
schedules and which keeps the number of workers to the (dynamic) config.  The cleaner's Python record decoding
holds the GIL, so a pass costs the loop some latency (the interpreter switches threads every
5 ms); ``clean_log`` runs a whole pass synchronously (tests, tools).
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

from protocol.records import (DELETE_HORIZON_MASK, RecordError, build_batch, iter_records,
                              read_control_record, read_header)

from .checkpoint import CheckpointError, fsync_dir, read_offsets_checkpoint, \
    write_offsets_checkpoint
from .errors import StorageError
from .scan import FileScanner, walk_headers
from .segment import LogSegment, segment_name

log = logging.getLogger("odradek.cleaner")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
INT32_MAX = 0x7FFFFFFF
MAP_BYTES_PER_ENTRY = 24          # Kafka: 16-byte MD5 + 8-byte offset
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
_SEGMENT_EXTS = (".log", ".index", ".timeindex", ".txnindex")
_OUT_CHUNK = 1 << 20
_THROTTLE_CHUNK = 64 << 10        # bytes counted before the throttle is asked
DOUBLE_MAX = 1.7976931348623157e308


def now_ms() -> int:
    return int(time.time() * 1000)


class CleaningAborted(Exception):
    pass


# -- start-up: settle leftovers of an interrupted swap ----------------------------------------

def complete_swaps(dir: str, names: list[str] | None = None) -> bool:
    """Delete ``.cleaned`` files; finish valid ``.swap`` segments, delete the rest.  ``names``:
    the directory's listing if the caller has it.  True if the directory was changed."""
    if names is None:
        try:
            names = os.listdir(dir)
        except FileNotFoundError:
            return False
    changed = False
    cleaned = [n for n in names if n.endswith(CLEANED_SUFFIX)]
    bases = [int(n[:20]) for n in cleaned if n[:20].isdigit()]
    min_cleaned = min(bases) if bases else None
    for n in cleaned:
        _unlink(os.path.join(dir, n))
        changed = True
    swaps = [n for n in names if n.endswith(SWAP_SUFFIX)]
    valid = []
    for n in swaps:
        stem = n[:20]
        if not stem.isdigit() or (min_cleaned is not None and int(stem) >= min_cleaned):
            _unlink(os.path.join(dir, n))
            changed = True
        else:
            valid.append(n)
    swap_logs = sorted(n for n in valid if n.endswith(".log" + SWAP_SUFFIX))
    live_logs = sorted(int(n[:-4]) for n in names if n.endswith(".log") and n[:-4].isdigit())
    for n in swap_logs:
        base = int(n[:20])
        path = os.path.join(dir, n)
        fd = os.open(path, os.O_RDONLY)
        try:
            nxt = base
            for h in walk_headers(fd, 0, os.fstat(fd).st_size):
                nxt = h.next_offset
        finally:
            os.close(fd)
        upper = max(nxt, base + 1)
        for b in live_logs:
            if base <= b < upper:
                for ext in _SEGMENT_EXTS:
                    _unlink(os.path.join(dir, segment_name(b) + ext))
        for ext in _SEGMENT_EXTS:
            src = os.path.join(dir, segment_name(base) + ext + SWAP_SUFFIX)
            if os.path.exists(src):
                os.replace(src, src[:-len(SWAP_SUFFIX)])
        log.info("completed the interrupted swap of segment %s in %s", segment_name(base), dir)
        changed = True
    for n in valid:               # index .swap files without their .log.swap
        p = os.path.join(dir, n)
        if os.path.exists(p):
            _unlink(p)
            changed = True
    if changed:
        fsync_dir(dir)
    return changed


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# -- the I/O throttle -------------------------------------------------------------------------

class Throttler:
    """``log.cleaner.io.max.bytes.per.second`` for all cleaner threads together, by Kafka's
    rule: bytes are added up, and once more than ``CHECK_INTERVAL_S`` has passed since the
    period began, a thread that finds the period's rate above the limit sleeps until the
    period's bytes fit the limit; then a new period begins.  (So a burst shorter than that
    after an idle spell runs free, and the bytes are paid for at the next look.)

    Kafka sleeps holding the throttle's lock, so the other threads stop at their next look
    until the sleep ends.  Here the sleep happens outside the lock, in slices, so that an abort
    or a change of the rate can end it; a thread that looks while another sleeps waits until
    that sleep's end in the same way, and its bytes count in the period that begins then.
    ``wait(seconds)`` is the sleep; it returns true to end it early (the job's abort event).
    A change of the rate ends the sleeps under way and begins a new period."""

    CHECK_INTERVAL_S = 0.3
    _SLICE_S = 0.25                     # how soon a sleep notices a change of the rate

    def __init__(self, rate: float, clock=time.monotonic):
        self.rate = float(rate)
        self._clock = clock
        self._lock = threading.Lock()
        self._start = clock()            # in the future while a thread sleeps off an excess
        self._observed = 0.0
        self._changes = 0

    @property
    def unlimited(self) -> bool:
        return not (0 < self.rate < DOUBLE_MAX)

    def set_rate(self, rate: float) -> None:
        with self._lock:
            self.rate = float(rate)
            self._changes += 1
            self._start = self._clock()
            self._observed = 0.0

    def maybe_throttle(self, observed: int, wait=time.sleep) -> float:
        """Count ``observed`` bytes; sleep (with ``wait``) when over the rate, or while another
        thread sleeps.  Seconds slept."""
        slept = 0.0
        pending = observed
        while True:
            with self._lock:
                now = self._clock()
                changes = self._changes
                mine = now >= self._start
                if mine:
                    self._observed += pending
                    pending = 0
                    elapsed = now - self._start
                    if elapsed <= self.CHECK_INTERVAL_S or self._observed <= 0:
                        return slept
                    sleep = 0.0
                    if self._observed / elapsed > self.rate > 0:
                        # Kafka rounds to whole milliseconds
                        sleep = round((self._observed / (self.rate / 1000.0) - elapsed * 1000.0)) / 1000.0
                    self._start = now + max(sleep, 0.0)
                    self._observed = 0.0
                    if sleep <= 0:
                        return slept
                until = self._start           # mine, or the end of another thread's sleep
            done, aborted = self._sleep(now, until, changes, wait)
            slept += done
            if mine or aborted:
                return slept
            # another thread's sleep is over (or the rate changed): count the bytes now

    def _sleep(self, now: float, until: float, changes: int, wait) -> tuple[float, bool]:
        """Sleep from ``now`` to ``until`` in slices, ending early on a change of the rate or
        when ``wait`` returns true; (seconds slept, whether ``wait`` ended it)."""
        while True:
            left = until - self._clock()
            if left <= 0 or self._changes != changes:
                return min(self._clock(), until) - now, False
            if wait(min(left, self._SLICE_S)):
                return min(self._clock(), until) - now, True


# -- configuration and choice -----------------------------------------------------------------


@dataclass
class CleanerConfig:
    enable: bool = True
    backoff_ms: int = 15000
    dedupe_buffer_size: int = 134217728
    io_buffer_load_factor: float = 0.9
    threads: int = 1
    io_max_bytes_per_second: float = DOUBLE_MAX

    @classmethod
    def from_broker(cls, cfg) -> "CleanerConfig":
        """The cleaner's keys as ``cfg`` has them now (all but ``log.cleaner.enable`` are
        cluster-wide dynamic configs; ``LogCleaner`` reads them again before every pass)."""
        g = cfg.get
        return cls(bool(g("log.cleaner.enable")), int(g("log.cleaner.backoff.ms")),
                   int(g("log.cleaner.dedupe.buffer.size")),
                   float(g("log.cleaner.io.buffer.load.factor")), int(g("log.cleaner.threads")),
                   float(g("log.cleaner.io.max.bytes.per.second")))

    @property
    def map_slots(self) -> int:
        """Entries one thread's share of the dedupe buffer holds (Kafka's SkimpyOffsetMap slots)."""
        return max(1, self.dedupe_buffer_size // max(1, self.threads) // MAP_BYTES_PER_ENTRY)

    @property
    def max_map_entries(self) -> int:
        return max(1, int(self.map_slots * self.io_buffer_load_factor))


class LogToClean(NamedTuple):
    first_dirty: int
    first_uncleanable: int        # a segment base offset
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool
    compaction_delay_ms: int = 0    # how long past max.compaction.lag.ms its oldest dirty data is

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def first_dirty_offset(lg, checkpoint: int | None) -> int:
    start = lg.log_start_offset
    if checkpoint is None or checkpoint < start or checkpoint > lg.log_end_offset:
        return start
    return checkpoint


def log_to_clean(lg, checkpoint: int | None, now: int) -> LogToClean:
    """Dirty-section figures of ``lg`` (loop).  Segment granularity, as Kafka."""
    cfg = lg.config
    segs, bases = lg.segments, lg.bases
    first_dirty = first_dirty_offset(lg, checkpoint)
    uncleanable = min(lg.last_stable_offset(), lg.active.base_offset)
    lag = max(cfg.min_compaction_lag_ms, 0)
    i0 = lg._segment_index(first_dirty)
    if lag > 0:
        for seg in segs[i0:-1]:
            if seg.largest_timestamp() > now - lag:
                uncleanable = min(uncleanable, seg.base_offset)
                break
    first_uncleanable = bases[lg._segment_index(uncleanable)]
    clean = dirty = 0
    earliest = None
    for i, seg in enumerate(segs):
        upper = bases[i + 1] if i + 1 < len(segs) else lg.log_end_offset + 1
        if seg.base_offset < first_dirty:
            clean += seg.size
        if seg.base_offset < max(first_dirty, first_uncleanable) and upper > first_dirty:
            dirty += seg.size
            ts = seg.rolling_based_timestamp if seg.size else -1
            if ts > 0 and (earliest is None or ts < earliest):
                earliest = ts
    clean_until = now - max(cfg.max_compaction_lag_ms, 0)
    need_now = earliest is not None and earliest < clean_until
    return LogToClean(first_dirty, first_uncleanable, clean, dirty, need_now,
                      clean_until - earliest if need_now else 0)


def is_cleanable(lg, ltc: LogToClean) -> bool:
    if ltc.total_bytes <= 0 or ltc.first_dirty >= ltc.first_uncleanable:
        return False
    return (ltc.need_compaction_now and ltc.cleanable_bytes > 0) or \
        ltc.ratio > lg.config.min_cleanable_dirty_ratio


# -- transaction state seen while cleaning ----------------------------------------------------

class _TxnTracker:
    """Which batches belong to aborted transactions and which markers may go (Kafka's
    CleanedTransactionMetadata rules)."""

    def __init__(self, aborted):
        self.pending = sorted(set(aborted), key=lambda t: (t.first_offset, t.last_offset))
        self.next = 0
        self.aborted: dict[int, list] = {}       # pid -> [AbortedTxn, batch seen?]
        self.committed: set[int] = set()         # pids with a data batch seen, no marker yet
        self.cleaned_index = None

    def _consume(self, offset: int) -> None:
        pending = self.pending
        while self.next < len(pending) and pending[self.next].first_offset <= offset:
            t = pending[self.next]
            self.next += 1
            self.aborted.setdefault(t.producer_id, [t, False])

    def on_control(self, h, buf) -> bool:
        """True if the marker may be removed (subject to its delete horizon)."""
        self._consume(h.last_offset)
        try:
            rec = read_control_record(buf, h)
        except RecordError:
            return False
        if rec is None:
            return True                 # an already emptied control batch
        pid = h.producer_id
        if rec.type == CONTROL_ABORT:
            m = self.aborted.pop(pid, None)
            if m is not None and m[1]:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(m[0])
                return False
            return True
        if rec.type == CONTROL_COMMIT:
            if pid in self.committed:
                self.committed.discard(pid)
                return False
            return True
        return False

    def on_batch(self, h) -> bool:
        """True if the data batch belongs to an aborted transaction."""
        self._consume(h.last_offset)
        if not h.is_transactional:
            return False
        m = self.aborted.get(h.producer_id)
        if m is not None:
            m[1] = True
            return True
        self.committed.add(h.producer_id)
        return False


def map_key(key) -> bytes:
    key = bytes(key)
    return key if len(key) < 16 else hashlib.blake2b(key, digest_size=16).digest()


# -- one cleaning pass ------------------------------------------------------------------------

class _Source(NamedTuple):
    segment: LogSegment        # identity only; never used off the loop
    base: int
    next_base: int             # base of the following segment (or the uncleanable offset)
    size: int
    fd: int                    # duplicated descriptor owned by the job
    index_bytes: int
    time_index_bytes: int


@dataclass
class CleanerStats:
    """One pass's figures (Kafka's CleanerStats, plus the time the throttle slept)."""
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    map_bytes_read: int = 0
    map_messages: int = 0
    buffer_utilization: float = 0.0     # offset map entries / slots
    started: float = 0.0
    elapsed: float = 0.0
    elapsed_map: float = 0.0            # building the offset map
    throttled: float = 0.0


class CleanJob:
    """One compaction pass of one log; see the module docstring for the ownership rule."""

    def __init__(self, lg, ltc: LogToClean, now: int, max_map_entries: int,
                 throttler: Throttler | None = None, map_slots: int | None = None):
        cfg = lg.config
        self.dir = lg.dir
        self.name = f"{lg.topic}-{lg.partition}"
        self.first_dirty = ltc.first_dirty
        self.first_uncleanable = ltc.first_uncleanable
        self.now = now
        self.max_map_entries = max_map_entries
        self.map_slots = map_slots or max_map_entries
        self.throttler = throttler
        self._unthrottled = 0           # bytes not yet shown to the throttler
        self.segment_bytes = cfg.segment_bytes
        self.segment_index_bytes = cfg.segment_index_bytes
        self.index_interval_bytes = cfg.index_interval_bytes
        self.delete_retention_ms = cfg.delete_retention_ms
        self.sources: list[_Source] = []
        segs = lg.segments
        for i, seg in enumerate(segs):
            if seg.base_offset >= ltc.first_uncleanable or seg is lg.active:
                break
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else ltc.first_uncleanable
            seg._ensure_indexes()
            self.sources.append(_Source(seg, seg.base_offset, nxt, seg.size, os.dup(seg.fd),
                                        seg.offset_index.entries * 8,
                                        seg.time_index.entries * 12))
        start = self.sources[0].base if self.sources else ltc.first_dirty
        self.aborted = lg.collect_aborted_transactions(start, ltc.first_uncleanable)
        self.last_records = {pid: (e.last_offset if e.batches else None, e.producer_epoch)
                             for pid, e in lg.producer_state.producers.items()}
        self.stats = CleanerStats()
        self.end_offset: int | None = None
        self.results: list[tuple[list[_Source], LogSegment]] = []
        self._abort = threading.Event()
        self._fds_closed = False

    # -- executor side ----------------------------------------------------------------------
    def abort(self) -> None:
        self._abort.set()

    def _check(self) -> None:
        if self._abort.is_set():
            raise CleaningAborted(f"cleaning of {self.name} aborted")

    def _io(self, nbytes: int) -> None:
        """Count cleaner I/O for ``log.cleaner.io.max.bytes.per.second`` (Kafka counts what
        is read for the map, read for the copy and written).  The sleep ends early on abort."""
        t = self.throttler
        if t is None or t.unlimited:
            return
        self._unthrottled += nbytes
        if self._unthrottled >= _THROTTLE_CHUNK:
            n, self._unthrottled = self._unthrottled, 0
            self.stats.throttled += t.maybe_throttle(n, self._abort.wait)
            self._check()

    def run(self) -> "CleanJob":
        self.stats.started = time.monotonic()
        try:
            offset_map, latest = self._build_map()
            self.stats.elapsed_map = time.monotonic() - self.stats.started
            self.stats.buffer_utilization = len(offset_map) / self.map_slots
            if latest < self.first_dirty:
                raise RuntimeError(f"{self.name}: the offset map cannot hold one batch of the "
                                   f"dirty section (log.cleaner.dedupe.buffer.size too small)")
            self.end_offset = latest + 1
            todo = [s for s in self.sources if s.base < self.end_offset]
            tracker = _TxnTracker(self.aborted)
            for group in self._group(todo):
                self._check()
                self.results.append((group, self._clean_group(group, offset_map, latest,
                                                              tracker)))
        except BaseException:
            self.discard()
            raise
        finally:
            self._close_fds()
            self.stats.elapsed = time.monotonic() - self.stats.started
        return self

    def _close_fds(self) -> None:
        if not self._fds_closed:
            self._fds_closed = True
            for s in self.sources:
                os.close(s.fd)

    def discard(self) -> None:
        """Delete every file this job wrote (any thread)."""
        for _, seg in self.results:
            seg.delete()
        self.results = []

    def _build_map(self) -> tuple[dict, int]:
        start = self.first_dirty
        tracker = _TxnTracker([t for t in self.aborted if t.last_offset >= start])
        offset_map: dict = {}
        cap = self.max_map_entries
        latest = start - 1
        for src in self.sources:
            if src.next_base <= start:
                continue
            for _, h, buf in FileScanner(src.fd, 0, src.size):
                self._check()
                self.stats.map_bytes_read += h.size
                self._io(h.size)
                if h.last_offset < start:
                    if h.is_control:
                        tracker.on_control(h, buf)
                    else:
                        tracker.on_batch(h)
                    continue
                if h.is_control:
                    tracker.on_control(h, buf)
                elif not tracker.on_batch(h) and h.magic == 2:
                    for r in iter_records(buf, h):
                        if r.key is not None and r.offset >= start:
                            k = map_key(r.key)
                            if len(offset_map) >= cap and k not in offset_map:
                                return offset_map, latest
                            offset_map[k] = r.offset
                        self.stats.map_messages += 1
                latest = max(latest, h.last_offset)
            latest = max(latest, src.next_base - 1)     # offset gaps: the whole segment
        return offset_map, latest

    def _group(self, sources: list[_Source]) -> list[list[_Source]]:
        groups = []
        i = 0
        while i < len(sources):
            group = [sources[i]]
            size, isize, tsize = sources[i].size, sources[i].index_bytes, \
                sources[i].time_index_bytes
            i += 1
            while i < len(sources):
                s = sources[i]
                last = s.next_base - 1
                if size + s.size > self.segment_bytes \
                        or isize + s.index_bytes > self.segment_index_bytes \
                        or tsize + s.time_index_bytes > self.segment_index_bytes \
                        or (s.size and last - group[0].base > INT32_MAX):
                    break
                group.append(s)
                size += s.size
                isize += s.index_bytes
                tsize += s.time_index_bytes
                i += 1
            groups.append(group)
        return groups

    def _clean_group(self, group, offset_map, latest, tracker) -> LogSegment:
        out_seg = LogSegment(self.dir, group[0].base, index_interval_bytes=self.index_interval_bytes,
                             index_bytes=self.segment_index_bytes, now_ms=self.now,
                             create=True, active=True, suffix=CLEANED_SUFFIX)
        tracker.cleaned_index = out_seg.txn_index
        try:
            out = bytearray()
            starts: list[int] = []
            for src in group:
                for _, h, buf in FileScanner(src.fd, 0, src.size):
                    self._check()
                    self.stats.bytes_read += h.size
                    self._io(h.size)
                    piece = self._filter_batch(h, buf, offset_map, latest, tracker)
                    if piece is not None:
                        starts.append(len(out))
                        out += piece
                        if len(out) >= _OUT_CHUNK:
                            self._append(out_seg, out, starts)
                            out, starts = bytearray(), []
            if out:
                self._append(out_seg, out, starts)
            out_seg.on_becoming_inactive()
            out_seg.flush()
            mtime = os.fstat(group[-1].fd).st_mtime
            os.utime(out_seg.log_path, (time.time(), mtime))
        except BaseException:
            out_seg.delete()
            raise
        finally:
            tracker.cleaned_index = None
        return out_seg

    def _append(self, seg: LogSegment, out: bytearray, starts: list[int]) -> None:
        headers = [read_header(out, p) for p in starts]
        seg.append(out, headers)
        self.stats.bytes_written += len(out)
        self._io(len(out))

    def _filter_batch(self, h, buf, offset_map, latest, tracker):
        """The bytes to keep for batch ``h`` (original, rebuilt or empty) or None."""
        original = buf[h.pos:h.pos + h.size]
        if h.magic != 2:
            return bytes(original)          # legacy batches are never written by 3.x brokers
        has_horizon = bool(h.attributes & DELETE_HORIZON_MASK)
        if h.is_control:
            can_discard = tracker.on_control(h, buf)
            discard = can_discard and has_horizon and h.base_timestamp <= self.now
        else:
            can_discard = tracker.on_batch(h)
            discard = can_discard
        last_rec = self.last_records.get(h.producer_id) if h.producer_id >= 0 else None
        is_last_of_producer = False
        if last_rec is not None:
            last_data, epoch = last_rec
            is_last_of_producer = h.last_offset == last_data if last_data is not None \
                else (h.is_control and h.producer_epoch == epoch)
        if is_last_of_producer or h.next_offset == self.first_uncleanable:
            retention = "retain_empty"
        elif discard:
            retention = "delete"
        else:
            retention = "delete_empty"
        marker_for_empty_txn = can_discard and h.is_control
        self.stats.messages_read += h.records_count
        if retention == "delete":
            return None
        records = list(iter_records(buf, h))
        retained = []
        tombstones = False
        for r in records:
            if discard:
                keep = False
            elif h.is_control:
                keep = True
            elif r.offset > latest:
                keep = True
            elif r.key is None:
                keep = False
            else:
                found = offset_map.get(map_key(r.key), -1)
                keep = r.offset >= found and (
                    r.value is not None or not has_horizon or self.now < h.base_timestamp)
            if keep:
                retained.append(r)
                if r.value is None:
                    tombstones = True
        if retained:
            self.stats.messages_written += len(retained)
            need_horizon = (tombstones or marker_for_empty_txn) and not has_horizon
            if len(retained) == len(records) and not need_horizon:
                return bytes(original)
            if need_horizon:
                horizon = self.now + self.delete_retention_ms
            else:
                horizon = h.base_timestamp if has_horizon else None
            return build_batch(retained, base_offset=h.base_offset, compression=h.compression,
                               producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                               base_sequence=h.base_sequence,
                               is_transactional=h.is_transactional, is_control=h.is_control,
                               partition_leader_epoch=h.partition_leader_epoch,
                               timestamp_type=h.timestamp_type,
                               max_timestamp=h.max_timestamp if h.timestamp_type else None,
                               keep_offsets=True, last_offset_delta=h.last_offset_delta,
                               delete_horizon_ms=horizon)
        if retention == "retain_empty":
            return build_batch([], base_offset=h.base_offset, producer_id=h.producer_id,
                               producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                               is_transactional=h.is_transactional, is_control=h.is_control,
                               partition_leader_epoch=h.partition_leader_epoch,
                               timestamp_type=h.timestamp_type, base_timestamp=-1,
                               max_timestamp=h.max_timestamp,
                               last_offset_delta=h.last_offset_delta)
        return None

    # -- loop side --------------------------------------------------------------------------
    def finish(self, lg) -> int | None:
        """Swap the cleaned segments in (loop).  Returns the new checkpoint, or None if the
        log changed under the job (its files are then deleted)."""
        done = 0
        try:
            for group, new in self.results:
                ok = lg.replace_segments(new, [s.segment for s in group],
                                         [s.size for s in group], now=self.now)
                if not ok:
                    log.info("log %s changed during cleaning; discarding the cleaned segments",
                             self.name)
                    return None
                done += 1
            return self.end_offset
        finally:
            for _, new in self.results[done:]:
                new.delete()
            self.results = []


def clean_log(lg, checkpoint: int | None = None, *, now: int | None = None,
              config: CleanerConfig | None = None, force: bool = False):
    """Run one whole pass synchronously (tests/tools).  Returns (new checkpoint or None,
    stats); None also when the log is not cleanable (unless ``force``)."""
    now = lg.time_ms() if now is None else now
    config = config or CleanerConfig()
    ltc = log_to_clean(lg, checkpoint, now)
    if not (is_cleanable(lg, ltc) or (force and ltc.first_dirty < ltc.first_uncleanable)):
        return None, None
    job = CleanJob(lg, ltc, now, config.max_map_entries)
    job.run()
    return job.finish(lg), job.stats


# -- the driver -------------------------------------------------------------------------------

class LogCleaner:
    """Compaction for every compacted log of a ``LogManager`` (loop-owned).

    ``log.cleaner.threads`` workers, each with a thread of its own
    (``kafka-log-cleaner-thread-N``), clean different logs at once: a log being cleaned is
    in ``in_progress`` and no other worker picks it.  One ``Throttler`` holds all of them to
    ``log.cleaner.io.max.bytes.per.second``.  With ``broker_config`` every cleaner key but
    ``log.cleaner.enable`` is read again before each pass, so a dynamic change (kafka-configs.sh
    ``--entity-default``) applies from the next pass on, as Kafka's reconfiguration restarts its
    cleaner threads; a change of the rate reaches passes under way."""

    def __init__(self, log_manager, config: CleanerConfig | None = None, time_ms=None,
                 broker_config=None):
        self.lm = log_manager
        self.broker_config = broker_config
        if config is None:
            config = CleanerConfig.from_broker(broker_config) if broker_config is not None \
                else CleanerConfig()
        self.config = config
        self.throttler = Throttler(config.io_max_bytes_per_second)
        self.time_ms = time_ms or log_manager.time_ms
        self.checkpoints: dict[str, dict[tuple[str, int], int]] = {}
        self._owner: dict[tuple[str, int], object] = {}    # Log the checkpoint belongs to
        self.uncleanable: set[tuple[str, int]] = set()
        self.in_progress: dict[tuple[str, int], CleanJob] = {}
        self._cleaning: dict[tuple[str, int], tuple[CleanJob, object]] = {}   # with its Log
        # what the metrics report (Kafka's LogCleaner and LogCleanerManager gauges)
        self.last_stats: dict[int, CleanerStats] = {}       # per worker, its last pass
        self.last_delay_ms: dict[int, int] = {}             # per worker, at its last pick
        self.time_of_last_run = now_ms()
        self.dirtiest_ratio = 0.0
        self._workers: dict[int, asyncio.Task] = {}
        self._executors: dict[int, ThreadPoolExecutor] = {}
        self._stopped = False
        self.generation = 0             # bumped by every configuration change
        for d in log_manager.log_dirs:
            path = os.path.join(d, CLEANER_OFFSET_CHECKPOINT)
            try:
                self.checkpoints[d] = read_offsets_checkpoint(path)
            except CheckpointError as e:
                log.warning("ignoring %s: %s", path, e)
                self.checkpoints[d] = {}
            if not os.path.exists(path):
                write_offsets_checkpoint(path, {})

    def refresh_config(self) -> None:
        """Read the cleaner's keys from the broker config again (dynamic updates)."""
        if self.broker_config is None:
            return
        new = CleanerConfig.from_broker(self.broker_config)
        if new != self.config:
            log.info("log cleaner reconfigured: %s", ", ".join(
                f"{k}={v}" for k, v in vars(new).items() if getattr(self.config, k) != v))
            if new.io_max_bytes_per_second != self.config.io_max_bytes_per_second:
                self.throttler.set_rate(new.io_max_bytes_per_second)   # as Kafka: only a new rate
            self.config = new
            self.generation += 1

    # -- checkpoints ------------------------------------------------------------------------
    def checkpoint_of(self, tp, lg) -> int | None:
        d = self.lm.log_dir_of.get(tp)
        cps = self.checkpoints.setdefault(d, {})
        owner = self._owner.get(tp)
        if owner is not None and owner is not lg:
            cps.pop(tp, None)          # the log was deleted and created again
        self._owner[tp] = lg
        cp = cps.get(tp)
        if lg.lowest_truncation is not None:
            if cp is not None and cp > lg.lowest_truncation:
                cp = cps[tp] = lg.lowest_truncation
            lg.lowest_truncation = None
        return cp

    def update_checkpoint(self, tp, offset: int) -> None:
        d = self.lm.log_dir_of.get(tp)
        if d is None:
            return
        cps = self.checkpoints.setdefault(d, {})
        cps[tp] = offset
        live = {t for t, dd in self.lm.log_dir_of.items() if dd == d}
        for t in [t for t in cps if t not in live]:
            del cps[t]
        write_offsets_checkpoint(os.path.join(d, CLEANER_OFFSET_CHECKPOINT), cps)

    # -- choice -----------------------------------------------------------------------------
    def grab_filthiest(self, now: int | None = None, worker: int = 0):
        """(tp, log, LogToClean) of the dirtiest cleanable compacted log that no worker is
        cleaning, or None (loop).  Records what Kafka's gauges report: the time of this look,
        the dirtiest ratio and the longest delay past ``max.compaction.lag.ms``."""
        now = self.time_ms() if now is None else now
        self.time_of_last_run = now_ms()
        best = None
        dirtiest = 0.0
        delay = 0
        for tp in [t for t in self.uncleanable if t not in self.lm.logs]:
            self.uncleanable.discard(tp)            # deleted since (Kafka forgets them too)
        for tp, lg in list(self.lm.logs.items()):
            if lg.closed or not lg.config.compact_enabled or tp in self.uncleanable \
                    or tp in self.in_progress \
                    or tp in self.lm.future_logs:   # paused while moving to another log dir
                continue
            ltc = log_to_clean(lg, self.checkpoint_of(tp, lg), now)
            delay = max(delay, ltc.compaction_delay_ms)
            if ltc.total_bytes > 0:
                dirtiest = max(dirtiest, ltc.ratio)
            if not is_cleanable(lg, ltc):
                continue
            if best is None or ltc.ratio > best[2].ratio:
                best = (tp, lg, ltc)
        self.dirtiest_ratio = dirtiest
        if best is not None:
            self.last_delay_ms[worker] = delay
        return best

    def uncleanable_by_dir(self) -> dict[str, tuple[int, int]]:
        """{log dir: (uncleanable partitions, their cleanable bytes)} for every log dir (loop)."""
        out = {d: (0, 0) for d in self.lm.log_dirs}
        now = self.time_ms()
        for tp in self.uncleanable:
            d, lg = self.lm.log_dir_of.get(tp), self.lm.logs.get(tp)
            if d is None or lg is None or lg.closed:
                continue
            n, nbytes = out.get(d, (0, 0))
            out[d] = (n + 1, nbytes + log_to_clean(lg, self.checkpoint_of(tp, lg), now).cleanable_bytes)
        return out

    def _job(self, lg, ltc, now) -> CleanJob:
        c = self.config
        return CleanJob(lg, ltc, now, c.max_map_entries, self.throttler, c.map_slots)

    # -- running ----------------------------------------------------------------------------
    def clean_one_sync(self, now: int | None = None) -> bool:
        """Clean the filthiest log in this thread (tests)."""
        now = self.time_ms() if now is None else now
        pick = self.grab_filthiest(now)
        if pick is None:
            return False
        tp, lg, ltc = pick
        job = self._job(lg, ltc, now)
        try:
            job.run()
        except CleaningAborted:
            raise
        except Exception:
            self.uncleanable.add(tp)
            raise
        self._finish(tp, lg, job, 0)
        return True

    def _finish(self, tp, lg, job: CleanJob, worker: int) -> None:
        end = job.finish(lg)
        if end is None:
            return
        self.update_checkpoint(tp, end)
        s = job.stats
        self.last_stats[worker] = s
        mb = 1 << 20
        cleaning = max(s.elapsed - s.elapsed_map, 1e-9)
        log.info("cleaned log %s-%d (dirty section [%d, %d)) on cleaner thread %d: "
                 "%.1f MB in %.3f s (%.1f MB/s); offset map of %.1f MB in %.3f s "
                 "(%.0f%% of the time), %.1f%% of its buffer; copy of %.1f MB in %.3f s "
                 "(%.0f%% of the time); throttled %.3f s; %.1f MB (%d messages) became "
                 "%.1f MB (%d messages), %.1f%% smaller",
                 tp[0], tp[1], job.first_dirty, end, worker,
                 s.bytes_read / mb, s.elapsed, s.bytes_read / mb / max(s.elapsed, 1e-9),
                 s.map_bytes_read / mb, s.elapsed_map, 100 * s.elapsed_map / max(s.elapsed, 1e-9),
                 100 * s.buffer_utilization, s.bytes_read / mb, cleaning,
                 100 * cleaning / max(s.elapsed, 1e-9), s.throttled,
                 s.bytes_read / mb, s.messages_read, s.bytes_written / mb, s.messages_written,
                 100 * (1 - s.bytes_written / s.bytes_read) if s.bytes_read else 0.0)

    def _gone(self, tp, lg) -> bool:
        """Whether ``lg`` was deleted, moved or replaced since its pass began (loop)."""
        return lg.closed or self.lm.logs.get(tp) is not lg

    def abort_gone(self) -> int:
        """Abort the passes whose log was deleted or replaced meanwhile (Kafka aborts the
        cleaning of a partition it deletes); returns how many (loop)."""
        n = 0
        for tp, (job, lg) in list(self._cleaning.items()):
            if self._gone(tp, lg):
                job.abort()
                n += 1
        return n

    async def clean_one(self, worker: int = 0) -> bool:
        loop = asyncio.get_running_loop()
        now = self.time_ms()
        pick = self.grab_filthiest(now, worker)
        if pick is None:
            return False
        tp, lg, ltc = pick
        job = self.in_progress[tp] = self._job(lg, ltc, now)
        self._cleaning[tp] = (job, lg)
        try:
            ex = self._executors.get(worker)
            if ex is None:
                ex = self._executors[worker] = ThreadPoolExecutor(
                    1, thread_name_prefix=f"kafka-log-cleaner-thread-{worker}")
            try:
                await loop.run_in_executor(ex, job.run)
            except asyncio.CancelledError:
                job.abort()        # the thread stops at its next batch and deletes its files
                raise
            except CleaningAborted:
                return False
            except Exception as e:
                if self._gone(tp, lg):
                    # deleted meanwhile (its dir renamed under the pass): nothing failed, and a
                    # partition made again under the same name must not pay for it
                    log.info("cleaning of %s-%d stopped: the log was deleted or replaced (%s)", *tp, e)
                    return False
                log.exception("cleaning log %s-%d failed; marking it uncleanable", *tp)
                self.uncleanable.add(tp)
                self.lm.report_error(tp, e)     # a failed disk takes its dir offline
                return False
            if self._stopped or self._gone(tp, lg):
                job.discard()
                return False
            try:
                self._finish(tp, lg, job, worker)
            except (OSError, StorageError) as e:
                self.lm.report_error(tp, e)
                raise
            return True
        finally:
            self.in_progress.pop(tp, None)
            self._cleaning.pop(tp, None)

    async def _worker(self, worker: int) -> None:
        """One cleaner thread's loop: clean while there is work, else sleep
        ``log.cleaner.backoff.ms``; ends when ``log.cleaner.threads`` drops below its number."""
        while not self._stopped:
            self.refresh_config()
            if worker >= max(1, self.config.threads):
                break
            try:
                cleaned = await self.clean_one(worker)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner pass failed")
                cleaned = False
            if not cleaned:
                await asyncio.sleep(self.config.backoff_ms / 1000)
            else:
                await asyncio.sleep(0)
        ex = self._executors.pop(worker, None)
        if ex is not None:
            ex.shutdown(wait=False)

    @staticmethod
    def _died(t: asyncio.Task) -> bool:
        return t.done() and not t.cancelled() and t.exception() is not None

    @property
    def dead_threads(self) -> int:
        """Workers that ended on an unexpected error (Kafka's DeadThreadCount)."""
        return sum(1 for t in self._workers.values() if self._died(t))

    async def run(self) -> None:
        """Background task: keep ``log.cleaner.threads`` workers running, checking every
        second for a change of that number (a worker above it ends after its pass).  A worker
        that died stays dead until the next configuration change, as Kafka restarts its
        cleaner threads only when it is reconfigured."""
        loop = asyncio.get_running_loop()
        seen = self.generation
        try:
            while not self._stopped:
                self.refresh_config()
                self.abort_gone()
                changed, seen = self.generation != seen, self.generation
                n = max(1, self.config.threads)
                for i in [i for i, t in self._workers.items() if i >= n and t.done()]:
                    # a worker above the thread count has ended: its figures leave the gauges,
                    # as Kafka's reconfiguration replaces its cleaner threads
                    del self._workers[i]
                    self.last_stats.pop(i, None)
                    self.last_delay_ms.pop(i, None)
                for i in range(n):
                    t = self._workers.get(i)
                    if t is None or (t.done() and (changed or not self._died(t))):
                        self._workers[i] = loop.create_task(self._worker(i),
                                                            name=f"log-cleaner-{i}")
                await asyncio.sleep(1.0)
        finally:
            self.stop()
            for t in self._workers.values():
                t.cancel()

    def stop(self) -> None:
        self._stopped = True
        for job in list(self.in_progress.values()):
            job.abort()
        for ex in self._executors.values():
            ex.shutdown(wait=False)
        self._executors.clear()

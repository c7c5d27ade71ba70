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
  something to clean.  The filthiest log goes first; one log at a time.
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

``LogCleaner`` drives this for a ``LogManager``: checkpoints, choice, one dedicated cleaner
thread, and the asyncio loop ``run()`` the broker schedules (sleeping
``log.cleaner.backoff.ms`` when nothing was cleanable).  The cleaner's Python record decoding
holds the GIL, so a pass costs the loop some latency (the interpreter switches threads every
5 ms); ``clean_log`` runs a whole pass synchronously (tests, tools).
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
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


# -- configuration and choice -----------------------------------------------------------------

@dataclass
class CleanerConfig:
    enable: bool = True
    backoff_ms: int = 15000
    dedupe_buffer_size: int = 134217728
    io_buffer_load_factor: float = 0.9
    threads: int = 1

    @classmethod
    def from_broker(cls, cfg) -> "CleanerConfig":
        g = cfg.get
        return cls(bool(g("log.cleaner.enable")), int(g("log.cleaner.backoff.ms")),
                   int(g("log.cleaner.dedupe.buffer.size")),
                   float(g("log.cleaner.io.buffer.load.factor")), int(g("log.cleaner.threads")))

    @property
    def max_map_entries(self) -> int:
        per_thread = self.dedupe_buffer_size // max(1, self.threads)
        return max(1, int(per_thread // MAP_BYTES_PER_ENTRY * self.io_buffer_load_factor))


class LogToClean(NamedTuple):
    first_dirty: int
    first_uncleanable: int        # a segment base offset
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool

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
    max_lag = max(cfg.max_compaction_lag_ms, 0)
    need_now = earliest is not None and earliest < now - max_lag
    return LogToClean(first_dirty, first_uncleanable, clean, dirty, need_now)


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
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    map_messages: int = 0
    started: float = 0.0
    elapsed: float = 0.0


class CleanJob:
    """One compaction pass of one log; see the module docstring for the ownership rule."""

    def __init__(self, lg, ltc: LogToClean, now: int, max_map_entries: int):
        cfg = lg.config
        self.dir = lg.dir
        self.name = f"{lg.topic}-{lg.partition}"
        self.first_dirty = ltc.first_dirty
        self.first_uncleanable = ltc.first_uncleanable
        self.now = now
        self.max_map_entries = max_map_entries
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
        self._abort = False
        self._fds_closed = False

    # -- executor side ----------------------------------------------------------------------
    def abort(self) -> None:
        self._abort = True

    def _check(self) -> None:
        if self._abort:
            raise CleaningAborted(f"cleaning of {self.name} aborted")

    def run(self) -> "CleanJob":
        self.stats.started = time.monotonic()
        try:
            offset_map, latest = self._build_map()
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
    """Compaction for every compacted log of a ``LogManager`` (loop-owned)."""

    def __init__(self, log_manager, config: CleanerConfig | None = None, time_ms=None):
        self.lm = log_manager
        self.config = config or CleanerConfig()
        self.time_ms = time_ms or log_manager.time_ms
        self.checkpoints: dict[str, dict[tuple[str, int], int]] = {}
        self._owner: dict[tuple[str, int], object] = {}    # Log the checkpoint belongs to
        self.uncleanable: set[tuple[str, int]] = set()
        self._job: CleanJob | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._stopped = False
        for d in log_manager.log_dirs:
            path = os.path.join(d, CLEANER_OFFSET_CHECKPOINT)
            try:
                self.checkpoints[d] = read_offsets_checkpoint(path)
            except CheckpointError as e:
                log.warning("ignoring %s: %s", path, e)
                self.checkpoints[d] = {}
            if not os.path.exists(path):
                write_offsets_checkpoint(path, {})

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
    def grab_filthiest(self, now: int | None = None):
        """(tp, log, LogToClean) of the dirtiest cleanable compacted log, or None (loop)."""
        now = self.time_ms() if now is None else now
        best = None
        for tp, lg in list(self.lm.logs.items()):
            if lg.closed or not lg.config.compact_enabled or tp in self.uncleanable \
                    or tp in self.lm.future_logs:   # paused while moving to another log dir
                continue
            ltc = log_to_clean(lg, self.checkpoint_of(tp, lg), now)
            if not is_cleanable(lg, ltc):
                continue
            if best is None or ltc.ratio > best[2].ratio:
                best = (tp, lg, ltc)
        return best

    # -- running ----------------------------------------------------------------------------
    def clean_one_sync(self, now: int | None = None) -> bool:
        """Clean the filthiest log in this thread (tests)."""
        now = self.time_ms() if now is None else now
        pick = self.grab_filthiest(now)
        if pick is None:
            return False
        tp, lg, ltc = pick
        job = CleanJob(lg, ltc, now, self.config.max_map_entries)
        try:
            job.run()
        except CleaningAborted:
            raise
        except Exception:
            self.uncleanable.add(tp)
            raise
        self._finish(tp, lg, job)
        return True

    def _finish(self, tp, lg, job: CleanJob) -> None:
        end = job.finish(lg)
        if end is None:
            return
        self.update_checkpoint(tp, end)
        s = job.stats
        log.info("cleaned log %s-%d (dirty section [%d, %d)): %.1f KB read, %.1f KB written, "
                 "%d of %d messages kept, %.0f ms", tp[0], tp[1], job.first_dirty,
                 job.first_uncleanable, s.bytes_read / 1024, s.bytes_written / 1024,
                 s.messages_written, s.messages_read, s.elapsed * 1000)

    async def clean_one(self) -> bool:
        loop = asyncio.get_running_loop()
        now = self.time_ms()
        pick = self.grab_filthiest(now)
        if pick is None:
            return False
        tp, lg, ltc = pick
        job = self._job = CleanJob(lg, ltc, now, self.config.max_map_entries)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="kafka-log-cleaner-thread")
        try:
            await loop.run_in_executor(self._executor, job.run)
        except asyncio.CancelledError:
            job.abort()        # the thread stops at its next batch and deletes its files
            raise
        except CleaningAborted:
            return False
        except Exception as e:
            log.exception("cleaning log %s-%d failed; marking it uncleanable", *tp)
            self.uncleanable.add(tp)
            self.lm.report_error(tp, e)     # a failed disk takes its dir offline
            return False
        finally:
            self._job = None
        if self._stopped:
            job.discard()
            return False
        try:
            self._finish(tp, lg, job)
        except (OSError, StorageError) as e:
            self.lm.report_error(tp, e)
            raise
        return True

    async def run(self) -> None:
        """Background task: clean while there is work, else sleep ``log.cleaner.backoff.ms``."""
        try:
            while not self._stopped:
                try:
                    cleaned = await self.clean_one()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("log cleaner pass failed")
                    cleaned = False
                if not cleaned:
                    await asyncio.sleep(self.config.backoff_ms / 1000)
                else:
                    await asyncio.sleep(0)
        finally:
            self.stop()

    def stop(self) -> None:
        self._stopped = True
        if self._job is not None:
            self._job.abort()
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

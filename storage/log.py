"""Log: one partition directory ``<topic>-<partition>``.

How this works:

* ``segments`` is ordered by base offset (``bases`` mirrors it for ``bisect``); the last one is
  the active segment, the only one appended to.  Offsets: ``log_start_offset`` ≤
  ``high_watermark`` ≤ ``log_end_offset``; ``recovery_point`` = offset below which data is
  known fsynced.  The broker owns the high watermark and sets it with
  ``update_high_watermark``; storage only clamps it on truncation.
* ``append`` (leader) parses headers only, validates CRC/size/timestamps and producer
  sequences, assigns offsets by patching baseOffset and partitionLeaderEpoch in place, rolls if
  needed, and writes the whole buffer with one ``pwrite``.  ``append_as_follower`` takes
  batches that already carry offsets and epochs.
* ``read`` answers with a ``FetchDataInfo`` holding ``FileRegion``s (fd, position, length), at
  least one whole batch when ``min_one_message`` (KIP-74), none when ``whole_first`` and the
  first batch does not fit, never past ``max_offset``.
* Retention (``delete_old_segments``) deletes whole segments oldest first by time, size and log
  start offset, never past the high watermark; deleted segments are renamed ``.deleted`` and
  removed ``file.delete.delay.ms`` later (``delete_expired_files``) so in-flight regions stay valid.
* Opening a log after an unclean shutdown recovers every segment from the one holding the
  recovery point (CRC scan, tail truncation, index rebuild), then rebuilds producer state from
  the newest snapshot at or below that segment plus a replay, which also rebuilds the recovered
  segments' ``.txnindex``; after a clean shutdown nothing is scanned.  Before that, cleaner
  leftovers are settled (``cleaner.complete_swaps``: ``.cleaned`` deleted, valid ``.swap``
  completed).
* Aborted transactions: an ABORT marker adds a ``.txnindex`` entry to the segment holding it;
  ``aborted_transactions(start, end)`` answers read_committed fetches.
* Compaction (``cleaner.py``) runs off the loop on immutable inactive segment files and hands
  back ``.cleaned`` segments; ``replace_segments`` swaps them in on the loop.

Threading: a Log is plain synchronous code and must be used from ONE thread at a time (the
event loop).  Blocking work is split so it can leave the loop: ``start_flush()`` (loop) returns
a ``FlushJob`` whose ``run()`` only fsyncs duplicated descriptors and may run in an executor;
``finish_flush(job)`` (loop) advances the recovery point.  Opening/recovering a log, ``close``
and ``delete`` may run in an executor provided nothing else touches that Log meanwhile.
"""
from __future__ import annotations

import logging
import os
import random
import time
import uuid
from bisect import bisect_right
from typing import NamedTuple

from protocol.compression import CODEC_NAMES
from protocol.records import (CorruptRecordError, InvalidRecordError, TruncatedBatch,
                              iter_batches, read_header, recompress_batch, record_summaries, scan_batches,
                              set_base_offset, set_log_append_time, set_partition_leader_epoch,
                              tagged, validate_batch)

from .config import LONG_MAX, LogConfig
from .errors import (InvalidProducerEpochError, InvalidTimestampError, OffsetOutOfRangeError,
                     OutOfOrderSequenceError, RecordTooLargeError, StorageError,
                     UnexpectedAppendOffsetError, UnknownProducerIdError)
from .checkpoint import read_file
from .cleaner import complete_swaps
from .leader_epoch import LeaderEpochCache
from .producer_state import ProducerStateManager, SeqResult
from .scan import FileScanner, control_marker
from .segment import DELETED_SUFFIX, LogSegment
from .txn_index import AbortedTxn, aborted_entries

logger = logging.getLogger("odradek.log")

_RNG = random.Random()      # segment roll jitter

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP = -2, -1, -3, -4


def now_ms() -> int:
    return int(time.time() * 1000)


def parse_dir_name(name: str) -> tuple[str, int]:
    """``orders-3`` → ("orders", 3); the topic may itself contain '-'."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory")
    return topic, int(part)


FUTURE_SUFFIX = "-future"


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's name for a replica being moved to another log dir (AlterReplicaLogDirs):
    ``<topic>-<partition>.<32 hex digits>-future``."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def parse_log_dir_name(name: str) -> tuple[str, int, bool]:
    """(topic, partition, is_future) of a partition directory, current or future."""
    if name.endswith(FUTURE_SUFFIX):
        stem, dot, uid = name[:-len(FUTURE_SUFFIX)].rpartition(".")
        if not dot or len(uid) != 32 or any(c not in "0123456789abcdef" for c in uid):
            raise ValueError(f"{name!r} is not a <topic>-<partition>.<id>-future directory")
        return (*parse_dir_name(stem), True)
    return (*parse_dir_name(name), False)


def _needs_record_checks(cfg, h, bounded: bool) -> bool:
    """Whether a client's batch ``h`` gets Kafka's per-record checks under ``cfg``: on a
    compacted topic, under timestamp bounds (CreateTime topics), or when its producer marked it
    LogAppendTime on a LogAppendTime topic."""
    return cfg.compact_enabled or bool(h.timestamp_type if cfg.log_append_time else bounded)


def _recompressed(h, codec: int) -> bool:
    """Whether ``compression.type``'s ``codec`` rewrites batch ``h``: a batch in another codec,
    except an uncompressed control batch (Kafka does not compress markers)."""
    return h.compression != codec and not (h.is_control and not h.compression)


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int            # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    num_batches: int
    valid_bytes: int
    duplicate: bool = False         # True: nothing written, offsets are the original batch's


class FetchDataInfo(NamedTuple):
    fetch_offset: int
    regions: tuple                  # FileRegion...; empty when there is nothing to return
    segment_base_offset: int = -1

    @property
    def length(self) -> int:
        return sum(r.length for r in self.regions)

    def read(self) -> bytes:
        return b"".join(r.read() for r in self.regions)


class FlushJob:
    """fsync work that may run in an executor: duplicated fds + index paths, nothing shared."""

    def __init__(self, offset: int, fds: list[int], paths: list[str]):
        self.offset, self.fds, self.paths = offset, fds, paths
        self.error: OSError | None = None

    def run(self) -> "FlushJob":
        try:
            for fd in self.fds:
                os.fsync(fd)
            for p in self.paths:
                try:
                    fd = os.open(p, os.O_RDONLY)
                except FileNotFoundError:
                    continue
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as e:
            self.error = e
        finally:
            for fd in self.fds:
                os.close(fd)
            self.fds = []
        return self


class Log:
    """One partition's log directory.  Owns its segments, epoch cache and producer state."""

    def __init__(self, dir: str, config: LogConfig | None = None, *, recovery_point: int = 0,
                 log_start_offset: int | None = None, high_watermark: int | None = None,
                 clean_shutdown: bool = True, time_ms=now_ms, topic_id: str | None = None,
                 rng: random.Random | None = None):
        self.dir = dir
        self.topic, self.partition, self.is_future = parse_log_dir_name(
            os.path.basename(os.path.normpath(dir)))
        self.config = config or LogConfig()
        self.time_ms = time_ms
        self._rng = rng or _RNG
        try:
            os.mkdir(dir)
            fresh = True        # nothing to scan, recover or read back
        except FileExistsError:
            fresh = False
        except FileNotFoundError:       # the log dir itself is missing
            os.makedirs(dir)
            fresh = True
        self.segments: list[LogSegment] = []
        self.bases: list[int] = []
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.unflushed_messages = 0
        self.last_flush_ms = time_ms()
        self._roll_flush_pending = False
        self.closed = False
        self.lowest_truncation: int | None = None   # for the cleaner checkpoint (cleaner.py)
        self.truncations = 0        # counts truncations (a replica's copy to another dir restarts)
        self.epoch_cache = LeaderEpochCache(os.path.join(dir, LEADER_EPOCH_CHECKPOINT), fresh=fresh)
        self.producer_state = ProducerStateManager(dir)
        self._metadata_pending = False
        self.topic_id = None if fresh else self._read_partition_metadata()
        if topic_id is not None:
            self.set_topic_id(topic_id, defer=fresh)
        if fresh:
            self._create(log_start_offset or 0)
        else:
            self._load(recovery_point, log_start_offset, high_watermark, clean_shutdown)

    # -- loading ----------------------------------------------------------------------------
    def _new_segment(self, base: int, create: bool, active: bool, lazy: bool = False) -> LogSegment:
        jitter = self._rng.randrange(self.config.segment_jitter_ms) \
            if self.config.segment_jitter_ms > 0 else 0
        return LogSegment(self.dir, base, index_interval_bytes=self.config.index_interval_bytes,
                          index_bytes=self.config.segment_index_bytes, now_ms=self.time_ms(),
                          rolling_jitter_ms=jitter, create=create, active=active, lazy=lazy,
                          preallocate=self.config.segment_bytes if self.config.preallocate else 0)

    def _create(self, start: int) -> None:
        """A brand-new log: one empty active segment at ``start``, no producers.  Its files
        (the .log, partition.metadata) are created by the first append: until then the
        directory is empty, a new partition costing one inode (see docs/storage.md)."""
        seg = self._new_segment(start, True, True, lazy=True)
        self.segments.append(seg)
        self.bases.append(start)
        seg.on_becoming_active()
        self.log_end_offset = self.log_start_offset = self.high_watermark = start
        self.recovery_point = start
        self.producer_state.reset(start)

    def _load(self, recovery_point, log_start_offset, high_watermark, clean) -> None:
        names = os.listdir(self.dir)    # the one listing of the directory, passed along
        if complete_swaps(self.dir, names):     # .cleaned deleted, valid .swap renamed into place
            names = os.listdir(self.dir)
        bases = set()
        for n in names:
            path = os.path.join(self.dir, n)
            if n.endswith((DELETED_SUFFIX, ".cleaned", ".swap", ".tmp")):
                os.unlink(path)   # unfinished deletions: Kafka discards them
            elif n.endswith(".log") and n[:-4].isdigit():
                bases.add(int(n[:-4]))
        for n in names:
            stem, _, ext = n.partition(".")
            if ext in ("index", "timeindex", "txnindex") and stem.isdigit() \
                    and int(stem) not in bases:
                os.unlink(os.path.join(self.dir, n))
        ordered = sorted(bases)
        for i, b in enumerate(ordered):
            self.segments.append(self._new_segment(b, False, i == len(ordered) - 1))
            self.bases.append(b)
        if not self.segments:
            start = log_start_offset or 0
            self.segments.append(self._new_segment(start, True, True))
            self.bases.append(start)
        txn_from = None
        if not clean:
            txn_from = self._recover_from(recovery_point)
        # after a clean shutdown the indexes on disk are the ones in memory: the active ones are
        # sized up to segment.index.bytes by their next persist, not at start-up
        self.active.on_becoming_active(persist=not clean)
        self.log_end_offset = self.active.next_offset if self.active.size \
            else self.active.base_offset
        if len(self.segments) > 1 and self.active.size == 0:
            self.log_end_offset = max(self.log_end_offset, self.segments[-2].next_offset)
        first = self.segments[0].base_offset
        self.log_start_offset = min(max(log_start_offset or 0, first), self.log_end_offset)
        self.recovery_point = min(recovery_point, self.log_end_offset)
        hw = self.log_start_offset if high_watermark is None else high_watermark
        self.high_watermark = min(max(hw, self.log_start_offset), self.log_end_offset)
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self.epoch_cache.truncate_from_start(self.log_start_offset)
        self._rebuild_producer_state(clean, txn_from, names)

    def _recover_from(self, recovery_point: int) -> int:
        """Recover segments from the one holding ``recovery_point``; returns that segment's
        base offset (their ``.txnindex`` are emptied here and rebuilt by the replay)."""
        i = max(0, bisect_right(self.bases, recovery_point) - 1)
        first = self.bases[i]
        for seg in self.segments[i:]:
            seg.txn_index.reset()
        while i < len(self.segments):
            seg = self.segments[i]
            truncated = seg.recover()
            if truncated and i + 1 < len(self.segments):
                # everything after a corrupt point is unreliable: drop later segments
                for later in self.segments[i + 1:]:
                    later.delete()
                del self.segments[i + 1:]
                del self.bases[i + 1:]
                seg.active = True
            i += 1
        for seg in self.segments[:-1]:
            seg.active = False
        return first

    def _rebuild_producer_state(self, clean: bool, txn_index_from: int | None = None,
                                names: list[str] | None = None) -> None:
        """Replay from the newest usable snapshot.  With ``txn_index_from`` (recovery) the
        snapshot is at or below that offset and ABORT markers at or above it are re-indexed.
        ``names``: the log directory's listing, if just read."""
        pm = self.producer_state
        leo = self.log_end_offset
        kept = pm.delete_snapshots_after(leo, None if names is None else pm.snapshot_offsets(names))
        snap = pm.load_snapshot(leo if txn_index_from is None else min(leo, txn_index_from), kept)
        if snap is None and clean:
            pm.reset(leo)       # Kafka: no snapshot after a clean shutdown = no producers
            return
        start = max(snap if snap is not None else 0, self.segments[0].base_offset)
        if start >= leo:        # the snapshot is at the log end: nothing to replay
            pm.map_end_offset = leo
            return
        session = pm.session()
        for h, buf in self._iter_batches(start):
            if h.producer_id >= 0:
                marker = control_marker(buf, h) if h.is_control else None
                session.stage(h, marker, origin_client=False)
        completed = session.commit(leo)
        pm.map_end_offset = leo
        if txn_index_from is not None and completed:
            self._index_aborted([c for c in completed if c.last_offset >= txn_index_from])

    def _index_aborted(self, completed) -> None:
        """Append ``.txnindex`` entries for the aborted transactions among ``completed``."""
        if not any(c.is_aborted for c in completed):
            return
        for txn in aborted_entries(completed, self.producer_state.ongoing_txns.keys()):
            seg = self.segments[self._segment_index(txn.last_offset)]
            entries = seg.txn_index.entries
            if entries and entries[-1].last_offset >= txn.last_offset:
                continue        # already indexed
            seg.txn_index.append(txn)

    def _iter_batches(self, from_offset: int):
        i = max(0, bisect_right(self.bases, from_offset) - 1)
        for seg in self.segments[i:]:
            h0 = seg.translate_offset(from_offset)
            if h0 is None:
                continue
            for _, h, buf in FileScanner(seg.fd, h0.pos, seg.size):
                yield h, buf

    def assign_leader_epoch(self, epoch: int) -> None:
        """This replica leads from ``epoch`` on: the epoch starts at the log end offset (as
        Kafka's makeLeader), so OffsetForLeaderEpoch answers for it before the first append.
        A log without records keeps the entry in memory; the first append writes the
        checkpoint (a new partition's directory holds no epoch file until it has data)."""
        self.epoch_cache.assign(epoch, self.log_end_offset,
                                write=self.log_end_offset > self.log_start_offset)

    # -- partition.metadata -----------------------------------------------------------------
    def _read_partition_metadata(self) -> str | None:
        try:
            lines = read_file(os.path.join(self.dir, PARTITION_METADATA)).decode("utf-8").splitlines()
        except FileNotFoundError:
            return None
        fields = dict(ln.split(":", 1) for ln in lines if ":" in ln)
        if fields.get("version", "").strip() != "0":
            raise StorageError(f"{self.dir}/{PARTITION_METADATA}: unknown version")
        return fields.get("topic_id", "").strip() or None

    def set_topic_id(self, topic_id: str, defer: bool = False) -> None:
        """Write partition.metadata once; a different id raises (INCONSISTENT_TOPIC_ID).
        ``defer``: a new log writes it with its first append."""
        if self.topic_id is not None and self.topic_id != topic_id:
            raise ValueError(f"topic id {topic_id} does not match {self.topic_id}")
        if self.topic_id == topic_id and (self._metadata_pending or os.path.exists(
                os.path.join(self.dir, PARTITION_METADATA))):
            return
        self.topic_id = topic_id
        self._metadata_pending = True
        if not defer:
            self._write_partition_metadata()

    def _write_partition_metadata(self) -> None:
        from .checkpoint import write_atomic
        write_atomic(os.path.join(self.dir, PARTITION_METADATA),
                     f"version: 0\ntopic_id: {self.topic_id}\n".encode(), fsync=False)
        self._metadata_pending = False

    # -- basic properties -------------------------------------------------------------------
    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def update_high_watermark(self, hw: int) -> int:
        self.high_watermark = min(max(hw, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    def last_stable_offset(self) -> int:
        fuo = self.producer_state.first_unstable_offset()
        return self.high_watermark if fuo is None else min(fuo, self.high_watermark)

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self.bases, offset) - 1)

    def batch_leader_epoch(self, offset: int) -> int:
        """The leader epoch on the batch holding ``offset`` (-1 if none or unset), what Kafka
        reports with a ListOffsets MAX_TIMESTAMP answer."""
        if not self.segments:
            return -1
        epoch = self.segments[self._segment_index(offset)].batch_leader_epoch(offset)
        return epoch if epoch is not None and epoch >= 0 else -1

    # -- appends ----------------------------------------------------------------------------
    @staticmethod
    def _writable(records):
        """``records`` itself when offsets can be patched into it in place (a bytearray, or a
        writable, contiguous byte memoryview such as a slice of a received frame); otherwise
        a bytearray copy (bytes, read-only views).  The hot path (produce) never copies."""
        if isinstance(records, bytearray):
            return records
        if isinstance(records, memoryview) and not records.readonly \
                and records.c_contiguous and records.itemsize == 1:
            return records if records.format == "B" else records.cast("B")
        return bytearray(records)

    def _parse(self, records):
        buf = self._writable(records)
        headers = []
        for h in scan_batches(buf):
            if isinstance(h, TruncatedBatch):
                raise CorruptRecordError("record set ends with a partial batch")
            headers.append(h)
        if not headers:
            raise InvalidRecordError("no record batch to append")
        return buf, headers

    def append(self, records, leader_epoch: int, *, origin: str = "client",
               now: int | None = None, transaction_version: int = 0,
               checked_under=None) -> LogAppendInfo:
        """Leader append of one or more v2 batches (``records`` is patched in place when it is
        a bytearray or a writable memoryview; no reference to it is kept after the call).
        ``origin``: "client" (sequence checks, no control batches) or "coordinator" (transaction
        markers).  A marker may not carry an epoch older than the producer's; under
        ``transaction_version`` 2 (every transaction ends with a bumped epoch) it must be newer,
        or equal when no transaction is open (a retried marker).  For a client append,
        ``transaction_version`` 2 (Produce v12+) makes a transactional batch of a producer this
        partition has no batches of start at sequence 0 (Kafka 4.x).  ``checked_under``: the
        ``LogConfig`` that ``recompress`` checked a client's batches under; while it is still
        this log's config those checks are not made again, but for the timestamp bounds, which
        move with the clock (the sequence checks always run)."""
        if self.closed:     # e.g. replaced by its copy in another log dir (AlterReplicaLogDirs)
            raise StorageError(f"log {self.dir} is closed")
        now = self.time_ms() if now is None else now
        cfg = self.config
        buf, headers = self._parse(records)
        session = self.producer_state.session()
        bounded = cfg.timestamp_before_max_ms != LONG_MAX or cfg.timestamp_after_max_ms != LONG_MAX
        client = origin == "client"
        prechecked = checked_under is not None and checked_under is cfg
        for h in headers:
            if client:
                if not prechecked:
                    self._check_client_batch(buf, h)
                    if _needs_record_checks(cfg, h, bounded):
                        self._validate_records(buf, h, now)
                elif bounded and not cfg.log_append_time:
                    # the timestamp bounds move with the clock: checked again at the append,
                    # as Kafka checks them (the rest does not change while the config holds)
                    self._validate_records(buf, h, now)
                check = session.check(h, transaction_version)
                if check.result is SeqResult.DUPLICATE:
                    return LogAppendInfo(check.first_offset, check.last_offset, -1, -1, -1,
                                         self.log_start_offset, 0, 0, True)
                if check.result is SeqResult.OUT_OF_ORDER_SEQUENCE:
                    raise OutOfOrderSequenceError(check.message)
                if check.result is SeqResult.INVALID_PRODUCER_EPOCH:
                    raise InvalidProducerEpochError(check.message)
                if check.result is SeqResult.UNKNOWN_PRODUCER_ID:
                    raise UnknownProducerIdError(check.message)
                continue
            validate_batch(buf, h)
            self._check_size(h)
            if h.is_control and h.producer_id >= 0:
                entry = self.producer_state.last_entry(h.producer_id)
                if entry is not None and h.producer_epoch < entry.producer_epoch:
                    raise InvalidProducerEpochError(
                        f"marker epoch {h.producer_epoch} < {entry.producer_epoch}")
                if (entry is not None and transaction_version >= 2 and h.producer_epoch == entry.producer_epoch
                        and entry.current_txn_first_offset >= 0):
                    raise InvalidProducerEpochError(
                        f"marker epoch {h.producer_epoch} of transaction version 2 is not above the "
                        f"open transaction's {entry.producer_epoch}")
        codec = cfg.target_codec
        if codec is not None:
            buf, headers = self._recompress(buf, headers, codec)
        offset = self.log_end_offset
        append_time = now if cfg.log_append_time else -1
        for i, h in enumerate(headers):
            set_base_offset(buf, h.pos, offset)
            set_partition_leader_epoch(buf, h.pos, leader_epoch)
            if append_time >= 0:
                set_log_append_time(buf, h._replace(base_offset=offset), append_time)
            headers[i] = h = read_header(buf, h.pos)
            offset = h.next_offset
        for h in headers:
            marker = control_marker(buf, h) if h.is_control else None
            session.stage(h, marker, origin_client=True)
        return self._write(buf, headers, session, now, leader_epoch, append_time)

    def _check_size(self, h, codec: int | None = None) -> None:
        limit = self.config.max_message_bytes
        if h.size > limit:
            stored = f" stored in {CODEC_NAMES[codec]}" if codec is not None else ""
            raise RecordTooLargeError(f"batch of {h.size} bytes{stored} exceeds max.message.bytes {limit}")

    def _check_client_batch(self, buf, h) -> None:
        """A client's batch as Kafka checks it before appending (UnifiedLog.analyzeAndValidateRecords,
        then LogValidator.validateBatch): a base offset of 0, ``max.message.bytes``, the CRC and
        header, and a record count, offset range and sequence that hold; no control batch."""
        if h.base_offset != 0:
            raise InvalidRecordError(f"The baseOffset of the record batch in the append to "
                                     f"{self.topic}-{self.partition} should be 0, but it is {h.base_offset}")
        self._check_size(h)
        if h.records_count <= 0 or h.last_offset_delta < 0:
            raise tagged(InvalidRecordError(f"Invalid reported count for record batch: {h.records_count}"
                                            if h.records_count <= 0 else
                                            f"Batch has an invalid offset range: lastOffsetDelta {h.last_offset_delta}"),
                         "invalid_offset_or_sequence")
        validate_batch(buf, h)
        if h.is_control:
            raise tagged(InvalidRecordError("clients may not write control batches"), "invalid_offset_or_sequence")
        if h.producer_id >= 0 and h.base_sequence < 0:
            raise tagged(InvalidRecordError(f"Invalid sequence number {h.base_sequence} in record "
                                            f"batch with producerId {h.producer_id}"),
                         "invalid_offset_or_sequence")

    def needs_recompression(self, records) -> bool:
        """Whether ``compression.type`` would rewrite any batch of ``records`` (cheap: batch
        headers only)."""
        codec = self.config.target_codec
        return codec is not None and any(_recompressed(h, codec) for h in iter_batches(records))

    def recompress(self, records):
        """``records`` (a client's) with each batch in the ``compression.type`` codec, checked
        first as ``append`` checks a client's batches (``_check_client_batch`` and, where the
        topic asks for them, the per-record checks).  Reads nothing but the config and
        ``records``, so a produce runs it in a worker thread (gzip takes tens of milliseconds a
        megabyte).  Returns (buffer, the config it was checked under): ``append`` given that as
        ``checked_under`` finds nothing to check or rewrite again, while the config is unchanged."""
        buf, headers = self._parse(records)
        cfg = self.config
        codec = cfg.target_codec
        if codec is None:
            return buf, None
        now = self.time_ms()
        bounded = cfg.timestamp_before_max_ms != LONG_MAX or cfg.timestamp_after_max_ms != LONG_MAX
        for h in headers:
            self._check_client_batch(buf, h)
            if _needs_record_checks(cfg, h, bounded):
                self._validate_records(buf, h, now)
        return self._recompress(buf, headers, codec)[0], cfg

    def _recompress(self, buf, headers, codec: int):
        """``compression.type`` names a codec: each batch in another codec is stored in that
        one (Kafka's LogValidator), except an uncompressed control batch, which stays as it
        is.  A batch already in the codec, and every batch under ``producer``, is written as
        it came.  Returns the buffer and headers to write; a rewritten batch is checked
        against ``max.message.bytes`` again."""
        if not any(_recompressed(h, codec) for h in headers):
            return buf, headers
        level = self.config.compression_level(codec)
        out = bytearray()
        for h in headers:
            if _recompressed(h, codec):
                out += recompress_batch(buf, h, codec, level=level)
            else:
                out += buf[h.pos:h.pos + h.size]
        headers = list(iter_batches(out))
        for h in headers:
            self._check_size(h, codec)
        return out, headers

    def append_as_follower(self, records, *, now: int | None = None) -> LogAppendInfo:
        """Append batches that already carry offsets and leader epochs (replication, and the
        copy of a replica moving to another log dir)."""
        if self.closed:
            raise StorageError(f"log {self.dir} is closed")
        now = self.time_ms() if now is None else now
        buf, headers = self._parse(records)
        expected = self.log_end_offset
        for h in headers:
            validate_batch(buf, h, check_count=False)
            if h.base_offset < expected:
                raise UnexpectedAppendOffsetError(
                    f"batch at offset {h.base_offset} is below the expected {expected}")
            expected = h.next_offset
        session = self.producer_state.session()
        for h in headers:
            marker = control_marker(buf, h) if h.is_control else None
            session.stage(h, marker, origin_client=False)
        return self._write(buf, headers, session, now, None, -1)

    def append_new_batches(self, data) -> int:
        """Append, as a follower, the whole batches of ``data`` that end at or after the log end
        offset: earlier ones are skipped, a partial tail is left out, and a batch straddling the
        end (compaction rewrote the batches around it) is taken whole after truncating to its
        base.  Returns the bytes appended.  The one way replicas append what they fetched: a
        follower from its leader, a copy moving to another log dir from the current log."""
        mv = memoryview(data)
        leo = self.log_end_offset
        start = None
        end = 0
        for h in scan_batches(mv):
            if isinstance(h, TruncatedBatch):
                break
            end = h.pos + h.size
            if start is None and h.last_offset >= leo:
                if h.base_offset < leo:
                    self.truncate_to(h.base_offset)
                start = h.pos
        if start is None or end <= start:
            return 0
        self.append_as_follower(bytearray(mv[start:end]))
        return end - start

    def _validate_records(self, buf, h, now: int) -> None:
        """Kafka's per-record checks (LogValidator.validateRecord), run only where the topic asks
        for them, since they read every record (its length, timestamp, offset and key length:
        ``record_summaries``): a compacted topic refuses records without a
        key (INVALID_RECORD); CreateTime outside ``message.timestamp.before/after.max.ms`` is
        INVALID_TIMESTAMP, as is a batch marked LogAppendTime by its producer on a LogAppendTime
        topic.  The error carries ``record_errors``, (index in the batch, message) of each
        record refused, for Produce v8+; any timestamp error makes it INVALID_TIMESTAMP."""
        cfg = self.config
        tp = f"{self.topic}-{self.partition}"
        create_time = not cfg.log_append_time
        lo = now - cfg.timestamp_before_max_ms
        hi = now + cfg.timestamp_after_max_ms
        errors = []
        timestamp_error = False
        keyless = 0
        compact = cfg.compact_enabled
        for i, (offset, ts, has_key) in enumerate(record_summaries(buf, h)):
            if compact and not has_key:
                keyless += 1
                errors.append((i, f"Compacted topic cannot accept message without key in topic partition {tp}."))
            elif create_time:
                if ts != -1 and not lo <= ts <= hi:
                    timestamp_error = True
                    errors.append((i, f"Timestamp {ts} of message with offset {offset} is out of "
                                      f"range. The timestamp should be within [{lo}, {hi}]"))
            elif h.timestamp_type:
                timestamp_error = True
                errors.append((i, f"Invalid timestamp type in message with offset {offset}. Producer should "
                                  f"not set timestamp type to LogAppendTime."))
        if not errors:
            return
        if timestamp_error:
            exc = InvalidTimestampError("One or more records have been rejected due to invalid timestamp")
        else:
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
            exc = InvalidRecordError(f"One or more records have been rejected due to {len(errors)} record errors "
                                     f"in total, and only showing the first three errors at most: [{shown}]")
        exc.record_errors = errors
        if keyless:
            tagged(exc, "no_key_compacted", keyless)
        raise exc

    def _write(self, buf, headers, session, now, leader_epoch, append_time) -> LogAppendInfo:
        first, last = headers[0].base_offset, headers[-1].last_offset
        size = headers[-1].pos + headers[-1].size - headers[0].pos
        max_ts, off_max = -1, first
        for h in headers:
            if h.max_timestamp > max_ts:
                max_ts, off_max = h.max_timestamp, h.last_offset
        seg = self._maybe_roll(size, max_ts, first, last, now)
        seg.append(buf, headers)
        if self._metadata_pending:
            self._write_partition_metadata()
        if leader_epoch is not None:
            self.epoch_cache.assign(leader_epoch, first)
        else:
            for h in headers:
                self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        self.log_end_offset = last + 1
        completed = session.commit(self.log_end_offset)
        if completed:
            self._index_aborted(completed)
        self.unflushed_messages += sum(h.last_offset_delta + 1 for h in headers)
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()
        return LogAppendInfo(first, last, max_ts, off_max, append_time, self.log_start_offset,
                             len(headers), size)

    # -- roll -------------------------------------------------------------------------------
    def _maybe_roll(self, size, max_ts, first_offset, last_offset, now) -> LogSegment:
        seg = self.active
        cfg = self.config
        segment_ms = cfg.segment_ms
        if cfg.compact_enabled and cfg.max_compaction_lag_ms > 0:
            segment_ms = min(segment_ms, cfg.max_compaction_lag_ms)   # Kafka's maxSegmentMs
        if seg.should_roll(cfg.segment_bytes, segment_ms, size, max_ts, last_offset, now):
            return self.roll(first_offset, now)
        return seg

    def roll(self, expected_next_offset: int | None = None, now: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected, log end offset)."""
        now = self.time_ms() if now is None else now
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        old = self.active
        if old.base_offset == new_base and old.size == 0:
            return old
        self.producer_state.map_end_offset = self.log_end_offset
        self.producer_state.take_snapshot(new_base)
        if old.size == 0:
            # an empty active segment at a lower base: replace it
            old.delete()
            self.segments.pop()
            self.bases.pop()
        else:
            old.on_becoming_inactive()
            self._roll_flush_pending = True
        seg = self._new_segment(new_base, True, True)
        self.segments.append(seg)
        self.bases.append(new_base)
        return seg

    # -- reads ------------------------------------------------------------------------------
    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True, whole_first: bool = False) -> FetchDataInfo:
        """Bytes from ``fetch_offset`` up to ``max_offset`` (exclusive; default = log end
        offset — consumers pass the high watermark or last stable offset)."""
        leo = self.log_end_offset
        if fetch_offset < self.log_start_offset or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is outside [{self.log_start_offset}, {leo}] of "
                f"{self.topic}-{self.partition}")
        if max_offset is None:
            max_offset = leo
        if fetch_offset >= max_offset:
            return FetchDataInfo(fetch_offset, ())
        i = self._segment_index(fetch_offset)
        while i < len(self.segments):
            seg = self.segments[i]
            if (i + 1 < len(self.segments) and max_offset >= self.bases[i + 1]) \
                    or max_offset >= leo:       # all of it (no header walk to find the end)
                max_pos = seg.size
            else:
                h = seg.translate_offset(max_offset)
                max_pos = h.pos if h is not None else seg.size
            r = seg.read(fetch_offset, max_bytes, max_pos, min_one_message, whole_first)
            if r is not None:
                region = r[0]
                return FetchDataInfo(fetch_offset, (region,) if region.length else (),
                                     seg.base_offset)
            i += 1
        return FetchDataInfo(fetch_offset, ())

    def read_bytes(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
                   min_one_message: bool = True) -> bytes:
        return self.read(fetch_offset, max_bytes, max_offset, min_one_message).read()

    def stored_batches(self, start: int | None = None, end: int | None = None, chunk: int = 1 << 20):
        """Read the log back batch by batch: ``(buf, header)`` for every batch ending after
        ``start`` (default: the log start offset) and starting before ``end`` (default: the log
        end offset), in ``chunk``-sized reads.  For coordinators loading their internal topics;
        a record of the first batch may lie below ``start``."""
        offset = self.log_start_offset if start is None else start
        end = self.log_end_offset if end is None else end
        while offset < end:
            data = self.read_bytes(offset, chunk, max_offset=end)
            if not data:
                return
            last = offset
            for h in iter_batches(data):
                last = h.next_offset
                if h.next_offset > offset:
                    yield data, h
            if last <= offset:
                return
            offset = last

    def offset_for_timestamp(self, timestamp: int):
        """ListOffsets: (timestamp, offset) or None (no record at or after ``timestamp``).

        -2 earliest → (-1, log start), -1 latest → (-1, log end), -3 max timestamp,
        -4 earliest local → (-1, log start)."""
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return -1, self.log_start_offset
        if timestamp == LATEST_TIMESTAMP:
            return -1, self.log_end_offset
        if timestamp == MAX_TIMESTAMP:
            # Kafka's answer: the first record at the greatest timestamp of the first segment
            # that holds it, records below the log start offset (DeleteRecords) included
            best = None
            for seg in self.segments:
                if seg.size and (best is None or seg.max_timestamp > best.max_timestamp):
                    best = seg
            if best is None or best.max_timestamp < 0:
                return None
            return best.find_offset_by_timestamp(best.max_timestamp, best.base_offset)
        # Kafka's search: the first segment whose largest timestamp (its file's modification
        # time when it has no timestamps) reaches the target answers, found or not
        for seg in self.segments:
            if seg.size and seg.largest_timestamp() >= timestamp:
                return seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
        return None

    def collect_aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        """``.txnindex`` entries of transactions overlapping [start, upper), searching from
        the segment holding ``start`` until an entry's last stable offset reaches ``upper``."""
        out = []
        for seg in self.segments[self._segment_index(start):]:
            found, complete = seg.txn_index.collect(start, upper)
            out.extend(found)
            if complete:
                break
        return out

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """read_committed Fetch: (producer id, first offset) of aborted transactions that
        overlap [start, end)."""
        return [(t.producer_id, t.first_offset)
                for t in self.collect_aborted_transactions(start, end)]

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset); (-1, -1) if unknown."""
        return self.epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)

    # -- log start offset & retention -------------------------------------------------------
    def delete_records(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset (≤ high watermark); returns it."""
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot move log start offset to {offset} above the high watermark "
                f"{self.high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.epoch_cache.truncate_from_start(offset)
        return self.log_start_offset

    def delete_old_segments(self, now: int | None = None) -> int:
        """Retention pass (time, size, log start offset); returns segments deleted."""
        now = self.time_ms() if now is None else now
        cfg = self.config
        total = self.size()
        doomed = []
        n = len(self.segments)
        for i, seg in enumerate(self.segments):
            last = i == n - 1
            upper = self.log_end_offset if last else self.bases[i + 1]
            if self.high_watermark < upper or (last and seg.size == 0):
                break
            why = None
            if not last and self.bases[i + 1] <= self.log_start_offset:
                why = f"it ends at or below the log start offset {self.log_start_offset}"
            elif cfg.delete_enabled:
                largest = seg.largest_timestamp()
                if cfg.retention_ms >= 0 and now - largest > cfg.retention_ms:
                    why = (f"its largest timestamp {largest} is more than retention.ms "
                           f"{cfg.retention_ms} old")
                elif cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes:
                    why = (f"the log is over retention.bytes {cfg.retention_bytes}; "
                           f"{total - seg.size} bytes remain without it")
            if why is None:
                break
            logger.info("deleting segment %d of %s (%d bytes): %s", seg.base_offset,
                        os.path.basename(self.dir), seg.size, why)
            doomed.append(seg)
            total -= seg.size
        if not doomed:
            return 0
        if doomed[-1] is self.active:
            self.roll(now=now)
        for seg in doomed:
            self.segments.pop(0)
            self.bases.pop(0)
            seg.mark_deleted()
            self._pending_deletes.append((now + cfg.file_delete_delay_ms, seg))
        self.log_start_offset = max(self.log_start_offset, self.bases[0])
        self.high_watermark = max(self.high_watermark, self.log_start_offset)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        self.epoch_cache.truncate_from_start(self.log_start_offset)
        self.producer_state.delete_snapshots_below(self.bases[0])
        return len(doomed)

    def delete_expired_files(self, now: int | None = None, force: bool = False) -> None:
        """Remove ``.deleted`` segment files whose delay has passed."""
        now = self.time_ms() if now is None else now
        keep = []
        for deadline, seg in self._pending_deletes:
            if force or deadline <= now:
                seg.delete()
            else:
                keep.append((deadline, seg))
        self._pending_deletes = keep

    # -- compaction -------------------------------------------------------------------------
    def replace_segments(self, new: LogSegment, old: list[LogSegment],
                         sizes: list[int] | None = None, now: int | None = None) -> bool:
        """Swap the cleaner's ``new`` segment (files named ``*.cleaned``, fsynced) in for the
        consecutive inactive segments ``old`` (loop only).  Returns False, touching nothing,
        when ``old`` is no longer exactly as the cleaner read it (``sizes``): retention,
        truncation or a close happened meanwhile.

        Crash safety: ``.cleaned`` → ``.swap`` (commit point: ``complete_swaps`` finishes a
        valid ``.swap`` on the next start), then the old files become ``.deleted`` (removed
        after ``file.delete.delay.ms``, so in-flight regions still read), then ``.swap`` →
        final name."""
        if self.closed or not old:
            return False
        try:
            i = next(k for k, s in enumerate(self.segments) if s is old[0])
        except StopIteration:
            return False
        if self.segments[i:i + len(old)] != old or i + len(old) >= len(self.segments) \
                or any(s.active for s in old) or new.base_offset != old[0].base_offset:
            return False
        if sizes is not None and [s.size for s in old] != list(sizes):
            return False
        from .checkpoint import fsync_dir
        now = self.time_ms() if now is None else now
        new.change_suffix(".cleaned", ".swap")
        fsync_dir(self.dir)
        for seg in old:
            seg.mark_deleted()
            self._pending_deletes.append((now + self.config.file_delete_delay_ms, seg))
        new.change_suffix(".swap", "")
        fsync_dir(self.dir)
        self.segments[i:i + len(old)] = [new]
        self.bases[i:i + len(old)] = [new.base_offset]
        return True

    # -- truncation (followers) -------------------------------------------------------------
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and after ``offset``; True if anything was removed."""
        if offset < 0:
            raise ValueError("cannot truncate to a negative offset")
        if offset >= self.log_end_offset:
            return False
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        now = self.time_ms()
        while len(self.segments) > 1 and self.bases[-1] > offset:
            seg = self.segments.pop()
            self.bases.pop()
            seg.mark_deleted()
            self._pending_deletes.append((now + self.config.file_delete_delay_ms, seg))
        seg = self.active
        if not seg.active:
            seg.on_becoming_active()
        seg.truncate_to(offset, now)
        self.log_end_offset = seg.next_offset if seg.size else seg.base_offset
        if seg.size == 0 and len(self.segments) > 1:
            self.log_end_offset = max(self.log_end_offset, self.segments[-2].next_offset)
        self._after_truncation()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop all data; the log restarts empty at ``offset``."""
        now = self.time_ms()
        for seg in self.segments:
            seg.mark_deleted()
            self._pending_deletes.append((now + self.config.file_delete_delay_ms, seg))
        self.segments, self.bases = [], []
        self.segments.append(self._new_segment(offset, True, True))
        self.bases.append(offset)
        self.log_end_offset = offset
        self.log_start_offset = offset
        self.epoch_cache.clear()
        self.producer_state.delete_snapshots_after(-1)
        self.producer_state.reset(offset)
        self._after_truncation()

    def _after_truncation(self) -> None:
        self.truncations += 1
        leo = self.log_end_offset
        self.lowest_truncation = leo if self.lowest_truncation is None \
            else min(self.lowest_truncation, leo)
        self.log_start_offset = min(self.log_start_offset, leo)
        self.high_watermark = min(self.high_watermark, leo)
        self.recovery_point = min(self.recovery_point, leo)
        self.epoch_cache.truncate_from_end(leo)
        self._rebuild_producer_state(clean=False)

    # -- flushing ---------------------------------------------------------------------------
    def flush_due(self, now: int | None = None) -> bool:
        """True when flush.messages / flush.ms (or a roll) ask for an fsync."""
        now = self.time_ms() if now is None else now
        if self._roll_flush_pending:
            return True
        if self.log_end_offset <= self.recovery_point:
            return False
        return self.unflushed_messages >= self.config.flush_messages or \
            now - self.last_flush_ms >= self.config.flush_ms

    def start_flush(self, offset: int | None = None) -> FlushJob:
        """Loop side: persist index entries, dup the fds to fsync; run the job anywhere."""
        offset = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        fds, paths = [], []
        for seg in self.segments[self._segment_index(self.recovery_point):]:
            if seg.base_offset >= offset and seg is not self.segments[0]:
                break
            if seg.fd < 0:
                continue        # a new segment without its file yet
            seg.persist_indexes()
            fds.append(os.dup(seg.fd))
            paths += [seg.offset_index.path, seg.time_index.path, seg.txn_index.path]
        self._roll_flush_pending = False
        self.unflushed_messages = 0
        self.last_flush_ms = self.time_ms()
        return FlushJob(offset, fds, paths)

    def finish_flush(self, job: FlushJob) -> None:
        if job.error is not None:
            raise StorageError(f"fsync in {self.dir} failed: {job.error}", dir_failure=True)
        self.recovery_point = max(self.recovery_point, min(job.offset, self.log_end_offset))

    def flush(self, offset: int | None = None) -> None:
        """Synchronous flush up to ``offset`` (default: log end offset)."""
        self.finish_flush(self.start_flush(offset).run())

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Snapshot producer state at the log end offset and close every file."""
        if self.closed:
            return
        self.closed = True
        self.producer_state.map_end_offset = self.log_end_offset
        try:
            self.producer_state.take_snapshot(self.log_end_offset)
        except OSError:
            pass
        for seg in self.segments:
            seg.close()
        self.delete_expired_files(force=True)

    def close_handles(self) -> None:
        """Close descriptors without writing anything (simulated crash, failed log dir)."""
        self.closed = True
        for seg in self.segments:
            if seg.fd >= 0:
                os.close(seg.fd)
                seg.fd = -1
        for _, seg in self._pending_deletes:
            if seg.fd >= 0:
                os.close(seg.fd)
                seg.fd = -1

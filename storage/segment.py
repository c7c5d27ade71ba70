"""LogSegment: one ``.log`` file plus its ``.index``, ``.timeindex`` and (lazily) ``.txnindex``.

How this works: the segment owns an O_RDWR descriptor on its ``<20-digit base>.log`` and the two
sparse indexes (see ``index.py``).  ``append`` writes whole, offset-assigned batches with
``os.pwrite`` at the current size; before each batch, if MORE than ``index.interval.bytes`` were
written since the last index entry, it adds (batch last offset, batch position) to the offset
index and the running (max timestamp, its offset) to the time index — the first batch of a
segment never gets an entry.  A failed write (ENOSPC, EIO) is truncated back and re-raised as
``StorageError`` so the segment stays readable.

``read`` answers with a ``FileRegion`` (fd, position, length) that the broker can hand to
``os.sendfile``; the region stays valid until the segment is deleted, and deletion is delayed
(``.deleted`` rename, then ``delete()`` after ``file.delete.delay.ms``) so a region taken just
before retention still reads.  A follower truncation may shorten the file under a region; a
short read then simply returns fewer bytes.

Facts not kept in memory (next offset, max timestamp, first batch timestamp) are derived lazily
from the last index entries plus a short forward scan, which keeps opening thousands of
segments cheap.  ``recover`` rescans the whole file with CRC validation, truncates a torn or
corrupt tail and rebuilds both indexes.

The ``.txnindex`` (``txn_index.py``) lists the aborted transactions whose ABORT marker is in
this segment; the Log appends to it, truncation trims it, deletion renames/removes it with the
other files.  ``suffix`` (``".cleaned"``) names a segment the log cleaner is writing;
``change_suffix`` renames all its files (``.cleaned`` → ``.swap`` → final name).

Not thread-safe: a segment belongs to one ``Log`` and is used from one thread at a time.  Only
``os.fsync`` on a duplicated descriptor (``Log.start_flush``) may run elsewhere.
"""
from __future__ import annotations

import errno
import os
from typing import NamedTuple

from protocol.records import BatchHeader, CorruptRecordError, InvalidRecordError, validate_batch

from .errors import CorruptIndexError, StorageError
from .index import OffsetIndex, TimeIndex
from .scan import FileScanner, iter_records, pread_exact, walk_headers
from .txn_index import TransactionIndex

INT32_MAX = 0x7FFFFFFF
DELETED_SUFFIX = ".deleted"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class FileRegion(NamedTuple):
    """``length`` bytes of an open file at ``position``: ``os.sendfile(sock, fd, position, length)``."""
    fd: int
    position: int
    length: int

    def read(self) -> bytes:
        return pread_exact(self.fd, self.length, self.position) if self.length > 0 else b""


class LogSegment:
    """Owns ``<base>.log``, ``<base>.index`` and ``<base>.timeindex`` in ``dir``."""

    def __init__(self, dir: str, base_offset: int, *, index_interval_bytes: int = 4096,
                 index_bytes: int = 10485760, now_ms: int = 0, rolling_jitter_ms: int = 0,
                 create: bool = False, active: bool = False, suffix: str = "",
                 lazy: bool = False, preallocate: int = 0):
        self.dir = dir
        # preallocate (topic config ``preallocate``): a new .log file is made ``preallocate``
        # bytes long at once, as Kafka's FileRecords does (a sparse file on Linux); ``size`` is
        # what was written, and the file is trimmed to it when the segment stops being active
        # or is closed.  After a crash the zeros past the data are a torn tail to recovery.
        self.preallocate = preallocate if create else 0
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.rolling_jitter_ms = rolling_jitter_ms
        stem = os.path.join(dir, segment_name(base_offset))
        self.log_path = stem + ".log" + suffix
        self.offset_index = OffsetIndex(stem + ".index" + suffix, base_offset, index_bytes)
        self.time_index = TimeIndex(stem + ".timeindex" + suffix, base_offset, index_bytes)
        self.txn_index = TransactionIndex(stem + ".txnindex" + suffix)
        # lazy (a new segment only): the .log file is created by the first append
        self._file_pending = create and lazy
        if self._file_pending:
            self.fd = -1
            self.size = 0
        else:
            flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if create else 0)
            try:
                self.fd = os.open(self.log_path, flags, 0o644)
                self._preallocate()
            except OSError as e:
                raise StorageError(f"cannot open {self.log_path}: {e}") from e
            self.size = 0 if create else os.fstat(self.fd).st_size
        self.created_ms = now_ms
        self._bytes_since_last_index = 0
        self._max_ts = None             # lazily from the time index
        self._offset_of_max_ts = None
        self._rolling_ts = None if self.size else -1   # max timestamp of the first batch
        self._next_offset = base_offset if self.size == 0 else None
        self._indexes_ready = False
        # Index files are created with the segment's first data (an empty segment has none —
        # a new partition costs two inodes less, which matters for topics such as the 50
        # partitions of __consumer_offsets).  Kafka, too, materialises index files lazily.
        self._index_files = not create
        self.active = active
        if create:
            self.offset_index.create(active, write=False)
            self.time_index.create(active, write=False)
            self._indexes_ready = True
        else:
            self.offset_index._active = active
            self.time_index._active = active

    def __repr__(self):
        return f"LogSegment({self.log_path!r}, size={self.size})"

    # -- lazy state -------------------------------------------------------------------------
    def _ensure_indexes(self) -> None:
        if self._indexes_ready:
            return
        self._indexes_ready = True
        try:
            found = self.offset_index.load()
            found = self.time_index.load() and found
            if not found:
                if self.size:
                    raise CorruptIndexError("index file missing")
                self._index_files = False       # empty segment: created with its first data
            _, last_pos = self.offset_index.last_entry()
            if last_pos > self.size or (self.size == 0 and self.offset_index.entries):
                raise CorruptIndexError(f"{self.offset_index.path} points past the log")
            if self.time_index.last_entry()[1] > self.base_offset + INT32_MAX:
                raise CorruptIndexError(f"{self.time_index.path} is out of range")
        except CorruptIndexError:
            self.recover()

    @property
    def next_offset(self) -> int:
        """Offset after the last batch (the base offset for an empty segment)."""
        if self._next_offset is None:
            self._ensure_indexes()
            _, pos = self.offset_index.last_entry()
            nxt = self.base_offset
            for h in walk_headers(self.fd, pos, self.size):
                nxt = h.next_offset
            self._next_offset = nxt
        return self._next_offset

    def _load_max_ts(self) -> None:
        if self._max_ts is None:
            self._ensure_indexes()
            self._max_ts, self._offset_of_max_ts = self.time_index.last_entry()

    @property
    def max_timestamp(self) -> int:
        self._load_max_ts()
        return self._max_ts

    @property
    def offset_of_max_timestamp(self) -> int:
        self._load_max_ts()
        return self._offset_of_max_ts

    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime if it has none (retention by time)."""
        ts = self.max_timestamp
        if ts >= 0:
            return ts
        return int(os.stat(self.log_path).st_mtime * 1000) if os.path.exists(self.log_path) \
            else self.created_ms

    @property
    def rolling_based_timestamp(self) -> int:
        if self._rolling_ts is None:
            first = next(walk_headers(self.fd, 0, self.size), None)
            self._rolling_ts = first.max_timestamp if first else -1
        return self._rolling_ts

    # -- appends ----------------------------------------------------------------------------
    def can_hold(self, last_offset: int) -> bool:
        return 0 <= last_offset - self.base_offset <= INT32_MAX

    def append(self, buf, headers: list[BatchHeader]) -> None:
        """Write the batches ``headers`` (positions relative to ``buf``) at the end of the file."""
        if not headers:
            return
        self._ensure_indexes()
        self._load_max_ts()
        start = headers[0].pos
        end = headers[-1].pos + headers[-1].size
        if not self.can_hold(headers[-1].last_offset):
            raise ValueError(f"offset {headers[-1].last_offset} does not fit in segment "
                             f"{self.base_offset}")
        if self._file_pending:
            try:
                self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
                self._preallocate()
            except OSError as e:
                raise StorageError(f"cannot create {self.log_path}: {e}") from e
            self._file_pending = False
        physical = self.size
        view = memoryview(buf)[start:end]
        written = 0
        try:
            while written < len(view):
                written += os.pwrite(self.fd, view[written:], physical + written)
        except OSError as e:
            try:
                os.ftruncate(self.fd, physical)
            except OSError:
                pass
            kind = errno.errorcode.get(e.errno, str(e.errno))
            raise StorageError(f"write to {self.log_path} failed ({kind}): {e.strerror}") from e
        if physical == 0:
            self._rolling_ts = headers[0].max_timestamp
        oi, ti, interval = self.offset_index, self.time_index, self.index_interval_bytes
        for h in headers:
            pos = physical + h.pos - start
            if h.max_timestamp > self._max_ts:
                self._max_ts, self._offset_of_max_ts = h.max_timestamp, h.last_offset
            if self._bytes_since_last_index > interval:
                oi.append(h.last_offset, pos)
                ti.maybe_append(self._max_ts, self._offset_of_max_ts)
                self._bytes_since_last_index = 0
            self._bytes_since_last_index += h.size
        self.size = physical + len(view)
        self._next_offset = headers[-1].next_offset

    # -- reads ------------------------------------------------------------------------------
    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchHeader | None:
        """Header (``pos`` = file position) of the first batch whose last offset ≥ ``offset``."""
        self._ensure_indexes()
        _, pos = self.offset_index.lookup(offset)
        for h in walk_headers(self.fd, max(pos, starting_position), self.size):
            if h.last_offset >= offset:
                return h
        return None

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False, whole_first: bool = False):
        """``(FileRegion, first BatchHeader)`` from the batch holding ``start_offset``, or None.

        The region is at most ``max_size`` bytes (at least the first batch when
        ``min_one_message``) and never extends past ``max_position``.  Like Kafka, the last
        batch in the region may be cut short; clients drop a partial trailing batch.  A first
        batch that does not fit is cut too, unless ``whole_first``: then the region is empty
        (Kafka's answer to Fetch v3+, its ``firstEntryIncomplete`` rule).
        """
        h = self.translate_offset(start_offset)
        if h is None:
            return None
        if max_position is None:
            max_position = self.size
        limit = max(max_size, h.size) if min_one_message else max_size
        length = max(0, min(max_position - h.pos, limit))
        if whole_first and limit < h.size:
            length = 0
        return FileRegion(self.fd, h.pos, length), h

    def read_bytes(self, start_offset: int, max_size: int, max_position: int | None = None,
                   min_one_message: bool = False) -> bytes:
        r = self.read(start_offset, max_size, max_position, min_one_message)
        return r[0].read() if r else b""

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int = 0):
        """(timestamp, offset) of the first record with timestamp ≥ target at or after
        ``start_offset``, or None if this segment has none."""
        self._ensure_indexes()
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(ts_offset, start_offset))
        for _, h, buf in FileScanner(self.fd, pos, self.size):
            if h.max_timestamp < timestamp or h.last_offset < start_offset:
                continue
            recs = iter_records(buf, h)
            if recs is None:   # compressed, no codec available: the batch is the answer
                return max(h.base_timestamp, h.max_timestamp if h.timestamp_type else -1), \
                    max(h.base_offset, start_offset)
            for r in recs:
                if r.timestamp >= timestamp and r.offset >= start_offset:
                    return r.timestamp, r.offset
        return None

    def batch_leader_epoch(self, offset: int) -> int | None:
        """The partition leader epoch stamped on the batch holding ``offset`` (None: no batch)."""
        self._ensure_indexes()
        _, pos = self.offset_index.lookup(offset)
        for _, h, _buf in FileScanner(self.fd, pos, self.size):
            if h.last_offset >= offset:
                return h.partition_leader_epoch if h.base_offset <= offset else None
        return None

    # -- roll -------------------------------------------------------------------------------
    def time_waited_for_roll(self, now_ms: int, max_timestamp_in: int) -> int:
        ts = self.rolling_based_timestamp
        if ts >= 0 and max_timestamp_in >= 0:
            return max_timestamp_in - ts
        return now_ms - self.created_ms

    def should_roll(self, segment_bytes: int, segment_ms: int, incoming_size: int,
                    max_timestamp_in: int, last_offset_in: int, now_ms: int) -> bool:
        self._ensure_indexes()
        reached_time = self.size > 0 and \
            self.time_waited_for_roll(now_ms, max_timestamp_in) > segment_ms - self.rolling_jitter_ms
        return (self.size > segment_bytes - incoming_size or reached_time
                or self.offset_index.is_full or self.time_index.is_full
                or not self.can_hold(last_offset_in))

    def _preallocate(self) -> None:
        if self.preallocate:
            os.ftruncate(self.fd, self.preallocate)

    def _trim(self) -> None:
        """A preallocated file cut back to what was written."""
        if self.preallocate and self.fd >= 0:
            self._ftruncate(self.size)
            self.preallocate = 0

    def on_becoming_inactive(self) -> None:
        """Final time-index entry, indexes trimmed to their entries, a preallocated file to its
        data."""
        self._trim()
        self._ensure_indexes()
        self._load_max_ts()
        self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)
        self.active = False
        self.offset_index._active = self.time_index._active = False
        self._persist()

    def on_becoming_active(self, persist: bool = True) -> None:
        """Active again (or still): its index files are sized up to ``segment.index.bytes``
        now, or, with ``persist`` false, by their next persist (their entries are already on
        disk: a log loaded after a clean shutdown)."""
        self._ensure_indexes()
        self.active = True
        self.offset_index._active = self.time_index._active = True
        if persist:
            self._persist()

    # -- recovery & truncation --------------------------------------------------------------
    def recover(self) -> int:
        """Rescan with CRC checks, truncate a torn/corrupt tail, rebuild indexes.

        Returns the number of bytes truncated.  Producer state is rebuilt by the Log.
        """
        self._indexes_ready = True
        oi, ti = self.offset_index, self.time_index
        if self._index_files:
            oi.reset()
            ti.reset()
        else:       # no files yet: the persist below creates them if the segment holds data
            oi.create(oi._active, write=False)
            ti.create(ti._active, write=False)
        max_ts, off_max = -1, self.base_offset
        since = 0
        valid = 0
        nxt = self.base_offset
        first_ts = -1
        scanner = FileScanner(self.fd, 0, self.size)
        for pos, h, buf in scanner:
            try:
                validate_batch(buf, h, check_count=False)
            except (CorruptRecordError, InvalidRecordError):
                break
            if h.base_offset < nxt or not self.can_hold(h.last_offset):
                break
            if valid == 0:
                first_ts = h.max_timestamp
            if h.max_timestamp > max_ts:
                max_ts, off_max = h.max_timestamp, h.last_offset
            if since > self.index_interval_bytes:
                oi.append(h.last_offset, pos)
                ti.maybe_append(max_ts, off_max)
                since = 0
            since += h.size
            valid = pos + h.size
            nxt = h.next_offset
        truncated = self.size - valid
        if truncated:
            self._ftruncate(valid)
        ti.maybe_append(max_ts, off_max, skip_full_check=True)
        self._persist()
        self._max_ts, self._offset_of_max_ts = max_ts, off_max
        self._bytes_since_last_index = since
        self._next_offset = nxt
        self._rolling_ts = first_ts
        return truncated

    def _ftruncate(self, size: int) -> None:
        try:
            os.ftruncate(self.fd, size)
        except OSError as e:
            raise StorageError(f"truncate of {self.log_path} failed: {e}") from e
        self.size = size

    def truncate_to(self, offset: int, now_ms: int = 0) -> int:
        """Remove the batch holding ``offset`` and everything after it; returns bytes removed."""
        h = self.translate_offset(offset)
        if h is None:
            return 0
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self._persist()
        removed = self.size - h.pos
        self._ftruncate(h.pos)
        self._max_ts, self._offset_of_max_ts = self.time_index.last_entry()
        self._bytes_since_last_index = 0
        if self.size == 0:
            self.created_ms = now_ms
            self._rolling_ts = -1
            self._next_offset = self.base_offset
        else:
            self._next_offset = h.base_offset
        return removed

    # -- durability & lifecycle -------------------------------------------------------------
    def _persist(self, fsync: bool = False) -> None:
        """Write both indexes; an empty segment whose index files do not exist yet keeps it so."""
        if not self._index_files:
            if self.size == 0:
                return
            self._index_files = True
        self.offset_index.persist(fsync)
        self.time_index.persist(fsync)

    def persist_indexes(self) -> None:
        if self._indexes_ready:
            self._persist()

    def flush(self) -> None:
        if self._file_pending:
            return          # nothing on disk yet
        try:
            os.fsync(self.fd)
            if self._indexes_ready:
                self._persist(fsync=True)
            self.txn_index.flush()
        except OSError as e:
            raise StorageError(f"flush of {self.log_path} failed: {e}") from e

    def close(self) -> None:
        if self.fd < 0:
            return
        try:
            self._trim()
            if self._indexes_ready:
                self._load_max_ts()
                self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts,
                                             skip_full_check=True)
                self.offset_index._active = self.time_index._active = False
                self._persist()
        finally:
            os.close(self.fd)
            self.fd = -1

    def mark_deleted(self) -> None:
        """Rename the files with ``.deleted`` (the fd stays open for in-flight reads)."""
        new = self.log_path + DELETED_SUFFIX
        if os.path.exists(self.log_path):
            os.replace(self.log_path, new)
        self.log_path = new
        self.offset_index.rename(self.offset_index.path + DELETED_SUFFIX)
        self.time_index.rename(self.time_index.path + DELETED_SUFFIX)
        self.txn_index.rename(self.txn_index.path + DELETED_SUFFIX)
        self._indexes_ready = True   # never rebuild a deleted segment's index

    def change_suffix(self, old: str, new: str) -> None:
        """Rename every file from ``<name><old>`` to ``<name><new>`` (cleaner swap).  The
        ``.log`` file goes last: once it carries the new suffix, its indexes already do."""
        def renamed(path):
            if not path.endswith(old):
                raise ValueError(f"{path} does not end with {old!r}")
            return path[:len(path) - len(old)] + new
        self.offset_index.rename(renamed(self.offset_index.path))
        self.time_index.rename(renamed(self.time_index.path))
        self.txn_index.rename(renamed(self.txn_index.path))
        new_log = renamed(self.log_path)
        if os.path.exists(self.log_path):
            os.replace(self.log_path, new_log)
        self.log_path = new_log

    def delete(self) -> None:
        """Close and remove the files now."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        for p in (self.log_path, self.offset_index.path, self.time_index.path,
                  self.txn_index.path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

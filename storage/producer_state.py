"""Idempotent/transactional producer state of one partition, with Kafka's .snapshot files.

How this works: ``producers`` maps producer id → ``ProducerStateEntry`` (epoch, metadata of its
last 5 batches for duplicate detection, coordinator epoch, first offset of its open
transaction).  An append goes through an ``AppendSession``: ``check(header)`` decides, without
touching the manager, whether a client batch is OK / DUPLICATE / OUT_OF_ORDER_SEQUENCE /
INVALID_PRODUCER_EPOCH, then ``stage(...)`` records the effect on private copies; once the bytes
are on disk ``commit()`` publishes them.  A failed write therefore leaves the state untouched.

Rules (Kafka 3.x ``ProducerAppendInfo``): a batch whose epoch is below the current one is
fenced (INVALID_PRODUCER_EPOCH).  A batch with a new epoch must start at sequence 0, unless the
producer is unknown (then any sequence is accepted: KIP-360 state may have been removed by
retention).  Within an epoch the first sequence must be last sequence + 1, with 2^31-1 followed
by 0.  A batch that matches one of the last 5 batches (same epoch, same first and last sequence)
is a DUPLICATE and is answered with that batch's original offsets.

Snapshots: ``<offset>.snapshot`` (20 digits) = int16 version 1, uint32 CRC32C of the rest,
int32 count, 46-byte entries (pid, epoch, last seq, last offset, offset delta, timestamp,
coordinator epoch, current txn first offset).  Written on roll and close; on open the Log loads
the newest valid snapshot ≤ its end offset and replays the batches after it.

Not thread-safe; owned by one Log.
"""
from __future__ import annotations

import enum
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c

from .checkpoint import read_file, write_atomic
from .errors import (InvalidTxnStateError, TransactionCoordinatorFencedError)

SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
assert _ENTRY.size == 46


class SeqResult(enum.Enum):
    OK = "OK"
    DUPLICATE = "DUPLICATE"
    OUT_OF_ORDER_SEQUENCE = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"
    UNKNOWN_PRODUCER_ID = "UNKNOWN_PRODUCER_ID"


class SequenceCheck(NamedTuple):
    result: SeqResult
    first_offset: int = -1      # for DUPLICATE: offsets of the original batch
    last_offset: int = -1
    message: str = ""


class BatchMetadata(NamedTuple):
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return (self.last_seq - self.offset_delta) % (INT32_MAX + 1) if self.last_seq >= 0 else -1

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = -1
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> "ProducerStateEntry":
        return ProducerStateEntry(self.producer_id, self.producer_epoch, deque(self.batches,
                                  maxlen=NUM_BATCHES_TO_RETAIN), self.coordinator_epoch,
                                  self.current_txn_first_offset, self.last_timestamp)

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int):
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class AppendSession:
    """Stages producer-state effects of one append; ``commit`` publishes them."""

    def __init__(self, manager: "ProducerStateManager"):
        self.m = manager
        self.staged: dict[int, ProducerStateEntry] = {}
        self.completed: list[CompletedTxn] = []

    def _entry(self, pid: int) -> ProducerStateEntry | None:
        if pid in self.staged:
            return self.staged[pid]
        return self.m.producers.get(pid)

    def check(self, h, transaction_version: int = 0) -> SequenceCheck:
        """Client-origin checks for data batch ``h`` (offsets not yet assigned).
        ``transaction_version`` 2 (a Produce v12+ client): a transactional batch of a producer
        with no batches here must start at sequence 0 (Kafka 4.x; otherwise, as before KIP-890,
        a producer whose state is gone may go on at any sequence)."""
        if h.producer_id < 0:
            return SequenceCheck(SeqResult.OK)
        entry = self._entry(h.producer_id)
        if (transaction_version >= 2 and h.is_transactional and h.base_sequence != 0
                and (entry is None or not entry.batches)):
            return SequenceCheck(SeqResult.OUT_OF_ORDER_SEQUENCE, message=(
                f"Invalid sequence number for producer {h.producer_id}: {h.base_sequence} (incoming seq. "
                f"number). Expected sequence 0 for transactions v2 idempotent producer with no existing state."))
        if entry is None:
            if self.m.strict_unknown_producer and h.base_sequence != 0:
                return SequenceCheck(SeqResult.UNKNOWN_PRODUCER_ID,
                                     message=f"unknown producer {h.producer_id}")
            return SequenceCheck(SeqResult.OK)
        dup = entry.find_duplicate(h.producer_epoch, h.base_sequence, h.last_sequence)
        if dup is not None:
            return SequenceCheck(SeqResult.DUPLICATE, dup.first_offset, dup.last_offset)
        if h.producer_epoch < entry.producer_epoch:
            return SequenceCheck(SeqResult.INVALID_PRODUCER_EPOCH, message=(
                f"epoch {h.producer_epoch} is older than current {entry.producer_epoch} "
                f"for producer {h.producer_id}"))
        if h.base_sequence < 0:
            return SequenceCheck(SeqResult.OK)
        if h.producer_epoch != entry.producer_epoch:
            if h.base_sequence != 0 and entry.producer_epoch != -1:
                return SequenceCheck(SeqResult.OUT_OF_ORDER_SEQUENCE, message=(
                    f"new epoch {h.producer_epoch} of producer {h.producer_id} must start at "
                    f"sequence 0, got {h.base_sequence}"))
        elif entry.batches and not _in_sequence(entry.last_seq, h.base_sequence):
            return SequenceCheck(SeqResult.OUT_OF_ORDER_SEQUENCE, message=(
                f"producer {h.producer_id}: sequence {h.base_sequence} after "
                f"{entry.last_seq}"))
        return SequenceCheck(SeqResult.OK)

    def stage(self, h, marker=None, origin_client: bool = True) -> None:
        """Record the effect of batch ``h`` (offsets assigned).  ``marker`` is
        ``(control_type, coordinator_epoch)`` for a transaction marker."""
        pid = h.producer_id
        if pid < 0:
            return
        entry = self._entry(pid)
        entry = entry.copy() if entry is not None else ProducerStateEntry(pid)
        if h.producer_epoch != entry.producer_epoch:
            if h.producer_epoch > entry.producer_epoch or not origin_client:
                entry.batches.clear()
                entry.producer_epoch = h.producer_epoch
        if marker is not None and h.is_control:
            ctype, coord_epoch = marker
            if ctype in (0, 1):
                if origin_client and coord_epoch < entry.coordinator_epoch:
                    raise TransactionCoordinatorFencedError(
                        f"coordinator epoch {coord_epoch} < {entry.coordinator_epoch} for "
                        f"producer {pid}")
                entry.coordinator_epoch = coord_epoch
                if entry.current_txn_first_offset >= 0:
                    self.completed.append(CompletedTxn(pid, entry.current_txn_first_offset,
                                                       h.last_offset, ctype == 0))
                entry.current_txn_first_offset = -1
        else:
            if h.is_transactional:
                if entry.current_txn_first_offset < 0:
                    entry.current_txn_first_offset = h.base_offset
            elif entry.current_txn_first_offset >= 0 and origin_client:
                raise InvalidTxnStateError(
                    f"non-transactional batch from producer {pid} inside its transaction")
            if h.base_sequence >= 0:
                entry.batches.append(BatchMetadata(h.last_sequence, h.last_offset,
                                                   h.last_offset_delta, h.max_timestamp))
        entry.last_timestamp = max(entry.last_timestamp, h.max_timestamp)
        self.staged[pid] = entry

    def commit(self, next_offset: int) -> list[CompletedTxn]:
        m = self.m
        for pid, entry in self.staged.items():
            old = m.producers.get(pid)
            if old is not None and old.current_txn_first_offset >= 0 \
                    and old.current_txn_first_offset != entry.current_txn_first_offset:
                m.ongoing_txns.pop(old.current_txn_first_offset, None)
            if entry.current_txn_first_offset >= 0:
                m.ongoing_txns[entry.current_txn_first_offset] = pid
            m.producers[pid] = entry
        m.map_end_offset = max(m.map_end_offset, next_offset)
        return self.completed


class ProducerStateManager:
    """Producer id → state for one partition directory."""

    def __init__(self, dir: str, strict_unknown_producer: bool = False):
        self.dir = dir
        self.strict_unknown_producer = strict_unknown_producer
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, int] = {}   # txn first offset -> producer id
        self.map_end_offset = 0                  # state reflects batches below this offset

    def session(self) -> AppendSession:
        return AppendSession(self)

    def check(self, header) -> SequenceCheck:
        """Sequence/epoch check the broker may call before append (does not change state)."""
        return AppendSession(self).check(header)

    def last_entry(self, producer_id: int):
        return self.producers.get(producer_id)

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction (bounds the last stable offset)."""
        return min(self.ongoing_txns) if self.ongoing_txns else None

    def reset(self, offset: int = 0) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.map_end_offset = offset

    def adopt(self, other: "ProducerStateManager", end_offset: int) -> None:
        """Take ``other``'s producers and open transactions, as of ``end_offset``, and snapshot
        them there, unless they are the same already.  A replica's copy in another log dir
        rebuilt its state from the batches it copied; this brings over the producers whose
        batches retention removed before they were copied (Kafka keeps producer state past
        retention)."""
        if self.producers.keys() == other.producers.keys() and self.ongoing_txns == other.ongoing_txns:
            return
        self.producers = {pid: e.copy() for pid, e in other.producers.items()}
        self.ongoing_txns = dict(other.ongoing_txns)
        self.map_end_offset = end_offset
        self.take_snapshot(end_offset)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        gone = [pid for pid, e in self.producers.items()
                if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    # -- snapshots --------------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def snapshot_offsets(self, names: list[str] | None = None) -> list[int]:
        """Offsets of the snapshot files, ascending; ``names``: the directory's listing when
        the caller has just read it (log loading lists each directory once)."""
        out = []
        if names is None:
            try:
                names = os.listdir(self.dir)
            except FileNotFoundError:
                return out
        for n in names:
            if n.endswith(SNAPSHOT_SUFFIX) and len(n) == 20 + len(SNAPSHOT_SUFFIX):
                try:
                    out.append(int(n[:20]))
                except ValueError:
                    pass
        return sorted(out)

    def encode_snapshot(self) -> bytes:
        body = [struct.pack(">i", len(self.producers))]
        for pid, e in sorted(self.producers.items()):
            last = e.batches[-1] if e.batches else None
            body.append(_ENTRY.pack(pid, e.producer_epoch,
                                    last.last_seq if last else -1,
                                    last.last_offset if last else -1,
                                    last.offset_delta if last else 0,
                                    last.timestamp if last else e.last_timestamp,
                                    e.coordinator_epoch, e.current_txn_first_offset))
        rest = b"".join(body)
        return struct.pack(">hI", 1, crc32c.crc32c(rest)) + rest

    def take_snapshot(self, offset: int | None = None, fsync: bool = False) -> str:
        offset = self.map_end_offset if offset is None else offset
        path = self.snapshot_path(offset)
        write_atomic(path, self.encode_snapshot(), fsync)
        return path

    @staticmethod
    def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
        if len(data) < _HEAD.size:
            raise ValueError("snapshot is truncated")
        version, crc, count = _HEAD.unpack_from(data, 0)
        if version != 1:
            raise ValueError(f"unknown snapshot version {version}")
        if crc32c.crc32c(data[6:]) != crc:
            raise ValueError("snapshot CRC mismatch")
        if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
            raise ValueError("snapshot size does not match its entry count")
        out = []
        for i in range(count):
            pid, epoch, last_seq, last_off, delta, ts, coord, txn = \
                _ENTRY.unpack_from(data, _HEAD.size + i * _ENTRY.size)
            e = ProducerStateEntry(pid, epoch, coordinator_epoch=coord,
                                   current_txn_first_offset=txn, last_timestamp=ts)
            if last_off >= 0:
                e.batches.append(BatchMetadata(last_seq, last_off, delta, ts))
            out.append(e)
        return out

    def load_snapshot(self, max_offset: int, offsets: list[int] | None = None) -> int | None:
        """Load the newest valid snapshot ≤ ``max_offset``; returns its offset (None = none).
        ``offsets``: the snapshot offsets if the caller already has them.

        Unreadable snapshots on the way are deleted, as Kafka does."""
        for off in reversed(self.snapshot_offsets() if offsets is None else offsets):
            if off > max_offset:
                continue
            path = self.snapshot_path(off)
            try:
                entries = self.decode_snapshot(read_file(path))
            except (OSError, ValueError):
                try:
                    os.unlink(path)
                except OSError:
                    pass
                continue
            self.reset(off)
            for e in entries:
                self.producers[e.producer_id] = e
                if e.current_txn_first_offset >= 0:
                    self.ongoing_txns[e.current_txn_first_offset] = e.producer_id
            return off
        self.reset(0)
        return None

    def delete_snapshots_after(self, offset: int, offsets: list[int] | None = None) -> list[int]:
        """Remove snapshots with offset > ``offset`` (log truncated); returns the offsets of
        those left.  ``offsets``: the snapshot offsets if the caller already has them."""
        kept = []
        for off in self.snapshot_offsets() if offsets is None else offsets:
            if off > offset:
                self._unlink(off)
            else:
                kept.append(off)
        return kept

    def delete_snapshots_below(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off < offset:
                self._unlink(off)

    def _unlink(self, off: int) -> None:
        try:
            os.unlink(self.snapshot_path(off))
        except FileNotFoundError:
            pass

"""Record batches (magic v2) as opaque, checksummed units.

The broker's hot path never decodes records: it reads the 61-byte v2 batch header with one
``struct.unpack_from``, checks it, and patches ``baseOffset`` / ``partitionLeaderEpoch`` in place
(neither is covered by the CRC).  Records are decoded only on request (compaction, control
records, tools, down-conversion).

Layout of the v2 header (all big-endian)::

    0  baseOffset int64          8  batchLength int32     12 partitionLeaderEpoch int32
    16 magic int8                17 crc uint32 (CRC-32C of bytes [21, end))
    21 attributes int16          23 lastOffsetDelta int32 27 baseTimestamp int64
    35 maxTimestamp int64        43 producerId int64      51 producerEpoch int16
    53 baseSequence int32        57 recordsCount int32    61 records...

Interface used by storage/ and broker/ (keep it stable):

* ``read_header(buf, pos=0) -> BatchHeader``
* ``iter_batches(buf) -> Iterator[BatchHeader]`` (stops at a truncated trailing batch)
* ``validate_batch(buf, pos, header)`` raises ``CorruptRecordError`` / ``InvalidRecordError``
* ``set_base_offset``, ``set_partition_leader_epoch``, ``set_log_append_time``
"""
from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

import crc32c as _crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_OVERHEAD = 61          # RECORD_BATCH_OVERHEAD
LOG_OVERHEAD = 12            # baseOffset + batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class RecordError(ValueError):
    """Base of record-level errors the broker maps to Kafka error codes."""


class CorruptRecordError(RecordError):
    """CRC mismatch or a header that cannot be right (Kafka: CORRUPT_MESSAGE, code 2)."""


class InvalidRecordError(RecordError):
    """A well-formed batch that breaks a rule (Kafka: INVALID_RECORD, code 87)."""


def crc32c(data, value: int = 0) -> int:
    return _crc32c.crc32c(data, value)


class BatchHeader(NamedTuple):
    """The 61-byte v2 header plus where it sits in its buffer (``pos``)."""
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    pos: int = 0

    @property
    def size(self) -> int:
        """Total bytes of the batch, including the 12-byte log overhead."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf, pos: int = 0) -> BatchHeader:
    """Read a v2 batch header at ``pos``; raises ``CorruptRecordError`` if too short."""
    try:
        return BatchHeader(*HEADER.unpack_from(buf, pos), pos)
    except struct.error:
        raise CorruptRecordError("record batch header is truncated") from None


def magic_at(buf, pos: int = 0) -> int:
    """The magic byte of the entry at ``pos`` (the same offset in every format)."""
    return buf[pos + MAGIC_OFFSET]


def validate_batch(buf, header: BatchHeader, check_crc: bool = True) -> None:
    """Check magic, length, record count vs lastOffsetDelta and (optionally) CRC-32C."""
    if header.magic != 2:
        raise CorruptRecordError(f"unsupported magic {header.magic} for a v2 batch")
    if header.batch_length < BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch length {header.batch_length} is below the minimum")
    end = header.pos + header.size
    if end > len(buf):
        raise CorruptRecordError("record batch is truncated")
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordError("negative record count or last offset delta")
    if header.attributes & 0xFF80:
        raise CorruptRecordError(f"unknown batch attributes {header.attributes:#x}")
    if header.compression > 4:
        raise CorruptRecordError(f"unknown compression codec {header.compression}")
    if check_crc:
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        actual = _crc32c.crc32c(mv[header.pos + ATTRIBUTES_OFFSET:end])
        if actual != header.crc:
            raise CorruptRecordError(
                f"CRC mismatch: stored {header.crc:#010x}, computed {actual:#010x}")
    if header.records_count and header.last_offset_delta != header.records_count - 1 \
            and not header.is_control:
        # Compaction may leave fewer records than lastOffsetDelta+1; a producer may not.
        raise InvalidRecordError(
            f"record count {header.records_count} does not match lastOffsetDelta "
            f"{header.last_offset_delta}")


class TruncatedBatch(NamedTuple):
    """Marker yielded by ``scan_batches`` for a partial trailing batch at ``pos``."""
    pos: int
    available: int


def iter_batches(buf, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
    """Yield the header of every whole batch in ``buf[start:end]``.

    A trailing batch that is cut short (as in a torn write or a size-limited fetch) ends the
    iteration silently; use ``scan_batches`` to learn about it.  A header that cannot be right
    (length below the minimum) raises ``CorruptRecordError``.
    """
    for h in scan_batches(buf, start, end):
        if isinstance(h, TruncatedBatch):
            return
        yield h


def scan_batches(buf, start: int = 0, end: int | None = None):
    """Like ``iter_batches`` but yields a final ``TruncatedBatch`` for a partial tail."""
    if end is None:
        end = len(buf)
    pos = start
    unpack = HEADER.unpack_from
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            yield TruncatedBatch(pos, end - pos)
            return
        length = _I32.unpack_from(buf, pos + 8)[0]
        if length < 0 or (end - pos >= MAGIC_OFFSET + 1 and buf[pos + MAGIC_OFFSET] == 2
                          and length < BATCH_OVERHEAD - LOG_OVERHEAD):
            raise CorruptRecordError(f"invalid batch length {length} at position {pos}")
        size = length + LOG_OVERHEAD
        if pos + size > end or end - pos < BATCH_OVERHEAD:
            yield TruncatedBatch(pos, end - pos)
            return
        yield BatchHeader(*unpack(buf, pos), pos)
        pos += size


def set_base_offset(buf, pos: int, base_offset: int) -> None:
    """Assign offsets: write baseOffset in place (not covered by the CRC)."""
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf, pos: int, epoch: int) -> None:
    """Stamp the leader epoch in place (not covered by the CRC)."""
    _I32.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf, header: BatchHeader, timestamp: int) -> None:
    """Switch a batch to LogAppendTime: set the attribute bit and maxTimestamp, recompute CRC."""
    pos = header.pos
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    _U32.pack_into(buf, pos + CRC_OFFSET,
                   _crc32c.crc32c(mv[pos + ATTRIBUTES_OFFSET:pos + header.size]))

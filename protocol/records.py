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
* ``validate_batch(buf, header)`` raises ``CorruptRecordError`` / ``InvalidRecordError``
* ``set_base_offset``, ``set_partition_leader_epoch``, ``set_log_append_time``

Record level (decoded only on request):

* ``iter_records(buf, header)`` -> ``Record`` objects; ``build_batch(records, ...)``
* ``build_control_batch`` / ``parse_control_record`` / ``read_control_record`` (txn markers)
* legacy magic 0/1: ``iter_legacy``, ``build_legacy``, ``legacy_to_v2`` (produce),
  ``v2_to_legacy`` (Fetch v0-v3)
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


_make_header = BatchHeader._make
_unpack_header = HEADER.unpack_from


def read_header(buf, pos: int = 0) -> BatchHeader:
    """Read a v2 batch header at ``pos``; raises ``CorruptRecordError`` if too short."""
    try:
        return _make_header(_unpack_header(buf, pos) + (pos,))
    except struct.error:
        raise CorruptRecordError("record batch header is truncated") from None


def magic_at(buf, pos: int = 0) -> int:
    """The magic byte of the entry at ``pos`` (the same offset in every format)."""
    return buf[pos + MAGIC_OFFSET]


def tagged(exc, kind: str, count: int = 1):
    """``exc``, marked for one of the broker's invalid-record meters (Kafka's BrokerTopicMetrics
    InvalidMessageCrc..., broker/metrics.py INVALID_KINDS): ``kind`` and how many records."""
    exc.invalid_kind = kind
    exc.invalid_count = count
    return exc


def validate_batch(buf, header: BatchHeader, check_crc: bool = True, *,
                   check_count: bool = True) -> None:
    """Check magic, length, record count vs lastOffsetDelta and (optionally) CRC-32C.

    The count rule (recordsCount == lastOffsetDelta + 1) is Kafka's produce-time check;
    compacted batches legitimately break it, so log recovery should pass ``check_count=False``.
    """
    if header.magic != 2:
        raise tagged(CorruptRecordError(f"unsupported magic {header.magic} for a v2 batch"), "invalid_magic_number")
    if header.batch_length < BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch length {header.batch_length} is below the minimum")
    end = header.pos + header.size
    if end > len(buf):
        raise CorruptRecordError("record batch is truncated")
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise tagged(CorruptRecordError("negative record count or last offset delta"), "invalid_offset_or_sequence")
    if header.attributes & 0xFF80:
        raise CorruptRecordError(f"unknown batch attributes {header.attributes:#x}")
    if header.compression > 4:
        raise CorruptRecordError(f"unknown compression codec {header.compression}")
    if check_crc:
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        actual = _crc32c.crc32c(mv[header.pos + ATTRIBUTES_OFFSET:end])
        if actual != header.crc:
            raise tagged(CorruptRecordError(
                f"CRC mismatch: stored {header.crc:#010x}, computed {actual:#010x}"), "invalid_message_crc")
    if check_count and header.records_count \
            and header.last_offset_delta != header.records_count - 1 and not header.is_control:
        # Compaction may leave fewer records than lastOffsetDelta+1; a producer may not.
        raise tagged(InvalidRecordError(
            f"record count {header.records_count} does not match lastOffsetDelta "
            f"{header.last_offset_delta}"), "invalid_offset_or_sequence")


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
    return _scan(buf, start, len(buf) if end is None else end, None, False)


def scan_batches(buf, start: int = 0, end: int | None = None, max_batch_size: int | None = None):
    """Like ``iter_batches`` but yields a final ``TruncatedBatch`` for a partial tail.

    Raises ``CorruptRecordError`` for what cannot be a torn write: a negative length, a v2
    length below the header size, a magic byte other than 0/1/2, or (when ``max_batch_size``
    is given) a batch larger than that.
    """
    return _scan(buf, start, len(buf) if end is None else end, max_batch_size, True)


def _scan(buf, pos: int, end: int, max_batch_size, report_tail: bool):
    unpack = HEADER.unpack_from
    make = BatchHeader._make
    limit = (1 << 31) + LOG_OVERHEAD if max_batch_size is None else max_batch_size
    while pos < end:
        avail = end - pos
        if avail >= BATCH_OVERHEAD:
            # fast path: a whole, plausible v2 batch
            fields = unpack(buf, pos)
            size = fields[1] + LOG_OVERHEAD
            if fields[3] == 2 and BATCH_OVERHEAD <= size <= avail and size <= limit:
                yield make(fields + (pos,))
                pos += size
                continue
        if avail < LOG_OVERHEAD:
            if report_tail:
                yield TruncatedBatch(pos, avail)
            return
        length = _I32.unpack_from(buf, pos + 8)[0]
        if avail > MAGIC_OFFSET:
            magic = buf[pos + MAGIC_OFFSET]
            if magic > 2:
                raise CorruptRecordError(f"invalid magic {magic} at position {pos}")
            if magic == 2 and length < BATCH_OVERHEAD - LOG_OVERHEAD:
                raise CorruptRecordError(f"invalid batch length {length} at position {pos}")
        if length < 0:
            raise CorruptRecordError(f"invalid batch length {length} at position {pos}")
        size = length + LOG_OVERHEAD
        if size > limit:
            raise CorruptRecordError(
                f"batch size {size} at position {pos} exceeds the maximum {max_batch_size}")
        if size > avail or avail < BATCH_OVERHEAD:
            if report_tail:
                yield TruncatedBatch(pos, avail)
            return
        yield make(unpack(buf, pos) + (pos,))    # a legacy entry: only pos/size/magic mean much
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


# =====================================================================================
# Records inside a v2 batch (decoded only on request)
# =====================================================================================

import time as _time  # noqa: E402  (kept next to the code that uses it)
import zlib as _zlib  # noqa: E402

DEFAULT_MAX_DECOMPRESSED_SIZE = 128 * 1024 * 1024   # bound on a batch's decompressed records

# compression imports CorruptRecordError and the bound above, so it is imported after them.
import protocol.compression as _compression  # noqa: E402
NO_TIMESTAMP = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP_TYPE = -1     # legacy v0 messages carry no timestamp


class Record:
    """One record: ``offset``, ``timestamp``, ``key``, ``value``, ``headers``, ``attributes``."""
    __slots__ = ("offset", "timestamp", "key", "value", "headers", "attributes")

    def __init__(self, offset=None, timestamp=None, key=None, value=None, headers=(),
                 attributes=0):
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = list(headers)
        self.attributes = attributes

    def _astuple(self):
        return (self.offset, self.timestamp, self.key, self.value, self.headers,
                self.attributes)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={_short(self.value)}, headers={self.headers!r})")


def _short(value):
    if value is None or len(value) <= 40:
        return repr(value)
    return repr(bytes(value[:40])) + f"...({len(value)} bytes)"


# ---------------------------------------------------------------- varints (zig-zag)

def _read_varint(data, pos: int, max_bytes: int):
    """Decode a zig-zag varint at ``pos``; return (value, new_pos)."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift >= 7 * max_bytes:
            raise CorruptRecordError("varint is too long")
    if result >> (32 if max_bytes == 5 else 64):
        raise CorruptRecordError("varint overflows its type")
    return (result >> 1) ^ -(result & 1), pos


def _put_varint(out: bytearray, n: int) -> None:
    """Append ``n`` as a zig-zag varint (varint and varlong share the encoding)."""
    z = n << 1 if n >= 0 else ((-n) << 1) - 1
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def varint_size(n: int) -> int:
    z = n << 1 if n >= 0 else ((-n) << 1) - 1
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


# ---------------------------------------------------------------- decoding

def batch_payload(buf, header: BatchHeader, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE):
    """The records bytes of a batch, decompressed (bounded by ``max_size``)."""
    end = header.pos + header.size
    if header.batch_length < BATCH_OVERHEAD - LOG_OVERHEAD or end > len(buf):
        raise CorruptRecordError("record batch is truncated or has an invalid length")
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    body = mv[header.pos + BATCH_OVERHEAD:end]
    codec = header.compression
    if codec > 4:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    return _compression.decompress(codec, body, max_size=max_size)


def iter_records(buf, header: BatchHeader, *,
                 max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[Record]:
    """Decode the records of the v2 batch ``header`` (at ``header.pos`` in ``buf``).

    Decompresses per the codec (output bounded by ``max_size``) and checks each record's
    length, key/value/header lengths and that exactly ``recordsCount`` records fill the data.
    Raises ``CorruptRecordError`` on any inconsistency.  The CRC is not checked here
    (``validate_batch`` does that).
    """
    if header.magic != 2:
        raise CorruptRecordError(f"iter_records needs a v2 batch, got magic {header.magic}")
    data = batch_payload(buf, header, max_size=max_size)
    count = header.records_count
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    if count * 7 > len(data):      # 7 bytes is the smallest possible record
        raise CorruptRecordError(
            f"{count} records cannot fit in {len(data)} bytes of record data")
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.attributes & TIMESTAMP_TYPE_MASK
    append_ts = header.max_timestamp
    end = len(data)
    pos = 0
    try:
        for _ in range(count):
            length, pos = _read_varint(data, pos, 5)
            rec_end = pos + length
            if length < 6 or rec_end > end:
                raise CorruptRecordError(f"invalid record length {length}")
            attributes = data[pos]
            ts_delta, pos = _read_varint(data, pos + 1, 10)
            offset_delta, pos = _read_varint(data, pos, 5)
            key_len, pos = _read_varint(data, pos, 5)
            if key_len < 0:
                if key_len != -1:
                    raise CorruptRecordError(f"invalid key length {key_len}")
                key = None
            else:
                if pos + key_len > rec_end:
                    raise CorruptRecordError(f"key length {key_len} overruns the record")
                key = data[pos:pos + key_len]
                pos += key_len
            value_len, pos = _read_varint(data, pos, 5)
            if value_len < 0:
                if value_len != -1:
                    raise CorruptRecordError(f"invalid value length {value_len}")
                value = None
            else:
                if pos + value_len > rec_end:
                    raise CorruptRecordError(f"value length {value_len} overruns the record")
                value = data[pos:pos + value_len]
                pos += value_len
            n_headers, pos = _read_varint(data, pos, 5)
            if n_headers:
                headers, pos = _read_headers(data, pos, rec_end, n_headers)
            else:
                headers = []
            if pos != rec_end:
                raise CorruptRecordError(
                    f"record length {length} does not match its content ({length + pos - rec_end})")
            yield Record(base_offset + offset_delta,
                         append_ts if log_append else base_ts + ts_delta,
                         key, value, headers, attributes)
    except IndexError:
        raise CorruptRecordError("record data ends inside a record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} unexpected bytes after the last record")


def _read_headers(data, pos: int, rec_end: int, count: int):
    if count < 0 or count > rec_end - pos:
        raise CorruptRecordError(f"invalid header count {count}")
    headers = []
    for _ in range(count):
        klen, pos = _read_varint(data, pos, 5)
        if klen < 0 or pos + klen > rec_end:
            raise CorruptRecordError(f"invalid header key length {klen}")
        try:
            hkey = data[pos:pos + klen].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not valid UTF-8") from None
        pos += klen
        vlen, pos = _read_varint(data, pos, 5)
        if vlen < 0:
            if vlen != -1:
                raise CorruptRecordError(f"invalid header value length {vlen}")
            hval = None
        else:
            if pos + vlen > rec_end:
                raise CorruptRecordError(f"header value length {vlen} overruns the record")
            hval = data[pos:pos + vlen]
            pos += vlen
        headers.append((hkey, hval))
    return headers, pos


def record_summaries(buf, header: BatchHeader, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE):
    """(offset, timestamp, has_key) of each record of a v2 batch, reading only each record's
    length, attributes, timestamp and offset deltas and key length (no slices of keys, values or
    headers): what Kafka's per-record produce checks look at.  Raises ``CorruptRecordError`` when
    the records do not fill the payload exactly.  Under LogAppendTime every timestamp is the
    batch's max timestamp, as ``iter_records`` reads it."""
    return _summaries(batch_payload(buf, header, max_size=max_size), header)


def _summaries(data, header: BatchHeader) -> list:
    """``record_summaries`` of ``data``, the batch's records already decompressed."""
    count = header.records_count
    end = len(data)
    if count < 0 or count * 7 > end:
        raise CorruptRecordError(f"{count} records cannot fit in {end} bytes of record data")
    base, base_ts = header.base_offset, header.base_timestamp
    append_ts = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    out = []
    pos = 0
    try:
        for _ in range(count):
            length, start = _read_varint(data, pos, 5)
            pos = start + length
            if length < 6 or pos > end:
                raise CorruptRecordError(f"invalid record length {length}")
            ts_delta, p = _read_varint(data, start + 1, 10)
            delta, p = _read_varint(data, p, 5)
            key_len, _ = _read_varint(data, p, 5)
            out.append((base + delta, append_ts if append_ts is not None else base_ts + ts_delta, key_len >= 0))
    except IndexError:
        raise CorruptRecordError("record data ends inside a record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} unexpected bytes after the last record")
    return out


def recompress_batch(buf, header: BatchHeader, codec: int, *, level: int | None = None,
                     max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytearray:
    """The v2 batch ``header`` of ``buf`` with its records stored under ``codec`` instead (the
    broker's ``compression.type``).  A record's encoding does not depend on the codec, so the
    records' bytes move as they are and the header keeps every field but the codec bits,
    the length and the CRC.  Records whose offset deltas do not run 0, 1, 2... are rebuilt
    with deltas that do, as Kafka rebuilds them.  Raises ``CorruptRecordError`` when the
    payload does not decompress or its records do not fill it exactly."""
    data = batch_payload(buf, header, max_size=max_size)
    base = header.base_offset
    if any(offset != base + i for i, (offset, _, _) in enumerate(_summaries(data, header))):
        return build_batch(list(iter_records(buf, header, max_size=max_size)),
                           compression=codec, compression_level=level,
                           producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                           base_sequence=header.base_sequence,
                           is_transactional=header.is_transactional,
                           is_control=header.is_control,
                           partition_leader_epoch=header.partition_leader_epoch,
                           timestamp_type=header.timestamp_type,
                           max_timestamp=header.max_timestamp if header.timestamp_type else None)
    payload = _compression.compress(codec, data, level=level) if codec else data
    out = bytearray(BATCH_OVERHEAD + len(payload))
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    out[:BATCH_OVERHEAD] = mv[header.pos:header.pos + BATCH_OVERHEAD]
    out[BATCH_OVERHEAD:] = payload
    _I32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _I16.pack_into(out, ATTRIBUTES_OFFSET, (header.attributes & ~COMPRESSION_MASK) | codec)
    _U32.pack_into(out, CRC_OFFSET, _crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out


# ---------------------------------------------------------------- building

def now_ms() -> int:
    return _time.time_ns() // 1_000_000


_now_ms = now_ms


def _as_bytes(v):
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


def _unpack_record(r):
    """(key, value, headers, timestamp, offset) from a tuple or a Record-like object."""
    if isinstance(r, tuple):
        n = len(r)
        if not 2 <= n <= 4:
            raise ValueError(f"a record tuple is (key, value[, headers[, timestamp]]), got {r!r}")
        return (r[0], r[1], r[2] if n > 2 else (), r[3] if n > 3 else None, None)
    return (r.key, r.value, getattr(r, "headers", ()) or (), r.timestamp,
            getattr(r, "offset", None))


def _encode_record(out: bytearray, offset_delta: int, ts_delta: int, key, value, headers):
    body = bytearray(b"\x00")
    _put_varint(body, ts_delta)
    _put_varint(body, offset_delta)
    key = _as_bytes(key)
    if key is None:
        body.append(1)                 # zig-zag(-1)
    else:
        _put_varint(body, len(key))
        body += key
    value = _as_bytes(value)
    if value is None:
        body.append(1)
    else:
        _put_varint(body, len(value))
        body += value
    _put_varint(body, len(headers))
    for hkey, hval in headers:
        hk = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
        _put_varint(body, len(hk))
        body += hk
        hval = _as_bytes(hval)
        if hval is None:
            body.append(1)
        else:
            _put_varint(body, len(hval))
            body += hval
    _put_varint(out, len(body))
    out += body


def build_batch(records, *, base_offset: int = 0, compression=0, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1,
                is_transactional: bool = False, is_control: bool = False,
                partition_leader_epoch: int = -1, timestamp_type: int = 0,
                base_timestamp: int | None = None, max_timestamp: int | None = None,
                keep_offsets: bool = False, last_offset_delta: int | None = None,
                delete_horizon_ms: int | None = None,
                compression_level: int | None = None) -> bytearray:
    """Build one v2 record batch with a correct CRC-32C.

    ``records`` are ``(key, value[, headers[, timestamp]])`` tuples or Record-like objects
    (``.key``, ``.value``, ``.headers``, ``.timestamp``).  A record timestamp of None means
    ``base_timestamp`` (or now).  ``baseTimestamp`` defaults to the first record's timestamp
    and ``maxTimestamp`` to the largest.  Offset deltas are 0, 1, 2...; with
    ``keep_offsets=True`` they are ``record.offset - base_offset`` (compaction keeps gaps).
    ``last_offset_delta`` overrides the header field (e.g. for a compacted or empty batch).
    ``delete_horizon_ms`` sets attribute bit 6 and stores the horizon as baseTimestamp.
    """
    codec = _compression.codec_id(compression)
    items = [_unpack_record(r) for r in records]
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    default_ts = None
    stamps = []
    for key, value, headers, ts, offset in items:
        if ts is None:
            if default_ts is None:
                default_ts = base_timestamp if base_timestamp is not None else now_ms()
            ts = default_ts
        stamps.append(ts)
    if base_timestamp is None:
        base_timestamp = stamps[0] if stamps else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max(stamps) if stamps else NO_TIMESTAMP

    payload = bytearray()
    delta = -1
    for i, (key, value, headers, _, offset) in enumerate(items):
        if keep_offsets:
            if offset is None:
                raise ValueError("keep_offsets=True needs records with an offset")
            new_delta = offset - base_offset
            if new_delta <= delta:
                raise ValueError("record offsets must increase and not precede base_offset")
            delta = new_delta
        else:
            delta = i
        if not -(1 << 31) <= delta < (1 << 31):
            raise ValueError(f"offset delta {delta} does not fit in an int32")
        _encode_record(payload, delta, stamps[i] - base_timestamp, key, value, headers)
    if last_offset_delta is None:
        last_offset_delta = max(delta, 0)
    elif items and last_offset_delta < delta:
        raise ValueError("last_offset_delta is below the last record's offset delta")
    if codec:
        payload = _compression.compress(codec, payload, level=compression_level)

    attributes = codec
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
    out = bytearray(BATCH_OVERHEAD + len(payload))
    HEADER.pack_into(out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, 2,
                     0, attributes, last_offset_delta, base_timestamp, max_timestamp,
                     producer_id, producer_epoch, base_sequence, len(items))
    out[BATCH_OVERHEAD:] = payload
    _U32.pack_into(out, CRC_OFFSET, _crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out


# ---------------------------------------------------------------- control records

class ControlRecordType:
    """Types of control record keys (``int16 version, int16 type``)."""
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class ControlRecord(NamedTuple):
    type: int
    version: int
    coordinator_epoch: int | None     # ABORT/COMMIT only


_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


def _marker_type(kind) -> int:
    if isinstance(kind, str):
        kind = {"ABORT": 0, "COMMIT": 1}.get(kind.upper(), kind)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError(f"a transaction marker is COMMIT or ABORT, not {kind!r}")
    return int(kind)


def build_control_batch(kind, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        base_offset: int = 0, timestamp: int | None = None,
                        partition_leader_epoch: int = -1) -> bytearray:
    """A 78-byte transaction marker batch (COMMIT or ABORT) for ``producer_id``."""
    key = _CONTROL_KEY.pack(0, _marker_type(kind))
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    ts = now_ms() if timestamp is None else timestamp
    return build_batch([(key, value, (), ts)], base_offset=base_offset,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=NO_SEQUENCE, is_transactional=True, is_control=True,
                       partition_leader_epoch=partition_leader_epoch)


def parse_control_record(key, value) -> ControlRecord:
    """Decode a control record: (type, version, coordinator_epoch).

    Key versions above 0 are accepted (only the first 4 bytes are read).  For ABORT/COMMIT the
    value must hold at least 6 bytes; other types have ``coordinator_epoch`` None.
    """
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key is shorter than 4 bytes")
    version, ctype = _CONTROL_KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"invalid control record version {version}")
    epoch = None
    if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        if value is None or len(value) < 6:
            raise CorruptRecordError("transaction marker value is shorter than 6 bytes")
        _, epoch = _MARKER_VALUE.unpack_from(value, 0)
    return ControlRecord(ctype, version, epoch)


def read_control_record(buf, header: BatchHeader) -> ControlRecord | None:
    """The first control record of a control batch (None if the batch is empty)."""
    if not header.is_control:
        raise InvalidRecordError("not a control batch")
    for rec in iter_records(buf, header):
        return parse_control_record(rec.key, rec.value)
    return None


# =====================================================================================
# Legacy message sets, magic 0 and 1 (up-conversion on produce, down-conversion on fetch)
# =====================================================================================
#
#   offset int64, messageSize int32, crc uint32 (zlib CRC-32 of magic..end), magic int8,
#   attributes int8, [timestamp int64: v1 only], key (int32 len + bytes), value (same)

_LEGACY_HEAD = struct.Struct(">qiIbb")       # offset, size, crc, magic, attributes
LEGACY_OVERHEAD = {0: 14, 1: 22}             # bytes after offset+size, without key/value
LEGACY_CODEC_MASK = 0x07
LEGACY_TIMESTAMP_TYPE_MASK = 0x08


class LegacyMessage:
    """A magic 0/1 message as yielded by ``iter_legacy`` (absolute offsets after deep iteration)."""
    __slots__ = ("offset", "magic", "attributes", "timestamp", "timestamp_type", "key", "value",
                 "crc")

    def __init__(self, offset, magic, attributes, timestamp, timestamp_type, key, value, crc):
        self.offset = offset
        self.magic = magic
        self.attributes = attributes
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.crc = crc

    @property
    def compression(self) -> int:
        return self.attributes & LEGACY_CODEC_MASK

    @property
    def headers(self) -> list:
        return []

    def __repr__(self):
        return (f"LegacyMessage(offset={self.offset}, magic={self.magic}, "
                f"timestamp={self.timestamp}, key={self.key!r}, value={_short(self.value)})")


def _read_legacy(buf, pos: int, end: int, check_crc: bool):
    """Parse one legacy entry at ``pos``; return (message, next_pos), or None if it is cut short."""
    if end - pos < LOG_OVERHEAD:
        return None
    offset, size = struct.unpack_from(">qi", buf, pos)
    if end - pos > MAGIC_OFFSET:
        magic = buf[pos + MAGIC_OFFSET]
        if magic > 1:
            raise CorruptRecordError(f"expected a magic 0/1 message at {pos}, found magic {magic}")
        if size < LEGACY_OVERHEAD[magic]:
            raise CorruptRecordError(f"message size {size} at {pos} is below the minimum")
    elif size < LEGACY_OVERHEAD[0]:
        raise CorruptRecordError(f"message size {size} at {pos} is below the minimum")
    msg_end = pos + LOG_OVERHEAD + size
    if msg_end > end:
        return None
    _, _, crc, magic, attributes = _LEGACY_HEAD.unpack_from(buf, pos)
    if check_crc:
        actual = _zlib.crc32(memoryview(buf)[pos + MAGIC_OFFSET:msg_end])
        if actual != crc:
            raise tagged(CorruptRecordError(
                f"message CRC mismatch at {pos}: stored {crc:#010x}, computed {actual:#010x}"),
                "invalid_message_crc")
    p = pos + 18
    if magic == 1:
        timestamp = _I64.unpack_from(buf, p)[0]
        p += 8
        ts_type = 1 if attributes & LEGACY_TIMESTAMP_TYPE_MASK else 0
    else:
        timestamp, ts_type = NO_TIMESTAMP, NO_TIMESTAMP_TYPE
    key, p = _legacy_bytes(buf, p, msg_end)
    value, p = _legacy_bytes(buf, p, msg_end)
    if p != msg_end:
        raise CorruptRecordError(f"message at {pos} has {msg_end - p} bytes after its value")
    return LegacyMessage(offset, magic, attributes, timestamp, ts_type, key, value, crc), msg_end


def _legacy_bytes(buf, p: int, limit: int):
    if p + 4 > limit:
        raise CorruptRecordError("message ends inside a key/value length")
    n = _I32.unpack_from(buf, p)[0]
    p += 4
    if n < 0:
        if n != -1:
            raise CorruptRecordError(f"invalid key/value length {n}")
        return None, p
    if p + n > limit:
        raise CorruptRecordError(f"key/value length {n} overruns the message")
    return bytes(buf[p:p + n]), p + n


def iter_legacy(buf, start: int = 0, end: int | None = None, *, deep: bool = True,
                check_crc: bool = True, strict: bool = False,
                max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[LegacyMessage]:
    """Yield the messages of a magic 0/1 message set.

    With ``deep`` (the default) a compressed wrapper is replaced by its inner messages, with
    absolute offsets (v1: inner offsets are relative, the wrapper holds the last absolute
    offset; a wrapper offset of 0 is tolerated) and, under LogAppendTime, the wrapper's
    timestamp.  A partial trailing message ends the iteration silently unless ``strict``.
    """
    if end is None:
        end = len(buf)
    pos = start
    while pos < end:
        got = _read_legacy(buf, pos, end, check_crc)
        if got is None:
            if strict:
                raise CorruptRecordError(f"message set is truncated at {pos}")
            return
        msg, pos = got
        if deep and msg.compression:
            yield from _inner_messages(msg, check_crc, max_size)
        else:
            yield msg


def _inner_messages(wrapper: LegacyMessage, check_crc: bool, max_size: int):
    codec = wrapper.compression
    if codec > 3:
        raise CorruptRecordError(f"compression codec {codec} is not valid for magic {wrapper.magic}")
    if wrapper.value is None:
        raise CorruptRecordError("compressed wrapper message has a null value")
    data = _compression.decompress(codec, wrapper.value, max_size=max_size,
                                   legacy_lz4=wrapper.magic == 0)
    inner = list(iter_legacy(data, deep=False, check_crc=check_crc, strict=True))
    if not inner:
        raise CorruptRecordError("compressed wrapper message holds no messages")
    for msg in inner:
        if msg.compression:
            raise CorruptRecordError("compressed messages must not be nested")
        if msg.magic != wrapper.magic:
            raise tagged(InvalidRecordError(
                f"inner message magic {msg.magic} does not match wrapper magic {wrapper.magic}"),
                "invalid_magic_number")
    if wrapper.magic == 1:
        if wrapper.offset != 0:
            shift = wrapper.offset - inner[-1].offset
            for msg in inner:
                msg.offset += shift
        if wrapper.timestamp_type == LOG_APPEND_TIME:
            for msg in inner:
                msg.timestamp = wrapper.timestamp
                msg.timestamp_type = LOG_APPEND_TIME
    return inner


def _legacy_message(out: bytearray, offset: int, magic: int, attributes: int, timestamp: int,
                    key, value) -> None:
    start = len(out)
    out += _LEGACY_HEAD.pack(offset, 0, 0, magic, attributes)
    if magic == 1:
        out += _I64.pack(timestamp)
    for field in (_as_bytes(key), _as_bytes(value)):
        if field is None:
            out += b"\xff\xff\xff\xff"
        else:
            out += _I32.pack(len(field))
            out += field
    _I32.pack_into(out, start + 8, len(out) - start - LOG_OVERHEAD)
    _U32.pack_into(out, start + 12, _zlib.crc32(memoryview(out)[start + MAGIC_OFFSET:]))


def build_legacy(records, magic: int, compression=0, base_offset: int = 0, *,
                 timestamp_type: int = CREATE_TIME, log_append_time: int | None = None,
                 keep_offsets: bool = False) -> bytes:
    """Build a magic 0/1 message set (one compressed wrapper when ``compression`` is set).

    ``records`` are as for ``build_batch``; headers are dropped, and v0 drops timestamps.
    Offsets are ``base_offset + i``, or each record's ``.offset`` with ``keep_offsets``.
    ``timestamp_type=1`` (v1 only) marks LogAppendTime with ``log_append_time`` as timestamp.
    """
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    codec = _compression.codec_id(compression)
    if codec > 3:
        raise ValueError(f"{_compression.CODEC_NAMES[codec]} is not valid for magic {magic}")
    items = [_unpack_record(r) for r in records]
    offsets = []
    for i, (_, _, _, _, offset) in enumerate(items):
        if keep_offsets:
            if offset is None:
                raise ValueError("keep_offsets=True needs records with an offset")
            offsets.append(offset)
        else:
            offsets.append(base_offset + i)
    log_append = magic == 1 and timestamp_type == LOG_APPEND_TIME
    if log_append and log_append_time is None:
        log_append_time = now_ms()
    stamps = []
    for key, value, headers, ts, _ in items:
        if magic == 0:
            ts = NO_TIMESTAMP
        elif log_append:
            ts = log_append_time
        elif ts is None:
            ts = NO_TIMESTAMP
        stamps.append(ts)
    ts_bit = LEGACY_TIMESTAMP_TYPE_MASK if log_append else 0
    out = bytearray()
    if not codec:
        for (key, value, *_), offset, ts in zip(items, offsets, stamps):
            _legacy_message(out, offset, magic, ts_bit, ts, key, value)
        return bytes(out)
    if not items:
        return b""
    inner = bytearray()
    first = offsets[0]
    for (key, value, *_), offset, ts in zip(items, offsets, stamps):
        _legacy_message(inner, offset - first if magic == 1 else offset, magic, 0, ts, key, value)
    wrapped = _compression.compress(codec, inner, legacy_lz4=magic == 0)
    wrapper_ts = log_append_time if log_append else max(stamps)
    _legacy_message(out, offsets[-1], magic, codec | ts_bit, wrapper_ts, None, wrapped)
    return bytes(out)


def _timestamp_type_id(timestamp_type) -> int:
    if isinstance(timestamp_type, str):
        return {"createtime": 0, "logappendtime": 1}[timestamp_type.lower().replace("_", "")]
    return int(timestamp_type)


def legacy_to_v2(buf, *, timestamp_type=CREATE_TIME, now_ms: int | None = None,
                 compression=None, base_offset: int = 0,
                 max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytearray:
    """Up-convert a magic 0/1 message set to one v2 batch (as Kafka does on produce).

    Offsets become ``base_offset + i``.  Under LogAppendTime every record gets ``now_ms``;
    under CreateTime v1 timestamps are kept and v0 records get -1.  ``compression`` defaults
    to the codec the producer used (its compressed wrapper's).  Headers and producer
    fields are empty.  An empty input gives an empty bytearray.  A set holding a compressed
    wrapper must hold nothing else (InvalidRecordError), as Kafka's LogValidator requires of a
    compressed source: one outer entry.
    """
    ts_type = _timestamp_type_id(timestamp_type)
    if now_ms is None:
        now_ms = _now_ms()
    source_codec = 0
    records = []
    for msg in _iter_legacy_tracking_codec(buf, max_size):
        if isinstance(msg, int):
            source_codec = source_codec or msg
            continue
        ts = now_ms if ts_type == LOG_APPEND_TIME else msg.timestamp
        records.append((msg.key, msg.value, (), ts))
    if not records:
        return bytearray()
    codec = source_codec if compression is None else _compression.codec_id(compression)
    return build_batch(records, base_offset=base_offset, compression=codec,
                       timestamp_type=ts_type,
                       max_timestamp=now_ms if ts_type == LOG_APPEND_TIME else None)


def _iter_legacy_tracking_codec(buf, max_size: int):
    """Deep-iterate ``buf`` yielding each wrapper's codec (an int) before its messages."""
    outers = compressed = 0
    for outer in iter_legacy(buf, deep=False, max_size=max_size):
        outers += 1
        compressed += bool(outer.compression)
        if compressed and outers > 1:
            raise InvalidRecordError("a compressed legacy message set must be the only entry "
                                     "of the partition's records")
        if outer.compression:
            yield outer.compression
            yield from _inner_messages(outer, True, max_size)
        else:
            yield outer


def _iter_entries(mv):
    """(pos, size, magic) of each whole entry (v2 batch or legacy message) in ``mv``."""
    pos, end = 0, len(mv)
    while end - pos > MAGIC_OFFSET:
        size = _I32.unpack_from(mv, pos + 8)[0] + LOG_OVERHEAD
        magic = mv[pos + MAGIC_OFFSET]
        if magic > 2 or size < LOG_OVERHEAD + LEGACY_OVERHEAD[0] or \
                (magic == 2 and size < BATCH_OVERHEAD):
            raise CorruptRecordError(f"invalid entry at position {pos}")
        if pos + size > end:
            return
        yield pos, size, magic
        pos += size


def v2_to_legacy(buf, magic: int, *, first_offset: int | None = None,
                 max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Down-convert the batches in ``buf`` to magic ``magic`` (for Fetch v0-v3 consumers).

    Each v2 batch becomes one legacy entry set with the same codec (zstd, which magic 0/1
    cannot carry, becomes uncompressed); control batches and records below ``first_offset``
    are dropped, as are headers and producer fields (v0 also drops timestamps).  Legacy entries
    already at or below ``magic`` are copied as they are.  A partial trailing batch is dropped.
    """
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    out = bytearray()
    for pos, size, entry_magic in _iter_entries(mv):
        if entry_magic != 2:
            entry = mv[pos:pos + size]
            if entry_magic <= magic:
                out += entry
            else:
                msgs = [m for m in iter_legacy(entry, max_size=max_size)
                        if first_offset is None or m.offset >= first_offset]
                codec = next(iter_legacy(entry, deep=False)).compression
                out += build_legacy([Record(m.offset, m.timestamp, m.key, m.value)
                                     for m in msgs], magic, codec, keep_offsets=True)
            continue
        h = read_header(mv, pos)
        if h.is_control or h.records_count == 0:
            continue
        recs = [r for r in iter_records(mv, h, max_size=max_size)
                if first_offset is None or r.offset >= first_offset]
        if not recs:
            continue
        codec = h.compression if h.compression != _compression.ZSTD else 0
        out += build_legacy(recs, magic, codec, keep_offsets=True,
                            timestamp_type=h.timestamp_type, log_append_time=h.max_timestamp)
    return bytes(out)


# --- what a consumer sees ----------------------------------------------------------------------

class ConsumedRecord(NamedTuple):
    offset: int
    timestamp: int
    timestamp_type: int
    key: object          # bytes-like or None
    value: object
    headers: list
    leader_epoch: int


def consumer_records(buf, fetch_offset: int, aborted=None, end: int | None = None):
    """The records a consumer hands to its application from a Fetch response's ``records``.

    Skips what lies before ``fetch_offset`` (a fetch starts at a batch boundary) and, when
    ``end`` is given, from ``end`` on.  Control batches are never returned.  ``aborted`` is
    None for read_uncommitted, else the response's aborted transactions as
    ``(first_offset, producer_id)`` pairs: a transactional batch of a producer whose aborted
    transaction has started is dropped until that producer's ABORT marker.  Legacy (magic 0/1)
    entries are read too.  Returns ``(records, next_offset)``, the offset to fetch next.
    """
    out = []
    nxt = fetch_offset
    if len(buf) > MAGIC_OFFSET and buf[MAGIC_OFFSET] < 2:
        # A legacy message set (a partition's records are all of one format); its entries can
        # be shorter than a v2 header, so they are walked by iter_legacy, not iter_batches.
        for m in iter_legacy(buf):
            if m.offset >= fetch_offset and (end is None or m.offset < end):
                out.append(ConsumedRecord(m.offset, m.timestamp, getattr(m, "timestamp_type", 0),
                                          m.key, m.value, [], -1))
                nxt = max(nxt, m.offset + 1)
        return out, nxt if end is None else min(nxt, end)
    pending = sorted(aborted) if aborted is not None else None
    active: set[int] = set()
    for h in iter_batches(buf):
        if end is not None and h.base_offset >= end:
            nxt = max(nxt, end)
            break
        if h.next_offset <= fetch_offset:
            continue
        if pending:
            while pending and pending[0][0] <= h.last_offset:
                active.add(pending.pop(0)[1])
        if h.is_control:
            if h.is_transactional and h.producer_id in active:
                cr = read_control_record(buf, h)
                if cr is not None and cr.type == ControlRecordType.ABORT:
                    active.discard(h.producer_id)
        elif not (h.is_transactional and h.producer_id in active):
            ts_type, epoch = h.timestamp_type, h.partition_leader_epoch
            for r in iter_records(buf, h):
                if r.offset >= fetch_offset and (end is None or r.offset < end):
                    out.append(ConsumedRecord(r.offset, r.timestamp, ts_type, r.key, r.value,
                                              r.headers, epoch))
        nxt = max(nxt, h.next_offset)
    if end is not None:
        nxt = min(nxt, end)
    return out, nxt

"""Record formats of ``__transaction_state`` (Kafka's byte layouts, our own encoder).

Key (``TransactionLogKey``): int16 version 0, then the transactional id as an int16-length
string.  Other key versions are reported as unknown and skipped by the loader.

Value (``TransactionLogValue``), int16 version first; a null value is a tombstone (the
transactional id expired):

* v0 (written by Kafka 3.x, and by us while ``transaction.version`` is not finalized at 1 or
  more): producer_id int64, producer_epoch int16,
  transaction_timeout_ms int32, transaction_status int8, transaction_partitions (nullable
  array, int32 count, -1 = null) of {topic string, partition_ids [int32]},
  last_update_timestamp_ms int64, start_timestamp_ms int64.
* v1 (flexible, KIP-890 part 2): the same fields with compact strings/arrays and tagged-field
  sections; tags 0 previous_producer_id, 1 next_producer_id (int64), 2 client_transaction_version
  (int16).  Written once ``transaction.version`` is finalized at 1 or more, as Kafka 4.x does;
  the tags are written when not at their defaults.

The partitions are null exactly when the state is Empty.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from protocol.primitives import DecodeError, r_uvarint, w_uvarint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD0 = struct.Struct(">qhib")      # producer id, epoch, timeout, status
_TAIL = struct.Struct(">qq")         # last update, start


class RecordFormatError(ValueError):
    """A key or value of ``__transaction_state`` that cannot be parsed."""


@dataclass
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int                                   # TxnState id (0..7)
    partitions: dict[str, list[int]] | None      # None only for Empty
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1               # v1 tagged fields
    next_producer_id: int = -1
    client_transaction_version: int = 0
    extra: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------ keys
def key_bytes(transactional_id: str) -> bytes:
    b = transactional_id.encode("utf-8")
    return _I16.pack(0) + _I16.pack(len(b)) + b


def parse_key(data) -> str | None:
    """The transactional id of a key, or None for an unknown key version."""
    data = bytes(data)
    if len(data) < 2:
        raise RecordFormatError("key shorter than its version")
    (version,) = _I16.unpack_from(data, 0)
    if version != 0:
        return None
    if len(data) < 4:
        raise RecordFormatError("truncated key")
    (n,) = _I16.unpack_from(data, 2)
    if n < 0 or 4 + n > len(data):
        raise RecordFormatError("bad transactional id length in key")
    return data[4:4 + n].decode("utf-8")


# ------------------------------------------------------------------------------ values
def value_bytes(v: TxnLogValue) -> bytes:
    """Version 0, as Kafka 3.x writes it."""
    out = bytearray(_I16.pack(0))
    out += _HEAD0.pack(v.producer_id, v.producer_epoch, v.timeout_ms, v.state)
    if v.partitions is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(v.partitions))
        for topic, parts in v.partitions.items():
            tb = topic.encode("utf-8")
            out += _I16.pack(len(tb)) + tb
            out += _I32.pack(len(parts))
            for p in parts:
                out += _I32.pack(p)
    out += _TAIL.pack(v.last_update_ms, v.start_ms)
    return bytes(out)


def _need(data, pos, n):
    if pos + n > len(data):
        raise RecordFormatError("truncated value")


def _parse_v0(data, pos) -> TxnLogValue:
    _need(data, pos, _HEAD0.size)
    pid, epoch, timeout, status = _HEAD0.unpack_from(data, pos)
    pos += _HEAD0.size
    _need(data, pos, 4)
    (count,) = _I32.unpack_from(data, pos)
    pos += 4
    parts = None
    if count >= 0:
        parts = {}
        for _ in range(count):
            _need(data, pos, 2)
            (n,) = _I16.unpack_from(data, pos)
            pos += 2
            _need(data, pos, max(n, 0))
            topic = data[pos:pos + n].decode("utf-8")
            pos += n
            _need(data, pos, 4)
            (np_,) = _I32.unpack_from(data, pos)
            pos += 4
            _need(data, pos, 4 * max(np_, 0))
            parts.setdefault(topic, []).extend(
                _I32.unpack_from(data, pos + 4 * i)[0] for i in range(max(np_, 0)))
            pos += 4 * max(np_, 0)
    _need(data, pos, _TAIL.size)
    last, start = _TAIL.unpack_from(data, pos)
    return TxnLogValue(pid, epoch, timeout, status, parts, last, start)


def _skip_tags(data, pos, end, into: dict | None = None):
    n, pos = r_uvarint(data, pos, end)
    for _ in range(n):
        tag, pos = r_uvarint(data, pos, end)
        size, pos = r_uvarint(data, pos, end)
        _need(data, pos, size)
        if into is not None:
            into[tag] = data[pos:pos + size]
        pos += size
    return pos


def _parse_v1(data, pos) -> TxnLogValue:
    end = len(data)
    _need(data, pos, 8 + 2 + 4 + 1)
    pid, epoch, timeout, status = _HEAD0.unpack_from(data, pos)
    pos += _HEAD0.size
    count, pos = r_uvarint(data, pos, end)
    parts = None
    if count > 0:
        parts = {}
        for _ in range(count - 1):
            n, pos = r_uvarint(data, pos, end)
            _need(data, pos, max(n - 1, 0))
            topic = data[pos:pos + n - 1].decode("utf-8")
            pos += max(n - 1, 0)
            np_, pos = r_uvarint(data, pos, end)
            np_ = max(np_ - 1, 0)
            _need(data, pos, 4 * np_)
            parts.setdefault(topic, []).extend(_I32.unpack_from(data, pos + 4 * i)[0] for i in range(np_))
            pos += 4 * np_
            pos = _skip_tags(data, pos, end)
    _need(data, pos, _TAIL.size)
    last, start = _TAIL.unpack_from(data, pos)
    pos += _TAIL.size
    tags: dict = {}
    if pos < end:
        _skip_tags(data, pos, end, tags)
    v = TxnLogValue(pid, epoch, timeout, status, parts, last, start)
    if 0 in tags and len(tags[0]) == 8:
        v.previous_producer_id = _I64.unpack(tags[0])[0]
    if 1 in tags and len(tags[1]) == 8:
        v.next_producer_id = _I64.unpack(tags[1])[0]
    if 2 in tags and len(tags[2]) == 2:
        v.client_transaction_version = _I16.unpack(tags[2])[0]
    return v


def parse_value(data) -> TxnLogValue | None:
    """A value, or None for a tombstone."""
    if data is None:
        return None
    data = bytes(data)
    if len(data) < 2:
        raise RecordFormatError("value shorter than its version")
    (version,) = _I16.unpack_from(data, 0)
    try:
        if version == 0:
            return _parse_v0(data, 2)
        if version == 1:
            return _parse_v1(data, 2)
    except (struct.error, UnicodeDecodeError, DecodeError) as e:
        raise RecordFormatError(str(e)) from None
    raise RecordFormatError(f"unknown transaction log value version {version}")


def v1_value_bytes(v: TxnLogValue) -> bytes:
    """Version 1 (flexible)."""
    out = bytearray(_I16.pack(1))
    out += _HEAD0.pack(v.producer_id, v.producer_epoch, v.timeout_ms, v.state)
    if v.partitions is None:
        w_uvarint(out, 0)
    else:
        w_uvarint(out, len(v.partitions) + 1)
        for topic, parts in v.partitions.items():
            tb = topic.encode("utf-8")
            w_uvarint(out, len(tb) + 1)
            out += tb
            w_uvarint(out, len(parts) + 1)
            for p in parts:
                out += _I32.pack(p)
            w_uvarint(out, 0)
    out += _TAIL.pack(v.last_update_ms, v.start_ms)
    tags = []
    if v.previous_producer_id != -1:
        tags.append((0, _I64.pack(v.previous_producer_id)))
    if v.next_producer_id != -1:
        tags.append((1, _I64.pack(v.next_producer_id)))
    if v.client_transaction_version != 0:
        tags.append((2, _I16.pack(v.client_transaction_version)))
    w_uvarint(out, len(tags))
    for tag, b in tags:
        w_uvarint(out, tag)
        w_uvarint(out, len(b))
        out += b
    return bytes(out)

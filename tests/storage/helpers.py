"""Builds valid uncompressed v2 record batches for the storage tests (own small encoder)."""
from __future__ import annotations

import struct

import crc32c


def _zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _bytes_field(b) -> bytes:
    if b is None:
        return _zigzag(-1)
    return _zigzag(len(b)) + b


def make_batch(values=(b"v",), *, timestamps=None, keys=None, base_offset: int = 0,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               transactional: bool = False, control: bool = False, leader_epoch: int = -1,
               attributes_extra: int = 0) -> bytearray:
    values = list(values)
    n = len(values)
    timestamps = list(timestamps) if timestamps is not None else [1000 + i for i in range(n)]
    keys = list(keys) if keys is not None else [None] * n
    base_ts = timestamps[0] if n else -1
    recs = bytearray()
    for i, (k, v, ts) in enumerate(zip(keys, values, timestamps)):
        body = b"\x00" + _zigzag(ts - base_ts) + _zigzag(i) + _bytes_field(k) + \
            _bytes_field(v) + _zigzag(0)
        recs += _zigzag(len(body)) + body
    attrs = attributes_extra | (0x10 if transactional else 0) | (0x20 if control else 0)
    tail = struct.pack(">hiqqqhii", attrs, max(n - 1, 0), base_ts,
                       max(timestamps) if n else -1, producer_id, producer_epoch,
                       base_sequence, n) + bytes(recs)
    crc = crc32c.crc32c(tail)
    head = struct.pack(">qiibI", base_offset, len(tail) + 9, leader_epoch, 2, crc)
    return bytearray(head + tail)


def make_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int = 0,
                timestamp: int = 1000, base_offset: int = 0) -> bytearray:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return make_batch([value], keys=[key], timestamps=[timestamp], base_offset=base_offset,
                      producer_id=producer_id, producer_epoch=producer_epoch,
                      transactional=True, control=True)

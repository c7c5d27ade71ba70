"""Reading batches back from a .log file without loading it whole.

How this works: ``FileScanner`` preads the file in chunks (1 MiB, or one batch when a batch is
bigger) and walks them with ``protocol.records.scan_batches``; each yielded item is
``(position_in_file, header, buf)`` where ``header.pos`` indexes ``buf``.  When the walk stops
early it records why in ``stop_reason`` ("torn" for a partial tail, "corrupt" for an impossible
header) and where in ``stopped_at`` — recovery truncates the file there.  ``walk_headers`` is the
cheap variant used after an index lookup: headers only, read a window at a time.

``iter_records`` decodes the records of an uncompressed batch (offset, timestamp, key, value) for
the few places that need record level data (timestamp search, control markers, the cleaner).
For compressed batches it uses ``protocol.compression`` when that module provides
``decompress(codec, data)``, and returns ``None`` otherwise.
"""
from __future__ import annotations

import os
import struct
from typing import Iterator, NamedTuple

from protocol.records import (BATCH_OVERHEAD, HEADER, LOG_OVERHEAD, BatchHeader,
                              CorruptRecordError, TruncatedBatch, scan_batches)

CHUNK = 1 << 20
_I32 = struct.Struct(">i")


def pread_exact(fd: int, length: int, pos: int) -> bytes:
    data = os.pread(fd, length, pos)
    if len(data) == length or not data:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, pos + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class FileScanner:
    """Iterate whole batches of ``fd`` in [start, end)."""

    def __init__(self, fd: int, start: int, end: int, chunk: int = CHUNK):
        self.fd, self.start, self.end, self.chunk = fd, start, end, chunk
        self.stopped_at = start
        self.stop_reason = None     # None (reached end), "torn" or "corrupt"

    def __iter__(self):
        pos, end = self.start, self.end
        while pos < end:
            want = min(self.chunk, end - pos)
            buf = pread_exact(self.fd, want, pos)
            if not buf:
                self.stopped_at, self.stop_reason = pos, "torn"
                return
            advanced = 0
            try:
                for h in scan_batches(buf):
                    if isinstance(h, TruncatedBatch):
                        break
                    yield pos + h.pos, h, buf
                    advanced = h.pos + h.size
            except CorruptRecordError:
                self.stopped_at, self.stop_reason = pos + advanced, "corrupt"
                return
            pos += advanced
            self.stopped_at = pos
            if pos >= end:
                return
            if advanced == 0:
                # one batch bigger than the chunk (or a torn tail): read exactly that batch
                head = pread_exact(self.fd, LOG_OVERHEAD, pos)
                if len(head) < LOG_OVERHEAD:
                    self.stop_reason = "torn"
                    return
                size = _I32.unpack_from(head, 8)[0] + LOG_OVERHEAD
                if size < BATCH_OVERHEAD:
                    self.stop_reason = "corrupt"
                    return
                if pos + size > end:
                    self.stop_reason = "torn"
                    return
                buf = pread_exact(self.fd, size, pos)
                try:
                    items = list(scan_batches(buf))
                except CorruptRecordError:
                    self.stop_reason = "corrupt"
                    return
                if not items or isinstance(items[0], TruncatedBatch):
                    self.stop_reason = "torn"
                    return
                yield pos, items[0], buf
                pos += size
                self.stopped_at = pos


WALK_WINDOW = 8192 + BATCH_OVERHEAD     # one offset-index interval (4 KiB by default) and then some


def walk_headers(fd: int, start: int, end: int) -> Iterator[BatchHeader]:
    """Headers (``pos`` = file position) of the batches in [start, end); stops at a torn tail.

    The file is read ``WALK_WINDOW`` bytes at a time and every header inside a window is taken
    from it: a walk from an offset-index entry to the batch wanted is usually one pread, however
    small the batches; a batch bigger than the window costs one pread per header, as before."""
    pos = start
    buf, base = b"", start          # buf holds the file from ``base``
    while pos + BATCH_OVERHEAD <= end:
        off = pos - base
        if off < 0 or off + BATCH_OVERHEAD > len(buf):
            buf, base, off = pread_exact(fd, min(WALK_WINDOW, end - pos), pos), pos, 0
            if len(buf) < BATCH_OVERHEAD:
                return
        h = BatchHeader(*HEADER.unpack_from(buf, off), pos)
        if h.batch_length < BATCH_OVERHEAD - LOG_OVERHEAD or pos + h.size > end:
            return
        yield h
        pos += h.size


# -- record decoding (uncompressed v2) --------------------------------------------------------

class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: bytes      # raw header section (count + headers), kept opaque


def _varint(buf, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint is too long")
    return (result >> 1) ^ -(result & 1), pos


def _decompress(codec: int, data: bytes):
    try:
        from protocol import compression  # written by the protocol team
        return compression.decompress(codec, data)
    except (ImportError, AttributeError):
        return None


def iter_records(buf, header: BatchHeader):
    """Records of a batch, or ``None`` if it is compressed and no codec is available."""
    start = header.pos + BATCH_OVERHEAD
    end = header.pos + header.size
    if header.compression:
        data = _decompress(header.compression, bytes(buf[start:end]))
        if data is None:
            return None
        buf, start, end = data, 0, len(data)
    log_append = header.timestamp_type == 1
    out = []
    pos = start
    try:
        for _ in range(header.records_count):
            length, pos = _varint(buf, pos)
            rec_end = pos + length
            pos += 1  # attributes
            ts_delta, pos = _varint(buf, pos)
            off_delta, pos = _varint(buf, pos)
            klen, pos = _varint(buf, pos)
            key = None if klen < 0 else bytes(buf[pos:pos + klen])
            pos += max(klen, 0)
            vlen, pos = _varint(buf, pos)
            value = None if vlen < 0 else bytes(buf[pos:pos + vlen])
            pos += max(vlen, 0)
            headers = bytes(buf[pos:rec_end])
            pos = rec_end
            ts = header.max_timestamp if log_append else header.base_timestamp + ts_delta
            out.append(Record(header.base_offset + off_delta, ts, key, value, headers))
    except IndexError:
        raise CorruptRecordError("record runs past the end of its batch") from None
    if pos != end:
        raise CorruptRecordError("records do not fill their batch")
    return out


CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def control_marker(buf, header: BatchHeader):
    """(type, coordinator_epoch) of a control batch, or None if it cannot be read."""
    recs = iter_records(buf, header)
    if not recs or recs[0].key is None or len(recs[0].key) < 4:
        return None
    ctype = struct.unpack_from(">h", recs[0].key, 2)[0]
    epoch = -1
    if recs[0].value is not None and len(recs[0].value) >= 6:
        epoch = struct.unpack_from(">i", recs[0].value, 2)[0]
    return ctype, epoch

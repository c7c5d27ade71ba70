"""Record-batch compression codecs, with a hard bound on decompressed size.

Codec ids are those of the batch attributes (bits 0-2): 0 none, 1 gzip, 2 snappy, 3 lz4,
4 zstd.  Stream formats follow what Kafka's Java client writes:

* gzip   -- a gzip stream (several members are accepted when reading).
* snappy -- snappy-java's "xerial" framing: ``\\x82SNAPPY\\x00`` + int32 version + int32
  compatible version, then repeated (int32 length, raw snappy block).  Readers also accept a
  bare raw snappy block, which some non-Java clients send.
* lz4    -- the LZ4 frame format.  Magic-0 messages used a wrong header checksum (computed
  over the frame magic as well as the descriptor, KAFKA-3160); ``legacy_lz4=True`` writes that
  form and tolerates either checksum when reading.
* zstd   -- a zstd frame, decompressed as a stream.

``decompress`` never holds more than ``max_size + 1`` output bytes of any codec: a tiny input
that would expand past ``max_size`` raises ``DecompressedSizeError`` instead of eating memory.
"""
from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame as _lz4f
import zstandard as _zstd

from protocol.records import DEFAULT_MAX_DECOMPRESSED_SIZE as DEFAULT_MAX_SIZE
from protocol.records import CorruptRecordError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024          # snappy-java's default block size

LZ4_MAGIC = b"\x04\x22\x4d\x18"

_I32 = struct.Struct(">i")


class CompressionError(CorruptRecordError):
    """Compressed data that cannot be decoded (Kafka answers CORRUPT_MESSAGE)."""


class DecompressedSizeError(CompressionError):
    """The decompressed output would exceed the caller's ``max_size``."""


class UnsupportedCodecError(CompressionError):
    """A codec id outside 0..4."""


def codec_id(codec) -> int:
    """Accept a codec id or a name such as ``"zstd"``; return the id."""
    if isinstance(codec, str):
        try:
            return CODEC_IDS[codec.lower()]
        except KeyError:
            raise UnsupportedCodecError(f"unknown compression codec {codec!r}") from None
    if codec not in CODEC_NAMES:
        raise UnsupportedCodecError(f"unknown compression codec {codec}")
    return int(codec)


# ---------------------------------------------------------------- compress

def compress(codec, data, *, legacy_lz4: bool = False, level: int | None = None) -> bytes:
    """Compress ``data`` into the stream format Kafka's Java client writes for ``codec``."""
    codec = codec_id(codec)
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_encode(data)
    if codec == LZ4:
        out = _lz4f.compress(data, block_size=_lz4f.BLOCKSIZE_MAX64KB, block_linked=False,
                             content_checksum=False, store_size=False,
                             compression_level=0 if level is None else level)
        if legacy_lz4:
            out = bytearray(out)
            # Old Kafka hashed magic + descriptor: HC = second byte of xxh32(bytes[0:6]).
            out[6] = (xxh32(out[0:6]) >> 8) & 0xFF
            out = bytes(out)
        return out
    return _zstd.ZstdCompressor(level=3 if level is None else level).compress(data)


def _xerial_encode(data) -> bytes:
    mv = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(mv), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(mv[start:start + XERIAL_BLOCK_SIZE]))
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


# ---------------------------------------------------------------- decompress

def decompress(codec, data, *, max_size: int = DEFAULT_MAX_SIZE,
               legacy_lz4: bool = False) -> bytes:
    """Decompress ``data``; raise ``DecompressedSizeError`` past ``max_size`` output bytes."""
    codec = codec_id(codec)
    if codec == NONE:
        if len(data) > max_size:
            raise DecompressedSizeError(f"{len(data)} bytes exceed the limit of {max_size}")
        return bytes(data)
    try:
        if codec == GZIP:
            return _gzip_decode(data, max_size)
        if codec == SNAPPY:
            return _snappy_decode(data, max_size)
        if codec == LZ4:
            return _lz4_decode(data, max_size, legacy_lz4)
        return _zstd_decode(data, max_size)
    except CompressionError:
        raise
    except Exception as exc:   # every codec library has its own error types
        raise CompressionError(f"{CODEC_NAMES[codec]}: cannot decompress: {exc}") from None


def _too_big(codec: str, max_size: int) -> DecompressedSizeError:
    return DecompressedSizeError(
        f"{codec}: decompressed size exceeds the limit of {max_size} bytes")


def _gzip_decode(data, max_size: int) -> bytes:
    out = []
    total = 0
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = rest
        while True:
            chunk = d.decompress(pending, max_size - total + 1)
            pending = d.unconsumed_tail
            total += len(chunk)
            if total > max_size:
                raise _too_big("gzip", max_size)
            out.append(chunk)
            if d.eof:
                break
            if not pending and not chunk:
                raise CompressionError("gzip: stream is truncated")
        rest = d.unused_data or b""
        if rest[:2] != b"\x1f\x8b":     # another member follows, else ignore trailing bytes
            return b"".join(out)


def _snappy_decode(data, max_size: int) -> bytes:
    mv = memoryview(data)
    if len(mv) >= 16 and mv[:8] == XERIAL_MAGIC:
        out = []
        total = 0
        pos = 16
        end = len(mv)
        while pos < end:
            if end - pos < 4:
                raise CompressionError("snappy: truncated xerial block length")
            n = _I32.unpack_from(mv, pos)[0]
            pos += 4
            if n < 0 or pos + n > end:
                raise CompressionError(f"snappy: xerial block length {n} overruns the data")
            block = mv[pos:pos + n]
            pos += n
            total += cramjam.snappy.decompress_raw_len(block)
            if total > max_size:
                raise _too_big("snappy", max_size)
            out.append(bytes(cramjam.snappy.decompress_raw(block)))
        return b"".join(out)
    if cramjam.snappy.decompress_raw_len(mv) > max_size:
        raise _too_big("snappy", max_size)
    return bytes(cramjam.snappy.decompress_raw(mv))


def _lz4_decode(data, max_size: int, legacy: bool) -> bytes:
    rest = bytes(data)
    out = []
    total = 0
    while True:
        if rest[:4] != LZ4_MAGIC:
            raise CompressionError("lz4: missing frame magic")
        if legacy:
            rest = _fix_lz4_header_checksum(rest)
        d = _lz4f.LZ4FrameDecompressor()
        chunk = d.decompress(rest, max_length=max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise _too_big("lz4", max_size)
        out.append(chunk)
        if not d.eof:
            raise CompressionError("lz4: frame is truncated")
        rest = d.unused_data or b""
        if rest[:4] != LZ4_MAGIC:
            return b"".join(out)


def _fix_lz4_header_checksum(frame: bytes) -> bytes:
    """Rewrite the frame header checksum to the standard value (KAFKA-3160 tolerance)."""
    if len(frame) < 7:
        raise CompressionError("lz4: frame header is truncated")
    flg = frame[4]
    desc_end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(frame) <= desc_end:
        raise CompressionError("lz4: frame header is truncated")
    hc = (xxh32(frame[4:desc_end]) >> 8) & 0xFF
    if frame[desc_end] == hc:
        return frame
    return frame[:desc_end] + bytes((hc,)) + frame[desc_end + 1:]


def _zstd_decode(data, max_size: int) -> bytes:
    data = bytes(data)
    _check_zstd_frames(data)
    reader = _zstd.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    out = []
    total = 0
    while True:
        chunk = reader.read(min(max_size - total + 1, 1 << 20))
        if not chunk:
            return b"".join(out)
        total += len(chunk)
        if total > max_size:
            raise _too_big("zstd", max_size)
        out.append(chunk)


_ZSTD_MAGIC = 0xFD2FB528
_FCS_SIZES = (0, 2, 4, 8)
_DICT_ID_SIZES = (0, 1, 2, 4)


def _check_zstd_frames(data: bytes) -> None:
    """Walk the frame and block headers; raise if a frame is cut short (the streaming
    decoder silently stops at a truncated frame)."""
    pos, end = 0, len(data)
    if end == 0:
        raise CompressionError("zstd: empty input")
    while pos < end:
        if end - pos < 5:
            raise CompressionError("zstd: frame header is truncated")
        magic = int.from_bytes(data[pos:pos + 4], "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:          # skippable frame
            size = int.from_bytes(data[pos + 4:pos + 8], "little")
            pos += 8 + size
            continue
        if magic != _ZSTD_MAGIC:
            raise CompressionError("zstd: bad frame magic")
        fhd = data[pos + 4]
        single_segment = fhd & 0x20
        fcs = _FCS_SIZES[fhd >> 6] or (1 if single_segment else 0)
        pos += 5 + (0 if single_segment else 1) + _DICT_ID_SIZES[fhd & 0x03] + fcs
        while True:
            if pos + 3 > end:
                raise CompressionError("zstd: frame is truncated")
            bh = int.from_bytes(data[pos:pos + 3], "little")
            block_type = (bh >> 1) & 0x03
            pos += 3 + (1 if block_type == 1 else bh >> 3)
            if block_type == 3:
                raise CompressionError("zstd: reserved block type")
            if bh & 1:
                break
        pos += 4 if fhd & 0x04 else 0
        if pos > end:
            raise CompressionError("zstd: frame is truncated")


# ---------------------------------------------------------------- xxh32 (LZ4 header checksum)

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data, seed: int = 0) -> int:
    """XXH32 of ``data`` (used only on the few bytes of an LZ4 frame header)."""
    data = bytes(data)
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos:pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        word = int.from_bytes(data[pos:pos + 4], "little")
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h

"""protocol.compression: round trips, Kafka stream formats, kafka-python interop, bombs."""
import gzip
import struct

import pytest
from hypothesis import given, settings, strategies as st

from protocol import compression as comp
from protocol.compression import (CompressionError, DecompressedSizeError, compress, decompress,
                                  xxh32)
from protocol.records import CorruptRecordError

kcodec = pytest.importorskip("kafka.codec")

CODECS = [0, 1, 2, 3, 4]
MB = 1 << 20


@settings(max_examples=40, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000),
       repeat=st.integers(1, 30))
def test_round_trip(codec, data, repeat):
    payload = data * repeat
    assert decompress(codec, compress(codec, payload)) == payload


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_codec_names(codec):
    assert decompress(codec, compress(codec, b"abc" * 100)) == b"abc" * 100


def test_unknown_codec():
    with pytest.raises(comp.UnsupportedCodecError):
        compress(5, b"x")
    with pytest.raises(CorruptRecordError):
        decompress("brotli", b"x")


def test_xxh32_known_vectors():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


# ---------------------------------------------------------------- formats

def test_gzip_is_a_gzip_stream_and_members_concatenate():
    data = b"hello world " * 50
    assert gzip.decompress(compress(1, data)) == data
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(1, two) == b"first second"


def test_snappy_writes_xerial_framing():
    data = bytes(range(256)) * 500          # > one 32 KiB block
    out = compress(2, data)
    assert out[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", out[8:16]) == (1, 1)
    assert kcodec.snappy_decode(out) == data


def test_snappy_reads_raw_blocks():
    data = b"raw snappy " * 100
    raw = kcodec.snappy_encode(data, xerial_compatible=False)
    assert raw[:8] != b"\x82SNAPPY\x00"
    assert decompress(2, raw) == data


@pytest.mark.parametrize("size", [0, 10, 32 * 1024, 100_000])
def test_snappy_reads_kafka_python_xerial(size):
    data = (b"xerial block data %d " % size) * (size // 20 + 1)
    data = data[:size]
    assert decompress(2, kcodec.snappy_encode(data, xerial_compatible=True,
                                              xerial_blocksize=4096)) == data


def test_lz4_frame_header_is_standard():
    out = compress(3, b"x" * 1000)
    assert out[:4] == b"\x04\x22\x4d\x18"
    assert out[4] == 0x60 and out[5] == 0x40          # independent blocks, 64 KiB max
    assert out[6] == (xxh32(out[4:6]) >> 8) & 0xFF
    assert kcodec.lz4_decode(out) == b"x" * 1000


def test_legacy_lz4_has_kafka_3160_checksum_and_is_tolerated():
    data = b"old kafka lz4 " * 200
    legacy = compress(3, data, legacy_lz4=True)
    assert legacy[6] == (xxh32(legacy[0:6]) >> 8) & 0xFF
    assert legacy[6] != (xxh32(legacy[4:6]) >> 8) & 0xFF
    assert decompress(3, legacy, legacy_lz4=True) == data
    # a standard frame is accepted in legacy mode too
    assert decompress(3, compress(3, data), legacy_lz4=True) == data
    # ... but the broken checksum is refused outside legacy mode
    with pytest.raises(CompressionError):
        decompress(3, legacy)


def test_legacy_lz4_matches_kafka_python_old_framing():
    pytest.importorskip("xxhash")
    data = b"interop " * 100
    assert kcodec.lz4_decode_old_kafka(compress(3, data, legacy_lz4=True)) == data
    assert decompress(3, kcodec.lz4_encode_old_kafka(data), legacy_lz4=True) == data


@pytest.mark.parametrize("codec,encode", [
    (1, lambda d: kcodec.gzip_encode(d)),
    (2, lambda d: kcodec.snappy_encode(d)),
    (3, lambda d: kcodec.lz4_encode(d)),
    (4, lambda d: kcodec.zstd_encode(d)),
])
def test_reads_kafka_python_codecs(codec, encode):
    data = b"".join(b"record %d;" % i for i in range(5000))
    assert decompress(codec, encode(data)) == data


@pytest.mark.parametrize("codec,decode", [
    (1, lambda d: kcodec.gzip_decode(d)),
    (2, lambda d: kcodec.snappy_decode(d)),
    (3, lambda d: kcodec.lz4_decode(d)),
    (4, lambda d: kcodec.zstd_decode(d)),
])
def test_kafka_python_reads_ours(codec, decode):
    data = b"".join(b"record %d;" % i for i in range(5000))
    assert decode(compress(codec, data)) == data


# ---------------------------------------------------------------- errors and bombs

@pytest.fixture(scope="module")
def bombs():
    zeros = bytes(100 * MB)
    return {codec: compress(codec, zeros) for codec in (1, 2, 3, 4)}


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_bomb_refused(bombs, codec):
    bomb = bombs[codec]
    assert len(bomb) < 6 * MB
    with pytest.raises(DecompressedSizeError):
        decompress(codec, bomb, max_size=MB)
    assert issubclass(DecompressedSizeError, CorruptRecordError)


def test_raw_snappy_bomb_refused_before_decoding():
    raw = kcodec.snappy_encode(bytes(20 * MB), xerial_compatible=False)
    with pytest.raises(DecompressedSizeError):
        decompress(2, raw, max_size=MB)


def test_exact_limit_is_allowed():
    data = b"a" * 1000
    for codec in CODECS:
        assert decompress(codec, compress(codec, data), max_size=1000) == data
        with pytest.raises(DecompressedSizeError):
            decompress(codec, compress(codec, data), max_size=999)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_truncated_or_garbage_input(codec):
    good = compress(codec, bytes(range(256)) * 100)
    for bad in (good[: len(good) // 2], b"\x00garbage\xff" * 5, b""):
        with pytest.raises(CompressionError):
            decompress(codec, bad)


def test_xerial_block_overrun():
    good = compress(2, b"abc" * 1000)
    bad = good[:16] + struct.pack(">i", 10_000) + good[20:]
    with pytest.raises(CompressionError):
        decompress(2, bad)


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_every_cut_of_a_stream_is_refused(codec):
    good = compress(codec, b"".join(b"%d," % i for i in range(3000)))
    for cut in range(len(good)):
        with pytest.raises(CompressionError):
            decompress(codec, good[:cut])

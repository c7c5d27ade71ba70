"""protocol.records: v2 batches, records, control markers, legacy message sets.

kafka-python's own record encoders/decoders (``kafka.record``) serve as an independent
implementation: what it builds we must read, and what we build it must read.
"""
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from protocol import records as R
from protocol.compression import DecompressedSizeError
from protocol.records import (BATCH_OVERHEAD, ControlRecordType, CorruptRecordError,
                              InvalidRecordError, Record, TruncatedBatch, build_batch,
                              build_control_batch, build_legacy, iter_batches, iter_legacy,
                              iter_records, legacy_to_v2, parse_control_record,
                              read_control_record, read_header, scan_batches, set_base_offset,
                              set_log_append_time, set_partition_leader_epoch, v2_to_legacy,
                              validate_batch)

kr = pytest.importorskip("kafka.record")
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.legacy_records import LegacyRecordBatchBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402

CODECS = [0, 1, 2, 3, 4]
LEGACY_CODECS = [0, 1, 2, 3]

FAST = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

maybe_bytes = st.none() | st.binary(max_size=64)
header_st = st.tuples(st.text(max_size=10), maybe_bytes)
record_st = st.tuples(maybe_bytes, maybe_bytes, st.lists(header_st, max_size=3),
                      st.integers(0, 2**42))


def header_of(buf, pos=0):
    h = read_header(buf, pos)
    validate_batch(buf, h)
    return h


def as_tuples(recs):
    return [(r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp) for r in recs]


# ---------------------------------------------------------------- v2 build / decode

@FAST
@given(recs=st.lists(record_st, max_size=20), codec=st.sampled_from(CODECS),
       base=st.integers(0, 2**40), tstype=st.sampled_from([0, 1]))
def test_build_iter_round_trip(recs, codec, base, tstype):
    buf = build_batch(recs, base_offset=base, compression=codec, timestamp_type=tstype)
    h = header_of(buf)
    assert h.size == len(buf) and h.records_count == len(recs)
    assert h.compression == codec and h.timestamp_type == tstype
    out = list(iter_records(buf, h))
    assert [r.offset for r in out] == list(range(base, base + len(recs)))
    if tstype == 0:
        assert as_tuples(out) == [(k, v, hs, ts) for k, v, hs, ts in recs]
    else:       # LogAppendTime: every record reads maxTimestamp
        assert all(r.timestamp == h.max_timestamp for r in out)
        assert [(r.key, r.value) for r in out] == [(k, v) for k, v, _, _ in recs]
    if recs:
        assert h.base_timestamp == recs[0][3]
        assert h.max_timestamp == max(r[3] for r in recs)
        assert h.last_offset_delta == len(recs) - 1


def test_build_batch_fields_and_record_like_input():
    recs = [Record(offset=None, timestamp=5_000, key=b"a", value=b"1", headers=[("h", b"x")]),
            ("b", "2")]
    buf = build_batch(recs, base_offset=7, producer_id=42, producer_epoch=3, base_sequence=9,
                      is_transactional=True, partition_leader_epoch=4, base_timestamp=4_000)
    h = header_of(buf)
    assert (h.base_offset, h.partition_leader_epoch, h.producer_id, h.producer_epoch,
            h.base_sequence, h.is_transactional, h.is_control) == (7, 4, 42, 3, 9, True, False)
    assert h.base_timestamp == 4_000 and h.max_timestamp == 5_000
    out = list(iter_records(buf, h))
    assert out[0] == Record(7, 5_000, b"a", b"1", [("h", b"x")], 0)
    assert (out[1].key, out[1].value, out[1].timestamp) == (b"b", b"2", 4_000)


def test_keep_offsets_and_last_offset_delta_for_compaction():
    kept = [Record(offset=103, timestamp=1, key=b"k1", value=b"v"),
            Record(offset=108, timestamp=2, key=b"k2", value=None)]
    buf = build_batch(kept, base_offset=100, keep_offsets=True, last_offset_delta=9)
    h = read_header(buf)
    with pytest.raises(InvalidRecordError):     # Kafka's produce-time count rule
        validate_batch(buf, h)
    validate_batch(buf, h, check_count=False)    # what log recovery must accept
    assert h.last_offset_delta == 9 and h.records_count == 2
    assert [r.offset for r in iter_records(buf, h)] == [103, 108]
    empty = build_batch([], base_offset=50, last_offset_delta=4, producer_id=3)
    he = read_header(empty)
    assert he.records_count == 0 and he.next_offset == 55 and he.base_timestamp == -1
    assert list(iter_records(empty, he)) == []


def test_delete_horizon():
    buf = build_batch([(b"k", None, (), 100)], delete_horizon_ms=999)
    h = header_of(buf)
    assert h.attributes & R.DELETE_HORIZON_MASK and h.base_timestamp == 999
    assert next(iter_records(buf, h)).timestamp == 100


def test_varint_extremes():
    recs = [(b"k" * 300, b"v" * 70_000, [("", None)] * 3, 2**62), (None, None, (), 0)]
    buf = build_batch(recs, base_timestamp=0)
    assert as_tuples(iter_records(buf, header_of(buf))) == [
        (k, v, list(hs), ts) for k, v, hs, ts in recs]


# ---------------------------------------------------------------- header patching, CRC

def test_crc_catches_every_flipped_bit_in_covered_range():
    buf = build_batch([(b"key", b"value", [("h", b"1")], 1234)] * 3, compression=0)
    h = read_header(buf)
    for byte in range(R.ATTRIBUTES_OFFSET, len(buf)):
        for bit in (0, 3, 7):
            bad = bytearray(buf)
            bad[byte] ^= 1 << bit
            with pytest.raises((CorruptRecordError, InvalidRecordError)):
                validate_batch(bad, read_header(bad))
    validate_batch(buf, h)


@FAST
@given(byte=st.integers(R.CRC_OFFSET, 200), bit=st.integers(0, 7), codec=st.sampled_from(CODECS))
def test_crc_detects_flip_in_compressed_batch(byte, bit, codec):
    buf = build_batch([(b"k%d" % i, b"v" * i, (), i) for i in range(20)], compression=codec)
    byte %= len(buf)
    if byte < R.CRC_OFFSET:
        return
    bad = bytearray(buf)
    bad[byte] ^= 1 << bit
    with pytest.raises((CorruptRecordError, InvalidRecordError)):
        validate_batch(bad, read_header(bad))


def test_patching_base_offset_and_epoch_keeps_crc_valid():
    buf = build_batch([(b"a", b"b")] * 4, compression=1)
    h = read_header(buf)
    set_base_offset(buf, 0, 123_456)
    set_partition_leader_epoch(buf, 0, 17)
    h2 = header_of(buf)
    assert h2.crc == h.crc and h2.base_offset == 123_456 and h2.partition_leader_epoch == 17
    assert [r.offset for r in iter_records(buf, h2)] == [123_456 + i for i in range(4)]


@pytest.mark.parametrize("codec", CODECS)
def test_set_log_append_time_keeps_batch_valid(codec):
    buf = build_batch([(b"a", b"1", (), 10), (b"b", b"2", (), 20)], compression=codec)
    blob = buf + buf
    second = read_header(blob, len(buf))
    set_log_append_time(blob, second, 99_999)
    first, patched = list(iter_batches(blob))
    validate_batch(blob, first)
    validate_batch(blob, patched)
    assert patched.timestamp_type == 1 and patched.max_timestamp == 99_999
    assert [r.timestamp for r in iter_records(blob, patched)] == [99_999, 99_999]
    assert [m.timestamp for m in MemoryRecords(bytes(blob)).next_batch()] == [10, 20]


def test_validate_rejects_bad_headers():
    buf = build_batch([(b"a", b"1")] * 2)
    for offset, value in ((R.MAGIC_OFFSET, 1), (R.ATTRIBUTES_OFFSET, 0x80),
                          (R.ATTRIBUTES_OFFSET + 1, 0x05)):
        bad = bytearray(buf)
        bad[offset] = value
        with pytest.raises(CorruptRecordError):
            validate_batch(bad, read_header(bad), check_crc=False)
    with pytest.raises(CorruptRecordError):
        validate_batch(buf[:-1], read_header(buf[:-1]))
    # recordsCount that disagrees with lastOffsetDelta (CRC recomputed so only the rule fails)
    bad = bytearray(buf)
    struct.pack_into(">i", bad, 57, 5)
    struct.pack_into(">I", bad, 17, R.crc32c(bytes(bad[21:])))
    with pytest.raises(InvalidRecordError):
        validate_batch(bad, read_header(bad))


# ---------------------------------------------------------------- scanning

def test_scan_distinguishes_truncated_tail_from_corruption():
    one = build_batch([(b"k", b"v" * 100)])
    blob = bytes(one) * 3
    for cut in range(1, len(one)):
        items = list(scan_batches(blob[:2 * len(one) + cut]))
        assert all(not isinstance(i, TruncatedBatch) for i in items[:2])
        assert items[-1] == TruncatedBatch(2 * len(one), cut)
        assert len(list(iter_batches(blob[:2 * len(one) + cut]))) == 2
    # a length below the v2 minimum is corruption, not a torn write
    bad = bytearray(blob)
    struct.pack_into(">i", bad, len(one) + 8, 20)
    with pytest.raises(CorruptRecordError):
        list(scan_batches(bad))
    bad = bytearray(blob)
    struct.pack_into(">i", bad, len(one) + 8, -5)
    with pytest.raises(CorruptRecordError):
        list(scan_batches(bad))
    # an impossible magic byte
    bad = bytearray(blob)
    bad[len(one) + R.MAGIC_OFFSET] = 7
    with pytest.raises(CorruptRecordError):
        list(scan_batches(bad))
    # a length beyond the maximum batch size, when the caller knows one
    bad = bytearray(blob)
    struct.pack_into(">i", bad, len(one) + 8, 1 << 30)
    assert isinstance(list(scan_batches(bad))[-1], TruncatedBatch)
    with pytest.raises(CorruptRecordError):
        list(scan_batches(bad, max_batch_size=1 << 20))
    # CRC corruption of a whole batch is found by validate_batch
    bad = bytearray(blob)
    bad[len(one) + 70] ^= 0xFF
    headers = list(iter_batches(bad))
    validate_batch(bad, headers[0])
    with pytest.raises(CorruptRecordError):
        validate_batch(bad, headers[1])


# ---------------------------------------------------------------- malformed records

def _raw_batch(payload: bytes, count: int, codec: int = 0) -> bytearray:
    """A batch header around hand-made record bytes (CRC valid)."""
    if codec:
        from protocol.compression import compress
        payload = compress(codec, payload)
    out = bytearray(BATCH_OVERHEAD + len(payload))
    R.HEADER.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, codec, max(count - 1, 0), 0, 0,
                       -1, -1, -1, count)
    out[BATCH_OVERHEAD:] = payload
    struct.pack_into(">I", out, 17, R.crc32c(bytes(out[21:])))
    return out


def _record(body: bytes) -> bytes:
    out = bytearray()
    R._put_varint(out, len(body))
    return bytes(out) + body


GOOD_BODY = b"\x00\x00\x00\x02k\x02v\x00"     # attrs, tsDelta 0, offDelta 0, key "k", value "v"


@pytest.mark.parametrize("payload,count", [
    (_record(GOOD_BODY) + b"\x00", 1),                         # trailing byte
    (_record(GOOD_BODY), 2),                                   # count larger than records
    (_record(GOOD_BODY)[:-1], 1),                              # cut short
    (_record(GOOD_BODY + b"\x00"), 1),                         # length larger than content
    (b"\x0e" + GOOD_BODY, 1),                                  # length 7 for an 8-byte body
    (_record(b"\x00\x00\x00\x03k\x02v\x00"), 1),               # key length -2
    (_record(b"\x00\x00\x00\x02k\x20v\x00"), 1),               # value overruns
    (_record(b"\x00\x00\x00\x02k\x02v\x01"), 1),               # headersCount -1
    (_record(b"\x00\x00\x00\x02k\x02v\x7e"), 1),               # headersCount 63 > remaining
    (_record(b"\x00\x00\x00\x02k\x02v\x02\x01\x00"), 1),       # header key length -1 (null)
    (_record(b"\x00\x00\x00\x02k\x02v\x02\x02\xff\x00"), 1),   # header key not UTF-8
    (_record(b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x02k\x02v\x00"), 1),
    (b"", -1),
])
def test_malformed_records_are_corrupt(payload, count):
    buf = _raw_batch(payload, count)
    with pytest.raises(CorruptRecordError):
        list(iter_records(buf, read_header(buf)))


def test_hand_made_record_decodes():
    buf = _raw_batch(_record(GOOD_BODY) + _record(b"\x00\x02\x02\x01\x01\x02\x02a\x01"), 2)
    recs = list(iter_records(buf, read_header(buf)))
    assert as_tuples(recs) == [(b"k", b"v", [], 0), (None, None, [("a", None)], 1)]
    assert recs[1].offset == 1


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_records_decompression_bound(codec):
    buf = build_batch([(None, bytes(4 << 20))], compression=codec)
    h = header_of(buf)
    with pytest.raises(DecompressedSizeError):
        list(iter_records(buf, h, max_size=1 << 20))
    assert len(next(iter_records(buf, h)).value) == 4 << 20


# ---------------------------------------------------------------- control markers

@pytest.mark.parametrize("kind,ctype", [("COMMIT", 1), ("ABORT", 0),
                                        (ControlRecordType.COMMIT, 1)])
def test_control_batch(kind, ctype):
    buf = build_control_batch(kind, producer_id=77, producer_epoch=5, coordinator_epoch=12,
                              base_offset=300, timestamp=1_700_000_000_000)
    assert len(buf) == 78
    h = header_of(buf)
    assert h.is_control and h.is_transactional and h.compression == 0
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (77, 5, -1, 1)
    assert read_control_record(buf, h) == (ctype, 0, 12)
    rec = next(iter_records(buf, h))
    assert rec.offset == 300 and rec.timestamp == 1_700_000_000_000
    assert rec.key == struct.pack(">hh", 0, ctype)
    # kafka-python sees a control record of the right type
    batch = MemoryRecords(bytes(buf)).next_batch()
    assert batch.is_control_batch
    (krec,) = list(batch)
    assert krec.type == ctype


def test_parse_control_record_rules():
    assert parse_control_record(b"\x00\x01\x00\x00extra", b"\x00\x00\x00\x00\x00\x09")[:3] == (
        0, 1, 9)
    assert parse_control_record(b"\x00\x00\x00\x02", b"whatever") == (2, 0, None)
    with pytest.raises(CorruptRecordError):
        parse_control_record(b"\x00\x00\x00", b"\x00" * 6)
    with pytest.raises(CorruptRecordError):
        parse_control_record(b"\x00\x00\x00\x01", b"\x00" * 5)
    with pytest.raises(ValueError):
        build_control_batch("LEADER_CHANGE", 1, 1, 1)


# ---------------------------------------------------------------- kafka-python interop (v2)

def kp_batch(recs, codec, base_offset=0, producer=(-1, -1, -1), transactional=False):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec,
                                  is_transactional=transactional, producer_id=producer[0],
                                  producer_epoch=producer[1], base_sequence=producer[2],
                                  batch_size=1 << 30)
    for i, (k, v, hs, ts) in enumerate(recs):
        b.append(i, timestamp=ts, key=k, value=v, headers=list(hs))
    out = bytearray(b.build())
    set_base_offset(out, 0, base_offset)
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_reads_kafka_python_v2_batches(codec):
    recs = [(b"key-%d" % i if i % 3 else None, b"value-%d" % i * (i % 7),
             [("h%d" % j, b"x" * j if j else None) for j in range(i % 3)], 1_600_000_000_000 + i)
            for i in range(200)]
    buf = kp_batch(recs, codec, base_offset=5000, producer=(12, 3, 40), transactional=True)
    h = header_of(buf)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (12, 3, 40)
    assert h.is_transactional and h.compression == codec
    out = list(iter_records(buf, h))
    assert [r.offset for r in out] == list(range(5000, 5200))
    assert as_tuples(out) == [(k, v, hs, ts) for k, v, hs, ts in recs]


@FAST
@given(recs=st.lists(record_st, min_size=1, max_size=15), codec=st.sampled_from(CODECS))
def test_kafka_python_reads_our_batches(recs, codec):
    buf = build_batch(recs, base_offset=900, compression=codec, producer_id=5,
                      producer_epoch=1, base_sequence=0)
    batch = MemoryRecords(bytes(buf)).next_batch()
    assert batch.validate_crc()
    assert batch.compression_type == codec and batch.producer_id == 5
    got = [(m.offset, m.key, m.value, [(k, v) for k, v in m.headers], m.timestamp)
           for m in batch]
    assert got == [(900 + i, k, v, list(hs), ts) for i, (k, v, hs, ts) in enumerate(recs)]


def test_kafka_python_reads_a_blob_of_many_batches():
    blob = bytearray()
    for i, codec in enumerate(CODECS * 4):
        blob += build_batch([(b"k", b"%d" % i)], base_offset=i, compression=codec)
    mr = MemoryRecords(bytes(blob))
    values = []
    while mr.has_next():
        values += [m.value for m in mr.next_batch()]
    assert values == [b"%d" % i for i in range(20)]
    assert [h.base_offset for h in iter_batches(blob)] == list(range(20))


# ---------------------------------------------------------------- legacy v0 / v1

def kp_legacy(magic, codec, recs, start=0):
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for i, (k, v, ts) in enumerate(recs):
        b.append(start + i, timestamp=ts if magic else None, key=k, value=v)
    return bytes(b.build())


LEGACY_RECS = [(b"k%d" % i if i % 2 else None, b"value %d" % i if i % 5 else None,
                1_500_000_000_000 + i) for i in range(50)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_reads_kafka_python_legacy(magic, codec):
    if magic == 0 and codec == 3:
        pytest.importorskip("xxhash")   # kafka-python needs it for the old lz4 framing
    data = kp_legacy(magic, codec, LEGACY_RECS)
    msgs = list(iter_legacy(data))
    assert [(m.key, m.value) for m in msgs] == [(k, v) for k, v, _ in LEGACY_RECS]
    assert all(m.magic == magic for m in msgs)
    if magic == 1:
        assert [m.timestamp for m in msgs] == [ts for *_, ts in LEGACY_RECS]
    else:
        assert all(m.timestamp == -1 for m in msgs)
    # a producer's wrapper has offset 0 (v1: relative inner offsets taken as they are)
    assert [m.offset for m in msgs] == list(range(50))
    if codec:
        (wrapper,) = list(iter_legacy(data, deep=False))
        assert wrapper.compression == codec


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_kafka_python_reads_our_legacy(magic, codec):
    if magic == 0 and codec == 3:
        pytest.importorskip("xxhash")
    data = build_legacy([(k, v, (), ts) for k, v, ts in LEGACY_RECS], magic, codec,
                        base_offset=1000)
    batches = []
    mr = MemoryRecords(data)
    while mr.has_next():
        batches.append(mr.next_batch())
    got = [m for b in batches for m in b]
    assert [(m.offset, m.key, m.value) for m in got] == [
        (1000 + i, k, v) for i, (k, v, _) in enumerate(LEGACY_RECS)]
    if magic == 1:
        assert [m.timestamp for m in got] == [ts for *_, ts in LEGACY_RECS]


def test_legacy_v1_wrapper_offset_rule():
    recs = [(b"a", b"1", (), 10), (b"b", b"2", (), 20), (b"c", b"3", (), 30)]
    data = bytearray(build_legacy(recs, 1, 1))
    wrapper = next(iter_legacy(data, deep=False))
    assert wrapper.offset == 2 and wrapper.timestamp == 30
    # the broker rewrites the wrapper offset to the absolute last offset
    struct.pack_into(">q", data, 0, 502)
    assert [m.offset for m in iter_legacy(data)] == [500, 501, 502]
    # wrapper offset 0 (old librdkafka): inner relative offsets are taken as they are
    struct.pack_into(">q", data, 0, 0)
    assert [m.offset for m in iter_legacy(data)] == [0, 1, 2]


def test_legacy_v1_log_append_time_wrapper_applies_to_inner():
    data = build_legacy([(b"a", b"1", (), 10), (b"b", b"2", (), 20)], 1, 2,
                        timestamp_type=1, log_append_time=777)
    msgs = list(iter_legacy(data))
    assert [(m.timestamp, m.timestamp_type) for m in msgs] == [(777, 1), (777, 1)]


def test_legacy_crc_and_structure_checks():
    data = bytearray(build_legacy([(b"key", b"value", (), 5)], 1, 0))
    list(iter_legacy(data))
    for i in range(16, len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x10
        with pytest.raises((CorruptRecordError, InvalidRecordError)):
            list(iter_legacy(bad))
    # a partial tail ends iteration quietly, or raises when strict
    two = bytes(data) * 2
    assert len(list(iter_legacy(two[:-3]))) == 1
    with pytest.raises(CorruptRecordError):
        list(iter_legacy(two[:-3], strict=True))
    # nested compression is refused
    inner = build_legacy([(b"k", b"v", (), 1)], 1, 1)
    nested = bytearray()
    R._legacy_message(nested, 0, 1, 1, 1, None, R._compression.compress(1, inner))
    with pytest.raises(CorruptRecordError):
        list(iter_legacy(nested))


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("tstype", [0, 1])
def test_legacy_to_v2(magic, codec, tstype):
    data = build_legacy([(k, v, (), ts) for k, v, ts in LEGACY_RECS], magic, codec)
    buf = legacy_to_v2(data, timestamp_type=tstype, now_ms=1_999_999_999_999)
    h = header_of(buf)
    assert h.records_count == 50 and h.last_offset_delta == 49 and h.compression == codec
    assert h.producer_id == -1 and h.timestamp_type == tstype
    recs = list(iter_records(buf, h))
    assert [(r.key, r.value, r.headers) for r in recs] == [(k, v, []) for k, v, _ in LEGACY_RECS]
    assert [r.offset for r in recs] == list(range(50))
    if tstype == 1:
        assert h.max_timestamp == 1_999_999_999_999
        assert all(r.timestamp == 1_999_999_999_999 for r in recs)
    elif magic == 1:
        assert [r.timestamp for r in recs] == [ts for *_, ts in LEGACY_RECS]
    else:
        assert all(r.timestamp == -1 for r in recs) and h.max_timestamp == -1
    assert legacy_to_v2(data, timestamp_type=0, compression="zstd")[22] & 7 == 4
    # kafka-python reads the converted batch
    assert [m.value for m in MemoryRecords(bytes(buf)).next_batch()] == [
        v for _, v, _ in LEGACY_RECS]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_v2_to_legacy(magic, codec):
    if magic == 0 and codec == 3:
        pytest.importorskip("xxhash")
    blob = bytearray()
    blob += build_batch([(b"a", b"1", [("h", b"x")], 100), (b"b", b"2", (), 200)],
                        base_offset=10, compression=codec, producer_id=9, producer_epoch=0,
                        base_sequence=0, is_transactional=True)
    blob += build_control_batch("COMMIT", 9, 0, 1, base_offset=12, timestamp=300)
    blob += build_batch([Record(14, 400, b"c", None), Record(17, 500, None, b"4")],
                        base_offset=13, keep_offsets=True, last_offset_delta=5,
                        compression=codec)
    tail = build_batch([(b"cut", b"off")], base_offset=19)
    data = v2_to_legacy(bytes(blob) + bytes(tail[:-5]), magic)
    msgs = list(iter_legacy(data))
    assert [(m.offset, m.key, m.value, m.magic) for m in msgs] == [
        (10, b"a", b"1", magic), (11, b"b", b"2", magic), (14, b"c", None, magic),
        (17, None, b"4", magic)]
    assert [m.timestamp for m in msgs] == ([100, 200, 400, 500] if magic else [-1] * 4)
    # kafka-python agrees, including offsets after compaction gaps
    mr = MemoryRecords(data)
    got = []
    while mr.has_next():
        got += [(m.offset, m.key, m.value) for m in mr.next_batch()]
    assert got == [(m.offset, m.key, m.value) for m in msgs]
    assert [m.offset for m in iter_legacy(v2_to_legacy(blob, magic, first_offset=11))] == [
        11, 14, 17]


def test_v2_to_legacy_keeps_log_append_time():
    buf = build_batch([(b"a", b"1", (), 5)], compression=1)
    set_log_append_time(buf, read_header(buf), 4242)
    (m,) = list(iter_legacy(v2_to_legacy(buf, 1)))
    assert (m.timestamp, m.timestamp_type) == (4242, 1)


@FAST
@given(recs=st.lists(st.tuples(maybe_bytes, maybe_bytes, st.just(()), st.integers(0, 2**41)),
                     min_size=1, max_size=10),
       magic=st.sampled_from([0, 1]), codec=st.sampled_from([0, 1, 2, 4]))
def test_up_down_conversion_round_trip(recs, magic, codec):
    batch = build_batch(recs, base_offset=0, compression=codec)
    legacy = v2_to_legacy(batch, magic)
    back = legacy_to_v2(legacy, timestamp_type=0, now_ms=0)
    h = header_of(back)
    out = list(iter_records(back, h))
    assert [(r.offset, r.key, r.value) for r in out] == [(i, k, v) for i, (k, v, _, _) in
                                                         enumerate(recs)]
    assert [r.timestamp for r in out] == ([ts for *_, ts in recs] if magic else [-1] * len(recs))


@FAST
@given(recs=st.lists(record_st, min_size=1, max_size=15), source=st.sampled_from(CODECS),
       target=st.sampled_from(CODECS))
def test_recompressed_kafka_python_batches_read_the_same(recs, source, target):
    """compression.type: a batch kafka-python built in one codec, recompressed into another,
    reads back through kafka-python as the same records, with the producer fields kept."""
    buf = kp_batch(recs, source, producer=(77, 2, 10), transactional=True)
    out = R.recompress_batch(buf, header_of(buf), target)
    h = header_of(out)
    assert h.compression == target and h.records_count == len(recs)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (77, 2, 10, True)
    batch = MemoryRecords(bytes(out)).next_batch()
    assert batch.validate_crc() and batch.compression_type == target
    got = [(m.offset, m.key, m.value, [(k, v) for k, v in m.headers], m.timestamp) for m in batch]
    assert got == [(i, k, v, list(hs), ts) for i, (k, v, hs, ts) in enumerate(recs)]

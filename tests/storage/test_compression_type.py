"""compression.type on the leader's append (Kafka's LogValidator): a batch in another codec is
stored in the topic's, with its records, offsets, timestamps and producer fields unchanged."""
import pytest

from protocol import compression
from protocol.records import (CorruptRecordError, batch_payload, build_batch, iter_batches,
                              iter_records, read_header, validate_batch)
from storage.config import LogConfig
from storage.errors import RecordTooLargeError
from storage.log import Log
from tests.storage.helpers import make_batch, make_marker

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _log(tmp_path, clock, **kw):
    return Log(str(tmp_path / "t-0"), LogConfig(**kw), time_ms=clock)


def _records(n=50):
    return [(b"k%d" % i, b"value-%d " % i * 20, [("h", b"x%d" % i)], 1_000 + 3 * i) for i in range(n)]


def _stored(log):
    data = bytes(log.read_bytes(0, 10 ** 7))
    return data, list(iter_batches(data))


def _as_tuples(data, h):
    return [(r.offset, r.timestamp, bytes(r.key), bytes(r.value),
             [(k, bytes(v)) for k, v in r.headers]) for r in iter_records(data, h)]


@pytest.mark.parametrize("target", sorted(CODECS))
@pytest.mark.parametrize("source", [0, 1, 2, 3, 4])
def test_each_source_codec_is_stored_in_the_topic_codec(tmp_path, clock, source, target):
    log = _log(tmp_path, clock, compression_type=target)
    log.append(build_batch(_records(5), compression=0), 0)             # offsets 0-4 first
    sent = build_batch(_records(), compression=source, producer_id=7, producer_epoch=2,
                       base_sequence=0)
    expect = [(5 + i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(_records())]
    info = log.append(sent, 3)
    assert (info.first_offset, info.last_offset) == (5, 54)
    data, headers = _stored(log)
    h = headers[-1]
    validate_batch(data, h)                                           # CRC over the new bytes
    assert h.compression == CODECS[target]
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (5, 49, 50)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 0)
    assert (h.partition_leader_epoch, h.base_timestamp, h.max_timestamp) == (3, 1_000, 1_147)
    assert _as_tuples(data, h) == expect
    if source == CODECS[target]:
        assert data[h.pos + 21:h.pos + h.size] == bytes(sent[21:])    # written as it came


def test_producer_keeps_every_codec(tmp_path, clock):
    log = _log(tmp_path, clock)                                       # compression.type=producer
    for codec in (0, 1, 2, 3, 4):
        log.append(build_batch(_records(3), compression=codec), 0)
    assert [h.compression for h in _stored(log)[1]] == [0, 1, 2, 3, 4]


def test_records_bytes_move_unchanged(tmp_path, clock):
    """The records' encoding does not depend on the codec: an lz4 batch stored as zstd holds
    the very record bytes the producer compressed."""
    log = _log(tmp_path, clock, compression_type="zstd")
    sent = build_batch(_records(), compression=3)
    log.append(sent, 0)
    data, [h] = _stored(log)
    assert batch_payload(data, h) == batch_payload(sent, read_header(sent))


def test_an_uncompressed_control_batch_stays_uncompressed(tmp_path, clock):
    log = _log(tmp_path, clock, compression_type="gzip")
    log.append(build_batch([(b"k", b"v")], producer_id=4, producer_epoch=0, base_sequence=0,
                           is_transactional=True), 0)
    log.append(make_marker(4, 0, commit=True), 0, origin="coordinator")
    assert [(h.compression, h.is_control) for h in _stored(log)[1]] == [(1, False), (0, True)]


def test_a_batch_grown_past_max_message_bytes_is_refused(tmp_path, clock):
    log = _log(tmp_path, clock, compression_type="uncompressed", max_message_bytes=20_000)
    sent = build_batch([(None, b"\x00" * 1_000)] * 100, compression=4)    # 100 KB in a few bytes
    assert len(sent) < 20_000
    with pytest.raises(RecordTooLargeError):
        log.append(sent, 0)
    assert log.log_end_offset == 0 and log.size() == 0


def test_offset_deltas_that_do_not_run_from_0_are_rebuilt(tmp_path, clock):
    """A compressed batch whose records say offset deltas 10, 11, 12: Kafka rebuilds it with
    deltas 0, 1, 2 rather than move the records as they are."""
    from protocol.records import _encode_record
    shown = [(b"a", b"1", [], 5), (b"b", b"2", [], 6), (b"c", b"3", [], 7)]
    records_bytes = bytearray()
    for i, (k, v, h, ts) in enumerate(shown):
        _encode_record(records_bytes, 10 + i, ts - 5, k, v, h)
    sent = _with_payload(build_batch(shown), 1, records_bytes)
    log = _log(tmp_path, clock, compression_type="zstd")
    log.append(sent, 0)
    data, [h] = _stored(log)
    validate_batch(data, h)
    assert (h.compression, h.last_offset_delta, h.records_count) == (4, 2, 3)
    assert [(r.offset, bytes(r.key), r.timestamp) for r in iter_records(data, h)] == \
        [(0, b"a", 5), (1, b"b", 6), (2, b"c", 7)]


def _with_payload(batch, codec, records_bytes):
    """``batch``'s header over ``records_bytes`` compressed by ``codec``, with a right CRC."""
    from protocol.records import _I16, _I32, _U32, CRC_OFFSET, crc32c
    out = bytearray(batch[:61]) + compression.compress(codec, bytes(records_bytes))
    _I32.pack_into(out, 8, len(out) - 12)
    _I16.pack_into(out, 21, codec)
    _U32.pack_into(out, CRC_OFFSET, crc32c(bytes(out[21:])))
    return out


@pytest.mark.parametrize("damage", ["length", "extra", "short"])
def test_a_payload_that_does_not_hold_its_records_is_corrupt(tmp_path, clock, damage):
    good = build_batch(_records(3))
    records_bytes = bytearray(good[61:])
    if damage == "length":
        records_bytes[0] = 0x7F                      # the first record's length: -64
    elif damage == "extra":
        records_bytes += b"\x00\x00"                 # bytes after the last record
    else:
        records_bytes = records_bytes[:-5]           # the last record overruns the data
    bad = _with_payload(good, 2, records_bytes)
    validate_batch(bad, read_header(bad))            # the batch itself is whole
    log = _log(tmp_path, clock, compression_type="gzip")
    with pytest.raises(CorruptRecordError):
        log.append(bad, 0)
    assert log.log_end_offset == 0 and log.size() == 0


def test_a_payload_that_does_not_decompress_is_corrupt(tmp_path, clock):
    good = build_batch(_records(3), compression=1)
    bad = _with_payload(good, 1, b"")
    bad = bad[:61] + b"not gzip at all"
    from protocol.records import _I32, _U32, CRC_OFFSET, crc32c
    _I32.pack_into(bad, 8, len(bad) - 12)
    _U32.pack_into(bad, CRC_OFFSET, crc32c(bytes(bad[21:])))
    log = _log(tmp_path, clock, compression_type="zstd")
    with pytest.raises(CorruptRecordError):
        log.append(bad, 0)
    assert log.log_end_offset == 0


@pytest.mark.parametrize("codec, key, low, high", [("gzip", "compression_gzip_level", 1, 9),
                                                   ("zstd", "compression_zstd_level", -5, 19),
                                                   ("lz4", "compression_lz4_level", 1, 12)])
def test_the_level_is_the_topics(tmp_path, clock, codec, key, low, high):
    text = b"".join(b"%d the quick brown fox %d jumps over the lazy dog %d\n" % (i, i * 7, i % 13)
                    for i in range(3_000))
    sizes = []
    for level in (low, high):
        log = Log(str(tmp_path / f"{codec}{level}-0"), LogConfig(compression_type=codec, **{key: level}),
                  time_ms=clock)
        log.append(build_batch([(None, text)]), 0)
        data, [h] = _stored(log)
        assert bytes(next(iter_records(data, h)).value) == text
        sizes.append(h.size)
    assert sizes[1] < sizes[0]


def test_log_append_time_is_set_on_the_recompressed_batch(tmp_path, clock):
    log = _log(tmp_path, clock, compression_type="snappy", message_timestamp_type="LogAppendTime")
    log.append(build_batch(_records(4)), 0)
    data, [h] = _stored(log)
    validate_batch(data, h)
    assert (h.compression, h.timestamp_type, h.max_timestamp) == (2, 1, clock.now)
    assert [r.timestamp for r in iter_records(data, h)] == [clock.now] * 4


def test_a_retried_batch_is_a_duplicate_after_recompression(tmp_path, clock):
    log = _log(tmp_path, clock, compression_type="lz4")
    sent = build_batch(_records(10), producer_id=9, producer_epoch=0, base_sequence=0)
    first = log.append(bytearray(sent), 0)
    again = log.append(bytearray(sent), 0)
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (0, 9)
    assert log.log_end_offset == 10


def test_the_shared_helpers_batches_are_recompressed_too(tmp_path, clock):
    log = _log(tmp_path, clock, compression_type="gzip")
    log.append(make_batch([b"a", b"b"], keys=[b"1", b"2"]), 0)
    data, [h] = _stored(log)
    assert h.compression == 1
    assert [(bytes(r.key), bytes(r.value)) for r in iter_records(data, h)] == [(b"1", b"a"), (b"2", b"b")]


def test_the_worker_threads_checks_are_not_made_again(tmp_path, clock, monkeypatch):
    """``recompress`` (a produce runs it in a worker thread) makes the client and per-record
    checks and returns the config it made them under; ``append`` given that config skips them,
    unless the log's config was replaced meanwhile."""
    log = _log(tmp_path, clock, compression_type="zstd", cleanup_policy="compact")
    calls = []
    real_client, real_records = Log._check_client_batch, Log._validate_records
    monkeypatch.setattr(Log, "_check_client_batch", lambda self, b, h: calls.append("client") or real_client(self, b, h))
    monkeypatch.setattr(Log, "_validate_records", lambda self, b, h, n: calls.append("records") or real_records(self, b, h, n))

    buf, under = log.recompress(build_batch(_records(5), compression="gzip"))
    assert under is log.config and calls == ["client", "records"]
    calls.clear()
    log.append(buf, 0, checked_under=under)
    assert calls == []                                       # nothing checked twice
    data, [h] = _stored(log)
    assert h.compression == 4 and len(list(iter_records(data, h))) == 5

    buf, under = log.recompress(build_batch(_records(3), compression="gzip"))
    log.config = LogConfig(compression_type="zstd", cleanup_policy="compact")   # an AlterConfigs meanwhile
    calls.clear()
    log.append(buf, 0, checked_under=under)
    assert calls == ["client", "records"]                    # checked again under the new config

    # the worker thread refuses what append would: keyless records on a compacted topic
    from protocol.records import InvalidRecordError
    keyless = build_batch([(None, b"v", (), 1_000), (b"k", b"v", (), 1_000)], compression="gzip")
    with pytest.raises(InvalidRecordError) as e:
        log.recompress(keyless)
    assert [i for i, _ in e.value.record_errors] == [0]
    assert log.recompress(build_batch(_records(2)))[1] is log.config
    assert _log(tmp_path / "p", clock).recompress(build_batch(_records(2)))[1] is None   # producer: no codec


def test_the_timestamp_bounds_are_checked_again_at_the_append(tmp_path, clock):
    """They move with the clock: a record inside ``message.timestamp.before.max.ms`` when the
    worker thread checked it may be outside by the append."""
    from storage.errors import InvalidTimestampError
    log = _log(tmp_path, clock, compression_type="lz4", message_timestamp_before_max_ms=60_000)
    buf, under = log.recompress(build_batch([(b"k", b"v", (), clock.now - 59_000)], compression="gzip"))
    assert under is log.config
    clock.now += 2_000                 # the append comes 2 s later: now 61 s old
    with pytest.raises(InvalidTimestampError):
        log.append(buf, 0, checked_under=under)
    assert log.log_end_offset == 0

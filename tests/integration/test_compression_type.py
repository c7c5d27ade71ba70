"""The topic's (and the broker's) ``compression.type`` end to end, as Kafka applies it on the
leader: batches a producer sends in another codec are stored in the topic's, and consumers
read the same records back.  Also ``compression.<codec>.level``, a batch that grows past
``max.message.bytes`` when stored uncompressed, transactions over a recompressed topic, a
dynamic change of the broker default, and ``offsets.topic.compression.codec``."""
from __future__ import annotations

import glob
import os
import time

import pytest

from protocol.records import iter_batches

pytestmark = pytest.mark.integration

CODEC_IDS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
N = 2_000


def _records(n=N, tag=b""):
    return [(b"key-%d" % i, tag + (b"value %d of the compression test " % i) * 8,
             [("h", b"%d" % i), ("n", None)], 1_700_000_000_000 + 7 * i) for i in range(n)]


def _create(bootstrap, topic, configs, partitions=1):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(30)


def _produce(bootstrap, topic, records, **conf):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **conf})
    errors = []
    for k, v, h, ts in records:
        p.produce(topic, key=k, value=v, headers=h, timestamp=ts, partition=0,
                  on_delivery=lambda err, m: err is not None and errors.append(err))
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]


def _read_kp(bootstrap, topic, n):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    out = []
    deadline = time.monotonic() + 30
    while len(out) < n and time.monotonic() < deadline:
        for recs in c.poll(500, max_records=5000).values():
            out += [(r.offset, r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp) for r in recs]
    c.close()
    return out


def _read_ck(bootstrap, topic, n, **conf):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compression-test",
                  "enable.auto.commit": False, **conf})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + 30
    while len(out) < n and time.monotonic() < deadline:
        for m in c.consume(5000, timeout=0.5):
            if m.error() is None:
                out.append((m.offset(), m.key(), m.value(), list(m.headers() or []), m.timestamp()[1]))
    c.close()
    return out


def _read_aio(bootstrap, topic, n):
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await c.start()
        out = []
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            deadline = time.monotonic() + 30
            while len(out) < n and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=500, max_records=5000)).values():
                    out += [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in recs]
        finally:
            await c.stop()
        return out
    return asyncio.run(run())


def _expected(records, first=0):
    return [(first + i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(records)]


def _stored(broker, topic, partition=0):
    """(codec, is_control, records_count) of every batch in the partition's segment files."""
    out = []
    for path in sorted(glob.glob(os.path.join(broker.log_dir, f"{topic}-{partition}", "*.log"))):
        with open(path, "rb") as f:
            data = f.read()
        out += [(h.compression, h.is_control, h.records_count) for h in iter_batches(data)]
    return out


SENT_IN = {"uncompressed": "lz4", "gzip": "none", "snappy": "zstd", "lz4": "gzip", "zstd": "snappy"}


@pytest.mark.parametrize("target", sorted(CODEC_IDS))
def test_batches_are_stored_in_the_topic_codec(broker, target):
    """An idempotent librdkafka producer (its default) sends in one codec; the log holds the
    topic's; kafka-python, librdkafka and aiokafka read every record back as sent."""
    topic = f"ct-{target}"
    _create(broker.bootstrap, topic, {"compression.type": target})
    records = _records()
    _produce(broker.bootstrap, topic, records, **{"compression.type": SENT_IN[target], "acks": "all"})
    stored = _stored(broker, topic)
    assert stored and {c for c, _, _ in stored} == {CODEC_IDS[target]}, stored[:5]
    assert sum(n for _, _, n in stored) == N
    expect = _expected(records)
    assert _read_kp(broker.bootstrap, topic, N) == expect
    assert _read_ck(broker.bootstrap, topic, N) == expect
    assert _read_aio(broker.bootstrap, topic, N) == expect


def test_producer_keeps_what_the_producer_sent(broker):
    _create(broker.bootstrap, "ct-producer", {})
    for codec in ("gzip", "none", "zstd"):
        _produce(broker.bootstrap, "ct-producer", _records(200), **{"compression.type": codec})
    codecs = [c for c, _, _ in _stored(broker, "ct-producer")]
    assert codecs[0] == 1 and codecs[-1] == 4 and set(codecs) == {0, 1, 4}, codecs


def test_the_level_changes_what_is_stored(broker):
    text = [(b"k%d" % i, b"%d the quick brown fox jumps over the lazy dog %d\n" % (i, i % 17) * 20,
             [], 1_700_000_000_000) for i in range(500)]
    sizes = {}
    for level in ("1", "19"):
        topic = f"ct-zstd-{level}"
        _create(broker.bootstrap, topic, {"compression.type": "zstd", "compression.zstd.level": level})
        _produce(broker.bootstrap, topic, text, **{"compression.type": "none", "linger.ms": 200,
                                                   "batch.size": 4_000_000})
        assert {c for c, _, _ in _stored(broker, topic)} == {4}
        sizes[level] = sum(os.path.getsize(p) for p in glob.glob(os.path.join(broker.log_dir, f"{topic}-0", "*.log")))
        assert _read_kp(broker.bootstrap, topic, len(text)) == [(i, k, v, [], ts) for i, (k, v, _, ts) in enumerate(text)]
    assert sizes["19"] < sizes["1"], sizes


def test_a_batch_too_large_once_decompressed_is_refused(broker):
    """Kafka checks max.message.bytes again after recompression: a zstd batch of 200 KB of
    zeros is a few hundred bytes sent, and 200 KB stored uncompressed."""
    from confluent_kafka import KafkaError, Producer
    _create(broker.bootstrap, "ct-grows", {"compression.type": "uncompressed", "max.message.bytes": "50000"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd", "linger.ms": 0,
                  "enable.idempotence": False, "retries": 0})
    results = []
    for size in (200_000, 20_000):                    # one batch each
        p.produce("ct-grows", value=b"\x00" * size, on_delivery=lambda err, m: results.append(err))
        assert p.flush(30) == 0
    assert [e.code() if e else None for e in results] == [KafkaError.MSG_SIZE_TOO_LARGE, None]
    assert _stored(broker, "ct-grows") == [(0, False, 1)]


def test_transactions_over_a_recompressed_topic(broker):
    """Transactional batches are recompressed with their producer fields; the markers stay
    uncompressed; read_committed sees the committed transaction only."""
    from confluent_kafka import Producer
    _create(broker.bootstrap, "ct-txn", {"compression.type": "gzip"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ct-txn-1",
                  "compression.type": "lz4", "linger.ms": 5})
    p.init_transactions(30)
    committed, aborted = _records(300, b"c"), _records(300, b"a")
    for recs, commit in ((committed, True), (aborted, False), (committed, True)):
        p.begin_transaction()
        for k, v, h, ts in recs:
            p.produce("ct-txn", key=k, value=v, headers=h, timestamp=ts, partition=0)
        assert p.flush(30) == 0             # the aborted records reach the log too
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    got = _read_ck(broker.bootstrap, "ct-txn", 600, **{"isolation.level": "read_committed"})
    values = [(k, v, h, ts) for _, k, v, h, ts in got]
    assert values == [(k, v, h, ts) for k, v, h, ts in committed * 2]
    assert [o for o, *_ in got] == list(range(300)) + list(range(602, 902))
    stored = _stored(broker, "ct-txn")          # the last marker is in: the read got past it
    assert {(c, ctl) for c, ctl, _ in stored} == {(1, False), (0, True)}, stored
    assert [ctl for _, ctl, _ in stored].count(True) == 3


def test_the_broker_default_applies_and_changes_dynamically(broker_factory):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    b = broker_factory(overrides={"compression.type": "zstd"})
    _create(b.bootstrap, "ct-default", {})
    _produce(b.bootstrap, "ct-default", _records(100), **{"compression.type": "none"})
    assert {c for c, _, _ in _stored(b, "ct-default")} == {4}
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource("BROKER", "0", incremental_configs=[
        ConfigEntry("compression.type", "snappy", incremental_operation=AlterConfigOpType.SET)])
    for f in a.incremental_alter_configs([res]).values():
        f.result(30)
    sent = _records(100)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:       # the change reaches the topic's log shortly after
        more = _records(10, b"%d" % len(sent))
        _produce(b.bootstrap, "ct-default", more, **{"compression.type": "none"})
        sent += more
        if _stored(b, "ct-default")[-1][0] == 2:
            break
        time.sleep(0.2)
    codecs = [c for c, _, _ in _stored(b, "ct-default")]
    assert codecs[0] == 4 and codecs[-1] == 2, codecs
    assert _read_kp(b.bootstrap, "ct-default", len(sent)) == _expected(sent)


def test_offsets_topic_compression_codec(broker_factory):
    """The group coordinator writes __consumer_offsets in ``offsets.topic.compression.codec``;
    the commits are read back after a restart."""
    from confluent_kafka import Consumer, TopicPartition
    b = broker_factory(overrides={"offsets.topic.compression.codec": "4", "offsets.topic.num.partitions": "1",
                                  "offsets.topic.replication.factor": "1"})
    _create(b.bootstrap, "ct-offsets", {}, partitions=3)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ct-group", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("ct-offsets", p, 10 + p) for p in range(3)], asynchronous=False)
    c.close()
    stored = _stored(b, "__consumer_offsets")
    assert stored and {codec for codec, ctl, _ in stored if not ctl} == {4}, stored
    b.restart(clean=True)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ct-group", "enable.auto.commit": False})
    got = c.committed([TopicPartition("ct-offsets", p) for p in range(3)], timeout=30)
    c.close()
    assert [(tp.partition, tp.offset) for tp in got] == [(0, 10), (1, 11), (2, 12)]


def test_raw_answers_of_a_recompressing_topic(broker):
    """Kafka's answers around compression.type: a zstd topic is UNSUPPORTED_COMPRESSION_TYPE to
    Fetch below v10 (KafkaApis.maybeConvertFetchedData); a batch the broker would recompress gets
    the same client checks first (a compressed batch reporting no records is INVALID_RECORD, not
    CORRUPT_MESSAGE; a base offset other than 0 is INVALID_RECORD)."""
    from protocol.errors import ErrorCode as E
    from protocol.records import _I32, _U32, CRC_OFFSET, build_batch, crc32c
    from tests.support.rawkafka import RawConnection
    _create(broker.bootstrap, "ct-raw", {"compression.type": "zstd"})
    with RawConnection(broker.host, broker.port) as c:
        c.metadata(["ct-raw"], auto_create=False)
        assert c.produce("ct-raw", 0, build_batch([(b"k", b"v")], compression=1), acks=1).error_code == 0
        for version in (4, 9):
            assert c.fetch("ct-raw", 0, 0, version=version).error_code == E.UNSUPPORTED_COMPRESSION_TYPE
        got = c.fetch("ct-raw", 0, 0, version=10)
        assert got.error_code == 0 and [h.compression for h in iter_batches(bytes(got.records))] == [4]
        empty = build_batch([(b"k", b"v")], compression=1)
        _I32.pack_into(empty, 57, 0)                                  # records count 0
        _U32.pack_into(empty, CRC_OFFSET, crc32c(bytes(empty[21:])))
        assert c.produce("ct-raw", 0, empty, acks=1).error_code == E.INVALID_RECORD
        moved = build_batch([(b"k", b"v")], compression=1, base_offset=5)
        assert c.produce("ct-raw", 0, moved, acks=1).error_code == E.INVALID_RECORD
        # a compacted topic that recompresses: the per-record checks run beside the compression
        # (in its worker thread) and name the refused records, as the append would
        _create(broker.bootstrap, "ct-raw-compact", {"compression.type": "lz4", "cleanup.policy": "compact"})
        c.metadata(["ct-raw-compact"], auto_create=False)
        keyless = build_batch([(b"k", b"1"), (None, b"2"), (b"k", b"3"), (None, b"4")], compression=1)
        r = c.produce("ct-raw-compact", 0, keyless, acks=1, version=8)
        assert r.error_code == E.INVALID_RECORD
        assert [e.batch_index for e in r.record_errors] == [1, 3]
        assert "without key" in r.record_errors[0].batch_index_error_message
        r = c.produce("ct-raw-compact", 0, build_batch([(b"k", b"ok")], compression=1), acks=1)
        assert (r.error_code, r.base_offset) == (0, 0)
        got = c.fetch("ct-raw-compact", 0, 0, version=12)
        assert [h.compression for h in iter_batches(bytes(got.records))] == [3]

"""One real broker process driven by unmodified clients: kafka-python, aiokafka,
confluent-kafka and Debian's kcat.

For every client and every compression codec (none, gzip, snappy, lz4, zstd) the test produces
10,000 keyed records with headers and explicit timestamps (kcat: headers, broker-independent
client timestamps) to a 3-partition topic that Metadata auto-creates, reads the whole topic back
with the same client by assignment from offset 0, and checks:

* byte-exact key, value, headers and timestamp of every record, offsets contiguous from 0,
  every record exactly once, in send order per partition;
* each record was read back from the partition it was acknowledged on, the same key always went
  to the same partition, and that partition is the one the client's partitioner computes
  (murmur2 for kafka-python/aiokafka, CRC32 "consistent_random" for librdkafka clients);
* ListOffsets through the client: earliest = 0, latest = log end offset, by time = the first
  offset whose timestamp is at or after the target (timestamps are deliberately not monotonic),
  and "none"/-1 for a time past every record.

Tiers: the default tier runs each client with ONE acks level (kafka-python: all — its default,
idempotent producer; aiokafka: 0; confluent-kafka: 1; kcat: all) for all five codecs; the full
client × codec × acks matrix (acks 0, 1, all) runs under ``-m slow``.  The idempotent producers
of kafka-python (default settings) and confluent-kafka (enable.idempotence=true) have their own
tests that also check the batches on disk carry a producer id.
"""
from __future__ import annotations

import asyncio
import os
import random
import subprocess
import time
import zlib

import pytest

from tests.support import BrokerProcess
from tests.support.rawkafka import RawConnection
from tests.support.broker import running

N = 10_000
PARTITIONS = 3
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CLIENTS = ["kafka-python", "aiokafka", "confluent", "kcat"]
DEFAULT_ACKS = {"kafka-python": "all", "aiokafka": "0", "confluent": "1", "kcat": "all"}
READ_TIMEOUT = 90


def _matrix():
    out = []
    for client in CLIENTS:
        for codec in CODECS:
            for acks in ("0", "1", "all"):
                marks = [] if acks == DEFAULT_ACKS[client] else [pytest.mark.slow]
                out.append(pytest.param(client, codec, acks, marks=marks,
                                        id=f"{client}-{codec}-acks{acks}"))
    return out


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("single-broker"), name="broker",
                               props={"num.partitions": PARTITIONS})) as b:
        yield b


# -- data -----------------------------------------------------------------------------------

def make_records(n: int, seed: int, text: bool = False):
    """(key, value, headers, timestamp) tuples.  Keys repeat (997 distinct) so the partitioner
    is checked for consistency; timestamps wander ±40 ms around a rising line (not monotonic);
    every 500th value is null (not for kcat)."""
    rnd = random.Random(seed)
    base = int(time.time() * 1000) - 3_600_000
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!"
    out = []
    for i in range(n):
        key = f"key-{seed}-{i % 997}".encode()
        size = rnd.choice((0, 1, 7, 50, 200, 1000))
        if text:
            value = bytes(rnd.choice(alphabet) for _ in range(max(size, 1)))
        elif i % 500 == 499:
            value = None
        else:
            value = rnd.randbytes(size) if i % 3 else bytes(alphabet[i % 60:i % 60 + 1]) * size
        headers = [] if i % 4 == 0 else [("seq", str(i).encode())]
        if i % 4 == 3 and not text:
            headers.append(("bin", rnd.randbytes(rnd.randrange(0, 20))))
        ts = base + i * 10 + rnd.randrange(-40, 41)
        out.append((key, value, headers, ts))
    return out


def murmur2_partition(key: bytes, n: int) -> int:
    from kafka.partitioner.default import murmur2
    return (murmur2(key) & 0x7FFFFFFF) % n


def crc32_partition(key: bytes, n: int) -> int:
    return zlib.crc32(key) % n


# -- checks ---------------------------------------------------------------------------------

def verify(sent, acked, read, *, partitioner=None, check_ts=True, acked_offsets=True):
    """sent: records in send order; acked[i] = (partition, offset or -1) for sent[i];
    read: partition -> [(offset, key, value, headers, timestamp)] in log order."""
    assert len(acked) == len(sent)
    total = sum(len(v) for v in read.values())
    assert total == len(sent), f"read {total} records, sent {len(sent)}"
    by_part = {}
    key_part = {}
    for rec, (p, off) in zip(sent, acked):
        by_part.setdefault(p, []).append((rec, off))
        assert key_part.setdefault(rec[0], p) == p, f"key {rec[0]!r} went to two partitions"
        if partitioner is not None:
            assert p == partitioner(rec[0], PARTITIONS), f"key {rec[0]!r}: partition {p}"
    for p, got in read.items():
        assert [r[0] for r in got] == list(range(len(got))), f"partition {p}: offsets not 0..n-1"
        want = by_part.get(p, [])
        assert len(got) == len(want), f"partition {p}: read {len(got)}, acked {len(want)}"
        for (rec, off), (roff, k, v, h, ts) in zip(want, got):
            if acked_offsets:
                assert off == roff, f"partition {p}: acked at {off}, read at {roff}"
            assert k == rec[0] and v == rec[1], f"partition {p} offset {roff}: key/value differ"
            assert list(h) == list(rec[2]), f"partition {p} offset {roff}: headers differ"
            if check_ts:
                assert ts == rec[3], f"partition {p} offset {roff}: timestamp {ts} != {rec[3]}"


def expected_by_time(read, partition, target):
    """Kafka's answer: the first offset whose timestamp is >= target, else None."""
    for off, _k, _v, _h, ts in read[partition]:
        if ts >= target:
            return off
    return None


def time_targets(read, rnd):
    """(partition, target) pairs: before everything, exact stamps, between stamps, past the end."""
    out = []
    for p, recs in read.items():
        if not recs:
            continue
        stamps = [r[4] for r in recs]
        out.append((p, min(stamps) - 1000))
        for _ in range(3):
            t = rnd.choice(stamps)
            out += [(p, t), (p, t + 1)]
        out.append((p, max(stamps) + 1))
    return out


# -- kafka-python ---------------------------------------------------------------------------

def kp_produce(bootstrap, topic, records, codec, acks, **extra):
    from kafka import KafkaProducer
    kw = dict(bootstrap_servers=bootstrap, acks=-1 if acks == "all" else int(acks),
              compression_type=None if codec == "none" else codec, linger_ms=5)
    if acks != "all":
        kw["enable_idempotence"] = False
    kw.update(extra)
    p = KafkaProducer(**kw)
    try:
        futs = [p.send(topic, key=k, value=v, headers=h, timestamp_ms=ts)
                for k, v, h, ts in records]
        p.flush(60)
        md = [f.get(timeout=60) for f in futs]
    finally:
        p.close(10)
    return [(m.partition, m.offset) for m in md]


def kp_read(bootstrap, topic, expected):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      max_partition_fetch_bytes=1 << 20)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning()
        out = {p: [] for p in range(PARTITIONS)}
        n = 0
        deadline = time.monotonic() + READ_TIMEOUT
        while n < expected and time.monotonic() < deadline:
            for tp, recs in c.poll(500, max_records=5000).items():
                for r in recs:
                    out[tp.partition].append((r.offset, r.key, r.value, list(r.headers),
                                              r.timestamp))
                    n += 1
        return out, c, tps
    except BaseException:
        c.close()
        raise


def kp_check_offsets(consumer, tps, read, rnd):
    from kafka import TopicPartition
    topic = tps[0].topic
    assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
    assert consumer.end_offsets(tps) == {tp: len(read[tp.partition]) for tp in tps}
    for p, target in time_targets(read, rnd):
        tp = TopicPartition(topic, p)
        got = consumer.offsets_for_times({tp: target})[tp]
        want = expected_by_time(read, p, target)
        assert (got.offset if got is not None else None) == want, (p, target)


# -- aiokafka -------------------------------------------------------------------------------

async def _aio_produce(bootstrap, topic, records, codec, acks):
    from aiokafka import AIOKafkaProducer
    p = AIOKafkaProducer(bootstrap_servers=bootstrap,
                         compression_type=None if codec == "none" else codec,
                         acks=-1 if acks == "all" else int(acks), linger_ms=5)
    await p.start()
    try:
        futs = []
        for k, v, h, ts in records:
            futs.append(await p.send(topic, key=k, value=v, headers=h, timestamp_ms=ts))
        md = await asyncio.gather(*futs)
    finally:
        await p.stop()
    if acks == "0":
        # aiokafka resolves acks=0 sends with None: take the partition its partitioner chose
        # (the Java/murmur2 rule; checked against the acknowledged partitions with acks >= 1)
        return [(murmur2_partition(k, PARTITIONS), -1) for k, *_ in records]
    return [(m.partition, m.offset) for m in md]


async def _aio_read_and_offsets(bootstrap, topic, expected, rnd):
    from aiokafka import AIOKafkaConsumer, TopicPartition
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        await c.seek_to_beginning()
        out = {p: [] for p in range(PARTITIONS)}
        n = 0
        deadline = time.monotonic() + READ_TIMEOUT
        while n < expected and time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=500, max_records=5000)
            for tp, recs in batch.items():
                for r in recs:
                    out[tp.partition].append((r.offset, r.key, r.value, list(r.headers),
                                              r.timestamp))
                    n += 1
    finally:
        await c.stop()
    if n != expected:
        return out, None
    # a fresh consumer: an assigned one keeps a long-poll fetch parked on the connection, and
    # requests on one connection are answered in order (as Kafka does)
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await c.start()
    try:
        checks = {"begin": await c.beginning_offsets(tps), "end": await c.end_offsets(tps),
                  "times": []}
        for p, target in time_targets(out, rnd):
            tp = TopicPartition(topic, p)
            got = (await c.offsets_for_times({tp: target}))[tp]
            checks["times"].append((p, target, got.offset if got is not None else None))
        return out, checks
    finally:
        await c.stop()


# -- confluent-kafka ------------------------------------------------------------------------

def ck_produce(bootstrap, topic, records, codec, acks, **extra):
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": bootstrap, "compression.type": codec, "acks": acks,
            "linger.ms": 5, "enable.idempotence": False}
    conf.update(extra)
    p = Producer(conf)
    acked = [None] * len(records)
    errors = []

    def cb_for(i):
        def cb(err, msg):
            if err is not None:
                errors.append(err)
            acked[i] = (msg.partition(), msg.offset() if acks != "0" else -1)
        return cb

    for i, (k, v, h, ts) in enumerate(records):
        while True:
            try:
                p.produce(topic, key=k, value=v, headers=h, timestamp=ts, on_delivery=cb_for(i))
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(60)
    assert left == 0 and not errors, (left, errors[:3])
    return acked


def ck_consumer(bootstrap):
    from confluent_kafka import Consumer
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "odradek-test-assign",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})


def ck_read(bootstrap, topic, expected):
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    c = ck_consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out = {p: [] for p in range(PARTITIONS)}
        n = 0
        deadline = time.monotonic() + READ_TIMEOUT
        while n < expected and time.monotonic() < deadline:
            for m in c.consume(num_messages=5000, timeout=0.5):
                if m.error():
                    continue
                out[m.partition()].append((m.offset(), m.key(), m.value(),
                                           list(m.headers() or []), m.timestamp()[1]))
                n += 1
        return out, c
    except BaseException:
        c.close()
        raise


def ck_check_offsets(bootstrap, topic, read, rnd):
    """With a fresh consumer: an assigned one keeps long-poll fetches parked on the same
    connection, and requests on one connection are answered in order (as Kafka does)."""
    c = ck_consumer(bootstrap)
    try:
        _ck_check_offsets(c, topic, read, rnd)
    finally:
        c.close()


def _ck_check_offsets(c, topic, read, rnd):
    from confluent_kafka import TopicPartition
    for p in range(PARTITIONS):
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
        assert (lo, hi) == (0, len(read[p]))
    for p, target in time_targets(read, rnd):
        [r] = c.offsets_for_times([TopicPartition(topic, p, target)], timeout=10)
        want = expected_by_time(read, p, target)
        assert r.offset == (-1 if want is None else want), (p, target, r.offset, want)


# -- kcat -----------------------------------------------------------------------------------

KCAT_HEADERS = [("client", b"kcat"), ("trace", b"x-1")]


def kcat(*args, input=None, timeout=120):
    r = subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=timeout)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout


def kcat_produce(bootstrap, topic, records, codec, acks):
    data = b"".join(k + b":" + v + b"\n" for k, v, _h, _ts in records)
    args = ["-b", bootstrap, "-P", "-t", topic, "-K:", "-X", f"acks={acks}"]
    if codec != "none":
        args += ["-z", codec]
    for name, val in KCAT_HEADERS:
        args += ["-H", f"{name}={val.decode()}"]
    kcat(*args, input=data)


def kcat_read(bootstrap, topic):
    out = kcat("-b", bootstrap, "-C", "-t", topic, "-e", "-o", "beginning", "-q",
               "-f", r"%p\t%o\t%T\t%k\t%s\t%h\n")
    read = {p: [] for p in range(PARTITIONS)}
    for line in out.splitlines():
        p, o, ts, k, v, h = line.split(b"\t")
        headers = [(a.decode(), b) for a, _, b in (x.partition(b"=") for x in h.split(b","))] \
            if h else []
        read[int(p)].append((int(o), k, v, headers, int(ts)))
    for recs in read.values():
        recs.sort()
    return read


def kcat_check_offsets(bootstrap, topic, read, rnd):
    queries = time_targets(read, rnd)
    queries += [(p, -2) for p in range(PARTITIONS)] + [(p, -1) for p in range(PARTITIONS)]
    # one query per partition per kcat run (librdkafka merges repeats of a partition)
    rounds = []
    for p, t in queries:
        for r in rounds:
            if p not in r:
                r[p] = t
                break
        else:
            rounds.append({p: t})
    for r in rounds:
        args = ["-b", bootstrap, "-Q"]
        for p, t in r.items():
            args += ["-t", f"{topic}:{p}:{t}"]
        for line in kcat(*args).decode().splitlines():
            _name, part, _, off = line.split()      # "<topic> [<p>] offset <n>"
            p, off = int(part.strip("[]")), int(off)
            t = r[p]
            if t == -2:
                assert off == 0
            elif t == -1:
                assert off == len(read[p])
            else:
                want = expected_by_time(read, p, t)
                assert off == (-1 if want is None else want), (p, t, off, want)


# -- the matrix -----------------------------------------------------------------------------

@pytest.mark.parametrize("client,codec,acks", _matrix())
def test_produce_and_read_back(kafka, client, codec, acks):
    bootstrap = kafka.bootstrap
    topic = f"{client}-{codec}-acks{acks}".replace("_", "-")
    seed = zlib.crc32(topic.encode())
    rnd = random.Random(seed)
    records = make_records(N, seed, text=client == "kcat")
    if client == "kafka-python":
        acked = kp_produce(bootstrap, topic, records, codec, acks)
        read, consumer, tps = kp_read(bootstrap, topic, N)
        try:
            verify(records, acked, read, partitioner=murmur2_partition,
                   acked_offsets=acks != "0")
            kp_check_offsets(consumer, tps, read, rnd)
        finally:
            consumer.close()
    elif client == "aiokafka":
        acked = asyncio.run(_aio_produce(bootstrap, topic, records, codec, acks))
        read, checks = asyncio.run(_aio_read_and_offsets(bootstrap, topic, N, rnd))
        verify(records, acked, read, partitioner=murmur2_partition, acked_offsets=acks != "0")
        assert all(v == 0 for v in checks["begin"].values())
        assert {tp.partition: v for tp, v in checks["end"].items()} == \
            {p: len(r) for p, r in read.items()}
        for p, target, got in checks["times"]:
            assert got == expected_by_time(read, p, target), (p, target)
    elif client == "confluent":
        acked = ck_produce(bootstrap, topic, records, codec, acks)
        read, consumer = ck_read(bootstrap, topic, N)
        consumer.close()
        verify(records, acked, read, partitioner=crc32_partition, acked_offsets=acks != "0")
        ck_check_offsets(bootstrap, topic, read, rnd)
    else:
        started = int(time.time() * 1000)
        kcat_produce(bootstrap, topic, records, codec, acks)
        finished = int(time.time() * 1000)
        read = wait_read(lambda: kcat_read(bootstrap, topic), N)
        sent = [(k, v, KCAT_HEADERS, None) for k, v, _h, _ts in records]
        acked = [(crc32_partition(k, PARTITIONS), -1) for k, *_ in records]
        verify(sent, acked, read, check_ts=False, acked_offsets=False)
        for recs in read.values():
            assert all(started - 1000 <= r[4] <= finished + 1000 for r in recs)
        kcat_check_offsets(bootstrap, topic, read, rnd)


def wait_read(fn, expected, timeout=30):
    """acks=0 produces may still be in flight when the producer exits: read until all arrived."""
    deadline = time.monotonic() + timeout
    while True:
        read = fn()
        if sum(len(v) for v in read.values()) >= expected or time.monotonic() > deadline:
            return read
        time.sleep(0.2)


# -- idempotent producers -------------------------------------------------------------------

def producer_ids_on_disk(log_dir, topic):
    """{(partition, producer id)} over every batch stored for ``topic``."""
    from protocol.records import iter_batches
    out = set()
    for p in range(PARTITIONS):
        d = os.path.join(log_dir, f"{topic}-{p}")
        for name in sorted(os.listdir(d)):
            if name.endswith(".log"):
                with open(os.path.join(d, name), "rb") as f:
                    data = f.read()
                seqs = {}
                for h in iter_batches(data):
                    out.add((p, h.producer_id))
                    if h.producer_id >= 0:
                        # sequences of one producer on one partition are gap-free
                        nxt = seqs.get(h.producer_id, 0)
                        assert h.base_sequence == nxt, (p, h.base_sequence, nxt)
                        seqs[h.producer_id] = h.base_sequence + h.records_count
    return out


def test_kafka_python_idempotent_producer_with_defaults(kafka):
    from kafka import KafkaProducer
    assert KafkaProducer.DEFAULT_CONFIG["enable_idempotence"] is True
    topic = "idem-kafka-python"
    records = make_records(3000, 7)
    from kafka import KafkaProducer as P
    p = P(bootstrap_servers=kafka.bootstrap)          # library defaults: idempotent, acks=all
    try:
        futs = [p.send(topic, key=k, value=v, headers=h, timestamp_ms=ts)
                for k, v, h, ts in records]
        p.flush(60)
        acked = [(m.partition, m.offset) for m in (f.get(60) for f in futs)]
    finally:
        p.close(10)
    read, consumer, _ = kp_read(kafka.bootstrap, topic, len(records))
    consumer.close()
    verify(records, acked, read, partitioner=murmur2_partition)
    pids = producer_ids_on_disk(str(kafka.log_dir), topic)
    assert pids and all(pid >= 0 for _, pid in pids), pids
    assert len({pid for _, pid in pids}) == 1


def test_confluent_idempotent_producer(kafka):
    topic = "idem-confluent"
    records = make_records(3000, 8)
    acked = ck_produce(kafka.bootstrap, topic, records, "lz4", "all", **{
        "enable.idempotence": True, "max.in.flight.requests.per.connection": 5})
    read, consumer = ck_read(kafka.bootstrap, topic, len(records))
    consumer.close()
    verify(records, acked, read, partitioner=crc32_partition)
    pids = producer_ids_on_disk(str(kafka.log_dir), topic)
    assert pids and all(pid >= 0 for _, pid in pids), pids


def test_acks_all_on_a_topic_asking_more_in_sync_replicas_than_it_has(kafka):
    """Kafka's effectiveMinIsr (3.7+, KAFKA-15583): ``min.insync.replicas`` counts at most the
    partition's replicas, so a single broker that took a cluster's ``min.insync.replicas=2``
    (here as the topic's) takes acks=all writes from librdkafka and kafka-python alike."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaProducer
    topic = "min-isr-2"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"min.insync.replicas": "2"})])[topic].result(30)
    records = make_records(200, 21)
    acked = ck_produce(kafka.bootstrap, topic, records, "none", "all")
    assert len(acked) == 200
    kp = KafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all")
    md = kp.send(topic, key=b"k", value=b"kafka-python", partition=0).get(timeout=30)
    kp.close()
    assert md.offset == 200


def test_transactional_id_goes_to_the_coordinator(kafka):
    """InitProducerId with a transactional id is answered by the transaction coordinator (found
    with FindCoordinator key type 1; docs/transactions.md): each call bumps the epoch."""
    from protocol.messages import FindCoordinatorRequest, InitProducerIdRequest
    with RawConnection(kafka.host, kafka.port) as c:
        assert c.request(10, 1, FindCoordinatorRequest(key="tx-1", key_type=1)).error_code == 0
        epochs = []
        for v in (0, 4):
            r = c.request(22, v, InitProducerIdRequest(
                transactional_id="tx-1", transaction_timeout_ms=60000, producer_id=-1,
                producer_epoch=-1))
            assert r.error_code == 0 and r.producer_id >= 0
            epochs.append(r.producer_epoch)
            r = c.request(22, v, InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                producer_epoch=-1))
            assert r.error_code == 0 and r.producer_id >= 0
        assert epochs == [0, 1]


# -- ListOffsets details over the wire ------------------------------------------------------

def test_list_offsets_answers_like_kafka(kafka):
    from protocol.records import build_batch
    topic = "list-offsets-raw"
    with RawConnection(kafka.host, kafka.port) as c:
        assert c.metadata([topic]).topics[0].error_code == 0
        stamps = [5000, 1000, 9000, 3000, 9000, 7000]
        base = int(time.time() * 1000) - 100_000
        for i in range(0, len(stamps), 2):
            batch = build_batch([(b"k", b"v%d" % j, (), base + stamps[j]) for j in (i, i + 1)])
            assert c.produce(topic, 0, batch).error_code == 0
        leo = len(stamps)

        def ask(ts, version=5):
            r = c.list_offsets(topic, 0, ts, version)
            assert r.error_code == 0
            return r.offset, r.timestamp

        assert ask(-2) == (0, -1)
        assert ask(-1) == (leo, -1)
        assert ask(base + 5000) == (0, base + 5000)
        assert ask(base + 5001) == (2, base + 9000)      # first offset at or after the time
        assert ask(base + 999) == (0, base + 5000)
        assert ask(base + 9000) == (2, base + 9000)
        assert ask(base + 9001) == (-1, -1)              # past every record
        assert ask(-3, 7) == (2, base + 9000)            # max timestamp: first of the maxima
        assert c.list_offsets(topic, 0, -1, 0).old_style_offsets[0] == leo
        assert c.list_offsets(topic, 9, -1).error_code == 3     # UNKNOWN_TOPIC_OR_PARTITION


def test_socket_buffer_settings_reach_accepted_sockets(tmp_path):
    """socket.send.buffer.bytes / socket.receive.buffer.bytes are set on each accepted socket
    (Linux doubles the value; `ss -m` shows it as tb / rb), and -1 leaves the OS default."""
    def buffers(b):
        out = subprocess.run(["ss", "-tmnH", "state", "established", f"( sport = :{b.port} )"],
                             capture_output=True, text=True, check=True).stdout
        tb = int(out.split(",tb")[1].split(",")[0])
        rb = int(out.split("(r0,rb")[1].split(",")[0])
        return tb, rb

    b = BrokerProcess(tmp_path / "set", name="broker",
                      props={"socket.send.buffer.bytes": 131072, "socket.receive.buffer.bytes": 32768})
    b.start()
    try:
        with RawConnection(b.host, b.port) as c:
            c.metadata(None)
            assert buffers(b) == (2 * 131072, 2 * 32768)
    finally:
        b.stop()
    d = BrokerProcess(tmp_path / "os", name="broker",
                      props={"socket.send.buffer.bytes": -1, "socket.receive.buffer.bytes": -1})
    d.start()
    try:
        with RawConnection(d.host, d.port) as c:
            c.metadata(None)
            tb, rb = buffers(d)
            assert tb != 2 * 131072 and rb != 2 * 32768 and tb > 0 and rb > 0
    finally:
        d.stop()

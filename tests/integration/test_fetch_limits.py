"""Fetch size limits against a real broker process: what records a limited fetch carries.

* KIP-74 (Fetch v3+): the first partition's first batch comes whole, however small the limits;
* a later partition whose first batch does not fit in what is left of the request's
  ``max_bytes`` gets no records — Kafka's ``firstEntryIncomplete`` rule.  A partial batch there
  made kafka-python and the Java consumer stop ("Failed to make progress reading messages");
* a region cut by a limit after its first batch ends where the limit does, the last batch
  partial, as Kafka's (clients drop it);
* real clients reading with limits smaller than the batches still get every record.
"""
from __future__ import annotations

import os

import pytest

from protocol.records import build_batch, iter_batches
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.rawkafka import RawConnection

BATCH_VALUE = 10_000
TOPIC = "limits"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("fetch-limits"), name="broker",
                               props={"num.partitions": 2,
                                      "log.retention.ms": -1})) as b:    # fixed 2023 timestamps
        with RawConnection(b.host, b.port) as c:
            assert c.metadata([TOPIC]).topics[0].error_code == 0
            for partition, n in ((0, 3), (1, 2)):
                for i in range(n):
                    r = c.produce(TOPIC, partition, build_batch(
                        [(b"k%d" % i, os.urandom(BATCH_VALUE), [], 1700000000000 + i)]))
                    assert r.error_code == 0
        yield b


def batch_size(kafka) -> int:
    with RawConnection(kafka.host, kafka.port) as c:
        data = bytes(c.fetch(TOPIC, 0, 0, version=12, max_bytes=1).records)
    (h,) = iter_batches(data)
    return h.size


def fetch(kafka, *, max_bytes, partitions, version=12):
    """{partition: records bytes} of one Fetch for ``partitions`` = [(partition, max bytes)]."""
    with RawConnection(kafka.host, kafka.port) as c:
        answers = c.fetch_partitions(TOPIC, [(p, 0, pmax) for p, pmax in partitions],
                                     version=version, max_bytes=max_bytes)
    out = {}
    for pd in answers:
        assert pd.error_code == 0, pd.error_code
        out[pd.partition_index] = bytes(pd.records)
    return out


@pytest.mark.parametrize("version", [4, 12])
def test_a_cut_region_keeps_its_partial_last_batch_as_kafka_does(kafka, version):
    size = batch_size(kafka)
    got = fetch(kafka, max_bytes=50 << 20, partitions=[(0, 2 * size + size // 2)], version=version)
    assert len(got[0]) == 2 * size + size // 2
    assert [h.base_offset for h in iter_batches(got[0])] == [0, 1]     # the third is partial


def test_kip74_first_batch_whole_and_a_later_partition_that_does_not_fit_gets_nothing(kafka):
    size = batch_size(kafka)
    # partition 0 takes one batch; what is left of the request's budget is half a batch
    got = fetch(kafka, max_bytes=size + size // 2, partitions=[(0, size), (1, 1 << 20)])
    assert len(got[0]) == size
    assert got[1] == b""
    # partition 0 takes the whole budget (its second batch cut): nothing is left for partition 1
    got = fetch(kafka, max_bytes=size + size // 2, partitions=[(0, 1 << 20), (1, 1 << 20)])
    assert len(got[0]) == size + size // 2 and got[1] == b""
    # limits below one batch: partition 0 still gets its first batch whole (KIP-74)
    got = fetch(kafka, max_bytes=1, partitions=[(0, 1), (1, 1 << 20)])
    assert len(got[0]) == size and got[1] == b""
    # partition 1's first batch fits in what partition 0 leaves: its second is cut, as Kafka's
    got = fetch(kafka, max_bytes=4 * size + size // 2, partitions=[(0, 1 << 20), (1, 1 << 20)])
    assert len(got[0]) == 3 * size and len(got[1]) == size + size // 2
    assert [h.base_offset for h in iter_batches(got[1])] == [0]


def test_clients_with_limits_below_a_batch_read_everything(kafka):
    from confluent_kafka import Consumer, TopicPartition as CTP
    from kafka import KafkaConsumer, TopicPartition

    tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
    kc = KafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False,
                       fetch_max_bytes=BATCH_VALUE + BATCH_VALUE // 2,
                       max_partition_fetch_bytes=BATCH_VALUE // 2)
    kc.assign(tps)
    kc.seek_to_beginning()
    seen = set()
    for _ in range(50):
        for recs in kc.poll(timeout_ms=500).values():
            seen.update((m.partition, m.offset) for m in recs)
        if len(seen) == 5:
            break
    kc.close()
    assert seen == {(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)}

    cc = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "limits",
                   "enable.auto.commit": False, "fetch.max.bytes": BATCH_VALUE + BATCH_VALUE // 2,
                   "max.partition.fetch.bytes": BATCH_VALUE // 2,
                   "message.max.bytes": 1000, "receive.message.max.bytes": 1 << 20})
    cc.assign([CTP(TOPIC, 0, 0), CTP(TOPIC, 1, 0)])
    seen = set()
    for _ in range(50):
        for m in cc.consume(10, 0.5):
            assert m.error() is None, m.error()
            seen.add((m.partition(), m.offset()))
        if len(seen) == 5:
            break
    cc.close()
    assert seen == {(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)}


def test_an_offset_outside_the_log_is_answered_without_bounds_as_kafka(kafka):
    """OFFSET_OUT_OF_RANGE carries no high watermark, last stable offset or log start offset
    (-1 each), as Kafka's error answer; the partition beside it is answered as usual."""
    with RawConnection(kafka.host, kafka.port) as c:
        far, ok = c.fetch_partitions(TOPIC, [(0, 99, 1 << 20), (1, 0, 1 << 20)], version=12)
    assert (far.error_code, far.high_watermark, far.last_stable_offset, far.log_start_offset) == (1, -1, -1, -1)
    assert len(bytes(far.records)) == 0
    assert (ok.error_code, ok.high_watermark, ok.log_start_offset) == (0, 2, 0) and len(bytes(ok.records)) > 0

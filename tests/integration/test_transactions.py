"""Transactions (exactly-once) against a real broker process, with confluent-kafka and kafka-python.

* commit: a read_committed consumer sees the records; abort: it sees none of them while a
  read_uncommitted consumer does; the COMMIT/ABORT markers are in the partition's log files and
  the aborted transaction is in the ``.txnindex`` -- per client;
* consume-transform-produce: ``send_offsets_to_transaction`` commits the group's offsets with the
  output records (abort leaves the old offsets and no output);
* a second producer with the same transactional.id fences the first (fatal error for the first,
  its open transaction aborted);
* a transaction left open past its timeout is aborted by the coordinator (DescribeTransactions
  shows CompleteAbort and a bumped epoch);
* the last stable offset holds read_committed consumers behind an open transaction (ListOffsets
  read_committed answers it, the consumer stops there) until the commit;
* restart: committed transactions and transactional offsets survive kill -9; a transaction open
  at the kill is aborted after the restart and read_committed never shows it.
"""
from __future__ import annotations

import os
import time
import uuid

import pytest

from protocol import records as rec
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.rawkafka import send_once

WAIT = 30
BROKER_PROPS = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
    "num.partitions": 1,
}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("txn-broker"), name="broker",
                               props=BROKER_PROPS)) as b:
        yield b


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap, name, partitions=1):
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def confluent_producer(bootstrap, tid, **kw):
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0}
    conf.update(kw)
    p = Producer(conf)
    p.init_transactions(WAIT)
    return p


def read_all(bootstrap, topic, isolation, partitions=(0,), expect=None, idle=2.0):
    """Every value readable from the start of ``topic`` at ``isolation`` (confluent consumer)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False,
                  "isolation.level": isolation, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        got = []
        deadline = time.time() + WAIT
        last = time.time()
        while time.time() < deadline:
            m = c.poll(0.2)
            if m is None:
                if expect is not None and len(got) >= expect and time.time() - last > 0.3:
                    break
                if expect is None and time.time() - last > idle:
                    break
                continue
            if m.error():
                continue
            got.append(m.value().decode())
            last = time.time()
        return got
    finally:
        c.close()


def log_batches(broker, topic, partition=0):
    """Batch headers (with the control type of markers) of a partition, from its log files."""
    d = broker.log_dir / f"{topic}-{partition}"
    out = []
    for name in sorted(os.listdir(d)):
        if not name.endswith(".log"):
            continue
        data = (d / name).read_bytes()
        for h in rec.iter_batches(data):
            ctrl = rec.read_control_record(data, h) if h.is_control else None
            out.append((h, ctrl))
    return out


def txn_index_entries(broker, topic, partition=0):
    d = broker.log_dir / f"{topic}-{partition}"
    out = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".txnindex"):
            data = (d / name).read_bytes()
            for i in range(0, len(data) - len(data) % 34, 34):
                out.append(data[i:i + 34])
    return out


def describe_txn(bootstrap, tid):
    from protocol.messages import DescribeTransactionsRequest
    return send_once(bootstrap, DescribeTransactionsRequest(transactional_ids=[tid])).transaction_states[0]


def wait_for(cond, timeout=WAIT, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def list_offset(bootstrap, topic, isolation):
    from protocol.messages import ListOffsetsRequest as Q
    req = Q(replica_id=-1, isolation_level=isolation, topics=[Q.ListOffsetsTopic(
        name=topic, partitions=[Q.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    return send_once(bootstrap, req).topics[0].partitions[0].offset


# ------------------------------------------------------------------------------------ commit / abort
def test_confluent_commit_and_abort(kafka):
    bs = kafka.bootstrap
    topic = unique("tx-cf")
    create_topic(bs, topic)
    p = confluent_producer(bs, unique("tid"))
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=f"c{i}".encode())
    p.commit_transaction(WAIT)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"a{i}".encode())
    p.flush(WAIT)
    p.abort_transaction(WAIT)
    p.begin_transaction()
    p.produce(topic, value=b"c5")
    p.commit_transaction(WAIT)

    assert read_all(bs, topic, "read_committed", expect=6) == ["c0", "c1", "c2", "c3", "c4", "c5"]
    assert read_all(bs, topic, "read_uncommitted", expect=9) == \
        ["c0", "c1", "c2", "c3", "c4", "a0", "a1", "a2", "c5"]

    batches = log_batches(kafka, topic)
    markers = [(h.base_offset, c.type) for h, c in batches if h.is_control]
    assert [t for _, t in markers] == [rec.ControlRecordType.COMMIT, rec.ControlRecordType.ABORT,
                                       rec.ControlRecordType.COMMIT]
    assert markers[0][0] == 5 and markers[1][0] == 9 and markers[2][0] == 11
    data_pids = {h.producer_id for h, c in batches if not h.is_control}
    assert all(h.is_transactional for h, _ in batches) and len(data_pids) == 1
    entries = txn_index_entries(kafka, topic)
    assert len(entries) == 1
    import struct
    _v, pid, first, last, _lso = struct.unpack(">hqqqq", entries[0])
    assert (pid, first, last) == (data_pids.pop(), 6, 9)


def test_kafka_python_commit_and_abort(kafka):
    from kafka import KafkaConsumer, KafkaProducer
    bs = kafka.bootstrap
    topic = unique("tx-kp")
    create_topic(bs, topic)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=unique("tid-kp"))
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(4):
            p.send(topic, f"c{i}".encode())
        p.commit_transaction()
        p.begin_transaction()
        for i in range(2):
            p.send(topic, f"a{i}".encode())
        p.flush()
        p.abort_transaction()
    finally:
        p.close()

    c = KafkaConsumer(topic, bootstrap_servers=bs, isolation_level="read_committed",
                      auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        got = [m.value.decode() for m in c]
    finally:
        c.close()
    assert got == ["c0", "c1", "c2", "c3"]
    assert read_all(bs, topic, "read_uncommitted", expect=6) == ["c0", "c1", "c2", "c3", "a0", "a1"]
    kinds = [c.type for h, c in log_batches(kafka, topic) if h.is_control]
    assert kinds == [rec.ControlRecordType.COMMIT, rec.ControlRecordType.ABORT]


# ------------------------------------------------------------------------------------ consume-transform-produce
def _ctp_round(bs, producer, src, dst, group, commit):
    """Read everything new in ``src`` with a group consumer, write it upper-cased to ``dst`` and
    send the offsets in the same transaction; commit or abort."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    try:
        c.subscribe([src])
        got = []
        deadline = time.time() + WAIT
        while time.time() < deadline:
            m = c.poll(0.2)
            if m is None:
                if got:
                    break
                continue
            if m.error():
                continue
            got.append(m)
        producer.begin_transaction()
        for m in got:
            producer.produce(dst, value=m.value().upper())
        producer.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), WAIT)
        if commit:
            producer.commit_transaction(WAIT)
        else:
            producer.abort_transaction(WAIT)
        return [m.value().decode() for m in got]
    finally:
        c.close()


def committed(bs, group, topic):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=WAIT)[0].offset
    finally:
        c.close()


def test_consume_transform_produce_offsets(kafka):
    from confluent_kafka import Producer
    bs = kafka.bootstrap
    src, dst, group = unique("src"), unique("dst"), unique("ctp")
    create_topic(bs, src)
    create_topic(bs, dst)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(6):
        plain.produce(src, value=f"v{i}".encode())
    plain.flush(WAIT)
    p = confluent_producer(bs, unique("tid-ctp"))
    assert _ctp_round(bs, p, src, dst, group, commit=True) == [f"v{i}" for i in range(6)]
    assert committed(bs, group, src) == 6
    for i in range(6, 9):
        plain.produce(src, value=f"v{i}".encode())
    plain.flush(WAIT)
    assert _ctp_round(bs, p, src, dst, group, commit=False) == ["v6", "v7", "v8"]
    assert committed(bs, group, src) == 6            # abort left the old offsets
    assert read_all(bs, dst, "read_committed", expect=6) == [f"V{i}" for i in range(6)]
    # the group resumes after the last committed transaction
    assert _ctp_round(bs, p, src, dst, group, commit=True) == ["v6", "v7", "v8"]
    assert committed(bs, group, src) == 9
    assert read_all(bs, dst, "read_committed", expect=9) == [f"V{i}" for i in range(9)]


def test_kafka_python_send_offsets(kafka):
    from kafka import KafkaProducer, OffsetAndMetadata, TopicPartition
    bs = kafka.bootstrap
    dst, group, src = unique("kdst"), unique("kgrp"), unique("ksrc")
    create_topic(bs, dst)
    create_topic(bs, src)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=unique("tid-kpo"))
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(dst, b"x")
        p.send_offsets_to_transaction({TopicPartition(src, 0): OffsetAndMetadata(42, "", -1)}, group)
        p.commit_transaction()
        p.begin_transaction()
        p.send(dst, b"y")
        p.send_offsets_to_transaction({TopicPartition(src, 0): OffsetAndMetadata(50, "", -1)}, group)
        p.abort_transaction()
    finally:
        p.close()
    assert committed(bs, group, src) == 42


# ------------------------------------------------------------------------------------ fencing
def test_second_producer_fences_first(kafka):
    from confluent_kafka import KafkaException
    bs = kafka.bootstrap
    topic = unique("fence")
    create_topic(bs, topic)
    tid = unique("tid-fence")
    a = confluent_producer(bs, tid)
    a.begin_transaction()
    a.produce(topic, value=b"from-a")
    a.flush(WAIT)
    b = confluent_producer(bs, tid)              # aborts a's transaction, bumps the epoch
    b.begin_transaction()
    b.produce(topic, value=b"from-b")
    b.commit_transaction(WAIT)
    with pytest.raises(KafkaException) as ei:
        a.commit_transaction(WAIT)
    err = ei.value.args[0]
    assert err.fatal() or "fenced" in str(err).lower(), err
    assert read_all(bs, topic, "read_committed", expect=1) == ["from-b"]
    d = describe_txn(bs, tid)
    assert d.error_code == 0 and d.transaction_state == "CompleteCommit" and d.producer_epoch >= 2


def test_kafka_python_fenced(kafka):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    bs = kafka.bootstrap
    topic = unique("kfence")
    create_topic(bs, topic)
    tid = unique("tid-kf")
    a = KafkaProducer(bootstrap_servers=bs, transactional_id=tid, retries=2)
    b = KafkaProducer(bootstrap_servers=bs, transactional_id=tid)
    try:
        a.init_transactions()
        a.begin_transaction()
        a.send(topic, b"a").get(WAIT)
        b.init_transactions()
        with pytest.raises(KafkaError) as ei:
            a.commit_transaction()
        assert "Fenced" in type(ei.value).__name__ or "fenced" in str(ei.value).lower() \
            or "Epoch" in type(ei.value).__name__, repr(ei.value)
    finally:
        a.close(timeout=5)
        b.close(timeout=5)
    assert read_all(bs, topic, "read_committed", idle=1.5) == []


# ------------------------------------------------------------------------------------ timeouts
def test_open_transaction_times_out(kafka):
    bs = kafka.bootstrap
    topic = unique("tmo")
    create_topic(bs, topic)
    tid = unique("tid-tmo")
    p = confluent_producer(bs, tid, **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"x{i}".encode())
    p.flush(WAIT)
    d = describe_txn(bs, tid)
    assert d.transaction_state == "Ongoing" and d.topics[0].topic == topic
    epoch = d.producer_epoch
    assert list_offset(bs, topic, 1) == 0            # LSO held at the open transaction
    wait_for(lambda: describe_txn(bs, tid).transaction_state == "CompleteAbort", what="timeout abort")
    assert describe_txn(bs, tid).producer_epoch == epoch + 1
    assert list_offset(bs, topic, 1) == 4            # 3 records + the ABORT marker
    assert read_all(bs, topic, "read_committed", idle=1.0) == []
    assert read_all(bs, topic, "read_uncommitted", expect=3) == ["x0", "x1", "x2"]


# ------------------------------------------------------------------------------------ LSO
def test_lso_holds_read_committed_consumer(kafka):
    from confluent_kafka import Consumer, TopicPartition
    bs = kafka.bootstrap
    topic = unique("lso")
    create_topic(bs, topic)
    p = confluent_producer(bs, unique("tid-lso"))
    p.begin_transaction()
    p.produce(topic, value=b"first")
    p.commit_transaction(WAIT)                       # offsets 0, 1 (marker)
    other = confluent_producer(bs, unique("tid-lso2"))
    other.begin_transaction()
    other.produce(topic, value=b"open")
    other.flush(WAIT)                                # offset 2, open
    p.begin_transaction()
    p.produce(topic, value=b"after")
    p.commit_transaction(WAIT)                       # offsets 3, 4
    assert list_offset(bs, topic, 1) == 2
    assert list_offset(bs, topic, 0) == 5

    c = Consumer({"bootstrap.servers": bs, "group.id": unique("lso-c"), "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        end = time.time() + 3
        while time.time() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value().decode())
        assert got == ["first"]                      # "after" is committed but above the LSO
        other.commit_transaction(WAIT)
        end = time.time() + WAIT
        while len(got) < 3 and time.time() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value().decode())
        assert got == ["first", "open", "after"]
    finally:
        c.close()
    assert list_offset(bs, topic, 1) == 6


# ------------------------------------------------------------------------------------ restart
def test_transactions_survive_kill(broker_factory):
    bk = broker_factory(props=BROKER_PROPS)
    bs = bk.bootstrap
    topic, src, group = unique("rs"), unique("rs-src"), unique("rs-grp")
    create_topic(bs, topic)
    create_topic(bs, src)
    p = confluent_producer(bs, unique("tid-rs1"))
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"c{i}".encode())
    from confluent_kafka import TopicPartition
    from confluent_kafka import Consumer
    meta_c = Consumer({"bootstrap.servers": bs, "group.id": group})
    p.send_offsets_to_transaction([TopicPartition(src, 0, 7)], meta_c.consumer_group_metadata(), WAIT)
    meta_c.close()
    p.commit_transaction(WAIT)
    tid_open = unique("tid-rs2")
    q = confluent_producer(bs, tid_open, **{"transaction.timeout.ms": 3000})
    q.begin_transaction()
    for i in range(4):
        q.produce(topic, value=f"open{i}".encode())
    q.flush(WAIT)
    assert describe_txn(bs, tid_open).transaction_state == "Ongoing"

    bk.restart(clean=False)                          # kill -9 with the transaction open
    del q, p
    assert read_all(bs, topic, "read_committed", idle=1.0) == ["c0", "c1", "c2"]
    assert committed(bs, group, src) == 7
    wait_for(lambda: describe_txn(bs, tid_open).transaction_state == "CompleteAbort",
             what="abort of the transaction open at the kill")
    assert read_all(bs, topic, "read_committed", idle=1.0) == ["c0", "c1", "c2"]
    assert list_offset(bs, topic, 1) == list_offset(bs, topic, 0)
    # a new producer with the old id carries on
    r = confluent_producer(bs, tid_open)
    r.begin_transaction()
    r.produce(topic, value=b"again")
    r.commit_transaction(WAIT)
    assert read_all(bs, topic, "read_committed", expect=4) == ["c0", "c1", "c2", "again"]
    bk.restart(clean=True)
    assert read_all(bs, topic, "read_committed", expect=4) == ["c0", "c1", "c2", "again"]
    assert committed(bs, group, src) == 7
    d = describe_txn(bs, tid_open)
    assert d.error_code == 0 and d.transaction_state == "CompleteCommit"

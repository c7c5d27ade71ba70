"""Transactions on a ZooKeeper cluster of three brokers, with unmodified clients.

The transaction coordinator (leader of the id's ``__transaction_state`` partition) is in general
not the leader of the data partitions: markers go over inter-broker WriteTxnMarkers, the
produce-side check verifies with a remote coordinator, and the coordinator moves when its broker
dies (the new leader of the partition loads the replicated state).

* a transaction over partitions led by all three brokers, commit and abort (confluent-kafka and
  kafka-python): read_committed sees exactly the committed records, read_uncommitted all, the LSO
  is held by an open transaction on every partition and equals the high watermark afterwards;
* consume-transform-produce with ``send_offsets_to_transaction``: the group's offsets are
  visible after the commit only (abort keeps the old ones);
* kill -9 of the coordinator between transactions and with a transaction open: a new coordinator
  takes over from ``__transaction_state`` (RF 3, min ISR 2), the open transaction is aborted
  (its timeout, or the new producer's InitProducerId fencing the old epoch), a producer with the
  same transactional.id carries on; nothing committed lost or duplicated, nothing aborted visible;
* SIGSTOP of the coordinator past its session with a transaction open; the coordinator killed
  while markers are pending; a data leader and the group's ``__consumer_offsets`` leader killed
  mid-transaction; kafka-python across a data leader's failover;
* a stream of transactions while the coordinator is killed and restarted (``-m slow``: repeated).
"""
from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter

import pytest

from tests.support.txn_producer import TxnProducerProcess

pytestmark = pytest.mark.cluster

WAIT = 60
TXN_PROPS = {
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "min.insync.replicas": 2,
    "offsets.topic.num.partitions": 3,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
    # A paused broker leaves the ISR after replica.lag.time.max.ms (4 s) plus up to one check
    # interval, and loses its leaderships when its ZooKeeper session expires.  The markers test
    # looks at the transaction between the two: 6 s left about a second for that, which a loaded
    # machine overran (CompleteCommit already); 9 s leaves three.
    "zookeeper.session.timeout.ms": 9000,
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _call(broker, request, version=None):
    from protocol.client import KafkaClientConnection

    async def go():
        conn = await KafkaClientConnection.connect(broker.host, broker.port, timeout=10)
        try:
            return await conn.send(request, version=version)
        finally:
            await conn.close()
    return asyncio.run(go())


def find_txn_coordinator(cluster, tid: str, key_type: int = 1) -> int:
    """Node id of the transaction coordinator of ``tid`` (FindCoordinator key_type=1; 0: of a group)."""
    from protocol.messages import FindCoordinatorRequest as Q

    def ask():
        for b in cluster.brokers.values():
            if not b.alive:
                continue
            r = _call(b, Q(key_type=key_type, coordinator_keys=[tid]), version=4).coordinators[0]
            if r.error_code == 0 and cluster.brokers[r.node_id].alive:
                return r.node_id
        return None
    return cluster.wait_for(ask, WAIT, f"a transaction coordinator for {tid}")


def describe_txn(cluster, tid: str):
    from protocol.messages import DescribeTransactionsRequest
    coord = find_txn_coordinator(cluster, tid)
    return _call(cluster.brokers[coord], DescribeTransactionsRequest(transactional_ids=[tid])).transaction_states[0]


def offsets(cluster, topic: str, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark) from the partition's leader (ListOffsets LATEST)."""
    from protocol.messages import ListOffsetsRequest as Q
    leader = cluster.wait_for_leader(topic, partition)
    out = []
    for isolation in (1, 0):
        req = Q(replica_id=-1, isolation_level=isolation, topics=[Q.ListOffsetsTopic(
            name=topic, partitions=[Q.ListOffsetsPartition(partition_index=partition, timestamp=-1)])])
        r = _call(cluster.brokers[leader], req).topics[0].partitions[0]
        assert r.error_code == 0, r
        out.append(r.offset)
    return out[0], out[1]


def producer(cluster, tid: str, **kw):
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, "linger.ms": 0,
            "topic.metadata.refresh.interval.ms": 1000}
    conf.update(kw)
    p = Producer(conf)
    p.init_transactions(WAIT)
    return p


def read_all(cluster, topic: str, partitions: int, isolation: str, expect: int | None = None,
             idle: float = 2.0) -> dict[int, list[str]]:
    """partition -> values readable from the start at ``isolation``."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique("reader"),
                  "enable.auto.commit": False, "isolation.level": isolation, "auto.offset.reset": "earliest"})
    got: dict[int, list[str]] = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        n, last, deadline = 0, time.time(), time.time() + WAIT
        while time.time() < deadline:
            m = c.poll(0.2)
            if m is None:
                if expect is not None and n >= expect and time.time() - last > 0.5:
                    break
                if expect is None and time.time() - last > idle:
                    break
                continue
            if m.error():
                continue
            got[m.partition()].append(m.value().decode())
            n += 1
            last = time.time()
        return got
    finally:
        c.close()


def committed(cluster, group: str, topic: str, partitions: int, isolation: str = "read_committed") -> dict[int, int]:
    """The group's committed offsets.  A read_committed consumer asks with require_stable (it
    would wait out pending transactional offsets); read_uncommitted does not."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": isolation})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=WAIT)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def spread_topic(cluster, name: str) -> None:
    """Three partitions, RF 3, one led by each broker."""
    cluster.create_topic(name, partitions=3, rf=3, assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    assert sorted(cluster.leader(name, p) for p in range(3)) == [1, 2, 3]


def tid_led_by(cluster, broker_id: int, prefix: str) -> str:
    """A fresh transactional id whose coordinator is ``broker_id``."""
    for _ in range(200):
        tid = unique(prefix)
        if find_txn_coordinator(cluster, tid) == broker_id:
            return tid
    raise AssertionError(f"no transactional id coordinated by broker {broker_id}")


@pytest.fixture
def txn_cluster(cluster_factory):
    return cluster_factory(3, props=TXN_PROPS)


# ----------------------------------------------------------------------------- (a) commit / abort
def test_transaction_across_three_leaders_commit_and_abort(txn_cluster):
    c = txn_cluster
    topic = unique("tx3")
    spread_topic(c, topic)
    tid = unique("tid")
    p = producer(c, tid)
    coord = find_txn_coordinator(c, tid)
    assert coord in (1, 2, 3)

    p.begin_transaction()
    for i in range(3):
        for part in range(3):
            p.produce(topic, value=f"c{i}-p{part}".encode(), partition=part)
    p.commit_transaction(WAIT)

    p.begin_transaction()
    for part in range(3):
        p.produce(topic, value=f"a-p{part}".encode(), partition=part)
    p.flush(WAIT)
    # the open transaction holds the LSO of every partition at its first offset (3 + marker = 4)
    for part in range(3):
        assert offsets(c, topic, part) == (4, 5), part
    p.abort_transaction(WAIT)

    p.begin_transaction()
    for part in range(3):
        p.produce(topic, value=f"c3-p{part}".encode(), partition=part)
    p.commit_transaction(WAIT)

    # per partition: c0 c1 c2 COMMIT a ABORT c3 COMMIT = 8 offsets
    for part in range(3):
        c.wait_for(lambda: offsets(c, topic, part) == (8, 8), 30, f"LSO = HW = 8 on partition {part}")
    rc = read_all(c, topic, 3, "read_committed", expect=12)
    assert rc == {part: [f"c{i}-p{part}" for i in range(4)] for part in range(3)}
    ru = read_all(c, topic, 3, "read_uncommitted", expect=15)
    assert ru == {part: [f"c0-p{part}", f"c1-p{part}", f"c2-p{part}", f"a-p{part}", f"c3-p{part}"]
                  for part in range(3)}
    d = describe_txn(c, tid)
    assert d.error_code == 0 and d.transaction_state == "CompleteCommit"


def test_kafka_python_transaction_across_three_leaders(txn_cluster):
    from kafka import KafkaProducer
    c = txn_cluster
    topic = unique("tx3kp")
    spread_topic(c, topic)
    p = KafkaProducer(bootstrap_servers=c.bootstrap, transactional_id=unique("tid-kp"))
    try:
        p.init_transactions()
        p.begin_transaction()
        for part in range(3):
            p.send(topic, f"c-p{part}".encode(), partition=part)
        p.commit_transaction()
        p.begin_transaction()
        for part in range(3):
            p.send(topic, f"a-p{part}".encode(), partition=part)
        p.flush()
        p.abort_transaction()
    finally:
        p.close()
    for part in range(3):
        c.wait_for(lambda: offsets(c, topic, part) == (4, 4), 30, f"LSO = HW = 4 on partition {part}")
    assert read_all(c, topic, 3, "read_committed", expect=3) == {part: [f"c-p{part}"] for part in range(3)}
    assert read_all(c, topic, 3, "read_uncommitted", expect=6) == \
        {part: [f"c-p{part}", f"a-p{part}"] for part in range(3)}


# ----------------------------------------------------------------------------- (b) consume-transform-produce
def _ctp_round(cluster, p, src, dst, group, commit, before_end=None):
    from confluent_kafka import Consumer
    cons = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    try:
        cons.subscribe([src])
        got, last, deadline = [], time.time(), time.time() + WAIT
        while time.time() < deadline:
            m = cons.poll(0.2)
            if m is None:
                if got and time.time() - last > 1.0:
                    break
                continue
            if m.error():
                continue
            got.append(m)
            last = time.time()
        p.begin_transaction()
        for m in got:
            p.produce(dst, value=m.value().upper(), partition=m.partition())
        p.send_offsets_to_transaction(cons.position(cons.assignment()), cons.consumer_group_metadata(), WAIT)
        p.flush(WAIT)
        if before_end is not None:
            before_end()
        if commit:
            p.commit_transaction(WAIT)
        else:
            p.abort_transaction(WAIT)
        return sorted(m.value().decode() for m in got)
    finally:
        cons.close()


def test_consume_transform_produce_offsets_after_commit_only(txn_cluster):
    from confluent_kafka import Producer
    c = txn_cluster
    src, dst = unique("src"), unique("dst")
    spread_topic(c, src)
    spread_topic(c, dst)
    group = unique("ctp")
    plain = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(9):
        plain.produce(src, value=f"v{i}".encode(), partition=i % 3)
    plain.flush(WAIT)
    tid = unique("tid-ctp")
    p = producer(c, tid)

    def not_yet():
        assert committed(c, group, src, 3, "read_uncommitted") == {0: -1001, 1: -1001, 2: -1001}
    assert _ctp_round(c, p, src, dst, group, True, before_end=not_yet) == sorted(f"v{i}" for i in range(9))
    assert committed(c, group, src, 3) == {0: 3, 1: 3, 2: 3}

    for i in range(9, 12):
        plain.produce(src, value=f"v{i}".encode(), partition=i % 3)
    plain.flush(WAIT)
    assert _ctp_round(c, p, src, dst, group, False) == ["v10", "v11", "v9"]
    assert committed(c, group, src, 3) == {0: 3, 1: 3, 2: 3}        # abort kept the old offsets

    def still_old():
        assert committed(c, group, src, 3, "read_uncommitted") == {0: 3, 1: 3, 2: 3}
    assert _ctp_round(c, p, src, dst, group, True, before_end=still_old) == ["v10", "v11", "v9"]
    assert committed(c, group, src, 3) == {0: 4, 1: 4, 2: 4}
    out = read_all(c, dst, 3, "read_committed", expect=12)
    assert sorted(v for vs in out.values() for v in vs) == sorted(f"V{i}" for i in range(12))


# ----------------------------------------------------------------------------- (c) coordinator failover
def _commit(p, topic, values):
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v.encode(), partition=int(v.rsplit("p", 1)[1]))
    p.commit_transaction(WAIT)


def test_coordinator_killed_between_transactions(txn_cluster):
    c = txn_cluster
    topic = unique("fo")
    spread_topic(c, topic)
    coord = 1
    tid = tid_led_by(c, coord, "tid-fo")
    p = producer(c, tid)
    _commit(p, topic, [f"c0-p{i}" for i in range(3)])

    c.kill(coord)
    new = find_txn_coordinator(c, tid)
    assert new != coord
    # the same producer carries on with the new coordinator (it re-finds the coordinator)
    _commit(p, topic, [f"c1-p{i}" for i in range(3)])
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"a-p{i}".encode(), partition=i)
    p.flush(WAIT)
    p.abort_transaction(WAIT)           # answered once PrepareAbort is written; markers follow
    c.wait_for(lambda: describe_txn(c, tid).transaction_state == "CompleteAbort", WAIT, "CompleteAbort")

    c.start_broker(coord)
    for part in range(3):
        c.wait_for_isr(topic, part, [1, 2, 3])
    _commit(p, topic, [f"c2-p{i}" for i in range(3)])
    rc = read_all(c, topic, 3, "read_committed", expect=9)
    assert rc == {i: [f"c0-p{i}", f"c1-p{i}", f"c2-p{i}"] for i in range(3)}


def _open_transaction_then_kill(c, topic, prefix, timeout_ms):
    coord = 2
    tid = tid_led_by(c, coord, prefix)
    p = producer(c, tid, **{"transaction.timeout.ms": timeout_ms})
    _commit(p, topic, [f"c0-p{i}" for i in range(3)])
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"open-p{i}".encode(), partition=i)
    p.flush(WAIT)
    d = describe_txn(c, tid)
    assert d.transaction_state == "Ongoing" and len(d.topics[0].partitions) == 3
    epoch = d.producer_epoch
    c.kill(coord)
    return tid, p, coord, epoch


def _check_after(c, topic, tid, committed_values):
    for part in range(3):
        c.wait_for(lambda: (lambda lso, hw: lso == hw)(*offsets(c, topic, part)), 30,
                   f"LSO = HW on partition {part}")
    rc = read_all(c, topic, 3, "read_committed", expect=sum(len(v) for v in committed_values.values()))
    assert rc == committed_values
    ru = read_all(c, topic, 3, "read_uncommitted", idle=1.5)
    for i in range(3):
        assert ru[i].count(f"open-p{i}") == 1


def test_coordinator_killed_with_open_transaction_times_out(txn_cluster):
    c = txn_cluster
    topic = unique("fo-open")
    spread_topic(c, topic)
    tid, old, coord, epoch = _open_transaction_then_kill(c, topic, "tid-fot", 4000)
    # the new coordinator loads the Ongoing transaction and aborts it after its timeout
    c.wait_for(lambda: describe_txn(c, tid).transaction_state == "CompleteAbort", WAIT,
               "abort of the open transaction by the new coordinator")
    d = describe_txn(c, tid)
    assert d.producer_epoch == epoch + 1
    # the old producer is fenced
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException):
        old.commit_transaction(WAIT)
    # a new producer with the same id carries on
    p = producer(c, tid)
    _commit(p, topic, [f"c1-p{i}" for i in range(3)])
    c.start_broker(coord)
    _commit(p, topic, [f"c2-p{i}" for i in range(3)])
    _check_after(c, topic, tid, {i: [f"c0-p{i}", f"c1-p{i}", f"c2-p{i}"] for i in range(3)})


def test_coordinator_killed_with_open_transaction_new_producer_fences(txn_cluster):
    c = txn_cluster
    topic = unique("fo-fence")
    spread_topic(c, topic)
    tid, old, coord, epoch = _open_transaction_then_kill(c, topic, "tid-fof", 60000)
    # long timeout: the new producer's InitProducerId aborts the open transaction (epoch fence)
    p = producer(c, tid)
    d = describe_txn(c, tid)
    assert d.transaction_state == "Empty" and d.producer_epoch >= epoch + 2
    _commit(p, topic, [f"c1-p{i}" for i in range(3)])
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException):
        old.commit_transaction(WAIT)
    c.start_broker(coord)
    _commit(p, topic, [f"c2-p{i}" for i in range(3)])
    _check_after(c, topic, tid, {i: [f"c0-p{i}", f"c1-p{i}", f"c2-p{i}"] for i in range(3)})


def test_kafka_python_leader_killed_between_transactions(txn_cluster):
    """kafka-python follows a data leader's failover between transactions.  (Not the coordinator's:
    kafka-python 3.0.12 drops an AddPartitionsToTxn whose coordinator refuses the connection --
    the sender's exception path skips its retry -- so its records expire and it then commits the
    transaction without them; a client bug, seen here against a killed coordinator.)"""
    from kafka import KafkaProducer
    c = txn_cluster
    topic = unique("lkp")
    spread_topic(c, topic)
    tid = tid_led_by(c, 1, "tid-lkp")
    p = KafkaProducer(bootstrap_servers=c.bootstrap, transactional_id=tid, request_timeout_ms=10000,
                      metadata_max_age_ms=1000, delivery_timeout_ms=60000)
    try:
        p.init_transactions()
        for k in range(3):
            if k == 1:
                c.kill(3)                               # leader of partition 2
                c.wait_for_leader(topic, 2, not_in={3})
            p.begin_transaction()
            for part in range(3):
                p.send(topic, f"c{k}-p{part}".encode(), partition=part)
            p.commit_transaction()
    finally:
        p.close(timeout=5)
    c.start_broker(3)
    for part in range(3):
        c.wait_for(lambda: offsets(c, topic, part) == (6, 6), 30, f"LSO = HW = 6 on partition {part}")
    rc = read_all(c, topic, 3, "read_committed", expect=9)
    assert rc == {i: [f"c0-p{i}", f"c1-p{i}", f"c2-p{i}"] for i in range(3)}


def test_coordinator_paused_past_its_session_with_open_transaction(txn_cluster):
    """SIGSTOP of the coordinator with a transaction open until its ZooKeeper session expires: the
    producer's EndTxn times out, goes to the new coordinator (which loaded the Ongoing state) and
    commits; the old coordinator, resumed, follows and serves nothing stale."""
    c = txn_cluster
    topic = unique("zombie")
    spread_topic(c, topic)
    coord = 1
    tid = tid_led_by(c, coord, "tid-zombie")
    from broker.group.hashing import partition_for
    tp = partition_for(tid, 3)
    p = producer(c, tid, **{"socket.timeout.ms": 10000, "transaction.timeout.ms": 60000})
    _commit(p, topic, [f"c0-p{i}" for i in range(3)])
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"c1-p{i}".encode(), partition=i)
    p.flush(WAIT)
    c.pause(coord)
    try:
        c.wait_for_leader("__transaction_state", tp, not_in={coord})
        p.commit_transaction(WAIT)
    finally:
        c.resume(coord)
    c.wait_for(lambda: describe_txn(c, tid).transaction_state == "CompleteCommit", WAIT, "CompleteCommit")
    for part in range(3):
        c.wait_for_isr(topic, part, [1, 2, 3])
    c.wait_for_isr("__transaction_state", tp, [1, 2, 3])
    # the resumed broker is a follower now: it answers NOT_COORDINATOR, not its stale Ongoing state
    from protocol.messages import DescribeTransactionsRequest
    old = _call(c.brokers[coord], DescribeTransactionsRequest(transactional_ids=[tid])).transaction_states[0]
    assert old.error_code == 16, old
    _commit(p, topic, [f"c2-p{i}" for i in range(3)])
    for part in range(3):
        c.wait_for(lambda: offsets(c, topic, part) == (6, 6), 30, f"LSO = HW = 6 on partition {part}")
    rc = read_all(c, topic, 3, "read_committed", expect=9)
    assert rc == {i: [f"c0-p{i}", f"c1-p{i}", f"c2-p{i}"] for i in range(3)}


# ----------------------------------------------------------------------------- other brokers failing
def test_data_leader_killed_with_open_transaction(txn_cluster):
    """The leader of one data partition dies mid-transaction: the new leader (a follower that
    replicated the open transaction) holds the LSO and takes the marker."""
    c = txn_cluster
    topic = unique("dl")
    spread_topic(c, topic)
    tid = tid_led_by(c, 1, "tid-dl")
    p = producer(c, tid)
    _commit(p, topic, [f"c0-p{i}" for i in range(3)])
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"c1-p{i}".encode(), partition=i)
    p.flush(WAIT)
    c.kill(2)                                       # leader of partition 1
    new = c.wait_for_leader(topic, 1, not_in={2})
    # the new leader knows the open transaction (its high watermark catches up with the follower)
    c.wait_for(lambda: offsets(c, topic, 1) == (2, 3), 30, "LSO 2, high watermark 3 on the new leader")
    p.commit_transaction(WAIT)
    c.wait_for(lambda: describe_txn(c, tid).transaction_state == "CompleteCommit", WAIT, "CompleteCommit")
    c.start_broker(2)
    _commit(p, topic, [f"c2-p{i}" for i in range(3)])
    for part in range(3):
        c.wait_for(lambda: offsets(c, topic, part) == (6, 6), 30, f"LSO = HW = 6 on partition {part}")
    rc = read_all(c, topic, 3, "read_committed", expect=9)
    assert rc == {i: [f"c0-p{i}", f"c1-p{i}", f"c2-p{i}"] for i in range(3)}, new


def test_coordinator_killed_while_markers_are_pending(txn_cluster):
    """PrepareCommit is written but a data leader does not answer (SIGSTOP) when the coordinator
    dies: the new coordinator loads PrepareCommit and finishes the commit once the partition has a
    leader again."""
    c = txn_cluster
    topic = unique("pm")
    spread_topic(c, topic)
    tid = tid_led_by(c, 1, "tid-pm")
    # The paused leader must not be the controller: the leader of __transaction_state shrinks the
    # ISR through the controller (AlterPartition), so with the controller paused the PrepareCommit
    # write is only acknowledged after the controller's failover, which also moves the paused
    # broker's leaderships and lets the markers complete before the test can look.
    paused = 2 if c.controller_id() == 3 else 3
    part = paused - 1                               # spread_topic: partition i is led by i + 1
    p = producer(c, tid)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"c0-p{i}".encode(), partition=i)
    p.flush(WAIT)
    c.pause(paused)
    try:
        p.commit_transaction(WAIT)                  # PrepareCommit written once it leaves the ISR
        assert describe_txn(c, tid).transaction_state == "PrepareCommit"
        c.kill(1)
        c.wait_for_leader(topic, part, not_in={paused})   # its ZooKeeper session expires
    finally:
        c.resume(paused)
    c.wait_for(lambda: describe_txn(c, tid).transaction_state == "CompleteCommit", WAIT,
               "the new coordinator completing the commit")
    c.start_broker(1)
    p2 = producer(c, tid)
    _commit(p2, topic, [f"c1-p{i}" for i in range(3)])
    for part in range(3):
        c.wait_for(lambda: (lambda lso, hw: lso == hw)(*offsets(c, topic, part)), 30, f"LSO = HW on {part}")
    rc = read_all(c, topic, 3, "read_committed", expect=6)
    assert rc == {i: [f"c0-p{i}", f"c1-p{i}"] for i in range(3)}


def test_offsets_leader_killed_with_pending_transactional_offsets(txn_cluster):
    """The group's ``__consumer_offsets`` leader dies while the transaction's offsets are pending:
    the new leader loads them as pending and the COMMIT marker makes them visible."""
    from confluent_kafka import Consumer, TopicPartition
    c = txn_cluster
    topic, src = unique("po"), unique("po-src")
    spread_topic(c, topic)
    spread_topic(c, src)
    tid = tid_led_by(c, 1, "tid-po")
    group = next(g for g in (unique("grp") for _ in range(200)) if find_txn_coordinator(c, g, 0) == 2)
    p = producer(c, tid)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"c0-p{i}".encode(), partition=i)
    meta = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group})
    p.send_offsets_to_transaction([TopicPartition(src, i, 10 + i) for i in range(3)],
                                  meta.consumer_group_metadata(), WAIT)
    meta.close()
    from broker.group.hashing import partition_for
    op = partition_for(group, 3)
    victim = c.leader("__consumer_offsets", op)
    assert victim == 2
    c.kill(victim)
    c.wait_for_leader("__consumer_offsets", op, not_in={victim})
    assert committed(c, group, src, 3, "read_uncommitted") == {0: -1001, 1: -1001, 2: -1001}
    p.commit_transaction(WAIT)
    c.wait_for(lambda: describe_txn(c, tid).transaction_state == "CompleteCommit", WAIT, "CompleteCommit")
    assert committed(c, group, src, 3) == {0: 10, 1: 11, 2: 12}
    c.start_broker(victim)
    assert read_all(c, topic, 3, "read_committed", expect=3) == {i: [f"c0-p{i}"] for i in range(3)}


# ----------------------------------------------------------------------------- drill
# A producer runs transaction after transaction (2 records on each of 3 partitions, tagged with
# the transaction's number) while the coordinator is killed -9 and restarted: read_committed shows
# every transaction whose commit returned, each whole and once, and the producer never needs to be
# replaced (a restarted broker answered AddPartitionsToTxn for a topic it had no metadata for yet
# with UNKNOWN_TOPIC_OR_PARTITION instead of NOT_COORDINATOR: an abortable error, then a fatal
# INVALID_TXN_STATE for librdkafka's EndTxn).  The producer is tests/support/txn_producer.py.
def _drill(c, tmp_path, rounds: int, seed: int):
    topic = unique("drill")
    spread_topic(c, topic)
    tid = unique("tid-drill")
    prod = TxnProducerProcess(tmp_path, c.bootstrap, topic, tid, partitions=3, records=2,
                              txn_timeout_ms=30000, op_timeout_s=15, message_timeout_ms=25000,
                              metadata_refresh_ms=1000)
    rng = random.Random(seed)
    kills = []
    try:
        for _ in range(rounds):
            n = prod.count()
            c.wait_for(lambda: prod.count() >= n + 3, WAIT, "three more commits")
            time.sleep(rng.uniform(0.0, 0.5))
            victim = find_txn_coordinator(c, tid)
            kills.append(victim)
            c.kill(victim)
            time.sleep(rng.uniform(1.0, 3.0))
            c.start_broker(victim)
            for part in range(3):
                c.wait_for_isr(topic, part, [1, 2, 3])
        n = prod.count()
        c.wait_for(lambda: prod.count() >= n + 3, WAIT, "commits after the last kill")
    finally:
        prod.stop()
    c.wait_for(lambda: describe_txn(c, tid).transaction_state in ("CompleteCommit", "CompleteAbort", "Empty"),
               WAIT, "the last transaction to finish")
    committed_txns = prod.committed()
    for part in range(3):
        c.wait_for(lambda: (lambda lso, hw: lso == hw)(*offsets(c, topic, part)), 30, f"LSO = HW on {part}")
    values = [v for vs in read_all(c, topic, 3, "read_committed", idle=3.0).values() for v in vs]
    assert len(values) == len(set(values)), "duplicates under read_committed"
    per_txn = Counter(v.split(":")[0] for v in values)
    assert all(n == 6 for n in per_txn.values()), {k: n for k, n in per_txn.items() if n != 6}
    missing = committed_txns - {int(k) for k in per_txn}
    assert not missing, f"committed transactions missing: {sorted(missing)[:10]} (kills {kills})"
    return len(committed_txns), prod.producers()


def test_coordinator_kill_during_a_stream_of_transactions(txn_cluster, tmp_path):
    n, producers = _drill(txn_cluster, tmp_path, 1, 1)
    assert n >= 6
    assert producers == 1, "the producer hit a fatal error across the coordinator's failover"


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_coordinator_kill_drill_repeated(txn_cluster, tmp_path, seed):
    _, producers = _drill(txn_cluster, tmp_path, 4, seed)
    assert producers == 1, "the producer hit a fatal error across a coordinator's failover"

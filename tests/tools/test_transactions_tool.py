"""kafka-transactions.sh (tools/transactions.py) and DescribeProducers (61) against a real broker.

One broker for the module, with ``transaction.partition.verification.enable=false`` so that a test
can leave a genuinely hanging transaction behind (a transactional batch the coordinator never
heard of), the case ``find-hanging`` and ``abort`` exist for.  A confluent-kafka transactional
producer holds an open transaction on two partitions for the list/describe/describe-producers/abort
checks.  The handler's NOT_LEADER_OR_FOLLOWER answer is checked on fakes at the end.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace

import pytest

from protocol import records as rec
from protocol.errors import ErrorCode as E
from protocol.messages import (DescribeProducersRequest as DPR, InitProducerIdRequest, ListOffsetsRequest,
                               ProduceRequest as PR)
from tests.tools.conftest import tool
from tests.support.rawkafka import SyncClient
from tests.support.broker import running

ck = pytest.importorskip("confluent_kafka")

PROPS = {"transaction.partition.verification.enable": "false", "num.partitions": 1,
         "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}
DEBUG_HINT = ". Enable debug logging for additional detail."


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    from tests.support import BrokerProcess, broker_command_available
    ok, why = broker_command_available()
    if not ok:
        pytest.skip(why)
    b = BrokerProcess(tmp_path_factory.mktemp("txn-tool"), name="txn-tool-broker", props=PROPS)
    with running(b):
        yield b


@pytest.fixture
def raw(kafka):
    c = SyncClient(kafka.bootstrap)
    yield c
    c.close()


def txn(kafka, *args):
    return tool("kafka-transactions", "--bootstrap-server", kafka.bootstrap, *args, timeout=60)


def table(out: str) -> list[list[str]]:
    """Kafka's prettyPrintTable: cells padded, each followed by a tab."""
    lines = out.splitlines()
    assert all(line.endswith("\t") for line in lines), repr(out)
    return [[c.strip() for c in line.split("\t")[:-1]] for line in lines]


def create_topic(kafka, partitions=2) -> str:
    t = f"txt-{uuid.uuid4().hex[:8]}"
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--create", "--topic", t,
             "--partitions", partitions)
    assert r.rc == 0, r
    return t


def lso(raw, topic, partition) -> int:
    req = ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=-1)])])
    return raw(req).topics[0].partitions[0].offset


def node_id(raw) -> str:
    from protocol.messages import MetadataRequest
    return str(raw(MetadataRequest(topics=[])).brokers[0].node_id)


def describe_producers(raw, topic, partitions):
    r = raw(DPR(topics=[DPR.TopicRequest(name=topic, partition_indexes=list(partitions))]))
    return {p.partition_index: p for t in r.topics for p in t.partitions}


@pytest.fixture
def open_txn(kafka):
    """A confluent-kafka producer with an open transaction: 2 records on p0 (after 3 committed
    ones), 1 on p1.  Yields (producer, tid, topic, p0 start offset)."""
    from confluent_kafka import Producer
    topic = create_topic(kafka)
    tid = f"tool-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": tid, "linger.ms": 0,
                  "transaction.timeout.ms": 60000})
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"c{i}".encode(), partition=0)
    p.commit_transaction(15)           # offsets 0-2, COMMIT marker at 3
    p.begin_transaction()
    p.produce(topic, b"open-0", partition=0)
    p.produce(topic, b"open-1", partition=0)
    p.produce(topic, b"open-2", partition=1)
    assert p.flush(10) == 0
    yield p, tid, topic, 4
    try:
        p.abort_transaction(10)
    except Exception:
        pass


# ------------------------------------------------------------------------------------- usage
def test_usage_errors():
    r = tool("kafka-transactions", "list")
    assert r.rc == 1 and "kafka-transactions.sh: error: argument --bootstrap-server is required" in r.err, r
    r = tool("kafka-transactions", "--bootstrap-server", "localhost:1", "describe")
    assert r.rc == 1 and "error: argument --transactional-id is required" in r.err, r
    r = tool("kafka-transactions", "--bootstrap-server", "localhost:1", "nope")
    assert r.rc == 1 and "invalid choice: 'nope'" in r.err and "Traceback" not in r.err, r
    r = tool("kafka-transactions", "--help")
    assert r.rc == 0 and "describe-producers" in r.out and "find-hanging" in r.out, r
    r = tool("kafka-transactions", "--bootstrap-server", "localhost:1", "abort", "--help")
    assert r.rc == 0 and "--start-offset" in r.out and "Brokers before 3.0" in r.out


def test_bad_config_file_and_broker_down(down_port, fast_fail):
    r = tool("kafka-transactions", "--bootstrap-server", "127.0.0.1:1", "--command-config", "/nonexistent",
             "list")
    assert r.rc == 1 and "Traceback" not in r.err and "/nonexistent" in r.err, r
    start = time.monotonic()
    r = tool("kafka-transactions", "--bootstrap-server", f"127.0.0.1:{down_port}", "--command-config", fast_fail,
             "describe-producers", "--topic", "x", "--partition", "0", timeout=30)
    assert r.rc == 1 and time.monotonic() - start < 15, r
    assert len(r.err.splitlines()) == 1 and "could not connect" in r.err and "Traceback" not in r.err, r


# ----------------------------------------------------------------- an open confluent transaction
def test_list_describe_describe_producers_and_abort(kafka, raw, open_txn):
    p, tid, topic, start = open_txn
    r = txn(kafka, "list")
    assert r.rc == 0, r
    rows = table(r.out)
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    mine = [row for row in rows[1:] if row[0] == tid]
    assert len(mine) == 1 and mine[0][1] == node_id(raw) and mine[0][3] == "Ongoing", rows
    pid = mine[0][2]
    r = txn(kafka, "list", "--duration-filter", "3600000")      # nothing has run for an hour
    assert r.rc == 0 and tid not in r.out, r

    r = txn(kafka, "describe", "--transactional-id", tid)
    assert r.rc == 0, r
    head, row = table(r.out)
    assert head == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions"]
    assert row[:6] == [node_id(raw), tid, pid, "0", "Ongoing", "60000"], row
    assert int(row[6]) > 0 and 0 <= int(row[7]) < 60000
    assert row[8] == f"{topic}-0,{topic}-1"

    r = txn(kafka, "describe-producers", "--topic", topic, "--partition", "0")
    assert r.rc == 0, r
    head, *rows = table(r.out)
    assert head == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                    "CurrentTransactionStartOffset"]
    assert len(rows) == 1
    assert rows[0][:4] == [pid, "0", "0", "4"] and rows[0][5] == str(start), rows   # sequences 0-4
    assert abs(int(rows[0][4]) - time.time() * 1000) < 120_000
    r = txn(kafka, "describe-producers", "--topic", topic, "--partition", "1", "--broker-id", node_id(raw))
    assert r.rc == 0 and table(r.out)[1][5] == "0", r

    # the open transaction holds the LSO of p0 at its first offset
    assert lso(raw, topic, 0) == start
    r = txn(kafka, "abort", "--topic", topic, "--partition", "0", "--start-offset", "3")
    assert r.rc == 1 and r.err.strip() == (f"Could not find any open transactions starting at offset 3 on "
                                           f"partition {topic}-0"), r
    r = txn(kafka, "abort", "--topic", topic, "--partition", "0", "--start-offset", start)
    assert r.rc == 0 and r.out == "" and r.err == "", r
    assert lso(raw, topic, 0) == start + 3            # 2 records + the ABORT marker
    assert lso(raw, topic, 1) == 0                     # p1 still held
    r = txn(kafka, "describe-producers", "--topic", topic, "--partition", "0")
    assert table(r.out)[1][5] == "None", r

    # a read_committed consumer gets past the aborted records to one written after them
    from confluent_kafka import Consumer, Producer, TopicPartition
    plain = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    plain.produce(topic, b"after", partition=0)
    assert plain.flush(10) == 0
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 10
    while len(got) < 4 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append((m.offset(), m.value()))
    c.close()
    assert got == [(0, b"c0"), (1, b"c1"), (2, b"c2"), (start + 3, b"after")], got


def test_abort_with_producer_id_and_epoch(kafka, raw, open_txn):
    p, tid, topic, start = open_txn
    st = describe_producers(raw, topic, [1])[1].active_producers[0]
    r = txn(kafka, "abort", "--topic", topic, "--partition", "1", "--producer-id", st.producer_id)
    assert r.rc == 1 and r.err.strip() == "Missing required argument --producer-epoch", r
    r = txn(kafka, "abort", "--topic", topic, "--partition", "1", "--producer-id", st.producer_id,
            "--producer-epoch", st.producer_epoch)
    assert r.rc == 1 and r.err.strip() == "Missing required argument --coordinator-epoch", r
    r = txn(kafka, "abort", "--topic", topic, "--partition", "1")
    assert r.rc == 1 and r.err.startswith("The transaction to abort must be identified either with"), r
    # an epoch older than the producer's is refused with Kafka's text
    spec = (f"AbortTransactionSpec(topicPartition={topic}-1, producerId={st.producer_id}, producerEpoch=-1, "
            f"coordinatorEpoch=0)")
    r = txn(kafka, "abort", "--topic", topic, "--partition", "1", "--producer-id", st.producer_id,
            "--producer-epoch", "-1", "--coordinator-epoch", "-1")
    assert r.rc == 1 and r.err.strip() == (f"Failed to abort transaction {spec}: WriteTxnMarkers request with "
                                           f"{spec} failed due an invalid producer epoch{DEBUG_HINT}"), r
    r = txn(kafka, "abort", "--topic", topic, "--partition", "1", "--producer-id", st.producer_id,
            "--producer-epoch", st.producer_epoch, "--coordinator-epoch", st.coordinator_epoch)
    assert r.rc == 0, r
    assert lso(raw, topic, 1) == 2


# ------------------------------------------------------------------------------ idempotent
def test_idempotent_producer_appears_with_its_last_sequence(kafka, raw):
    from confluent_kafka import Producer
    topic = create_topic(kafka, partitions=1)
    p = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(7):
        p.produce(topic, f"v{i}".encode(), partition=0)
        p.flush(10)          # one batch each: last sequence 6
    r = txn(kafka, "describe-producers", "--topic", topic, "--partition", "0")
    assert r.rc == 0, r
    rows = table(r.out)[1:]
    assert len(rows) == 1 and rows[0][1:4] == ["0", "-1", "6"] and rows[0][5] == "None", rows
    assert int(rows[0][0]) >= 0


# ------------------------------------------------------------------------------ errors
def test_describe_producers_errors(kafka, raw):
    topic = create_topic(kafka, partitions=1)
    r = txn(kafka, "describe-producers", "--topic", topic, "--partition", "5")
    assert r.rc == 1 and r.err.strip() == (f"Failed to describe producers for partition {topic}-5 on leader: "
                                           f"This server does not host this topic-partition..{DEBUG_HINT[1:]}"), r
    r = txn(kafka, "describe-producers", "--topic", "no-such-topic-x", "--partition", "0")
    assert r.rc == 1 and "no-such-topic-x-0 on leader" in r.err and "does not host" in r.err, r
    r = txn(kafka, "describe-producers", "--topic", topic, "--partition", "0", "--broker-id", "9")
    assert r.rc == 1 and f"partition {topic}-0 on broker 9:" in r.err, r
    # the wire answers (a broker that is asked directly)
    parts = describe_producers(raw, topic, [0, 5])
    assert parts[0].error_code == E.NONE and list(parts[0].active_producers) == []
    assert parts[5].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    parts = describe_producers(raw, "no-such-topic-y", [0])
    assert parts[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    parts = describe_producers(raw, "bad/name", [0])
    assert parts[0].error_code == E.INVALID_TOPIC_EXCEPTION and "illegal" in parts[0].error_message


def test_describe_unknown_transactional_id(kafka):
    r = txn(kafka, "describe", "--transactional-id", "nobody-here")
    assert r.rc == 1 and r.err.strip() == (
        "Failed to describe transaction state of transactional-id `nobody-here`: DescribeTransactions "
        f"request for transactionalId `nobody-here` failed because the ID could not be found{DEBUG_HINT}"), r


# ------------------------------------------------------------------------------ find-hanging
def test_find_hanging_and_abort(kafka, raw, open_txn):
    p, tid, live_topic, _ = open_txn
    topic = create_topic(kafka, partitions=2)
    # an idempotent producer id writes a transactional batch no coordinator knows about, with
    # timestamps two hours old: the transaction is hanging (Produce v11: from v12 the leader asks
    # the coordinator to add the partition even with verification off, as Kafka 4.x does)
    r = raw(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000))
    assert r.error_code == 0
    pid, epoch = r.producer_id, r.producer_epoch
    old = int(time.time() * 1000) - 2 * 3600_000
    batch = rec.build_batch([(None, b"h0"), (None, b"h1")], producer_id=pid, producer_epoch=epoch,
                            base_sequence=0, is_transactional=True, base_timestamp=old, max_timestamp=old)
    resp = raw(PR(transactional_id="ghost", acks=-1, timeout_ms=5000, topic_data=[PR.TopicProduceData(
        name=topic, partition_data=[PR.PartitionProduceData(index=1, records=batch)])]), version=11)
    assert resp.responses[0].partition_responses[0].error_code == 0

    r = txn(kafka, "find-hanging")
    assert r.rc == 1 and r.err.strip() == ("The `find-hanging` command requires either --topic or --broker-id "
                                           "to limit the scope of the search"), r
    r = txn(kafka, "find-hanging", "--partition", "1", "--broker-id", node_id(raw))
    assert r.rc == 1 and r.err.strip() == "The --partition argument requires --topic to be provided", r

    for args in (["--broker-id", node_id(raw)], ["--topic", topic], ["--topic", topic, "--partition", "1"]):
        r = txn(kafka, "find-hanging", *args)
        assert r.rc == 0, r
        head, *rows = table(r.out)
        assert head == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                        "LastTimestamp", "Duration(min)"]
        assert rows == [[topic, "1", str(pid), str(epoch), "-1", "0", str(old), "120"]] or \
            rows == [[topic, "1", str(pid), str(epoch), "-1", "0", str(old), "121"]], (args, rows)
    # the confluent transaction is open but not hanging: not listed even with no timeout allowance
    r = txn(kafka, "find-hanging", "--topic", live_topic, "--max-transaction-timeout", "0")
    assert r.rc == 0 and len(table(r.out)) == 1, r
    r = txn(kafka, "find-hanging", "--topic", topic, "--partition", "0")
    assert r.rc == 0 and len(table(r.out)) == 1, r

    assert lso(raw, topic, 1) == 0
    r = txn(kafka, "abort", "--topic", topic, "--partition", "1", "--start-offset", "0")
    assert r.rc == 0, r
    assert lso(raw, topic, 1) == 3
    r = txn(kafka, "find-hanging", "--topic", topic)
    assert r.rc == 0 and len(table(r.out)) == 1, r


def test_api_versions_advertises_describe_producers(kafka):
    from tests.tools.conftest import broker_apis
    assert broker_apis(kafka.bootstrap)[61] == (0, 0)


# ------------------------------------------------------------------------------ handler on fakes
def test_handler_not_leader_or_follower_and_follower_answers(tmp_path):
    from broker.handlers.producers import describe_producers as handle
    from storage.producer_state import BatchMetadata, ProducerStateManager, ProducerStateEntry
    psm = ProducerStateManager(str(tmp_path))
    e = ProducerStateEntry(42, producer_epoch=3, coordinator_epoch=7, current_txn_first_offset=10,
                           last_timestamp=1234)
    e.batches.append(BatchMetadata(last_seq=9, last_offset=11, offset_delta=1, timestamp=1234))
    psm.producers[42] = e
    psm.producers[43] = ProducerStateEntry(43, producer_epoch=0)
    follower = SimpleNamespace(is_leader=False, offline=False, log=SimpleNamespace(producer_state=psm))
    # a replica whose log dir failed answers KAFKA_STORAGE_ERROR (broker/replica.py, mark_offline)
    offline = SimpleNamespace(is_leader=False, offline=True, log=None)
    replicas = {("t", 0): follower, ("t", 1): offline}
    broker = SimpleNamespace(
        controller=SimpleNamespace(topic=lambda name: SimpleNamespace(partitions={0: None, 1: None, 3: None})
                                   if name == "t" else None),
        replicas=SimpleNamespace(get=lambda t, p: replicas.get((t, p))))
    req = DPR(topics=[DPR.TopicRequest(name="t", partition_indexes=[0, 1, 2, 3]),
                      DPR.TopicRequest(name="u", partition_indexes=[0])])
    resp = asyncio.run(handle(SimpleNamespace(broker=broker, api_version=0), req))
    resp.encode(0)
    t, u = resp.topics
    p0, p1, p2, p3 = t.partitions
    assert p0.error_code == 0          # a follower answers from its own log, as in Kafka
    a, b = p0.active_producers
    assert (a.producer_id, a.producer_epoch, a.last_sequence, a.last_timestamp, a.coordinator_epoch,
            a.current_txn_start_offset) == (42, 3, 9, 1234, 7, 10)
    assert (b.producer_id, b.last_sequence, b.last_timestamp, b.coordinator_epoch,
            b.current_txn_start_offset) == (43, -1, -1, -1, -1)
    assert p1.error_code == E.KAFKA_STORAGE_ERROR
    assert p2.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert p3.error_code == E.NOT_LEADER_OR_FOLLOWER     # not hosted here
    assert u.partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION

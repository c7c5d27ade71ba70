"""Transaction APIs at the wire level (our own client, one broker process).

* ApiVersions advertises Kafka 3.9's ranges for the transaction APIs, and Kafka 4.x's EndTxn 5,
  TxnOffsetCommit 5 and WriteTxnMarkers 2 (transaction version 2);
* produce-side checks: a transactional batch for a partition not added to the transaction is
  refused (INVALID_TXN_STATE up to Produce v10, TRANSACTION_ABORTABLE at v11), a fenced epoch gets
  INVALID_PRODUCER_EPOCH, a transactional batch without a transactional id
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED; after AddPartitionsToTxn the same batch is accepted;
* AddPartitionsToTxn v4 verify-only answers per partition; unknown topics fail the request with
  UNKNOWN_TOPIC_OR_PARTITION / OPERATION_NOT_ATTEMPTED;
* WriteTxnMarkers (as another coordinator would send it) writes a marker that closes the
  producer's transaction: the last stable offset moves and a stale coordinator epoch is refused;
* ListTransactions / DescribeTransactions;
* TxnOffsetCommit before AddOffsetsToTxn: INVALID_TXN_STATE up to v3, TRANSACTION_ABORTABLE
  from v4 (KIP-890 part 1), as Kafka 3.9 answers; after it the offsets commit with the
  transaction (EndTxn v4);
* transaction version 2 (KIP-890 part 2): Produce v12+ and TxnOffsetCommit v5 add their partitions
  to the transaction, EndTxn v5 bumps the epoch and answers the next producer id and epoch (a
  retry one epoch behind gets the same answer), a batch of the old epoch is fenced by the bumped
  markers, and a WriteTxnMarkers v2 marker of version 2 must be above the open transaction's epoch.
"""
from __future__ import annotations

import asyncio

import pytest

from protocol import records as rec
from protocol.errors import ErrorCode as E
from protocol.messages import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest as APT, ApiVersionsRequest,
                               DescribeTransactionsRequest, EndTxnRequest, FindCoordinatorRequest,
                               InitProducerIdRequest, ListOffsetsRequest, ListTransactionsRequest, MetadataRequest,
                               OffsetFetchRequest, ProduceRequest as PR, TxnOffsetCommitRequest as TOC,
                               WriteTxnMarkersRequest as WTM)
from tests.integration.test_transactions import BROKER_PROPS, create_topic, unique
from tests.support.rawkafka import SyncClient
from tests.support.broker import running


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    from tests.support import BrokerProcess
    with running(BrokerProcess(tmp_path_factory.mktemp("txn-proto"), name="broker",
                               props=BROKER_PROPS)) as b:
        yield b


@pytest.fixture
def client(kafka):
    c = SyncClient(kafka.bootstrap)
    yield c
    c.close()


def init(client, tid, timeout_ms=60000):
    assert client(FindCoordinatorRequest(key=tid, key_type=1, coordinator_keys=[tid]), version=3).error_code == 0
    r = client(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms))
    assert r.error_code == 0, r
    return r.producer_id, r.producer_epoch


def add(client, tid, pid, epoch, topic, partitions=(0,)):
    r = client(APT(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                   v3_and_below_producer_epoch=epoch,
                   v3_and_below_topics=[APT.AddPartitionsToTxnTopic(name=topic, partitions=list(partitions))]),
               version=3)
    return {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def produce(client, topic, batch, tid, version=None):
    """One batch to partition 0; by default at v13, the topic named by its id."""
    named = {"name": topic} if version is not None and version < 13 else {"topic_id": topic_id(client, topic)}
    r = client(PR(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[PR.TopicProduceData(
        **named, partition_data=[PR.PartitionProduceData(index=0, records=batch)])]), version=version)
    pr = r.responses[0].partition_responses[0]
    return pr.error_code, pr.base_offset


def topic_id(client, topic):
    t = client(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                               allow_auto_topic_creation=False), version=12).topics[0]
    assert t.error_code == 0, t
    return t.topic_id


def txn_batch(pid, epoch, seq=0, values=(b"v",)):
    return rec.build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           is_transactional=True)


def lso(client, topic):
    req = ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    return client(req).topics[0].partitions[0].offset


def test_api_versions(client):
    r = client(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    got = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert got[22] == (0, 5) and got[24] == (0, 5) and got[25] == (0, 4) and got[26] == (0, 5)
    assert got[27] == (0, 2) and got[28] == (0, 5) and got[65] == (0, 0) and got[66] == (0, 2)
    assert got[61] == (0, 0)


def test_produce_requires_the_partition_in_the_transaction(kafka, client):
    topic = unique("verify")
    create_topic(kafka.bootstrap, topic)
    tid = unique("tid")
    pid, epoch = init(client, tid)
    assert produce(client, topic, txn_batch(pid, epoch), tid, version=9)[0] == E.INVALID_TXN_STATE
    assert produce(client, topic, txn_batch(pid, epoch), tid, version=11)[0] == E.TRANSACTION_ABORTABLE
    assert produce(client, topic, txn_batch(pid, epoch), None)[0] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce(client, topic, txn_batch(pid, epoch + 5), tid)[0] == E.INVALID_PRODUCER_EPOCH
    assert add(client, tid, pid, epoch, topic) == {(topic, 0): E.NONE}
    assert produce(client, topic, txn_batch(pid, epoch), tid) == (E.NONE, 0)
    assert produce(client, topic, txn_batch(pid, epoch, seq=1), tid) == (E.NONE, 1)
    assert lso(client, topic) == 0
    # verify-only (what a partition leader sends): per partition
    r = client(APT(transactions=[APT.AddPartitionsToTxnTransaction(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=True,
        topics=[APT.AddPartitionsToTxnTopic(name=topic, partitions=[0, 1])])]), version=4)
    res = {p.partition_index: p.partition_error_code for p in r.results_by_transaction[0].topic_results[0]
           .results_by_partition}
    assert r.error_code == 0 and res == {0: E.NONE, 1: E.TRANSACTION_ABORTABLE}
    d = client(DescribeTransactionsRequest(transactional_ids=[tid, unique("none")])).transaction_states
    assert d[0].transaction_state == "Ongoing" and [(t.topic, t.partitions) for t in d[0].topics] == [(topic, [0])]
    assert d[1].error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    listed = client(ListTransactionsRequest(state_filters=["Ongoing", "Nope"], producer_id_filters=[pid]))
    assert listed.unknown_state_filters == ["Nope"]
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [(tid, "Ongoing")]
    # v2 (KIP-1152): a pattern that matches the whole id, kafka-python's transactional_id_pattern
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        def ids(pattern):
            return {t.transactional_id for got in admin.list_transactions(transactional_id_pattern=pattern).values()
                    for t in got}
        assert tid in ids(tid[:4] + ".*") and tid in ids("")
        assert tid not in ids(tid[:4]) and not ids("no-such-.*")       # matched whole, not searched
    finally:
        admin.close()
    r = client(ListTransactionsRequest(state_filters=[], producer_id_filters=[], transactional_id_pattern="(x"),
               version=2)
    assert (r.error_code, r.transaction_states) == (E.INVALID_REGULAR_EXPRESSION, [])
    assert client(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                committed=True), version=4).error_code == 0
    for _ in range(50):
        if lso(client, topic) == 3:
            break
        asyncio.run(asyncio.sleep(0.05))
    assert lso(client, topic) == 3
    # a fenced epoch cannot write into the partition any more
    pid2, epoch2 = init(client, tid)
    assert pid2 == pid and epoch2 == epoch + 1
    assert produce(client, topic, txn_batch(pid, epoch, seq=2), tid)[0] == E.INVALID_PRODUCER_EPOCH


def test_txn_offset_commit_requires_the_offsets_partition_in_the_transaction(kafka, client):
    topic, group, tid = unique("toc"), unique("toc-group"), unique("tid")
    create_topic(kafka.bootstrap, topic)
    assert client(FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[group]),
                  version=3).error_code == 0
    pid, epoch = init(client, tid)

    def commit(version, offset=7):
        r = client(TOC(transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                       generation_id=-1, member_id="", group_instance_id=None, topics=[TOC.TxnOffsetCommitRequestTopic(
                           name=topic, partitions=[TOC.TxnOffsetCommitRequestPartition(
                               partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                               committed_metadata="")])]), version=version)
        return [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions]

    # the group's offsets partition is not in the transaction yet
    assert commit(3) == [(topic, 0, E.INVALID_TXN_STATE)]
    assert commit(4) == [(topic, 0, E.TRANSACTION_ABORTABLE)]
    r = client(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                      group_id=group), version=4)
    assert r.error_code == 0
    assert commit(4) == [(topic, 0, E.NONE)]
    assert client(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                committed=True), version=4).error_code == 0

    def committed():
        r = client(OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name=topic, partition_indexes=[0])], require_stable=True), version=7)
        return r.topics[0].partitions[0].committed_offset, r.topics[0].partitions[0].error_code

    for _ in range(50):
        if committed() == (7, 0):
            break
        asyncio.run(asyncio.sleep(0.05))
    assert committed() == (7, 0)


def wait_for(fn, value):
    for _ in range(100):
        if fn() == value:
            return
        asyncio.run(asyncio.sleep(0.05))
    assert fn() == value


def test_transaction_version_2(kafka, client):
    topic, group, tid = unique("tv2"), unique("tv2-group"), unique("tid")
    create_topic(kafka.bootstrap, topic)
    create_topic(kafka.bootstrap, topic + "-x")
    assert client(FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[group]),
                  version=3).error_code == 0
    pid, epoch = init(client, tid)
    # Kafka 4.x: a Produce v12+ transactional batch of a producer with no batches on the
    # partition must start at sequence 0
    assert produce(client, topic, txn_batch(pid, epoch, seq=3), tid, version=12)[0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    # Produce v12+ adds its partition; v11 still only verifies
    assert produce(client, topic, txn_batch(pid, epoch, values=(b"a", b"b")), tid, version=12) == (E.NONE, 0)
    assert produce(client, topic + "-x", txn_batch(pid, epoch), tid, version=11)[0] == E.TRANSACTION_ABORTABLE
    assert produce(client, topic, txn_batch(pid, epoch, seq=2), tid) == (E.NONE, 2)       # v13, already in

    def commit_offsets(version, pid, epoch, offset):
        r = client(TOC(transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                       generation_id=-1, member_id="", group_instance_id=None, topics=[TOC.TxnOffsetCommitRequestTopic(
                           name=topic, partitions=[TOC.TxnOffsetCommitRequestPartition(
                               partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                               committed_metadata="")])]), version=version)
        return [p.error_code for t in r.topics for p in t.partitions]

    assert commit_offsets(5, pid, epoch, 3) == [E.NONE]          # no AddOffsetsToTxn needed
    d = client(DescribeTransactionsRequest(transactional_ids=[tid])).transaction_states[0]
    assert sorted(t.topic for t in d.topics) == ["__consumer_offsets", topic]

    def end(pid, epoch, commit, version=5):
        """EndTxn, retried while the coordinator answers CONCURRENT_TRANSACTIONS (the previous
        completion's markers still going out), as clients retry it."""
        for _ in range(100):
            r = client(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit),
                       version=version)
            if r.error_code != E.CONCURRENT_TRANSACTIONS:
                break
            asyncio.run(asyncio.sleep(0.05))
        return r.error_code, r.producer_id, r.producer_epoch

    assert end(pid, epoch, True) == (E.NONE, pid, epoch + 1)
    assert end(pid, epoch, True) == (E.NONE, pid, epoch + 1)             # a retry
    assert end(pid, epoch, False) == (E.INVALID_TXN_STATE, -1, -1)
    wait_for(lambda: lso(client, topic), 4)

    def committed():
        r = client(OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name=topic, partition_indexes=[0])], require_stable=True), version=7)
        return r.topics[0].partitions[0].committed_offset

    wait_for(committed, 3)
    # the markers carried the bumped epoch: a late batch of the finished transaction is fenced
    assert produce(client, topic, txn_batch(pid, epoch, seq=3), tid, version=12)[0] == E.INVALID_PRODUCER_EPOCH
    # the next transaction runs at the new epoch from sequence 0 (CONCURRENT_TRANSACTIONS, retried,
    # while the last one's completion is still being written)
    for _ in range(100):
        got = produce(client, topic, txn_batch(pid, epoch + 1), tid, version=12)
        if got[0] != E.CONCURRENT_TRANSACTIONS:
            break
        asyncio.run(asyncio.sleep(0.05))
    assert got == (E.NONE, 4)
    # a version 2 marker at the open transaction's own epoch is refused (it must be above it)
    r = client(WTM(markers=[WTM.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch + 1, transaction_result=False, coordinator_epoch=0, transaction_version=2,
        topics=[WTM.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])]), version=2)
    assert r.markers[0].topics[0].partitions[0].error_code == E.INVALID_PRODUCER_EPOCH
    assert end(pid, epoch + 1, False) == (E.NONE, pid, epoch + 2)
    wait_for(lambda: lso(client, topic), 6)
    assert end(pid, epoch + 2, False) == (E.NONE, pid, epoch + 3)     # an abort with nothing added


def test_add_partitions_unknown_topic(kafka, client):
    topic = unique("known")
    create_topic(kafka.bootstrap, topic)
    tid = unique("tid")
    pid, epoch = init(client, tid)
    r = client(APT(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                   v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                       APT.AddPartitionsToTxnTopic(name=topic, partitions=[0]),
                       APT.AddPartitionsToTxnTopic(name=unique("missing"), partitions=[0])]), version=3)
    errs = sorted(p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition)
    assert errs == sorted([E.OPERATION_NOT_ATTEMPTED, E.UNKNOWN_TOPIC_OR_PARTITION])
    # old clients get INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED
    assert add(client, tid, pid, epoch + 1, topic) == {(topic, 0): E.PRODUCER_FENCED}
    r = client(APT(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                   v3_and_below_producer_epoch=epoch + 1,
                   v3_and_below_topics=[APT.AddPartitionsToTxnTopic(name=topic, partitions=[0])]), version=1)
    assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == \
        E.INVALID_PRODUCER_EPOCH


def test_write_txn_markers_from_a_coordinator(kafka, client):
    topic = unique("wtm")
    create_topic(kafka.bootstrap, topic)
    # an idempotent-style transactional producer whose coordinator is "elsewhere": verification
    # is skipped because the partition already has its open transaction after the first append
    tid = unique("tid")
    pid, epoch = init(client, tid)
    add(client, tid, pid, epoch, topic)
    assert produce(client, topic, txn_batch(pid, epoch, values=(b"a", b"b")), tid) == (E.NONE, 0)
    assert lso(client, topic) == 0

    def marker(commit, coordinator_epoch, partitions=(0,), name=topic):
        r = client(WTM(markers=[WTM.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
            topics=[WTM.WritableTxnMarkerTopic(name=name, partition_indexes=list(partitions))])]))
        return {(t.name, p.partition_index): p.error_code for m in r.markers for t in m.topics for p in t.partitions}

    assert marker(True, 5) == {(topic, 0): E.NONE}
    assert lso(client, topic) == 3
    assert marker(False, 4) == {(topic, 0): E.TRANSACTION_COORDINATOR_FENCED}
    missing = unique("nope")
    assert marker(True, 5, name=missing) == {(missing, 0): E.UNKNOWN_TOPIC_OR_PARTITION}


def test_marker_sender_and_verification_over_the_wire(kafka, client):
    """The coordinator-side client paths (WriteTxnMarkers to a remote leader, AddPartitionsToTxn v4
    verify-only to a remote coordinator), aimed at the real broker from a pretend broker 99."""
    from types import SimpleNamespace as NS

    from broker.txn.markers import MarkerSender
    topic = unique("remote")
    create_topic(kafka.bootstrap, topic, partitions=3)
    tid = unique("tid")
    pid, epoch = init(client, tid)
    add(client, tid, pid, epoch, topic)
    assert produce(client, topic, txn_batch(pid, epoch), tid) == (E.NONE, 0)
    host, port = kafka.bootstrap.rsplit(":", 1)
    part = NS(leader=0)
    pretend = NS(
        broker_id=99,
        config=NS(get=lambda k: {"request.timeout.ms": 10000}[k], inter_broker_listener_name=lambda: "PLAINTEXT"),
        controller=NS(topic=lambda t: NS(partitions={0: part}) if t == topic else None,
                      brokers=lambda: [NS(id=0, endpoints=[("PLAINTEXT", host, int(port), "PLAINTEXT")])]))

    async def go():
        sender = MarkerSender(pretend)
        try:
            v = await sender.ask_coordinator(0, tid, pid, epoch, (topic, 0))
            v_missing = await sender.ask_coordinator(0, tid, pid, epoch, (topic, 3))
            added = await sender.ask_coordinator(0, tid, pid, epoch, (topic, 2), verify_only=False)
            v_added = await sender.ask_coordinator(0, tid, pid, epoch, (topic, 2))
            res = await sender.send(pid, epoch, 0, True, {(topic, 0), (unique("gone"), 0)})
            return v, v_missing, (added, v_added), res
        finally:
            await sender.close()
    v, v_missing, added, res = asyncio.run(go())
    assert v == E.NONE and v_missing == E.TRANSACTION_ABORTABLE
    assert added == (E.NONE, E.NONE)        # transaction version 2's add, then found by a verify
    assert res[(topic, 0)] == E.NONE and sorted(res.values()) == [E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert lso(client, topic) == 2

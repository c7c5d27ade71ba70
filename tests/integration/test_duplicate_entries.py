"""Requests that name the same partition, topic or user twice, answered as Kafka 3.9 answers them.

Kafka reads Produce, Fetch, DeleteRecords and AlterPartitionReassignments requests into maps keyed
by partition: a partition named twice counts once, where it first appears, with its last entry
(a produce request writes the last batch once).  ListOffsets v1+ answers every entry of a
duplicated partition INVALID_REQUEST.  Fetch answers in runs of consecutive partitions of one
topic, so a topic named apart is answered in as many entries (Produce answers it once).
Metadata and OffsetFetch answer a name once, and CreatePartitions answers a topic named twice
once, INVALID_REQUEST.  DescribeUserScramCredentials refuses an empty user name before it looks
for duplicates.  (Clients never send such requests;
the random requests of tests/integration/test_request_fuzz.py do.)
"""
from __future__ import annotations

import time

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (AlterPartitionReassignmentsRequest, CreatePartitionsRequest, DeleteRecordsRequest,
                               DescribeUserScramCredentialsRequest, FetchRequest, FindCoordinatorRequest,
                               ListOffsetsRequest, OffsetFetchRequest, ProduceRequest)
from protocol.records import build_batch, iter_batches, iter_records
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.rawkafka import RawConnection


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("dups"), name="broker",
                               props={"num.partitions": 3, "log.retention.ms": -1})) as b:
        yield b


def _batch(value: bytes) -> bytes:
    return build_batch([(None, value, (), 1_700_000_000_000)])


def _values(records: bytes) -> list[bytes]:
    data = bytes(records or b"")
    return [r.value for h in iter_batches(data) for r in iter_records(data, h)]


def test_produce_writes_a_partition_named_twice_once_with_its_last_batch(kafka):
    P, T = ProduceRequest.PartitionProduceData, ProduceRequest.TopicProduceData
    with RawConnection(kafka.host, kafka.port) as c:
        assert c.metadata(["pd"]).topics[0].error_code == 0
        r = c.request(0, 9, ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
            T(name="pd", partition_data=[P(index=0, records=_batch(b"a")), P(index=0, records=_batch(b"b"))]),
            T(name="pd", partition_data=[P(index=1, records=_batch(b"c"))]),
            T(name="pd", partition_data=[P(index=1, records=_batch(b"d")), P(index=2, records=_batch(b"e"))])]))
        assert [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
                for t in r.responses] == [("pd", [(0, 0, 0), (1, 0, 0), (2, 0, 0)])]
        assert _values(c.fetch("pd", 0, 0).records) == [b"b"]
        assert _values(c.fetch("pd", 1, 0).records) == [b"d"]
        assert _values(c.fetch("pd", 2, 0).records) == [b"e"]


def test_fetch_answers_a_partition_named_twice_once_from_its_last_position(kafka):
    with RawConnection(kafka.host, kafka.port) as c:
        assert c.metadata(["fd"]).topics[0].error_code == 0
        for v in (b"x0", b"x1", b"x2"):
            assert c.produce("fd", 0, _batch(v)).error_code == 0
        for version, session_epoch in ((4, -1), (12, -1), (12, 0)):
            parts = c.fetch_partitions("fd", [(0, 0, 1 << 20), (1, 0, 1 << 20), (0, 2, 1 << 20)], version=version) \
                if session_epoch == -1 else None
            if parts is None:       # a new fetch session (epoch 0) with the duplicate
                body = FetchRequest(
                    cluster_id=None, replica_id=-1, replica_state=None, max_wait_ms=0, min_bytes=1,
                    max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=0,
                    topics=[FetchRequest.FetchTopic(topic="fd", partitions=[FetchRequest.FetchPartition(
                        partition=p, current_leader_epoch=-1, fetch_offset=o, last_fetched_epoch=-1,
                        log_start_offset=-1, partition_max_bytes=1 << 20) for p, o in ((0, 0), (1, 0), (0, 2))])],
                    forgotten_topics_data=[], rack_id="")
                parts = c.request(1, version, body).responses[0].partitions
            assert [p.partition_index for p in parts] == [0, 1], version
            assert _values(parts[0].records) == [b"x2"], version


def test_fetch_answers_a_topic_named_apart_in_runs_as_kafka(kafka):
    """Unlike Produce, Kafka's Fetch answer starts a topic entry wherever the topic changes
    (FetchResponse.of): a topic whose partitions are named apart is answered twice."""
    def topic(name, partitions):
        return FetchRequest.FetchTopic(topic=name, partitions=[FetchRequest.FetchPartition(
            partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20) for p in partitions])
    with RawConnection(kafka.host, kafka.port) as c:
        for t in ("fa", "fb"):
            assert c.metadata([t]).topics[0].error_code == 0
        assert c.produce("fa", 1, _batch(b"a1")).error_code == 0
        r = c.request(1, 12, FetchRequest(
            cluster_id=None, replica_id=-1, replica_state=None, max_wait_ms=0, min_bytes=1,
            max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[topic("fa", [0]), topic("fb", [0, 1]), topic("fa", [1, 0])],
            forgotten_topics_data=[], rack_id=""))
        assert [(t.topic, [p.partition_index for p in t.partitions]) for t in r.responses] == \
            [("fa", [0]), ("fb", [0, 1]), ("fa", [1])]
        assert _values(r.responses[2].partitions[0].records) == [b"a1"]


def test_delete_records_takes_the_last_offset_of_a_partition_named_twice(kafka):
    P, T = DeleteRecordsRequest.DeleteRecordsPartition, DeleteRecordsRequest.DeleteRecordsTopic
    with RawConnection(kafka.host, kafka.port) as c:
        assert c.metadata(["dr"]).topics[0].error_code == 0
        for i in range(4):
            assert c.produce("dr", 0, _batch(b"%d" % i)).error_code == 0
        r = c.request(21, 2, DeleteRecordsRequest(timeout_ms=10000, topics=[
            T(name="dr", partitions=[P(partition_index=0, offset=3), P(partition_index=0, offset=1)]),
            T(name="dr", partitions=[P(partition_index=1, offset=0)])]))
        assert [(t.name, [(p.partition_index, p.low_watermark, p.error_code) for p in t.partitions])
                for t in r.topics] == [("dr", [(0, 1, 0), (1, 0, 0)])]
        assert c.list_offsets("dr", 0, -2).offset == 1


@pytest.mark.parametrize("version", [1, 7])
def test_list_offsets_refuses_every_entry_of_a_duplicated_partition(kafka, version):
    P, T = ListOffsetsRequest.ListOffsetsPartition, ListOffsetsRequest.ListOffsetsTopic
    with RawConnection(kafka.host, kafka.port) as c:
        assert c.metadata(["lo"]).topics[0].error_code == 0
        assert c.produce("lo", 0, _batch(b"v")).error_code == 0

        def part(i, ts=-1):
            return P(partition_index=i, current_leader_epoch=-1, timestamp=ts, max_num_offsets=1)
        r = c.request(2, version, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            T(name="lo", partitions=[part(0), part(0), part(1)])]))
        got = [(p.partition_index, p.error_code, p.offset) for p in r.topics[0].partitions]
        assert got == [(0, E.INVALID_REQUEST, -1), (0, E.INVALID_REQUEST, -1), (1, 0, 0)]
        # v0 has no such check: both entries answered
        r = c.request(2, 0, ListOffsetsRequest(replica_id=-1, topics=[T(name="lo", partitions=[part(0), part(0)])]))
        got = [(p.error_code, list(p.old_style_offsets)) for p in r.topics[0].partitions]
        assert len(got) == 2 and got[0] == got[1] and got[0][0] == 0 and got[0][1][0] >= 1, got


@pytest.mark.parametrize("ts, since", [(-3, 7), (-4, 8), (-5, 9), (-6, 11), (-7, None)])
def test_list_offsets_special_timestamps_need_their_version(kafka, ts, since):
    """Kafka answers a special (negative) timestamp from before its version UNSUPPORTED_VERSION,
    and an unknown one always."""
    with RawConnection(kafka.host, kafka.port) as c:
        assert c.metadata(["lo"]).topics[0].error_code == 0
        for v in (1, 6, 7, 8, 9, 10, 11):
            r = c.list_offsets("lo", 0, ts, version=v)
            want = E.UNSUPPORTED_VERSION if since is None or v < since else E.NONE
            assert r.error_code == want, (ts, v)
            # latest tiered and (v11) earliest pending upload, without tiered storage: none, as Kafka
            if ts in (-5, -6) and want == E.NONE:
                assert (r.timestamp, r.offset, r.leader_epoch) == (-1, -1, -1)


def test_metadata_answers_a_topic_named_twice_once(kafka):
    with RawConnection(kafka.host, kafka.port) as c:
        for version in (0, 4, 12):
            r = c.metadata(["md", "md", "md-new", "md-new", "md"], version=version)
            assert [t.name for t in r.topics] == ["md", "md-new"], version


def test_offset_fetch_answers_a_partition_asked_twice_once(kafka):
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    with RawConnection(kafka.host, kafka.port) as c:
        assert c.metadata(["of"]).topics[0].error_code == 0
        deadline = time.monotonic() + 30      # the group coordinator is up once it is found
        while c.request(10, 1, FindCoordinatorRequest(key="g-of", key_type=0)).error_code:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        for version in (1, 7):
            r = c.request(9, version, OffsetFetchRequest(group_id="g-of", require_stable=False, topics=[
                T(name="of", partition_indexes=[0, 0, 1]), T(name="of", partition_indexes=[1, 2])]))
            assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == [("of", [0, 1, 2])]
        G, GT = OffsetFetchRequest.OffsetFetchRequestGroup, OffsetFetchRequest.OffsetFetchRequestTopics
        r = c.request(9, 8, OffsetFetchRequest(require_stable=False, groups=[
            G(group_id="g-of", topics=[GT(name="of", partition_indexes=[0, 0])])]))
        assert [[p.partition_index for p in t.partitions] for t in r.groups[0].topics] == [[0]]


def test_create_partitions_answers_a_topic_named_twice_once(kafka):
    T = CreatePartitionsRequest.CreatePartitionsTopic
    with RawConnection(kafka.host, kafka.port) as c:
        assert c.metadata(["cp"]).topics[0].error_code == 0
        r = c.request(37, 3, CreatePartitionsRequest(timeout_ms=10000, validate_only=False, topics=[
            T(name="cp", count=4, assignments=None), T(name="cp", count=5, assignments=None),
            T(name="cp-none", count=2, assignments=None), T(name="cp-none", count=2, assignments=None)]))
        assert [(t.name, t.error_code, t.error_message) for t in r.results] == [
            ("cp", E.INVALID_REQUEST, "Duplicate topic in request."),
            ("cp-none", E.INVALID_REQUEST, "Duplicate topic in request.")]
        assert len(c.metadata(["cp"]).topics[0].partitions) == 3


def test_reassignment_of_a_partition_named_twice_is_its_last_entry(kafka):
    T, P = AlterPartitionReassignmentsRequest.ReassignableTopic, AlterPartitionReassignmentsRequest.ReassignablePartition
    with RawConnection(kafka.host, kafka.port) as c:
        assert c.metadata(["ra"]).topics[0].error_code == 0
        r = c.request(45, 0, AlterPartitionReassignmentsRequest(timeout_ms=10000, topics=[
            T(name="ra", partitions=[P(partition_index=0, replicas=[0]),
                                     P(partition_index=0, replicas=None)]),
            T(name="ra", partitions=[P(partition_index=1, replicas=[0])])]))
        got = [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.responses]
        # the last entry for partition 0 cancels a reassignment that is not in progress
        assert got == [("ra", [(0, E.NO_REASSIGNMENT_IN_PROGRESS), (1, 0)])]


def test_describe_scram_refuses_an_empty_user_before_duplicates(kafka):
    U = DescribeUserScramCredentialsRequest.UserName
    with RawConnection(kafka.host, kafka.port) as c:
        r = c.request(50, 0, DescribeUserScramCredentialsRequest(users=[U(name=""), U(name=""), U(name="nobody")]))
        assert [(x.user, x.error_code, x.error_message) for x in r.results] == [
            ("", E.RESOURCE_NOT_FOUND, "Username must not be empty"),
            ("nobody", E.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody")]


def test_alter_client_quotas_answers_an_entity_named_twice_once_after_both(kafka):
    from protocol.messages import AlterClientQuotasRequest as AQ, DescribeClientQuotasRequest as DQ

    def entry(rate):
        return AQ.EntryData(entity=[AQ.EntityData(entity_type="user", entity_name="dup-q")],
                            ops=[AQ.OpData(key="producer_byte_rate", value=rate, remove=False)])
    with RawConnection(kafka.host, kafka.port) as c:
        r = c.request(49, 1, AQ(entries=[entry(1000.0), entry(3000.0)], validate_only=False))
        assert [(e.error_code, [(x.entity_type, x.entity_name) for x in e.entity]) for e in r.entries] == \
            [(0, [("user", "dup-q")])]
        r = c.request(48, 1, DQ(components=[DQ.ComponentData(entity_type="user", match_type=0, match="dup-q")],
                                strict=True))
        assert [(v.key, v.value) for e in r.entries for v in e.values] == [("producer_byte_rate", 3000.0)]

"""Share groups (KIP-932) on a real broker, driven by confluent-kafka's ShareConsumer (librdkafka
2.16, ShareGroupHeartbeat/ShareFetch/ShareAcknowledge v1) and by raw requests.

Queue semantics: members of one share group read the same partitions and each record goes to one
member at a time; a record released, or whose acquisition lock runs out, is delivered again with
a higher delivery count, up to ``group.share.delivery.count.limit``; accepted records are never
delivered again, also after the broker restarts (``__share_group_state``)."""
from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (DescribeShareGroupOffsetsRequest, ShareAcknowledgeRequest, ShareFetchRequest,
                               ShareGroupDescribeRequest, ShareGroupHeartbeatRequest)
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.net import wait_for
from tests.support.rawkafka import RawConnection

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LOCK_MS = 2000
PROPS = {"num.partitions": 1, "group.share.record.lock.duration.ms": LOCK_MS,
         "group.share.min.record.lock.duration.ms": 1000, "group.share.delivery.count.limit": 3,
         "share.coordinator.state.topic.num.partitions": 5}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("share"), name="broker", props=PROPS)) as b:
        yield b


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(b, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)


def produce(b, topic: str, values, partition: int | None = None, batch: int = 10000) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "batch.num.messages": batch})
    for v in values:
        if partition is None:
            p.produce(topic, value=v)
        else:
            p.produce(topic, value=v, partition=partition)
    assert p.flush(30) == 0


def share_consumer(b, group: str, topic: str, **conf) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": group, **conf})
    c.subscribe([topic])
    return c


def wait_assigned(c, b, group: str, members: int = 1, timeout: float = 30, started: bool = True) -> None:
    """Poll until the group has ``members`` members that hold partitions and (``started``) every
    share partition has its start offset (found by the first ShareFetch, as in Kafka: the high
    watermark then; records written before that are not for the group)."""
    def ready():
        c.poll(0.2)
        d = describe(b, group)
        if not (d.error_code == 0 and len(d.members) == members and all(
                m.assignment.topic_partitions for m in d.members)):
            return False
        if not started:
            return True
        starts = start_offsets(b, group)
        return bool(starts) and all(s >= 0 for s in starts.values())
    wait_for(ready, timeout, what=f"{members} assigned member(s) of {group}")


def start_offsets(b, group: str) -> dict:
    """{(topic, partition): start offset} of the group's share partitions (DescribeShareGroupOffsets;
    -1 for one initialized by a heartbeat whose first fetch has not come yet)."""
    D = DescribeShareGroupOffsetsRequest
    host, port = b.bootstrap.split(":")
    with RawConnection(host, int(port)) as c:
        g = c.request(90, 1, D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)])).groups[0]
    return {(t.topic_name, p.partition_index): p.start_offset for t in g.topics for p in t.partitions}


def describe(b, group: str):
    host, port = b.bootstrap.split(":")
    with RawConnection(host, int(port)) as c:
        return c.request(77, 1, ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)).groups[0]


def drain(consumers, want: int, timeout: float = 30, ack=None) -> dict:
    """Poll ``consumers`` in turns until ``want`` records came in (or the time is up); returns
    {consumer index: [(value, delivery count)]}."""
    got: dict = {i: [] for i in range(len(consumers))}
    deadline = time.time() + timeout
    while time.time() < deadline and sum(len(v) for v in got.values()) < want:
        for i, c in enumerate(consumers):
            for m in c.poll(0.3):
                assert m.error() is None, m.error()
                got[i].append((m.value(), m.delivery_count()))
                if ack is not None:
                    c.acknowledge(m, ack(m))
    return got


def test_one_member_reads_what_is_written_after_it_joined_once(kafka):
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 2)
    produce(kafka, topic, [b"before"])
    c = share_consumer(kafka, group, topic)
    try:
        wait_assigned(c, kafka, group)
        values = [f"v{i}".encode() for i in range(200)]
        produce(kafka, topic, values)
        got = drain([c], 200)[0]
        assert sorted(v for v, _ in got) == sorted(values)
        assert {n for _, n in got} == {1}
        assert not drain([c], 1, timeout=2)[0]              # accepted on the next poll: nothing comes back
    finally:
        c.close()
    d = describe(kafka, group)
    assert d.error_code == 0 and d.group_state == "Empty" and d.assignor_name == "simple"


def test_members_share_one_partition_without_duplicates(kafka):
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 1)
    cs = [share_consumer(kafka, group, topic, **{"max.poll.records": 20}) for _ in range(3)]
    try:
        for c in cs:
            c.poll(0.5)
        wait_assigned(cs[0], kafka, group, members=3)
        d = describe(kafka, group)
        assert all([tp.partitions for tp in m.assignment.topic_partitions] == [[0]] for m in d.members)
        values = [f"r{i}".encode() for i in range(600)]
        produce(kafka, topic, values, batch=10)      # whole batches are acquired: small ones to share
        got = drain(cs, 600, timeout=60)
        everything = [v for per in got.values() for v, _ in per]
        assert sorted(everything) == sorted(values)          # each record once, across the members
        assert sum(1 for per in got.values() if per) >= 2, {i: len(v) for i, v in got.items()}
    finally:
        for c in cs:
            c.close()


def test_release_reject_and_the_delivery_limit(kafka):
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 1)
    c = share_consumer(kafka, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        wait_assigned(c, kafka, group)
        produce(kafka, topic, [b"keep", b"retry", b"drop"])

        def decide(m):
            return {b"keep": AcknowledgeType.ACCEPT, b"retry": AcknowledgeType.RELEASE,
                    b"drop": AcknowledgeType.REJECT}[m.value()]
        got = drain([c], 5, timeout=20, ack=decide)[0]
        # "retry" is released twice and comes back with counts 1, 2, 3; the limit (3) archives it then
        assert sorted(got) == [(b"drop", 1), (b"keep", 1), (b"retry", 1), (b"retry", 2), (b"retry", 3)]
        c.commit_sync(10)
        assert not drain([c], 1, timeout=2, ack=decide)[0]
    finally:
        c.close()


def test_a_lock_that_runs_out_gives_the_record_to_another_member(kafka):
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 1)
    slow = share_consumer(kafka, group, topic, **{"share.acknowledgement.mode": "explicit"})
    fast = None
    try:
        wait_assigned(slow, kafka, group)
        produce(kafka, topic, [f"l{i}".encode() for i in range(10)])
        held = drain([slow], 10, timeout=20)[0]            # held, never acknowledged
        acquired_at = time.time()
        assert sorted(n for _, n in held) == [1] * 10
        fast = share_consumer(kafka, group, topic)
        got = drain([fast], 10, timeout=30)[0]
        assert sorted(got) == sorted((v, 2) for v, _ in held)
        assert time.time() - acquired_at >= (LOCK_MS - 300) / 1000     # not before the lock ran out
    finally:
        slow.close()
        if fast is not None:
            fast.close()


def test_accepted_records_stay_accepted_across_a_restart(tmp_path):
    b = BrokerProcess(tmp_path, name="broker", props=PROPS)
    b.start()
    try:
        topic, group = unique("sq"), unique("sg")
        create_topic(b, topic, 1)
        c = share_consumer(b, group, topic, **{"share.acknowledgement.mode": "explicit"})
        wait_assigned(c, b, group)
        values = [f"p{i}".encode() for i in range(20)]
        produce(b, topic, values)
        got = drain([c], 20)[0]
        c.close()                                            # nothing acknowledged: all released
        assert len(got) == 20
        c = share_consumer(b, group, topic, **{"share.acknowledgement.mode": "explicit"})
        second = []
        deadline = time.time() + 20
        while len(second) < 20 and time.time() < deadline:
            for m in c.poll(0.5):
                second.append((m.value(), m.delivery_count()))
                c.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 10 else AcknowledgeType.RELEASE)
        c.commit_sync(10)
        assert sorted(second) == sorted((v, 2) for v in values)
        c.close()
        b.stop()
        b.start()
        c = share_consumer(b, group, topic)
        try:
            again = drain([c], 10, timeout=30)[0]
            assert sorted(again) == sorted((v, 3) for v in values[10:])
            assert not drain([c], 1, timeout=2)[0]
        finally:
            c.close()
    finally:
        b.stop()


# --------------------------------------------------------------------------- raw requests
def _conn(b):
    host, port = b.bootstrap.split(":")
    return RawConnection(host, int(port))


def _topic_id(c, topic: str):
    return c.metadata([topic], version=12).topics[0].topic_id


def _heartbeat(c, group, member, epoch, topics=None):
    return c.request(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                       rack_id=None, subscribed_topic_names=topics))


def _fetch(c, group, member, epoch, tid=None, acks=None, wait=0, version=1, min_bytes=1, max_bytes=1 << 20,
           acquire_mode=0):
    F = ShareFetchRequest
    topics = []
    if tid is not None:
        topics = [F.FetchTopic(topic_id=tid, partitions=[F.FetchPartition(
            partition_index=0, partition_max_bytes=0, acknowledgement_batches=[
                F.AcknowledgementBatch(first_offset=a, last_offset=z, acknowledge_types=t) for a, z, t in acks or ()])])]
    return c.request(78, version, F(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=wait,
                                    min_bytes=min_bytes, max_bytes=max_bytes, max_records=500, batch_size=500,
                                    share_acquire_mode=acquire_mode, topics=topics, forgotten_topics_data=[]))


def _join_raw(c, b, group, topic):
    from protocol.messages import FindCoordinatorRequest
    member = uuid.uuid4().hex[:22]

    def joined():
        c.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))  # creates __consumer_offsets
        return _heartbeat(c, group, member, 0, [topic]).error_code == 0
    wait_for(joined, 30, what="the coordinator")
    return member


@contextlib.contextmanager
def _opened_session(kafka):
    """A new one-partition topic, a raw member of a new share group on it, and its share session
    opened (epoch 0): (connection, topic, group, topic id, member id)."""
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 1)
    with _conn(kafka) as c:
        tid = _topic_id(c, topic)
        member = _join_raw(c, kafka, group, topic)
        assert _fetch(c, group, member, 0, tid).error_code == 0
        yield c, topic, group, tid, member


def test_share_sessions_and_acknowledgements_answer_as_kafka(kafka):
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 1)
    with _conn(kafka) as c:
        tid = _topic_id(c, topic)
        member = _join_raw(c, kafka, group, topic)
        assert _fetch(c, group, member, 3, tid).error_code == E.SHARE_SESSION_NOT_FOUND
        assert _fetch(c, group, member, 0, tid, acks=[(0, 0, [1])]).error_code == E.INVALID_REQUEST
        r = _fetch(c, group, member, 0, tid)
        assert r.error_code == 0 and r.acquisition_lock_timeout_ms == LOCK_MS
        produce(kafka, topic, [b"a", b"b", b"c"])
        r = _fetch(c, group, member, 1, wait=5000)          # long poll, woken by the append
        p = r.responses[0].partitions[0]
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [(0, 2, 1)]
        assert _fetch(c, group, member, 1).error_code == E.INVALID_SHARE_SESSION_EPOCH
        r = _fetch(c, group, member, 2, tid, acks=[(0, 1, [1]), (5, 5, [1])])
        assert r.responses[0].partitions[0].acknowledge_error_code == E.INVALID_REQUEST       # 5 was never handed out
        r = _fetch(c, group, member, 3, tid, acks=[(0, 1, [1])])
        assert r.responses[0].partitions[0].acknowledge_error_code == 0
        r = _fetch(c, group, member, 4, tid, acks=[(0, 0, [2])])
        assert r.responses[0].partitions[0].acknowledge_error_code == 0      # already accepted: skipped, as Kafka
        A = ShareAcknowledgeRequest
        ack = A(group_id=group, member_id=member, share_session_epoch=0, topics=[])
        assert c.request(79, 1, ack).error_code == E.INVALID_SHARE_SESSION_EPOCH
        ack = A(group_id=group, member_id=member, share_session_epoch=-1, topics=[A.AcknowledgeTopic(
            topic_id=tid, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                A.AcknowledgementBatch(first_offset=2, last_offset=2, acknowledge_types=[3])])])])
        r = c.request(79, 1, ack)
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
        assert _fetch(c, group, member, 5).error_code == E.SHARE_SESSION_NOT_FOUND         # closed by -1


def test_an_unknown_acquire_mode_fails_the_fetch_after_its_acknowledgements(kafka):
    """ShareFetch v2 with an acquire mode other than 0 (batch-optimized) and 1 (record-limit):
    Kafka applies the request's acknowledgements, then fails the whole request when it looks the
    mode up to fetch (UNKNOWN_SERVER_ERROR, nothing acquired)."""
    with _opened_session(kafka) as (c, topic, group, tid, member):
        produce(kafka, topic, [b"a", b"b"])
        r = _fetch(c, group, member, 1, wait=5000)
        assert [(a.first_offset, a.last_offset) for a in r.responses[0].partitions[0].acquired_records] == [(0, 1)]
        r = _fetch(c, group, member, 2, tid, acks=[(0, 0, [1]), (1, 1, [2])], version=2, acquire_mode=7)
        assert (r.error_code, r.responses) == (E.UNKNOWN_SERVER_ERROR, [])
        assert start_offsets(kafka, group) == {(topic, 0): 1}            # offset 0 accepted
        r = _fetch(c, group, member, 3, version=2, acquire_mode=1)           # offset 1 was released
        assert [(a.first_offset, a.last_offset, a.delivery_count)
                for a in r.responses[0].partitions[0].acquired_records] == [(1, 1, 2)]


def test_share_fetch_waits_for_min_bytes(kafka):
    """MinBytes, as Kafka's delayed share fetch: a fetch acquires nothing until MinBytes are there
    to read, then takes them all in one answer; when MaxWaitMs passes first it takes what there
    is."""
    import threading
    with _opened_session(kafka) as (c, topic, group, tid, member):
        produce(kafka, topic, [b"small"])
        answer: list = []
        waiting = threading.Thread(target=lambda: answer.append(
            _fetch(c, group, member, 1, wait=60_000, min_bytes=4000)))
        waiting.start()
        waiting.join(1.0)
        assert waiting.is_alive() and not answer          # 1 record of some 80 bytes is not enough
        produce(kafka, topic, [b"x" * 1000 for _ in range(5)], batch=1)
        waiting.join(30)
        p = answer[0].responses[0].partitions[0]
        assert [(a.first_offset, a.last_offset) for a in p.acquired_records] == [(0, 5)]
        produce(kafka, topic, [b"lone"])
        r = _fetch(c, group, member, 2, wait=300, min_bytes=1 << 20)      # MaxWaitMs passes: what there is
        assert [(a.first_offset, a.last_offset) for a in r.responses[0].partitions[0].acquired_records] == [(6, 6)]
        produce(kafka, topic, [b"y" * 1000 for _ in range(2)], batch=1)
        r = _fetch(c, group, member, 3, wait=60_000, min_bytes=1 << 30, max_bytes=1500)   # MinBytes capped at MaxBytes
        assert [(a.first_offset, a.last_offset) for a in r.responses[0].partitions[0].acquired_records] == [(7, 7)]


def test_a_late_acknowledgement_after_another_member_accepted_is_refused(kafka):
    """Member A's lock runs out, member B is handed the record and accepts it: A's late ACCEPT
    is INVALID_RECORD_STATE, as Kafka answers once the batch left its cache."""
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 1)
    with _conn(kafka) as a_conn, _conn(kafka) as b_conn:
        tid = _topic_id(a_conn, topic)
        a = _join_raw(a_conn, kafka, group, topic)
        b = _join_raw(b_conn, kafka, group, topic)
        assert _fetch(a_conn, group, a, 0, tid).error_code == 0
        assert _fetch(b_conn, group, b, 0, tid).error_code == 0
        produce(kafka, topic, [b"once"])
        r = _fetch(a_conn, group, a, 1, wait=5000)
        assert [(x.first_offset, x.delivery_count) for x in r.responses[0].partitions[0].acquired_records] == [(0, 1)]
        r = _fetch(b_conn, group, b, 1, wait=LOCK_MS + 5000)             # A's lock runs out first
        assert [(x.first_offset, x.delivery_count) for x in r.responses[0].partitions[0].acquired_records] == [(0, 2)]
        r = _fetch(b_conn, group, b, 2, tid, acks=[(0, 0, [1])])
        assert r.responses[0].partitions[0].acknowledge_error_code == 0
        r = _fetch(a_conn, group, a, 2, tid, acks=[(0, 0, [1])])
        assert r.responses[0].partitions[0].acknowledge_error_code == E.INVALID_RECORD_STATE


def test_a_closed_connection_releases_what_its_session_held(kafka):
    with _opened_session(kafka) as (c, topic, group, tid, member):
        produce(kafka, topic, [b"x", b"y"])
        r = _fetch(c, group, member, 1, wait=5000)
        assert r.responses[0].partitions[0].acquired_records[0].last_offset == 1
    closed_at = time.time()
    with _conn(kafka) as c:
        other = _join_raw(c, kafka, group, topic)

        def redelivered():
            r = _fetch(c, group, other, redelivered.epoch, tid if redelivered.epoch == 0 else None, wait=200)
            assert r.error_code == 0
            redelivered.epoch += 1
            ps = [p for t in r.responses for p in t.partitions if p.acquired_records]
            return ps and [(a.first_offset, a.last_offset, a.delivery_count) for a in ps[0].acquired_records]
        redelivered.epoch = 0
        assert wait_for(redelivered, 10, what="the released records") == [(0, 1, 2)]
        assert time.time() - closed_at < LOCK_MS / 1000          # released at the close, not by the lock


def test_heartbeat_errors_and_group_types(kafka):
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 1)
    with _conn(kafka) as c:
        assert _heartbeat(c, "", "m", 0, [topic]).error_code == E.INVALID_REQUEST
        assert _heartbeat(c, group, "", 0, [topic]).error_code == E.INVALID_REQUEST
        member = _join_raw(c, kafka, group, topic)
        r = _heartbeat(c, group, member, 0, [topic])
        assert r.error_code == 0 and r.member_epoch >= 1 and r.heartbeat_interval_ms == 5000
        assert _heartbeat(c, group, "nobody", 1).error_code == E.UNKNOWN_MEMBER_ID
        assert _heartbeat(c, group, member, r.member_epoch + 5).error_code == E.FENCED_MEMBER_EPOCH
        # the group id is a share group's: a classic member is refused, as Kafka does
        from kafka import KafkaConsumer
        from kafka.errors import InconsistentGroupProtocolError
        kc = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap, group_id=group, consumer_timeout_ms=3000)
        try:
            with pytest.raises(InconsistentGroupProtocolError):
                for _ in range(20):
                    kc.poll(500)
        finally:
            kc.close()
        # DescribeGroups describes classic groups: Dead before v6, GROUP_ID_NOT_FOUND from v6
        from protocol.messages import DescribeGroupsRequest as DG
        d5, d6 = (c.request(15, v, DG(groups=[group], include_authorized_operations=False)).groups[0] for v in (5, 6))
        assert (d5.error_code, d5.group_state) == (0, "Dead")
        assert (d6.error_code, d6.error_message, d6.group_state) == \
            (E.GROUP_ID_NOT_FOUND, f"Group {group} is not a classic group.", "Dead")
        # ConsumerGroupDescribe: Kafka 4.x's messages
        from protocol.messages import ConsumerGroupDescribeRequest as CGD
        nobody = unique("none")
        got = c.request(69, 0, CGD(group_ids=[group, nobody], include_authorized_operations=False)).groups
        assert [(g.error_code, g.error_message) for g in got] == [
            (E.GROUP_ID_NOT_FOUND, f"Group {group} is not a consumer group."),
            (E.GROUP_ID_NOT_FOUND, f"Group {nobody} not found.")]
        assert _heartbeat(c, group, member, -1).member_epoch == -1
        assert _heartbeat(c, group, member, -1).error_code == E.UNKNOWN_MEMBER_ID
        assert _heartbeat(c, unique("none"), member, -1).error_code == E.GROUP_ID_NOT_FOUND
        assert _heartbeat(c, group, "m" * 37, 0, [topic]).error_code == E.INVALID_REQUEST
        r = c.request(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id="m2", member_epoch=0, rack_id="",
                                                        subscribed_topic_names=[topic]))
        assert r.error_code == E.INVALID_REQUEST and r.error_message == "RackId can't be empty."


def test_a_lost_heartbeat_answer_and_offsets_apis_on_a_share_group(kafka):
    """A member whose answer moving it to a new epoch was lost heartbeats with its previous epoch
    and carries on; the offset APIs refuse a share group's id (GROUP_ID_NOT_FOUND) and leave the
    group alone; ShareFetch never creates state for a group nobody joined."""
    from protocol.messages import OffsetCommitRequest as OC
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 2)
    with _conn(kafka) as c:
        tid = _topic_id(c, topic)
        a = _join_raw(c, kafka, group, topic)
        first = _heartbeat(c, group, a, 0, [topic]).member_epoch
        b = uuid.uuid4().hex[:22]
        assert _heartbeat(c, group, b, 0, [topic]).error_code == 0          # moves the group on
        r = _heartbeat(c, group, a, first)
        assert r.error_code == 0 and r.member_epoch > first
        again = _heartbeat(c, group, a, first)                              # that answer was lost
        assert again.error_code == 0 and again.member_epoch == r.member_epoch and again.assignment is not None
        commit = OC(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                    retention_time_ms=-1, topics=[OC.OffsetCommitRequestTopic(name=topic, partitions=[
                        OC.OffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                        committed_leader_epoch=-1, committed_metadata="")])])
        r = c.request(8, 8, commit)
        assert r.topics[0].partitions[0].error_code == E.GROUP_ID_NOT_FOUND
        from protocol.messages import OffsetFetchRequest as OF         # answered as a group with no offsets
        r = c.request(9, 8, OF(require_stable=False, groups=[OF.OffsetFetchRequestGroup(
            group_id=group, topics=[OF.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])])).groups[0]
        assert (r.error_code, [(p.committed_offset, p.error_code) for t in r.topics for p in t.partitions]) == \
            (0, [(-1, 0)])
        r = c.request(9, 8, OF(require_stable=False, groups=[OF.OffsetFetchRequestGroup(group_id=group,
                                                                                     topics=None)])).groups[0]
        assert (r.error_code, r.topics) == (0, [])
        assert _heartbeat(c, group, a, again.member_epoch).error_code == 0
        stray = unique("stray")
        r = _fetch(c, stray, "m1", 0, tid)
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == E.UNKNOWN_SERVER_ERROR
        assert describe(kafka, stray).error_code == E.GROUP_ID_NOT_FOUND     # nothing was created
        r = _fetch(c, group, a, 0, tid)
        assert r.error_code == 0
        r = _fetch(c, group, a, 1, tid, acks=[(0, 0, [4])])                  # RENEW needs v2 and IsRenewAck
        assert r.responses[0].partitions[0].acknowledge_error_code == E.INVALID_REQUEST


def _members(d) -> dict:
    return {m.member_id: (m.member_epoch, sorted((str(t.topic_id), tuple(t.partitions))
                                                 for t in m.assignment.topic_partitions)) for m in d.members}


def test_membership_survives_a_kill_minus_9(tmp_path):
    """Share group membership is written to __consumer_offsets before a heartbeat is answered
    (Kafka 4.2's records): after a kill -9 and a restart the group has the same epochs, members
    and assignments, a member goes on at its epoch without rejoining, a member that left stays
    gone, a deleted group stays deleted, and a heartbeat above epoch 0 for a group that never
    was is GROUP_ID_NOT_FOUND, as in Kafka."""
    from protocol.messages import DeleteGroupsRequest
    b = BrokerProcess(tmp_path, name="broker", props=PROPS)
    b.start()
    try:
        topic, group, deleted = unique("sq"), unique("sg"), unique("sg")
        create_topic(b, topic, 2)
        c = share_consumer(b, group, topic)
        with _conn(b) as raw:
            tid = _topic_id(raw, topic)
            member = _join_raw(raw, b, group, topic)
            for _ in range(3):                   # members coming and going move the epoch on
                other = uuid.uuid4().hex[:22]
                assert _heartbeat(raw, group, other, 0, [topic]).error_code == 0
                assert _heartbeat(raw, group, other, -1).member_epoch == -1
            gone = uuid.uuid4().hex[:22]
            gone_epoch = _heartbeat(raw, group, gone, 0, [topic]).member_epoch
            assert _heartbeat(raw, group, gone, -1).member_epoch == -1
            wait_assigned(c, b, group, members=2, started=False)     # the raw member fetches nothing
            mine = _heartbeat(raw, group, member, _heartbeat(raw, group, member, 0, [topic]).member_epoch)
            assert mine.error_code == 0
            temp = _join_raw(raw, b, deleted, topic)
            assert _heartbeat(raw, deleted, temp, -1).member_epoch == -1
            assert raw.request(42, 2, DeleteGroupsRequest(groups_names=[deleted])).results[0].error_code == 0
        wait_for(lambda: all(e == describe(b, group).group_epoch for e, _ in _members(describe(b, group)).values()),
                 30, what="every member at the group epoch")
        before = describe(b, group)
        assert before.group_epoch >= 8 and len(before.members) == 2
        b.kill()
        b.start()
        after = describe(b, group)
        assert after.error_code == 0
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert _members(after) == _members(before)
        assert {m.member_id: (m.client_id, tuple(m.subscribed_topic_names)) for m in after.members} == \
            {m.member_id: (m.client_id, tuple(m.subscribed_topic_names)) for m in before.members}
        with _conn(b) as raw:
            r = _heartbeat(raw, group, member, mine.member_epoch)
            assert r.error_code == 0 and r.member_epoch == mine.member_epoch
            assert [(t.topic_id, sorted(t.partitions)) for t in r.assignment.topic_partitions] == \
                [(tid, list(_members(before)[member][1][0][1]))]
            assert _heartbeat(raw, group, gone, gone_epoch).error_code == E.UNKNOWN_MEMBER_ID
            r = _heartbeat(raw, deleted, temp, 1)
            assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, f"Share group {deleted} not found.")
            assert _heartbeat(raw, unique("never"), member, 3).error_code == E.GROUP_ID_NOT_FOUND
            # the ShareConsumer goes on at its epoch: it reads its partition without rejoining
            theirs = [m for m in after.members if m.member_id != member][0]
            partition = theirs.assignment.topic_partitions[0].partitions[0]
            values = [f"after{i}".encode() for i in range(20)]
            produce(b, topic, values, partition=partition)
            got = drain([c], 20, timeout=30)[0]
            assert sorted(v for v, _ in got) == sorted(values)
            assert _members(describe(b, group))[theirs.member_id][0] == theirs.member_epoch
            assert _heartbeat(raw, group, member, mine.member_epoch).member_epoch == mine.member_epoch
    finally:
        try:
            c.close()
        finally:
            b.stop()


def test_list_describe_and_delete_share_groups(kafka):
    from protocol.messages import DeleteGroupsRequest, ListGroupsRequest
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 1)
    c = share_consumer(kafka, group, topic)
    try:
        wait_assigned(c, kafka, group)
        with _conn(kafka) as raw:
            listed = raw.request(16, 5, ListGroupsRequest(states_filter=[], types_filter=["share"])).groups
            assert (group, "share", "Stable", "share") in [
                (g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed]
            assert group not in [g.group_id for g in raw.request(16, 5, ListGroupsRequest(
                states_filter=[], types_filter=["classic"])).groups]
            r = raw.request(42, 2, DeleteGroupsRequest(groups_names=[group]))
            assert r.results[0].error_code == E.NON_EMPTY_GROUP
    finally:
        c.close()
    with _conn(kafka) as raw:
        wait_for(lambda: describe(kafka, group).group_state == "Empty", 10, what="an empty group")
        assert raw.request(42, 2, DeleteGroupsRequest(groups_names=[group])).results[0].error_code == 0
        d = describe(kafka, group)
        assert d.error_code == E.GROUP_ID_NOT_FOUND


def configs_tool(b, *args):
    return subprocess.run([str(REPO / "bin" / "kafka-configs.sh"), "--bootstrap-server", b.bootstrap, *args],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_group_configs_earliest_and_read_committed(kafka):
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 1)
    produce(kafka, topic, [b"old1", b"old2"])
    tp = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": unique("tx")})
    tp.init_transactions(30)
    tp.begin_transaction()
    tp.produce(topic, value=b"aborted")
    tp.flush(30)
    tp.abort_transaction(30)
    tp.begin_transaction()
    tp.produce(topic, value=b"committed")
    tp.flush(30)
    tp.commit_transaction(30)
    r = configs_tool(kafka, "--entity-type", "groups", "--entity-name", group, "--alter", "--add-config",
                     "share.auto.offset.reset=earliest,share.isolation.level=read_committed")
    assert r.returncode == 0, r.stdout + r.stderr
    r = configs_tool(kafka, "--entity-type", "groups", "--entity-name", group, "--alter", "--add-config",
                     "share.auto.offset.reset=soonest")
    assert r.returncode != 0 and "share.auto.offset.reset" in r.stdout + r.stderr
    c = share_consumer(kafka, group, topic)
    try:
        got = drain([c], 3, timeout=20)[0]
        assert sorted(v for v, _ in got) == [b"committed", b"old1", b"old2"]
        assert not drain([c], 1, timeout=2)[0]
    finally:
        c.close()
    # by_duration: the first record at or after an hour ago, so the old records too
    other = unique("sg")
    r = configs_tool(kafka, "--entity-type", "groups", "--entity-name", other, "--alter", "--add-config",
                     "share.auto.offset.reset=by_duration:PT1H")
    assert r.returncode == 0, r.stdout + r.stderr
    c = share_consumer(kafka, other, topic)
    try:
        got = drain([c], 4, timeout=20)[0]
        assert sorted(v for v, _ in got) == [b"aborted", b"committed", b"old1", b"old2"]   # read_uncommitted
    finally:
        c.close()


def test_share_groups_can_be_disabled(tmp_path):
    with running(BrokerProcess(tmp_path, name="broker", props={"group.share.enable": "false"})) as b:
        with _conn(b) as c:
            assert _heartbeat(c, "g", "m", 0, ["t"]).error_code == E.UNSUPPORTED_VERSION
            assert _fetch(c, "g", "m", 0).error_code == E.UNSUPPORTED_VERSION


def share_tool(b, *args):
    return subprocess.run([str(REPO / "bin" / "kafka-share-groups.sh"), "--bootstrap-server", b.bootstrap, *args],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_kafka_share_groups_tool(kafka):
    """kafka-share-groups.sh: --list, --describe (offsets with lag, --members, --state), then with
    the group empty --reset-offsets (dry run and --execute), --delete-offsets and --delete, on
    DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets."""
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 2)
    c = share_consumer(kafka, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        wait_assigned(c, kafka, group)
        produce(kafka, topic, [f"t{i}".encode() for i in range(10)], partition=0)
        got = []
        deadline = time.time() + 20
        while len(got) < 10 and time.time() < deadline:
            for m in c.poll(0.5):
                got.append(m)
                c.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 4 else AcknowledgeType.RELEASE)
        c.commit_sync(10)
        assert len(got) == 10
        r = share_tool(kafka, "--list")
        assert r.returncode == 0 and group in r.stdout.split(), r.stdout + r.stderr
        r = share_tool(kafka, "--list", "--state", "stable")
        assert r.stdout.splitlines()[0].split() == ["GROUP", "STATE"] and f"{group} " in r.stdout
        r = share_tool(kafka, "--describe", "--group", group)
        rows = [line.split() for line in r.stdout.strip().splitlines()]
        assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], r.stdout
        assert [group, topic, "0", "4", "6"] in rows and [group, topic, "1", "0", "0"] in rows, r.stdout
        r = share_tool(kafka, "--describe", "--group", group, "--members")
        rows = [line.split() for line in r.stdout.strip().splitlines()]
        assert rows[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"], r.stdout
        assert rows[1][4] == "2" and rows[1][5] == f"{topic}:0,1", r.stdout
        r = share_tool(kafka, "--describe", "--group", group, "--state", "--verbose")
        head, row = [line.split() for line in r.stdout.strip().splitlines()]
        assert head == ["GROUP", "COORDINATOR", "(ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"]
        assert row[:4] == [group, kafka.bootstrap, "(0)", "Stable"] and row[4] == row[5] and row[6] == "1", row
        r = share_tool(kafka, "--reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute")
        assert r.returncode == 1 and f"Share group '{group}' is not empty." in r.stderr, r.stdout + r.stderr
        r = subprocess.run([str(REPO / "bin" / "kafka-groups.sh"), "--bootstrap-server", kafka.bootstrap, "--list",
                            "--share"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert [group, "Share", "share"] in [line.split() for line in r.stdout.splitlines()], r.stdout + r.stderr
    finally:
        c.close()
    wait_for(lambda: describe(kafka, group).group_state == "Empty", 10, what="an empty group")
    r = share_tool(kafka, "--reset-offsets", "--group", group, "--topic", f"{topic}:0", "--to-latest")
    assert [group, topic, "0", "10"] in [line.split() for line in r.stdout.splitlines()], r.stdout + r.stderr
    assert "4" in share_tool(kafka, "--describe", "--group", group).stdout.split()          # a dry run changes nothing
    r = share_tool(kafka, "--reset-offsets", "--group", group, "--topic", f"{topic}:0", "--to-latest", "--execute")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line.split() for line in share_tool(kafka, "--describe", "--group", group).stdout.splitlines()]
    assert [group, topic, "0", "10", "0"] in rows, rows
    r = share_tool(kafka, "--delete-offsets", "--group", group, "--topic", topic)
    assert r.returncode == 0 and [topic, "Successful"] in [line.split() for line in r.stdout.splitlines()], r.stdout
    assert f"Share group '{group}' has no offset information." in share_tool(kafka, "--describe", "--group", group).stdout
    r = share_tool(kafka, "--delete", "--group", group)
    assert r.returncode == 0 and f"Deletion of requested share groups ('{group}') was successful." in r.stdout, r.stdout
    assert group not in share_tool(kafka, "--list").stdout.split()


def test_the_start_offset_is_found_by_the_first_fetch(kafka):
    """As in Kafka 4.2: the heartbeat initializes every partition of the subscribed topic with
    start offset -1 (shown as "-"); the first ShareFetch of a partition finds its start (latest:
    the high watermark then), so records written between the assignment and that fetch are not
    for the group, and a partition not fetched yet stays at -1."""
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 2)
    with _conn(kafka) as c:
        tid = _topic_id(c, topic)
        member = _join_raw(c, kafka, group, topic)
        assert start_offsets(kafka, group) == {(topic, 0): -1, (topic, 1): -1}
        state = c.metadata(["__share_group_state"], version=12).topics[0]
        assert (state.error_code, state.is_internal) == (0, True)           # as Kafka's Topic.isInternal
        out = share_tool(kafka, "--describe", "--group", group, "--verbose").stdout.split("\n")
        assert [line.split() for line in out if line.startswith(group)] == \
            [[group, topic, "0", "-", "-", "-"], [group, topic, "1", "-", "-", "-"]], out
        produce(kafka, topic, [b"a", b"b"], partition=0)
        r = _fetch(c, group, member, 0, tid)                              # partition 0 only
        assert r.error_code == 0 and r.responses[0].partitions[0].acquired_records == []
        assert start_offsets(kafka, group) == {(topic, 0): 2, (topic, 1): -1}
        produce(kafka, topic, [b"c"], partition=0)
        r = _fetch(c, group, member, 1, wait=5000)
        assert [(a.first_offset, a.last_offset) for a in r.responses[0].partitions[0].acquired_records] == [(2, 2)]


def test_a_partition_initialized_before_a_kill_minus_9_starts_at_its_first_fetch_after(tmp_path):
    """A share partition that the heartbeat initialized (start -1) but no fetch started yet is
    still unstarted after a kill -9 and a restart: its start is found by the first fetch then,
    and the group's record 15 read back keeps the heartbeat from initializing it again."""
    b = BrokerProcess(tmp_path, name="broker", props=PROPS)
    b.start()
    try:
        topic, group = unique("sq"), unique("sg")
        create_topic(b, topic, 1)
        with _conn(b) as c:
            tid = _topic_id(c, topic)
            member = _join_raw(c, b, group, topic)
        produce(b, topic, [b"a", b"b"])
        assert start_offsets(b, group) == {(topic, 0): -1}
        b.kill()
        b.start()
        assert start_offsets(b, group) == {(topic, 0): -1}
        produce(b, topic, [b"c"])
        with _conn(b) as c:
            r = _heartbeat(c, group, member, 0, [topic])
            assert r.error_code == 0
            other = uuid.uuid4().hex[:22]           # a new member moves the group epoch on
            assert _heartbeat(c, group, other, 0, [topic]).error_code == 0
            assert _fetch(c, group, member, 0, tid).error_code == 0
            assert start_offsets(b, group) == {(topic, 0): 3}
            produce(b, topic, [b"d"])
            r = _fetch(c, group, member, 1, wait=5000)
            assert [(a.first_offset, a.last_offset) for a in r.responses[0].partitions[0].acquired_records] == [(3, 3)]
        from tests.tools.test_internal_formatters import formatted
        init = [x for x in formatted(b, "__consumer_offsets", "ShareGroupMessageFormatter")
                if x["key"]["type"] == 15 and x["key"]["data"]["groupId"] == group]
        assert len(init) == 1, init             # written once, before the kill, and read back
        assert [t["partitions"] for t in init[0]["value"]["data"]["initializedTopics"]] == [[0]]
    finally:
        b.stop()


def test_kill_minus_9_loses_no_acknowledgement(tmp_path):
    """Records accepted and committed before a kill -9 of the broker are never delivered again
    after the restart, and every record is delivered at least once."""
    b = BrokerProcess(tmp_path, name="broker", props=PROPS)
    b.start()
    try:
        topic, group = unique("sq"), unique("sg")
        create_topic(b, topic, 1)
        c = share_consumer(b, group, topic, **{"share.acknowledgement.mode": "explicit", "max.poll.records": 100})
        wait_assigned(c, b, group)
        values = [f"k{i:05d}".encode() for i in range(3000)]
        produce(b, topic, values, batch=50)
        committed: set = set()

        def consume(until: int, timeout: float, after_restart: bool):
            deadline = time.time() + timeout
            while len(committed) < until and time.time() < deadline:
                msgs = [m for m in c.poll(0.5) if m.error() is None]
                for m in msgs:
                    if after_restart:
                        assert m.value() not in committed, m.value()      # accepted before: never again
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if msgs:
                    try:
                        results = c.commit_sync(10)
                    except ck.KafkaException:
                        continue
                    if all(err is None for err in results.values()):
                        committed.update(m.value() for m in msgs)
        consume(1000, 30, after_restart=False)
        assert len(committed) >= 1000
        b.kill()
        b.start()
        consume(len(values), 90, after_restart=True)
        c.close()
        assert committed == set(values)
    finally:
        b.stop()


def test_a_kill_minus_9_never_redelivers_past_the_delivery_limit(tmp_path):
    """A record out on its last attempt when a snapshot is written (another record's
    acknowledgement writes the window) is archived by the restart after a kill -9, not handed
    out a fourth time under a limit of 3."""
    b = BrokerProcess(tmp_path, name="broker", props={**PROPS, "group.share.record.lock.duration.ms": 30000})
    b.start()
    try:
        topic, group = unique("sq"), unique("sg")
        create_topic(b, topic, 1)
        with _conn(b) as c:
            tid = _topic_id(c, topic)
            member = _join_raw(c, b, group, topic)
            assert _fetch(c, group, member, 0, tid).error_code == 0           # the start: offset 0
            produce(b, topic, [b"A"])
            counts = [_fetch(c, group, member, 1, wait=5000)]
            for epoch in (2, 3):                                            # release, fetched again
                counts.append(_fetch(c, group, member, epoch, tid, acks=[(0, 0, [2])], wait=5000))
            assert [[(a.first_offset, a.delivery_count) for a in r.responses[0].partitions[0].acquired_records]
                    for r in counts] == [[(0, 1)], [(0, 2)], [(0, 3)]]        # 3: its last attempt
            produce(b, topic, [b"B"])
            r = _fetch(c, group, member, 4, wait=5000)
            assert [(a.first_offset, a.delivery_count) for a in r.responses[0].partitions[0].acquired_records] == [(1, 1)]
            r = _fetch(c, group, member, 5, tid, acks=[(1, 1, [1])])             # accept B: a snapshot
            assert r.responses[0].partitions[0].acknowledge_error_code == 0
            b.kill()
        b.start()
        produce(b, topic, [b"C"])
        with _conn(b) as c:
            member = _join_raw(c, b, group, topic)
            r = _fetch(c, group, member, 0, tid, wait=5000)
            got = [(a.first_offset, a.last_offset, a.delivery_count)
                   for t in r.responses for p in t.partitions for a in p.acquired_records]
            assert got == [(2, 2, 1)], got                                   # A archived, B accepted
    finally:
        b.stop()


def test_kafka_console_share_consumer(kafka):
    """kafka-console-share-consumer.sh: --release hands the records back (delivery count 1), the
    next run accepts them (count 2), and a third run finds nothing left."""
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 1)
    r = configs_tool(kafka, "--entity-type", "groups", "--entity-name", group, "--alter", "--add-config",
                     "share.auto.offset.reset=earliest")
    assert r.returncode == 0, r.stdout + r.stderr
    produce(kafka, topic, [b"a", b"b", b"c"])

    def console(*args):
        return subprocess.run([str(REPO / "bin" / "kafka-console-share-consumer.sh"), "--bootstrap-server",
                               kafka.bootstrap, "--topic", topic, "--group", group, "--property", "print.delivery=true",
                               *args], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
    r = console("--release", "--max-messages", "3")
    assert r.stdout.splitlines() == ["DeliveryCount:1\ta", "DeliveryCount:1\tb", "DeliveryCount:1\tc"], r.stdout + r.stderr
    assert "Processed a total of 3 messages" in r.stderr
    r = console("--timeout-ms", "3000")
    assert r.stdout.splitlines() == ["DeliveryCount:2\ta", "DeliveryCount:2\tb", "DeliveryCount:2\tc"], r.stdout + r.stderr
    r = console("--timeout-ms", "2000")
    assert r.stdout == "" and "Processed a total of 0 messages" in r.stderr, r.stdout + r.stderr


def test_kafka_share_consumer_perf_test(kafka):
    """kafka-share-consumer-perf-test.sh (Kafka 4.2's ShareConsumerPerformance): two members share
    the records, the per-member and group lines add up, what they read is accepted (a second run
    finds nothing and says so), and the arguments are checked as Kafka checks them."""
    import re
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 2)
    r = configs_tool(kafka, "--entity-type", "groups", "--entity-name", group, "--alter", "--add-config",
                     "share.auto.offset.reset=earliest")
    assert r.returncode == 0, r.stdout + r.stderr
    produce(kafka, topic, [b"x" * 100 for _ in range(4000)])

    def perf(*args):
        return subprocess.run([str(REPO / "bin" / "kafka-share-consumer-perf-test.sh"), *args],
                              capture_output=True, text=True, timeout=120)
    r = perf("--bootstrap-server", kafka.bootstrap, "--topic", topic, "--group", group, "--num-records", "4000",
             "--threads", "2", "--show-consumer-stats", "--timeout", "15000")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == ("start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg, "
                        "fetch.time.ms")
    members = [re.fullmatch(r"Share consumer (\d) having client id (\S+) consumption metrics- .*, (\d+), \d+", x)
               for x in lines[1:3]]
    assert all(members), lines
    assert [(m.group(1), m.group(2)) for m in members] == [("1", "perf-share-consumer-client-1"),
                                                            ("2", "perf-share-consumer-client-2")]
    total = lines[-1].split(", ")
    assert len(total) == 7 and total[5] == "4000" and total[2] == "0.3815", lines      # 4000 x 100 bytes
    assert sum(int(m.group(3)) for m in members) == 4000
    r = perf("--bootstrap-server", kafka.bootstrap, "--topic", topic, "--group", group, "--num-records", "1",
             "--timeout", "3000", "--hide-header")
    assert r.returncode == 0 and r.stdout.splitlines()[0].startswith(
        "WARNING: Exiting before consuming the expected number of records: timeout (3000 ms) exceeded."), r.stdout
    assert r.stdout.splitlines()[-1].split(", ")[5] == "0"
    r = perf("--bootstrap-server", kafka.bootstrap, "--topic", topic)
    assert r.returncode == 1 and "Exactly one of the following arguments is required" in r.stderr, r.stderr


@pytest.mark.parametrize("mode", ["auto", "sync", "async"])
def test_kafka_verifiable_share_consumer(kafka, mode):
    """kafka-verifiable-share-consumer.sh (Kafka 4.2's VerifiableShareConsumer): sets the group's
    reset strategy, reports what it consumed and what the broker acknowledged, and stops after
    --max-messages acknowledged records."""
    import json
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 2)
    produce(kafka, topic, [f"v{i}".encode() for i in range(10)])
    r = subprocess.run([str(REPO / "bin" / "kafka-verifiable-share-consumer.sh"), "--bootstrap-server",
                        kafka.bootstrap, "--topic", topic, "--group-id", group, "--offset-reset-strategy", "earliest",
                        "--max-messages", "10", "--acknowledgement-mode", mode, "--verbose"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    events = [json.loads(x) for x in r.stdout.splitlines()]
    names = [e["name"] for e in events]
    assert names[:2] == ["startup_complete", "offset_reset_strategy_set"] and names[-1] == "shutdown_complete", names
    assert events[1]["offsetResetStrategy"] == "earliest"
    values = sorted(e["value"] for e in events if e["name"] == "record_data")
    assert values == sorted(f"v{i}" for i in range(10))
    acked = [e for e in events if e["name"] == "offsets_acknowledged"]
    assert acked and all(e["success"] for e in acked)
    assert sum(e["count"] for e in acked) == 10
    got = sorted((p["partition"], o) for e in acked for p in e["partitions"] for o in p["offsets"])
    consumed = sorted((p["partition"], o) for e in events if e["name"] == "records_consumed"
                      for p in e["partitions"] for o in p["offsets"])
    assert got == consumed and len(got) == 10
    d = describe(kafka, group)
    assert d.error_code == 0


def test_an_unknown_topic_id_stays_in_the_share_session(kafka):
    """As Kafka: a topic id the broker does not know is answered UNKNOWN_TOPIC_ID in every fetch
    of the session until the member forgets it."""
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 1)
    ghost = uuid.uuid4()
    F = ShareFetchRequest
    with _conn(kafka) as c:
        member = _join_raw(c, kafka, group, topic)
        r = _fetch(c, group, member, 0, ghost)
        assert [(t.topic_id, p.error_code) for t in r.responses for p in t.partitions] == [(ghost, E.UNKNOWN_TOPIC_ID)]
        r = _fetch(c, group, member, 1)
        assert [(t.topic_id, p.error_code) for t in r.responses for p in t.partitions] == [(ghost, E.UNKNOWN_TOPIC_ID)]
        r = c.request(78, 1, F(group_id=group, member_id=member, share_session_epoch=2, max_wait_ms=0, min_bytes=1,
                               max_bytes=1 << 20, max_records=500, batch_size=500, topics=[],
                               forgotten_topics_data=[F.ForgottenTopic(topic_id=ghost, partitions=[0])]))
        assert r.error_code == 0 and r.responses == []


def test_a_deleted_topic_leaves_the_initialized_topics(kafka):
    """When a subscribed topic is deleted, the group's record 15 is written without it (Kafka
    drops deleted topics from ShareGroupStatePartitionMetadata) and each of its share partitions
    gets a tombstone in ``__share_group_state`` (Kafka's share coordinator on topic deletion)."""
    from confluent_kafka.admin import AdminClient

    from broker.share.state_log import topic_id_text
    from tests.tools.test_internal_formatters import formatted
    keep, gone, group = unique("sq"), unique("sq"), unique("sg")
    create_topic(kafka, keep, 1)
    create_topic(kafka, gone, 2)

    def gone_states():
        last = {}
        for x in formatted(kafka, "__share_group_state", "group.share.ShareGroupStateMessageFormatter"):
            k = x["key"]["data"]
            if k["groupId"] == group and k["topicId"] == tid64:
                last[k["partition"]] = x["value"] and x["value"]["data"]["startOffset"]
        return last
    with _conn(kafka) as c:
        member = _join_raw(c, kafka, group, keep)
        tid64 = topic_id_text(_topic_id(c, gone))
        epoch = _heartbeat(c, group, member, 0, [keep, gone]).member_epoch
        assert gone_states() == {0: -1, 1: -1}          # initialized by the heartbeat
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        for f in admin.delete_topics([gone]).values():
            f.result(30)
        wait_for(lambda: _heartbeat(c, group, member, epoch).member_epoch > epoch, 30,
                 what="a new assignment without the deleted topic")

    def initialized():
        recs = [x for x in formatted(kafka, "__consumer_offsets", "ShareGroupMessageFormatter")
                if x["key"]["type"] == 15 and x["key"]["data"]["groupId"] == group]
        return [sorted((t["topicName"], tuple(t["partitions"])) for t in r["value"]["data"]["initializedTopics"])
                for r in recs]
    got = initialized()
    assert got[-2:] == [sorted([(keep, (0,)), (gone, (0, 1))]), [(keep, (0,))]], got
    assert gone_states() == {0: None, 1: None}


def test_altered_offsets_initialize_the_partitions(kafka):
    """AlterShareGroupOffsets on a group nobody joined creates it and initializes the partitions it
    sets: they are in the group's record 15, as Kafka's alterShareGroupOffsets writes them."""
    from protocol.messages import AlterShareGroupOffsetsRequest as A
    from tests.tools.test_internal_formatters import formatted
    topic, group = unique("sq"), unique("sg")
    create_topic(kafka, topic, 2)
    produce(kafka, topic, [b"a", b"b"], partition=1)
    with _conn(kafka) as c:
        r = c.request(91, 0, A(group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(
            topic_name=topic, partitions=[A.AlterShareGroupOffsetsRequestPartition(partition_index=1, start_offset=1)])]))
        assert (r.error_code, [p.error_code for t in r.responses for p in t.partitions]) == (0, [0])
    assert start_offsets(kafka, group) == {(topic, 1): 1}
    recs = [x for x in formatted(kafka, "__consumer_offsets", "ShareGroupMessageFormatter")
            if x["key"]["type"] == 15 and x["key"]["data"]["groupId"] == group]
    assert [[(t["topicName"], t["partitions"]) for t in r["value"]["data"]["initializedTopics"]] for r in recs] == \
        [[(topic, [1])]]

"""Incremental fetch sessions (KIP-227) against a real broker process.

Raw Fetch requests walk a session through Kafka's rules: a full fetch with epoch 0 makes one,
incremental fetches answer only partitions with news and take new fetch positions, a stale
epoch, an unknown id and a change of topic-id use are refused with Kafka's codes, forgetting
every partition closes the session, and the cache holds only
``max.incremental.fetch.session.cache.slots`` sessions.  kafka-python 3, which makes sessions,
reads every record through one, including records that arrive after it was made.
"""
from __future__ import annotations

import logging
import time
import uuid
from types import SimpleNamespace

import pytest

from protocol.messages import FetchRequest
from protocol.records import build_batch, iter_batches
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.rawkafka import RawConnection

pytestmark = pytest.mark.integration

FETCH = 1
SLOTS = 3
DIRECTORY_ID = uuid.UUID("5d1f4c52-8a3e-4b9e-9f0e-0a1b2c3d4e5f")


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("fetch-sessions"), name="broker",
                               props={"num.partitions": 3, "log.retention.ms": -1,    # fixed 2023 timestamps
                                      "max.incremental.fetch.session.cache.slots": SLOTS})) as b:
        yield b


def _topic(c, name):
    md = c.metadata([name], version=12)
    t = md.topics[0]
    assert t.error_code == 0 and len(t.partitions) == 3
    return t.topic_id


def _produce(c, topic, partition, n=1):
    for i in range(n):
        r = c.produce(topic, partition, build_batch([(b"k%d" % i, b"v%d" % i, [], 1700000000000)]))
        assert r.error_code == 0


def fetch(c, version, session_id, epoch, topic, topic_id, parts=(), forget=(), max_wait_ms=0,
          max_bytes=50 << 20):
    """parts: [(partition, fetch offset)].  The response's error, session id and topics, and
    its partitions as {partition: data} in .by_partition (one topic at most here)."""
    name_kw = {"topic_id": topic_id} if version >= 13 else {"topic": topic}
    # v17 (KIP-853) lets a follower name its log directory and v18 (KIP-1166) give its high
    # watermark: tagged fields that only KRaft voters read, a broker ignores them
    dir_kw = {"replica_directory_id": DIRECTORY_ID} if version >= 17 else {}
    if version >= 18:
        dir_kw["high_watermark"] = 1
    topics = [FetchRequest.FetchTopic(**name_kw, partitions=[FetchRequest.FetchPartition(
        partition=p, current_leader_epoch=-1, fetch_offset=off, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20, **dir_kw) for p, off in parts])] if parts else []
    forgotten = [FetchRequest.ForgottenTopic(**name_kw, partitions=list(forget))] if forget else []
    state = FetchRequest.ReplicaState(replica_id=-1, replica_epoch=-1) if version >= 15 else None
    body = FetchRequest(cluster_id=None, replica_id=-1, replica_state=state, max_wait_ms=max_wait_ms,
                        min_bytes=1, max_bytes=max_bytes, isolation_level=0, session_id=session_id,
                        session_epoch=epoch, topics=topics, forgotten_topics_data=forgotten,
                        rack_id="")
    resp = c.request(FETCH, version, body)
    return SimpleNamespace(error_code=resp.error_code, session_id=resp.session_id,
                           responses=list(resp.responses),
                           by_partition={pd.partition_index: pd for t in resp.responses
                                         for pd in t.partitions})


def _records(pd):
    return [h.base_offset for h in iter_batches(bytes(pd.records))] if pd.records else []


@pytest.mark.parametrize("version", [12, 13, 17, 18])
def test_a_session_answers_only_partitions_with_news(kafka, version):
    topic = f"sessions-v{version}"
    with RawConnection(kafka.host, kafka.port) as c:
        tid = _topic(c, topic)
        _produce(c, topic, 0)
        _produce(c, topic, 1)
        full = fetch(c, version, 0, 0, topic, tid, [(0, 0), (1, 0), (2, 0)])
        assert full.error_code == 0 and full.session_id != 0
        sid = full.session_id
        assert sorted(full.by_partition) == [0, 1, 2]
        assert _records(full.by_partition[0]) == [0] and _records(full.by_partition[1]) == [0]
        assert full.by_partition[2].high_watermark == 0

        # the client moved on in partitions 0 and 1: nothing new anywhere, nothing answered
        quiet = fetch(c, version, sid, 1, topic, tid, [(0, 1), (1, 1)], max_wait_ms=50)
        assert (quiet.error_code, quiet.session_id, quiet.responses) == (0, sid, [])

        # partition 2 gets a record: only it is answered, read from the position cached for it
        _produce(c, topic, 2)
        news = fetch(c, version, sid, 2, topic, tid)
        assert (news.error_code, news.session_id) == (0, sid)
        assert list(news.by_partition) == [2]
        assert _records(news.by_partition[2]) == [0] and news.by_partition[2].high_watermark == 1

        # a new record in partition 0 is read from the position the last request gave for it
        _produce(c, topic, 0)
        more = fetch(c, version, sid, 3, topic, tid, [(2, 1)])
        assert list(more.by_partition) == [0] and _records(more.by_partition[0]) == [1]

        # the same epoch again (a retried request): refused, the session is kept
        again = fetch(c, version, sid, 3, topic, tid)
        assert (again.error_code, again.responses) == (71, [])      # INVALID_FETCH_SESSION_EPOCH
        assert fetch(c, version, sid, 4, topic, tid, [(0, 2)]).error_code == 0

        # the other way of naming topics than the session was made with
        other = 13 if version == 12 else 12
        assert fetch(c, other, sid, 5, topic, tid).error_code == 106   # FETCH_SESSION_TOPIC_ID_ERROR
        assert fetch(c, version, 0x7FFF0001, 1, topic, tid).error_code == 70  # FETCH_SESSION_ID_NOT_FOUND

        # forgetting every partition closes the session: a sessionless answer, then unknown
        closed = fetch(c, version, sid, 5, topic, tid, forget=[0, 1, 2])
        assert (closed.error_code, closed.session_id) == (0, 0)
        assert fetch(c, version, sid, 6, topic, tid).error_code == 70


def test_forgotten_partitions_are_not_read_and_added_ones_are(kafka):
    topic = "sessions-forget"
    with RawConnection(kafka.host, kafka.port) as c:
        tid = _topic(c, topic)
        full = fetch(c, 12, 0, 0, topic, tid, [(0, 0)])
        sid = full.session_id
        assert sid != 0 and list(full.by_partition) == [0]
        _produce(c, topic, 1)
        assert fetch(c, 12, sid, 1, topic, tid, max_wait_ms=50).responses == []   # 1 not in it
        added = fetch(c, 12, sid, 2, topic, tid, [(1, 0)])
        assert list(added.by_partition) == [1] and _records(added.by_partition[1]) == [0]
        _produce(c, topic, 1)
        gone = fetch(c, 12, sid, 3, topic, tid, forget=[1], max_wait_ms=50)
        assert gone.session_id == sid and gone.responses == []
        # epoch -1 with the id: the session is closed and this fetch is sessionless
        final = fetch(c, 12, sid, -1, topic, tid, [(1, 1)])
        assert final.session_id == 0 and _records(final.by_partition[1]) == [1]
        assert fetch(c, 12, sid, 4, topic, tid).error_code == 70


def test_a_partition_that_returned_records_goes_to_the_end_of_the_session(kafka):
    """With room for one batch per fetch, a partition that keeps having data does not starve
    the ones after it: once answered with records it is read last."""
    topic = "sessions-rotation"
    with RawConnection(kafka.host, kafka.port) as c:
        tid = _topic(c, topic)
        _produce(c, topic, 0, 3)
        _produce(c, topic, 1)
        full = fetch(c, 12, 0, 0, topic, tid, [(0, 0), (1, 1), (2, 0)], max_bytes=1)
        sid = full.session_id
        assert _records(full.by_partition[0]) == [0] and not full.by_partition[1].records
        first = fetch(c, 12, sid, 1, topic, tid, [(0, 1), (1, 0)], max_bytes=1)
        assert list(first.by_partition) == [0] and _records(first.by_partition[0]) == [1]
        second = fetch(c, 12, sid, 2, topic, tid, [(0, 2)], max_bytes=1)
        assert list(second.by_partition) == [1] and _records(second.by_partition[1]) == [0]
        third = fetch(c, 12, sid, 3, topic, tid, [(1, 1)], max_bytes=1)
        assert list(third.by_partition) == [0] and _records(third.by_partition[0]) == [2]
        assert fetch(c, 12, sid, -1, topic, tid, [(0, 0)]).session_id == 0


def test_the_cache_holds_at_most_its_slots(broker_factory):
    kafka = broker_factory(props={"num.partitions": 3, "log.retention.ms": -1,
                                  "max.incremental.fetch.session.cache.slots": SLOTS})
    topic = "sessions-slots"
    with RawConnection(kafka.host, kafka.port) as c:
        tid = _topic(c, topic)
        ids = []
        for _ in range(SLOTS + 1):
            ids.append(fetch(c, 12, 0, 0, topic, tid, [(0, 0)]).session_id)
        # every slot is taken by a session younger than 120 s: no session for the last one
        assert all(ids[:SLOTS]) and len(set(ids[:SLOTS])) == SLOTS and ids[SLOTS] == 0
        # closing one (epoch 0 with its id closes it and asks for a new one) frees its slot
        renewed = fetch(c, 12, ids[0], 0, topic, tid, [(0, 0)]).session_id
        assert renewed not in (0, ids[0])
        assert fetch(c, 12, ids[0], 1, topic, tid).error_code == 70


def test_kafka_python_reads_everything_through_a_session(kafka, caplog):
    kp = pytest.importorskip("kafka")
    topic = "sessions-kafka-python"
    with RawConnection(kafka.host, kafka.port) as c:
        _topic(c, topic)
        for p in range(3):
            _produce(c, topic, p, 20)
    caplog.set_level(logging.DEBUG, logger="kafka.consumer.fetcher")
    consumer = kp.KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                                enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        tps = [kp.TopicPartition(topic, p) for p in range(3)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got = {p: [] for p in range(3)}

        def drain(until):
            deadline = time.monotonic() + 20
            while sum(map(len, got.values())) < until and time.monotonic() < deadline:
                for tp, recs in consumer.poll(timeout_ms=200).items():
                    got[tp.partition] += [(r.offset, r.key, r.value) for r in recs]
        drain(60)
        # records that come after the session exists reach the client in incremental answers
        with RawConnection(kafka.host, kafka.port) as c:
            _produce(c, topic, 1, 5)
        drain(65)
    finally:
        consumer.close()
    created = [r.getMessage() for r in caplog.records if "created a new incremental fetch session" in r.getMessage()]
    assert created, "kafka-python made no fetch session"
    assert [o for o, _, _ in got[0]] == list(range(20)) and [o for o, _, _ in got[2]] == list(range(20))
    assert [o for o, _, _ in got[1]] == list(range(25))
    assert got[1][20:] == [(20 + i, b"k%d" % i, b"v%d" % i) for i in range(5)]

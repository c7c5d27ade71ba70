"""CreateTime bounds on produce: ``message.timestamp.before.max.ms`` / ``after.max.ms`` and the
deprecated ``message.timestamp.difference.max.ms``, which Kafka 3.6-3.9 read for whichever of the
two is left at its default.  A record outside them is INVALID_TIMESTAMP (32); a LogAppendTime
topic takes any."""
from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.integration

MIN = 60_000
TOPICS = {
    "tb-before": {"message.timestamp.before.max.ms": str(MIN)},
    "tb-after": {"message.timestamp.after.max.ms": str(MIN)},
    "tb-difference": {"message.timestamp.difference.max.ms": str(MIN)},
    "tb-both": {"message.timestamp.difference.max.ms": str(MIN), "message.timestamp.before.max.ms": str(60 * MIN)},
    "tb-append": {"message.timestamp.difference.max.ms": str(MIN), "message.timestamp.type": "LogAppendTime"},
    "tb-none": {},
}
# topic -> (10 minutes old accepted, 10 minutes ahead accepted)
EXPECT = {"tb-before": (False, True), "tb-after": (True, False), "tb-difference": (False, False),
          "tb-both": (True, False), "tb-append": (True, True), "tb-none": (True, True)}


def test_timestamp_bounds(broker):
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(t, 1, 1, config=c) for t, c in TOPICS.items()]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "enable.idempotence": False,
                  "retries": 0})
    got = {}
    now = int(time.time() * 1000)
    for topic in TOPICS:
        for which, ts in (("old", now - 10 * MIN), ("ahead", now + 10 * MIN)):
            p.produce(topic, b"v", timestamp=ts,
                      on_delivery=lambda err, m, k=(topic, which): got.__setitem__(k, err))
            assert p.flush(30) == 0
    for topic, (old_ok, ahead_ok) in EXPECT.items():
        for which, ok in (("old", old_ok), ("ahead", ahead_ok)):
            err = got[(topic, which)]
            assert (err is None) == ok, (topic, which, err)
            if err is not None:
                assert err.code() == KafkaError.INVALID_TIMESTAMP, (topic, which, err)


def test_each_record_is_checked_and_named(broker):
    """Kafka checks every record, not the batch's first and largest timestamps, and names the
    records it refused (Produce v8+ record_errors): an old record in the middle of a batch, keyless
    records on a compacted topic, and a batch its producer marked LogAppendTime on a LogAppendTime
    topic."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from protocol.errors import ErrorCode as E
    from protocol.records import build_batch
    from tests.support.rawkafka import RawConnection
    configs = {"tr-bounded": {"message.timestamp.before.max.ms": str(MIN)},
               "tr-compact": {"cleanup.policy": "compact"},
               "tr-append": {"message.timestamp.type": "LogAppendTime"}}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(t, 1, 1, config=c) for t, c in configs.items()]).values():
        f.result(30)
    now = int(time.time() * 1000)
    with RawConnection(broker.host, broker.port) as c:
        old = now - 10 * MIN
        r = c.produce("tr-bounded", 0, build_batch([(b"a", b"1", [], now), (b"b", b"2", [], old),
                                                    (b"c", b"3", [], now)]), version=8)
        assert r.error_code == E.INVALID_TIMESTAMP
        assert r.error_message == "One or more records have been rejected due to invalid timestamp"
        [e] = r.record_errors
        assert e.batch_index == 1 and e.batch_index_error_message.startswith(
            f"Timestamp {old} of message with offset 1 is out of range. The timestamp should be within [")
        assert c.produce("tr-bounded", 0, build_batch([(b"a", b"1", [], now)]), version=8).error_code == 0

        r = c.produce("tr-compact", 0, build_batch([(b"k", b"1"), (None, b"2"), (b"k", b"3"), (None, b"4")]),
                      version=8)
        assert r.error_code == E.INVALID_RECORD
        assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [
            (i, "Compacted topic cannot accept message without key in topic partition tr-compact-0.") for i in (1, 3)]
        assert r.error_message.startswith("One or more records have been rejected due to 2 record errors in total")
        r = c.produce("tr-compact", 0, build_batch([(None, b"2")]), version=7)   # before v8: the code alone
        assert r.error_code == E.INVALID_RECORD

        r = c.produce("tr-append", 0, build_batch([(b"k", b"1"), (b"k", b"2")], timestamp_type=1), version=8)
        assert r.error_code == E.INVALID_TIMESTAMP and [e.batch_index for e in r.record_errors] == [0, 1]
        assert c.produce("tr-append", 0, build_batch([(b"k", b"1")]), version=8).error_code == 0


def test_legacy_messages_on_a_log_append_time_topic(broker):
    """A Produce v2 message set (magic 1, CreateTime) on a LogAppendTime topic is taken, and its
    records read back with the broker's append time."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from protocol.records import build_legacy, iter_records, read_header
    from tests.support.rawkafka import RawConnection
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("tl-append", 1, 1, config={"message.timestamp.type": "LogAppendTime"})])[
        "tl-append"].result(30)
    before = int(time.time() * 1000)
    with RawConnection(broker.host, broker.port) as c:
        c.metadata(["tl-append"], auto_create=False)
        for magic in (0, 1):
            legacy = build_legacy([(b"k", b"m%d-%d" % (magic, i)) for i in range(3)], magic=magic)
            r = c.produce("tl-append", 0, legacy, version=2, acks=1)
            assert r.error_code == 0, (magic, r)
        data = bytes(c.fetch("tl-append", 0, 0, version=11).records)
    after = int(time.time() * 1000)
    h = read_header(data)
    recs = list(iter_records(data, h))
    assert h.timestamp_type == 1 and before <= h.max_timestamp <= after
    assert [bytes(r.value) for r in recs] == [b"m0-0", b"m0-1", b"m0-2"]
    assert all(r.timestamp == h.max_timestamp for r in recs)

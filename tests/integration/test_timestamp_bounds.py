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

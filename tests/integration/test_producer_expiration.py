"""``producer.id.expiration.ms``: the broker forgets an idle idempotent producer's state (every
``producer.id.expiration.check.interval.ms``), as Kafka's removeExpiredProducers does; a
producer with an open transaction is kept; the forgotten producer can go on writing (an
unknown producer id is accepted at any sequence, KIP-360)."""
from __future__ import annotations

import time

import pytest

from protocol.messages import DescribeProducersRequest as DPR
from tests.support.rawkafka import SyncClient
from tests.support.verifiable import wait_until

pytestmark = pytest.mark.integration

EXPIRATION_MS = 3000


def _producers(bootstrap, topic):
    c = SyncClient(bootstrap)
    try:
        r = c(DPR(topics=[DPR.TopicRequest(name=topic, partition_indexes=[0])]))
    finally:
        c.close()
    [t] = r.topics
    [p] = t.partitions
    assert p.error_code == 0
    return {a.producer_id: a for a in p.active_producers}


def test_idle_producers_expire_and_open_transactions_stay(broker_factory):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    b = broker_factory(overrides={"producer.id.expiration.ms": str(EXPIRATION_MS),
                                  "producer.id.expiration.check.interval.ms": "200",
                                  "transaction.partition.verification.enable": "false"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("pe", 1, 1)])["pe"].result(30)

    errors = []
    idem = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    stamped = time.monotonic()          # the records' CreateTime is this or later
    for i in range(5):
        idem.produce("pe", b"idempotent-%d" % i, partition=0, on_delivery=lambda e, m: e and errors.append(e))
    assert idem.flush(30) == 0
    txn = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "pe-txn", "linger.ms": 0,
                    "transaction.timeout.ms": 60000})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce("pe", b"open", partition=0)
    assert txn.flush(30) == 0

    before = _producers(b.bootstrap, "pe")
    assert len(before) == 2, before
    txn_pid = next(pid for pid, a in before.items() if a.current_txn_start_offset >= 0)
    idem_pid = next(pid for pid in before if pid != txn_pid)
    assert before[idem_pid].last_sequence == 4

    wait_until(lambda: idem_pid not in _producers(b.bootstrap, "pe"), 30, "the idle producer's expiry")
    assert time.monotonic() - stamped >= EXPIRATION_MS / 1000 - 0.1   # not before its time
    assert txn_pid in _producers(b.bootstrap, "pe")                  # an open transaction stays

    # the forgotten producer goes on at sequence 5: accepted, and known again
    for i in range(5, 8):
        idem.produce("pe", b"idempotent-%d" % i, partition=0, on_delivery=lambda e, m: e and errors.append(e))
    assert idem.flush(30) == 0 and not errors, errors
    again = _producers(b.bootstrap, "pe")
    assert again[idem_pid].last_sequence == 7

    txn.commit_transaction(30)
    wait_until(lambda: txn_pid not in _producers(b.bootstrap, "pe"), 30, "the committed producer's expiry")

"""Transactions under the ACL authorizer, with Kafka's rules: a transactional producer that holds
WRITE on its transactional id and on its topics (and READ on the group and input topics for
offsets sent in the transaction) works without any cluster permission; a topic or group it may
not use fails with the authorization error Kafka answers.  DescribeTransactions and
ListTransactions show a principal only the transactional ids it may DESCRIBE."""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from tests.security.test_acls import _conf, _create_topic, acls, authz_broker  # noqa: F401 - fixture

pytestmark = pytest.mark.integration
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException, TopicPartition  # noqa: E402


def _grant(b, *args):
    r = acls(b, "--add", "--allow-principal", "User:alice", *args)
    assert r.returncode == 0, r.stderr


def _txn_producer(b, tid):
    from confluent_kafka import Producer
    p = Producer({**_conf(b, "alice", "alice-secret"), "transactional.id": tid,
                  "transaction.timeout.ms": 10000, "message.timeout.ms": 8000})
    p.init_transactions(15)
    return p


def _read_committed(b, topic, n_expected, timeout=20):
    from confluent_kafka import Consumer
    c = Consumer({**_conf(b, "admin", "admin-secret"), "group.id": "reader-" + uuid.uuid4().hex[:6],
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe([topic])
    got = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < n_expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        end = time.monotonic() + 1.0          # anything more would be an aborted or duplicate record
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    return got


def test_transactional_producer_needs_only_its_own_acls(authz_broker):
    b = authz_broker
    for t in ("tx-out", "tx-in", "tx-forbidden"):
        _create_topic(b, t)
    tid, group = "tx-alice", "g-tx-alice"
    # no ACL on the transactional id yet: InitProducerId is refused
    with pytest.raises(KafkaException) as e:
        _txn_producer(b, tid)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, e.value

    _grant(b, "--operation", "Write", "--transactional-id", tid)
    _grant(b, "--operation", "Write", "--topic", "tx-out")
    p = _txn_producer(b, tid)
    # AddPartitionsToTxn + Produce + EndTxn with WRITE on the id and the topic only
    p.begin_transaction()
    for i in range(5):
        p.produce("tx-out", f"committed-{i}".encode())
    p.commit_transaction(15)

    # a topic alice may not write: AddPartitionsToTxn answers TOPIC_AUTHORIZATION_FAILED
    p.begin_transaction()
    reports = []
    p.produce("tx-forbidden", b"never", on_delivery=lambda err, m: reports.append(err))
    with pytest.raises(KafkaException):
        p.commit_transaction(15)
    assert [r.code() for r in reports] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], reports
    p.abort_transaction(15)

    # offsets in a transaction: AddOffsetsToTxn needs READ on the group ...
    offsets = [TopicPartition("tx-in", 0, 3)]
    from confluent_kafka import Consumer
    meta = Consumer({**_conf(b, "alice", "alice-secret"), "group.id": group}).consumer_group_metadata()
    p.begin_transaction()
    p.produce("tx-out", b"with-offsets")
    with pytest.raises(KafkaException) as e:
        p.send_offsets_to_transaction(offsets, meta, 15)
    assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, e.value
    p.abort_transaction(15)
    # ... and TxnOffsetCommit READ on the group and on the topic
    _grant(b, "--operation", "Read", "--group", group)
    p.begin_transaction()
    p.produce("tx-out", b"with-offsets")
    with pytest.raises(KafkaException) as e:
        p.send_offsets_to_transaction(offsets, meta, 15)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, e.value
    p.abort_transaction(15)
    _grant(b, "--operation", "Read", "--topic", "tx-in")
    p.begin_transaction()
    p.produce("tx-out", b"with-offsets")
    p.send_offsets_to_transaction(offsets, meta, 15)
    p.commit_transaction(15)

    got = _read_committed(b, "tx-out", 6)
    assert sorted(got) == sorted([f"committed-{i}".encode() for i in range(5)] + [b"with-offsets"])
    from confluent_kafka.admin import AdminClient
    from confluent_kafka import ConsumerGroupTopicPartitions
    a = AdminClient(_conf(b, "admin", "admin-secret"))
    [fut] = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition("tx-in", 0)])]).values()
    [tp] = fut.result(15).topic_partitions
    assert tp.offset == 3


def test_describe_and_list_transactions_show_only_describable_ids(authz_broker):
    from protocol.client import KafkaClientConnection, SaslSettings
    from protocol.messages import DescribeTransactionsRequest, ListTransactionsRequest
    b = authz_broker
    _create_topic(b, "tx-seen")
    _create_topic(b, "tx-hidden")
    # an open transaction of admin's touching two topics, and one of alice's
    from confluent_kafka import Producer
    adm = Producer({**_conf(b, "admin", "admin-secret"), "transactional.id": "tx-admin"})
    adm.init_transactions(15)
    adm.begin_transaction()
    adm.produce("tx-seen", b"a")
    adm.produce("tx-hidden", b"b")
    adm.flush(10)
    secret = Producer({**_conf(b, "admin", "admin-secret"), "transactional.id": "tx-secret"})
    secret.init_transactions(15)
    secret.begin_transaction()
    secret.produce("tx-hidden", b"s")
    secret.flush(10)
    _grant(b, "--operation", "Write", "--transactional-id", "tx-alice2")
    _grant(b, "--operation", "Describe", "--transactional-id", "tx-admin")
    _grant(b, "--operation", "Describe", "--topic", "tx-seen")
    _grant(b, "--operation", "Write", "--topic", "tx-seen")
    al = _txn_producer(b, "tx-alice2")
    al.begin_transaction()
    al.produce("tx-seen", b"c")
    al.flush(10)
    host, port = b.addr("SASL_PLAINTEXT").split(":")

    async def ask():
        conn = await KafkaClientConnection.connect(host, int(port), negotiate=True,
                                                   sasl=SaslSettings("PLAIN", "alice", "alice-secret"))
        try:
            d = await conn.send(DescribeTransactionsRequest(transactional_ids=["tx-admin", "tx-alice2", "tx-nobody"]),
                                version=0)
            lst = await conn.send(ListTransactionsRequest(state_filters=[], producer_id_filters=[]), version=0)
            return d, lst
        finally:
            await conn.close()

    d, lst = asyncio.run(ask())
    states = {s.transactional_id: s for s in d.transaction_states}
    assert states["tx-nobody"].error_code == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert states["tx-admin"].error_code == 0 and states["tx-admin"].transaction_state == "Ongoing"
    # admin's transaction also writes tx-hidden, which alice may not describe: left out
    assert [t.topic for t in states["tx-admin"].topics] == ["tx-seen"]
    assert states["tx-alice2"].error_code == 0 and [t.topic for t in states["tx-alice2"].topics] == ["tx-seen"]
    assert lst.error_code == 0
    assert sorted(s.transactional_id for s in lst.transaction_states) == ["tx-admin", "tx-alice2"]
    for p in (adm, secret, al):
        p.abort_transaction(15)

"""Online migration between the classic and the consumer group protocols against a real broker
process, as a rolling upgrade of consumers does it (``group.consumer.migration.policy``,
Kafka 4.0's default ``bidirectional``):

* a classic group (confluent-kafka with ``group.protocol=classic``, eager ``range`` or
  ``cooperative-sticky``; kafka-python; aiokafka) is joined by a confluent-kafka member with
  ``group.protocol=consumer``: the group becomes a consumer-protocol group, the partitions are
  split between the old and the new member, and records produced afterwards reach the member
  that owns their partition;
* when the consumer-protocol member leaves, the group is a classic group again and the classic
  member owns every partition;
* a kill -9 of the broker under a mixed group: it is loaded back as it was, both members read
  on and keep their commits;
* with the policy ``disabled`` the consumer-protocol member is refused (GROUP_ID_NOT_FOUND) and
  the classic group goes on untouched.
"""
from __future__ import annotations

import re
import time
import uuid

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import JoinGroupRequest, ListGroupsRequest
from tests.integration.test_consumer_protocol import PROPS
from tests.integration.test_groups import (PARTITIONS, SESSION_MS, WAIT, ThreadedConsumer, confluent_consumer,
                                           create_topic, kafka_python_consumer, produce, unique, wait_split)
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.net import wait_for
from tests.support.rawkafka import RawConnection

@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("migration-broker"), name="broker", props=PROPS)) as b:
        yield b


def modern_consumer(bootstrap, topic, group):
    """confluent-kafka with the consumer group protocol (ConsumerGroupHeartbeat)."""
    from confluent_kafka import Consumer, KafkaException

    errors = []

    def factory():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "error_cb": lambda e: errors.append(e)})
        c.subscribe([topic])
        return c

    def poll(c):
        m = c.poll(0.1)
        if m is None:
            return []
        if m.error():
            errors.append(m.error())
            if m.error().fatal():
                raise KafkaException(m.error())
            return []
        return [m.value().decode()]

    tc = ThreadedConsumer(factory, poll, lambda c: {tp.partition for tp in c.assignment()}, lambda c: c.close())
    tc.errors = errors
    return tc


def wait_owns(consumer, parts, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if consumer.snapshot()[0] == parts:
            return
        if consumer.error:
            raise consumer.error
        time.sleep(0.1)
    raise AssertionError(f"owns {consumer.snapshot()[0]}, expected {parts}")


def group_type(bootstrap, group) -> str | None:
    host, port = bootstrap.split(":")
    with RawConnection(host, int(port)) as conn:
        r = conn.request(16, 5, ListGroupsRequest(states_filter=[], types_filter=[]))
        assert r.error_code == E.NONE
        return next((g.group_type for g in r.groups if g.group_id == group), None)


def wait_type(bootstrap, group, kind, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if group_type(bootstrap, group) == kind:
            return
        time.sleep(0.1)
    raise AssertionError(f"group {group} is {group_type(bootstrap, group)}, expected {kind}")


def wait_read(consumer, values, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if set(values) <= set(consumer.snapshot()[1]):
            return
        if consumer.error:
            raise consumer.error
        time.sleep(0.1)
    missing = sorted(set(values) - set(consumer.snapshot()[1]))
    raise AssertionError(f"{len(missing)} records not read: {missing[:10]}")


def rolling_upgrade_and_back(kafka, classic, tag):
    """Classic member alone, then with a consumer-protocol member, then alone again."""
    topic, group = unique(f"mig-{tag}"), unique("g")
    create_topic(kafka.bootstrap, topic)
    first = [f"a{i}" for i in range(40)]
    produce(kafka.bootstrap, topic, first)
    a = classic(kafka.bootstrap, topic, group)
    b = None
    try:
        wait_owns(a, set(range(PARTITIONS)))
        wait_read(a, first)
        assert group_type(kafka.bootstrap, group) == "classic"

        b = modern_consumer(kafka.bootstrap, topic, group)
        sets = wait_split([a, b])
        wait_type(kafka.bootstrap, group, "consumer")
        # records produced now reach the member owning their partition (i % 4)
        second = [f"b{i}" for i in range(40)]
        produce(kafka.bootstrap, topic, second)
        for owner, owned in zip((a, b), sets):
            wait_read(owner, [v for i, v in enumerate(second) if i % PARTITIONS in owned])
        assert not [e for e in b.errors if e.fatal()], b.errors

        b.close()
        b = None
        wait_owns(a, set(range(PARTITIONS)))
        wait_type(kafka.bootstrap, group, "classic")
        third = [f"c{i}" for i in range(20)]
        produce(kafka.bootstrap, topic, third)
        wait_read(a, third)
    finally:
        if b is not None:
            b.close()
        a.close()


def test_eager_confluent_member_upgrades_and_downgrades(kafka):
    rolling_upgrade_and_back(
        kafka, lambda bs, t, g: confluent_consumer(bs, t, g, **{"partition.assignment.strategy": "range"}), "eager")


def test_cooperative_confluent_member_upgrades_and_downgrades(kafka):
    rolling_upgrade_and_back(
        kafka, lambda bs, t, g: confluent_consumer(bs, t, g, **{"partition.assignment.strategy": "cooperative-sticky"}),
        "coop")


def test_kafka_python_member_upgrades_and_downgrades(kafka):
    rolling_upgrade_and_back(kafka, kafka_python_consumer, "kpy")


def aiokafka_consumer(bootstrap, topic, group):
    """aiokafka on an event loop of the consumer's thread (run only inside its calls)."""
    import asyncio

    from aiokafka import AIOKafkaConsumer

    def factory():
        loop = asyncio.new_event_loop()

        async def start():
            c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                 enable_auto_commit=False, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
            await c.start()
            return c
        c = loop.run_until_complete(start())
        c.loop_ = loop
        return c

    def poll(c):
        batches = c.loop_.run_until_complete(c.getmany(timeout_ms=100))
        return [r.value.decode() for recs in batches.values() for r in recs]

    def close(c):
        c.loop_.run_until_complete(c.stop())
        c.loop_.close()

    return ThreadedConsumer(factory, poll, lambda c: {tp.partition for tp in c.assignment()}, close)


def test_aiokafka_member_upgrades_and_downgrades(kafka):
    rolling_upgrade_and_back(kafka, aiokafka_consumer, "aio")


def test_mixed_group_survives_a_kill_9_of_the_broker(broker_factory):
    """kill -9 under a mixed group: the restarted broker loads it from __consumer_offsets (the
    classic member with its ClassicMemberMetadata), both members read on and keep their commits,
    and the group still downgrades when the consumer-protocol member leaves."""
    b = broker_factory(props=PROPS)
    topic, group = unique("mig-kill"), unique("g")
    create_topic(b.bootstrap, topic)
    first = [f"a{i}" for i in range(40)]
    produce(b.bootstrap, topic, first)
    a = confluent_consumer(b.bootstrap, topic, group, **{"partition.assignment.strategy": "range"})
    m = None
    try:
        wait_owns(a, set(range(PARTITIONS)))
        wait_read(a, first)
        m = modern_consumer(b.bootstrap, topic, group)
        _, mine = wait_split([a, m])
        wait_read(m, [v for i, v in enumerate(first) if i % PARTITIONS in mine])    # nothing was committed
        for c in (a, m):
            c.call(lambda k: k.commit(asynchronous=False))
        committed_before = _committed(b.bootstrap, group, topic)
        assert sum(committed_before.values()) > 0, committed_before

        b.restart(clean=False)
        assert re.search(rf"loaded consumer group {group} at epoch \d+: 2 members \(1 classic\)",
                         b.log_text().split("===== start")[-1]), "the mixed group was not loaded as it was"
        assert group_type(b.bootstrap, group) == "consumer"
        sets = wait_split([a, m])
        later = [f"b{i}" for i in range(40)]
        produce(b.bootstrap, topic, later)
        for owner, owned in zip((a, m), sets):
            wait_read(owner, [v for i, v in enumerate(later) if i % PARTITIONS in owned])
        committed_after = _committed(b.bootstrap, group, topic)
        assert all(committed_after[p] >= committed_before[p] for p in committed_before), \
            (committed_before, committed_after)

        m.close()
        m = None
        wait_owns(a, set(range(PARTITIONS)))
        wait_type(b.bootstrap, group, "classic")
    finally:
        if m is not None:
            m.close()
        a.close()


def _committed(bootstrap, group, topic) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def test_disabled_policy_refuses_the_consumer_member(tmp_path):
    props = dict(PROPS, **{"group.consumer.migration.policy": "disabled"})
    with running(BrokerProcess(tmp_path, name="broker", props=props)) as b:
        topic, group = unique("mig-off"), unique("g")
        create_topic(b.bootstrap, topic)
        a = confluent_consumer(b.bootstrap, topic, group, **{"partition.assignment.strategy": "range"})
        m = None
        try:
            wait_owns(a, set(range(PARTITIONS)))
            m = modern_consumer(b.bootstrap, topic, group)
            # librdkafka makes GROUP_ID_NOT_FOUND from ConsumerGroupHeartbeat a fatal error
            def refused():
                return any("The group id does not exist" in str(e) for e in m.errors)
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline and not refused():
                time.sleep(0.1)
            assert refused(), m.errors
            assert m.snapshot()[0] == set()
            assert a.snapshot()[0] == set(range(PARTITIONS))
            assert group_type(b.bootstrap, group) == "classic"
        finally:
            if m is not None:
                m.stop_flag = True
                m.closed.wait(30)
            a.close()


def test_raw_classic_join_into_a_consumer_group(kafka):
    """JoinGroup v9 into a live consumer-protocol group: MEMBER_ID_REQUIRED, then admitted at the
    member's epoch with its first protocol and no leader; a foreign protocol type is refused."""
    from tests.integration.test_consumer_protocol import _coordinator_ready, heartbeat

    topic, group = unique("mig-raw"), unique("g")
    create_topic(kafka.bootstrap, topic)
    host, port = kafka.bootstrap.split(":")
    sub = b"\x00\x00" + b"\x00\x00\x00\x01" + len(topic).to_bytes(2, "big") + topic.encode() + b"\xff\xff\xff\xff"

    def join(member_id, ptype="consumer"):
        return JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                member_id=member_id, group_instance_id=None, protocol_type=ptype, reason=None,
                                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=sub)])

    assert wait_for(lambda: _coordinator_ready(host, int(port), group), WAIT, what="the coordinator")
    with RawConnection(host, int(port)) as conn:
        member = uuid.uuid4().hex[:22]
        r = conn.request(68, 1, heartbeat(group, member, 0, [topic]))
        assert r.error_code == E.NONE and r.member_epoch == 1
        assert conn.request(11, 9, join("", ptype="connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
        r = conn.request(11, 9, join(""))
        assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id
        r = conn.request(11, 9, join(r.member_id))
        assert (r.error_code, r.generation_id, r.protocol_type, r.protocol_name, r.leader, r.members) == \
            (E.NONE, 2, "consumer", "range", "", [])
        # a subscription that does not parse: Kafka's UNKNOWN_SERVER_ERROR, and the member is not added
        bad = join(uuid.uuid4().hex[:22])
        bad.protocols[0].metadata = b"\x00\x00\x00\x00\x00\x09"
        assert conn.request(11, 9, bad).error_code == E.UNKNOWN_SERVER_ERROR
        from protocol.messages import ConsumerGroupDescribeRequest
        d = conn.request(69, 0, ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
        assert len(d.groups[0].members) == 2, d                  # the consumer member and the first classic one
        # v1 (KIP-1099) tells them apart: 1 consumer protocol, 0 classic
        d = conn.request(69, 1, ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
        types = {m.member_id: m.member_type for m in d.groups[0].members}
        assert types.pop(member) == 1 and list(types.values()) == [0], d

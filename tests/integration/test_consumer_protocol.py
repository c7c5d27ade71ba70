"""The consumer group protocol (KIP-848, ``group.protocol=consumer``) against a real broker
process, driven by confluent-kafka (librdkafka 2.x sends ConsumerGroupHeartbeat v1):

* two members split a 4-partition topic disjointly and completely, every record is read once;
  when one closes, the other owns all four;
* commit, close, produce more: a new member resumes exactly at the committed offsets;
* a regex subscription follows topics created later;
* the admin API lists the group as a consumer-protocol group and describes its members and
  their assignments (ConsumerGroupDescribe); kafka-consumer-groups.sh shows them too;
* a static member (group.instance.id) that closes keeps its partitions reserved and gets them
  back under a new member id; after a broker restart a member goes on at its epoch;
* raw requests: a classic JoinGroup of another protocol type (connect) into the live group gets
  INCONSISTENT_GROUP_PROTOCOL (consumers join it: test_group_migration.py), a
  heartbeat with a made-up epoch FENCED_MEMBER_EPOCH, and a broker with the protocol disabled
  answers UNSUPPORTED_VERSION.
"""
from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import ConsumerGroupHeartbeatRequest, JoinGroupRequest
from tests.integration.test_groups import (PARTITIONS, WAIT, ThreadedConsumer, create_topic, produce, unique,
                                           wait_split)
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.net import wait_for
from tests.support.rawkafka import RawConnection

PROPS = {
    "num.partitions": PARTITIONS,
    # short enough for tests; Kafka's defaults are 5 s heartbeats and a 45 s session
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.session.timeout.ms": 6000,
}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("kip848-broker"), name="broker", props=PROPS)) as b:
        yield b


def consumer(bootstrap, group, topics, **conf):
    from confluent_kafka import Consumer

    def factory():
        cfg = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
               "auto.offset.reset": "earliest", "enable.auto.commit": False}
        cfg.update(conf)
        c = Consumer(cfg)
        c.subscribe(topics)
        return c

    def poll(c):
        m = c.poll(0.1)
        if m is None or m.error():
            return []
        return [m.value().decode()]

    return ThreadedConsumer(factory, poll, lambda c: {(tp.topic, tp.partition) for tp in c.assignment()},
                            lambda c: c.close())


def wait_values(consumers, n, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        vals = [v for c in consumers for v in c.snapshot()[1]]
        if len(vals) >= n:
            return vals
        time.sleep(0.1)
    raise AssertionError(f"got {len(vals)} of {n} records")


def test_two_members_split_and_the_survivor_takes_over(kafka):
    topic, group = unique("kip848"), unique("g")
    create_topic(kafka.bootstrap, topic)
    a = consumer(kafka.bootstrap, group, [topic])
    b = consumer(kafka.bootstrap, group, [topic])
    try:
        sets = wait_split([a, b])
        assert all(len(s) == 2 for s in sets), sets
        # produced once the split is done: each record goes to exactly one member
        values = [f"v{i}" for i in range(200)]
        produce(kafka.bootstrap, topic, values)
        wait_values([a, b], len(values))
        time.sleep(0.5)
        got = [v for c in (a, b) for v in c.snapshot()[1]]
        assert sorted(got) == sorted(values)
        by_partition = {p: [v for v in values if int(v[1:]) % PARTITIONS == p] for p in range(PARTITIONS)}
        for c, s in zip((a, b), sets):
            assert sorted(c.snapshot()[1]) == sorted(v for _, p in s for v in by_partition[p])
        b.close()
        wait_for(lambda: len(a.snapshot()[0]) == PARTITIONS, WAIT, what="the survivor to own every partition")
    finally:
        a.close()
        if not b.closed.is_set():
            b.close()


def test_commit_and_resume(kafka):
    topic, group = unique("kip848c"), unique("g")
    create_topic(kafka.bootstrap, topic)
    first = [f"a{i}" for i in range(100)]
    produce(kafka.bootstrap, topic, first)
    c = consumer(kafka.bootstrap, group, [topic])
    try:
        wait_values([c], len(first))
        c.call(lambda k: k.commit(asynchronous=False))
    finally:
        c.close()
    second = [f"b{i}" for i in range(100)]
    produce(kafka.bootstrap, topic, second)
    c2 = consumer(kafka.bootstrap, group, [topic])
    try:
        wait_values([c2], len(second))
        time.sleep(1.0)
        assert sorted(c2.snapshot()[1]) == sorted(second)
    finally:
        c2.close()


def test_deleting_an_empty_groups_offsets_leaves_the_group(kafka):
    """Kafka 4.x: OffsetDelete on an empty consumer-protocol group deletes its offsets only; the
    group stays listed (Empty) until the periodic cleanup, where a classic group goes at once."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient
    topic, group = unique("kip848o"), unique("g")
    create_topic(kafka.bootstrap, topic)
    produce(kafka.bootstrap, topic, [f"a{i}" for i in range(20)])
    c = consumer(kafka.bootstrap, group, [topic])
    try:
        wait_values([c], 20)
        c.call(lambda k: k.commit(asynchronous=False))
    finally:
        c.close()
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})

    def state():
        listed = admin.list_consumer_groups().result(timeout=30).valid
        return next((str(g.state).rsplit(".", 1)[-1] for g in listed if g.group_id == group), None)
    wait_for(lambda: state() == "EMPTY", WAIT, what="the group to be empty")
    import kafka as kp                       # kafka-python's admin client sends OffsetDelete
    kadmin = kp.KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        done = kadmin.delete_group_offsets(group, [kp.TopicPartition(topic, p) for p in range(PARTITIONS)])
    finally:
        kadmin.close()
    assert sorted(tp.partition for tp, err in done.items() if err is kp.errors.NoError) == list(range(PARTITIONS))
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    assert [tp.offset for tp in got.topic_partitions if tp.offset >= 0] == []
    assert state() == "EMPTY"


def test_regex_subscription_follows_new_topics(kafka):
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    create_topic(kafka.bootstrap, f"{prefix}-one", 2)
    produce(kafka.bootstrap, f"{prefix}-one", ["x1", "x2"], partitions=2)
    c = consumer(kafka.bootstrap, unique("g"), [f"^{prefix}-.*"], **{"topic.metadata.refresh.interval.ms": 1000})
    try:
        wait_values([c], 2)
        create_topic(kafka.bootstrap, f"{prefix}-two", 2)
        produce(kafka.bootstrap, f"{prefix}-two", ["y1", "y2"], partitions=2)
        wait_for(lambda: {t for t, _ in c.snapshot()[0]} == {f"{prefix}-one", f"{prefix}-two"},
                 WAIT, what="the new topic to be assigned")
        assert sorted(wait_values([c], 4)) == ["x1", "x2", "y1", "y2"]
    finally:
        c.close()


def test_admin_lists_and_describes_the_group(kafka):
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient
    topic, group = unique("kip848d"), unique("g")
    create_topic(kafka.bootstrap, topic)
    a = consumer(kafka.bootstrap, group, [topic], **{"client.id": "member-a"})
    b = consumer(kafka.bootstrap, group, [topic], **{"client.id": "member-b"})
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    try:
        sets = wait_split([a, b])
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=30)
        mine = [g for g in listed.valid if g.group_id == group]
        assert len(mine) == 1 and mine[0].type == ConsumerGroupType.CONSUMER
        assert not [g for g in admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(timeout=30).valid
                    if g.group_id == group]

        def described():
            d = admin.describe_consumer_groups([group])[group].result(timeout=30)
            return d if str(d.state).endswith("STABLE") else None
        d = wait_for(described, WAIT, what="a stable description")
        assert d.type == ConsumerGroupType.CONSUMER
        by_client = {m.client_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
                     for m in d.members}
        assert set(by_client) == {"member-a", "member-b"}
        assert sorted(map(sorted, by_client.values())) == sorted(map(sorted, sets))
        # the command-line tool shows the members too
        out = subprocess.run([sys.executable, "-m", "tools.consumer_groups", "--bootstrap-server", kafka.bootstrap,
                              "--describe", "--group", group, "--members"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "member-a" in out.stdout and "member-b" in out.stdout
    finally:
        a.close()
        b.close()


def heartbeat(group, member_id, epoch, topics=("t",)):
    join = epoch == 0
    return ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30000 if join else -1, subscribed_topic_names=list(topics) if join else None,
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=[] if join else None)


def test_raw_protocol_errors(kafka):
    topic, group = unique("kip848r"), unique("g")
    create_topic(kafka.bootstrap, topic)
    host, port = kafka.bootstrap.split(":")
    coord_ready = wait_for(lambda: _coordinator_ready(host, int(port), group), WAIT, what="the coordinator")
    assert coord_ready
    with RawConnection(host, int(port)) as conn:
        member = uuid.uuid4().hex[:22]
        r = conn.request(68, 1, heartbeat(group, member, 0, [topic]))
        assert r.error_code == E.NONE and r.member_epoch == 1 and r.member_id == member
        assert sorted(p for tp in r.assignment.topic_partitions for p in tp.partitions) == list(range(PARTITIONS))
        r = conn.request(68, 1, heartbeat(group, member, 7))
        assert r.error_code == E.FENCED_MEMBER_EPOCH
        r = conn.request(68, 1, heartbeat(group, "", 0, [topic]))
        assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "MemberId can't be empty.")
        r = conn.request(68, 0, heartbeat(group, "", 0, [topic]))      # v0: the broker makes the id
        assert r.error_code == E.NONE and len(r.member_id) == 22
        join = JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                                group_instance_id=None, protocol_type="connect", reason=None,
                                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
        r = conn.request(11, 9, join)
        assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        r = conn.request(68, 1, heartbeat(group, member, -1))
        assert (r.error_code, r.member_epoch) == (E.NONE, -1)


def test_raw_offsets_by_topic_id(kafka):
    """OffsetCommit v10 and OffsetFetch v10 (Kafka 4.1, what Java's 4.x consumer sends with
    group.protocol=consumer) name topics by id: the answers carry the ids, an id of no topic is
    UNKNOWN_TOPIC_ID and a partition the topic lacks UNKNOWN_TOPIC_OR_PARTITION."""
    from protocol.messages import MetadataRequest, OffsetCommitRequest as C, OffsetFetchRequest as F
    topic, group = unique("kip848id"), unique("g")
    create_topic(kafka.bootstrap, topic)
    host, port = kafka.bootstrap.split(":")
    assert wait_for(lambda: _coordinator_ready(host, int(port), group), WAIT, what="the coordinator")
    ghost = uuid.uuid4()
    with RawConnection(host, int(port)) as conn:
        tid = conn.request(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                  allow_auto_topic_creation=False)).topics[0].topic_id
        member = uuid.uuid4().hex[:22]
        r = conn.request(68, 1, heartbeat(group, member, 0, [topic]))
        assert r.error_code == E.NONE and r.member_epoch == 1
        r = conn.request(8, 10, C(group_id=group, generation_id_or_member_epoch=1, member_id=member,
                                  group_instance_id=None, retention_time_ms=-1, topics=[
                                      C.OffsetCommitRequestTopic(topic_id=tid, partitions=[
                                          C.OffsetCommitRequestPartition(partition_index=p, committed_offset=5 + p,
                                                                         committed_leader_epoch=-1,
                                                                         committed_metadata="m") for p in (0, 99)]),
                                      C.OffsetCommitRequestTopic(topic_id=ghost, partitions=[
                                          C.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                         committed_leader_epoch=-1,
                                                                         committed_metadata="")])]))
        got = sorted((str(t.topic_id), t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                     for t in r.topics)
        assert got == sorted([(str(tid), "", [(0, E.NONE), (99, E.UNKNOWN_TOPIC_OR_PARTITION)]),
                              (str(ghost), "", [(0, E.UNKNOWN_TOPIC_ID)])]), r

        def fetch(version, topics):
            r = conn.request(9, version, F(require_stable=False, groups=[F.OffsetFetchRequestGroup(
                group_id=group, member_id=member, member_epoch=1, topics=topics)]))
            g = r.groups[0]
            assert g.error_code == E.NONE, r
            return sorted((str(t.topic_id), t.name, [(p.partition_index, p.committed_offset, p.metadata,
                                                      p.error_code) for p in t.partitions]) for t in g.topics)

        asked = [F.OffsetFetchRequestTopics(topic_id=tid, partition_indexes=[0, 1]),
                 F.OffsetFetchRequestTopics(topic_id=ghost, partition_indexes=[3])]
        assert fetch(10, asked) == sorted([(str(tid), "", [(0, 5, "m", 0), (1, -1, "", 0)]),
                                           (str(ghost), "", [(3, -1, "", E.UNKNOWN_TOPIC_ID)])])
        zero = "00000000-0000-0000-0000-000000000000"
        assert fetch(10, None) == [(str(tid), "", [(0, 5, "m", 0)])]           # every offset: by id
        assert fetch(9, None) == [(zero, topic, [(0, 5, "m", 0)])]             # by name before v10


def _coordinator_ready(host, port, group):
    from protocol.messages import FindCoordinatorRequest
    with RawConnection(host, port) as conn:
        r = conn.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
        return r.coordinators[0].error_code == E.NONE


def test_disabled_protocol_answers_unsupported_version(tmp_path):
    props = dict(PROPS, **{"group.coordinator.rebalance.protocols": "classic"})
    with running(BrokerProcess(tmp_path, name="classic-only", props=props)) as b:
        host, port = b.bootstrap.split(":")
        group = unique("g")
        wait_for(lambda: _coordinator_ready(host, int(port), group), WAIT, what="the coordinator")
        with RawConnection(host, int(port)) as conn:
            r = conn.request(68, 1, heartbeat(group, "m" * 22, 0))
            assert r.error_code == E.UNSUPPORTED_VERSION


def test_member_goes_on_after_a_broker_restart(tmp_path):
    """The group's records in __consumer_offsets bring the membership back after a restart: the
    member heartbeats on at its epoch (no rejoin) and reads what is produced next."""
    with running(BrokerProcess(tmp_path, name="restart", props=PROPS)) as b:
        topic, group = unique("kip848s"), unique("g")
        create_topic(b.bootstrap, topic)
        produce(b.bootstrap, topic, [f"a{i}" for i in range(40)])
        c = consumer(b.bootstrap, group, [topic], **{"enable.auto.commit": True, "auto.commit.interval.ms": 200})
        try:
            wait_values([c], 40)
            time.sleep(1.0)                      # an auto-commit after the last record
            b.restart()
            produce(b.bootstrap, topic, [f"b{i}" for i in range(40)])
            got = wait_values([c], 80)
            assert sorted(set(got)) == sorted({f"a{i}" for i in range(40)} | {f"b{i}" for i in range(40)})
            assert c.error is None
            # the second broker process loaded the group and saw no new join
            second = b.log_text().split("===== start")[-1]
            assert f"joined consumer group {group}" not in second
            assert re.search(r"loaded [1-9][0-9]* groups from __consumer_offsets", second)
        finally:
            c.close()


def test_static_member_gets_its_partitions_back(kafka):
    """group.instance.id with the consumer protocol: a closing static member leaves with epoch -2,
    its partitions stay reserved (the other member does not get them), and the same instance id
    coming back under a new member id gets the same partitions."""
    topic, group = unique("kip848st"), unique("g")
    create_topic(kafka.bootstrap, topic)
    a = consumer(kafka.bootstrap, group, [topic], **{"group.instance.id": "inst-a"})
    b = consumer(kafka.bootstrap, group, [topic], **{"group.instance.id": "inst-b"})
    try:
        sets = wait_split([a, b])
        held = sets[1]
        b.close()
        time.sleep(2.0)                           # four heartbeats of the member that stayed
        assert a.snapshot()[0] == sets[0]
        b2 = consumer(kafka.bootstrap, group, [topic], **{"group.instance.id": "inst-b"})
        try:
            wait_for(lambda: b2.snapshot()[0] == held, WAIT, what="the static member's partitions back")
            assert a.snapshot()[0] == sets[0]
        finally:
            b2.close()
    finally:
        a.close()
        if not b.closed.is_set():
            b.close()

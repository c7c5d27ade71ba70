"""kafka-groups.sh (Kafka 4.0's GroupsCommand, KIP-1043) against a real broker: groups of every
kind (a simple group holding offsets, a classic consumer group, a consumer-protocol group, a
classic group of another protocol type) listed with their type and protocol, each filter, and
the argument checks."""
from __future__ import annotations

import time
import uuid

from tests.tools.conftest import tool


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _consumer(bootstrap, group, topic, **conf):
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", **conf})
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.1)
    assert c.assignment(), f"{group} never got an assignment"
    return c


def _simple_commit(bootstrap, group, topic):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    c.close()


def _connect_group(bootstrap, group):
    """A classic group of protocol type connect: one JoinGroup v3 (no member id round trip)."""
    from protocol.messages import JoinGroupRequest
    from tests.support.rawkafka import RawConnection
    host, port = bootstrap.split(":")
    with RawConnection(host, int(port)) as conn:
        req = JoinGroupRequest(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
                               group_instance_id=None, protocol_type="connect", reason=None,
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="sessioned", metadata=b"x")])
        r = conn.request(11, 3, req)
        assert r.error_code == 0, r


def test_list_every_kind_of_group_and_filter(kafka):
    from confluent_kafka.admin import AdminClient, NewTopic
    bs = kafka.bootstrap
    topic = unique("grp-topic")
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(15)
    simple, classic, modern, connect = (unique(p) for p in ("simple", "classic", "modern", "connect"))
    _simple_commit(bs, simple, topic)
    c1 = _consumer(bs, classic, topic)
    c2 = _consumer(bs, modern, topic, **{"group.protocol": "consumer"})
    try:
        _connect_group(bs, connect)
        r = tool("kafka-groups", "--bootstrap-server", bs, "--list")
        assert r.rc == 0, r
        assert r.lines[0] == "GROUP".ljust(20) + " " + "TYPE".ljust(20) + " " + "PROTOCOL".ljust(20), r
        rows = {line.split()[0]: line.split()[1:] for line in r.lines[1:]}
        assert rows[simple] == ["Classic"], r          # no protocol type: an empty last column
        assert rows[classic] == ["Classic", "consumer"]
        assert rows[modern] == ["Consumer", "consumer"]
        assert rows[connect] == ["Classic", "connect"]
        line = next(x for x in r.lines if x.startswith(modern))
        assert line == modern.ljust(20) + " " + "Consumer".ljust(20) + " " + "consumer".ljust(20) + " ", repr(line)

        def listed(*args):
            r = tool("kafka-groups", "--bootstrap-server", bs, "--list", *args)
            assert r.rc == 0, r
            return {line.split()[0] for line in r.lines[1:]} & {simple, classic, modern, connect}
        assert listed("--consumer") == {simple, classic, modern}
        assert listed("--group-type", "consumer") == {modern}
        assert listed("--group-type", "CLASSIC") == {simple, classic, connect}
        assert listed("--group-type", "classic", "--protocol", "connect") == {connect}
        assert listed("--protocol", "consumer") == {classic, modern}
        # kafka-consumer-groups.sh refuses to describe it, in the words of Kafka's admin client
        r = tool("kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", connect)
        assert r.rc == 1 and r.err.strip() == (f"Error: Executing consumer group command failed due to "
                                               f"java.lang.IllegalArgumentException: GroupId {connect} is not a "
                                               f"consumer group (connect)."), r
        assert listed("--share") == set() and listed("--streams") == set()
    finally:
        c1.close()
        c2.close()


def test_argument_checks(kafka):
    r = tool("kafka-groups", "--bootstrap-server", kafka.bootstrap, "--list", "--group-type", "queue")
    assert r.rc == 1 and "--group-type must be a valid group type." in r.err, r
    r = tool("kafka-groups", "--bootstrap-server", kafka.bootstrap, "--list", "--consumer", "--share")
    assert r.rc == 1 and 'Option "[consumer]" can\'t be used with option "[share]"' in r.err, r
    r = tool("kafka-groups", "--bootstrap-server", kafka.bootstrap)
    assert r.rc == 1 and "Command must include exactly one action: --list." in r.err, r
    r = tool("kafka-groups")
    assert r.rc == 1 and "This tool helps to list groups of all types." in r.err, r

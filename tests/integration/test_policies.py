"""``create.topic.policy.class.name`` and ``alter.config.policy.class.name`` (broker/policy.py)
with unmodified clients: refusals reach kafka-python, confluent-kafka and the kafka-* tools as
POLICY_VIOLATION with the policy's message; the policy sees Kafka's request metadata (resolved
partition count and replication factor, or the explicit assignment); validate-only requests and
automatic creation are checked too; the broker's own errors come first; a policy that fails
answers UNKNOWN_SERVER_ERROR; a class that cannot be imported stops start-up."""
from __future__ import annotations

import json
import uuid

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import PolicyViolationError, TopicAlreadyExistsError, UnknownError

from protocol.errors import ErrorCode as E
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.rawkafka import RawConnection
from tests.tools.conftest import tool

POLICIES = "tests.integration.policies"


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    return tmp_path_factory.mktemp("policy") / "requests.jsonl"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory, record):
    props = {"create.topic.policy.class.name": f"{POLICIES}.TopicRules",
             "alter.config.policy.class.name": f"{POLICIES}.ConfigRules",
             "odradek.test.policy.record": str(record),
             "num.partitions": 2, "auto.create.topics.enable": "true"}
    with running(BrokerProcess(tmp_path_factory.mktemp("policy-broker"), name="policy-broker", props=props)) as b:
        yield b


def seen(record, kind, **match):
    out = []
    for line in record.read_text().splitlines() if record.exists() else []:
        r = json.loads(line)
        if r.pop("kind") == kind and all(r.get(k) == v for k, v in match.items()):
            out.append(r)
    return out


def name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def admin(kafka):
    return KafkaAdminClient(bootstrap_servers=kafka.bootstrap)


def create_errors(kafka, topics, validate_only=False):
    a = admin(kafka)
    try:
        resp = a.create_topics(topics, validate_only=validate_only, raise_on_error=False)
    finally:
        a.close()
    return {t[0]: (t[1], t[2]) for t in resp.topic_errors} if hasattr(resp, "topic_errors") else resp


def test_create_topics_kafka_python(kafka, record):
    ok, big, bad = name("ok"), name("big"), name("forbidden")
    a = admin(kafka)
    try:
        a.create_topics([NewTopic(ok, 3, 1)])
        with pytest.raises(PolicyViolationError, match="At most 5 partitions, not 6"):
            a.create_topics([NewTopic(big, 6, 1)])
        with pytest.raises(PolicyViolationError, match=f"Topic {bad} is forbidden here"):
            a.create_topics([NewTopic(bad, 1, 1)], validate_only=True)
        with pytest.raises(TopicAlreadyExistsError):     # the broker's own check comes first
            a.create_topics([NewTopic(ok, 9, 1)])
        with pytest.raises(UnknownError):
            a.create_topics([NewTopic(name("boom"), 1, 1)])
        topics = set(a.list_topics())
    finally:
        a.close()
    assert ok in topics and big not in topics and bad not in topics
    assert seen(record, "create", topic=ok) == [
        {"topic": ok, "num_partitions": 3, "replication_factor": 1, "replica_assignments": None, "configs": {}}]
    assert len(seen(record, "create", topic=bad)) == 1
    # the existing topic never reached the policy the second time
    assert len(seen(record, "create", topic=ok)) == 1


def test_create_topics_defaults_and_assignments(kafka, record):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic as CNewTopic
    a = AdminClient({"bootstrap.servers": kafka.bootstrap})
    dflt, manual, bad = name("dflt"), name("manual"), name("forbidden")
    fs = a.create_topics([CNewTopic(dflt, config={"cleanup.policy": "compact"}), CNewTopic(bad, 1, 1)],
                         request_timeout=15)
    fs[dflt].result(15)
    ka = admin(kafka)
    try:
        ka.create_topics([NewTopic(manual, -1, -1, replica_assignments={0: [0]})])
    finally:
        ka.close()
    with pytest.raises(ck.KafkaException) as e:
        fs[bad].result(15)
    assert e.value.args[0].code() == ck.KafkaError.POLICY_VIOLATION
    assert f"Topic {bad} is forbidden here." in e.value.args[0].str()
    # -1 partitions / replication factor arrive resolved from the broker's defaults
    assert seen(record, "create", topic=dflt) == [
        {"topic": dflt, "num_partitions": 2, "replication_factor": 1, "replica_assignments": None,
         "configs": {"cleanup.policy": "compact"}}]
    # an explicit assignment arrives as such, without a partition count or replication factor
    got = seen(record, "create", topic=manual)
    assert len(got) == 1 and got[0]["num_partitions"] is None and got[0]["replication_factor"] is None
    assert list(got[0]["replica_assignments"].values()) == [[0]]


def test_automatic_creation_is_checked(kafka):
    bad, ok = name("forbidden"), name("auto")
    with RawConnection(kafka.host, kafka.port) as conn:
        md = conn.metadata([bad, ok], auto_create=True)
    errors = {t.name: t.error_code for t in md.topics}
    assert errors[bad] == E.POLICY_VIOLATION
    assert errors[ok] in (0, E.LEADER_NOT_AVAILABLE)
    a = admin(kafka)
    try:
        topics = set(a.list_topics())
    finally:
        a.close()
    assert ok in topics and bad not in topics


def test_topics_tool(kafka):
    bad = name("forbidden")
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--create", "--topic", bad)
    assert r.rc == 1 and r.lines[0] == f"Error while executing topic command : Topic {bad} is forbidden here.", r


def test_alter_configs(kafka, record):
    t = name("cfg")
    a = admin(kafka)
    try:
        a.create_topics([NewTopic(t, 1, 1)])
    finally:
        a.close()
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--alter", "--entity-type", "topics",
             "--entity-name", t, "--add-config", "retention.ms=10")
    assert r.rc != 0 and "retention.ms must be at least 1000, not 10." in r.out + r.err, r
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--alter", "--entity-type", "topics",
             "--entity-name", t, "--add-config", "retention.ms=5000")
    assert r.rc == 0, r
    # the incremental API: the policy sees the request's entries (a DELETE as None)
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--alter", "--entity-type", "topics",
             "--entity-name", t, "--delete-config", "retention.ms")
    assert r.rc == 0, r
    entries = [x["configs"] for x in seen(record, "alter", resource_type="TOPIC", resource_name=t)]
    assert entries == [{"retention.ms": "10"}, {"retention.ms": "5000"}, {"retention.ms": None}]
    # the legacy AlterConfigs API (kafka-python), validate-only included, and a broker resource
    a = admin(kafka)
    try:
        res = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t, configs={"retention.ms": "20"})],
                              validate_only=True, incremental=False, raise_on_unknown=False)
        assert "PolicyViolation" in repr(res) and "not 20" in repr(res), res
        res = a.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0", configs={"log.cleaner.threads": "2"})],
                              incremental=False, raise_on_unknown=False)
        assert "PolicyViolation" in repr(res) and "log.cleaner.threads is fixed." in repr(res), res
    finally:
        a.close()
    assert seen(record, "alter", resource_type="BROKER", resource_name="0")[-1]["configs"] == {
        "log.cleaner.threads": "2"}
    # an invalid value is the broker's own error, before the policy
    before = len(seen(record, "alter"))
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--alter", "--entity-type", "topics",
             "--entity-name", t, "--add-config", "retention.ms=abc")
    assert r.rc != 0 and "POLICY" not in (r.out + r.err).upper(), r
    assert len(seen(record, "alter")) == before


@pytest.mark.parametrize("key,value,message", [
    ("create.topic.policy.class.name", "org.example.CreateTopicPolicy",
     "Class org.example.CreateTopicPolicy cannot be found"),
    ("alter.config.policy.class.name", f"{POLICIES}.PolicyViolationException",    # a class, but no policy
     "the class has no validate(request) method"),
    ("client.quota.callback.class", "com.example.MyQuotaCallback",
     "Invalid value com.example.MyQuotaCallback for configuration client.quota.callback.class"),
])
def test_a_class_that_cannot_be_loaded_stops_start_up(tmp_path, key, value, message):
    b = BrokerProcess(tmp_path / "b", name="bad-plugin", props={key: value})
    with pytest.raises(Exception):
        b.start()
    b.stop()
    assert message in b.log_text()


def test_streams_internal_topics_go_through_the_create_policy(kafka, record):
    """The internal topics a streams group's coordinator creates are checked by the policy, as
    Kafka's controller checks every creation: a refused one shows in the heartbeat's status."""
    import time
    from protocol.messages import (CreateTopicsRequest as C, FindCoordinatorRequest as F,
                                   StreamsGroupHeartbeatRequest as H)
    from tests.support.rawkafka import SyncClient
    group = name("forbidden")
    c = SyncClient(kafka.bootstrap)
    try:
        src = name("src")
        assert c(C(topics=[C.CreatableTopic(name=src, num_partitions=2, replication_factor=1, assignments=[],
                                            configs=[])], timeout_ms=10000, validate_only=False)).topics[0].error_code == 0
        while c(F(key=group, key_type=0, coordinator_keys=[group]), version=4).coordinators[0].error_code:
            time.sleep(0.2)
        topo = H.Topology(epoch=0, subtopologies=[H.Subtopology(
            subtopology_id="0", source_topics=[src], source_topic_regex=[], repartition_sink_topics=[],
            repartition_source_topics=[], copartition_groups=[],
            state_changelog_topics=[H.TopicInfo(name=f"{group}-store-changelog", partitions=0, replication_factor=0,
                                                topic_configs=[])])])
        req = H(group_id=group, member_id="m", member_epoch=0, endpoint_information_epoch=0, rebalance_timeout_ms=1000,
                topology=topo, active_tasks=[], standby_tasks=[], warmup_tasks=[], process_id="p")
        deadline = time.monotonic() + 20
        while True:
            r = c(req)
            assert r.error_code == 0
            details = [s.status_detail for s in r.status if s.status_code == 3]
            if details and "Creation failed" in details[0]:
                break
            assert time.monotonic() < deadline, r.status
            req = H(group_id=group, member_id="m", member_epoch=r.member_epoch, endpoint_information_epoch=0,
                    active_tasks=[], standby_tasks=[], warmup_tasks=[])
            time.sleep(0.3)
        assert details[0] == (f"Internal topics are missing: {group}-store-changelog; Creation failed: "
                              f"{group}-store-changelog (POLICY_VIOLATION: Topic {group}-store-changelog is "
                              f"forbidden here.).")
        assert seen(record, "create", topic=f"{group}-store-changelog")
    finally:
        c.close()

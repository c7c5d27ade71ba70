"""Admin APIs against a real broker process, driven by kafka-python's KafkaAdminClient,
confluent-kafka's AdminClient and (for versions/corner cases the clients do not reach) raw
requests built with the project's message classes.

One broker serves the whole module (topic names are unique per test); it runs with a short
retention-check interval and file-delete delay so that config changes and deletions can be
observed quickly.
"""
from __future__ import annotations

import os
import re
import socket
import struct
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition as CTopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource as CResource,
                                   ConfigSource, NewPartitions as CNewPartitions, NewTopic as CNewTopic)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions
from kafka.errors import MessageSizeTooLargeError

from protocol import api
from protocol.messages import (AlterConfigsRequest, ApiVersionsRequest, CreatePartitionsRequest,
                               CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
                               DescribeClusterRequest, DescribeConfigsRequest, DescribeLogDirsRequest,
                               IncrementalAlterConfigsRequest, OffsetForLeaderEpochRequest)
from tests.support import BrokerProcess
from tests.support.broker import running

pytestmark = pytest.mark.integration

PROPS = {
    "num.partitions": "2",
    "log.retention.check.interval.ms": "300",
    "log.segment.delete.delay.ms": "200",
}

# Kafka error codes
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_OUT_OF_RANGE = 1
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNKNOWN_TOPIC_ID = 100
POLICY_VIOLATION = 44
TOO_LARGE = "Unable to perform excessively large batch operation."


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("admin-broker"), props=PROPS)
    with running(b):
        yield b


@pytest.fixture(scope="module")
def kp(srv):
    a = KafkaAdminClient(bootstrap_servers=srv.bootstrap, request_timeout_ms=15000)
    yield a
    a.close()


@pytest.fixture(scope="module")
def ck(srv):
    return AdminClient({"bootstrap.servers": srv.bootstrap})


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _wait(fs, timeout=15):
    """Resolve a confluent futures dict; {key: result or KafkaError}."""
    out = {}
    for k, f in fs.items():
        try:
            out[k] = f.result(timeout=timeout)
        except KafkaException as e:
            out[k] = e.args[0]
    return out


def _partitions(kp, topic):
    meta = kp.describe_topics([topic])[0]
    return sorted(p["partition_index"] for p in meta["partitions"]) if meta["error_code"] == 0 else None


def _produce(srv, topic, n, size=100, partition=0):
    p = KafkaProducer(bootstrap_servers=srv.bootstrap, acks=1, linger_ms=0)
    try:
        for i in range(n):
            p.send(topic, value=b"%06d" % i + b"x" * (size - 6), partition=partition).get(timeout=15)
    finally:
        p.close()


# ----------------------------------------------------------------------------- raw requests

class Raw:
    def __init__(self, srv):
        self.sock = socket.create_connection((srv.host, srv.port), timeout=10)
        self.cid = 0

    def call(self, api_key, version, body):
        self.cid += 1
        hdr = api.make_request_header(api_key, version, self.cid, "admin-test")
        data = api.encode_request(hdr, body)
        self.sock.sendall(struct.pack(">i", len(data)) + data)
        size = struct.unpack(">i", self._read(4))[0]
        _h, resp = api.decode_response(self._read(size), api_key, version)
        return resp

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return buf

    def close(self):
        self.sock.close()


@pytest.fixture
def raw(srv):
    r = Raw(srv)
    yield r
    r.close()


# ----------------------------------------------------------------------------- ApiVersions

def test_admin_api_versions_advertised(raw):
    resp = raw.call(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    expected = {19: (0, 7), 20: (0, 6), 21: (0, 2), 23: (0, 4), 32: (0, 4), 33: (0, 2),
                35: (0, 4), 37: (0, 3), 44: (0, 1), 60: (0, 2)}
    for k, rng in expected.items():
        assert got.get(k) == rng, k


def test_allocate_producer_ids_on_the_embedded_store(raw, srv):
    """AllocateProducerIds (67) v0 on one broker without ZooKeeper: its own id gets consecutive
    blocks of 1000 (shared with the ids its idempotent producers get); another id is not
    registered."""
    from protocol.messages import AllocateProducerIdsRequest as Q
    got = {k.api_key: (k.min_version, k.max_version) for k in raw.call(
        18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")).api_keys}
    assert got[67] == (0, 0)
    meta = next(srv.log_dir.rglob("meta.properties")).read_text()
    own = int(re.search(r"^(?:broker|node)\.id=(\d+)$", meta, re.M).group(1))
    a = raw.call(67, 0, Q(broker_id=own, broker_epoch=-1))
    b = raw.call(67, 0, Q(broker_id=own, broker_epoch=-1))
    assert (a.error_code, a.producer_id_len, b.error_code, b.producer_id_len) == (0, 1000, 0, 1000)
    assert b.producer_id_start == a.producer_id_start + 1000
    bad = raw.call(67, 0, Q(broker_id=own + 1, broker_epoch=-1))
    assert (bad.error_code, bad.producer_id_start, bad.producer_id_len) == (102, 0, 0)


# ----------------------------------------------------------------------------- CreateTopics

def test_create_topic_with_configs_returns_metadata(kp):
    t = _name("cfg")
    res = kp.create_topics({t: {"num_partitions": 3, "replication_factor": 1,
                                "configs": {"retention.ms": "12345", "cleanup.policy": "compact"}}})
    r = res["topics"][0]
    assert r["error_code"] == 0 and r["name"] == t
    assert r["num_partitions"] == 3 and r["replication_factor"] == 1
    assert r["topic_id"] is not None
    assert r["configs"]["retention.ms"]["value"] == "12345"
    assert r["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert r["configs"]["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert _partitions(kp, t) == [0, 1, 2]
    described = kp.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)])
    assert described["topic"][t]["cleanup.policy"]["value"] == "compact"


def test_create_topic_defaults_from_broker(kp):
    t = _name("dflt")
    r = kp.create_topics({t: {}})["topics"][0]       # -1 / -1
    assert r["error_code"] == 0
    assert r["num_partitions"] == 2 and r["replication_factor"] == 1   # num.partitions=2
    assert _partitions(kp, t) == [0, 1]


def test_create_validate_only(kp, ck):
    t = _name("vo")
    r = kp.create_topics({t: {"num_partitions": 4}}, validate_only=True)["topics"][0]
    assert r["error_code"] == 0 and r["num_partitions"] == 4
    t2 = _name("vo-ck")
    out = _wait(ck.create_topics([CNewTopic(t2, 2, 1)], validate_only=True))
    assert out[t2] is None
    names = set(kp.list_topics())
    assert t not in names and t2 not in names
    # validation still reports errors
    bad = kp.create_topics({_name("vo"): {"num_partitions": 0}}, validate_only=True,
                           raise_errors=False)["topics"][0]
    assert bad["error_code"] == INVALID_PARTITIONS


def test_create_explicit_assignment(kp, ck):
    t = _name("asg")
    r = kp.create_topics({t: {"assignments": {0: [0], 1: [0], 2: [0]}}})["topics"][0]
    assert r["error_code"] == 0 and r["num_partitions"] == 3
    assert _partitions(kp, t) == [0, 1, 2]
    t2 = _name("asg-ck")
    out = _wait(ck.create_topics([CNewTopic(t2, num_partitions=2, replica_assignment=[[0], [0]])]))
    assert out[t2] is None
    assert _partitions(kp, t2) == [0, 1]


def test_create_errors_kafka_python(kp):
    existing = _name("dup")
    kp.create_topics({existing: {"num_partitions": 1}})
    cases = {
        existing: ({"num_partitions": 1}, TOPIC_ALREADY_EXISTS),
        "bad name!": ({"num_partitions": 1}, INVALID_TOPIC_EXCEPTION),
        "x" * 250: ({"num_partitions": 1}, INVALID_TOPIC_EXCEPTION),
        _name("zero"): ({"num_partitions": 0}, INVALID_PARTITIONS),
        _name("rf"): ({"num_partitions": 1, "replication_factor": 3}, INVALID_REPLICATION_FACTOR),
        _name("asg"): ({"assignments": {0: [7]}}, INVALID_REPLICA_ASSIGNMENT),
        _name("asg2"): ({"assignments": {0: [0], 2: [0]}}, INVALID_REPLICA_ASSIGNMENT),
        _name("cfg"): ({"num_partitions": 1, "configs": {"retention.ms": "soon"}}, INVALID_CONFIG),
        _name("cfg2"): ({"num_partitions": 1, "configs": {"no.such.config": "1"}}, INVALID_CONFIG),
        _name("both"): ({"num_partitions": 2, "assignments": {0: [0]}}, INVALID_REQUEST),
    }
    res = kp.create_topics({n: spec for n, (spec, _) in cases.items()}, raise_errors=False)
    by_name = {r["name"]: r for r in res["topics"]}
    for name, (_, code) in cases.items():
        r = by_name[name]
        assert r["error_code"] == code, (name, r)
        assert r["error_message"], name
        assert r["num_partitions"] == -1 and r["replication_factor"] == -1
    topics = set(kp.list_topics())
    assert not any(n in topics for n in cases if n != existing)


def test_create_errors_confluent(ck):
    existing = _name("dup-ck")
    assert _wait(ck.create_topics([CNewTopic(existing, 1, 1)]))[existing] is None
    out = _wait(ck.create_topics([CNewTopic(existing, 1, 1), CNewTopic("bad/name", 1, 1),
                                  CNewTopic(_name("rf-ck"), 1, 2)]))
    codes = {k: v.code() for k, v in out.items()}
    assert codes[existing] == KafkaError.TOPIC_ALREADY_EXISTS
    assert codes["bad/name"] == KafkaError.TOPIC_EXCEPTION
    assert [c for k, c in codes.items() if k.startswith("rf-ck")] == [KafkaError.INVALID_REPLICATION_FACTOR]


# ----------------------------------------------------------------------------- DescribeConfigs

def test_describe_topic_configs_defaults_and_synonyms(kp):
    t = _name("desc")
    kp.create_topics({t: {"num_partitions": 1, "configs": {"max.message.bytes": "5000"}}})
    res = kp.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)], include_synonyms=True,
                              config_filter="all")["topic"][t]
    assert len(res) >= 30      # every topic config, not only the overridden one
    mmb = res["max.message.bytes"]
    assert mmb["value"] == "5000" and mmb["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert [s["name"] for s in mmb["synonyms"]] == ["max.message.bytes", "message.max.bytes"]
    assert mmb["synonyms"][1]["source"] == "DEFAULT_CONFIG"
    assert mmb["config_type"] == "INT"
    ret = res["retention.ms"]
    assert ret["value"] == "604800000" and ret["config_source"] == "DEFAULT_CONFIG"
    assert res["cleanup.policy"]["value"] == "delete"
    only = kp.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t,
                                               configs={"max.message.bytes": None})],
                               config_filter="all")["topic"][t]
    assert set(only) == {"max.message.bytes"}


def test_describe_broker_configs(kp):
    res = kp.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                              include_synonyms=True, config_filter="all")["broker"]["0"]
    assert len(res) > 100
    np_ = res["num.partitions"]
    assert np_["value"] == "2" and np_["config_source"] == "STATIC_BROKER_CONFIG"
    assert [s["source"] for s in np_["synonyms"]] == ["STATIC_BROKER_CONFIG", "DEFAULT_CONFIG"]
    assert res["log.cleaner.threads"]["config_source"] == "DEFAULT_CONFIG"
    assert res["log.cleaner.threads"]["read_only"] is False
    assert res["broker.id"]["read_only"] is True


def test_describe_configs_confluent(ck):
    t = _name("desc-ck")
    assert _wait(ck.create_topics([CNewTopic(t, 1, 1, config={"retention.bytes": "1000000"})]))[t] is None
    res = _wait(ck.describe_configs([CResource("topic", t), CResource("broker", "0")]))
    tcfg = next(v for k, v in res.items() if k.name == t)
    assert tcfg["retention.bytes"].value == "1000000"
    assert tcfg["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert tcfg["segment.ms"].is_default
    bcfg = next(v for k, v in res.items() if k.name == "0")
    assert bcfg["num.partitions"].value == "2"


def test_describe_configs_errors_and_v0(raw):
    R = DescribeConfigsRequest
    req = R(resources=[R.DescribeConfigsResource(resource_type=2, resource_name="no-such-topic",
                                                 configuration_keys=None),
                       R.DescribeConfigsResource(resource_type=2, resource_name="bad name",
                                                 configuration_keys=None),
                       R.DescribeConfigsResource(resource_type=4, resource_name="7",
                                                 configuration_keys=None),
                       R.DescribeConfigsResource(resource_type=4, resource_name="",
                                                 configuration_keys=None),
                       R.DescribeConfigsResource(resource_type=4, resource_name="0",
                                                 configuration_keys=["num.partitions",
                                                                     "log.cleaner.threads"])],
            include_synonyms=False, include_documentation=True)
    for v in (0, 3, 4):
        resp = raw.call(32, v, req)
        codes = [r.error_code for r in resp.results]
        assert codes == [UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, INVALID_REQUEST, 0, 0]
        assert resp.results[2].error_message
        cfgs = {c.name: c for c in resp.results[4].configs}
        assert set(cfgs) == {"num.partitions", "log.cleaner.threads"}
        if v == 0:
            assert cfgs["log.cleaner.threads"].is_default and not cfgs["num.partitions"].is_default
        else:
            assert cfgs["num.partitions"].config_source == 4
            assert cfgs["num.partitions"].config_type == 3          # INT
            assert cfgs["num.partitions"].documentation


# ----------------------------------------------------------------------------- altering configs

def test_incremental_alter_confluent(ck, kp):
    t = _name("inc")
    assert _wait(ck.create_topics([CNewTopic(t, 1, 1)]))[t] is None
    res = CResource("topic", t, incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    assert list(_wait(ck.incremental_alter_configs([res])).values()) == [None]
    cfg = kp.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)])["topic"][t]
    assert cfg["retention.ms"]["value"] == "60000"
    assert cfg["cleanup.policy"]["value"] == "delete,compact"
    res = CResource("topic", t, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)])
    assert list(_wait(ck.incremental_alter_configs([res])).values()) == [None]
    cfg = kp.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)],
                              config_filter="all")["topic"][t]
    assert cfg["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert cfg["cleanup.policy"]["value"] == "compact"
    # validate_only changes nothing
    res = CResource("topic", t, incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    assert list(_wait(ck.incremental_alter_configs([res], validate_only=True)).values()) == [None]
    cfg = kp.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)],
                              config_filter="all")["topic"][t]
    assert cfg["retention.ms"]["value"] == "604800000"


def test_incremental_alter_errors(ck):
    t = _name("inc-err")
    assert _wait(ck.create_topics([CNewTopic(t, 1, 1)]))[t] is None

    def one(name, entries, rtype="topic"):
        out = _wait(ck.incremental_alter_configs([CResource(rtype, name, incremental_configs=entries)]))
        err = list(out.values())[0]
        return None if err is None else err.code()

    SET, APPEND = AlterConfigOpType.SET, AlterConfigOpType.APPEND
    assert one("nope-" + t, [ConfigEntry("retention.ms", "1", incremental_operation=SET)]) == \
        KafkaError.UNKNOWN_TOPIC_OR_PART
    # Kafka 3.9 (ZooKeeper mode too) answers INVALID_CONFIG for a value that does not parse and
    # for APPEND/SUBTRACT on a key that is not a list (INVALID_REQUEST was 2.8-3.0's answer)
    assert one(t, [ConfigEntry("retention.ms", "abc", incremental_operation=SET)]) == \
        KafkaError.INVALID_CONFIG
    assert one(t, [ConfigEntry("no.such.key", "1", incremental_operation=SET)]) == \
        KafkaError.INVALID_CONFIG
    assert one(t, [ConfigEntry("retention.ms", "1", incremental_operation=APPEND)]) == \
        KafkaError.INVALID_CONFIG
    assert one("0", [ConfigEntry("num.io.threads", "1", incremental_operation=APPEND)], "broker") == \
        KafkaError.INVALID_CONFIG
    assert one("0", [ConfigEntry("broker.id", "3", incremental_operation=SET)],
               "broker") == KafkaError.INVALID_REQUEST


def test_alter_configs_corner_cases_raw(kp, raw):
    t = _name("raw-alter")
    kp.create_topics({t: {"num_partitions": 1, "configs": {"retention.ms": "5000"}}})
    I = IncrementalAlterConfigsRequest
    res = I.AlterConfigsResource

    def inc(resources, validate_only=False, version=1):
        resp = raw.call(44, version, I(resources=resources, validate_only=validate_only))
        return [(r.error_code, r.error_message) for r in resp.responses]

    def op(name, o, value):
        return I.AlterableConfig(name=name, config_operation=o, value=value)

    out = inc([res(resource_type=4, resource_name="9", configs=[op("log.cleaner.threads", 0, "2")]),
               res(resource_type=4, resource_name="abc", configs=[op("log.cleaner.threads", 0, "2")]),
               res(resource_type=2, resource_name=t, configs=[op("retention.ms", 0, "1"),
                                                               op("retention.ms", 1, None)]),
               res(resource_type=2, resource_name=t, configs=[op("segment.ms", 0, None)]),
               res(resource_type=3, resource_name="g", configs=[op("x", 0, "1")])])
    assert [c for c, _ in out] == [INVALID_REQUEST] * 5
    assert "Unexpected broker id" in out[0][1] and "must be an integer" in out[1][1]
    out = inc([res(resource_type=2, resource_name=t, configs=[op("segment.ms", 0, "1000")]),
               res(resource_type=2, resource_name=t, configs=[op("segment.ms", 0, "2000")])])
    assert out == [(INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    # validate_only on a valid change (v0) leaves the topic as it was
    assert inc([res(resource_type=2, resource_name=t, configs=[op("retention.ms", 1, None)])],
               validate_only=True, version=0) == [(0, None)]
    cfg = kp.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)])["topic"][t]
    assert cfg["retention.ms"]["value"] == "5000"
    # the per-broker entity accepts a dynamic per-broker key, then removes it again
    assert inc([res(resource_type=4, resource_name="0",
                    configs=[op("log.cleaner.threads", 0, "2")])]) == [(0, None)]
    b = kp.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                            config_filter="all")["broker"]["0"]
    assert b["log.cleaner.threads"]["value"] == "2"
    assert b["log.cleaner.threads"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    assert inc([res(resource_type=4, resource_name="0",
                    configs=[op("log.cleaner.threads", 1, None)])]) == [(0, None)]

    A = AlterConfigsRequest
    for v in (0, 1, 2):
        resp = raw.call(33, v, A(resources=[
            A.AlterConfigsResource(resource_type=2, resource_name=t,
                                   configs=[A.AlterableConfig(name="retention.ms", value="x")]),
            A.AlterConfigsResource(resource_type=2, resource_name=t + "-absent",
                                   configs=[A.AlterableConfig(name="retention.ms", value="1")]),
            A.AlterConfigsResource(resource_type=4, resource_name="",
                                   configs=[A.AlterableConfig(name="broker.id", value="1")]),
        ], validate_only=False))
        assert [r.error_code for r in resp.responses] == [INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION,
                                                          INVALID_REQUEST], v
        assert all(r.error_message for r in resp.responses)


def test_legacy_alter_configs_replaces_overrides(kp):
    t = _name("legacy")
    kp.create_topics({t: {"num_partitions": 1, "configs": {"retention.ms": "5000",
                                                           "segment.ms": "100000"}}})
    res = kp.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t,
                                           configs={"retention.bytes": "7777"})],
                           incremental=False, raise_on_unknown=False)
    assert res["topic"][t] == "OK" or not res["topic"][t], res
    cfg = kp.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)])["topic"][t]
    # kafka-python's legacy path re-sends the other modified keys (read-modify-write)
    assert cfg["retention.bytes"]["value"] == "7777"
    bad = kp.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t,
                                           configs={"retention.bytes": "lots"})],
                           incremental=False, raise_on_unknown=False)["topic"][t]
    assert "InvalidConfiguration" in str(bad)            # INVALID_CONFIG, as Kafka 3.9
    missing = kp.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "absent-" + t,
                                               configs={"retention.bytes": "1"})],
                               incremental=False, raise_on_unknown=False)["topic"]["absent-" + t]
    assert "UnknownTopicOrPartition" in str(missing)


def test_broker_default_entity_alter_and_describe(kp, raw):
    """The cluster-default entity (resource name ""): set a dynamic default, see it on the
    default entity, on this broker and as the source of a topic's effective value."""
    t = _name("bdef")
    kp.create_topics({t: {"num_partitions": 1}})
    I = IncrementalAlterConfigsRequest
    D = DescribeConfigsRequest

    def set_default(op, value):
        resp = raw.call(44, 1, I(resources=[I.AlterConfigsResource(
            resource_type=4, resource_name="", configs=[
                I.AlterableConfig(name="log.retention.ms", config_operation=op, value=value)])],
            validate_only=False))
        return resp.responses[0].error_code

    def describe_default():
        resp = raw.call(32, 4, D(resources=[D.DescribeConfigsResource(
            resource_type=4, resource_name="", configuration_keys=None)],
            include_synonyms=True, include_documentation=False))
        assert resp.results[0].error_code == 0
        return {c.name: c for c in resp.results[0].configs}

    assert describe_default() == {}
    assert set_default(0, "3600000") == 0
    try:
        d = describe_default()
        assert set(d) == {"log.retention.ms"}
        assert d["log.retention.ms"].value == "3600000" and d["log.retention.ms"].config_source == 3
        assert [s.source for s in d["log.retention.ms"].synonyms] == [3]
        tc = kp.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)], include_synonyms=True,
                                 config_filter="all")["topic"][t]
        assert tc["retention.ms"]["value"] == "3600000"
        assert tc["retention.ms"]["config_source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
        b = kp.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                                config_filter="all")["broker"]["0"]
        assert b["log.retention.ms"]["value"] == "3600000"
    finally:
        assert set_default(1, None) == 0
    assert describe_default() == {}


def test_config_change_max_message_bytes_takes_effect(srv, kp):
    t = _name("mmb")
    kp.create_topics({t: {"num_partitions": 1}})
    _produce(srv, t, 1, size=2000)
    kp.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t,
                                     configs={"max.message.bytes": "500"})])
    p = KafkaProducer(bootstrap_servers=srv.bootstrap, acks=1, retries=0)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            p.send(t, value=b"y" * 2000, partition=0).get(timeout=15)
        p.send(t, value=b"small", partition=0).get(timeout=15)
    finally:
        p.close()
    kp.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t,
                                     configs={"max.message.bytes": (("DELETE"), None)})])
    _produce(srv, t, 1, size=2000)


def test_config_change_retention_takes_effect(srv, kp):
    t = _name("ret")
    kp.create_topics({t: {"num_partitions": 1, "configs": {"segment.bytes": "1024"}}})
    _produce(srv, t, 30, size=200)
    c = KafkaConsumer(bootstrap_servers=srv.bootstrap)
    tp = TopicPartition(t, 0)
    try:
        assert c.beginning_offsets([tp])[tp] == 0
        kp.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t, configs={"retention.ms": "1"})])
        deadline = time.time() + 15
        while time.time() < deadline and c.beginning_offsets([tp])[tp] == 0:
            time.sleep(0.2)
        start = c.beginning_offsets([tp])[tp]
        assert 0 < start <= 30
        assert c.end_offsets([tp])[tp] == 30
    finally:
        c.close()


def test_first_retention_pass_runs_after_the_initial_task_delay(tmp_path):
    """As Kafka's LogManager: retention first runs log.initial.task.delay.ms after start-up (30 s
    by default; 1 s here), not a whole log.retention.check.interval.ms (5 min here) later."""
    b = BrokerProcess(tmp_path / "b", props={"log.retention.check.interval.ms": "300000",
                                             "log.initial.task.delay.ms": "300000"})
    with running(b):            # no pass in this run: records past their retention.ms stay
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)
        a.create_topics({"old": {"num_partitions": 1, "configs": {"segment.bytes": "1024", "retention.ms": "1"}}})
        a.close()
        _produce(b, "old", 30, size=200)
    assert (b.log_dir / "old-0" / "00000000000000000000.log").exists()
    b.props["log.initial.task.delay.ms"] = "1000"
    with running(b):
        c = KafkaConsumer(bootstrap_servers=b.bootstrap)
        tp = TopicPartition("old", 0)
        try:
            deadline = time.time() + 20
            while time.time() < deadline and c.beginning_offsets([tp])[tp] == 0:
                time.sleep(0.2)
            assert 0 < c.beginning_offsets([tp])[tp] <= 30
        finally:
            c.close()


# ----------------------------------------------------------------------------- CreatePartitions

def test_create_partitions(srv, kp, ck):
    t = _name("cp")
    kp.create_topics({t: {"num_partitions": 1}})
    kp.create_partitions({t: NewPartitions(3)})
    assert _partitions(kp, t) == [0, 1, 2]
    kp.create_partitions({t: NewPartitions(5)}, validate_only=True)
    assert _partitions(kp, t) == [0, 1, 2]
    out = _wait(ck.create_partitions([CNewPartitions(t, 4, replica_assignment=[[0]])]))
    assert out[t] is None
    assert _partitions(kp, t) == [0, 1, 2, 3]
    out = _wait(ck.create_partitions([CNewPartitions(t, 2), CNewPartitions("absent-" + t, 3)]))
    assert out[t].code() == KafkaError.INVALID_PARTITIONS
    assert out["absent-" + t].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    out = _wait(ck.create_partitions([CNewPartitions(t, 5, replica_assignment=[[4]])]))
    assert out[t].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    _produce(srv, t, 1, partition=3)        # the new partitions take data


# ----------------------------------------------------------------------------- DeleteTopics

def test_delete_topics_removes_logs(srv, kp):
    t = _name("del")
    kp.create_topics({t: {"num_partitions": 2}})
    _produce(srv, t, 5)
    logs = srv.log_dir
    assert (logs / f"{t}-0").is_dir()
    res = kp.delete_topics([t])
    assert [r["error_code"] for r in res["topics"]] == [0]
    assert t not in kp.list_topics()
    assert not (logs / f"{t}-0").exists() and not (logs / f"{t}-1").exists()
    deadline = time.time() + 10
    while time.time() < deadline and any(n.startswith(t) for n in os.listdir(logs)):
        time.sleep(0.1)
    assert not any(n.startswith(t) for n in os.listdir(logs))
    again = kp.delete_topics([t], raise_errors=False)
    assert [r["error_code"] for r in again["topics"]] == [UNKNOWN_TOPIC_OR_PARTITION]
    # the name can be used again, with a fresh log
    kp.create_topics({t: {"num_partitions": 1}})
    c = KafkaConsumer(bootstrap_servers=srv.bootstrap)
    try:
        assert c.end_offsets([TopicPartition(t, 0)])[TopicPartition(t, 0)] == 0
    finally:
        c.close()


def test_delete_topics_confluent(ck, kp):
    t = _name("del-ck")
    assert _wait(ck.create_topics([CNewTopic(t, 1, 1)]))[t] is None
    out = _wait(ck.delete_topics([t, "absent-" + t]))
    assert out[t] is None
    assert out["absent-" + t].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert t not in kp.list_topics()


def test_delete_topics_by_id_v6(kp, raw):
    t = _name("del-id")
    tid = kp.create_topics({t: {"num_partitions": 1}})["topics"][0]["topic_id"]
    tid = uuid.UUID(str(tid))
    R = DeleteTopicsRequest
    resp = raw.call(20, 6, R(topics=[R.DeleteTopicState(name=None, topic_id=tid),
                                     R.DeleteTopicState(name=None, topic_id=uuid.uuid4()),
                                     R.DeleteTopicState(name="x", topic_id=uuid.uuid4())],
                             timeout_ms=5000))
    codes = [(r.name, r.error_code) for r in resp.responses]
    assert codes[0] == (t, 0) and resp.responses[0].topic_id == tid
    assert codes[1][1] == UNKNOWN_TOPIC_ID
    assert codes[2][1] == INVALID_REQUEST
    assert t not in kp.list_topics()
    # v0-5: by name
    t2 = _name("del-v1")
    kp.create_topics({t2: {"num_partitions": 1}})
    resp = raw.call(20, 1, R(topic_names=[t2], timeout_ms=5000))
    assert [(r.name, r.error_code) for r in resp.responses] == [(t2, 0)]


# ----------------------------------------------------------------------------- DeleteRecords

def test_delete_records_then_consume_from_low_watermark(srv, kp):
    t = _name("dr")
    kp.create_topics({t: {"num_partitions": 1}})
    _produce(srv, t, 20)
    tp = TopicPartition(t, 0)
    res = kp.delete_records({tp: 7})
    assert res[tp]["low_watermark"] == 7
    c = KafkaConsumer(bootstrap_servers=srv.bootstrap, group_id=None, auto_offset_reset="earliest",
                      consumer_timeout_ms=5000)
    try:
        c.assign([tp])
        assert c.beginning_offsets([tp])[tp] == 7
        c.seek_to_beginning(tp)
        first = next(iter(c))
        assert first.offset == 7 and first.value.startswith(b"000007")
    finally:
        c.close()
    with pytest.raises(Exception) as ei:
        kp.delete_records({tp: 21})
    assert "OffsetOutOfRange" in type(ei.value).__name__
    res = kp.delete_records({tp: -1})            # -1 = high watermark
    assert res[tp]["low_watermark"] == 20
    res = kp.delete_records({tp: 3})             # never moves backwards
    assert res[tp]["low_watermark"] == 20


def test_delete_records_confluent(srv, ck):
    t = _name("dr-ck")
    assert _wait(ck.create_topics([CNewTopic(t, 1, 1)]))[t] is None
    _produce(srv, t, 10)
    fs = ck.delete_records([CTopicPartition(t, 0, 4)])
    (tp_res,) = [f.result(timeout=15) for f in fs.values()]
    assert tp_res.low_watermark == 4


# ----------------------------------------------------------------------------- cluster, log dirs

def test_describe_cluster(kp, ck, srv):
    d = kp.describe_cluster()
    assert d["controller_id"] == 0 and d["cluster_id"]
    assert [(b["broker_id"], b["host"], b["port"]) for b in d["brokers"]] == [(0, srv.host, srv.port)]
    assert [b["is_fenced"] for b in d["brokers"]] == [False]          # v2 (KIP-1073), what kafka-python sends
    desc = ck.describe_cluster(include_authorized_operations=True).result(timeout=15)
    assert desc.cluster_id == d["cluster_id"]
    assert desc.controller.id == 0
    assert [n.id for n in desc.nodes] == [0]
    assert set(d["authorized_operations"]) >= {"DESCRIBE", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"}


def test_describe_log_dirs(srv, kp):
    t = _name("ld")
    kp.create_topics({t: {"num_partitions": 2}})
    _produce(srv, t, 10, size=500, partition=1)
    res = kp.describe_log_dirs()
    (entry,) = res
    (d,) = entry["log_dirs"]
    assert d["error_code"] == 0 and d["log_dir"] == str(srv.log_dir)
    parts = {p["partition_index"]: p for tt in d["topics"] if tt["name"] == t for p in tt["partitions"]}
    assert set(parts) == {0, 1}
    assert parts[0]["partition_size"] == 0 and parts[1]["partition_size"] > 5000
    assert parts[1]["offset_lag"] == 0
    assert d["total_bytes"] > 0 and 0 < d["usable_bytes"] <= d["total_bytes"]
    only = kp.describe_log_dirs(topic_partitions={t: [1]})
    (d,) = only[0]["log_dirs"]
    assert [(tt["name"], [p["partition_index"] for p in tt["partitions"]]) for tt in d["topics"]] == [(t, [1])]


# ----------------------------------------------------------------------------- OffsetForLeaderEpoch

def test_offset_for_leader_epoch(srv, kp, raw):
    t = _name("ofle")
    kp.create_topics({t: {"num_partitions": 1}})
    _produce(srv, t, 6)
    R = OffsetForLeaderEpochRequest

    def ask(version, current, epoch, topic=t, replica_id=-1):
        req = R(replica_id=replica_id, topics=[R.OffsetForLeaderTopic(topic=topic, partitions=[
            R.OffsetForLeaderPartition(partition=0, current_leader_epoch=current, leader_epoch=epoch)])])
        return raw.call(23, version, req).topics[0].partitions[0]

    for v in (0, 1, 2, 3, 4):
        p = ask(v, -1, 0)
        assert (p.error_code, p.end_offset) == (0, 6), v
        if v >= 1:
            assert p.leader_epoch == 0
    p = ask(4, 0, 0, replica_id=1)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 6)
    assert ask(4, 1, 0).error_code == UNKNOWN_LEADER_EPOCH
    assert ask(4, -2, 0).error_code == FENCED_LEADER_EPOCH
    assert ask(4, 0, 0, topic="absent-" + t).error_code == UNKNOWN_TOPIC_OR_PARTITION
    empty = _name("ofle-empty")
    kp.create_topics({empty: {"num_partitions": 1}})
    p = ask(4, 0, 0, topic=empty)      # the leader's epoch starts at offset 0 before any append
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 0)
    p = ask(4, 0, 5)          # an epoch beyond any known one: undefined, no error
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, -1, -1)


# ----------------------------------------------------------------------------- every version

def test_every_version_round_trips(srv, raw):
    """Each admin API answers at each advertised version (the codec and the handler agree)."""
    C = CreateTopicsRequest
    for v in range(0, 8):
        t = _name(f"v{v}")
        req = C(topics=[C.CreatableTopic(name=t, num_partitions=1, replication_factor=1,
                                         assignments=[], configs=[
                                             C.CreatableTopicConfig(name="retention.ms", value="1000")])],
                timeout_ms=5000, validate_only=False)
        resp = raw.call(19, v, req)
        assert [(r.name, r.error_code) for r in resp.topics] == [(t, 0)], v
        if v >= 5:
            assert resp.topics[0].num_partitions == 1
            assert {c.name: c.value for c in resp.topics[0].configs}["retention.ms"] == "1000"
        P = CreatePartitionsRequest
        if v <= 3:
            resp = raw.call(37, v, P(topics=[P.CreatePartitionsTopic(name=t, count=2, assignments=None)],
                                     timeout_ms=5000, validate_only=False))
            assert [r.error_code for r in resp.results] == [0], v
        DR = DeleteRecordsRequest
        if v <= 2:
            resp = raw.call(21, v, DR(topics=[DR.DeleteRecordsTopic(name=t, partitions=[
                DR.DeleteRecordsPartition(partition_index=0, offset=0),
                DR.DeleteRecordsPartition(partition_index=9, offset=0)])], timeout_ms=5000))
            assert [(p.error_code, p.low_watermark) for p in resp.topics[0].partitions] == \
                [(0, 0), (UNKNOWN_TOPIC_OR_PARTITION, -1)], v
        L = DescribeLogDirsRequest
        if v <= 4:
            resp = raw.call(35, v, L(topics=[L.DescribableLogDirTopic(topic=t, partitions=[0])]))
            (d,) = resp.results
            assert [(x.name, [p.partition_index for p in x.partitions]) for x in d.topics] == [(t, [0])]
            if v >= 4:
                assert d.total_bytes > 0
        if v <= 1:
            resp = raw.call(60, v, DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                          endpoint_type=1))
            assert resp.error_code == 0 and [b.broker_id for b in resp.brokers] == [0]
            assert resp.cluster_authorized_operations == -2147483648
        D = DeleteTopicsRequest
        if v <= 5:
            resp = raw.call(20, v, D(topic_names=[t], timeout_ms=5000))
        else:
            resp = raw.call(20, 6, D(topics=[D.DeleteTopicState(name=t, topic_id=uuid.UUID(int=0))],
                                     timeout_ms=5000))
        assert [(r.name, r.error_code) for r in resp.responses] == [(t, 0)], v
    resp = raw.call(60, 1, DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                  endpoint_type=2))
    assert resp.error_code == 115       # UNSUPPORTED_ENDPOINT_TYPE


def test_create_topics_rejects_null_config_and_duplicate_assignment(raw):
    C = CreateTopicsRequest
    t1, t2, t3 = _name("nullcfg"), _name("dupasg"), _name("twice")
    resp = raw.call(19, 7, C(topics=[
        C.CreatableTopic(name=t1, num_partitions=1, replication_factor=1, assignments=[],
                         configs=[C.CreatableTopicConfig(name="retention.ms", value=None)]),
        C.CreatableTopic(name=t2, num_partitions=-1, replication_factor=-1, configs=[], assignments=[
            C.CreatableReplicaAssignment(partition_index=0, broker_ids=[0]),
            C.CreatableReplicaAssignment(partition_index=0, broker_ids=[0])]),
        C.CreatableTopic(name=t3, num_partitions=1, replication_factor=1, assignments=[], configs=[]),
        C.CreatableTopic(name=t3, num_partitions=1, replication_factor=1, assignments=[], configs=[]),
    ], timeout_ms=5000, validate_only=False))
    codes = [(r.name, r.error_code) for r in resp.topics]
    assert codes == [(t1, INVALID_CONFIG), (t2, INVALID_REPLICA_ASSIGNMENT),     # INVALID_CONFIG, as Kafka
                     (t3, INVALID_REQUEST), (t3, INVALID_REQUEST)]
    assert resp.topics[0].error_message == "Null value not supported for topic configs: retention.ms"


def test_broker_logger_describe_and_set(raw):
    D, I = DescribeConfigsRequest, IncrementalAlterConfigsRequest

    def levels():
        resp = raw.call(32, 4, D(resources=[D.DescribeConfigsResource(
            resource_type=8, resource_name="0", configuration_keys=None)],
            include_synonyms=False, include_documentation=False))
        assert resp.results[0].error_code == 0
        return {c.name: c.value for c in resp.results[0].configs}

    messages = []

    def alter(name, op, value, broker="0"):
        resp = raw.call(44, 1, I(resources=[I.AlterConfigsResource(
            resource_type=8, resource_name=broker,
            configs=[I.AlterableConfig(name=name, config_operation=op, value=value)])],
            validate_only=False))
        messages.append(resp.responses[0].error_message)
        return resp.responses[0].error_code

    before = levels()
    assert before["root"] in {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}
    assert "odradek.admin" in before
    assert alter("odradek.admin", 0, "DEBUG") == 0
    assert levels()["odradek.admin"] == "DEBUG"
    assert alter("odradek.admin", 1, None) == 0
    assert levels()["odradek.admin"] == before["root"]
    assert alter("odradek.admin", 0, "LOUD") == INVALID_CONFIG
    assert messages[-1] == ("Cannot set the log level of odradek.admin to LOUD as it is not a supported log level. "
                            "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN")      # sorted, as Kafka
    assert alter("no.such.logger", 0, "DEBUG") == INVALID_CONFIG
    assert alter("root", 1, None) == INVALID_REQUEST
    assert alter("odradek.admin", 2, "DEBUG") == INVALID_REQUEST
    assert alter("odradek.admin", 0, "DEBUG", broker="") == INVALID_REQUEST


def test_an_excessively_large_create_fails_whole(kp, ck, raw):
    """More than 10,000 metadata records in one request (a KRaft controller's limit: a record per
    topic, per partition, per config) fail every topic of it with POLICY_VIOLATION, at once even
    for 2^31 - 1 partitions, and nothing is created; 9,999 partitions (10,000 records) pass."""
    C = CreateTopicsRequest
    small, huge = _name("beside-huge"), _name("huge")
    t0 = time.monotonic()
    resp = raw.call(19, 7, C(topics=[
        C.CreatableTopic(name=small, num_partitions=1, replication_factor=1, assignments=[], configs=[]),
        C.CreatableTopic(name=huge, num_partitions=2**31 - 1, replication_factor=1, assignments=[],
                         configs=[])], timeout_ms=5000, validate_only=False))
    assert time.monotonic() - t0 < 5
    assert [(r.name, r.error_code, r.error_message) for r in resp.topics] == [
        (small, POLICY_VIOLATION, TOO_LARGE), (huge, POLICY_VIOLATION, TOO_LARGE)]
    t = _name("ten-k")
    out = _wait(ck.create_topics([CNewTopic(t, 10_000, 1)]))
    assert out[t].code() == KafkaError.POLICY_VIOLATION
    res = kp.create_topics({t: {"num_partitions": 10_000}}, raise_errors=False)
    assert [(r["name"], r["error_code"]) for r in res["topics"]] == [(t, POLICY_VIOLATION)]
    assert _wait(ck.create_topics([CNewTopic(t, 9_999, 1)], validate_only=True))[t] is None
    assert _partitions(kp, t) is None and _partitions(kp, small) is None
    cp = _name("cp-huge")
    kp.create_topics({cp: {"num_partitions": 1}})
    out = _wait(ck.create_partitions([CNewPartitions(cp, 10_002)]))       # 10,001 new partitions
    assert out[cp].code() == KafkaError.POLICY_VIOLATION
    assert _partitions(kp, cp) == [0]


# ------------------------------------------------------- answers checked against Kafka 3.9's handlers

def test_admin_answers_as_kafka_without_an_authorizer_and_for_corner_cases(srv, ck, raw):
    """Found by a sweep of every Java Admin method and fixed: each answer here is Kafka 3.9's."""
    from confluent_kafka import ElectionType, TopicCollection
    from confluent_kafka.admin import AclOperation
    from protocol.messages import DescribeTransactionsRequest, FindCoordinatorRequest
    topic = _name("asis")
    ck.create_topics([CNewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(15)

    # no authorizer: a topic's authorized operations are all it supports (not left out)
    desc = ck.describe_topics(TopicCollection([topic]), request_timeout=15,
                              include_authorized_operations=True)[topic].result(15)
    assert {op.name for op in desc.authorized_operations} == {
        "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
    assert AclOperation.IDEMPOTENT_WRITE not in desc.authorized_operations

    # preferred election over every partition: nothing needed, so nothing listed (one broker)
    assert ck.elect_leaders(ElectionType.PREFERRED, None).result(15) == {}
    named = ck.elect_leaders(ElectionType.PREFERRED, [CTopicPartition(topic, 0)]).result(15)
    assert named[CTopicPartition(topic, 0)].code() == KafkaError.ELECTION_NOT_NEEDED

    # the default topic resource cannot be altered
    # (raw: confluent-kafka refuses an empty resource name itself)
    Inc, Alt = IncrementalAlterConfigsRequest, AlterConfigsRequest
    inc = raw.call(44, 1, Inc(validate_only=False, resources=[Inc.AlterConfigsResource(
        resource_type=2, resource_name="", configs=[Inc.AlterableConfig(name="retention.ms", config_operation=0,
                                                                        value="1000")])]))
    alt = raw.call(33, 2, Alt(validate_only=False, resources=[Alt.AlterConfigsResource(
        resource_type=2, resource_name="", configs=[Alt.AlterableConfig(name="retention.ms", value="1000")])]))
    for resp in (inc, alt):
        assert [(x.error_code, x.error_message) for x in resp.responses] == [
            (INVALID_REQUEST, "Default topic resources are not allowed.")]

    # CreatePartitions names an unknown broker first, before the replication factor
    r = raw.call(37, 3, CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
        name=topic, count=3, assignments=[CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=[99, 98])])],
        timeout_ms=5000, validate_only=False))
    assert (r.results[0].error_code, r.results[0].error_message) == (
        INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 98, 99.")

    # an empty transactional id: FindCoordinator finds it, the request that uses it is refused
    fc = raw.call(10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=[""]))
    assert [(c.key, c.error_code, c.node_id) for c in fc.coordinators] == [("", 0, srv_node_id(raw))]
    dt = raw.call(65, 0, DescribeTransactionsRequest(transactional_ids=[""]))
    assert [(s.transactional_id, s.error_code) for s in dt.transaction_states] == [("", INVALID_REQUEST)]

    # automatic creation takes any valid name, "__"-prefixed ones too (not the coordinators' topics)
    from protocol.messages import MetadataRequest as M
    name = "__" + _name("under")
    md = raw.call(3, 12, M(topics=[M.MetadataRequestTopic(name=name)], allow_auto_topic_creation=True,
                           include_topic_authorized_operations=False))
    assert [(t.name, t.error_code, len(t.partitions)) for t in md.topics] == [(name, 0, 2)]


def test_create_topics_messages_as_kafka(raw):
    """CreateTopics and CreatePartitions messages Kafka 3.9 gives (KafkaApis, AdminZkClient)."""
    C, P = CreateTopicsRequest, CreatePartitionsRequest
    twice, t = _name("twice2"), _name("cp-msg")
    r = raw.call(19, 7, C(topics=[C.CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=[],
                                                   configs=[]) for n in (twice, twice, "__cluster_metadata")],
                          timeout_ms=5000, validate_only=False))
    assert [(x.name, x.error_code, x.error_message) for x in r.topics] == [
        (twice, INVALID_REQUEST, "Found multiple entries for this topic."),
        (twice, INVALID_REQUEST, "Found multiple entries for this topic."),
        ("__cluster_metadata", INVALID_REQUEST, "Creation of internal topic __cluster_metadata is prohibited.")]
    r = raw.call(19, 7, C(topics=[C.CreatableTopic(name=t, num_partitions=1, replication_factor=1, assignments=[],
                                                   configs=[])], timeout_ms=5000, validate_only=False))
    assert r.topics[0].error_code == 0
    broker = srv_node_id(raw)
    for replicas, message in (([], "Cannot have replication factor of 0 for partition id 1."),
                              ([broker, broker], f"Duplicate brokers not allowed in replica assignment: {broker}, "
                                                 f"{broker} for partition id 1.")):
        r = raw.call(37, 3, P(topics=[P.CreatePartitionsTopic(name=t, count=2, assignments=[
            P.CreatePartitionsAssignment(broker_ids=replicas)])], timeout_ms=5000, validate_only=True))
        assert (r.results[0].error_code, r.results[0].error_message) == (INVALID_REPLICA_ASSIGNMENT, message)


def srv_node_id(raw) -> int:
    return raw.call(60, 0, DescribeClusterRequest(include_cluster_authorized_operations=False)).brokers[0].broker_id


def test_broker_thread_counts_follow_kafkas_reconfiguration_rules(srv, ck, raw):
    """Kafka refuses a dynamic thread count below 1, below half or above double the current value
    (INVALID_REQUEST, with its doubly wrapped ConfigException text); a change within the bounds is
    accepted (found by a confluent-kafka sweep: they all used to be accepted)."""
    def alter(key, value, name="0", validate_only=True):
        fut = ck.incremental_alter_configs([CResource("broker", name, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])], validate_only=validate_only)
        try:
            next(iter(fut.values())).result(15)
            return None
        except KafkaException as e:
            return e.args[0].code(), e.args[0].str()

    for key, value, why in (
            ("num.io.threads", "100", "value should not be greater than double the current value 8"),
            ("num.io.threads", "3", "value should be at least half the current value 8"),
            ("num.network.threads", "0", "value should be at least 1"),
            ("num.replica.fetchers", "0", "value should be at least 1")):
        code, msg = alter(key, value)
        assert code == KafkaError.INVALID_REQUEST, (key, value, msg)
        assert msg.startswith("Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread "
                              f"count update validation failed for {key}={value}, {why}"), msg
        assert msg.endswith("for configuration Invalid dynamic configuration"), msg
    # the cluster default reaches this broker too (raw: confluent-kafka refuses the empty name)
    Inc = IncrementalAlterConfigsRequest
    r = raw.call(44, 1, Inc(validate_only=True, resources=[Inc.AlterConfigsResource(
        resource_type=4, resource_name="", configs=[Inc.AlterableConfig(name="log.cleaner.threads",
                                                                        config_operation=0, value="3")])]))
    assert r.responses[0].error_code == INVALID_REQUEST and "Log cleaner threads cannot be increased to more " \
        "than double the current value 1" in r.responses[0].error_message, r
    assert alter("num.io.threads", "16") is None and alter("num.io.threads", "4") is None
    assert alter("log.cleaner.threads", "2") is None


def test_list_offsets_max_timestamp_reports_the_batchs_leader_epoch(srv, ck):
    """ListOffsets MAX_TIMESTAMP (v7+) answers the leader epoch stamped on the batch, as Kafka
    does, also when DeleteRecords has moved the log start past it (the epoch cache no longer
    covers it)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import OffsetSpec
    t = _name("maxts")
    assert _wait(ck.create_topics([CNewTopic(t, 1, 1)]))[t] is None
    p = Producer({"bootstrap.servers": srv.bootstrap})
    now = int(time.time() * 1000) - 100_000
    for ts in (now + 50_000, now + 1_000, now + 2_000):
        p.produce(t, value=b"x", partition=0, timestamp=ts)
        p.flush(10)
    tp = CTopicPartition(t, 0)

    def max_ts():
        x = ck.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
        return x.offset, x.timestamp, x.leader_epoch
    assert max_ts() == (0, now + 50_000, 0)
    ck.delete_records([CTopicPartition(t, 0, 2)])[CTopicPartition(t, 0, 2)].result(10)
    # Kafka answers from the segment's files: the deleted record, below the log start offset
    assert max_ts() == (0, now + 50_000, 0)
    by_time = ck.list_offsets({tp: OffsetSpec.for_timestamp(now + 1_500)})[tp].result(10)
    assert (by_time.offset, by_time.timestamp) == (2, now + 2_000)

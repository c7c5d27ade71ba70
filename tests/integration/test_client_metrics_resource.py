"""KIP-714 client metrics subscriptions on a real broker (embedded store): the CLIENT_METRICS
config resource (16) of DescribeConfigs / AlterConfigs / IncrementalAlterConfigs and
ListClientMetricsResources (74), on the wire and through kafka-python's admin client
(``ConfigResourceType.CLIENT_METRICS``, ``list_config_resources``), with a Kafka 3.9 controller's
error codes; subscriptions survive a broker that is killed and started again.  confluent-kafka
2.16 cannot name the resource (its ``ResourceType`` has no CLIENT_METRICS).  The tools are
tested in tests/tools/test_client_metrics_tool.py, a ZooKeeper cluster in
tests/cluster/test_cluster_client_metrics.py, authorization in
tests/security/test_client_metrics_authz.py."""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (AlterConfigsRequest as A, DescribeConfigsRequest as D,
                               IncrementalAlterConfigsRequest as I, ListClientMetricsResourcesRequest as L)
from tests.support.rawkafka import RawConnection

pytestmark = pytest.mark.integration

CM = 16
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def names(conn) -> list[str]:
    r = conn.request(74, 0, L())
    assert r.error_code == 0
    return [x.name for x in r.client_metrics_resources]


def describe(conn, name, version=4, keys=None):
    r = conn.request(32, version, D(resources=[D.DescribeConfigsResource(
        resource_type=CM, resource_name=name, configuration_keys=keys)], include_synonyms=True,
        include_documentation=True)).results[0]
    return r


def incremental(conn, name, *ops, validate_only=False):
    r = conn.request(44, 1, I(resources=[I.AlterConfigsResource(
        resource_type=CM, resource_name=name,
        configs=[I.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
        validate_only=validate_only))
    return r.responses[0].error_code, r.responses[0].error_message


def legacy(conn, name, configs, validate_only=False):
    r = conn.request(33, 2, A(resources=[A.AlterConfigsResource(
        resource_type=CM, resource_name=name,
        configs=[A.AlterableConfig(name=k, value=v) for k, v in configs.items()])], validate_only=validate_only))
    return r.responses[0].error_code, r.responses[0].error_message


def test_subscriptions_on_the_wire(broker):
    with RawConnection(broker.host, broker.port) as c:
        assert names(c) == []
        assert incremental(c, "sub1", ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "1000"),
                           ("match", SET, "client_id=app-.*,client_software_name=kafka-python")) == (0, None)
        assert names(c) == ["sub1"]

        # only the keys that are set, source CLIENT_METRICS_CONFIG, no synonyms; configuration_keys
        # is ignored, as Kafka does; Kafka's order (its Properties' hash order)
        for version, keys in ((4, None), (4, ["metrics"]), (1, None), (0, None)):
            r = describe(c, "sub1", version, keys)
            assert r.error_code == 0, r
            got = [(x.name, x.value) for x in r.configs]
            assert got == [("interval.ms", "1000"), ("match", "client_id=app-.*,client_software_name=kafka-python"),
                           ("metrics", "org.apache.kafka.producer.")], (version, got)
            for x in r.configs:
                assert not x.read_only and not x.is_sensitive and not x.is_default and x.synonyms == []
                if version >= 1:
                    assert x.config_source == 7
                if version >= 3:
                    assert x.config_type == 0 and x.documentation is None
        # an unknown subscription has no configs; an empty name is an invalid request
        r = describe(c, "nobody")
        assert (r.error_code, r.configs) == (0, [])
        r = describe(c, "")
        assert (r.error_code, r.error_message) == (E.INVALID_REQUEST,
                                                   "Client metrics subscription name must not be empty")

        # Kafka 3.9's controller answers
        bad = [
            ([("interval.ms", SET, "99")], E.INVALID_REQUEST,
             "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
            ([("interval.ms", SET, "3600001")], E.INVALID_REQUEST,
             "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
            ([("interval.ms", SET, "soon")], E.UNKNOWN_SERVER_ERROR, None),
            ([("match", SET, "client_id=(")], E.INVALID_CONFIG, "Illegal client matching pattern: client_id=("),
            ([("match", SET, "version=1")], E.INVALID_CONFIG, "Illegal client matching pattern: version=1"),
            ([("push.interval.ms", SET, "1000")], E.INVALID_REQUEST,
             "Unknown client metrics configuration: push.interval.ms"),
            ([("metrics", APPEND, "x.")], E.INVALID_CONFIG, "Can't APPEND to key metrics because its type is not LIST."),
            ([("match", SUBTRACT, "client_id=app-.*")], E.INVALID_CONFIG,
             "Can't SUBTRACT to key match because its type is not LIST."),
        ]
        for ops, code, message in bad:
            assert incremental(c, "sub1", *ops) == (code, message), ops
        assert incremental(c, "", ("metrics", SET, "*")) == (E.INVALID_REQUEST, "Subscription name can't be empty")
        assert legacy(c, "sub2", {"interval.ms": "50"})[0] == E.INVALID_REQUEST
        assert [(x.name, x.value) for x in describe(c, "sub1").configs][0] == ("interval.ms", "1000")   # unchanged

        # validate_only checks and changes nothing
        assert incremental(c, "sub2", ("metrics", SET, "*"), validate_only=True) == (0, None)
        assert incremental(c, "sub2", ("interval.ms", SET, "1"), validate_only=True)[0] == E.INVALID_REQUEST
        assert names(c) == ["sub1"]

        # incremental: SET changes one key, DELETE drops one; legacy AlterConfigs replaces them all
        assert incremental(c, "sub1", ("interval.ms", SET, "2000"), ("match", DELETE, None)) == (0, None)
        assert {x.name: x.value for x in describe(c, "sub1").configs} == {
            "interval.ms": "2000", "metrics": "org.apache.kafka.producer."}
        assert legacy(c, "sub2", {"metrics": "*"}) == (0, None)
        assert legacy(c, "sub1", {"match": "client_source_address=10\\..*"}) == (0, None)
        assert {x.name: x.value for x in describe(c, "sub1").configs} == {"match": "client_source_address=10\\..*"}
        assert names(c) == ["sub1", "sub2"]

        # removing every key removes the subscription (either API)
        assert incremental(c, "sub1", ("match", DELETE, None)) == (0, None)
        assert legacy(c, "sub2", {}) == (0, None)
        assert names(c) == []


def test_kafka_python_admin_and_a_restart(broker):
    """kafka-python's admin: incremental alter_configs / describe_configs on
    ConfigResourceType.CLIENT_METRICS and list_config_resources (ListConfigResources v1, asked for
    CLIENT_METRICS); the subscription is still there after the broker is killed and started
    again."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    R = ConfigResourceType.CLIENT_METRICS

    def admin():
        return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)

    a = admin()
    try:
        out = a.alter_configs([ConfigResource(R, "kp", configs={"metrics": "org.apache.kafka.consumer.",
                                                               "interval.ms": "30000",
                                                               "match": "client_software_name=kafka-python"})],
                              raise_on_unknown=False, incremental=True)
        assert out == {"client_metrics": {"kp": "OK"}}
        out = a.alter_configs([ConfigResource(R, "kp2", configs={"interval.ms": "5"})], raise_on_unknown=False)
        assert "InvalidRequestError" in out["client_metrics"]["kp2"], out
        got = a.describe_configs([ConfigResource(R, "kp")])["client_metrics"]["kp"]
        assert {k: v["value"] for k, v in got.items()} == {"metrics": "org.apache.kafka.consumer.",
                                                            "interval.ms": "30000",
                                                            "match": "client_software_name=kafka-python"}
        assert {v["config_source"] for v in got.values()} == {"DYNAMIC_CLIENT_METRICS_CONFIG"}
        assert a.list_config_resources(["CLIENT_METRICS"]) == {"client_metrics": ["kp"]}
    finally:
        a.close()

    broker.restart(clean=False)          # SIGKILL: the store was fsynced before the answer

    a = admin()
    try:
        assert a.list_config_resources(["CLIENT_METRICS"]) == {"client_metrics": ["kp"]}
        got = a.describe_configs([ConfigResource(R, "kp")])["client_metrics"]["kp"]
        assert got["interval.ms"]["value"] == "30000"
        out = a.alter_configs([ConfigResource(R, "kp", configs={k: ("DELETE", None) for k in got})],
                              raise_on_unknown=False)
        assert out == {"client_metrics": {"kp": "OK"}}
        assert a.list_config_resources(["CLIENT_METRICS"]) == {}
    finally:
        a.close()


def test_list_config_resources_v1(broker):
    """ListConfigResources v1 (Kafka 4.1, KIP-1142) through kafka-python's admin: every type when
    none is asked for (groups with configs, client metrics subscriptions, the broker as BROKER
    and BROKER_LOGGER, topics), the types asked for otherwise; an unknown type is
    UNSUPPORTED_VERSION; v0 lists the client metrics subscriptions alone."""
    from kafka.admin import ConfigResource, ConfigResourceType as T, KafkaAdminClient, NewTopic
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        a.create_topics([NewTopic("lcr-topic", 1, 1)])
        assert a.alter_configs([ConfigResource(T.GROUP, "lcr-group", configs={"consumer.session.timeout.ms": "50000"})],
                               incremental=True, raise_on_unknown=False) == {"group": {"lcr-group": "OK"}}
        assert a.alter_configs([ConfigResource(T.CLIENT_METRICS, "lcr-sub", configs={"interval.ms": "30000"})],
                               incremental=True, raise_on_unknown=False) == {"client_metrics": {"lcr-sub": "OK"}}
        listed = a.list_config_resources()
        brokers = sorted(str(b["broker_id"]) for b in a.describe_cluster()["brokers"])      # DescribeCluster
        assert set(listed) == {"group", "client_metrics", "broker_logger", "broker", "topic"}, listed
        assert "lcr-group" in listed["group"] and "lcr-sub" in listed["client_metrics"]
        assert listed["broker"] == listed["broker_logger"] == brokers
        assert "lcr-topic" in listed["topic"] and listed["topic"] == sorted(listed["topic"])
        only = a.list_config_resources(["TOPIC", "GROUP"])
        assert set(only) == {"topic", "group"} and only["topic"] == listed["topic"]
    finally:
        a.close()
    with RawConnection(broker.host, broker.port) as c:
        r = c.request(74, 1, L(resource_types=[0]))
        assert (r.error_code, r.client_metrics_resources) == (E.UNSUPPORTED_VERSION, [])
        r = c.request(74, 1, L(resource_types=[2, 16]))
        assert {x.resource_type for x in r.client_metrics_resources} == {2, 16}
        assert "lcr-sub" in names(c)                     # v0
        assert all(x.resource_type == 16 for x in c.request(74, 0, L()).client_metrics_resources)

"""Kafka 3.x znode payloads: exact JSON written, older versions read, newer refused."""
import json
import uuid

import pytest

from controller.api import uuid_to_base64
from controller.zookeeper import znodes as Z
from controller.zookeeper.controller import assign_replicas_rack_aware


def test_broker_registration_v5():
    data = Z.encode_broker([("PLAINTEXT", "h1", 9092, "PLAINTEXT"), ("REPL", "h1", 9093, "SSL")], rack="r1",
                           timestamp_ms=1700000000000)
    doc = json.loads(data)
    assert b" " not in data
    assert doc == {"version": 5, "host": "h1", "port": 9092, "jmx_port": -1, "timestamp": "1700000000000",
                   "endpoints": ["PLAINTEXT://h1:9092", "REPL://h1:9093"],
                   "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "REPL": "SSL"},
                   "rack": "r1", "features": {}}
    reg = Z.decode_broker(1, data, czxid=42)
    assert reg.endpoints == [("PLAINTEXT", "h1", 9092, "PLAINTEXT"), ("REPL", "h1", 9093, "SSL")]
    assert (reg.rack, reg.epoch, reg.timestamp) == ("r1", 42, 1700000000000)
    no_plain = json.loads(Z.encode_broker([("SEC", "h", 1, "SSL")]))
    assert no_plain["host"] is None and no_plain["port"] == -1 and "rack" not in no_plain


def test_broker_registration_old_versions():
    v1 = json.dumps({"version": 1, "host": "a", "port": 1, "jmx_port": -1}).encode()
    assert Z.decode_broker(3, v1).endpoints == [("PLAINTEXT", "a", 1, "PLAINTEXT")]
    v4 = json.dumps({"version": 4, "host": "a", "port": 1, "endpoints": ["CLIENT://[::1]:9"],
                     "listener_security_protocol_map": {"CLIENT": "SASL_SSL"}, "timestamp": "5"}).encode()
    assert Z.decode_broker(3, v4).endpoints == [("CLIENT", "::1", 9, "SASL_SSL")]
    with pytest.raises(Z.ZnodeFormatError):
        Z.decode_broker(3, json.dumps({"version": 6}).encode())


def test_controller_and_epoch():
    doc = json.loads(Z.encode_controller(2, 123))
    assert doc == {"version": 2, "brokerid": 2, "timestamp": "123", "kraftControllerEpoch": -1}
    assert Z.decode_controller(Z.encode_controller(7)) == 7
    assert Z.decode_controller(b'{"version":1,"brokerid":4,"timestamp":"1"}') == 4
    with pytest.raises(Z.ZnodeFormatError):
        Z.decode_controller(b'{"version":2,"brokerid":4,"timestamp":"1","kraftControllerEpoch":3}')
    assert Z.encode_controller_epoch(5) == b"5" and Z.decode_controller_epoch(b"5") == 5


def test_topic_assignment_v3_and_older():
    tid = uuid.uuid4()
    a = Z.TopicAssignment({0: [1, 2, 3], 1: [2, 3, 1]}, tid, {0: [4]}, {0: [1]})
    doc = json.loads(Z.encode_topic(a))
    assert doc == {"version": 3, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]}, "adding_replicas": {"0": [4]},
                   "removing_replicas": {"0": [1]}, "topic_id": uuid_to_base64(tid)}
    back = Z.decode_topic("t", Z.encode_topic(a))
    assert back == a and back.target(0) == [2, 3]
    v1 = Z.decode_topic("t", b'{"version":1,"partitions":{"0":[1]}}')
    assert v1.partitions == {0: [1]} and v1.topic_id is None and v1.adding == {}
    assert "topic_id" not in json.loads(Z.encode_topic(Z.TopicAssignment({0: [1]})))


def test_partition_state():
    s = Z.LeaderIsr(2, 7, [2, 3], 5)
    assert json.loads(Z.encode_partition_state(s)) == {"version": 1, "leader": 2, "leader_epoch": 7,
                                                       "isr": [2, 3], "controller_epoch": 5}
    u = Z.LeaderIsr(3, 8, [3], 5, leader_recovery_state=1)
    assert json.loads(Z.encode_partition_state(u))["leader_recovery_state"] == 1
    back = Z.decode_partition_state("t", 0, Z.encode_partition_state(u), zk_version=9)
    assert (back.leader, back.leader_epoch, back.isr, back.leader_recovery_state, back.zk_version) == (3, 8, [3], 1, 9)


def test_admin_config_cluster_and_producer_id_nodes():
    assert json.loads(Z.encode_partition_list([("t", 0)])) == {"version": 1, "partitions": [{"topic": "t", "partition": 0}]}
    moves = {("t", 0): [4, 5, 6]}
    assert json.loads(Z.encode_reassignment(moves)) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [4, 5, 6]}]}
    assert Z.decode_reassignment(Z.encode_reassignment(moves)) == moves
    assert json.loads(Z.encode_config({"a": "1"})) == {"version": 1, "config": {"a": "1"}}
    assert Z.decode_config(None) == {}
    assert json.loads(Z.encode_config_change("topics/t")) == {"version": 2, "entity_path": "topics/t"}
    assert Z.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"x"}') == ("topics", "x")
    assert Z.decode_config_change(b'{"version":2,"entity_path":"users/a/clients/b"}') == ("users", "a/clients/b")
    assert json.loads(Z.encode_cluster_id("abc")) == {"version": "1", "id": "abc"}
    assert Z.decode_cluster_id(Z.encode_cluster_id("abc")) == "abc"
    assert json.loads(Z.encode_producer_id_block(2, 3000, 3999)) == {"version": 1, "broker": 2,
                                                                     "block_start": "3000", "block_end": "3999"}
    assert Z.decode_producer_id_block(Z.encode_producer_id_block(2, 3000, 3999)) == (2, 3000, 3999)
    assert Z.decode_producer_id_block(b"") is None
    assert Z.sequence_number("config_change_0000000042") == 42


def test_paths():
    assert Z.partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert Z.delete_topic_path("t") == "/admin/delete_topics/t"
    assert Z.config_path("brokers", "<default>") == "/config/brokers/<default>"
    assert "/isr_change_notification" in Z.PERSISTENT_PATHS and "/config/ips" in Z.PERSISTENT_PATHS


@pytest.mark.parametrize("racks", [{1: None, 2: None, 3: None, 4: None},
                                   {1: "a", 2: "a", 3: "b", 4: "b"}, {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}])
def test_assignment_spread_and_racks(racks):
    import random
    rf = 3 if len(set(racks.values())) != 2 else 2
    out = assign_replicas_rack_aware(racks, 12, rf, rng=random.Random(1))
    assert sorted(out) == list(range(12))
    leaders = {}
    for reps in out.values():
        assert len(set(reps)) == rf
        leaders[reps[0]] = leaders.get(reps[0], 0) + 1
        if racks[1] is not None:
            assert len({racks[b] for b in reps}) == min(rf, len(set(racks.values())))
    assert max(leaders.values()) - min(leaders.values()) <= 1 and len(leaders) == len(racks)


def test_acl_nodes_and_change_notifications():
    from broker.security import acl as A
    from controller.zookeeper.security_store import binding_to_entry, entry_to_binding
    assert Z.acl_resource_path("Topic", "orders", A.LITERAL) == "/kafka-acl/Topic/orders"
    assert Z.acl_resource_path("TransactionalId", "tx-", A.PREFIXED) == "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    assert "/kafka-acl-changes" in Z.ACL_PATHS and "/kafka-acl-extended-changes" in Z.ACL_PATHS
    b = A.AclBinding(A.TOPIC, "orders", A.LITERAL, "User:alice", "*", A.DESCRIBE_CONFIGS, A.ALLOW)
    data = Z.encode_acls([binding_to_entry(b)])
    assert b" " not in data
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "DescribeConfigs", "host": "*"}]}
    assert [entry_to_binding(A.TOPIC, "orders", A.LITERAL, e) for e in Z.decode_acls(data, "x")] == [b]
    # upper-case names (as some writers produce) are read too
    assert Z.uncamel("IDEMPOTENT_WRITE", A.OPERATIONS, "operation") == A.IDEMPOTENT_WRITE
    assert Z.uncamel("ClusterAction", A.OPERATIONS, "operation") == A.CLUSTER_ACTION
    with pytest.raises(Z.ZnodeFormatError):
        Z.decode_acls(json.dumps({"version": 2, "acls": []}).encode(), "x")
    assert Z.encode_acl_change("Topic", "my-topic", A.LITERAL) == b"Topic:my-topic"
    assert Z.decode_acl_change(b"Group:g:1", extended=False) == ("Group", "g:1", A.LITERAL)
    ext = Z.encode_acl_change("Topic", "my-", A.PREFIXED)
    assert json.loads(ext) == {"version": 1, "resourceType": "Topic", "name": "my-", "patternType": "PREFIXED"}
    assert Z.decode_acl_change(ext, extended=True) == ("Topic", "my-", A.PREFIXED)


def test_user_entity_names_are_sanitized_as_kafka_does():
    assert Z.sanitize("alice") == "alice"
    assert Z.sanitize("a.b_c-d") == "a.b_c-d"
    assert Z.sanitize("CN=x,O=y z*") == "CN%3Dx%2CO%3Dy%20z%2A"
    assert Z.sanitize("é~") == "%C3%A9%7E"
    for name in ("alice", "CN=x,O=y z*", "é~/+"):
        assert Z.desanitize(Z.sanitize(name)) == name


def test_inter_broker_security_settings():
    from broker.config import BrokerConfig, ConfigError
    from broker.security.interbroker import build
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
            'password="admin-secret";')
    base = {"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9094", "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "log.dirs": "/tmp/x"}
    cfg = BrokerConfig({**base, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": jaas}, validate=False)
    sec = build(cfg)
    assert (sec.listener, sec.protocol, sec.ssl) == ("SASL_PLAINTEXT", "SASL_PLAINTEXT", None)
    assert (sec.sasl.mechanism, sec.sasl.username, sec.sasl.password) == ("SCRAM-SHA-512", "admin", "admin-secret")
    # Kafka's default inter-broker mechanism, GSSAPI, is not among the enabled ones here
    with pytest.raises(ConfigError, match="must be included in sasl.enabled.mechanisms"):
        build(BrokerConfig(dict(base), validate=False))
    with pytest.raises(ConfigError, match="sasl.enabled.mechanisms"):
        build(BrokerConfig({**base, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}, validate=False))
    with pytest.raises(ConfigError, match="username and password"):
        build(BrokerConfig({**base, "sasl.mechanism.inter.broker.protocol": "PLAIN"}, validate=False))
    plain = build(BrokerConfig({"listeners": "PLAINTEXT://:9092", "log.dirs": "/tmp/x"}, validate=False))
    assert plain.sasl is None and plain.ssl is None


def test_feature_node():
    """/feature: version 2 written; version 1's min_version_level ignored on reading; a bad status,
    level or a newer version refused."""
    assert json.loads(Z.encode_feature()) == {"features": {}, "version": 2, "status": 1}
    assert json.loads(Z.encode_feature({"b.version": 2, "a.version": 1})) == {
        "features": {"a.version": {"max_version_level": 1}, "b.version": {"max_version_level": 2}},
        "version": 2, "status": 1}
    assert Z.decode_feature(Z.encode_feature({"x": 3})) == (Z.FEATURE_ENABLED, {"x": 3})
    v1 = b'{"version":1,"status":0,"features":{"x":{"min_version_level":1,"max_version_level":4}}}'
    assert Z.decode_feature(v1) == (Z.FEATURE_DISABLED, {"x": 4})
    for bad in (b'{"version":3,"status":1,"features":{}}', b'{"version":2,"status":2,"features":{}}',
                b'{"version":2,"status":1,"features":{"x":{"max_version_level":"3"}}}',
                b'{"version":2,"status":1,"features":{"x":{"max_version_level":40000}}}',
                b'{"version":2,"status":1,"features":[]}', b"", b"{nope"):
        with pytest.raises(Z.ZnodeFormatError):
            Z.decode_feature(bad)

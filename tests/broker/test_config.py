import logging

import pytest
from hypothesis import given, strategies as st

from broker.config import (
    DEFAULT_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DYNAMIC_TOPIC_CONFIG, INVALID_CONFIG,
    INVALID_REQUEST, OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, STATIC_BROKER_CONFIG, BrokerConfig, ConfigError,
    apply_incremental, describe_broker_configs, describe_topic_configs, effective_topic_config, java_double,
    parse_properties, properties_from_env, render_value, validate_dynamic_broker_configs, validate_topic_config,
)
from broker.configdefs import BROKER_KEYS_BY_NAME, LONG_MAX, TOPIC_KEYS, TOPIC_SYNONYMS


# ----------------------------------------------------------------- properties parser

def test_separators_and_comments():
    text = "# comment\n! also comment\n\na=1\nb:2\nc 3\nd  =  4\ne\n  f\t=\tx\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "", "f": "x"}


def test_value_keeps_trailing_whitespace_and_inner_separators():
    assert parse_properties("k = a=b:c d  \n") == {"k": "a=b:c d  "}


def test_continuation_lines():
    text = "listeners=PLAINTEXT://:9092,\\\n    SSL://:9093\nx=1\n"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://:9092,SSL://:9093", "x": "1"}


def test_even_backslashes_do_not_continue():
    assert parse_properties("a=x\\\\\nb=y") == {"a": "x\\", "b": "y"}


def test_comment_line_is_not_continued():
    assert parse_properties("# foo \\\na=1") == {"a": "1"}


def test_continuation_at_eof_and_crlf():
    assert parse_properties("a=1\\") == {"a": "1"}
    assert parse_properties("a=1\r\nb=2\rc=3") == {"a": "1", "b": "2", "c": "3"}


def test_escapes():
    text = "k\\=ey\\ x = \\u0041\\tB\\nC\\\\D\\q\n"
    assert parse_properties(text) == {"k=ey x": "A\tB\nC\\Dq"}


def test_malformed_unicode_escape():
    with pytest.raises(ConfigError):
        parse_properties("a=\\u12G4")


def test_duplicates_last_wins():
    assert parse_properties("a=1\na=2") == {"a": "2"}


@given(st.dictionaries(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8),
                       st.text(st.characters(blacklist_categories=("Cs",)), max_size=8), max_size=5))
def test_escaped_round_trip(d):
    def esc(s, key):
        out = []
        for i, c in enumerate(s):
            if c in "\\=:#! \t\f\n\r" or (not c.isprintable()):
                if c == " " and not key and i > 0:
                    out.append(c)
                else:
                    out.append("\\u%04x" % ord(c) if ord(c) < 0x10000 else c)
            else:
                out.append(c)
        return "".join(out)
    text = "\n".join(f"{esc(k, True)}={esc(v, False)}" for k, v in d.items())
    assert parse_properties(text) == d


# ----------------------------------------------------------------- broker config

def test_defaults_from_sheet():
    c = BrokerConfig({})
    assert c["broker.id"] == -1
    assert c.get("log.segment.bytes") == 1073741824
    assert c.get("message.max.bytes") == 1048588
    assert c.get("offsets.topic.replication.factor") == 3
    assert c.get("log.flush.interval.messages") == LONG_MAX
    assert c.get("log.cleaner.io.max.bytes.per.second") == 1.7976931348623157e308
    assert c.get("log.cleanup.policy") == ["delete"]
    assert c.get("log.retention.ms") is None
    assert c.get("zookeeper.connect") is None
    assert c.log_dirs() == ["/tmp/kafka-logs"]
    assert c.log_retention_ms() == 604800000
    assert c.zookeeper_connection_timeout_ms() == 18000
    assert c.log_flush_interval_ms() == LONG_MAX


def test_every_topic_synonym_is_a_broker_key():
    for chain in TOPIC_SYNONYMS.values():
        for b in chain:
            assert b in BROKER_KEYS_BY_NAME


def test_retention_chain():
    assert BrokerConfig({"log.retention.hours": "1"}).log_retention_ms() == 3600000
    assert BrokerConfig({"log.retention.hours": "1", "log.retention.minutes": "2"}).log_retention_ms() == 120000
    c = BrokerConfig({"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "5"})
    assert c.log_retention_ms() == 5
    assert BrokerConfig({"log.retention.ms": "-7"}).log_retention_ms() == -1


def test_roll_and_flush_chains():
    c = BrokerConfig({"log.roll.hours": "2", "log.roll.jitter.hours": "1", "log.flush.scheduler.interval.ms": "99"})
    e = effective_topic_config(c, {})
    assert e["segment.ms"] == 7200000 and e["segment.jitter.ms"] == 3600000 and e["flush.ms"] == 99
    c = BrokerConfig({"log.roll.hours": "2", "log.roll.ms": "10", "log.flush.interval.ms": "5"})
    e = effective_topic_config(c, {})
    assert e["segment.ms"] == 10 and e["flush.ms"] == 5


def test_topic_defaults_follow_broker():
    c = BrokerConfig({"message.max.bytes": "2000", "log.cleanup.policy": "compact, delete",
                      "log.message.timestamp.type": "LogAppendTime", "compression.type": "zstd",
                      "min.insync.replicas": "2", "unclean.leader.election.enable": "true"})
    e = effective_topic_config(c, {"retention.ms": "1000"})
    assert e["max.message.bytes"] == 2000
    assert e["cleanup.policy"] == ["compact", "delete"]
    assert e["message.timestamp.type"] == "LogAppendTime"
    assert e["compression.type"] == "zstd"
    assert e["min.insync.replicas"] == 2
    assert e["unclean.leader.election.enable"] is True
    assert e["retention.ms"] == 1000
    assert set(e) == set(TOPIC_KEYS)
    d = effective_topic_config(BrokerConfig({}), {})
    for name, key in TOPIC_KEYS.items():
        assert d[name] == key.default, name


@pytest.mark.parametrize("props,key", [
    ({"log.segment.bytes": "13"}, "log.segment.bytes"),
    ({"num.partitions": "abc"}, "num.partitions"),
    ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
    ({"offsets.topic.replication.factor": "40000"}, "offsets.topic.replication.factor"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"log.cleanup.policy": "delete,shred"}, "log.cleanup.policy"),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "listeners"),
    ({"listeners": "FOO://:9092"}, "listeners"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
    ({"replica.fetch.wait.max.ms": "40000"}, "replica.socket.timeout.ms"),
    ({"broker.id": "2000"}, "broker.id"),
    ({"group.coordinator.rebalance.protocols": "consumer"}, "group.coordinator.rebalance.protocols"),
    ({"group.consumer.heartbeat.interval.ms": "4000"}, "group.consumer.heartbeat.interval.ms"),
    ({"group.consumer.session.timeout.ms": "70000"}, "group.consumer.session.timeout.ms"),
    ({"group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "1000",
      "group.consumer.min.heartbeat.interval.ms": "1000"}, "group.consumer.heartbeat.interval.ms"),
    ({"group.consumer.max.heartbeat.interval.ms": "4000"}, "group.consumer.max.heartbeat.interval.ms"),
    ({"group.consumer.assignors": "sticky"}, "group.consumer.assignors"),
    ({"control.plane.listener.name": "CONTROL"}, "control.plane.listener.name"),     # no such listener
    ({"listeners": "PLAINTEXT://:9092,CONTROL://:9093", "listener.security.protocol.map":
      "PLAINTEXT:PLAINTEXT,CONTROL:PLAINTEXT", "control.plane.listener.name": "PLAINTEXT"},
     "control.plane.listener.name"),                                                 # the inter-broker one
    ({"process.roles": "broker,controller", "node.id": "1", "controller.quorum.voters": "1@localhost:9093",
      "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
      "control.plane.listener.name": "CONTROLLER"}, "control.plane.listener.name"),  # not in KRaft
])
def test_invalid_values(props, key):
    with pytest.raises(ConfigError) as e:
        BrokerConfig(props)
    assert key in str(e.value) and "\n" not in str(e.value)
    assert e.value.key == key


def test_unknown_key_warns(caplog):
    with caplog.at_level(logging.WARNING):
        c = BrokerConfig({"no.such.key": "1"})
    assert "no.such.key" in caplog.text
    assert c.get("no.such.key") == "1"


def test_values_are_trimmed():
    c = BrokerConfig({"num.partitions": " 3 ", "log.dirs": " /a , /b ", "delete.topic.enable": "FALSE "})
    assert c.get("num.partitions") == 3 and c.log_dirs() == ["/a", "/b"]
    assert c.get("delete.topic.enable") is False


def test_from_file_with_overrides(tmp_path):
    p = tmp_path / "s.properties"
    p.write_text("broker.id=1\nlog.dirs=/x\nnum.partitions=2\n")
    c = BrokerConfig.from_file(p, ["num.partitions=5", "log.retention.ms=1000"])
    assert c.broker_id == 1 and c.get("num.partitions") == 5 and c.log_retention_ms() == 1000
    with pytest.raises(ConfigError):
        BrokerConfig.from_file(p, ["nonsense"])


def test_listeners():
    c = BrokerConfig({"listeners": "plaintext://127.0.0.1:9092,INTERNAL://[::1]:9093",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
                      "inter.broker.listener.name": "INTERNAL"})
    assert c.listeners() == [("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"), ("INTERNAL", "::1", 9093, "SASL_SSL")]
    assert c.advertised_listeners() == c.listeners()
    c = BrokerConfig({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://h:1"})
    assert c.advertised_listeners() == [("PLAINTEXT", "h", 1, "PLAINTEXT")]
    host = BrokerConfig({}).advertised_listeners()[0].host
    assert host  # empty host -> this machine's name


def test_control_plane_listener():
    c = BrokerConfig({"listeners": "PLAINTEXT://:9092,CONTROL://:9093",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL:SASL_PLAINTEXT",
                      "control.plane.listener.name": "control"})
    assert c.control_plane_listener_name() == "CONTROL"
    assert c.controller_to_broker_listener_name() == "CONTROL"
    assert c.inter_broker_listener_name() == "PLAINTEXT"
    plain = BrokerConfig({})
    assert plain.control_plane_listener_name() is None
    assert plain.controller_to_broker_listener_name() == "PLAINTEXT"
    # the controller's connections use that listener's own security keys
    from broker.security.interbroker import inter_broker_security
    c = BrokerConfig({"listeners": "PLAINTEXT://:9092,CONTROL://:9093",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL:SASL_PLAINTEXT",
                      "control.plane.listener.name": "CONTROL", "sasl.mechanism.inter.broker.protocol": "PLAIN",
                      "listener.name.control.sasl.enabled.mechanisms": "PLAIN",
                      "listener.name.control.plain.sasl.jaas.config":
                          'org.apache.kafka.common.security.plain.PlainLoginModule required '
                          'username="ctl" password="ctl-secret" user_ctl="ctl-secret";'})
    ib, cp = inter_broker_security(c), inter_broker_security(c, "CONTROL")
    assert (ib.listener, ib.protocol, ib.sasl) == ("PLAINTEXT", "PLAINTEXT", None)
    assert (cp.listener, cp.protocol, cp.sasl.mechanism, cp.sasl.username) == ("CONTROL", "SASL_PLAINTEXT", "PLAIN", "ctl")
    assert inter_broker_security(c, "CONTROL") is cp          # computed once per config


def test_shipped_server_properties():
    c = BrokerConfig.from_file("config/server.properties")
    assert c.broker_id == 0 and c.zookeeper_connect is None
    assert c.advertised_listeners() == [("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]
    assert c.get("offsets.topic.replication.factor") == 1 and c.get("transaction.state.log.min.isr") == 1
    for i in (1, 2, 3):
        c = BrokerConfig.from_file(f"config/server-{i}.properties")
        assert c.broker_id == i and c.zookeeper_connect == "localhost:2181"
        assert c.listeners()[0].port == 9091 + i and c.log_dirs() == [f"/tmp/kafka-logs-{i}"]


def test_env_names():
    env = {"KAFKA_ZOOKEEPER_CONNECT": "zk:2181", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "A:B",
           "KAFKA_CONFLUENT__X": "1", "KAFKA_A___B": "2", "KAFKA_HEAP_OPTS": "-Xmx1g", "PATH": "/bin"}
    assert properties_from_env(env) == {"zookeeper.connect": "zk:2181", "listener.security.protocol.map": "A:B",
                                        "confluent_x": "1", "a-b": "2"}


def test_rendering():
    assert render_value("boolean", True) == "true"
    assert render_value("list", ["compact", "delete"]) == "compact,delete"
    assert render_value("long", None) is None
    assert java_double(0.5) == "0.5" and java_double(1.0) == "1.0"
    assert java_double(1.7976931348623157e308) == "1.7976931348623157E308"
    assert java_double(1e7) == "1.0E7" and java_double(123456789.0) == "1.23456789E8"
    assert java_double(2.5e-5) == "2.5E-5"


# ----------------------------------------------------------------- topic configs

def test_validate_topic_config():
    assert validate_topic_config("retention.ms", "-1") == -1
    assert validate_topic_config("cleanup.policy", "compact,delete") == ["compact", "delete"]
    assert validate_topic_config("min.cleanable.dirty.ratio", "0.1") == 0.1
    for name, value in [("segment.bytes", "10"), ("retention.ms", "-2"), ("cleanup.policy", "x"),
                        ("message.timestamp.type", "createtime"), ("no.such", "1"), ("min.insync.replicas", "0"),
                        ("leader.replication.throttled.replicas", "a:b"), ("compression.gzip.level", "0")]:
        with pytest.raises(ConfigError) as e:
            validate_topic_config(name, value)
        assert e.value.error_code == INVALID_CONFIG and name in str(e.value)
    assert validate_topic_config("leader.replication.throttled.replicas", "0:1, 1:2") == ["0:1", "1:2"]
    with pytest.raises(ConfigError):
        effective_topic_config(BrokerConfig({}), {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def _entry(entries, name):
    return next(e for e in entries if e.name == name)


def test_describe_topic_sources():
    c = BrokerConfig({"log.segment.bytes": "1000", "log.retention.hours": "1"})
    entries = describe_topic_configs(c, {"cleanup.policy": "compact"}, include_synonyms=True)
    assert [e.name for e in entries] == sorted(TOPIC_KEYS)
    e = _entry(entries, "cleanup.policy")
    assert (e.value, e.source, e.config_type) == ("compact", DYNAMIC_TOPIC_CONFIG, 7)
    assert [(s.name, s.value, s.source) for s in e.synonyms] == [
        ("cleanup.policy", "compact", DYNAMIC_TOPIC_CONFIG), ("log.cleanup.policy", "delete", DEFAULT_CONFIG)]
    e = _entry(entries, "segment.bytes")
    assert (e.value, e.source, e.is_default) == ("1000", STATIC_BROKER_CONFIG, False)
    assert [(s.name, s.source) for s in e.synonyms] == [("log.segment.bytes", STATIC_BROKER_CONFIG),
                                                        ("log.segment.bytes", DEFAULT_CONFIG)]
    # Kafka drops synonyms listed before the primary broker key (log.retention.ms here).
    e = _entry(entries, "retention.ms")
    assert (e.value, e.source, e.synonyms) == ("3600000", DEFAULT_CONFIG, [])
    e = _entry(entries, "unclean.leader.election.enable")
    assert (e.value, e.config_type, e.read_only) == ("false", 1, False)
    e = _entry(describe_topic_configs(c, {}, include_synonyms=False), "segment.bytes")
    assert e.synonyms == []


def test_describe_topic_with_dynamic_layers():
    c = BrokerConfig({"log.retention.ms": "100"})
    c.set_dynamic(per_broker={"log.retention.ms": "300"}, cluster_default={"log.retention.ms": "200"})
    e = _entry(describe_topic_configs(c, {}, include_synonyms=True), "retention.ms")
    assert e.value == "300" and e.source == DYNAMIC_BROKER_CONFIG
    assert [(s.value, s.source) for s in e.synonyms] == [
        ("300", DYNAMIC_BROKER_CONFIG), ("200", DYNAMIC_DEFAULT_BROKER_CONFIG), ("100", STATIC_BROKER_CONFIG),
        ("168", DEFAULT_CONFIG)]
    assert [s.name for s in e.synonyms][-1] == "log.retention.hours"


def test_describe_broker():
    c = BrokerConfig({"broker.id": "3", "ssl.keystore.password": "secret", "log.retention.minutes": "5"})
    c.set_dynamic(cluster_default={"min.insync.replicas": "2"})
    entries = describe_broker_configs(c, include_synonyms=True, include_documentation=True)
    assert len(entries) == len([k for k in BROKER_KEYS_BY_NAME.values() if not k.internal])
    e = _entry(entries, "broker.id")
    assert (e.value, e.source, e.read_only) == ("3", STATIC_BROKER_CONFIG, True)
    e = _entry(entries, "ssl.keystore.password")
    assert (e.value, e.sensitive, e.config_type) == (None, True, 9)
    assert all(s.value is None for s in e.synonyms)
    e = _entry(entries, "min.insync.replicas")
    assert (e.value, e.source, e.read_only) == ("2", DYNAMIC_DEFAULT_BROKER_CONFIG, False)
    e = _entry(entries, "log.retention.ms")
    assert (e.value, e.source) == (None, DEFAULT_CONFIG)
    e = _entry(entries, "log.retention.minutes")
    assert e.value == "5" and [(s.name, s.source) for s in e.synonyms] == [
        ("log.retention.minutes", STATIC_BROKER_CONFIG), ("log.retention.hours", DEFAULT_CONFIG)]
    assert e.documentation
    d = describe_broker_configs(c, default_resource=True, include_synonyms=True)
    assert [(x.name, x.value, x.source) for x in d] == [("min.insync.replicas", "2", DYNAMIC_DEFAULT_BROKER_CONFIG)]


# ----------------------------------------------------------------- dynamic and incremental

def test_dynamic_validation():
    validate_dynamic_broker_configs({"log.retention.ms": "5", "listeners": "PLAINTEXT://:1"}, per_broker=True)
    with pytest.raises(ConfigError) as e:
        validate_dynamic_broker_configs({"log.dirs": "/x"}, per_broker=True)
    assert e.value.error_code == INVALID_REQUEST and "Cannot update these configs dynamically" in str(e.value)
    with pytest.raises(ConfigError) as e:
        validate_dynamic_broker_configs({"listeners": "PLAINTEXT://:1"}, per_broker=False)
    assert "broker id must be specified" in str(e.value)
    with pytest.raises(ConfigError) as e:
        validate_dynamic_broker_configs({"message.max.bytes": "-5"}, per_broker=False)
    assert e.value.error_code == INVALID_CONFIG


def test_set_dynamic_rolls_back_on_error():
    c = BrokerConfig({})
    with pytest.raises(ConfigError):
        c.set_dynamic(per_broker={"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "5"})
    assert c.dynamic_broker_configs == {} and c.get("log.cleaner.max.compaction.lag.ms") == LONG_MAX


def test_incremental_ops():
    cur = {"retention.ms": "1", "cleanup.policy": "delete"}
    out = apply_incremental(cur, [("retention.ms", OP_DELETE, None), ("segment.bytes", OP_SET, "100"),
                                  ("cleanup.policy", OP_APPEND, "compact")])
    assert out == {"segment.bytes": "100", "cleanup.policy": "delete,compact"}
    assert cur == {"retention.ms": "1", "cleanup.policy": "delete"}
    assert apply_incremental(out, [("cleanup.policy", OP_SUBTRACT, "delete")])["cleanup.policy"] == "compact"
    # APPEND to an unset list starts from its default; APPEND is idempotent
    assert apply_incremental({}, [("cleanup.policy", OP_APPEND, "compact,delete")]) == {"cleanup.policy": "delete,compact"}
    assert apply_incremental({}, [("leader.replication.throttled.replicas", OP_APPEND, "0:1")]) == \
        {"leader.replication.throttled.replicas": "0:1"}
    assert apply_incremental({}, [("log.cleanup.policy", OP_APPEND, "compact")], kind="broker") == \
        {"log.cleanup.policy": "delete,compact"}


@pytest.mark.parametrize("ops,msg", [
    ([("retention.ms", OP_APPEND, "1")], "Config value append is not allowed for config key: retention.ms"),
    ([("retention.ms", OP_SUBTRACT, "1")], "Config value subtract is not allowed for config key: retention.ms"),
    ([("a", OP_SET, "1"), ("a", OP_DELETE, None)], "Error due to duplicate config keys"),
    ([("a", 7, "1")], "Unknown operation type"),
])
def test_incremental_errors(ops, msg):
    with pytest.raises(ConfigError) as e:
        apply_incremental({}, ops)
    # APPEND/SUBTRACT on a key that is not a list: Kafka 3.9's InvalidConfigurationException
    want = 40 if "is not allowed for config key" in msg else INVALID_REQUEST
    assert msg in str(e.value) and e.value.error_code == want


def test_kafka_property_files_load_without_warnings(caplog):
    """Settings a Kafka 3.9 ZooKeeper-mode broker's properties commonly carry that have no effect
    here (Java plugins left unset, thread counts, JSSE names) are known keys: no warning, Kafka's
    defaults when described, their validators applied."""
    props = {"kafka.metrics.reporters": "", "kafka.metrics.polling.interval.secs": "10",
             "group.coordinator.threads": "2", "group.coordinator.append.linger.ms": "5",
             "num.replica.alter.log.dirs.threads": "2", "ssl.protocol": "TLSv1.3",
             "ssl.keymanager.algorithm": "SunX509", "ssl.trustmanager.algorithm": "PKIX",
             "password.encoder.cipher.algorithm": "AES/CBC/PKCS5Padding", "password.encoder.iterations": "4096",
             "replication.quota.window.num": "11", "sasl.server.max.receive.size": "524288"}
    with caplog.at_level(logging.WARNING):
        cfg = BrokerConfig(props)
    assert not [r for r in caplog.records if any(k in r.getMessage() for k in props)], caplog.text
    assert cfg.get("group.coordinator.threads") == 2
    assert BrokerConfig({}).get("sasl.server.max.receive.size") == 524288
    with pytest.raises(ConfigError, match="password.encoder.iterations"):
        BrokerConfig({"password.encoder.iterations": "100"})


# ----------------------------------------------------------------- KRaft configuration files

KRAFT = {"process.roles": "broker,controller", "node.id": "1", "controller.quorum.voters": "1@localhost:9093",
         "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "inter.broker.listener.name": "PLAINTEXT",
         "advertised.listeners": "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
         "controller.listener.names": "CONTROLLER",
         "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"}


def test_kraft_combined_config_runs_on_the_embedded_store():
    c = BrokerConfig(KRAFT)
    assert c.kraft_mode and c.broker_id == 1 and c.process_roles() == {"broker", "controller"}
    assert c.quorum_voters() == {1: ("localhost", 9093)}
    # the controller listener is neither opened nor advertised
    assert [e.listener_name for e in c.listeners()] == ["PLAINTEXT"]
    assert c.advertised_listeners() == [("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]
    c = BrokerConfig({**KRAFT, "controller.quorum.voters": "", "controller.quorum.bootstrap.servers": "localhost:9093"})
    assert c.quorum_voters() == {}
    for f in ("config/kraft/server.properties", "config/kraft/reconfig-server.properties"):
        c = BrokerConfig.from_file(f)
        c.validate()
        assert c.kraft_mode and c.broker_id == 1 and c.log_dirs() == ["/tmp/kraft-combined-logs"]
    assert not BrokerConfig({}).kraft_mode


@pytest.mark.parametrize("change,message", [
    ({"process.roles": "broker"}, "only as a combined node (process.roles=broker,controller)"),
    ({"process.roles": "controller"}, "only as a combined node"),
    ({"process.roles": "broker,observer"}, "Unknown process role 'observer' (only 'broker' and 'controller' are "
                                           "allowed roles)"),
    ({"process.roles": "broker,broker,controller"}, "Duplicate role names found in `process.roles`"),
    ({"node.id": None}, "Missing configuration `node.id` which is required when `process.roles` is defined"),
    ({"node.id": "2"}, "the node id 2 must be included in the set of voters controller.quorum.voters={1}"),
    ({"broker.id": "3"}, "You must set `node.id` to the same value as `broker.id`."),
    ({"controller.quorum.voters": "1@localhost:9093,2@other:9093"}, "a quorum of one, this node"),
    ({"controller.quorum.voters": "one@localhost"}, "Unable to parse voter connection string"),
    ({"controller.quorum.voters": None}, "either controller.quorum.bootstrap.servers must contain"),
    ({"controller.listener.names": None}, "controller.listener.names must contain at least one value appearing"),
    ({"controller.listener.names": "CONTROLLER,OTHER"}, "must only contain values appearing in the 'listeners'"),
    ({"zookeeper.connect": "localhost:2181"}, "zookeeper.connect must not be set with process.roles"),
    ({"listeners": "CONTROLLER://:9093", "advertised.listeners": None, "inter.broker.listener.name": None,
      "controller.listener.names": "CONTROLLER"}, "There must be at least one broker advertised listener"),
])
def test_kraft_config_errors(change, message):
    props = {k: v for k, v in {**KRAFT, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as e:
        BrokerConfig(props)
    assert message in str(e.value)


def test_controller_listener_names_without_kraft_is_refused():
    with pytest.raises(ConfigError, match=r"controller.listener.names must be empty when not running in KRaft "
                                          r"mode: \[CONTROLLER\]"):
        BrokerConfig({"controller.listener.names": "CONTROLLER"})
    # node.id alone is broker.id's synonym, as in Kafka
    assert BrokerConfig({"node.id": "4"}).broker_id == 4

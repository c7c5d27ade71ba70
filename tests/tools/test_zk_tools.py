"""The tools' ZooKeeper modes against a real ZooKeeper and real ZooKeeper-mode brokers:

* ``kafka-acls.sh --authorizer-properties zookeeper.connect=...``: ACLs added there are enforced by
  a running broker (it follows the change notifications), removed there they stop applying; the
  ZooKeeper ``--list`` shows ACLs created through the broker and ``--bootstrap-server --list`` shows
  ACLs written through ZooKeeper.
* ``kafka-configs.sh --zookeeper``: SCRAM credentials written before the broker starts let
  confluent-kafka log in with SCRAM-SHA-256 and SCRAM-SHA-512 (wrong passwords are refused), and one
  written while it runs is picked up; the uses Kafka 3.x refuses give Kafka's message and status 1.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import _track
from tests.support.broker import BrokerProcess, running
from tests.support.net import LOOPBACK, free_port
from tests.support.sasl import ADMIN, ALICE, BOB, jaas_config, login_error as sasl_login_error

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PROPAGATION_S = 20


def broker_props(connect: str, authorizer: bool = True) -> dict[str, str]:
    p = {
        "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": "6000",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_config(),
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": jaas_config("scram.ScramLoginModule"),
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": jaas_config("scram.ScramLoginModule"),
        "super.users": "User:admin",
    }
    if authorizer:
        p["authorizer.class.name"] = "kafka.security.authorizer.AclAuthorizer"
    return p


def sasl_broker(workdir: Path, connect: str, authorizer: bool = True) -> BrokerProcess:
    """A ZooKeeper-mode broker with a PLAINTEXT listener (readiness probe only) and a SASL_PLAINTEXT one;
    ``b.sasl`` is the latter's address."""
    port, sasl_port = free_port(LOOPBACK), free_port(LOOPBACK)
    eps = f"PLAINTEXT://{LOOPBACK}:{port},SASL_PLAINTEXT://{LOOPBACK}:{sasl_port}"
    b = BrokerProcess(workdir, port=port, props=broker_props(connect, authorizer),
                      overrides={"listeners": eps, "advertised.listeners": eps}, startup_timeout=60)
    b.sasl = f"{LOOPBACK}:{sasl_port}"
    admin_cfg = workdir / "admin.properties"
    admin_cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                         'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                         'username="admin" password="admin-secret";\n')
    b.admin_cfg = str(admin_cfg)
    return b


def new_chroot(zookeeper) -> str:
    return zookeeper.connect_string(zookeeper.new_chroot("zktools"))


def run_tool(name: str, *args, stdin: str | None = None, timeout=60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([str(REPO / "bin" / name), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, input=stdin)


def zk_acls(connect: str, *args, **kw) -> subprocess.CompletedProcess:
    return run_tool("kafka-acls.sh", "--authorizer-properties", f"zookeeper.connect={connect}", *args, **kw)


def zk_configs(connect: str, *args) -> subprocess.CompletedProcess:
    return run_tool("kafka-configs.sh", "--zookeeper", connect, *args)


def conf(b, user_pw=ADMIN, mechanism="PLAIN") -> dict:
    return {"bootstrap.servers": b.sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user_pw[0], "sasl.password": user_pw[1]}


def produce(b, user_pw, topic: str) -> KafkaError | None:
    from confluent_kafka import Producer
    p = Producer({**conf(b, user_pw), "acks": "1", "message.timeout.ms": 5000,
                  "topic.metadata.refresh.interval.ms": 500})
    out = []
    p.produce(topic, b"x", on_delivery=lambda e, m: out.append(e))
    p.flush(10)
    return out[0] if out else KafkaError(KafkaError._MSG_TIMED_OUT)


def login_error(b, user_pw, mechanism, timeout=5.0) -> str | None:
    """None when ``user_pw`` authenticates (a Metadata request succeeds), else the error text."""
    return sasl_login_error(conf(b, user_pw, mechanism), timeout)


def until(cond, timeout=PROPAGATION_S, what="condition", interval=0.25):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def zk_client(connect: str):
    from kazoo.client import KazooClient
    z = KazooClient(hosts=connect, timeout=10)
    z.start(timeout=15)
    return z


# ----------------------------------------------------------------------------- ACLs

@pytest.fixture(scope="module")
def acl_broker(zookeeper, tmp_path_factory):
    connect = new_chroot(zookeeper)
    b = sasl_broker(tmp_path_factory.mktemp("zk-acl-broker"), connect)
    b.connect = connect
    with running(b):
        yield b


@pytest.fixture
def ab(request, acl_broker):
    _track(request, acl_broker)
    return acl_broker


def create_topic(b, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient(conf(b))
    for f in a.create_topics([NewTopic(name, 1, 1)], operation_timeout=30).values():
        f.result(30)


def test_acls_added_through_zookeeper_are_enforced_and_removed(ab):
    topic = "zt-" + uuid.uuid4().hex[:6]
    create_topic(ab, topic)
    err = produce(ab, ALICE, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err

    r = zk_acls(ab.connect, "--add", "--allow-principal", "User:alice", "--operation", "Write",
                "--operation", "Describe", "--topic", topic)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "deprecated" in r.stderr
    assert f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)`:" \
        in r.stdout
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in r.stdout
    assert "Current ACLs" not in r.stdout           # Kafka 3.9 no longer lists after --add

    # Kafka's layout: the resource znode and a change notification naming it
    z = zk_client(ab.connect)
    try:
        node = json.loads(z.get(f"/kafka-acl/Topic/{topic}")[0])
        assert node["version"] == 1
        assert {(a["principal"], a["operation"], a["permissionType"], a["host"]) for a in node["acls"]} == {
            ("User:alice", "Write", "Allow", "*"), ("User:alice", "Describe", "Allow", "*")}
        notes = [z.get(f"/kafka-acl-changes/{c}")[0] for c in z.get_children("/kafka-acl-changes")]
        assert f"Topic:{topic}".encode() in notes
    finally:
        z.stop()
        z.close()

    until(lambda: produce(ab, ALICE, topic) is None, what="alice allowed to write")
    err = produce(ab, BOB, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err

    # a PREFIXED grant for bob through ZooKeeper (the extended store and its notifications)
    r = zk_acls(ab.connect, "--add", "--allow-principal", "User:bob", "--operation", "Write",
                "--topic", topic[:5], "--resource-pattern-type", "prefixed")
    assert r.returncode == 0, r.stdout + r.stderr
    until(lambda: produce(ab, BOB, topic) is None, what="bob allowed through the prefixed ACL")

    # remove alice's Write: denied again; bob's prefixed grant stays
    r = zk_acls(ab.connect, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write",
                "--topic", topic)
    assert r.returncode == 0, r.stdout + r.stderr
    until(lambda: (lambda e: e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED)(
        produce(ab, ALICE, topic)), what="alice denied again")
    assert produce(ab, BOB, topic) is None
    r = zk_acls(ab.connect, "--list", "--topic", topic)
    assert "operation=DESCRIBE" in r.stdout and "operation=WRITE" not in r.stdout, r.stdout

    # --remove without principals asks, and "n" keeps everything
    r = zk_acls(ab.connect, "--remove", "--topic", topic[:5], "--resource-pattern-type", "prefixed", stdin="n\n")
    assert r.returncode == 0 and "Are you sure you want to delete all ACLs for resource filter " \
        f"`ResourcePatternFilter(resourceType=TOPIC, name={topic[:5]}, patternType=PREFIXED)`? (y/n)" in r.stdout, r
    assert produce(ab, BOB, topic) is None
    r = zk_acls(ab.connect, "--remove", "--topic", topic[:5], "--resource-pattern-type", "prefixed", stdin="y\n")
    assert r.returncode == 0, r
    until(lambda: (lambda e: e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED)(
        produce(ab, BOB, topic)), what="bob denied after the prefixed ACL went")


def test_consumer_acls_through_zookeeper_for_kafka_python(ab):
    kafka = pytest.importorskip("kafka")
    topic = "zc-" + uuid.uuid4().hex[:6]
    group = "g-" + uuid.uuid4().hex[:6]
    create_topic(ab, topic)
    assert produce(ab, ADMIN, topic) is None

    def consume() -> str:
        c = kafka.KafkaConsumer(topic, bootstrap_servers=ab.sasl, security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism="PLAIN", sasl_plain_username=ALICE[0],
                                sasl_plain_password=ALICE[1], group_id=group, auto_offset_reset="earliest",
                                consumer_timeout_ms=6000, request_timeout_ms=11000, session_timeout_ms=10000)
        try:
            for _ in c:
                return "ok"
            return "nothing"
        except Exception as e:       # TopicAuthorizationFailedError / GroupAuthorizationFailedError
            return type(e).__name__
        finally:
            c.close()

    assert consume() != "ok"
    r = zk_acls(ab.connect, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", topic,
                "--group", group)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"resourceType=GROUP, name={group}, patternType=LITERAL" in r.stdout
    until(lambda: consume() == "ok", timeout=40, what="kafka-python consumer allowed")


def test_list_through_zookeeper_and_broker_see_each_others_acls(ab):
    t1, t2 = "zl1-" + uuid.uuid4().hex[:6], "zl2-" + uuid.uuid4().hex[:6]
    # through the broker, listed through ZooKeeper
    r = run_tool("kafka-acls.sh", "--bootstrap-server", ab.sasl, "--command-config", ab.admin_cfg, "--add",
                 "--allow-principal", "User:alice", "--operation", "Read", "--topic", t1)
    assert r.returncode == 0, r.stdout + r.stderr
    r = zk_acls(ab.connect, "--list", "--topic", t1)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (f"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name={t1}, patternType=LITERAL)`: \n"
            " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n") in r.stdout, r.stdout
    # through ZooKeeper, listed through the broker (once it followed the notification)
    r = zk_acls(ab.connect, "--add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1",
                "--operation", "Read", "--topic", t2)
    assert r.returncode == 0, r.stdout + r.stderr

    def broker_list():
        r = run_tool("kafka-acls.sh", "--bootstrap-server", ab.sasl, "--command-config", ab.admin_cfg,
                     "--list", "--topic", t2)
        return r.stdout if "(principal=User:bob, host=10.0.0.1, operation=READ, permissionType=DENY)" \
            in r.stdout else None
    until(broker_list, what="the broker listing the ACL written through ZooKeeper")
    # --list without a resource shows both; --principal filters
    r = zk_acls(ab.connect, "--list", "--principal", "User:bob")
    assert r.stdout.startswith("ACLs for principal `User:bob`\n"), r.stdout
    assert f"name={t2}," in r.stdout and f"name={t1}," not in r.stdout
    # removed through the broker, gone from ZooKeeper
    r = run_tool("kafka-acls.sh", "--bootstrap-server", ab.sasl, "--command-config", ab.admin_cfg, "--remove",
                 "--force", "--topic", t1)
    assert r.returncode == 0, r.stdout + r.stderr
    r = zk_acls(ab.connect, "--list")
    assert f"name={t1}," not in r.stdout and f"name={t2}," in r.stdout
    z = zk_client(ab.connect)
    try:
        assert not z.exists(f"/kafka-acl/Topic/{t1}")
    finally:
        z.stop()
        z.close()


def test_zookeeper_refuses_config_changes_of_a_running_broker(ab):
    r = zk_configs(ab.connect, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                   "--add-config", "log.cleaner.threads=2")
    assert r.returncode == 1
    assert ("requirement failed: --bootstrap-server option must be specified to update brokers configs: "
            "{add: {log.cleaner.threads=2}, delete: List()} - broker 0 is running. Broker configuration "
            "operations using ZooKeeper are only supported if the affected broker(s) are not running.") \
        in r.stderr, r.stderr
    r = zk_configs(ab.connect, "--alter", "--entity-type", "brokers", "--entity-default",
                   "--add-config", "log.cleaner.threads=2")
    assert r.returncode == 1 and "- 1 brokers are running." in r.stderr, r.stderr


# ----------------------------------------------------------------------------- SCRAM credentials

def test_scram_credentials_from_zookeeper_before_the_broker_starts(request, zookeeper, tmp_path):
    connect = new_chroot(zookeeper)
    user, pw = "carol", "carol-secret"
    r = zk_configs(connect, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
                   f"SCRAM-SHA-256=[iterations=8192,password={pw}],SCRAM-SHA-512=[password={pw}]")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "deprecated" in r.stdout.splitlines()[0]
    assert r.stdout.rstrip().endswith("Completed updating config for entity: user-principal 'carol'.")
    r = zk_configs(connect, "--describe", "--entity-type", "users", "--entity-name", user)
    assert r.returncode == 0
    line = r.stdout.splitlines()[-1]
    assert line.startswith("Configs for user-principal 'carol' are SCRAM-SHA-256=salt="), line
    assert "iterations=8192,SCRAM-SHA-512=salt=" in line and line.endswith("iterations=4096"), line
    # a user whose name needs sanitizing
    r = zk_configs(connect, "--alter", "--entity-type", "users", "--entity-name", "dan@EXAMPLE",
                   "--add-config", "SCRAM-SHA-512=[password=dan-secret]")
    assert r.returncode == 0, r.stderr
    z = zk_client(connect)
    try:
        assert set(z.get_children("/config/users")) == {"carol", "dan%40EXAMPLE"}
        node = json.loads(z.get("/config/users/carol")[0])
        assert node["version"] == 1 and set(node["config"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
        notes = [json.loads(z.get(f"/config/changes/{c}")[0]) for c in z.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "users/carol"} in notes
    finally:
        z.stop()
        z.close()

    # a dynamic config for broker 0, which is not running yet
    r = zk_configs(connect, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                   "--add-config", "log.cleaner.threads=3")
    assert r.returncode == 0 and "Completed updating config for entity: brokers '0'." in r.stdout, r
    r = zk_configs(connect, "--describe", "--entity-type", "brokers", "--entity-name", "0")
    assert r.stdout.splitlines()[-1] == "Configs for brokers '0' are log.cleaner.threads=3", r

    b = sasl_broker(tmp_path / "scram-broker", connect, authorizer=False)
    _track(request, b)
    with running(b):
        r = run_tool("kafka-configs.sh", "--bootstrap-server", b.sasl, "--command-config", b.admin_cfg,
                     "--describe", "--entity-type", "brokers", "--entity-name", "0")
        assert "log.cleaner.threads=3 sensitive=false" in r.stdout, r
        r = zk_configs(connect, "--describe", "--entity-type", "brokers", "--entity-name", "0")
        assert r.returncode == 1 and "broker 0 is running" in r.stderr, r
        assert login_error(b, (user, pw), "SCRAM-SHA-256") is None
        assert login_error(b, (user, pw), "SCRAM-SHA-512") is None
        assert login_error(b, ("dan@EXAMPLE", "dan-secret"), "SCRAM-SHA-512") is None
        assert "authentication failed" in login_error(b, (user, "wrong"), "SCRAM-SHA-256")
        assert "authentication failed" in login_error(b, (user, "wrong"), "SCRAM-SHA-512")
        assert "authentication failed" in login_error(b, ("dan@EXAMPLE", "dan-secret"), "SCRAM-SHA-256")
        # the broker path describes what ZooKeeper mode wrote
        r = run_tool("kafka-configs.sh", "--bootstrap-server", b.sasl, "--command-config", b.admin_cfg,
                     "--describe", "--entity-type", "users", "--entity-name", user)
        assert "SCRAM-SHA-256=iterations=8192" in r.stdout and "SCRAM-SHA-512=iterations=4096" in r.stdout, r
        # written while the broker runs: picked up from /config/changes; deleted: refused again
        r = zk_configs(connect, "--alter", "--entity-type", "users", "--entity-name", "erin",
                       "--add-config", "SCRAM-SHA-256=[password=erin-secret]")
        assert r.returncode == 0, r.stderr
        until(lambda: login_error(b, ("erin", "erin-secret"), "SCRAM-SHA-256") is None, what="erin logs in")
        r = zk_configs(connect, "--alter", "--entity-type", "users", "--entity-name", user,
                       "--delete-config", "SCRAM-SHA-256")
        assert r.returncode == 0, r.stderr
        until(lambda: login_error(b, (user, pw), "SCRAM-SHA-256") is not None, what="carol's SHA-256 refused")
        assert login_error(b, (user, pw), "SCRAM-SHA-512") is None


@pytest.mark.parametrize("args, message", [
    (["--alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "retention.ms=1"],
     "Invalid entity type topics, the entity type must be one of users, brokers with a --zookeeper argument"),
    (["--describe", "--entity-type", "clients"],
     "Invalid entity type clients, the entity type must be one of users, brokers with a --zookeeper argument"),
    (["--alter", "--user", "u", "--client", "c", "--add-config", "producer_byte_rate=10"],
     "Invalid entity type clients, the entity type must be one of users, brokers with a --zookeeper argument"),
    (["--alter", "--entity-type", "users", "--entity-name", "u", "--add-config", "producer_byte_rate=1024"],
     "requirement failed: --bootstrap-server option must be specified to update users configs: "
     "{add: {producer_byte_rate=1024}, delete: List()}. User configuration updates using ZooKeeper are only "
     "supported for SCRAM credential updates."),
    (["--describe", "--entity-type", "users", "--all"], "--bootstrap-server must be specified for --all"),
    (["--alter", "--entity-type", "users", "--entity-name", "u", "--add-config",
      "SCRAM-SHA-256=[iterations=1024,password=p]"],
     "Iterations 1024 is less than the minimum 4096 required for SCRAM_SHA_256"),
    (["--alter", "--entity-type", "users", "--entity-name", "u", "--add-config", "SCRAM-SHA-512=[pw=p]"],
     "Invalid credential property SCRAM_SHA_512=pw=p"),
    (["--alter", "--entity-type", "users", "--entity-name", "u", "--delete-config", "SCRAM-SHA-512"],
     "Invalid config(s): SCRAM-SHA-512"),
])
def test_refused_zookeeper_uses(zk_connect, args, message):
    r = zk_configs(zk_connect, *args)
    assert r.returncode == 1, r
    assert message in r.stderr, r.stderr


def test_zookeeper_and_bootstrap_server_together_are_refused(zk_connect):
    r = run_tool("kafka-configs.sh", "--zookeeper", zk_connect, "--bootstrap-server", "127.0.0.1:1",
                 "--describe", "--entity-type", "users")
    assert r.returncode == 1
    assert "Only one of --bootstrap-server, --boostrap-controller, and --zookeeper can be specified" in r.stderr


def test_acls_tool_refusals(zk_connect):
    r = run_tool("kafka-acls.sh", "--list", "--topic", "t")
    assert r.returncode == 1 and 'Missing required argument "[authorizer-properties]"' in r.stderr
    r = run_tool("kafka-acls.sh", "--bootstrap-server", "127.0.0.1:1", "--authorizer",
                 "kafka.security.authorizer.AclAuthorizer", "--list")
    assert r.returncode == 1 and "Only one of --bootstrap-server or --authorizer must be specified" in r.stderr
    # a TLS file that turns TLS on without Kafka's Netty socket (tests/cluster/test_cluster_zk_tls.py uses it)
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False) as f:
        f.write("zookeeper.ssl.client.enable=true\n")
    r = zk_acls(zk_connect, "--list", "--zk-tls-config-file", f.name)
    os.unlink(f.name)
    assert r.returncode == 1 and r.stdout.startswith(
        "Error while executing ACL command: zookeeper.ssl.client.enable is true, so zookeeper.clientCnxnSocket "
        "must be org.apache.zookeeper.ClientCnxnSocketNetty"), r.stdout
    # secure znodes need a ZooKeeper login (KAFKA_OPTS' JAAS file): none here
    r = zk_acls(zk_connect, "--authorizer-properties", "zookeeper.set.acl=true", "--list")
    assert r.returncode == 1 and "zookeeper.set.acl is true, but there is no authenticated ZooKeeper identity" \
        in r.stdout
    r = zk_acls(zk_connect, "--authorizer", "org.example.OtherAuthorizer", "--list")
    assert r.returncode == 1 and "org.example.OtherAuthorizer" in r.stdout
    r = run_tool("kafka-acls.sh", "--authorizer-properties", f"zookeeper.connect={LOOPBACK}:1",
                 "--authorizer-properties", "zookeeper.connection.timeout.ms=1000", "--list")
    assert r.returncode == 1
    assert r.stdout.strip() == "Error while executing ACL command: Timed out waiting for connection while in " \
                               "state: CONNECTING"
    # a resource name the authorizer refuses: reported, nothing written, status 0 (as Kafka's tool)
    r = zk_acls(zk_connect, "--add", "--allow-principal", "User:a", "--topic", "a/b")
    assert r.returncode == 0
    assert "Error while adding ACLs: Failed to create ACL" in r.stdout
    r = zk_acls(zk_connect, "--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type",
                "match")
    assert r.returncode == 1 and "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls." \
        in r.stderr


def test_acls_zookeeper_mode_creates_a_missing_chroot_and_the_acl_paths(zookeeper):
    connect = new_chroot(zookeeper)
    r = zk_acls(connect, "--list")
    assert r.returncode == 0 and r.stdout == "", r
    z = zk_client(connect)
    try:
        assert z.exists("/kafka-acl/Topic") and z.exists("/kafka-acl-extended/prefixed/Group")
        assert z.exists("/kafka-acl-changes") and z.exists("/kafka-acl-extended-changes")
    finally:
        z.stop()
        z.close()


# ----------------------------------------------------------------------------- zookeeper.set.acl

def test_zookeeper_set_acl_without_a_zookeeper_login_is_refused_by_the_config(monkeypatch, tmp_path):
    """(With a login, tests/cluster/test_cluster_zk_acl.py.)"""
    from broker.config import BrokerConfig, ConfigError
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", "zookeeper.set.acl": "false"}).validate()
    BrokerConfig({"zookeeper.set.acl": "true"}).validate()          # no ZooKeeper: nothing to protect
    with pytest.raises(ConfigError, match="zookeeper.set.acl is true, but there is no authenticated ZooKeeper "
                                          "identity to own the znodes: no JAAS file is given"):
        BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", "zookeeper.set.acl": "true"}).validate()
    jaas = tmp_path / "jaas.conf"
    jaas.write_text("KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required; };\n")
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={jaas}")
    with pytest.raises(ConfigError, match="has no Client section"):
        BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", "zookeeper.set.acl": "true"}).validate()
    jaas.write_text("Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };\n")
    # a Kerberos login is checked at start-up: a keytab entry needs its keytab and principal
    with pytest.raises(ConfigError, match="the Client section of .*(needs keyTab|needs the gssapi package)"):
        BrokerConfig({"zookeeper.connect": "127.0.0.1:2181"}).validate()


def test_broker_with_zookeeper_set_acl_does_not_start(zk_connect, tmp_path):
    b = BrokerProcess(tmp_path / "setacl", props={"zookeeper.connect": zk_connect, "zookeeper.set.acl": "true"})
    argv = b.command()
    r = subprocess.run(argv, cwd=b.cwd(), env=b.environment(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r
    assert "zookeeper.set.acl is true" in r.stderr, r.stderr
    z = zk_client(zk_connect)
    try:
        assert not z.exists("/brokers/ids")          # refused before touching ZooKeeper
    finally:
        z.stop()
        z.close()

"""Security in a ZooKeeper cluster: three brokers with a SASL_PLAINTEXT inter-broker listener, the
ACL authorizer and ``super.users=User:admin``, driven by unmodified clients (confluent-kafka,
kafka-python) and the project's bin/kafka-acls.sh / bin/kafka-configs.sh.

* SCRAM credentials written through one broker (``/config/users/<user>`` + ``/config/changes``) let
  the user log in at another; a deleted credential stops working there.
* ACLs created through one broker (``/kafka-acl...`` + change notifications) are enforced by
  another, and removed through a third they stop applying; concurrent creates through two brokers
  both survive.
* A topic with RF=3 replicates over the SASL inter-broker connections (acks=all, full ISR), and the
  controller's channels (UpdateMetadata / LeaderAndIsr) work over them too.

Each broker also has a PLAINTEXT listener, used only by the test harness's readiness probe
(ApiVersions); with the authorizer on, its ``User:ANONYMOUS`` may do nothing else.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from tests.conftest import _track
from tests.support.cluster import Cluster
from tests.support.net import LOOPBACK
from tests.support.sasl import ADMIN, ALICE, BOB, jaas_config, login_error as sasl_login_error

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PROPAGATION_S = 15


def sasl_props(mechanism="PLAIN") -> dict[str, str]:
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": mechanism,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_config(),
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
            jaas_config("scram.ScramLoginModule"),
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
            jaas_config("scram.ScramLoginModule"),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "delegation.token.secret.key": "cluster-token-secret",
    }


def make_sasl_cluster(workdir, zookeeper, props=None, prepare=None) -> Cluster:
    """A 3-broker cluster (not started): PLAINTEXT (probe) + SASL_PLAINTEXT (everything else)."""
    c = Cluster(workdir, zookeeper, 3, props={**sasl_props(), **(props or {})})
    c.sasl_ports = c.add_listener("SASL_PLAINTEXT")
    admin_cfg = Path(workdir) / "admin.properties"
    admin_cfg.parent.mkdir(parents=True, exist_ok=True)
    admin_cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                         'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                         'username="admin" password="admin-secret";\n')
    c.admin_cfg = str(admin_cfg)
    c.sasl_addr = lambda i: f"{LOOPBACK}:{c.sasl_ports[i]}"
    if prepare is not None:
        prepare(c)
    return c


@pytest.fixture(scope="module")
def sasl_cluster(zookeeper, tmp_path_factory):
    c = make_sasl_cluster(tmp_path_factory.mktemp("sasl-cluster"), zookeeper)
    try:
        c.start()
        yield c
    finally:
        c.shutdown()


@pytest.fixture
def sc(request, sasl_cluster) -> Cluster:
    """The module's cluster, with its broker logs attached to this test's failure report."""
    for b in sasl_cluster.brokers.values():
        _track(request, b)
    return sasl_cluster


# ----------------------------------------------------------------------------- helpers

def conf(c: Cluster, broker_id: int, user_pw=ADMIN, mechanism="PLAIN") -> dict:
    return {"bootstrap.servers": c.sasl_addr(broker_id), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user_pw[0], "sasl.password": user_pw[1]}


def tool(c: Cluster, name: str, broker_id: int, *args, timeout=60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([str(REPO / "bin" / name), "--bootstrap-server", c.sasl_addr(broker_id),
                           "--command-config", c.admin_cfg, *args],
                          capture_output=True, text=True, env=env, timeout=timeout)


def create_topic(c: Cluster, broker_id: int, name: str, assignment=None, partitions=1, rf=3, configs=None):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient(conf(c, broker_id))
    nt = (NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment, config=configs or {})
          if assignment
          else NewTopic(name, partitions, rf, config=configs or {}))
    for f in a.create_topics([nt], operation_timeout=30).values():
        f.result(30)
    for p in range(len(assignment) if assignment else partitions):
        c.wait_for_leader(name, p, timeout=30)


def produce(c: Cluster, broker_id: int, user_pw, topic: str, acks="1") -> KafkaError | None:
    """One record through a producer bootstrapped at ``broker_id`` only: None or the error."""
    from confluent_kafka import Producer
    p = Producer({**conf(c, broker_id, user_pw), "acks": acks, "message.timeout.ms": 6000,
                  "topic.metadata.refresh.interval.ms": 500})
    out = []
    p.produce(topic, b"x", on_delivery=lambda e, m: out.append(e))
    p.flush(10)
    return out[0] if out else KafkaError(KafkaError._MSG_TIMED_OUT)


def login_error(c: Cluster, broker_id: int, user_pw, mechanism, timeout=5.0) -> str | None:
    """None when ``user_pw`` can authenticate at ``broker_id`` (a Metadata request succeeds), else
    the error text (returned as soon as the client reports an authentication failure)."""
    return sasl_login_error(conf(c, broker_id, user_pw, mechanism), timeout)


def until(cond, timeout=PROPAGATION_S, what="condition", interval=0.2):
    return Cluster.wait_for(cond, timeout, what, interval)


# ----------------------------------------------------------------------------- tests

def test_scram_user_created_through_one_broker_logs_in_at_another(sc):
    user, pw = "carol-" + uuid.uuid4().hex[:6], "carol-secret"
    assert login_error(sc, 2, (user, pw), "SCRAM-SHA-256") is not None
    r = tool(sc, "kafka-configs.sh", 1, "--alter", "--add-config",
             f"SCRAM-SHA-256=[iterations=4096,password={pw}],SCRAM-SHA-512=[password={pw}]",
             "--entity-type", "users", "--entity-name", user)
    assert r.returncode == 0, r.stderr
    # Kafka's layout: /config/users/<user> with one key per mechanism, plus a change notification
    node = sc.get_json(f"/config/users/{user}")
    assert node["version"] == 1
    assert set(node["config"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert node["config"]["SCRAM-SHA-256"].startswith("salt=") and "iterations=4096" in node["config"]["SCRAM-SHA-256"]
    changes = [sc.get_json(f"/config/changes/{ch}") for ch in sc.zk().get_children("/config/changes")]
    assert {"version": 2, "entity_path": f"users/{user}"} in changes
    # broker 2 and 3 learned it from the notification
    until(lambda: login_error(sc, 2, (user, pw), "SCRAM-SHA-256") is None, what="SCRAM-SHA-256 login at broker 2")
    until(lambda: login_error(sc, 3, (user, pw), "SCRAM-SHA-512") is None, what="SCRAM-SHA-512 login at broker 3")
    assert login_error(sc, 2, (user, "wrong"), "SCRAM-SHA-256") is not None
    # kafka-python too
    pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient
    a = KafkaAdminClient(bootstrap_servers=sc.sasl_addr(3), security_protocol="SASL_PLAINTEXT",
                         sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=user, sasl_plain_password=pw,
                         request_timeout_ms=10000)
    a.list_topics()
    a.close()
    # describe through broker 3 shows both; delete one through broker 3 -> refused at broker 2
    r = tool(sc, "kafka-configs.sh", 3, "--describe", "--entity-type", "users", "--entity-name", user)
    assert r.returncode == 0 and "SCRAM-SHA-256=iterations=4096" in r.stdout and "SCRAM-SHA-512=" in r.stdout, r
    r = tool(sc, "kafka-configs.sh", 3, "--alter", "--delete-config", "SCRAM-SHA-256",
             "--entity-type", "users", "--entity-name", user)
    assert r.returncode == 0, r.stderr
    until(lambda: login_error(sc, 2, (user, pw), "SCRAM-SHA-256") is not None,
          what="deleted SCRAM-SHA-256 credential refused at broker 2")
    assert login_error(sc, 2, (user, pw), "SCRAM-SHA-512") is None
    assert set(sc.get_json(f"/config/users/{user}")["config"]) == {"SCRAM-SHA-512"}


def test_scram_keeps_other_user_config_keys(sc):
    """A quota already in /config/users/<user> survives credential changes (and vice versa)."""
    user, pw = "quota-" + uuid.uuid4().hex[:6], "q-secret"
    sc.zk().create(f"/config/users/{user}", json.dumps(
        {"version": 1, "config": {"producer_byte_rate": "1048576"}}).encode())
    r = tool(sc, "kafka-configs.sh", 2, "--alter", "--add-config", f"SCRAM-SHA-512=[password={pw}]",
             "--entity-type", "users", "--entity-name", user)
    assert r.returncode == 0, r.stderr
    cfg = sc.get_json(f"/config/users/{user}")["config"]
    assert cfg["producer_byte_rate"] == "1048576" and "SCRAM-SHA-512" in cfg
    until(lambda: login_error(sc, 1, (user, pw), "SCRAM-SHA-512") is None, what="login at broker 1")


def test_acl_created_through_one_broker_is_enforced_by_another(sc):
    topic = "orders-" + uuid.uuid4().hex[:6]
    create_topic(sc, 1, topic, assignment=[[2, 3, 1]])     # broker 2 leads: it decides on Produce
    err = produce(sc, 2, ALICE, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    r = tool(sc, "kafka-acls.sh", 1, "--add", "--allow-principal", "User:alice", "--operation", "Write",
             "--operation", "Describe", "--topic", topic)
    assert r.returncode == 0, r.stderr
    node = sc.get_json(f"/kafka-acl/Topic/{topic}")
    assert node["version"] == 1
    assert sorted(node["acls"], key=lambda e: e["operation"]) == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe", "host": "*"},
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}]
    notes = [sc.zk().get(f"/kafka-acl-changes/{ch}")[0] for ch in sc.zk().get_children("/kafka-acl-changes")]
    assert f"Topic:{topic}".encode() in notes
    until(lambda: produce(sc, 2, ALICE, topic) is None, what="alice's write allowed by broker 2")
    err = produce(sc, 2, BOB, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # every broker lists it
    r = tool(sc, "kafka-acls.sh", 3, "--list", "--topic", topic)
    assert r.returncode == 0 and "principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW" in r.stdout
    # removed through broker 3: denied again at broker 2, and the znode is gone
    r = tool(sc, "kafka-acls.sh", 3, "--remove", "--force", "--allow-principal", "User:alice", "--operation",
             "Write", "--operation", "Describe", "--topic", topic)
    assert r.returncode == 0, r.stderr
    assert sc.zk().exists(f"/kafka-acl/Topic/{topic}") is None

    def denied():
        e = produce(sc, 2, ALICE, topic)
        return e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    until(denied, what="alice's write denied again by broker 2")


def test_prefixed_acl_through_one_broker_read_by_another(sc):
    prefix = "pay-" + uuid.uuid4().hex[:4] + "-"
    topic = prefix + "eu"
    create_topic(sc, 3, topic, assignment=[[1, 2, 3]])
    r = tool(sc, "kafka-acls.sh", 3, "--add", "--allow-principal", "User:bob", "--producer", "--topic", prefix,
             "--resource-pattern-type", "prefixed")
    assert r.returncode == 0, r.stderr
    node = sc.get_json(f"/kafka-acl-extended/prefixed/Topic/{prefix}")
    assert {"principal": "User:bob", "permissionType": "Allow", "operation": "Write", "host": "*"} in node["acls"]
    notes = [json.loads(sc.zk().get(f"/kafka-acl-extended-changes/{ch}")[0])
             for ch in sc.zk().get_children("/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "Topic", "name": prefix, "patternType": "PREFIXED"} in notes
    until(lambda: produce(sc, 1, BOB, topic) is None, what="bob's write allowed by broker 1 (prefixed ACL)")


def test_concurrent_acl_creates_through_two_brokers_both_survive(sc):
    topic = "shared-" + uuid.uuid4().hex[:6]
    users = [f"User:u{i}" for i in range(6)]
    results = {}

    def add(i, broker_id):
        results[i] = tool(sc, "kafka-acls.sh", broker_id, "--add", "--allow-principal", users[i],
                          "--operation", "Read", "--topic", topic)
    threads = [threading.Thread(target=add, args=(i, 1 + i % 2)) for i in range(len(users))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.returncode == 0 for r in results.values()), {i: r.stderr for i, r in results.items()}
    node = sc.get_json(f"/kafka-acl/Topic/{topic}")
    assert sorted(e["principal"] for e in node["acls"]) == sorted(users)

    def listed_everywhere():
        for b in (1, 2, 3):
            out = tool(sc, "kafka-acls.sh", b, "--list", "--topic", topic).stdout
            if any(f"principal={u}," not in out for u in users):
                return False
        return True
    until(listed_everywhere, what="all six ACLs known to every broker")


def test_rf3_topic_replicates_over_sasl_inter_broker_connections(sc):
    topic = "replicated-" + uuid.uuid4().hex[:6]
    create_topic(sc, 2, topic, partitions=3, rf=3, configs={"min.insync.replicas": "3"})
    from confluent_kafka import Producer
    p = Producer({**conf(sc, 1), "acks": "all", "message.timeout.ms": 20000})
    errors = []
    for i in range(300):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, on_delivery=lambda e, m: e and errors.append(e))
    assert p.flush(30) == 0
    assert not errors, errors[:3]
    for part in range(3):
        assert sorted(sc.wait_for_isr(topic, part, [1, 2, 3], timeout=30)) == [1, 2, 3]
    # the PLAINTEXT listener (User:ANONYMOUS) is not a way in
    from confluent_kafka import Producer as P2
    anon = P2({"bootstrap.servers": sc.brokers[1].bootstrap, "message.timeout.ms": 5000})
    out = []
    anon.produce(topic, b"x", on_delivery=lambda e, m: out.append(e))
    anon.flush(8)
    assert out and out[0] is not None
    # each broker says it authenticates its inter-broker connections
    for b in sc.brokers.values():
        assert "inter-broker connections on SASL_PLAINTEXT authenticate with SASL/PLAIN as admin" in \
            b.log_path.read_text(errors="replace")


@pytest.mark.slow
def _replicated_acks_all(c, prefix: str, n: int) -> str:
    """A topic led by broker 3 with followers 1 and 2; ``n`` records produced with acks=all through
    broker 1 are all acknowledged and the ISR is full.  Returns the topic."""
    topic = prefix + uuid.uuid4().hex[:6]
    create_topic(c, 1, topic, assignment=[[3, 1, 2]])
    from confluent_kafka import Producer
    p = Producer({**conf(c, 1), "acks": "all", "message.timeout.ms": 20000})
    errors = []
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, on_delivery=lambda e, m: e and errors.append(e))
    assert p.flush(30) == 0 and not errors, errors[:3]
    assert sorted(c.wait_for_isr(topic, 0, [1, 2, 3], timeout=30)) == [1, 2, 3]
    return topic


def test_scram_inter_broker_mechanism_and_restart_reloads(zookeeper, tmp_path, request):
    """sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512: the brokers' own credential is put into
    ZooKeeper before they start (as ``kafka-configs.sh --zookeeper`` does for Kafka); a restarted
    broker loads the ACLs and credentials that exist."""
    from protocol import scram as S

    def prepare(c):
        cred = S.Credential.from_password("SCRAM-SHA-512", "admin-secret", 4096).to_config()
        zk = c.zk()
        zk.ensure_path("/config/users")
        zk.create("/config/users/admin", json.dumps({"version": 1, "config": {"SCRAM-SHA-512": cred}}).encode())

    c = make_sasl_cluster(tmp_path / "scram-cluster", zookeeper,
                          props={"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}, prepare=prepare)
    for b in c.brokers.values():
        _track(request, b)
    try:
        c.start()
        topic = _replicated_acks_all(c, "scram-ib-", 50)
        assert "authenticate with SASL/SCRAM-SHA-512 as admin" in c.brokers[2].log_path.read_text(errors="replace")
        # an ACL and a SCRAM user made while broker 3 is down are there when it comes back
        c.stop(3)
        r = tool(c, "kafka-acls.sh", 1, "--add", "--allow-principal", "User:alice", "--operation", "Write",
                 "--topic", topic)
        assert r.returncode == 0, r.stderr
        r = tool(c, "kafka-configs.sh", 2, "--alter", "--add-config", "SCRAM-SHA-256=[password=dave-secret]",
                 "--entity-type", "users", "--entity-name", "dave")
        assert r.returncode == 0, r.stderr
        c.start_broker(3)
        c.wait_for_isr(topic, 0, [1, 2, 3], timeout=60)
        r = tool(c, "kafka-acls.sh", 3, "--list", "--topic", topic)
        assert r.returncode == 0 and "principal=User:alice, host=*, operation=WRITE" in r.stdout, r
        assert login_error(c, 3, ("dave", "dave-secret"), "SCRAM-SHA-256") is None
    finally:
        c.shutdown()


def test_oauthbearer_inter_broker_unsecured_login(zookeeper, tmp_path, request):
    """sasl.mechanism.inter.broker.protocol=OAUTHBEARER with Kafka's unsecured login options: the
    brokers replicate and the controller reaches them with unsigned tokens naming User:admin."""
    oauth_jaas = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                  'unsecuredLoginStringClaim_sub="admin" unsecuredLoginLifetimeSeconds="600";')
    c = make_sasl_cluster(tmp_path / "oauth-cluster", zookeeper,
                          props={"sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
                                 "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
                                 "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": oauth_jaas})
    for b in c.brokers.values():
        _track(request, b)
    try:
        c.start()
        _replicated_acks_all(c, "oauth-ib-", 20)
        assert "authenticate with SASL/OAUTHBEARER as admin" in c.brokers[2].log_path.read_text(errors="replace")
    finally:
        c.shutdown()


def test_delegation_token_through_one_broker_used_at_another(sc):
    """A token created through broker 1 is stored where Kafka keeps it in ZooKeeper, announced with
    a token_change notification, described at broker 2, logs in at broker 3 (project client: the
    Python clients cannot send SCRAM's tokenauth), and once expired through broker 2 is refused
    at broker 3."""
    import asyncio
    import base64

    from protocol.client import AuthenticationError, KafkaClientConnection, SaslSettings
    from protocol.messages import (CreateDelegationTokenRequest, DescribeDelegationTokenRequest,
                                   ExpireDelegationTokenRequest, MetadataRequest)

    async def ask(broker_id, request, sasl):
        host, port = sc.sasl_addr(broker_id).rsplit(":", 1)
        conn = await KafkaClientConnection.connect(host, int(port))
        try:
            await conn.negotiate()
            await conn.authenticate(sasl)
            return await conn.send(request) if request is not None else None
        finally:
            await conn.close()

    admin = SaslSettings("PLAIN", *ADMIN)
    R = CreateDelegationTokenRequest
    resp = asyncio.run(ask(1, R(renewers=[R.CreatableRenewers(principal_type="User", principal_name="bob")],
                                max_lifetime_ms=-1), admin))
    assert resp.error_code == 0, resp
    tid, mac = resp.token_id, bytes(resp.hmac)
    node = sc.get_json(f"/delegation_token/tokens/{tid}")
    assert node == {"version": 3, "owner": "User%3Aadmin", "tokenRequester": "User%3Aadmin",
                    "renewers": ["User%3Abob"], "issueTimestamp": resp.issue_timestamp_ms,
                    "maxTimestamp": resp.max_timestamp_ms, "expiryTimestamp": resp.expiry_timestamp_ms, "tokenId": tid}
    zk = sc.zk()
    changes = [zk.get(f"/delegation_token/token_changes/{c}")[0] for c in
               zk.get_children("/delegation_token/token_changes")]
    assert tid.encode() in changes

    def described_at_2():
        d = asyncio.run(ask(2, DescribeDelegationTokenRequest(owners=None), admin))
        return d.error_code == 0 and tid in [t.token_id for t in d.tokens]
    until(described_at_2, what="token described at broker 2")
    token_login = SaslSettings("SCRAM-SHA-512", tid, base64.b64encode(mac).decode(), extensions={"tokenauth": "true"})

    def login_at_3():
        try:
            asyncio.run(ask(3, MetadataRequest(topics=None), token_login))
            return True
        except AuthenticationError:
            return False
    until(login_at_3, what="token login at broker 3")
    r = asyncio.run(ask(2, ExpireDelegationTokenRequest(hmac=mac, expiry_time_period_ms=-1), admin))
    assert r.error_code == 0
    until(lambda: not login_at_3(), what="expired token refused at broker 3")
    assert not zk.exists(f"/delegation_token/tokens/{tid}")

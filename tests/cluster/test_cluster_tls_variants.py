"""Inter-broker TLS variants in a 3-broker ZooKeeper cluster (real broker processes), beyond
the PEM-file set-up of test_cluster_tls.py:

* key and trust stores as password-protected PKCS12 files, and as inline PEM
  (``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``, ``ssl.truststore.certificates``),
  used by each listener and by the broker's own connections to the others;
* ``ssl.endpoint.identification.algorithm``: with the default (https) a broker whose certificate
  does not name its advertised host is refused by the others; with the value empty it is accepted;
* SCRAM-SHA-256 / SCRAM-SHA-512 as ``sasl.mechanism.inter.broker.protocol`` over SASL_SSL, the
  brokers' credential written to ZooKeeper before they start;
* certificate principals with ``ssl.client.auth=required`` and the ACL authorizer: the brokers
  are ``User:CN=brokerN,OU=brokers,O=Odradek Tests`` to each other; listed in ``super.users``
  they replicate, a broker left out is refused (its fetches get TOPIC_AUTHORIZATION_FAILED) and
  stays out of the ISR until a CLUSTER_ACTION ACL names it; ``ssl.principal.mapping.rules``
  turns the subjects into short names.

What is checked is what a user sees: the ISR in ZooKeeper and through a client's Metadata,
acks=all writes with ``min.insync.replicas=3`` succeeding (or refused with NOT_ENOUGH_REPLICAS),
records read back, a follower that becomes leader serving the data.
"""
from __future__ import annotations

import json
import uuid

import pytest

from tests.cluster.test_cluster_tls import consume, create_topic, produce
from tests.support.cluster import Cluster
from tests.support.net import LOOPBACK
from tests.support.pki import Pki, issue, make_pki, pkcs12_truststore
from tests.support.sasl import ADMIN

ck = pytest.importorskip("confluent_kafka")
pytest.importorskip("cryptography")

PW = "store-secret"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("variants-pki"))


@pytest.fixture(scope="module")
def certs(pki):
    """Per-broker certificates (``CN=brokerN,OU=brokers``, SAN localhost/127.0.0.1) and one for
    broker 3 whose SAN names another host only."""
    out = {i: issue(pki, f"broker{i}", f"broker{i}", ou="brokers", password=PW) for i in (1, 2, 3)}
    out["wrong-host"] = issue(pki, "broker3-wrong-host", "broker3", ou="brokers", sans=("broker3.invalid",),
                              password=PW)
    return out


def make_cluster(cluster_factory, listener: str, props: dict, per_broker: dict | None = None) -> Cluster:
    """A 3-broker cluster (not started) with a PLAINTEXT listener for the harness's probe and
    ``listener`` for everything else; ``props`` for all, ``per_broker`` = {id: props}."""
    base = {"listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{listener}:{listener}"}
    if "security.inter.broker.protocol" not in props:
        base["inter.broker.listener.name"] = listener
    c = cluster_factory(3, start=False, props={**base, **props})
    c.secure_ports, c.listener = c.add_listener(listener), listener
    for i, b in c.brokers.items():
        b.props.update({k: str(v) for k, v in (per_broker or {}).get(i, {}).items()})
    return c


def start_with_controller(c: Cluster, controller: int = 1) -> None:
    """Start ``controller`` first and let it take the controller role, then the others."""
    c.start([controller])
    Cluster.wait_for(lambda: c.controller_id() == controller, 30, f"broker {controller} controller")
    c.start([i for i in c.brokers if i != controller])


def conf(c: Cluster, pki: Pki, ids=(1, 2, 3), **extra) -> dict:
    out = {"bootstrap.servers": ",".join(f"{LOOPBACK}:{c.secure_ports[i]}" for i in ids),
           "security.protocol": c.listener, "ssl.ca.location": str(pki.ca),
           "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
    if c.listener == "SASL_SSL":
        out.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ADMIN[0], "sasl.password": ADMIN[1]})
    out.update(extra)
    return out


def metadata_isr(cf: dict, topic: str, partition: int = 0) -> list[int]:
    """The ISR as a client sees it (Metadata request through confluent-kafka's AdminClient)."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient(cf).list_topics(topic, timeout=10)
    return sorted(md.topics[topic].partitions[partition].isrs)


def replicates(c: Cluster, cf: dict, *, partitions: int = 3, n: int = 200, assignment=None) -> str:
    """An RF=3 topic with min.insync.replicas=3 takes acks=all writes, keeps the full ISR (in
    ZooKeeper and in Metadata) and gives the records back."""
    topic = "v-" + uuid.uuid4().hex[:6]
    create_topic(c, cf, topic, partitions=partitions, assignment=assignment, configs={"min.insync.replicas": "3"})
    errors = produce(cf, topic, n)
    assert not errors, errors[:3]
    for p in range(len(assignment) if assignment else partitions):
        assert sorted(c.wait_for_isr(topic, p, [1, 2, 3], timeout=30)) == [1, 2, 3]
        assert metadata_isr(cf, topic, p) == [1, 2, 3]
    got = consume(cf, topic, n)
    assert sorted(got) == sorted(b"v%d" % i for i in range(n)), (len(got), consume.errors[:5])
    return topic


def log_text(c: Cluster, i: int) -> str:
    return c.brokers[i].log_path.read_text(errors="replace")


def acks_all_error(cf: dict, topic: str):
    from confluent_kafka import Producer
    p = Producer({**cf, "acks": "all", "message.timeout.ms": 6000, "retries": 0})
    out = []
    p.produce(topic, b"x", on_delivery=lambda e, m: out.append(e))
    p.flush(10)
    return out[0] if out else "no delivery report"


def raise_min_isr(cf: dict, topic: str, value: str) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.insync.replicas", value, incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient(cf)              # kept referenced until the futures are done
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)


def _continued(pem: str) -> str:
    """PEM text as a properties value continued over lines (``\\`` at each line end), the way
    Kafka's documentation writes inline PEM; read back it is one line with spaces."""
    return " \\\n    ".join(pem.strip().splitlines())


def _escaped(pem: str) -> str:
    """PEM text as a one-line properties value with ``\\n`` escapes."""
    return pem.strip().replace("\n", "\\n")


# ----------------------------------------------------------------------------- 1. store formats

def test_pkcs12_key_and_trust_stores_between_brokers(cluster_factory, pki, certs):
    """Every broker's listener and inter-broker client use a PKCS12 key store and a PKCS12 trust
    store (both password-protected), with client certificates required."""
    trust = pkcs12_truststore(pki, PW)
    c = make_cluster(cluster_factory, "SSL", {
        "ssl.client.auth": "required", "ssl.keystore.type": "PKCS12", "ssl.keystore.password": PW,
        "ssl.key.password": PW, "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(trust),
        "ssl.truststore.password": PW,
    }, {i: {"ssl.keystore.location": str(certs[i].p12)} for i in (1, 2, 3)})
    c.start()
    replicates(c, conf(c, pki))
    for i in (1, 2, 3):
        text = log_text(c, i)
        assert "inter-broker connections on SSL use TLS (host name check on)" in text
        assert "TLS handshake failed" not in text


def test_inline_pem_key_and_trust_stores_between_brokers(cluster_factory, pki, certs):
    """``ssl.keystore.type=PEM`` with the chain and key inline (continued lines, ``\\n``
    escapes, an encrypted key with ``ssl.key.password`` on broker 2) and the CA inline in
    ``listener.name.ssl.ssl.truststore.certificates``."""
    from cryptography.hazmat.primitives import serialization
    per = {}
    for i in (1, 2, 3):
        key_text = certs[i].key.read_text()
        p = {"ssl.keystore.certificate.chain": _continued(certs[i].chain.read_text())}
        if i == 2:
            key = serialization.load_pem_private_key(key_text.encode(), None)
            key_text = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.BestAvailableEncryption(b"key-secret")).decode()
            p["ssl.key.password"] = "key-secret"
        p["ssl.keystore.key"] = _escaped(key_text) if i != 3 else _continued(key_text)
        per[i] = p
    c = make_cluster(cluster_factory, "SSL", {
        "ssl.client.auth": "required", "ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.truststore.certificates": _continued(pki.ca.read_text()),
    }, per)
    c.start()
    replicates(c, conf(c, pki))
    for i in (1, 2, 3):
        assert "TLS handshake failed" not in log_text(c, i)


# ----------------------------------------------------------------------------- 2. host name checks

def test_certificate_not_naming_the_host_is_refused_between_brokers_by_default(cluster_factory, pki, certs):
    """Broker 3's certificate names ``broker3.invalid`` only, but it is advertised as 127.0.0.1:
    with Kafka's default ``ssl.endpoint.identification.algorithm=https`` the controller's channel
    to it fails the handshake, so it never learns to follow and leaves the ISR; acks=all with
    min.insync.replicas=3 is then refused."""
    c = make_cluster(cluster_factory, "SSL", {"ssl.client.auth": "required", "ssl.truststore.location": str(pki.ca)},
                     {1: {"ssl.keystore.location": str(certs[1].pem)},
                      2: {"ssl.keystore.location": str(certs[2].pem)},
                      3: {"ssl.keystore.location": str(certs["wrong-host"].pem)}})
    start_with_controller(c, 1)
    cf = conf(c, pki, ids=(1, 2))
    topic = "hostcheck-" + uuid.uuid4().hex[:6]
    create_topic(c, cf, topic, assignment=[[1, 2, 3]], configs={"min.insync.replicas": "2"})
    assert not produce(cf, topic, 20)
    Cluster.wait_for(lambda: sorted(c.isr(topic, 0)) == [1, 2], 30, "broker 3 out of the ISR")
    assert metadata_isr(cf, topic) == [1, 2]
    text = log_text(c, 1)
    assert "controller channel to broker 3" in text and "TLS handshake failed" in text, text[-3000:]
    assert "mismatch, certificate is not valid for '127.0.0.1'" in text
    raise_min_isr(cf, topic, "3")
    err = acks_all_error(cf, topic)
    assert err is not None and err.code() in (ck.KafkaError.NOT_ENOUGH_REPLICAS,
                                              ck.KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND), err


def test_host_name_check_off_accepts_the_certificate_and_a_follower_takes_over(cluster_factory, pki, certs):
    """The same certificates with ``ssl.endpoint.identification.algorithm=`` (empty) on every
    broker: broker 3 leads a min.insync.replicas=3 partition that takes acks=all writes; killed,
    a follower (which fetched over the unchecked connection) leads and serves every record."""
    c = make_cluster(cluster_factory, "SSL", {"ssl.client.auth": "required", "ssl.truststore.location": str(pki.ca),
                                              "ssl.endpoint.identification.algorithm": ""},
                     {1: {"ssl.keystore.location": str(certs[1].pem)},
                      2: {"ssl.keystore.location": str(certs[2].pem)},
                      3: {"ssl.keystore.location": str(certs["wrong-host"].pem)}})
    start_with_controller(c, 1)
    cf = conf(c, pki, **{"ssl.endpoint.identification.algorithm": "none"})
    topic = replicates(c, cf, n=100, assignment=[[3, 1, 2]])
    assert c.leader(topic, 0) == 3
    for i in (1, 2, 3):
        text = log_text(c, i)
        assert "inter-broker connections on SSL use TLS (host name check off)" in text
        assert "TLS handshake failed" not in text
    c.kill(3)
    assert c.wait_for_leader(topic, 0, not_in={3}, timeout=30) in (1, 2)
    got = consume(conf(c, pki, ids=(1, 2), **{"ssl.endpoint.identification.algorithm": "none"}), topic, 100)
    assert sorted(got) == sorted(b"v%d" % i for i in range(100)), (len(got), consume.errors[:5])


# ----------------------------------------------------------------------------- 3. SCRAM over SASL_SSL

@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_inter_broker_mechanism_over_sasl_ssl(cluster_factory, pki, mechanism):
    """Only SCRAM is enabled; the brokers authenticate to each other with ``mechanism`` as
    ``admin``, whose credentials are written to ``/config/users/admin`` before any broker starts
    (what ``kafka-configs.sh --zookeeper`` does for Kafka)."""
    from protocol import scram as S
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{ADMIN[0]}" password="{ADMIN[1]}";')
    c = make_cluster(cluster_factory, "SASL_SSL", {
        "security.inter.broker.protocol": "SASL_SSL",
        "ssl.keystore.location": str(pki.broker), "ssl.truststore.location": str(pki.ca),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": mechanism,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    })
    creds = {m: S.Credential.from_password(m, ADMIN[1], 4096).to_config() for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
    zk = c.zk()
    zk.ensure_path("/config/users")
    zk.create("/config/users/admin", json.dumps({"version": 1, "config": creds}).encode())
    c.start()
    replicates(c, conf(c, pki, **{"sasl.mechanism": mechanism}))
    for i in (1, 2, 3):
        text = log_text(c, i)
        assert f"inter-broker connections on SASL_SSL authenticate with SASL/{mechanism} as admin" in text
        assert "use TLS (host name check on)" in text


# ----------------------------------------------------------------------------- 4. certificate principals

def _principal_props(pki: Pki, certs, super_users: list[str], **extra) -> tuple[dict, dict]:
    props = {"ssl.client.auth": "required", "ssl.truststore.location": str(pki.ca),
             "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
             "super.users": ";".join(super_users), **extra}
    return props, {i: {"ssl.keystore.location": str(certs[i].pem)} for i in (1, 2, 3)}


def test_broker_certificate_subjects_in_super_users_replicate(cluster_factory, pki, certs):
    """The brokers are ``User:CN=brokerN,OU=brokers,O=Odradek Tests`` to each other (the full
    subject, RFC 2253 order); with those in super.users replication and the controller's channels
    pass the authorizer."""
    brokers = [f"User:{certs[i].subject}" for i in (1, 2, 3)]
    assert brokers[0] == "User:CN=broker1,OU=brokers,O=Odradek Tests"
    props, per = _principal_props(pki, certs, brokers + [f"User:{pki.client_subject}"])
    c = make_cluster(cluster_factory, "SSL", props, per)
    c.start()
    replicates(c, conf(c, pki))
    for i in (1, 2, 3):
        assert "super users: User:CN=broker1,OU=brokers,O=Odradek Tests" in log_text(c, i)


def test_broker_left_out_of_super_users_is_refused_replication_until_granted_cluster_action(
        cluster_factory, pki, certs):
    """Broker 3's subject is not a super user: the leader answers its fetches
    TOPIC_AUTHORIZATION_FAILED (it lacks CLUSTER_ACTION), so it leaves the ISR and acks=all with
    min.insync.replicas=3 is refused; an ACL allowing its subject ClusterAction on the cluster lets
    it catch up and rejoin."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)
    props, per = _principal_props(pki, certs, [f"User:{certs[i].subject}" for i in (1, 2)]
                                  + [f"User:{pki.client_subject}"])
    c = make_cluster(cluster_factory, "SSL", props, per)
    start_with_controller(c, 1)       # the controller's own requests must pass the others' authorizer
    cf = conf(c, pki)
    topic = "denied-" + uuid.uuid4().hex[:6]
    create_topic(c, cf, topic, assignment=[[1, 2, 3]], configs={"min.insync.replicas": "2"})
    assert not produce(cf, topic, 20)
    Cluster.wait_for(lambda: sorted(c.isr(topic, 0)) == [1, 2], 30, "broker 3 out of the ISR")
    assert metadata_isr(cf, topic) == [1, 2]
    assert "fetch from leader 1 failed with error 29 (TOPIC_AUTHORIZATION_FAILED)" in log_text(c, 3)
    raise_min_isr(cf, topic, "3")
    err = acks_all_error(cf, topic)
    assert err is not None and err.code() in (ck.KafkaError.NOT_ENOUGH_REPLICAS,
                                              ck.KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND), err

    admin = AdminClient(cf)
    acl = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                     f"User:{certs[3].subject}", "*", AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW)
    for f in admin.create_acls([acl]).values():
        f.result(30)
    assert sorted(c.wait_for_isr(topic, 0, [1, 2, 3], timeout=30)) == [1, 2, 3]
    assert not produce(cf, topic, 20)                   # min.insync.replicas=3 met again
    got = consume(cf, topic, 40)
    assert len(got) == 40, consume.errors[:5]


def test_principal_mapping_rules_give_brokers_short_names(cluster_factory, pki, certs):
    """``ssl.principal.mapping.rules`` maps ``CN=brokerN,OU=brokers,...`` to ``brokerN`` (other
    subjects keep the DEFAULT form): ``super.users=User:broker1;User:broker2;User:broker3`` (and the
    test client's full subject) is then what lets them replicate."""
    props, per = _principal_props(
        pki, certs, ["User:broker1", "User:broker2", "User:broker3", f"User:{pki.client_subject}"],
        **{"ssl.principal.mapping.rules": "RULE:^CN=([a-z0-9]+),OU=brokers,O=.*$/$1/L,DEFAULT"})
    c = make_cluster(cluster_factory, "SSL", props, per)
    c.start()
    replicates(c, conf(c, pki))

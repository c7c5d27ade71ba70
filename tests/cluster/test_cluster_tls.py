"""TLS between brokers in a ZooKeeper cluster: three brokers whose inter-broker listener is SSL
(``ssl.client.auth=required``: each broker presents its certificate to the others) or SASL_SSL
(PLAIN, the ACL authorizer and ``super.users=User:admin``), with certificates from a throwaway CA
(tests/support/pki.py).  An RF=3 topic with ``min.insync.replicas=3`` takes acks=all writes from
confluent-kafka over the secure listener and keeps all three brokers in the ISR, so the follower
fetches (and the controller's channels) work over TLS; a consumer reads the records back.

The negative check: a broker whose trust store holds another CA cannot verify the leaders'
certificates, so its fetchers fail the TLS handshake (logged) and it drops out of the ISR; the
positive tests therefore cannot pass without TLS being used and verified between brokers.

Each broker also has a PLAINTEXT listener, used only by the harness's readiness probe.
"""
from __future__ import annotations

import time
import uuid

import pytest

from tests.support.cluster import Cluster
from tests.support.net import LOOPBACK
from tests.support.pki import Pki, make_pki
from tests.support.sasl import ADMIN, ALICE, jaas_config

ck = pytest.importorskip("confluent_kafka")
pytest.importorskip("cryptography")



@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("cluster-pki"))


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory) -> Pki:
    """A second, unrelated CA (with its own broker certificate)."""
    return make_pki(tmp_path_factory.mktemp("other-pki"), ca_name="Some Other CA")


def tls_props(pki: Pki, listener: str) -> dict[str, str]:
    p = {
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{listener}:{listener}",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker),
        "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "required",
    }
    if listener == "SSL":
        p["inter.broker.listener.name"] = "SSL"
    else:
        p.update({
            "security.inter.broker.protocol": "SASL_SSL",       # the other way of naming it
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_config(users=(ADMIN, ALICE)),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
        })
    return p


def make_tls_cluster(cluster_factory, pki: Pki, listener: str, broker_props=None) -> Cluster:
    """A 3-broker cluster (not started): PLAINTEXT (probe) + ``listener`` (everything else);
    ``broker_props`` = {broker id: overrides}."""
    c = cluster_factory(3, start=False, props=tls_props(pki, listener))
    c.secure_ports = c.add_listener(listener)
    for i, b in c.brokers.items():
        b.props.update((broker_props or {}).get(i, {}))
    c.listener = listener
    return c


def client_conf(c: Cluster, pki: Pki, ids=(1, 2, 3)) -> dict:
    conf = {"bootstrap.servers": ",".join(f"{LOOPBACK}:{c.secure_ports[i]}" for i in ids),
            "security.protocol": c.listener, "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
    if c.listener == "SASL_SSL":
        conf.update({"sasl.mechanism": "PLAIN", "sasl.username": ADMIN[0], "sasl.password": ADMIN[1]})
    return conf


def create_topic(c: Cluster, conf: dict, name: str, *, partitions=1, assignment=None, configs=None):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient(conf)
    nt = (NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment, config=configs or {})
          if assignment else NewTopic(name, partitions, 3, config=configs or {}))
    for f in a.create_topics([nt], operation_timeout=30).values():
        f.result(30)
    for p in range(len(assignment) if assignment else partitions):
        c.wait_for_leader(name, p, timeout=30)


def produce(conf: dict, topic: str, n: int) -> list:
    from confluent_kafka import Producer
    p = Producer({**conf, "acks": "all", "message.timeout.ms": 20000})
    errors = []
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, on_delivery=lambda e, m: e and errors.append(e))
    assert p.flush(30) == 0
    return errors


def consume(conf: dict, topic: str, n: int, timeout=30.0) -> list[bytes]:
    import time
    from confluent_kafka import Consumer
    cons = Consumer({**conf, "group.id": "g-" + uuid.uuid4().hex[:6], "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    cons.subscribe([topic])
    got, errors = [], []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            elif m is not None:
                errors.append(m.error())
    finally:
        cons.close()
    consume.errors = errors
    return got


def check_replication_over_tls(c: Cluster, pki: Pki):
    conf = client_conf(c, pki)
    topic = "tls-" + uuid.uuid4().hex[:6]
    create_topic(c, conf, topic, partitions=3, configs={"min.insync.replicas": "3"})
    errors = produce(conf, topic, 300)
    assert not errors, errors[:3]
    for part in range(3):
        assert sorted(c.wait_for_isr(topic, part, [1, 2, 3], timeout=30)) == [1, 2, 3]
    got = consume(conf, topic, 300)
    assert sorted(got) == sorted(b"v%d" % i for i in range(300)), (len(got), consume.errors[:5])
    for b in c.brokers.values():
        text = b.log_path.read_text(errors="replace")
        assert f"inter-broker connections on {c.listener} use TLS (host name check on)" in text
        assert "TLS handshake failed" not in text
    return topic


# ----------------------------------------------------------------------------- tests

def test_rf3_topic_replicates_over_ssl_inter_broker_listener_with_client_auth(cluster_factory, pki):
    c = make_tls_cluster(cluster_factory, pki, "SSL")
    c.start()
    check_replication_over_tls(c, pki)


def test_rf3_topic_replicates_over_sasl_ssl_inter_broker_listener(cluster_factory, pki):
    c = make_tls_cluster(cluster_factory, pki, "SASL_SSL")
    c.start()
    topic = check_replication_over_tls(c, pki)
    for b in c.brokers.values():
        assert "inter-broker connections on SASL_SSL authenticate with SASL/PLAIN as admin" in \
            b.log_path.read_text(errors="replace")
    # the authorizer is on: alice (no ACLs) may not write; the PLAINTEXT listener is no way in either
    from confluent_kafka import KafkaError, Producer
    for conf in ({**client_conf(c, pki, ids=(1,)), "sasl.username": ALICE[0], "sasl.password": ALICE[1]},
                 {"bootstrap.servers": c.brokers[1].bootstrap}):
        out = []
        p = Producer({**conf, "message.timeout.ms": 5000})
        p.produce(topic, b"x", on_delivery=lambda e, m: out.append(e))
        p.flush(8)
        assert out and out[0] is not None, conf
        if "sasl.username" in conf:
            assert out[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, out[0]


def test_broker_not_trusting_the_ca_cannot_follow_over_tls(cluster_factory, pki, other_pki):
    """Broker 3 trusts only another CA (and does not ask for client certificates, so the
    controller can still reach it): its fetchers cannot verify the leader's certificate, it never
    catches up and leaves the ISR, and its log says why."""
    c = make_tls_cluster(cluster_factory, pki, "SSL", broker_props={
        3: {"ssl.truststore.location": str(other_pki.ca), "ssl.client.auth": "none"}})
    c.start([1, 2])
    c.start_broker(3)
    conf = client_conf(c, pki, ids=(1, 2))
    topic = "untrusted-" + uuid.uuid4().hex[:6]
    create_topic(c, conf, topic, assignment=[[1, 2, 3]], configs={"min.insync.replicas": "2"})
    errors = produce(conf, topic, 20)
    assert not errors, errors[:3]
    Cluster.wait_for(lambda: sorted(c.isr(topic, 0)) == [1, 2], 30, "broker 3 out of the ISR")
    text = c.brokers[3].log_path.read_text(errors="replace")
    assert "fetcher for leader 1" in text and "TLS handshake failed" in text, text[-3000:]
    assert "CERTIFICATE_VERIFY_FAILED" in text
    # min.insync.replicas=3 is then not met: acks=all writes are refused, not silently accepted
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    a = AdminClient(conf)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET)])
    for f in a.incremental_alter_configs([res]).values():
        f.result(30)
    from confluent_kafka import KafkaError, Producer
    p = Producer({**conf, "acks": "all", "message.timeout.ms": 8000, "retries": 0})
    # The leader learns the new topic config from ZooKeeper's change notification, after
    # AlterConfigs has returned (as in Kafka): a write just before that may still be accepted.
    refused = (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, KafkaError._MSG_TIMED_OUT)
    out = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (out and out[-1] is not None):
        p.produce(topic, b"x", on_delivery=lambda e, m: out.append(e))
        p.flush(12)
        time.sleep(0.2)
    assert out and out[-1] is not None and out[-1].code() in refused, out
    assert sorted(c.isr(topic, 0)) == [1, 2]


def test_an_engine_factory_makes_the_inter_broker_contexts(cluster_factory, pki, tmp_path):
    """ssl.engine.factory.class (a Python class, tests/security/engine_factories.py) on every
    broker: it makes the SSL listener's server context and the brokers' client contexts for
    replication and the controller's channels (its client context checks host names and presents
    the broker's certificate, as ssl.client.auth=required wants)."""
    record = tmp_path / "engine.jsonl"
    c = make_tls_cluster(cluster_factory, pki, "SSL")
    for b in c.brokers.values():
        b.props.update({"ssl.engine.factory.class": "tests.security.engine_factories.PemEngineFactory",
                        "odradek.test.engine.record": str(record)})
    c.start()
    check_replication_over_tls(c, pki)
    import json
    kinds = [json.loads(x)["kind"] for x in record.read_text().splitlines()]
    assert kinds.count("server") >= 3 and kinds.count("client") >= 3, kinds

"""``principal.builder.class`` (broker/security/builder.py) with unmodified clients: a Python
builder names the principal of SASL, TLS and plaintext connections, the authorizer decides with
it, it sees each connection's protocol, listener, address, certificate and SASL identity; a
builder that fails closes the connection (logged); one that cannot be imported stops start-up."""
from __future__ import annotations

import json
import uuid

import pytest

from tests.security.test_auth import _produce_consume, _sasl
from tests.support.sasl import ALICE, BOB

ck = pytest.importorskip("confluent_kafka")
BUILDERS = "tests.security.principal_builders"
ACLS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "false"}


def test_builder_names_the_principals_the_authorizer_sees(secure_broker, pki, tmp_path):
    record = tmp_path / "contexts.jsonl"
    b = secure_broker(listeners=("SSL", "SASL_PLAINTEXT"), client_auth="required", props={
        **ACLS, "principal.builder.class": f"{BUILDERS}.Recording",
        "principal.builder.test.record": str(record),
        "super.users": "User:svc-alice;User:svc-client1"})
    sasl = {"bootstrap.servers": b.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT"}
    # alice's principal is User:svc-alice, a super user; bob's (User:svc-bob) may do nothing
    assert _produce_consume({**sasl, **_sasl("PLAIN", *ALICE)}, "built", 2) == [b"v0", b"v1"]
    from confluent_kafka.admin import AdminClient
    md = AdminClient({**sasl, **_sasl("PLAIN", *BOB)}).list_topics(timeout=10)
    assert "built" not in md.topics         # not authorized to describe it
    # the client certificate: User:svc-client1
    tls = {"bootstrap.servers": b.addr("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
           "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
    assert _produce_consume(tls, "built-tls", 1) == [b"v0"]
    seen = [json.loads(line) for line in record.read_text().splitlines()]
    plain = [s for s in seen if s["protocol"] == "PLAINTEXT"]
    sasl_seen = [s for s in seen if s["protocol"] == "SASL_PLAINTEXT"]
    ssl_seen = [s for s in seen if s["protocol"] == "SSL"]
    assert plain and all(s["listener"] == "PLAINTEXT" and not s["cert"] and s["mechanism"] is None
                         for s in plain)        # the readiness probe's connections
    assert {s["authorization_id"] for s in sasl_seen} == {"alice", "bob"}
    assert all(s["mechanism"] == "PLAIN" and s["listener"] == "SASL_PLAINTEXT" for s in sasl_seen)
    assert ssl_seen and all(s["cert"] and s["subject"] == pki.client_subject for s in ssl_seen)
    assert all(s["address"] == "127.0.0.1" for s in seen)


def test_a_principal_object_is_accepted(secure_broker):
    b = secure_broker(listeners=("SASL_PLAINTEXT",), props={
        **ACLS, "listener.name.sasl_plaintext.principal.builder.class": f"{BUILDERS}.Typed",
        "super.users": "Service:alice"})
    conf = {"bootstrap.servers": b.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            **_sasl("PLAIN", *ALICE)}
    # only the principal Service:alice is a super user: User:alice would be refused
    assert _produce_consume(conf, "typed-" + uuid.uuid4().hex[:4], 1) == [b"v0"]


def test_failing_builder_fails_authentication(secure_broker, pki):
    b = secure_broker(listeners=("SSL", "SASL_PLAINTEXT"), client_auth="required", props={
        "listener.name.sasl_plaintext.principal.builder.class": f"{BUILDERS}.Failing",
        "listener.name.ssl.principal.builder.class": f"{BUILDERS}.Failing"})
    from confluent_kafka.admin import AdminClient
    for conf in ({"bootstrap.servers": b.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                  **_sasl("PLAIN", *ALICE)},
                 {"bootstrap.servers": b.addr("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
                  "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}):
        with pytest.raises(ck.KafkaException):
            AdminClient({**conf, "socket.timeout.ms": 3000}).list_topics(timeout=3)
    log = b.proc.log_path.read_text(errors="replace")
    assert "principal.builder.class: Failing.build failed: RuntimeError: no principal for 127.0.0.1" in log
    # the plaintext listener keeps Kafka's default builder
    assert AdminClient({"bootstrap.servers": b.plaintext}).list_topics(timeout=10) is not None


def test_unknown_builder_class_stops_start_up(tmp_path):
    from tests.support import BrokerProcess
    b = BrokerProcess(tmp_path / "b", name="bad-builder",
                      props={"principal.builder.class": f"{BUILDERS}.NoSuchBuilder"})
    with pytest.raises(Exception):
        b.start()
    b.stop()
    assert f"Class {BUILDERS}.NoSuchBuilder cannot be found" in b.log_text()

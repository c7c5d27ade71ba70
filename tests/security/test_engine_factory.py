"""``ssl.engine.factory.class`` as a Python class (broker/security/tls.py, Kafka's
SslEngineFactory): it makes a TLS listener's context, which confluent-kafka uses, and the
context of the broker's own connections to an SSL inter-broker listener (a two-broker cluster
replicates through it); a dynamic key store update asks its should_be_rebuilt and a new factory
replaces the old, which is closed; a factory that is missing, lacks a method or makes the wrong
kind of context stops start-up with the reason."""
from __future__ import annotations

import json
import ssl
import uuid

import pytest

from tests.security.test_auth import _produce_consume
from tests.security.test_ssl_reload import alter, serial_of, served_serial
from tests.support.pki import issue

pytest.importorskip("confluent_kafka")
pytest.importorskip("cryptography")
FACTORIES = "tests.security.engine_factories"


def calls(record):
    return [json.loads(x) for x in record.read_text().splitlines()] if record.exists() else []


def test_a_factory_makes_the_listener_context(secure_broker, pki, tmp_path):
    record = tmp_path / "engine.jsonl"
    first = issue(pki, "ef-a-" + uuid.uuid4().hex[:4], "localhost")
    b = secure_broker(listeners=("SSL",), props={"ssl.engine.factory.class": f"{FACTORIES}.PemEngineFactory",
                                                 "ssl.keystore.location": str(first.pem),
                                                 "odradek.test.engine.record": str(record)})
    conf = {"bootstrap.servers": b.addr("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    assert _produce_consume(conf, "engine", 3) == [b"v0", b"v1", b"v2"]
    assert served_serial(b.addr("SSL"), pki.ca) == serial_of(first)
    # the factory's own policy holds: TLS 1.3 only
    import socket
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection(b.addr("SSL").rsplit(":", 1), timeout=10) as raw:
        with pytest.raises(ssl.SSLError):
            ctx.wrap_socket(raw, server_hostname="localhost")
    got = calls(record)
    assert [c["kind"] for c in got][:2] == ["configure", "server"] and got[0]["keystore"] == str(first.pem)

    # a key store update: the factory is asked; a new one (configured with the new store) serves
    second = issue(pki, "ef-b-" + uuid.uuid4().hex[:4], "localhost")
    cp = alter(b, str(second.pem))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert served_serial(b.addr("SSL"), pki.ca) == serial_of(second)
    got = calls(record)
    kinds = [c["kind"] for c in got]
    assert "should_be_rebuilt" in kinds and got[kinds.index("should_be_rebuilt")]["answer"] is True
    live = [c for c in got if c["kind"] == "configure" and c["keystore"] == str(second.pem)]
    assert live, got
    first_factory = got[0]["id"]
    assert any(c["kind"] == "close" and c["id"] == first_factory for c in got)


@pytest.mark.parametrize("cls,message", [
    ("WrongSide", "create_server_context() must return an ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)"),
    ("ServerOnly", "the class has no create_client_context() method"),
    ("Missing", "Class tests.security.engine_factories.Missing cannot be found"),
])
def test_a_factory_that_cannot_serve_stops_start_up(secure_broker, cls, message, tmp_path):
    with pytest.raises(Exception):
        secure_broker(listeners=("SSL",), props={"ssl.engine.factory.class": f"{FACTORIES}.{cls}"})
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*.log"))
    assert message in logs

"""TLS and SASL listeners driven by unmodified clients (confluent-kafka, kafka-python)."""
from __future__ import annotations

import socket
import struct
import uuid

import pytest

from tests.security.conftest import ADMIN, ALICE

pytestmark = pytest.mark.integration
ck = pytest.importorskip("confluent_kafka")


def _produce_consume(conf: dict, topic: str, n: int = 5) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    p = Producer({**conf, "message.timeout.ms": 15000})
    errors = []
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, on_delivery=lambda e, m: e and errors.append(e))
    assert p.flush(20) == 0
    assert not errors, errors
    c = Consumer({**conf, "group.id": "g-" + uuid.uuid4().hex[:6], "auto.offset.reset": "earliest"})
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])     # no group: the transport is under test
    got = []
    try:
        import time
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m.value())
    finally:
        c.close()
    return got


def _sasl(mech, user, pw):
    return {"sasl.mechanism": mech, "sasl.username": user, "sasl.password": pw}


def test_ssl_server_auth_confluent(secure_broker, pki):
    b = secure_broker(listeners=("SSL",))
    conf = {"bootstrap.servers": b.addr("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    assert _produce_consume(conf, "tls-topic") == [b"v%d" % i for i in range(5)]


def test_ssl_kafka_python(secure_broker, pki):
    kafka = pytest.importorskip("kafka")
    b = secure_broker(listeners=("SSL",))
    common = dict(bootstrap_servers=b.addr("SSL"), security_protocol="SSL", ssl_cafile=str(pki.ca),
                  ssl_check_hostname=True)
    p = kafka.KafkaProducer(**common)
    p.send("kp-tls", b"hello").get(timeout=15)
    p.close()
    c = kafka.KafkaConsumer("kp-tls", auto_offset_reset="earliest", consumer_timeout_ms=10000, **common)
    assert [m.value for m in c][:1] == [b"hello"]
    c.close()


def test_mutual_tls_required(secure_broker, pki):
    b = secure_broker(listeners=("SSL",), client_auth="required")
    conf = {"bootstrap.servers": b.addr("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
    assert _produce_consume(conf, "mtls", 2) == [b"v0", b"v1"]
    # without a client certificate the handshake fails
    from confluent_kafka.admin import AdminClient
    a = AdminClient({"bootstrap.servers": b.addr("SSL"), "security.protocol": "SSL",
                     "ssl.ca.location": str(pki.ca), "socket.timeout.ms": 3000})
    with pytest.raises(ck.KafkaException):
        a.list_topics(timeout=3)


def test_ssl_principal_mapping_rules(secure_broker, pki, tmp_path):
    """``ssl.principal.mapping.rules`` without DEFAULT: the test client's subject maps to
    ``User:CLIENT1``, which is the only super user, so it may produce and consume; a certificate
    that no rule maps is not authenticated (the connection is closed)."""
    from tests.support.pki import issue
    b = secure_broker(listeners=("SSL",), client_auth="required", props={
        "ssl.principal.mapping.rules": "RULE:^CN=(client[0-9]),O=Odradek Tests$/$1/U",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:CLIENT1"})
    conf = {"bootstrap.servers": b.addr("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
    assert _produce_consume(conf, "mapped", 2) == [b"v0", b"v1"]
    other = issue(pki, "stranger-" + uuid.uuid4().hex[:4], "stranger")
    from confluent_kafka.admin import AdminClient
    a = AdminClient({**conf, "ssl.certificate.location": str(other.chain), "ssl.key.location": str(other.key),
                     "socket.timeout.ms": 3000})
    with pytest.raises(ck.KafkaException):
        a.list_topics(timeout=3)
    assert "ssl.principal.mapping.rules: No rules apply to CN=stranger,O=Odradek Tests" in \
        b.proc.log_path.read_text(errors="replace")


@pytest.mark.parametrize("mech,user", [("PLAIN", ALICE), ("SCRAM-SHA-256", ALICE), ("SCRAM-SHA-512", ADMIN)])
def test_sasl_plaintext_good(secure_broker, mech, user):
    b = secure_broker(listeners=("SASL_PLAINTEXT",))
    if mech.startswith("SCRAM"):
        _add_scram(b.plaintext, user[0], user[1], mech)
    conf = {"bootstrap.servers": b.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            **_sasl(mech, *user)}
    assert _produce_consume(conf, "sasl-" + mech.lower(), 3) == [b"v0", b"v1", b"v2"]


def _add_scram(bootstrap, user, pw, mech="SCRAM-SHA-256"):
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    a = AdminClient({"bootstrap.servers": bootstrap})
    m = ScramMechanism.SCRAM_SHA_256 if mech == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512
    fs = a.alter_user_scram_credentials([UserScramCredentialUpsertion(user, ScramCredentialInfo(m, 4096),
                                                                      pw.encode())])
    for f in fs.values():
        f.result(10)


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_bad_password_confluent(secure_broker, mech):
    from confluent_kafka.admin import AdminClient
    b = secure_broker(listeners=("SASL_PLAINTEXT",))
    if mech.startswith("SCRAM"):
        _add_scram(b.plaintext, "alice", "alice-secret", mech)
    errors = []
    a = AdminClient({"bootstrap.servers": b.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                     **_sasl(mech, "alice", "wrong"), "error_cb": errors.append})
    with pytest.raises(ck.KafkaException):
        a.list_topics(timeout=4)
    a.poll(1)                      # serves error_cb
    assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors), errors


def _frame(api_key, version, corr, body: bytes, client_id=b"t") -> bytes:
    hdr = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    if version >= 2 and api_key == 36:
        hdr += b"\0"          # flexible request header: tagged fields
    msg = hdr + body
    return struct.pack(">i", len(msg)) + msg


def _read(sock) -> bytes:
    n = struct.unpack(">i", _recv(sock, 4))[0]
    return _recv(sock, n)


def _recv(sock, n) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def test_sasl_wire_failure_then_closed(secure_broker):
    """SaslHandshake v1 + SaslAuthenticate v1 with a bad password: SASL_AUTHENTICATION_FAILED (58),
    then the broker closes the connection; a request before authentication closes it too."""
    b = secure_broker(listeners=("SASL_PLAINTEXT",))
    host, port = "127.0.0.1", b.ports["SASL_PLAINTEXT"]
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(_frame(17, 1, 1, struct.pack(">h", 5) + b"PLAIN"))
        r = _read(s)
        assert struct.unpack(">ih", r[:6]) == (1, 0)
        tok = b"\0alice\0nope"
        s.sendall(_frame(36, 1, 2, struct.pack(">i", len(tok)) + tok))
        r = _read(s)
        corr, err = struct.unpack(">ih", r[:6])
        assert (corr, err) == (2, 58)
        assert b"Invalid username or password" in r
        s.settimeout(5)
        assert s.recv(1) == b""
    with socket.create_connection((host, port), timeout=5) as s:       # Metadata before auth
        s.sendall(_frame(3, 1, 1, struct.pack(">i", -1)))
        s.settimeout(5)
        assert s.recv(1) == b""
    with socket.create_connection((host, port), timeout=5) as s:       # legacy v0 raw tokens
        s.sendall(_frame(17, 0, 1, struct.pack(">h", 5) + b"PLAIN"))
        assert struct.unpack(">ih", _read(s)[:6]) == (1, 0)
        tok = b"\0alice\0alice-secret"
        s.sendall(struct.pack(">i", len(tok)) + tok)
        assert _read(s) == b""
        s.sendall(_frame(3, 1, 3, struct.pack(">i", 0)))              # now a normal request works
        assert struct.unpack(">i", _read(s)[:4]) == (3,)


def test_failed_authentication_close_is_delayed(secure_broker):
    """``connection.failed.authentication.delay.ms``: the failure's answer comes at once, the
    connection is closed only after the delay (1 s here; Kafka's default is 100 ms), and a request
    sent meanwhile is not answered."""
    import time
    b = secure_broker(listeners=("SASL_PLAINTEXT",), props={"connection.failed.authentication.delay.ms": 1000})
    with socket.create_connection(("127.0.0.1", b.ports["SASL_PLAINTEXT"]), timeout=5) as s:
        s.sendall(_frame(17, 1, 1, struct.pack(">h", 5) + b"PLAIN"))
        assert struct.unpack(">ih", _read(s)[:6]) == (1, 0)
        tok = b"\0alice\0nope"
        s.sendall(_frame(36, 1, 2, struct.pack(">i", len(tok)) + tok))
        assert struct.unpack(">ih", _read(s)[:6]) == (2, 58)
        answered = time.monotonic()
        s.sendall(_frame(18, 0, 3, b""))                              # ApiVersions: never answered
        s.settimeout(10)
        try:
            assert s.recv(1) == b""
        except ConnectionResetError:    # closed with our unread request still queued: an RST
            pass
        assert time.monotonic() - answered >= 0.5


def test_sasl_ssl(secure_broker, pki):
    b = secure_broker(listeners=("SASL_SSL",))
    _add_scram(b.plaintext, "bob", "bob-secret", "SCRAM-SHA-512")
    for mech, user in (("PLAIN", ALICE), ("SCRAM-SHA-512", ("bob", "bob-secret"))):
        conf = {"bootstrap.servers": b.addr("SASL_SSL"), "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(pki.ca), **_sasl(mech, *user)}
        assert _produce_consume(conf, "saslssl-" + mech.lower(), 2) == [b"v0", b"v1"]


def test_kafka_python_sasl_scram(secure_broker):
    kafka = pytest.importorskip("kafka")
    b = secure_broker(listeners=("SASL_PLAINTEXT",))
    _add_scram(b.plaintext, "alice", "alice-secret", "SCRAM-SHA-256")
    common = dict(bootstrap_servers=b.addr("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice", sasl_plain_password="alice-secret")
    p = kafka.KafkaProducer(**common)
    p.send("kp-scram", b"x").get(timeout=15)
    p.close()
    with pytest.raises(Exception):
        bad = dict(common, sasl_plain_password="wrong")
        kafka.KafkaProducer(**bad, api_version_auto_timeout_ms=5000)


def _tool(name, *args):
    import os
    import subprocess
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    return subprocess.run([str(repo / "bin" / name), *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(repo)))


def test_kafka_configs_scram_users_and_tools_over_sasl_ssl(secure_broker, pki, tmp_path):
    """kafka-configs.sh creates SCRAM credentials; the project's tools then log in with them over
    SASL_SSL (--command-config), and a wrong password is refused."""
    b = secure_broker(listeners=("SASL_SSL",))
    r = _tool("kafka-configs.sh", "--bootstrap-server", b.plaintext, "--alter", "--add-config",
              "SCRAM-SHA-256=[iterations=8192,password=carol-secret],SCRAM-SHA-512=[password=carol-secret]",
              "--entity-type", "users", "--entity-name", "carol")
    assert r.returncode == 0, r.stderr
    assert "Completed updating config for user carol." in r.stdout
    r = _tool("kafka-configs.sh", "--bootstrap-server", b.plaintext, "--describe", "--entity-type", "users",
              "--entity-name", "carol")
    assert r.stdout.strip() == ("SCRAM credential configs for user-principal 'carol' are "
                                "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"), r.stdout + r.stderr
    cfg = tmp_path / "client.properties"
    cfg.write_text(f"security.protocol=SASL_SSL\nssl.truststore.location={pki.ca}\nsasl.mechanism=SCRAM-SHA-512\n"
                   "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                   'username="carol" password="carol-secret";\n')
    r = _tool("kafka-topics.sh", "--bootstrap-server", b.addr("SASL_SSL"), "--command-config", str(cfg),
              "--create", "--topic", "via-sasl-ssl")
    assert r.returncode == 0, r.stderr
    r = _tool("kafka-topics.sh", "--bootstrap-server", b.addr("SASL_SSL"), "--command-config", str(cfg), "--list")
    assert "via-sasl-ssl" in r.stdout.split()
    cfg.write_text(cfg.read_text().replace('password="carol-secret"', 'password="nope"'))
    r = _tool("kafka-topics.sh", "--bootstrap-server", b.addr("SASL_SSL"), "--command-config", str(cfg), "--list")
    assert r.returncode != 0 and "Invalid user credentials" in r.stderr + r.stdout
    # deleting a mechanism
    r = _tool("kafka-configs.sh", "--bootstrap-server", b.plaintext, "--alter", "--delete-config", "SCRAM-SHA-512",
              "--entity-type", "users", "--entity-name", "carol")
    assert r.returncode == 0, r.stderr
    r = _tool("kafka-configs.sh", "--bootstrap-server", b.plaintext, "--describe", "--entity-type", "users")
    assert r.stdout.strip() == "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192"


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_pipelined_requests_over_tls_are_all_answered(secure_broker, pki, listener):
    """Two requests that arrive in one TLS record: both are answered (the second is not left
    waiting for the connection's next I/O event)."""
    import socket
    import ssl
    import struct
    b = secure_broker(listeners=(listener,))
    ctx = ssl.create_default_context(cafile=str(pki.ca))

    def request(api_key, version, corr, payload=b""):
        body = struct.pack(">hhih", api_key, version, corr, 4) + b"pipe" + payload
        return struct.pack(">i", len(body)) + body

    def metadata(corr):                                   # Metadata v1, no topics
        return request(3, 1, corr, struct.pack(">i", 0))

    host, port = b.addr(listener).split(":")
    with socket.create_connection((host, int(port)), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as s:
        buf = b""

        def responses(n):
            nonlocal buf
            got = []
            while len(got) < n:
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0] and len(got) < n:
                    size = struct.unpack(">i", buf[:4])[0]
                    got.append(struct.unpack(">i", buf[4:8])[0])
                    buf = buf[4 + size:]
                if len(got) < n:
                    chunk = s.recv(65536)      # socket.timeout fails the test
                    assert chunk, "connection closed"
                    buf += chunk
            return got

        if listener == "SASL_SSL":
            s.sendall(request(17, 1, 10, struct.pack(">h", 5) + b"PLAIN"))
            assert responses(1) == [10]
            token = b"\0admin\0admin-secret"
            s.sendall(request(36, 0, 11, struct.pack(">i", len(token)) + token))
            assert responses(1) == [11]
        s.sendall(metadata(1) + metadata(2))       # one write: one TLS record
        assert responses(2) == [1, 2]


def _handshake(addr, pki, maximum=None):
    """(TLS version, cipher) a plain Python client negotiates with the listener at ``addr``."""
    import socket
    import ssl
    host, port = addr.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    ctx.check_hostname = False
    if maximum is not None:
        ctx.maximum_version = maximum
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            return s.version(), s.cipher()[0]


def test_ssl_enabled_protocols_and_cipher_suites(secure_broker, pki):
    """``ssl.enabled.protocols`` bounds the versions a listener accepts and ``ssl.cipher.suites``
    (OpenSSL's or Kafka's names) its ciphers; a client still produces and consumes through it."""
    import ssl
    b = secure_broker(listeners=("SSL",), props={"ssl.enabled.protocols": "TLSv1.3"})
    assert _handshake(b.addr("SSL"), pki)[0] == "TLSv1.3"
    with pytest.raises(ssl.SSLError):
        _handshake(b.addr("SSL"), pki, maximum=ssl.TLSVersion.TLSv1_2)
    b2 = secure_broker(listeners=("SSL",), props={"ssl.enabled.protocols": "TLSv1.2",
                                                   "ssl.cipher.suites": "ECDHE+AESGCM:!AES256"})
    version, cipher = _handshake(b2.addr("SSL"), pki)
    assert version == "TLSv1.2" and "AES128-GCM" in cipher, (version, cipher)
    conf = {"bootstrap.servers": b2.addr("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    assert _produce_consume(conf, "tls12-topic", 2) == [b"v0", b"v1"]
    # the names a Kafka property file has (Java's, IANA's): a TLS 1.2 suite alone keeps the
    # listener at TLS 1.2 even with TLS 1.3 enabled, as JSSE's enabled suites do
    b3 = secure_broker(listeners=("SSL",), props={"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"})
    assert _handshake(b3.addr("SSL"), pki) == ("TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
    conf = {"bootstrap.servers": b3.addr("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    assert _produce_consume(conf, "iana-topic", 2) == [b"v0", b"v1"]
    b4 = secure_broker(listeners=("SSL",), props={"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"})
    assert _handshake(b4.addr("SSL"), pki)[0] == "TLSv1.3"
    with pytest.raises(ssl.SSLError):
        _handshake(b4.addr("SSL"), pki, maximum=ssl.TLSVersion.TLSv1_2)


def test_frames_before_authentication_are_limited(secure_broker):
    """``sasl.server.max.receive.size`` (Kafka's 524288 by default): until SASL authentication
    completes a larger frame closes the connection without being read; once authenticated, frames
    up to ``socket.request.max.bytes`` are accepted again (a 700 KB record from confluent-kafka),
    on the v1 exchange and on the legacy v0 raw tokens alike."""
    b = secure_broker(listeners=("SASL_PLAINTEXT",))
    addr = ("127.0.0.1", b.ports["SASL_PLAINTEXT"])
    with socket.create_connection(addr, timeout=5) as s:
        s.sendall(struct.pack(">i", 524289) + b"\0" * 1024)      # declared size just over the limit
        s.settimeout(5)
        try:
            assert s.recv(1) == b""
        except ConnectionResetError:
            pass
    with socket.create_connection(addr, timeout=5) as s:       # small frames are read as ever
        s.sendall(_frame(17, 1, 1, struct.pack(">h", 5) + b"PLAIN"))
        assert struct.unpack(">ih", _read(s)[:6]) == (1, 0)
    assert "frame of 524289 bytes exceeds the limit of 524288 bytes" in b.proc.log_path.read_text(errors="replace")
    with socket.create_connection(addr, timeout=5) as s:       # legacy v0: raw tokens, then a big frame
        s.sendall(_frame(17, 0, 1, struct.pack(">h", 5) + b"PLAIN"))
        assert struct.unpack(">ih", _read(s)[:6]) == (1, 0)
        tok = b"\0alice\0alice-secret"
        s.sendall(struct.pack(">i", len(tok)) + tok)
        assert _read(s) == b""
        big = _frame(3, 1, 3, struct.pack(">i", 0) + b"\0" * 600_000)   # trailing bytes, a big frame
        s.sendall(big)
        s.settimeout(5)
        assert struct.unpack(">i", _read(s)[:4]) == (3,)
    conf = {"bootstrap.servers": b.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            **_sasl("PLAIN", *ALICE), "message.max.bytes": 2_000_000}
    p = ck.Producer(conf)
    errors = []
    p.produce("sasl-big", b"x" * 700_000, on_delivery=lambda e, m: errors.append(e))
    p.flush(20)
    assert errors == [None]


def test_java_tls_settings_are_accepted_and_a_java_engine_factory_refused(secure_broker, pki):
    """Kafka property files carry JSSE settings (ssl.protocol, the key and trust manager
    algorithms, ssl.provider): the broker starts with them, serves TLS, and DescribeConfigs shows
    them with Kafka's defaults; a Java ssl.engine.factory.class (no such Python class) stops
    start-up, named (Python factories: tests/security/test_engine_factory.py)."""
    b = secure_broker(listeners=("SSL",), props={"ssl.protocol": "TLSv1.2", "ssl.keymanager.algorithm": "SunX509",
                                                 "ssl.trustmanager.algorithm": "PKIX"})
    conf = {"bootstrap.servers": b.addr("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    assert _produce_consume(conf, "jsse", 1) == [b"v0"]
    from confluent_kafka.admin import AdminClient, ConfigResource
    a = AdminClient({"bootstrap.servers": b.plaintext})
    cfg = a.describe_configs([ConfigResource("BROKER", "0")])
    entries = next(iter(cfg.values())).result(10)
    assert entries["ssl.protocol"].value == "TLSv1.2"
    assert entries["ssl.trustmanager.algorithm"].value == "PKIX"
    assert entries["ssl.secure.random.implementation"].value is None
    # listener-prefixed settings are listed too, as Kafka lists them (a password hidden)
    jaas = entries["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None and jaas.source == ck.admin.ConfigSource.STATIC_BROKER_CONFIG.value
    with pytest.raises(Exception):
        secure_broker(listeners=("SSL",), props={"ssl.engine.factory.class": "com.example.MyEngineFactory"})
    logs = "".join(p.read_text(errors="replace") for p in b.proc.workdir.parent.rglob("*.log"))
    assert "Invalid value com.example.MyEngineFactory for configuration ssl.engine.factory.class" in logs

"""SASL re-authentication (KIP-368) on a real broker: with ``connections.max.reauth.ms`` the
SaslAuthenticate answer carries the session's lifetime, the client may authenticate again on the
same connection (same mechanism, same principal, not twice within a second), and a request after
the session ended closes the connection.  librdkafka and kafka-python re-authenticate by
themselves and keep producing across several session lifetimes."""
from __future__ import annotations

import socket
import struct
import time

import pytest

from tests.security.conftest import ALICE, BOB
from tests.security.test_auth import _frame, _read

pytestmark = pytest.mark.integration
ck = pytest.importorskip("confluent_kafka")
REAUTH_MS = 1500


def _handshake(s, corr, mechanism=b"PLAIN"):
    s.sendall(_frame(17, 1, corr, struct.pack(">h", len(mechanism)) + mechanism))
    r = _read(s)
    return struct.unpack(">ih", r[:6])[1]


def _authenticate(s, corr, user, password):
    """SaslAuthenticate v1: (error code, error message, session_lifetime_ms)."""
    tok = b"\0" + user.encode() + b"\0" + password.encode()
    s.sendall(_frame(36, 1, corr, struct.pack(">i", len(tok)) + tok))
    r = _read(s)
    c, err = struct.unpack(">ih", r[:6])
    assert c == corr
    n = struct.unpack(">h", r[6:8])[0]
    msg = r[8:8 + n].decode() if n >= 0 else None
    pos = 8 + max(n, 0)
    blen = struct.unpack(">i", r[pos:pos + 4])[0]
    pos += 4 + max(blen, 0)
    lifetime = struct.unpack(">q", r[pos:pos + 8])[0] if err == 0 else None
    return err, msg, lifetime


def _metadata(s, corr) -> bytes:
    s.sendall(_frame(3, 1, corr, struct.pack(">i", 0)))
    return _read(s)


@pytest.fixture
def reauth_broker(secure_broker):
    return secure_broker(listeners=("SASL_PLAINTEXT",), props={"connections.max.reauth.ms": REAUTH_MS})


def test_session_lifetime_reauthentication_and_expiry(reauth_broker):
    addr = ("127.0.0.1", reauth_broker.ports["SASL_PLAINTEXT"])
    with socket.create_connection(addr, timeout=10) as s:
        assert _handshake(s, 1) == 0
        err, _, lifetime = _authenticate(s, 2, *ALICE)
        assert (err, lifetime) == (0, REAUTH_MS)
        assert struct.unpack(">i", _metadata(s, 3)[:4]) == (3,)
        time.sleep(1.1)                           # re-authentication is refused within a second
        assert _handshake(s, 4) == 0
        err, _, lifetime = _authenticate(s, 5, *ALICE)
        assert (err, lifetime) == (0, REAUTH_MS)
        assert struct.unpack(">i", _metadata(s, 6)[:4]) == (6,)
        time.sleep(REAUTH_MS / 1000 + 0.3)        # the session ends without a re-authentication
        s.sendall(_frame(3, 1, 7, struct.pack(">i", 0)))
        s.settimeout(10)
        try:
            assert s.recv(1) == b""
        except ConnectionResetError:
            pass
    assert "its SASL session expired" in reauth_broker.proc.log_path.read_text(errors="replace")


def test_reauthentication_rules(reauth_broker):
    addr = ("127.0.0.1", reauth_broker.ports["SASL_PLAINTEXT"])
    with socket.create_connection(addr, timeout=10) as s:      # another principal: refused
        assert _handshake(s, 1) == 0 and _authenticate(s, 2, *ALICE)[0] == 0
        time.sleep(1.1)
        assert _handshake(s, 3) == 0
        err, msg, _ = _authenticate(s, 4, *BOB)
        assert err == 58 and msg == "Cannot change principals during re-authentication from User.alice: User.bob"
    with socket.create_connection(addr, timeout=10) as s:      # another mechanism: refused
        assert _handshake(s, 1) == 0 and _authenticate(s, 2, *ALICE)[0] == 0
        time.sleep(1.1)
        assert _handshake(s, 3, b"SCRAM-SHA-256") == 0
        err, msg, _ = _authenticate(s, 4, *ALICE)
        assert err == 58 and msg == ("SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
                                     "re-authentication of mechanism 'PLAIN'")
    with socket.create_connection(addr, timeout=10) as s:      # twice within a second: a plain bad handshake
        assert _handshake(s, 1) == 0 and _authenticate(s, 2, *ALICE)[0] == 0
        time.sleep(1.1)
        assert _handshake(s, 3) == 0 and _authenticate(s, 4, *ALICE)[0] == 0
        assert _handshake(s, 5) == 34                         # ILLEGAL_SASL_STATE


def test_librdkafka_reauthenticates_on_its_own(reauth_broker):
    """A producer sending for four session lifetimes: every record is acknowledged and no
    connection is closed for an expired session."""
    conf = {"bootstrap.servers": reauth_broker.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": ALICE[0], "sasl.password": ALICE[1],
            "message.timeout.ms": 15000, "linger.ms": 5}
    p = ck.Producer(conf)
    errors, acked = [], [0]

    def done(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[0] += 1
    end = time.monotonic() + 4 * REAUTH_MS / 1000
    sent = 0
    while time.monotonic() < end:
        p.produce("reauth-topic", b"x" * 100, callback=done)
        sent += 1
        p.poll(0.05)
    assert p.flush(20) == 0
    assert not errors and acked[0] == sent, (errors[:3], acked[0], sent)
    assert "its SASL session expired" not in reauth_broker.proc.log_path.read_text(errors="replace")


def test_kafka_python_reauthenticates_on_its_own(reauth_broker):
    """kafka-python 3 re-authenticates too (its SaslReauthenticator): sending for four session
    lifetimes, every record is acknowledged and no session expires."""
    kafka = pytest.importorskip("kafka")
    p = kafka.KafkaProducer(bootstrap_servers=reauth_broker.addr("SASL_PLAINTEXT"),
                            security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                            sasl_plain_username=ALICE[0], sasl_plain_password=ALICE[1], linger_ms=5)
    futures = []
    end = time.monotonic() + 4 * REAUTH_MS / 1000
    while time.monotonic() < end:
        futures.append(p.send("reauth-kp", b"y" * 100))
        time.sleep(0.05)
    p.flush(20)
    assert all(f.get(timeout=20) for f in futures)
    p.close()
    assert "its SASL session expired" not in reauth_broker.proc.log_path.read_text(errors="replace")

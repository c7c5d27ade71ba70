"""SASL/GSSAPI (Kerberos) on a real broker, against a real MIT KDC (tests/support/kdc.py), driven
by unmodified clients: kafka-python (its GSSAPI mechanism over the ``gssapi`` package, with a
ticket from ``kinit``) and Debian's kcat (librdkafka with Cyrus SASL's GSSAPI plugin, logging in
from a keytab).  The principal the authorizer sees is the Kerberos name shortened by
``sasl.kerberos.principal.to.local.rules``; a name no rule maps, a forged token and a ticket
for another service are refused."""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid

import pytest

from tests.support.kdc import Kdc, kdc_available, kerberos_env
from tests.support.net import free_port

pytestmark = pytest.mark.integration

SERVICE = "kafka"
HOST = "localhost"         # the host part of the broker's principal, and its advertised name
MODULE = "com.sun.security.auth.module.Krb5LoginModule"


@pytest.fixture
def kdc(tmp_path):
    ok, why = kdc_available()
    if not ok:
        pytest.skip(why)
    k = Kdc(tmp_path).start()
    try:
        yield k
    finally:
        k.stop()


def gssapi_broker(broker_factory, kdc, props=None, principal=f"{SERVICE}/{HOST}"):
    keytab = kdc.add_service(principal)
    port, sasl_port = free_port("127.0.0.1"), free_port("127.0.0.1")
    p = {"sasl.enabled.mechanisms": "GSSAPI",
         "sasl.kerberos.service.name": SERVICE,
         "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
             f'{MODULE} required useKeyTab=true storeKey=true keyTab="{keytab}" '
             f'principal="{principal}@{kdc.realm}";'}
    p.update(props or {})
    b = broker_factory(port=port, props=p, env=kdc.env(), overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://{HOST}:{sasl_port}"})
    b.sasl_bootstrap = f"{HOST}:{sasl_port}"
    return b


def user_env(kdc, tmp_path, name):
    """A client environment holding ``name``'s ticket (kinit with a password)."""
    kdc.add_user(name, name + "-secret")
    env = kdc.env(ccache=tmp_path / f"cc-{name}")
    kdc.kinit(name, name + "-secret", env)
    return env


def kp_conf(b):
    return dict(bootstrap_servers=b.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="GSSAPI", sasl_kerberos_service_name=SERVICE, request_timeout_ms=15000)


def test_kafka_python_produces_and_consumes_with_a_ticket(broker_factory, kdc, tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    b = gssapi_broker(broker_factory, kdc)
    with kerberos_env(user_env(kdc, tmp_path, "alice")):
        prod = KafkaProducer(**kp_conf(b))
        for i in range(5):
            prod.send("krb", b"v%d" % i, partition=0).get(15)
        prod.close()
        cons = KafkaConsumer(**kp_conf(b), enable_auto_commit=False, consumer_timeout_ms=10000)
        tp = TopicPartition("krb", 0)
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        got = [m.value for _, m in zip(range(5), cons)]
        cons.close()
    assert got == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    log_text = b.log_path.read_text(errors="replace")
    assert "GSSAPI as kafka/localhost@ODRADEK.TEST" in log_text


def test_principal_is_the_short_name_the_authorizer_sees(broker_factory, kdc, tmp_path):
    """DEFAULT maps alice@ODRADEK.TEST to User:alice: a super user here; bob has no ACL."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAuthorizationFailedError
    b = gssapi_broker(broker_factory, kdc, props={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:alice"})
    alice, bob = user_env(kdc, tmp_path, "alice"), user_env(kdc, tmp_path, "bob")
    with kerberos_env(alice):
        admin = KafkaAdminClient(**kp_conf(b))
        admin.create_topics([NewTopic("krb-acl", 1, 1)])
        admin.close()
    with kerberos_env(bob):
        from kafka import KafkaProducer
        prod = KafkaProducer(**kp_conf(b), max_block_ms=5000)
        with pytest.raises(TopicAuthorizationFailedError):
            prod.send("krb-acl", b"x", partition=0).get(15)
        prod.close()


def _login_fails(b, env) -> str:
    """One SASL/GSSAPI exchange as kafka-python runs it (SaslHandshake v1, then SaslAuthenticate
    with the GSS-API tokens and the security layer answer), in ``env``; it must end with
    SASL_AUTHENTICATION_FAILED (58) and a closed connection: the broker's message."""
    import gssapi
    from protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest
    from tests.support.rawkafka import RawConnection
    host, port = b.sasl_bootstrap.rsplit(":", 1)
    c = RawConnection("127.0.0.1", int(port))
    with kerberos_env(env), contextlib.closing(c):
        assert c.request(17, 1, SaslHandshakeRequest(mechanism="GSSAPI")).error_code == 0
        try:
            name = gssapi.Name(f"{SERVICE}@{host}", gssapi.NameType.hostbased_service)
            ctx = gssapi.SecurityContext(name=name, usage="initiate")
            token = ctx.step(None)
        except gssapi.exceptions.GSSError as e:
            # no ticket can be had: the broker is never asked (what a client does too)
            return f"client: {e}"
        layer_answered = False
        for _ in range(10):
            resp = c.request(36, 1, SaslAuthenticateRequest(auth_bytes=token or b""))
            if resp.error_code:
                assert resp.error_code == 58, resp
                assert c.is_closed(5)
                return resp.error_message
            if layer_answered:
                raise AssertionError("the broker accepted the login")
            if not ctx.complete:
                token = ctx.step(resp.auth_bytes)
            elif resp.auth_bytes:
                msg = ctx.unwrap(resp.auth_bytes).message
                token = ctx.wrap(bytes([1]) + msg[1:4] + b"kafka@localhost", False).message
                layer_answered = True
            else:
                token = b""
        raise AssertionError("the exchange did not end")


def test_a_name_no_rule_maps_is_refused(broker_factory, kdc, tmp_path):
    rules = r"RULE:[1:$1@$0](bob@ODRADEK\.TEST)s/@.*//"
    b = gssapi_broker(broker_factory, kdc, props={"sasl.kerberos.principal.to.local.rules": rules})
    assert "No rules apply to alice@ODRADEK.TEST" in _login_fails(b, user_env(kdc, tmp_path, "alice"))
    # bob maps (the rule strips the realm) and gets in
    assert "accepted" in str(pytest.raises(AssertionError, _login_fails, b, user_env(kdc, tmp_path, "bob")).value)


def test_a_forged_token_is_refused(broker_factory, kdc, tmp_path):
    """Garbage where the GSS-API token should be."""
    from protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest
    from tests.support.rawkafka import RawConnection
    b = gssapi_broker(broker_factory, kdc)
    c = RawConnection("127.0.0.1", int(b.sasl_bootstrap.rsplit(":", 1)[1]))
    try:
        assert c.request(17, 1, SaslHandshakeRequest(mechanism="GSSAPI")).error_code == 0
        resp = c.request(36, 1, SaslAuthenticateRequest(auth_bytes=b"\x60\x10not a kerberos token"))
        assert resp.error_code == 58 and "GSSAPI authentication failed" in resp.error_message
        assert c.is_closed(5)
    finally:
        c.close()


def test_a_ticket_for_another_service_is_refused(broker_factory, kdc, tmp_path):
    """The client asks for kafka/localhost, but the broker holds only other/localhost's key."""
    b = gssapi_broker(broker_factory, kdc, props={"sasl.kerberos.service.name": "other"},
                      principal=f"other/{HOST}")
    kdc.add_service(f"{SERVICE}/{HOST}")        # the ticket the client gets is for kafka/localhost
    assert "GSSAPI authentication failed" in _login_fails(b, user_env(kdc, tmp_path, "alice"))


def test_kcat_logs_in_from_a_keytab(broker_factory, kdc, tmp_path):
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed")
    b = gssapi_broker(broker_factory, kdc)
    keytab = kdc.add_service("carol")
    env = {**os.environ, **kdc.env(ccache=tmp_path / "cc-carol")}
    common = [kcat, "-b", b.sasl_bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
              "-X", "sasl.mechanisms=GSSAPI", "-X", f"sasl.kerberos.service.name={SERVICE}",
              "-X", f"sasl.kerberos.keytab={keytab}", "-X", f"sasl.kerberos.principal=carol@{kdc.realm}"]
    topic = "krb-kcat-" + uuid.uuid4().hex[:6]
    r = subprocess.run(common + ["-P", "-t", topic, "-p", "0"], input=b"one\ntwo\n", env=env,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    r = subprocess.run(common + ["-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"], env=env,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert r.stdout.split() == [b"one", b"two"]


def test_the_projects_tools_log_in_from_a_keytab(broker_factory, kdc, tmp_path):
    """bin/kafka-topics.sh --command-config with a Krb5LoginModule keytab entry (the client side of
    protocol/client.py, also the brokers' own inter-broker logins)."""
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    b = gssapi_broker(broker_factory, kdc)
    keytab = kdc.add_service("dave")
    cfg = tmp_path / "client.properties"
    cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\n"
                   f'sasl.jaas.config={MODULE} required useKeyTab=true keyTab="{keytab}" '
                   f'principal="dave@{kdc.realm}";\n')
    env = {**os.environ, **kdc.env()}
    tool = [str(repo / "bin" / "kafka-topics.sh"), "--bootstrap-server", b.sasl_bootstrap, "--command-config", str(cfg)]
    r = subprocess.run(tool + ["--create", "--topic", "krb-tool", "--partitions", "2"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(tool + ["--list"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "krb-tool" in r.stdout.split(), (r.stdout, r.stderr)
    # without the service name the tool refuses before it connects
    cfg.write_text(cfg.read_text().replace("sasl.kerberos.service.name=kafka\n", ""))
    r = subprocess.run(tool + ["--list"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "needs sasl.kerberos.service.name" in r.stdout + r.stderr, (r.stdout, r.stderr)

"""SASL/OAUTHBEARER on a real broker, driven by unmodified clients: confluent-kafka (librdkafka's
unsecured JWT and an ``oauth_cb``) and kafka-python (an ``AbstractTokenProvider``), with the
unsecured validator and with KIP-768's JWKS validator."""
from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.security.test_auth import _produce_consume

pytestmark = pytest.mark.integration
ck = pytest.importorskip("confluent_kafka")

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SECURED = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
L = "listener.name.sasl_plaintext."


def b64(data: bytes) -> str:
    import base64
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured(sub: str, life: float = 3600, **claims) -> str:
    now = time.time()
    body = {"sub": sub, "iat": now, "exp": now + life, **claims}
    return f"{b64(json.dumps({'alg': 'none'}).encode())}.{b64(json.dumps(body).encode())}."


def oauth_broker(secure_broker, jaas_opts: str = "", props=None):
    p = {"sasl.enabled.mechanisms": "OAUTHBEARER",
         L + "oauthbearer.sasl.jaas.config": f"{MODULE} required {jaas_opts};"}
    p.update(props or {})
    return secure_broker(listeners=("SASL_PLAINTEXT",), props=p)


def ck_conf(b, **extra):
    return {"bootstrap.servers": b.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", **extra}


def unsecured_jwt(principal: str, scope: str = "") -> dict:
    return {"enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={principal}" + (f" scope={scope}" if scope else "")}


def test_confluent_unsecured_jwt_produce_consume(secure_broker):
    b = oauth_broker(secure_broker, 'unsecuredValidatorRequiredScope="kafka"')
    conf = ck_conf(b, **unsecured_jwt("alice", "kafka,other"))
    assert _produce_consume(conf, "oauth-topic", 3) == [b"v0", b"v1", b"v2"]


def test_confluent_missing_scope_refused(secure_broker):
    from tests.support.sasl import login_error
    b = oauth_broker(secure_broker, 'unsecuredValidatorRequiredScope="kafka"')
    err = login_error(ck_conf(b, **unsecured_jwt("alice", "other")))
    assert err is not None and "insufficient_scope" in err, err


def test_confluent_oauth_cb_and_acls(secure_broker):
    """The token's sub is the principal the authorizer sees: User:alice has an ACL, User:bob not."""
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                       ResourcePatternType, ResourceType)
    b = oauth_broker(secure_broker, props={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                           "super.users": "User:admin"})

    def as_user(name):
        return ck_conf(b, oauth_cb=lambda _cfg: (unsecured(name), time.time() + 3600))

    admin = AdminClient(as_user("admin"))
    for f in admin.create_topics([NewTopic("oa-acl", 1, 1)]).values():
        f.result(15)
    binding = AclBinding(ResourceType.TOPIC, "oa-acl", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
    for f in admin.create_acls([binding]).values():
        f.result(15)

    def produce(name):
        p = Producer({**as_user(name), "message.timeout.ms": 6000})
        out = []
        p.produce("oa-acl", b"x", on_delivery=lambda e, m: out.append(e))
        p.flush(10)
        return out[0] if out else KafkaError(KafkaError._MSG_TIMED_OUT)

    assert produce("alice") is None
    err = produce("bob")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


# ---------------------------------------------------------------------------- kafka-python

def kp_provider(tok: str):
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self):
            return tok
    return Provider()


def kp_common(b, tok):
    return dict(bootstrap_servers=b.addr("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=kp_provider(tok))


def kp_error(b, tok, caplog) -> str:
    """kafka-python 3 reports a failed bootstrap as a KafkaTimeoutError; the authentication
    error itself (SaslAuthenticationFailedError with the broker's message) is in its log."""
    kafka = pytest.importorskip("kafka")
    caplog.clear()
    with caplog.at_level("WARNING", logger="kafka"):
        with pytest.raises(kafka.errors.KafkaError):
            kafka.KafkaProducer(**kp_common(b, tok), bootstrap_timeout_ms=2000, max_block_ms=2000,
                                reconnect_backoff_max_ms=200).send("kp-oauth", b"x").get(timeout=10)
    errors = [r.getMessage() for r in caplog.records if "SaslAuthenticationFailedError" in r.getMessage()]
    assert errors, [r.getMessage() for r in caplog.records][-5:]
    return errors[0]


def test_kafka_python_unsecured(secure_broker, caplog):
    kafka = pytest.importorskip("kafka")
    b = oauth_broker(secure_broker, 'unsecuredValidatorRequiredScope="produce"')
    good = unsecured("carol", scope="produce consume")
    p = kafka.KafkaProducer(**kp_common(b, good))
    p.send("kp-oauth", b"hello").get(timeout=15)
    p.close()
    c = kafka.KafkaConsumer("kp-oauth", auto_offset_reset="earliest", consumer_timeout_ms=10000,
                            **kp_common(b, good))
    assert next(c).value == b"hello"
    c.close()
    err = kp_error(b, unsecured("carol", life=-10, scope="produce"), caplog)
    assert '{"status":"invalid_token"}' in err, err
    err = kp_error(b, unsecured("carol", scope="consume"), caplog)
    assert '{"status":"insufficient_scope", "scope":"[produce]"}' in err, err


# ---------------------------------------------------------------------------- KIP-768 (JWKS)

@pytest.fixture(scope="module")
def rsa_keys():
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives.asymmetric import rsa
    return [rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(2)]


def signed(key, sub: str, kid: str = "k1", **claims) -> str:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding
    now = int(time.time())
    h = b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": kid}).encode())
    c = b64(json.dumps({"sub": sub, "iat": now, "exp": now + 600, **claims}).encode())
    sig = key.sign(f"{h}.{c}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{h}.{c}.{b64(sig)}"


def test_secured_jwks_file(secure_broker, rsa_keys, tmp_path, caplog):
    good_key, other_key = rsa_keys
    pub = good_key.public_key().public_numbers()
    jwks = {"keys": [{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
                      "n": b64(pub.n.to_bytes((pub.n.bit_length() + 7) // 8, "big")), "e": b64(pub.e.to_bytes(3, "big"))}]}
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks))
    b = oauth_broker(secure_broker, props={L + "oauthbearer.sasl.server.callback.handler.class": SECURED,
                                           "sasl.oauthbearer.jwks.endpoint.url": path.as_uri(),
                                           "sasl.oauthbearer.expected.audience": "kafka",
                                           "sasl.oauthbearer.expected.issuer": "https://idp.test"})
    claims = {"aud": "kafka", "iss": "https://idp.test"}
    conf = ck_conf(b, oauth_cb=lambda _cfg: (signed(good_key, "dave", **claims), time.time() + 600, "dave"))
    assert _produce_consume(conf, "jwks-" + uuid.uuid4().hex[:6], 2) == [b"v0", b"v1"]

    from tests.support.sasl import login_error
    for bad in (signed(other_key, "dave", **claims),                          # another key
                signed(good_key, "dave", aud="other", iss="https://idp.test"),   # wrong audience
                unsecured("dave", **claims)):                                 # alg none
        err = login_error(ck_conf(b, oauth_cb=lambda _cfg, t=bad: (t, time.time() + 600, "dave")))
        assert err is not None and "invalid_token" in err, err
    # kafka-python with a token provider
    kafka = pytest.importorskip("kafka")
    p = kafka.KafkaProducer(**kp_common(b, signed(good_key, "erin", **claims)))
    p.send("jwks-kp", b"x").get(timeout=15)
    p.close()
    assert '{"status":"invalid_token"}' in kp_error(b, signed(other_key, "erin", **claims), caplog)


def test_oauthbearer_without_jaas_fails_start(broker_factory, tmp_path):
    from tests.support.net import free_port
    port, sport = free_port("127.0.0.1"), free_port("127.0.0.1")
    eps = f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sport}"
    b = broker_factory(port=port, start=False, props={"sasl.enabled.mechanisms": "OAUTHBEARER"},
                       overrides={"listeners": eps, "advertised.listeners": eps})
    from tests.support.process import ProcessStartError
    with pytest.raises(ProcessStartError):
        b.start()
    assert "SASL OAUTHBEARER needs a JAAS entry" in b.log_text()

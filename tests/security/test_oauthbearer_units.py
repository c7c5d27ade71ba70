"""SASL/OAUTHBEARER without a broker: the client message grammar, the unsecured and JWKS
validators, the JSON error challenge and the 0x01 acknowledgement."""
from __future__ import annotations

import json
import time

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.security import oauthbearer as O
from broker.security.sasl import SaslFailure


def first(token: str, authzid: str = "", ext: str = "") -> bytes:
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}{ext}\x01\x01".encode()


def unsecured(claims: dict) -> str:
    return O.b64url_encode(b'{"alg":"none"}') + "." + O.b64url_encode(json.dumps(claims).encode()) + "."


NOW = time.time()


# ---------------------------------------------------------------------------- grammar

def test_parse_client_first():
    cf = O.parse_client_first(first("abc.def.", authzid="al=3Dice", ext="\x01traceId=123\x01x=a b"))
    assert cf.token == "abc.def." and cf.authzid == "al=ice"
    assert cf.extensions == {"traceId": "123", "x": "a b"}


@pytest.mark.parametrize("msg, text", [
    (b"n,,\x01auth=Bearer tok\x01", "Invalid OAUTHBEARER client first message"),
    (b"y,,\x01auth=Bearer tok\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01foo=bar\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
    (b"n,,\x01auth=Bearer\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme in OAUTHBEARER client first message: Basic"),
    (b"\xff", "Invalid OAUTHBEARER client first message"),
])
def test_parse_malformed(msg, text):
    with pytest.raises(SaslFailure) as e:
        O.parse_client_first(msg)
    assert str(e.value) == text


# ---------------------------------------------------------------------------- unsecured validator

def validator(**opts):
    return O.UnsecuredValidator(opts, clock=lambda: NOW)


def test_unsecured_ok_and_scope_forms():
    v = validator(unsecuredValidatorRequiredScope="read write")
    t = v.validate(unsecured({"sub": "alice", "iat": NOW - 5, "exp": NOW + 60, "scope": "write read other"}))
    assert t.principal == "alice" and t.scope == {"read", "write", "other"}
    t = v.validate(unsecured({"sub": "bob", "exp": NOW + 60, "scope": ["read", "write"]}))
    assert t.principal == "bob"


def test_unsecured_custom_claims_and_skew():
    v = validator(unsecuredValidatorPrincipalClaimName="uid", unsecuredValidatorScopeClaimName="scp",
                  unsecuredValidatorRequiredScope="x", unsecuredValidatorAllowableClockSkewMs="10000")
    assert v.validate(unsecured({"uid": "carol", "exp": NOW - 5, "scp": "x"})).principal == "carol"
    with pytest.raises(O.TokenError):
        v.validate(unsecured({"uid": "carol", "exp": NOW - 11, "scp": "x"}))


@pytest.mark.parametrize("token", [
    unsecured({"exp": NOW + 60}),                                   # no principal
    unsecured({"sub": 5, "exp": NOW + 60}),                         # principal not a string
    unsecured({"sub": "a"}),                                        # no exp
    unsecured({"sub": "a", "exp": NOW - 1}),                        # expired
    unsecured({"sub": "a", "exp": NOW + 60, "iat": NOW + 30}),      # issued in the future
    unsecured({"sub": "a", "exp": "soon"}),                         # exp not a number
    O.b64url_encode(b'{"alg":"HS256"}') + "." + O.b64url_encode(b'{"sub":"a","exp":9999999999}') + ".",
    unsecured({"sub": "a", "exp": NOW + 60}) + "c2ln",              # has a signature
    "a.b",                                                          # two parts
    "e30..",                                                        # '..'
    O.b64url_encode(b'{"alg":"none"}') + ".bm90IGpzb24.",           # claims not JSON
])
def test_unsecured_invalid(token):
    with pytest.raises(O.TokenError) as e:
        validator().validate(token)
    assert e.value.scope is None


def test_unsecured_exp_not_after_iat():
    v = validator(unsecuredValidatorAllowableClockSkewMs="100000")
    with pytest.raises(O.TokenError, match="not after"):
        v.validate(unsecured({"sub": "a", "iat": NOW + 10, "exp": NOW + 5}))


def test_unsecured_missing_scope():
    with pytest.raises(O.TokenError) as e:
        validator(unsecuredValidatorRequiredScope="read write").validate(
            unsecured({"sub": "a", "exp": NOW + 60, "scope": "read"}))
    assert e.value.scope == "[read, write]"


def test_unsecured_bad_options():
    with pytest.raises(ConfigError):
        validator(unsecuredValidatorAllowableClockSkewMs="-1")
    with pytest.raises(ConfigError):
        validator(unsecuredValidatorAllowableClockSkewMs="soon")


def test_unsecured_token_minted():
    t = O.unsecured_token("broker", 100, now=NOW)
    tok = validator().validate(t)
    assert tok.principal == "broker" and tok.lifetime_ms == (int(NOW) + 100) * 1000


# ---------------------------------------------------------------------------- the exchange

def test_exchange_success():
    s = O.OAuthBearerServer(validator())
    assert s.evaluate(first(unsecured({"sub": "alice", "exp": NOW + 60}), authzid="alice")) == b""
    assert s.complete and s.authorization_id == "alice"


def test_exchange_invalid_token_then_ack():
    s = O.OAuthBearerServer(validator())
    assert s.evaluate(first(unsecured({"sub": "alice", "exp": NOW - 60}))) == b'{"status":"invalid_token"}'
    assert not s.complete
    with pytest.raises(SaslFailure) as e:
        s.evaluate(b"\x01")
    assert str(e.value) == '{"status":"invalid_token"}'


def test_exchange_insufficient_scope():
    s = O.OAuthBearerServer(validator(unsecuredValidatorRequiredScope="produce"))
    out = s.evaluate(first(unsecured({"sub": "alice", "exp": NOW + 60, "scope": "consume"})))
    assert out == b'{"status":"insufficient_scope", "scope":"[produce]"}'
    with pytest.raises(SaslFailure, match="insufficient_scope"):
        s.evaluate(b"\x01")


def test_exchange_ack_without_error_is_malformed():
    with pytest.raises(SaslFailure, match="Invalid OAUTHBEARER client first message"):
        O.OAuthBearerServer(validator()).evaluate(b"\x01")


def test_exchange_retry_after_error():
    """After an error challenge a client may send a new first message instead of 0x01."""
    s = O.OAuthBearerServer(validator())
    s.evaluate(first(unsecured({"sub": "alice", "exp": NOW - 60})))
    assert s.evaluate(first(unsecured({"sub": "alice", "exp": NOW + 60}))) == b""
    assert s.complete


def test_exchange_authzid_mismatch():
    with pytest.raises(SaslFailure) as e:
        O.OAuthBearerServer(validator()).evaluate(first(unsecured({"sub": "alice", "exp": NOW + 60}), authzid="bob"))
    assert str(e.value) == ("Authentication failed: Client requested an authorization id (bob) that is different "
                            "from the token's principal name (alice)")


# ---------------------------------------------------------------------------- signed tokens

cryptography = pytest.importorskip("cryptography")
from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature  # noqa: E402


def _b64int(n: int, size: int | None = None) -> str:
    size = size or (n.bit_length() + 7) // 8
    return O.b64url_encode(n.to_bytes(size, "big"))


def jwk(private, kid: str) -> dict:
    pub = private.public_key().public_numbers()
    if isinstance(private, rsa.RSAPrivateKey):
        return {"kty": "RSA", "kid": kid, "use": "sig", "n": _b64int(pub.n), "e": _b64int(pub.e)}
    size = (private.curve.key_size + 7) // 8
    crv = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}[private.curve.name]
    return {"kty": "EC", "kid": kid, "crv": crv, "x": _b64int(pub.x, size), "y": _b64int(pub.y, size)}


def sign(private, alg: str, claims: dict, kid: str | None = "k1") -> str:
    header = {"alg": alg, "typ": "JWT", **({"kid": kid} if kid else {})}
    h = O.b64url_encode(json.dumps(header).encode())
    c = O.b64url_encode(json.dumps(claims).encode())
    data = f"{h}.{c}".encode()
    hh = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}[alg[2:]]()
    if alg.startswith("RS"):
        sig = private.sign(data, padding.PKCS1v15(), hh)
    elif alg.startswith("PS"):
        sig = private.sign(data, padding.PSS(mgf=padding.MGF1(hh), salt_length=padding.PSS.DIGEST_LENGTH), hh)
    else:
        r, s = decode_dss_signature(private.sign(data, ec.ECDSA(hh)))
        size = (private.curve.key_size + 7) // 8
        sig = r.to_bytes(size, "big") + s.to_bytes(size, "big")
    return f"{h}.{c}.{O.b64url_encode(sig)}"


@pytest.fixture(scope="module")
def keys():
    return {"rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "p256": ec.generate_private_key(ec.SECP256R1()), "p384": ec.generate_private_key(ec.SECP384R1()),
            "p521": ec.generate_private_key(ec.SECP521R1()),
            "other": rsa.generate_private_key(public_exponent=65537, key_size=2048)}


def secured(keys_doc: dict, **kw) -> O.SecuredValidator:
    docs = {"url": json.dumps(keys_doc)}
    cache = O.JwksCache("url", 3600000, fetch=lambda url: docs[url].encode())
    cache.load()
    v = O.SecuredValidator(cache, clock=lambda: NOW, **kw)
    v._docs = docs
    return v


def claims(**extra):
    return {"sub": "alice", "iat": int(NOW) - 10, "exp": int(NOW) + 300, **extra}


@pytest.mark.parametrize("alg, key", [("RS256", "rsa"), ("RS384", "rsa"), ("RS512", "rsa"), ("PS256", "rsa"),
                                      ("PS384", "rsa"), ("PS512", "rsa"), ("ES256", "p256"), ("ES384", "p384"),
                                      ("ES512", "p521")])
def test_secured_algorithms(keys, alg, key):
    v = secured({"keys": [jwk(keys[key], "k1")]})
    assert v.validate(sign(keys[key], alg, claims(scope="a b"))).principal == "alice"


def test_secured_no_kid_uses_any_fitting_key(keys):
    v = secured({"keys": [jwk(keys["other"], "x"), jwk(keys["rsa"], "y")]})
    assert v.validate(sign(keys["rsa"], "RS256", claims(), kid=None)).principal == "alice"


@pytest.mark.parametrize("tok", [
    lambda k: sign(k["other"], "RS256", claims()),                            # another key, same kid
    lambda k: sign(k["rsa"], "RS256", claims(exp=int(NOW) - 31)),             # expired beyond the skew
    lambda k: sign(k["rsa"], "RS256", {"sub": "alice", "iat": int(NOW)}),     # no exp
    lambda k: sign(k["rsa"], "RS256", {"sub": "alice", "exp": int(NOW) + 60}),  # no iat
    lambda k: sign(k["rsa"], "RS256", claims(iat=int(NOW) + 60)),             # iat in the future
    lambda k: sign(k["rsa"], "RS256", claims(nbf=int(NOW) + 60)),             # not yet valid
    lambda k: sign(k["rsa"], "RS256", claims(aud="svc")),                     # aud but none expected
    lambda k: sign(k["rsa"], "RS256", claims(sub=" ")),                       # blank subject
    lambda k: sign(k["p256"], "ES256", claims()),                             # EC token, RSA key k1
    lambda k: unsecured(claims()),                                            # alg none
    lambda k: sign(k["rsa"], "RS256", claims())[:-4] + "AAAA",                # signature tampered
])
def test_secured_refused(keys, tok):
    v = secured({"keys": [jwk(keys["rsa"], "k1")]})
    with pytest.raises(O.TokenError):
        v.validate(tok(keys))


def test_secured_expiry_within_skew(keys):
    v = secured({"keys": [jwk(keys["rsa"], "k1")]})
    assert v.validate(sign(keys["rsa"], "RS256", claims(exp=int(NOW) - 20))).principal == "alice"


def test_secured_audience_issuer_sub_claim(keys):
    v = secured({"keys": [jwk(keys["rsa"], "k1")]}, audience=["kafka", "other"], issuer="https://idp",
                sub_claim="client_id")
    good = claims(aud=["x", "kafka"], iss="https://idp", client_id="svc-1")
    assert v.validate(sign(keys["rsa"], "RS256", good)).principal == "svc-1"
    for bad in (dict(good, aud="x"), dict(good, iss="https://evil"), {k: x for k, x in good.items() if k != "aud"},
                {k: x for k, x in good.items() if k != "client_id"}):
        with pytest.raises(O.TokenError):
            v.validate(sign(keys["rsa"], "RS256", bad))


def test_secured_unknown_kid_requests_one_refresh(keys):
    v = secured({"keys": [jwk(keys["rsa"], "k1")]})
    asked = []
    v.jwks.request_refresh = lambda: asked.append(1)
    tok = sign(keys["other"], "RS256", claims(), kid="k2")
    with pytest.raises(O.TokenError, match="kid"):
        v.validate(tok)
    with pytest.raises(O.TokenError, match="kid"):
        v.validate(tok)
    assert asked == [1]                          # once per kid within the back-off
    v._docs["url"] = json.dumps({"keys": [jwk(keys["rsa"], "k1"), jwk(keys["other"], "k2")]})
    v.jwks.load()                                # what the refresh thread does
    assert v.validate(tok).principal == "alice"


def test_jwks_thread_refreshes(keys):
    docs = {"u": json.dumps({"keys": [jwk(keys["rsa"], "k1")]})}
    cache = O.JwksCache("u", 3600000, fetch=lambda url: docs[url].encode())
    cache.start()
    try:
        assert [k.kid for k in cache.keys] == ["k1"]
        docs["u"] = json.dumps({"keys": [jwk(keys["other"], "k2")]})
        cache.request_refresh()
        deadline = time.monotonic() + 5
        while [k.kid for k in cache.keys] != ["k2"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [k.kid for k in cache.keys] == ["k2"]
    finally:
        cache.close()


def test_jwks_reload_retries_with_kafkas_backoff(keys):
    """A failing reload is tried again after 100, 200, 400 ... ms (retry.backoff.ms doubling)
    within retry.backoff.max.ms of the first attempt; then the first error is raised."""
    doc = json.dumps({"keys": [jwk(keys["rsa"], "k1")]}).encode()
    now = [0.0]
    waits = []
    failures = [3]

    def fetch(url):
        if failures[0] > 0:
            failures[0] -= 1
            raise OSError(f"connection refused ({failures[0]} more)")
        return doc

    def sleep(s):
        waits.append(round(s, 3))
        now[0] += s
        return False

    cache = O.JwksCache("u", 3600000, fetch=fetch, retry_backoff_ms=100, retry_backoff_max_ms=10000,
                        clock=lambda: now[0])
    cache.reload(sleep)
    assert waits == [0.1, 0.2, 0.4] and [k.kid for k in cache.keys] == ["k1"]

    failures[0], waits[:], now[0] = 100, [], 0.0
    cache.retry_backoff_max_ms = 1000
    with pytest.raises(OSError, match="99 more"):          # the first error
        cache.reload(sleep)
    assert waits == [0.1, 0.2, 0.4, 0.3]                     # capped by the 1 s window
    assert [k.kid for k in cache.keys] == ["k1"]              # the old keys stay

    failures[0], waits[:], now[0] = 100, [], 0.0
    with pytest.raises(OSError):                              # a stop ends the retries at once
        cache.reload(lambda s: waits.append(s) or True)
    assert len(waits) == 1


def test_build_validator_config(tmp_path, keys):
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk(keys["rsa"], "k1")]}))
    cfg = BrokerConfig({"listener.name.sasl.sasl.oauthbearer.jwks.endpoint.url": path.as_uri(),
                        "listener.name.sasl.sasl.oauthbearer.expected.audience": "a, b",
                        "sasl.oauthbearer.expected.issuer": "iss", "sasl.oauthbearer.clock.skew.seconds": "5",
                        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "50",
                        "listener.name.sasl.sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "2000"},
                       validate=False)
    v = O.build_validator(cfg, "SASL", {}, O.SECURED_HANDLERS[1])
    try:
        assert v.audience == ["a", "b"] and v.issuer == "iss" and v.skew_s == 5
        assert [k.kid for k in v.jwks.keys] == ["k1"]
        assert (v.jwks.retry_backoff_ms, v.jwks.retry_backoff_max_ms) == (50, 2000)
    finally:
        v.close()
    assert isinstance(O.build_validator(cfg, "SASL", {}, None), O.UnsecuredValidator)
    with pytest.raises(ConfigError, match="not supported"):
        O.build_validator(cfg, "SASL", {}, "com.example.Handler")
    with pytest.raises(ConfigError, match="jwks.endpoint.url"):
        O.build_validator(BrokerConfig({}, validate=False), "SASL", {}, O.SECURED_HANDLERS[0])
    bad = BrokerConfig({"sasl.oauthbearer.jwks.endpoint.url": path.as_uri(),
                        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "500",
                        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "100"}, validate=False)
    with pytest.raises(ConfigError, match="must not be below"):
        O.build_validator(bad, "SASL", {}, O.SECURED_HANDLERS[0])
    missing = BrokerConfig({"sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "none.json").as_uri()}, validate=False)
    with pytest.raises(ConfigError, match="could not load"):
        O.build_validator(missing, "SASL", {}, O.SECURED_HANDLERS[0])


def test_inter_broker_unsecured_login():
    from broker.security.interbroker import _oauthbearer_login
    cfg = BrokerConfig({}, validate=False)
    s = _oauthbearer_login(cfg, "SASL", {"unsecuredLoginStringClaim_sub": "admin",
                                         "unsecuredLoginLifetimeSeconds": "60"})
    assert s.mechanism == "OAUTHBEARER" and s.username == "admin"
    tok = O.UnsecuredValidator({}).validate(s.token())
    assert tok.principal == "admin" and 59 <= tok.lifetime_ms / 1000 - time.time() <= 61
    with pytest.raises(ConfigError, match="unsecuredLoginStringClaim_sub"):
        _oauthbearer_login(cfg, "SASL", {})
    with pytest.raises(ConfigError):
        _oauthbearer_login(cfg, "SASL", {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginLifetimeSeconds": "x"})

"""Server side of SASL OAUTHBEARER (RFC 7628) with the two token validators Kafka ships.

The exchange (``OAuthBearerServer``):

1. The client's first message is ``n,[a=<authzid>],^Aauth=Bearer <token>^A[key=value^A]*^A``
   (``^A`` is the byte 0x01).  Anything else fails the exchange at once.  Extensions (the
   ``key=value`` pairs other than ``auth``) are accepted and ignored, as Kafka's own
   validators accept every extension.
2. The token goes to the listener's validator.  When it is valid the exchange is complete and
   the principal is ``User:<principal claim>`` (an authzid, when given, must equal it).
3. When it is not valid the server does not fail yet: it answers with a JSON error
   (``{"status":"invalid_token"}``, or ``{"status":"insufficient_scope", "scope":"[...]"}`` when a
   required scope is missing), the client acknowledges with the single byte 0x01, and only then
   does the exchange fail, with that JSON as the error message.

Validators:

``UnsecuredValidator``
    Kafka's default (no server callback handler configured): unsigned JWS tokens
    (``{"alg":"none"}``, empty signature part), checked against the ``unsecuredValidator*``
    options of the listener's OAUTHBEARER JAAS entry.  Meant for development only.
``SecuredValidator``
    KIP-768 (``OAuthBearerValidatorCallbackHandler``): signed JWTs (RS/PS/ES 256/384/512)
    verified with the keys of a JWKS document (``file:``, ``http:`` or ``https:`` URL) that a
    background thread loads at start-up and reloads every ``sasl.oauthbearer.jwks.endpoint.
    refresh.ms``; a token naming an unknown ``kid`` fails and asks for an early reload.

``unsecured_token`` mints the unsigned tokens the broker itself presents for inter-broker
OAUTHBEARER (Kafka's ``unsecuredLoginStringClaim_sub`` login options).
"""
from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import re
import threading
import time
import urllib.request
from typing import Callable, NamedTuple

from broker.config import ConfigError
from broker.security.sasl import SaslFailure

log = logging.getLogger("odradek.oauthbearer")

MECHANISM = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SECURED_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")
CTRL_A = "\x01"

# RFC 7628 / Kafka's grammar of the client's first message
_KVPAIR = r"[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01"
_FIRST = re.compile(r"n,(?:a=(?P<authzid>(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+))?,\x01"
                    rf"(?P<kvpairs>(?:{_KVPAIR})*)\x01", re.S)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


class ClientFirst(NamedTuple):
    authzid: str
    token: str
    extensions: dict


def parse_client_first(data: bytes) -> ClientFirst:
    """The client's first message -> (authzid, token, extensions); SaslFailure when malformed."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise SaslFailure("Invalid OAUTHBEARER client first message") from None
    m = _FIRST.fullmatch(text)
    if m is None:
        raise SaslFailure("Invalid OAUTHBEARER client first message")
    props = {}
    for pair in m.group("kvpairs").split(CTRL_A):
        if pair:
            key, _, value = pair.partition("=")
            props[key] = value
    auth = props.pop("auth", None)
    if auth is None:
        raise SaslFailure("Invalid OAUTHBEARER client first message: 'auth' not specified")
    am = _AUTH.fullmatch(auth)
    if am is None:
        raise SaslFailure("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if am.group("scheme").lower() != "bearer":
        raise SaslFailure(f"Invalid scheme in OAUTHBEARER client first message: {am.group('scheme')}")
    authzid = (m.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
    return ClientFirst(authzid, am.group("token"), props)


# ---------------------------------------------------------------------------- tokens

class TokenError(Exception):
    """A token failed validation.  ``scope`` is the required scope (as Kafka prints the list)
    when a required scope element was missing; the message only goes to the broker's log."""

    def __init__(self, reason: str, scope: str | None = None):
        super().__init__(reason)
        self.scope = scope


class Token(NamedTuple):
    value: str
    principal: str
    scope: frozenset
    lifetime_ms: int
    start_ms: int | None
    claims: dict


def b64url_decode(part: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_-]*", part):
        raise TokenError("malformed Base64 URL encoded value")
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise TokenError("malformed Base64 URL encoded value") from None


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _json_part(part: str) -> dict:
    raw = b64url_decode(part)
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise TokenError("malformed JSON") from None
    if not isinstance(value, dict):
        raise TokenError("malformed JSON")
    return value


def split_compact(token: str) -> tuple[str, str, str]:
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError("JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
    return parts[0], parts[1], parts[2]


def _number(claims: dict, name: str):
    v = claims.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TokenError(f"The '{name}' claim is not a number: {v!r}")
    return v


def scope_of(claims: dict, name: str, split: bool = True) -> frozenset:
    v = claims.get(name)
    if isinstance(v, str):
        return frozenset(v.split()) if split else frozenset([v])
    if isinstance(v, list):
        return frozenset(x for x in v if isinstance(x, str))
    return frozenset()


def parse_scope_option(text: str | None) -> list[str]:
    return (text or "").split()


class UnsecuredValidator:
    """Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``: unsigned tokens, for
    development.  ``options`` are the OAUTHBEARER JAAS entry's options."""

    def __init__(self, options: dict[str, str], clock: Callable[[], float] = time.time):
        self.principal_claim = (options.get("unsecuredValidatorPrincipalClaimName") or "").strip() or "sub"
        self.scope_claim = (options.get("unsecuredValidatorScopeClaimName") or "").strip() or "scope"
        self.required_scope = parse_scope_option(options.get("unsecuredValidatorRequiredScope"))
        skew = (options.get("unsecuredValidatorAllowableClockSkewMs") or "").strip()
        try:
            self.skew_ms = int(skew) if skew else 0
        except ValueError:
            raise ConfigError(f"unsecuredValidatorAllowableClockSkewMs: not an integer: {skew!r}",
                              "sasl.jaas.config") from None
        if self.skew_ms < 0:
            raise ConfigError(f"Allowable clock skew millis must not be negative: {skew}", "sasl.jaas.config")
        self._clock = clock

    def close(self) -> None:
        pass

    def validate(self, value: str) -> Token:
        if ".." in value:
            raise TokenError("Malformed compact serialization contains '..'")
        h, c, sig = split_compact(value)
        header, claims = _json_part(h), _json_part(c)
        if header.get("alg") != "none":
            raise TokenError("Unsecured JWS must have 'none' for an algorithm")
        if sig:
            raise TokenError("Unsecured JWS must not contain a digital signature")
        now_ms = self._clock() * 1000
        principal = claims.get(self.principal_claim)
        if principal is None:
            raise TokenError(f"No principal name in JWT claim: {self.principal_claim}")
        if not isinstance(principal, str):
            raise TokenError(f"The '{self.principal_claim}' claim is not a string")
        exp = _number(claims, "exp")
        if exp is None:
            raise TokenError("No expiration time in JWT")
        iat = _number(claims, "iat")
        if iat is not None and 1000 * iat > now_ms + self.skew_ms:
            raise TokenError(f"The Issued At value ({iat} s) is after the current time ({now_ms:.0f} ms) plus "
                             f"the allowable clock skew ({self.skew_ms} ms)")
        if now_ms - self.skew_ms >= 1000 * exp:
            raise TokenError(f"The current time ({now_ms:.0f} ms) minus the allowable clock skew "
                             f"({self.skew_ms} ms) is on or after the Expiration Time ({exp} s)")
        if iat is not None and exp <= iat:
            raise TokenError(f"The Expiration Time ({exp} s) is not after the Issued At time ({iat} s)")
        scope = scope_of(claims, self.scope_claim)
        for element in self.required_scope:
            if element not in scope:
                raise TokenError(f"The token's scope {sorted(scope)} lacks the required element {element!r}",
                                 scope="[" + ", ".join(self.required_scope) + "]")
        return Token(value, principal, scope, int(exp * 1000), int(iat * 1000) if iat is not None else None,
                     claims)


def unsecured_token(sub: str, lifetime_s: int = 3600, claims: dict | None = None,
                    now: float | None = None) -> str:
    """An unsigned JWS (``{"alg":"none"}``) with ``sub``, ``iat`` and ``exp``."""
    now = time.time() if now is None else now
    body = {"sub": sub, "iat": math.floor(now), "exp": math.floor(now) + int(lifetime_s), **(claims or {})}
    return (b64url_encode(b'{"alg":"none"}') + "." +
            b64url_encode(json.dumps(body, separators=(",", ":")).encode()) + ".")


# ---------------------------------------------------------------------------- signed tokens (KIP-768)

_HASHES = {"256": "SHA256", "384": "SHA384", "512": "SHA512"}
_CURVES = {"ES256": ("P-256", 32), "ES384": ("P-384", 48), "ES512": ("P-521", 66)}
ALGORITHMS = tuple(f"{f}{n}" for f in ("RS", "PS", "ES") for n in ("256", "384", "512"))


def _need_cryptography():
    import importlib.util
    if importlib.util.find_spec("cryptography") is None:
        raise ConfigError("the OAUTHBEARER secured validator (OAuthBearerValidatorCallbackHandler) needs the "
                          "'cryptography' package", "sasl.oauthbearer.jwks.endpoint.url")


def _int_b64(v) -> int:
    if not isinstance(v, str):
        raise ValueError("missing or non-string value")
    return int.from_bytes(base64.urlsafe_b64decode(v + "=" * (-len(v) % 4)), "big")


class Jwk(NamedTuple):
    kid: str | None
    kty: str
    alg: str | None
    key: object            # a cryptography public key


def load_jwks(text: str | bytes) -> list[Jwk]:
    """The usable signature keys of a JWKS document (RSA and EC public keys; others skipped)."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    doc = json.loads(text)
    keys = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(keys, list):
        raise ValueError("a JWKS document is a JSON object with a \"keys\" array")
    out = []
    for k in keys:
        if not isinstance(k, dict) or k.get("use") not in (None, "sig"):
            continue
        try:
            if k.get("kty") == "RSA":
                key = rsa.RSAPublicNumbers(_int_b64(k.get("e")), _int_b64(k.get("n"))).public_key()
            elif k.get("kty") == "EC":
                curve = {"P-256": ec.SECP256R1, "P-384": ec.SECP384R1, "P-521": ec.SECP521R1}.get(k.get("crv"))
                if curve is None:
                    continue
                key = ec.EllipticCurvePublicNumbers(_int_b64(k.get("x")), _int_b64(k.get("y")),
                                                    curve()).public_key()
            else:
                continue
        except (ValueError, binascii.Error) as e:
            log.warning("JWKS key %s skipped: %s", k.get("kid"), e)
            continue
        kid = k.get("kid")
        out.append(Jwk(kid if isinstance(kid, str) else None, k["kty"], k.get("alg"), key))
    return out


def verify_signature(alg: str, key: Jwk, signing_input: bytes, sig: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
    h = getattr(hashes, _HASHES[alg[2:]])()
    try:
        if alg.startswith(("RS", "PS")):
            if not isinstance(key.key, rsa.RSAPublicKey):
                return False
            pad = padding.PKCS1v15() if alg.startswith("RS") else \
                padding.PSS(mgf=padding.MGF1(h), salt_length=padding.PSS.DIGEST_LENGTH)
            key.key.verify(sig, signing_input, pad, h)
            return True
        if not isinstance(key.key, ec.EllipticCurvePublicKey):
            return False
        crv, size = _CURVES[alg]
        if key.key.curve.name != {"P-256": "secp256r1", "P-384": "secp384r1", "P-521": "secp521r1"}[crv] \
                or len(sig) != 2 * size:
            return False
        der = encode_dss_signature(int.from_bytes(sig[:size], "big"), int.from_bytes(sig[size:], "big"))
        key.key.verify(der, signing_input, ec.ECDSA(h))
        return True
    except InvalidSignature:
        return False


def fetch_url(url: str, timeout: float = 10.0) -> bytes:
    """The body at a ``file:``, ``http:`` or ``https:`` URL (blocking; call off the event loop)."""
    with urllib.request.urlopen(url, timeout=timeout) as r:     # noqa: S310 - the scheme is checked at start-up
        return r.read()


class JwksCache:
    """The keys of a JWKS URL, loaded at start-up and reloaded by a daemon thread every
    ``refresh_ms``; ``request_refresh()`` wakes that thread early (at most once a second).
    A reload that fails is tried again as Kafka's RefreshingHttpsJwks does: after
    ``retry_backoff_ms``, then twice as long each time, for at most ``retry_backoff_max_ms`` in
    all (``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms`` / ``.max.ms``, 100 ms / 10 s); then
    the old keys stay until the next reload."""

    def __init__(self, url: str, refresh_ms: int, fetch: Callable[[str], bytes] = fetch_url,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 10000,
                 clock: Callable[[], float] = time.monotonic):
        self.url = url
        self.refresh_ms = refresh_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self._clock = clock
        self._fetch = fetch
        self.keys: list[Jwk] = []
        self.loaded_at = 0.0
        self.refreshes = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def load(self) -> None:
        keys = load_jwks(self._fetch(self.url))
        self.keys = keys
        self.loaded_at = time.monotonic()
        self.refreshes += 1
        log.info("loaded %d JWKS key(s) from %s", len(keys), self.url)

    def start(self) -> None:
        try:
            self.load()
        except Exception as e:   # noqa: BLE001 - any failure to read the keys stops the broker here
            raise ConfigError(f"could not load the JWKS from sasl.oauthbearer.jwks.endpoint.url={self.url}: {e}",
                              "sasl.oauthbearer.jwks.endpoint.url") from None
        self._thread = threading.Thread(target=self._run, name="oauthbearer-jwks", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.refresh_ms / 1000)
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                self.reload(self._stop.wait)
            except Exception as e:   # noqa: BLE001 - keep the old keys, try again later
                log.warning("could not reload the JWKS from %s: %s", self.url, e)
            self._stop.wait(1.0)        # at most one reload a second however often it is asked

    def reload(self, sleep: Callable[[float], object]) -> None:
        """``load()``, tried again after failures (Kafka's Retry): waits of ``retry_backoff_ms``
        doubling each time, within ``retry_backoff_max_ms`` of the first attempt; the first
        error is raised when that time is up.  ``sleep`` returning true (the stop event) ends
        the retries."""
        end = self._clock() + self.retry_backoff_max_ms / 1000
        attempt = 0
        first: Exception | None = None
        while self._clock() <= end:
            attempt += 1
            try:
                self.load()
                return
            except Exception as e:   # noqa: BLE001 - retried, the first error is the one raised
                first = first or e
                wait = min(self.retry_backoff_ms * 2 ** (attempt - 1) / 1000, end - self._clock())
                if wait <= 0:
                    break
                log.warning("JWKS reload attempt %d from %s failed (%s); trying again in %d ms",
                            attempt, self.url, e, wait * 1000)
                if sleep(wait):
                    break
        raise first if first is not None else RuntimeError("no JWKS reload attempt was made")

    def request_refresh(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()


class SecuredValidator:
    """Kafka's ``OAuthBearerValidatorCallbackHandler`` (KIP-768): signed JWTs checked against
    the JWKS keys, ``exp``/``iat`` (both required), ``nbf``, ``aud`` and ``iss``."""

    MISSING_KID_BACKOFF_S = 60.0

    def __init__(self, jwks: JwksCache, *, audience=(), issuer: str | None = None, sub_claim: str = "sub",
                 scope_claim: str = "scope", skew_s: int = 30, clock: Callable[[], float] = time.time):
        self.jwks = jwks
        self.audience = [a for a in audience if a]
        self.issuer = issuer or None
        self.sub_claim = sub_claim or "sub"
        self.scope_claim = scope_claim or "scope"
        self.skew_s = skew_s
        self._clock = clock
        self._missing: dict[str, float] = {}

    def close(self) -> None:
        self.jwks.close()

    def _key_candidates(self, header: dict, alg: str) -> list[Jwk]:
        kty = "RSA" if alg[:2] in ("RS", "PS") else "EC"
        kid = header.get("kid")
        keys = [k for k in self.jwks.keys if k.kty == kty and (k.alg is None or k.alg == alg)]
        if kid is not None:
            keys = [k for k in keys if k.kid == kid]
            if not keys:
                now = time.monotonic()
                if now - self._missing.get(str(kid), -1e9) >= self.MISSING_KID_BACKOFF_S:
                    self._missing[str(kid)] = now
                    if len(self._missing) > 16:
                        self._missing.pop(next(iter(self._missing)))
                    self.jwks.request_refresh()
                raise TokenError(f"no JWKS key with kid {str(kid)[:100]!r} (a JWKS reload was requested)")
        if not keys:
            raise TokenError(f"no JWKS key fits algorithm {alg}")
        return keys

    def validate(self, value: str) -> Token:
        h, c, s = split_compact(value)
        header, claims = _json_part(h), _json_part(c)
        alg = header.get("alg")
        if alg == "none" or alg not in ALGORITHMS:
            raise TokenError(f"JWS algorithm {alg!r} is not allowed")
        sig = b64url_decode(s)
        signing_input = f"{h}.{c}".encode("ascii")
        if not any(verify_signature(alg, k, signing_input, sig) for k in self._key_candidates(header, alg)):
            raise TokenError("JWS signature verification failed")
        now = self._clock()
        exp, iat, nbf = _number(claims, "exp"), _number(claims, "iat"), _number(claims, "nbf")
        if exp is None:
            raise TokenError("No Expiration Time (exp) claim present")
        if iat is None:
            raise TokenError("No Issued At (iat) claim present")
        if exp < 0 or iat < 0:
            raise TokenError("exp and iat must be non-negative")
        if now - self.skew_s >= exp:
            raise TokenError(f"The JWT is no longer valid: exp {exp} is on or before now {now:.0f} minus "
                             f"the allowed skew {self.skew_s} s")
        if iat > now + self.skew_s:
            raise TokenError(f"iat {iat} is after now {now:.0f} plus the allowed skew {self.skew_s} s")
        if nbf is not None and nbf > now + self.skew_s:
            raise TokenError(f"The JWT is not yet valid: nbf {nbf}")
        aud = claims.get("aud")
        auds = [aud] if isinstance(aud, str) else [a for a in aud if isinstance(a, str)] if isinstance(aud, list) \
            else None
        if aud is not None and auds is None:
            raise TokenError("aud claim is neither a string nor an array of strings")
        if auds is not None and not set(auds) & set(self.audience):
            # as Kafka's jose4j consumer: a token naming an audience needs one that is expected
            raise TokenError(f"Audience {auds} is not one of the expected {self.audience}")
        if auds is None and self.audience:
            raise TokenError("No Audience (aud) claim present")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise TokenError(f"Issuer {claims.get('iss')!r} is not the expected {self.issuer!r}")
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise TokenError(f"{self.sub_claim} value must be a non-empty string")
        scope = scope_of(claims, self.scope_claim, split=False)
        return Token(value, sub.strip(), scope, int(exp * 1000), int(iat * 1000), claims)


# ---------------------------------------------------------------------------- the exchange

class OAuthBearerServer:
    mechanism = MECHANISM

    def __init__(self, validator):
        self._validator = validator
        self._error: str | None = None
        self.complete = False
        self.authorization_id: str | None = None
        self.token: Token | None = None
        self.extensions: dict = {}

    def evaluate(self, data: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("OAUTHBEARER exchange already complete")
        data = bytes(data)
        if data == b"\x01" and self._error is not None:
            raise SaslFailure(self._error)
        self._error = None
        first = parse_client_first(data)
        try:
            token = self._validator.validate(first.token)
        except TokenError as e:
            log.info("OAUTHBEARER token refused: %s", e)
            status = "insufficient_scope" if e.scope is not None else "invalid_token"
            self._error = f'{{"status":"{status}"' + (f', "scope":"{e.scope}"' if e.scope is not None else "") + "}"
            return self._error.encode("utf-8")
        if first.authzid and first.authzid != token.principal:
            raise SaslFailure(f"Authentication failed: Client requested an authorization id ({first.authzid}) "
                              f"that is different from the token's principal name ({token.principal})")
        self.token, self.extensions = token, first.extensions
        self.authorization_id = token.principal
        self.complete = True
        return b""

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the token expires (ms since the epoch): the end of the session (KIP-368)."""
        return self.token.lifetime_ms if self.token is not None else None


# ---------------------------------------------------------------------------- configuration

def _listener_raw(cfg, listener: str, key: str):
    from broker.security.tls import listener_value
    return listener_value(cfg, listener, key)


def _as_int(cfg, listener, key, default):
    v = _listener_raw(cfg, listener, key)
    if v is None:
        return default
    try:
        return int(str(v).strip())
    except ValueError:
        raise ConfigError(f"Invalid value {v} for configuration {key}: Not a number of type "
                          f"{'INT' if key.endswith('seconds') else 'LONG'}", key) from None


def _as_list(v) -> list[str]:
    if v is None:
        return []
    items = v.split(",") if isinstance(v, str) else v
    return [str(x).strip() for x in items if str(x).strip()]


def build_validator(cfg, listener: str, jaas_options: dict[str, str], handler: str | None,
                    fetch: Callable[[str], bytes] = fetch_url):
    """The validator of ``listener``: unsecured when ``handler`` is empty, KIP-768's secured
    one for OAuthBearerValidatorCallbackHandler; ConfigError for anything else."""
    handler = (handler or "").strip()
    if not handler:
        return UnsecuredValidator(jaas_options)
    if handler not in SECURED_HANDLERS:
        raise ConfigError(f"listener {listener}: OAUTHBEARER server callback handler {handler} is not supported; "
                          f"leave it unset (unsecured tokens) or use {SECURED_HANDLERS[0]}",
                          "sasl.server.callback.handler.class")
    _need_cryptography()
    url = _listener_raw(cfg, listener, "sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise ConfigError(f"listener {listener}: {handler} needs sasl.oauthbearer.jwks.endpoint.url",
                          "sasl.oauthbearer.jwks.endpoint.url")
    url = str(url).strip()
    if url.split(":", 1)[0].lower() not in ("file", "http", "https"):
        raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url={url}: only file:, http: and https: URLs are "
                          "supported", "sasl.oauthbearer.jwks.endpoint.url")
    refresh_ms = _as_int(cfg, listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 3600000)
    if refresh_ms <= 0:
        raise ConfigError("sasl.oauthbearer.jwks.endpoint.refresh.ms must be positive",
                          "sasl.oauthbearer.jwks.endpoint.refresh.ms")
    skew = _as_int(cfg, listener, "sasl.oauthbearer.clock.skew.seconds", 30)
    backoff = _as_int(cfg, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100)
    backoff_max = _as_int(cfg, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 10000)
    if backoff < 0 or backoff_max < backoff:
        raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms ({backoff_max}) must not be "
                          f"below sasl.oauthbearer.jwks.endpoint.retry.backoff.ms ({backoff}), which must not be "
                          "negative", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")
    jwks = JwksCache(url, refresh_ms, fetch, backoff, backoff_max)
    v = SecuredValidator(
        jwks,
        audience=_as_list(_listener_raw(cfg, listener, "sasl.oauthbearer.expected.audience")),
        issuer=(str(_listener_raw(cfg, listener, "sasl.oauthbearer.expected.issuer") or "").strip() or None),
        sub_claim=str(_listener_raw(cfg, listener, "sasl.oauthbearer.sub.claim.name") or "sub").strip(),
        scope_claim=str(_listener_raw(cfg, listener, "sasl.oauthbearer.scope.claim.name") or "scope").strip(),
        skew_s=skew)
    jwks.start()
    return v

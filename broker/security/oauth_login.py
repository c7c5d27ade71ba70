"""OAUTHBEARER logins of the broker (to other brokers) and of the project's tools: Kafka's
unsecured default, or a token from an identity provider (KIP-768's client side).

How this works
--------------
* ``login_for(get, jaas_options, what)`` picks the login the way Kafka's client does:
  ``sasl.login.callback.handler.class`` naming Kafka's OAuthBearerLoginCallbackHandler (the
  ``oauthbearer`` or older ``oauthbearer.secured`` package) means a token from
  ``sasl.oauthbearer.token.endpoint.url``; otherwise the unsecured login
  (``unsecuredLoginStringClaim_sub``).  ``get(key)`` reads a config the caller's way
  (listener and mechanism prefixes for a broker, the properties file for a tool).
* ``TokenEndpointLogin`` asks the endpoint with the OAuth 2 client credentials grant, as
  Kafka's HttpAccessTokenRetriever does: a POST of ``grant_type=client_credentials`` (and
  ``scope`` when the JAAS entry gives one) with HTTP basic authentication of the URL-encoded
  ``clientId`` and ``clientSecret``; the answer's ``access_token`` is the token.  A ``file:``
  URL is read instead (Kafka accepts a token file there too).  Failures (I/O errors and 5xx
  answers) are retried with ``sasl.login.retry.backoff.ms`` doubling up to
  ``sasl.login.retry.backoff.max.ms``; a 4xx answer is not retried.
* The token is checked as Kafka's ClientJwtValidator does (a JWT with ``exp``, ``iat`` if
  present, and the ``sasl.oauthbearer.sub.claim.name`` claim, default ``sub``), then kept
  until ``sasl.login.refresh.window.factor`` (0.8) of its life has passed; the next login after
  that fetches a new one.  Signatures are the broker's business, not the client's.
"""
from __future__ import annotations

import base64
import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from broker.config import ConfigError

log = logging.getLogger("odradek.oauth")

LOGIN_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                  "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler")


class TokenError(Exception):
    """No usable token could be had; the message says why."""


def jwt_claims(token: str) -> dict:
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError("the token is not a JWT (three base64url parts)")
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise TokenError(f"the token's payload is not JSON: {e}") from None
    if not isinstance(claims, dict):
        raise TokenError("the token's payload is not a JSON object")
    return claims


class TokenEndpointLogin:
    def __init__(self, url: str, client_id: str, client_secret: str, scope: str | None = None, *,
                 sub_claim: str = "sub", connect_timeout_ms: int = 10000, read_timeout_ms: int = 10000,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 10000,
                 refresh_window_factor: float = 0.8):
        self.url, self.client_id, self.client_secret, self.scope = url, client_id, client_secret, scope
        self.sub_claim = sub_claim
        self.timeout = max(connect_timeout_ms, read_timeout_ms) / 1000
        self.backoff, self.backoff_max = retry_backoff_ms / 1000, retry_backoff_max_ms / 1000
        self.refresh_window_factor = refresh_window_factor
        self._lock = threading.Lock()
        self._token: str | None = None
        self._refresh_at = 0.0
        self.principal: str | None = None

    def token(self) -> str:
        """A valid token: the cached one, or a new one once its refresh time has come."""
        with self._lock:
            if self._token is None or time.time() >= self._refresh_at:
                self._token, self._refresh_at = self._fetch()
            return self._token

    def _fetch(self) -> tuple[str, float]:
        delay, waited, last = self.backoff, 0.0, None
        while True:
            try:
                token = self._ask()
                break
            except TokenError as e:
                if not getattr(e, "retriable", False) or waited >= self.backoff_max:
                    raise
                last = e
            log.warning("token endpoint %s: %s; retrying in %.1f s", self.url, last, delay)
            time.sleep(delay)
            waited += delay
            delay = min(delay * 2, self.backoff_max)
        claims = jwt_claims(token)
        exp, iat = claims.get("exp"), claims.get("iat")
        if not isinstance(exp, (int, float)):
            raise TokenError("the token has no exp claim")
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise TokenError(f"the token has no {self.sub_claim} claim")
        now = time.time()
        if exp <= now:
            raise TokenError("the token the endpoint gave has already expired")
        start = iat if isinstance(iat, (int, float)) and iat <= now else now
        self.principal = sub
        return token, start + (exp - start) * self.refresh_window_factor

    def _ask(self) -> str:
        if self.url.startswith("file:"):
            path = urllib.parse.urlparse(self.url).path
            try:
                with open(urllib.request.url2pathname(path), encoding="utf-8") as f:
                    return f.read().strip()
            except OSError as e:
                raise TokenError(f"cannot read the token file: {e}") from None
        body = {"grant_type": "client_credentials"}
        if self.scope:
            body["scope"] = self.scope
        basic = base64.b64encode(f"{urllib.parse.quote(self.client_id, safe='')}:"
                                 f"{urllib.parse.quote(self.client_secret, safe='')}".encode()).decode()
        req = urllib.request.Request(self.url, data=urllib.parse.urlencode(body).encode(), method="POST", headers={
            "Authorization": f"Basic {basic}", "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json", "Cache-Control": "no-cache"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                text = resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            err = TokenError(f"HTTP {e.code} from the token endpoint: {e.read()[:200].decode('utf-8', 'replace')}")
            err.retriable = e.code >= 500
            raise err from None
        except (urllib.error.URLError, OSError) as e:
            err = TokenError(f"cannot reach the token endpoint: {e}")
            err.retriable = True
            raise err from None
        try:
            doc = json.loads(text)
            token = doc["access_token"]
        except (ValueError, KeyError, TypeError):
            raise TokenError(f"the token endpoint's answer has no access_token: {text[:200]}") from None
        if not isinstance(token, str) or not token:
            raise TokenError("the token endpoint's access_token is empty")
        return token


def login_for(get, opts: dict, what: str):
    """(name for log lines, token callable) of an OAUTHBEARER login; ``get(key, default)`` reads
    a client config, ``opts`` are the OAuthBearerLoginModule options, ``what`` names the JAAS
    entry in messages.  ConfigError when the entry lacks what the login needs."""
    handler = get("sasl.login.callback.handler.class", None)
    if handler:
        if handler not in LOGIN_HANDLERS:
            raise ConfigError(f"sasl.login.callback.handler.class={handler} is not supported; use "
                              f"{LOGIN_HANDLERS[0]}", "sasl.login.callback.handler.class")
        url = get("sasl.oauthbearer.token.endpoint.url", None)
        if not url:
            raise ConfigError(f"{handler} needs sasl.oauthbearer.token.endpoint.url",
                              "sasl.oauthbearer.token.endpoint.url")
        client_id, secret = opts.get("clientId"), opts.get("clientSecret")
        if not url.startswith("file:") and (not client_id or secret is None):
            raise ConfigError(f"an OAUTHBEARER login at a token endpoint needs clientId and clientSecret in {what}",
                              "sasl.jaas.config")

        def num(key, default):
            try:
                return type(default)(get(key, default))
            except (TypeError, ValueError):
                raise ConfigError(f"{key}: not a number", key) from None
        login = TokenEndpointLogin(
            url, client_id or "", secret or "", opts.get("scope"),
            sub_claim=get("sasl.oauthbearer.sub.claim.name", "sub") or "sub",
            connect_timeout_ms=num("sasl.login.connect.timeout.ms", 10000),
            read_timeout_ms=num("sasl.login.read.timeout.ms", 10000),
            retry_backoff_ms=num("sasl.login.retry.backoff.ms", 100),
            retry_backoff_max_ms=num("sasl.login.retry.backoff.max.ms", 10000),
            refresh_window_factor=num("sasl.login.refresh.window.factor", 0.8))
        return client_id or url, login.token
    from broker.security.oauthbearer import unsecured_token
    sub = opts.get("unsecuredLoginStringClaim_sub")
    if not sub:
        raise ConfigError(f"an OAUTHBEARER login needs unsecuredLoginStringClaim_sub=\"<name>\" in {what}, or "
                          f"sasl.login.callback.handler.class={LOGIN_HANDLERS[0]} with a token endpoint",
                          "sasl.jaas.config")
    raw = (opts.get("unsecuredLoginLifetimeSeconds") or "3600").strip()
    try:
        lifetime = int(raw)
    except ValueError:
        raise ConfigError(f"unsecuredLoginLifetimeSeconds: not an integer: {raw!r}", "sasl.jaas.config") from None
    if lifetime <= 0:
        raise ConfigError("unsecuredLoginLifetimeSeconds must be positive", "sasl.jaas.config")
    return sub, lambda: unsecured_token(sub, lifetime)

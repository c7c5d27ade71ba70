"""Server side of SASL PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802/7677), and the per
connection authentication state Kafka's SaslServerAuthenticator keeps.

Connection states on a SASL listener:

``handshake``     only ApiVersions and SaslHandshake are accepted; anything else closes the
                  connection (Kafka's IllegalSaslStateException).
``authenticate``  after SaslHandshake v1: SaslAuthenticate requests carry the tokens
                  (ApiVersions still allowed).
``raw``           after SaslHandshake v0: the next frames are bare SASL tokens (no request
                  header); each answer is a bare size-prefixed token.
``done``          authenticated: every request is served; the principal is ``User:<name>``.

A failed exchange answers SASL_AUTHENTICATION_FAILED (SaslAuthenticate) and closes the
connection (a bare-token exchange is just closed).  Re-authentication (KIP-368) is not offered:
SaslAuthenticate after success is ILLEGAL_SASL_STATE and session_lifetime_ms is 0.
"""
from __future__ import annotations

import hmac
import logging

from protocol import scram as S

log = logging.getLogger("odradek.sasl")

ANONYMOUS = "User:ANONYMOUS"


class SaslFailure(Exception):
    """Authentication failed; the message goes to the client."""


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]):
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode("utf-8"), password.encode("utf-8")):
            raise SaslFailure("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is "
                              "different from username")
        self.authorization_id = user
        self.complete = True
        return b""


class ScramServer:
    """RFC 5802 server; ``lookup(user)`` -> Credential or None.

    Delegation tokens: a client-first message with the extension ``tokenauth=true`` (Kafka's
    ScramExtensions, ``key=value`` attributes after the nonce) names a token id as user name;
    ``token_lookup(token_id, mechanism)`` gives (credential, owner principal, expiry ms) of a live
    token or None.  The session's principal is then the token's owner, marked
    ``token_authenticated``, and its credential expires with the token."""

    def __init__(self, mechanism: str, lookup, token_lookup=None):
        self.mechanism = mechanism
        self._lookup = lookup
        self._token_lookup = token_lookup
        self._state = 0
        self.complete = False
        self.authorization_id: str | None = None
        self.principal: str | None = None          # set for a token login (the owner)
        self.token_authenticated = False
        self.credential_expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SCRAM message: not UTF-8") from None
        try:
            if self._state == 0:
                return self._first(text)
            if self._state == 1:
                return self._final(text)
        except S.ScramError as e:
            raise SaslFailure(f"Authentication failed: {e}") from None
        raise SaslFailure("SCRAM exchange already complete")

    def _first(self, text: str) -> bytes:
        # gs2-header: "n,," or "y,," (no channel binding); "p=" asks for binding we do not offer
        if text.startswith("p="):
            raise S.ScramError("channel binding is not supported")
        if not (text.startswith("n,") or text.startswith("y,")):
            raise S.ScramError("invalid client-first-message")
        cbflag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        self._gs2 = f"{cbflag},{authzid},"
        attrs, extensions = S.parse_client_first_bare(bare)
        user = S.unescape_username(attrs.get("n", ""))
        cnonce = attrs.get("r", "")
        if not user or not cnonce:
            raise S.ScramError("invalid client-first-message")
        if extensions.get("tokenauth", "").lower() == "true":
            found = self._token_lookup(user, self.mechanism) if self._token_lookup is not None else None
            if found is None:
                raise SaslFailure(f"Token Authentication failed: Invalid tokenId : {user}")
            cred, owner, expiry_ms = found
            self.principal, self.token_authenticated, self.credential_expiry_ms = owner, True, expiry_ms
        else:
            cred = self._lookup(user)
        if authzid:
            az = S.unescape_username(authzid[2:]) if authzid.startswith("a=") else None
            if az != user:
                raise SaslFailure("Authentication failed: Client requested an authorization id that is "
                                  "different from username")
        if cred is None:
            raise SaslFailure("Authentication failed: Invalid user credentials")
        if cred.iterations < S.MIN_ITERATIONS:
            raise SaslFailure(f"Iterations {cred.iterations} is less than the minimum {S.MIN_ITERATIONS} "
                              f"for {self.mechanism}")
        self._user, self._cred = user, cred
        self._nonce = cnonce + S.nonce()
        self._client_first_bare = bare
        self._server_first = f"r={self._nonce},s={S.b64(cred.salt)},i={cred.iterations}"
        self._state = 1
        return self._server_first.encode("utf-8")

    def _final(self, text: str) -> bytes:
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise S.ScramError("invalid client-final-message")
        attrs = S.parse_attributes(without_proof)
        if S.unb64(attrs.get("c", "")) != self._gs2.encode("utf-8"):
            raise S.ScramError("invalid channel binding")
        if attrs.get("r") != self._nonce:
            raise S.ScramError("invalid nonce")
        proof = S.unb64(proof_part)
        h = S.hash_name(self.mechanism)
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode("utf-8")
        signature = hmac.new(self._cred.stored_key, auth_message, h).digest()
        if len(proof) != len(signature):
            raise SaslFailure("Authentication failed: Invalid user credentials")
        ckey = S.xor(proof, signature)
        if not hmac.compare_digest(S.stored_key(self.mechanism, ckey), self._cred.stored_key):
            raise SaslFailure("Authentication failed: Invalid user credentials")
        server_sig = hmac.new(self._cred.server_key, auth_message, h).digest()
        self.authorization_id = self._user
        self.complete = True
        self._state = 2
        return f"v={S.b64(server_sig)}".encode("utf-8")


class SecuritySession:
    """Authentication state and principal of one connection.

    Re-authentication (KIP-368): a session gets a lifetime when ``connections.max.reauth.ms``
    (``reauth_ms(mechanism)``) is positive or its credential expires (an OAUTHBEARER token): the
    shorter of the two, sent to the client as ``session_lifetime_ms``.  Before it ends the client
    may authenticate again on the same connection (SaslHandshake v1 + SaslAuthenticate, the same
    mechanism, the same principal, at most once a second); a request that arrives after it ended
    closes the connection (``expired``)."""
    __slots__ = ("listener", "protocol", "principal", "state", "mechanisms", "server", "close_after_response",
                 "_factory", "_reauth_ms", "mechanism", "expires_at", "session_lifetime_ms", "_previous",
                 "_bad_mechanism", "_reauth_started", "token_authenticated", "_build_principal")

    def __init__(self, listener: str, protocol: str, mechanisms=(), factory=None, principal: str = ANONYMOUS,
                 reauth_ms=None, build_principal=None):
        self.listener = listener
        self.protocol = protocol
        self.principal = principal
        self.mechanisms = list(mechanisms)
        self._factory = factory
        self._reauth_ms = reauth_ms or (lambda mechanism: 0)
        self.server = None
        self.close_after_response = False
        self.state = "handshake" if protocol in ("SASL_PLAINTEXT", "SASL_SSL") else "done"
        self.mechanism: str | None = None       # of the current (or last) authentication
        self.expires_at: float | None = None    # time.monotonic() when the session ends; None: never
        self.session_lifetime_ms = 0
        self._previous: tuple[str, str] | None = None      # (mechanism, principal) while re-authenticating
        self._bad_mechanism: str | None = None
        self._reauth_started = 0.0
        self.token_authenticated = False        # logged in with a delegation token (SCRAM tokenauth)
        # principal.builder.class (builder.py): (mechanism, authorization id) -> "Type:name"
        self._build_principal = build_principal

    @property
    def authenticated(self) -> bool:
        return self.state == "done"

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    def expired(self, now: float) -> bool:
        return self.state == "done" and self.expires_at is not None and now >= self.expires_at

    def begin_reauthentication(self, now: float) -> bool:
        """A SaslHandshake on an authenticated connection: True when it starts a re-authentication
        (the session has a lifetime and the last one began a second or more ago); otherwise the
        handshake is refused as before (ILLEGAL_SASL_STATE)."""
        if self.state != "done" or self.expires_at is None:
            return False
        if self._reauth_started and now - self._reauth_started < 1.0:
            return False
        self._reauth_started = now
        self._previous = (self.mechanism, self.principal)
        self._bad_mechanism = None
        self.state = "handshake"
        return True

    def handshake(self, mechanism: str, version: int) -> int:
        """SaslHandshake: 0, ILLEGAL_SASL_STATE (34) or UNSUPPORTED_SASL_MECHANISM (33)."""
        if self.state != "handshake" or (self.reauthenticating and version == 0):
            self.close_after_response = True
            return 34
        if mechanism not in self.mechanisms:
            self.close_after_response = True
            return 33
        if self.reauthenticating and mechanism != self._previous[0]:
            # answered as a good handshake; the SaslAuthenticate that follows fails (as Kafka)
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                   f"re-authentication of mechanism '{self._previous[0]}'")
        else:
            self.server = self._factory(mechanism)
        self.state = "raw" if version == 0 else "authenticate"
        return 0

    def step(self, token: bytes) -> bytes:
        """One token of the exchange; SaslFailure closes the connection."""
        try:
            if self._bad_mechanism is not None:
                raise SaslFailure(self._bad_mechanism)
            out = self.server.evaluate(bytes(token))
            if self.server.complete:
                principal = getattr(self.server, "principal", None)     # a delegation token's owner
                if principal is None and self._build_principal is not None:
                    from broker.security.builder import PrincipalBuilderError
                    try:
                        principal = self._build_principal(self.server.mechanism, self.server.authorization_id)
                    except PrincipalBuilderError as e:
                        raise SaslFailure(f"principal.builder.class: {e}") from None
                if principal is None:
                    principal = "User:" + self.server.authorization_id
                if self.reauthenticating and principal != self._previous[1]:
                    raise SaslFailure("Cannot change principals during re-authentication from "
                                      f"{self._previous[1].replace(':', '.', 1)}: {principal.replace(':', '.', 1)}")
        except SaslFailure as e:
            log.info("SASL %s %s failed on listener %s: %s", self._bad_mechanism and self._previous[0]
                     or self.server.mechanism, "re-authentication" if self.reauthenticating else "authentication",
                     self.listener, e)
            self.close_after_response = True
            raise
        if self.server.complete:
            self.principal = principal
            self.mechanism = self.server.mechanism
            self.token_authenticated = bool(getattr(self.server, "token_authenticated", False))
            self.state = "done"
            self._previous = None
            self._start_session()
        return out

    def _start_session(self) -> None:
        """Kafka's session lifetime: connections.max.reauth.ms, the credential's expiry, or the
        shorter of both; 0 (and no expiry) when neither applies."""
        import time
        max_ms = self._reauth_ms(self.mechanism) or 0
        expiry_ms = getattr(self.server, "credential_expiry_ms", None)
        lifetime = None
        if expiry_ms is not None:
            lifetime = max(0, int(expiry_ms - time.time() * 1000))
            if max_ms > 0:
                lifetime = min(lifetime, max_ms)
        elif max_ms > 0:
            lifetime = max_ms
        self.session_lifetime_ms = lifetime or 0
        self.expires_at = None if lifetime is None else time.monotonic() + lifetime / 1000

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
    """RFC 5802 server; ``lookup(user)`` -> Credential or None."""

    def __init__(self, mechanism: str, lookup):
        self.mechanism = mechanism
        self._lookup = lookup
        self._state = 0
        self.complete = False
        self.authorization_id: str | None = None

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
        attrs = S.parse_attributes(bare)
        user = S.unescape_username(attrs.get("n", ""))
        cnonce = attrs.get("r", "")
        if not user or not cnonce:
            raise S.ScramError("invalid client-first-message")
        if authzid:
            az = S.unescape_username(authzid[2:]) if authzid.startswith("a=") else None
            if az != user:
                raise SaslFailure("Authentication failed: Client requested an authorization id that is "
                                  "different from username")
        cred = self._lookup(user)
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
    """Authentication state and principal of one connection."""
    __slots__ = ("listener", "protocol", "principal", "state", "mechanisms", "server", "close_after_response",
                 "_factory")

    def __init__(self, listener: str, protocol: str, mechanisms=(), factory=None, principal: str = ANONYMOUS):
        self.listener = listener
        self.protocol = protocol
        self.principal = principal
        self.mechanisms = list(mechanisms)
        self._factory = factory
        self.server = None
        self.close_after_response = False
        self.state = "handshake" if protocol in ("SASL_PLAINTEXT", "SASL_SSL") else "done"

    @property
    def authenticated(self) -> bool:
        return self.state == "done"

    def handshake(self, mechanism: str, version: int) -> int:
        """SaslHandshake: 0, ILLEGAL_SASL_STATE (34) or UNSUPPORTED_SASL_MECHANISM (33)."""
        if self.state != "handshake":
            self.close_after_response = True
            return 34
        if mechanism not in self.mechanisms:
            self.close_after_response = True
            return 33
        self.server = self._factory(mechanism)
        self.state = "raw" if version == 0 else "authenticate"
        return 0

    def step(self, token: bytes) -> bytes:
        """One token of the exchange; SaslFailure closes the connection."""
        try:
            out = self.server.evaluate(bytes(token))
        except SaslFailure as e:
            log.info("SASL %s authentication failed on listener %s: %s", self.server.mechanism, self.listener, e)
            self.close_after_response = True
            raise
        if self.server.complete:
            self.principal = "User:" + self.server.authorization_id
            self.state = "done"
        return out

"""Delegation tokens (KIP-48, with KIP-373's owner and requester), as Kafka 3.x keeps them.

A token is a row of metadata -- id, owner, the principal that asked for it (the requester),
the principals allowed to renew it, and three timestamps (issued, expires, may live at most
until) -- plus a secret, its HMAC: HMAC-SHA512 keyed with ``delegation.token.secret.key`` over
the UTF-8 token id.  The HMAC is never stored; every broker recomputes it from the shared key.

Storage is the metadata layer's (``Controller.delegation_tokens``): per token the JSON Kafka
writes to ``/delegation_token/tokens/<tokenId>`` (version 3, principals sanitized), the same
document in the embedded store and in ZooKeeper.

Arithmetic (all in ms since the epoch):

* create: ``max = issue + (min(requested, max.lifetime) if requested > 0 else max.lifetime)``,
  ``expiry = min(max, issue + expiry.time.ms)``.
* renew by ``period`` (negative: ``expiry.time.ms``): ``expiry = min(max, now + period)``.
* expire by ``period``: negative removes the token at once, otherwise
  ``expiry = min(max, now + period)``.
* a token has expired when ``now`` is past its expiry or its max timestamp; expired tokens are
  removed every ``delegation.token.expiry.check.interval.ms``.

Logging in with a token: SCRAM-SHA-256/512 with the ``tokenauth=true`` extension, the token id
as user name and base64(HMAC) as password.  The broker derives a SCRAM credential from that
password per token and mechanism (random salt, 4096 iterations, as Kafka does), kept in memory
only.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac as _hmac
import logging
import time
import uuid
from dataclasses import dataclass, field, replace

from protocol import scram as S

log = logging.getLogger("odradek.tokens")

JSON_VERSION = 3
ERROR_TIMESTAMP = -1


def token_hmac(secret_key: str, token_id: str) -> bytes:
    """HmacSHA512(secret key, token id): the token's password (raw bytes)."""
    return _hmac.new(secret_key.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def new_token_id() -> str:
    """A random UUID as URL-safe base64 without padding (22 characters), like Kafka's ids."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def split_principal(principal: str) -> tuple[str, str]:
    """``"User:alice"`` -> ("User", "alice")."""
    kind, sep, name = principal.partition(":")
    if not sep:
        raise ValueError(f"expected a principal of the form <type>:<name>, got {principal!r}")
    return kind, name


def _sanitize(s: str) -> str:
    from controller.zookeeper.znodes import sanitize
    return sanitize(s)


def _desanitize(s: str) -> str:
    from controller.zookeeper.znodes import desanitize
    return desanitize(s)


@dataclass(frozen=True)
class TokenInfo:
    token_id: str
    owner: str                      # "User:alice"
    requester: str
    renewers: tuple[str, ...] = field(default=())
    issue_ms: int = 0
    max_ms: int = 0
    expiry_ms: int = 0

    def owner_or_renewer(self, principal: str) -> bool:
        """May renew or expire the token (Kafka's allowedToRenew)."""
        return principal == self.owner or principal in self.renewers

    def involves(self, principal: str) -> bool:
        """Owner, requester or renewer (Kafka's TokenInformation.ownerOrRenewer, used by Describe)."""
        return principal == self.owner or principal == self.requester or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms

    def to_json(self) -> dict:
        """Kafka's /delegation_token/tokens/<id> document (DelegationTokenManagerZk, version 3)."""
        return {"version": JSON_VERSION, "owner": _sanitize(self.owner), "tokenRequester": _sanitize(self.requester),
                "renewers": [_sanitize(r) for r in self.renewers], "issueTimestamp": self.issue_ms,
                "maxTimestamp": self.max_ms, "expiryTimestamp": self.expiry_ms, "tokenId": self.token_id}

    @classmethod
    def from_json(cls, doc: dict) -> "TokenInfo":
        version = int(doc["version"])
        if not 0 < version <= JSON_VERSION:
            raise ValueError(f"unsupported delegation token version {version}")
        owner = _desanitize(doc["owner"])
        requester = _desanitize(doc["tokenRequester"]) if version >= 3 else owner
        for p in (owner, requester):
            split_principal(p)
        return cls(str(doc["tokenId"]), owner, requester, tuple(_desanitize(r) for r in doc.get("renewers", [])),
                   int(doc["issueTimestamp"]), int(doc["maxTimestamp"]), int(doc["expiryTimestamp"]))


def new_token(owner: str, requester: str, renewers, requested_max_ms: int, now_ms: int,
              max_lifetime_ms: int, expiry_time_ms: int, token_id: str | None = None) -> TokenInfo:
    lifetime = max_lifetime_ms if requested_max_ms <= 0 else min(requested_max_ms, max_lifetime_ms)
    max_ts = now_ms + lifetime
    return TokenInfo(token_id or new_token_id(), owner, requester, tuple(renewers), now_ms, max_ts,
                     min(max_ts, now_ms + expiry_time_ms))


def renewed(info: TokenInfo, now_ms: int, period_ms: int, expiry_time_ms: int) -> TokenInfo:
    period = expiry_time_ms if period_ms < 0 else period_ms
    return replace(info, expiry_ms=min(info.max_ms, now_ms + period))


class TokenManager:
    """The broker's view of the tokens: reads the controller's store, computes HMACs and SCRAM
    credentials, and runs create / renew / expire with Kafka's rules (error codes as returned
    values, the handlers turn them into responses)."""

    def __init__(self, broker):
        self.broker = broker
        cfg = broker.config
        key = cfg.get("delegation.token.secret.key") or cfg.get("delegation.token.master.key")
        self.secret_key: str | None = str(key) if key else None
        self.max_lifetime_ms = int(cfg.get("delegation.token.max.lifetime.ms"))
        self.expiry_time_ms = int(cfg.get("delegation.token.expiry.time.ms"))
        self.check_interval_ms = int(cfg.get("delegation.token.expiry.check.interval.ms"))
        self._lock = asyncio.Lock()
        self._source = None                     # the controller's dict the index below was built from
        self._tokens: dict[str, TokenInfo] = {}
        self._by_hmac: dict[str, str] = {}      # base64(HMAC) -> token id
        self._credentials: dict[tuple[str, str, int], S.Credential] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.secret_key)

    # ------------------------------------------------------------------ reading
    def tokens(self) -> dict[str, TokenInfo]:
        ctrl = self.broker.controller
        raw = ctrl.delegation_tokens() if ctrl is not None else {}
        if raw is not self._source:
            parsed: dict[str, TokenInfo] = {}
            for tid, doc in raw.items():
                try:
                    parsed[tid] = TokenInfo.from_json(doc)
                except (KeyError, TypeError, ValueError) as e:
                    log.warning("ignoring unreadable delegation token %s: %s", tid, e)
            self._tokens = parsed
            self._by_hmac = {base64.b64encode(self.hmac(t)).decode("ascii"): t for t in parsed} if self.enabled else {}
            self._credentials = {k: v for k, v in self._credentials.items() if k[0] in parsed}
            self._source = raw
        return self._tokens

    def hmac(self, token_id: str) -> bytes:
        return token_hmac(self.secret_key, token_id)

    def by_hmac(self, mac: bytes) -> TokenInfo | None:
        tokens = self.tokens()
        tid = self._by_hmac.get(base64.b64encode(bytes(mac)).decode("ascii"))
        return tokens.get(tid) if tid is not None else None

    def scram_login(self, token_id: str, mechanism: str):
        """For SCRAM with ``tokenauth=true``: (credential, owner, expiry ms) of a live token, or
        None (unknown, expired, or tokens disabled)."""
        if not self.enabled:
            return None
        info = self.tokens().get(token_id)
        if info is None or info.expired(int(time.time() * 1000)):
            return None
        key = (token_id, mechanism, info.issue_ms)
        cred = self._credentials.get(key)
        if cred is None:
            password = base64.b64encode(self.hmac(token_id)).decode("ascii")
            cred = S.Credential.from_password(mechanism, password, S.MIN_ITERATIONS)
            self._credentials[key] = cred
        return cred, info.owner, info.expiry_ms

    # ------------------------------------------------------------------ writing
    async def create(self, owner: str, requester: str, renewers: list[str], max_lifetime_ms: int):
        """-> (error code, TokenInfo | None, hmac)."""
        async with self._lock:
            info = new_token(owner, requester, renewers, max_lifetime_ms, int(time.time() * 1000),
                             self.max_lifetime_ms, self.expiry_time_ms)
            res = await self.broker.controller.put_delegation_token(info.token_id, info.to_json())
            if res.error_code:
                return res.error_code, None, b""
            log.info("Created a delegation token %s for owner %s (requested by %s)", info.token_id, owner, requester)
            return 0, info, self.hmac(info.token_id)

    async def renew(self, principal: str, mac: bytes, period_ms: int) -> tuple[int, int]:
        return await self._change(principal, mac, period_ms, renew=True)

    async def expire(self, principal: str, mac: bytes, period_ms: int) -> tuple[int, int]:
        return await self._change(principal, mac, period_ms, renew=False)

    async def _change(self, principal: str, mac: bytes, period_ms: int, renew: bool) -> tuple[int, int]:
        from protocol.errors import ErrorCode as E
        async with self._lock:
            info = self.by_hmac(mac)
            if info is None:
                return E.DELEGATION_TOKEN_NOT_FOUND, ERROR_TIMESTAMP
            now = int(time.time() * 1000)
            if not info.owner_or_renewer(principal):
                return E.DELEGATION_TOKEN_OWNER_MISMATCH, ERROR_TIMESTAMP
            if not renew and period_ms < 0:
                res = await self.broker.controller.delete_delegation_token(info.token_id)
                if res.error_code:
                    return res.error_code, ERROR_TIMESTAMP
                log.info("Expired delegation token %s of %s at once", info.token_id, info.owner)
                return 0, now
            if info.expired(now):
                return E.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
            if renew:
                new = renewed(info, now, period_ms, self.expiry_time_ms)
            else:
                new = replace(info, expiry_ms=min(info.max_ms, now + period_ms))
            res = await self.broker.controller.put_delegation_token(new.token_id, new.to_json())
            if res.error_code:
                return res.error_code, ERROR_TIMESTAMP
            log.info("%s delegation token %s of %s: expires at %d", "Renewed" if renew else "Shortened",
                     new.token_id, new.owner, new.expiry_ms)
            return 0, new.expiry_ms

    async def remove_expired(self) -> int:
        """The periodic pass: delete every token past its expiry or max timestamp."""
        if not self.enabled:
            return 0
        ctrl = self.broker.controller
        if ctrl is None or (self.broker.config.zookeeper_connect and ctrl.controller_id != self.broker.broker_id):
            return 0
        n = 0
        async with self._lock:
            now = int(time.time() * 1000)
            for info in list(self.tokens().values()):
                if info.expired(now):
                    res = await ctrl.delete_delegation_token(info.token_id)
                    if not res.error_code:
                        n += 1
                        log.info("Delegation token %s of %s expired and was removed", info.token_id, info.owner)
        return n

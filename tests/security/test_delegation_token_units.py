"""Delegation tokens without a broker process: the token arithmetic, the HMAC, the ZooKeeper JSON
form, the SCRAM ``tokenauth`` extension on both sides, and the manager's rules over a fake store."""
from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import types

import pytest

from broker.security import tokens as T
from broker.security.sasl import SaslFailure, ScramServer, SecuritySession
from controller.api import ApiResult
from protocol import scram as S
from protocol.errors import ErrorCode as E


def test_hmac_is_hmac_sha512_of_the_token_id():
    mac = T.token_hmac("secret", "abc")
    assert mac == hmac.new(b"secret", b"abc", hashlib.sha512).digest()
    assert len(mac) == 64


def test_token_id_is_url_safe_base64_of_a_uuid():
    tid = T.new_token_id()
    assert len(tid) == 22 and "=" not in tid and "+" not in tid and "/" not in tid
    assert len(base64.urlsafe_b64decode(tid + "==")) == 16


def test_create_arithmetic():
    t = T.new_token("User:a", "User:r", ["User:b"], -1, 1000, max_lifetime_ms=500, expiry_time_ms=100)
    assert (t.issue_ms, t.max_ms, t.expiry_ms) == (1000, 1500, 1100)
    t = T.new_token("User:a", "User:a", [], 200, 1000, max_lifetime_ms=500, expiry_time_ms=300)
    assert (t.max_ms, t.expiry_ms) == (1200, 1200)           # expiry capped by max
    t = T.new_token("User:a", "User:a", [], 9999, 1000, max_lifetime_ms=500, expiry_time_ms=100)
    assert t.max_ms == 1500                                  # request capped by the config


def test_renew_arithmetic_and_expiry():
    t = T.new_token("User:a", "User:a", [], -1, 1000, max_lifetime_ms=1000, expiry_time_ms=100)
    assert T.renewed(t, 1050, 200, 100).expiry_ms == 1250
    assert T.renewed(t, 1050, -1, 100).expiry_ms == 1150      # negative: the configured period
    assert T.renewed(t, 1900, 500, 100).expiry_ms == 2000     # never past max
    assert not t.expired(1100) and t.expired(1101)


def test_json_round_trip_is_kafkas_layout():
    t = T.TokenInfo("id1", "User:al ice", "User:req", ("User:bob",), 1, 3, 2)
    doc = t.to_json()
    assert doc == {"version": 3, "owner": "User%3Aal%20ice", "tokenRequester": "User%3Areq",
                   "renewers": ["User%3Abob"], "issueTimestamp": 1, "maxTimestamp": 3, "expiryTimestamp": 2,
                   "tokenId": "id1"}
    assert T.TokenInfo.from_json(doc) == t
    v2 = dict(doc, version=2)
    del v2["tokenRequester"]
    assert T.TokenInfo.from_json(v2).requester == "User:al ice"


def test_client_first_with_extensions():
    attrs, ext = S.parse_client_first_bare("n=tok,r=abc,tokenauth=true")
    assert attrs == {"n": "tok", "r": "abc"} and ext == {"tokenauth": "true"}
    c = S.ScramClient("SCRAM-SHA-256", "tok", "pw", {"tokenauth": "true"})
    assert c.first().decode().endswith(",tokenauth=true")


def _exchange(server, client):
    server_first = server.evaluate(client.first())
    final = client.final(server_first)
    client.verify(server.evaluate(final))


def test_scram_token_login_principal_is_the_owner():
    password = base64.b64encode(T.token_hmac("k", "tid")).decode()
    cred = S.Credential.from_password("SCRAM-SHA-512", password)
    seen = []

    def token_lookup(tid, mech):
        seen.append((tid, mech))
        return (cred, "User:alice", 12345) if tid == "tid" else None

    session = SecuritySession("SASL", "SASL_PLAINTEXT", ["SCRAM-SHA-512"],
                              factory=lambda m: ScramServer(m, lambda u: None, token_lookup))
    assert session.handshake("SCRAM-SHA-512", 1) == 0
    client = S.ScramClient("SCRAM-SHA-512", "tid", password, {"tokenauth": "true"})
    server_first = session.step(client.first())
    client.verify(session.step(client.final(server_first)))
    assert session.authenticated and session.principal == "User:alice" and session.token_authenticated
    assert seen == [("tid", "SCRAM-SHA-512")]


def test_scram_token_login_unknown_token_and_plain_user_lookup():
    server = ScramServer("SCRAM-SHA-256", lambda u: None, lambda tid, mech: None)
    with pytest.raises(SaslFailure, match="Token Authentication failed: Invalid tokenId : nope"):
        server.evaluate(S.ScramClient("SCRAM-SHA-256", "nope", "x", {"tokenauth": "true"}).first())
    # without the extension the token id is looked up as an ordinary user
    cred = S.Credential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lambda u: cred if u == "bob" else None, lambda tid, mech: None)
    _exchange(server, S.ScramClient("SCRAM-SHA-256", "bob", "pw"))
    assert server.authorization_id == "bob" and not server.token_authenticated


class _Store:
    def __init__(self):
        self.docs = {}

    def delegation_tokens(self):
        return self.docs

    async def put_delegation_token(self, tid, doc):
        self.docs = dict(self.docs, **{tid: doc})
        return ApiResult()

    async def delete_delegation_token(self, tid):
        self.docs = {k: v for k, v in self.docs.items() if k != tid}
        return ApiResult()


def _manager(**cfg):
    values = {"delegation.token.secret.key": "s3cret", "delegation.token.master.key": None,
              "delegation.token.max.lifetime.ms": 604800000, "delegation.token.expiry.time.ms": 86400000,
              "delegation.token.expiry.check.interval.ms": 3600000}
    values.update(cfg)
    config = types.SimpleNamespace(get=values.__getitem__, zookeeper_connect=None)
    broker = types.SimpleNamespace(config=config, controller=_Store(), broker_id=0)
    return T.TokenManager(broker)


def test_manager_rules():
    async def go():
        tm = _manager()
        code, info, mac = await tm.create("User:alice", "User:alice", ["User:bob"], -1)
        assert code == 0 and mac == T.token_hmac("s3cret", info.token_id)
        assert await tm.renew("User:carol", mac, 1000) == (E.DELEGATION_TOKEN_OWNER_MISMATCH, -1)
        code, expiry = await tm.renew("User:bob", mac, 1000)
        assert code == 0 and expiry == tm.tokens()[info.token_id].expiry_ms
        assert (await tm.renew("User:alice", b"nope", 1))[0] == E.DELEGATION_TOKEN_NOT_FOUND
        cred, owner, exp = tm.scram_login(info.token_id, "SCRAM-SHA-256")
        assert owner == "User:alice" and exp == expiry and cred.iterations == 4096
        # an expired token: renew answers EXPIRED, login is refused, the pass removes it
        doc = dict(tm.broker.controller.docs[info.token_id], expiryTimestamp=1)
        await tm.broker.controller.put_delegation_token(info.token_id, doc)
        assert await tm.renew("User:alice", mac, 1000) == (E.DELEGATION_TOKEN_EXPIRED, -1)
        assert tm.scram_login(info.token_id, "SCRAM-SHA-256") is None
        assert await tm.remove_expired() == 1 and tm.tokens() == {}
        # expire with a negative period removes at once
        code, info, mac = await tm.create("User:alice", "User:alice", [], -1)
        code, _ = await tm.expire("User:alice", mac, -1)
        assert code == 0 and tm.tokens() == {}
    asyncio.run(go())


def test_manager_disabled_without_a_key():
    tm = _manager(**{"delegation.token.secret.key": None})
    assert not tm.enabled and tm.scram_login("x", "SCRAM-SHA-256") is None
    tm = _manager(**{"delegation.token.secret.key": None, "delegation.token.master.key": "old"})
    assert tm.enabled and tm.secret_key == "old"

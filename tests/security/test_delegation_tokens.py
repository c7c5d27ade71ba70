"""Delegation tokens against a broker process: kafka-delegation-tokens.sh over SASL_PLAINTEXT with
SCRAM (create, describe, renew, expire), a login with the token, and the error answers.

Which clients can log in with a token: the broker side is Kafka's SCRAM ``tokenauth=true``
extension.  kafka-python 3.0.12 (kafka/net/sasl/scram.py) and librdkafka (its SCRAM client-first
is a fixed ``n,,n=%s,r=%s``) cannot send SCRAM extensions, so the token login here uses the
project's own client (``protocol.client``, ``tokenauth="true"`` in the JAAS text as Kafka's
ScramLoginModule takes it).  Kafka's Java client can; see tests/java.
"""
from __future__ import annotations

import asyncio
import base64
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from protocol.client import AuthenticationError, KafkaClientConnection, SaslSettings
from protocol.errors import ErrorCode as E
from protocol.messages import (CreateDelegationTokenRequest, DescribeDelegationTokenRequest, MetadataRequest,
                               RenewDelegationTokenRequest)

REPO = Path(__file__).resolve().parents[2]
SECRET = "token-signing-secret"


def _tool(name, *args):
    return subprocess.run([str(REPO / "bin" / name), *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))


def _scram_user(bootstrap, user, pw):
    r = _tool("kafka-configs.sh", "--bootstrap-server", bootstrap, "--alter", "--add-config",
              f"SCRAM-SHA-256=[password={pw}],SCRAM-SHA-512=[password={pw}]", "--entity-type", "users",
              "--entity-name", user)
    assert r.returncode == 0, r.stderr


def _props(tmp_path, name, user, pw, mech="SCRAM-SHA-256", tokenauth=False):
    path = tmp_path / f"{name}.properties"
    extra = ' tokenauth="true"' if tokenauth else ""
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mech}\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{user}" password="{pw}"{extra};\n')
    return str(path)


async def _connect(addr, mech=None, user=None, pw=None, extensions=None):
    host, port = addr.rsplit(":", 1)
    conn = await KafkaClientConnection.connect(host, int(port))
    await conn.negotiate()
    if mech:
        await conn.authenticate(SaslSettings(mech, user, pw, extensions=extensions))
    return conn


async def _ask(addr, request, **login):
    conn = await _connect(addr, **login)
    try:
        return await conn.send(request)
    finally:
        await conn.close()


def _create_req(renewers=(), max_life=-1):
    R = CreateDelegationTokenRequest
    return R(renewers=[R.CreatableRenewers(principal_type=t, principal_name=n) for t, n in renewers],
             max_lifetime_ms=max_life)


@pytest.fixture
def token_broker(secure_broker):
    b = secure_broker(listeners=("SASL_PLAINTEXT",), props={
        "delegation.token.secret.key": SECRET, "delegation.token.max.lifetime.ms": 3600000,
        "delegation.token.expiry.time.ms": 600000})
    _scram_user(b.plaintext, "alice", "alice-secret")
    _scram_user(b.plaintext, "bob", "bob-secret")
    return b


def test_tool_create_describe_renew_expire_and_token_login(token_broker, tmp_path):
    b = token_broker
    sasl = b.addr("SASL_PLAINTEXT")
    alice = _props(tmp_path, "alice", "alice", "alice-secret")
    bob = _props(tmp_path, "bob", "bob", "bob-secret", mech="SCRAM-SHA-512")

    r = _tool("kafka-delegation-tokens.sh", "--bootstrap-server", sasl, "--command-config", alice, "--create",
              "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Calling create token operation with renewers :[User:bob] , max-life-time-period :-1"
    m = re.match(r"Created delegation token with tokenId : (\S+)$", lines[1])
    assert m, r.stdout
    token_id = m.group(1)
    header = [ln for ln in lines if ln.startswith("TOKENID")]
    assert header and header[0].split() == ["TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE",
                                            "EXPIRYDATE", "MAXDATE"]
    row = [ln for ln in lines if ln.startswith(token_id)][0].split()
    hmac_b64 = row[1]
    assert row[2:5] == ["User:alice", "User:alice", "[User:bob]"]
    import hashlib
    import hmac as _h
    assert base64.b64decode(hmac_b64) == _h.new(SECRET.encode(), token_id.encode(), hashlib.sha512).digest()

    # describe: alice (owner) and bob (renewer) see it; with an owner filter too
    for cfg in (alice, bob):
        r = _tool("kafka-delegation-tokens.sh", "--bootstrap-server", sasl, "--command-config", cfg, "--describe")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("Calling describe token operation for current user.\nTotal number of tokens : 1")
        assert token_id in r.stdout and hmac_b64 in r.stdout
    r = _tool("kafka-delegation-tokens.sh", "--bootstrap-server", sasl, "--command-config", alice, "--describe",
              "--owner-principal", "User:nobody")
    assert "Calling describe token operation for owners: [User:nobody]" in r.stdout
    assert "Total number of tokens : 0" in r.stdout and token_id not in r.stdout

    # renew by the renewer
    r = _tool("kafka-delegation-tokens.sh", "--bootstrap-server", sasl, "--command-config", bob, "--renew",
              "--hmac", hmac_b64, "--renew-time-period", "-1")
    assert r.returncode == 0, r.stderr
    assert re.search(r"Completed renew operation. New expiry date : \d{4}-\d\d-\d\dT\d\d:\d\d$", r.stdout), r.stdout

    # log in with the token (the project's client: no unmodified Python client sends tokenauth)
    async def token_session():
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            conn = await _connect(sasl, mech, token_id, hmac_b64, {"tokenauth": "true"})
            try:
                md = await conn.send(MetadataRequest(topics=None))
                assert md.brokers
                # a token-authenticated session may not create tokens, nor describe them
                resp = await conn.send(_create_req())
                assert resp.error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
                assert (resp.principal_type, resp.principal_name) == ("User", "alice")
                d = await conn.send(DescribeDelegationTokenRequest(owners=None))
                assert d.error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            finally:
                await conn.close()
        # the token id is no SCRAM user: without tokenauth the login fails
        with pytest.raises(AuthenticationError):
            await _connect(sasl, "SCRAM-SHA-256", token_id, hmac_b64)
        with pytest.raises(AuthenticationError, match="Token Authentication failed: Invalid tokenId : nope"):
            await _connect(sasl, "SCRAM-SHA-256", "nope", hmac_b64, {"tokenauth": "true"})
    asyncio.run(token_session())

    # the tools log in with the token as well (tokenauth="true" in the JAAS text)
    tok = _props(tmp_path, "token", token_id, hmac_b64, tokenauth=True)
    r = _tool("kafka-topics.sh", "--bootstrap-server", sasl, "--command-config", tok, "--list")
    assert r.returncode == 0, r.stderr
    r = _tool("kafka-delegation-tokens.sh", "--bootstrap-server", sasl, "--command-config", tok, "--create",
              "--max-life-time-period", "-1")
    assert r.returncode == 1 and "not allowed" in r.stderr.lower(), r.stdout + r.stderr

    # expire at once: describe shows nothing, the token no longer logs in
    r = _tool("kafka-delegation-tokens.sh", "--bootstrap-server", sasl, "--command-config", alice, "--expire",
              "--hmac", hmac_b64, "--expiry-time-period", "-1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"Calling expire token operation with hmac :{hmac_b64} , expire-time-period :-1")
    assert "Completed expire operation. New expiry date : " in r.stdout
    r = _tool("kafka-delegation-tokens.sh", "--bootstrap-server", sasl, "--command-config", alice, "--describe")
    assert "Total number of tokens : 0" in r.stdout

    async def refused():
        with pytest.raises(AuthenticationError, match="Invalid tokenId"):
            await _connect(sasl, "SCRAM-SHA-256", token_id, hmac_b64, {"tokenauth": "true"})
    asyncio.run(refused())


def test_error_answers(token_broker):
    b = token_broker
    sasl = b.addr("SASL_PLAINTEXT")
    alice = {"mech": "SCRAM-SHA-256", "user": "alice", "pw": "alice-secret"}
    bob = {"mech": "SCRAM-SHA-512", "user": "bob", "pw": "bob-secret"}

    async def go():
        # PLAINTEXT: not allowed
        resp = await _ask(b.plaintext, _create_req())
        assert resp.error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED and resp.token_id == ""
        # a token with a 1 ms max lifetime, no renewers
        resp = await _ask(sasl, _create_req(max_life=1), **alice)
        assert resp.error_code == 0 and resp.max_timestamp_ms == resp.issue_timestamp_ms + 1
        assert resp.expiry_timestamp_ms == resp.max_timestamp_ms
        short = bytes(resp.hmac)
        resp = await _ask(sasl, _create_req(max_life=10_000_000), **alice)
        assert resp.max_timestamp_ms == resp.issue_timestamp_ms + 3600000          # capped by the config
        assert resp.expiry_timestamp_ms == resp.issue_timestamp_ms + 600000
        long_ = bytes(resp.hmac)
        # bob is neither owner nor renewer
        r = await _ask(sasl, RenewDelegationTokenRequest(hmac=long_, renew_period_ms=1000), **bob)
        assert (r.error_code, r.expiry_timestamp_ms) == (E.DELEGATION_TOKEN_OWNER_MISMATCH, -1)
        # an empty owner list describes nothing; a null one everything bob may see -- without an
        # authorizer Kafka's DESCRIBE checks pass, so alice's tokens too
        d = await _ask(sasl, DescribeDelegationTokenRequest(owners=[]), **bob)
        assert d.error_code == 0 and d.tokens == []
        d = await _ask(sasl, DescribeDelegationTokenRequest(owners=None), **bob)
        assert d.error_code == 0 and len(d.tokens) == 2
        time.sleep(0.05)
        r = await _ask(sasl, RenewDelegationTokenRequest(hmac=short, renew_period_ms=1000), **alice)
        assert r.error_code == E.DELEGATION_TOKEN_EXPIRED
        r = await _ask(sasl, RenewDelegationTokenRequest(hmac=b"\0" * 64, renew_period_ms=1000), **alice)
        assert r.error_code == E.DELEGATION_TOKEN_NOT_FOUND
        r = await _ask(sasl, RenewDelegationTokenRequest(hmac=long_, renew_period_ms=1000), **alice)
        assert r.error_code == 0
    asyncio.run(go())


def test_no_secret_key_disables_tokens(secure_broker):
    b = secure_broker(listeners=("SASL_PLAINTEXT",))
    _scram_user(b.plaintext, "alice", "alice-secret")

    async def go():
        resp = await _ask(b.addr("SASL_PLAINTEXT"), _create_req(), mech="SCRAM-SHA-256", user="alice",
                          pw="alice-secret")
        assert resp.error_code == E.DELEGATION_TOKEN_AUTH_DISABLED
        d = await _ask(b.addr("SASL_PLAINTEXT"), DescribeDelegationTokenRequest(owners=None), mech="SCRAM-SHA-256",
                       user="alice", pw="alice-secret")
        assert d.error_code == E.DELEGATION_TOKEN_AUTH_DISABLED
        # ApiVersions advertises Kafka 3.9's versions
        conn = await _connect(b.plaintext)
        try:
            assert [conn.version_range(k) for k in (38, 39, 40, 41)] == [(0, 3), (0, 2), (0, 2), (0, 3)]
        finally:
            await conn.close()
    asyncio.run(go())


def test_tokens_survive_a_restart(token_broker):
    b = token_broker
    sasl = b.addr("SASL_PLAINTEXT")
    login = {"mech": "SCRAM-SHA-256", "user": "alice", "pw": "alice-secret"}
    resp = asyncio.run(_ask(sasl, _create_req(), **login))
    assert resp.error_code == 0
    b.proc.restart()
    d = asyncio.run(_ask(sasl, DescribeDelegationTokenRequest(owners=None), **login))
    assert [t.token_id for t in d.tokens] == [resp.token_id]
    assert bytes(d.tokens[0].hmac) == bytes(resp.hmac)

    async def token_login():
        conn = await _connect(sasl, "SCRAM-SHA-512", resp.token_id, base64.b64encode(bytes(resp.hmac)).decode(),
                              {"tokenauth": "true"})
        await conn.close()
    asyncio.run(token_login())

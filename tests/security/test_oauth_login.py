"""OAUTHBEARER logins with tokens from an identity provider (KIP-768's client side,
broker/security/oauth_login.py): the client credentials request, caching and refresh, retries,
refusals; then the project's tools logging in to a broker that checks tokens with JWKS."""
from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from broker.config import ConfigError
from broker.security.oauth_login import LOGIN_HANDLERS, TokenEndpointLogin, TokenError, jwt_claims, login_for

pytest.importorskip("cryptography")
from tests.support.idp import Idp  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SECURED = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


@pytest.fixture
def idp():
    i = Idp(clients={"svc": "s3cr&t:x", "broker": "broker-secret"}).start()
    try:
        yield i
    finally:
        i.stop()


def test_client_credentials_request_and_cache(idp):
    login = TokenEndpointLogin(idp.token_url, "svc", "s3cr&t:x", scope="kafka produce")
    t1 = login.token()
    assert login.token() == t1                                   # cached
    assert idp.requests == [("svc", {"grant_type": "client_credentials", "scope": "kafka produce"})]
    assert jwt_claims(t1)["sub"] == "svc" and login.principal == "svc"


def test_refresh_after_the_window(idp):
    idp.lifetime_s = 2
    login = TokenEndpointLogin(idp.token_url, "svc", "s3cr&t:x", refresh_window_factor=0.5)
    login.token()
    time.sleep(1.2)
    login.token()
    assert len(idp.requests) == 2


def test_server_errors_are_retried_client_errors_are_not(idp):
    idp.fail_next(503, 2)
    login = TokenEndpointLogin(idp.token_url, "svc", "s3cr&t:x", retry_backoff_ms=10, retry_backoff_max_ms=200)
    assert login.token()
    assert len(idp.requests) == 3
    bad = TokenEndpointLogin(idp.token_url, "svc", "wrong", retry_backoff_ms=10, retry_backoff_max_ms=200)
    with pytest.raises(TokenError, match="HTTP 401"):
        bad.token()
    assert len(idp.requests) == 4
    idp.fail_next(500, 100)
    gives_up = TokenEndpointLogin(idp.token_url, "svc", "s3cr&t:x", retry_backoff_ms=10, retry_backoff_max_ms=50)
    with pytest.raises(TokenError, match="HTTP 500"):
        gives_up.token()


def test_unusable_tokens_are_refused(idp, tmp_path):
    for claims, why in (({"iat": int(time.time()), "sub": "x"}, "no exp"),
                        ({"exp": int(time.time()) + 60}, "no sub"),
                        ({"exp": int(time.time()) - 5, "sub": "x"}, "already expired")):
        path = tmp_path / "token.jwt"
        path.write_text(idp.sign(claims))
        with pytest.raises(TokenError, match=why):
            TokenEndpointLogin(path.as_uri(), "", "").token()
    (tmp_path / "token.jwt").write_text("not-a-jwt")
    with pytest.raises(TokenError, match="not a JWT"):
        TokenEndpointLogin((tmp_path / "token.jwt").as_uri(), "", "").token()


def test_login_for_picks_the_login(idp):
    def get(conf):
        return lambda key, default: conf.get(key, default)
    name, token = login_for(get({"sasl.login.callback.handler.class": LOGIN_HANDLERS[1],
                                 "sasl.oauthbearer.token.endpoint.url": idp.token_url}),
                            {"clientId": "svc", "clientSecret": "s3cr&t:x"}, "the entry")
    assert name == "svc" and jwt_claims(token())["sub"] == "svc"
    name, token = login_for(get({}), {"unsecuredLoginStringClaim_sub": "admin"}, "the entry")
    assert name == "admin" and jwt_claims(token())["sub"] == "admin"
    with pytest.raises(ConfigError, match="clientId and clientSecret"):
        login_for(get({"sasl.login.callback.handler.class": LOGIN_HANDLERS[0],
                       "sasl.oauthbearer.token.endpoint.url": idp.token_url}), {}, "the entry")
    with pytest.raises(ConfigError, match="token.endpoint.url"):
        login_for(get({"sasl.login.callback.handler.class": LOGIN_HANDLERS[0]}), {"clientId": "a"}, "x")
    with pytest.raises(ConfigError, match="not supported"):
        login_for(get({"sasl.login.callback.handler.class": "org.example.Other"}), {}, "x")


@pytest.mark.integration
def test_tools_log_in_with_a_token_from_the_endpoint(secure_broker, idp, tmp_path):
    L = "listener.name.sasl_plaintext."
    b = secure_broker(listeners=("SASL_PLAINTEXT",), props={
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        L + "oauthbearer.sasl.jaas.config": f"{MODULE} required;",
        L + "oauthbearer.sasl.server.callback.handler.class": SECURED,
        "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_path(tmp_path),
        "sasl.oauthbearer.expected.audience": "kafka",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:svc"})
    cfg = tmp_path / "client.properties"
    cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                   f"sasl.login.callback.handler.class={LOGIN_HANDLERS[0]}\n"
                   f"sasl.oauthbearer.token.endpoint.url={idp.token_url}\n"
                   f'sasl.jaas.config={MODULE} required clientId="svc" clientSecret="s3cr&t:x" scope="kafka";\n')
    topic = "oidc-" + uuid.uuid4().hex[:6]
    tool = [str(REPO / "bin" / "kafka-topics.sh"), "--bootstrap-server", b.addr("SASL_PLAINTEXT"),
            "--command-config", str(cfg)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run(tool + ["--create", "--topic", topic], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("svc", {"grant_type": "client_credentials", "scope": "kafka"}) in idp.requests
    # the principal is the token's sub: as "broker" (a valid token, no ACL) the create is refused
    cfg.write_text(cfg.read_text().replace('clientId="svc" clientSecret="s3cr&t:x"',
                                           'clientId="broker" clientSecret="broker-secret"'))
    r = subprocess.run(tool + ["--create", "--topic", topic + "-b"], capture_output=True, text=True, timeout=60,
                       env=env)
    assert r.returncode != 0 and "Authorization failed" in r.stdout + r.stderr, r.stdout + r.stderr

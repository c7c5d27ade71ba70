"""CreateDelegationToken (38) v0-3, RenewDelegationToken (39) v0-2, ExpireDelegationToken (40)
v0-2, DescribeDelegationToken (41) v0-3 -- KIP-48, with KIP-373's owner and requester (v3).

The token arithmetic and store access are ``broker.security.tokens.TokenManager``; these
handlers apply Kafka's request rules, in Kafka's order:

* Token requests are only taken from a connection that authenticated with SASL and not with a
  delegation token itself: on PLAINTEXT, on SSL without a client certificate, or after a token
  login every API answers DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (Describe too).
* Create for another owner (v3 owner fields) needs CREATE_TOKENS on ``User:<owner>`` (USER
  resource) when an authorizer is on, else DELEGATION_TOKEN_AUTHORIZATION_FAILED; a renewer whose
  type is not ``User`` is INVALID_PRINCIPAL_TYPE.  Without ``delegation.token.secret.key``:
  DELEGATION_TOKEN_AUTH_DISABLED.
* Renew / Expire: an unknown HMAC is DELEGATION_TOKEN_NOT_FOUND, a principal that is neither the
  owner nor a renewer DELEGATION_TOKEN_OWNER_MISMATCH, an expired token DELEGATION_TOKEN_EXPIRED.
  Expire with a negative period removes the token at once (even an expired one).
* Describe: a null owner list means every token, an empty one no token; a token is shown when
  the requester is its owner, requester or renewer, or may DESCRIBE the DELEGATION_TOKEN resource
  (its id), or has DESCRIBE_TOKENS on the owner's USER resource.  Without an authorizer those
  checks pass, so every token is shown (as Kafka's code does).
"""
from __future__ import annotations

from broker.dispatch import handler
from broker.security import acl as A
from broker.security.tokens import ERROR_TIMESTAMP, split_principal
from protocol.errors import ErrorCode as E
from protocol.messages import (CreateDelegationTokenResponse, DescribeDelegationTokenResponse,
                               ExpireDelegationTokenResponse, RenewDelegationTokenResponse)


def _token_requests_allowed(ctx) -> bool:
    sec = ctx.connection.security
    protocol = sec.protocol if sec is not None else "PLAINTEXT"
    if sec is not None and sec.token_authenticated:
        return False
    if protocol == "PLAINTEXT":
        return False
    if protocol == "SSL" and ctx.principal == "User:ANONYMOUS":
        return False
    return True


def _manager(ctx):
    return getattr(ctx.broker, "tokens", None)


@handler(38, 0, 3)
async def create_delegation_token(ctx, req):
    R = CreateDelegationTokenResponse
    requester = ctx.principal
    owner_name = getattr(req, "owner_principal_name", None) if ctx.api_version >= 3 else None
    owner = f"{req.owner_principal_type}:{owner_name}" if owner_name else requester
    own_t, own_n = split_principal(owner)
    req_t, req_n = split_principal(requester)

    def fail(code):
        return R(error_code=code, principal_type=own_t, principal_name=own_n, token_requester_principal_type=req_t,
                 token_requester_principal_name=req_n, issue_timestamp_ms=ERROR_TIMESTAMP,
                 expiry_timestamp_ms=ERROR_TIMESTAMP, max_timestamp_ms=ERROR_TIMESTAMP, token_id="", hmac=b"",
                 throttle_time_ms=0)

    if not _token_requests_allowed(ctx):
        return fail(E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    if owner != requester and not ctx.authorize(A.CREATE_TOKENS, A.USER, owner):
        return fail(E.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
    if any(r.principal_type != "User" for r in req.renewers):
        return fail(E.INVALID_PRINCIPAL_TYPE)
    tm = _manager(ctx)
    if tm is None or not tm.enabled:
        return fail(E.DELEGATION_TOKEN_AUTH_DISABLED)
    renewers = [f"{r.principal_type}:{r.principal_name}" for r in req.renewers]
    code, info, mac = await tm.create(owner, requester, renewers, req.max_lifetime_ms)
    if code:
        return fail(code)
    return R(error_code=0, principal_type=own_t, principal_name=own_n, token_requester_principal_type=req_t,
             token_requester_principal_name=req_n, issue_timestamp_ms=info.issue_ms,
             expiry_timestamp_ms=info.expiry_ms, max_timestamp_ms=info.max_ms, token_id=info.token_id, hmac=mac,
             throttle_time_ms=0)


async def _renew_or_expire(ctx, mac, period, renew: bool) -> tuple[int, int]:
    if not _token_requests_allowed(ctx):
        return E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP
    tm = _manager(ctx)
    if tm is None or not tm.enabled:
        return E.DELEGATION_TOKEN_AUTH_DISABLED, ERROR_TIMESTAMP
    if renew:
        return await tm.renew(ctx.principal, bytes(mac or b""), period)
    return await tm.expire(ctx.principal, bytes(mac or b""), period)


@handler(39, 0, 2)
async def renew_delegation_token(ctx, req):
    code, expiry = await _renew_or_expire(ctx, req.hmac, req.renew_period_ms, renew=True)
    return RenewDelegationTokenResponse(error_code=code, expiry_timestamp_ms=expiry, throttle_time_ms=0)


@handler(40, 0, 2)
async def expire_delegation_token(ctx, req):
    code, expiry = await _renew_or_expire(ctx, req.hmac, req.expiry_time_period_ms, renew=False)
    return ExpireDelegationTokenResponse(error_code=code, expiry_timestamp_ms=expiry, throttle_time_ms=0)


@handler(41, 0, 3)
async def describe_delegation_token(ctx, req):
    R = DescribeDelegationTokenResponse
    if not _token_requests_allowed(ctx):
        return R(error_code=E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, tokens=[], throttle_time_ms=0)
    tm = _manager(ctx)
    if tm is None or not tm.enabled:
        return R(error_code=E.DELEGATION_TOKEN_AUTH_DISABLED, tokens=[], throttle_time_ms=0)
    owners = None if req.owners is None else [f"{o.principal_type}:{o.principal_name}" for o in req.owners]
    if owners is not None and not owners:
        return R(error_code=0, tokens=[], throttle_time_ms=0)
    me = ctx.principal
    out = []
    for info in sorted(tm.tokens().values(), key=lambda t: (t.issue_ms, t.token_id)):
        if owners is not None and not any(info.involves(o) for o in owners):
            continue
        if not (info.involves(me) or ctx.authorize(A.DESCRIBE, A.DELEGATION_TOKEN, info.token_id)
                or ctx.authorize(A.DESCRIBE_TOKENS, A.USER, info.owner)):
            continue
        own_t, own_n = split_principal(info.owner)
        req_t, req_n = split_principal(info.requester)
        renewers = []
        for r in info.renewers:
            rt, rn = split_principal(r)
            renewers.append(R.DescribedDelegationTokenRenewer(principal_type=rt, principal_name=rn))
        out.append(R.DescribedDelegationToken(
            principal_type=own_t, principal_name=own_n, token_requester_principal_type=req_t,
            token_requester_principal_name=req_n, issue_timestamp=info.issue_ms, expiry_timestamp=info.expiry_ms,
            max_timestamp=info.max_ms, token_id=info.token_id, hmac=tm.hmac(info.token_id), renewers=renewers))
    return R(error_code=0, tokens=out, throttle_time_ms=0)

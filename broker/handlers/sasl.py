"""SaslHandshake (key 17) v0-1 and SaslAuthenticate (key 36) v0-2.

The state machine is ``broker.security.sasl.SecuritySession`` (one per connection); the
connection itself refuses every other API until authentication is done and closes the
connection after a response that ends the exchange badly.

* SaslHandshake on a listener without SASL, or twice: ILLEGAL_SASL_STATE.  A mechanism that
  is not enabled: UNSUPPORTED_SASL_MECHANISM with the enabled list; both close the connection.
  v0 switches the connection to bare tokens (handled in the connection), v1 to SaslAuthenticate.
* SaslAuthenticate before a v1 handshake or after success: ILLEGAL_SASL_STATE.  A failed step:
  SASL_AUTHENTICATION_FAILED with the mechanism's message, then the connection closes.
* ``session_lifetime_ms`` (v1+) is the session's lifetime (KIP-368: ``connections.max.reauth.ms``
  and the credential's expiry, see ``SecuritySession``), 0 when it has none.  A SaslHandshake on
  an authenticated connection whose session has a lifetime starts a re-authentication (the
  connection decides, before this handler runs).
"""
from __future__ import annotations

from broker.dispatch import handler
from broker.security.sasl import SaslFailure
from protocol.errors import ErrorCode as E
from protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse


@handler(17, 0, 1)
async def sasl_handshake(ctx, req):
    sec = ctx.connection.security
    if sec is None or sec.protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return SaslHandshakeResponse(error_code=E.ILLEGAL_SASL_STATE, mechanisms=[])
    code = sec.handshake(req.mechanism, ctx.api_version)
    return SaslHandshakeResponse(error_code=code, mechanisms=list(sec.mechanisms))


@handler(36, 0, 2)
async def sasl_authenticate(ctx, req):
    R = SaslAuthenticateResponse
    sec = ctx.connection.security
    if sec is None or sec.state != "authenticate":
        if sec is not None and sec.state != "done":
            sec.close_after_response = True
        msg = ("SaslAuthenticate request received after successful authentication"
               if sec is None or sec.state == "done" else "Unexpected SaslAuthenticate request before SaslHandshake")
        return R(error_code=E.ILLEGAL_SASL_STATE, error_message=msg, auth_bytes=b"", session_lifetime_ms=0)
    try:
        out = sec.step(req.auth_bytes)
    except SaslFailure as e:
        return R(error_code=E.SASL_AUTHENTICATION_FAILED, error_message=str(e), auth_bytes=b"",
                 session_lifetime_ms=0)
    if sec.authenticated:
        ctx.connection.lift_pre_auth_limit()
    return R(error_code=0, error_message=None, auth_bytes=out,
             session_lifetime_ms=sec.session_lifetime_ms if sec.authenticated else 0)

"""kafka-delegation-tokens.sh: create, renew, expire and describe delegation tokens (KIP-48).

Output follows Kafka's DelegationTokenCommand: a line saying what is asked, then for create and
describe a table (TOKENID, HMAC, OWNER, REQUESTER, RENEWERS, ISSUEDATE, EXPIRYDATE, MAXDATE; dates
as yyyy-MM-ddTHH:mm in local time), for renew and expire the new expiry date.  Token requests
are only served on an authenticated (SASL) connection, so --command-config is required.
"""
from __future__ import annotations

import base64
import binascii
import sys
import time

from protocol.messages import (CreateDelegationTokenRequest, DescribeDelegationTokenRequest,
                               ExpireDelegationTokenRequest, RenewDelegationTokenRequest)
from tools.common import OptionParser, ToolError, check_invalid, cluster_from, parse_or_exit, raise_error, require, run

DESCRIPTION = "Creates, renews, expires or lists delegation tokens."
ACTIONS = ("create", "renew", "expire", "describe")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("bootstrap-server", "REQUIRED: broker address(es) to contact first, host:port[,host:port...].",
          "server(s) to use for bootstrapping")
    p.add("command-config", "REQUIRED: properties file with the client's security settings; brokers only "
                            "manage tokens for a SASL-authenticated connection.", "command config property file")
    p.add("create", "Create a token (renewers with --renewer-principal, lifetime with --max-life-time-period).")
    p.add("renew", "Push a token's expiry out by --renew-time-period.")
    p.add("expire", "Bring a token's expiry forward to now + --expiry-time-period (-1: invalidate it now).")
    p.add("describe", "List tokens: those of the --owner-principal principals, or without it every token the "
                      "caller owns, may renew, requested, or may describe.")
    p.add("owner-principal", "A principal as Type:name. With --create: the token's owner (needs CreateTokens on "
                             "that user); with --describe: list tokens it owns or may renew (repeatable).",
          "owner-principal", multi=True, optional=True)
    p.add("renewer-principal", "A principal (Type:name) allowed to renew the new token; repeatable.",
          "renewer-principal", multi=True, optional=True)
    p.add("max-life-time-period", "Longest lifetime of the new token in ms; -1 takes the broker's "
                                  "delegation.token.max.lifetime.ms.", "max-life-time-period", type=int, optional=True)
    p.add("renew-time-period", "Renewal period in ms; -1 takes the broker's delegation.token.expiry.time.ms.",
          "renew-time-period", type=int, optional=True)
    p.add("expiry-time-period", "New expiry as ms from now; -1 invalidates the token at once.",
          "expiry-time-period", type=int, optional=True)
    p.add("hmac", "The token's HMAC (base64), as printed by --create or --describe.", "hmac", optional=True)
    return p


def fmt_date(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000))


def java_list(items) -> str:
    return "[" + ", ".join(items) + "]"


def parse_principal(text: str) -> tuple[str, str]:
    kind, sep, name = (text or "").partition(":")
    if not sep or not kind or not name:
        raise ToolError(f"expected a string in format principalType:principalName but got {text}")
    return kind, name


def print_tokens(rows) -> None:
    fmt = "%-15s %-30s %-15s %-15s %-25s %-15s %-15s %-15s"
    print()
    print(fmt % ("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE"))
    for r in rows:
        print()
        print(fmt % (r["id"], r["hmac"], r["owner"], r["requester"], java_list(r["renewers"]),
                     fmt_date(r["issue"]), fmt_date(r["expiry"]), fmt_date(r["max"])))


def _hmac(o) -> bytes:
    try:
        return base64.b64decode(o.get("hmac") or "", validate=True)
    except (binascii.Error, ValueError):
        raise ToolError(f"Illegal base64 character in --hmac {o.get('hmac')!r}") from None


async def execute(o) -> int:
    client = await cluster_from(o)
    try:
        if o.has("create"):
            renewers = [parse_principal(x) for x in (o.get("renewer-principal") or []) if x]
            owners = [parse_principal(x) for x in (o.get("owner-principal") or []) if x]
            max_life = o.get("max-life-time-period")
            max_life = -1 if max_life is None else max_life
            print(f"Calling create token operation with renewers :{java_list(f'{t}:{n}' for t, n in renewers)} , "
                  f"max-life-time-period :{max_life}")
            R = CreateDelegationTokenRequest
            req = R(renewers=[R.CreatableRenewers(principal_type=t, principal_name=n) for t, n in renewers],
                    max_lifetime_ms=max_life, owner_principal_type=owners[0][0] if owners else None,
                    owner_principal_name=owners[0][1] if owners else None)
            conn = await client.any_connection()
            if owners and conn.version_range(38) and conn.version_range(38)[1] < 3:
                raise ToolError("The broker does not support creating tokens for another owner "
                                "(CreateDelegationToken v3)")
            resp = await conn.send(req)
            raise_error(resp.error_code)
            print(f"Created delegation token with tokenId : {resp.token_id}")
            print_tokens([{"id": resp.token_id, "hmac": base64.b64encode(bytes(resp.hmac)).decode("ascii"),
                           "owner": f"{resp.principal_type}:{resp.principal_name}",
                           "requester": (f"{resp.token_requester_principal_type}:{resp.token_requester_principal_name}"
                                         if resp.token_requester_principal_name else
                                         f"{resp.principal_type}:{resp.principal_name}"),
                           "renewers": [f"{t}:{n}" for t, n in renewers], "issue": resp.issue_timestamp_ms,
                           "expiry": resp.expiry_timestamp_ms, "max": resp.max_timestamp_ms}])
        elif o.has("renew") or o.has("expire"):
            # (operation, period option, how Kafka prints it, the request)
            op, option, shown, make = (
                ("renew", "renew-time-period", "renew-time-period",
                 lambda h, ms: RenewDelegationTokenRequest(hmac=h, renew_period_ms=ms)) if o.has("renew") else
                ("expire", "expiry-time-period", "expire-time-period",
                 lambda h, ms: ExpireDelegationTokenRequest(hmac=h, expiry_time_period_ms=ms)))
            period = o.get(option)
            period = -1 if period is None else period
            print(f"Calling {op} token operation with hmac :{o.get('hmac')} , {shown} :{period}")
            resp = await client.send_any(make(_hmac(o), period))
            raise_error(resp.error_code)
            print(f"Completed {op} operation. New expiry date : {fmt_date(resp.expiry_timestamp_ms)}")
        else:
            owners = [parse_principal(x) for x in (o.get("owner-principal") or []) if x]
            R = DescribeDelegationTokenRequest
            if owners:
                print(f"Calling describe token operation for owners: {java_list(f'{t}:{n}' for t, n in owners)}")
                req = R(owners=[R.DescribeDelegationTokenOwner(principal_type=t, principal_name=n) for t, n in owners])
            else:
                print("Calling describe token operation for current user.")
                req = R(owners=None)
            resp = await client.send_any(req)
            raise_error(resp.error_code)
            rows = []
            for t in resp.tokens:
                owner = f"{t.principal_type}:{t.principal_name}"
                rows.append({"id": t.token_id, "hmac": base64.b64encode(bytes(t.hmac)).decode("ascii"), "owner": owner,
                             "requester": (f"{t.token_requester_principal_type}:{t.token_requester_principal_name}"
                                           if t.token_requester_principal_name else owner),
                             "renewers": [f"{r.principal_type}:{r.principal_name}" for r in t.renewers],
                             "issue": t.issue_timestamp, "expiry": t.expiry_timestamp, "max": t.max_timestamp})
            print(f"Total number of tokens : {len(rows)}", end="")
            print_tokens(rows)
    finally:
        await client.close()
    return 0


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        if sum(1 for a in ACTIONS if o.has(a)) != 1:
            p.usage_exit("Command must include exactly one action: --create, --renew, --expire or --describe")
        require(p, o, "bootstrap-server", "command-config")
        if o.has("create"):
            require(p, o, "max-life-time-period")
        if o.has("renew"):
            require(p, o, "hmac", "renew-time-period")
        if o.has("expire"):
            require(p, o, "hmac", "expiry-time-period")
        check_invalid(p, o, "create", ["hmac", "renew-time-period", "expiry-time-period"])
        check_invalid(p, o, "renew", ["renewer-principal", "max-life-time-period", "expiry-time-period",
                                      "owner-principal"])
        check_invalid(p, o, "expire", ["renew", "max-life-time-period", "renew-time-period", "owner-principal"])
        check_invalid(p, o, "describe", ["renew-time-period", "max-life-time-period", "hmac", "expiry-time-period"])
        return execute(o)

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())

"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), v0-1.

Quotas are kept by the controller per entity: a user, a client id, or both, each possibly the
default entity (name null) — ``/config/users/<u>``, ``/config/users/<u>/clients/<c>``,
``/config/clients/<c>`` in ZooKeeper.  Keys: ``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage`` and ``controller_mutation_rate``, all enforced (broker/client_quota.py).
An IP entity (``/config/ips/<ip>``, an address or the default) has one key of its own,
``connection_creation_rate``, enforced when connections are accepted (broker/connection_quotas.py).

Describe follows Kafka's ZkAdminManager.describeClientQuotas: a component per entity type, match
type 0 = that name (null: the default), 1 = the default entity, 2 = any name; without ``strict``
an entity may have more types than the filter names, with ``strict`` only the types named.
Duplicate or empty component types are INVALID_REQUEST, other entity types UNSUPPORTED_VERSION.

Alter checks each entry as Kafka does (``controller.api.check_client_quota_entry``): unknown key
``Invalid configuration key <k>``, values must be > 0, byte rates whole numbers; each entry gets
its own error.  ``validate_only`` checks and changes nothing.

Authorization (broker/security/enforce.py): Describe needs DESCRIBE_CONFIGS on the cluster,
Alter ALTER_CONFIGS on the cluster; otherwise CLUSTER_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

import asyncio
import ipaddress

from broker.dispatch import handler
from controller.api import QUOTA_CLIENT_ID, QUOTA_IP, QUOTA_USER, check_client_quota_entry
from protocol.errors import ErrorCode as E
from protocol.messages import AlterClientQuotasResponse, DescribeClientQuotasResponse

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
_ANY = object()          # match type 2: any specified name


class _FilterError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def parse_filter(components) -> dict[str, object]:
    """entity type -> wanted name (None: the default entity, _ANY: any name)."""
    out: dict[str, object] = {}
    for c in components:
        t = c.entity_type
        if c.match_type == MATCH_EXACT:
            want = c.match
        elif c.match_type == MATCH_DEFAULT:
            want = None
        elif c.match_type == MATCH_SPECIFIED:
            want = _ANY
        else:
            raise _FilterError(E.INVALID_REQUEST, f"Unexpected match type: {c.match_type}")
        if t in (QUOTA_USER, QUOTA_CLIENT_ID, QUOTA_IP):
            if t in out:
                word = {QUOTA_USER: "user", QUOTA_CLIENT_ID: "client", QUOTA_IP: "ip"}[t]
                raise _FilterError(E.INVALID_REQUEST, f"Duplicate {word} filter component entity type")
            out[t] = want
        elif t == "":
            raise _FilterError(E.INVALID_REQUEST, "Unexpected empty filter component entity type")
        else:
            raise _FilterError(E.UNSUPPORTED_VERSION, f"Custom entity type '{t}' not supported")
    if QUOTA_IP in out and (QUOTA_USER in out or QUOTA_CLIENT_ID in out):
        raise _FilterError(E.INVALID_REQUEST, "Invalid entity filter component combination, IP filter component "
                                              "should not be used with user or clientId filter component.")
    return out


def matches(wanted: dict[str, object], strict: bool, entity: tuple) -> bool:
    names = dict(entity)
    for t in (QUOTA_USER, QUOTA_CLIENT_ID, QUOTA_IP):
        if t in wanted:
            if t not in names:
                return False
            w = wanted[t]
            if w is not _ANY and names[t] != w:
                return False
        elif strict and t in names:
            return False
    return True


def describe(quotas: dict[tuple, dict[str, float]], components, strict: bool) -> list[tuple[tuple, dict]]:
    """The (entity, values) pairs a filter selects, sorted; raises _FilterError."""
    wanted = parse_filter(components)
    out = [(e, v) for e, v in quotas.items() if v and matches(wanted, strict, e)]
    return sorted(out, key=lambda ev: [(t, n is not None, n or "") for t, n in ev[0]])


def _entity_order(entity):
    return sorted(entity, key=lambda p: 0 if p[0] == QUOTA_USER else 1)


@handler(48, 0, 1)
async def describe_client_quotas(ctx, req):
    R = DescribeClientQuotasResponse
    refresh = getattr(ctx.broker.controller, "refresh_client_quotas", None)
    if refresh is not None:     # ZooKeeper mode: read from ZooKeeper, as Kafka does
        await refresh()
    try:
        selected = describe(ctx.broker.controller.client_quotas(), req.components or [], req.strict)
    except _FilterError as e:
        return R(throttle_time_ms=0, error_code=e.code, error_message=str(e), entries=None)
    entries = [R.EntryData(entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in _entity_order(entity)],
                           values=[R.ValueData(key=k, value=float(v)) for k, v in sorted(values.items())])
               for entity, values in selected]
    return R(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


@handler(49, 0, 1)
async def alter_client_quotas(ctx, req):
    R = AlterClientQuotasResponse
    results = []            # (request entry, error ApiResult or index into valid)
    valid = []
    for entry in req.entries:
        args = ([(e.entity_type, e.entity_name) for e in entry.entity], [(op.key, op.value, op.remove) for op in entry.ops])
        if any(t == QUOTA_IP and n and not _is_address(n) for t, n in args[0]):
            # an IP entity named by a host must resolve: looked up off the event loop
            bad, entity, changes = await asyncio.get_running_loop().run_in_executor(
                None, check_client_quota_entry, *args)
        else:
            bad, entity, changes = check_client_quota_entry(*args)
        if bad is not None:
            results.append((entry, bad))
        else:
            results.append((entry, len(valid)))
            valid.append((entity, changes))
    done = await ctx.broker.controller.alter_client_quotas(valid, req.validate_only) if valid else []
    # Kafka applies every entry in turn and answers each entity once, with its last result
    out: dict = {}
    for entry, r in results:
        res = done[r] if isinstance(r, int) else r
        key = frozenset((e.entity_type, e.entity_name) for e in entry.entity)
        out[key] = R.EntryData(error_code=res.error_code, error_message=res.error_message,
                               entity=[R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                                       for e in entry.entity])
    return R(throttle_time_ms=0, entries=list(out.values()))

"""CreateAcls (key 30), DescribeAcls (key 29), DeleteAcls (key 31), v0-3 each.

* Without an authorizer every request answers SECURITY_DISABLED ("No Authorizer is
  configured."), as Kafka does.
* CreateAcls and DeleteAcls need ALTER on the cluster, DescribeAcls DESCRIBE on the cluster;
  otherwise CLUSTER_AUTHORIZATION_FAILED.
* v0 has no pattern type: creations are LITERAL and filters match LITERAL bindings only.
* CreateAcls as Kafka 3.9 with its AclAuthorizer: a binding holding a filter's value (ANY,
  MATCH) fails the whole request (UNKNOWN_SERVER_ERROR, nothing stored); otherwise each binding
  is checked (``acl.validate_binding``: ``kafka-cluster`` as the only CLUSTER name, a non-empty
  name, known elements and no "/" in the name are INVALID_REQUEST per binding); a principal that
  is not ``Type:name`` fails, with UNKNOWN_SERVER_ERROR, every binding of its resource in the
  request (Kafka stores a resource's new ACLs in one update); the rest are stored together.
* DescribeAcls and DeleteAcls close the connection for a filter with an UNKNOWN (0) element, as
  Kafka's request classes refuse one.
* DescribeAcls groups the matching bindings by resource pattern; DeleteAcls answers, per
  filter, the bindings it removed.  Bindings live in the controller's store
  (``Controller.acls``/``create_acls``/``delete_acls``).
"""
from __future__ import annotations

import logging

from broker.dispatch import handler
from broker.security import acl as A
from protocol.errors import ErrorCode as E
from protocol.messages import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse

NO_AUTHORIZER = "No Authorizer is configured."
log = logging.getLogger("odradek.acls")


def _unknown_element(f: A.AclFilter) -> bool:
    """Kafka's DescribeAcls/DeleteAcls request classes refuse a filter with an UNKNOWN (0) element
    when they are built, and the socket server then closes the connection."""
    return 0 in (f.resource_type, f.pattern_type, f.operation, f.permission)


def _close_for(ctx, f: A.AclFilter, what: str) -> None:
    log.info("closing connection from %s: %s filter with an UNKNOWN element (%s)", ctx.client_host, what, f)
    ctx.connection.close()


def _filter(req, version) -> A.AclFilter:
    return A.AclFilter(req.resource_type_filter, req.resource_name_filter,
                       req.pattern_type_filter if version >= 1 else A.LITERAL,
                       req.principal_filter, req.host_filter, req.operation, req.permission_type)


@handler(30, 0, 3)
async def create_acls(ctx, req):
    R = CreateAclsResponse
    n = len(req.creations)
    if ctx.authorizer is None:
        return R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=E.SECURITY_DISABLED,
                                                                  error_message=NO_AUTHORIZER)] * n)
    if not ctx.authorize(A.ALTER, A.CLUSTER, A.CLUSTER_NAME):
        return R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                                                                  error_message=None)] * n)
    bindings = [A.AclBinding(c.resource_type, c.resource_name or "",
                             c.resource_pattern_type if ctx.api_version >= 1 else A.LITERAL,
                             c.principal or "", c.host or "", c.operation, c.permission_type)
                for c in req.creations]
    if any(A.is_filter_only(b) for b in bindings):
        # Kafka cannot even build such a binding (ANY or MATCH is a filter's value): the whole
        # request fails with UNKNOWN_SERVER_ERROR and nothing is stored
        return R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=E.UNKNOWN_SERVER_ERROR,
                                                                  error_message=None)] * n)
    problems = [A.validate_binding(b) for b in bindings]
    # a principal Kafka cannot parse fails its resource's whole update (every binding on it)
    failed_patterns = {b.pattern for b, pr in zip(bindings, problems) if pr and pr[0] == E.UNKNOWN_SERVER_ERROR}
    results, good = [], []
    for b, problem in zip(bindings, problems):
        if problem is None and b.pattern in failed_patterns:
            problem = (E.UNKNOWN_SERVER_ERROR, None)
        if problem:
            results.append(R.AclCreationResult(error_code=problem[0], error_message=problem[1]))
        else:
            results.append(R.AclCreationResult(error_code=0, error_message=None))
            good.append(b)
    if good:
        res = await ctx.broker.controller.create_acls(good)
        if res.error_code:
            results = [r if r.error_code else R.AclCreationResult(error_code=res.error_code,
                                                                   error_message=res.error_message)
                       for r in results]
    return R(throttle_time_ms=0, results=results)


@handler(29, 0, 3)
async def describe_acls(ctx, req):
    R = DescribeAclsResponse
    f = _filter(req, ctx.api_version)
    if _unknown_element(f):         # refused as Kafka refuses it: before anything else
        _close_for(ctx, f, "DescribeAcls")
        return None
    if ctx.authorizer is None:      # (Kafka's wording differs from Create/DeleteAcls' here)
        return R(throttle_time_ms=0, error_code=E.SECURITY_DISABLED,
                 error_message="No Authorizer is configured on the broker", resources=[])
    if not ctx.authorize(A.DESCRIBE, A.CLUSTER, A.CLUSTER_NAME):
        return R(throttle_time_ms=0, error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message=None, resources=[])
    problem = f.find_problem()
    if problem:
        return R(throttle_time_ms=0, error_code=E.INVALID_REQUEST, error_message=problem, resources=[])
    grouped: dict[tuple, list] = {}
    for b in ctx.broker.controller.acls():
        if f.matches(b):
            grouped.setdefault(b.pattern, []).append(
                R.AclDescription(principal=b.principal, host=b.host, operation=b.operation,
                                 permission_type=b.permission))
    resources = [R.DescribeAclsResource(resource_type=rt, resource_name=name, pattern_type=pt, acls=acls)
                 for (rt, name, pt), acls in grouped.items()]
    return R(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


@handler(31, 0, 3)
async def delete_acls(ctx, req):
    R = DeleteAclsResponse
    filters = [_filter(fr, ctx.api_version) for fr in req.filters]
    for f in filters:
        if _unknown_element(f):     # refused as Kafka refuses it: before anything else
            _close_for(ctx, f, "DeleteAcls")
            return None
    if ctx.authorizer is None:
        return R(throttle_time_ms=0, filter_results=[
            R.DeleteAclsFilterResult(error_code=E.SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[])
            for _ in req.filters])
    if not ctx.authorize(A.ALTER, A.CLUSTER, A.CLUSTER_NAME):
        return R(throttle_time_ms=0, filter_results=[
            R.DeleteAclsFilterResult(error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message=None, matching_acls=[])
            for _ in req.filters])
    current = ctx.broker.controller.acls()
    results, doomed, seen = [], [], set()
    for f in filters:
        problem = f.find_problem()
        if problem:
            results.append(R.DeleteAclsFilterResult(error_code=E.INVALID_REQUEST, error_message=problem,
                                                    matching_acls=[]))
            continue
        # as Kafka's authorizer: a binding that several filters match is reported once, under
        # the first of them
        matched = [b for b in current if b not in seen and f.matches(b)]
        seen.update(matched)
        doomed.extend(matched)
        results.append(R.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=[
            R.DeleteAclsMatchingAcl(error_code=0, error_message=None, resource_type=b.resource_type,
                                    resource_name=b.name, pattern_type=b.pattern_type, principal=b.principal,
                                    host=b.host, operation=b.operation, permission_type=b.permission)
            for b in matched]))
    if doomed:
        res = await ctx.broker.controller.delete_acls(doomed)
        if res.error_code:
            results = [R.DeleteAclsFilterResult(error_code=res.error_code, error_message=res.error_message,
                                                matching_acls=[]) for _ in req.filters]
    return R(throttle_time_ms=0, filter_results=results)

"""The ACL authorizer (``authorizer.class.name`` = AclAuthorizer or StandardAuthorizer).

Decision for (principal, host, operation, resource type, resource name), as Kafka decides:

1. A principal listed in ``super.users`` is allowed everything.
2. The ACLs that apply to the resource are those of the same resource type whose pattern
   matches the name: LITERAL with the same name, LITERAL ``*``, PREFIXED with a prefix of the
   name.  If there are none, the answer is ``allow.everyone.if.no.acl.found``.
3. A DENY that matches the principal (or ``User:*``), the host (or ``*``) and the operation
   (or ALL) denies, whatever the ALLOWs say.
4. Otherwise an ALLOW that matches the principal and host and whose operation is the one asked,
   ALL, or one that implies it (READ/WRITE/DELETE/ALTER imply DESCRIBE; ALTER_CONFIGS implies
   DESCRIBE_CONFIGS) allows.  Nothing else does.

The bindings come from the controller's store (``Controller.acls()``, an immutable tuple);
the per-resource-type index is rebuilt when that tuple changes.
"""
from __future__ import annotations

import logging

from broker.security import acl as A

log = logging.getLogger("odradek.authorizer")

AUTHORIZER_CLASSES = {
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
}


def parse_super_users(raw) -> frozenset[str]:
    if not raw:
        return frozenset()
    if isinstance(raw, (list, tuple)):
        items = raw
    else:
        items = str(raw).split(";")
    return frozenset(x.strip() for x in items if x.strip())


class AclAuthorizer:
    def __init__(self, acl_source, super_users=(), allow_if_no_acl: bool = False):
        self._source = acl_source          # callable -> tuple[AclBinding, ...]
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._seen = None
        self._by_type: dict[int, list[A.AclBinding]] = {}

    def _index(self) -> dict[int, list[A.AclBinding]]:
        acls = self._source()
        if acls is not self._seen:
            by_type: dict[int, list[A.AclBinding]] = {}
            for b in acls:
                by_type.setdefault(b.resource_type, []).append(b)
            self._by_type, self._seen = by_type, acls
        return self._by_type

    def matching_acls(self, resource_type: int, name: str) -> list[A.AclBinding]:
        out = []
        for b in self._index().get(resource_type, ()):
            if b.pattern_type == A.LITERAL:
                if b.name == name or b.name == A.WILDCARD_RESOURCE:
                    out.append(b)
            elif b.pattern_type == A.PREFIXED and name.startswith(b.name):
                out.append(b)
        return out

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self.matching_acls(resource_type, name)
        if not acls:
            return self.allow_if_no_acl
        principals = (principal, A.WILDCARD_PRINCIPAL)
        hosts = (host, A.WILDCARD_HOST)
        for b in acls:
            if b.permission == A.DENY and b.principal in principals and b.host in hosts \
                    and b.operation in (operation, A.ALL):
                return False
        allowed_ops = A.IMPLIED_BY.get(operation, (operation,))
        for b in acls:
            if b.permission == A.ALLOW and b.principal in principals and b.host in hosts \
                    and (b.operation == A.ALL or b.operation in allowed_ops):
                return True
        return False

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Would ``operation`` be allowed on *some* resource of this type?  (Kafka's
        authorizeByResourceType, used for idempotent/transactional producers.)"""
        if principal in self.super_users:
            return True
        principals = (principal, A.WILDCARD_PRINCIPAL)
        hosts = (host, A.WILDCARD_HOST)
        acls = [b for b in self._index().get(resource_type, ())
                if b.principal in principals and b.host in hosts
                and (b.operation == A.ALL or b.operation in A.IMPLIED_BY.get(operation, (operation,)))]
        denied_literal = {b.name for b in acls if b.permission == A.DENY and b.pattern_type == A.LITERAL}
        denied_prefix = [b.name for b in acls if b.permission == A.DENY and b.pattern_type == A.PREFIXED]
        if A.WILDCARD_RESOURCE in denied_literal:
            return False
        for b in acls:
            if b.permission != A.ALLOW:
                continue
            if b.pattern_type == A.LITERAL and b.name in denied_literal:
                continue
            if any(b.name.startswith(p) for p in denied_prefix):
                continue
            return True
        return self.allow_if_no_acl and not self._index().get(resource_type)

    def authorized_operations(self, principal: str, host: str, resource_type: int, name: str) -> int:
        """The bitfield of the resource type's operations this principal may perform."""
        bits = 0
        for op in A.RESOURCE_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

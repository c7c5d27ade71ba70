"""ACL model with Kafka's codes and matching rules (AclBinding, AclBindingFilter, patterns).

Codes are the wire values of the CreateAcls/DescribeAcls/DeleteAcls messages:

* resource types: ANY 1, TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5, DELEGATION_TOKEN 6, USER 7
* pattern types: ANY 1, MATCH 2, LITERAL 3, PREFIXED 4
* operations: ANY 1, ALL 2, READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
  CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12,
  CREATE_TOKENS 13, DESCRIBE_TOKENS 14
* permission types: ANY 1, DENY 2, ALLOW 3

Stored bindings always have a concrete resource type, a LITERAL or PREFIXED pattern, a
concrete operation (or ALL) and ALLOW/DENY.  A LITERAL name ``*`` is the wildcard resource; a
principal ``User:*`` and a host ``*`` are wildcards too.

Filters (DescribeAcls, DeleteAcls) match bindings: ANY and null fields match everything; the
pattern type MATCH matches every binding that would *apply to* the named resource (literal
same name, literal ``*``, prefixed patterns that are a prefix of the name).
"""
from __future__ import annotations

from typing import NamedTuple

ANY = 1

# resource types
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
RESOURCE_TYPES = {"UNKNOWN": 0, "ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5,
                  "DELEGATION_TOKEN": 6, "USER": 7}
RESOURCE_TYPE_NAMES = {v: k for k, v in RESOURCE_TYPES.items()}

# pattern types
MATCH, LITERAL, PREFIXED = 2, 3, 4
PATTERN_TYPES = {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
PATTERN_TYPE_NAMES = {v: k for k, v in PATTERN_TYPES.items()}

# operations
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS = 13, 14
OPERATIONS = {"UNKNOWN": 0, "ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7,
              "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
              "IDEMPOTENT_WRITE": 12, "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}
OPERATION_NAMES = {v: k for k, v in OPERATIONS.items()}

# permission types
DENY, ALLOW = 2, 3
PERMISSION_TYPES = {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}
PERMISSION_TYPE_NAMES = {v: k for k, v in PERMISSION_TYPES.items()}

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

# Operations each resource type supports (the authorized-operations bitfields list these).
RESOURCE_OPERATIONS = {
    TOPIC: (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DELETE, DESCRIBE),
    CLUSTER: (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE),
    TRANSACTIONAL_ID: (WRITE, DESCRIBE),
    DELEGATION_TOKEN: (DESCRIBE,),
    USER: (CREATE_TOKENS, DESCRIBE_TOKENS),
}

# An ALLOW for any of these operations also allows the key (Kafka's implied operations).
IMPLIED_BY = {
    DESCRIBE: (DESCRIBE, READ, WRITE, DELETE, ALTER),
    DESCRIBE_CONFIGS: (DESCRIBE_CONFIGS, ALTER_CONFIGS),
}


class AclBinding(NamedTuple):
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    @property
    def pattern(self) -> tuple[int, str, int]:
        return (self.resource_type, self.name, self.pattern_type)

    def to_json(self) -> list:
        return list(self)

    @classmethod
    def from_json(cls, row) -> "AclBinding":
        return cls(int(row[0]), str(row[1]), int(row[2]), str(row[3]), str(row[4]), int(row[5]), int(row[6]))


class AclFilter(NamedTuple):
    resource_type: int = ANY
    name: str | None = None
    pattern_type: int = ANY
    principal: str | None = None
    host: str | None = None
    operation: int = ANY
    permission: int = ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ANY and self.resource_type != b.resource_type:
            return False
        if not self._pattern_matches(b):
            return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != ANY and self.operation != b.operation:
            return False
        if self.permission != ANY and self.permission != b.permission:
            return False
        return True

    def _pattern_matches(self, b: AclBinding) -> bool:
        pt = self.pattern_type
        if pt == MATCH:
            if self.name is None:
                return True
            if b.pattern_type == LITERAL:
                return b.name == self.name or b.name == WILDCARD_RESOURCE
            if b.pattern_type == PREFIXED:
                return self.name.startswith(b.name)
            return False
        if pt != ANY and pt != b.pattern_type:
            return False
        return self.name is None or self.name == b.name

    def find_problem(self) -> str | None:
        """Why this filter can never match (Kafka's findIndefiniteField), or None."""
        for value, names, what in ((self.resource_type, RESOURCE_TYPE_NAMES, "resource type"),
                                   (self.pattern_type, PATTERN_TYPE_NAMES, "pattern type"),
                                   (self.operation, OPERATION_NAMES, "operation"),
                                   (self.permission, PERMISSION_TYPE_NAMES, "permission type")):
            if value not in names or value == 0:
                return f"Unknown {what}"
        return None


def is_filter_only(b: AclBinding) -> bool:
    """A binding with ANY (or MATCH) in it, which only a filter may have: Kafka's request class
    throws building it."""
    return b.resource_type == ANY or b.pattern_type in (ANY, MATCH) or b.operation == ANY or b.permission == ANY


def validate_binding(b: AclBinding) -> tuple[int, str] | None:
    """Kafka 3.9's checks of an ACL to create, in its order (AclApis, then the authorizer): None
    when acceptable, else (error code, message).  A principal Kafka cannot parse fails when the
    ACL is stored: UNKNOWN_SERVER_ERROR with no message.  Any host is accepted, as Kafka does."""
    from protocol.errors import ErrorCode as E
    if b.resource_type == CLUSTER and b.name != CLUSTER_NAME:
        return E.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"
    if not b.name:
        return E.INVALID_REQUEST, "Invalid empty resource name"
    if (b.resource_type not in RESOURCE_OPERATIONS or b.pattern_type not in (LITERAL, PREFIXED)
            or b.operation not in OPERATION_NAMES or b.operation == 0 or b.permission not in (ALLOW, DENY)
            or "/" in b.name):
        return E.INVALID_REQUEST, "Failed to create ACL"     # unknown elements, or a "/" in the name
    kind, sep, name = (b.principal or "").partition(":")
    if not sep or not kind or not name:
        return E.UNKNOWN_SERVER_ERROR, None
    return None


def binding_text(b: AclBinding) -> str:
    """Kafka's AccessControlEntry.toString."""
    return (f"(principal={b.principal}, host={b.host}, operation={OPERATION_NAMES.get(b.operation, 'UNKNOWN')}, "
            f"permissionType={PERMISSION_TYPE_NAMES.get(b.permission, 'UNKNOWN')})")


def pattern_text(resource_type: int, name: str, pattern_type: int) -> str:
    """Kafka's ResourcePattern.toString."""
    return (f"ResourcePattern(resourceType={RESOURCE_TYPE_NAMES.get(resource_type, 'UNKNOWN')}, name={name}, "
            f"patternType={PATTERN_TYPE_NAMES.get(pattern_type, 'UNKNOWN')})")

"""kafka-acls.sh's authorizer mode: ``--authorizer-properties zookeeper.connect=host:port[/chroot]``
(optionally ``--authorizer kafka.security.authorizer.AclAuthorizer``) adds, removes and lists ACLs
directly in ZooKeeper, as Kafka 3.x's AclCommand does through an AclAuthorizer instance.

Behaviour follows Kafka 3.9:

* the deprecation notice goes to stderr before anything else;
* ``--add`` prints ``Adding ACLs for resource `ResourcePattern(...)`:`` with the entries, and a
  binding the authorizer refuses (a resource name containing ``/``) is reported as
  ``Error while adding ACLs: ...`` without failing the command; ``--add`` and ``--remove`` do not
  list the ACLs afterwards (3.9 dropped that);
* ``--remove`` asks for confirmation unless ``--force`` (answer ``y``); with no principal it removes
  every ACL of the resource filter (``--resource-pattern-type any|match`` widen the filter);
* ``--list`` prints ``Current ACLs for resource `...`:`` blocks, per ``--principal`` when given;
* failures (ZooKeeper unreachable, unreadable znodes) print
  ``Error while executing ACL command: <message>`` on stdout and exit with status 1.

Authorizer properties read: ``zookeeper.connect`` (or ``authorizer.zookeeper.url``),
``zookeeper.session.timeout.ms`` / ``zookeeper.connection.timeout.ms`` (also with the
``authorizer.`` prefix), ZooKeeper TLS (``zookeeper.ssl.*`` and ``zookeeper.clientCnxnSocket``
there or in ``--zk-tls-config-file``, which wins) and ``zookeeper.set.acl``
(controller/zookeeper/zkauth.py: a SASL login from ``KAFKA_OPTS`` or a TLS client certificate).
"""
from __future__ import annotations

import sys

from broker.security import acl as A
from tools.acls import ACL_AUTHORIZER, NL, _bindings_per_resource, _enum, _print_block, _resources
from tools.common import ToolError, check_invalid
from tools.zkadmin import TLS_KEYS, zk_tls_file



def _props(o) -> dict[str, str]:
    out = {}
    for item in o.get("authorizer-properties") or []:
        key, sep, value = item.partition("=")
        if not sep or value == "":
            raise ToolError(f"Missing value for key {key}}}")
        out[key] = value
    return out


def _setting(props: dict[str, str], key: str):
    v = props.get("authorizer." + key)
    return v if v is not None else props.get(key)


def _true(v) -> bool:
    return str(v).strip().lower() == "true"


def check_args(p, o) -> str:
    """AclCommandOptions.checkArgs (the parts after the connection checks); returns the action."""
    actions = [a for a in ("add", "remove", "list") if o.has(a)]
    if len(actions) != 1:
        p.usage_exit("Command must include exactly one action: --list, --add, --remove. ")
    check_invalid(p, o, "list", ["producer", "consumer", "allow-host", "allow-principal", "deny-host",
                                 "deny-principal"])
    check_invalid(p, o, "producer", ["operation", "deny-principal", "deny-host"])
    check_invalid(p, o, "consumer", ["operation", "deny-principal", "deny-host"])
    if o.has("principal") and not o.has("list"):
        p.usage_exit("The --principal option is only available if --list is set")
    if o.has("producer") and not o.has("topic"):
        p.usage_exit("With --producer you must specify a --topic")
    if o.has("idempotent") and not o.has("producer"):
        p.usage_exit("The --idempotent option is only available if --producer is set")
    if o.has("consumer") and (not o.has("topic") or not o.has("group") or (
            not o.has("producer") and (o.has("cluster") or o.has("transactional-id")))):
        p.usage_exit("With --consumer you must specify a --topic and a --group and no --cluster or "
                     "--transactional-id option should be specified.")
    return actions[0]


def _filter_text(r) -> str:
    """Kafka's ResourcePatternFilter.toString."""
    return "ResourcePatternFilter" + A.pattern_text(*r)[len("ResourcePattern"):]


def _confirm(o, question: str) -> bool:
    if o.has("force"):
        return True
    print(question)
    sys.stdout.flush()
    return sys.stdin.readline().strip().lower() == "y"


def _list(zk, o, pattern: int) -> None:
    filters = [A.AclFilter(rt, name, pt) for rt, name, pt in _resources(o, pattern)] or [A.AclFilter()]
    by_pattern: dict[tuple, list[A.AclBinding]] = {}
    for b in zk.acls():
        if any(f.matches(b) for f in filters):
            by_pattern.setdefault(b.pattern, []).append(b)
    principals = o.get("principal") or []
    if not principals:
        for pat, bindings in by_pattern.items():
            _print_block(f"Current ACLs for resource `{A.pattern_text(*pat)}`", bindings)
        return
    for pr in principals:
        print(f"ACLs for principal `{pr}`")
        for pat, bindings in by_pattern.items():
            mine = [b for b in bindings if b.principal == pr]
            if mine:
                _print_block(f"Current ACLs for resource `{A.pattern_text(*pat)}`", mine)


def _create_problem(b: A.AclBinding) -> str | None:
    """AclAuthorizer's validateAclBinding, plus the broker's own checks."""
    if "/" in b.name:
        return f"ACL binding contains invalid resource name: {b.name}"
    problem = A.validate_binding(b)
    if problem is None:
        return None
    return problem[1] or f"expected a string in format principalType:principalName but got {b.principal}"


def execute_zk(p, o) -> int:
    from tools.zkadmin import ZkAdmin, ZkAdminError
    action = check_args(p, o)
    pattern_text = o.get("resource-pattern-type") or "LITERAL"
    try:
        pattern = _enum(pattern_text, A.PATTERN_TYPES, "resource pattern type")
    except ToolError:
        p.usage_exit(f"Unknown resource-pattern-type: {pattern_text}")
    if pattern == 0:
        p.usage_exit(f"Unknown resource-pattern-type: {pattern_text}")
    resources = _resources(o, pattern)
    if action == "add" and pattern not in (A.LITERAL, A.PREFIXED):
        p.usage_exit(f"A '--resource-pattern-type' value of '{A.PATTERN_TYPE_NAMES[pattern]}' is not valid "
                     "when adding acls.")
    if action in ("add", "remove") and not resources:
        p.usage_exit("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                     "or --delegation-token <Delegation Token ID>")
    per_resource = _bindings_per_resource(o, pattern) if action != "list" else {}
    if action == "add" and (not per_resource or any(not v for v in per_resource.values())):
        p.usage_exit("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")

    authorizer = o.get("authorizer") or ACL_AUTHORIZER
    try:
        if authorizer != ACL_AUTHORIZER:
            raise ToolError(f"Odradek's kafka-acls.sh can only manage the ACLs of {ACL_AUTHORIZER} "
                            f"(stored in ZooKeeper) without a broker, not those of {authorizer}; use "
                            "--bootstrap-server")
        props = _props(o)
        tls = {k: _setting(props, k) for k in TLS_KEYS if _setting(props, k) is not None}
        if o.has("zk-tls-config-file"):
            tls.update(zk_tls_file(o["zk-tls-config-file"]))
        connect = props.get("authorizer.zookeeper.url") or props.get("zookeeper.connect")
        if not connect:
            raise ToolError("Missing required configuration `zookeeper.connect` which has no default value.")
        try:
            session_ms = int(_setting(props, "zookeeper.session.timeout.ms") or 18000)
            conn = _setting(props, "zookeeper.connection.timeout.ms")
            connection_ms = int(conn) if conn else session_ms
        except ValueError as e:
            raise ToolError(f"Invalid ZooKeeper timeout: {e}") from None
        with ZkAdmin(connect, session_ms, connection_ms, set_acl=_true(_setting(props, "zookeeper.set.acl")),
                     tls_props=tls) as zk:
            zk.ensure_acl_paths()
            if action == "list":
                _list(zk, o, pattern)
            elif action == "add":
                for r, bindings in per_resource.items():
                    bindings = list(dict.fromkeys(bindings))
                    _print_block(f"Adding ACLs for resource `{A.pattern_text(*r)}`", bindings)
                    bad = [(b, _create_problem(b)) for b in bindings]
                    for b, problem in bad:
                        if problem:
                            print("Error while adding ACLs: Failed to create ACL")
                            print(f"Caused by: {problem}")
                    good = [b for b, problem in bad if not problem]
                    if good:
                        try:
                            zk.create_acls(good)
                        except ZkAdminError as e:
                            print(f"Error while adding ACLs: {e}")
            else:
                for r in resources:
                    bindings = list(dict.fromkeys(per_resource.get(r) or []))
                    if bindings:
                        question = (f"Are you sure you want to remove ACLs: {NL} "
                                    + NL.join("\t" + A.binding_text(b) for b in bindings)
                                    + f" {NL} from resource filter `{_filter_text(r)}`? (y/n)")
                        filters = [A.AclFilter(r[0], r[1], r[2], b.principal, b.host, b.operation, b.permission)
                                   for b in bindings]
                    else:
                        question = (f"Are you sure you want to delete all ACLs for resource filter "
                                    f"`{_filter_text(r)}`? (y/n)")
                        filters = [A.AclFilter(r[0], r[1], r[2])]
                    if _confirm(o, question):
                        try:
                            zk.delete_acls(filters)
                        except ZkAdminError as e:
                            print(f"Error while removing ACLs: {e}")
        return 0
    except (ToolError, ZkAdminError) as e:
        print(f"Error while executing ACL command: {e}")
        return 1
    except Exception as e:           # kazoo errors (connection loss, no auth) and the like
        print(f"Error while executing ACL command: {type(e).__name__}: {e}")
        return 1

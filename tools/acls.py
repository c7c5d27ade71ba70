"""kafka-acls.sh: add, remove and list ACLs through CreateAcls / DeleteAcls / DescribeAcls, or (Kafka
3.x's deprecated authorizer mode, ``--authorizer-properties zookeeper.connect=host:port[/chroot]``)
directly in ZooKeeper, in the znodes the brokers' AclAuthorizer uses (``tools/zkadmin.py``).

Kafka's flags: --bootstrap-server, --command-config, --add | --remove | --list, resources
(--topic, --group, --cluster, --transactional-id; repeatable), --resource-pattern-type
(LITERAL default; PREFIXED; ANY/MATCH for --list/--remove), --allow-principal/--deny-principal,
--allow-host/--deny-host (default * when a principal is given), --operation (default ALL),
--principal (filter for --list), the --producer/--consumer conveniences (with --idempotent),
and --force (no confirmation prompt for --remove).  Output follows AclCommand:

    Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:
     	(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)
"""
from __future__ import annotations

import sys

from broker.security import acl as A
from protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from tools.common import OptionParser, ToolError, cluster_from, parse_or_exit, raise_error, require, run

DESCRIPTION = "Adds, removes and lists ACLs (access control lists) on the cluster."
NL = "\n"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
DEPRECATION = ("Warning: managing ACLs directly in ZooKeeper (--authorizer / --authorizer-properties) is "
               "deprecated and goes away together with ZooKeeper mode; prefer --bootstrap-server, which "
               "sends the changes through a broker.")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("bootstrap-server", "Broker address(es) to contact first, as host:port[,host:port...].",
          "server to connect to")
    p.add("command-config", "Properties file with settings for the admin client (security, timeouts, "
                            "client.id, ...).", "command-config")
    p.add("add", "Action: create the ACLs described by the other options.")
    p.add("remove", "Action: delete the ACLs matching the other options.")
    p.add("list", "Action: show ACLs, optionally only those of the resources named with --topic, --group, "
                  "--cluster, etc.")
    p.add("topic", "Topic the ACLs are about; '*' stands for every topic. May be repeated.", "topic",
          multi=True)
    p.add("cluster", "The ACLs are about the cluster resource.")
    p.add("group", "Consumer group the ACLs are about; '*' stands for every group. May be repeated.", "group",
          multi=True)
    p.add("transactional-id", "Transactional id the ACLs are about; '*' stands for every transactional id. "
                              "May be repeated.", "transactional-id", multi=True)
    p.add("resource-pattern-type", "How resource names are matched. --add takes LITERAL (exact name) or "
                                   "PREFIXED (name prefix); --list and --remove also take ANY (any pattern "
                                   "type) and MATCH (every pattern that would apply to the named resource). "
                                   "(default: LITERAL)", "ANY|MATCH|LITERAL|PREFIXED")
    p.add("allow-principal", "Principal, as type:name (e.g. User:alice), that the new ACLs allow; the "
                             "authorizer must know the type. May be repeated.", "allow-principal", multi=True)
    p.add("deny-principal", "Principal, as type:name, that the new ACLs deny. Principals without a matching "
                            "allow ACL are refused anyway. May be repeated.", "deny-principal", multi=True)
    p.add("principal", "With --list: show only the ACLs of this principal (type:name). May be repeated.",
          "principal", multi=True)
    p.add("allow-host", "Client host the --allow-principal ACLs apply to; '*' (any host) when left out and "
                        "an allowed principal is given.", "allow-host", multi=True)
    p.add("deny-host", "Client host the --deny-principal ACLs apply to; '*' (any host) when left out and "
                       "a denied principal is given.", "deny-host", multi=True)
    p.add("operation", "Operation to allow or deny, one of: Describe, DescribeConfigs, Alter, IdempotentWrite, "
                       "Read, Delete, Create, ClusterAction, All, CreateTokens, DescribeTokens, Write, "
                       "AlterConfigs. May be repeated. (default: All)", "operation", multi=True)
    p.add("producer", "Shortcut for a producer's ACLs: WRITE, DESCRIBE and CREATE on the given topic(s), "
                      "and WRITE and DESCRIBE on any --transactional-id.")
    p.add("consumer", "Shortcut for a consumer's ACLs: READ and DESCRIBE on the given topic(s) and READ on "
                      "the given group.")
    p.add("idempotent", "With --producer: also allow IdempotentWrite on the cluster.")
    p.add("force", "Do not ask for confirmation before removing ACLs.")
    p.add("delegation-token", "Delegation token id the ACLs are about; '*' stands for every token. May be "
                              "repeated.", "delegation-token", multi=True)
    p.add("user-principal", "User principal the ACLs are about, as a resource (for operations such as "
                            "CreateTokens or DescribeTokens on behalf of that user). May be repeated.",
          "user-principal", multi=True)
    p.add("authorizer", "DEPRECATED: the authorizer whose ACLs are managed without a broker; only "
                        f"{ACL_AUTHORIZER} (the default when --bootstrap-server is not given) is "
                        "supported. " + DEPRECATION, "authorizer")
    p.add("authorizer-properties", "DEPRECATED: key=val settings of the authorizer given by --authorizer, "
                                   "e.g. zookeeper.connect=localhost:2181[/chroot]. " + DEPRECATION,
          "authorizer-properties", multi=True)
    p.add("zk-tls-config-file", "DEPRECATED: ZooKeeper client TLS settings (zookeeper.ssl.*) for the "
                                "authorizer mode. " + DEPRECATION,
          "Authorizer ZooKeeper TLS configuration")
    return p


def _enum(text: str, table: dict[str, int], what: str) -> int:
    key = text.replace("-", "").replace("_", "").upper()
    for name, code in table.items():
        if name.replace("_", "") == key:
            return code
    raise ToolError(f"Invalid {what}: {text}")


def _resources(o, pattern: int) -> list[tuple[int, str, int]]:
    out = [(A.TOPIC, t, pattern) for t in o.get("topic") or []]
    out += [(A.GROUP, g, pattern) for g in o.get("group") or []]
    out += [(A.TRANSACTIONAL_ID, t, pattern) for t in o.get("transactional-id") or []]
    out += [(A.DELEGATION_TOKEN, t.strip(), pattern) for t in o.get("delegation-token") or []]
    out += [(A.USER, u.strip(), pattern) for u in o.get("user-principal") or []]
    if o.get("cluster"):
        out.append((A.CLUSTER, A.CLUSTER_NAME, pattern))
    return out


def _entries(o) -> list[tuple[str, str, int]]:
    """(principal, host, permission) for --allow-principal/--deny-principal."""
    out = []
    for key, hkey, perm in (("allow-principal", "allow-host", A.ALLOW), ("deny-principal", "deny-host", A.DENY)):
        principals = o.get(key) or []
        hosts = o.get(hkey) or ["*"]
        for pr in principals:
            if ":" not in pr:
                raise ToolError(f"Could not parse principal from `{pr}` (no colon is present separating the "
                                "principal type from the principal name)")
            for h in hosts:
                out.append((pr, h, perm))
    return out


def _bindings_per_resource(o, pattern: int) -> dict[tuple, list[A.AclBinding]]:
    entries = _entries(o)
    out: dict[tuple, list[A.AclBinding]] = {}
    if o.get("producer") or o.get("consumer"):
        res_ops: list[tuple[tuple, list[int]]] = []
        for r in _resources(o, pattern):
            if o.get("producer"):
                if r[0] == A.TOPIC:
                    res_ops.append((r, [A.WRITE, A.DESCRIBE, A.CREATE]))
                elif r[0] == A.TRANSACTIONAL_ID:
                    res_ops.append((r, [A.WRITE, A.DESCRIBE]))
            if o.get("consumer"):
                if r[0] == A.TOPIC:
                    res_ops.append((r, [A.READ, A.DESCRIBE]))
                elif r[0] == A.GROUP:
                    res_ops.append((r, [A.READ]))
        if o.get("producer") and o.get("idempotent"):
            res_ops.append(((A.CLUSTER, A.CLUSTER_NAME, A.LITERAL), [A.IDEMPOTENT_WRITE]))
        for r, ops in res_ops:
            for pr, h, perm in entries:
                for op in ops:
                    out.setdefault(r, []).append(A.AclBinding(r[0], r[1], r[2], pr, h, op, perm))
        return out
    ops = [_enum(x, A.OPERATIONS, "operation") for x in (o.get("operation") or ["All"])]
    for r in _resources(o, pattern):
        valid = set(A.RESOURCE_OPERATIONS.get(r[0], ())) | {A.ALL}
        bad = [op for op in ops if op not in valid]
        if bad:
            raise ToolError(f"ResourceType {A.RESOURCE_TYPE_NAMES[r[0]]} only supports operations "
                            + ",".join(A.OPERATION_NAMES[x] for x in sorted(valid)))
        for pr, h, perm in entries:
            for op in ops:
                out.setdefault(r, []).append(A.AclBinding(r[0], r[1], r[2], pr, h, op, perm))
    return out


def _print_block(title: str, bindings) -> None:
    print(f"{title}: {NL} " + NL.join("\t" + A.binding_text(b) for b in bindings) + f" {NL}")


async def _describe(client, f: A.AclFilter, version: int | None = None) -> dict[tuple, list[A.AclBinding]]:
    conn = await client.any_connection()
    v = conn.pick_version(29)
    req = DescribeAclsRequest(resource_type_filter=f.resource_type, resource_name_filter=f.name,
                              pattern_type_filter=f.pattern_type, principal_filter=f.principal,
                              host_filter=f.host, operation=f.operation, permission_type=f.permission)
    resp = await conn.send(req, version=v)
    raise_error(resp.error_code, resp.error_message)
    out: dict[tuple, list[A.AclBinding]] = {}
    for r in resp.resources:
        pt = r.pattern_type if v >= 1 else A.LITERAL
        for a in r.acls:
            out.setdefault((r.resource_type, r.resource_name, pt), []).append(
                A.AclBinding(r.resource_type, r.resource_name, pt, a.principal, a.host, a.operation,
                             a.permission_type))
    return out


async def _list(client, o, pattern: int, resources=None) -> None:
    resources = _resources(o, pattern) if resources is None else resources
    principals = o.get("principal") or [None]
    filters = [A.AclFilter(rt, name, pt) for rt, name, pt in resources] or [A.AclFilter()]
    for pr in principals:
        found: dict[tuple, list] = {}
        for f in filters:
            for k, v in (await _describe(client, f._replace(principal=pr))).items():
                found.setdefault(k, []).extend(b for b in v if b not in found.get(k, []))
        if pr is not None:
            print(f"ACLs for principal `{pr}`")
        for (rt, name, pt), bindings in found.items():
            _print_block(f"Current ACLs for resource `{A.pattern_text(rt, name, pt)}`", bindings)


async def execute(o) -> int:
    actions = [a for a in ("add", "remove", "list") if o.get(a)]
    if len(actions) != 1:
        raise ToolError("Command must include exactly one action: --list, --add, --remove. ")
    action = actions[0]
    pattern_text = o.get("resource-pattern-type") or "LITERAL"
    pattern = _enum(pattern_text, A.PATTERN_TYPES, "resource pattern type")
    if action == "add" and pattern not in (A.LITERAL, A.PREFIXED):
        raise ToolError(f"A '--resource-pattern-type' value of '{pattern_text.upper()}' is not valid when "
                        "adding acls.")
    if (o.get("producer") or o.get("consumer")) and action != "list":
        if o.get("consumer") and not o.get("group"):
            raise ToolError("With --consumer you must specify a --group")
    if action in ("add", "remove") and not _resources(o, pattern):
        raise ToolError("You must provide at least one resource: --topic <topic> or --cluster or "
                        "--group <group> or --transactional-id <id>")
    client = await cluster_from(o)
    try:
        if action == "list":
            await _list(client, o, pattern)
            return 0
        per_resource = _bindings_per_resource(o, pattern)
        if action == "add":
            if not any(per_resource.values()):
                raise ToolError("You must specify one of: --allow-principal, --deny-principal when trying to "
                                "add ACLs.")
            conn = await client.any_connection()
            for r, bindings in per_resource.items():
                _print_block(f"Adding ACLs for resource `{A.pattern_text(*r)}`", bindings)
                R = CreateAclsRequest
                req = R(creations=[R.AclCreation(resource_type=b.resource_type, resource_name=b.name,
                                                 resource_pattern_type=b.pattern_type, principal=b.principal,
                                                 host=b.host, operation=b.operation, permission_type=b.permission)
                                   for b in bindings])
                resp = await conn.send(req)
                for res in resp.results:
                    raise_error(res.error_code, res.error_message)
            await _list(client, o, pattern, list(per_resource))
            return 0
        # remove
        conn = await client.any_connection()
        R = DeleteAclsRequest
        for r in _resources(o, pattern):
            bindings = per_resource.get(r)
            if bindings:
                filters = [R.DeleteAclsFilter(resource_type_filter=b.resource_type, resource_name_filter=b.name,
                                              pattern_type_filter=b.pattern_type, principal_filter=b.principal,
                                              host_filter=b.host, operation=b.operation,
                                              permission_type=b.permission) for b in bindings]
                question = (f"Are you sure you want to remove ACLs: {NL} "
                            + NL.join("\t" + A.binding_text(b) for b in bindings)
                            + f" {NL} from resource filter `{A.pattern_text(*r)}`? (y/n)")
            else:
                filters = [R.DeleteAclsFilter(resource_type_filter=r[0], resource_name_filter=r[1],
                                              pattern_type_filter=r[2], principal_filter=None, host_filter=None,
                                              operation=A.ANY, permission_type=A.ANY)]
                question = (f"Are you sure you want to delete all ACLs for resource filter "
                            f"`{A.pattern_text(*r)}`? (y/n)")
            if not o.get("force"):
                print(question)
                answer = sys.stdin.readline().strip().lower()
                if answer not in ("y", "yes"):
                    continue
            resp = await conn.send(R(filters=filters))
            for fr in resp.filter_results:
                raise_error(fr.error_code, fr.error_message)
        await _list(client, o, pattern)
        return 0
    finally:
        await client.close()


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        if o.has("bootstrap-server") and o.has("authorizer"):
            p.usage_exit("Only one of --bootstrap-server or --authorizer must be specified")
        if not o.has("bootstrap-server"):
            require(p, o, "authorizer-properties")
            print(DEPRECATION, file=sys.stderr)
        if o.has("command-config") and not o.has("bootstrap-server"):
            p.usage_exit("The --command-config option can only be used with --bootstrap-server option")
        if o.has("authorizer-properties") and o.has("bootstrap-server"):
            p.usage_exit("The --authorizer-properties option can only be used with --authorizer option")
        if not o.has("bootstrap-server"):
            from tools.acls_zk import execute_zk
            return execute_zk(p, o)
        return execute(o)

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="Error: ")


if __name__ == "__main__":
    sys.exit(main())

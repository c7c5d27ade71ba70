"""kafka-configs.sh: describe and alter topic, broker and group configurations, client metrics
subscriptions (``--entity-type client-metrics``, KIP-714), user and client-id quotas
(DescribeClientQuotas / AlterClientQuotas) and users' SCRAM credentials; with the deprecated
``--zookeeper`` option, SCRAM credentials and configs of stopped brokers directly in ZooKeeper
(``tools/configs_zk.py``)."""
from __future__ import annotations

import re
import sys

from protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from tools.common import (OptionParser, ToolError, cluster_from, load_properties, parse_or_exit,
                          raise_error, run, standard_options)

DESCRIPTION = ("Shows and changes dynamic configuration: topic, broker and group configs, client "
               "metrics subscriptions, user and client-id quotas, and users' SCRAM credentials.")
TOPIC, BROKER = 2, 4
SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
           3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
           6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
SET, DELETE = 0, 1
SUPPORTED = ("topics", "brokers", "users", "clients", "ips", "groups", "client-metrics")
GROUP = 32          # KIP-848 group configs (consumer.session.timeout.ms, consumer.heartbeat.interval.ms)
CLIENT_METRICS = 16  # KIP-714 client metrics subscriptions (metrics, interval.ms, match)
RTYPES = {"topics": 2, "brokers": 4, "groups": GROUP, "client-metrics": CLIENT_METRICS}
DYNAMIC_SOURCE = {2: 1, 4: 2, GROUP: 8, CLIENT_METRICS: 7}
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
SCRAM_KEYS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
IP_QUOTA_KEYS = ("connection_creation_rate",)
QUOTA_TYPE = {"users": "user", "clients": "client-id", "ips": "ip"}
KNOWN = ("topics", "clients", "users", "brokers", "broker-loggers", "ips", "client-metrics",
         "groups")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    standard_options(p, "Properties file with admin client settings (security, timeouts, client.id, ...).",
                     bootstrap_required=False)
    p.add("alter", "Apply --add-config, --add-config-file and --delete-config to the entity.")
    p.add("describe", "Print the entity's configuration (only dynamic overrides unless --all).")
    p.add("all", "With --describe, show every configuration (static and default ones too), "
                 "not only dynamic overrides.")
    p.add("entity-type", "The kind of entity: topics, brokers, users, clients (users and clients "
                         "together for a user's client id), ips, groups or client-metrics.", "String",
          multi=True)
    p.add("entity-name", "The entity: a topic name, a broker id, a user principal, a client id, an "
                         "IP address, a group or a client metrics subscription.", "String", multi=True)
    p.add("entity-default", "The default entity of the entity type (brokers, users, clients, ips).")
    p.add("add-config", "Settings to add or change, k1=v1,k2=[v1,v2],k3=v3 (square brackets "
                        "group values that contain commas).", "String")
    p.add("add-config-file", "A properties file of settings to add or change.", "String")
    p.add("delete-config", "Settings to remove, k1,k2 (repeatable).", "String", multi=True)
    p.add("force", "Accepted and ignored: this tool never asks for confirmation.")
    p.add("topic", "Short for --entity-type topics --entity-name <topic>.", "String")
    p.add("broker", "Short for --entity-type brokers --entity-name <id>.", "String")
    p.add("broker-defaults", "Short for --entity-type brokers --entity-default.")
    p.add("user", "Short for --entity-type users --entity-name <user-principal>.", "String")
    p.add("client", "Short for --entity-type clients --entity-name <client-id>.", "String")
    p.add("user-defaults", "Short for --entity-type users --entity-default.")
    p.add("client-defaults", "Short for --entity-type clients --entity-default.")
    p.add("ip", "Short for --entity-type ips --entity-name <ip>.", "String")
    p.add("ip-defaults", "Short for --entity-type ips --entity-default.")
    p.add("zookeeper", "DEPRECATED: ZooKeeper connect string host:port[,host:port][/chroot]. Only for SCRAM "
                       "credentials of users (e.g. before any broker runs) and for dynamic configs of brokers "
                       "that are not running; everything else needs --bootstrap-server.", "urls")
    p.add("zk-tls-config-file", "ZooKeeper client TLS settings (zookeeper.ssl.*) for --zookeeper.",
          "ZooKeeper TLS configuration")
    return p


def parse_add_config(text: str) -> dict[str, str]:
    out = {}
    for item in re.split(r",(?=[^\]]*(?:\[|$))", text):
        parts = re.split(r"\s*=\s*(?=[^\]]*(?:\[|$))", item, maxsplit=1)
        if len(parts) != 2:
            raise ToolError('requirement failed: Invalid entity config: all configs to be added '
                            'must be in the format "key=val".')
        k, v = parts[0].strip(), re.sub(r"[\[\]]", "", parts[1]).strip()
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", k):
            raise ToolError(f"Invalid character found for config key: {k}")
        out[k] = v
    return out


ENTITY_FLAGS = (("topic", "topics"), ("client", "clients"), ("user", "users"), ("broker", "brokers"),
                ("ip", "ips"))
DEFAULT_FLAGS = (("client-defaults", "clients"), ("user-defaults", "users"), ("broker-defaults", "brokers"),
                 ("ip-defaults", "ips"))


def ordered_entity_names(argv) -> list[str]:
    """--entity-name values and --entity-default ("") in command-line order (Kafka pairs them with
    the --entity-type values in that order)."""
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            break
        name = a.lstrip("-") if a.startswith("--") else None
        if name is not None:
            key, eq, val = name.partition("=")
            if key == "entity-default":
                out.append("")
            elif key == "entity-name":
                if eq:
                    out.append(val)
                elif i + 1 < len(argv):
                    out.append(argv[i + 1])
                    i += 1
        i += 1
    return out


def check_alter_options(o) -> None:
    """ConfigCommand's checks of --alter's change options."""
    if o.has("add-config") and o.has("add-config-file"):
        raise ToolError("Only one of --add-config or --add-config-file must be specified")
    if not (o.has("add-config") or o.has("add-config-file") or o.has("delete-config")):
        raise ToolError("At least one of --add-config, --add-config-file, or --delete-config "
                        "must be specified with --alter")


def requested_changes(o) -> tuple[dict, list]:
    """(settings to add or change, keys to delete) from --add-config[-file] / --delete-config."""
    to_add = {}
    if o.get("add-config-file"):
        to_add.update(load_properties(o["add-config-file"]))
    if o.get("add-config"):
        to_add.update(parse_add_config(o["add-config"]))
    to_delete = [k.strip() for item in o["delete-config"] for k in item.split(",") if k.strip()]
    return to_add, to_delete


def quota_entity_args(o, argv):
    """(types, names) when the entity is users and/or clients, else None; Kafka's
    ConfigCommandOptions.entityTypes / entityNames."""
    types = list(o["entity-type"]) + [t for f, t in ENTITY_FLAGS + DEFAULT_FLAGS if o.has(f)]
    if not types or not (set(types) <= {"users", "clients"} or set(types) == {"ips"}):
        return None
    names = ordered_entity_names(argv) + [o[f] for f, _ in ENTITY_FLAGS if o.has(f)]
    names += ["" for f, _ in DEFAULT_FLAGS if o.has(f)]
    explicit = o.has("entity-type") or o.has("entity-name") or o.has("entity-default")
    if explicit and any(o.has(f) for f, _ in ENTITY_FLAGS + DEFAULT_FLAGS):
        raise ToolError("--entity-{type,name,default} should not be used in conjunction with "
                        "specific entity flags")
    if len(types) != len(set(types)):
        dup = sorted({t for t in types if types.count(t) > 1})
        raise ToolError(f"Duplicate entity type(s) specified: {','.join(dup)}")
    if len(names) > len(types):
        raise ToolError("More entity names specified than entity types")
    if "ips" in types:
        from controller.api import valid_ip_entity
        for n in names:
            if n and not valid_ip_entity(n):
                raise ToolError(f"The entity name for {types[0]} must be a valid IP or resolvable host, "
                                f"but it is: {n}")
    if o.has("alter"):
        if not names:
            raise ToolError("An entity-name or default entity must be specified with --alter of users, "
                            "clients, brokers or ips")
        if len(names) != len(types):
            raise ToolError("--entity-name or --entity-default must be specified with each --entity-type "
                            "for --alter")
        check_alter_options(o)
    return types, names


def resolve_entity(p, o):
    types = list(o["entity-type"])
    names = list(o["entity-name"])
    default = o.has("entity-default")
    shortcuts = [x for x in ("topic", "broker", "broker-defaults") if o.has(x)]
    if shortcuts and (types or names or default):
        raise ToolError("--entity-{type,name,default} should not be used in conjunction with "
                        "specific entity flags")
    if len(shortcuts) > 1:
        raise ToolError("Only one entity may be given")
    if o.has("topic"):
        types, names = ["topics"], [o["topic"]]
    elif o.has("broker"):
        types, names = ["brokers"], [o["broker"]]
    elif o.has("broker-defaults"):
        types, default = ["brokers"], True
    if not types:
        raise ToolError("At least one entity type must be specified")
    if len(types) > 1:
        if len(set(types)) != len(types):
            dup = sorted({t for t in types if types.count(t) > 1})
            raise ToolError(f"Duplicate entity type(s) specified: {','.join(dup)}")
        raise ToolError("Only 'users' and 'clients' entity types may be specified together")
    etype = types[0]
    if etype not in KNOWN:
        raise ToolError(f"Invalid entity type {etype}, the entity type must be one of "
                        f"{', '.join(KNOWN)} with a --bootstrap-server argument")
    if etype not in SUPPORTED:
        raise ToolError(f"Entity type {etype} is not supported by Odradek's kafka-configs.sh yet")
    if len(names) > 1 or (names and default):
        raise ToolError("Exactly one entity name must be specified for every entity type")
    name = names[0] if names else ("" if default else None)
    if default and etype in ("topics", "groups", "client-metrics"):
        raise ToolError(f"--entity-default is not allowed for {etype}")
    if etype == "brokers" and name:
        try:
            int(name)
        except ValueError:
            raise ToolError(f"The entity name for {etype} must be a valid integer broker id, "
                            f"but it is: {name}") from None
    if o.has("describe") and default and etype == "topics":
        raise ToolError(f"--entity-default must not be specified with --describe of {etype}")
    if o.has("alter"):
        if name is None:
            if etype == "brokers":
                raise ToolError("An entity-name or default entity must be specified with "
                                "--alter of users, clients, brokers or ips")
            raise ToolError(f"An entity name must be specified with --alter of {etype}")
        check_alter_options(o)
    elif etype in ("topics", "groups") and name == "" or etype == "groups" and name is None:
        raise ToolError(f"An entity name must be specified with --describe of {etype}")
    return etype, name


async def describe_entity(client, rtype, name, synonyms=True):
    R = DescribeConfigsRequest
    req = R(resources=[R.DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                                 configuration_keys=None)],
            include_synonyms=synonyms, include_documentation=False)
    node = int(name) if rtype == BROKER and name else None
    if node is not None:
        if node not in client.nodes:
            raise ToolError(f"Broker {node} is not in the cluster")
        resp = await client.send_to(node, req)
    else:
        resp = await client.send_any(req)
    r = resp.results[0]
    raise_error(r.error_code, r.error_message)
    return r.configs


def source_of(c) -> int:
    s = getattr(c, "config_source", -1)
    if s is None or s < 0:
        return 5 if getattr(c, "is_default", False) else 1
    return s


async def describe(client, o, etype, name):
    rtype = RTYPES[etype]
    dynamic = DYNAMIC_SOURCE[rtype]
    if name is None:
        if etype == "topics":
            await client.refresh_metadata(None)
            entities = sorted(client.topics)
        elif etype == "client-metrics":
            from tools.client_metrics import list_names
            entities = await list_names(client)
        else:
            entities = [str(n) for n in sorted(client.nodes)] + [""]
    else:
        entities = [name]
    if etype == "topics":
        await client.refresh_metadata(None)
        for e in entities:
            if e not in client.topics:
                raise ToolError(f"Topic '{e}' does not exist")
    lines = []
    for e in entities:
        if e == "":
            lines.append(f"Default configs for {etype} in the cluster are:")
            want = 3
        else:
            lines.append(f"{'All' if o.has('all') else 'Dynamic'} configs for "
                         f"{etype[:-1]} {e} are:")
            want = dynamic
        for c in sorted(await describe_entity(client, rtype, e), key=lambda c: c.name):
            if not o.has("all") and source_of(c) != want:
                continue
            # a null value (a sensitive one) prints as Java prints it: null
            syn = ", ".join(f"{SOURCES.get(s.source, s.source)}:{s.name}={'null' if s.value is None else s.value}"
                            for s in (getattr(c, "synonyms", None) or []))
            value = "null" if c.value is None else c.value
            lines.append(f"  {c.name}={value} sensitive={str(c.is_sensitive).lower()} "
                         f"synonyms={{{syn}}}")
    print("\n".join(lines))


async def alter(client, o, etype, name):
    rtype = RTYPES[etype]
    to_add, to_delete = requested_changes(o)
    if etype == "topics":
        await client.refresh_metadata([name])
        if name not in client.topics:
            raise ToolError(f"Topic '{name}' does not exist")
    current = {c.name: c for c in await describe_entity(client, rtype, name, synonyms=False)}
    dynamic = DYNAMIC_SOURCE[rtype] if name else 3
    invalid = [k for k in to_delete
               if k not in current or source_of(current[k]) != dynamic]
    if invalid:
        raise ToolError(f"Invalid config(s): {','.join(invalid)}")
    R = IncrementalAlterConfigsRequest
    configs = [R.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in to_add.items()]
    configs += [R.AlterableConfig(name=k, config_operation=DELETE, value=None) for k in to_delete]
    req = R(resources=[R.AlterConfigsResource(resource_type=rtype, resource_name=name,
                                              configs=configs)], validate_only=False)
    if rtype == BROKER and name:
        resp = await client.send_to(int(name), req)
    else:
        resp = await client.send_to_controller(req)
    for r in resp.responses:
        raise_error(r.error_code, r.error_message)
    if name:
        print(f"Completed updating config for {etype[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {etype} in the cluster.")


async def describe_users(client, name):
    """SCRAM credentials (DescribeUserScramCredentials), printed as ConfigCommand does."""
    from protocol import scram
    from protocol.messages import DescribeUserScramCredentialsRequest as R
    req = R(users=[R.UserName(name=name)] if name else None)
    resp = await client.send_to_controller(req)
    raise_error(resp.error_code, resp.error_message)
    for r in resp.results:
        if r.error_code == 91 and name:        # RESOURCE_NOT_FOUND: no credentials
            continue
        raise_error(r.error_code, r.error_message)
        creds = ", ".join(f"{scram.MECHANISM_NAMES.get(c.mechanism, c.mechanism)}=iterations={c.iterations}"
                          for c in r.credential_infos)
        print(f"SCRAM credential configs for user-principal '{r.user}' are {creds}")


async def alter_users(client, o, name):
    """SCRAM-SHA-256/512 credentials (AlterUserScramCredentials): the password is salted and
    hashed here, as Kafka's tool does; only the salted password travels."""
    import os as _os
    from protocol import scram
    from protocol.messages import AlterUserScramCredentialsRequest as R
    to_add, to_delete = requested_changes(o)
    upsertions, deletions = [], []
    for mech, value in to_add.items():
        if mech not in scram.MECHANISM_IDS:
            raise ToolError(f"Only SCRAM credentials can be set for users here, not {mech} "
                            "(quotas are not supported)")
        fields = dict(x.split("=", 1) for x in value.split(",") if "=" in x)
        if "password" not in fields:
            raise ToolError(f"Invalid credential property {mech}={value}: a password is required")
        iterations = int(fields.get("iterations", scram.DEFAULT_ITERATIONS))
        salt = _os.urandom(32)
        salted = scram.salted_password(mech, fields["password"], salt, iterations)
        upsertions.append(R.ScramCredentialUpsertion(name=name, mechanism=scram.MECHANISM_IDS[mech],
                                                     iterations=iterations, salt=salt, salted_password=salted))
    for mech in to_delete:
        if mech not in scram.MECHANISM_IDS:
            raise ToolError(f"Only SCRAM credentials can be deleted for users here, not {mech}")
        deletions.append(R.ScramCredentialDeletion(name=name, mechanism=scram.MECHANISM_IDS[mech]))
    resp = await client.send_to_controller(R(deletions=deletions, upsertions=upsertions))
    for r in resp.results:
        raise_error(r.error_code, r.error_message)
    print(f"Completed updating config for user {name}.")


def java_double(v: float) -> str:
    """A double as Java's Double.toString writes it (1024.0, 0.5, 1.0E7)."""
    from decimal import Decimal
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if str(v).startswith("-") else "0.0"
    if 1e-3 <= abs(v) < 1e7:
        r = repr(float(v))
        return r if ("." in r or "e" in r) else r + ".0"
    sign, digits, exp = Decimal(repr(float(v))).as_tuple()
    exponent = exp + len(digits) - 1
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{exponent}"


def quota_components(types, names):
    from protocol.messages import DescribeClientQuotasRequest as R
    comps = []
    for i, t in enumerate(types):
        etype = QUOTA_TYPE[t]
        if i >= len(names):
            comps.append(R.ComponentData(entity_type=etype, match_type=2, match=None))
        elif names[i] == "":
            comps.append(R.ComponentData(entity_type=etype, match_type=1, match=None))
        else:
            comps.append(R.ComponentData(entity_type=etype, match_type=0, match=names[i]))
    return comps


async def client_quotas(client, types, names):
    """[(entity {type: name or None}, {key: value})] matching the entity strictly."""
    from protocol.messages import DescribeClientQuotasRequest as R
    resp = await client.send_any(R(components=quota_components(types, names), strict=True))
    raise_error(resp.error_code, resp.error_message)
    out = []
    for e in resp.entries or []:
        out.append(({x.entity_type: x.entity_name for x in e.entity}, {v.key: v.value for v in e.values}))
    return out


def entity_text(entity: dict) -> str:
    parts = []
    for etype, word in (("user", "user-principal"), ("client-id", "client-id"), ("ip", "ip")):
        if etype in entity:
            n = entity[etype]
            parts.append(f"{word} '{n}'" if n is not None else f"the default {word}")
    return ", ".join(parts)


async def describe_quotas(client, types, names):
    """ConfigCommand.describeClientQuotaAndUserScramCredentialConfigs: quotas, then (for users
    without a default entity) SCRAM credentials."""
    rows = await client_quotas(client, types, names)
    rows.sort(key=lambda r: [(k, r[0][k] is not None, r[0][k] or "") for k in sorted(r[0])])
    for entity, values in rows:
        text = ", ".join(f"{k}={java_double(v)}" for k, v in sorted(values.items()))
        print(f"Quota configs for {entity_text(entity)} are {text}")
    if "clients" not in types and "ips" not in types and "" not in names:
        await describe_users(client, names[0] if names else None)


async def _alter_client_quotas(client, types, names, to_add, to_delete):
    from protocol.messages import AlterClientQuotasRequest as R
    rows = await client_quotas(client, types, names)
    current = rows[0][1] if rows else {}
    invalid = [k for k in to_delete if k not in current]
    if invalid:
        raise ToolError(f"Invalid config(s): {','.join(invalid)}")
    ops = []
    for k, v in to_add.items():
        try:
            value = float(v)
        except ValueError:
            raise ToolError(f"Cannot parse quota configuration value for {k}: {v}") from None
        ops.append(R.OpData(key=k, value=value, remove=False))
    ops += [R.OpData(key=k, value=0.0, remove=True) for k in to_delete]
    entity = [R.EntityData(entity_type=QUOTA_TYPE[t], entity_name=n or None) for t, n in zip(types, names)]
    resp = await client.send_to_controller(R(entries=[R.EntryData(entity=entity, ops=ops)],
                                             validate_only=False))
    for e in resp.entries:
        raise_error(e.error_code, e.error_message)


async def alter_quotas(client, o, types, names):
    """ConfigCommand.alterConfig for users / clients: quota keys through AlterClientQuotas, SCRAM
    keys (users only) through AlterUserScramCredentials."""
    to_add, to_delete = requested_changes(o)
    if types == ["ips"]:
        unknown = [k for k in list(to_add) + to_delete if k not in IP_QUOTA_KEYS]
        if unknown:
            raise ToolError("Only connection quota configs can be added for 'ips' using --bootstrap-server. "
                            f"Unexpected config names: {','.join(unknown)}")
        await _alter_client_quotas(client, types, names, to_add, to_delete)
        if names[0]:
            print(f"Completed updating config for ip {names[0]}.")
        else:
            print("Completed updating default config for ips in the cluster.")
        return
    quota_add = [k for k in to_add if k in QUOTA_KEYS]
    quota_del = [k for k in to_delete if k in QUOTA_KEYS]
    scram_add = [k for k in to_add if k in SCRAM_KEYS]
    scram_del = [k for k in to_delete if k in SCRAM_KEYS]
    unknown_add = [k for k in to_add if k not in QUOTA_KEYS and k not in SCRAM_KEYS]
    unknown_del = [k for k in to_delete if k not in QUOTA_KEYS and k not in SCRAM_KEYS]
    head_type, head_name = types[0], names[0]
    if head_type == "clients" or len(types) == 2:
        if unknown_add or scram_add:
            raise ToolError("Only quota configs can be added for 'clients' using --bootstrap-server. "
                            f"Unexpected config names: {_scala_set(unknown_add + scram_add)}")
        if unknown_del or scram_del:
            raise ToolError("Only quota configs can be deleted for 'clients' using --bootstrap-server. "
                            f"Unexpected config names: {_scala_list(unknown_del + scram_del)}")
    else:
        if unknown_add:
            raise ToolError("Only quota and SCRAM credential configs can be added for 'users' using "
                            f"--bootstrap-server. Unexpected config names: {_scala_set(unknown_add)}")
        if unknown_del:
            raise ToolError("Only quota and SCRAM credential configs can be deleted for 'users' using "
                            f"--bootstrap-server. Unexpected config names: {_scala_list(unknown_del)}")
        if scram_add or scram_del:
            if "" in names:
                raise ToolError("The use of --entity-default or --user-defaults is not allowed with User "
                                "SCRAM Credentials using --bootstrap-server.")
            if quota_add or quota_del:
                raise ToolError("Cannot alter both quota and SCRAM credential configs simultaneously "
                                "for 'users' using --bootstrap-server.")
    if quota_add or quota_del:
        await _alter_client_quotas(client, types, names, to_add, to_delete)
    else:
        await alter_users(client, o, head_name)
        return
    if head_name:
        print(f"Completed updating config for {head_type[:-1]} {head_name}.")
    else:
        print(f"Completed updating default config for {head_type} in the cluster.")


def _scala_set(keys) -> str:
    return f"Set({', '.join(keys)})"


def _scala_list(keys) -> str:
    return f"List({', '.join(keys)})"


async def execute_quotas(o, types, names):
    client = await cluster_from(o)
    try:
        if o.has("describe"):
            await describe_quotas(client, types, names)
        else:
            await alter_quotas(client, o, types, names)
    finally:
        await client.close()


async def execute(o, etype, name):
    client = await cluster_from(o)
    try:
        if etype == "users":
            if o.has("describe"):
                await describe_users(client, name)
            else:
                await alter_users(client, o, name)
        elif o.has("describe"):
            await describe(client, o, etype, name)
        else:
            await alter(client, o, etype, name)
    finally:
        await client.close()


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        if o.has("describe") == o.has("alter"):
            p.usage_exit("Command must include exactly one action: --describe, --alter")
        if o.has("zk-tls-config-file") and not o.has("zookeeper"):
            raise ToolError("Only the --zookeeper option can be used with the --zk-tls-config-file option.")
        if o.has("zookeeper"):
            from tools.configs_zk import execute_zk
            return execute_zk(p, o, args)
        if not o.has("bootstrap-server"):
            raise ToolError("One of the required --bootstrap-server, --boostrap-controller, or --zookeeper "
                            "arguments must be specified")
        quota = quota_entity_args(o, args)
        if quota is not None:
            return execute_quotas(o, *quota)
        etype, name = resolve_entity(p, o)
        return execute(o, etype, name)

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())

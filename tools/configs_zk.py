"""kafka-configs.sh --zookeeper: the ZooKeeper uses Kafka 3.x still allows (deprecated), written to the
znodes ZooKeeper-mode brokers read (``tools/zkadmin.py``).

* ``--entity-type users``: ``--alter`` only for SCRAM credentials (``SCRAM-SHA-256`` /
  ``SCRAM-SHA-512`` = ``[iterations=<n>,]password=<pw>``; salted and hashed here, stored in
  ``/config/users/<user>`` as ``salt=..,stored_key=..,server_key=..,iterations=n``, the format the
  brokers' AlterUserScramCredentials path writes), so that credentials exist before any broker
  runs; ``--describe`` shows the user's stored settings.
* ``--entity-type brokers``: ``--alter`` / ``--describe`` of dynamic broker configs, only while the
  broker concerned (or, for ``--entity-default``, every broker) is not running.
* Anything else (topics, clients, ips, quotas of users, ``--all``) is refused with Kafka's messages.

Kafka's output: two deprecation lines on stdout first (in Odradek's words), then
``Completed updating config for entity: user-principal 'alice'.`` or
``Configs for user-principal 'alice' are SCRAM-SHA-256=salt=...,stored_key=...``.
"""
from __future__ import annotations

import re
import sys

from tools.common import ToolError, check_invalid

ZK_TYPES = ("users", "brokers")
SCRAM_KEYS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096
MIN_ITERATIONS = 4096
DEFAULT_ENTITY = "<default>"
ENTITY_FLAGS = (("topic", "topics"), ("client", "clients"), ("user", "users"), ("broker", "brokers"))
DEFAULT_FLAGS = (("client-defaults", "clients"), ("user-defaults", "users"), ("broker-defaults", "brokers"))
ZK_WARNING = ("Warning: --zookeeper is deprecated: ZooKeeper mode and this option will go away.\n"
              "Prefer --bootstrap-server, which makes the change through a running broker.")


class Unexpected(Exception):
    """Kafka's catch-all branch: 'Error while executing config command with args ...'."""


def check_args_zk(p, o, args) -> tuple[list[str], list[str]]:
    """ConfigCommandOptions.checkArgs for a --zookeeper command; (entity types, entity names)."""
    from tools.configs import ordered_entity_names
    check_invalid(p, o, "describe", ["alter", "add-config", "delete-config"])
    types = list(o["entity-type"]) + [t for f, t in ENTITY_FLAGS + DEFAULT_FLAGS if o.has(f)]
    if len(types) != len(set(types)):
        dup = list(dict.fromkeys(t for i, t in enumerate(types) if t in types[:i]))
        raise ToolError(f"Duplicate entity type(s) specified: {','.join(dup)}")
    for t in types:
        if t not in ZK_TYPES:
            raise ToolError(f"Invalid entity type {t}, the entity type must be one of {', '.join(ZK_TYPES)} "
                            "with a --zookeeper argument")
    if not types:
        raise ToolError("At least one entity type must be specified")
    if len(types) > 1:
        raise ToolError("Only 'users' and 'clients' entity types may be specified together")
    explicit = o.has("entity-type") or o.has("entity-name") or o.has("entity-default")
    if explicit and any(o.has(f) for f, _ in ENTITY_FLAGS + DEFAULT_FLAGS):
        raise ToolError("--entity-{type,name,default} should not be used in conjunction with specific "
                        "entity flags")
    names = ordered_entity_names(args) + [o[f] for f, _ in ENTITY_FLAGS if o.has(f)]
    names += ["" for f, _ in DEFAULT_FLAGS if o.has(f)]
    if o.has("bootstrap-server"):
        raise ToolError("Only one of --bootstrap-server, --boostrap-controller, and --zookeeper can be specified")
    if o.has("all"):
        raise ToolError("--bootstrap-server must be specified for --all")
    if types[0] == "brokers":
        for n in names:
            if n:
                try:
                    int(n)
                except ValueError:
                    raise ToolError(f"The entity name for brokers must be a valid integer broker id, but it "
                                    f"is: {n}") from None
    if o.has("alter"):
        if not names:
            raise ToolError("an entity-name or default entity must be specified with --alter of users, "
                            "clients, brokers or ips")
        if o.has("add-config") and o.has("add-config-file"):
            raise ToolError("Only one of --add-config or --add-config-file must be specified")
        if not (o.has("add-config") or o.has("add-config-file") or o.has("delete-config")):
            raise ToolError("At least one of --add-config, --add-config-file, or --delete-config must be "
                            "specified with --alter")
    if len(names) > len(types):
        raise ToolError("More entity names specified than entity types")
    return types, names


def _props_text(props: dict[str, str]) -> str:
    """java.util.Properties.toString."""
    return "{" + ", ".join(f"{k}={v}" for k, v in props.items()) + "}"


def _deleted_text(keys: list[str]) -> str:
    """The Scala collection ConfigCommand prints for --delete-config keys."""
    return f"ArrayBuffer({', '.join(keys)})" if keys else "List()"


def _entity_text(etype: str, sanitized: str | None) -> str:
    """ConfigCommand.Entity.toString."""
    from controller.zookeeper.znodes import desanitize
    word = {"users": "user-principal", "clients": "client-id", "topics": "topic"}.get(etype, etype)
    if sanitized is None:
        return etype
    if sanitized == DEFAULT_ENTITY:
        return f"default {word}"
    name = desanitize(sanitized) if etype in ("users", "clients") else sanitized
    return f"{word} '{name}'"


def scram_credential(mechanism: str, text: str) -> str:
    """``[iterations=<n>,]password=<pw>`` -> the stored credential text (Kafka's preProcessScramCredentials)."""
    from protocol import scram
    enum_name = mechanism.replace("-", "_")
    m = re.fullmatch(r"(?:iterations=([0-9]*),)?password=(.*)", text, re.S)
    if not m:
        raise ToolError(f"Invalid credential property {enum_name}={text}")
    if m.group(1) is None:
        iterations = DEFAULT_ITERATIONS
    else:
        try:
            iterations = int(m.group(1))
        except ValueError:
            raise ToolError(f'For input string: "{m.group(1)}"') from None
    if iterations < MIN_ITERATIONS:
        raise ToolError(f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} required for "
                        f"{enum_name}")
    return scram.Credential.from_password(mechanism, m.group(2), iterations).to_config()


def _sanitized(etype: str, name: str | None) -> str | None:
    from controller.zookeeper.znodes import sanitize
    if name is None:
        return None
    if name == "":
        return DEFAULT_ENTITY
    return sanitize(name) if etype == "users" else name


def _check_brokers_not_running(zk, entity: str, error_message: str) -> None:
    info = ("Broker configuration operations using ZooKeeper are only supported if the affected broker(s) "
            "are not running.")
    running = zk.registered_brokers()
    if entity != DEFAULT_ENTITY:
        if entity.isdigit() and int(entity) in running:
            raise ToolError(f"requirement failed: {error_message} - broker {int(entity)} is running. {info}")
    elif running:
        raise ToolError(f"requirement failed: {error_message} - {len(running)} brokers are running. {info}")


def _broker_changes(to_add: dict[str, str], per_broker: bool) -> dict[str, str]:
    """preProcessBrokerConfigs: password.encoder.* settings are not stored, dynamic broker configs are
    validated, password configs would need encrypting."""
    from broker.config import BrokerConfig, ConfigError, is_password_config, validate_dynamic_broker_configs
    from broker.password_encoder import PasswordEncoder, PasswordEncoderError
    encoder = {k: v for k, v in to_add.items() if k.startswith("password.encoder.")}
    changes = {k: v for k, v in to_add.items() if k not in encoder}
    try:
        validate_dynamic_broker_configs(changes, per_broker)
    except ConfigError as e:
        raise Unexpected(f"org.apache.kafka.common.config.ConfigException: {e}") from None
    passwords = sorted(k for k in changes if is_password_config(k))
    if passwords:
        if "password.encoder.secret" not in encoder:
            raise ToolError(f"requirement failed: password.encoder.secret must be specified to update "
                            f"Set({', '.join(passwords)}). Other password encoder configs like cipher algorithm "
                            "and iterations may also be specified to override the default encoding parameters. "
                            "Password encoder configs will not be persisted in ZooKeeper.")
        # encoded as the brokers will decode them: Kafka's format and the given password.encoder.*
        try:
            enc = PasswordEncoder.from_config(BrokerConfig(encoder, validate=False))
            for k in passwords:
                changes[k] = enc.encode(changes[k])
        except (ConfigError, PasswordEncoderError) as e:
            raise Unexpected(f"org.apache.kafka.common.config.ConfigException: {e}") from None
    return changes


def alter_zk(zk, o, etype: str, name: str) -> None:
    from tools.configs import requested_changes
    to_add, to_delete = requested_changes(o)
    entity = _sanitized(etype, name)
    error_message = (f"--bootstrap-server option must be specified to update {etype} configs: "
                     f"{{add: {_props_text(to_add)}, delete: {_deleted_text(to_delete)}}}")
    if etype == "users":
        if to_add or to_delete:
            info = "User configuration updates using ZooKeeper are only supported for SCRAM credential updates."
            if any(k not in SCRAM_KEYS for k in to_add) or any(k not in SCRAM_KEYS for k in to_delete):
                raise ToolError(f"requirement failed: {error_message}. {info}")
        to_add = {k: scram_credential(k, v) for k, v in to_add.items()}
    else:
        if to_add or to_delete:
            _check_brokers_not_running(zk, entity, error_message)
            to_add = _broker_changes(to_add, entity != DEFAULT_ENTITY)
    configs = zk.entity_config(etype, entity)
    invalid = [k for k in to_delete if k not in configs]
    if invalid:
        raise ToolError(f"Invalid config(s): {','.join(invalid)}")
    configs.update(to_add)
    for k in to_delete:
        configs.pop(k, None)
    if etype == "users" and entity == DEFAULT_ENTITY:
        unknown = [k for k in configs if k not in ("producer_byte_rate", "consumer_byte_rate",
                                                   "request_percentage", "controller_mutation_rate")]
        if unknown:
            raise ToolError(f"requirement failed: Unknown Dynamic Configuration: HashSet({', '.join(unknown)}).")
    zk.change_entity_config(etype, entity, configs)
    print(f"Completed updating config for entity: {_entity_text(etype, entity)}.")


def describe_zk(zk, etype: str, name: str | None) -> None:
    entity = _sanitized(etype, name)
    if etype == "brokers":
        _check_brokers_not_running(zk, entity or "", f"--bootstrap-server option must be specified to describe "
                                                      f"{etype}")
    entities = zk.entities(etype) if entity is None else [entity]
    for e in entities:
        configs = zk.entity_config(etype, e)
        if configs or not (etype == "users" and entity is None):
            text = ",".join(f"{k}={v}" for k, v in configs.items())
            print(f"Configs for {_entity_text(etype, e)} are {text}")


def execute_zk(p, o, args) -> int:
    from tools.zkadmin import ZkAdmin, ZkAdminError
    types, names = check_args_zk(p, o, args)
    print(ZK_WARNING)
    etype = types[0]
    name = names[0] if names else None
    try:
        from tools.zkadmin import zk_tls_file
        tls = zk_tls_file(o["zk-tls-config-file"]) if o.has("zk-tls-config-file") else None
        with ZkAdmin(o["zookeeper"], 30000, 30000, create_chroot=True, tls_props=tls) as zk:
            if o.has("alter"):
                alter_zk(zk, o, etype, name)
            else:
                describe_zk(zk, etype, name)
        return 0
    except Unexpected as e:
        print(f"Error while executing config command with args '{' '.join(args)}'", file=sys.stderr)
        print(str(e), file=sys.stderr)
        return 1
    except ZkAdminError as e:
        print(f"Error while executing config command with args '{' '.join(args)}'", file=sys.stderr)
        print(f"kafka.zookeeper.ZooKeeperClientTimeoutException: {e}"
              if str(e).startswith("Timed out") else str(e), file=sys.stderr)
        return 1
    except ToolError:
        raise
    except Exception as e:           # kazoo errors (connection loss, no auth) and the like
        print(f"Error while executing config command with args '{' '.join(args)}'", file=sys.stderr)
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1

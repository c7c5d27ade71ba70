"""Kafka's configuration model: properties files, typed broker config, topic configs.

How this works
--------------
* ``parse_properties`` reads Java ``.properties`` text (our own parser).
* ``BrokerConfig`` holds three layers of *raw strings* for broker keys, highest first:
  per-broker dynamic, cluster-default dynamic, static (file + ``--override``); below
  them sit the built-in defaults of ``configdefs.BROKER_KEYS``.  ``get(name)`` takes the
  first layer that has the key and parses it.  Fallback chains (``log.retention.ms`` >
  ``log.retention.minutes`` > ``log.retention.hours`` ...) are resolved by the derived
  helpers and by the topic defaults.
* A topic's effective config = its overrides (``/config/topics/<t>``) over the broker's
  effective value of the synonym chain (``configdefs.TOPIC_SYNONYMS``).
* ``describe_*`` build DescribeConfigs entries with Kafka's source ids, synonym lists
  and value rendering.
* ``apply_incremental`` is IncrementalAlterConfigs as a pure function on a dict of
  string overrides.

``BrokerConfig`` is owned by the broker's event loop; the dynamic layers are replaced
whole by ``set_dynamic`` (validate first with ``validate_dynamic_broker_configs``).
"""

from __future__ import annotations

import logging
import os
import re
import socket
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, NamedTuple

from broker.configdefs import (
    BROKER_KEYS, BROKER_KEYS_BY_NAME, PER_BROKER, READ_ONLY, TOPIC_KEYS,
    TOPIC_SYNONYMS, ConfigKey, broker_synonyms,
)

log = logging.getLogger(__name__)

INVALID_CONFIG = 40
INVALID_REQUEST = 42

# DescribeConfigs source ids
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DYNAMIC_BROKER_LOGGER_CONFIG = 6
CLIENT_METRICS_CONFIG = 7
GROUP_CONFIG = 8

# IncrementalAlterConfigs op ids
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


class ConfigError(ValueError):
    """An invalid configuration; ``error_code`` is the Kafka error to answer with."""

    def __init__(self, message: str, key: str | None = None, error_code: int = INVALID_CONFIG):
        super().__init__(message)
        self.key = key
        self.error_code = error_code


# --------------------------------------------------------------------------- properties

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WS = " \t\f"


def _logical_lines(text: str) -> Iterable[str]:
    lines = text.splitlines()  # handles \n, \r\n, \r
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:  # odd number of backslashes: continuation
                parts.append(line[:-1])
                if i >= len(lines):
                    break
                line = lines[i].lstrip(_WS)
                i += 1
                continue
            parts.append(line)
            break
        yield "".join(parts)


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break
        c = s[i]
        if c == "u":
            hexpart = s[i + 1:i + 5]
            if len(hexpart) != 4 or not all(h in "0123456789abcdefABCDEF" for h in hexpart):
                raise ConfigError("Malformed \\uxxxx encoding.")
            out.append(chr(int(hexpart, 16)))
            i += 5
        else:
            out.append(_ESCAPES.get(c, c))
            i += 1
    return "".join(out)


def _split_key(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WS:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _WS:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _WS:
            j += 1
    return key, line[j:]


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java .properties text; later duplicates win; values keep trailing spaces."""
    props: dict[str, str] = {}
    for logical in _logical_lines(text):
        k, v = _split_key(logical)
        props[_unescape(k)] = _unescape(v)
    return props


def load_properties(path: str | os.PathLike) -> dict[str, str]:
    """Read a properties file (UTF-8, falling back to ISO-8859-1 as Java does)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text)


def properties_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``KAFKA_FOO_BAR`` -> ``foo.bar`` (``__`` -> ``_``, ``___`` -> ``-``), as the
    confluentinc images do.  ``KAFKA_OPTS``-style launcher variables are skipped."""
    skip = {"KAFKA_OPTS", "KAFKA_HEAP_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_LOG4J_OPTS",
            "KAFKA_JMX_OPTS", "KAFKA_DEBUG", "KAFKA_GC_LOG_OPTS", "KAFKA_VERSION", "KAFKA_HOME"}
    out = {}
    for k, v in environ.items():
        if not k.startswith("KAFKA_") or k in skip:
            continue
        name = k[6:].lower().replace("___", "\0").replace("__", "\1").replace("_", ".")
        out[name.replace("\0", "-").replace("\1", "_")] = v
    return out


# --------------------------------------------------------------------------- values

_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_BOUNDS = {"short": 2**15, "int": 2**31, "long": 2**63}


def parse_value(key: ConfigKey, raw: Any) -> Any:
    """Parse a raw string (or already-typed value) for ``key`` and validate it."""
    name, t = key.name, key.type
    if raw is None:
        value = None
    elif not isinstance(raw, str):
        value = raw
    else:
        s = raw.strip()
        if t == "boolean":
            if s.lower() == "true":
                value = True
            elif s.lower() == "false":
                value = False
            else:
                raise ConfigError(f"Invalid value {raw} for configuration {name}: Expected value to be either true or false", name)
        elif t in _BOUNDS:
            lim = _BOUNDS[t]
            if not _INT_RE.match(s) or not -lim <= int(s) < lim:
                raise ConfigError(f"Invalid value {raw} for configuration {name}: Not a number of type {t.upper()}", name)
            value = int(s)
        elif t == "double":
            try:
                value = float(s)
            except ValueError:
                raise ConfigError(f"Invalid value {raw} for configuration {name}: Not a number of type DOUBLE", name) from None
        elif t == "list":
            value = [] if s == "" else re.split(r"\s*,\s*", s)
        else:  # string, class, password
            value = s
    if key.validator is not None and value is not None:
        problem = key.validator.check(value)
        if problem:
            shown = render_value(t, value) if t != "password" else "[hidden]"
            raise ConfigError(f"Invalid value {shown} for configuration {name}: {problem}", name)
    return value


def java_double(v: float) -> str:
    """Java's Double.toString for the values configs use."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    a = abs(v)
    if a == 0 or 1e-3 <= a < 1e7:
        r = repr(float(v))
        return r if ("." in r or "e" in r) else r + ".0"
    for digits in range(17):                # shortest mantissa that round-trips
        r = f"{v:.{digits}e}"
        if float(r) == v:
            break
    mant, exp = r.split("e")
    if "." not in mant:
        mant += ".0"
    return f"{mant}E{int(exp)}"


def render_value(type_: str, value: Any) -> str | None:
    """Render a typed value as Kafka's ConfigDef.convertToString does."""
    if value is None:
        return None
    if type_ == "boolean":
        return "true" if value else "false"
    if type_ == "list":
        return ",".join(str(x) for x in value)
    if type_ == "double":
        return java_double(float(value))
    return str(value)


# --------------------------------------------------------------------------- listeners

class Endpoint(NamedTuple):
    listener_name: str
    host: str
    port: int
    security_protocol: str


_LISTENER_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


def parse_protocol_map(raw: str) -> dict[str, str]:
    out = {}
    for item in (x.strip() for x in raw.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        if not sep:
            raise ConfigError(f"Invalid value {raw} for configuration listener.security.protocol.map: "
                              "Map entry should be of form <key>:<value>", "listener.security.protocol.map")
        proto = proto.strip().upper()
        if proto not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ConfigError(f"Invalid value {raw} for configuration listener.security.protocol.map: "
                              f"unknown security protocol {proto}", "listener.security.protocol.map")
        out[name.strip().upper()] = proto
    return out


def parse_listeners(raw: str | None, proto_map: dict[str, str], key: str = "listeners") -> list[Endpoint]:
    eps: list[Endpoint] = []
    if not raw:
        return eps
    for item in (x.strip() for x in raw.split(",")):
        if not item:
            continue
        m = _LISTENER_RE.match(item)
        if not m:
            raise ConfigError(f"Invalid value {raw} for configuration {key}: "
                              f"Unable to parse {item} to a broker endpoint", key)
        name = m.group(1).upper()
        if name not in proto_map:
            raise ConfigError(f"Invalid value {raw} for configuration {key}: "
                              f"No security protocol defined for listener {name}", key)
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"Invalid value {raw} for configuration {key}: port out of range in {item}", key)
        if any(e.listener_name == name for e in eps):
            raise ConfigError(f"Invalid value {raw} for configuration {key}: "
                              f"Each listener must have a different name, listeners: {raw}", key)
        eps.append(Endpoint(name, m.group(2), port, proto_map[name]))
    return eps


# --------------------------------------------------------------------------- broker config

def _listener_base_key(name: str):
    """The known key behind ``listener.name.<l>.<key>`` or ``listener.name.<l>.<mechanism>.<key>``."""
    if not name.startswith("listener.name."):
        return None
    parts = name.split(".")
    for skip in (3, 4):
        key = BROKER_KEYS_BY_NAME.get(".".join(parts[skip:]))
        if key is not None:
            return key
    return None


def is_password_config(name: str) -> bool:
    """Whether ``name`` (possibly listener-prefixed) is a password-type broker config: stored
    encoded in ZooKeeper (broker/password_encoder.py)."""
    key = BROKER_KEYS_BY_NAME.get(name) or _listener_base_key(name)
    return key is not None and key.type == "password"


def _mode(name: str):
    key = BROKER_KEYS_BY_NAME.get(name) or _listener_base_key(name)
    return key.mode if key is not None else None


def _validate_dynamic_names(configs: Mapping[str, Any], per_broker: bool) -> None:
    non_dynamic = sorted(k for k in configs if _mode(k) == READ_ONLY)
    if non_dynamic:
        raise ConfigError("Cannot update these configs dynamically: Set(" + ", ".join(non_dynamic) + ")",
                          non_dynamic[0], INVALID_REQUEST)
    if not per_broker:
        pb = sorted(k for k in configs if _mode(k) == PER_BROKER)
        if pb:
            raise ConfigError("Cannot update these configs at default cluster level, broker id must be "
                              "specified: Set(" + ", ".join(pb) + ")", pb[0], INVALID_REQUEST)


def validate_dynamic_broker_configs(configs: Mapping[str, str | None], per_broker: bool) -> dict[str, Any]:
    """Check a full set of dynamic broker overrides; return them parsed.

    Unknown keys are accepted (Kafka lets plugins define their own) with a warning."""
    nulls = sorted(k for k, v in configs.items() if v is None)
    if nulls:
        raise ConfigError("Null value not supported for : " + ", ".join(nulls), nulls[0], INVALID_REQUEST)
    _validate_dynamic_names(configs, per_broker)
    out = {}
    for k, v in configs.items():
        key = BROKER_KEYS_BY_NAME.get(k)
        if key is None:
            if _listener_base_key(k) is None:
                log.warning("dynamic broker config %s is not a known config", k)
            out[k] = v
            continue
        out[k] = parse_value(key, v)
    if "listeners" in configs or "listener.security.protocol.map" in configs or "advertised.listeners" in configs:
        pm = parse_protocol_map(configs.get("listener.security.protocol.map")
                                or BROKER_KEYS_BY_NAME["listener.security.protocol.map"].default)
        parse_listeners(configs.get("listeners"), pm)
        parse_listeners(configs.get("advertised.listeners"), pm, "advertised.listeners")
    return out


class BrokerConfig:
    """Typed view of a broker's configuration (static + dynamic layers + defaults)."""

    def __init__(self, props: Mapping[str, str] | None = None, *, per_broker: Mapping[str, str] | None = None,
                 cluster_default: Mapping[str, str] | None = None, validate: bool = True):
        self._static: dict[str, str] = dict(props or {})
        self._per_broker: dict[str, str] = dict(per_broker or {})
        self._cluster_default: dict[str, str] = dict(cluster_default or {})
        self._cache: dict[str, Any] = {}
        for k in self._static:
            if k not in BROKER_KEYS_BY_NAME and not k.startswith("listener.name."):
                log.warning("The configuration '%s' was supplied but isn't a known config.", k)
        if validate:
            self.validate()

    # ---- construction
    @classmethod
    def from_file(cls, path: str | os.PathLike, overrides: Iterable[str] = ()) -> "BrokerConfig":
        props = load_properties(path)
        for o in overrides:
            k, sep, v = o.partition("=")
            if not sep or not k.strip():
                raise ConfigError(f"Invalid override '{o}': expected key=value")
            props[k.strip()] = v
        return cls(props)

    @classmethod
    def from_dict(cls, props: Mapping[str, Any]) -> "BrokerConfig":
        """Convenience for tests: values may be typed (rendered to strings here)."""
        raw = {}
        for k, v in props.items():
            key = BROKER_KEYS_BY_NAME.get(k)
            raw[k] = v if isinstance(v, str) or v is None else render_value(key.type if key else "string", v)
        return cls(raw)

    # ---- layers
    @property
    def static_configs(self) -> dict[str, str]:
        return dict(self._static)

    @property
    def dynamic_broker_configs(self) -> dict[str, str]:
        return dict(self._per_broker)

    @property
    def dynamic_default_configs(self) -> dict[str, str]:
        return dict(self._cluster_default)

    def set_dynamic(self, per_broker: Mapping[str, str] | None = None,
                    cluster_default: Mapping[str, str] | None = None) -> None:
        """Replace dynamic layers (None leaves a layer unchanged); validates first."""
        if per_broker is not None:
            validate_dynamic_broker_configs(per_broker, True)
        if cluster_default is not None:
            validate_dynamic_broker_configs(cluster_default, False)
        old = (self._per_broker, self._cluster_default, self._cache)
        if per_broker is not None:
            self._per_broker = dict(per_broker)
        if cluster_default is not None:
            self._cluster_default = dict(cluster_default)
        self._cache = {}
        try:
            self.validate()
        except ConfigError:
            self._per_broker, self._cluster_default, self._cache = old
            raise

    def raw(self, name: str) -> tuple[str | None, int]:
        """(raw string or None, source id) of a broker key, without fallback chains."""
        for layer, src in ((self._per_broker, DYNAMIC_BROKER_CONFIG),
                           (self._cluster_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
                           (self._static, STATIC_BROKER_CONFIG)):
            if name in layer:
                return layer[name], src
        return None, DEFAULT_CONFIG

    # ---- typed access
    def get(self, name: str) -> Any:
        try:
            return self._cache[name]
        except KeyError:
            pass
        key = BROKER_KEYS_BY_NAME.get(name)
        if key is None:
            # a listener-prefixed (or plug-in) key: the dynamic layers first, as for known keys
            for layer in (self._per_broker, self._cluster_default, self._static):
                if name in layer:
                    return layer[name]
            raise KeyError(name)
        raw, src = self.raw(name)
        value = key.default if src == DEFAULT_CONFIG else parse_value(key, raw)
        if isinstance(value, list):
            value = list(value)
        self._cache[name] = value
        return value

    __getitem__ = get

    def __contains__(self, name: str) -> bool:
        return name in BROKER_KEYS_BY_NAME or name in self._static or name in self._per_broker \
            or name in self._cluster_default

    def validate(self) -> None:
        for key in BROKER_KEYS:
            self.get(key.name)
        self.listeners()
        self.advertised_listeners()
        self._cross_checks()

    def _cross_checks(self) -> None:
        g = self.get
        if g("zookeeper.connect"):
            # Kafka refuses zookeeper.set.acl=true unless its ZooKeeper session is authenticated
            # (controller/zookeeper/zkauth.py reads the JAAS file of KAFKA_OPTS)
            from controller.zookeeper.zkauth import zk_security
            zk_security(bool(g("zookeeper.set.acl")), get=g)
        from broker.connection_quotas import parse_ip_overrides
        overrides = parse_ip_overrides(g("max.connections.per.ip.overrides"))
        if g("max.connections.per.ip") == 0 and not overrides:
            raise ConfigError("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                              "property is set.", "max.connections.per.ip")
        if g("replica.fetch.wait.max.ms") > g("replica.socket.timeout.ms"):
            raise ConfigError("replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms "
                              "to prevent unnecessary socket timeouts", "replica.socket.timeout.ms")
        if g("replica.fetch.wait.max.ms") > g("replica.lag.time.max.ms"):
            raise ConfigError("replica.fetch.wait.max.ms should always be less than or equal to "
                              "replica.lag.time.max.ms to prevent frequent changes in ISR", "replica.fetch.wait.max.ms")
        acks = g("offsets.commit.required.acks")
        if not -1 <= acks <= g("offsets.topic.replication.factor"):
            raise ConfigError("offsets.commit.required.acks must be greater or equal -1 and less or equal to "
                              "offsets.topic.replication.factor", "offsets.commit.required.acks")
        if "broker.id" in self._static and "node.id" in self._static and g("broker.id") != g("node.id"):
            raise ConfigError("You must set `node.id` to the same value as `broker.id`.", "node.id")
        if self.kraft_mode:
            self._kraft_checks(g)
        else:
            bid = self.broker_id
            if g("broker.id.generation.enable"):
                if not -1 <= bid <= g("reserved.broker.max.id"):
                    raise ConfigError("broker.id must be greater than or equal to -1 and not greater than "
                                      "reserved.broker.max.id", "broker.id")
            elif bid < 0:
                raise ConfigError("broker.id must be greater than or equal to 0", "broker.id")
            names = g("controller.listener.names")
            if names:
                raise ConfigError("controller.listener.names must be empty when not running in KRaft mode: "
                                  f"[{', '.join(names)}]", "controller.listener.names")
        if "classic" not in g("group.coordinator.rebalance.protocols"):
            raise ConfigError("Disabling the 'classic' protocol is not supported (group.coordinator.rebalance.protocols).",
                              "group.coordinator.rebalance.protocols")
        self._check_consumer_group_timeouts(g)
        if g("log.cleaner.min.compaction.lag.ms") > g("log.cleaner.max.compaction.lag.ms"):
            raise ConfigError("log.cleaner.min.compaction.lag.ms must not exceed log.cleaner.max.compaction.lag.ms",
                              "log.cleaner.min.compaction.lag.ms")
        if self._static.get("inter.broker.listener.name") and "security.inter.broker.protocol" in self._static:
            raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol "
                              "should be set.", "inter.broker.listener.name")
        ibl = self.inter_broker_listener_name()
        names = {e.listener_name for e in self.advertised_listeners()}
        if names and ibl not in names:
            raise ConfigError("inter.broker.listener.name must be a listener name defined in advertised.listeners. "
                              f"The valid options based on currently configured listeners are {','.join(sorted(names))}",
                              "inter.broker.listener.name")
        cpl = self.control_plane_listener_name()
        if cpl is not None:
            if names and cpl not in names:
                raise ConfigError("control.plane.listener.name must be a listener name defined in advertised.listeners. "
                                  f"The valid options based on currently configured listeners are {','.join(sorted(names))}",
                                  "control.plane.listener.name")
            if cpl == ibl:
                raise ConfigError("control.plane.listener.name, when defined, should have a different value from the "
                                  f"inter broker listener name. Currently they both have the value {cpl}",
                                  "control.plane.listener.name")

    def _kraft_checks(self, g) -> None:
        """A KRaft configuration (``process.roles`` set), with Kafka 3.9's checks; Odradek runs it
        as one combined node on the embedded metadata store."""
        roles = self.process_roles()
        if roles != {"broker", "controller"}:
            raise ConfigError(f"process.roles={','.join(g('process.roles'))}: Odradek runs a KRaft configuration "
                              "only as a combined node (process.roles=broker,controller) on its embedded metadata "
                              "store; for a cluster of several brokers use ZooKeeper (zookeeper.connect)",
                              "process.roles")
        if self.control_plane_listener_name() is not None:
            raise ConfigError("control.plane.listener.name is not supported in KRaft mode.",
                              "control.plane.listener.name")
        if g("zookeeper.connect"):
            raise ConfigError("zookeeper.connect must not be set with process.roles: Odradek runs a KRaft "
                              "configuration on its embedded metadata store (ZooKeeper migration is not "
                              "supported)", "zookeeper.connect")
        node = g("node.id") if "node.id" in self._static else self.broker_id
        if node < 0:
            raise ConfigError("Missing configuration `node.id` which is required when `process.roles` is defined "
                              "(i.e. when running in KRaft mode).", "node.id")
        voters = self.quorum_voters()
        if not voters and not g("controller.quorum.bootstrap.servers"):
            raise ConfigError("If using process.roles, either controller.quorum.bootstrap.servers must contain the "
                              "set of bootstrap controllers or controller.quorum.voters must contain a parseable "
                              "set of controllers.", "controller.quorum.voters")
        if voters and node not in voters:
            raise ConfigError(f"If process.roles contains the 'controller' role, the node id {node} must be included "
                              f"in the set of voters controller.quorum.voters={set(voters)}",
                              "controller.quorum.voters")
        if len(voters) > 1:
            raise ConfigError(f"controller.quorum.voters names {len(voters)} voters: Odradek's embedded metadata "
                              "store is a quorum of one, this node", "controller.quorum.voters")
        names = {e.listener_name for e in parse_listeners(g("listeners"), self.security_protocol_map())}
        ctl = self.controller_listener_names()
        if not ctl or not (set(ctl) & names):
            raise ConfigError("controller.listener.names must contain at least one value appearing in the "
                              "'listeners' configuration when running the KRaft controller role",
                              "controller.listener.names")
        if not set(ctl) <= names:
            raise ConfigError("controller.listener.names must only contain values appearing in the 'listeners' "
                              "configuration when running the KRaft controller role", "controller.listener.names")
        if not self.advertised_listeners():
            raise ConfigError("There must be at least one broker advertised listener. Perhaps all listeners appear "
                              "in controller.listener.names?", "advertised.listeners")

    # ---- derived helpers
    @property
    def kraft_mode(self) -> bool:
        """``process.roles`` is set: a KRaft configuration file (run on the embedded store)."""
        return bool(self.get("process.roles"))

    def process_roles(self) -> set[str]:
        roles = [r.strip() for r in self.get("process.roles") or [] if r.strip()]
        for r in roles:
            if r not in ("broker", "controller"):
                raise ConfigError(f"Unknown process role '{r}' (only 'broker' and 'controller' are allowed roles)",
                                  "process.roles")
        if len(set(roles)) != len(roles):
            raise ConfigError(f"Duplicate role names found in `process.roles`: {roles}", "process.roles")
        return set(roles)

    def quorum_voters(self) -> dict[int, tuple[str, int]]:
        """``controller.quorum.voters`` as {id: (host, port)}; ConfigError when one does not parse."""
        out = {}
        for v in self.get("controller.quorum.voters") or []:
            v = v.strip()
            m = re.fullmatch(r"(\d+)@(\[[^\]]*\]|[^:]*):(\d+)", v)
            if not m:
                raise ConfigError(f"Invalid value {v} for configuration controller.quorum.voters: Unable to parse "
                                  "voter connection string; expected the format {id}@{host}:{port}",
                                  "controller.quorum.voters")
            out[int(m.group(1))] = (m.group(2), int(m.group(3)))
        return out

    def controller_listener_names(self) -> list[str]:
        return [n.strip().upper() for n in self.get("controller.listener.names") or [] if n.strip()]

    @property
    def broker_id(self) -> int:
        """``broker.id``, or ``node.id`` when only that is set (Kafka treats them as synonyms)."""
        if "broker.id" not in self._static and "node.id" in self._static:
            return self.get("node.id")
        return self.get("broker.id")

    @property
    def zookeeper_connect(self) -> str | None:
        return self.get("zookeeper.connect") or None

    def security_protocol_map(self) -> dict[str, str]:
        return parse_protocol_map(self.get("listener.security.protocol.map"))

    def listeners(self) -> list[Endpoint]:
        """Bind endpoints from ``listeners``: [(listener_name, host, port, security_protocol)].  In
        KRaft mode the controller's listeners are left out: the embedded store needs none."""
        eps = parse_listeners(self.get("listeners"), self.security_protocol_map())
        return self._without_controller_listeners(eps)

    def _without_controller_listeners(self, eps: list[Endpoint]) -> list[Endpoint]:
        if not self.get("process.roles"):
            return eps
        ctl = set(self.controller_listener_names())
        return [e for e in eps if e.listener_name not in ctl]

    def advertised_listeners(self) -> list[Endpoint]:
        """Published endpoints: ``advertised.listeners`` else ``listeners``.  An empty host is
        replaced by this machine's fully-qualified host name, as Kafka does."""
        raw = self.get("advertised.listeners")
        eps = (parse_listeners(raw, self.security_protocol_map(), "advertised.listeners")
               if raw else self.listeners())
        out = []
        for e in self._without_controller_listeners(eps):
            if e.host in ("0.0.0.0", "::"):
                raise ConfigError("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                                  "Use a routable IP address.", "advertised.listeners")
            out.append(e._replace(host=e.host or _hostname()))
        return out

    @staticmethod
    def _check_consumer_group_timeouts(g) -> None:
        """Kafka's bounds between the group.consumer.* timeouts (GroupCoordinatorConfig)."""
        from broker.group.assignors import assignor_name
        pre = "group.consumer."
        for kind in ("heartbeat.interval", "session.timeout"):
            lo, hi, val = (f"{pre}min.{kind}.ms", f"{pre}max.{kind}.ms", f"{pre}{kind}.ms")
            if g(hi) < g(lo):
                raise ConfigError(f"{hi} must be greater than or equal to {lo}", hi)
            if g(val) < g(lo):
                raise ConfigError(f"{val} must be greater than or equal to {lo}", val)
            if g(val) > g(hi):
                raise ConfigError(f"{val} must be less than or equal to {hi}", val)
        if g(pre + "heartbeat.interval.ms") >= g(pre + "session.timeout.ms"):
            raise ConfigError(f"{pre}heartbeat.interval.ms must be less than {pre}session.timeout.ms",
                              pre + "heartbeat.interval.ms")
        for a in g(pre + "assignors"):
            if assignor_name(a) is None:
                raise ConfigError(f"Class {a} cannot be found (group.consumer.assignors knows uniform and range)",
                                  pre + "assignors")

    def inter_broker_listener_name(self) -> str:
        return (self.get("inter.broker.listener.name") or self.get("security.inter.broker.protocol")).upper()

    def control_plane_listener_name(self) -> str | None:
        """``control.plane.listener.name`` (KIP-291, ZooKeeper mode), or None."""
        name = (self.get("control.plane.listener.name") or "").strip()
        return name.upper() or None

    def controller_to_broker_listener_name(self) -> str:
        """The listener the controller's requests to the brokers, and the brokers' requests to
        the controller, go through (ZooKeeper mode): the control plane's, else the inter-broker
        one."""
        return self.control_plane_listener_name() or self.inter_broker_listener_name()

    def log_dirs(self) -> list[str]:
        raw = self.get("log.dirs") or self.get("log.dir")
        return [d.strip() for d in raw.split(",") if d.strip()]

    def zookeeper_connection_timeout_ms(self) -> int:
        v = self.get("zookeeper.connection.timeout.ms")
        return self.get("zookeeper.session.timeout.ms") if v is None else v

    def log_retention_ms(self) -> int:
        """log.retention.ms > minutes > hours; any negative result is -1 (unlimited)."""
        ms = self.get("log.retention.ms")
        if ms is None:
            m = self.get("log.retention.minutes")
            ms = m * 60_000 if m is not None else self.get("log.retention.hours") * 3_600_000
        return -1 if ms < 0 else ms

    def log_roll_ms(self) -> int:
        ms = self.get("log.roll.ms")
        return ms if ms is not None else self.get("log.roll.hours") * 3_600_000

    def log_roll_jitter_ms(self) -> int:
        ms = self.get("log.roll.jitter.ms")
        return ms if ms is not None else self.get("log.roll.jitter.hours") * 3_600_000

    def log_flush_interval_ms(self) -> int:
        ms = self.get("log.flush.interval.ms")
        return ms if ms is not None else self.get("log.flush.scheduler.interval.ms")

    def topic_default(self, topic_key: str) -> Any:
        """The broker-level default for a topic-level key (end of its fallback chain)."""
        special = {"retention.ms": self.log_retention_ms, "segment.ms": self.log_roll_ms,
                   "segment.jitter.ms": self.log_roll_jitter_ms, "flush.ms": self.log_flush_interval_ms}
        if topic_key in special:
            return special[topic_key]()
        chain = TOPIC_SYNONYMS.get(topic_key)
        if chain:
            return self.get(chain[0])
        return TOPIC_KEYS[topic_key].default


_HOSTNAME: str | None = None


def _hostname() -> str:
    global _HOSTNAME
    if _HOSTNAME is None:
        _HOSTNAME = socket.getfqdn() or "localhost"
    return _HOSTNAME


# --------------------------------------------------------------------------- topic configs

def validate_topic_config(name: str, value: str | None) -> Any:
    """Parse and check one topic-level override; ConfigError (INVALID_CONFIG) if bad."""
    key = TOPIC_KEYS.get(name)
    if key is None:
        raise ConfigError(f"Unknown topic config name: {name}", name)
    if value is None:
        raise ConfigError(f"Null value not supported for topic configs: {name}", name)
    return parse_value(key, value)


def validate_topic_configs(overrides: Mapping[str, str | None]) -> dict[str, Any]:
    """Check a whole override set (names, values, cross-key rules); return parsed."""
    out = {n: validate_topic_config(n, v) for n, v in overrides.items()}
    lo = out.get("min.compaction.lag.ms")
    hi = out.get("max.compaction.lag.ms")
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                          f"max.compaction.lag.ms ({hi})", "min.compaction.lag.ms")
    return out


def effective_topic_config(broker_cfg: BrokerConfig, overrides: Mapping[str, str]) -> dict[str, Any]:
    """Typed value of every topic key: override if present, else the broker default."""
    parsed = validate_topic_configs(overrides)
    out = {}
    for name in TOPIC_KEYS:
        out[name] = parsed[name] if name in parsed else broker_cfg.topic_default(name)
    lo, hi = out["min.compaction.lag.ms"], out["max.compaction.lag.ms"]
    if lo > hi:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                          f"max.compaction.lag.ms ({hi})", "min.compaction.lag.ms")
    return out


class TopicConfigs:
    """Namespace for the topic-config functions (kept for callers that like a class)."""
    validate = staticmethod(validate_topic_config)
    validate_all = staticmethod(validate_topic_configs)
    effective = staticmethod(effective_topic_config)


@dataclass
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    config_type: int
    documentation: str | None = None
    synonyms: list[ConfigSynonym] = field(default_factory=list)

    @property
    def is_default(self) -> bool:
        return self.source == DEFAULT_CONFIG


def _default_strings() -> dict[str, str]:
    return {k.name: render_value(k.type, k.default) for k in BROKER_KEYS if k.default is not None}


_DEFAULT_STRINGS = _default_strings()


def _config_synonyms(cfg: BrokerConfig, name: str, names: list[str], sensitive: bool) -> list[ConfigSynonym]:
    """Kafka's synonym list: by source (per-broker, default, static, built-in), then by name;
    entries before the first one named ``name`` are dropped."""
    out = []
    for layer, src in ((cfg._per_broker, DYNAMIC_BROKER_CONFIG),
                       (cfg._cluster_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
                       (cfg._static, STATIC_BROKER_CONFIG),
                       (_DEFAULT_STRINGS, DEFAULT_CONFIG)):
        for n in names:
            if n in layer:
                out.append(ConfigSynonym(n, None if sensitive else layer[n], src))
    i = 0
    while i < len(out) and out[i].name != name:
        i += 1
    return out[i:]


def describe_topic_configs(broker_cfg: BrokerConfig, overrides: Mapping[str, str],
                           include_synonyms: bool = False, include_documentation: bool = False,
                           keys: Iterable[str] | None = None) -> list[ConfigEntry]:
    """DescribeConfigs entries for a topic, in name order (``keys`` filters)."""
    eff = effective_topic_config(broker_cfg, overrides)
    wanted = set(keys) if keys is not None else None
    out = []
    for name in sorted(TOPIC_KEYS):
        if wanted is not None and name not in wanted:
            continue
        key = TOPIC_KEYS[name]
        value = None if key.sensitive else render_value(key.type, eff[name])
        chain = TOPIC_SYNONYMS.get(name)
        syns = _config_synonyms(broker_cfg, chain[0], broker_synonyms(chain[0]), key.sensitive) if chain else []
        if name in overrides:
            syns.insert(0, ConfigSynonym(name, value, DYNAMIC_TOPIC_CONFIG))
        source = syns[0].source if syns else DEFAULT_CONFIG
        out.append(ConfigEntry(name, value, source, False, key.sensitive, key.type_id,
                               key.doc if include_documentation else None,
                               syns if include_synonyms else []))
    return out


def describe_broker_configs(cfg: BrokerConfig, *, default_resource: bool = False,
                            include_synonyms: bool = False, include_documentation: bool = False,
                            keys: Iterable[str] | None = None) -> list[ConfigEntry]:
    """DescribeConfigs entries for this broker (every known key) or, with
    ``default_resource`` (empty resource name), for the cluster-default dynamic layer."""
    wanted = set(keys) if keys is not None else None
    out = []
    if default_resource:
        items = [(n, v) for n, v in sorted(cfg._cluster_default.items())]
    else:
        items = [(k.name, None) for k in sorted(BROKER_KEYS, key=lambda k: k.name) if not k.internal]
        # listener-prefixed settings that are set (statically or dynamically), as Kafka lists them
        prefixed = sorted({n for layer in (cfg._static, cfg._cluster_default, cfg._per_broker) for n in layer
                           if n.startswith("listener.name.") and _listener_base_key(n) is not None})
        items += [(n, None) for n in prefixed]
    for name, raw in items:
        if wanted is not None and name not in wanted:
            continue
        if name.startswith("listener.name."):
            base = _listener_base_key(name)
            sensitive = base.sensitive
            value = None if sensitive else next((layer[name] for layer in (cfg._per_broker, cfg._cluster_default,
                                                                          cfg._static) if name in layer), None)
            syns = _config_synonyms(cfg, name, [name], sensitive)
            out.append(ConfigEntry(name, value, syns[0].source if syns else DEFAULT_CONFIG, base.mode == READ_ONLY,
                                   sensitive, base.type_id, base.doc if include_documentation else None,
                                   syns if include_synonyms else []))
            continue
        key = BROKER_KEYS_BY_NAME.get(name)
        type_ = key.type if key else "string"
        sensitive = key.sensitive if key else False
        if sensitive:
            value = None
        elif default_resource:
            value = raw
        else:
            value = render_value(type_, cfg.get(name))
        syns = _config_synonyms(cfg, name, broker_synonyms(name), sensitive)
        if default_resource:
            syns = [s for s in syns if s.source != DYNAMIC_BROKER_CONFIG]
        source = syns[0].source if syns else DEFAULT_CONFIG
        read_only = key is None or key.mode == READ_ONLY
        out.append(ConfigEntry(name, value, source, read_only, sensitive, key.type_id if key else 2,
                               (key.doc if key else None) if include_documentation else None,
                               syns if include_synonyms else []))
    return out


# --------------------------------------------------------------------------- alter configs

def _config_type(name: str, kind: str) -> str | None:
    key = (TOPIC_KEYS if kind == "topic" else BROKER_KEYS_BY_NAME).get(name)
    return key.type if key else None


def apply_incremental(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]],
                      kind: str = "topic", defaults: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Apply IncrementalAlterConfigs ops to a dict of string overrides; returns a new dict.

    APPEND/SUBTRACT work on list-typed keys only; APPEND to an unset key starts from the
    key's default (``defaults`` if given, else the table default).  Values are not
    validated here: validate the result (``validate_topic_configs`` /
    ``validate_dynamic_broker_configs``).  Errors carry INVALID_REQUEST like Kafka."""
    if kind not in ("topic", "broker"):
        raise ValueError(kind)
    ops = list(ops)
    seen = set()
    dup = sorted({n for n, _op, _v in ops if n in seen or seen.add(n)})
    if dup:
        raise ConfigError("Error due to duplicate config keys", dup[0], INVALID_REQUEST)
    out = dict(current)
    for name, op, value in ops:
        if op == OP_SET:
            if value is None:
                raise ConfigError(f"Null value not supported for : {name}", name, INVALID_REQUEST)
            out[name] = value
        elif op == OP_DELETE:
            out.pop(name, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            word = "append" if op == OP_APPEND else "subtract"
            if _config_type(name, kind) != "list":
                raise ConfigError(f"Config value {word} is not allowed for config key: {name}", name, INVALID_CONFIG)
            if name in out:
                old = [x for x in re.split(r"\s*,\s*", out[name].strip()) if x]
            else:
                d = defaults.get(name) if defaults and name in defaults else \
                    (TOPIC_KEYS if kind == "topic" else BROKER_KEYS_BY_NAME)[name].default
                old = list(d or [])
            items = [x for x in re.split(r"\s*,\s*", (value or "").strip()) if x]
            if op == OP_APPEND:
                new = old + [x for x in items if x not in old]
            else:
                new = [x for x in old if x not in items]
            out[name] = ",".join(new)
        else:
            raise ConfigError(f"Unknown operation type {op} for config key: {name}", name, INVALID_REQUEST)
    return out

"""kafka-storage.sh: Kafka 3.9's StorageTool (argparse4j style) for KRaft configuration files.

    kafka-storage.sh random-uuid
    kafka-storage.sh info -c server.properties
    kafka-storage.sh format -t CLUSTER_ID -c server.properties [--ignore-formatted]
        [--release-version V] [--feature name=level]... [--add-scram 'SCRAM-SHA-256=[name=u,password=p]']...
        [--standalone | --initial-controllers id@host:port:dirid,... | --no-initial-controllers]

A configuration with ``process.roles`` runs as one combined node on the embedded metadata store
(docs/config.md, "KRaft configuration files"), and the broker refuses to start until every log
directory and ``metadata.log.dir`` holds a v1 ``meta.properties`` (storage/meta_properties.py).
``format`` writes those files (a fresh ``directory.id`` each) with Kafka's checks, messages and
exit statuses; ``--add-scram`` credentials go into the embedded store, so the broker starts with
them.  ``--release-version`` and ``--feature`` are validated as Kafka 3.9 validates them, but
nothing of them is stored: Odradek's broker finalizes no feature flags.  ``info`` prints what
Kafka's prints about the directories (found directories, the metadata, problems; status 1 with a
problem).  ``random-uuid`` prints a Kafka UUID (base64).

Differences: the embedded store is a quorum of one, so ``--initial-controllers`` must name exactly
this node; Kafka 3.9 writes ``bootstrap.checkpoint`` (and, for a dynamic quorum, a KRaft
snapshot) next to ``meta.properties``, Odradek writes neither; the cluster id is checked to be a
base64 UUID (Kafka 3.9 no longer checks it, older releases did, with the same message).
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import os
import re
import sys
import uuid
from dataclasses import dataclass, field

from tools.common import ToolError, run_parsed
from tools.features import METADATA_LEVELS
from tools.transactions import Parser

PROG = "kafka-storage"
META_PROPERTIES = "meta.properties"
METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"


# =============================================================================================
# MetadataVersion (server-common's enum, Kafka 3.9): every known version in order
# =============================================================================================

@dataclass(frozen=True)
class MetadataVersion:
    name: str          # "3.9-IV0", or "0.8.0" for the oldest ones
    level: int         # feature level; -1 before KRaft
    ordinal: int

    @property
    def release(self) -> str:
        return self.name.split("-")[0]

    def __str__(self) -> str:
        return self.name


_PRE_KRAFT = ("0.8.0 0.8.1 0.8.2 0.9.0 0.10.0-IV0 0.10.0-IV1 0.10.1-IV0 0.10.1-IV1 0.10.1-IV2 0.10.2-IV0 "
              "0.11.0-IV0 0.11.0-IV1 0.11.0-IV2 1.0-IV0 1.1-IV0 2.0-IV0 2.0-IV1 2.1-IV0 2.1-IV1 2.1-IV2 "
              "2.2-IV0 2.2-IV1 2.3-IV0 2.3-IV1 2.4-IV0 2.4-IV1 2.5-IV0 2.6-IV0 2.7-IV0 2.7-IV1 2.7-IV2 "
              "2.8-IV0 2.8-IV1 3.0-IV0").split()
_LEVELS = [(n, -1) for n in _PRE_KRAFT] + [(METADATA_LEVELS[k], k) for k in sorted(METADATA_LEVELS)] \
    + [("4.0-IV0", 22), ("4.0-IV1", 23)]        # the two after 3.9-IV0 are unstable in 3.9
VERSIONS = [MetadataVersion(n, lvl, i) for i, (n, lvl) in enumerate(_LEVELS)]
BY_NAME = {v.name: v for v in VERSIONS}
LATEST_PRODUCTION = BY_NAME["3.9-IV0"]
IBP_3_3_IV0 = BY_NAME["3.3-IV0"]
IBP_3_5_IV2 = BY_NAME["3.5-IV2"]
MINIMUM_FOR_HELP = BY_NAME["3.0-IV0"]


def is_production(v: MetadataVersion) -> bool:
    return v.ordinal <= LATEST_PRODUCTION.ordinal


def _version_keys() -> dict[str, MetadataVersion]:
    keys = dict(BY_NAME)
    for v in VERSIONS:              # a bare release ("3.7") is its last production version
        if is_production(v):
            keys[v.release] = v
    return keys


VERSION_KEYS = _version_keys()


def metadata_version_from_string(text: str) -> MetadataVersion:
    """Kafka's MetadataVersion.fromVersionString: "3.9-IV0", "3.9", "3.9.1", "0.10.2"..."""
    segments = text.split(".")
    wanted = 3 if text.startswith("0.") else 2
    key = text if wanted >= len(segments) else ".".join(segments[:wanted])
    v = VERSION_KEYS.get(key)
    if v is None:
        raise ToolError(f"Version {text} is not a valid version")
    return v


def metadata_version_from_level(level: int) -> MetadataVersion:
    for v in VERSIONS:
        if v.level == level:
            return v
    raise ToolError(f"No MetadataVersion with feature level {level}")


# =============================================================================================
# Feature flags Kafka 3.9 formats with (server-common's Features): validated, never stored
# =============================================================================================

@dataclass(frozen=True)
class FeatureLevel:
    level: int
    bootstrap: str                              # the metadata.version that makes it the default
    dependencies: dict = field(default_factory=dict)


FEATURES: dict[str, list[FeatureLevel]] = {
    KRAFT_VERSION: [FeatureLevel(0, "3.0-IV1"), FeatureLevel(1, "3.9-IV0", {METADATA_VERSION: 21})],
    TRANSACTION_VERSION: [FeatureLevel(0, "3.0-IV1"), FeatureLevel(1, "4.0-IV0"), FeatureLevel(2, "4.0-IV0")],
}


def feature_default(name: str, mv: MetadataVersion) -> int:
    """The highest level whose bootstrap metadata.version is not above ``mv``."""
    level = 0
    for f in FEATURES[name]:
        if BY_NAME[f.bootstrap].ordinal > mv.ordinal:
            break
        level = f.level
    return level


def feature_level(name: str, level: int, unstable: bool) -> FeatureLevel:
    for f in FEATURES[name]:
        if f.level == level and (unstable or level <= feature_default(name, LATEST_PRODUCTION)):
            return f
    raise ToolError(f"No feature:{name} with feature level {level}")


def check_dependencies(name: str, f: FeatureLevel, levels: dict[str, int]) -> None:
    mv = levels.get(METADATA_VERSION)
    if f.level >= 1 and (mv is None or mv < IBP_3_3_IV0.level):
        raise ToolError(f"{name} could not be set to {f.level} because it depends on metadata.version=4 "
                        f"({IBP_3_3_IV0})")
    for dep, wanted in f.dependencies.items():
        have = levels.get(dep)
        if have is None or have < wanted:
            raise ToolError(f"{name} could not be set to {f.level} because it depends on {dep} level {wanted}")


def parse_name_and_level(text: str) -> tuple[str, int]:
    name, sep, raw = text.partition("=")
    if not sep:
        raise ToolError(f"Can't parse feature=level string {text}: equals sign not found.")
    raw = raw.strip()
    level = java_int(raw, -32768, 32767)
    if level is None:
        raise ToolError(f"Can't parse feature=level string {text}: unable to parse {raw} as a short.")
    return name.strip(), level


def java_int(text: str, lo: int = -2**31, hi: int = 2**31 - 1) -> int | None:
    """Integer.parseInt / Short.parseShort: optional sign and ASCII digits, in range; else None."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    v = int(text)
    return v if lo <= v <= hi else None


# =============================================================================================
# Kafka UUIDs (base64, URL alphabet, no padding)
# =============================================================================================

_B64URL = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString, with its messages (ValueError)."""
    if len(text) > 24:
        raise ValueError(f"Input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID")
    body = text.rstrip("=")
    for c in body:
        if c not in _B64URL:
            raise ValueError(f"Illegal base64 character {ord(c):x}")
    if len(body) % 4 == 1:
        raise ValueError("Last unit does not have enough valid bits")
    data = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    if len(data) != 16:
        raise ValueError(f"Input string `{text}` decoded as {len(data)} bytes, which is not equal to the "
                         "expected 16 bytes of a base64-encoded UUID")
    return uuid.UUID(bytes=data)


def reserved_directory_id(u: uuid.UUID) -> bool:
    """DirectoryId.reserved: the first 100 ids (unassigned, lost, migrating, ...)."""
    return u.int >> 64 == 0 and (u.int & (2**64 - 1)) < 100


def uuid_text(u: uuid.UUID) -> str:
    from controller.api import uuid_to_base64
    return uuid_to_base64(u)


# =============================================================================================
# --initial-controllers / --standalone (KIP-853's DynamicVoters text)
# =============================================================================================

@dataclass(frozen=True)
class Voter:
    node_id: int
    host: str
    port: int
    directory_id: uuid.UUID


def parse_voter(text: str) -> Voter:
    s = text.strip()
    at = s.find("@")
    if at < 0:
        raise ToolError("No @ found in dynamic voter string.")
    if at == 0:
        raise ToolError("Invalid @ at beginning of dynamic voter string.")
    node_id = java_int(s[:at])
    if node_id is None:
        raise ToolError("Failed to parse node id in dynamic voter string.")
    if node_id < 0:
        raise ToolError(f"Invalid negative node id {node_id} in dynamic voter string.")
    s = s[at + 1:]
    if not s:
        raise ToolError("No hostname found after node id.")
    if s.startswith("["):
        end = s.find("]")
        if end < 0:
            raise ToolError("Hostname began with left bracket, but no right bracket was found.")
        host, s = s[1:end], s[end + 1:]
    else:
        end = s.find(":")
        if end < 0:
            raise ToolError("No colon following hostname could be found.")
        host, s = s[:end], s[end:]
    if not s.startswith(":"):
        raise ToolError("Port section must start with a colon.")
    s = s[1:]
    end = s.find(":")
    if end < 0:
        raise ToolError("No colon following port could be found.")
    port = java_int(s[:end])
    if port is None:
        raise ToolError("Failed to parse port in dynamic voter string.")
    if not 0 <= port <= 65535:
        raise ToolError(f"Invalid port {port} in dynamic voter string.")
    try:
        directory_id = parse_kafka_uuid(s[end + 1:])
    except ValueError:
        raise ToolError("Failed to parse directory ID in dynamic voter string.") from None
    return Voter(node_id, host, port, directory_id)


def parse_voters(text: str) -> dict[int, Voter]:
    voters: dict[int, Voter] = {}
    for part in text.strip().split(","):
        if part:
            v = parse_voter(part)
            if v.node_id in voters:
                raise ToolError(f"Node id {v.node_id} was specified more than once.")
            voters[v.node_id] = v
    if not voters:
        raise ToolError("No voters given.")
    return voters


def standalone_voter(cfg) -> Voter:
    """This node as the one voter: its first advertised controller listener (``localhost`` when
    the listener names no host) and a new directory id."""
    from broker.config import ConfigError, parse_listeners
    from controller.api import random_kafka_uuid
    if "controller" not in cfg.process_roles():
        raise ToolError("You can only use --standalone on a controller.")
    names = cfg.controller_listener_names()
    proto = cfg.security_protocol_map()
    try:
        eps = [e for e in parse_listeners(cfg.get("advertised.listeners"), proto, "advertised.listeners")
               if e.listener_name in names]
        if not eps:
            eps = [e for e in parse_listeners(cfg.get("listeners"), proto) if e.listener_name in names]
    except ConfigError as e:
        raise ToolError(str(e)) from None
    if not eps:
        raise ToolError("No controller listeners found.")
    return Voter(cfg.get("node.id"), eps[0].host or "localhost", eps[0].port, random_kafka_uuid())


# =============================================================================================
# --add-scram (Kafka's ScramParser)
# =============================================================================================

@dataclass
class ScramArgument:
    mechanism: str                    # SCRAM-SHA-256 / SCRAM-SHA-512
    name: str
    salt: bytes | None
    iterations: int | None
    password: str | None
    salted_password: bytes | None

    def credential_text(self) -> str:
        """The credential as the broker stores it (protocol/scram.py's ``to_config``)."""
        from protocol import scram as S
        iterations = S.DEFAULT_ITERATIONS if self.iterations is None else self.iterations
        enum_name = self.mechanism.replace("-", "_")
        if iterations < S.MIN_ITERATIONS:
            raise ToolError(f"The 'iterations' value must be >= {S.MIN_ITERATIONS} for add-scram using {enum_name}")
        if iterations > S.MAX_ITERATIONS:
            raise ToolError(f"The 'iterations' value must be <= {S.MAX_ITERATIONS} for add-scram using {enum_name}")
        salt = self.salt if self.salt is not None else os.urandom(32)
        if self.salted_password is not None:
            cred = S.Credential.from_salted_password(self.mechanism, salt, self.salted_password, iterations)
        else:
            cred = S.Credential.from_password(self.mechanism, self.password, iterations, salt)
        return cred.to_config()


def java_base64(text: str) -> bytes:
    """Base64.getDecoder().decode: the standard alphabet, padding optional."""
    body = text.rstrip("=")
    if len(body) % 4 == 1 or not re.fullmatch(r"[A-Za-z0-9+/]*", body):
        raise ValueError(text)
    return base64.b64decode(body + "=" * (-len(body) % 4))


def parse_scram(text: str) -> ScramArgument:
    from protocol import scram as S
    text = text.strip()
    mechanism, sep, config = text.partition("=")
    if not sep:
        raise ToolError(f"Failed to find equals sign in SCRAM argument '{text}'")
    if mechanism not in S.MECHANISMS:
        raise ToolError(f"The add-scram mechanism {mechanism} is not supported.")
    if not config.startswith("["):
        raise ToolError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise ToolError("Expected configuration string to end with ]")
    components: dict[str, str] = {}
    for component in config[1:-1].split(","):
        key, sep, value = component.partition("=")
        if not sep:
            raise ToolError(f"No equals sign found in SCRAM component: {component}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        components[key] = value
    name = components.pop("name", None)
    if name is None:
        raise ToolError("You must supply 'name' to add-scram")
    salt = None
    if "salt" in components:
        raw = components.pop("salt")
        try:
            salt = java_base64(raw)
        except (ValueError, binascii.Error):
            raise ToolError(f"Failed to decode given salt: {raw}") from None
    iterations = None
    if "iterations" in components:
        raw = components.pop("iterations")
        iterations = java_int(raw)
        if iterations is None:
            raise ToolError(f"Failed to parse iterations count: {raw}")
    password = components.pop("password", None)
    salted_raw = components.pop("saltedpassword", None)
    salted = None
    if password is None:
        if salted_raw is None:
            raise ToolError("You must supply one of 'password' or 'saltedpassword' to add-scram")
        if salt is None:
            raise ToolError("You must supply 'salt' with 'saltedpassword' to add-scram")
        try:
            salted = java_base64(salted_raw)
        except (ValueError, binascii.Error):
            raise ToolError(f"Failed to decode given saltedPassword: {salted_raw}") from None
    if components:
        raise ToolError("Unknown SCRAM configurations: " + ", ".join(sorted(components)))
    return ScramArgument(mechanism, name, salt, iterations, password, salted)


# =============================================================================================
# meta.properties ensembles (Kafka's MetaProperties / MetaPropertiesEnsemble)
# =============================================================================================

@dataclass(frozen=True)
class MetaProps:
    version: int
    cluster_id: str | None
    node_id: int | None
    directory_id: uuid.UUID | None

    def as_properties(self) -> dict[str, str]:
        out = {"version": str(self.version)}
        if self.cluster_id is not None:
            out["cluster.id"] = self.cluster_id
        if self.node_id is not None:
            out["broker.id" if self.version == 0 else "node.id"] = str(self.node_id)
        if self.directory_id is not None:
            out["directory.id"] = uuid_text(self.directory_id)
        return out


def meta_path(directory: str) -> str:
    return os.path.join(directory, META_PROPERTIES)


def meta_from_properties(props: dict[str, str]) -> MetaProps:
    """MetaProperties.Builder(props).build(), with Kafka's messages (ValueError)."""
    raw = props.get("version", "0")
    version = java_int(raw.strip())
    if version is None:
        raise ValueError(f"Invalid meta.properties version string '{raw}'")
    if version not in (0, 1):
        raise ValueError(f"Unknown meta.properties version number {version}")

    def required_int(key):
        if key not in props:
            raise ValueError(f"Failed to find {key}")
        v = java_int(props[key])
        if v is None:
            raise ValueError(f"Unable to read {key} as a base-10 number.")
        return v
    node_id = (required_int("broker.id") if "broker.id" in props else None) if version == 0 \
        else required_int("node.id")
    directory_id = None
    if "directory.id" in props:
        try:
            directory_id = parse_kafka_uuid(props["directory.id"])
        except ValueError as e:
            raise ValueError(f"Unable to read directory.id as a Uuid: {e}") from None
    cluster_id = props.get("cluster.id")
    if version == 1 and cluster_id is None:
        raise ValueError("cluster.id was not found.")
    return MetaProps(version, cluster_id, node_id, directory_id)


def read_meta_file(directory: str) -> MetaProps | None:
    """None when the directory (or its meta.properties) does not exist; ValueError/OSError when
    it cannot be read."""
    from storage.meta_properties import read_properties
    try:
        props = read_properties(meta_path(directory))
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    return meta_from_properties(props)


def directories_of(cfg) -> list[str]:
    """StorageTool.configToLogDirectories: log dirs and metadata.log.dir, sorted, once each."""
    from storage.meta_properties import kraft_directories
    return sorted(set(kraft_directories(cfg)))


def shown_path(directory: str) -> str:
    """java.nio's Path text: repeated and trailing separators dropped."""
    s = re.sub(r"/+", "/", directory)
    return s[:-1] if len(s) > 1 and s.endswith("/") else s


# =============================================================================================
# Commands
# =============================================================================================

def info(cfg) -> int:
    kraft = cfg.kraft_mode
    directories = directories_of(cfg)
    problems: list[str] = []
    found: list[str] = []
    first: MetaProps | None = None
    for d in directories:
        p = shown_path(d)
        if not os.path.isdir(d):
            problems.append(f"{p} is not a directory" if os.path.exists(d) else f"{p} does not exist")
            continue
        found.append(p)
        path = os.path.join(p, META_PROPERTIES)
        if not os.path.exists(path):
            problems.append(f"{p} is not formatted.")
            continue
        try:
            cur = read_meta_file(d)
        except (ValueError, OSError) as e:
            problems.append(f"Error loading {path}: {getattr(e, 'strerror', None) or e}")
            continue
        if cur is None:
            problems.append(f"{p} is not formatted.")
        elif first is None:
            first = cur
        elif first.cluster_id != cur.cluster_id:
            problems.append("Mismatched cluster IDs between storage directories.")
        elif first.node_id != cur.node_id:
            problems.append("Mismatched node IDs between storage directories.")
    if first is not None:
        if kraft and first.version == 0:
            problems.append("The kafka configuration file appears to be for a cluster in KRaft mode, but the "
                            "directories are formatted for legacy mode.")
        elif not kraft and first.version == 1:
            problems.append("The kafka configuration file appears to be for a legacy cluster, but the "
                            "directories are formatted for a cluster in KRaft mode.")
    if not directories:
        print("No directories specified.")
        return 0
    if found:
        print("Found log directory:" if len(found) == 1 else "Found log directories:")
        for d in found:
            print(f"  {d}")
        print()
    if first is not None:
        props = first.as_properties()
        print("Found metadata: {" + ", ".join(f"{k}={props[k]}" for k in sorted(props)) + "}")
        print()
    if problems:
        print("Found problem:" if len(problems) == 1 else "Found problems:")
        for p in problems:
            print(f"  {p}")
        print()
        return 1
    return 0


@dataclass
class FormatPlan:
    cluster_id: str
    node_id: int
    directories: list[str]
    metadata_dir: str
    release: MetadataVersion
    voters: dict[int, Voter] | None
    scram: list[tuple[str, str, str]]   # (user, mechanism, credential text), computed before writing
    ignore_formatted: bool


def effective_release(a, cfg, features: dict[str, int], unstable: bool) -> MetadataVersion:
    def verify(v: MetadataVersion) -> MetadataVersion:
        if v.level <= 0:
            raise ToolError(f"{METADATA_VERSION} {v} is too old to be supported.")
        if not unstable and not is_production(v):
            raise ToolError(f"{METADATA_VERSION} {v} is not yet stable.")
        return v
    requested = None
    if a.release_version is not None:
        requested = metadata_version_from_string(a.release_version)
    elif cfg.static_configs.get("inter.broker.protocol.version"):
        requested = metadata_version_from_string(cfg.static_configs["inter.broker.protocol.version"].strip())
    if METADATA_VERSION in features:
        if requested is not None:
            raise ToolError(f"Use --release-version instead of --feature {METADATA_VERSION}=X to avoid ambiguity.")
        return verify(metadata_version_from_level(features[METADATA_VERSION]))
    if requested is not None:
        return verify(requested)
    return VERSIONS[-1] if unstable else LATEST_PRODUCTION


def check_features(features: dict[str, int], release: MetadataVersion, dynamic_quorum: bool,
                   unstable: bool) -> dict[str, int]:
    """Formatter.calculateEffectiveFeatureLevels: the levels Kafka would bootstrap with."""
    for name in sorted(features):
        if name != METADATA_VERSION and name not in FEATURES:
            raise ToolError(f"Unsupported feature: {name}. Supported features are: " + ", ".join(sorted(FEATURES)))
    levels = dict(features)
    levels[METADATA_VERSION] = release.level
    for name in FEATURES:
        if name == KRAFT_VERSION:
            if name in features:
                lvl = features[name]
                if lvl == 0 and dynamic_quorum:
                    raise ToolError(f"Cannot set {KRAFT_VERSION} to 0 if KIP-853 configuration is present. "
                                    f"Try removing the --feature flag for {KRAFT_VERSION}.")
                if lvl != 0 and not dynamic_quorum:
                    raise ToolError(f"Cannot set {KRAFT_VERSION} to {lvl} unless KIP-853 configuration is "
                                    f"present. Try removing the --feature flag for {KRAFT_VERSION}.")
            else:
                levels[name] = 1 if dynamic_quorum else 0
        elif name not in levels:
            levels[name] = feature_default(name, release)
    for name in sorted(levels):
        if name != METADATA_VERSION:
            check_dependencies(name, feature_level(name, levels[name], unstable), levels)
    return levels


def plan_format(a, cfg) -> FormatPlan:
    from storage.meta_properties import metadata_log_dir
    if not cfg.kraft_mode:
        raise ToolError("The kafka configuration file appears to be for a legacy cluster. "
                        "Formatting is only supported for clusters in KRaft mode.")
    try:
        parse_kafka_uuid(a.cluster_id)
    except ValueError as e:
        raise ToolError(f"Cluster ID string {a.cluster_id} does not appear to be a valid UUID: {e}") from None
    node_id = cfg.get("node.id")
    unstable = cfg.static_configs.get("unstable.feature.versions.enable", "").strip().lower() == "true"
    features: dict[str, int] = {}
    for item in a.feature or []:
        name, level = parse_name_and_level(item)
        features[name] = level
    voters = None
    if a.initial_controllers is not None:
        voters = parse_voters(a.initial_controllers)
    if a.standalone:
        v = standalone_voter(cfg)
        voters = {v.node_id: v}
    if not a.no_initial_controllers and "controller" in cfg.process_roles() and not cfg.quorum_voters() \
            and voters is None:
        raise ToolError("Because controller.quorum.voters is not set on this controller, you must specify one of "
                        "the following: --standalone, --initial-controllers, or --no-initial-controllers.")
    if voters is not None and set(voters) != {node_id}:
        raise ToolError(f"--initial-controllers names node id(s) {', '.join(map(str, sorted(voters)))}, but "
                        "Odradek's embedded metadata store is a quorum of one: the initial controllers must be "
                        f"exactly this node (node.id={node_id}).")
    if node_id < 0:
        raise ToolError("You must specify a valid non-negative node ID.")
    release = effective_release(a, cfg, features, unstable)
    check_features(features, release, voters is not None, unstable)
    scram = []
    if a.add_scram:
        if release.ordinal < IBP_3_5_IV2.ordinal:
            raise ToolError(f"SCRAM is only supported in {METADATA_VERSION} {IBP_3_5_IV2} or later.")
        for text in a.add_scram:
            arg = parse_scram(text)
            scram.append((arg.name, arg.mechanism, arg.credential_text()))
    return FormatPlan(a.cluster_id, node_id, directories_of(cfg), metadata_log_dir(cfg), release, voters,
                      scram, bool(a.ignore_formatted))


def verify_ensemble(plan: FormatPlan, metas: dict[str, MetaProps]) -> None:
    """MetaPropertiesEnsemble.verify with the cluster and node ids being formatted."""
    seen: dict[uuid.UUID, str] = {}
    for d in sorted(metas):
        m = metas[d]
        path = meta_path(d)
        if m.cluster_id is not None and m.cluster_id != plan.cluster_id:
            raise ToolError(f"Invalid cluster.id in: {path}. Expected {plan.cluster_id}, but read {m.cluster_id}")
        if m.node_id is not None and m.node_id != plan.node_id:
            raise ToolError(f"Stored node id {m.node_id} doesn't match previous node id {plan.node_id} in {path}. "
                            "If you moved your data, make sure your configured node id matches. If you intend to "
                            "create a new node, you should remove all data in your data directories.")
        if m.directory_id is not None:
            text = uuid_text(m.directory_id)
            if reserved_directory_id(m.directory_id):
                raise ToolError(f"Invalid resrved directory ID {text} found in {d}")
            if m.directory_id in seen:
                raise ToolError(f"Duplicate directory ID Optional[{text}] found. It was the ID of "
                                f"{seen[m.directory_id]}, but also of {d}")
            seen[m.directory_id] = d


def new_directory_id(taken: set[uuid.UUID]) -> uuid.UUID:
    from controller.api import random_kafka_uuid
    while True:
        u = random_kafka_uuid()
        if u not in taken and not reserved_directory_id(u):
            return u


async def store_scram(cfg, plan: FormatPlan) -> None:
    """Put the --add-scram credentials into the embedded store of the metadata directory."""
    from controller.single_node import MetadataStoreError, SingleNodeController
    ctl = SingleNodeController(cfg, log_dir=plan.metadata_dir, cluster_id=plan.cluster_id)
    try:
        await ctl.start()
    except (MetadataStoreError, OSError, ValueError, KeyError) as e:
        raise ToolError(f"Error while writing the SCRAM credentials into {plan.metadata_dir}: {e}") from None
    try:
        res = await ctl.alter_scram_credentials(plan.scram, [])
        if res.error_code:
            raise ToolError(f"Error while writing the SCRAM credentials into {plan.metadata_dir}: "
                            f"{res.error_message}")
    finally:
        await ctl.stop()


def format_directories(cfg, plan: FormatPlan) -> int:
    metas: dict[str, MetaProps] = {}
    empty: list[str] = []
    errors: list[str] = []
    for d in plan.directories:
        try:
            m = read_meta_file(d)
        except (ValueError, OSError) as e:
            print(f"ERROR Error while reading meta.properties file {os.path.abspath(meta_path(d))}: "
                  f"{getattr(e, 'strerror', None) or e}", file=sys.stderr)
            errors.append(d)
            continue
        if m is None:
            empty.append(d)
        else:
            metas[d] = m
    verify_ensemble(plan, metas)
    if metas and not plan.ignore_formatted:
        raise ToolError(f"Log directory {sorted(metas)[0]} is already formatted. Use --ignore-formatted to "
                        "ignore this directory and format the others.")
    if errors:
        for d in errors:
            print(f"I/O error trying to read log directory {d}. Ignoring...")
        if not empty and not metas:
            raise ToolError("No available log directories to format.")
    if not empty:
        print("All of the log directories are already formatted.")
        return 0
    taken = {m.directory_id for m in metas.values() if m.directory_id is not None}
    plans = []
    for d in empty:
        if d != plan.metadata_dir:
            kind, dir_id = "data directory", None
        elif plan.voters is None:
            kind, dir_id = "metadata directory", None
        else:
            kind, dir_id = "dynamic metadata voter directory", plan.voters[plan.node_id].directory_id
        if dir_id is None:
            dir_id = new_directory_id(taken)
        taken.add(dir_id)
        plans.append((d, kind, dir_id))
    from storage.meta_properties import write_kraft_meta
    for d, kind, dir_id in plans:
        print(f"Formatting {kind} {d} with {METADATA_VERSION} {plan.release}.", flush=True)
        try:
            os.makedirs(d, exist_ok=True)
            if d == plan.metadata_dir and plan.scram:
                asyncio.run(store_scram(cfg, plan))
            write_kraft_meta(d, plan.node_id, plan.cluster_id, uuid_text(dir_id))
        except OSError as e:
            raise ToolError(f"Error while writing meta.properties file {d}: {e}") from None
    return 0


def load_config(path: str):
    from broker.config import BrokerConfig, ConfigError
    try:
        cfg = BrokerConfig.from_file(path, [])
        cfg.validate()
    except ConfigError as e:
        raise ToolError(str(e)) from None
    except OSError as e:
        raise ToolError(f"{path} ({e.strerror or e})") from None
    return cfg


# =============================================================================================
# Command line
# =============================================================================================

class StorageParser(Parser):
    """A missing command is argparse4j's "too few arguments" (argparse names the choices)."""

    def error(self, message):
        if message.startswith("the following arguments are required: {"):
            message = "too few arguments"
        super().error(message)


def build_parser() -> Parser:
    p = StorageParser(prog=PROG, description="Formats and inspects the storage directories of a KRaft node.",
               fromfile_prefix_chars="@")
    sub = p.add_subparsers(dest="command", metavar="{info,format,random-uuid}", parser_class=StorageParser)
    sub.required = True
    info_p = sub.add_parser("info", help="Show what the log directories of this node hold.")
    fmt = sub.add_parser("format", help="Prepare the log directories of this node for KRaft mode.")
    sub.add_parser("random-uuid", help="Print a new random UUID, suitable as a cluster ID.")
    for sp in (info_p, fmt):
        sp.add_argument("--config", "-c", required=True, help="The broker configuration file.")
    fmt.add_argument("--cluster-id", "-t", required=True, help="The cluster ID (a base64 UUID, see random-uuid).")
    fmt.add_argument("--add-scram", "-S", action="append",
                     help="A SCRAM credential to create with the cluster, for instance "
                          "'SCRAM-SHA-256=[name=alice,password=alice-secret]' or "
                          "'SCRAM-SHA-512=[name=alice,iterations=8192,salt=\"N3E=\",saltedpassword=\"YCE=\"]'.")
    fmt.add_argument("--ignore-formatted", "-g", action="store_true",
                     help="Skip directories that are already formatted instead of failing.")
    fmt.add_argument("--release-version", "-r",
                     help=f"The metadata.version to start with; at least {MINIMUM_FOR_HELP}, by default "
                          f"{LATEST_PRODUCTION}.")
    fmt.add_argument("--feature", "-f", action="append",
                     help="A feature level to start with, as feature=level (e.g. kraft.version=1).")
    q = fmt.add_mutually_exclusive_group()
    q.add_argument("--standalone", "-s", action="store_true",
                   help="Start this controller as a dynamic quorum of one.")
    q.add_argument("--no-initial-controllers", "-N", action="store_true",
                   help="Format without a dynamic quorum topology.")
    q.add_argument("--initial-controllers", "-I",
                   help="The initial dynamic quorum, as id@host:port:directory-id[,...]; here it must be this "
                        "node alone.")
    return p


def execute(a) -> int:
    if a.command == "random-uuid":
        from controller.api import random_kafka_uuid
        print(uuid_text(random_kafka_uuid()))
        return 0
    cfg = load_config(a.config)
    if a.command == "info":
        return info(cfg)
    plan = plan_format(a, cfg)
    return format_directories(cfg, plan)


def main(argv=None) -> int:
    return run_parsed(build_parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())

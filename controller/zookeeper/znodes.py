"""Kafka 3.x ZooKeeper layout: every znode path and its JSON payload, encode and decode.

Facts from ``kafka-facts/zookeeper-layout.md`` (Kafka's ``ZkData.scala``).  Payloads are compact
JSON (no spaces); a few numbers are strings (``timestamp``, ``block_start``/``block_end``,
``/cluster/id``'s ``version``); ``/controller_epoch`` is decimal text.  Decoders accept the older
versions Kafka still reads and reject newer ones (``ZnodeFormatError``).  Nothing here does I/O.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

from controller.api import base64_to_uuid, uuid_to_base64


class ZnodeFormatError(ValueError):
    """A payload that this broker cannot read (bad JSON, unknown version)."""


# ----------------------------------------------------------------------------- paths

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_SEQID = "/brokers/seqid"
BROKER_TOPICS = "/brokers/topics"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CLUSTER_ID = "/cluster/id"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
FEATURE = "/feature"
CONSUMERS = "/consumers"
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")

# Created (empty) by every broker at start-up if missing.
PERSISTENT_PATHS = (
    CONSUMERS, BROKER_IDS, BROKER_TOPICS, CONFIG_CHANGES, DELETE_TOPICS, BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION, LATEST_PRODUCER_ID_BLOCK, LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{t}" for t in CONFIG_ENTITY_TYPES),
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def config_path(entity_type: str, entity: str) -> str:
    return f"{CONFIG}/{entity_type}/{entity}"


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def loads(data: bytes | None, what: str):
    if not data:
        return None
    try:
        return json.loads(data.decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise ZnodeFormatError(f"{what}: not JSON: {e}") from None


def _check_version(doc, what: str, newest: int, oldest: int = 1) -> int:
    if not isinstance(doc, dict):
        raise ZnodeFormatError(f"{what}: expected a JSON object")
    try:
        v = int(doc.get("version", oldest))
    except (TypeError, ValueError):
        raise ZnodeFormatError(f"{what}: bad version {doc.get('version')!r}") from None
    if v > newest or v < oldest:
        raise ZnodeFormatError(f"{what}: unsupported version {v}")
    return v


# ----------------------------------------------------------------------------- /controller

def encode_controller(broker_id: int, timestamp_ms: int | None = None) -> bytes:
    ts = str(timestamp_ms) if timestamp_ms is not None else _now_ms()
    return dumps({"version": 2, "brokerid": broker_id, "timestamp": ts, "kraftControllerEpoch": -1})


def decode_controller(data: bytes) -> int:
    """The controller's broker id.  Very old writers stored a bare integer."""
    try:
        doc = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError):
        raise ZnodeFormatError("/controller: not JSON") from None
    if isinstance(doc, int):
        return doc
    _check_version(doc, CONTROLLER, 2)
    if int(doc.get("kraftControllerEpoch", -1)) > 0:
        raise ZnodeFormatError("/controller is held by a KRaft controller (migration)")
    return int(doc["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode().strip())
    except (UnicodeDecodeError, ValueError):
        raise ZnodeFormatError(f"/controller_epoch: not an integer: {data!r}") from None


# ----------------------------------------------------------------------------- /brokers/ids/<id>

@dataclass
class BrokerRegistration:
    id: int
    endpoints: list[tuple[str, str, int, str]]      # (listener, host, port, security protocol)
    rack: str | None = None
    epoch: int = -1                                  # czxid of the znode (set by the reader)
    features: dict = field(default_factory=dict)
    timestamp: int = 0


def encode_broker(endpoints: list[tuple[str, str, int, str]], rack: str | None = None,
                  jmx_port: int = -1, features: dict | None = None,
                  timestamp_ms: int | None = None) -> bytes:
    plain = next(((h, p) for name, h, p, proto in endpoints if proto == "PLAINTEXT"), (None, -1))
    doc = {
        "features": features or {},
        "listener_security_protocol_map": {name: proto for name, _h, _p, proto in endpoints},
        "endpoints": [f"{name}://{_fmt_host(h)}:{p}" for name, h, p, _proto in endpoints],
        "jmx_port": jmx_port,
        "port": plain[1],
        "host": plain[0],
        "version": 5,
        "timestamp": str(timestamp_ms) if timestamp_ms is not None else _now_ms(),
    }
    if rack is not None:
        doc["rack"] = rack
    return dumps(doc)


def _fmt_host(h: str) -> str:
    return f"[{h}]" if ":" in h and not h.startswith("[") else h


def _parse_endpoint(s: str) -> tuple[str, str, int]:
    name, _, rest = s.partition("://")
    if not rest:
        raise ZnodeFormatError(f"bad endpoint {s!r}")
    host, _, port = rest.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return name, host, int(port)


def decode_broker(broker_id: int, data: bytes, czxid: int = -1) -> BrokerRegistration:
    what = broker_path(broker_id)
    doc = loads(data, what)
    if doc is None:
        raise ZnodeFormatError(f"{what}: empty")
    v = _check_version(doc, what, 5)
    eps: list[tuple[str, str, int, str]] = []
    if v >= 2 and "endpoints" in doc:
        proto_map = doc.get("listener_security_protocol_map") or {}
        for s in doc["endpoints"]:
            name, host, port = _parse_endpoint(s)
            eps.append((name, host, port, proto_map.get(name, name if v < 4 else "PLAINTEXT")))
    elif doc.get("host") is not None:
        eps.append(("PLAINTEXT", doc["host"], int(doc["port"]), "PLAINTEXT"))
    try:
        ts = int(doc.get("timestamp", "0"))
    except (TypeError, ValueError):
        ts = 0
    return BrokerRegistration(broker_id, eps, doc.get("rack"), czxid, doc.get("features") or {}, ts)


# ----------------------------------------------------------------------------- /brokers/topics/<t>

@dataclass
class TopicAssignment:
    partitions: dict[int, list[int]]
    topic_id: uuid.UUID | None = None
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)

    def target(self, p: int) -> list[int]:
        rem = set(self.removing.get(p, ()))
        return [b for b in self.partitions[p] if b not in rem]


def encode_topic(a: TopicAssignment) -> bytes:
    def m(d):
        return {str(p): list(r) for p, r in sorted(d.items())}
    doc = {"partitions": m(a.partitions), "adding_replicas": m(a.adding),
           "removing_replicas": m(a.removing), "version": 3}
    if a.topic_id is not None:
        doc["topic_id"] = uuid_to_base64(a.topic_id)
    return dumps(doc)


def decode_topic(topic: str, data: bytes) -> TopicAssignment:
    what = topic_path(topic)
    doc = loads(data, what)
    if doc is None:
        raise ZnodeFormatError(f"{what}: empty")
    _check_version(doc, what, 3)

    def m(d):
        return {int(p): [int(b) for b in r] for p, r in (d or {}).items()}
    tid = doc.get("topic_id")
    return TopicAssignment(m(doc.get("partitions")), base64_to_uuid(tid) if tid else None,
                           m(doc.get("adding_replicas")), m(doc.get("removing_replicas")))


# ----------------------------------------------------------------------------- partition state

@dataclass
class LeaderIsr:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int = 0
    zk_version: int = -1          # data version of the state znode (the partition epoch)


def encode_partition_state(s: LeaderIsr) -> bytes:
    doc = {"controller_epoch": s.controller_epoch, "leader": s.leader, "version": 1,
           "leader_epoch": s.leader_epoch, "isr": list(s.isr)}
    if s.leader_recovery_state:
        doc["leader_recovery_state"] = s.leader_recovery_state
    return dumps(doc)


def decode_partition_state(topic: str, partition: int, data: bytes, zk_version: int = -1) -> LeaderIsr:
    what = partition_state_path(topic, partition)
    doc = loads(data, what)
    if doc is None:
        raise ZnodeFormatError(f"{what}: empty")
    _check_version(doc, what, 1)
    return LeaderIsr(int(doc["leader"]), int(doc["leader_epoch"]), [int(b) for b in doc["isr"]],
                     int(doc["controller_epoch"]), int(doc.get("leader_recovery_state", 0)), zk_version)


# ----------------------------------------------------------------------------- /admin

def encode_partition_list(parts: list[tuple[str, int]]) -> bytes:
    """/admin/preferred_replica_election and /isr_change_notification/isr_change_<seq>."""
    return dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in parts]})


def decode_partition_list(data: bytes, what: str) -> list[tuple[str, int]]:
    doc = loads(data, what)
    if doc is None:
        return []
    _check_version(doc, what, 1)
    return [(e["topic"], int(e["partition"])) for e in doc.get("partitions", [])]


def encode_reassignment(moves: dict[tuple[str, int], list[int]]) -> bytes:
    return dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(moves.items())]})


def decode_reassignment(data: bytes) -> dict[tuple[str, int], list[int]]:
    doc = loads(data, REASSIGN_PARTITIONS)
    if doc is None:
        return {}
    _check_version(doc, REASSIGN_PARTITIONS, 1)
    return {(e["topic"], int(e["partition"])): [int(b) for b in e["replicas"]]
            for e in doc.get("partitions", [])}


# ----------------------------------------------------------------------------- /config

def encode_config(configs: dict[str, str]) -> bytes:
    return dumps({"version": 1, "config": {k: str(v) for k, v in configs.items()}})


def decode_config(data: bytes | None, what: str = "/config") -> dict[str, str]:
    doc = loads(data, what)
    if doc is None:
        return {}
    _check_version(doc, what, 1)
    return {k: str(v) for k, v in (doc.get("config") or {}).items()}


def encode_config_change(entity_path: str) -> bytes:
    return dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> tuple[str, str]:
    """(entity type, entity name) of a config change notification (v1 or v2)."""
    doc = loads(data, CONFIG_CHANGES)
    if doc is None:
        raise ZnodeFormatError(f"{CONFIG_CHANGES}: empty notification")
    v = _check_version(doc, CONFIG_CHANGES, 2)
    if v == 1:
        return doc["entity_type"], doc["entity_name"]
    etype, _, name = doc["entity_path"].partition("/")
    return etype, name


# ----------------------------------------------------------------------------- misc

def encode_cluster_id(cluster_id: str) -> bytes:
    return dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    doc = loads(data, CLUSTER_ID)
    if not isinstance(doc, dict) or "id" not in doc:
        raise ZnodeFormatError(f"{CLUSTER_ID}: no id")
    _check_version(doc, CLUSTER_ID, 1)
    return doc["id"]


def encode_producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    return dumps({"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)})


def decode_producer_id_block(data: bytes | None) -> tuple[int, int, int] | None:
    """(broker, block_start, block_end) or None when no block was ever handed out."""
    doc = loads(data, LATEST_PRODUCER_ID_BLOCK)
    if doc is None:
        return None
    _check_version(doc, LATEST_PRODUCER_ID_BLOCK, 1)
    return int(doc["broker"]), int(doc["block_start"]), int(doc["block_end"])


FEATURE_DISABLED, FEATURE_ENABLED = 0, 1


def encode_feature(features: dict[str, int] | None = None) -> bytes:
    """/feature, version 2 (IBP >= 3.3): status enabled, finalized feature -> max level."""
    return dumps({"features": {n: {"max_version_level": int(v)} for n, v in sorted((features or {}).items())},
                  "version": 2, "status": FEATURE_ENABLED})


def decode_feature(data: bytes | None) -> tuple[int, dict[str, int]]:
    """(status, finalized features).  Version 1 also carried min_version_level, which is
    ignored as Kafka 3.9 does; a level must be a 16-bit integer."""
    doc = loads(data, FEATURE)
    if doc is None:
        raise ZnodeFormatError(f"{FEATURE}: empty")
    _check_version(doc, FEATURE, 2)
    status = doc.get("status")
    if status not in (FEATURE_DISABLED, FEATURE_ENABLED):
        raise ZnodeFormatError(f"{FEATURE}: bad status {status!r}")
    raw = doc.get("features", {})
    if not isinstance(raw, dict):
        raise ZnodeFormatError(f"{FEATURE}: features is not an object")
    features = {}
    for name, v in raw.items():
        level = v.get("max_version_level") if isinstance(v, dict) else None
        if not isinstance(level, int) or isinstance(level, bool) or not -32768 <= level <= 32767:
            raise ZnodeFormatError(f"{FEATURE}: bad max_version_level for {name!r}")
        features[name] = level
    return status, features


def encode_log_dir_event(broker_id: int, event: int = 1) -> bytes:
    return dumps({"version": 1, "broker": broker_id, "event": event})


def decode_log_dir_event(data: bytes, what: str = "log dir event") -> int:
    """The broker id of a /log_dir_event_notification/log_dir_event_<seq> node."""
    doc = loads(data, what)
    _check_version(doc, what, 1)
    try:
        return int(doc["broker"])
    except (KeyError, TypeError, ValueError):
        raise ZnodeFormatError(f"{what}: no broker id") from None


def sequence_number(child: str) -> int:
    """The 10-digit suffix of a sequential node's name."""
    try:
        return int(child[-10:])
    except ValueError:
        return -1


# ----------------------------------------------------------------------------- ACLs (AclAuthorizer's ZkAclStore)
# LITERAL bindings live in /kafka-acl/<ResourceType>/<name>, PREFIXED ones in
# /kafka-acl-extended/prefixed/<ResourceType>/<name>.  Resource types, operations and permission
# types are written in Kafka's camel case ("TransactionalId", "DescribeConfigs", "Allow").

ACL_LITERAL = "/kafka-acl"
ACL_EXTENDED = "/kafka-acl-extended"
ACL_PREFIXED = "/kafka-acl-extended/prefixed"
ACL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_RESOURCE_TYPES = ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")
# pattern type (acl.LITERAL / acl.PREFIXED codes) -> (store path, change path)
_LITERAL_CODE, _PREFIXED_CODE = 3, 4
ACL_STORES = {_LITERAL_CODE: (ACL_LITERAL, ACL_CHANGES), _PREFIXED_CODE: (ACL_PREFIXED, ACL_EXTENDED_CHANGES)}
# Created (empty) when the authorizer starts, as Kafka's createAclPaths does.
ACL_PATHS = (
    *(f"{store}/{rt}" for store, _ in ACL_STORES.values() for rt in ACL_RESOURCE_TYPES),
    ACL_CHANGES, ACL_EXTENDED_CHANGES,
)


def camel(enum_name: str) -> str:
    """TRANSACTIONAL_ID -> TransactionalId (Kafka's SecurityUtils naming)."""
    return "".join(p.capitalize() for p in enum_name.split("_"))


def uncamel(text: str, codes: dict[str, int], what: str) -> int:
    """The code of a camel-case (or upper-case) name: TransactionalId / TRANSACTIONAL_ID."""
    key = str(text).replace("_", "").upper()
    for name, code in codes.items():
        if name.replace("_", "") == key:
            return code
    raise ZnodeFormatError(f"unknown {what} {text!r}")


def acl_resource_path(resource_type: str, name: str, pattern_type: int) -> str:
    """``resource_type`` in camel case ("Topic"); ``pattern_type`` 3 (LITERAL) or 4 (PREFIXED)."""
    return f"{ACL_STORES[pattern_type][0]}/{resource_type}/{name}"


def encode_acls(entries: list[tuple[str, str, str, str]]) -> bytes:
    """entries: (principal, permission type, operation, host) with camel-case names."""
    return dumps({"version": 1, "acls": [
        {"principal": p, "permissionType": perm, "operation": op, "host": h} for p, perm, op, h in entries]})


def decode_acls(data: bytes | None, what: str) -> list[tuple[str, str, str, str]]:
    doc = loads(data, what)
    if doc is None:
        return []
    _check_version(doc, what, 1)
    try:
        return [(str(e["principal"]), str(e["permissionType"]), str(e["operation"]), str(e["host"]))
                for e in doc.get("acls") or []]
    except (KeyError, TypeError) as e:
        raise ZnodeFormatError(f"{what}: bad ACL entry ({e})") from None


def encode_acl_change(resource_type: str, name: str, pattern_type: int) -> bytes:
    """The payload of a change notification: ``Topic:name`` in /kafka-acl-changes (LITERAL), a JSON
    object in /kafka-acl-extended-changes (other pattern types)."""
    if pattern_type == _LITERAL_CODE:
        return f"{resource_type}:{name}".encode()
    return dumps({"version": 1, "resourceType": resource_type, "name": name,
                  "patternType": "PREFIXED" if pattern_type == _PREFIXED_CODE else "UNKNOWN"})


def decode_acl_change(data: bytes | None, extended: bool) -> tuple[str, str, int]:
    """(camel-case resource type, name, pattern type code) named by a change notification."""
    if not data:
        raise ZnodeFormatError("ACL change notification: empty")
    if not extended:
        try:
            text = data.decode()
        except UnicodeDecodeError:
            raise ZnodeFormatError("ACL change notification: not UTF-8") from None
        rtype, sep, name = text.partition(":")
        if not sep:
            raise ZnodeFormatError(f"ACL change notification: expected <ResourceType>:<name>, got {text!r}")
        return rtype, name, _LITERAL_CODE
    doc = loads(data, ACL_EXTENDED_CHANGES)
    _check_version(doc, ACL_EXTENDED_CHANGES, 1)
    pt = str(doc.get("patternType", "")).upper()
    if pt not in ("LITERAL", "PREFIXED"):
        raise ZnodeFormatError(f"ACL change notification: unsupported pattern type {pt!r}")
    return str(doc["resourceType"]), str(doc["name"]), _LITERAL_CODE if pt == "LITERAL" else _PREFIXED_CODE


# ----------------------------------------------------------------------------- user names in /config paths

_SANITIZE_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize for user / client-id entity names in /config paths: URL encoding
    (UTF-8) in which only letters, digits, '.', '_' and '-' stay as they are ('*' -> %2A,
    ' ' -> %20)."""
    out = []
    for ch in name:
        if ch in _SANITIZE_SAFE:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def desanitize(name: str) -> str:
    from urllib.parse import unquote
    return unquote(name, encoding="utf-8", errors="strict")

"""The controller interface the broker uses, its data types, events and shared rules.

Two implementations: ``single_node.SingleNodeController`` (embedded store in the log
dir, used when ``zookeeper.connect`` is unset) and, later, a ZooKeeper controller
following ``kafka-facts/zookeeper-layout.md``.

How this works
--------------
* Reads (``brokers()``, ``topics()``, ``topic()``, ``broker_configs()``) are synchronous
  and return snapshots.  Published ``TopicInfo``/``PartitionState`` objects are never
  mutated afterwards (a change replaces them), so a snapshot stays consistent; callers
  must treat them as read-only (use ``.copy()`` to get a private one).
* Writes are coroutines.  They return per-item results carrying Kafka error codes
  (ints) and messages instead of raising, because the broker copies them straight into
  responses.  ``validate_only`` runs every check and changes nothing.
* After a write is durable, subscribers get an event (``TopicsChanged``,
  ``ConfigsChanged``, ``BrokersChanged``) on the event loop, in commit order.  The
  broker's metadata-cache listener is the intended subscriber.
* Topic configs are stored as overrides only (strings), as in ``/config/topics/<t>``;
  dynamic broker configs likewise per broker id (``"0"``) or cluster default
  (``"<default>"``).
"""

from __future__ import annotations

import abc
import base64
import logging
import random
import re
import types
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Union

from broker.config import BrokerConfig, ConfigError, effective_topic_config, validate_dynamic_broker_configs

log = logging.getLogger(__name__)

# Kafka error codes used by the controller.
UNKNOWN_SERVER_ERROR = -1
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
REASSIGNMENT_IN_PROGRESS = 60
TOPIC_DELETION_DISABLED = 73
FENCED_LEADER_EPOCH = 74
STALE_BROKER_EPOCH = 77
INVALID_UPDATE_VERSION = 95
UNKNOWN_TOPIC_ID = 100
BROKER_ID_NOT_REGISTERED = 102
INELIGIBLE_REPLICA = 107

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
MAX_TOPIC_NAME_LENGTH = 249
DEFAULT_BROKER_ENTITY = "<default>"
PRODUCER_ID_BLOCK_SIZE = 1000
FEATURE_UPDATE_FAILED = 96

# Feature flags (KIP-584) this broker supports: name -> (min, max level).  ``transaction.version``
# as Kafka 4.x has it: 1 writes the transaction log's flexible records, 2 turns on transaction
# version 2 for the clients that read it (KIP-890 part 2, docs/transactions.md).  A Kafka 3.9 broker
# in ZooKeeper mode supports none.
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = types.MappingProxyType({"transaction.version": (0, 2)})


def unsupported_features(features: Mapping[str, int]) -> dict[str, int]:
    """The finalized features (name -> level) outside this broker's supported ranges."""
    out = {}
    for name, level in features.items():
        lo, hi = SUPPORTED_FEATURES.get(name, (1, 0))
        if not lo <= level <= hi:
            out[name] = level
    return out

# ----------------------------------------------------------------------------- data


@dataclass
class PartitionState:
    partition: int
    replicas: list[int]
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int = 0          # = zkVersion of the state znode in ZooKeeper mode
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    leader_recovery_state: int = 0    # 1 = RECOVERING after an unclean election
    offline_replicas: list[int] = field(default_factory=list)   # on failed log dirs (cluster: UpdateMetadata)

    @property
    def zk_version(self) -> int:
        return self.partition_epoch

    def copy(self) -> "PartitionState":
        return PartitionState(self.partition, list(self.replicas), self.leader, self.leader_epoch,
                              list(self.isr), self.partition_epoch, list(self.adding_replicas),
                              list(self.removing_replicas), self.leader_recovery_state,
                              list(self.offline_replicas))


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    configs: dict[str, str]          # overrides only
    internal: bool = False

    def copy(self) -> "TopicInfo":
        return TopicInfo(self.name, self.topic_id, {p: s.copy() for p, s in self.partitions.items()},
                         dict(self.configs), self.internal)

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


# (listener_name, host, port, security_protocol); broker.config.Endpoint is such a tuple.
EndpointTuple = tuple[str, str, int, str]


@dataclass
class BrokerInfo:
    id: int
    endpoints: list[EndpointTuple]
    rack: str | None = None
    epoch: int = -1                   # broker epoch (czxid of /brokers/ids/<id> in ZK mode)


@dataclass
class CreatableTopic:
    name: str
    num_partitions: int = -1          # -1 = num.partitions
    replication_factor: int = -1      # -1 = default.replication.factor
    assignments: dict[int, list[int]] | None = None
    configs: dict[str, str | None] = field(default_factory=dict)


@dataclass
class TopicResult:
    """Result of create/delete/create-partitions/alter for one topic."""
    name: str | None
    error_code: int = NONE
    error_message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass
class ApiResult:
    error_code: int = NONE
    error_message: str | None = None


@dataclass
class AlterPartitionResult:
    error_code: int = NONE
    state: PartitionState | None = None


# ----------------------------------------------------------------------------- events


@dataclass
class TopicsChanged:
    created: list[str] = field(default_factory=list)
    deleted: list[tuple[str, uuid.UUID]] = field(default_factory=list)
    changed: dict[str, list[int]] = field(default_factory=dict)   # topic -> partitions (new or state changed)


@dataclass
class ConfigsChanged:
    entity_type: str        # "topics", "brokers", "groups", "client-metrics" (KIP-714 subscriptions)
    #                         or "client-quotas" (user / client-id quotas)
    entity_name: str        # topic name, broker id as a string, "<default>", group, subscription
    #                         name, or a quota entity path


@dataclass
class BrokersChanged:
    added: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)


Event = Union[TopicsChanged, ConfigsChanged, BrokersChanged]
Subscriber = Callable[[Event], None]

# ----------------------------------------------------------------------------- interface


class Controller(abc.ABC):
    """What the broker needs from cluster metadata.  Owned by the event loop."""

    # KIP-848 GROUP resources, group -> configs; a controller that keeps them sets its own dict
    _group_configs: Mapping[str, dict[str, str]] = types.MappingProxyType({})
    # KIP-714 CLIENT_METRICS resources (subscriptions), name -> configs; likewise
    _client_metrics: Mapping[str, dict[str, str]] = types.MappingProxyType({})

    @property
    @abc.abstractmethod
    def cluster_id(self) -> str: ...

    @property
    @abc.abstractmethod
    def controller_id(self) -> int:
        """Broker id of the active controller, -1 if none is known."""

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def stop(self) -> None: ...

    @abc.abstractmethod
    async def register_broker(self, info: BrokerInfo) -> None: ...

    @abc.abstractmethod
    def brokers(self) -> list[BrokerInfo]: ...

    @abc.abstractmethod
    def topics(self) -> dict[str, TopicInfo]: ...

    def topic(self, name: str) -> TopicInfo | None:
        return self.topics().get(name)

    @abc.abstractmethod
    async def create_topics(self, specs: list[CreatableTopic], validate_only: bool = False) -> list[TopicResult]: ...

    @abc.abstractmethod
    async def delete_topics(self, names_or_ids: Iterable[str | uuid.UUID]) -> list[TopicResult]: ...

    @abc.abstractmethod
    async def create_partitions(self, topic: str, new_total: int,
                                assignments: list[list[int]] | None = None,
                                validate_only: bool = False) -> TopicResult: ...

    @abc.abstractmethod
    async def alter_topic_configs(self, topic: str, configs: dict[str, str],
                                  validate_only: bool = False) -> ApiResult:
        """Replace the topic's overrides with ``configs`` (AlterConfigs semantics; for
        IncrementalAlterConfigs compute the new dict with ``broker.config.apply_incremental``)."""

    @abc.abstractmethod
    def broker_configs(self, broker_id: int | None) -> dict[str, str]:
        """Dynamic broker overrides for one broker, or the cluster default (None)."""

    @abc.abstractmethod
    async def alter_broker_configs(self, broker_id: int | None, configs: dict[str, str],
                                   validate_only: bool = False) -> ApiResult:
        """Replace the dynamic overrides of a broker (or of the cluster default: None)."""

    def group_configs(self, group: str) -> dict[str, str]:
        """A group's own configs (KIP-848's GROUP resource), {} when it has none."""
        return dict(self._group_configs.get(group, {}))

    def groups_with_configs(self) -> list[str]:
        """The ids of the groups that have configs of their own."""
        return [g for g, c in self._group_configs.items() if c]

    async def alter_group_configs(self, group: str, configs: dict[str, str],
                                  validate_only: bool = False) -> ApiResult:
        """Replace a group's configs with ``configs`` (checked by ``check_group_configs``)."""
        return ApiResult(INVALID_REQUEST, "group configs are not supported by this controller")

    def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        """Every client metrics subscription (KIP-714's CLIENT_METRICS resource) with its configs,
        {name: {key: value}}, as a private copy."""
        return {name: dict(c) for name, c in self._client_metrics.items()}

    async def alter_client_metrics(self, name: str, configs: dict[str, str],
                                   validate_only: bool = False) -> ApiResult:
        """Replace a subscription's configs with ``configs`` (checked by
        ``check_client_metrics_configs``); an empty dict removes the subscription.  Emits
        ``ConfigsChanged("client-metrics", name)`` once the change is stored."""
        return ApiResult(INVALID_REQUEST, "client metrics subscriptions are not supported by this controller")

    @abc.abstractmethod
    async def alter_partition_isr(self, topic: str, partition: int, leader_epoch: int, new_isr: list[int],
                                  partition_epoch: int, broker_id: int | None = None,
                                  broker_epoch: int = -1) -> AlterPartitionResult: ...

    @abc.abstractmethod
    async def allocate_producer_ids(self, broker_id: int, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> tuple[int, int]:
        """Reserve a block of producer ids; returns (first id, length)."""

    @abc.abstractmethod
    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(event)`` on the loop after each change; returns an unsubscribe function."""

    # -- security metadata (ACLs, SCRAM credentials) ------------------------------------------
    # In ZooKeeper these live under /kafka-acl, /kafka-acl-extended (ACLs) and /config/users/<u>
    # (SCRAM credentials, one config key per mechanism); the embedded store keeps the same data.
    # Default: a store that has none and refuses writes (a backend that does not keep them yet).

    def acls(self) -> tuple:
        """Every ACL binding (``broker.security.acl.AclBinding``), as an immutable tuple that is
        replaced, never mutated, when ACLs change."""
        return ()

    async def create_acls(self, bindings: list) -> ApiResult:
        """Add bindings (duplicates of existing ones are ignored)."""
        return ApiResult(UNKNOWN_SERVER_ERROR, "This metadata store does not keep ACLs yet.")

    async def delete_acls(self, bindings: list) -> ApiResult:
        """Remove exactly these bindings (missing ones are ignored)."""
        return ApiResult(UNKNOWN_SERVER_ERROR, "This metadata store does not keep ACLs yet.")

    def scram_credentials(self) -> dict[str, dict[str, str]]:
        """user -> {mechanism ("SCRAM-SHA-256"): "salt=..,stored_key=..,server_key=..,iterations=n"}."""
        return {}

    async def alter_scram_credentials(self, upsertions: list[tuple[str, str, str]],
                                      deletions: list[tuple[str, str]]) -> ApiResult:
        """Apply (user, mechanism, credential text) upsertions and (user, mechanism) deletions
        atomically."""
        return ApiResult(UNKNOWN_SERVER_ERROR, "This metadata store does not keep SCRAM credentials yet.")

    # -- delegation tokens (KIP-48) -----------------------------------------------------------
    # ZooKeeper: /delegation_token/tokens/<tokenId> holding Kafka's token JSON (version 3), with a
    # /delegation_token/token_changes/token_change_<seq> notification (the token id) per change;
    # the embedded store keeps the same documents.  The HMAC is never stored.

    def delegation_tokens(self) -> dict[str, dict]:
        """token id -> token JSON (``broker.security.tokens.TokenInfo.to_json``).  A snapshot:
        replaced, never mutated, when tokens change."""
        return {}

    async def put_delegation_token(self, token_id: str, doc: dict) -> ApiResult:
        """Create or replace one token."""
        return ApiResult(UNKNOWN_SERVER_ERROR, "This metadata store does not keep delegation tokens yet.")

    async def delete_delegation_token(self, token_id: str) -> ApiResult:
        """Remove one token (a missing one is not an error)."""
        return ApiResult(UNKNOWN_SERVER_ERROR, "This metadata store does not keep delegation tokens yet.")

    # -- finalized features (KIP-584) ----------------------------------------------------------
    # ZooKeeper: /feature (status, feature -> max level), whose zkVersion is the epoch that
    # ApiVersions reports; the embedded store keeps the same map and an epoch of its own.

    @property
    def is_active_controller(self) -> bool:
        """True where controller-only requests (UpdateFeatures) are answered."""
        return True

    def finalized_features(self) -> tuple[int, Mapping[str, int]]:
        """(epoch, finalized feature -> level); epoch -1 when none is known (no /feature node,
        or feature versioning disabled there)."""
        return -1, types.MappingProxyType({})

    async def update_finalized_features(self, features: dict[str, int]) -> ApiResult:
        """Replace the finalized features with ``features`` (checked by the caller)."""
        return ApiResult(FEATURE_UPDATE_FAILED, "This metadata store does not keep finalized features.")

    # -- client quotas (user / client-id) ------------------------------------------------------
    # ZooKeeper: /config/users/<u>, /config/users/<u>/clients/<c>, /config/clients/<c> (names
    # sanitized, "<default>" for default entities); the embedded store keeps the same entities.

    def client_quotas(self) -> dict[tuple, dict[str, float]]:
        """Quota entity (see ``quota_entity``) -> {quota key: value}, entities without quotas left
        out.  A snapshot: replaced, never mutated, when quotas change."""
        return {}

    async def alter_client_quotas(self, entries: list[tuple[tuple, dict[str, float | None]]],
                                  validate_only: bool = False) -> list[ApiResult]:
        """Apply, per entity, its key -> value (None: remove) changes; entries are already
        checked with ``check_client_quota_entry``.  One result per entry."""
        return [ApiResult(UNKNOWN_SERVER_ERROR, "This metadata store does not keep client quotas yet.")
                for _ in entries]


# ----------------------------------------------------------------------------- client quotas

QUOTA_USER, QUOTA_CLIENT_ID, QUOTA_IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# Kafka's DynamicConfig.User / DynamicConfig.Client keys and their types.  controller_mutation_rate
# is stored and described (Kafka accepts it) but not enforced: this broker has no mutation quota.
QUOTA_KEY_TYPES = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG",
                   REQUEST_PERCENTAGE: "DOUBLE", CONTROLLER_MUTATION_RATE: "DOUBLE"}
# Kafka's DynamicConfig.Ip: the one key of an IP entity (/config/ips/<ip>), connections per second
CONNECTION_CREATION_RATE = "connection_creation_rate"
IP_QUOTA_KEY_TYPES = {CONNECTION_CREATION_RATE: "INT"}
ALL_QUOTA_KEY_TYPES = {**QUOTA_KEY_TYPES, **IP_QUOTA_KEY_TYPES}
INT_MAX_VALUE = (1 << 31) - 1
DEFAULT_QUOTA_ENTITY = "<default>"        # the default entity's name in /config paths
LONG_MAX_VALUE = (1 << 63) - 1


def quota_entity(user=..., client_id=..., ip=...) -> tuple:
    """A quota entity as a hashable value: sorted ((type, name), ...) pairs; a name of None is the
    default entity of that type; a type left out (``...``) is not part of the entity."""
    pairs = []
    if client_id is not ...:
        pairs.append((QUOTA_CLIENT_ID, client_id))
    if ip is not ...:
        pairs.append((QUOTA_IP, ip))
    if user is not ...:
        pairs.append((QUOTA_USER, user))
    return tuple(pairs)


def valid_ip_entity(name: str | None) -> bool:
    """Kafka's DynamicConfig.Ip.isValidIpEntity: the default entity, an address, or a host name
    that resolves."""
    if name is None:
        return True
    import ipaddress
    import socket
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        return True
    except OSError:
        return False


def quota_entity_path(entity: tuple) -> str:
    """The /config path below /config of a user / client-id entity: ``users/alice``,
    ``users/alice/clients/<default>``, ``clients/app`` (names sanitized as Kafka does)."""
    from controller.zookeeper.znodes import sanitize
    d = dict(entity)

    def name(n):
        return DEFAULT_QUOTA_ENTITY if n is None else sanitize(n)
    if QUOTA_USER in d and QUOTA_CLIENT_ID in d:
        return f"users/{name(d[QUOTA_USER])}/clients/{name(d[QUOTA_CLIENT_ID])}"
    if QUOTA_USER in d:
        return f"users/{name(d[QUOTA_USER])}"
    if QUOTA_IP in d:
        return f"ips/{name(d[QUOTA_IP])}"
    return f"clients/{name(d[QUOTA_CLIENT_ID])}"


def quota_entity_from_path(path: str) -> tuple | None:
    """Inverse of ``quota_entity_path``; None for anything else."""
    from controller.zookeeper.znodes import desanitize

    def name(n):
        return None if n == DEFAULT_QUOTA_ENTITY else desanitize(n)
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users" and parts[1]:
        return quota_entity(user=name(parts[1]))
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
        return quota_entity(user=name(parts[1]), client_id=name(parts[3]))
    if len(parts) == 2 and parts[0] == "clients" and parts[1]:
        return quota_entity(client_id=name(parts[1]))
    if len(parts) == 2 and parts[0] == "ips" and parts[1]:
        return quota_entity(ip=name(parts[1]))
    return None


def quota_values_from_config(cfg: dict[str, str]) -> dict[str, float]:
    """The quota keys of a /config/users, /config/clients or /config/ips node, as numbers (other
    keys, such as SCRAM credentials, and unreadable values are left out)."""
    out = {}
    for k, v in cfg.items():
        if k in ALL_QUOTA_KEY_TYPES:
            try:
                out[k] = float(v)
            except (TypeError, ValueError):
                log.warning("ignoring unreadable client quota %s=%r", k, v)
    return out


def quota_value_to_config(key: str, value: float) -> str:
    """How Kafka writes a quota value into a config node: integers for LONG keys, else a double."""
    if ALL_QUOTA_KEY_TYPES.get(key) in ("LONG", "INT"):
        return str(int(value + 1e-6))
    return repr(float(value))


def check_client_quota_entry(entity_data, ops) -> tuple["ApiResult | None", tuple | None, dict | None]:
    """AlterClientQuotas rules for one entry (Kafka's ZkAdminManager.alterClientQuotas and
    ClientQuotaControlManager): (error, None, None) or (None, entity, {key: value or None to
    remove}).  ``entity_data``: (type, name) pairs; ``ops``: (key, value, remove) triples."""
    if not entity_data:
        return ApiResult(INVALID_REQUEST, "Invalid empty client quota entity"), None, None
    d: dict[str, str | None] = {}
    for etype, ename in entity_data:
        if etype in d:
            return ApiResult(INVALID_REQUEST, f"Invalid client quota entity, duplicate entity entry {etype}"), None, None
        if etype not in (QUOTA_USER, QUOTA_CLIENT_ID, QUOTA_IP):
            return ApiResult(INVALID_REQUEST, f"Unhandled client quota entity type: {etype}"), None, None
        if ename is not None and ename == "":
            return ApiResult(INVALID_REQUEST, f"Empty {etype} not supported"), None, None
        d[etype] = ename
    if QUOTA_IP in d:
        if len(d) > 1:
            return ApiResult(INVALID_REQUEST, "Invalid quota entity combination, IP entity should not be used "
                                              "with user/client ID entity."), None, None
        if not valid_ip_entity(d[QUOTA_IP]):
            return ApiResult(INVALID_REQUEST, f"{d[QUOTA_IP]} is not a valid IP or resolvable host."), None, None
    key_types = IP_QUOTA_KEY_TYPES if QUOTA_IP in d else QUOTA_KEY_TYPES
    entity = tuple(sorted(d.items()))
    changes: dict[str, float | None] = {}
    for key, value, remove in ops:
        if key in changes:
            return ApiResult(INVALID_REQUEST, f"Duplicate quota key {key} not updating quota for this entity "
                                              f"{_entity_text(entity)}"), None, None
        if remove:
            changes[key] = None
            continue
        ktype = key_types.get(key)
        if ktype is None:
            return ApiResult(INVALID_REQUEST, f"Invalid configuration key {key}"), None, None
        if value != value or value <= 0.0:
            return ApiResult(INVALID_REQUEST, f"Quota {key} must be greater than 0"), None, None
        if ktype in ("LONG", "INT"):
            if value > (LONG_MAX_VALUE if ktype == "LONG" else INT_MAX_VALUE):
                article = "a" if ktype == "LONG" else "an"
                return ApiResult(INVALID_REQUEST, f"Proposed value for {key} is too large for {article} {ktype}."), \
                    None, None
            if abs(int(value + 1e-6) - value) > 1e-6:
                return ApiResult(INVALID_REQUEST, f"Configuration {key} must be a {ktype} value"), None, None
        changes[key] = float(value)
    return None, entity, changes


def _entity_text(entity: tuple) -> str:
    inner = ", ".join(f"{t}={n}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def apply_client_quota_changes(current: dict[tuple, dict[str, float]],
                               entries: list[tuple[tuple, dict[str, float | None]]]) -> dict[tuple, dict[str, float]]:
    """A new quota map with ``entries`` applied (entities left without quotas are dropped)."""
    new = dict(current)
    for entity, changes in entries:
        values = dict(new.get(entity, {}))
        for k, v in changes.items():
            if v is None:
                values.pop(k, None)
            else:
                values[k] = v
        if values:
            new[entity] = values
        else:
            new.pop(entity, None)
    return new


# ----------------------------------------------------------------------------- shared rules

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def resolve_topic_to_delete(item, by_id: dict, existing) -> tuple[str | None, "TopicResult | None"]:
    """DeleteTopics names a topic by name or (v6+) by id: (name, None) when it exists, else
    (None, the result to answer with).  ``by_id`` maps ids to names; ``existing`` holds names."""
    if isinstance(item, uuid.UUID):
        name = by_id.get(item)
        if name is None or name not in existing:
            return None, TopicResult(None, UNKNOWN_TOPIC_ID, "This server does not host this topic ID.",
                                     topic_id=item)
        return name, None
    if item not in existing:
        return None, TopicResult(item, UNKNOWN_TOPIC_OR_PARTITION,
                                 "This server does not host this topic-partition.")
    return item, None


def reassignment_replicas_error(original, target, live) -> str | None:
    """Kafka's checks of an AlterPartitionReassignments replica list (KafkaController's
    validateReplicas): the message of the INVALID_REPLICA_ASSIGNMENT, or None.  Only replicas
    being added must be alive; ``original`` is the partition's replica set before any
    reassignment in progress."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return f"Duplicate replica ids in partition reassignment replica list: {list(target)}"
    if any(b < 0 for b in target):
        return f"Invalid broker id in replica list: {list(target)}"
    adding = [b for b in target if b not in original]
    if any(b not in live for b in adding):
        return (f"Replica assignment has brokers that are not alive. Replica list: {adding}, "
                f"live broker list: {sorted(live)}")
    return None


def check_added_partition_assignments(topic: str, cur: int, new_total: int, rf: int,
                                      assignments, live) -> tuple["TopicResult | None", dict | None]:
    """CreatePartitions with explicit assignments: (error result, None) or (None, {partition:
    replicas}) for the partitions from ``cur`` to ``new_total`` - 1.  ``rf`` is the topic's
    replication factor, ``live`` the live broker ids."""
    add = new_total - cur
    unknown = sorted({b for r in assignments for b in r} - set(live))
    if unknown:                        # Kafka's first check
        return TopicResult(topic, INVALID_REPLICA_ASSIGNMENT,
                           f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."), None
    if len(assignments) != add:
        return TopicResult(topic, INVALID_REPLICA_ASSIGNMENT,
                           f"Increasing the number of partitions by {add} but {len(assignments)} "
                           "assignments provided."), None
    new_assign = {cur + i: list(r) for i, r in enumerate(assignments)}
    for p, r in new_assign.items():     # AdminZkClient.validateReplicaAssignment's order and words
        if not r:
            return TopicResult(topic, INVALID_REPLICA_ASSIGNMENT,
                               f"Cannot have replication factor of 0 for partition id {p}."), None
        if len(set(r)) != len(r):
            return TopicResult(topic, INVALID_REPLICA_ASSIGNMENT, "Duplicate brokers not allowed in replica "
                               f"assignment: {', '.join(map(str, r))} for partition id {p}."), None
    bad = [p for p, r in new_assign.items() if len(r) != rf]
    if bad:
        return TopicResult(topic, INVALID_REPLICA_ASSIGNMENT,
                           f"Inconsistent replication factor between partitions, partition 0 has {rf} "
                           f"while partitions {bad} have replication factors "
                           f"{[len(new_assign[p]) for p in bad]}, respectively."), None
    err = validate_assignment(new_assign, set(live), first_partition=cur)
    if err:
        return TopicResult(topic, INVALID_REPLICA_ASSIGNMENT, err), None
    return None, new_assign


def check_create_topic(spec: "CreatableTopic", existing, live, cfg: BrokerConfig, place, configs: dict,
                       repeated: bool = False) -> tuple["TopicResult", dict | None]:
    """CreateTopics rules for one topic: (error result, None) or (result, {partition: replicas}).
    ``existing`` holds the topic names, ``live`` the live broker ids (a set, or a dict keyed by id),
    ``place(n, rf, start)`` places partitions automatically (ValueError if it cannot), ``configs``
    are the overrides to validate and ``repeated`` says the request names the topic more than once."""
    name = spec.name
    if repeated:
        return TopicResult(name, INVALID_REQUEST, "Found multiple entries for this topic."), None   # KafkaApis
    if name == "__cluster_metadata":
        return TopicResult(name, INVALID_REQUEST, "Creation of internal topic __cluster_metadata is prohibited."), None
    err = validate_topic_name(name)
    if err:
        return TopicResult(name, INVALID_TOPIC_EXCEPTION, err), None
    if name in existing:
        return TopicResult(name, TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."), None
    if has_collision_chars(name):
        u = unify_collision_chars(name)
        clash = sorted(t for t in existing if has_collision_chars(t) and unify_collision_chars(t) == u)
        if clash:
            return TopicResult(name, INVALID_TOPIC_EXCEPTION,
                               f"Topic '{name}' collides with existing topics: {', '.join(clash)}"), None
    if spec.assignments is not None:
        if spec.num_partitions != -1 or spec.replication_factor != -1:
            return TopicResult(name, INVALID_REQUEST,
                               "Both numPartitions or replicationFactor and replicasAssignments were set. "
                               "Both cannot be used at the same time."), None
        assignment = {int(p): list(r) for p, r in spec.assignments.items()}
        err = validate_assignment(assignment, set(live))
        if err:
            return TopicResult(name, INVALID_REPLICA_ASSIGNMENT, err), None
    else:
        n = spec.num_partitions if spec.num_partitions != -1 else cfg.get("num.partitions")
        rf = spec.replication_factor if spec.replication_factor != -1 else cfg.get("default.replication.factor")
        if n <= 0:
            return TopicResult(name, INVALID_PARTITIONS, "Number of partitions must be larger than 0."), None
        if rf <= 0:
            return TopicResult(name, INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."), None
        if rf > len(live):
            return TopicResult(name, INVALID_REPLICATION_FACTOR,
                               f"Replication factor: {rf} larger than available brokers: {len(live)}."), None
        try:
            assignment = place(n, rf, 0)
        except ValueError as e:
            return TopicResult(name, INVALID_REPLICATION_FACTOR, str(e)), None
    try:
        effective_topic_config(cfg, configs)
    except ConfigError as e:
        return TopicResult(name, INVALID_CONFIG, str(e)), None
    return TopicResult(name, NONE, None, None, len(assignment), len(assignment[0])), assignment


def plan_partition_increase(topic: str, cur: int, new_total: int, rf: int, reassigning: bool,
                            assignments, live, place) -> tuple["TopicResult | None", dict | None]:
    """CreatePartitions rules before anything is written: (error result, None) or (None, {partition:
    replicas}) for the partitions from ``cur`` to ``new_total`` - 1.  ``reassigning`` says a
    reassignment of the topic is in progress; ``live`` and ``place`` as for ``check_create_topic``."""
    if reassigning:
        return TopicResult(topic, REASSIGNMENT_IN_PROGRESS,
                           f"A partition reassignment is in progress for the topic '{topic}'."), None
    if new_total < cur:
        return TopicResult(topic, INVALID_PARTITIONS, f"Topic currently has {cur} partitions, "
                                                      f"which is higher than the requested {new_total}."), None
    if new_total == cur:
        return TopicResult(topic, INVALID_PARTITIONS, f"Topic already has {cur} partitions."), None
    if assignments is not None:
        return check_added_partition_assignments(topic, cur, new_total, rf, assignments, live)
    if rf > len(live):
        return TopicResult(topic, INVALID_REPLICATION_FACTOR,
                           f"Replication factor: {rf} larger than available brokers: {len(live)}."), None
    try:
        return None, place(new_total - cur, rf, cur)
    except ValueError as e:
        return TopicResult(topic, INVALID_REPLICATION_FACTOR, str(e)), None


def check_topic_configs(cfg: BrokerConfig, configs: dict) -> "ApiResult | None":
    """AlterConfigs of a topic: None if ``configs`` (the new overrides) are valid, else the result."""
    try:
        effective_topic_config(cfg, configs)
    except ConfigError as e:
        return ApiResult(e.error_code, str(e))
    return None


def apply_dynamic_broker_configs(cfg: BrokerConfig, own_id: int, broker_configs: dict[str, dict[str, str]]) -> None:
    """Give ``cfg`` the dynamic overrides of broker ``own_id`` and the cluster default."""
    cfg.set_dynamic(per_broker=broker_configs.get(str(own_id), {}),
                    cluster_default=broker_configs.get(DEFAULT_BROKER_ENTITY, {}))


# KIP-848's group configs (Kafka's GroupConfig): the group's own value, else the broker's
GROUP_CONFIGS = {"consumer.session.timeout.ms": ("group.consumer.session.timeout.ms",
                                                 "group.consumer.min.session.timeout.ms",
                                                 "group.consumer.max.session.timeout.ms"),
                 "consumer.heartbeat.interval.ms": ("group.consumer.heartbeat.interval.ms",
                                                    "group.consumer.min.heartbeat.interval.ms",
                                                    "group.consumer.max.heartbeat.interval.ms"),
                 # KIP-932's share group configs (Kafka 4.1/4.2)
                 "share.session.timeout.ms": ("group.share.session.timeout.ms",
                                              "group.share.min.session.timeout.ms",
                                              "group.share.max.session.timeout.ms"),
                 "share.heartbeat.interval.ms": ("group.share.heartbeat.interval.ms",
                                                 "group.share.min.heartbeat.interval.ms",
                                                 "group.share.max.heartbeat.interval.ms"),
                 "share.record.lock.duration.ms": ("group.share.record.lock.duration.ms",
                                                   "group.share.min.record.lock.duration.ms",
                                                   "group.share.max.record.lock.duration.ms"),
                 # KIP-1071's streams group configs (Kafka 4.2); None: no broker bound (at least 0)
                 "streams.session.timeout.ms": ("group.streams.session.timeout.ms",
                                                "group.streams.min.session.timeout.ms",
                                                "group.streams.max.session.timeout.ms"),
                 "streams.heartbeat.interval.ms": ("group.streams.heartbeat.interval.ms",
                                                   "group.streams.min.heartbeat.interval.ms",
                                                   "group.streams.max.heartbeat.interval.ms"),
                 "streams.num.standby.replicas": ("group.streams.num.standby.replicas", None,
                                                  "group.streams.max.standby.replicas"),
                 "streams.initial.rebalance.delay.ms": ("group.streams.initial.rebalance.delay.ms", None, None)}

# KIP-932's string group configs: name -> default (there is no broker key behind them)
GROUP_STRING_CONFIGS = {"share.auto.offset.reset": "latest", "share.isolation.level": "read_uncommitted"}


def check_group_configs(cfg: BrokerConfig, group: str, configs: dict[str, str]) -> "ApiResult | None":
    """None, or the INVALID_CONFIG/INVALID_REQUEST answer for a group's new configs (Kafka's
    GroupConfig.validate: known names, integers within the broker's bounds, the heartbeat
    interval below the session timeout)."""
    if not group:
        return ApiResult(INVALID_REQUEST, "Group name must not be empty")
    values = {}
    for name, value in configs.items():
        if name in GROUP_STRING_CONFIGS:
            err = _check_group_string_config(name, value)
            if err is not None:
                return err
            continue
        if name not in GROUP_CONFIGS:
            return ApiResult(INVALID_CONFIG, f"Unknown group config name: {name}")
        try:
            values[name] = int(value)
        except (TypeError, ValueError):
            return ApiResult(INVALID_CONFIG, f"Invalid value {value} for configuration {name}: "
                                                  "Not a number of type INT")
    for name, (default_key, lo_key, hi_key) in GROUP_CONFIGS.items():
        v = values.get(name)
        if v is None:
            continue
        if lo_key is None and v < 0:
            return ApiResult(INVALID_CONFIG, f"Invalid value {v} for configuration {name}: Value must be at "
                                             f"least 0")
        if lo_key is not None and v < cfg.get(lo_key):
            return ApiResult(INVALID_CONFIG, f"{name} must be greater than or equal to {lo_key}")
        if hi_key is not None and v > cfg.get(hi_key):
            return ApiResult(INVALID_CONFIG, f"{name} must be less than or equal to {hi_key}")
    for kind in ("consumer", "share", "streams"):
        session = values.get(f"{kind}.session.timeout.ms", cfg.get(f"group.{kind}.session.timeout.ms"))
        interval = values.get(f"{kind}.heartbeat.interval.ms", cfg.get(f"group.{kind}.heartbeat.interval.ms"))
        if interval >= session:
            return ApiResult(INVALID_CONFIG, f"{kind}.heartbeat.interval.ms must be less than "
                                             f"{kind}.session.timeout.ms")
    return None


_ISO_DURATION = re.compile(r"^P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?$", re.IGNORECASE)


def _check_group_string_config(name: str, value) -> "ApiResult | None":
    v = (value or "").strip()
    if name == "share.isolation.level":
        if v.lower() not in ("read_committed", "read_uncommitted"):
            return ApiResult(INVALID_CONFIG, f"Invalid value {value} for configuration {name}: String must be one "
                                             "of: read_committed, read_uncommitted")
        return None
    low = v.lower()
    if low in ("latest", "earliest"):
        return None
    if low.startswith("by_duration:"):
        d = v.split(":", 1)[1].strip()
        if _ISO_DURATION.match(d) and d.upper() not in ("P", "PT"):
            return None
        return ApiResult(INVALID_CONFIG, f"Invalid value {value} for configuration {name}: Unable to parse "
                                         f"duration string '{d}' for by_duration")
    return ApiResult(INVALID_CONFIG, f"Invalid value {value} for configuration {name}: Invalid value `{v}` for "
                                     "configuration share.auto.offset.reset. The value must be either 'earliest', "
                                     "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


# KIP-714's CLIENT_METRICS resource (Kafka's ClientMetricsConfigs): a named subscription with up to
# three keys.  Only the keys that are set are stored; a subscription without keys does not exist.
CLIENT_METRICS_METRICS = "metrics"          # list of metric name prefixes ("*": every metric)
CLIENT_METRICS_INTERVAL = "interval.ms"     # push interval, 100 .. 3600000
CLIENT_METRICS_MATCH = "match"              # list of selector=regex
CLIENT_METRICS_KEYS = (CLIENT_METRICS_METRICS, CLIENT_METRICS_INTERVAL, CLIENT_METRICS_MATCH)
CLIENT_METRICS_DEFAULT_INTERVAL_MS = 300000
CLIENT_METRICS_MIN_INTERVAL_MS, CLIENT_METRICS_MAX_INTERVAL_MS = 100, 3600000
CLIENT_METRICS_SELECTORS = frozenset({"client_instance_id", "client_id", "client_software_name",
                                      "client_software_version", "client_source_address",
                                      "client_source_port"})
_JAVA_INT = re.compile(r"[+-]?\d+")


def _java_split(text: str, sep: str) -> list[str]:
    """Java's ``String.split`` on a one-character separator: trailing empty pieces are dropped
    (``"a=".split("=")`` is ``["a"]``), but a string without the separator is kept whole."""
    parts = text.split(sep)
    if len(parts) > 1:
        while parts and parts[-1] == "":
            parts.pop()
    return parts


def _java_trim(text: str) -> str:
    """Java's ``String.trim``: drops leading and trailing characters up to U+0020."""
    return text.strip("".join(chr(c) for c in range(0x21)))


def parse_client_metrics_match(values: list[str] | None) -> dict[str, "re.Pattern"]:
    """The ``match`` list of a subscription as {selector: compiled pattern} (Kafka's
    ClientMetricsConfigs.parseMatchingPatterns): each entry is ``selector=regex``, split at its
    '=' (exactly two parts), both sides trimmed; the selector must be one of
    ``CLIENT_METRICS_SELECTORS`` and the regex must compile (Python's ``re``).  Raises
    ValueError("Illegal client matching pattern: <entry>") otherwise; a later entry for the same
    selector wins."""
    out: dict[str, re.Pattern] = {}
    for entry in values or ():
        parts = _java_split(entry, "=")
        if len(parts) != 2 or _java_trim(parts[0]) not in CLIENT_METRICS_SELECTORS:
            raise ValueError(f"Illegal client matching pattern: {entry}")
        try:
            out[_java_trim(parts[0])] = re.compile(_java_trim(parts[1]))
        except (re.error, RecursionError, OverflowError):
            raise ValueError(f"Illegal client matching pattern: {entry}") from None
    return out


def check_client_metrics_configs(name: str | None, configs: dict[str, str]) -> "ApiResult | None":
    """None, or the answer a Kafka 3.9 controller gives for a subscription's new configs (the
    whole set after the change; ClientMetricsConfigs.validate):

    * empty name: INVALID_REQUEST "Subscription name can't be empty"
    * a key other than metrics / interval.ms / match: INVALID_REQUEST
      "Unknown client metrics configuration: <key>"
    * interval.ms outside 100..3600000: INVALID_REQUEST; not a Java int at all: Kafka's
      controller fails with a NumberFormatException, which reaches the client as
      UNKNOWN_SERVER_ERROR without a message
    * a match entry that does not parse: INVALID_CONFIG "Illegal client matching pattern: <entry>"
    """
    if not name:
        return ApiResult(INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in CLIENT_METRICS_KEYS:
            return ApiResult(INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    interval = configs.get(CLIENT_METRICS_INTERVAL)
    if interval is not None:
        if not _JAVA_INT.fullmatch(interval) or not -2 ** 31 <= int(interval) < 2 ** 31:
            return ApiResult(UNKNOWN_SERVER_ERROR, None)
        ms = int(interval)
        if not CLIENT_METRICS_MIN_INTERVAL_MS <= ms <= CLIENT_METRICS_MAX_INTERVAL_MS:
            return ApiResult(INVALID_REQUEST, f"Invalid value {ms} for {CLIENT_METRICS_INTERVAL}, interval must be "
                                              f"between {CLIENT_METRICS_MIN_INTERVAL_MS} and "
                                              f"{CLIENT_METRICS_MAX_INTERVAL_MS} (1 hour)")
    match = configs.get(CLIENT_METRICS_MATCH)
    if match is not None:
        try:
            parse_client_metrics_match(_java_split(match, ","))
        except ValueError as e:
            return ApiResult(INVALID_CONFIG, str(e))
    return None


def java_hash_order(names: Iterable[str]) -> list[str]:
    """``names`` in the order a small Java HashMap (16 buckets) iterates them: by bucket of
    ``String.hashCode``, ties in insertion order.  Kafka's broker answers a subscription's configs in
    this order and its admin client's ``Config.entries()`` lists them in it."""
    def bucket(s: str) -> int:
        data = s.encode("utf-16-be")        # String.hashCode runs over UTF-16 code units
        h = 0
        for i in range(0, len(data), 2):
            h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 15
    names = list(names)
    return sorted(names, key=bucket)


def altered_broker_configs(cfg: BrokerConfig, own_id: int, current: dict[str, dict[str, str]],
                           broker_id: int | None, configs: dict[str, str]) -> tuple[str, dict[str, dict[str, str]]]:
    """AlterConfigs of a broker (None: the cluster default): (entity, all dynamic broker configs after
    the change), checked on a trial copy of ``cfg`` for broker ``own_id``; raises ConfigError."""
    entity = DEFAULT_BROKER_ENTITY if broker_id is None else str(broker_id)
    validate_dynamic_broker_configs(configs, per_broker=broker_id is not None)
    new_bc = {k: dict(v) for k, v in current.items()}
    new_bc[entity] = dict(configs)
    if not new_bc[entity]:
        del new_bc[entity]
    trial = BrokerConfig(cfg.static_configs, validate=False)
    apply_dynamic_broker_configs(trial, own_id, new_bc)
    if broker_id == own_id:
        # this broker's TLS listeners must load the updated stores (Kafka validates its
        # reconfigurable SslFactory before accepting the update)
        from broker.security.tls import check_reconfiguration, ssl_fingerprint
        for ep in cfg.listeners():
            if ep.security_protocol in ("SSL", "SASL_SSL") and \
                    ssl_fingerprint(trial, ep.listener_name) != ssl_fingerprint(cfg, ep.listener_name):
                check_reconfiguration(cfg, trial, ep.listener_name)
    if "metric.reporters" in configs and trial.get("metric.reporters") != cfg.get("metric.reporters"):
        # the new reporters must load (Kafka builds them to validate the update); built, then closed
        from broker.client_metrics import close_reporters, load_receivers
        reporters, _ = load_receivers(trial)
        close_reporters(reporters)
    return entity, new_bc


def validate_topic_name(name: str | None) -> str | None:
    """None if ``name`` is a legal topic name, else Kafka's message (INVALID_TOPIC_EXCEPTION)."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
                f"topic name: {name}")
    if not _LEGAL.match(name):
        return (f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
                "'.', '_' and '-'")
    return None


def unify_collision_chars(name: str) -> str:
    return name.replace(".", "_")


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


def uuid_to_base64(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def base64_to_uuid(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


ZERO_UUID = uuid.UUID(int=0)
METADATA_TOPIC_ID = uuid.UUID(int=1)


def random_kafka_uuid() -> uuid.UUID:
    """A random UUID as Kafka makes them: never zero, the metadata id, or base64 starting '-'."""
    while True:
        u = uuid.uuid4()
        if u not in (ZERO_UUID, METADATA_TOPIC_ID) and not uuid_to_base64(u).startswith("-"):
            return u


def new_cluster_id() -> str:
    return uuid_to_base64(random_kafka_uuid())


def assign_replicas(broker_ids: list[int], num_partitions: int, replication_factor: int,
                    start_partition: int = 0, rng: random.Random | None = None,
                    start_index: int | None = None, shift: int | None = None) -> dict[int, list[int]]:
    """Kafka's rack-unaware spread: leaders round-robin from a random start, followers at
    an increasing shift so no two replicas of a partition share a broker."""
    n = len(broker_ids)
    if replication_factor > n:
        raise ValueError(f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    ids = sorted(broker_ids)
    rng = rng or random
    first = rng.randrange(n) if start_index is None else start_index
    next_shift = rng.randrange(n) if shift is None else shift
    cur = start_partition
    out: dict[int, list[int]] = {}
    for i in range(num_partitions):
        if cur > 0 and cur % n == 0:
            next_shift += 1
        first_replica = (cur + first) % n
        reps = [ids[first_replica]]
        for j in range(replication_factor - 1):
            s = 1 + (next_shift + j) % (n - 1)
            reps.append(ids[(first_replica + s) % n])
        out[start_partition + i] = reps
        cur += 1
    return out


def validate_assignment(assignments: dict[int, list[int]], live_brokers: set[int],
                        first_partition: int = 0) -> str | None:
    """None if a manual assignment is usable, else Kafka-style message (INVALID_REPLICA_ASSIGNMENT)."""
    if not assignments:
        return "Replica assignment is empty"
    parts = sorted(assignments)
    if parts != list(range(first_partition, first_partition + len(parts))):
        return "partitions should be a consecutive 0-based integer sequence" if first_partition == 0 else \
            f"Partitions should be consecutive integers starting at {first_partition}"
    sizes = {len(r) for r in assignments.values()}
    if 0 in sizes:
        return "Replica assignment has an empty replica list"
    if len(sizes) > 1:
        return "All partitions should have the same number of replicas"
    for p in parts:
        reps = assignments[p]
        if len(set(reps)) != len(reps):
            return f"Duplicate replica assignment found: {reps}"
        unknown = [b for b in reps if b not in live_brokers]
        if unknown:
            return f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
    return None

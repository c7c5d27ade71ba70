"""Embedded single-node controller: the metadata store of a broker without ZooKeeper.

How this works
--------------
* One broker (``broker_id``) is the only live broker and always the controller.  Every
  partition has replicas=[id], leader=id, isr=[id]; leader epochs start at 0 and bump
  only when the controller changes leadership (never, here); AlterPartition bumps the
  partition epoch, as the ZooKeeper controller bumps the state znode's version.
* Everything lives in one JSON file, ``<first log dir>/__cluster_metadata.json``:
  cluster id, broker id, topics (ids, assignments, leader/ISR state, config overrides),
  dynamic broker configs (per id and ``<default>``), the next producer id, the finalized
  features (KIP-584) with their epoch (0 when the store is created, one more per change), group
  configs (KIP-848) and client metrics subscriptions (KIP-714, ``client_metrics``).  Each
  write serialises the new state on the loop, writes ``.tmp``, fsyncs, renames over the
  file and fsyncs the directory, in an executor thread.
* ``metadata_offset`` in the document counts the durable writes: each successful write stores
  the previous count plus one (the store's creation is the first), and it is loaded back on
  start (0 for a file written before the count existed).  ``metadata_offset()`` reports it: the
  nearest thing this store has to the offset of a KRaft metadata log (DescribeQuorum's high
  watermark, broker/handlers/describe_quorum.py).  A write that fails leaves it unchanged.
* Writers hold ``self._lock`` from validation to swap, so writes are applied one at a
  time in call order; readers see the old state until the new one is durable.  Events
  go to subscribers with ``loop.call_soon`` after the swap.
* Dynamic broker configs for this broker and the cluster default are also applied to the
  ``BrokerConfig`` given at construction (before the ConfigsChanged event).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import types
import uuid
from collections import Counter
from typing import Any, Callable, Iterable

from broker.config import BrokerConfig, ConfigError
from controller.api import (
    DEFAULT_BROKER_ENTITY, INELIGIBLE_REPLICA, INVALID_REQUEST, INVALID_UPDATE_VERSION, NONE,
    NOT_CONTROLLER, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, PRODUCER_ID_BLOCK_SIZE,
    TOPIC_DELETION_DISABLED, UNKNOWN_TOPIC_OR_PARTITION,
    AlterPartitionResult, ApiResult, BrokerInfo, BrokersChanged, ConfigsChanged, Controller, CreatableTopic,
    Event, PartitionState, TopicInfo, TopicResult, TopicsChanged, altered_broker_configs,
    apply_dynamic_broker_configs, assign_replicas, base64_to_uuid, check_client_metrics_configs, check_create_topic,
    check_group_configs, check_topic_configs,
    apply_client_quota_changes, is_internal_topic, new_cluster_id, plan_partition_increase, quota_entity_from_path,
    quota_entity_path, random_kafka_uuid, resolve_topic_to_delete, unsupported_features,
    uuid_to_base64,
)

log = logging.getLogger(__name__)

METADATA_FILE = "__cluster_metadata.json"
FORMAT_VERSION = 1


class MetadataStoreError(RuntimeError):
    pass


def _write_atomically(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class SingleNodeController(Controller):
    """Owns the embedded metadata of one broker; use only from its event loop."""

    def __init__(self, config: BrokerConfig, log_dir: str | None = None, broker_id: int | None = None,
                 cluster_id: str | None = None):
        self._cfg = config
        self._dir = log_dir or config.log_dirs()[0]
        self._path = os.path.join(self._dir, METADATA_FILE)
        self._wanted_broker_id = config.broker_id if broker_id is None else broker_id
        self._wanted_cluster_id = cluster_id
        self._broker_id = -1
        self._cluster_id = ""
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, str] = {}
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._group_configs: dict[str, dict[str, str]] = {}     # KIP-848 GROUP resources
        self._client_metrics: dict[str, dict[str, str]] = {}    # KIP-714 subscriptions
        self._next_producer_id = 0
        self._acls: tuple = ()                          # AclBinding tuples
        self._scram: dict[str, dict[str, str]] = {}     # user -> {mechanism: credential text}
        self._quotas: dict[tuple, dict[str, float]] = {}  # quota entity -> {key: value}
        self._tokens: dict[str, dict] = {}              # delegation token id -> token JSON
        self._features: dict[str, int] = {}             # finalized feature -> level
        self._features_epoch = 0
        self._offset = 0                                # durable writes so far (metadata_offset)
        self._registered: BrokerInfo | None = None
        self._subscribers: list[Callable[[Event], None]] = []
        self._lock = asyncio.Lock()
        self._running = False

    # ------------------------------------------------------------------ lifecycle
    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def controller_id(self) -> int:
        return self._broker_id if self._running else -1

    @property
    def broker_id(self) -> int:
        return self._broker_id

    @property
    def path(self) -> str:
        return self._path

    def metadata_offset(self) -> int:
        """How many changes the store has made durable (monotonic, kept across restarts)."""
        return self._offset

    async def start(self) -> None:
        if self._running:
            return
        os.makedirs(self._dir, exist_ok=True)
        if os.path.exists(self._path):
            self._load()
        else:
            self._cluster_id = self._wanted_cluster_id or new_cluster_id()
            bid = self._wanted_broker_id
            self._broker_id = bid if bid >= 0 else self._cfg.get("reserved.broker.max.id") + 1
            await self._persist(self._snapshot_doc())
        self._apply_dynamic_to_config()
        self._running = True
        log.info("Embedded controller started: cluster id %s, broker %d, %d topics",
                 self._cluster_id, self._broker_id, len(self._topics))

    async def stop(self) -> None:
        async with self._lock:
            self._running = False

    def _load(self) -> None:
        with open(self._path, "rb") as f:
            doc = json.loads(f.read())
        if doc.get("version", 0) > FORMAT_VERSION:
            raise MetadataStoreError(f"{self._path}: unsupported metadata version {doc.get('version')}")
        stored = doc["broker_id"]
        if self._wanted_broker_id >= 0 and self._wanted_broker_id != stored:
            raise MetadataStoreError(f"Configured broker.id {self._wanted_broker_id} doesn't match stored "
                                     f"broker.id {stored} in {self._path}")
        if self._wanted_cluster_id and self._wanted_cluster_id != doc["cluster_id"]:
            raise MetadataStoreError(f"The cluster id {self._wanted_cluster_id} doesn't match stored "
                                     f"cluster id {doc['cluster_id']} in {self._path}")
        self._broker_id = stored
        self._cluster_id = doc["cluster_id"]
        self._next_producer_id = doc.get("next_producer_id", 0)
        self._offset = int(doc.get("metadata_offset", 0))
        self._broker_configs = {k: dict(v) for k, v in doc.get("broker_configs", {}).items()}
        self._group_configs = {k: dict(v) for k, v in doc.get("group_configs", {}).items()}
        self._client_metrics = {k: dict(v) for k, v in doc.get("client_metrics", {}).items() if v}
        from broker.security.acl import AclBinding
        self._acls = tuple(AclBinding.from_json(r) for r in doc.get("acls", []))
        self._scram = {u: dict(c) for u, c in doc.get("scram_credentials", {}).items()}
        self._tokens = {t: dict(d) for t, d in doc.get("delegation_tokens", {}).items()}
        ff = doc.get("finalized_features", {})
        self._features_epoch = int(ff.get("epoch", 0))
        self._features = {n: int(v) for n, v in ff.get("features", {}).items()}
        unsupported = unsupported_features(self._features)
        if unsupported:
            log.error("Finalized features %s in %s are not supported by this broker; remove them with "
                      "kafka-features.sh disable", unsupported, self._path)
        quotas = {}
        for path, values in doc.get("client_quotas", {}).items():
            entity = quota_entity_from_path(path)
            if entity is not None and values:
                quotas[entity] = {k: float(v) for k, v in values.items()}
        self._quotas = quotas
        topics: dict[str, TopicInfo] = {}
        by_id: dict[uuid.UUID, str] = {}
        P = PartitionState
        for name, t in doc["topics"].items():
            tid = base64_to_uuid(t["id"])
            parts = {}
            for row in t["partitions"]:
                p = row[0]
                parts[p] = P(p, row[1], row[2], row[3], row[4], row[5],
                             row[6] if len(row) > 6 else [], row[7] if len(row) > 7 else [])
            topics[name] = TopicInfo(name, tid, parts, t.get("configs", {}), t.get("internal", False))
            by_id[tid] = name
        self._topics, self._by_id = topics, by_id

    def _snapshot_doc(self, topics: dict[str, TopicInfo] | None = None,
                      broker_configs: dict[str, dict[str, str]] | None = None,
                      next_producer_id: int | None = None) -> dict[str, Any]:
        topics = self._topics if topics is None else topics
        tdoc = {}
        for name, t in topics.items():
            rows = []
            for p in sorted(t.partitions):
                s = t.partitions[p]
                row = [p, s.replicas, s.leader, s.leader_epoch, s.isr, s.partition_epoch]
                if s.adding_replicas or s.removing_replicas:
                    row += [s.adding_replicas, s.removing_replicas]
                rows.append(row)
            tdoc[name] = {"id": uuid_to_base64(t.topic_id), "internal": t.internal,
                          "configs": t.configs, "partitions": rows}
        return {
            "version": FORMAT_VERSION,
            "cluster_id": self._cluster_id,
            "broker_id": self._broker_id,
            "next_producer_id": self._next_producer_id if next_producer_id is None else next_producer_id,
            "broker_configs": self._broker_configs if broker_configs is None else broker_configs,
            "topics": tdoc,
            "acls": [list(b) for b in self._acls],
            "scram_credentials": self._scram,
            "delegation_tokens": self._tokens,
            "client_quotas": {quota_entity_path(e): v for e, v in self._quotas.items()},
            "group_configs": self._group_configs,
            "client_metrics": self._client_metrics,
            "finalized_features": {"epoch": self._features_epoch, "features": self._features},
        }

    async def _persist(self, doc: dict[str, Any]) -> None:
        # writers hold self._lock (or run before start() returns), so counts are not interleaved
        offset = self._offset + 1
        data = json.dumps({**doc, "metadata_offset": offset}, separators=(",", ":")).encode()
        await asyncio.get_running_loop().run_in_executor(None, _write_atomically, self._path, data)
        self._offset = offset

    def _emit(self, event: Event) -> None:
        loop = asyncio.get_running_loop()
        for cb in list(self._subscribers):
            loop.call_soon(cb, event)

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)
        return unsubscribe

    # ------------------------------------------------------------------ brokers
    def _self_info(self) -> BrokerInfo:
        if self._registered is not None:
            return self._registered
        return BrokerInfo(self._broker_id, [tuple(e) for e in self._cfg.advertised_listeners()],
                          self._cfg.get("broker.rack"))

    async def register_broker(self, info: BrokerInfo) -> None:
        if info.id != self._broker_id:
            raise ValueError(f"the embedded controller serves broker {self._broker_id} only, not {info.id}")
        new = self._registered is None
        self._registered = BrokerInfo(info.id, list(info.endpoints), info.rack, info.epoch)
        if new:
            self._emit(BrokersChanged(added=[info.id]))

    def brokers(self) -> list[BrokerInfo]:
        return [self._self_info()]

    def _live(self) -> set[int]:
        return {self._broker_id}

    def _place(self, n: int, rf: int, start: int) -> dict[int, list[int]]:
        return assign_replicas(sorted(self._live()), n, rf, start_partition=start)

    # ------------------------------------------------------------------ topics
    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        name = self._by_id.get(topic_id)
        return self._topics.get(name) if name else None

    def _not_controller(self, name: str | None) -> TopicResult:
        return TopicResult(name, NOT_CONTROLLER, "This is not the correct controller for this cluster.")

    def _new_partition(self, p: int, replicas: list[int]) -> PartitionState:
        live = self._live()
        isr = [b for b in replicas if b in live]
        leader = isr[0] if isr else -1
        return PartitionState(p, list(replicas), leader, 0, isr if isr else list(replicas), 0)

    async def create_topics(self, specs: list[CreatableTopic], validate_only: bool = False) -> list[TopicResult]:
        async with self._lock:
            if not self._running:
                return [self._not_controller(s.name) for s in specs]
            counts = Counter(s.name for s in specs)
            results: list[TopicResult] = []
            new_topics = dict(self._topics)
            created: list[TopicInfo] = []
            for spec in specs:
                res, assignment = check_create_topic(spec, new_topics, self._live(), self._cfg, self._place,
                                                     spec.configs or {}, counts[spec.name] > 1)
                results.append(res)
                if res.error_code or validate_only:
                    continue
                tid = random_kafka_uuid()
                while tid in self._by_id:
                    tid = random_kafka_uuid()
                info = TopicInfo(spec.name, tid, {p: self._new_partition(p, r) for p, r in sorted(assignment.items())},
                                 {k: v for k, v in (spec.configs or {}).items()}, is_internal_topic(spec.name))
                new_topics[spec.name] = info
                created.append(info)
                res.topic_id = tid
            if created:
                await self._persist(self._snapshot_doc(new_topics))
                self._topics = new_topics
                for t in created:
                    self._by_id[t.topic_id] = t.name
                    log.info("Created topic %s with %d partitions, topic id %s", t.name, len(t.partitions),
                             uuid_to_base64(t.topic_id))
                self._emit(TopicsChanged(created=[t.name for t in created],
                                         changed={t.name: sorted(t.partitions) for t in created}))
            return results

    async def delete_topics(self, names_or_ids: Iterable[str | uuid.UUID]) -> list[TopicResult]:
        items = list(names_or_ids)
        async with self._lock:
            if not self._running:
                return [self._not_controller(x if isinstance(x, str) else None) for x in items]
            results = []
            new_topics = dict(self._topics)
            deleted: list[tuple[str, uuid.UUID]] = []
            enabled = self._cfg.get("delete.topic.enable")
            for x in items:
                name, missing = resolve_topic_to_delete(x, self._by_id, new_topics)
                if missing is not None:
                    results.append(missing)
                    continue
                info = new_topics[name]
                if not enabled:
                    results.append(TopicResult(name, TOPIC_DELETION_DISABLED, "Topic deletion is disabled.",
                                               topic_id=info.topic_id))
                    continue
                del new_topics[name]
                deleted.append((name, info.topic_id))
                results.append(TopicResult(name, NONE, None, info.topic_id))
            if deleted:
                await self._persist(self._snapshot_doc(new_topics))
                self._topics = new_topics
                for name, tid in deleted:
                    self._by_id.pop(tid, None)
                    log.info("Deleted topic %s (id %s)", name, uuid_to_base64(tid))
                self._emit(TopicsChanged(deleted=deleted))
            return results

    async def create_partitions(self, topic: str, new_total: int, assignments: list[list[int]] | None = None,
                                validate_only: bool = False) -> TopicResult:
        async with self._lock:
            if not self._running:
                return self._not_controller(topic)
            info = self._topics.get(topic)
            if info is None:
                return TopicResult(topic, UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
            reassigning = any(s.adding_replicas or s.removing_replicas for s in info.partitions.values())
            cur = len(info.partitions)
            rf = info.replication_factor
            bad, new_assign = plan_partition_increase(topic, cur, new_total, rf, reassigning, assignments,
                                                      self._live(), self._place)
            if bad is not None:
                return bad
            res = TopicResult(topic, NONE, None, info.topic_id, new_total, rf)
            if validate_only:
                return res
            parts = dict(info.partitions)
            for p, r in new_assign.items():
                parts[p] = self._new_partition(p, r)
            new_info = TopicInfo(info.name, info.topic_id, parts, info.configs, info.internal)
            new_topics = dict(self._topics)
            new_topics[topic] = new_info
            await self._persist(self._snapshot_doc(new_topics))
            self._topics = new_topics
            log.info("Increased partitions of %s from %d to %d", topic, cur, new_total)
            self._emit(TopicsChanged(changed={topic: sorted(new_assign)}))
            return res

    # ------------------------------------------------------------------ configs
    async def alter_topic_configs(self, topic: str, configs: dict[str, str], validate_only: bool = False) -> ApiResult:
        async with self._lock:
            if not self._running:
                return ApiResult(NOT_CONTROLLER, "This is not the correct controller for this cluster.")
            info = self._topics.get(topic)
            if info is None:
                return ApiResult(UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
            bad = check_topic_configs(self._cfg, configs)
            if bad is not None:
                return bad
            if validate_only:
                return ApiResult()
            new_topics = dict(self._topics)
            new_topics[topic] = TopicInfo(info.name, info.topic_id, info.partitions, dict(configs), info.internal)
            await self._persist(self._snapshot_doc(new_topics))
            self._topics = new_topics
            log.info("Updated config of topic %s: %s", topic, configs)
            self._emit(ConfigsChanged("topics", topic))
            return ApiResult()

    async def alter_group_configs(self, group: str, configs: dict[str, str],
                                  validate_only: bool = False) -> ApiResult:
        return await self._replace_named_configs("_group_configs", "groups", group, configs, validate_only,
                                                 lambda: check_group_configs(self._cfg, group, configs))

    async def alter_client_metrics(self, name: str, configs: dict[str, str],
                                   validate_only: bool = False) -> ApiResult:
        return await self._replace_named_configs("_client_metrics", "client-metrics", name, configs, validate_only,
                                                 lambda: check_client_metrics_configs(name, configs))

    async def _replace_named_configs(self, attr: str, entity_type: str, name: str, configs: dict[str, str],
                                     validate_only: bool, check) -> ApiResult:
        """Replace the configs of one named entity of the ``attr`` store (group configs, client
        metrics subscriptions; none left removes it) after ``check()``, then emit ConfigsChanged."""
        async with self._lock:
            if not self._running:
                return ApiResult(NOT_CONTROLLER, "This is not the correct controller for this cluster.")
            bad = check()
            if bad is not None or validate_only:
                return bad or ApiResult()
            old = getattr(self, attr)
            setattr(self, attr, {**old, name: dict(configs)} if configs else
                    {n: c for n, c in old.items() if n != name})
            try:
                await self._persist(self._snapshot_doc())
            except BaseException:
                setattr(self, attr, old)
                raise
            log.info("Updated %s config of %s: %s", entity_type, name, configs)
            self._emit(ConfigsChanged(entity_type, name))
            return ApiResult()

    def broker_configs(self, broker_id: int | None) -> dict[str, str]:
        key = DEFAULT_BROKER_ENTITY if broker_id is None else str(broker_id)
        return dict(self._broker_configs.get(key, {}))

    def _apply_dynamic_to_config(self) -> None:
        apply_dynamic_broker_configs(self._cfg, self._broker_id, self._broker_configs)

    async def alter_broker_configs(self, broker_id: int | None, configs: dict[str, str],
                                   validate_only: bool = False) -> ApiResult:
        async with self._lock:
            if not self._running:
                return ApiResult(NOT_CONTROLLER, "This is not the correct controller for this cluster.")
            try:
                entity, new_bc = altered_broker_configs(self._cfg, self._broker_id, self._broker_configs,
                                                        broker_id, configs)
            except ConfigError as e:
                return ApiResult(e.error_code, str(e))
            if validate_only:
                return ApiResult()
            await self._persist(self._snapshot_doc(broker_configs=new_bc))
            self._broker_configs = new_bc
            if entity in (DEFAULT_BROKER_ENTITY, str(self._broker_id)):
                self._apply_dynamic_to_config()
            log.info("Updated dynamic config of broker %s: %s", entity, configs)
            self._emit(ConfigsChanged("brokers", entity))
            return ApiResult()

    # ------------------------------------------------------------------ ISR, producer ids
    async def alter_partition_isr(self, topic: str, partition: int, leader_epoch: int, new_isr: list[int],
                                  partition_epoch: int, broker_id: int | None = None,
                                  broker_epoch: int = -1) -> AlterPartitionResult:
        async with self._lock:
            if not self._running:
                return AlterPartitionResult(NOT_CONTROLLER)
            info = self._topics.get(topic)
            state = info.partitions.get(partition) if info else None
            if state is None:
                return AlterPartitionResult(UNKNOWN_TOPIC_OR_PARTITION)
            if broker_id is not None and broker_id != state.leader:
                return AlterPartitionResult(NOT_LEADER_OR_FOLLOWER)
            if leader_epoch != state.leader_epoch:
                return AlterPartitionResult(FENCED_LEADER_EPOCH)
            if partition_epoch < state.partition_epoch:
                return AlterPartitionResult(INVALID_UPDATE_VERSION)
            if list(new_isr) == state.isr:
                return AlterPartitionResult(NONE, state)
            if partition_epoch != state.partition_epoch:
                return AlterPartitionResult(INVALID_UPDATE_VERSION)
            if not new_isr or state.leader not in new_isr or len(set(new_isr)) != len(new_isr):
                return AlterPartitionResult(INVALID_REQUEST)
            live = self._live()
            if any(b not in state.replicas or b not in live for b in new_isr):
                return AlterPartitionResult(INELIGIBLE_REPLICA)
            new_state = state.copy()
            new_state.isr = list(new_isr)
            new_state.partition_epoch += 1
            parts = dict(info.partitions)
            parts[partition] = new_state
            new_topics = dict(self._topics)
            new_topics[topic] = TopicInfo(info.name, info.topic_id, parts, info.configs, info.internal)
            await self._persist(self._snapshot_doc(new_topics))
            self._topics = new_topics
            self._emit(TopicsChanged(changed={topic: [partition]}))
            return AlterPartitionResult(NONE, new_state)

    async def allocate_producer_ids(self, broker_id: int, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> tuple[int, int]:
        if block_size <= 0:
            raise ValueError("block_size must be positive")
        async with self._lock:
            if not self._running:
                raise RuntimeError("controller is not running")
            start = self._next_producer_id
            await self._persist(self._snapshot_doc(next_producer_id=start + block_size))
            self._next_producer_id = start + block_size
            return start, block_size

    # ------------------------------------------------------------------ ACLs, SCRAM credentials
    def acls(self) -> tuple:
        return self._acls

    async def create_acls(self, bindings: list) -> ApiResult:
        async with self._lock:
            if not self._running:
                return ApiResult(NOT_CONTROLLER, "This is not the correct controller for this cluster.")
            have = set(self._acls)
            new = list(self._acls)
            for b in bindings:
                if b not in have:
                    have.add(b)
                    new.append(b)
            if len(new) == len(self._acls):
                return ApiResult()
            old, self._acls = self._acls, tuple(new)
            try:
                await self._persist(self._snapshot_doc())
            except BaseException:
                self._acls = old
                raise
            log.info("Added %d ACL bindings", len(new) - len(old))
            return ApiResult()

    async def delete_acls(self, bindings: list) -> ApiResult:
        async with self._lock:
            if not self._running:
                return ApiResult(NOT_CONTROLLER, "This is not the correct controller for this cluster.")
            gone = set(bindings)
            new = tuple(b for b in self._acls if b not in gone)
            if len(new) == len(self._acls):
                return ApiResult()
            old, self._acls = self._acls, new
            try:
                await self._persist(self._snapshot_doc())
            except BaseException:
                self._acls = old
                raise
            log.info("Removed %d ACL bindings", len(old) - len(new))
            return ApiResult()

    def scram_credentials(self) -> dict[str, dict[str, str]]:
        return self._scram

    async def alter_scram_credentials(self, upsertions, deletions) -> ApiResult:
        async with self._lock:
            if not self._running:
                return ApiResult(NOT_CONTROLLER, "This is not the correct controller for this cluster.")
            new = {u: dict(c) for u, c in self._scram.items()}
            for user, mech in deletions:
                creds = new.get(user)
                if creds is not None:
                    creds.pop(mech, None)
                    if not creds:
                        del new[user]
            for user, mech, text in upsertions:
                new.setdefault(user, {})[mech] = text
            old, self._scram = self._scram, new
            try:
                await self._persist(self._snapshot_doc())
            except BaseException:
                self._scram = old
                raise
            log.info("Updated SCRAM credentials: %d upserted, %d deleted", len(upsertions), len(deletions))
            return ApiResult()

    # ------------------------------------------------------------------ finalized features
    def finalized_features(self):
        return (self._features_epoch, types.MappingProxyType(self._features)) if self._running else (-1, {})

    async def update_finalized_features(self, features: dict[str, int]) -> ApiResult:
        async with self._lock:
            if not self._running:
                return ApiResult(NOT_CONTROLLER, "This is not the correct controller for this cluster.")
            old = (self._features, self._features_epoch)
            self._features, self._features_epoch = dict(features), self._features_epoch + 1
            try:
                await self._persist(self._snapshot_doc())
            except BaseException:
                self._features, self._features_epoch = old
                raise
            log.info("Finalized features now %s (epoch %d)", self._features or "{}", self._features_epoch)
            return ApiResult()

    # ------------------------------------------------------------------ delegation tokens
    def delegation_tokens(self) -> dict[str, dict]:
        return self._tokens

    async def put_delegation_token(self, token_id: str, doc: dict) -> ApiResult:
        return await self._set_tokens(token_id, dict(doc))

    async def delete_delegation_token(self, token_id: str) -> ApiResult:
        return await self._set_tokens(token_id, None)

    async def _set_tokens(self, token_id: str, doc: dict | None) -> ApiResult:
        async with self._lock:
            if not self._running:
                return ApiResult(NOT_CONTROLLER, "This is not the correct controller for this cluster.")
            new = dict(self._tokens)
            if doc is None:
                if new.pop(token_id, None) is None:
                    return ApiResult()
            else:
                new[token_id] = doc
            old, self._tokens = self._tokens, new
            try:
                await self._persist(self._snapshot_doc())
            except BaseException:
                self._tokens = old
                raise
            return ApiResult()

    # ------------------------------------------------------------------ client quotas
    def client_quotas(self) -> dict[tuple, dict[str, float]]:
        return self._quotas

    async def alter_client_quotas(self, entries, validate_only: bool = False) -> list[ApiResult]:
        async with self._lock:
            if not self._running:
                return [ApiResult(NOT_CONTROLLER, "This is not the correct controller for this cluster.")
                        for _ in entries]
            if validate_only or not entries:
                return [ApiResult() for _ in entries]
            new = apply_client_quota_changes(self._quotas, entries)
            old, self._quotas = self._quotas, new
            try:
                await self._persist(self._snapshot_doc())
            except BaseException:
                self._quotas = old
                raise
            for entity, changes in entries:
                log.info("Updated client quotas of %s: %s", quota_entity_path(entity), changes)
                self._emit(ConfigsChanged("client-quotas", quota_entity_path(entity)))
            return [ApiResult() for _ in entries]

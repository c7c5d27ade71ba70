"""``ZkController``: the ``controller.api.Controller`` of a broker in a ZooKeeper cluster.

How this works
--------------
* Start: connect (``ZkBridge``), create Kafka's persistent paths, read or create
  ``/cluster/id``, find the broker id (``broker.id``, else ``meta.properties``, else
  ``/brokers/seqid``), load dynamic broker configs and watch ``/config/changes``.
* ``register_broker``: the ephemeral ``/brokers/ids/<id>`` (create empty + setData in one
  multi; its czxid is this broker's epoch), then the controller election on ``/controller``.
  The winner runs a ``role.ControllerRole`` until it resigns (session lost, ``/controller``
  changed, fenced write, shutdown).
* Reads (``topics()``, ``brokers()``, ``controller_id``) answer from the metadata cache that the
  controller's UpdateMetadata requests feed (``apply_update_metadata``), plus topic configs read
  from ``/config/topics/<t>`` and refreshed by config change notifications.
* Admin writes go to ZooKeeper the way Kafka's ``AdminZkClient`` does them (create topic = config
  node + assignment node; delete = ``/admin/delete_topics/<t>``; configs = ``/config/...`` +
  ``/config/changes``), then wait (bounded) until the controller has propagated the result into
  this broker's cache.  Producer id blocks: CAS on ``/latest_producer_id_block``.
* ISR changes (``alter_partition_isr``) go to the active controller as AlterPartition requests.
* Session expiry: the role resigns at once; when kazoo has a new session the broker re-registers
  and re-runs the election.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import uuid
from collections import Counter
from typing import Callable, Iterable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker.config import BrokerConfig, ConfigError
from controller.api import (
    DEFAULT_BROKER_ENTITY, INVALID_REQUEST, INVALID_TOPIC_EXCEPTION, NONE, NOT_CONTROLLER, PRODUCER_ID_BLOCK_SIZE, REASSIGNMENT_IN_PROGRESS,
    TOPIC_ALREADY_EXISTS, TOPIC_DELETION_DISABLED, UNKNOWN_TOPIC_OR_PARTITION, AlterPartitionResult, ApiResult,
    BrokerInfo, BrokersChanged, ConfigsChanged, Controller, CreatableTopic, Event, PartitionState, TopicInfo,
    TopicResult, TopicsChanged, altered_broker_configs, apply_dynamic_broker_configs, assign_replicas,
    check_client_metrics_configs, check_create_topic, check_group_configs, check_topic_configs, is_internal_topic,
    new_cluster_id, plan_partition_increase, random_kafka_uuid, resolve_topic_to_delete,
)
from controller.zookeeper import znodes as Z
from controller.zookeeper.quota_store import ZkQuotaStore
from controller.zookeeper.security_store import ZkSecurityStore
from controller.zookeeper.feature_store import ZkFeatureStore
from controller.zookeeper.token_store import ZkTokenStore
from controller.zookeeper.zkbridge import ZkBridge, new_notifications

log = logging.getLogger("odradek.zkcontroller")

CLIENT_METRICS_TYPE = "client-metrics"          # Kafka's ConfigType.CLIENT_METRICS

SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOLS.items()}
PROPAGATION_WAIT_S = 10.0
REFRESH_TIMEOUT_S = 5.0        # a describe that re-reads ZooKeeper waits this long before using the cache


class ZkStartupError(RuntimeError):
    pass


def assign_replicas_rack_aware(brokers: dict[int, str | None], num_partitions: int, rf: int,
                               start_partition: int = 0, rng: random.Random | None = None) -> dict[int, list[int]]:
    """Kafka-style placement: rack-unaware spread when no broker has a rack; otherwise brokers
    are interleaved by rack and each partition's replicas go to distinct racks while racks last."""
    ids = sorted(brokers)
    if all(brokers[b] is None for b in ids):
        return assign_replicas(ids, num_partitions, rf, start_partition, rng)
    if any(brokers[b] is None for b in ids):
        raise ValueError("Not all brokers have rack information for replica rack aware assignment.")
    if rf > len(ids):
        raise ValueError(f"Replication factor: {rf} larger than available brokers: {len(ids)}.")
    rng = rng or random
    by_rack: dict[str, list[int]] = {}
    for b in ids:
        by_rack.setdefault(brokers[b], []).append(b)
    racks = sorted(by_rack)
    ordered: list[int] = []
    i = 0
    while len(ordered) < len(ids):
        for r in racks:
            if i < len(by_rack[r]):
                ordered.append(by_rack[r][i])
        i += 1
    n = len(ordered)
    n_racks = len(racks)
    first = rng.randrange(n)
    shift = rng.randrange(n)
    out: dict[int, list[int]] = {}
    for k in range(num_partitions):
        cur = start_partition + k
        if cur > 0 and cur % n == 0:
            shift += 1
        leader = ordered[(cur + first) % n]
        reps = [leader]
        used_racks = {brokers[leader]}
        j = (cur + first) % n
        step = 1 + shift % max(1, n - 1)
        tries = 0
        while len(reps) < rf and tries < 4 * n:
            j = (j + step) % n if tries < n else (j + 1) % n
            tries += 1
            b = ordered[j]
            if b in reps:
                continue
            if len(used_racks) < n_racks and brokers[b] in used_racks:
                continue
            reps.append(b)
            used_racks.add(brokers[b])
        if len(reps) < rf:
            reps += [b for b in ordered if b not in reps][:rf - len(reps)]
        out[cur] = reps
    return out


class ZkController(Controller):
    """One broker's view of the ZooKeeper cluster; used from its event loop only."""

    def __init__(self, config: BrokerConfig, broker=None):
        self._cfg = config
        self.broker = broker
        from controller.zookeeper.zkauth import zk_security
        security = zk_security(bool(config.get("zookeeper.set.acl")), get=config.get)
        if security.identity:
            log.info("ZooKeeper identity %s%s", security.identity,
                     " (znodes created with secure ACLs)" if security.set_acl else "")
        self.bridge = ZkBridge(config.zookeeper_connect, config.get("zookeeper.session.timeout.ms"),
                               config.zookeeper_connection_timeout_ms(), on_state=self._on_zk_state,
                               security=security)
        self._broker_id = config.broker_id
        self._cluster_id = ""
        self.broker_epoch = -1
        self._info: BrokerInfo | None = None
        self._registered = False
        self._own_node = False           # our /brokers/ids node exists, created by this session
        # set by the first UpdateMetadata after this broker registered: the controller's full
        # picture has arrived (the broker holds client requests until then, see broker/server.py)
        self.metadata_ready = asyncio.Event()
        # metadata cache (fed by UpdateMetadata)
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, str] = {}
        self._brokers: dict[int, BrokerInfo] = {}
        self._controller_id = -1
        self.max_controller_epoch = 0
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._broker_configs: dict[str, dict[str, str]] = {}
        # KIP-848 group configs, in /config/groups/<group> (not a path of Kafka's ZooKeeper mode,
        # whose brokers have no group configs; created only when a group gets one)
        self._group_configs: dict[str, dict[str, str]] = {}
        # KIP-714 client metrics subscriptions, in /config/client-metrics/<sanitized name> (Kafka's
        # ConfigType "client-metrics"; its ZooKeeper-mode brokers keep none, so likewise created
        # only when a subscription is first set)
        self._client_metrics: dict[str, dict[str, str]] = {}
        self._last_config_change = -1
        self._config_changes_seen = False
        self._subscribers: list[Callable[[Event], None]] = []
        self._cache_waiters: list[asyncio.Future] = []
        self.role = None                 # ControllerRole while this broker is the controller
        self._electing = False
        self._elect_again = False
        self._stopped = False
        self._ctrl_conn = None           # connection to the controller (AlterPartition, ...)
        self._ctrl_conn_target = None
        self._ctrl_lock = asyncio.Lock()
        self.security = ZkSecurityStore(self.bridge, bool((config.get("authorizer.class.name") or "").strip()))
        self.quota_store = ZkQuotaStore(self.bridge, on_change=self._quotas_changed)
        self.token_store = ZkTokenStore(self.bridge, bool(config.get("delegation.token.secret.key")
                                                          or config.get("delegation.token.master.key")))
        self.feature_store = ZkFeatureStore(self.bridge)

    # ------------------------------------------------------------------ properties
    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def controller_id(self) -> int:
        return self._controller_id

    @property
    def broker_id(self) -> int:
        return self._broker_id

    @property
    def config(self) -> BrokerConfig:
        return self._cfg

    @property
    def is_active_controller(self) -> bool:
        return self.role is not None and self.role.active

    # ------------------------------------------------------------------ start / stop
    async def start(self) -> None:
        await self.bridge.start()
        b = self.bridge
        for p in Z.PERSISTENT_PATHS:
            await b.ensure_path(p)
        try:
            data, _ = await b.get(Z.CLUSTER_ID)
            self._cluster_id = Z.decode_cluster_id(data)
        except NoNodeError:
            cid = new_cluster_id()
            try:
                await b.create(Z.CLUSTER_ID, Z.encode_cluster_id(cid), makepath=True)
                self._cluster_id = cid
                log.info("Created cluster id %s", cid)
            except NodeExistsError:
                data, _ = await b.get(Z.CLUSTER_ID)
                self._cluster_id = Z.decode_cluster_id(data)
        if self._broker_id < 0:
            self._broker_id = await self._generate_broker_id()
        await self._load_broker_configs()
        await self._load_group_configs()
        await self._load_client_metrics()
        await self.security.start()
        await self.token_store.start()
        await self.feature_store.load()
        await self.quota_store.load()
        await self._watch_config_changes()
        log.info("ZooKeeper controller client started: cluster id %s, broker %d", self._cluster_id, self._broker_id)

    async def _generate_broker_id(self) -> int:
        from storage.meta_properties import read_properties
        for d in self._cfg.log_dirs():
            path = os.path.join(d, "meta.properties")
            if os.path.exists(path):
                props = read_properties(path)
                bid = int(props.get("broker.id", "-1"))
                if bid >= 0:
                    return bid
        if not self._cfg.get("broker.id.generation.enable"):
            raise ConfigError("broker.id is not set and broker.id.generation.enable is false", "broker.id")
        stat = await self.bridge.set(Z.BROKER_SEQID, b"")
        bid = stat.version + self._cfg.get("reserved.broker.max.id")
        log.info("Generated broker id %d from %s", bid, Z.BROKER_SEQID)
        return bid

    async def stop(self) -> None:
        self._stopped = True
        self.security.stop()
        self.token_store.stop()
        self.feature_store.stop()
        if self.role is not None:
            await self.role.resign("broker shutting down")
            self.role = None
        if self._ctrl_conn is not None:
            await self._ctrl_conn.close()
            self._ctrl_conn = None
        await self.bridge.stop()

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)
        return unsubscribe

    def _emit(self, event: Event) -> None:
        loop = asyncio.get_running_loop()
        for cb in list(self._subscribers):
            loop.call_soon(cb, event)

    # ------------------------------------------------------------------ session
    def _on_zk_state(self, state: str) -> None:
        if self._stopped:
            return
        log.info("ZooKeeper session state: %s", state)
        if state == "LOST":
            self._registered = False
            self._own_node = False
            if self.role is not None:
                role, self.role = self.role, None
                asyncio.ensure_future(role.resign("ZooKeeper session expired"))
            self._controller_id = -1
        elif state == "RECONNECTED_NEW_SESSION":
            asyncio.ensure_future(self._after_new_session())

    async def _after_new_session(self) -> None:
        try:
            await self._watch_config_changes()
            await self.security.load_users()
            await self.token_store.load()
            await self.feature_store.load()
            await self.quota_store.load()
            self._quotas_changed("*")
            if self.security.acls_enabled:
                await self.security.load_acls()
            if self._info is not None:
                await self._register(self._info)
                await self.elect()
        except Exception:
            log.exception("re-registration after a new ZooKeeper session failed")

    # ------------------------------------------------------------------ registration
    async def register_broker(self, info: BrokerInfo) -> None:
        self._info = BrokerInfo(info.id, list(info.endpoints), info.rack)
        await self._register(self._info)
        await self.elect()

    async def _register(self, info: BrokerInfo) -> None:
        b = self.bridge
        path = Z.broker_path(info.id)
        # No other registered broker may advertise one of our endpoints.
        mine = {(h, p) for _n, h, p, _s in info.endpoints}
        for child in await b.get_children(Z.BROKER_IDS):
            if child == str(info.id):
                continue
            try:
                data, _ = await b.get(f"{Z.BROKER_IDS}/{child}")
                other = Z.decode_broker(int(child), data)
            except (NoNodeError, Z.ZnodeFormatError, ValueError):
                continue
            clash = mine & {(h, p) for _n, h, p, _s in other.endpoints}
            if clash:
                raise ZkStartupError(f"Broker {child} already advertises {sorted(clash)}")
        payload = Z.encode_broker(info.endpoints, info.rack)
        session = b.session_id
        loop = asyncio.get_running_loop()
        wait_until = loop.time() + 1.5 * self._cfg.get("zookeeper.session.timeout.ms") / 1000
        while True:
            res = await b.transaction(lambda t: (t.create(path, b"", ephemeral=True),
                                                 t.set_data(path, payload, 0)))
            if not any(isinstance(r, Exception) for r in res):
                break
            try:
                _, stat = await b.get(path)
            except NoNodeError:
                continue
            if stat.ephemeralOwner == session:
                await b.set(path, payload)
                break
            if self.broker_epoch >= 0 and stat.czxid == self.broker_epoch:
                # our own previous (expired) session still holds it: replace it
                try:
                    await b.delete(path)
                except NoNodeError:
                    pass
                continue
            if loop.time() < wait_until:
                # e.g. this broker was killed and restarted before its old session expired
                log.info("%s is still held by session 0x%x; waiting for it to expire", path, stat.ephemeralOwner)
                await asyncio.sleep(1.0)
                continue
            raise ZkStartupError(f"Error while creating ephemeral at {path}, node already exists "
                                 f"and owner '0x{stat.ephemeralOwner:x}' does not match current session "
                                 f"'0x{session:x}'")
        self._own_node = True
        _, stat = await b.get(path)
        self.broker_epoch = stat.czxid
        self._registered = True
        if info.id not in self._brokers:
            self._brokers[info.id] = BrokerInfo(info.id, list(info.endpoints), info.rack, stat.czxid)
        log.info("Registered broker %d at path %s with addresses: %s, czxid (broker epoch): %d",
                 info.id, path, [f"{n}://{h}:{p}" for n, h, p, _ in info.endpoints], stat.czxid)

    # ------------------------------------------------------------------ election
    async def elect(self) -> None:
        """Run the election (again): learn the controller, or become it."""
        if self._electing:
            self._elect_again = True
            return
        self._electing = True
        try:
            while True:
                self._elect_again = False
                await self._elect_once()
                if not self._elect_again:
                    break
        except Exception:
            log.exception("controller election failed")
        finally:
            self._electing = False

    def _controller_watch_fired(self) -> None:
        if not self._stopped:
            asyncio.ensure_future(self.elect())

    async def _elect_once(self) -> None:
        if self._stopped or not self._registered:
            return
        b = self.bridge
        watch = b.watcher(self._controller_watch_fired)
        stat = await b.exists(Z.CONTROLLER, watch=watch)
        if stat is not None:
            try:
                data, _ = await b.get(Z.CONTROLLER)
                cid = Z.decode_controller(data)
            except NoNodeError:
                self._elect_again = True
                return
            except Z.ZnodeFormatError as e:
                log.error("cannot read %s: %s", Z.CONTROLLER, e)
                return
            self._controller_id = cid
            if self.role is not None and cid != self._broker_id:
                role, self.role = self.role, None
                await role.resign(f"broker {cid} is now the controller")
            return
        if self.role is not None:
            role, self.role = self.role, None
            await role.resign("/controller disappeared")
        # 2. read (or create) the epoch
        try:
            data, st = await b.get(Z.CONTROLLER_EPOCH)
            epoch, version = Z.decode_controller_epoch(data), st.version
        except NoNodeError:
            try:
                await b.create(Z.CONTROLLER_EPOCH, Z.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            data, st = await b.get(Z.CONTROLLER_EPOCH)
            epoch, version = Z.decode_controller_epoch(data), st.version
        me = self._broker_id
        res = await b.transaction(lambda t: (
            t.create(Z.CONTROLLER, Z.encode_controller(me), ephemeral=True),
            t.set_data(Z.CONTROLLER_EPOCH, Z.encode_controller_epoch(epoch + 1), version)))
        if any(isinstance(r, Exception) for r in res):
            try:
                data, _ = await b.get(Z.CONTROLLER, watch=b.watcher(self._controller_watch_fired))
                cid = Z.decode_controller(data)
            except NoNodeError:
                self._elect_again = True
                return
            data, st = await b.get(Z.CONTROLLER_EPOCH)
            if cid == me and Z.decode_controller_epoch(data) == epoch + 1:
                await self._become_controller(epoch + 1, st.version)
            else:
                self._controller_id = cid
            return
        # re-arm the watch on the node we created (data change / deletion)
        await b.exists(Z.CONTROLLER, watch=b.watcher(self._controller_watch_fired))
        await self._become_controller(epoch + 1, version + 1)

    async def _become_controller(self, epoch: int, epoch_zk_version: int) -> None:
        from controller.zookeeper.role import ControllerRole
        self._controller_id = self._broker_id
        log.info("[Controller id=%d] won the election with epoch %d (zkVersion %d)",
                 self._broker_id, epoch, epoch_zk_version)
        self.role = ControllerRole(self, epoch, epoch_zk_version)
        await self.role.start()

    async def resign_from_role(self, role, reason: str) -> None:
        """Called by a role that found itself fenced."""
        if self.role is role:
            self.role = None
            await role.resign(reason)
            asyncio.ensure_future(self.elect())

    # ------------------------------------------------------------------ metadata cache
    def brokers(self) -> list[BrokerInfo]:
        if not self._brokers and self._info is not None:
            return [self._info]
        return [self._brokers[b] for b in sorted(self._brokers)]

    def live_broker_ids(self) -> set[int]:
        return set(self._brokers)

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        name = self._by_id.get(topic_id)
        return self._topics.get(name) if name else None

    def topic_configs(self, name: str) -> dict[str, str] | None:
        return self._topic_configs.get(name)

    async def ensure_topic_configs(self, names: Iterable[str]) -> None:
        """Read ``/config/topics/<t>`` for topics whose overrides are not cached yet."""
        for name in set(names):
            if name not in self._topic_configs:
                await self._read_topic_config(name)

    # Kafka's ZooKeeper-mode DescribeConfigs (topics), DescribeUserScramCredentials and
    # DescribeClientQuotas read ZooKeeper on each request, so a write through one broker is seen at
    # once through another; these re-read what such a request names before it is answered.  The
    # change notification that follows still applies the change (it does not compare with the cache).
    # If ZooKeeper cannot be read within REFRESH_TIMEOUT_S, the request is answered from the cache.
    async def refresh_topic_configs(self, names: Iterable[str]) -> None:
        async def read():
            for name in dict.fromkeys(names):
                if name in self._topics:
                    await self._read_topic_config(name)
        await self._refresh("topic configs", read())

    async def refresh_scram_credentials(self, users: Iterable[str] | None) -> None:
        await self._refresh("SCRAM credentials", self.security.refresh_users(users))

    async def refresh_client_quotas(self) -> None:
        await self._refresh("client quotas", self.quota_store.refresh())

    async def _refresh(self, what: str, reading) -> None:
        try:
            await asyncio.wait_for(reading, REFRESH_TIMEOUT_S)
        except Exception as e:
            log.info("reading %s from ZooKeeper failed (%s: %s); answering from the cache", what,
                     type(e).__name__, e)

    async def _read_topic_config(self, name: str) -> dict[str, str]:
        try:
            data, _ = await self.bridge.get(Z.config_path("topics", name))
            cfg = Z.decode_config(data, Z.config_path("topics", name))
        except NoNodeError:
            cfg = {}
        except Z.ZnodeFormatError as e:
            log.error("%s", e)
            cfg = {}
        self._topic_configs[name] = cfg
        info = self._topics.get(name)
        if info is not None and info.configs != cfg:
            self._topics[name] = TopicInfo(info.name, info.topic_id, info.partitions, dict(cfg), info.internal)
        return cfg

    def apply_update_metadata(self, req) -> None:
        """Merge an UpdateMetadata request (already epoch-checked) into the cache."""
        if self._registered or (self._own_node and any(lb.id == self._broker_id for lb in req.live_brokers)):
            # the first one may come before our registration call returns: the controller
            # watches /brokers/ids and sends it as soon as our node is there (this broker then
            # waited METADATA_WAIT_S for another that nothing was going to send).  Not one that
            # came while an expiring session of ours still held the node: that is stale.
            self.metadata_ready.set()
        self._controller_id = req.controller_id
        brokers: dict[int, BrokerInfo] = {}
        for lb in req.live_brokers:
            eps = [(e.listener or SECURITY_PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT"), e.host, e.port,
                    SECURITY_PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT")) for e in lb.endpoints]
            old = self._brokers.get(lb.id)
            brokers[lb.id] = BrokerInfo(lb.id, eps, lb.rack, old.epoch if old else -1)
        added = [b for b in brokers if b not in self._brokers]
        removed = [b for b in self._brokers if b not in brokers]
        self._brokers = brokers
        changed: dict[str, list[int]] = {}
        created: list[str] = []
        deleted: list[tuple[str, uuid.UUID]] = []
        new_parts: dict[str, dict[int, PartitionState]] = {}
        ids: dict[str, uuid.UUID] = {}
        for ts in req.topic_states:
            name = ts.topic_name
            ids[name] = ts.topic_id
            for ps in ts.partition_states:
                new_parts.setdefault(name, {})[ps.partition_index] = ps
        for name, parts in new_parts.items():
            info = self._topics.get(name)
            cur = dict(info.partitions) if info else {}
            for p, ps in parts.items():
                if ps.leader == -2:
                    cur.pop(p, None)
                else:
                    cur[p] = PartitionState(p, list(ps.replicas), ps.leader, ps.leader_epoch, list(ps.isr),
                                            ps.zk_version, offline_replicas=list(ps.offline_replicas or ()))
                changed.setdefault(name, []).append(p)
            if not cur:
                if info is not None:
                    del self._topics[name]
                    self._by_id.pop(info.topic_id, None)
                    self._topic_configs.pop(name, None)
                    deleted.append((name, info.topic_id))
                changed.pop(name, None)
                continue
            tid = ids[name]
            if (info is None or info.topic_id != tid) and tid is not None and tid.int != 0:
                topic_id = tid
            else:
                topic_id = info.topic_id if info else random_kafka_uuid()
            cfgs = self._topic_configs.get(name)
            if info is None:
                created.append(name)
                if cfgs is None:
                    asyncio.ensure_future(self._read_config_and_emit(name))
            self._topics[name] = TopicInfo(name, topic_id, cur, dict(cfgs or (info.configs if info else {})),
                                           is_internal_topic(name))
            self._by_id[topic_id] = name
        if added or removed:
            self._emit(BrokersChanged(added=added, removed=removed))
        if created or deleted or changed:
            self._emit(TopicsChanged(created=created, deleted=deleted, changed=changed))
        self._wake_cache_waiters()

    async def _read_config_and_emit(self, name: str) -> None:
        try:
            await self._read_topic_config(name)
        except Exception as e:
            log.warning("reading the config of %s failed: %s", name, e)
            return
        self._emit(ConfigsChanged("topics", name))

    def _wake_cache_waiters(self) -> None:
        waiters, self._cache_waiters = self._cache_waiters, []
        for f in waiters:
            if not f.done():
                f.set_result(None)

    async def wait_for_cache(self, cond: Callable[[], bool], timeout: float = PROPAGATION_WAIT_S) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not cond():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            fut = loop.create_future()
            self._cache_waiters.append(fut)
            try:
                await asyncio.wait_for(fut, min(remaining, 0.5))
            except asyncio.TimeoutError:
                pass
        return True

    # ------------------------------------------------------------------ ZooKeeper reads for admin
    async def _zk_live_brokers(self) -> dict[int, str | None]:
        out: dict[int, str | None] = {}
        for child in await self.bridge.get_children(Z.BROKER_IDS):
            try:
                data, _ = await self.bridge.get(f"{Z.BROKER_IDS}/{child}")
                reg = Z.decode_broker(int(child), data)
            except (NoNodeError, Z.ZnodeFormatError, ValueError):
                continue
            out[reg.id] = reg.rack
        return out

    async def _zk_topic_names(self) -> set[str]:
        return set(await self.bridge.get_children(Z.BROKER_TOPICS))

    # ------------------------------------------------------------------ topics
    async def create_topics(self, specs: list[CreatableTopic], validate_only: bool = False) -> list[TopicResult]:
        existing = await self._zk_topic_names()
        marked = set(await self.bridge.get_children(Z.DELETE_TOPICS))
        live = await self._zk_live_brokers()
        counts = Counter(s.name for s in specs)
        results: list[TopicResult] = []
        created: list[str] = []
        place = functools.partial(assign_replicas_rack_aware, live)
        for spec in specs:
            configs = {k: v for k, v in (spec.configs or {}).items() if v is not None}
            # a topic being deleted is checked first, as AdminZkClient does (the metadata cache
            # Kafka checks before that no longer has it)
            res, assignment = check_create_topic(spec, existing - marked, live, self._cfg, place, configs,
                                                 counts[spec.name] > 1)
            if res.error_code == NONE and spec.name in marked:
                res, assignment = TopicResult(spec.name, TOPIC_ALREADY_EXISTS,
                                              f"Topic '{spec.name}' is marked for deletion."), None
            results.append(res)
            if res.error_code or validate_only:
                continue
            tid = random_kafka_uuid()
            try:
                cpath = Z.config_path("topics", spec.name)
                try:
                    await self.bridge.create(cpath, Z.encode_config(configs), makepath=True)
                except NodeExistsError:
                    await self.bridge.set(cpath, Z.encode_config(configs))
                await self.bridge.create(Z.topic_path(spec.name),
                                         Z.encode_topic(Z.TopicAssignment(assignment, tid)), makepath=True)
            except NodeExistsError:
                res.error_code, res.error_message = TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists."
                continue
            self._topic_configs[spec.name] = configs
            res.topic_id = tid
            existing.add(spec.name)
            created.append(spec.name)
            log.info("Creating topic %s with configuration %s and initial partition assignment %s",
                     spec.name, configs, assignment)
        if created:
            await self.wait_for_cache(lambda: all(
                (t := self._topics.get(n)) is not None and all(s.leader >= 0 for s in t.partitions.values())
                for n in created))
        return results

    async def delete_topics(self, names_or_ids: Iterable[str | uuid.UUID]) -> list[TopicResult]:
        # a topic whose deletion has started is unknown, as Kafka's metadata cache drops it then
        existing = await self._zk_topic_names() - set(await self.bridge.get_children(Z.DELETE_TOPICS))
        enabled = self._cfg.get("delete.topic.enable")
        results = []
        doomed = []
        for x in names_or_ids:
            name, missing = resolve_topic_to_delete(x, self._by_id, existing)
            if missing is not None:
                results.append(missing)
                continue
            info = self._topics.get(name)
            tid = info.topic_id if info else None
            if not enabled:
                results.append(TopicResult(name, TOPIC_DELETION_DISABLED, "Topic deletion is disabled.", topic_id=tid))
                continue
            try:
                await self.bridge.create(Z.delete_topic_path(name), b"", makepath=True)
            except NodeExistsError:
                pass
            doomed.append(name)
            results.append(TopicResult(name, NONE, None, tid))
        if doomed:
            await self.wait_for_cache(lambda: all(n not in self._topics for n in doomed))
        return results

    async def create_partitions(self, topic: str, new_total: int, assignments: list[list[int]] | None = None,
                                validate_only: bool = False) -> TopicResult:
        # the name comes from the request: only a listed topic is read ("" would read the
        # /brokers/topics node itself, a name with "/" some other node)
        if topic not in await self._zk_topic_names():
            return TopicResult(topic, UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        try:
            data, stat = await self.bridge.get(Z.topic_path(topic))
        except NoNodeError:
            return TopicResult(topic, UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        if topic in set(await self.bridge.get_children(Z.DELETE_TOPICS)):
            return TopicResult(topic, INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion.")   # Kafka's
        a = Z.decode_topic(topic, data)
        cur = len(a.partitions)
        rf = len(a.partitions[0])
        live = await self._zk_live_brokers()
        place = functools.partial(assign_replicas_rack_aware, live)
        bad, new_assign = plan_partition_increase(topic, cur, new_total, rf, bool(a.adding or a.removing),
                                                  assignments, live, place)
        if bad is not None:
            return bad
        res = TopicResult(topic, NONE, None, a.topic_id, new_total, rf)
        if validate_only:
            return res
        a.partitions.update(new_assign)
        try:
            await self.bridge.set(Z.topic_path(topic), Z.encode_topic(a), stat.version)
        except BadVersionError:
            return TopicResult(topic, REASSIGNMENT_IN_PROGRESS, f"The assignment of '{topic}' changed concurrently.")
        log.info("Increasing partitions of %s from %d to %d", topic, cur, new_total)
        await self.wait_for_cache(lambda: (t := self._topics.get(topic)) is not None
                                  and len(t.partitions) >= new_total)
        return res

    # ------------------------------------------------------------------ configs
    async def _write_config(self, entity_type: str, entity: str, configs: dict[str, str]) -> None:
        path = Z.config_path(entity_type, entity)
        data = Z.encode_config(configs)
        try:
            await self.bridge.set(path, data)
        except NoNodeError:
            await self.bridge.create(path, data, makepath=True)
        await self.bridge.create(f"{Z.CONFIG_CHANGES}/{Z.CONFIG_CHANGE_PREFIX}",
                                 Z.encode_config_change(f"{entity_type}/{entity}"), sequence=True)

    async def alter_topic_configs(self, topic: str, configs: dict[str, str], validate_only: bool = False) -> ApiResult:
        if topic not in await self._zk_topic_names():
            return ApiResult(UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        bad = check_topic_configs(self._cfg, configs)
        if bad is not None:
            return bad
        if validate_only:
            return ApiResult()
        await self._write_config("topics", topic, dict(configs))
        self._topic_configs[topic] = dict(configs)
        info = self._topics.get(topic)
        if info is not None:
            self._topics[topic] = TopicInfo(info.name, info.topic_id, info.partitions, dict(configs), info.internal)
        self._emit(ConfigsChanged("topics", topic))
        log.info("Updated config of topic %s: %s", topic, configs)
        return ApiResult()

    def broker_configs(self, broker_id: int | None) -> dict[str, str]:
        key = DEFAULT_BROKER_ENTITY if broker_id is None else str(broker_id)
        return dict(self._broker_configs.get(key, {}))

    def _apply_dynamic_to_config(self) -> None:
        apply_dynamic_broker_configs(self._cfg, self._broker_id, self._broker_configs)

    async def _load_broker_configs(self) -> None:
        await self._reencode_passwords()
        for entity in (DEFAULT_BROKER_ENTITY, str(self._broker_id)):
            await self._read_broker_config(entity)
        try:
            self._apply_dynamic_to_config()
        except ConfigError as e:
            log.error("invalid dynamic broker config in ZooKeeper: %s", e)

    async def _read_broker_config(self, entity: str) -> None:
        await self._read_entity_config("brokers", entity, self._broker_configs)
        stored = self._broker_configs.get(entity)
        # only this broker's own entity (and the default) are applied here; another broker's
        # passwords are its business, and may be under another secret
        if stored and entity in (DEFAULT_BROKER_ENTITY, str(self._broker_id)):
            self._decode_passwords(entity, stored)

    # Dynamic password configs are kept encoded in ZooKeeper, in Kafka's format and with its
    # password.encoder.* settings (broker/password_encoder.py), as a ZooKeeper-mode Kafka keeps them.
    def _encode_passwords(self, entity: str, configs: dict[str, str]) -> dict[str, str]:
        from broker.config import is_password_config
        from broker.password_encoder import PasswordEncoder, PasswordEncoderError
        out = dict(configs)
        names = [k for k, v in configs.items() if v is not None and is_password_config(k)]
        if not names:
            return out
        resource = f"ConfigResource(type=BROKER, name='{'' if entity == DEFAULT_BROKER_ENTITY else entity}')"
        if entity == DEFAULT_BROKER_ENTITY:
            raise ConfigError(f"Invalid config value for resource {resource}: Password config can be defined "
                              "only at broker level", names[0])
        encoder = PasswordEncoder.from_config(self._cfg)
        if encoder is None:
            raise ConfigError(f"Invalid config value for resource {resource}: Password encoder secret not "
                              "configured", "password.encoder.secret")
        try:
            for k in names:
                out[k] = encoder.encode(configs[k])
        except PasswordEncoderError as e:
            raise ConfigError(f"Invalid config value for resource {resource}: {e}", names[0]) from None
        return out

    def _decode_passwords(self, entity: str, stored: dict[str, str]) -> None:
        """Decode in place; a value that cannot be decoded is dropped with an error, as in Kafka.
        A value an older Odradek wrote unencoded is used, with a warning (re-encoded at start-up
        when a secret is set: _reencode_passwords)."""
        from broker.config import is_password_config
        from broker.password_encoder import PasswordEncoder, PasswordEncoderError, looks_encoded
        encoder = None
        for k in [k for k, v in stored.items() if v is not None and is_password_config(k)]:
            v = stored[k]
            if not looks_encoded(v):
                log.warning("dynamic password config %s of broker entity %s is stored unencoded (written by an "
                            "older Odradek); set password.encoder.secret to have it encoded", k, entity)
                continue
            try:
                encoder = encoder or PasswordEncoder.from_config(self._cfg)
                if encoder is None:
                    raise PasswordEncoderError("Password encoder secret not configured")
                stored[k] = encoder.decode(v)
            except (PasswordEncoderError, ConfigError) as e:
                log.error("Dynamic password config %s could not be decoded, ignoring: %s", k, e)
                del stored[k]

    async def _reencode_passwords(self) -> None:
        """Start-up: this broker's stored passwords that password.encoder.old.secret (or nothing,
        for an older Odradek's unencoded values) opens are written again with the current secret,
        as Kafka does when the secret changed."""
        from broker.config import is_password_config
        from broker.password_encoder import PasswordEncoder, PasswordEncoderError, looks_encoded
        entity = str(self._broker_id)
        path = Z.config_path("brokers", entity)
        try:
            data, _ = await self.bridge.get(path)
        except NoNodeError:
            return
        raw = Z.decode_config(data, path)
        names = [k for k, v in raw.items() if v is not None and is_password_config(k)]
        try:
            current = PasswordEncoder.from_config(self._cfg)
            old = PasswordEncoder.from_config(self._cfg, "password.encoder.old.secret")
        except ConfigError as e:
            log.error("password encoder: %s", e)
            return
        if not names or current is None:
            return
        changed = {}
        for k in names:
            v = raw[k]
            if not looks_encoded(v):
                changed[k] = current.encode(v)
                continue
            if old is None:
                continue
            try:
                current.decode(v)
                continue                    # already under the current secret
            except PasswordEncoderError:
                pass
            try:
                changed[k] = current.encode(old.decode(v))
            except PasswordEncoderError:
                pass                        # neither secret opens it: left as it is (dropped when read)
        if changed:
            await self._write_config("brokers", entity, {**raw, **changed})
            log.info("re-encoded dynamic password configs %s with the current password.encoder.secret",
                     sorted(changed))

    async def _read_entity_config(self, entity_type: str, entity: str, store: dict) -> None:
        """``store[entity]`` from ``/config/<entity_type>/<entity>`` (dropped when absent or empty)."""
        path = Z.config_path(entity_type, entity)
        try:
            data, _ = await self.bridge.get(path)
            cfg = Z.decode_config(data, path)
        except NoNodeError:
            cfg = {}
        if cfg:
            store[entity] = cfg
        else:
            store.pop(entity, None)

    async def alter_broker_configs(self, broker_id: int | None, configs: dict[str, str],
                                   validate_only: bool = False) -> ApiResult:
        try:
            entity, new_bc = altered_broker_configs(self._cfg, self._broker_id, self._broker_configs,
                                                    broker_id, configs)
        except ConfigError as e:
            return ApiResult(e.error_code, str(e))
        try:
            stored = self._encode_passwords(entity, configs)
        except ConfigError as e:
            return ApiResult(e.error_code, str(e))
        if validate_only:
            return ApiResult()
        await self._write_config("brokers", entity, stored)
        self._broker_configs = new_bc
        if entity in (DEFAULT_BROKER_ENTITY, str(self._broker_id)):
            self._apply_dynamic_to_config()
        self._emit(ConfigsChanged("brokers", entity))
        return ApiResult()

    async def _load_group_configs(self) -> None:
        try:
            groups = await self.bridge.get_children(f"{Z.CONFIG}/groups")
        except NoNodeError:
            return
        for g in groups:
            await self._read_group_config(g)

    async def _read_group_config(self, group: str) -> None:
        await self._read_entity_config("groups", group, self._group_configs)

    async def alter_group_configs(self, group: str, configs: dict[str, str],
                                  validate_only: bool = False) -> ApiResult:
        bad = check_group_configs(self._cfg, group, configs)
        if bad is not None or validate_only:
            return bad or ApiResult()
        await self._write_config("groups", group, dict(configs))
        await self._read_group_config(group)
        self._emit(ConfigsChanged("groups", group))
        log.info("Updated config of group %s: %s", group, configs)
        return ApiResult()

    async def _load_client_metrics(self) -> None:
        try:
            names = await self.bridge.get_children(f"{Z.CONFIG}/{CLIENT_METRICS_TYPE}")
        except NoNodeError:
            return
        for n in names:
            try:
                await self._read_client_metrics(n)
            except ValueError as e:         # a node name that is no sanitized name (bad escapes)
                log.warning("skipping %s/%s/%s: %s", Z.CONFIG, CLIENT_METRICS_TYPE, n, e)

    async def _read_client_metrics(self, node: str) -> str:
        """Refresh one subscription from its node (named by ``Z.sanitize``); returns its name."""
        name = Z.desanitize(node)
        cfg: dict[str, dict[str, str]] = {}
        await self._read_entity_config(CLIENT_METRICS_TYPE, node, cfg)
        if cfg:
            self._client_metrics = {**self._client_metrics, name: cfg[node]}
        elif name in self._client_metrics:
            self._client_metrics = {n: c for n, c in self._client_metrics.items() if n != name}
        return name

    async def alter_client_metrics(self, name: str, configs: dict[str, str],
                                   validate_only: bool = False) -> ApiResult:
        bad = check_client_metrics_configs(name, configs)
        if bad is None and Z.sanitize(name) in (".", ".."):
            bad = ApiResult(INVALID_REQUEST, f"Client metrics subscription name {name} is not a legal "
                                             "ZooKeeper node name")
        if bad is not None or validate_only:
            return bad or ApiResult()
        await self._write_config(CLIENT_METRICS_TYPE, Z.sanitize(name), dict(configs))
        await self._read_client_metrics(Z.sanitize(name))
        self._emit(ConfigsChanged(CLIENT_METRICS_TYPE, name))
        log.info("Updated client metrics subscription %s: %s", name, configs)
        return ApiResult()

    # ------------------------------------------------------------------ config change notifications
    async def _watch_config_changes(self) -> None:
        await self._process_config_changes()

    def _config_changes_fired(self) -> None:
        if not self._stopped:
            asyncio.ensure_future(self._process_config_changes())

    async def _process_config_changes(self) -> None:
        b = self.bridge
        try:
            children = await b.get_children(Z.CONFIG_CHANGES, watch=b.watcher(self._config_changes_fired))
        except Exception as e:
            log.warning("reading %s failed: %s", Z.CONFIG_CHANGES, e)
            return
        first = not self._config_changes_seen
        self._config_changes_seen = True
        async for seq, path, data in new_notifications(b, Z.CONFIG_CHANGES, children, Z.CONFIG_CHANGE_PREFIX,
                                                       self._last_config_change):
            self._last_config_change = seq
            try:
                if data is None:
                    raise NoNodeError(path)
                etype, name = Z.decode_config_change(data)
            except (NoNodeError, Z.ZnodeFormatError, KeyError) as e:
                log.debug("skipping config change %s: %s", path, e)
                continue
            if first and etype == "topics":
                continue               # start-up: topic configs are read when topics appear
            try:
                if etype == "topics":
                    if name in self._topic_configs or name in self._topics:
                        await self._read_topic_config(name)
                        self._emit(ConfigsChanged("topics", name))
                        if self.role is not None:
                            self.role.enqueue("topic_config_changed", name)
                elif etype == "brokers":
                    await self._read_broker_config(name)
                    if name in (DEFAULT_BROKER_ENTITY, str(self._broker_id)):
                        try:
                            self._apply_dynamic_to_config()
                        except ConfigError as e:
                            log.error("invalid dynamic broker config: %s", e)
                    self._emit(ConfigsChanged("brokers", name))
                elif etype == "groups":
                    await self._read_group_config(name)
                    self._emit(ConfigsChanged("groups", name))
                elif etype == CLIENT_METRICS_TYPE:
                    self._emit(ConfigsChanged(CLIENT_METRICS_TYPE, await self._read_client_metrics(name)))
                elif etype == "users":
                    await self.security.user_changed(name)
                    await self.quota_store.entity_changed(f"users/{name}")
                elif etype == "clients":
                    await self.quota_store.entity_changed(f"clients/{name}")
                elif etype == "ips":
                    await self.quota_store.entity_changed(f"ips/{name}")
            except Exception:
                log.exception("applying config change %s failed", path)

    # ------------------------------------------------------------------ ACLs, SCRAM credentials
    def acls(self) -> tuple:
        return self.security.acls

    async def create_acls(self, bindings: list) -> ApiResult:
        return await self.security.create_acls(bindings)

    async def delete_acls(self, bindings: list) -> ApiResult:
        return await self.security.delete_acls(bindings)

    def scram_credentials(self) -> dict[str, dict[str, str]]:
        return self.security.scram

    async def alter_scram_credentials(self, upsertions, deletions) -> ApiResult:
        return await self.security.alter_scram_credentials(upsertions, deletions)

    # ------------------------------------------------------------------ finalized features
    def finalized_features(self):
        return self.feature_store.epoch, self.feature_store.features

    async def update_finalized_features(self, features: dict[str, int]) -> ApiResult:
        return await self.feature_store.write(features)

    # ------------------------------------------------------------------ delegation tokens
    def delegation_tokens(self) -> dict[str, dict]:
        return self.token_store.tokens

    async def put_delegation_token(self, token_id: str, doc: dict) -> ApiResult:
        return await self.token_store.put(token_id, doc)

    async def delete_delegation_token(self, token_id: str) -> ApiResult:
        return await self.token_store.delete(token_id)

    # ------------------------------------------------------------------ client quotas
    def client_quotas(self) -> dict[tuple, dict[str, float]]:
        return self.quota_store.quotas

    async def alter_client_quotas(self, entries, validate_only: bool = False) -> list[ApiResult]:
        return await self.quota_store.alter(entries, validate_only)

    def _quotas_changed(self, path: str) -> None:
        self._emit(ConfigsChanged("client-quotas", path))

    # ------------------------------------------------------------------ requests to the controller
    def _endpoint_of(self, broker_id: int):
        name = self._cfg.controller_to_broker_listener_name()
        info = self._brokers.get(broker_id)
        if info is None and self._info is not None and broker_id == self._broker_id:
            info = self._info
        if info is None:
            return None
        for n, h, p, _ in info.endpoints:
            if n == name:
                return h, p
        return None

    async def _zk_endpoint_of(self, broker_id: int):
        try:
            data, _ = await self.bridge.get(Z.broker_path(broker_id))
            reg = Z.decode_broker(broker_id, data)
        except (NoNodeError, Z.ZnodeFormatError):
            return None
        name = self._cfg.controller_to_broker_listener_name()
        for n, h, p, _ in reg.endpoints:
            if n == name:
                return h, p
        return None

    async def send_to_controller(self, request, timeout: float = 30.0, version: int | None = None):
        """Send to the active controller; retries NOT_CONTROLLER / connection errors until ``timeout``."""
        from broker.security.interbroker import connect_to_broker
        from protocol.client import KafkaConnectionError
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last_err: Exception | None = None
        while loop.time() < deadline and not self._stopped:
            cid = self._controller_id
            if cid < 0:
                await asyncio.sleep(0.1)
                continue
            try:
                async with self._ctrl_lock:
                    if self._ctrl_conn is None or self._ctrl_conn.closed or self._ctrl_conn_target != cid:
                        if self._ctrl_conn is not None:
                            await self._ctrl_conn.close()
                            self._ctrl_conn = None
                        ep = self._endpoint_of(cid) or await self._zk_endpoint_of(cid)
                        if ep is None:
                            raise KafkaConnectionError(f"no endpoint for controller {cid}")
                        self._ctrl_conn = await connect_to_broker(
                            self._cfg, ep[0], ep[1], listener=self._cfg.controller_to_broker_listener_name(),
                            client_id=f"broker-{self._broker_id}-to-controller",
                            timeout=min(5.0, max(0.1, deadline - loop.time())))
                        self._ctrl_conn_target = cid
                    conn = self._ctrl_conn
                resp = await conn.send(request, version=version, timeout=max(0.1, deadline - loop.time()))
                if getattr(resp, "error_code", 0) == NOT_CONTROLLER:
                    await asyncio.sleep(0.1)
                    continue
                return resp
            except (KafkaConnectionError, OSError, asyncio.TimeoutError) as e:
                last_err = e
                if self._ctrl_conn is not None:
                    await self._ctrl_conn.close()
                    self._ctrl_conn = None
                await asyncio.sleep(0.2)
        raise TimeoutError(f"no answer from the controller: {last_err}")

    async def propagate_log_dir_event(self) -> None:
        """Tell the controller a log dir of this broker failed (Kafka's propagateLogDirEvent): it
        then asks this broker, with LeaderAndIsr, which replicas are offline."""
        await self.bridge.create(f"{Z.LOG_DIR_EVENT_NOTIFICATION}/{Z.LOG_DIR_EVENT_PREFIX}",
                                 Z.encode_log_dir_event(self.broker_id), sequence=True, makepath=True)

    async def alter_partition_isr(self, topic: str, partition: int, leader_epoch: int, new_isr: list[int],
                                  partition_epoch: int, broker_id: int | None = None,
                                  broker_epoch: int = -1, leader_recovery_state: int = 0) -> AlterPartitionResult:
        from protocol.messages import AlterPartitionRequest as AP
        req = AP(broker_id=self._broker_id if broker_id is None else broker_id,
                 broker_epoch=self.broker_epoch if broker_epoch == -1 else broker_epoch,
                 topics=[AP.TopicData(topic_name=topic, partitions=[AP.PartitionData(
                     partition_index=partition, leader_epoch=leader_epoch, new_isr=list(new_isr),
                     leader_recovery_state=leader_recovery_state, partition_epoch=partition_epoch)])])
        try:
            resp = await self.send_to_controller(req, timeout=10.0, version=1)
        except TimeoutError:
            return AlterPartitionResult(NOT_CONTROLLER)
        if resp.error_code:
            return AlterPartitionResult(resp.error_code)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    return AlterPartitionResult(p.error_code)
                return AlterPartitionResult(NONE, PartitionState(partition, [], p.leader_id, p.leader_epoch,
                                                                 list(p.isr), p.partition_epoch))
        return AlterPartitionResult(UNKNOWN_TOPIC_OR_PARTITION)

    async def allocate_producer_ids(self, broker_id: int, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> tuple[int, int]:
        b = self.bridge
        for _ in range(100):
            try:
                data, stat = await b.get(Z.LATEST_PRODUCER_ID_BLOCK)
            except NoNodeError:
                await b.ensure_path(Z.LATEST_PRODUCER_ID_BLOCK)
                continue
            cur = Z.decode_producer_id_block(data)
            start = 0 if cur is None else cur[2] + 1
            end = start + block_size - 1
            try:
                await b.set(Z.LATEST_PRODUCER_ID_BLOCK, Z.encode_producer_id_block(broker_id, start, end), stat.version)
            except BadVersionError:
                await asyncio.sleep(random.random() * 0.05)
                continue
            return start, block_size
        raise RuntimeError("could not allocate a producer id block (too much contention)")

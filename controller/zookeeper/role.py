"""The controller role: what the broker that won ``/controller`` does until it resigns.

How this works
--------------
* One event queue, one coroutine (``_run``): ZooKeeper watches (kazoo threads -> the loop via
  ``ZkBridge.watcher``), broker requests (ControlledShutdown, AlterPartition, ElectLeaders,
  reassignments) and timers only ``enqueue``; the coroutine is the only code that reads or
  changes the controller's state (live brokers, assignments, partition states, deletions,
  reassignments).
* Every ZooKeeper write is a ``multi`` that first checks ``/controller_epoch`` against the
  zkVersion won at election; a failed check means another controller exists: resign.  Partition
  state writes are conditional on the state znode's version (the partition epoch).
* After each event the changes go to brokers in one batch (``_Batch``): LeaderAndIsr to the
  replicas concerned, UpdateMetadata to every live broker, StopReplica to removed replicas,
  through one ``BrokerChannel`` per live broker.
* Leader election follows Kafka's algorithms (see ``kafka-facts/zookeeper-layout.md``): new
  partitions, offline partitions (ISR first; out-of-sync only with unclean election),
  controlled shutdown, preferred replica, reassignment.
* Replicas on a failed log dir (``offline_replicas``, Kafka's replicasOnOfflineDirs): a broker
  answers LeaderAndIsr with KAFKA_STORAGE_ERROR for them, after a
  ``/log_dir_event_notification`` from that broker asks it.  Such a replica is neither elected
  nor kept in an ISR, and UpdateMetadata lists it offline, until its broker registers again.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from controller.api import (
    BROKER_ID_NOT_REGISTERED, FENCED_LEADER_EPOCH, INELIGIBLE_REPLICA, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST,
    INVALID_UPDATE_VERSION, NONE, NOT_CONTROLLER, NOT_LEADER_OR_FOLLOWER, STALE_BROKER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION, random_kafka_uuid, reassignment_replicas_error,
)
from controller.zookeeper import znodes as Z
from controller.zookeeper.channel import BrokerChannel

log = logging.getLogger("odradek.controller")

ELECTION_NOT_NEEDED = 84
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
PREFERRED_LEADER_NOT_AVAILABLE = 80
NO_REASSIGNMENT_IN_PROGRESS = 85
BROKER_NOT_AVAILABLE = 8
STALE_CONTROLLER_EPOCH = 11
NO_LEADER = -1
DELETING_LEADER = -2
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

TP = tuple  # (topic, partition)


class Fenced(Exception):
    """Another controller was elected (the /controller_epoch check failed)."""


class _Batch:
    """Requests collected while handling one event, sent at the end."""

    def __init__(self, role: "ControllerRole"):
        self.role = role
        self.lai: dict[int, dict[TP, bool]] = {}            # broker -> {tp: is_new}
        self.um: set[TP] = set()
        self.um_brokers: set[int] | None = None              # None = every live broker
        self.um_extra: list[tuple[set[int], set[TP] | None]] = []
        self.stop: dict[int, dict[TP, tuple[bool, int]]] = {}  # broker -> {tp: (delete, epoch)}
        self.stop_callbacks: dict[int, Any] = {}

    def leader_and_isr(self, brokers, tp: TP, is_new: bool = False) -> None:
        for b in brokers:
            if b in self.role.live:
                self.lai.setdefault(b, {})[tp] = is_new or self.lai.get(b, {}).get(tp, False)
        self.um.add(tp)

    def update_metadata(self, tps) -> None:
        self.um.update(tps)

    def update_metadata_to(self, brokers: set[int], tps: set[TP] | None) -> None:
        """UpdateMetadata to ``brokers`` only; ``tps`` None = every partition."""
        self.um_extra.append((set(brokers), tps))

    def stop_replica(self, broker: int, tp: TP, delete: bool, epoch: int) -> None:
        if broker in self.role.live:
            self.stop.setdefault(broker, {})[tp] = (delete, epoch)

    def send(self) -> None:
        # Targeted UpdateMetadata first (a started broker's full picture, new endpoints), as
        # Kafka's onBrokerStartup does: a broker's first update must not be a partial one.
        r = self.role
        for brokers, tps in self.um_extra:
            for b in brokers:
                if b in r.live:
                    r.send_update_metadata(b, tps if tps is not None else set(r.states) | r.deleting_tps())
        for b, parts in self.lai.items():
            r.send_leader_and_isr(b, parts)
        if self.um:
            for b in list(r.live):
                r.send_update_metadata(b, self.um)
        for b, parts in self.stop.items():
            r.send_stop_replica(b, parts)


class ControllerRole:
    def __init__(self, zkc, epoch: int, epoch_zk_version: int):
        self.zkc = zkc
        self.bridge = zkc.bridge
        self.cfg = zkc.config
        self.id = zkc.broker_id
        self.epoch = epoch
        self.epoch_zk_version = epoch_zk_version
        self.active = False
        self.queue: asyncio.Queue = asyncio.Queue()
        self.task: asyncio.Task | None = None
        self.timers: list[asyncio.Task] = []
        self.live: dict[int, Z.BrokerRegistration] = {}
        self.shutting_down: set[int] = set()
        self.assign: dict[str, Z.TopicAssignment] = {}
        self.assign_version: dict[str, int] = {}
        self.states: dict[TP, Z.LeaderIsr] = {}
        self.to_delete: set[str] = set()
        self.delete_started: set[str] = set()
        self.delete_pending: dict[str, set[tuple[int, int]]] = {}
        self.zk_reassignments: set[TP] = set()
        self.channels: dict[int, BrokerChannel] = {}
        self.topic_cfg: dict[str, dict[str, str]] = {}
        self.offline_replicas: dict[int, set[TP]] = {}     # broker -> its replicas on failed dirs

    def _online(self, b: int, tp: TP, shutting_down_ok: bool = False) -> bool:
        """Broker ``b``'s replica of ``tp`` can lead or be in the ISR: the broker is live (and
        not shutting down, unless ``shutting_down_ok``) and the replica's log dir has not failed."""
        return (b in self.live and (shutting_down_ok or b not in self.shutting_down)
                and tp not in self.offline_replicas.get(b, ()))

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self.active = True
        loop = asyncio.get_running_loop()
        self.task = loop.create_task(self._run(), name=f"controller-{self.id}")
        self.enqueue("failover")
        if self.cfg.get("auto.leader.rebalance.enable"):
            self.timers.append(loop.create_task(self._rebalance_timer()))

    async def resign(self, reason: str) -> None:
        if not self.active:
            return
        self.active = False
        log.info("[Controller id=%d epoch=%d] resigning: %s", self.id, self.epoch, reason)
        me = asyncio.current_task()
        for t in self.timers:
            t.cancel()
        if self.task is not None and self.task is not me:
            self.task.cancel()
        while not self.queue.empty():
            _kind, _args, fut = self.queue.get_nowait()
            if fut is not None and not fut.done():
                fut.set_exception(NotControllerError())
        for ch in list(self.channels.values()):
            await ch.close()
        self.channels.clear()

    def enqueue(self, kind: str, *args, want_result: bool = False):
        if not self.active:
            if want_result:
                fut = asyncio.get_running_loop().create_future()
                fut.set_exception(NotControllerError())
                return fut
            return None
        fut = asyncio.get_running_loop().create_future() if want_result else None
        self.queue.put_nowait((kind, args, fut))
        return fut

    async def call(self, kind: str, *args):
        """Enqueue an event and wait for its handler's result (raises NotControllerError)."""
        return await self.enqueue(kind, *args, want_result=True)

    def _watch(self, kind: str, *args):
        def fire():
            self.enqueue(kind, *args)
        return self.bridge.watcher(fire)

    async def _run(self) -> None:
        while self.active:
            kind, args, fut = await self.queue.get()
            batch = _Batch(self)
            try:
                result = await getattr(self, "_on_" + kind)(batch, *args)
                batch.send()
                if fut is not None and not fut.done():
                    fut.set_result(result)
            except Fenced:
                if fut is not None and not fut.done():
                    fut.set_exception(NotControllerError())
                asyncio.ensure_future(self.zkc.resign_from_role(self, "fenced by a newer controller epoch"))
                return
            except asyncio.CancelledError:
                if fut is not None and not fut.done():
                    fut.set_exception(NotControllerError())
                raise
            except Exception as e:
                log.exception("[Controller id=%d] event %s failed", self.id, kind)
                batch.send()
                if fut is not None and not fut.done():
                    fut.set_exception(e)

    # ------------------------------------------------------------------ ZooKeeper writes (fenced)
    async def _multi(self, build) -> list:
        zkv = self.epoch_zk_version
        res = await self.bridge.transaction(lambda t: (t.check(Z.CONTROLLER_EPOCH, zkv), build(t)))
        if isinstance(res[0], (BadVersionError, NoNodeError)):
            raise Fenced()
        return res[1:]

    async def _write_states(self, updates: dict[TP, Z.LeaderIsr]) -> dict[TP, Z.LeaderIsr]:
        """Conditional writes of partition states; returns those written (with new zk versions).
        Partitions whose znode moved on are re-read into ``self.states`` and left out."""
        done: dict[TP, Z.LeaderIsr] = {}
        items = list(updates.items())
        for i in range(0, len(items), 200):
            chunk = items[i:i + 200]
            res = await self._multi(lambda t: [t.set_data(Z.partition_state_path(*tp), Z.encode_partition_state(s),
                                                          self.states[tp].zk_version) for tp, s in chunk])
            if not any(isinstance(r, Exception) for r in res):
                for (tp, s), stat in zip(chunk, res):
                    s.zk_version = stat.version
                    self.states[tp] = s
                    done[tp] = s
                continue
            for tp, s in chunk:            # one by one to find the stale ones
                r = (await self._multi(lambda t: t.set_data(Z.partition_state_path(*tp), Z.encode_partition_state(s),
                                                            self.states[tp].zk_version)))[0]
                if isinstance(r, Exception):
                    log.info("partition state of %s-%d changed underneath (%s); re-reading", tp[0], tp[1], r)
                    await self._read_state(tp)
                else:
                    s.zk_version = r.version
                    self.states[tp] = s
                    done[tp] = s
        return done

    async def _read_state(self, tp: TP) -> Z.LeaderIsr | None:
        try:
            data, stat = await self.bridge.get(Z.partition_state_path(*tp))
        except NoNodeError:
            self.states.pop(tp, None)
            return None
        s = Z.decode_partition_state(tp[0], tp[1], data, stat.version)
        self.states[tp] = s
        return s

    async def _write_assignment(self, topic: str, a: Z.TopicAssignment) -> None:
        ver = self.assign_version.get(topic, -1)
        res = await self._multi(lambda t: t.set_data(Z.topic_path(topic), Z.encode_topic(a), ver))
        if isinstance(res[0], Exception):
            data, stat = await self.bridge.get(Z.topic_path(topic))
            res = await self._multi(lambda t: t.set_data(Z.topic_path(topic), Z.encode_topic(a), stat.version))
            if isinstance(res[0], Exception):
                raise res[0]
            self.assign_version[topic] = res[0].version
        else:
            self.assign_version[topic] = res[0].version
        self.assign[topic] = a

    # ------------------------------------------------------------------ requests to brokers
    def _endpoint(self, broker: int, listener: str | None = None):
        """``broker``'s (host, port) on ``listener``: by default the inter-broker listener
        (the leaders LeaderAndIsr names to the followers' fetchers)."""
        reg = self.live.get(broker)
        if reg is None:
            return None
        name = listener or self.cfg.inter_broker_listener_name()
        for n, h, p, _ in reg.endpoints:
            if n == name:
                return h, p
        return None

    def _channel(self, broker: int) -> BrokerChannel | None:
        ch = self.channels.get(broker)
        if ch is None:
            listener = self.cfg.controller_to_broker_listener_name()   # control.plane.listener.name
            ep = self._endpoint(broker, listener)
            if ep is None:
                log.error("broker %d has no %s endpoint", broker, listener)
                return None
            ch = self.channels[broker] = BrokerChannel(self.id, broker, ep[0], ep[1], config=self.cfg)
        return ch

    def _topic_id(self, topic: str):
        a = self.assign.get(topic)
        return a.topic_id if a is not None and a.topic_id is not None else None

    def deleting_tps(self) -> set[TP]:
        return {(t, p) for t in self.delete_started for p in self.assign.get(t, Z.TopicAssignment({})).partitions}

    def send_leader_and_isr(self, broker: int, parts: dict[TP, bool]) -> None:
        from protocol.messages import LeaderAndIsrRequest as L
        ch = self._channel(broker)
        if ch is None:
            return
        by_topic: dict[str, list] = {}
        leaders = set()
        for (t, p), is_new in sorted(parts.items()):
            s = self.states.get((t, p))
            a = self.assign.get(t)
            if s is None or a is None or p not in a.partitions:
                continue
            leaders.add(s.leader)
            by_topic.setdefault(t, []).append(L.LeaderAndIsrPartitionState(
                topic_name=t, partition_index=p, controller_epoch=s.controller_epoch, leader=s.leader,
                leader_epoch=s.leader_epoch, isr=list(s.isr), partition_epoch=s.zk_version,
                replicas=list(a.partitions[p]), adding_replicas=list(a.adding.get(p, [])),
                removing_replicas=list(a.removing.get(p, [])), is_new=is_new,
                leader_recovery_state=s.leader_recovery_state))
        if not by_topic:
            return
        live_leaders = []
        for b in sorted(leaders):
            ep = self._endpoint(b)
            if ep is not None:
                live_leaders.append(L.LeaderAndIsrLiveLeader(broker_id=b, host_name=ep[0], port=ep[1]))
        req = L(controller_id=self.id, controller_epoch=self.epoch, broker_epoch=self.live[broker].epoch, type=0,
                topic_states=[L.LeaderAndIsrTopicState(topic_name=t, topic_id=self._topic_id(t) or _zero_uuid(),
                                                       partition_states=ps) for t, ps in by_topic.items()],
                live_leaders=live_leaders)

        def answered(resp, broker=broker):
            offline = _storage_errors(resp, {self._topic_id(t) or _zero_uuid(): t for t in by_topic})
            if offline:
                self.enqueue("replicas_offline", broker, offline)
        ch.send(req, answered)

    def send_update_metadata(self, broker: int, tps) -> None:
        from protocol.messages import UpdateMetadataRequest as U
        ch = self._channel(broker)
        if ch is None:
            return
        by_topic: dict[str, list] = {}
        for t, p in sorted(tps):
            a = self.assign.get(t)
            if a is None or p not in a.partitions:
                continue
            replicas = list(a.partitions[p])
            s = self.states.get((t, p))
            if t in self.delete_started:
                leader, epoch, isr, zkv, ce = DELETING_LEADER, s.leader_epoch if s else 0, \
                    list(s.isr) if s else [], s.zk_version if s else 0, self.epoch
            elif s is None:
                continue
            else:
                leader, epoch, isr, zkv, ce = s.leader, s.leader_epoch, list(s.isr), s.zk_version, s.controller_epoch
            by_topic.setdefault(t, []).append(U.UpdateMetadataPartitionState(
                topic_name=t, partition_index=p, controller_epoch=ce, leader=leader, leader_epoch=epoch, isr=isr,
                zk_version=zkv, replicas=replicas,
                offline_replicas=[b for b in replicas if not self._online(b, (t, p), True)]))
        brokers = []
        for b in sorted(self.live):
            reg = self.live[b]
            brokers.append(U.UpdateMetadataBroker(
                id=b, endpoints=[U.UpdateMetadataEndpoint(port=p, host=h, listener=n,
                                                          security_protocol=SECURITY_PROTOCOLS.get(sp, 0))
                                 for n, h, p, sp in reg.endpoints], rack=reg.rack))
        req = U(controller_id=self.id, controller_epoch=self.epoch, broker_epoch=self.live[broker].epoch,
                topic_states=[U.UpdateMetadataTopicState(topic_name=t, topic_id=self._topic_id(t) or _zero_uuid(),
                                                         partition_states=ps) for t, ps in by_topic.items()],
                live_brokers=brokers)
        ch.send(req)

    def send_stop_replica(self, broker: int, parts: dict[TP, tuple[bool, int]]) -> None:
        from protocol.messages import StopReplicaRequest as S
        ch = self._channel(broker)
        if ch is None:
            return
        # delete=false first, then delete=true (as Kafka sends them)
        for want_delete in (False, True):
            by_topic: dict[str, list] = {}
            for (t, p), (delete, epoch) in sorted(parts.items()):
                if delete != want_delete:
                    continue
                by_topic.setdefault(t, []).append(S.StopReplicaPartitionState(
                    partition_index=p, leader_epoch=epoch, delete_partition=delete))
            if not by_topic:
                continue
            req = S(controller_id=self.id, controller_epoch=self.epoch, broker_epoch=self.live[broker].epoch,
                    topic_states=[S.StopReplicaTopicState(topic_name=t, partition_states=ps)
                                  for t, ps in by_topic.items()])
            cb = None
            if want_delete:
                def cb(resp, broker=broker):
                    self.enqueue("stop_replica_done", broker, resp)
            ch.send(req, cb)

    async def _close_channel(self, broker: int) -> None:
        ch = self.channels.pop(broker, None)
        if ch is not None:
            await ch.close()

    # ------------------------------------------------------------------ failover
    async def _on_failover(self, batch: _Batch) -> None:
        b = self.bridge
        log.info("[Controller id=%d epoch=%d] starting failover", self.id, self.epoch)
        await self.zkc.feature_store.ensure_enabled()
        for child in await b.get_children(Z.ISR_CHANGE_NOTIFICATION):
            try:
                await b.delete(f"{Z.ISR_CHANGE_NOTIFICATION}/{child}")
            except NoNodeError:
                pass
        for child in await b.get_children(Z.LOG_DIR_EVENT_NOTIFICATION):
            try:
                await b.delete(f"{Z.LOG_DIR_EVENT_NOTIFICATION}/{child}")
            except NoNodeError:
                pass
        await b.get_children(Z.ISR_CHANGE_NOTIFICATION, watch=self._watch("isr_change"))
        await b.get_children(Z.LOG_DIR_EVENT_NOTIFICATION, watch=self._watch("log_dir_event"))
        self.live = await self._read_brokers()
        for topic in await b.get_children(Z.BROKER_TOPICS, watch=self._watch("topic_change")):
            await self._load_topic(topic)
        for (t, p) in [(t, p) for t, a in self.assign.items() for p in a.partitions]:
            await self._read_state((t, p))
        log.info("[Controller id=%d] live brokers %s, %d topics, %d partitions", self.id, sorted(self.live),
                 len(self.assign), len(self.states))
        # full metadata to everybody, then LeaderAndIsr for every replica
        batch.update_metadata_to(set(self.live), None)
        for (t, p), s in self.states.items():
            batch.leader_and_isr(self.assign[t].partitions[p], (t, p))
        await self._elect_offline(batch, self._all_tps())
        # admin paths
        await self._on_topic_deletion(batch)
        await self._on_reassign_znode(batch)
        await self._on_preferred_znode(batch)
        for t, a in self.assign.items():
            for p in a.partitions:
                if a.adding.get(p) or a.removing.get(p):
                    await self._maybe_complete_reassignment(batch, (t, p))

    async def _read_brokers(self) -> dict[int, Z.BrokerRegistration]:
        out = {}
        b = self.bridge
        for child in await b.get_children(Z.BROKER_IDS, watch=self._watch("broker_change")):
            try:
                bid = int(child)
                data, stat = await b.get(Z.broker_path(bid), watch=self._watch("broker_modified", bid))
                out[bid] = Z.decode_broker(bid, data, stat.czxid)
            except (NoNodeError, ValueError, Z.ZnodeFormatError) as e:
                log.warning("skipping broker registration %s: %s", child, e)
        return out

    async def _load_topic(self, topic: str) -> Z.TopicAssignment | None:
        try:
            data, stat = await self.bridge.get(Z.topic_path(topic), watch=self._watch("partition_modification", topic))
        except NoNodeError:
            return None
        a = Z.decode_topic(topic, data)
        self.assign_version[topic] = stat.version
        self.assign[topic] = a
        if a.topic_id is None:
            a.topic_id = random_kafka_uuid()
            await self._write_assignment(topic, a)
        return a

    def _all_tps(self) -> list[TP]:
        return [(t, p) for t, a in self.assign.items() for p in sorted(a.partitions) if t not in self.delete_started]

    # ------------------------------------------------------------------ elections
    async def _unclean_allowed(self, topic: str) -> bool:
        cfg = self.topic_cfg.get(topic)
        if cfg is None:
            try:
                data, _ = await self.bridge.get(Z.config_path("topics", topic))
                cfg = Z.decode_config(data)
            except (NoNodeError, Z.ZnodeFormatError):
                cfg = {}
            self.topic_cfg[topic] = cfg
        v = cfg.get("unclean.leader.election.enable")
        if v is None:
            return bool(self.cfg.get("unclean.leader.election.enable"))
        return v.strip().lower() == "true"

    async def _init_new_partitions(self, batch: _Batch, tps: list[TP]) -> None:
        """New partitions (no state znode): leader = first live replica, ISR = live replicas."""
        created: list[TP] = []
        for tp in tps:
            t, p = tp
            replicas = self.assign[t].partitions[p]
            live = [r for r in replicas if r in self.live and r not in self.shutting_down] or \
                [r for r in replicas if r in self.live]
            if not live:
                log.info("no live replica for new partition %s-%d yet", t, p)
                continue
            s = Z.LeaderIsr(live[0], 0, live, self.epoch)
            try:
                await self.bridge.ensure_path(Z.partition_path(t, p))
                res = await self._multi(lambda tx: tx.create(Z.partition_state_path(t, p), Z.encode_partition_state(s)))
            except NodeExistsError:
                res = [NodeExistsError()]
            if isinstance(res[0], Exception):
                await self._read_state(tp)
                if tp in self.states:
                    batch.leader_and_isr(replicas, tp)
                continue
            s.zk_version = 0
            self.states[tp] = s
            created.append(tp)
            batch.leader_and_isr(replicas, tp, is_new=True)
        if created:
            log.info("[Controller id=%d] initialised %d new partitions", self.id, len(created))

    async def _elect_offline(self, batch: _Batch, tps, force_unclean: bool = False) -> dict[TP, int]:
        """Elect leaders for new partitions and for partitions whose leader is not live.
        Returns an error code per partition that has no leader afterwards."""
        new = [tp for tp in tps if tp not in self.states and tp[0] in self.assign]
        if new:
            await self._init_new_partitions(batch, new)
        updates: dict[TP, Z.LeaderIsr] = {}
        failed: dict[TP, int] = {}
        for tp in tps:
            s = self.states.get(tp)
            if s is None:
                failed[tp] = ELIGIBLE_LEADERS_NOT_AVAILABLE
                continue
            if s.leader >= 0 and self._online(s.leader, tp):
                continue
            t, p = tp
            replicas = self._target_or_assignment(t, p)
            live_isr = [b for b in s.isr if self._online(b, tp)]
            cand = [b for b in replicas if b in live_isr]
            if cand:
                updates[tp] = Z.LeaderIsr(cand[0], s.leader_epoch + 1, live_isr, self.epoch, s.leader_recovery_state)
                continue
            if force_unclean or await self._unclean_allowed(t):
                live_reps = [b for b in self.assign[t].partitions[p] if self._online(b, tp)]
                if live_reps:
                    log.warning("[Controller id=%d] unclean leader election for %s-%d: %d becomes leader outside "
                                "the ISR %s (data may be lost)", self.id, t, p, live_reps[0], s.isr)
                    updates[tp] = Z.LeaderIsr(live_reps[0], s.leader_epoch + 1, [live_reps[0]], self.epoch, 1)
                    continue
            failed[tp] = ELIGIBLE_LEADERS_NOT_AVAILABLE
            if s.leader != NO_LEADER:
                # leader gone and nobody eligible: offline, the ISR keeps its last member
                keep = live_isr or ([s.leader] if s.leader in s.isr else s.isr[:1])
                updates[tp] = Z.LeaderIsr(NO_LEADER, s.leader_epoch + 1, keep, self.epoch, s.leader_recovery_state)
        written = await self._write_states(updates)
        for tp, s in written.items():
            batch.leader_and_isr(self.assign[tp[0]].partitions[tp[1]], tp)
            if s.leader == NO_LEADER:
                log.warning("[Controller id=%d] partition %s-%d is offline (no eligible leader; ISR %s)",
                            self.id, tp[0], tp[1], s.isr)
        return failed

    def _target_or_assignment(self, t: str, p: int) -> list[int]:
        a = self.assign[t]
        return a.partitions[p]

    async def _move_leaders(self, batch: _Batch, tps, how: str) -> dict[TP, int]:
        """Preferred or controlled-shutdown election for partitions that have a leader."""
        updates: dict[TP, Z.LeaderIsr] = {}
        errors: dict[TP, int] = {}
        for tp in tps:
            s = self.states.get(tp)
            t, p = tp
            if s is None or t not in self.assign or p not in self.assign[t].partitions:
                errors[tp] = UNKNOWN_TOPIC_OR_PARTITION
                continue
            replicas = self.assign[t].partitions[p]
            if how == "preferred":
                pref = replicas[0]
                if s.leader == pref:
                    errors[tp] = ELECTION_NOT_NEEDED
                    continue
                if self._online(pref, tp) and pref in s.isr:
                    updates[tp] = Z.LeaderIsr(pref, s.leader_epoch + 1, list(s.isr), self.epoch, s.leader_recovery_state)
                else:
                    errors[tp] = PREFERRED_LEADER_NOT_AVAILABLE
            elif how == "controlled_shutdown":
                new_isr = [b for b in s.isr if b not in self.shutting_down]
                cand = [b for b in replicas if self._online(b, tp, True) and b in new_isr]
                if cand and new_isr:
                    updates[tp] = Z.LeaderIsr(cand[0], s.leader_epoch + 1, new_isr, self.epoch, s.leader_recovery_state)
                else:
                    errors[tp] = ELIGIBLE_LEADERS_NOT_AVAILABLE
            elif how == "reassignment":
                target = self.assign[t].target(p)
                cand = [b for b in target if self._online(b, tp) and b in s.isr]
                if cand:
                    updates[tp] = Z.LeaderIsr(cand[0], s.leader_epoch + 1, list(s.isr), self.epoch, s.leader_recovery_state)
                else:
                    errors[tp] = ELIGIBLE_LEADERS_NOT_AVAILABLE
        written = await self._write_states(updates)
        for tp in updates:
            if tp in written:
                batch.leader_and_isr(self.assign[tp[0]].partitions[tp[1]], tp)
            else:
                errors[tp] = INVALID_UPDATE_VERSION
        return errors

    # ------------------------------------------------------------------ brokers
    async def _on_broker_change(self, batch: _Batch) -> None:
        regs = await self._read_brokers()
        dead = [b for b in self.live if b not in regs]
        bounced = [b for b in regs if b in self.live and regs[b].epoch != self.live[b].epoch]
        new = [b for b in regs if b not in self.live]
        if not (dead or bounced or new):
            self.live = regs
            return
        log.info("[Controller id=%d] broker change: new %s, dead %s, bounced %s", self.id, new, dead, bounced)
        if dead or bounced:
            for b in dead + bounced:
                await self._close_channel(b)
            gone = set(dead) | set(bounced)
            # failure first, with the bounced broker counted as dead
            self.live = {b: r for b, r in regs.items() if b not in gone}
            self.shutting_down -= gone
            await self._on_brokers_failed(batch, gone)
        self.live = regs
        started = set(new) | set(bounced)
        if started:
            await self._on_brokers_started(batch, started)

    async def _on_broker_modified(self, batch: _Batch, broker: int) -> None:
        try:
            data, stat = await self.bridge.get(Z.broker_path(broker), watch=self._watch("broker_modified", broker))
        except NoNodeError:
            return
        reg = Z.decode_broker(broker, data, stat.czxid)
        old = self.live.get(broker)
        if old is not None and old.epoch == reg.epoch and (old.endpoints != reg.endpoints or old.rack != reg.rack):
            self.live[broker] = reg
            await self._close_channel(broker)
            batch.update_metadata_to(set(self.live), set())

    async def _on_brokers_failed(self, batch: _Batch, gone: set[int]) -> None:
        tps = [tp for tp, s in self.states.items() if tp[0] not in self.delete_started and
               (s.leader in gone or any(b in gone for b in s.isr))]
        led = [tp for tp in tps if self.states[tp].leader in gone]
        await self._elect_offline(batch, led)
        updates: dict[TP, Z.LeaderIsr] = {}
        for tp in tps:
            s = self.states[tp]
            if s.leader in gone or s.leader == NO_LEADER:
                continue
            new_isr = [b for b in s.isr if b not in gone]
            if new_isr != s.isr and new_isr:
                updates[tp] = Z.LeaderIsr(s.leader, s.leader_epoch + 1, new_isr, self.epoch, s.leader_recovery_state)
        for tp in (await self._write_states(updates)):
            batch.leader_and_isr(self.assign[tp[0]].partitions[tp[1]], tp)
        # partitions with the dead broker as a (non-ISR) replica: offline_replicas changes
        batch.update_metadata([tp for tp in self.states if any(b in gone for b in self.assign[tp[0]].partitions[tp[1]])])

    async def _on_brokers_started(self, batch: _Batch, started: set[int]) -> None:
        for b in started:       # its LeaderAndIsr answers say again which replicas are offline
            self.offline_replicas.pop(b, None)
        others = set(self.live) - started
        batch.update_metadata_to(others, set())
        batch.update_metadata_to(started, None)
        for tp, s in self.states.items():
            if tp[0] in self.delete_started:
                continue
            replicas = self.assign[tp[0]].partitions[tp[1]]
            mine = [b for b in replicas if b in started]
            if mine:
                batch.leader_and_isr(mine, tp)
        await self._elect_offline(batch, self._all_tps())
        # deletions waiting for these brokers
        for t in list(self.delete_pending):
            for (b, p) in list(self.delete_pending[t]):
                if b in started:
                    batch.stop_replica(b, (t, p), True, DELETING_LEADER)
        await self._resume_deletions(batch)
        for t, a in self.assign.items():
            for p in a.partitions:
                if a.adding.get(p):
                    await self._maybe_complete_reassignment(batch, (t, p))

    # ------------------------------------------------------------------ topics
    async def _on_topic_change(self, batch: _Batch) -> None:
        children = set(await self.bridge.get_children(Z.BROKER_TOPICS, watch=self._watch("topic_change")))
        new = sorted(children - set(self.assign))
        gone = [t for t in self.assign if t not in children]
        for t in gone:
            self._forget_topic(t)
        tps = []
        for t in new:
            a = await self._load_topic(t)
            if a is not None:
                tps += [(t, p) for p in sorted(a.partitions)]
                log.info("[Controller id=%d] new topic %s: %s", self.id, t, a.partitions)
        if tps:
            await self._elect_offline(batch, tps)

    def _forget_topic(self, t: str) -> None:
        self.assign.pop(t, None)
        self.assign_version.pop(t, None)
        self.topic_cfg.pop(t, None)
        for tp in [tp for tp in self.states if tp[0] == t]:
            del self.states[tp]
        self.to_delete.discard(t)
        self.delete_started.discard(t)
        self.delete_pending.pop(t, None)

    async def _on_partition_modification(self, batch: _Batch, topic: str) -> None:
        old = self.assign.get(topic)
        if old is None:
            return
        a = await self._load_topic(topic)
        if a is None:
            return
        added = [(topic, p) for p in sorted(a.partitions) if p not in old.partitions]
        if added:
            log.info("[Controller id=%d] new partitions of %s: %s", self.id, topic, [p for _, p in added])
            await self._elect_offline(batch, added)

    async def _on_topic_config_changed(self, batch: _Batch, topic: str) -> None:
        self.topic_cfg.pop(topic, None)
        if topic in self.assign and await self._unclean_allowed(topic):
            offline = [(topic, p) for p in self.assign[topic].partitions
                       if (s := self.states.get((topic, p))) is not None and s.leader not in self.live]
            if offline:
                await self._elect_offline(batch, offline)

    # ------------------------------------------------------------------ deletion
    async def _on_topic_deletion(self, batch: _Batch) -> None:
        b = self.bridge
        children = await b.get_children(Z.DELETE_TOPICS, watch=self._watch("topic_deletion"))
        for t in children:
            if t not in self.assign or not self.cfg.get("delete.topic.enable"):
                try:
                    await b.delete(Z.delete_topic_path(t))
                except NoNodeError:
                    pass
                continue
            if t not in self.to_delete:
                log.info("[Controller id=%d] topic %s queued for deletion", self.id, t)
                self.to_delete.add(t)
        await self._resume_deletions(batch)

    async def _resume_deletions(self, batch: _Batch) -> None:
        for t in sorted(self.to_delete):
            if t in self.delete_started or t not in self.assign:
                continue
            a = self.assign[t]
            if any(a.adding.get(p) or a.removing.get(p) for p in a.partitions):
                continue                            # waits for the reassignment
            replicas = {(b, p) for p, reps in a.partitions.items() for b in reps}
            self.delete_started.add(t)
            self.delete_pending[t] = set(replicas)
            batch.update_metadata([(t, p) for p in a.partitions])
            for b, p in replicas:
                batch.stop_replica(b, (t, p), False, DELETING_LEADER)
            for b, p in replicas:
                batch.stop_replica(b, (t, p), True, DELETING_LEADER)
        for t in list(self.delete_started):
            if t in self.delete_pending and not self.delete_pending[t]:
                await self._complete_deletion(t)

    async def _on_stop_replica_done(self, batch: _Batch, broker: int, resp) -> None:
        for pe in resp.partition_errors:
            pend = self.delete_pending.get(pe.topic_name)
            if pend is not None and pe.error_code == NONE:
                pend.discard((broker, pe.partition_index))
        for t in list(self.delete_started):
            if t in self.delete_pending and not self.delete_pending[t]:
                await self._complete_deletion(t)

    async def _complete_deletion(self, t: str) -> None:
        b = self.bridge
        for path in (Z.topic_path(t), Z.config_path("topics", t), Z.delete_topic_path(t)):
            try:
                await b.delete(path, recursive=True)
            except NoNodeError:
                pass
        log.info("[Controller id=%d] deletion of topic %s completed", self.id, t)
        self._forget_topic(t)

    # ------------------------------------------------------------------ ISR changes from leaders
    async def _on_alter_partition(self, batch: _Batch, broker_id: int, broker_epoch: int, items: list):
        """items: [(topic, partition, leader_epoch, new_isr, recovery_state, partition_epoch)];
        returns {(topic, partition): (error, LeaderIsr|None)}."""
        out: dict[TP, tuple[int, Any]] = {}
        reg = self.live.get(broker_id)
        if reg is None or (broker_epoch != -1 and broker_epoch != reg.epoch):
            return STALE_BROKER_EPOCH, out
        updates: dict[TP, Z.LeaderIsr] = {}
        for t, p, leader_epoch, new_isr, lrs, part_epoch in items:
            tp = (t, p)
            s = self.states.get(tp)
            if s is None or t in self.delete_started:
                out[tp] = (UNKNOWN_TOPIC_OR_PARTITION, None)
                continue
            if leader_epoch != s.leader_epoch:
                out[tp] = (FENCED_LEADER_EPOCH, None)
                continue
            if s.leader != broker_id:
                out[tp] = (NOT_LEADER_OR_FOLLOWER, None)
                continue
            if part_epoch < s.zk_version:
                out[tp] = (INVALID_UPDATE_VERSION, None)
                continue
            if list(new_isr) == s.isr and lrs == s.leader_recovery_state:
                out[tp] = (NONE, s)
                continue
            if part_epoch != s.zk_version:
                out[tp] = (INVALID_UPDATE_VERSION, None)
                continue
            if not new_isr or broker_id not in new_isr or len(set(new_isr)) != len(new_isr):
                out[tp] = (INVALID_REQUEST, None)
                continue
            replicas = self.assign[t].partitions[p]
            if any(b not in replicas or not self._online(b, tp, True) or
                   (b in self.shutting_down and b not in s.isr) for b in new_isr):
                out[tp] = (INELIGIBLE_REPLICA, None)
                continue
            updates[tp] = Z.LeaderIsr(s.leader, s.leader_epoch, list(new_isr), self.epoch, lrs)
        written = await self._write_states(updates)
        for tp in updates:
            if tp in written:
                out[tp] = (NONE, written[tp])
                log.info("[Controller id=%d] ISR of %s-%d is now %s (partition epoch %d)", self.id, tp[0], tp[1],
                         written[tp].isr, written[tp].zk_version)
            else:
                out[tp] = (INVALID_UPDATE_VERSION, None)
        if written:
            batch.update_metadata(written)
            for tp in written:
                a = self.assign[tp[0]]
                if a.adding.get(tp[1]) or a.removing.get(tp[1]):
                    await self._maybe_complete_reassignment(batch, tp)
        return NONE, out

    async def _drain_notifications(self, parent: str, kind: str, decode) -> list:
        """Read and delete every child of the notification node ``parent`` (watching it again
        for ``kind``); the decoded contents of those that could be read."""
        b = self.bridge
        out = []
        for child in await b.get_children(parent, watch=self._watch(kind)):
            path = f"{parent}/{child}"
            try:
                data, _ = await b.get(path)
                out.append(decode(data, path))
            except (NoNodeError, Z.ZnodeFormatError):
                pass
            try:
                await b.delete(path)
            except NoNodeError:
                pass
        return out

    async def _on_isr_change(self, batch: _Batch) -> None:
        tps = set()
        for listed in await self._drain_notifications(Z.ISR_CHANGE_NOTIFICATION, "isr_change",
                                                      Z.decode_partition_list):
            tps.update(listed)
        for tp in tps:
            if tp[0] in self.assign:
                await self._read_state(tp)
        if tps:
            batch.update_metadata([tp for tp in tps if tp in self.states])

    # ------------------------------------------------------------------ failed log dirs
    async def _on_log_dir_event(self, batch: _Batch) -> None:
        """A broker's log dir failed: send it LeaderAndIsr for all its replicas; it answers
        KAFKA_STORAGE_ERROR for those on the failed dir (``_on_replicas_offline``)."""
        brokers = set(await self._drain_notifications(Z.LOG_DIR_EVENT_NOTIFICATION, "log_dir_event",
                                                      Z.decode_log_dir_event))
        for broker in sorted(brokers & set(self.live)):
            log.info("[Controller id=%d] a log dir of broker %d failed: asking it which replicas are offline",
                     self.id, broker)
            for tp in self.states:
                if tp[0] not in self.delete_started and broker in self.assign[tp[0]].partitions[tp[1]]:
                    batch.lai.setdefault(broker, {}).setdefault(tp, False)

    async def _on_replicas_offline(self, batch: _Batch, broker: int, tps) -> None:
        """``broker`` answered KAFKA_STORAGE_ERROR for ``tps``: their replicas there are offline.
        Leadership moves to another in-sync replica and the broker leaves their ISRs."""
        if broker not in self.live:
            return
        known = self.offline_replicas.setdefault(broker, set())
        tps = [tp for tp in tps if tp in self.states and tp not in known and tp[0] not in self.delete_started]
        if not tps:
            return
        known.update(tps)
        log.warning("[Controller id=%d] replicas of broker %d are offline (failed log dir): %s", self.id, broker,
                    ", ".join(f"{t}-{p}" for t, p in sorted(tps)))
        await self._elect_offline(batch, [tp for tp in tps if self.states[tp].leader == broker])
        updates: dict[TP, Z.LeaderIsr] = {}
        for tp in tps:
            s = self.states[tp]
            if s.leader == broker or s.leader == NO_LEADER or broker not in s.isr:
                continue
            new_isr = [b for b in s.isr if b != broker]
            if new_isr:
                updates[tp] = Z.LeaderIsr(s.leader, s.leader_epoch + 1, new_isr, self.epoch, s.leader_recovery_state)
        for tp in (await self._write_states(updates)):
            batch.leader_and_isr(self.assign[tp[0]].partitions[tp[1]], tp)
        batch.update_metadata(tps)

    # ------------------------------------------------------------------ producer id blocks
    async def _on_allocate_producer_ids(self, batch: _Batch, broker_id: int, broker_epoch: int):
        """AllocateProducerIds: a live broker at its current epoch gets the next block of
        /latest_producer_id_block.  Returns (error, first id, length)."""
        reg = self.live.get(broker_id)
        if reg is None:
            log.warning("[Controller id=%d] AllocateProducerIds from unknown broker %d", self.id, broker_id)
            return BROKER_ID_NOT_REGISTERED, -1, 0
        if broker_epoch != reg.epoch:
            log.warning("[Controller id=%d] AllocateProducerIds from broker %d at stale epoch %d", self.id,
                        broker_id, broker_epoch)
            return STALE_BROKER_EPOCH, -1, 0
        start, length = await self.zkc.allocate_producer_ids(broker_id)
        return NONE, start, length

    # ------------------------------------------------------------------ controlled shutdown
    async def _on_controlled_shutdown(self, batch: _Batch, broker_id: int, broker_epoch: int):
        reg = self.live.get(broker_id)
        if reg is None:
            return BROKER_NOT_AVAILABLE, []
        if broker_epoch != -1 and broker_epoch < reg.epoch:
            return STALE_BROKER_EPOCH, []
        self.shutting_down.add(broker_id)
        log.info("[Controller id=%d] controlled shutdown of broker %d", self.id, broker_id)
        led, followed = [], []
        for tp, s in self.states.items():
            if tp[0] in self.delete_started:
                continue
            replicas = self.assign[tp[0]].partitions[tp[1]]
            if broker_id not in replicas or len(replicas) <= 1:
                continue
            (led if s.leader == broker_id else followed).append(tp)
        await self._move_leaders(batch, led, "controlled_shutdown")
        updates = {}
        for tp in followed:
            s = self.states[tp]
            batch.stop_replica(broker_id, tp, False, s.leader_epoch)
            if broker_id in s.isr and len(s.isr) > 1:
                updates[tp] = Z.LeaderIsr(s.leader, s.leader_epoch + 1, [b for b in s.isr if b != broker_id],
                                          self.epoch, s.leader_recovery_state)
        for tp in await self._write_states(updates):
            batch.leader_and_isr([b for b in self.assign[tp[0]].partitions[tp[1]] if b != broker_id], tp)
        remaining = sorted(tp for tp, s in self.states.items() if s.leader == broker_id
                           and len(self.assign[tp[0]].partitions[tp[1]]) > 1 and tp[0] not in self.delete_started)
        return NONE, remaining

    # ------------------------------------------------------------------ preferred leaders
    async def _on_elect_leaders(self, batch: _Batch, election_type: int, tps):
        """election_type 0 = preferred, 1 = unclean; tps None = every partition."""
        if tps is None:
            tps = [tp for tp in self._all_tps() if tp in self.states]
        out: dict[TP, int] = {}
        valid = []
        for tp in tps:
            if tp[0] not in self.assign or tp[1] not in self.assign[tp[0]].partitions or tp[0] in self.delete_started:
                out[tp] = UNKNOWN_TOPIC_OR_PARTITION
            else:
                valid.append(tp)
        if election_type == 0:
            errs = await self._move_leaders(batch, valid, "preferred")
        else:
            needing = [tp for tp in valid if self.states.get(tp) is None or self.states[tp].leader not in self.live]
            for tp in valid:
                if tp not in needing:
                    out[tp] = ELECTION_NOT_NEEDED
            errs = await self._elect_offline(batch, needing, force_unclean=True)
        for tp in valid:
            out.setdefault(tp, errs.get(tp, NONE))
        return out

    async def _on_preferred_znode(self, batch: _Batch) -> None:
        b = self.bridge
        stat = await b.exists(Z.PREFERRED_REPLICA_ELECTION, watch=self._watch("preferred_znode"))
        if stat is None:
            return
        try:
            data, _ = await b.get(Z.PREFERRED_REPLICA_ELECTION)
            tps = Z.decode_partition_list(data, Z.PREFERRED_REPLICA_ELECTION)
        except (NoNodeError, Z.ZnodeFormatError) as e:
            log.warning("bad %s: %s", Z.PREFERRED_REPLICA_ELECTION, e)
            tps = []
        await self._move_leaders(batch, [tp for tp in tps if tp in self.states], "preferred")
        try:
            await self._multi(lambda t: t.delete(Z.PREFERRED_REPLICA_ELECTION))
        except NoNodeError:
            pass
        await b.exists(Z.PREFERRED_REPLICA_ELECTION, watch=self._watch("preferred_znode"))

    async def _rebalance_timer(self) -> None:
        await asyncio.sleep(5)
        interval = self.cfg.get("leader.imbalance.check.interval.seconds")
        while self.active:
            self.enqueue("auto_rebalance")
            await asyncio.sleep(interval)

    async def _on_auto_rebalance(self, batch: _Batch) -> None:
        pct = self.cfg.get("leader.imbalance.per.broker.percentage")
        by_pref: dict[int, list[TP]] = {}
        for tp in self._all_tps():
            a = self.assign[tp[0]]
            if tp not in self.states or a.adding.get(tp[1]) or a.removing.get(tp[1]):
                continue
            by_pref.setdefault(a.partitions[tp[1]][0], []).append(tp)
        todo = []
        for broker, tps in by_pref.items():
            if broker not in self.live or broker in self.shutting_down:
                continue
            imbalanced = [tp for tp in tps if self.states[tp].leader != broker]
            if tps and len(imbalanced) * 100 / len(tps) > pct:
                todo += [tp for tp in imbalanced if broker in self.states[tp].isr]
        if todo:
            log.info("[Controller id=%d] auto leader rebalance for %d partitions", self.id, len(todo))
            await self._move_leaders(batch, todo, "preferred")

    # ------------------------------------------------------------------ reassignment (KIP-455)
    async def _on_alter_reassignments(self, batch: _Batch, items: list) -> dict[TP, tuple[int, str | None]]:
        """items: [(topic, partition, replicas or None to cancel)]"""
        out: dict[TP, tuple[int, str | None]] = {}
        for t, p, target in items:
            tp = (t, p)
            if t not in self.assign or p not in self.assign[t].partitions or t in self.delete_started:
                out[tp] = (UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            a = self.assign[t]
            if target is None:
                if not (a.adding.get(p) or a.removing.get(p)):
                    out[tp] = (NO_REASSIGNMENT_IN_PROGRESS, "No reassignment in progress for this partition.")
                    continue
                original = [b for b in a.partitions[p] if b not in a.adding.get(p, [])]
                await self._start_reassignment(batch, tp, original)
                out[tp] = (NONE, None)
                continue
            why = reassignment_replicas_error(
                [b for b in a.partitions[p] if b not in a.adding.get(p, [])], target, self.live)
            if why:
                out[tp] = (INVALID_REPLICA_ASSIGNMENT, why)
                continue
            self.zk_reassignments.discard(tp)
            await self._start_reassignment(batch, tp, list(target))
            out[tp] = (NONE, None)
        return out

    def _list_reassignments(self, tps=None):
        out = []
        for t, a in sorted(self.assign.items()):
            for p in sorted(a.partitions):
                if (a.adding.get(p) or a.removing.get(p)) and (tps is None or (t, p) in tps):
                    out.append((t, p, list(a.partitions[p]), list(a.adding.get(p, [])), list(a.removing.get(p, []))))
        return out

    async def _on_list_reassignments(self, batch: _Batch, tps):
        return self._list_reassignments(tps)

    async def _start_reassignment(self, batch: _Batch, tp: TP, target: list[int]) -> None:
        t, p = tp
        a = self.assign[t]
        cur = a.partitions[p]
        original = [b for b in cur if b not in a.adding.get(p, [])]
        adding = [b for b in target if b not in original]
        removing = [b for b in original if b not in target]
        new = Z.TopicAssignment(dict(a.partitions), a.topic_id, dict(a.adding), dict(a.removing))
        if not adding and not removing:
            new.partitions[p] = list(target)
            new.adding.pop(p, None)
            new.removing.pop(p, None)
        else:
            new.partitions[p] = list(target) + [b for b in original if b not in target]
            new.adding[p] = adding
            new.removing[p] = removing
        log.info("[Controller id=%d] reassigning %s-%d: %s -> %s (adding %s, removing %s)", self.id, t, p,
                 original, target, adding, removing)
        await self._write_assignment(t, new)
        s = self.states.get(tp)
        if s is not None:
            bumped = Z.LeaderIsr(s.leader, s.leader_epoch + 1, list(s.isr), self.epoch, s.leader_recovery_state)
            if tp in await self._write_states({tp: bumped}):
                batch.leader_and_isr(new.partitions[p], tp, is_new=False)
            # replicas being dropped by a cancellation
            for b in cur:
                if b not in new.partitions[p]:
                    batch.stop_replica(b, tp, True, bumped.leader_epoch)
        batch.update_metadata([tp])
        await self._maybe_complete_reassignment(batch, tp)

    async def _maybe_complete_reassignment(self, batch: _Batch, tp: TP) -> None:
        t, p = tp
        a = self.assign.get(t)
        s = self.states.get(tp)
        if a is None or s is None or not (a.adding.get(p) or a.removing.get(p)):
            return
        target = a.target(p)
        if not all(b in s.isr for b in target):
            return
        removing = list(a.removing.get(p, []))
        # move leadership into the target set if needed, drop removed replicas from the ISR
        new_isr = [b for b in s.isr if b in target]
        if s.leader in target and self._online(s.leader, tp, True):
            leader = s.leader
        else:
            cand = [b for b in target if self._online(b, tp) and b in new_isr]
            if not cand:
                return
            leader = cand[0]
        ns = Z.LeaderIsr(leader, s.leader_epoch + 1, new_isr, self.epoch, s.leader_recovery_state)
        if tp not in await self._write_states({tp: ns}):
            return
        new = Z.TopicAssignment(dict(a.partitions), a.topic_id, dict(a.adding), dict(a.removing))
        new.partitions[p] = list(target)
        new.adding.pop(p, None)
        new.removing.pop(p, None)
        await self._write_assignment(t, new)
        batch.leader_and_isr(target, tp)
        for b in removing:
            batch.stop_replica(b, tp, False, ns.leader_epoch)
            batch.stop_replica(b, tp, True, ns.leader_epoch)
        batch.update_metadata([tp])
        log.info("[Controller id=%d] reassignment of %s-%d completed: replicas %s, leader %d", self.id, t, p,
                 target, leader)
        if tp in self.zk_reassignments:
            self.zk_reassignments.discard(tp)
            await self._rewrite_reassign_znode()
        await self._resume_deletions(batch)

    async def _on_reassign_znode(self, batch: _Batch) -> None:
        b = self.bridge
        stat = await b.exists(Z.REASSIGN_PARTITIONS, watch=self._watch("reassign_znode"))
        if stat is None:
            return
        try:
            data, _ = await b.get(Z.REASSIGN_PARTITIONS)
            moves = Z.decode_reassignment(data)
        except (NoNodeError, Z.ZnodeFormatError) as e:
            log.warning("bad %s: %s", Z.REASSIGN_PARTITIONS, e)
            moves = {}
        items = [(t, p, r) for (t, p), r in moves.items()]
        new = [(t, p, r) for t, p, r in items if (t, p) not in self.zk_reassignments]
        for t, p, _ in new:
            self.zk_reassignments.add((t, p))
        res = await self._on_alter_reassignments(batch, new)
        for tp, (err, _msg) in res.items():
            if err:
                self.zk_reassignments.discard(tp)
            else:
                self.zk_reassignments.add(tp)
        await self._rewrite_reassign_znode()

    async def _rewrite_reassign_znode(self) -> None:
        b = self.bridge
        try:
            data, stat = await b.get(Z.REASSIGN_PARTITIONS)
        except NoNodeError:
            return
        try:
            moves = Z.decode_reassignment(data)
        except Z.ZnodeFormatError:
            moves = {}
        keep = {tp: r for tp, r in moves.items() if tp in self.zk_reassignments}
        if keep:
            if keep != moves:
                await self._multi(lambda t: t.set_data(Z.REASSIGN_PARTITIONS, Z.encode_reassignment(keep), stat.version))
        else:
            await self._multi(lambda t: t.delete(Z.REASSIGN_PARTITIONS, stat.version))
            await b.exists(Z.REASSIGN_PARTITIONS, watch=self._watch("reassign_znode"))


class NotControllerError(Exception):
    error_code = NOT_CONTROLLER


KAFKA_STORAGE_ERROR = 56


def _storage_errors(resp, names_by_id) -> list[TP]:
    """The partitions a LeaderAndIsr response answers KAFKA_STORAGE_ERROR for (v5+ groups
    them by topic id, older versions name the topic)."""
    out = []
    for te in getattr(resp, "topics", None) or ():
        name = names_by_id.get(te.topic_id)
        for pe in te.partition_errors:
            if pe.error_code == KAFKA_STORAGE_ERROR and name is not None:
                out.append((name, pe.partition_index))
    for pe in getattr(resp, "partition_errors", None) or ():
        if pe.error_code == KAFKA_STORAGE_ERROR:
            out.append((pe.topic_name, pe.partition_index))
    return out


def _zero_uuid():
    import uuid
    return uuid.UUID(int=0)

"""Replication in a ZooKeeper cluster: leader/follower transitions, replica fetchers, ISR, HW.

How this works
--------------
* The controller's LeaderAndIsr makes a partition leader or follower here (``leader_and_isr``);
  a partition changes only for a leader epoch above the one applied last.  StopReplica stops
  fetching and (delete=true) removes the log.
* Leader: ``remote`` holds each follower's log end offset (its fetch offset) and when it was
  last caught up (Kafka's rule: fetch offset >= the leader's log end now, or >= the leader's log
  end at its previous fetch).  The high watermark is the minimum log end offset over the ISR
  (the *maximal* ISR while an ISR change is in flight, as Kafka does); it only moves forward and
  wakes acks=all produces and long-poll fetches.  A follower that is caught up to the high
  watermark and to the start of the current leader epoch is proposed for the ISR; one not
  caught up for ``replica.lag.time.max.ms`` is proposed for removal.  Proposals go to the
  controller as AlterPartition (Kafka 3.x ZooKeeper mode); the answer becomes the ISR.
* Follower: one ``ReplicaFetcher`` task per leader broker.  A partition whose log has no leader
  epoch first truncates to its high watermark; then it fetches with its
  replica id set from its log end offset and the epoch of its last batch (Fetch v12's
  ``last_fetched_epoch``), appends with ``append_as_follower`` (offsets, leader epochs and
  producer state come with the batches) and takes the leader's high watermark (capped at its own
  log end).  A leader that finds the follower's log parted from its own answers a diverging
  epoch instead of records (KIP-595's truncation on fetch) and the follower cuts its tail there;
  the leader does not count such a fetch as the follower's position.  A fetch offset the leader
  does not have (OFFSET_OUT_OF_RANGE, answered without bounds as Kafka answers it) makes the
  follower ask the leader's log end and start with ListOffsets: below the leader's log start it
  starts over there (DeleteRecords or retention moved it while the follower was away).
* Replication throttles (``broker/quota.py``): the leader leaves throttled partitions of
  followers outside the ISR out of its answers while its leader quota is exceeded
  (``broker/handlers/fetch.py``); a fetcher leaves throttled partitions that are not in sync
  (behind the leader's high watermark at their last fetch) out of its requests while the
  follower quota is exceeded, and counts the bytes it appends for throttled partitions.
* ``__consumer_offsets``: becoming leader loads the group coordinator's partition, losing
  leadership unloads it.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time

from broker.configdefs import LONG_MAX
from broker.fetch_session import next_epoch
from broker.quota import replication_quotas
from broker.security.interbroker import connect_to_broker
from protocol.client import KafkaClientConnection, KafkaConnectionError
from protocol.errors import ErrorCode as E
from protocol.errors import error_name
from protocol.messages import (FetchRequest, LeaderAndIsrResponse, ListOffsetsRequest, OffsetForLeaderEpochRequest,
                               StopReplicaResponse)
from storage.errors import StorageError

log = logging.getLogger("odradek.replication")

GROUP_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
DELETING_EPOCH = -2
NO_EPOCH = -1


def now_ms() -> int:
    return int(time.monotonic() * 1000)



def _set_receive_buffer(conn, nbytes: int) -> None:
    """``replica.socket.receive.buffer.bytes`` on a fetcher's connection (SO_RCVBUF, as Kafka's
    fetcher sets it; -1 leaves the OS default and its autotuning)."""
    if nbytes is None or nbytes < 0:
        return
    sock = conn.socket
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, nbytes)
        except OSError as e:
            log.warning("could not set replica.socket.receive.buffer.bytes=%d: %s", nbytes, e)

class RemoteReplica:
    __slots__ = ("leo", "log_start_offset", "last_caught_up_ms", "last_fetch_ms", "last_fetch_leader_leo")

    def __init__(self, caught_up_ms: int):
        self.leo = -1
        self.log_start_offset = -1      # as the follower's fetches last said (v5+)
        self.last_caught_up_ms = caught_up_ms
        self.last_fetch_ms = 0
        self.last_fetch_leader_leo = -1


class ReplicationManager:
    def __init__(self, broker):
        self.broker = broker
        self.rm = broker.replicas
        self.cfg = broker.config
        self.controller_epoch = 0
        self.applied_epoch: dict[tuple[str, int], int] = {}
        self.fetchers: dict[tuple[int, str, int], ReplicaFetcher] = {}
        self.fetcher_of: dict[tuple[str, int], ReplicaFetcher] = {}
        self.tasks: list[asyncio.Task] = []
        self._inflight: set[tuple[str, int]] = set()
        self._no_expand_until: dict[tuple[str, int], int] = {}
        self.lag_ms = self.cfg.get("replica.lag.time.max.ms")
        self.leader_quota, self.follower_quota = replication_quotas(
            broker.broker_id, self.cfg, lambda t: broker.controller.topic_configs(t))

    @property
    def broker_id(self) -> int:
        return self.broker.broker_id

    @property
    def broker_epoch(self) -> int:
        return getattr(self.broker.controller, "broker_epoch", -1)

    def start(self) -> None:
        self.tasks.append(asyncio.get_running_loop().create_task(self._isr_expiration(), name="isr-expiration"))

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        for f in list(self.fetchers.values()):
            await f.close()
        self.fetchers.clear()
        self.fetcher_of.clear()

    # ------------------------------------------------------------------ controller requests
    def _check_epochs(self, controller_epoch: int, broker_epoch: int) -> int:
        if controller_epoch < self.controller_epoch:
            return E.STALE_CONTROLLER_EPOCH
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return E.STALE_BROKER_EPOCH
        self.controller_epoch = controller_epoch
        return 0

    async def leader_and_isr(self, req, version: int):
        R = LeaderAndIsrResponse
        err = self._check_epochs(req.controller_epoch, req.broker_epoch)
        topics: list[tuple[str, object, list]] = []
        if version >= 2:
            for ts in req.topic_states:
                topics.append((ts.topic_name, ts.topic_id, ts.partition_states))
        else:
            grouped: dict[str, list] = {}
            for ps in req.ungrouped_partition_states:
                grouped.setdefault(ps.topic_name, []).append(ps)
            topics = [(t, None, ps) for t, ps in grouped.items()]
        results: dict[str, list[tuple[int, int]]] = {}
        if err:
            for t, _tid, states in topics:
                results[t] = [(ps.partition_index, err) for ps in states]
            return self._lai_response(R, version, err, topics, results)
        ctrl = self.broker.controller
        await ctrl.ensure_topic_configs([t for t, _, _ in topics])
        live_leaders = {ll.broker_id: (ll.host_name, ll.port) for ll in req.live_leaders}
        for t, tid, states in topics:
            info = ctrl.topic(t)
            if tid is None or tid.int == 0:
                tid = info.topic_id if info is not None else None
            if tid is None:
                from controller.api import random_kafka_uuid
                tid = random_kafka_uuid()
            out = results.setdefault(t, [])
            for ps in states:
                out.append((ps.partition_index, self._apply_partition_state(t, tid, ps, live_leaders)))
        return self._lai_response(R, version, 0, topics, results)

    @staticmethod
    def _lai_response(R, version, err, topics, results):
        if version >= 5:
            return R(error_code=err, topics=[
                R.LeaderAndIsrTopicError(topic_id=tid if tid is not None else _zero(), partition_errors=[
                    R.LeaderAndIsrPartitionError(topic_name=t, partition_index=p, error_code=e)
                    for p, e in results.get(t, [])]) for t, tid, _ in topics])
        return R(error_code=err, partition_errors=[
            R.LeaderAndIsrPartitionError(topic_name=t, partition_index=p, error_code=e)
            for t, _, _ in topics for p, e in results.get(t, [])])

    def _apply_partition_state(self, topic, topic_id, ps, live_leaders) -> int:
        key = (topic, ps.partition_index)
        me = self.broker_id
        if me not in ps.replicas:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        held = self.rm.get(*key)
        if held is not None and held.offline:       # its log dir failed
            return E.KAFKA_STORAGE_ERROR
        applied = self.applied_epoch.get(key)
        if applied is not None and ps.leader_epoch <= applied:
            return E.STALE_CONTROLLER_EPOCH
        ctrl = self.broker.controller
        try:
            part = self.rm.ensure_partition(topic, ps.partition_index, topic_id, ctrl.topic_configs(topic) or {},
                                            is_new=bool(getattr(ps, "is_new", False)))
        except (StorageError, OSError) as e:
            log.error("cannot open %s-%d: %s", topic, ps.partition_index, e)
            return E.KAFKA_STORAGE_ERROR
        if part.offline:        # not new while a log dir is offline: its log may be there
            return E.KAFKA_STORAGE_ERROR
        self.applied_epoch[key] = ps.leader_epoch
        if ps.leader == me:
            self._become_leader(part, ps)
        else:
            self._become_follower(part, ps, live_leaders.get(ps.leader))
        return 0

    def _become_leader(self, part, ps) -> None:
        was_leader = part.is_leader
        self._remove_fetcher(part)
        lg = part.log
        part.leader_id = self.broker_id
        part.leader_epoch = ps.leader_epoch
        part.replicas = list(ps.replicas)
        part.isr = list(ps.isr)
        part.partition_epoch = ps.partition_epoch
        part.pending_isr = None
        lg.assign_leader_epoch(ps.leader_epoch)
        part.leader_epoch_start_offset = lg.log_end_offset
        now = now_ms()
        old = part.remote if was_leader else {}
        part.remote = {}
        for r in ps.replicas:
            if r == self.broker_id:
                continue
            rr = old.get(r) or RemoteReplica(now if r in ps.isr else 0)
            if r in ps.isr:
                rr.last_caught_up_ms = max(rr.last_caught_up_ms, now)
            part.remote[r] = rr
        log.info("%s-%d: leader at epoch %d, ISR %s, log end %d, high watermark %d", part.topic, part.partition,
                 ps.leader_epoch, ps.isr, lg.log_end_offset, lg.high_watermark)
        self.maybe_advance_high_watermark(part)
        part.wake()
        if ps.leader_recovery_state == 1:
            # after an unclean election: our log is the partition now; tell the controller it
            # has recovered (Kafka's leader does this once it has taken over)
            self._propose_isr(part, list(part.isr), recovered=True)
        if not was_leader:
            self._coordinators_follow(part.topic, part.partition, True, ps.leader_epoch)

    def _become_follower(self, part, ps, leader_ep) -> None:
        was_leader = part.is_leader
        part.leader_id = ps.leader
        part.leader_epoch = ps.leader_epoch
        part.replicas = list(ps.replicas)
        part.isr = list(ps.isr)
        part.partition_epoch = ps.partition_epoch
        part.pending_isr = None
        part.remote = {}
        part.wake()
        if was_leader:
            self._coordinators_follow(part.topic, part.partition, False)
        self._remove_fetcher(part)
        if ps.leader >= 0:
            if leader_ep is None:
                leader_ep = self._endpoint(ps.leader)
            if leader_ep is not None:
                self._add_fetcher(part, ps.leader, leader_ep)
            else:
                log.warning("%s-%d: no endpoint for leader %d", part.topic, part.partition, ps.leader)
        log.info("%s-%d: follower of %d at epoch %d (log end %d)", part.topic, part.partition, ps.leader,
                 ps.leader_epoch, part.log.log_end_offset)

    def _coordinators_follow(self, topic: str, partition: int, leader: bool, epoch: int = -1) -> None:
        """The group and transaction coordinators load/unload with their topics' leadership."""
        if topic == GROUP_TOPIC:
            coord, what = self.broker.groups, "group"
        elif topic == TXN_TOPIC:
            coord, what = getattr(self.broker, "txns", None), "transaction"
        else:
            return
        if coord is None:
            return
        try:
            if not leader:
                coord.on_resign(partition)
            elif topic == TXN_TOPIC:
                coord.on_become_leader(partition, epoch)
            else:
                coord.on_become_leader(partition)
        except Exception:
            log.exception("%s %s partition %d failed", "loading" if leader else "unloading", what, partition)

    def _endpoint(self, broker_id: int):
        name = self.cfg.inter_broker_listener_name()
        for b in self.broker.controller.brokers():
            if b.id == broker_id:
                for n, h, p, _ in b.endpoints:
                    if n == name:
                        return h, p
        return None

    def stop_replica(self, req, version: int):
        R = StopReplicaResponse
        err = self._check_epochs(req.controller_epoch, req.broker_epoch)
        items: list[tuple[str, int, bool, int]] = []
        if version >= 3:
            for ts in req.topic_states:
                for ps in ts.partition_states:
                    items.append((ts.topic_name, ps.partition_index, ps.delete_partition, ps.leader_epoch))
        elif version >= 1:
            for t in req.topics:
                for p in t.partition_indexes:
                    items.append((t.name, p, req.delete_partitions, NO_EPOCH))
        else:
            for up in req.ungrouped_partitions:
                items.append((up.topic_name, up.partition_index, req.delete_partitions, NO_EPOCH))
        out = []
        if err:
            return R(error_code=err, partition_errors=[])
        for t, p, delete, epoch in items:
            key = (t, p)
            applied = self.applied_epoch.get(key, NO_EPOCH)
            if epoch not in (NO_EPOCH, DELETING_EPOCH) and epoch < applied:
                out.append(R.StopReplicaPartitionError(topic_name=t, partition_index=p,
                                                       error_code=E.FENCED_LEADER_EPOCH))
                continue
            part = self.rm.get(t, p)
            if part is not None:
                self._remove_fetcher(part)
                if part.is_leader:
                    self._coordinators_follow(t, p, False)
                try:
                    self.rm.remove_partition(t, p, delete)
                except (StorageError, OSError) as e:
                    log.error("deleting %s-%d failed: %s", t, p, e)
                    out.append(R.StopReplicaPartitionError(topic_name=t, partition_index=p,
                                                           error_code=E.KAFKA_STORAGE_ERROR))
                    continue
            if delete:
                self.applied_epoch.pop(key, None)
            out.append(R.StopReplicaPartitionError(topic_name=t, partition_index=p, error_code=0))
        return R(error_code=0, partition_errors=out)

    # ------------------------------------------------------------------ leader side
    def maybe_advance_high_watermark(self, part) -> bool:
        lg = part.log
        if not part.is_leader:
            return False
        isr = set(part.isr)
        if part.pending_isr is not None:
            isr |= set(part.pending_isr)
        new = lg.log_end_offset
        for r in isr:
            if r == self.broker_id:
                continue
            rr = part.remote.get(r)
            if rr is None or rr.leo < 0:
                return False            # position unknown yet: the high watermark waits
            new = min(new, rr.leo)
        if new > lg.high_watermark:
            lg.update_high_watermark(new)
            return True
        return False

    def on_follower_fetch(self, part, replica_id: int, fetch_offset: int, now: int | None = None,
                          log_start_offset: int = -1) -> None:
        """A follower fetched ``fetch_offset`` (= its log end offset) from this leader.  Runs for
        every partition of every follower fetch (a fetch session's too): ``now`` comes from the
        caller, once per fetch, and the high watermark is looked at only when this follower's
        position moved past it (otherwise it cannot move the minimum over the ISR)."""
        rr = part.remote.get(replica_id)
        if rr is None:
            if replica_id not in part.replicas:
                return
            rr = part.remote[replica_id] = RemoteReplica(0)
        if now is None:
            now = now_ms()
        previous = rr.leo
        leo = part.log.log_end_offset
        if fetch_offset >= leo:
            rr.last_caught_up_ms = max(rr.last_caught_up_ms, now)
        elif fetch_offset >= rr.last_fetch_leader_leo >= 0:
            rr.last_caught_up_ms = max(rr.last_caught_up_ms, rr.last_fetch_ms)
        rr.leo = fetch_offset
        rr.log_start_offset = log_start_offset
        rr.last_fetch_ms = now
        rr.last_fetch_leader_leo = leo
        if replica_id not in part.isr and part.pending_isr is None:
            if fetch_offset >= part.log.high_watermark and fetch_offset >= part.leader_epoch_start_offset \
                    and self._no_expand_until.get((part.topic, part.partition), 0) <= now:
                self._propose_isr(part, part.isr + [replica_id])
        if fetch_offset > previous and fetch_offset > part.log.high_watermark and \
                self.maybe_advance_high_watermark(part):
            part.wake()

    async def _isr_expiration(self) -> None:
        interval = max(0.05, min(self.lag_ms / 2, 5000) / 1000)
        while True:
            await asyncio.sleep(interval)
            try:
                self.shrink_isr_once()
            except Exception:
                log.exception("ISR expiration check failed")

    def shrink_isr_once(self) -> None:
        now = now_ms()
        for part in list(self.rm.partitions.values()):
            if not part.is_leader or part.pending_isr is not None or len(part.isr) <= 1:
                continue
            out = []
            for r in part.isr:
                if r == self.broker_id:
                    continue
                rr = part.remote.get(r)
                if rr is not None and now - rr.last_caught_up_ms > self.lag_ms:
                    out.append(r)
            if out:
                log.info("%s-%d: shrinking ISR %s: %s not caught up for %d ms", part.topic, part.partition,
                         part.isr, out, self.lag_ms)
                self._propose_isr(part, [b for b in part.isr if b not in out])

    def _propose_isr(self, part, new_isr: list[int], recovered: bool = False) -> None:
        key = (part.topic, part.partition)
        if key in self._inflight:
            return
        self._inflight.add(key)
        part.pending_isr = list(new_isr)
        asyncio.get_running_loop().create_task(self._alter_partition(part, list(new_isr), part.leader_epoch,
                                                                     part.partition_epoch, recovered))

    async def _alter_partition(self, part, new_isr, leader_epoch, partition_epoch, recovered=False) -> None:
        key = (part.topic, part.partition)
        try:
            kw = {"leader_recovery_state": 0} if recovered else {}
            res = await self.broker.controller.alter_partition_isr(
                part.topic, part.partition, leader_epoch, new_isr, partition_epoch, **kw)
        except Exception as e:
            log.warning("AlterPartition for %s-%d failed: %s", part.topic, part.partition, e)
            res = None
        finally:
            self._inflight.discard(key)
        if self.rm.get(*key) is not part or not part.is_leader or part.leader_epoch != leader_epoch:
            return
        part.pending_isr = None
        if res is not None and res.error_code == 0 and res.state is not None:
            if res.state.leader_epoch == part.leader_epoch and res.state.partition_epoch >= part.partition_epoch:
                if self.broker.metrics is not None:
                    self.broker.metrics.isr_changed(part.isr, res.state.isr)
                part.isr = list(res.state.isr)
                part.partition_epoch = res.state.partition_epoch
                log.info("%s-%d: ISR is now %s (partition epoch %d)", part.topic, part.partition, part.isr,
                         part.partition_epoch)
        elif res is not None:
            log.info("%s-%d: AlterPartition to %s refused with error %d", part.topic, part.partition, new_isr,
                     res.error_code)
            # e.g. INELIGIBLE_REPLICA for a broker in controlled shutdown: do not retry at every fetch
            self._no_expand_until[key] = now_ms() + 1000
        self.maybe_advance_high_watermark(part)
        part.wake()

    # ------------------------------------------------------------------ fetchers
    def _add_fetcher(self, part, leader_id: int, endpoint) -> None:
        key = (leader_id, endpoint[0], endpoint[1])
        f = self.fetchers.get(key)
        if f is None:
            f = self.fetchers[key] = ReplicaFetcher(self, leader_id, endpoint[0], endpoint[1])
        f.add(part)
        self.fetcher_of[(part.topic, part.partition)] = f

    def _remove_fetcher(self, part) -> None:
        f = self.fetcher_of.pop((part.topic, part.partition), None)
        if f is not None:
            f.remove(part)


class _FetchState:
    __slots__ = ("part", "epoch", "truncating", "ask_leader", "out_of_range", "delay_until", "in_sync",
                 "last_error")

    def __init__(self, part):
        self.part = part
        self.epoch = part.leader_epoch
        self.truncating = True
        # False: a log with leader epochs truncates by the fetch's diverging epoch (as Kafka's
        # followers do since 2.7); True: ask the leader with OffsetForLeaderEpoch first
        self.ask_leader = False
        self.out_of_range = False   # answered OFFSET_OUT_OF_RANGE: ask the leader's log bounds
        self.delay_until = 0.0
        self.in_sync = False        # at the leader's high watermark after the last fetch (Kafka's lag <= 0)
        self.last_error = 0         # the error code last logged (logged again only when it changes)


class _FollowerSession:
    """The follower's side of a fetch session with one leader: its id, the epoch of the next
    request (0: a full fetch that asks for a new session), and what the session holds for each
    partition: (fetch offset, log start offset, leader epoch) as last sent."""

    def __init__(self):
        self.id = 0
        self.epoch = 0
        self.parts: dict[tuple[str, int], tuple] = {}

    def reset(self) -> None:
        """Next fetch is full; it names the old id so the leader closes that session."""
        self.epoch = 0
        self.parts = {}

    def answered(self, resp, sent: dict) -> bool:
        """Take the answer to a fetch of ``sent`` ({partition: state}); False when the session is
        over (a session error): its partitions are then not to be read from the answer."""
        if resp.error_code:
            self.id = 0 if resp.error_code == E.FETCH_SESSION_ID_NOT_FOUND else self.id
            self.reset()
            return False
        if self.epoch == 0 or resp.session_id != self.id:
            # a full fetch, or the leader answered sessionless: a new session, or none (id 0)
            self.id = resp.session_id
            self.epoch = 1 if self.id else 0
            self.parts = dict(sent) if self.id else {}
            return True
        self.epoch = next_epoch(self.epoch)
        self.parts = dict(sent)
        return True


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader, over one connection."""

    def __init__(self, mgr: ReplicationManager, leader_id: int, host: str, port: int):
        self.mgr = mgr
        self.leader_id = leader_id
        self.host, self.port = host, port
        self.parts: dict[tuple[str, int], _FetchState] = {}
        self.wakeup = asyncio.Event()
        self.conn: KafkaClientConnection | None = None
        cfg = mgr.cfg
        self.max_wait_ms = cfg.get("replica.fetch.wait.max.ms")
        self.min_bytes = cfg.get("replica.fetch.min.bytes")
        self.max_bytes = cfg.get("replica.fetch.response.max.bytes")
        self.part_max_bytes = cfg.get("replica.fetch.max.bytes")
        self.timeout = cfg.get("replica.socket.timeout.ms") / 1000
        self.backoff = cfg.get("replica.fetch.backoff.ms") / 1000
        self.closed = False
        self.session = _FollowerSession()
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{leader_id}")

    def add(self, part) -> None:
        self.parts[(part.topic, part.partition)] = _FetchState(part)
        self.wakeup.set()

    def remove(self, part) -> None:
        st = self.parts.get((part.topic, part.partition))
        if st is not None and st.part is part:
            del self.parts[(part.topic, part.partition)]

    async def close(self) -> None:
        self.closed = True
        await _cancel_and_wait(self.task)
        if self.conn is not None:
            await self.conn.close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = 0.05
        while not self.closed:
            if not self.parts:
                if self.conn is not None:
                    await self.conn.close()
                    self.conn = None
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = await connect_to_broker(
                        self.mgr.cfg, self.host, self.port, client_id=f"broker-{self.mgr.broker_id}-fetcher-{self.leader_id}",
                        timeout=min(self.timeout, 10.0), request_timeout=self.timeout + self.max_wait_ms / 1000)
                    _set_receive_buffer(self.conn, self.mgr.cfg.get("replica.socket.receive.buffer.bytes"))
                truncating = [k for k, st in self.parts.items() if st.truncating and st.delay_until <= loop.time()]
                if truncating:
                    await self._truncate(truncating)
                resetting = [k for k, st in self.parts.items() if st.out_of_range and st.delay_until <= loop.time()]
                if resetting:
                    await self._out_of_range(resetting)
                now = loop.time()
                ready = [k for k, st in self.parts.items()
                         if not st.truncating and not st.out_of_range and st.delay_until <= now]
                if ready:
                    ready = self._unthrottled(ready)
                if not ready:
                    wait = min([st.delay_until for st in self.parts.values()] + [now + 0.1]) - now
                    self.wakeup.clear()
                    try:
                        await asyncio.wait_for(self.wakeup.wait(), max(0.01, wait))
                    except asyncio.TimeoutError:
                        pass
                    continue
                await self._fetch(ready)
                backoff = 0.05
            except asyncio.CancelledError:
                raise
            except (KafkaConnectionError, OSError, asyncio.TimeoutError) as e:
                tls = e if isinstance(e, ssl.SSLError) else e.__context__    # connect() wraps it
                if isinstance(tls, ssl.SSLError) and str(e) != getattr(self, "_last_tls_error", None):
                    # a TLS failure (untrusted certificate, refused client certificate) does not
                    # heal by retrying: say so once per distinct error, as Kafka logs SSL handshake failures
                    self._last_tls_error = str(e)
                    log.warning("fetcher for leader %d at %s:%d: TLS handshake failed: %s",
                                self.leader_id, self.host, self.port, e)
                log.debug("fetcher for leader %d: %s", self.leader_id, e)
                if self.conn is not None:
                    await self.conn.close()
                    self.conn = None
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.backoff or 1.0)
            except Exception:
                log.exception("replica fetcher for leader %d failed", self.leader_id)
                await asyncio.sleep(self.backoff or 1.0)

    def _unthrottled(self, keys):
        """Leave out throttled partitions that are not in sync while the follower quota is exceeded."""
        q = self.mgr.follower_quota
        if q.bound >= LONG_MAX:
            return keys
        return [k for k in keys if not q.should_throttle(k[0], k[1], self.parts[k].in_sync)]

    def _delay(self, st: _FetchState, seconds: float | None = None) -> None:
        st.delay_until = asyncio.get_running_loop().time() + (seconds if seconds is not None else
                                                                min(self.backoff, 0.2))

    async def _truncate(self, keys) -> None:
        """Truncate divergent tails before fetching: a log without leader epochs to its high
        watermark, one the leader must be asked about (``ask_leader``) by OffsetForLeaderEpoch."""
        O = OffsetForLeaderEpochRequest
        ask: dict[str, list] = {}
        asked = {}
        for k in keys:
            st = self.parts[k]
            lg = st.part.log
            latest = lg.epoch_cache.latest_epoch
            if latest == NO_EPOCH:
                if lg.log_end_offset > lg.high_watermark:
                    self._truncate_log(st, k, lg.high_watermark)
                st.truncating = False
                continue
            if not st.ask_leader:
                st.truncating = False           # the first fetch names ``latest`` and learns
                continue
            ask.setdefault(k[0], []).append(O.OffsetForLeaderPartition(partition=k[1], current_leader_epoch=st.epoch,
                                                                       leader_epoch=latest))
            asked[k] = st
        if not ask:
            return
        req = O(replica_id=self.mgr.broker_id, topics=[O.OffsetForLeaderTopic(topic=t, partitions=ps)
                                                       for t, ps in ask.items()])
        resp = await self.conn.send(req, timeout=self.timeout)
        for tr in resp.topics:
            for r in tr.partitions:
                k = (tr.topic, r.partition)
                if k not in asked:
                    continue
                st = asked[k]
                if self.parts.get(k) is not st:
                    continue
                if r.error_code:
                    if r.error_code == E.TOPIC_AUTHORIZATION_FAILED and st.last_error != r.error_code:
                        st.last_error = r.error_code
                        log.warning("%s-%d: OffsetForLeaderEpoch to leader %d failed with error %d (%s)", k[0], k[1],
                                    self.leader_id, r.error_code, error_name(r.error_code))
                    self._delay(st, max(self.backoff or 1.0, 0.2)
                                if r.error_code == E.TOPIC_AUTHORIZATION_FAILED else None)
                    continue
                lg = st.part.log
                leo = lg.log_end_offset
                target = _truncation_target(lg, r.leader_epoch, r.end_offset)
                if target < leo:
                    log.info("%s-%d: truncating from %d to %d (leader %d: epoch %d ends at %d)", k[0], k[1], leo,
                             target, self.leader_id, r.leader_epoch, r.end_offset)
                    self._truncate_log(st, k, max(target, 0))
                st.truncating = False

    async def _out_of_range(self, keys) -> None:
        """Partitions whose fetch offset the leader does not have (Kafka's
        fetchOffsetAndTruncate): ask the leader's log end and start (ListOffsets as a replica).
        A leader ending below this log (after an unclean election) has this log cut to its end;
        one starting above it has this log emptied to start there; otherwise this log has
        parted from the leader's and OffsetForLeaderEpoch finds where."""
        latest = await self._list_offsets(keys, -1)
        earliest = await self._list_offsets([k for k, (st, end) in latest.items()
                                             if end >= st.part.log.log_end_offset], -2)
        for k, (st, end) in latest.items():
            if self.parts.get(k) is not st:
                continue                    # removed or replaced while asking
            lg = st.part.log
            leo = lg.log_end_offset
            st.out_of_range = False
            if end < leo:
                log.warning("%s-%d: the leader's log end %d is below ours %d: truncating to it", k[0], k[1],
                            end, leo)
                self._truncate_log(st, k, end)
                continue
            start = earliest.get(k, (st, -1))[1]
            if k not in earliest:
                st.out_of_range = True      # the second question failed: ask again
            elif start > leo:
                log.info("%s-%d: fetch offset %d below the leader's log start %d: starting over there",
                         k[0], k[1], leo, start)
                self._truncate_log(st, k, start, fully=True)
            else:
                st.truncating = st.ask_leader = True
                self._delay(st, 0.05)

    async def _list_offsets(self, keys, timestamp: int) -> dict:
        """{partition: (its fetch state, the leader's offset)} for ListOffsets ``timestamp``
        (-1 log end, -2 log start) asked as this replica; partitions answered with an error wait
        and are left out."""
        if not keys:
            return {}
        L = ListOffsetsRequest
        topics: dict[str, list] = {}
        for k in keys:
            topics.setdefault(k[0], []).append(L.ListOffsetsPartition(
                partition_index=k[1], current_leader_epoch=self.parts[k].epoch, timestamp=timestamp))
        resp = await self.conn.send(L(replica_id=self.mgr.broker_id, isolation_level=0, topics=[
            L.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()]), timeout=self.timeout)
        out = {}
        for tr in resp.topics:
            for r in tr.partitions:
                k = (tr.name, r.partition_index)
                st = self.parts.get(k)
                if k not in keys or st is None:
                    continue
                if r.error_code:
                    if r.error_code != st.last_error:
                        st.last_error = r.error_code
                        log.warning("%s-%d: ListOffsets to leader %d failed with error %d (%s)", k[0], k[1],
                                    self.leader_id, r.error_code, error_name(r.error_code))
                    self._delay(st, max(self.backoff or 1.0, 0.2))
                    continue
                out[k] = (st, r.offset)
        return out

    def _truncate_log(self, st: _FetchState, k, offset: int, fully: bool = False) -> None:
        """Cut the log to end at ``offset`` (``fully``: empty it to start there); a failure
        takes the log dir offline."""
        try:
            if fully:
                st.part.log.truncate_fully_and_start_at(offset)
            else:
                st.part.log.truncate_to(offset)
        except (StorageError, OSError) as e:
            log.error("%s-%d: truncating to %d failed: %s", k[0], k[1], offset, e)
            self.mgr.broker.log_manager.report_error(k, e)
            raise

    async def _fetch(self, keys) -> None:
        """One Fetch of the partitions ``keys``, in the leader's fetch session (KIP-227) when it
        keeps one: the request then names only partitions whose position, log start or epoch
        changed since the session last heard of them, and forgets those not fetched now."""
        F = FetchRequest
        topics: dict[str, list] = {}
        sent = {}
        session = self.session
        full = session.epoch == 0
        now = {}
        for k in keys:
            st = self.parts[k]
            lg = st.part.log
            leo = lg.log_end_offset
            last_epoch = lg.epoch_cache.latest_epoch
            state = (leo, lg.log_start_offset, st.epoch, last_epoch)
            now[k] = state
            sent[k] = (st, leo)
            if full or session.parts.get(k) != state:
                topics.setdefault(k[0], []).append(F.FetchPartition(
                    partition=k[1], current_leader_epoch=st.epoch, fetch_offset=leo,
                    last_fetched_epoch=last_epoch, log_start_offset=lg.log_start_offset,
                    partition_max_bytes=self.part_max_bytes))
        forget: dict[str, list] = {}
        if not full:
            for k in session.parts:
                if k not in now:
                    forget.setdefault(k[0], []).append(k[1])
        me = self.mgr.broker_id
        req = F(replica_id=me, replica_state=F.ReplicaState(replica_id=me, replica_epoch=self.mgr.broker_epoch),
                max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes, max_bytes=self.max_bytes,
                isolation_level=0, session_id=session.id, session_epoch=session.epoch,
                topics=[F.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
                forgotten_topics_data=[F.ForgottenTopic(topic=t, partitions=ps) for t, ps in forget.items()])
        try:
            resp = await self.conn.send(req, max_version=12, timeout=self.timeout + self.max_wait_ms / 1000)
        except BaseException:
            session.reset()             # the leader may or may not have seen it: start over
            raise
        if not session.answered(resp, now):
            log.debug("fetcher for leader %d: fetch session %d ended (error %d): starting a new one",
                      self.leader_id, session.id, resp.error_code)
            return
        for tr in resp.responses:
            for pd in tr.partitions:
                k = (tr.topic, pd.partition_index)
                if k not in sent:
                    continue
                st, offset = sent[k]
                if self.parts.get(k) is not st:
                    continue
                try:
                    self._handle(st, offset, pd)
                except (StorageError, OSError) as e:
                    log.error("%s-%d: appending what leader %d sent failed: %s", k[0], k[1],
                              self.leader_id, e)
                    self.mgr.broker.log_manager.report_error(k, e)
                    self._delay(st, 1.0)

    def _handle(self, st: _FetchState, offset: int, pd) -> None:
        part = st.part
        lg = part.log
        err = pd.error_code
        if err == 0:
            st.last_error = 0
            if lg.log_end_offset != offset:
                return                          # truncated meanwhile
            div = pd.diverging_epoch
            if div.epoch >= 0:
                self._diverged(st, div)
                return
            changed = False
            data = pd.records
            if data is not None and len(data):
                changed = self._append(part, data)
                if self.mgr.broker.metrics is not None:
                    self.mgr.broker.metrics.replicated_in(len(data))
                q = self.mgr.follower_quota
                if q.is_throttled(part.topic, part.partition):
                    q.record(len(data))
            st.in_sync = lg.log_end_offset >= pd.high_watermark
            hw = min(pd.high_watermark, lg.log_end_offset)
            if hw > lg.high_watermark:
                lg.update_high_watermark(hw)
                changed = True
            if pd.log_start_offset > lg.log_start_offset and pd.log_start_offset <= lg.high_watermark:
                try:
                    lg.delete_records(pd.log_start_offset)
                except Exception:
                    pass
            if changed:
                part.wake()
            return
        if err == E.OFFSET_OUT_OF_RANGE:
            st.out_of_range = True          # Kafka's answer names no bounds: ListOffsets asks them
            return
        if err in (E.UNKNOWN_LEADER_EPOCH, E.FENCED_LEADER_EPOCH, E.NOT_LEADER_OR_FOLLOWER,
                   E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_ID):
            self._delay(st, 0.1)
            return
        if err != st.last_error:        # once per distinct error, not on every retry
            st.last_error = err
            log.warning("%s-%d: fetch from leader %d failed with error %d (%s)", part.topic, part.partition,
                        self.leader_id, err, error_name(err))
        self._delay(st, max(self.backoff or 1.0, 0.2) if err == E.TOPIC_AUTHORIZATION_FAILED else None)

    def _diverged(self, st: _FetchState, div) -> None:
        """The leader says this log parted from its own (a diverging epoch, Fetch v12+): cut
        the tail off as OffsetForLeaderEpoch's answer would; the next fetch names the epoch
        left at the end, and the leader answers again until the two logs agree."""
        part = st.part
        lg = part.log
        leo = lg.log_end_offset
        target = _truncation_target(lg, div.epoch, div.end_offset)
        k = (part.topic, part.partition)
        if target < leo:
            log.info("%s-%d: truncating from %d to %d (leader %d: diverging at epoch %d, which ends at %d)",
                     k[0], k[1], leo, target, self.leader_id, div.epoch, div.end_offset)
            self._truncate_log(st, k, max(target, 0))
        else:                                   # nothing to cut by that answer: ask outright
            st.truncating = st.ask_leader = True
            self._delay(st, 0.05)

    def _append(self, part, data) -> bool:
        return part.log.append_new_batches(data.read() if hasattr(data, "read") else data) > 0


def _truncation_target(lg, leader_epoch: int, end_offset: int) -> int:
    """Where a follower's log must end, given the leader's (epoch, end offset) for this log's
    latest epoch: up to the leader's end of that epoch, and no further than this log's own end
    of the epoch the leader named (the high watermark when the leader knows no such epoch)."""
    leo = lg.log_end_offset
    if leader_epoch == NO_EPOCH or end_offset < 0:
        return min(lg.high_watermark, leo)
    if leader_epoch == lg.epoch_cache.latest_epoch:
        return min(end_offset, leo)
    _fe, fo = lg.end_offset_for_epoch(leader_epoch)
    return min(end_offset, fo if fo >= 0 else lg.high_watermark, leo)


async def _cancel_and_wait(task: asyncio.Task) -> None:
    """Cancel until the task is done (``asyncio.wait_for`` in 3.11 can swallow a cancellation
    that races with a completed response)."""
    while not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=0.5)
    if not task.cancelled() and task.exception() is not None:
        log.debug("task %s ended with %r", task.get_name(), task.exception())


def _zero():
    import uuid
    return uuid.UUID(int=0)

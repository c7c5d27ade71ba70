"""Partitions this broker hosts: leadership, high watermark, and waiters on both.

How this works
--------------
``ReplicaManager.sync(topics)`` is called with the controller's view whenever metadata changes:
it opens (or creates) the log of every partition whose replica list contains this broker,
updates leader/epoch/ISR, and deletes the logs of topics that disappeared.

A ``Partition`` wraps one ``storage.Log``.  Appends happen on the event loop (serialised by the
loop itself: ``Log.append`` never awaits).  After an append, or whenever the high watermark
moves, the partition wakes every waiter registered with ``add_waiter`` — long-poll fetches and
acks=all produces ``await`` those futures with their own timeouts.

On a single broker the ISR is just this broker, so the high watermark is the log end offset.
Followers and ISR tracking (the cluster) plug in at ``maybe_advance_high_watermark``.

A partition whose log dir failed (``mark_offline``) stays in ``partitions`` as ``offline``: no
leader here (``leader_id`` -1, so every ``is_leader`` check refuses it) and requests for it are
answered KAFKA_STORAGE_ERROR (``not_leader_error``), as Kafka answers for its
``HostedPartition.Offline``.  Its log is the closed one, or None when the dir failed before the
log was opened; nothing reads it while there is no leader here.
"""
from __future__ import annotations

import asyncio
import logging

from broker.config import ConfigError, effective_topic_config
from protocol.errors import ErrorCode as E
from storage.config import LogConfig
from storage.errors import StorageError

log = logging.getLogger("odradek.replica")


def log_config_for(broker_cfg, overrides) -> LogConfig:
    """A storage LogConfig from the broker defaults plus a topic's overrides."""
    eff = effective_topic_config(broker_cfg, overrides)
    props = {}
    for k, v in eff.items():
        if isinstance(v, (list, tuple)):
            v = ",".join(str(x) for x in v)
        props[k] = v
    return LogConfig.from_properties(props)


class Wakeable:
    """Something long polls park on: ``wake`` resolves every future registered with
    ``add_waiter`` (``wait_for_wake`` registers one and waits for it)."""

    def __init__(self):
        self._waiters: list[asyncio.Future] = []

    def add_waiter(self, fut: asyncio.Future) -> None:
        self._waiters.append(fut)

    def remove_waiter(self, fut: asyncio.Future) -> None:
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass

    def wake(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for f in waiters:
                if not f.done():
                    f.set_result(None)


class Partition(Wakeable):
    """One hosted partition.  Owned by the event loop; not thread-safe."""

    def __init__(self, manager, topic, partition, topic_id, log_):
        super().__init__()
        self.manager = manager
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = log_
        self.leader_id = -1
        self.leader_epoch = 0
        self.replicas: list[int] = []
        self.isr: list[int] = []
        # Cluster (ZooKeeper) mode only; see broker/replication.py.
        self.partition_epoch = 0          # zkVersion of the state znode
        self.remote: dict = {}            # follower id -> RemoteReplica (while leader)
        self.pending_isr: list[int] | None = None   # AlterPartition in flight
        self.leader_epoch_start_offset = 0
        self.offline = log_ is None       # its log dir failed (ReplicaManager.mark_offline)
        if manager.replication is None and log_ is not None:
            # Single node: everything below the log end offset is committed.
            self.log.update_high_watermark(self.log.log_end_offset)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.manager.broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def maybe_advance_high_watermark(self) -> bool:
        """Move the high watermark to the minimum log end offset over the ISR."""
        repl = self.manager.replication
        if repl is not None:
            return repl.maybe_advance_high_watermark(self)
        new = self.log.log_end_offset   # only this broker is in the ISR (single node)
        if new != self.log.high_watermark:
            self.log.update_high_watermark(new)
            return True
        return False

    def after_append(self) -> None:
        self.maybe_advance_high_watermark()
        self.wake()

    def check_leader_epoch(self, current: int) -> int:
        """A client's current leader epoch against ours (-1 skips the check, as in Kafka): 0, or
        FENCED_LEADER_EPOCH when the client's is older, UNKNOWN_LEADER_EPOCH when newer."""
        if current == -1 or current == self.leader_epoch:
            return 0
        return E.FENCED_LEADER_EPOCH if current < self.leader_epoch else E.UNKNOWN_LEADER_EPOCH

    async def wait_for_high_watermark(self, needed: int, epoch: int, deadline: float) -> int:
        """acks=all: wait (until the loop time ``deadline``) for the high watermark to reach
        ``needed``.  Returns 0, or the Kafka error that ended the wait: leadership moved
        (NOT_LEADER_OR_FOLLOWER), the ISR fell below min.insync.replicas (``effective_min_isr``)
        (NOT_ENOUGH_REPLICAS_AFTER_APPEND), or time ran out (REQUEST_TIMED_OUT)."""
        loop = asyncio.get_running_loop()
        while self.high_watermark < needed:
            if not self.is_leader or self.leader_epoch != epoch:
                return E.NOT_LEADER_OR_FOLLOWER
            if len(self.isr) < effective_min_isr(self):
                return E.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            remaining = deadline - loop.time()
            if remaining <= 0:
                return E.REQUEST_TIMED_OUT
            await wait_for_wake((self,), deadline)
        return 0


def effective_min_isr(part) -> int:
    """Kafka's effectiveMinIsr (3.7+, KAFKA-15583): ``min.insync.replicas``, but never more than
    the partition has replicas, so acks=all works on a partition with fewer replicas than the
    setting asks for (a single broker that took a cluster's ``min.insync.replicas=2``)."""
    return min(part.log.config.min_insync_replicas, max(1, len(part.replicas)))


def not_leader_error(part) -> int:
    """The error for a request to a partition not led here: KAFKA_STORAGE_ERROR when its log
    dir has failed, else NOT_LEADER_OR_FOLLOWER."""
    return E.KAFKA_STORAGE_ERROR if part is not None and part.offline else E.NOT_LEADER_OR_FOLLOWER


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


async def wait_for_wake(sources, deadline: float) -> None:
    """Wait until one of ``sources`` (``Wakeable``) wakes, or until the loop time ``deadline``."""
    fut = asyncio.get_running_loop().create_future()
    for s in sources:
        s.add_waiter(fut)
    try:
        await wait_until(fut, deadline)
    finally:
        for s in sources:
            s.remove_waiter(fut)


async def wait_until(fut: asyncio.Future, deadline: float) -> None:
    """Wait for ``fut`` (a waiter that ``Replica.wake`` resolves) or until the loop time
    ``deadline``, whichever comes first.  A timer resolves the future itself: the waiting task
    resumes in the loop iteration after the wake, where ``asyncio.wait_for`` (3.11) takes one
    more and builds a future and callbacks of its own."""
    timer = asyncio.get_running_loop().call_at(deadline, _expire, fut)
    try:
        await fut
    finally:
        timer.cancel()


class ReplicaManager:
    def __init__(self, broker):
        self.broker = broker
        self.broker_id = broker.broker_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.replication = None     # broker.replication.ReplicationManager in a ZooKeeper cluster
        self._synced = False        # sync has run: a partition it has not seen before is new

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def sync(self, topics: dict) -> None:
        """Bring hosted partitions in line with the controller's topics snapshot."""
        lm = self.broker.log_manager
        cfg = self.broker.config
        wanted = set()
        for name, info in topics.items():
            try:
                lcfg = log_config_for(cfg, info.configs)
            except ConfigError as e:
                log.error("topic %s has an invalid config (%s); using broker defaults", name, e)
                lcfg = log_config_for(cfg, {})
            for p, state in info.partitions.items():
                if self.broker_id not in state.replicas:
                    continue
                key = (name, p)
                wanted.add(key)
                part = self.partitions.get(key)
                if part is None:
                    part = self._open(key, info.topic_id, lcfg, is_new=self._synced)
                elif not part.offline:
                    self._set_config(key, part, lcfg)
                if part.offline:
                    continue
                part.leader_id = state.leader
                part.leader_epoch = state.leader_epoch
                part.replicas = list(state.replicas)
                part.isr = list(state.isr)
                if part.is_leader:
                    # As Kafka's makeLeader: the new epoch starts at the log end offset, so
                    # OffsetForLeaderEpoch answers for it even before the first append.
                    part.log.assign_leader_epoch(state.leader_epoch)
        deleted = False
        for key in [k for k in self.partitions if k not in wanted]:
            part = self.partitions.pop(key)
            part.wake()
            lm.delete_log(*key)
            deleted = True
            log.info("deleted log of %s-%d", *key)
        if deleted:
            self.schedule_dir_removal()
        self._synced = True

    def _open(self, key, topic_id, lcfg, is_new: bool) -> Partition:
        """Host ``key``: open or create its log.  A partition whose log dir is offline, or which
        is not new while some dir is offline (its log may be there: Kafka will not start it
        empty elsewhere), is hosted offline."""
        lm = self.broker.log_manager
        try:
            lg = lm.get_or_create_log(*key, lcfg, topic_id=_b64(topic_id), is_new=is_new)
        except StorageError as e:
            log.error("%s-%d is offline: %s", key[0], key[1], e)
            lg = None
        part = self.partitions[key] = Partition(self, key[0], key[1], topic_id, lg)
        if lg is not None:
            self.broker.log_dir_mover.ensure(key)      # a move to another dir goes on
        return part

    def ensure_partition(self, topic: str, partition: int, topic_id, overrides: dict,
                         is_new: bool = False) -> Partition:
        """The hosted partition, opening or creating its log (cluster mode: LeaderAndIsr)."""
        key = (topic, partition)
        part = self.partitions.get(key)
        if part is None:
            try:
                lcfg = log_config_for(self.broker.config, overrides)
            except ConfigError as e:
                log.error("topic %s has an invalid config (%s); using broker defaults", topic, e)
                lcfg = log_config_for(self.broker.config, {})
            part = self._open(key, topic_id, lcfg, is_new)
        return part

    def mark_offline(self, tps) -> None:
        """The log dir of ``tps`` failed: stop leading and following them; requests for them
        are answered KAFKA_STORAGE_ERROR from now on."""
        repl = self.replication
        for key in tps:
            part = self.partitions.get(key)
            if part is None or part.offline:
                continue
            was_leader = part.is_leader
            part.offline = True
            part.leader_id = -1
            part.remote = {}
            part.pending_isr = None
            if repl is not None:
                repl._remove_fetcher(part)
            if was_leader:
                self._resign_coordinator(*key)
            part.wake()

    def _resign_coordinator(self, topic: str, partition: int) -> None:
        """A coordinator (groups, transactions) stops owning a partition of its topic."""
        coord = {"__consumer_offsets": self.broker.groups,
                 "__transaction_state": self.broker.txns}.get(topic)
        if coord is not None:
            try:
                coord.on_resign(partition)
            except Exception:
                log.exception("unloading the coordinator of %s-%d failed", topic, partition)

    def remove_partition(self, topic: str, partition: int, delete: bool) -> None:
        """Stop hosting a partition (cluster mode: StopReplica); ``delete`` removes its log."""
        part = self.partitions.get((topic, partition))
        if part is None:
            return
        part.leader_id = -1
        part.wake()
        if delete:
            del self.partitions[(topic, partition)]
            self.broker.log_manager.delete_log(topic, partition)
            log.info("deleted log of %s-%d", topic, partition)
            self.schedule_dir_removal()

    def schedule_dir_removal(self) -> None:
        """Remove renamed ``-delete`` log dirs after ``log.segment.delete.delay.ms``, off-loop,
        and close the files of deleted or replaced logs once ``file.delete.delay.ms`` has
        passed."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        lm = self.broker.log_manager
        delay = self.broker.config.get("log.segment.delete.delay.ms") / 1000
        # the broker default of file.delete.delay.ms; a topic with a longer override waits for
        # the retention check's pass (LogManager.cleanup_logs)
        loop.call_later(delay + 0.001, lm.close_retired_logs)

        def remove():
            fut = loop.run_in_executor(None, lm.remove_deleted_dirs)
            fut.add_done_callback(lambda f: not f.cancelled() and f.exception() and log.error(
                "removing deleted log dirs failed: %s", f.exception()))
        loop.call_later(delay, remove)

    def update_configs(self, topic: str, overrides: dict) -> None:
        lcfg = log_config_for(self.broker.config, overrides)
        for key, part in self.partitions.items():
            if key[0] == topic and not part.offline:
                self._set_config(key, part, lcfg)

    def _set_config(self, key, part, lcfg) -> None:
        """A topic's config for its log, and for the copy of a log moving to another dir."""
        part.log.config = lcfg
        fut = self.broker.log_manager.future_logs.get(key)
        if fut is not None:
            fut.config = lcfg


def _b64(u):
    from controller.api import uuid_to_base64
    return uuid_to_base64(u)

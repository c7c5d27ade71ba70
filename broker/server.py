"""Composition root: start-up order, listeners, background tasks, clean shutdown.

Start: controller (embedded store, or ZooKeeper later) -> log manager (locks the log dirs,
recovers logs) -> replica manager (opens the hosted partitions) -> coordinators -> listeners.
Stop (SIGTERM/SIGINT): close listeners, let in-flight requests finish, close connections, stop
coordinators, flush and checkpoint every log, write the clean-shutdown marker, stop controller.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time

from broker import dispatch
from broker.config import BrokerConfig, ConfigError
from broker.connection import KafkaConnection
from broker.fetch_session import FetchSessionCache
from broker.log_dir_mover import LogDirMover
from protocol.framing import FramePool
from broker.replica import ReplicaManager, log_config_for
from storage.errors import StorageError

log = logging.getLogger("odradek.server")

METADATA_WAIT_S = 10.0   # cluster start: how long client requests wait for the first UpdateMetadata


class Broker:
    """One broker process.  Everything it owns is used from its event loop only."""

    def __init__(self, config: BrokerConfig):
        self.config = config
        self.broker_id = config.broker_id
        self.connections: set[KafkaConnection] = set()
        self.frame_pool = FramePool()       # buffers of large request frames, lent again (protocol/framing.py)
        self.fetch_sessions = FetchSessionCache(      # KIP-227 (broker/fetch_session.py)
            config.get("max.incremental.fetch.session.cache.slots"))
        self.log_dir_mover = LogDirMover(self)      # AlterReplicaLogDirs (broker/log_dir_mover.py)
        self.servers: list = []         # broker/connection_quotas.Listener, one per listener
        self.connection_quotas = None   # broker/connection_quotas.py
        self.tasks: list[asyncio.Task] = []
        self.metrics = None
        self.security = None
        self.tokens = None                  # broker.security.tokens.TokenManager
        self.policies = None                # broker.policy.Policies
        self.replica_selector = None        # broker.replica_selector (replica.selector.class)
        self.groups = None
        self.txns = None
        self.share = None             # share groups (KIP-932): broker/share/manager.py
        self.controller = None
        self.log_manager = None
        self.log_cleaner = None         # storage.cleaner.LogCleaner when log.cleaner.enable
        self.replicas = None
        self.client_quotas = None       # broker/client_quota.py
        self.quota_callback = None      # client.quota.callback.class (broker/quota_callback.py)
        self.client_metrics = None      # KIP-714 subscriptions and receivers (broker/client_metrics.py)
        self.produce_quota = None       # set only while some producer_byte_rate is configured
        self.fetch_quota = None         # set only while some consumer_byte_rate is configured
        self.request_quota = None       # set only while some request_percentage is configured
        self.mutation_quota = None      # set only while some controller_mutation_rate is configured
        self.started_at = time.time()
        self._stopping = False
        self._checkpoint_writer = None     # one thread for checkpoint files (_schedule_background)
        # Client requests wait until start-up has finished (Kafka enables request processing
        # last): in cluster mode the listeners open before the broker registers in ZooKeeper, so
        # the controller can reach it, but until it has registered and the controller's first
        # UpdateMetadata has arrived it knows no topics.  ApiVersions, SASL and the controller's
        # requests are always served (broker/connection.py).
        self.serving = False
        self._serving = asyncio.Event()
        self.stop_requested = asyncio.Event()   # the broker asks to be stopped (all log dirs failed)
        self.exit_code = 0

    def start_serving(self) -> None:
        self.serving = True
        self._serving.set()

    async def until_serving(self) -> None:
        await self._serving.wait()

    # -- start ---------------------------------------------------------------------------------
    async def start(self) -> None:
        dispatch.load_handlers()
        from broker.metrics import start_metrics
        self.metrics = await start_metrics(self)      # None unless odradek.metrics.prometheus.port is set
        cfg = self.config
        from broker.security import SecurityManager
        self.security = SecurityManager(self)      # TLS contexts, SASL, authorizer
        from broker.security.tokens import TokenManager
        self.tokens = TokenManager(self)           # delegation tokens (off without a secret key)
        from broker.policy import Policies
        self.policies = Policies(cfg)              # create-topic / alter-config policies (or none)
        from broker import replica_selector
        self.replica_selector = replica_selector.load(cfg)     # KIP-392 (or none)
        from broker import quota_callback
        self.quota_callback = quota_callback.load(cfg)   # client.quota.callback.class (or none)
        from broker.client_metrics import ClientMetricsManager, load_receivers
        self.client_metrics = ClientMetricsManager(self, *load_receivers(cfg))     # metric.reporters
        loop = asyncio.get_running_loop()
        if cfg.zookeeper_connect:
            await self._start_zookeeper_mode()
            return
        from controller.single_node import SingleNodeController
        from storage.log_manager import LogManager
        if cfg.kraft_mode:
            # a KRaft configuration file: its directories must have been formatted by
            # kafka-storage.sh, which chose the cluster id (storage/meta_properties.py)
            from storage.meta_properties import check_formatted, metadata_log_dir
            self.controller = SingleNodeController(cfg, log_dir=metadata_log_dir(cfg), cluster_id=check_formatted(cfg))
        else:
            self.controller = SingleNodeController(cfg)
        await self.controller.start()
        self.broker_id = self.controller.broker_id
        ctrl = self.controller

        def topic_config(topic):
            info = ctrl.topic(topic)
            return log_config_for(cfg, info.configs if info else {})

        t0 = time.monotonic()
        self.log_manager = await loop.run_in_executor(None, lambda: LogManager(
            cfg.log_dirs(), log_config_for(cfg, {}), broker_id=self.broker_id,
            cluster_id=ctrl.cluster_id, topic_configs=topic_config))
        log.info("loaded %d logs in %.0f ms", len(self.log_manager.logs),
                 (time.monotonic() - t0) * 1000)
        self._watch_log_dirs()
        from controller.api import BrokerInfo
        await ctrl.register_broker(BrokerInfo(
            self.broker_id, [tuple(e) for e in cfg.advertised_listeners()], cfg.get("broker.rack")))
        self.replicas = ReplicaManager(self)
        self.replicas.sync(ctrl.topics())
        ctrl.subscribe(self._on_metadata_event)
        self._start_client_quotas()
        await self._start_coordinators()
        await self._start_listeners()
        self.start_serving()
        self._schedule_background()
        log.info("[KafkaServer id=%d] started (cluster id %s)", self.broker_id, ctrl.cluster_id)

    async def _start_zookeeper_mode(self) -> None:
        """Cluster start-up: ZooKeeper client -> log manager -> replica manager with replication
        -> coordinators -> listeners -> broker registration (which lets the controller send us
        LeaderAndIsr/UpdateMetadata) and the controller election."""
        from broker.replication import ReplicationManager
        from controller.api import BrokerInfo
        from controller.zookeeper.controller import ZkController
        from storage.log_manager import LogManager
        cfg = self.config
        loop = asyncio.get_running_loop()
        ctrl = self.controller = ZkController(cfg, self)
        await ctrl.start()
        self.broker_id = ctrl.broker_id

        def topic_config(topic):
            return log_config_for(cfg, ctrl.topic_configs(topic) or {})

        t0 = time.monotonic()
        self.log_manager = await loop.run_in_executor(None, lambda: LogManager(
            cfg.log_dirs(), log_config_for(cfg, {}), broker_id=self.broker_id,
            cluster_id=ctrl.cluster_id, topic_configs=topic_config))
        log.info("loaded %d logs in %.0f ms", len(self.log_manager.logs), (time.monotonic() - t0) * 1000)
        self._watch_log_dirs()
        self.replicas = ReplicaManager(self)
        self.replicas.replication = ReplicationManager(self)
        ctrl.subscribe(self._on_metadata_event)
        self._start_client_quotas()
        await self._start_coordinators()
        await self._start_listeners()
        self.replicas.replication.start()
        await ctrl.register_broker(BrokerInfo(
            self.broker_id, [tuple(e) for e in cfg.advertised_listeners()], cfg.get("broker.rack")))
        try:    # the controller's first UpdateMetadata, so clients never see an empty cluster
            await asyncio.wait_for(ctrl.metadata_ready.wait(), METADATA_WAIT_S)
        except asyncio.TimeoutError:
            log.warning("no UpdateMetadata from a controller %.0f s after registering; serving clients "
                        "anyway", METADATA_WAIT_S)
        self.start_serving()
        self._schedule_background()
        log.info("[KafkaServer id=%d] started (cluster id %s, ZooKeeper %s)", self.broker_id, ctrl.cluster_id,
                 cfg.zookeeper_connect)

    async def _start_listeners(self) -> None:
        cfg = self.config
        from broker.connection_quotas import ConnectionQuotas, Listener
        if self.connection_quotas is None:
            self.connection_quotas = ConnectionQuotas(self)
        for ep in cfg.listeners():
            host = ep.host or None
            server = Listener(self.connection_quotas, ep.listener_name, host, ep.port,
                              cfg.get("socket.listen.backlog.size"),
                              lambda name=ep.listener_name: KafkaConnection(self, name),
                              self.security.ssl_context(ep.listener_name))
            self.servers.append(server)
            log.info("listening on %s://%s:%d", ep.listener_name, ep.host or "0.0.0.0", ep.port)

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away (ControlledShutdown) before stopping."""
        from protocol.messages import ControlledShutdownRequest
        cfg = self.config
        ctrl = self.controller
        retries = max(1, cfg.get("controlled.shutdown.max.retries"))
        backoff = cfg.get("controlled.shutdown.retry.backoff.ms") / 1000
        for attempt in range(1, retries + 1):
            try:
                resp = await ctrl.send_to_controller(
                    ControlledShutdownRequest(broker_id=self.broker_id, broker_epoch=ctrl.broker_epoch),
                    timeout=30.0)
            except Exception as e:
                log.warning("controlled shutdown attempt %d failed: %s", attempt, e)
                resp = None
            if resp is not None and resp.error_code == 0 and not resp.remaining_partitions:
                log.info("controlled shutdown succeeded")
                return
            if resp is not None:
                log.info("controlled shutdown attempt %d: error %d, still leading %d partitions", attempt,
                         resp.error_code, len(resp.remaining_partitions))
            if attempt < retries:
                await asyncio.sleep(backoff)
        log.warning("controlled shutdown did not complete; stopping anyway")

    async def _start_coordinators(self) -> None:
        try:
            from broker.group_log import attach_group_coordinator
        except ImportError:
            return
        from broker.share.manager import ShareCoordinator
        self.share = ShareCoordinator(self)         # first: loading __consumer_offsets hands it share groups
        await attach_group_coordinator(self)
        from broker.txn.state_log import attach_transaction_coordinator
        await attach_transaction_coordinator(self)
        self.share.start()

    def _start_client_quotas(self) -> None:
        from broker.client_quota import ClientQuotas
        self.client_quotas = ClientQuotas(self, self.quota_callback)
        self.client_quotas.refresh()
        self.client_quotas.cluster_changed()
        # KIP-714 subscriptions known so far (changes arrive as ConfigsChanged("client-metrics"))
        self.client_metrics.subscriptions_changed(self.controller.client_metrics_configs())

    def _on_metadata_event(self, event) -> None:
        from controller.api import BrokersChanged, ConfigsChanged, TopicsChanged
        if isinstance(event, (TopicsChanged, BrokersChanged)) and self.client_quotas is not None:
            self.client_quotas.cluster_changed()
        if isinstance(event, TopicsChanged) and event.deleted and getattr(self, "groups", None) is not None:
            self.groups.on_topics_deleted([name for name, _tid in event.deleted])
            if getattr(self, "share", None) is not None:
                self.groups._spawn(self.share.on_topics_deleted([tid for _name, tid in event.deleted]))
        if isinstance(event, ConfigsChanged) and event.entity_type == "client-quotas":
            self.client_quotas.refresh()
            if self.connection_quotas is not None:
                self.connection_quotas.update_ip_quotas(self.controller.client_quotas())
            return
        if isinstance(event, ConfigsChanged) and event.entity_type == "client-metrics":
            self.client_metrics.subscriptions_changed(self.controller.client_metrics_configs())
            return
        if isinstance(event, ConfigsChanged) and event.entity_type == "brokers":
            self.client_metrics.reporters_changed()     # metric.reporters is cluster-wide dynamic
            if self.security is not None:
                self.security.reload_ssl()      # a key store update of a TLS listener
            if self.connection_quotas is not None:
                self.connection_quotas.configure()      # max.connections* and the creation rates
            # and on: log configs follow the broker defaults (sync below)
        if isinstance(event, ConfigsChanged) and event.entity_type == "groups":
            return              # read by the group coordinator when it needs them
        if isinstance(event, ConfigsChanged) and event.entity_type == "topics":
            info = self.controller.topic(event.entity_name)
            if info is not None:
                self.replicas.update_configs(event.entity_name, info.configs)
            return
        if self.replicas.replication is not None:
            return              # cluster mode: LeaderAndIsr/StopReplica drive the hosted partitions
        self.replicas.sync(self.controller.topics())

    # -- background work ----------------------------------------------------------------------
    def _every(self, ms, fn, name, first_ms=None):
        """Run ``fn`` every ``ms``; the first time after ``first_ms`` (default: ``ms``)."""
        async def run():
            wait = ms if first_ms is None else first_ms
            while True:
                await asyncio.sleep(wait / 1000)
                wait = ms
                try:
                    r = fn()
                    if asyncio.iscoroutine(r):
                        await r
                except Exception:
                    log.exception("background task %s failed", name)
        self.tasks.append(asyncio.get_running_loop().create_task(run(), name=name))

    def _schedule_background(self) -> None:
        cfg = self.config
        lm = self.log_manager
        # as Kafka's LogManager: the first pass log.initial.task.delay.ms (30 s) after start-up
        interval = cfg.get("log.retention.check.interval.ms")
        self._every(interval, lm.cleanup_logs, "retention", first_ms=min(cfg.get("log.initial.task.delay.ms"), interval))
        # Checkpoint files are fsynced (twice: the file, then its directory).  On ext4 under
        # write load one such fsync waited 10+ ms for a journal commit, with the loop stopped,
        # every replica.high.watermark.checkpoint.interval.ms (5 s).  The offsets are read here
        # on the loop; one thread of its own writes the files, so two writes never overlap.
        from concurrent.futures import ThreadPoolExecutor
        self._checkpoint_writer = ThreadPoolExecutor(1, thread_name_prefix="checkpoints")

        def checkpoint(snapshot):
            async def write():
                await asyncio.get_running_loop().run_in_executor(
                    self._checkpoint_writer, lm.write_checkpoint_files, snapshot())
            return write

        self._every(cfg.get("replica.high.watermark.checkpoint.interval.ms"),
                    checkpoint(lm.high_watermark_files), "hw-checkpoint")
        self._every(cfg.get("log.flush.offset.checkpoint.interval.ms"),
                    checkpoint(lm.recovery_point_files), "recovery-checkpoint")
        self._every(cfg.get("log.flush.start.offset.checkpoint.interval.ms"),
                    checkpoint(lm.log_start_offset_files), "log-start-checkpoint")
        self._every(min(cfg.get("log.flush.scheduler.interval.ms"), 1000), self._flush_due,
                    "flusher")
        self._every(cfg.get("producer.id.expiration.check.interval.ms"), self._expire_producers, "producer-expiry")
        if self.tokens is not None and self.tokens.enabled:
            self._every(self.tokens.check_interval_ms, self.tokens.remove_expired, "delegation-token-expiry")
        if cfg.get("log.cleaner.enable"):
            # compaction of cleanup.policy=compact logs; each pass runs on a cleaner thread,
            # swaps happen here on the loop; the cleaner keys are read again before every
            # pass, so dynamic changes apply (storage/cleaner.py)
            from storage.cleaner import LogCleaner
            cleaner = self.log_cleaner = LogCleaner(lm, broker_config=cfg)
            self.tasks.append(asyncio.get_running_loop().create_task(cleaner.run(),
                                                                     name="log-cleaner"))
        idle = cfg.get("connections.max.idle.ms")
        if idle > 0:
            self._every(min(idle, 10000), lambda: self._close_idle(idle), "idle-connections")

    def _expire_producers(self) -> None:
        """Drop idle producers' state from every log (``producer.id.expiration.ms``, a dynamic
        cluster-wide config, read at each pass)."""
        n = self.log_manager.remove_expired_producers(self.config.get("producer.id.expiration.ms"))
        if n:
            log.info("removed the state of %d expired producer id(s)", n)

    async def _flush_due(self):
        loop = asyncio.get_running_loop()
        lm = self.log_manager
        for lg in lm.flush_dirty_logs():
            try:
                job = lg.start_flush()
                await loop.run_in_executor(None, job.run)
                if not lg.closed:
                    lg.finish_flush(job)
            except (StorageError, OSError) as e:
                log.error("flushing %s failed: %s", lg.dir, e)
                lm.report_error(os.path.dirname(lg.dir), e)

    # -- failed log dirs -----------------------------------------------------------------------
    def _watch_log_dirs(self) -> None:
        """Route the log manager's dir failures to ``log_dir_failed`` on the loop (checkpoints
        are written on a thread of their own)."""
        loop = asyncio.get_running_loop()
        self.log_manager.dir_failure_listener = \
            lambda d, exc: loop.call_soon_threadsafe(self.log_dir_failed, d, exc)

    def log_dir_failed(self, d: str, exc: BaseException | None = None) -> None:
        """A log dir failed (Kafka's LogDirFailureHandler): its partitions go offline here and
        answer KAFKA_STORAGE_ERROR; in a cluster the controller is told, through ZooKeeper, so
        it moves their leadership to other replicas.  With no log dir left, the broker stops
        (exit status 1), as Kafka halts."""
        lm = self.log_manager
        if lm is None or d in lm.offline_dirs:
            return
        log.error("Error in log dir %s: %s", d, exc)
        tps = lm.fail_dir(d)
        if self.replicas is not None:
            self.replicas.mark_offline(tps)
        if not lm.online_dirs:
            log.error("Shutdown broker because all log dirs in %s have failed", ",".join(lm.log_dirs))
            self.exit_code = 1
            self.stop_requested.set()
            return
        notify = getattr(self.controller, "propagate_log_dir_event", None)
        if notify is not None:
            task = asyncio.get_running_loop().create_task(notify(), name="log-dir-event")
            task.add_done_callback(lambda t: t.cancelled() or t.exception() is None or log.error(
                "telling the controller about the failed log dir %s failed: %s", d, t.exception()))

    def _close_idle(self, idle_ms):
        now = time.monotonic()
        for c in list(self.connections):
            if not c.in_flight and not c.queue and now - c.last_active > idle_ms / 1000:
                log.info("closing idle connection from %s:%s", *c.peer)
                c.close()

    # -- stop ----------------------------------------------------------------------------------
    @property
    def stopping(self) -> bool:
        return self._stopping

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        log.info("[KafkaServer id=%d] shutting down", self.broker_id)
        repl = self.replicas.replication if self.replicas is not None else None
        if repl is not None and self.config.get("controlled.shutdown.enable") and self.servers:
            try:
                await self._controlled_shutdown()
            except Exception:
                log.exception("controlled shutdown failed")
        for s in self.servers:
            s.close()
        # long polls (Fetch, ShareFetch) answer now with what they have: they check stopping
        # when woken, so in-flight requests finish without waiting out their MaxWaitMs
        if self.replicas is not None:
            for part in list(self.replicas.partitions.values()):
                part.wake()
        if self.share is not None:
            self.share.wake()
        deadline = time.monotonic() + 10
        while any(c.in_flight for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for c in list(self.connections):
            c.close()
        for t in self.tasks:
            t.cancel()
        self.log_dir_mover.stop()
        if self.policies is not None:
            self.policies.close()
        if self.quota_callback is not None:
            from broker import quota_callback
            quota_callback.close(self.quota_callback)
        close = getattr(self.replica_selector, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                log.exception("closing %s failed", type(self.replica_selector).__name__)
        if self.client_metrics is not None:
            self.client_metrics.close()
        if repl is not None:
            await repl.stop()
        if self.share is not None:
            await self.share.stop()
        if self.txns is not None:
            try:
                await self.txns.stop()
            except Exception:
                log.exception("stopping the transaction coordinator failed")
        if self.groups is not None:
            try:
                await self.groups.stop()
            except Exception:
                log.exception("stopping the group coordinator failed")
        if self._checkpoint_writer is not None:
            # a write still running finishes before shutdown writes the same files
            self._checkpoint_writer.shutdown(wait=True)
        if self.log_manager is not None:
            self.log_manager.shutdown()
        if self.controller is not None:
            await self.controller.stop()
        if self.metrics is not None:
            self.metrics.close()
        if self.security is not None:
            self.security.close()
        log.info("[KafkaServer id=%d] shut down completed", self.broker_id)


def _parse_args(argv):
    ap = argparse.ArgumentParser(prog="kafka-server-start.sh",
                                 description="Start an Odradek broker.")
    ap.add_argument("config", help="server.properties file")
    ap.add_argument("--override", action="append", default=[], metavar="key=value",
                    help="override a property from the file (repeatable)")
    return ap.parse_args(argv)


def _tune_malloc() -> None:
    """Keep freed request buffers in the heap instead of returning them to the kernel.

    Every Produce frame is a fresh bytearray of its size; with glibc's defaults a 1 MiB buffer is
    an mmap, 256 page faults and an munmap per request — measured here as most of the broker's
    system time under produce load.  Raising the mmap and trim thresholds lets the allocator reuse
    the same pages.  Environment settings (MALLOC_*_) take precedence."""
    if os.environ.get("MALLOC_MMAP_THRESHOLD_") or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 64 << 20)    # M_MMAP_THRESHOLD
        libc.mallopt(-1, 256 << 20)   # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def _freeze_startup_heap() -> None:
    """Move every object alive after start-up out of the cyclic collector's reach.

    The modules, generated message classes, configs and the loaded logs are most of the heap and
    live as long as the process, yet every full (generation 2) collection walked them all: 12–24 ms
    with the event loop stopped, measured here, which every parked fetch and every produce waited
    out.  ``gc.freeze()`` moves them to the permanent generation, so a full collection walks only
    what was allocated since.  Objects freed by reference counting are still freed; a frozen
    object that later becomes cyclic garbage (a log of a topic deleted later) stays in memory."""
    import gc
    gc.collect()
    gc.freeze()


def main(argv=None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    _tune_malloc()
    try:
        import faulthandler
        faulthandler.register(signal.SIGUSR1, all_threads=True)    # stack dump on demand
    except (ImportError, AttributeError, ValueError):
        pass
    logging.basicConfig(level=os.environ.get("ODRADEK_LOG_LEVEL", "INFO"),
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    try:
        config = BrokerConfig.from_file(args.config, args.override)
        config.validate()
    except (ConfigError, OSError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    return asyncio.run(_serve(config))


async def _serve(config) -> int:
    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except Exception as e:
        if isinstance(e, (ConfigError, StorageError, OSError)):
            log.error("fatal error during start-up: %s", e)
        elif type(e).__name__ == "NoAuthError":        # kazoo: a znode's ACL refuses this broker
            log.error("fatal error during start-up: ZooKeeper refused this broker access to a znode (NoAuth): "
                      "its ZooKeeper identity is not the one that created the cluster's znodes "
                      "(zookeeper.set.acl; see docs/security.md)")
        else:
            log.exception("fatal error during start-up")
        await broker.stop()
        return 1
    _freeze_startup_heap()
    stopped = loop.create_task(broker.stop_requested.wait())
    signalled = loop.create_task(stop.wait())
    await asyncio.wait([stopped, signalled], return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    signalled.cancel()
    await broker.stop()
    return broker.exit_code

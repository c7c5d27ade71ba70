"""TransactionCoordinator: transactional ids, producer epochs and the two-phase commit.

How this works
--------------
The coordinator of a transactional id is the leader of ``__transaction_state`` partition
``abs(javaStringHash(id)) % transaction.state.log.num.partitions``.  Leading a partition at leader
epoch E makes this broker its coordinator at *coordinator epoch* E: the partition is loaded (the
last value per key wins, a null value deletes the id) the first time it is needed, and again
whenever the leader epoch changes; a partition no longer led is dropped.  Ownership is checked on
every request and by the periodic task, so nothing outside this package has to announce
leadership changes (a LeaderAndIsr hook may call ``on_become_leader``/``on_resign`` to be quicker).

Every change of an id follows ``metadata.py``: prepare (sets a pending state), write the record to
``__transaction_state`` (acks=all), then install it.  Requests for an id with a pending state are
answered CONCURRENT_TRANSACTIONS; the client retries.

EndTxn: Ongoing -> PrepareCommit/PrepareAbort is written, the client is answered, then a background
task writes a COMMIT/ABORT marker to every partition of the transaction (``MarkerSender``: a
local append for partitions this broker leads, WriteTxnMarkers to the leader otherwise), retrying
until each is written or its topic is gone, and finally writes CompleteCommit/CompleteAbort.  A
coordinator that loads a partition finds Prepare* transactions and finishes them the same way.

Transaction version 2 (KIP-890 part 2; EndTxn v5, Produce v12+, TxnOffsetCommit v5, used by a
client once ``transaction.version`` is finalized at 2): the partition leaders add partitions
implicitly (AddPartitionsToTxn v4+ from a broker, not verify-only) and every EndTxn bumps the epoch
(``metadata.py``); its answer carries the producer id and epoch for the next transaction.  A
retried EndTxn is recognised by its epoch being one below the current one.  Which rules apply is
the EndTxn request's version, as in Kafka; timeouts and fences use the finalized level.

Fencing: InitProducerId bumps the epoch.  If a transaction is open it is first aborted under a
bumped epoch (PrepareEpochFence, never written, then PrepareAbort) and the client gets
CONCURRENT_TRANSACTIONS, retries, and gets the next epoch.  Timed-out transactions (older than
their timeout) are aborted the same way by ``abort_timed_out`` every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``; ids idle for
``transactional.id.expiration.ms`` in Empty/Complete* are tombstoned by ``expire_ids``.

Dependencies (duck-typed so tests can fake them)::

    txn_log.num_partitions
    txn_log.leader_epoch(partition) -> int | None        # None: not the leader
    async txn_log.append(partition, key, value | None)   # acks=all; raises on failure
    txn_log.read(partition) -> Iterable[(offset, key, value | None)]
    async txn_log.ensure_created()                        # optional
    async markers.send(pid, epoch, coordinator_epoch, commit, {(topic, partition)}, transaction_version)
        -> {tp: error}
    markers.topic_exists(topic) -> bool
    async producer_ids.next() -> int
    node_lookup(partition) -> node with node_id/host/port, or None

Owned by the event loop; not thread-safe.
"""
from __future__ import annotations

import asyncio
import logging
import time

from broker.background import BackgroundTasks
from broker.group.hashing import partition_for
from broker.txn import records as TR
from broker.txn.metadata import (EXPIRABLE, MAX_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, STATE_BY_NAME,
                                 IllegalTransition, S, Transit, TxnMetadata, TxnState, epoch_exhausted)
from protocol.errors import ErrorCode as E, KafkaError

log = logging.getLogger("odradek.txn")

TXN_TOPIC = "__transaction_state"

# the error a client sees for a failed write of the transaction log (Kafka's mapping)
_APPEND_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}
# records read in one go when loading a partition (then the event loop gets a turn)
LOAD_SLICE_RECORDS = 1000

# marker results that are retried (leadership moving, ISR short, timeouts, connections)
_MARKER_RETRY = {
    E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR, E.LEADER_NOT_AVAILABLE, E.NETWORK_EXCEPTION,
    E.UNKNOWN_SERVER_ERROR, E.COORDINATOR_LOAD_IN_PROGRESS,
}


class _Partition:
    """One loaded ``__transaction_state`` partition."""
    __slots__ = ("partition", "epoch", "txns", "current", "loading")

    def __init__(self, partition: int, epoch: int):
        self.partition = partition
        self.epoch = epoch
        self.txns: dict[str, TxnMetadata] = {}
        self.current = True
        self.loading = True         # requests for its ids get COORDINATOR_LOAD_IN_PROGRESS


class TransactionCoordinator:
    def __init__(self, config, txn_log, markers, producer_ids, node_lookup=None, *,
                 clock=None, marker_backoff: float = 0.1):
        self.config = config
        self.log = txn_log
        self.markers = markers
        self.producer_ids = producer_ids
        self.node_lookup = node_lookup
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.marker_backoff = marker_backoff
        self.partitions: dict[int, _Partition] = {}
        self.active = False
        self._bg = BackgroundTasks("transaction coordinator")
        self._timers: list[asyncio.Task] = []
        # the finalized ``transaction.version`` level (the broker wires it to its controller)
        self.transaction_version = lambda: 0

    # ------------------------------------------------------------------ configuration
    def _cfg(self, name):
        return self.config.get(name)

    @property
    def num_partitions(self) -> int:
        return self.log.num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    # ------------------------------------------------------------------ lifecycle
    async def start(self, background: bool = True) -> None:
        self.active = True
        self.check_ownership()
        if background:
            loop = asyncio.get_running_loop()
            self._timers.append(loop.create_task(self._every(
                self._cfg("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                self._abort_tick), name="txn-abort-timed-out"))
            self._timers.append(loop.create_task(self._every(
                self._cfg("transaction.remove.expired.transaction.cleanup.interval.ms"),
                self.expire_ids), name="txn-expire-ids"))
        log.info("transaction coordinator started (%d partitions of %s)", self.num_partitions, TXN_TOPIC)

    async def stop(self) -> None:
        self.active = False
        for t in self._timers:
            t.cancel()
        self._timers.clear()
        for p in list(self.partitions):
            self.on_resign(p)
        tasks = list(self._bg.tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        close = getattr(self.markers, "close", None)
        if close is not None:
            await close()
        log.info("transaction coordinator stopped")

    async def _every(self, ms, fn):
        while True:
            await asyncio.sleep(ms / 1000)
            try:
                r = fn()
                if asyncio.iscoroutine(r):
                    await r
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction coordinator background task failed")

    def _abort_tick(self):
        self.check_ownership()
        self.abort_timed_out()

    def _spawn(self, coro) -> asyncio.Task:
        return self._bg.spawn(coro)

    async def idle(self) -> None:
        """Wait until every background task (markers, completions) has finished (tests)."""
        await self._bg.idle()

    # ------------------------------------------------------------------ ownership and loading
    def check_ownership(self) -> None:
        """Load partitions led at a new epoch, drop those no longer led."""
        for p in range(self.num_partitions):
            try:
                epoch = self.log.leader_epoch(p)
            except Exception:
                epoch = None
            st = self.partitions.get(p)
            if epoch is None:
                if st is not None:
                    self.on_resign(p)
            elif st is None or st.epoch != epoch:
                self.on_become_leader(p, epoch)

    def on_become_leader(self, partition: int, epoch: int) -> _Partition:
        """Load ``partition`` at coordinator epoch ``epoch``.  The first ``LOAD_SLICE_RECORDS``
        records are read right away; a longer log is read on in the background, a slice at a
        time, and until it is loaded its ids get COORDINATOR_LOAD_IN_PROGRESS, as in Kafka."""
        old = self.partitions.get(partition)
        if old is not None:
            if old.epoch == epoch:
                return old
            self.on_resign(partition)
        st = self.partitions[partition] = _Partition(partition, epoch)
        steps = self._load(st)
        if next(steps, None) is None:
            return st
        try:
            asyncio.get_running_loop()
        except RuntimeError:            # no event loop (unit tests): finish here
            for _ in steps:
                pass
            return st
        self._spawn(self._load_in_background(st, steps))
        return st

    async def _load_in_background(self, st: _Partition, steps) -> None:
        try:
            for _ in steps:
                await asyncio.sleep(0)
                if not self._is_current(st):
                    steps.close()
                    return
        except Exception:
            log.exception("loading %s-%d failed", TXN_TOPIC, st.partition)
            if self._is_current(st):
                self.on_resign(st.partition)        # the next request or ownership check tries again

    def _load(self, st: _Partition):
        """Generator: reads the partition, yielding after every ``LOAD_SLICE_RECORDS`` records,
        then installs what it read and resumes the transactions left in Prepare*."""
        partition, epoch = st.partition, st.epoch
        started = time.monotonic()
        values: dict[str, TR.TxnLogValue] = {}
        count = 0
        for _offset, key, value in self.log.read(partition):
            count += 1
            if count % LOAD_SLICE_RECORDS == 0:
                yield True
            if key is None:
                continue
            try:
                tid = TR.parse_key(key)
                if tid is None:
                    log.warning("unknown key version in %s-%d; skipped", TXN_TOPIC, partition)
                    continue
                v = TR.parse_value(value)
            except TR.RecordFormatError as e:
                log.warning("unreadable record in %s-%d: %s; skipped", TXN_TOPIC, partition, e)
                continue
            if v is None:
                values.pop(tid, None)
            else:
                values[tid] = v
        if not self._is_current(st):
            return
        for tid, v in values.items():
            try:
                state = TxnState(v.state)
            except ValueError:
                log.warning("transactional id %r has unknown state %d; skipped", tid, v.state)
                continue
            parts = set()
            if state != S.EMPTY:
                for topic, ps in (v.partitions or {}).items():
                    parts.update((topic, p) for p in ps)
            st.txns[tid] = TxnMetadata(tid, v.producer_id, v.producer_epoch, v.timeout_ms, state, parts,
                                       v.start_ms, v.last_update_ms, previous_producer_id=v.previous_producer_id,
                                       next_producer_id=v.next_producer_id,
                                       client_transaction_version=v.client_transaction_version)
        st.loading = False
        resumed = 0
        for meta in st.txns.values():
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._start_markers(st, meta)
                resumed += 1
        log.info("loaded %d transactional ids from %s-%d at coordinator epoch %d (%d records, %d "
                 "transactions to complete) in %.1f ms", len(st.txns), TXN_TOPIC, partition, epoch, count,
                 resumed, (time.monotonic() - started) * 1000)

    def on_resign(self, partition: int) -> None:
        st = self.partitions.pop(partition, None)
        if st is not None:
            st.current = False
            log.info("unloaded %s-%d (coordinator epoch %d)", TXN_TOPIC, partition, st.epoch)

    def _state_for(self, transactional_id: str):
        """(error, _Partition) for the id's partition, loading it if needed."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE, None
        p = self.partition_for(transactional_id)
        try:
            epoch = self.log.leader_epoch(p)
        except Exception:
            epoch = None
        st = self.partitions.get(p)
        if epoch is None:
            if st is not None:
                self.on_resign(p)
            return E.NOT_COORDINATOR, None
        if st is None or st.epoch != epoch:
            try:
                st = self.on_become_leader(p, epoch)
            except Exception:
                log.exception("loading %s-%d failed", TXN_TOPIC, p)
                self.on_resign(p)
                return E.COORDINATOR_LOAD_IN_PROGRESS, None
        if st.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, None
        return E.NONE, st

    def coordinator_error(self, transactional_id: str) -> int:
        """The error of a request for ``transactional_id`` that this broker cannot coordinate
        (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...); 0 if it can."""
        if not transactional_id:
            return E.NONE
        return self._state_for(transactional_id)[0]

    def _is_current(self, st: _Partition) -> bool:
        return st.current and self.partitions.get(st.partition) is st

    # ------------------------------------------------------------------ persistence
    async def _write(self, st: _Partition, tid: str, t: Transit) -> int:
        """Write ``t`` for ``tid``; returns the client-facing error (0 = written and still ours)."""
        if t.state == S.DEAD:
            value = None
        else:
            v = TR.TxnLogValue(t.producer_id, t.producer_epoch, t.timeout_ms, int(t.state),
                               None if t.state == S.EMPTY else _topics(t.partitions), t.update_ms, t.start_ms)
            if self.transaction_version() >= 1:        # Kafka 4.x writes version 1 from level 1
                meta = st.txns.get(tid)
                v.previous_producer_id = (t.previous_producer_id if t.producer_id != t.previous_producer_id
                                          else meta.previous_producer_id if meta is not None else NO_PRODUCER_ID)
                v.next_producer_id = t.next_producer_id
                v.client_transaction_version = t.client_transaction_version
                value = TR.v1_value_bytes(v)
            else:
                value = TR.value_bytes(v)
        try:
            await self.log.append(st.partition, TR.key_bytes(tid), value)
            err = E.NONE
        except asyncio.CancelledError:
            raise
        except KafkaError as e:
            err = _APPEND_ERRORS.get(e.code, e.code)
        except Exception as e:
            log.warning("writing %s for %r failed: %r", t.state.display, tid, e)
            err = E.UNKNOWN_SERVER_ERROR
        if not err and not self._is_current(st):
            err = E.NOT_COORDINATOR
        return err

    async def _append_transit(self, st: _Partition, meta: TxnMetadata, t: Transit) -> int:
        err = await self._write(st, meta.transactional_id, t)
        if st.txns.get(meta.transactional_id) is not meta:
            return err or E.NOT_COORDINATOR
        if err:
            meta.abandon()
            log.info("write of %s for %r failed with %s", t.state.display, meta.transactional_id, E(err).name)
            return err
        meta.complete(t)
        return E.NONE

    # ------------------------------------------------------------------ FindCoordinator
    async def find_coordinator(self, key: str):
        # an empty transactional id is found like any other (Kafka checks it in the request
        # that uses it: InitProducerId, DescribeTransactions ... answer INVALID_REQUEST)
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE, None
        ensure = getattr(self.log, "ensure_created", None)
        if ensure is not None:
            try:
                await ensure()
            except Exception as e:
                log.info("cannot create %s yet: %r", TXN_TOPIC, e)
                return E.COORDINATOR_NOT_AVAILABLE, None
        node = self.node_lookup(self.partition_for(key)) if self.node_lookup else None
        if node is None:
            return E.COORDINATOR_NOT_AVAILABLE, None
        return E.NONE, node

    # ------------------------------------------------------------------ InitProducerId
    async def handle_init_producer_id(self, ctx, req):
        from protocol.messages import InitProducerIdResponse as R
        v = ctx.api_version
        pid = req.producer_id if v >= 3 else -1
        epoch = req.producer_epoch if v >= 3 else -1
        err, new_pid, new_epoch = await self.init_producer_id(req.transactional_id, req.transaction_timeout_ms,
                                                              pid, epoch)
        if err == E.PRODUCER_FENCED and v < 4:
            err = E.INVALID_PRODUCER_EPOCH
        return R(throttle_time_ms=0, error_code=err, producer_id=new_pid, producer_epoch=new_epoch)

    async def init_producer_id(self, tid: str, timeout_ms: int, expected_pid: int = -1,
                               expected_epoch: int = -1):
        """Returns (error, producer id, epoch)."""
        fail = (-1, -1)
        if not tid:
            return (E.INVALID_REQUEST, *fail)
        if (expected_pid == -1) != (expected_epoch == -1):
            return (E.INVALID_REQUEST, *fail)
        expected = None if expected_pid == -1 else (expected_pid, expected_epoch)
        if timeout_ms <= 0 or timeout_ms > self._cfg("transaction.max.timeout.ms"):
            return (E.INVALID_TRANSACTION_TIMEOUT, *fail)
        err, st = self._state_for(tid)
        if err:
            return (err, *fail)
        meta = st.txns.get(tid)
        if meta is None:
            try:
                new_pid = await self.producer_ids.next()
            except Exception as e:
                log.warning("producer id allocation failed: %r", e)
                return (E.COORDINATOR_NOT_AVAILABLE, *fail)
            if not self._is_current(st):
                return (E.NOT_COORDINATOR, *fail)
            meta = st.txns.get(tid)
            if meta is None:
                meta = st.txns[tid] = TxnMetadata(tid, new_pid, NO_PRODUCER_EPOCH, timeout_ms, S.EMPTY,
                                                  last_update_ms=self.clock())
        err, t = await self._prepare_init(meta, timeout_ms, expected)
        if err:
            return (err, *fail)
        if t.state == S.PREPARE_EPOCH_FENCE:
            err = await self.end_txn(tid, t.producer_id, t.producer_epoch, False, from_client=False)
            return (err or E.CONCURRENT_TRANSACTIONS, *fail)
        err = await self._append_transit(st, meta, t)
        if err:
            return (err, *fail)
        log.info("initialized transactional id %r with producer id %d and epoch %d on %s-%d", tid,
                 t.producer_id, t.producer_epoch, TXN_TOPIC, st.partition)
        return E.NONE, t.producer_id, t.producer_epoch

    async def _prepare_init(self, meta: TxnMetadata, timeout_ms: int, expected):
        if meta.pending_in_progress:
            return E.CONCURRENT_TRANSACTIONS, None
        if expected is not None:
            exp_pid, exp_epoch = expected
            valid = (meta.producer_epoch == NO_PRODUCER_EPOCH or exp_pid == meta.producer_id or
                     (exp_pid == meta.previous_producer_id and epoch_exhausted(exp_epoch)))
            if not valid:
                return E.PRODUCER_FENCED, None
        state = meta.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return E.CONCURRENT_TRANSACTIONS, None
        if state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
                try:
                    new_pid = await self.producer_ids.next()
                except Exception as e:
                    log.warning("producer id allocation failed: %r", e)
                    return E.COORDINATOR_NOT_AVAILABLE, None
                if meta.pending_in_progress:
                    return E.CONCURRENT_TRANSACTIONS, None
                return E.NONE, meta.prepare_producer_id_rotation(new_pid, timeout_ms, self.clock(),
                                                                 expected is not None)
            return meta.prepare_increment_epoch(timeout_ms, expected[1] if expected else None, self.clock())
        if state == S.ONGOING:
            return E.NONE, meta.prepare_fence_epoch()
        return E.CONCURRENT_TRANSACTIONS, None      # Dead: being expired right now

    # ------------------------------------------------------------------ AddPartitionsToTxn
    def _check_producer(self, meta: TxnMetadata | None, pid: int, epoch: int) -> int:
        if meta is None or meta.producer_id != pid:
            return E.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != epoch:
            return E.PRODUCER_FENCED
        return E.NONE

    async def add_partitions(self, tid: str, pid: int, epoch: int, partitions, client_transaction_version: int = 0) -> int:
        """Add ``partitions`` to the transaction.  ``client_transaction_version`` 2: a partition
        leader adding them implicitly (Produce v12+, TxnOffsetCommit v5)."""
        if not tid:
            return E.INVALID_REQUEST
        err, st = self._state_for(tid)
        if err:
            return err
        meta = st.txns.get(tid)
        # a pending change first (Kafka 4.x's order): while an epoch overflow completes, the client
        # may already use the producer id that is still pending
        if meta is not None and meta.pending_in_progress:
            return E.CONCURRENT_TRANSACTIONS
        err = self._check_producer(meta, pid, epoch)
        if err:
            return err
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.CONCURRENT_TRANSACTIONS
        partitions = set(partitions)
        if meta.state == S.ONGOING and partitions <= meta.partitions:
            return E.NONE
        try:
            t = meta.prepare_add_partitions(partitions, self.clock(), client_transaction_version)
        except IllegalTransition as e:
            log.warning("%s", e)
            return E.INVALID_TXN_STATE
        return await self._append_transit(st, meta, t)

    def verify_partitions(self, tid: str, pid: int, epoch: int, partitions) -> dict:
        """AddPartitionsToTxn v4 verify-only: {tp: error} (TRANSACTION_ABORTABLE if not added)."""
        partitions = list(partitions)
        if not tid:
            return {tp: E.INVALID_REQUEST for tp in partitions}
        err, st = self._state_for(tid)
        if not err:
            meta = st.txns.get(tid)
            err = self._check_producer(meta, pid, epoch)
            if not err and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                err = E.CONCURRENT_TRANSACTIONS
        if err:
            return {tp: err for tp in partitions}
        return {tp: (E.NONE if tp in meta.partitions else E.TRANSACTION_ABORTABLE) for tp in partitions}

    # ------------------------------------------------------------------ EndTxn
    async def end_txn(self, tid: str, pid: int, epoch: int, commit: bool, *, from_client: bool = True,
                      tv2: bool | None = None) -> int:
        return (await self.end_transaction(tid, pid, epoch, commit, from_client=from_client, tv2=tv2))[0]

    async def end_transaction(self, tid: str, pid: int, epoch: int, commit: bool, *, from_client: bool = True,
                              tv2: bool | None = None) -> tuple[int, int, int]:
        """(error, producer id, epoch).  ``tv2``: transaction version 2's rules (EndTxn v5); by
        default a client's request uses version 1's and the coordinator's own aborts the finalized
        level.  The id and epoch are what the client uses next (EndTxn v5's answer): after a
        success or a recognised retry under version 2; -1/-1 otherwise."""
        if tv2 is None:
            tv2 = not from_client and self.transaction_version() >= 2
        if not tid:
            return E.INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        err, st = self._state_for(tid)
        if err:
            return err, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        meta = st.txns.get(tid)
        if meta is None:
            return E.INVALID_PRODUCER_ID_MAPPING, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if tv2:
            return await self._end_v2(st, meta, pid, epoch, commit, from_client)
        return await self._end_v1(st, meta, pid, epoch, commit, from_client), NO_PRODUCER_ID, NO_PRODUCER_EPOCH

    async def _end_v1(self, st: _Partition, meta: TxnMetadata, pid: int, epoch: int, commit: bool,
                      from_client: bool) -> int:
        tid = meta.transactional_id
        if meta.producer_id != pid:
            return E.INVALID_PRODUCER_ID_MAPPING
        if (from_client and epoch != meta.producer_epoch) or epoch < meta.producer_epoch:
            return E.PRODUCER_FENCED
        if meta.pending_in_progress and meta.pending != S.PREPARE_EPOCH_FENCE:
            return E.CONCURRENT_TRANSACTIONS
        state = meta.state
        fence = False
        if state == S.ONGOING:
            nxt = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            if nxt == S.PREPARE_ABORT and meta.pending == S.PREPARE_EPOCH_FENCE:
                fence = True
                meta.pending = None
                meta.producer_epoch = epoch
                meta.last_producer_epoch = NO_PRODUCER_EPOCH
            elif meta.pending is not None:
                return E.CONCURRENT_TRANSACTIONS
            t = meta.prepare_abort_or_commit(nxt, self.clock())
        elif state == S.COMPLETE_COMMIT:
            return E.NONE if commit else E.INVALID_TXN_STATE
        elif state == S.COMPLETE_ABORT:
            return E.NONE if not commit else E.INVALID_TXN_STATE
        elif state == S.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE
        elif state == S.PREPARE_ABORT:
            return E.CONCURRENT_TRANSACTIONS if not commit else E.INVALID_TXN_STATE
        else:
            if meta.pending == S.PREPARE_EPOCH_FENCE:
                meta.abandon()
            return E.INVALID_TXN_STATE
        err = await self._write(st, tid, t)
        if st.txns.get(tid) is not meta:
            return err or E.NOT_COORDINATOR
        if err:
            meta.abandon()
            if fence:
                meta.failed_epoch_fence = True
                log.warning("could not write the epoch fence of %r (epoch %d): %s", tid, epoch, E(err).name)
            return err
        meta.complete(t)
        log.info("%s transaction of %r (producer %d, epoch %d) on %d partitions", "committing" if commit
                 else "aborting", tid, meta.producer_id, meta.producer_epoch, len(meta.partitions))
        self._start_markers(st, meta)
        return E.NONE

    async def _end_v2(self, st: _Partition, meta: TxnMetadata, pid: int, epoch: int, commit: bool,
                      from_client: bool) -> tuple[int, int, int]:
        """EndTxn under transaction version 2 (Kafka 4.x's rules): the epoch is bumped by every
        completion; a request one epoch behind is a retry of the last one."""
        tid = meta.transactional_id
        fail = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        fence = meta.pending == S.PREPARE_EPOCH_FENCE
        next_pid = NO_PRODUCER_ID
        if (not fence and not meta.pending_in_progress and meta.epoch_exhausted and meta.producer_id == pid
                and epoch == meta.producer_epoch):
            try:                                # a bump would exhaust the epoch: the next id is ready
                next_pid = await self.producer_ids.next()
            except Exception as e:
                log.warning("producer id allocation failed: %r", e)
                return (E.COORDINATOR_NOT_AVAILABLE, *fail)
            if not self._is_current(st) or st.txns.get(tid) is not meta:
                return (E.NOT_COORDINATOR, *fail)
            fence = meta.pending == S.PREPARE_EPOCH_FENCE
        if meta.pending_in_progress and not fence:
            return (E.CONCURRENT_TRANSACTIONS, *fail)
        retry_overflow = (not fence and meta.previous_producer_id == pid and epoch == MAX_EPOCH - 1
                          and meta.producer_epoch == 0)
        retry_bump = not fence and meta.producer_epoch == epoch + 1
        if meta.producer_id != pid and not retry_overflow:
            return (E.INVALID_PRODUCER_ID_MAPPING, *fail)
        state = meta.state
        if fence:
            valid = (not from_client or epoch == meta.producer_epoch) and epoch >= meta.producer_epoch
        elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid = retry_bump
        elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid = retry_bump or retry_overflow or epoch == meta.producer_epoch
        else:
            valid = epoch == meta.producer_epoch
        if not valid:
            return (E.PRODUCER_FENCED, *fail)
        retry = retry_bump or retry_overflow
        current = (E.NONE, meta.producer_id, meta.producer_epoch)
        empty = False
        if state == S.ONGOING:
            if fence and commit:
                return (E.CONCURRENT_TRANSACTIONS, *fail)      # the coordinator is aborting it
            nxt = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        elif state == S.COMPLETE_COMMIT:
            if commit:
                return current if retry else (E.INVALID_TXN_STATE, *fail)
            if retry:
                return (E.INVALID_TXN_STATE, *fail)
            nxt, empty = S.PREPARE_ABORT, True
        elif state == S.COMPLETE_ABORT:
            if commit:
                return (E.INVALID_TXN_STATE, *fail)
            if retry:
                return current
            nxt, empty = S.PREPARE_ABORT, True
        elif state == S.EMPTY and not commit:
            nxt, empty = S.PREPARE_ABORT, True
        elif state == S.PREPARE_COMMIT:
            return (E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE, *fail)
        elif state == S.PREPARE_ABORT:
            return (E.CONCURRENT_TRANSACTIONS if not commit else E.INVALID_TXN_STATE, *fail)
        else:
            return (E.INVALID_TXN_STATE, *fail)
        if fence:
            meta.pending = None
        try:
            t = meta.prepare_abort_or_commit(nxt, self.clock(), tv2=True, next_producer_id=next_pid,
                                             no_partition_added=empty)
        except IllegalTransition as e:
            log.warning("%s", e)
            return (E.INVALID_TXN_STATE, *fail)
        err = await self._write(st, tid, t)
        if st.txns.get(tid) is not meta:
            return (err or E.NOT_COORDINATOR, *fail)
        if err:
            meta.abandon()
            if fence:
                log.warning("could not write the epoch fence of %r (epoch %d): %s", tid, t.producer_epoch,
                            E(err).name)
            return (err, *fail)
        meta.complete(t)
        log.info("%s transaction of %r (producer %d, epoch bumped to %d) on %d partitions", "committing" if commit
                 else "aborting", tid, meta.producer_id, meta.producer_epoch, len(meta.partitions))
        done = self._start_markers(st, meta)
        return E.NONE, done.producer_id, done.producer_epoch

    def _start_markers(self, st: _Partition, meta: TxnMetadata) -> Transit:
        """Prepare* is in the log: write the markers, then Complete*, in the background.  Returns
        the Complete* transit (pending until the markers are out)."""
        commit = meta.state == S.PREPARE_COMMIT
        partitions = set(meta.partitions)
        done = meta.prepare_complete(self.clock())
        self._spawn(self._complete(st, meta, commit, partitions, done))
        return done

    async def _complete(self, st: _Partition, meta: TxnMetadata, commit: bool, partitions: set,
                        done: Transit) -> None:
        remaining = set(partitions)
        backoff = self.marker_backoff
        pid, epoch, tv = meta.producer_id, meta.producer_epoch, meta.client_transaction_version
        while remaining:
            if not self._is_current(st) or not self.active:
                return
            try:
                results = await self.markers.send(pid, epoch, st.epoch, commit, set(remaining), tv)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("sending markers for %r failed: %r", meta.transactional_id, e)
                results = {}
            for tp, err in results.items():
                if tp not in remaining:
                    continue
                if err == E.NONE:
                    remaining.discard(tp)
                elif err == E.UNKNOWN_TOPIC_OR_PARTITION and not self.markers.topic_exists(tp[0]):
                    log.info("topic %s of transaction %r was deleted; no marker needed", tp[0],
                             meta.transactional_id)
                    remaining.discard(tp)
                elif err == E.TRANSACTION_COORDINATOR_FENCED:
                    log.warning("coordinator epoch %d of %s-%d is stale; leaving %r to the new coordinator",
                                st.epoch, TXN_TOPIC, st.partition, meta.transactional_id)
                    return
                elif err in _MARKER_RETRY or err == E.UNKNOWN_TOPIC_OR_PARTITION:
                    pass
                else:
                    log.error("marker for %r on %s-%d failed with %s; giving up on that partition",
                              meta.transactional_id, tp[0], tp[1], E(err).name)
                    remaining.discard(tp)
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        backoff = self.marker_backoff
        while True:
            if not self._is_current(st) or st.txns.get(meta.transactional_id) is not meta or not self.active:
                return
            err = await self._write(st, meta.transactional_id, done)
            if not err:
                if st.txns.get(meta.transactional_id) is meta and meta.pending == done.state:
                    meta.complete(done)
                    log.info("completed %s of %r (producer %d, epoch %d)", "commit" if commit else "abort",
                             meta.transactional_id, pid, epoch)
                return
            log.info("writing %s for %r failed with %s; retrying", done.state.display, meta.transactional_id,
                     E(err).name)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    # ------------------------------------------------------------------ timeouts and expiry
    def abort_timed_out(self, now: int | None = None) -> int:
        """Abort (with a bumped epoch) every Ongoing transaction past its timeout."""
        now = self.clock() if now is None else now
        n = 0
        for st in list(self.partitions.values()):
            for tid, meta in list(st.txns.items()):
                if meta.state != S.ONGOING or meta.pending_in_progress:
                    continue
                if meta.start_ms + meta.timeout_ms >= now:
                    continue
                t = meta.prepare_fence_epoch()
                log.info("aborting transaction of %r (producer %d) after its timeout of %d ms", tid,
                         meta.producer_id, meta.timeout_ms)
                self._spawn(self._abort_expired(tid, t))
                n += 1
        return n

    async def _abort_expired(self, tid: str, t: Transit) -> None:
        err = await self.end_txn(tid, t.producer_id, t.producer_epoch, False, from_client=False)
        if err and err not in (E.INVALID_PRODUCER_ID_MAPPING, E.PRODUCER_FENCED, E.CONCURRENT_TRANSACTIONS):
            log.warning("rollback of timed-out transaction %r failed: %s", tid, E(err).name)

    async def expire_ids(self, now: int | None = None) -> int:
        """Tombstone ids idle for ``transactional.id.expiration.ms`` with no open transaction."""
        now = self.clock() if now is None else now
        expiration = self._cfg("transactional.id.expiration.ms")
        n = 0
        for st in list(self.partitions.values()):
            for tid, meta in list(st.txns.items()):
                if meta.state not in EXPIRABLE or meta.pending_in_progress:
                    continue
                if meta.last_update_ms + expiration > now:
                    continue
                t = meta.prepare_dead()
                err = await self._write(st, tid, t)
                if st.txns.get(tid) is not meta:
                    continue
                if err:
                    meta.abandon()
                    continue
                meta.complete(t)
                del st.txns[tid]
                n += 1
                log.info("expired transactional id %r (producer %d)", tid, meta.producer_id)
        return n

    # ------------------------------------------------------------------ Describe / List
    def describe(self, tid: str):
        """(error, metadata or None)."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE, None
        if not tid:
            return E.INVALID_REQUEST, None
        err, st = self._state_for(tid)
        if err:
            return err, None
        meta = st.txns.get(tid)
        if meta is None or meta.state == S.DEAD:
            return E.TRANSACTIONAL_ID_NOT_FOUND, None
        return E.NONE, meta

    def list_transactions(self, states=(), producer_ids=(), duration_ms: int = -1):
        """(error, unknown state names, [TxnMetadata])."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE, [], []
        self.check_ownership()
        if any(st.loading for st in self.partitions.values()):
            return E.COORDINATOR_LOAD_IN_PROGRESS, [], []
        wanted, unknown = set(), []
        for name in states:
            if name in STATE_BY_NAME:
                wanted.add(STATE_BY_NAME[name])
            else:
                unknown.append(name)
        pids = set(producer_ids)
        now = self.clock()
        out = []
        if states and not wanted:
            return E.NONE, unknown, out
        for st in self.partitions.values():
            for meta in st.txns.values():
                if wanted and meta.state not in wanted:
                    continue
                if pids and meta.producer_id not in pids:
                    continue
                if duration_ms >= 0 and now - meta.start_ms <= duration_ms:
                    continue
                out.append(meta)
        out.sort(key=lambda m: m.transactional_id)
        return E.NONE, unknown, out


def _topics(partitions) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        out.setdefault(t, []).append(p)
    return out

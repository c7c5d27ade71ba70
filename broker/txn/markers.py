"""Transaction markers: writing them here, sending them to other leaders, and the produce-side check.

* ``write_markers(broker, ...)`` appends one COMMIT/ABORT control batch per partition this broker
  leads (origin "coordinator": the log checks the producer epoch and coordinator epoch), waits
  as acks=all, and tells the group coordinator about ``__consumer_offsets`` partitions so that
  transactional offset commits become visible (commit) or are dropped (abort).  The
  WriteTxnMarkers handler and the local path of ``MarkerSender`` both use it.
* ``MarkerSender.send`` groups partitions by leader (controller metadata): local ones go to
  ``write_markers``, the others in one WriteTxnMarkers request per leader over a cached
  inter-broker connection.  Results are per partition; the coordinator retries.
* ``check_produce`` is what a partition leader does before appending a transactional batch
  (Kafka 3.x, KIP-890 part 1): unless the producer already has an open transaction on the
  partition at that epoch, ask the coordinator whether the partition was added to the
  transaction (locally, or AddPartitionsToTxn v4 verify-only to the coordinator's broker), or,
  for Produce v12+ (transaction version 2), have it added.  A marker of that producer landing on
  the partition meanwhile makes the batch retriable (``_Watch``).
"""
from __future__ import annotations

import asyncio
import logging
import struct

from broker.endpoints import broker_node
from broker.replica import effective_min_isr
from broker.txn.state_log import leader_of, wait_replicated
from protocol import records as rec
from protocol.errors import ErrorCode as E, KafkaError
from storage import errors as se

log = logging.getLogger("odradek.txn")

GROUP_TOPIC = "__consumer_offsets"
TRANSACTIONAL = rec.TRANSACTIONAL_MASK
CONTROL = rec.CONTROL_MASK
_PID_EPOCH = struct.Struct(">qh")      # producerId at byte 43, producerEpoch at 51

class _Watch:
    """Markers written for one producer on one partition while ``check_produce`` awaits the
    coordinator for it (Kafka's verification guard): such a marker ends the transaction the
    answer was about, so the batch must not be appended on the strength of that answer."""
    __slots__ = ("refs", "markers")

    def __init__(self):
        self.refs = 0
        self.markers = 0


# (topic, partition, producer id) -> its watch, only while a check of that producer is in flight
_watches: dict[tuple[str, int, int], _Watch] = {}


def note_marker(topic: str, partition: int, producer_id: int) -> None:
    """A marker of ``producer_id`` was appended to the partition (``write_markers``)."""
    watch = _watches.get((topic, partition, producer_id))
    if watch is not None:
        watch.markers += 1


def _append_error(exc) -> int:
    if isinstance(exc, se.InvalidProducerEpochError):
        return E.INVALID_PRODUCER_EPOCH
    if isinstance(exc, se.TransactionCoordinatorFencedError):
        return E.TRANSACTION_COORDINATOR_FENCED
    if isinstance(exc, KafkaError):
        return exc.code
    from broker.handlers.produce import _error_code
    return _error_code(exc)


async def write_markers(broker, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        commit: bool, partitions, transaction_version: int = 0) -> dict:
    """Append a marker to each partition this broker leads; returns {(topic, partition): error}.
    ``transaction_version``: the transaction's (2: its markers carry the bumped epoch)."""
    out: dict = {}
    waits = []
    kind = "COMMIT" if commit else "ABORT"
    for tp in partitions:
        topic, p = tp
        part = broker.replicas.get(topic, p)
        if part is None:
            info = broker.controller.topic(topic)
            out[tp] = (E.UNKNOWN_TOPIC_OR_PARTITION if info is None or p not in info.partitions
                       else E.NOT_LEADER_OR_FOLLOWER)
            continue
        if not part.is_leader:
            out[tp] = E.NOT_LEADER_OR_FOLLOWER
            continue
        lg = part.log
        if len(part.isr) < effective_min_isr(part):
            out[tp] = E.NOT_ENOUGH_REPLICAS
            continue
        batch = rec.build_control_batch(kind, producer_id, producer_epoch, coordinator_epoch)
        try:
            res = lg.append(batch, part.leader_epoch, origin="coordinator", transaction_version=transaction_version)
        except Exception as e:
            out[tp] = _append_error(e)
            if out[tp] in (E.UNKNOWN_SERVER_ERROR, E.KAFKA_STORAGE_ERROR):
                log.error("marker append to %s-%d failed: %r", topic, p, e)
            continue
        note_marker(topic, p, producer_id)
        part.after_append()
        waits.append((tp, part, res.last_offset + 1, part.leader_epoch))
    timeout = broker.config.get("request.timeout.ms")
    for tp, part, needed, epoch in waits:
        try:
            await wait_replicated(part, needed, epoch, timeout)
            out[tp] = E.NONE
        except KafkaError as e:
            out[tp] = e.code
    groups = getattr(broker, "groups", None)
    offsets_parts = [p for (t, p), err in out.items() if t == GROUP_TOPIC and err == E.NONE]
    if offsets_parts and groups is not None and hasattr(groups, "complete_txn"):
        try:
            groups.complete_txn(producer_id, offsets_parts, commit)
        except Exception:
            log.exception("completing transactional offsets of producer %d failed", producer_id)
    return out


class _Connections:
    """One cached client connection per broker id (inter-broker listener)."""

    def __init__(self, broker):
        self.broker = broker
        self.conns: dict[int, object] = {}
        self.locks: dict[int, asyncio.Lock] = {}

    async def get(self, broker_id: int):
        from broker.security.interbroker import connect_to_broker
        conn = self.conns.get(broker_id)
        if conn is not None and not conn.closed:
            return conn
        lock = self.locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            conn = self.conns.get(broker_id)
            if conn is not None and not conn.closed:
                return conn
            node = broker_node(self.broker, broker_id)
            if node is None:
                raise ConnectionError(f"broker {broker_id} is not alive")
            conn = await connect_to_broker(
                self.broker.config, node.host, node.port, client_id=f"broker-{self.broker.broker_id}-txn", timeout=10,
                request_timeout=self.broker.config.get("request.timeout.ms") / 1000 + 5)
            self.conns[broker_id] = conn
            return conn

    def drop(self, broker_id: int) -> None:
        conn = self.conns.pop(broker_id, None)
        if conn is not None:
            asyncio.ensure_future(conn.close())

    async def close(self) -> None:
        for bid in list(self.conns):
            conn = self.conns.pop(bid)
            try:
                await conn.close()
            except Exception:
                pass


class MarkerSender:
    def __init__(self, broker):
        self.broker = broker
        self.connections = _Connections(broker)

    async def close(self) -> None:
        await self.connections.close()

    def topic_exists(self, topic: str) -> bool:
        return self.broker.controller.topic(topic) is not None

    async def send(self, producer_id, producer_epoch, coordinator_epoch, commit, partitions,
                   transaction_version: int = 0) -> dict:
        out: dict = {}
        by_leader: dict[int, list] = {}
        me = self.broker.broker_id
        for tp in partitions:
            leader = leader_of(self.broker, *tp)
            if leader < 0:
                out[tp] = (E.UNKNOWN_TOPIC_OR_PARTITION if not self.topic_exists(tp[0])
                           else E.LEADER_NOT_AVAILABLE)
                continue
            by_leader.setdefault(leader, []).append(tp)
        jobs = []
        for leader, tps in by_leader.items():
            if leader == me:
                jobs.append(write_markers(self.broker, producer_id, producer_epoch, coordinator_epoch,
                                          commit, tps, transaction_version))
            else:
                jobs.append(self._remote(leader, producer_id, producer_epoch, coordinator_epoch, commit, tps,
                                         transaction_version))
        for res in await asyncio.gather(*jobs):
            out.update(res)
        return out

    async def _remote(self, leader, producer_id, producer_epoch, coordinator_epoch, commit, tps,
                      transaction_version: int = 0) -> dict:
        from protocol.messages import WriteTxnMarkersRequest as Q
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        req = Q(markers=[Q.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            topics=[Q.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
            coordinator_epoch=coordinator_epoch, transaction_version=transaction_version)])
        try:
            conn = await self.connections.get(leader)
            resp = await conn.send(req)
        except (ConnectionError, asyncio.TimeoutError, OSError) as e:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, e)
            self.connections.drop(leader)
            return {tp: E.NETWORK_EXCEPTION for tp in tps}
        out = {tp: E.UNKNOWN_SERVER_ERROR for tp in tps}
        for m in resp.markers:
            if m.producer_id != producer_id:
                continue
            for t in m.topics:
                for pr in t.partitions:
                    if (t.name, pr.partition_index) in out:
                        out[(t.name, pr.partition_index)] = pr.error_code
        return out

    async def ask_coordinator(self, coordinator_id, transactional_id, producer_id, producer_epoch, tp,
                            verify_only: bool = True) -> int:
        """AddPartitionsToTxn v4+ to the coordinator's broker, verify-only or (transaction version
        2) adding the partition; the partition's error."""
        from protocol.messages import AddPartitionsToTxnRequest as Q
        req = Q(transactions=[Q.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=verify_only, topics=[Q.AddPartitionsToTxnTopic(name=tp[0], partitions=[tp[1]])])])
        try:
            conn = await self.connections.get(coordinator_id)
            rng = conn.version_range(24)
            if rng is None or rng[1] < 4:
                return E.NONE                       # the coordinator cannot verify: skip (as Kafka)
            resp = await conn.send(req, version=rng[1] if not verify_only else min(rng[1], 4))
        except (ConnectionError, asyncio.TimeoutError, OSError) as e:
            self.connections.drop(coordinator_id)
            log.info("verification with broker %d failed: %s", coordinator_id, e)
            return E.NETWORK_EXCEPTION
        if resp.error_code:
            return E.INVALID_TXN_STATE if resp.error_code == E.CLUSTER_AUTHORIZATION_FAILED else resp.error_code
        for r in resp.results_by_transaction:
            for t in r.topic_results:
                for pr in t.results_by_partition:
                    if t.name == tp[0] and pr.partition_index == tp[1]:
                        return pr.partition_error_code
        return E.NONE


def is_transactional_batch(records) -> bool:
    """Attribute bits of the first v2 batch: transactional and not control."""
    return (records is not None and len(records) > 22 and records[16] == 2
            and records[22] & TRANSACTIONAL and not records[22] & CONTROL)


# coordinator answers -> what a producer of this produce version understands (Kafka 3.9)
_RETRIABLE_AS_NOT_ENOUGH_REPLICAS = {E.CONCURRENT_TRANSACTIONS, E.NETWORK_EXCEPTION,
                                     E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                                     E.NOT_COORDINATOR}


def _produce_error(err: int, produce_version: int) -> int:
    if err == E.PRODUCER_FENCED:
        return E.INVALID_PRODUCER_EPOCH
    if err == E.TRANSACTION_ABORTABLE and produce_version <= 10:
        return E.INVALID_TXN_STATE
    if err in _RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
        return E.NOT_ENOUGH_REPLICAS
    return err


async def verify_in_transaction(broker, transactional_id, producer_id, producer_epoch, tp, *,
                                add: bool = False) -> int:
    """The coordinator's verdict for ``tp`` (local coordinator or a remote one).  ``add``
    (transaction version 2): the coordinator adds the partition rather than only checking."""
    txns = getattr(broker, "txns", None)
    if txns is None:
        return E.NONE
    if add:
        err = await txns.add_partitions(transactional_id, producer_id, producer_epoch, [tp], 2)
    else:
        err = txns.verify_partitions(transactional_id, producer_id, producer_epoch, [tp])[tp]
    if err != E.NOT_COORDINATOR:
        return err
    from broker.txn.coordinator import TXN_TOPIC
    leader = leader_of(broker, TXN_TOPIC, txns.partition_for(transactional_id))
    if leader < 0 or leader == broker.broker_id:
        return E.NOT_COORDINATOR
    sender = getattr(txns, "marker_sender", None)
    if sender is None:
        return E.NOT_COORDINATOR
    return await sender.ask_coordinator(leader, transactional_id, producer_id, producer_epoch, tp,
                                      verify_only=not add)


async def add_to_transaction(broker, transactional_id, producer_id, producer_epoch, tp) -> int:
    """Transaction version 2: have the coordinator add ``tp`` to the transaction."""
    return await verify_in_transaction(broker, transactional_id, producer_id, producer_epoch, tp, add=True)


async def check_produce(broker, transactional_id, topic: str, partition: int, part, records,
                        produce_version: int) -> int:
    """0 if a transactional batch may be appended to ``part``; otherwise the partition's error.
    Produce v12+ (transaction version 2) adds the partition to the transaction instead of
    verifying it, whether verification is enabled or not, and retries CONCURRENT_TRANSACTIONS
    (the previous transaction's markers still going out) for a short while, as Kafka 4.x does."""
    if transactional_id is None:
        return E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    add = produce_version >= 12
    if len(records) < rec.BATCH_OVERHEAD or not (add or broker.config.get("transaction.partition.verification.enable")):
        return E.NONE
    pid, epoch = _PID_EPOCH.unpack_from(records, 43)
    entry = part.log.producer_state.last_entry(pid)
    if entry is not None and entry.current_txn_first_offset >= 0 and entry.producer_epoch == epoch:
        return E.NONE
    if add and entry is not None and epoch < entry.producer_epoch:
        return E.INVALID_PRODUCER_EPOCH
    tp = (topic, partition)
    key = (topic, partition, pid)
    watch = _watches.get(key)
    if watch is None:
        watch = _watches[key] = _Watch()
    watch.refs += 1
    try:
        if add:
            err, before = await _add_with_retries(broker, transactional_id, pid, epoch, tp, watch)
            if err == E.CONCURRENT_TRANSACTIONS:
                return err              # Kafka 4.x returns it as it is: the producer retries
        else:
            before = watch.markers
            err = await verify_in_transaction(broker, transactional_id, pid, epoch, tp)
        if err:
            return _produce_error(err, produce_version)
        if watch.markers != before or not part.is_leader:
            return E.NOT_ENOUGH_REPLICAS        # its marker landed meanwhile: let the producer retry
        return E.NONE
    finally:
        watch.refs -= 1
        if not watch.refs:
            del _watches[key]


async def _add_with_retries(broker, transactional_id, pid, epoch, tp, watch: _Watch) -> tuple[int, int]:
    """``add_to_transaction``, retried while the coordinator answers CONCURRENT_TRANSACTIONS (the
    previous transaction's markers going out), every ``add.partitions.to.txn.retry.backoff.ms``
    for up to ``add.partitions.to.txn.retry.backoff.max.ms`` (capped at ``request.timeout.ms``).
    Returns the last answer and ``watch``'s marker count when that attempt began (a marker of the
    previous transaction landing during an earlier attempt is no reason to refuse)."""
    cfg = broker.config
    backoff = cfg.get("add.partitions.to.txn.retry.backoff.ms") / 1000
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(cfg.get("add.partitions.to.txn.retry.backoff.max.ms"),
                                 cfg.get("request.timeout.ms")) / 1000
    while True:
        before = watch.markers
        err = await add_to_transaction(broker, transactional_id, pid, epoch, tp)
        if err != E.CONCURRENT_TRANSACTIONS or loop.time() + backoff > deadline:
            return err, before
        await asyncio.sleep(backoff)

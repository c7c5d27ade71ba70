"""``__transaction_state`` as the transaction coordinator sees it, and the coordinator's wiring.

The topic is created on first use (FindCoordinator with a transactional key) with
``transaction.state.log.num.partitions`` partitions, ``transaction.state.log.replication.factor``
replicas capped at the live brokers, ``cleanup.policy=compact``, no compression,
``min.insync.replicas`` = ``transaction.state.log.min.isr`` (capped at the replication factor so
a one-broker cluster can run transactions), unclean leader election off.

An append is one uncompressed v2 batch with one record, written as the leader and awaited like
acks=all: it returns once the high watermark covers it (``request.timeout.ms``).  The
coordinator epoch of a partition is its leader epoch.  Loading reads from the log start offset
to the log end offset and skips control batches.
"""
from __future__ import annotations

import asyncio
import logging
import time

from broker.endpoints import broker_node
from broker.internal_topics import InternalTopic
from broker.replica import effective_min_isr
from broker.txn.coordinator import TXN_TOPIC, TransactionCoordinator
from protocol import records as rec
from protocol.errors import ErrorCode as E, error_for

log = logging.getLogger("odradek.txn")

READ_CHUNK = 1 << 20


class TransactionStateLog:
    def __init__(self, broker):
        self.broker = broker
        self._topic = InternalTopic(
            broker, TXN_TOPIC, "transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
            lambda cfg, rf: {"cleanup.policy": "compact", "compression.type": "uncompressed",
                             "min.insync.replicas": str(min(cfg.get("transaction.state.log.min.isr"), rf)),
                             "segment.bytes": str(cfg.get("transaction.state.log.segment.bytes")),
                             "unclean.leader.election.enable": "false"})

    @property
    def num_partitions(self) -> int:
        """An existing topic keeps its partition count (the hash must not change under it)."""
        return self._topic.partition_count()

    def leader_epoch(self, partition: int) -> int | None:
        part = self.broker.replicas.get(TXN_TOPIC, partition)
        if part is None or not part.is_leader:
            return None
        return part.leader_epoch

    async def ensure_created(self) -> None:
        await self._topic.ensure_created()

    async def append(self, partition: int, key: bytes, value: bytes | None) -> None:
        part = self.broker.replicas.get(TXN_TOPIC, partition)
        if part is None or not part.is_leader:
            raise error_for(E.NOT_LEADER_OR_FOLLOWER)(f"not the leader of {TXN_TOPIC}-{partition}")
        lg = part.log
        if len(part.isr) < effective_min_isr(part):
            raise error_for(E.NOT_ENOUGH_REPLICAS)(f"{TXN_TOPIC}-{partition}: ISR below min.insync.replicas")
        epoch = part.leader_epoch
        batch = rec.build_batch([(key, value, [], int(time.time() * 1000))])
        try:
            res = lg.append(batch, epoch, origin="coordinator")
        except Exception as e:
            from broker.handlers.produce import _error_code
            raise error_for(_error_code(e))(str(e)) from None
        part.after_append()
        await wait_replicated(part, res.last_offset + 1, epoch,
                              self.broker.config.get("request.timeout.ms"))

    def read(self, partition: int):
        part = self.broker.replicas.get(TXN_TOPIC, partition)
        if part is None:
            return
        start = part.log.log_start_offset
        for data, h in part.log.stored_batches(start, chunk=READ_CHUNK):
            if h.is_control:
                continue
            for r in rec.iter_records(data, h):
                if r.offset >= start:
                    yield r.offset, r.key, r.value


async def wait_replicated(part, needed: int, epoch: int, timeout_ms: int) -> None:
    """acks=all: wait until ``part``'s high watermark reaches ``needed``."""
    deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
    code = await part.wait_for_high_watermark(needed, epoch, deadline)
    if code:
        raise error_for(code)(f"write to {part.topic}-{part.partition} not replicated: {E(code).name}")


def leader_of(broker, topic: str, partition: int) -> int:
    info = broker.controller.topic(topic)
    if info is None or partition not in info.partitions:
        return -1
    return info.partitions[partition].leader


async def attach_transaction_coordinator(broker) -> None:
    """Create the coordinator, wire it to ``__transaction_state``, markers and producer ids."""
    from broker.handlers.init_producer_id import ProducerIdManager
    from broker.txn.markers import MarkerSender

    tlog = TransactionStateLog(broker)
    if getattr(broker, "producer_ids", None) is None:
        broker.producer_ids = ProducerIdManager(broker)

    class _Ids:
        async def next(self):
            return await broker.producer_ids.next()

    def node_lookup(partition):
        leader = leader_of(broker, TXN_TOPIC, partition)
        return broker_node(broker, leader) if leader >= 0 else None

    markers = MarkerSender(broker)
    coord = TransactionCoordinator(broker.config, tlog, markers, _Ids(), node_lookup)
    coord.marker_sender = markers
    coord.transaction_version = lambda: broker.controller.finalized_features()[1].get("transaction.version", 0)
    broker.txns = coord
    await coord.start()

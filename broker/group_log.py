"""``__consumer_offsets`` as the group coordinator sees it (the ``GroupLog`` interface).

The topic is created on first use (FindCoordinator) with ``offsets.topic.num.partitions``
partitions, ``offsets.topic.replication.factor`` replicas (capped at the live brokers, as
Kafka 3.x does when it creates internal topics) and ``cleanup.policy=compact``.

Appends are written by the coordinator as one v2 batch per call and wait — like acks=all — until
the high watermark covers them (``offsets.commit.timeout.ms``).  Loading reads the partition
from its log start offset to its log end offset.  Transactional offset commits (TxnOffsetCommit:
transactional batches of a producer) are held back until their marker: a COMMIT marker yields
them (except where a plain commit of the same key came later), an ABORT drops them, and those
still open at the end are handed to the coordinator by ``take_open_transactions``.
"""
from __future__ import annotations

import asyncio
import logging
import time

from broker.endpoints import broker_node
from broker.internal_topics import InternalTopic
from protocol import records as rec
from protocol.errors import ErrorCode as E, error_for

log = logging.getLogger("odradek.group")

TOPIC = "__consumer_offsets"
READ_CHUNK = 1 << 20


class ConsumerOffsetsLog:
    def __init__(self, broker):
        self.broker = broker
        self.num_partitions = broker.config.get("offsets.topic.num.partitions")
        self._topic = InternalTopic(broker, TOPIC, "offsets.topic.num.partitions", "offsets.topic.replication.factor",
                                    lambda cfg, rf: {"cleanup.policy": "compact", "compression.type": "producer",
                                                     "segment.bytes": str(cfg.get("offsets.topic.segment.bytes"))})
        self._open_txns: dict[int, dict] = {}

    def is_leader(self, partition: int) -> bool:
        part = self.broker.replicas.get(TOPIC, partition)
        return part is not None and part.is_leader

    async def ensure_created(self) -> None:
        await self._topic.ensure_created()

    async def append_transactional(self, partition: int, records, producer_id: int, producer_epoch: int) -> None:
        """TxnOffsetCommit: the records as a transactional batch of the producer."""
        await self.append(partition, records, producer_id, producer_epoch)

    async def append(self, partition: int, records, producer_id: int = -1, producer_epoch: int = -1) -> None:
        part = self.broker.replicas.get(TOPIC, partition)
        if part is None or not part.is_leader:
            raise error_for(E.NOT_LEADER_OR_FOLLOWER)(f"not the leader of {TOPIC}-{partition}")
        now = int(time.time() * 1000)
        batch = rec.build_batch([(k, v, [], now) for k, v in records], producer_id=producer_id,
                                producer_epoch=producer_epoch, is_transactional=producer_id >= 0,
                                compression=self.broker.config.get("offsets.topic.compression.codec"))
        res = part.log.append(batch, part.leader_epoch, origin="coordinator")
        part.after_append()
        deadline = asyncio.get_running_loop().time() + self.broker.config.get("offsets.commit.timeout.ms") / 1000
        code = await part.wait_for_high_watermark(res.last_offset + 1, part.leader_epoch, deadline)
        if code:
            raise error_for(code)(f"offsets write to {TOPIC}-{partition} not replicated: {E(code).name}")

    def read(self, partition: int):
        part = self.broker.replicas.get(TOPIC, partition)
        if part is None:
            return
        start = part.log.log_start_offset
        held: dict[int, list] = {}          # producer id -> its open transactional records
        last_plain: dict = {}               # key -> offset of its latest plain record
        self._open_txns.pop(partition, None)
        for data, h in part.log.stored_batches(start, chunk=READ_CHUNK):
            if h.is_control:
                if h.is_transactional:
                    marker = rec.read_control_record(data, h)
                    records = held.pop(h.producer_id, [])
                    if marker is not None and marker.type == rec.ControlRecordType.COMMIT:
                        for o, k, v in records:
                            if last_plain.get(k, -1) < o:
                                yield o, k, v
                continue
            if h.is_transactional:
                held.setdefault(h.producer_id, []).extend(
                    (r.offset, r.key, r.value) for r in rec.iter_records(data, h))
                continue
            for r in rec.iter_records(data, h):
                if r.offset >= start:
                    last_plain[r.key] = r.offset
                    yield r.offset, r.key, r.value
        if held:
            self._open_txns[partition] = held

    def take_open_transactions(self, partition: int) -> dict:
        """{producer id: [(offset, key, value)]} of transactions still open after ``read``."""
        return self._open_txns.pop(partition, {})


async def create_internal_topics(broker, specs) -> list:
    """The streams groups' internal topics (broker/group/streams_protocol.py), created through
    the controller after ``create.topic.policy.class.name`` agreed, as Kafka's controller checks
    every creation; a refused topic's result carries the policy's error."""
    from controller.api import TopicResult
    refused = {}
    if broker.policies is not None and broker.policies.create_topic is not None:
        from broker.handlers.topics import create_policy_verdicts
        for spec, verdict in zip(specs, await create_policy_verdicts(broker, specs)):
            if verdict is not None:
                refused[spec.name] = TopicResult(spec.name, verdict[0], verdict[1])
    results = await broker.controller.create_topics([s for s in specs if s.name not in refused]) \
        if len(refused) < len(specs) else []
    return results + list(refused.values())


async def attach_group_coordinator(broker) -> None:
    """Create the coordinator, wire it to ``__consumer_offsets`` and to leadership changes."""
    from broker.group.coordinator import GroupCoordinator
    glog = ConsumerOffsetsLog(broker)

    def node_lookup(partition):
        info = broker.controller.topic(TOPIC)
        if info is None or partition not in info.partitions:
            return None
        return broker_node(broker, info.partitions[partition].leader)

    coord = GroupCoordinator(broker.config, glog, node_lookup)
    coord.topic_lookup = lambda name: broker.controller.topic(name)
    coord.topic_by_id = lambda tid: broker.controller.topic_by_id(tid)
    coord.topic_names = lambda: broker.controller.topics().keys()
    coord.group_configs = lambda gid: broker.controller.group_configs(gid)
    coord.broker_racks = lambda: {b.id: b.rack for b in broker.controller.brokers() if b.rack}
    coord.create_topics = lambda specs: create_internal_topics(broker, specs)
    coord.share = broker.share
    broker.groups = coord
    await coord.start()
    for (t, p), part in broker.replicas.partitions.items():
        if t == TOPIC and part.is_leader:
            coord.on_become_leader(p)

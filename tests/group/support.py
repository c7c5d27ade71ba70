"""In-memory fakes for group-coordinator unit tests: a GroupLog, a coordinator factory on manual
timers, consumer-protocol bytes, and a tiny driver for members."""
from __future__ import annotations

import asyncio
import functools
import struct
from dataclasses import dataclass

from broker.config import BrokerConfig
from broker.group import GroupCoordinator, ManualTimers
from protocol.errors import ErrorCode as E, NotLeaderOrFollowerError


def run(fn):
    """Run an ``async def`` test on a fresh event loop."""
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        return asyncio.run(fn(*a, **kw))
    return wrapper


@dataclass
class FakeNode:
    node_id: int
    host: str
    port: int


class FakeGroupLog:
    """``__consumer_offsets`` in memory: a list of (offset, key, value) per partition."""

    def __init__(self, num_partitions: int = 4):
        self.num_partitions = num_partitions
        self.partitions: dict[int, list] = {p: [] for p in range(num_partitions)}
        self.leader_of: set[int] = set(range(num_partitions))
        self.fail_with: Exception | None = None     # raised by the next appends while set
        self.gate: asyncio.Event | None = None      # appends wait for it while set
        self.created = 0
        self.appends = 0

    def is_leader(self, partition: int) -> bool:
        return partition in self.leader_of

    async def append(self, partition, records):
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        if partition not in self.leader_of:
            raise NotLeaderOrFollowerError()
        log = self.partitions[partition]
        for key, value in records:
            log.append((len(log), bytes(key), None if value is None else bytes(value)))
        self.appends += 1

    def read(self, partition):
        return list(self.partitions[partition])

    async def ensure_created(self):
        self.created += 1


DEFAULTS = {
    "group.min.session.timeout.ms": "10",
    "group.max.session.timeout.ms": "600000",
    "group.initial.rebalance.delay.ms": "0",
}


def make_coordinator(log: FakeGroupLog | None = None, timers: ManualTimers | None = None, **props):
    cfg = dict(DEFAULTS)
    cfg.update({k.replace("_", "."): str(v) for k, v in props.items()})
    log = log or FakeGroupLog()
    timers = timers or ManualTimers()
    coord = GroupCoordinator(BrokerConfig(cfg), log, lambda p: FakeNode(0, "localhost", 9092), timers=timers)
    return coord, log, timers


async def settle(n: int = 10):
    """Let scheduled tasks (waiters, background appends) run."""
    for _ in range(n):
        await asyncio.sleep(0)


def subscription(*topics: str, version: int = 0, user_data: bytes | None = None) -> bytes:
    """ConsumerProtocolSubscription bytes (non-flexible layout)."""
    out = bytearray(struct.pack(">hi", version, len(topics)))
    for t in topics:
        b = t.encode()
        out += struct.pack(">h", len(b)) + b
    if user_data is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(user_data)) + user_data
    if version >= 1:
        out += struct.pack(">i", 0)      # owned partitions
    return bytes(out)


class Client:
    """One simulated group member."""

    def __init__(self, coord, group="g", client_id="c", instance=None, session=10_000, rebalance=30_000,
                 protocols=None, topics=("t",)):
        self.coord = coord
        self.group = group
        self.client_id = client_id
        self.instance = instance
        self.session = session
        self.rebalance = rebalance
        self.protocols = protocols if protocols is not None else [("range", subscription(*topics))]
        self.member_id = ""
        self.generation = -1
        self.join_task = None
        self.sync_task = None
        self.last_join = None

    def start_join(self, require_known=True, skip_ok=True, protocol_type="consumer"):
        self.join_task = asyncio.ensure_future(self.coord.join_group(
            self.group, self.member_id, self.instance, client_id=self.client_id, client_host="/127.0.0.1",
            rebalance_timeout_ms=self.rebalance, session_timeout_ms=self.session, protocol_type=protocol_type,
            protocols=self.protocols, require_known_member_id=require_known, support_skip_assignment=skip_ok))
        return self.join_task

    def join_done(self, result):
        self.last_join = result
        if result.error in (E.NONE, E.MEMBER_ID_REQUIRED):
            self.member_id = result.member_id
        if result.error == E.NONE:
            self.generation = result.generation_id
        return result

    async def join(self, **kw):
        """Join until admitted (handles MEMBER_ID_REQUIRED); the join must complete on its own."""
        r = self.join_done(await self.start_join(**kw))
        if r.error == E.MEMBER_ID_REQUIRED:
            r = self.join_done(await self.start_join(**kw))
        return r

    def start_sync(self, assignments=None):
        self.sync_task = asyncio.ensure_future(self.coord.sync_group(
            self.group, self.generation, self.member_id, self.instance, assignments or {}))
        return self.sync_task

    def heartbeat(self):
        return self.coord.heartbeat(self.group, self.member_id, self.instance, self.generation)

    def leave(self):
        return self.coord.leave_group(self.group, [(self.member_id, self.instance, None)])

"""In-memory fakes for transaction-coordinator unit tests."""
from __future__ import annotations

import asyncio
import functools

from broker.config import BrokerConfig
from broker.txn.coordinator import TransactionCoordinator
from protocol.errors import ErrorCode as E, NotLeaderOrFollowerError


def run(fn):
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        return asyncio.run(fn(*a, **kw))
    return wrapper


class FakeTxnLog:
    """``__transaction_state`` in memory: (offset, key, value) per partition; leader epochs settable."""

    def __init__(self, num_partitions: int = 4):
        self.num_partitions = num_partitions
        self.partitions: dict[int, list] = {p: [] for p in range(num_partitions)}
        self.epochs: dict[int, int | None] = {p: 0 for p in range(num_partitions)}
        self.fail_with: Exception | None = None
        self.gate: asyncio.Event | None = None

    def leader_epoch(self, partition):
        return self.epochs.get(partition)

    async def append(self, partition, key, value):
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        if self.epochs.get(partition) is None:
            raise NotLeaderOrFollowerError()
        log = self.partitions[partition]
        log.append((len(log), bytes(key), None if value is None else bytes(value)))

    def read(self, partition):
        return list(self.partitions[partition])


class FakeMarkers:
    """Records every send; ``script`` pops per-call overrides {tp: error}."""

    def __init__(self):
        self.sent: list[tuple] = []
        self.versions: list[int] = []
        self.script: list[dict] = []
        self.deleted_topics: set[str] = set()
        self.gate: asyncio.Event | None = None

    def topic_exists(self, topic):
        return topic not in self.deleted_topics

    async def send(self, pid, epoch, coordinator_epoch, commit, partitions, transaction_version=0):
        if self.gate is not None:
            await self.gate.wait()
        self.sent.append((pid, epoch, coordinator_epoch, commit, frozenset(partitions)))
        self.versions.append(transaction_version)
        override = self.script.pop(0) if self.script else {}
        return {tp: override.get(tp, E.NONE) for tp in partitions}


class FakeIds:
    def __init__(self, start=1000):
        self.next_id = start

    async def next(self):
        pid = self.next_id
        self.next_id += 1
        return pid


class Clock:
    def __init__(self, now=1_000_000):
        self.now = now

    def __call__(self):
        return self.now


def make_coordinator(log=None, markers=None, clock=None, **props):
    cfg = {k.replace("_", "."): str(v) for k, v in props.items()}
    log = log or FakeTxnLog()
    markers = markers or FakeMarkers()
    clock = clock or Clock()
    coord = TransactionCoordinator(BrokerConfig(cfg), log, markers, FakeIds(), lambda p: None,
                                   clock=clock, marker_backoff=0.001)
    return coord, log, markers, clock

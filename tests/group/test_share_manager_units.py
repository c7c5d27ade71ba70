"""broker/share/manager.py without a broker process: a stub broker with one share partition in
memory and the writes to ``__share_group_state`` recorded."""
from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from broker.config import BrokerConfig
from broker.share.manager import ShareCoordinator
from broker.share.partition import ACCEPT, AVAILABLE, SharePartition

TID = uuid.UUID(int=7)


def _coordinator():
    controller = SimpleNamespace(topic=lambda name: None, group_configs=lambda g: {},
                                 topic_by_id=lambda tid: SimpleNamespace(name="t") if tid == TID else None)
    broker = SimpleNamespace(config=BrokerConfig({}), controller=controller, groups=None,
                             replicas=SimpleNamespace(get=lambda t, p: None))
    coord = ShareCoordinator(broker)
    writes = []

    async def write(group, tid, p, state_epoch, leader_epoch, start, batches=None):
        writes.append((group, tid, p, start, list(batches or ())))
    coord.state.write = write
    return coord, writes


def test_a_lock_that_a_request_finds_run_out_is_written_by_the_next_tick():
    """A request that finds a lock run out releases it on the spot; the tick that follows writes
    the release, though the request took the lock's deadline off the tick's heap."""
    coord, writes = _coordinator()
    sp = coord.partitions[("g", TID, 0)] = SharePartition(0, lock_ms=1000)
    assert sp.acquire("m1", [(0, 0, False)], 0, 10) == [(0, 0, 1)]

    async def go():
        out = await coord.acknowledge("g", "m1", [(TID, 0, [(0, 0, [ACCEPT])])], now=5000)
        await coord._tick(5001)
        return out
    out = asyncio.run(go())
    assert out[(TID, 0)][0] != 0                      # too late: the lock had run out
    assert sp.state_of(0)[:2] == (AVAILABLE, 1)
    assert writes == [("g", TID, 0, 0, [(0, 0, AVAILABLE, 1)])]

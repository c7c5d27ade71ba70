"""The follower after OFFSET_OUT_OF_RANGE (broker/replication.py ``ReplicaFetcher._out_of_range``),
which Kafka answers without bounds: ListOffsets asks the leader's log end and start, and the
follower cuts its log to a leader's end below its own, starts over at a leader's log start above
its end, or else asks OffsetForLeaderEpoch where the logs part."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from broker.replication import ReplicaFetcher, _FetchState
from storage.config import LogConfig
from storage.log import Log
from tests.storage.helpers import make_batch

LEADER = {-1: {0: 5, 1: 50, 2: 50}, -2: {0: 0, 1: 20, 2: 0}}     # timestamp -> partition -> offset


class FakeLeader:
    """Answers the follower's ListOffsets from LEADER and records what it was asked."""

    def __init__(self):
        self.asked = []

    async def send(self, req, timeout=None):
        assert req.replica_id == 7 and req.isolation_level == 0
        parts = req.topics[0].partitions
        ts = {p.timestamp for p in parts}
        assert len(ts) == 1
        ts = ts.pop()
        self.asked.append((ts, sorted(p.partition_index for p in parts)))
        assert all(p.current_leader_epoch == 3 for p in parts)
        return SimpleNamespace(topics=[SimpleNamespace(name="t", partitions=[
            SimpleNamespace(partition_index=p.partition_index, error_code=0, offset=LEADER[ts][p.partition_index])
            for p in parts])])


def test_out_of_range_asks_the_leaders_bounds_and_follows_kafkas_rule(tmp_path):
    fetcher = object.__new__(ReplicaFetcher)
    fetcher.leader_id, fetcher.backoff, fetcher.timeout = 1, 0.1, 5
    fetcher.conn = FakeLeader()
    fetcher.mgr = SimpleNamespace(broker_id=7, broker=SimpleNamespace(log_manager=None))
    fetcher.parts = {}
    for p in range(3):
        lg = Log(str(tmp_path / f"t-{p}"), LogConfig(segment_bytes=1 << 20))
        for _ in range(10):
            lg.append(make_batch([b"x"]), 2)
        st = _FetchState(SimpleNamespace(topic="t", partition=p, leader_epoch=3, log=lg))
        st.truncating, st.out_of_range = False, True
        fetcher.parts[("t", p)] = st
    asyncio.run(fetcher._out_of_range(list(fetcher.parts)))
    # the log end of all three first; the log start only of those not past the leader's end
    assert fetcher.conn.asked == [(-1, [0, 1, 2]), (-2, [1, 2])]
    st0, st1, st2 = (fetcher.parts[("t", p)] for p in range(3))
    assert st0.part.log.log_end_offset == 5                         # cut to the leader's end
    assert (st1.part.log.log_start_offset, st1.part.log.log_end_offset) == (20, 20)     # starts over there
    assert st2.part.log.log_end_offset == 10 and st2.truncating and st2.ask_leader      # parted: ask where
    assert not any(st.out_of_range for st in (st0, st1, st2))
    for st in (st0, st1, st2):
        st.part.log.close()

"""Transactional offset commits in the group coordinator, and loading them from ``__consumer_offsets``."""
from __future__ import annotations

import asyncio
import time

from broker.config import BrokerConfig
from broker.group import records as R
from broker.group.group import OffsetAndMetadata
from broker.group_log import ConsumerOffsetsLog
from protocol import records as rec
from protocol.errors import ErrorCode as E
from storage.log import Log
from tests.group.support import FakeGroupLog, make_coordinator, run

TP = ("in", 0)


class TxnFakeLog(FakeGroupLog):
    """FakeGroupLog with transactional appends (recorded with the producer id)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.txn_appends = []

    async def append_transactional(self, partition, records, producer_id, producer_epoch):
        self.txn_appends.append((partition, producer_id, producer_epoch, list(records)))


def om(offset):
    return OffsetAndMetadata(offset, -1, "", 1, -1)


@run
async def test_pending_until_commit_marker():
    coord, log, _ = make_coordinator(TxnFakeLog())
    await coord.start()
    res = await coord.commit_txn_offsets("g", 7, 0, "", None, -1, {TP: om(10)})
    assert res == {TP: E.NONE}
    assert log.txn_appends and log.txn_appends[0][1:3] == (7, 0)
    err, rows = coord.fetch_offsets("g", [TP])
    assert rows == [(TP, None, E.NONE)]
    _, rows = coord.fetch_offsets("g", [TP], require_stable=True)
    assert rows == [(TP, None, E.UNSTABLE_OFFSET_COMMIT)]
    # a marker for another producer or another partition changes nothing
    coord.complete_txn(8, [coord.partition_for("g")], True)
    coord.complete_txn(7, [coord.partition_for("g") + 1], True)
    assert coord.fetch_offsets("g", [TP])[1][0][1] is None
    coord.complete_txn(7, [coord.partition_for("g")], True)
    _, rows = coord.fetch_offsets("g", [TP], require_stable=True)
    assert rows[0][1].offset == 10 and rows[0][2] == E.NONE


@run
async def test_abort_marker_drops_offsets():
    coord, log, _ = make_coordinator(TxnFakeLog())
    await coord.start()
    await coord.commit_offsets("g", "", None, -1, {TP: om(3)})
    await coord.commit_txn_offsets("g", 7, 0, "", None, -1, {TP: om(10)})
    coord.complete_txn(7, [coord.partition_for("g")], False)
    _, rows = coord.fetch_offsets("g", [TP], require_stable=True)
    assert rows[0][1].offset == 3 and rows[0][2] == E.NONE


@run
async def test_member_validation():
    coord, log, _ = make_coordinator(TxnFakeLog())
    await coord.start()
    assert await coord.commit_txn_offsets("g", 7, 0, "nobody", None, -1, {TP: om(1)}) == {TP: E.UNKNOWN_MEMBER_ID}
    assert await coord.commit_txn_offsets("g", 7, 0, "", None, 3, {TP: om(1)}) == {TP: E.ILLEGAL_GENERATION}
    assert await coord.commit_txn_offsets("", 7, 0, "", None, -1, {TP: om(1)}) == {TP: E.INVALID_GROUP_ID}


class _Part:
    def __init__(self, lg):
        self.log, self.is_leader, self.leader_epoch, self.isr = lg, True, 0, [0]
        self.topic, self.partition = "__consumer_offsets", 0

    @property
    def high_watermark(self):
        return self.log.log_end_offset

    def after_append(self):
        self.log.update_high_watermark(self.log.log_end_offset)


class _Broker:
    def __init__(self, part):
        self.config = BrokerConfig({"offsets.topic.num.partitions": "1"})
        self._part = part

        class _Replicas:
            def get(_self, topic, p):
                return part if (topic, p) == ("__consumer_offsets", 0) else None
        self.replicas = _Replicas()


def _records(group, offset):
    return [(R.offset_key(group, "in", 0), R.offset_value(R.OffsetValue(offset, "", 1, -1, -1)))]


def test_loading_resolves_markers_and_keeps_open_transactions(tmp_path):
    lg = Log(str(tmp_path / "__consumer_offsets-0"))
    part = _Part(lg)
    glog = ConsumerOffsetsLog(_Broker(part))

    def append(batch):
        lg.append(batch, 0, origin="coordinator")

    now = int(time.time() * 1000)
    plain = lambda g, o: rec.build_batch([(k, v, [], now) for k, v in _records(g, o)])   # noqa: E731
    txn = lambda g, o, pid: rec.build_batch([(k, v, [], now) for k, v in _records(g, o)],  # noqa: E731
                                            producer_id=pid, producer_epoch=0, is_transactional=True)
    append(plain("a", 1))
    append(txn("a", 5, 100))                                     # committed
    append(txn("b", 6, 101))                                     # aborted
    append(txn("c", 7, 102))                                     # txn commit, then a later plain commit
    append(plain("c", 8))
    append(rec.build_control_batch("COMMIT", 100, 0, 0))
    append(rec.build_control_batch("ABORT", 101, 0, 0))
    append(rec.build_control_batch("COMMIT", 102, 0, 0))
    append(txn("d", 9, 103))                                     # still open
    got = [(R.parse_key(k).group, R.parse_offset_value(v).offset) for _o, k, v in glog.read(0)]
    assert got == [("a", 1), ("c", 8), ("a", 5)]
    open_ = glog.take_open_transactions(0)
    assert list(open_) == [103]

    async def load():
        from broker.group import GroupCoordinator, ManualTimers
        coord = GroupCoordinator(BrokerConfig({"offsets.topic.num.partitions": "1"}), glog, lambda p: None,
                                 timers=ManualTimers())
        await coord.start()
        coord.on_become_leader(0)
        fetch = {g: coord.fetch_offsets(g, [TP], require_stable=True)[1][0] for g in "abcd"}
        assert fetch["a"][1].offset == 5 and fetch["b"][1] is None and fetch["c"][1].offset == 8
        assert fetch["d"][2] == E.UNSTABLE_OFFSET_COMMIT
        coord.complete_txn(103, [0], True)
        assert coord.fetch_offsets("d", [TP])[1][0][1].offset == 9
    asyncio.run(load())
    lg.close()

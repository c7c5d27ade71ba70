"""TransactionCoordinator under transaction version 2 (KIP-890 part 2, EndTxn v5), on in-memory
fakes: the epoch bump of every completion and the answer's producer id and epoch, retries one
epoch behind, aborts with no partition added, the epoch overflow onto a new producer id (kept
across a reload), fences and timeouts under the finalized level, and version 1 records."""
from __future__ import annotations

import asyncio

from broker.txn import records as TR
from broker.txn.metadata import MAX_EPOCH, S
from protocol.errors import ErrorCode as E
from tests.txn.support import FakeTxnLog, make_coordinator, run

TP = ("t", 0)
TP1 = ("t", 1)
NONE = (-1, -1)


async def started(log=None, level=0, **kw):
    coord, log, markers, clock = make_coordinator(log=log, **kw)
    coord.transaction_version = lambda: level
    await coord.start(background=False)
    return coord, log, markers, clock


def values(log, coord, tid):
    return [TR.parse_value(v) for _o, k, v in log.partitions[coord.partition_for(tid)] if TR.parse_key(k) == tid]


async def ongoing(coord, tid="a", parts=(TP,)):
    _, pid, epoch = await coord.init_producer_id(tid, 60000)
    assert await coord.add_partitions(tid, pid, epoch, list(parts), 2) == E.NONE
    return pid, epoch


@run
async def test_each_end_bumps_the_epoch_and_markers_carry_it():
    coord, log, markers, _ = await started(level=2)
    pid, epoch = await ongoing(coord)
    assert await coord.end_transaction("a", pid, epoch, True, tv2=True) == (E.NONE, pid, epoch + 1)
    await coord.idle()
    assert markers.sent == [(pid, epoch + 1, 0, True, frozenset({TP}))]
    assert markers.versions == [2]
    prep, done = values(log, coord, "a")[-2:]
    assert (prep.state, prep.producer_epoch, prep.client_transaction_version) == (S.PREPARE_COMMIT, epoch + 1, 2)
    assert (done.state, done.producer_epoch) == (S.COMPLETE_COMMIT, epoch + 1)
    # the next transaction runs at the bumped epoch; the old epoch is fenced
    assert await coord.add_partitions("a", pid, epoch, [TP], 2) == E.PRODUCER_FENCED
    assert await coord.add_partitions("a", pid, epoch + 1, [TP1], 2) == E.NONE
    assert await coord.end_transaction("a", pid, epoch + 1, False, tv2=True) == (E.NONE, pid, epoch + 2)
    await coord.idle()
    assert markers.sent[-1] == (pid, epoch + 2, 0, False, frozenset({TP1}))


@run
async def test_retries_one_epoch_behind():
    coord, _, markers, _ = await started()
    pid, epoch = await ongoing(coord)
    markers.gate = asyncio.Event()          # markers held: the transaction stays in PrepareCommit
    assert await coord.end_transaction("a", pid, epoch, True, tv2=True) == (E.NONE, pid, epoch + 1)
    await asyncio.sleep(0)
    assert await coord.end_transaction("a", pid, epoch, True, tv2=True) == (E.CONCURRENT_TRANSACTIONS, *NONE)
    markers.gate.set()
    await coord.idle()
    # CompleteCommit: the retry of the commit is answered with the current id and epoch
    assert await coord.end_transaction("a", pid, epoch, True, tv2=True) == (E.NONE, pid, epoch + 1)
    assert await coord.end_transaction("a", pid, epoch, False, tv2=True) == (E.INVALID_TXN_STATE, *NONE)
    # the same epoch asks for the next transaction: a commit with nothing in it is refused ...
    assert await coord.end_transaction("a", pid, epoch + 1, True, tv2=True) == (E.INVALID_TXN_STATE, *NONE)
    # ... older or newer epochs are fenced, another producer id is unknown
    assert await coord.end_transaction("a", pid, epoch - 1, True, tv2=True) == (E.PRODUCER_FENCED, *NONE)
    assert await coord.end_transaction("a", pid, epoch + 2, True, tv2=True) == (E.PRODUCER_FENCED, *NONE)
    assert await coord.end_transaction("a", pid + 1, epoch + 1, True, tv2=True) == (
        E.INVALID_PRODUCER_ID_MAPPING, *NONE)


@run
async def test_abort_with_no_partition_added_bumps_too():
    coord, log, markers, clock = await started()
    _, pid, epoch = await coord.init_producer_id("a", 60000)
    assert await coord.end_transaction("a", pid, epoch, True, tv2=True) == (E.INVALID_TXN_STATE, *NONE)  # Empty
    clock.now += 5
    assert await coord.end_transaction("a", pid, epoch, False, tv2=True) == (E.NONE, pid, epoch + 1)
    await coord.idle()
    assert markers.sent == []                       # nothing to mark
    prep, done = values(log, coord, "a")[-2:]
    assert (prep.state, prep.start_ms, done.state) == (S.PREPARE_ABORT, clock.now, S.COMPLETE_ABORT)
    # a retry of that abort is fine; an abort at the current epoch bumps again
    assert await coord.end_transaction("a", pid, epoch, False, tv2=True) == (E.NONE, pid, epoch + 1)
    assert await coord.end_transaction("a", pid, epoch + 1, False, tv2=True) == (E.NONE, pid, epoch + 2)


@run
async def test_epoch_overflow_moves_to_a_new_producer_id():
    log = FakeTxnLog()
    coord, _, markers, _ = await started(log=log, level=2)
    pid, _ = await ongoing(coord)
    meta = coord.partitions[coord.partition_for("a")].txns["a"]
    meta.producer_epoch = MAX_EPOCH - 1
    markers.gate = asyncio.Event()
    err, new_pid, new_epoch = await coord.end_transaction("a", pid, MAX_EPOCH - 1, True, tv2=True)
    assert (err, new_epoch) == (E.NONE, 0) and new_pid != pid
    await asyncio.sleep(0)
    prep = values(log, coord, "a")[-1]
    assert (prep.producer_id, prep.producer_epoch, prep.next_producer_id) == (pid, MAX_EPOCH, new_pid)
    # the new id is not usable before the markers are out: retriable, not an unknown producer
    assert await coord.add_partitions("a", new_pid, 0, [TP], 2) == E.CONCURRENT_TRANSACTIONS
    # the coordinator moves (markers still out): the new one completes onto the new id
    await coord.stop()
    coord2, _, markers2, _ = await started(log=log, level=2)
    await coord2.idle()
    assert markers2.sent == [(pid, MAX_EPOCH, 0, True, frozenset({TP}))]
    done = values(log, coord2, "a")[-1]
    assert (done.state, done.producer_id, done.producer_epoch, done.previous_producer_id) == (
        S.COMPLETE_COMMIT, new_pid, 0, pid)
    # a retry with the old id at the last epoch is recognised; the new id starts the next one
    assert await coord2.end_transaction("a", pid, MAX_EPOCH - 1, True, tv2=True) == (E.NONE, new_pid, 0)
    assert await coord2.add_partitions("a", new_pid, 0, [TP1], 2) == E.NONE


@run
async def test_fence_and_timeout_under_the_finalized_level():
    coord, log, markers, clock = await started(level=2)
    pid, epoch = await ongoing(coord)
    err, *_ = await coord.init_producer_id("a", 60000)
    assert err == E.CONCURRENT_TRANSACTIONS
    await coord.idle()
    assert markers.sent == [(pid, epoch + 1, 0, False, frozenset({TP}))]
    prep = values(log, coord, "a")[-2]
    assert (prep.state, prep.producer_epoch, prep.client_transaction_version) == (S.PREPARE_ABORT, epoch + 1, 2)
    assert await coord.init_producer_id("a", 60000) == (E.NONE, pid, epoch + 2)
    # a timed-out transaction is aborted with one bump as well
    assert await coord.add_partitions("a", pid, epoch + 2, [TP1], 2) == E.NONE
    assert coord.abort_timed_out(clock.now + 60001) == 1
    await coord.idle()
    assert markers.sent[-1] == (pid, epoch + 3, 0, False, frozenset({TP1}))
    assert await coord.end_transaction("a", pid, epoch + 2, True, tv2=True) == (E.INVALID_TXN_STATE, *NONE)


@run
async def test_version_1_records_from_level_1():
    coord, log, _, _ = await started(level=0)
    await ongoing(coord, "a")
    raw = [v for _o, k, v in log.partitions[coord.partition_for("a")]]
    assert {bytes(v[:2]) for v in raw} == {b"\x00\x00"}
    coord.transaction_version = lambda: 1
    await ongoing(coord, "b")
    raw = [v for _o, k, v in log.partitions[coord.partition_for("b")] if TR.parse_key(k) == "b"]
    assert {bytes(v[:2]) for v in raw} == {b"\x00\x01"}
    assert values(log, coord, "b")[-1].client_transaction_version == 2


@run
async def test_version_1_end_txn_is_unchanged():
    coord, _, markers, _ = await started(level=2)
    pid, epoch = await ongoing(coord)
    assert await coord.end_transaction("a", pid, epoch, True) == (E.NONE, *NONE)
    await coord.idle()
    assert markers.sent == [(pid, epoch, 0, True, frozenset({TP}))]

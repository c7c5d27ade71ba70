"""TransactionCoordinator on in-memory fakes: producer ids and epochs, fencing, the state machine,
markers and completion, timeouts, expiry, loading."""
from __future__ import annotations

import asyncio

import pytest

from broker.txn import records as TR
from broker.txn.metadata import S
from protocol.errors import ErrorCode as E, NotLeaderOrFollowerError
from tests.txn.support import FakeTxnLog, make_coordinator, run

TP = ("t", 0)
TP1 = ("t", 1)


async def started(**kw):
    coord, log, markers, clock = make_coordinator(**kw)
    await coord.start(background=False)
    return coord, log, markers, clock


def last_value(log, coord, tid):
    part = log.partitions[coord.partition_for(tid)]
    for _o, k, v in reversed(part):
        if TR.parse_key(k) == tid:
            return TR.parse_value(v)
    return None


@run
async def test_init_new_id_and_bump():
    coord, log, *_ = await started()
    err, pid, epoch = await coord.init_producer_id("a", 60000)
    assert (err, epoch) == (E.NONE, 0) and pid == 1000
    v = last_value(log, coord, "a")
    assert (v.producer_id, v.producer_epoch, v.state, v.partitions, v.timeout_ms) == (1000, 0, S.EMPTY, None, 60000)
    err, pid2, epoch2 = await coord.init_producer_id("a", 60000)
    assert (err, pid2, epoch2) == (E.NONE, 1000, 1)


@run
async def test_init_validation():
    coord, *_ = await started()
    assert (await coord.init_producer_id("", 1000))[0] == E.INVALID_REQUEST
    assert (await coord.init_producer_id("a", 0))[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert (await coord.init_producer_id("a", 900001))[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert (await coord.init_producer_id("a", 1000, 5, -1))[0] == E.INVALID_REQUEST


@run
async def test_init_with_expected_epoch_kip360():
    coord, *_ = await started()
    _, pid, _ = await coord.init_producer_id("a", 1000)
    # the producer recovers with its current epoch: bumped
    assert await coord.init_producer_id("a", 1000, pid, 0) == (E.NONE, pid, 1)
    # a retry of that call (response lost) gets the same epoch again
    assert await coord.init_producer_id("a", 1000, pid, 0) == (E.NONE, pid, 1)
    # an unknown producer id is fenced
    assert (await coord.init_producer_id("a", 1000, pid + 77, 0))[0] == E.PRODUCER_FENCED
    # a stale epoch after a new producer initialised is fenced
    assert await coord.init_producer_id("a", 1000) == (E.NONE, pid, 2)
    assert (await coord.init_producer_id("a", 1000, pid, 0))[0] == E.PRODUCER_FENCED


@run
async def test_epoch_exhaustion_rotates_producer_id():
    coord, *_ = await started()
    _, pid, _ = await coord.init_producer_id("a", 1000)
    st = coord.partitions[coord.partition_for("a")]
    st.txns["a"].producer_epoch = 32766
    err, pid2, epoch2 = await coord.init_producer_id("a", 1000)
    assert err == E.NONE and pid2 != pid and epoch2 == 0


@run
async def test_commit_flow_writes_markers_then_complete():
    coord, log, markers, _ = await started()
    _, pid, epoch = await coord.init_producer_id("a", 60000)
    assert await coord.add_partitions("a", pid, epoch, [TP, TP1]) == E.NONE
    assert last_value(log, coord, "a").state == S.ONGOING
    assert last_value(log, coord, "a").partitions == {"t": [0, 1]}
    assert await coord.add_partitions("a", pid, epoch, [TP]) == E.NONE      # already in: no write
    n = len(log.partitions[coord.partition_for("a")])
    assert await coord.add_partitions("a", pid, epoch, [TP]) == E.NONE
    assert len(log.partitions[coord.partition_for("a")]) == n
    assert await coord.end_txn("a", pid, epoch, True) == E.NONE
    await coord.idle()
    assert markers.sent == [(pid, epoch, 0, True, frozenset({TP, TP1}))]
    states = [TR.parse_value(v).state for _o, k, v in log.partitions[coord.partition_for("a")]]
    assert states[-2:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    assert last_value(log, coord, "a").partitions == {}
    # a retried commit is fine, an abort now is not
    assert await coord.end_txn("a", pid, epoch, True) == E.NONE
    assert await coord.end_txn("a", pid, epoch, False) == E.INVALID_TXN_STATE


@run
async def test_requests_while_markers_pending_get_concurrent_transactions():
    coord, log, markers, _ = await started()
    _, pid, epoch = await coord.init_producer_id("a", 60000)
    await coord.add_partitions("a", pid, epoch, [TP])
    markers.gate = asyncio.Event()
    assert await coord.end_txn("a", pid, epoch, False) == E.NONE
    await asyncio.sleep(0)
    assert await coord.add_partitions("a", pid, epoch, [TP]) == E.CONCURRENT_TRANSACTIONS
    assert await coord.end_txn("a", pid, epoch, False) == E.CONCURRENT_TRANSACTIONS
    assert await coord.end_txn("a", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    assert (await coord.init_producer_id("a", 60000))[0] == E.CONCURRENT_TRANSACTIONS
    markers.gate.set()
    await coord.idle()
    assert (await coord.init_producer_id("a", 60000))[0] == E.NONE


@run
async def test_end_txn_errors():
    coord, *_ = await started()
    assert await coord.end_txn("nope", 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    _, pid, epoch = await coord.init_producer_id("a", 60000)
    assert await coord.end_txn("a", pid + 1, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert await coord.end_txn("a", pid, epoch + 1, True) == E.PRODUCER_FENCED
    assert await coord.end_txn("a", pid, epoch, True) == E.INVALID_TXN_STATE      # Empty
    assert await coord.add_partitions("a", pid, epoch + 1, [TP]) == E.PRODUCER_FENCED
    assert await coord.add_partitions("b", pid, epoch, [TP]) == E.INVALID_PRODUCER_ID_MAPPING


@run
async def test_fencing_aborts_open_transaction_with_bumped_epoch():
    coord, log, markers, _ = await started()
    _, pid, epoch = await coord.init_producer_id("a", 60000)
    await coord.add_partitions("a", pid, epoch, [TP])
    err, *_ = await coord.init_producer_id("a", 60000)
    assert err == E.CONCURRENT_TRANSACTIONS
    await coord.idle()
    assert markers.sent == [(pid, epoch + 1, 0, False, frozenset({TP}))]
    assert last_value(log, coord, "a").state == S.COMPLETE_ABORT
    assert await coord.init_producer_id("a", 60000) == (E.NONE, pid, epoch + 2)
    # the old producer is fenced everywhere
    assert await coord.add_partitions("a", pid, epoch, [TP]) == E.PRODUCER_FENCED
    assert await coord.end_txn("a", pid, epoch, True) == E.PRODUCER_FENCED
    assert coord.verify_partitions("a", pid, epoch, [TP]) == {TP: E.PRODUCER_FENCED}


@run
async def test_verify_partitions():
    coord, *_ = await started()
    _, pid, epoch = await coord.init_producer_id("a", 60000)
    await coord.add_partitions("a", pid, epoch, [TP])
    assert coord.verify_partitions("a", pid, epoch, [TP, TP1]) == {TP: E.NONE, TP1: E.TRANSACTION_ABORTABLE}
    assert coord.verify_partitions("a", pid + 1, epoch, [TP]) == {TP: E.INVALID_PRODUCER_ID_MAPPING}
    assert coord.verify_partitions("", pid, epoch, [TP]) == {TP: E.INVALID_REQUEST}


@run
async def test_marker_retries_and_deleted_topics():
    coord, log, markers, _ = await started()
    _, pid, epoch = await coord.init_producer_id("a", 60000)
    gone = ("gone", 0)
    await coord.add_partitions("a", pid, epoch, [TP, TP1, gone])
    markers.deleted_topics.add("gone")
    markers.script = [{TP: E.NOT_LEADER_OR_FOLLOWER, gone: E.UNKNOWN_TOPIC_OR_PARTITION},
                      {TP: E.REQUEST_TIMED_OUT}]
    assert await coord.end_txn("a", pid, epoch, True) == E.NONE
    await coord.idle()
    assert [s[4] for s in markers.sent] == [frozenset({TP, TP1, gone}), frozenset({TP}), frozenset({TP})]
    assert last_value(log, coord, "a").state == S.COMPLETE_COMMIT


@run
async def test_coordinator_fenced_stops_sending():
    coord, log, markers, _ = await started()
    _, pid, epoch = await coord.init_producer_id("a", 60000)
    await coord.add_partitions("a", pid, epoch, [TP])
    markers.script = [{TP: E.TRANSACTION_COORDINATOR_FENCED}]
    assert await coord.end_txn("a", pid, epoch, True) == E.NONE
    await coord.idle()
    assert len(markers.sent) == 1
    assert last_value(log, coord, "a").state == S.PREPARE_COMMIT


@run
async def test_failed_log_write_leaves_state_unchanged():
    coord, log, *_ = await started()
    _, pid, epoch = await coord.init_producer_id("a", 60000)
    log.fail_with = NotLeaderOrFollowerError()
    assert await coord.add_partitions("a", pid, epoch, [TP]) == E.NOT_COORDINATOR
    log.fail_with = None
    meta = coord.partitions[coord.partition_for("a")].txns["a"]
    assert meta.state == S.EMPTY and meta.pending is None and not meta.partitions
    assert await coord.add_partitions("a", pid, epoch, [TP]) == E.NONE


@run
async def test_not_coordinator_and_reload_on_new_epoch():
    coord, log, markers, _ = await started()
    p = coord.partition_for("a")
    _, pid, epoch = await coord.init_producer_id("a", 60000)
    await coord.add_partitions("a", pid, epoch, [TP])
    log.epochs[p] = None
    assert await coord.end_txn("a", pid, epoch, True) == E.NOT_COORDINATOR
    assert p not in coord.partitions
    log.epochs[p] = 3                   # leader again, at a new epoch: reloaded from the log
    assert await coord.end_txn("a", pid, epoch, True) == E.NONE
    await coord.idle()
    assert markers.sent[-1][2] == 3     # markers carry the new coordinator epoch


@run
async def test_loading_resumes_prepared_transactions():
    log = FakeTxnLog()
    coord, _, markers, _ = make_coordinator(log=log)
    await coord.start(background=False)
    _, pid, epoch = await coord.init_producer_id("a", 60000)
    await coord.add_partitions("a", pid, epoch, [TP])
    _, pid_b, epoch_b = await coord.init_producer_id("b", 60000)
    await coord.add_partitions("b", pid_b, epoch_b, [TP1])
    markers.gate = asyncio.Event()          # markers never get out: "crash" in PrepareCommit
    assert await coord.end_txn("a", pid, epoch, True) == E.NONE
    await coord.stop()

    coord2, _, markers2, _ = make_coordinator(log=log)
    await coord2.start(background=False)   # loads every led partition
    await coord2.idle()
    assert markers2.sent == [(pid, epoch, 0, True, frozenset({TP}))]
    assert last_value(log, coord2, "a").state == S.COMPLETE_COMMIT
    ok, meta = coord2.describe("b")
    assert ok == E.NONE and meta.state == S.ONGOING and meta.partitions == {TP1}


@run
async def test_timed_out_transactions_are_aborted():
    coord, log, markers, clock = await started()
    _, pid, epoch = await coord.init_producer_id("a", 1000)
    await coord.add_partitions("a", pid, epoch, [TP])
    assert coord.abort_timed_out(clock.now + 1000) == 0       # not yet past the timeout
    assert coord.abort_timed_out(clock.now + 1001) == 1
    await coord.idle()
    assert markers.sent == [(pid, epoch + 1, 0, False, frozenset({TP}))]
    v = last_value(log, coord, "a")
    assert (v.state, v.producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
    assert await coord.end_txn("a", pid, epoch, True) == E.PRODUCER_FENCED
    assert coord.abort_timed_out(clock.now + 10_000) == 0


@run
async def test_idle_ids_expire_with_a_tombstone():
    coord, log, _, clock = await started(transactional_id_expiration_ms=5000)
    _, pid, epoch = await coord.init_producer_id("a", 1000)
    _, pid_b, epoch_b = await coord.init_producer_id("b", 1000)
    await coord.add_partitions("b", pid_b, epoch_b, [TP])      # open: never expires
    assert await coord.expire_ids(clock.now + 4999) == 0
    assert await coord.expire_ids(clock.now + 10_000) == 1
    part = log.partitions[coord.partition_for("a")]
    assert any(TR.parse_key(k) == "a" and v is None for _o, k, v in part)
    assert coord.describe("a")[0] == E.TRANSACTIONAL_ID_NOT_FOUND
    assert coord.describe("b")[0] == E.NONE
    # reloading honours the tombstone
    coord2, *_ = make_coordinator(log=log)
    await coord2.start(background=False)
    assert coord2.describe("a")[0] == E.TRANSACTIONAL_ID_NOT_FOUND
    err, _pid2, epoch2 = await coord2.init_producer_id("a", 1000)
    assert err == E.NONE and epoch2 == 0


@run
async def test_list_transactions_filters():
    coord, _, _, clock = await started()
    _, pa, ea = await coord.init_producer_id("a", 60000)
    _, pb, eb = await coord.init_producer_id("b", 60000)
    await coord.add_partitions("b", pb, eb, [TP])
    err, unknown, metas = coord.list_transactions()
    assert err == E.NONE and unknown == [] and [m.transactional_id for m in metas] == ["a", "b"]
    _, unknown, metas = coord.list_transactions(["Ongoing", "Bogus"])
    assert unknown == ["Bogus"] and [m.transactional_id for m in metas] == ["b"]
    _, _, metas = coord.list_transactions(producer_ids=[pa])
    assert [m.transactional_id for m in metas] == ["a"]
    clock.now += 5000
    _, _, metas = coord.list_transactions(["Ongoing"], duration_ms=10_000)
    assert metas == []
    _, _, metas = coord.list_transactions(["Ongoing"], duration_ms=1000)
    assert [m.transactional_id for m in metas] == ["b"]


@run
async def test_inactive_coordinator():
    coord, *_ = make_coordinator()
    assert (await coord.init_producer_id("a", 1000))[0] == E.COORDINATOR_NOT_AVAILABLE
    assert (await coord.find_coordinator("a"))[0] == E.COORDINATOR_NOT_AVAILABLE
    assert coord.list_transactions()[0] == E.COORDINATOR_NOT_AVAILABLE


def test_metadata_illegal_transitions():
    from broker.txn.metadata import IllegalTransition, TxnMetadata
    m = TxnMetadata("x", 1, 0, 1000, S.EMPTY)
    with pytest.raises(IllegalTransition):
        m.prepare_abort_or_commit(S.PREPARE_COMMIT, 1)
    t = m.prepare_add_partitions({TP}, 5)
    with pytest.raises(IllegalTransition):         # one pending transition at a time
        m.prepare_add_partitions({TP1}, 6)
    m.complete(t)
    assert m.state == S.ONGOING and m.start_ms == 5 and m.pending is None
    with pytest.raises(IllegalTransition):
        m.prepare_dead()


@run
async def test_load_in_progress_for_a_long_partition(monkeypatch):
    """A partition longer than one load slice is read on in the background: its ids get
    COORDINATOR_LOAD_IN_PROGRESS meanwhile (ListTransactions too), then everything works."""
    import broker.txn.coordinator as tc
    monkeypatch.setattr(tc, "LOAD_SLICE_RECORDS", 2)
    log = FakeTxnLog()
    coord, _, _, _ = make_coordinator(log=log)
    await coord.start(background=False)
    for _ in range(5):
        _, pid, epoch = await coord.init_producer_id("a", 60000)
    await coord.stop()

    coord2, _, _, _ = make_coordinator(log=log)
    await coord2.start(background=False)          # loads every led partition; "a"'s in the background
    p = coord2.partition_for("a")
    assert coord2.partitions[p].loading
    assert await coord2.init_producer_id("a", 60000) == (E.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
    assert await coord2.add_partitions("a", pid, epoch, [TP]) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert await coord2.end_txn("a", pid, epoch, True) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert coord2.verify_partitions("a", pid, epoch, [TP]) == {TP: E.COORDINATOR_LOAD_IN_PROGRESS}
    assert coord2.describe("a")[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert coord2.list_transactions()[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    await coord2.idle()
    assert not coord2.partitions[p].loading
    assert coord2.describe("a")[1].producer_epoch == epoch
    assert await coord2.init_producer_id("a", 60000) == (E.NONE, pid, epoch + 1)
    assert coord2.list_transactions()[0] == E.NONE

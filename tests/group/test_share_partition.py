"""The share-partition state machine (broker/share/partition.py) on its own: acquisition,
acknowledgement, locks, delivery limits and the start offset."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from broker.share.partition import (ACCEPT, ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, GAP, REJECT, RELEASE, RENEW,
                                    InvalidRecordState, InvalidRequest, SharePartition)
from tests.group.share_model import ModelSharePartition


def states(sp) -> dict:
    """{offset: (state, delivery count, member, deadline)} of the window."""
    return {o: sp.state_of(o) for o in range(sp.start, sp.end)}


def batches(*ranges, control=()):
    return [(a, b, (a, b) in control) for a, b in ranges]


def test_acquire_hands_out_each_offset_once_until_released():
    sp = SharePartition(0, lock_ms=1000)
    assert sp.acquire("a", batches((0, 4), (5, 9)), 0, 500) == [(0, 9, 1)]
    assert sp.acquire("b", batches((0, 4), (5, 9)), 0, 500) == []
    assert sp.next_fetch_offset() == 10
    sp.acknowledge("a", 0, 4, [RELEASE])
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("b", batches((0, 4), (5, 9)), 0, 500) == [(0, 4, 2)]
    assert sp.acquired_by("a") == 5 and sp.acquired_by("b") == 5


def test_accepted_head_moves_the_start_offset():
    sp = SharePartition(100)
    sp.acquire("a", batches((100, 109)), 0, 500)
    sp.acknowledge("a", 102, 109, [ACCEPT])
    assert sp.start == 100
    sp.acknowledge("a", 100, 101, [ACCEPT, REJECT])
    assert sp.start == sp.end == 110 and not states(sp)


def test_whole_batches_max_records_batch_size_and_in_flight_limit():
    log = batches((0, 2), (3, 5), (6, 8), (9, 11))
    sp = SharePartition(0, max_in_flight=8)
    assert sp.acquire("a", log, 0, 4) == [(0, 5, 1)]                   # whole batches: 6 for 4
    assert sp.acquire("a", log, 0, 100) == [(6, 7, 1)]                 # the window is full at 8
    assert sp.acquire("b", log, 0, 100) == []
    sp.acknowledge("a", 0, 1, [ACCEPT])
    assert sp.acquire("b", log, 0, 100) == [(8, 9, 1)]
    sp = SharePartition(0)
    assert sp.acquire("a", log, 0, 100, batch_size=4) == [(0, 5, 1), (6, 11, 1)]   # cut at a batch edge
    sp = SharePartition(0)
    assert sp.acquire("a", log, 0, 4, record_limit=True) == [(0, 3, 1)]
    assert sp.acquire("b", log, 0, 4, record_limit=True) == [(4, 7, 1)]


def test_locks_run_out_and_delivery_limit_archives():
    sp = SharePartition(0, lock_ms=100, delivery_limit=2)
    sp.acquire("a", batches((0, 1)), 0, 500)
    assert sp.next_deadline() == 100
    assert sp.expire_locks(99) == 0
    assert sp.expire_locks(100) == 2
    assert [v[0] for v in states(sp).values()] == [AVAILABLE, AVAILABLE]
    assert sp.acquire("b", batches((0, 1)), 200, 500) == [(0, 1, 2)]
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("a", 0, 0, [ACCEPT])              # a's lock ran out
    sp.expire_locks(300)                                # second delivery done: archived
    assert sp.start == sp.end == 2


def test_redelivery_is_throttled_as_kafka_4_2():
    """Released again and again (delivery limit 5: throttled from the third delivery), a batch of
    ten comes back whole three times, then in halves, and each record's last attempt alone: one
    bad record spends only its own attempts (the sequence Kafka 4.2's SharePartition gives)."""
    sp = SharePartition(0, delivery_limit=5)
    seen = []
    while True:
        runs = sp.acquire("m", batches((0, 9)), 0, 500)
        if not runs:
            break
        seen.append(runs)
        for a, b, _ in runs:
            sp.acknowledge("m", a, b, [RELEASE])
    assert seen == [[(0, 9, 1)], [(0, 9, 2)], [(0, 9, 3)], [(0, 4, 4)]] + [[(o, o, 5)] for o in range(5)] + \
        [[(5, 9, 4)]] + [[(o, o, 5)] for o in range(5, 10)]
    assert sp.start == sp.end == 10


def test_gaps_and_control_batches_are_archived_not_delivered():
    sp = SharePartition(0)
    runs = sp.acquire("a", batches((0, 1), (2, 2), (5, 6), control=[(2, 2)]), 0, 500)
    assert runs == [(0, 1, 1), (5, 6, 1)]
    assert sp.state_of(2)[0] == ARCHIVED and sp.state_of(3)[0] == ARCHIVED
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("a", 2, 4, [GAP])                 # never acquired, so not the member's to ack
    sp.acknowledge("a", 0, 1, [ACCEPT])
    assert sp.start == 5
    with pytest.raises(InvalidRecordState):              # wholly below the window: gone, as from Kafka's cache
        sp.acknowledge("a", 0, 1, [GAP])


def test_a_late_acknowledgement_below_the_window_did_not_count():
    """A member whose lock ran out acknowledges after another member accepted the record: it
    hears INVALID_RECORD_STATE, not success."""
    sp = SharePartition(0, lock_ms=10)
    assert sp.acquire("a", batches((0, 0)), 0, 10) == [(0, 0, 1)]
    sp.expire_locks(20)
    assert sp.acquire("b", batches((0, 0)), 20, 10) == [(0, 0, 2)]
    sp.acknowledge("b", 0, 0, [ACCEPT], 21)
    with pytest.raises(InvalidRecordState, match="Batch record not found"):
        sp.acknowledge("a", 0, 0, [ACCEPT], 22)
    # while part of the log batch is still in flight, Kafka still caches it: offsets of it below
    # the start offset are skipped
    assert sp.acquire("a", batches((0, 0), (1, 3)), 30, 10) == [(1, 3, 1)]
    sp.acknowledge("a", 1, 2, [ACCEPT], 31)
    assert sp.start == 3
    sp.acknowledge("a", 1, 1, [RELEASE], 32)
    assert sp.state_of(3)[0] == ACQUIRED and sp.start == 3


def test_bad_acknowledgements_change_nothing():
    sp = SharePartition(0)
    sp.acquire("a", batches((0, 3)), 0, 500)
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("b", 0, 0, [ACCEPT])
    with pytest.raises(InvalidRequest):
        sp.acknowledge("a", 2, 5, [ACCEPT])              # 4 and 5 were never handed out
    with pytest.raises(InvalidRequest):
        sp.acknowledge("a", 0, 3, [ACCEPT, ACCEPT])
    with pytest.raises(InvalidRequest):
        sp.acknowledge("a", 3, 2, [ACCEPT])
    with pytest.raises(InvalidRequest):
        sp.acknowledge("a", 0, 0, [9])
    assert all(v[0] == ACQUIRED for v in states(sp).values())
    with pytest.raises(InvalidRequest):
        sp.acknowledge("a", -2, 0, [ACCEPT])
    with pytest.raises(InvalidRecordState):
        sp.acknowledge_all("a", [(0, 1, [ACCEPT]), (1, 2, [ACCEPT])])   # offset 1 twice
    assert all(v[0] == ACQUIRED for v in states(sp).values())
    sp.acknowledge("a", 0, 2, [ACCEPT])
    sp.acknowledge("a", 0, 3, [ACCEPT])                  # 0-2 are done and skipped, 3 is accepted
    assert sp.start == sp.end == 4
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("a", 6, 6, [ACCEPT])              # nothing in flight: no such batch


def test_release_member_and_restore():
    sp = SharePartition(0, delivery_limit=3)
    sp.acquire("a", batches((0, 5)), 0, 500)
    sp.acknowledge("a", 1, 1, [ACCEPT])
    sp.acknowledge("a", 3, 3, [REJECT])
    assert sp.release_member("a") == 4
    state = sp.state_batches()
    assert state == [(0, 0, AVAILABLE, 1), (1, 1, ACKNOWLEDGED, 1), (2, 2, AVAILABLE, 1),
                     (3, 3, ARCHIVED, 1), (4, 5, AVAILABLE, 1)]
    back = SharePartition.restore(sp.start, state, delivery_limit=3)
    assert back.state_batches() == state and back.end == 6
    assert back.acquire("b", batches((0, 5)), 0, 500) == [(0, 0, 2), (2, 2, 2), (4, 5, 2)]


def test_a_restore_never_hands_a_record_out_past_the_delivery_limit():
    """A snapshot written while a record is out on its last attempt (another record's
    acknowledgement writes the whole window) holds it as AVAILABLE with the limit's count: after
    a crash it is archived, as a lock running out on a last attempt archives it."""
    sp = SharePartition(0, delivery_limit=3, lock_ms=10)
    for now in (0, 20, 40):
        got = sp.acquire("a", batches((0, 0), (1, 1)), now, 1)
        assert got == [(0, 0, now // 20 + 1)]
        if now < 40:
            sp.expire_locks(now + 15)
    assert sp.acquire("a", batches((0, 0), (1, 1)), 41, 1) == [(1, 1, 1)]
    sp.acknowledge("a", 1, 1, [ACCEPT], 42)
    state = sp.state_batches()
    assert state == [(0, 0, AVAILABLE, 3), (1, 1, ACKNOWLEDGED, 1)]
    back = SharePartition.restore(sp.start, state, delivery_limit=3)
    assert back.state_of(0) is None and back.start == back.end == 2
    assert back.acquire("b", batches((0, 0), (1, 1)), 50, 10) == []


def test_move_start_drops_what_is_gone():
    sp = SharePartition(0)
    sp.acquire("a", batches((0, 9)), 0, 500)
    sp.move_start(4)
    assert sp.start == 4 and min(states(sp)) == 4
    sp.move_start(20)
    assert sp.start == sp.end == 20 and not states(sp)
    assert sp.acquire("a", batches((18, 25)), 0, 500) == [(20, 25, 1)]


ops = st.lists(st.tuples(st.sampled_from(["acquire", "ack", "expire", "leave"]),
                         st.sampled_from(["m1", "m2", "m3"]),
                         st.integers(0, 40), st.integers(0, 6),
                         st.sampled_from([ACCEPT, RELEASE, REJECT])), max_size=60)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_property_no_offset_is_held_twice_or_accepted_twice(steps):
    """Random members acquiring, acknowledging, leaving and timing out over a 40-record log:
    no offset is ever held by two members, none is accepted twice, the start offset only moves
    forward past done offsets, and delivery counts stay within the limit."""
    log = [(o, o + 1, False) for o in range(0, 40, 2)]
    sp = SharePartition(0, delivery_limit=3, max_in_flight=16, lock_ms=50)
    now = 0
    accepted: set = set()
    held: dict = {}
    for op, m, x, y, t in steps:
        now += 10
        before = sp.start
        if op == "acquire":
            for a, b, c in sp.acquire(m, log, now, y + 1):
                assert 1 <= c <= 3
                for o in range(a, b + 1):
                    assert o not in held, (o, held[o], m)
                    held[o] = m
        elif op == "ack":
            mine = sorted(o for o, h in held.items() if h == m)
            if not mine:
                continue
            o = mine[x % len(mine)]
            sp.acknowledge(m, o, o, [t])
            del held[o]
            if t == ACCEPT:
                assert o not in accepted
                accepted.add(o)
        elif op == "expire":
            sp.expire_locks(now)
            assert not [o for o, v in states(sp).items() if v[0] == ACQUIRED and v[3] <= now]
            live = [v[3] for v in states(sp).values() if v[0] == ACQUIRED]
            assert sp.next_deadline() == (min(live) if live else None)
        else:
            sp.release_member(m)
        now_states = states(sp)
        held = {o: h for o, h in held.items()
                if o in now_states and now_states[o][0] == ACQUIRED and now_states[o][2] == h}
        assert sp.start >= before
        assert sp.start == sp.end or now_states[sp.start][0] not in (ACKNOWLEDGED, ARCHIVED)
        assert all(o < sp.start or now_states[o][0] == ACKNOWLEDGED for o in accepted)


def _apply(sp, op):
    try:
        return "ok", getattr(sp, op[0])(*op[1:])
    except (InvalidRecordState, InvalidRequest) as e:
        return type(e).__name__, None


log_batches = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6), st.booleans()), min_size=1, max_size=12)
steps = st.lists(st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(["m1", "m2"]), st.integers(1, 30), st.integers(0, 5),
              st.booleans()),
    st.tuples(st.just("ack"), st.sampled_from(["m1", "m2"]), st.integers(0, 60), st.integers(0, 8),
              st.lists(st.sampled_from([GAP, ACCEPT, RELEASE, REJECT, RENEW, 7]), min_size=1, max_size=4)),
    st.tuples(st.just("expire"), st.integers(0, 60)),
    st.tuples(st.just("leave"), st.sampled_from(["m1", "m2"])),
    st.tuples(st.just("move"), st.integers(0, 70)),
    st.tuples(st.just("restore")),
), min_size=8, max_size=50)


@settings(max_examples=500, deadline=None)
@given(log_batches, steps)
def test_property_the_runs_answer_as_the_per_offset_model(layout, ops):
    """broker/share/partition.py keeps runs; tests/group/share_model.py one object per offset.
    Driven alike over a log of record and control batches with holes between them, they return
    the same runs, the same errors, and the same window, deadlines and persisted state."""
    log, at = [], 0
    for gap, size, control in layout:
        at += gap
        log.append((at, at + size - 1, control))
        at += size
    kw = dict(delivery_limit=3, max_in_flight=16, lock_ms=40)
    sp, model = SharePartition(0, **kw), ModelSharePartition(0, **kw)
    now = 0
    for op in ops:
        now += 10
        if op[0] == "acquire":
            _, m, most, bsize, limit = op
            calls = [("acquire", m, log, now, most, bsize, limit)]
        elif op[0] == "ack":
            _, m, first, length, types = op
            mine = sorted(o for o, r in model.offsets.items() if r.state == ACQUIRED and r.member == m)
            window = sorted(model.offsets)
            if mine and first < 30:         # where the member holds records, in the window, or anywhere
                first = mine[first % len(mine)]
                length = length % 4
            elif window and first < 45:
                first = window[first % len(window)]
                length = length % 4
            last = first + length
            if len(types) > 1:
                types = (types * (length + 1))[:length + 1]
            calls = [("acknowledge_all", m, [(first, last, list(types))], now)]
        elif op[0] == "expire":
            calls = [("expire_locks", now + op[1])]
        elif op[0] == "leave":
            calls = [("release_member", op[1])]
        elif op[0] == "move":
            calls = [("move_start", op[1])]
        else:
            batches = sp.state_batches()
            assert batches == model.state_batches()
            sp = SharePartition.restore(sp.start, batches, **kw)
            model = ModelSharePartition.restore(model.start, batches, **kw)
            calls = []
        for call in calls:
            got = _apply(sp, call)
            assert got == _apply(model, call), call
            if call[0] == "acquire":        # never past the delivery limit, restores included
                assert all(c <= kw["delivery_limit"] for _, _, c in got[1]), got
        assert (sp.start, sp.end) == (model.start, model.end)
        assert sp.state_batches() == model.state_batches()
        assert sp.next_fetch_offset() == model.next_fetch_offset()
        assert sp.next_deadline() == model.next_deadline()
        for m in ("m1", "m2"):
            assert sp.acquired_by(m) == model.acquired_by(m)
        assert states(sp) == {o: (r.state, r.count, r.member, r.deadline) for o, r in model.offsets.items()}

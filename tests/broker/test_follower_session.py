"""The follower's side of a fetch session (broker/replication.py ``_FollowerSession``): which
id and epoch the next fetch carries after each kind of answer."""
from __future__ import annotations

from types import SimpleNamespace

from broker.replication import _FollowerSession


def answer(error=0, session_id=0):
    return SimpleNamespace(error_code=error, session_id=session_id)


def test_a_full_fetch_answered_with_an_id_starts_the_session():
    s = _FollowerSession()
    assert (s.id, s.epoch) == (0, 0)
    sent = {("t", 0): (5, 0, 1), ("t", 1): (7, 0, 1)}
    assert s.answered(answer(session_id=42), sent)
    assert (s.id, s.epoch, s.parts) == (42, 1, sent)
    later = {("t", 0): (9, 0, 1)}
    assert s.answered(answer(session_id=42), later)
    assert (s.id, s.epoch, s.parts) == (42, 2, later)


def test_no_slot_at_the_leader_keeps_fetching_full():
    s = _FollowerSession()
    assert s.answered(answer(session_id=0), {("t", 0): (1, 0, 0)})
    assert (s.id, s.epoch, s.parts) == (0, 0, {})


def test_session_errors_start_over():
    s = _FollowerSession()
    s.answered(answer(session_id=42), {("t", 0): (1, 0, 0)})
    # a stale epoch: the next fetch is full and names 42 so the leader closes it
    assert not s.answered(answer(error=71), {})
    assert (s.id, s.epoch, s.parts) == (42, 0, {})
    s.answered(answer(session_id=43), {("t", 0): (1, 0, 0)})
    # the leader no longer knows it: a full fetch without an id
    assert not s.answered(answer(error=70), {})
    assert (s.id, s.epoch) == (0, 0)


def test_the_leader_answering_sessionless_ends_the_session():
    s = _FollowerSession()
    s.answered(answer(session_id=42), {("t", 0): (1, 0, 0)})
    assert s.answered(answer(session_id=0), {("t", 1): (1, 0, 0)})
    assert (s.id, s.epoch, s.parts) == (0, 0, {})


def test_the_epoch_wraps_to_one():
    s = _FollowerSession()
    s.answered(answer(session_id=42), {})
    s.epoch = 0x7FFFFFFF
    s.answered(answer(session_id=42), {})
    assert s.epoch == 1

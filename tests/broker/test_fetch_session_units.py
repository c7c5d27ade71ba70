"""The fetch session cache's slots and eviction (broker/fetch_session.py), with a fixed clock:
which session a new one may push out is a matter of ages of 120 s, too slow for a process."""
from __future__ import annotations

from collections import OrderedDict

from broker.fetch_session import (EVICTION_MS, FINAL_EPOCH, INVALID_SESSION_ID, FetchSessionCache,
                                  next_epoch)


def parts(n: int) -> OrderedDict:
    return OrderedDict(((("t", p), object()) for p in range(n)))


def test_next_epoch_wraps_to_one_and_final_stays_final():
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(0x7FFFFFFF) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_a_full_cache_refuses_while_every_session_is_young():
    cache = FetchSessionCache(max_entries=2)
    a = cache.maybe_create(0, False, parts(5), False)
    b = cache.maybe_create(10, False, parts(1), False)
    assert INVALID_SESSION_ID not in (a, b) and a != b
    assert cache.maybe_create(20, False, parts(100), False) == INVALID_SESSION_ID
    assert cache.num_sessions == 2 and cache.num_partitions == 6


def test_a_session_unused_for_the_eviction_time_gives_way_to_any_new_one():
    cache = FetchSessionCache(max_entries=2)
    a = cache.maybe_create(0, False, parts(5), False)
    b = cache.maybe_create(0, False, parts(5), False)
    cache.touch(cache.get(a), EVICTION_MS)          # a is used, b is not
    c = cache.maybe_create(EVICTION_MS + 1, False, parts(1), False)
    assert c != INVALID_SESSION_ID
    assert cache.get(b) is None and cache.get(a) is not None and cache.evictions == 1


def test_an_old_but_busy_session_gives_way_only_to_a_bigger_one():
    cache = FetchSessionCache(max_entries=1)
    a = cache.maybe_create(0, False, parts(5), False)
    # used all along, but created over 120 s ago: it may now be evicted by size
    cache.touch(cache.get(a), EVICTION_MS + 5)
    now = EVICTION_MS + 10
    assert cache.maybe_create(now, False, parts(4), False) == INVALID_SESSION_ID
    b = cache.maybe_create(now, False, parts(6), False)
    assert b != INVALID_SESSION_ID and cache.get(a) is None


def test_a_follower_may_evict_a_young_consumer_session_but_not_a_young_follower_session():
    cache = FetchSessionCache(max_entries=1)
    consumer = cache.maybe_create(0, False, parts(50), False)
    # a consumer cannot push out another young consumer session ...
    assert cache.maybe_create(1, False, parts(500), False) == INVALID_SESSION_ID
    # ... a follower (privileged) can, whatever the sizes
    follower = cache.maybe_create(2, True, parts(1), False)
    assert follower != INVALID_SESSION_ID and cache.get(consumer) is None
    # and a young follower session is safe from both
    assert cache.maybe_create(3, True, parts(900), False) == INVALID_SESSION_ID
    assert cache.maybe_create(4, False, parts(900), False) == INVALID_SESSION_ID


def test_zero_slots_means_no_sessions():
    cache = FetchSessionCache(max_entries=0)
    assert cache.maybe_create(0, True, parts(3), False) == INVALID_SESSION_ID

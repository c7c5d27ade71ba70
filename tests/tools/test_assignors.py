"""The tools' client-side classic assignors (tools/kclient.py), by their properties: every
subscribed partition goes to exactly one member subscribed to its topic; round robin deals in
member order; the sticky ones keep what members owned as far as balance allows; the
cooperative one never hands a partition straight from one member to another."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tools.kclient import (assignor_names, decode_subscription_full, encode_subscription,
                           plan_assignment, roundrobin_assign, sticky_assign)

TOPICS = ["a", "b", "c"]


def flat(assignment):
    return {(m, t, p) for m, tps in assignment.items() for t, ps in tps.items() for p in ps}


def check_valid(assignment, subscriptions, partitions):
    owners = {}
    for m, t, p in flat(assignment):
        assert t in subscriptions[m]
        assert (t, p) not in owners, f"{t}-{p} given twice"
        owners[(t, p)] = m
    wanted = {(t, p) for ts in subscriptions.values() for t in ts for p in range(partitions[t])}
    return owners, wanted


def test_roundrobin_deals_in_member_order():
    subs = {"m2": ["a", "b"], "m1": ["a", "b"]}
    out = roundrobin_assign(subs, {"a": 3, "b": 2})
    assert out == {"m1": {"a": [0, 2], "b": [1]}, "m2": {"a": [1], "b": [0]}}
    # a member not subscribed to a topic is skipped, not given a hole
    out = roundrobin_assign({"m1": ["a"], "m2": ["a", "b"]}, {"a": 2, "b": 2})
    assert out == {"m1": {"a": [0]}, "m2": {"a": [1], "b": [0, 1]}}


members_st = st.dictionaries(
    st.sampled_from(["m1", "m2", "m3", "m4"]),
    st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True),
    min_size=1, max_size=4)
partitions_st = st.fixed_dictionaries({t: st.integers(0, 7) for t in TOPICS})


@settings(max_examples=200, deadline=None)
@given(members_st, partitions_st, st.sampled_from(["range", "roundrobin"]))
def test_range_and_roundrobin_cover_everything(subs, partitions, protocol):
    metadata = {m: encode_subscription(ts) for m, ts in subs.items()}
    out = plan_assignment(protocol, metadata, partitions)
    owners, wanted = check_valid(out, subs, partitions)
    assert set(owners) == wanted


@settings(max_examples=200, deadline=None)
@given(members_st, partitions_st, st.data())
def test_sticky_keeps_owned_and_balances(subs, partitions, data):
    # a previous assignment: some valid partitions owned by some subscribed members
    owned = {m: {} for m in subs}
    for t in TOPICS:
        for p in range(partitions[t]):
            holders = [m for m, ts in subs.items() if t in ts]
            if holders and data.draw(st.booleans()):
                m = data.draw(st.sampled_from(holders))
                owned[m].setdefault(t, []).append(p)
    members = {m: (ts, owned[m], 3) for m, ts in subs.items()}
    out = sticky_assign(members, partitions)
    owners, wanted = check_valid(out, subs, partitions)
    assert set(owners) == wanted
    if len({tuple(sorted(ts)) for ts in subs.values()}) == 1:
        counts = [len([1 for x in flat(out) if x[0] == m]) for m in subs]
        assert max(counts) - min(counts) <= 1
        # stickiness: a member keeps as many of its partitions as its share allows
        share = max(counts)
        for m in subs:
            kept = {(t, p) for t, ps in owned[m].items() for p in ps} & \
                {(t, p) for t, ps in out[m].items() for p in ps}
            had = sum(len(ps) for ps in owned[m].values())
            assert len(kept) >= min(had, share - 1)
    coop = sticky_assign(members, partitions, cooperative=True)
    check_valid(coop, subs, partitions)
    prior = {(t, p): m for m, tps in owned.items() for t, ps in tps.items() for p in ps}
    for m, t, p in flat(coop):
        assert prior.get((t, p), m) == m, f"{t}-{p} moved from {prior[(t, p)]} to {m} in one round"
    # what the cooperative round holds back is exactly what moves in the eager plan
    assert flat(coop) == {x for x in flat(out) if prior.get((x[1], x[2]), x[0]) == x[0]}


def test_claims_of_an_older_generation_lose():
    members = {"m1": (["a"], {"a": [0, 1]}, 5), "m2": (["a"], {"a": [0, 1]}, 4)}
    # m1's claim stands; one partition must move to m2 for balance, so this cooperative round
    # takes it from m1 and gives it to nobody yet
    out = sticky_assign(members, {"a": 2}, cooperative=True)
    assert out == {"m1": {"a": [1]}, "m2": {}}
    assert sticky_assign(members, {"a": 2}) == {"m1": {"a": [1]}, "m2": {"a": [0]}}


def test_subscription_round_trip_and_java_layout():
    data = encode_subscription(["t1", "t2"], None, {"t1": [2, 0]}, 7)
    # version 2: topics, null user data, owned partitions (sorted), generation
    assert data == (b"\x00\x02" b"\x00\x00\x00\x02" b"\x00\x02t1" b"\x00\x02t2" b"\xff\xff\xff\xff"
                    b"\x00\x00\x00\x01" b"\x00\x02t1" b"\x00\x00\x00\x02" b"\x00\x00\x00\x00"
                    b"\x00\x00\x00\x02" b"\x00\x00\x00\x07")
    assert decode_subscription_full(data) == (["t1", "t2"], {"t1": [0, 2]}, 7)
    assert decode_subscription_full(encode_subscription(["x"], b"ud")) == (["x"], {}, -1)


def test_assignor_names():
    assert assignor_names("org.apache.kafka.clients.consumer.RangeAssignor, "
                          "org.apache.kafka.clients.consumer.CooperativeStickyAssignor") == \
        ["range", "cooperative-sticky"]
    assert assignor_names("roundrobin,sticky") == ["roundrobin", "sticky"]
    try:
        assignor_names("com.example.Mine")
    except ValueError as e:
        assert "Class com.example.Mine cannot be found" in str(e)
    else:
        raise AssertionError("an unknown assignor was accepted")

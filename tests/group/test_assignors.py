"""Server-side assignors (uniform, range): every subscribed partition goes to exactly one
subscribed member, balanced, and the uniform one moves nothing it does not have to."""
from hypothesis import given, settings, strategies as st

from broker.group.assignors import ASSIGNORS, assignor_name, range_, uniform


def flat(assignment):
    return [(m, t, p) for m, parts in assignment.items() for t, ps in parts.items() for p in ps]


@st.composite
def groups(draw, homogeneous=False):
    topics = {f"t{i}": draw(st.integers(0, 8)) for i in range(draw(st.integers(1, 4)))}
    names = sorted(topics)
    members = [f"m{i}" for i in range(draw(st.integers(1, 6)))]
    if homogeneous:
        subs = set(draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
        return {m: set(subs) for m in members}, topics
    return {m: set(draw(st.lists(st.sampled_from(names), unique=True))) for m in members}, topics


def check_complete(subs, topics, out):
    assert set(out) == set(subs)
    seen = {}
    for m, t, p in flat(out):
        assert t in subs[m], "a member got a topic it does not subscribe to"
        assert 0 <= p < topics[t]
        assert (t, p) not in seen, "a partition given twice"
        seen[(t, p)] = m
    wanted = {(t, p) for m in subs for t in subs[m] for p in range(topics[t])}
    assert set(seen) == wanted


@settings(max_examples=200, deadline=None)
@given(groups())
def test_every_assignor_is_complete(g):
    subs, topics = g
    for fn in ASSIGNORS.values():
        check_complete(subs, topics, fn(subs, topics, {}))


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_is_balanced_and_sticky(g):
    subs, topics = g
    out = uniform(subs, topics, {})
    counts = [sum(len(ps) for ps in parts.values()) for parts in out.values()]
    assert max(counts) - min(counts) <= 1
    # the same group again: nothing moves
    assert uniform(subs, topics, out) == out
    # one member leaves: only its partitions move
    if len(subs) > 1:
        gone = sorted(subs)[0]
        rest = {m: s for m, s in subs.items() if m != gone}
        again = uniform(rest, topics, out)
        check_complete(rest, topics, again)
        counts = [sum(len(ps) for ps in parts.values()) for parts in again.values()]
        assert max(counts) - min(counts) <= 1
        # sticky: every remaining member keeps its old partitions up to its new fair share
        total = sum(topics[t] for t in next(iter(subs.values())))
        share = total // len(rest)
        for m in rest:
            before = {(t, p) for m2, t, p in flat(out) if m2 == m}
            after = {(t, p) for m2, t, p in flat(again) if m2 == m}
            assert len(before & after) >= min(len(before), share)


@settings(max_examples=200, deadline=None)
@given(groups())
def test_uniform_balances_members_that_could_swap(g):
    subs, topics = g
    out = uniform(subs, topics, {})
    count = {m: sum(len(ps) for ps in parts.values()) for m, parts in out.items()}
    for m, t, p in flat(out):
        for other in subs:
            if t in subs[other]:
                assert count[m] <= count[other] + 1


def test_range_gives_contiguous_ranges():
    subs = {"a": {"x"}, "b": {"x"}, "c": {"x"}}
    assert range_(subs, {"x": 7}, {}) == {"a": {"x": {0, 1, 2}}, "b": {"x": {3, 4}}, "c": {"x": {5, 6}}}


def test_names_and_class_names():
    assert assignor_name("uniform") == "uniform"
    assert assignor_name("org.apache.kafka.coordinator.group.assignor.RangeAssignor") == "range"
    assert assignor_name("cooperative-sticky") is None

"""Streams groups (KIP-1071): configuring a topology against the topics, and the task assignor."""
from hypothesis import given, settings, strategies as st

from broker.group import streams_topology as ST
from broker.group.streams_topology import Subtopology, TopicInfo, Topology


def _counts(**topics):
    return lambda name: topics.get(name.replace("-", "_"))


# word count: source "lines" -> repartition "app-words-repartition" -> a store with a changelog
WORDCOUNT = Topology(0, (
    Subtopology("0", source_topics=("lines",), repartition_sink_topics=("app-words-repartition",)),
    Subtopology("1", repartition_source_topics=(TopicInfo("app-words-repartition"),),
                state_changelog_topics=(TopicInfo("app-counts-changelog", configs=(("cleanup.policy", "compact"),)),)),
))


def test_missing_source_topics_are_reported_and_not_ready():
    c = ST.configure(WORDCOUNT, _counts())
    assert not c.ready
    assert c.status == (ST.MISSING_SOURCE_TOPICS, "Source topics lines are missing.")
    assert c.tasks == {} and c.to_create == {}


def test_internal_topics_get_the_source_partition_count_and_are_to_be_created():
    c = ST.configure(WORDCOUNT, _counts(lines=4))
    assert c.status == (ST.MISSING_INTERNAL_TOPICS,
                        "Internal topics are missing: app-counts-changelog, app-words-repartition")
    assert {n: t.partitions for n, t in c.to_create.items()} == {"app-words-repartition": 4,
                                                                 "app-counts-changelog": 4}
    assert c.to_create["app-counts-changelog"].configs == (("cleanup.policy", "compact"),)
    assert c.tasks == {"0": 4, "1": 4}


def test_ready_once_the_internal_topics_exist():
    c = ST.configure(WORDCOUNT, _counts(lines=4, app_words_repartition=4, app_counts_changelog=4))
    assert c.ready and c.to_create == {}
    assert c.tasks == {"0": 4, "1": 4}
    assert c.internal["app-counts-changelog"].partitions == 4


def test_an_internal_topic_with_another_partition_count_is_incorrectly_partitioned():
    # the changelog is not there yet: the store's subtopology has the repartition topic's 3 tasks
    c = ST.configure(WORDCOUNT, _counts(lines=4, app_words_repartition=3))
    assert c.status == (ST.INCORRECTLY_PARTITIONED_TOPICS, "Existing topic app-words-repartition has different "
                                                           "number of partitions: expected 4, found 3")


def test_a_fixed_repartition_count_wins():
    topo = Topology(1, (
        Subtopology("0", source_topics=("in",), repartition_sink_topics=("r",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("r", partitions=2),)),
    ))
    c = ST.configure(topo, _counts(**{"in": 6}))
    assert c.to_create["r"].partitions == 2 and c.tasks == {"0": 6, "1": 2}


def test_a_repartition_source_nobody_writes_is_an_invalid_topology():
    topo = Topology(0, (Subtopology("0", repartition_source_topics=(TopicInfo("orphan"),)),))
    try:
        ST.configure(topo, _counts())
    except ST.InvalidTopology as e:
        assert "never used as a sink topic" in str(e)
    else:
        raise AssertionError("expected InvalidTopology")


def test_copartitioned_sources_must_match():
    topo = Topology(0, (Subtopology("0", source_topics=("a", "b"), copartition_groups=(((0, 1), (), ()),)),))
    assert ST.configure(topo, _counts(a=3, b=3)).ready
    c = ST.configure(topo, _counts(a=3, b=4))
    assert c.status == (ST.INCORRECTLY_PARTITIONED_TOPICS,
                        "Following topics do not have the same number of partitions: [a=3, b=4]")


def test_copartitioned_repartition_topic_takes_the_external_count():
    # a join of "a" (3 partitions) with a repartitioned "b" (5): the repartition topic gets 3
    topo = Topology(0, (
        Subtopology("0", source_topics=("b",), repartition_sink_topics=("rb",)),
        Subtopology("1", source_topics=("a",), repartition_source_topics=(TopicInfo("rb"),),
                    copartition_groups=(((0,), (), (0,)),)),
    ))
    c = ST.configure(topo, _counts(a=3, b=5))
    assert c.to_create["rb"].partitions == 3 and c.tasks == {"0": 5, "1": 3}


def test_the_metadata_hash_follows_the_partition_counts():
    h1 = ST.metadata_hash(WORDCOUNT, _counts(lines=4))
    assert h1 == ST.metadata_hash(WORDCOUNT, _counts(lines=4))
    assert h1 != ST.metadata_hash(WORDCOUNT, _counts(lines=5))
    assert h1 != ST.metadata_hash(WORDCOUNT, _counts(lines=4, app_words_repartition=4))


# ----------------------------------------------------------------------------- assignment
def _flat(assignment, kind=0):
    return {(m, sid, p) for m, a in assignment.items() for sid, ps in a[kind].items() for p in ps}


def test_every_task_once_and_balanced():
    out = ST.assign({"m1": "p1", "m2": "p2", "m3": "p3"}, {"0": 4, "1": 4}, set(), 0, {})
    tasks = sorted((sid, p) for _m, sid, p in _flat(out))
    assert tasks == [(s, p) for s in "01" for p in range(4)]
    loads = sorted(sum(len(ps) for ps in a[0].values()) for a in out.values())
    assert loads == [2, 3, 3]


def test_assignment_is_sticky():
    first = ST.assign({"m1": "p1", "m2": "p2"}, {"0": 6}, set(), 0, {})
    second = ST.assign({"m1": "p1", "m2": "p2", "m3": "p3"}, {"0": 6}, set(), 0, first)
    for m in ("m1", "m2"):
        assert second[m][0]["0"] <= first[m][0]["0"]       # kept a subset of what it had
        assert len(second[m][0]["0"]) == 2
    assert len(second["m3"][0]["0"]) == 2


def test_standbys_go_to_other_processes():
    out = ST.assign({"a1": "A", "a2": "A", "b1": "B"}, {"0": 3, "1": 3}, {"1"}, 1, {})
    owner = {(sid, p): m for m, sid, p in _flat(out)}
    procs = {"a1": "A", "a2": "A", "b1": "B"}
    standbys = _flat(out, 1)
    assert {(sid, p) for _m, sid, p in standbys} == {("1", p) for p in range(3)}   # stateful tasks only
    for m, sid, p in standbys:
        assert procs[m] != procs[owner[(sid, p)]]


def test_no_standby_without_another_process():
    out = ST.assign({"a1": "A", "a2": "A"}, {"0": 2}, {"0"}, 1, {})
    assert _flat(out, 1) == set()


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.dictionaries(st.sampled_from("0123"), st.integers(1, 8), min_size=1),
       st.integers(0, 2), st.integers(1, 3), st.randoms(use_true_random=False))
def test_assignment_properties(n_members, tasks, standby, n_procs, rnd):
    members = {f"m{i}": f"p{i % n_procs}" for i in range(n_members)}
    previous = ST.assign(members, tasks, set(tasks), standby, {})
    # some members go, others come
    kept = {m: p for m, p in members.items() if rnd.random() < 0.7} or dict(list(members.items())[:1])
    kept.update({f"n{i}": f"p{rnd.randrange(n_procs)}" for i in range(rnd.randrange(3))})
    out = ST.assign(kept, tasks, set(tasks), standby, previous)
    active = sorted((sid, p) for _m, sid, p in _flat(out))
    assert active == sorted((s, p) for s, n in tasks.items() for p in range(n))       # each task once
    loads = [sum(len(ps) for ps in a[0].values()) for a in out.values()]
    assert max(loads) - min(loads) <= 1                                                 # balanced
    owner = {(sid, p): m for m, sid, p in _flat(out)}
    seen = {}
    for m, sid, p in _flat(out, 1):
        assert kept[m] != kept[owner[(sid, p)]]                                         # other process
        assert kept[m] not in seen.setdefault((sid, p), set())                          # one per process
        seen[(sid, p)].add(kept[m])
    for t, procs in seen.items():
        assert len(procs) <= standby

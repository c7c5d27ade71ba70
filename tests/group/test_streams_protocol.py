"""Streams groups (KIP-1071) in the coordinator: topology, internal topics, task assignment with
revocation before reassignment, standbys, fencing, leaving, timeouts, persistence, offsets."""
import uuid
from dataclasses import dataclass

from hypothesis import given, settings, strategies as st

from broker.group import OffsetAndMetadata
from broker.group.group import EMPTY
from controller.api import TopicResult
from protocol.errors import ErrorCode as E
from protocol.messages import StreamsGroupHeartbeatRequest as H
from tests.group.support import make_coordinator, run, settle


@dataclass
class Info:
    name: str
    topic_id: uuid.UUID
    partitions: dict


def topology(epoch=0, source="lines", app="app"):
    """Word count: the source topic, a repartition topic, a store with its changelog."""
    return H.Topology(epoch=epoch, subtopologies=[
        H.Subtopology(subtopology_id="0", source_topics=[source], source_topic_regex=[], state_changelog_topics=[],
                      repartition_sink_topics=[f"{app}-words-repartition"], repartition_source_topics=[],
                      copartition_groups=[]),
        H.Subtopology(subtopology_id="1", source_topics=[], source_topic_regex=[],
                      state_changelog_topics=[H.TopicInfo(name=f"{app}-counts-changelog", partitions=0,
                                                          replication_factor=0, topic_configs=[
                                                              H.KeyValue(key="cleanup.policy", value="compact")])],
                      repartition_sink_topics=[],
                      repartition_source_topics=[H.TopicInfo(name=f"{app}-words-repartition", partitions=0,
                                                             replication_factor=0, topic_configs=[])],
                      copartition_groups=[])])


async def coordinator(partitions=4, internal=True, **props):
    props.setdefault("group_streams_initial_rebalance_delay_ms", 0)
    coord, log, timers = make_coordinator(**props)
    topics = {}

    def add(name, n):
        topics[name] = Info(name, uuid.uuid4(), dict.fromkeys(range(n)))
    if partitions:
        add("lines", partitions)
    if internal and partitions:
        add("app-words-repartition", partitions)
        add("app-counts-changelog", partitions)
    created = []

    async def create_topics(specs):
        created.extend(specs)
        for s in specs:
            add(s.name, s.num_partitions)
        return [TopicResult(s.name) for s in specs]
    coord.topic_lookup = topics.get
    coord.topic_by_id = lambda tid: next((i for i in topics.values() if i.topic_id == tid), None)
    coord.topic_names = lambda: list(topics)
    coord.create_topics = create_topics
    await coord.start()
    coord.test_topics, coord.test_created, coord.test_add = topics, created, add
    return coord, log, timers


class Member:
    """A Streams client thread following the protocol: it owns what it was last given, and
    reports it."""

    def __init__(self, coord, member_id=None, process=None, group="app", topo=None, endpoint=None):
        self.coord = coord
        self.group = group
        self.member_id = member_id or uuid.uuid4().hex[:22]
        self.process = process or uuid.uuid4().hex
        self.epoch = 0
        self.topo = topo if topo is not None else topology()
        self.endpoint = endpoint
        self.endpoint_epoch = -1
        self.owned = ({}, {}, {})
        self.last = None

    @staticmethod
    def _ids(tasks):
        return [H.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items()) if ps]

    async def beat(self, **over):
        joining = self.epoch == 0
        args = dict(group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
                    endpoint_epoch=self.endpoint_epoch, rebalance_timeout_ms=30000 if joining else -1,
                    topology=self.topo if joining else None,
                    active=[] if joining else self._ids(self.owned[0]),
                    standby=[] if joining else self._ids(self.owned[1]),
                    warmup=[] if joining else self._ids(self.owned[2]),
                    process_id=self.process if joining else None,
                    user_endpoint=self.endpoint if joining else None, client_id="c", client_host="/127.0.0.1")
        args.update(over)
        out = await self.coord.streams_group_heartbeat(**args)
        self.last = out
        if out["error"] == E.NONE:
            self.epoch = out["member_epoch"]
            self.endpoint_epoch = out["endpoint_epoch"]
            if out["tasks"] is not None:
                self.owned = tuple({s: set(ps) for s, ps in part.items() if ps} for part in out["tasks"])
        return out

    def active(self):
        return {(s, p) for s, ps in self.owned[0].items() for p in ps}

    def standby(self):
        return {(s, p) for s, ps in self.owned[1].items() for p in ps}

    def status(self):
        return [c for c, _ in self.last["status"] or ()]


ALL8 = {(s, p) for s in "01" for p in range(4)}


@run
async def test_first_member_gets_every_task():
    coord, _log, _t = await coordinator()
    m = Member(coord)
    out = await m.beat()
    assert out["error"] == E.NONE and out["status"] == []
    assert m.epoch == 2                       # the first bump of a new group goes to 2
    assert m.active() == ALL8
    assert coord.groups["app"].state == "Stable"
    assert coord.groups["app"].protocol_type == "streams"


@run
async def test_missing_source_topic_then_ready():
    coord, _log, _t = await coordinator(partitions=0)
    m = Member(coord)
    await m.beat()
    assert m.status() == [1] and m.active() == set()
    assert m.last["status"][0][1] == "Source topics lines are missing."
    assert coord.groups["app"].state == "NotReady"
    coord.test_add("lines", 2)
    await m.beat()                     # internal topics now missing: their creation is asked for
    assert m.status() == [3] and set(m.last["create"]) == {"app-words-repartition", "app-counts-changelog"}
    coord.create_streams_topics("app", m.last["create"])
    await settle()
    assert sorted((s.name, s.num_partitions, s.configs) for s in coord.test_created) == [
        ("app-counts-changelog", 2, {"cleanup.policy": "compact"}), ("app-words-repartition", 2, {})]
    await m.beat()
    assert m.status() == [] and m.active() == {(s, p) for s in "01" for p in range(2)}
    assert coord.groups["app"].state == "Stable"


@run
async def test_second_member_waits_for_the_revocation():
    coord, _log, _t = await coordinator()
    a, b = Member(coord), Member(coord)
    await a.beat()
    assert a.active() == ALL8
    await b.beat()
    assert b.active() == set() and b.epoch == 3          # at the target epoch, tasks unreleased
    await a.beat()                                       # asked to revoke half, epoch kept
    assert a.epoch == 2 and len(a.active()) == 4
    await b.beat()
    assert b.active() == set()                           # a has not revoked yet
    await a.beat()                                       # reports the revocation: next epoch
    assert a.epoch == 3
    await b.beat()
    assert len(b.active()) == 4 and a.active() | b.active() == ALL8 and not a.active() & b.active()
    assert coord.groups["app"].state == "Stable"


@run
async def test_standby_on_another_process_after_the_active_leaves_it():
    coord, _log, _t = await coordinator(group_streams_num_standby_replicas=1)
    a, b = Member(coord, process="A"), Member(coord, process="B")
    await a.beat()
    await b.beat()
    for _ in range(4):
        await a.beat()
        await b.beat()
    # stateful subtopology "1": every task has its standby on the other process
    for x, y in ((a, b), (b, a)):
        for s, p in x.standby():
            assert s == "1" and (s, p) in y.active()
    assert {t for t in ALL8 if t[0] == "1"} == a.standby() | b.standby()


@run
async def test_epochs_fencing_and_the_lost_response():
    coord, _log, _t = await coordinator()
    a = Member(coord)
    await a.beat()
    out = await a.beat(member_epoch=a.epoch + 1)
    assert out["error"] == E.FENCED_MEMBER_EPOCH
    b = Member(coord)
    await b.beat()
    await a.beat()
    await a.beat()          # revoked: epoch 3; pretend the answer was lost and beat with 2
    assert a.epoch == 3
    out = await a.beat(member_epoch=2)
    assert out["error"] == E.NONE and out["member_epoch"] == 3
    out = await a.beat(member_epoch=1)
    assert out["error"] == E.FENCED_MEMBER_EPOCH
    out = await Member(coord, member_id="nobody").beat(member_epoch=5, topology=None)
    assert out["error"] == E.UNKNOWN_MEMBER_ID


@run
async def test_leave_and_session_timeout():
    coord, _log, timers = await coordinator(group_streams_session_timeout_ms=6000)
    a, b = Member(coord), Member(coord)
    await a.beat()
    await b.beat()
    epoch = coord.groups["app"].modern.group_epoch
    out = await b.beat(member_epoch=-1)
    assert out["member_epoch"] == -1 and coord.groups["app"].modern.group_epoch == epoch + 1
    await a.beat()
    await a.beat()
    assert a.active() == ALL8
    timers.advance(6001)
    await settle()
    g = coord.groups["app"]
    assert g.modern.members == {} and g.state == EMPTY


@run
async def test_rebalance_timeout_fences_a_member_that_keeps_its_tasks():
    coord, _log, timers = await coordinator(group_streams_session_timeout_ms=60000)
    a, b = Member(coord), Member(coord)
    await a.beat()
    await b.beat()
    await a.beat()                             # asked to revoke
    assert coord.groups["app"].modern.members[a.member_id].state == 2
    timers.advance(30001)                      # its rebalance timeout
    await settle()
    assert a.member_id not in coord.groups["app"].modern.members
    await b.beat()
    await b.beat()
    assert b.active() == ALL8


@run
async def test_initial_delay_then_assignment():
    coord, _log, timers = await coordinator(group_streams_initial_rebalance_delay_ms=3000)
    a, b = Member(coord), Member(coord)
    await a.beat()
    assert a.status() == [5] and a.epoch == 1 and a.active() == set()
    await b.beat()
    assert b.status() == [5] and b.epoch == 1
    timers.advance(3001)
    await settle()
    await a.beat()
    await b.beat()
    assert len(a.active()) == len(b.active()) == 4 and a.active() | b.active() == ALL8


@run
async def test_requests_kafka_refuses():
    coord, _log, _t = await coordinator()
    m = Member(coord)
    cases = [(dict(instance_id="i"), E.INVALID_REQUEST, "Static membership is not yet supported."),
             (dict(task_offsets=[]), E.INVALID_REQUEST, "TaskOffsets are not supported yet."),
             (dict(rebalance_timeout_ms=-1), E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."),
             (dict(topology=None), E.INVALID_REQUEST, "Topology must be non-null when (re-)joining."),
             (dict(member_epoch=-2), E.INVALID_REQUEST, "InstanceId can't be null."),
             (dict(member_id=""), E.INVALID_REQUEST, "MemberId can't be empty.")]
    for over, code, message in cases:
        out = await m.beat(**over)
        assert (out["error"], out["message"]) == (code, message), over
    bad = topology()
    bad.subtopologies[1].state_changelog_topics[0].partitions = 3
    out = await m.beat(topology=bad)
    assert out["error"] == E.STREAMS_INVALID_TOPOLOGY
    assert (await m.beat(topology=topology(source="__consumer_offsets")))["error"] == E.STREAMS_INVALID_TOPOLOGY
    assert "app" not in coord.groups                  # nothing was created by the refused joins
    await m.beat()
    other = Member(coord, topo=topology(source="other"))
    out = await other.beat()
    assert (out["error"], out["message"]) == (E.INVALID_REQUEST, "Topology updates are not supported yet.")
    stale = Member(coord, topo=topology(epoch=-1, source="other"))
    await stale.beat()
    assert stale.status() == [0]                      # STALE_TOPOLOGY


@run
async def test_group_types_do_not_mix():
    coord, _log, _t = await coordinator()
    await Member(coord).beat()
    out = await coord.consumer_group_heartbeat(
        group_id="app", member_id="x", member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout_ms=1000,
        subscribed=["lines"], server_assignor=None, owned=[], api_version=1)
    assert (out["error"], out["message"]) == (E.GROUP_ID_NOT_FOUND, "Group app is not a consumer group.")
    err, msg = coord.consumer_group_describe("app")
    assert (err, msg) == (E.GROUP_ID_NOT_FOUND, "Group app is not a consumer group.")
    # a consumer group's id is not a streams group's
    await coord.consumer_group_heartbeat(
        group_id="cg", member_id="x", member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout_ms=1000,
        subscribed=["lines"], server_assignor=None, owned=[], api_version=1)
    out = await Member(coord, group="cg").beat()
    assert (out["error"], out["message"]) == (E.GROUP_ID_NOT_FOUND, "Group cg is not a streams group.")
    assert coord.streams_group_describe("cg") == (E.GROUP_ID_NOT_FOUND, "Group cg is not a streams group.")
    assert coord.streams_group_describe("none") == (E.GROUP_ID_NOT_FOUND, "Group none not found.")
    _err, groups = coord.list_groups(types=["streams"])
    assert [(g[0], g[1], g[3]) for g in groups] == [("app", "streams", "streams")]


@run
async def test_an_empty_classic_group_becomes_a_streams_group_and_keeps_its_offsets():
    coord, _log, _t = await coordinator()
    res = await coord.commit_offsets("app", "", None, -1, {("lines", 0): OffsetAndMetadata(5, -1, "", 0, -1)})
    assert res == {("lines", 0): E.NONE}
    m = Member(coord)
    await m.beat()
    assert m.last["error"] == E.NONE and coord.groups["app"].modern.kind == "streams"
    assert coord.groups["app"].offsets[("lines", 0)].offset == 5


@run
async def test_offset_commits_by_epoch():
    coord, _log, _t = await coordinator()
    a = Member(coord)
    await a.beat()
    om = {("lines", 0): OffsetAndMetadata(1, -1, "", 0, -1)}

    async def commit(member_id, epoch, offsets=om, version=9):
        return await coord.commit_offsets("app", member_id, None, epoch, offsets, api_version=version)
    assert await commit(a.member_id, a.epoch) == {("lines", 0): E.NONE}
    assert await commit(a.member_id, a.epoch + 1) == {("lines", 0): E.STALE_MEMBER_EPOCH}
    assert await commit("who", a.epoch) == {("lines", 0): E.UNKNOWN_MEMBER_ID}
    assert await commit(a.member_id, a.epoch, version=8) == {("lines", 0): E.UNSUPPORTED_VERSION}
    b = Member(coord)
    await b.beat()
    await a.beat()
    await a.beat()                 # a at epoch 3 keeps half of its tasks, assigned at epoch 2
    kept = sorted(p for s, p in a.active() if s == "0")
    gone = sorted(set(range(4)) - set(kept))
    both = {("lines", kept[0]): OffsetAndMetadata(2, -1, "", 0, -1),
            ("lines", gone[0]): OffsetAndMetadata(2, -1, "", 0, -1)}
    # an older epoch: accepted for a task held since then, refused for one it gave up
    assert await commit(a.member_id, 2, both) == {("lines", kept[0]): E.NONE, ("lines", gone[0]): E.STALE_MEMBER_EPOCH}
    assert await commit(a.member_id, 1, both) == dict.fromkeys(both, E.STALE_MEMBER_EPOCH)
    # an empty group takes commits from anyone (the reset tool)
    await a.beat(member_epoch=-1)
    await b.beat(member_epoch=-1)
    assert await commit("", -1) == {("lines", 0): E.NONE}


@run
async def test_restart_keeps_the_group():
    coord, log, timers = await coordinator()
    a, b = Member(coord), Member(coord)
    await a.beat()
    await b.beat()
    for _ in range(3):
        await a.beat()
        await b.beat()
    before = coord.groups["app"].modern
    snapshot = (before.group_epoch, before.assignment_epoch, before.validated_epoch, before.topology,
                {mid: (m.epoch, m.state, m.active, m.standby) for mid, m in before.members.items()})
    await coord.stop()
    # a new coordinator on the same log
    coord2, _log, _t = make_coordinator(log=log, timers=timers)
    coord2.topic_lookup, coord2.topic_names = coord.topic_lookup, coord.topic_names
    coord2.create_topics = coord.create_topics
    await coord2.start()
    coord2.on_become_leader(coord2.partition_for("app"))
    g = coord2.groups["app"]
    after = g.modern
    assert (after.group_epoch, after.assignment_epoch, after.validated_epoch, after.topology,
            {mid: (m.epoch, m.state, m.active, m.standby) for mid, m in after.members.items()}) == snapshot
    assert g.state == "Stable"
    a.coord = b.coord = coord2
    out = await a.beat()
    assert out["error"] == E.NONE and out["member_epoch"] == a.epoch and a.active() | b.active() == ALL8
    # a deleted group leaves nothing to load
    await a.beat(member_epoch=-1)
    await b.beat(member_epoch=-1)
    assert (await coord2.delete_groups(["app"])) == {"app": E.NONE}
    coord3, _l, _t = make_coordinator(log=log, timers=timers)
    await coord3.start()
    coord3.on_become_leader(coord3.partition_for("app"))
    assert "app" not in coord3.groups


@run
async def test_interactive_query_endpoints():
    coord, _log, _t = await coordinator()
    a = Member(coord, endpoint=H.Endpoint(host="a", port=1))
    b = Member(coord, endpoint=H.Endpoint(host="b", port=2))
    await a.beat()
    await b.beat()
    for _ in range(3):
        await a.beat()
        await b.beat()
    out = await b.beat(endpoint_epoch=-1)
    eps = {e[0]: e[1] for e in out["endpoints"]}
    assert set(eps) == {("a", 1), ("b", 2)}
    # every input partition of a's active tasks: lines for subtopology 0, the repartition topic for 1
    want = {}
    for s, p in a.active():
        want.setdefault("lines" if s == "0" else "app-words-repartition", []).append(p)
    assert {t: sorted(ps) for t, ps in eps[("a", 1)]} == {t: sorted(ps) for t, ps in want.items()}
    out = await b.beat()
    assert out["endpoints"] is None                # its endpoint epoch is current


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "beat", "leave", "expire"]), st.integers(0, 4)),
                min_size=5, max_size=40),
       st.integers(0, 1), st.randoms(use_true_random=False))
def test_no_task_is_active_twice_and_all_settle(ops, standby, rnd):
    """Members that follow the protocol never hold an active task at the same time (nor a
    standby of a task their process runs), and once they keep heartbeating every task is
    held exactly once, balanced."""
    @run
    async def scenario():
        coord, _log, timers = await coordinator(group_streams_num_standby_replicas=standby,
                                                group_streams_session_timeout_ms=10_000)
        members: list[Member] = []

        def check():
            live = [m for m in members if m.member_id in coord.groups["app"].modern.members] \
                if "app" in coord.groups else []
            seen = {}
            for m in live:
                for t in m.active():
                    assert t not in seen, (t, m.member_id, seen[t])
                    seen[t] = m
            for m in live:
                for t in m.standby():
                    assert t not in m.active()
        for op, i in ops:
            if op == "join" or not members:
                m = Member(coord, process=f"p{rnd.randrange(3)}")
                members.append(m)
                await m.beat()
            elif op == "beat":
                m = members[i % len(members)]
                if m.epoch > 0:
                    await m.beat()
                    if m.last["error"] in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
                        m.epoch, m.owned = 0, ({}, {}, {})
            elif op == "leave":
                m = members.pop(i % len(members))
                if m.epoch > 0:
                    await m.beat(member_epoch=-1)
            else:       # a member silent for a session timeout is fenced; it drops what it had
                m = members.pop(i % len(members))
                m.owned = ({}, {}, {})
                for other in members:
                    if other.epoch > 0:
                        await other.beat()
                timers.advance(10_001)
                await settle()
                for other in members:
                    other.epoch, other.owned = (0, ({}, {}, {})) if other.member_id not in \
                        coord.groups["app"].modern.members else (other.epoch, other.owned)
            check()
        for _ in range(6):
            for m in members:
                await m.beat()
                assert m.last["error"] == E.NONE, m.last
                check()
        if members:
            held = sorted(t for m in members for t in m.active())
            assert held == sorted(ALL8)
            loads = [len(m.active()) for m in members]
            assert max(loads) - min(loads) <= 1
            assert coord.groups["app"].state == "Stable"
    scenario()


@run
async def test_group_configs_take_effect():
    """streams.num.standby.replicas set on the group (kafka-configs.sh --entity-type groups)
    bumps the group epoch and brings standbys; streams.heartbeat.interval.ms is what members are
    told."""
    coord, _log, _t = await coordinator()
    own = {}
    coord.group_configs = lambda gid: own
    a, b = Member(coord, process="A"), Member(coord, process="B")
    await a.beat()
    await b.beat()
    for _ in range(3):
        await a.beat()
        await b.beat()
    epoch = coord.groups["app"].modern.group_epoch
    assert a.standby() == b.standby() == set() and a.last["heartbeat_interval_ms"] == 5000
    own.update({"streams.num.standby.replicas": "1", "streams.heartbeat.interval.ms": "2000"})
    for _ in range(3):
        await a.beat()
        await b.beat()
    assert coord.groups["app"].modern.group_epoch == epoch + 1
    assert a.standby() | b.standby() == {t for t in ALL8 if t[0] == "1"}
    assert b.last["heartbeat_interval_ms"] == 2000


@run
async def test_offset_delete():
    """Kafka 4.2: a live streams group keeps the offsets of its topology's input topics
    (GROUP_SUBSCRIBED_TO_TOPIC) and lets others go; an empty one loses them all and stays, to
    go at the next cleanup."""
    coord, _log, _t = await coordinator()
    coord.test_add("other", 1)
    a = Member(coord)
    await a.beat()
    offsets = {tp: OffsetAndMetadata(3, -1, "", 0, -1) for tp in (("lines", 0), ("other", 0))}
    assert await coord.commit_offsets("app", a.member_id, None, a.epoch, offsets, api_version=9) == \
        dict.fromkeys(offsets, E.NONE)
    err, res = await coord.delete_offsets("app", list(offsets))
    assert (err, res) == (E.NONE, {("lines", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): E.NONE})
    await a.beat(member_epoch=-1)
    err, res = await coord.delete_offsets("app", [("lines", 0)])
    assert (err, res) == (E.NONE, {("lines", 0): E.NONE})
    g = coord.groups["app"]
    assert g.offsets == {} and g.state == EMPTY and g.modern.kind == "streams"
    await coord.expire_offsets()           # the periodic cleanup removes the empty group
    assert "app" not in coord.groups

"""The consumer group protocol (KIP-848) in the coordinator: joins, reconciliation with
revocation before reassignment, fencing, leaving, static members, timeouts, offsets."""
import uuid
from dataclasses import dataclass

from hypothesis import given, settings, strategies as st

from broker.group.group import DEAD, EMPTY
from broker.group import OffsetAndMetadata
from protocol.errors import ErrorCode as E
from tests.group.support import make_coordinator, run

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


@dataclass
class Info:
    name: str
    topic_id: uuid.UUID
    partitions: dict


@dataclass
class TP:
    topic_id: uuid.UUID
    partitions: list


async def coordinator(topics=None, **props):
    props.setdefault("group_consumer_session_timeout_ms", 45000)
    coord, log, timers = make_coordinator(**props)
    topics = topics if topics is not None else {"t": Info("t", T1, dict.fromkeys(range(6)))}
    coord.topic_lookup = topics.get
    coord.topic_by_id = lambda tid: next((i for i in topics.values() if i.topic_id == tid), None)
    coord.topic_names = lambda: list(topics)
    await coord.start()
    return coord, timers, topics


class Member:
    """A consumer following the protocol: it owns what it was last given."""

    def __init__(self, coord, member_id=None, topics=("t",), instance=None, group="g", regex=None, version=1):
        self.coord = coord
        self.group = group
        self.member_id = member_id or uuid.uuid4().hex[:22]
        self.epoch = 0
        self.topics = list(topics)
        self.instance = instance
        self.regex = regex
        self.version = version
        self.owned: dict = {}
        self.last = None

    def owned_list(self):
        return [TP(t, sorted(ps)) for t, ps in self.owned.items() if ps]

    async def beat(self, full=False, **over):
        joining = self.epoch == 0
        args = dict(group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
                    instance_id=self.instance if joining or full else None, rack_id=None,
                    rebalance_timeout_ms=30000 if joining or full else -1,
                    subscribed=self.topics if joining or full else None, server_assignor=None,
                    owned=[] if joining else self.owned_list(), regex=self.regex if joining else None,
                    api_version=self.version)
        args.update(over)
        out = await self.coord.consumer_group_heartbeat(**args)
        self.last = out
        if out["error"] == E.NONE:
            if out["member_id"]:
                self.member_id = out["member_id"]
            self.epoch = out["member_epoch"]
            if out["assignment"] is not None:
                self.owned = {t: set(ps) for t, ps in out["assignment"].items()}
        return out

    def parts(self):
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def all_partitions(topic_id=T1, n=6):
    return {(topic_id, p) for p in range(n)}


@run
async def test_single_member_gets_every_partition():
    coord, _, _ = await coordinator()
    a = Member(coord)
    out = await a.beat()
    assert out["error"] == E.NONE and out["member_epoch"] == 1 and out["heartbeat_interval_ms"] == 5000
    assert a.parts() == all_partitions()
    group = coord.groups["g"]
    assert group.modern is not None and group.state == "Stable"
    assert coord.list_groups()[1] == [("g", "consumer", "Stable", "consumer")]
    assert coord.list_groups(types=["classic"])[1] == []
    # a heartbeat with nothing new gets no assignment back
    assert (await a.beat())["assignment"] is None


@run
async def test_second_member_waits_for_revocation():
    coord, _, _ = await coordinator()
    a, b = Member(coord), Member(coord)
    await a.beat()
    out = await b.beat()
    # b is at the new epoch but gets nothing yet: a still owns everything
    assert out["member_epoch"] == 2 and b.parts() == set()
    assert coord.groups["g"].state == "Reconciling"
    # a learns it must give up three partitions; it keeps its epoch until it has done so
    out = await a.beat()
    assert out["member_epoch"] == 1 and len(a.parts()) == 3
    revoked = all_partitions() - a.parts()
    # b still waits while a has not confirmed the revocation
    await b.beat()
    assert b.parts() == set()
    # a confirms (its owned list no longer has them): it moves to epoch 2
    assert (await a.beat())["member_epoch"] == 2
    await b.beat()
    assert b.parts() == revoked and coord.groups["g"].state == "Stable"
    assert a.parts() | b.parts() == all_partitions() and not a.parts() & b.parts()


@run
async def test_leave_gives_partitions_back():
    coord, _, _ = await coordinator()
    a, b = Member(coord), Member(coord)
    await a.beat(); await b.beat(); await a.beat(); await a.beat(); await b.beat()
    assert len(b.parts()) == 3
    out = await b.beat(member_epoch=-1)
    assert out["error"] == E.NONE and out["member_epoch"] == -1
    await a.beat()
    assert a.parts() == all_partitions()
    out = await a.beat(member_epoch=-1)
    assert coord.groups["g"].state == EMPTY


@run
async def test_validation_messages():
    coord, _, _ = await coordinator()
    a = Member(coord)
    assert (await a.beat(group_id=""))["message"] == "GroupId can't be empty."
    assert (await a.beat(member_id=""))["message"] == "MemberId can't be empty."
    out = await a.beat(rebalance_timeout_ms=-1)
    assert (out["error"], out["message"]) == (E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
    assert (await a.beat(owned=[TP(T1, [0])]))["message"] == "TopicPartitions must be empty when (re-)joining."
    assert (await a.beat(subscribed=[]))["message"] == \
        "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    assert (await a.beat(member_epoch=-3))["message"] == "MemberEpoch is invalid."
    assert (await a.beat(instance_id=" "))["message"] == "InstanceId can't be empty."
    out = await a.beat(server_assignor="sticky")
    assert out["error"] == E.UNSUPPORTED_ASSIGNOR
    assert out["message"] == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    assert (await a.beat(regex="("))["error"] == E.INVALID_REGULAR_EXPRESSION
    # v0: the coordinator makes the member id
    v0 = Member(coord, member_id="", version=0)
    out = await v0.beat()
    assert out["error"] == E.NONE and len(out["member_id"]) == 22
    # an unknown member, an unknown group
    assert (await Member(coord, member_id="ghost").beat(member_epoch=3))["error"] == E.UNKNOWN_MEMBER_ID
    out = await Member(coord, member_id="m1", group="nope").beat(member_epoch=3)
    assert (out["error"], out["message"]) == (E.GROUP_ID_NOT_FOUND, "Consumer group nope not found.")
    out = await Member(coord, member_id="m1", group="nope").beat(member_epoch=-1)
    assert (out["error"], out["message"]) == (E.GROUP_ID_NOT_FOUND, "Consumer group nope not found.")


@run
async def test_epoch_fencing():
    coord, _, _ = await coordinator()
    a = Member(coord)
    await a.beat()
    assert (await a.beat(member_epoch=5))["error"] == E.FENCED_MEMBER_EPOCH
    # an older epoch is accepted only as the previous one with owned partitions a subset
    b = Member(coord)
    await b.beat()
    await a.beat()            # a: revoking at epoch 1
    await a.beat()            # a: revoked, now epoch 2 (previous 1)
    assert a.epoch == 2
    out = await a.beat(member_epoch=1)           # the response to the last beat was lost
    assert out["error"] == E.NONE and out["member_epoch"] == 2
    assert (await a.beat(member_epoch=1, owned=[TP(T1, [0, 1, 2, 3, 4, 5])]))["error"] == E.FENCED_MEMBER_EPOCH
    # a rejoin (epoch 0) under a member id still in use is fenced too
    assert (await a.beat(member_epoch=0, owned=[], rebalance_timeout_ms=30000, subscribed=["t"]))["error"] == \
        E.FENCED_MEMBER_EPOCH


@run
async def test_session_timeout_fences_and_reassigns():
    coord, timers, _ = await coordinator()
    a, b = Member(coord), Member(coord)
    await a.beat(); await b.beat(); await a.beat(); await a.beat(); await b.beat()
    timers.advance(30_000)
    await a.beat()
    timers.advance(30_000)                 # b silent for 60 s
    assert b.member_id not in coord.groups["g"].modern.members
    await a.beat()
    assert a.parts() == all_partitions()
    assert (await b.beat())["error"] == E.UNKNOWN_MEMBER_ID


@run
async def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    coord, timers, _ = await coordinator()
    a, b = Member(coord), Member(coord)
    await a.beat(); await b.beat()
    await a.beat()                                   # told to revoke three
    assert coord.groups["g"].modern.members[a.member_id].state == "unrevoked_partitions"
    # a keeps heartbeating but never reports the revocation
    for _ in range(6):
        timers.advance(5_000)
        await a.beat(owned=[TP(T1, [0, 1, 2, 3, 4, 5])])
        await b.beat()
    timers.advance(5_000)                      # 35 s > the 30 s rebalance timeout
    assert a.member_id not in coord.groups["g"].modern.members
    await b.beat()
    assert b.parts() == all_partitions()


@run
async def test_static_member_temporary_leave_and_return():
    coord, timers, _ = await coordinator()
    a = Member(coord, instance="i-a")
    b = Member(coord, instance="i-b")
    await a.beat(); await b.beat(); await a.beat(); await a.beat(); await b.beat()
    held = b.parts()
    assert len(held) == 3
    out = await b.beat(member_epoch=-2, instance_id="i-b")
    assert out["member_epoch"] == -2
    # its partitions stay with it: a does not get them
    await a.beat()
    assert len(a.parts()) == 3
    # another member cannot take the instance id while the old one is active
    c = Member(coord, instance="i-a")
    assert (await c.beat())["error"] == E.UNRELEASED_INSTANCE_ID
    # b comes back under a new member id and gets its partitions at once
    b2 = Member(coord, instance="i-b")
    out = await b2.beat()
    assert out["error"] == E.NONE and b2.parts() == held
    assert b.member_id not in coord.groups["g"].modern.members


@run
async def test_regex_subscription_follows_new_topics():
    topics = {"re-1": Info("re-1", T1, dict.fromkeys(range(2))), "other": Info("other", T2, dict.fromkeys(range(2)))}
    coord, _, _ = await coordinator(topics)
    a = Member(coord, topics=(), regex="re-.*")
    await a.beat()
    assert a.parts() == {(T1, 0), (T1, 1)}
    t3 = uuid.UUID(int=3)
    topics["re-2"] = Info("re-2", t3, dict.fromkeys(range(1)))
    await a.beat()
    assert a.parts() == {(T1, 0), (T1, 1), (t3, 0)}
    err, s = coord.consumer_group_describe("g")
    assert err == E.NONE and s["members"][0][0].regex == "re-.*"


@run
async def test_partition_count_change_bumps_the_epoch():
    coord, _, topics = await coordinator()
    a = Member(coord)
    await a.beat()
    topics["t"].partitions[6] = None
    out = await a.beat()
    assert out["member_epoch"] == 2 and (T1, 6) in a.parts()


@run
async def test_offsets_of_a_consumer_protocol_group():
    coord, _, _ = await coordinator()
    a = Member(coord)
    await a.beat()

    def om(o):
        return {("t", 0): OffsetAndMetadata(o, -1, "", 1000, -1)}
    assert await coord.commit_offsets("g", a.member_id, None, a.epoch, om(5), api_version=9) == {("t", 0): E.NONE}
    assert await coord.commit_offsets("g", a.member_id, None, a.epoch + 1, om(6), api_version=9) == \
        {("t", 0): E.STALE_MEMBER_EPOCH}
    assert await coord.commit_offsets("g", a.member_id, None, a.epoch, om(6), api_version=8) == \
        {("t", 0): E.UNSUPPORTED_VERSION}
    assert await coord.commit_offsets("g", "ghost", None, a.epoch, om(6), api_version=9) == \
        {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert await coord.commit_offsets("g", "", None, -1, om(6), api_version=9) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert await coord.commit_offsets("nogroup", "m", None, 3, om(6), api_version=9) == \
        {("t", 0): E.GROUP_ID_NOT_FOUND}
    assert coord.validate_modern_fetch("g", a.member_id, a.epoch) == E.NONE
    assert coord.validate_modern_fetch("g", a.member_id, a.epoch + 1) == E.STALE_MEMBER_EPOCH
    assert coord.validate_modern_fetch("g", None, -1) == E.NONE
    err, rows = coord.fetch_offsets("g", [("t", 0)])
    assert rows[0][1].offset == 5
    # a non-empty group cannot be deleted; once empty, an admin commit works and so does deletion
    assert (await coord.delete_groups(["g"])) == {"g": E.NON_EMPTY_GROUP}
    await a.beat(member_epoch=-1)
    assert await coord.commit_offsets("g", "", None, -1, om(7), api_version=9) == {("t", 0): E.NONE}
    assert (await coord.delete_groups(["g"])) == {"g": E.NONE}
    assert "g" not in coord.groups or coord.groups["g"].is_(DEAD)


@run
async def test_classic_and_consumer_protocols_do_not_mix_when_migration_is_disabled():
    # (the default policy, bidirectional, mixes them: tests/group/test_migration.py)
    coord, _, _ = await coordinator(group_consumer_migration_policy="disabled")
    a = Member(coord)
    await a.beat()
    res = await coord.join_group("g", "", None, client_id="c", client_host="/h", rebalance_timeout_ms=1000,
                                 session_timeout_ms=10000, protocol_type="consumer", protocols=[("range", b"")])
    assert res.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert coord.heartbeat("g", "x", None, 1) == E.UNKNOWN_MEMBER_ID
    # DescribeGroups reads a consumer-protocol group as Dead, as Kafka does
    err, s = coord.describe_group("g")
    assert (err, s["state"], s["members"]) == (E.NONE, DEAD, [])
    # an empty consumer-protocol group can be joined classically: it becomes a classic group
    await a.beat(member_epoch=-1)
    task = coord.join_group("g", "", None, client_id="c", client_host="/h", rebalance_timeout_ms=1000,
                            session_timeout_ms=10000, protocol_type="consumer", protocols=[("range", b"")],
                            require_known_member_id=False)
    res = await task
    assert res.error == E.NONE and coord.groups["g"].modern is None
    # and a consumer-protocol member then gets Kafka's answer for a classic group
    out = await Member(coord).beat()
    assert (out["error"], out["message"]) == (E.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")


@run
async def test_disabled_protocol_is_unsupported():
    coord, _, _ = await coordinator(group_coordinator_rebalance_protocols="classic")
    assert (await Member(coord).beat())["error"] == E.UNSUPPORTED_VERSION


@run
async def test_range_assignor_chosen_by_members():
    topics = {"a": Info("a", T1, dict.fromkeys(range(3))), "b": Info("b", T2, dict.fromkeys(range(3)))}
    coord, _, _ = await coordinator(topics)
    m1 = Member(coord, member_id="m1", topics=("a", "b"))
    m2 = Member(coord, member_id="m2", topics=("a", "b"))
    await m1.beat(server_assignor="range")
    await m2.beat(server_assignor="range")
    await m1.beat(); await m1.beat(); await m2.beat()
    err, s = coord.consumer_group_describe("g")
    assert s["assignor"] == "range"
    # co-partitioned: each member has the same partition numbers of both topics
    assert m1.parts() == {(T1, 0), (T1, 1), (T2, 0), (T2, 1)}
    assert m2.parts() == {(T1, 2), (T2, 2)}


# ------------------------------------------------------------------------------ persistence
async def reloaded(coord, log_topics):
    """A fresh coordinator reading the same __consumer_offsets (a restart or a coordinator move)."""
    from tests.group.support import make_coordinator as mk
    await coord.idle()
    fresh, _, timers = mk(coord.log, group_consumer_session_timeout_ms=45000)
    fresh.topic_lookup = log_topics.get
    fresh.topic_by_id = coord.topic_by_id
    fresh.topic_names = lambda: list(log_topics)
    await fresh.start()
    for p in range(coord.log.num_partitions):
        fresh.on_become_leader(p)
    return fresh, timers


def member_view(group):
    mg = group.modern
    return {mid: (m.epoch, m.previous_epoch, m.state, m.assigned, m.revoking, mg.target.get(mid), m.subscribed,
                  m.instance_id, m.rebalance_timeout_ms) for mid, m in mg.members.items()}


@run
async def test_the_group_survives_a_reload_mid_revocation():
    coord, _, topics = await coordinator()
    a, b = Member(coord, instance="i-a"), Member(coord)
    await a.beat()
    await b.beat()
    await a.beat()                      # a is told to revoke three partitions
    g0 = coord.groups["g"]
    assert g0.modern.members[a.member_id].state == "unrevoked_partitions"
    fresh, _ = await reloaded(coord, topics)
    g = fresh.groups["g"]
    assert g.modern is not None and g.state == g0.state == "Reconciling"
    assert (g.modern.group_epoch, g.modern.assignment_epoch) == (g0.modern.group_epoch, g0.modern.assignment_epoch)
    assert g.modern.metadata == g0.modern.metadata
    assert member_view(g) == member_view(g0)
    assert g.modern.static == {"i-a": a.member_id}
    # the members go on with the new coordinator at their epochs: no rejoin
    a.coord = b.coord = fresh
    out = await a.beat()                # revocation done
    assert out["error"] == E.NONE and out["member_epoch"] == 2
    await b.beat()
    assert len(a.parts()) == len(b.parts()) == 3 and not a.parts() & b.parts()
    assert fresh.groups["g"].state == "Stable"


@run
async def test_leaving_and_deleting_write_tombstones():
    from broker.group import modern_records as MR
    from broker.group.hashing import partition_for
    coord, _, topics = await coordinator()
    a, b = Member(coord), Member(coord)
    await a.beat()
    await b.beat()
    await b.beat(member_epoch=-1)
    await coord.idle()
    log = coord.log.partitions[partition_for("g", coord.log.num_partitions)]
    keys = [(MR.parse_key(k), v) for _, k, v in log]
    last = {}
    for k, v in keys:
        last[k] = v
    assert {k.kind for k in last if k and k.member is None} == {3, 4, 6}
    assert all(v is None for k, v in last.items() if k and k.member == b.member_id)
    assert all(v is not None for k, v in last.items() if k and k.member == a.member_id)
    assert MR.parse_epoch_value(last[MR.ModernKey(3, "g")]) == coord.groups["g"].modern.group_epoch
    await a.beat(member_epoch=-1)
    assert await coord.delete_groups(["g"]) == {"g": E.NONE}
    await coord.idle()
    last = {}
    for _, k, v in log:
        last[MR.parse_key(k)] = v
    assert all(v is None for k, v in last.items() if k is not None)
    fresh, _ = await reloaded(coord, topics)
    assert "g" not in fresh.groups


def test_record_layouts():
    from broker.group import modern_records as MR
    assert MR.key(MR.GROUP_METADATA, "g") == b"\x00\x03\x00\x01g"
    assert MR.key(MR.CURRENT_ASSIGNMENT, "g", "m") == b"\x00\x08\x00\x01g\x00\x01m"
    assert MR.epoch_value(5) == b"\x00\x00\x00\x00\x00\x05\x00"
    t = uuid.UUID(int=7)
    v = MR.current_assignment_value(MR.CurrentAssignment(3, 2, "unrevoked_partitions", {t: {1, 0}}, {}))
    assert v == (b"\x00\x00" + b"\x00\x00\x00\x03" + b"\x00\x00\x00\x02" + b"\x01"
                 + b"\x02" + t.bytes + b"\x03" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + b"\x00"
                 + b"\x01" + b"\x00")
    c = MR.parse_current_assignment_value(v)
    assert (c.epoch, c.previous_epoch, c.state, c.assigned, c.revoking) == (3, 2, "unrevoked_partitions", {t: {0, 1}}, {})
    m = MR.MemberMetadata("i", None, "cid", "/h", ("a", "b"), "r.*", 3000, "range")
    assert MR.parse_member_metadata_value(MR.member_metadata_value(m)) == m
    assert MR.parse_partition_metadata_value(MR.partition_metadata_value({"a": (t, 4)})) == {"a": (t, 4, ())}
    # with racks, byte for byte as ConsumerGroupPartitionMetadataValue v0 lays them out
    v = MR.partition_metadata_value({"a": (t, 2, ((1, ("r1", "r2")),))})
    assert v == (b"\x00\x00" + b"\x02" + t.bytes + b"\x02a" + b"\x00\x00\x00\x02"
                 + b"\x02" + b"\x00\x00\x00\x01" + b"\x03" + b"\x03r1" + b"\x03r2" + b"\x00"
                 + b"\x00" + b"\x00")
    assert MR.parse_partition_metadata_value(v) == {"a": (t, 2, ((1, ("r1", "r2")),))}


@run
async def test_subscription_metadata_records_partition_racks():
    """As Kafka 3.9: the racks of each partition's replicas are part of the subscription metadata
    (written in the PartitionMetadata record); a broker changing rack changes it, which bumps the
    group epoch (the assignors do not use racks, as in 3.9)."""
    from broker.group import modern_records as MR

    @dataclass
    class Part:
        replicas: list
    topics = {"t": Info("t", T1, {0: Part([1, 2]), 1: Part([2, 3]), 2: Part([3])})}
    coord, _, _ = await coordinator(topics)
    racks = {1: "a", 2: "b"}                          # broker 3 has no rack
    coord.broker_racks = lambda: dict(racks)
    a = Member(coord)
    await a.beat()
    await coord.idle()
    mg = coord.groups["g"].modern
    assert mg.metadata == {"t": (T1, 3, ((0, ("a", "b")), (1, ("b",))))}
    recs = [v for _, k, v in coord.log.read(coord.partition_for("g"))
            if v is not None and MR.parse_key(k).kind == MR.PARTITION_METADATA]
    assert MR.parse_partition_metadata_value(recs[-1]) == mg.metadata
    epoch = mg.group_epoch
    await a.beat()
    assert mg.group_epoch == epoch                   # nothing moved
    racks[3] = "c"
    await a.beat()
    assert mg.group_epoch == epoch + 1
    assert mg.metadata["t"][2] == ((0, ("a", "b")), (1, ("b", "c")), (2, ("c",)))
    coord2, _ = await reloaded(coord, topics)
    assert coord2.groups["g"].modern.metadata == mg.metadata


# every step of a random run: what the log holds equals the group, and a reload rebuilds it
OPS = ("join", "beat", "beat", "beat", "leave", "static_leave", "time", "grow")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 3)), min_size=1, max_size=30))
def test_log_follows_the_group_through_random_runs(steps):
    import asyncio

    async def main():
        coord, timers, topics = await coordinator()
        members = [Member(coord, member_id=f"m{i}-" + "x" * 18, instance=f"i{i}" if i % 2 else None)
                   for i in range(4)]
        joined = [False] * 4
        for op, i in steps:
            m = members[i]
            if op == "join" and not joined[i]:
                m.epoch, m.owned = 0, {}
                joined[i] = (await m.beat())["error"] == E.NONE
            elif op == "beat" and joined[i]:
                out = await m.beat()
                if out["error"]:
                    joined[i] = False
            elif op == "leave" and joined[i]:
                await m.beat(member_epoch=-1)
                joined[i] = False
            elif op == "static_leave" and joined[i] and m.instance:
                await m.beat(member_epoch=-2, instance_id=m.instance)
                joined[i] = False
                m.member_id = f"m{i}-" + "y" * 18          # comes back under a new id
            elif op == "time":
                timers.advance(20_000)
            elif op == "grow":
                topics["t"].partitions[len(topics["t"].partitions)] = None
            await coord.idle()
            group = coord.groups.get("g")
            if group is None or group.modern is None:
                continue
            mg = group.modern
            assert mg.persisted is not None and not mg.dirty
            assert mg.persisted["members"] == {mid: coord._member_snapshot(mg, x) for mid, x in mg.members.items()}
            assert (mg.persisted["epoch"], mg.persisted["assignment_epoch"], mg.persisted["metadata"]) == \
                (mg.group_epoch, mg.assignment_epoch, mg.metadata)
        group = coord.groups.get("g")
        if group is not None and group.modern is not None:
            fresh, _ = await reloaded(coord, topics)
            g = fresh.groups["g"]
            assert member_view(g) == member_view(group)
            assert (g.modern.group_epoch, g.modern.assignment_epoch) == \
                (group.modern.group_epoch, group.modern.assignment_epoch)
    asyncio.run(main())


@run
async def test_offset_delete_leaves_an_empty_group_to_the_cleanup():
    """Kafka 4.x: OffsetDelete on a consumer-protocol group deletes offsets only, those of
    topics a member subscribes to are GROUP_SUBSCRIBED_TO_TOPIC; an empty group left without
    offsets stays (ListGroups shows it) until the periodic cleanup removes it."""
    coord, timers, _ = await coordinator()
    a = Member(coord)
    await a.beat()
    offsets = {tp: OffsetAndMetadata(3, -1, "", timers.now_ms(), -1) for tp in (("t", 0), ("u", 0))}
    assert await coord.commit_offsets("g", a.member_id, None, a.epoch, offsets, api_version=9) == \
        dict.fromkeys(offsets, E.NONE)
    assert await coord.delete_offsets("g", list(offsets)) == \
        (E.NONE, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE})
    await a.beat(member_epoch=-1)
    assert await coord.delete_offsets("g", [("t", 0)]) == (E.NONE, {("t", 0): E.NONE})
    g = coord.groups["g"]
    assert g.offsets == {} and g.state == EMPTY and not g.is_(DEAD)
    assert ("g", "Empty") in {(x[0], x[2]) for x in coord.list_groups()[1]}
    await coord.expire_offsets()           # the periodic cleanup removes the empty group
    assert "g" not in coord.groups


@run
async def test_offsets_expire_counted_from_when_the_group_became_empty():
    """offsets.retention.minutes (7 days) counts from the moment the last member left, not from
    when the group was created (Kafka's rule for Empty groups)."""
    day = 24 * 3600 * 1000
    coord, timers, _ = await coordinator(group_consumer_max_session_timeout_ms=10 * day,
                                         group_consumer_session_timeout_ms=9 * day)
    a = Member(coord)
    await a.beat()
    await coord.commit_offsets("g", a.member_id, None, a.epoch,
                               {("t", 0): OffsetAndMetadata(5, -1, "", timers.now_ms(), -1)}, api_version=9)
    timers.advance(8 * day)                       # a member for eight days
    await a.beat(member_epoch=-1)
    timers.advance(60_000)
    assert await coord.expire_offsets() == 0      # empty for a minute only
    assert coord.groups["g"].offsets
    timers.advance(7 * day)
    assert await coord.expire_offsets() == 1
    assert "g" not in coord.groups                # and the empty group without offsets is gone


@run
async def test_a_failed_group_write_is_answered_as_the_new_coordinator_answers():
    """A heartbeat whose group records cannot be written gets Kafka's new-coordinator error: a
    timed-out write is COORDINATOR_NOT_AVAILABLE (retried by members; the classic table's
    REBALANCE_IN_PROGRESS made Java 4.2's consumer fail for good in a kill -9 soak), a lost
    partition NOT_COORDINATOR.  Once writes work again the member joins."""
    from protocol.errors import NotLeaderOrFollowerError, RequestTimedOutError
    coord, _timers, _ = await coordinator()
    a = Member(coord)
    assert (await a.beat())["error"] == E.NONE
    for exc, want in ((RequestTimedOutError(), E.COORDINATOR_NOT_AVAILABLE),
                      (NotLeaderOrFollowerError(), E.NOT_COORDINATOR)):
        coord.log.fail_with = exc
        b = Member(coord)
        assert (await b.beat())["error"] == want, exc
    coord.log.fail_with = None
    b = Member(coord)
    assert (await b.beat())["error"] == E.NONE and b.epoch > 0

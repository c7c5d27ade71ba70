"""The consumer group protocol (KIP-848) in the coordinator: joins, reconciliation with
revocation before reassignment, fencing, leaving, static members, timeouts, offsets."""
import uuid
from dataclasses import dataclass

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

    def beat(self, full=False, **over):
        joining = self.epoch == 0
        args = dict(group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
                    instance_id=self.instance if joining or full else None, rack_id=None,
                    rebalance_timeout_ms=30000 if joining or full else -1,
                    subscribed=self.topics if joining or full else None, server_assignor=None,
                    owned=[] if joining else self.owned_list(), regex=self.regex if joining else None,
                    api_version=self.version)
        args.update(over)
        out = self.coord.consumer_group_heartbeat(**args)
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
    out = a.beat()
    assert out["error"] == E.NONE and out["member_epoch"] == 1 and out["heartbeat_interval_ms"] == 5000
    assert a.parts() == all_partitions()
    group = coord.groups["g"]
    assert group.modern is not None and group.state == "Stable"
    assert coord.list_groups()[1] == [("g", "consumer", "Stable", "consumer")]
    assert coord.list_groups(types=["classic"])[1] == []
    # a heartbeat with nothing new gets no assignment back
    assert a.beat()["assignment"] is None


@run
async def test_second_member_waits_for_revocation():
    coord, _, _ = await coordinator()
    a, b = Member(coord), Member(coord)
    a.beat()
    out = b.beat()
    # b is at the new epoch but gets nothing yet: a still owns everything
    assert out["member_epoch"] == 2 and b.parts() == set()
    assert coord.groups["g"].state == "Reconciling"
    # a learns it must give up three partitions; it keeps its epoch until it has done so
    out = a.beat()
    assert out["member_epoch"] == 1 and len(a.parts()) == 3
    revoked = all_partitions() - a.parts()
    # b still waits while a has not confirmed the revocation
    b.beat()
    assert b.parts() == set()
    # a confirms (its owned list no longer has them): it moves to epoch 2
    assert a.beat()["member_epoch"] == 2
    b.beat()
    assert b.parts() == revoked and coord.groups["g"].state == "Stable"
    assert a.parts() | b.parts() == all_partitions() and not a.parts() & b.parts()


@run
async def test_leave_gives_partitions_back():
    coord, _, _ = await coordinator()
    a, b = Member(coord), Member(coord)
    a.beat(); b.beat(); a.beat(); a.beat(); b.beat()
    assert len(b.parts()) == 3
    out = b.beat(member_epoch=-1)
    assert out["error"] == E.NONE and out["member_epoch"] == -1
    a.beat()
    assert a.parts() == all_partitions()
    out = a.beat(member_epoch=-1)
    assert coord.groups["g"].state == EMPTY


@run
async def test_validation_messages():
    coord, _, _ = await coordinator()
    a = Member(coord)
    assert a.beat(group_id="")["message"] == "GroupId can't be empty."
    assert a.beat(member_id="")["message"] == "MemberId can't be empty."
    out = a.beat(rebalance_timeout_ms=-1)
    assert (out["error"], out["message"]) == (E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
    assert a.beat(owned=[TP(T1, [0])])["message"] == "TopicPartitions must be empty when (re-)joining."
    assert a.beat(subscribed=[])["message"] == \
        "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    assert a.beat(member_epoch=-3)["message"] == "MemberEpoch is invalid."
    assert a.beat(instance_id=" ")["message"] == "InstanceId can't be empty."
    out = a.beat(server_assignor="sticky")
    assert out["error"] == E.UNSUPPORTED_ASSIGNOR
    assert out["message"] == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    assert a.beat(regex="(")["error"] == E.INVALID_REGULAR_EXPRESSION
    # v0: the coordinator makes the member id
    v0 = Member(coord, member_id="", version=0)
    out = v0.beat()
    assert out["error"] == E.NONE and len(out["member_id"]) == 22
    # an unknown member, an unknown group
    assert Member(coord, member_id="ghost").beat(member_epoch=3)["error"] == E.UNKNOWN_MEMBER_ID
    # a group this coordinator does not know: the member is unknown (after a restart or a
    # coordinator move the membership is gone, and the member must rejoin)
    out = Member(coord, member_id="m1", group="nope").beat(member_epoch=3)
    assert (out["error"], out["message"]) == (E.UNKNOWN_MEMBER_ID, "Member m1 is not a member of group nope.")
    out = Member(coord, member_id="m1", group="nope").beat(member_epoch=-1)
    assert (out["error"], out["message"]) == (E.GROUP_ID_NOT_FOUND, "Consumer group nope not found.")


@run
async def test_epoch_fencing():
    coord, _, _ = await coordinator()
    a = Member(coord)
    a.beat()
    assert a.beat(member_epoch=5)["error"] == E.FENCED_MEMBER_EPOCH
    # an older epoch is accepted only as the previous one with owned partitions a subset
    b = Member(coord)
    b.beat()
    a.beat()            # a: revoking at epoch 1
    a.beat()            # a: revoked, now epoch 2 (previous 1)
    assert a.epoch == 2
    out = a.beat(member_epoch=1)           # the response to the last beat was lost
    assert out["error"] == E.NONE and out["member_epoch"] == 2
    assert a.beat(member_epoch=1, owned=[TP(T1, [0, 1, 2, 3, 4, 5])])["error"] == E.FENCED_MEMBER_EPOCH
    # a rejoin (epoch 0) under a member id still in use is fenced too
    assert a.beat(member_epoch=0, owned=[], rebalance_timeout_ms=30000, subscribed=["t"])["error"] == \
        E.FENCED_MEMBER_EPOCH


@run
async def test_session_timeout_fences_and_reassigns():
    coord, timers, _ = await coordinator()
    a, b = Member(coord), Member(coord)
    a.beat(); b.beat(); a.beat(); a.beat(); b.beat()
    timers.advance(30_000)
    a.beat()
    timers.advance(30_000)                 # b silent for 60 s
    assert b.member_id not in coord.groups["g"].modern.members
    a.beat()
    assert a.parts() == all_partitions()
    assert b.beat()["error"] == E.UNKNOWN_MEMBER_ID


@run
async def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    coord, timers, _ = await coordinator()
    a, b = Member(coord), Member(coord)
    a.beat(); b.beat()
    a.beat()                                   # told to revoke three
    assert coord.groups["g"].modern.members[a.member_id].state == "unrevoked_partitions"
    # a keeps heartbeating but never reports the revocation
    for _ in range(6):
        timers.advance(5_000)
        a.beat(owned=[TP(T1, [0, 1, 2, 3, 4, 5])])
        b.beat()
    timers.advance(5_000)                      # 35 s > the 30 s rebalance timeout
    assert a.member_id not in coord.groups["g"].modern.members
    b.beat()
    assert b.parts() == all_partitions()


@run
async def test_static_member_temporary_leave_and_return():
    coord, timers, _ = await coordinator()
    a = Member(coord, instance="i-a")
    b = Member(coord, instance="i-b")
    a.beat(); b.beat(); a.beat(); a.beat(); b.beat()
    held = b.parts()
    assert len(held) == 3
    out = b.beat(member_epoch=-2, instance_id="i-b")
    assert out["member_epoch"] == -2
    # its partitions stay with it: a does not get them
    a.beat()
    assert len(a.parts()) == 3
    # another member cannot take the instance id while the old one is active
    c = Member(coord, instance="i-a")
    assert c.beat()["error"] == E.UNRELEASED_INSTANCE_ID
    # b comes back under a new member id and gets its partitions at once
    b2 = Member(coord, instance="i-b")
    out = b2.beat()
    assert out["error"] == E.NONE and b2.parts() == held
    assert b.member_id not in coord.groups["g"].modern.members


@run
async def test_regex_subscription_follows_new_topics():
    topics = {"re-1": Info("re-1", T1, dict.fromkeys(range(2))), "other": Info("other", T2, dict.fromkeys(range(2)))}
    coord, _, _ = await coordinator(topics)
    a = Member(coord, topics=(), regex="re-.*")
    a.beat()
    assert a.parts() == {(T1, 0), (T1, 1)}
    t3 = uuid.UUID(int=3)
    topics["re-2"] = Info("re-2", t3, dict.fromkeys(range(1)))
    a.beat()
    assert a.parts() == {(T1, 0), (T1, 1), (t3, 0)}
    err, s = coord.consumer_group_describe("g")
    assert err == E.NONE and s["members"][0][0].regex == "re-.*"


@run
async def test_partition_count_change_bumps_the_epoch():
    coord, _, topics = await coordinator()
    a = Member(coord)
    a.beat()
    topics["t"].partitions[6] = None
    out = a.beat()
    assert out["member_epoch"] == 2 and (T1, 6) in a.parts()


@run
async def test_offsets_of_a_consumer_protocol_group():
    coord, _, _ = await coordinator()
    a = Member(coord)
    a.beat()

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
    a.beat(member_epoch=-1)
    assert await coord.commit_offsets("g", "", None, -1, om(7), api_version=9) == {("t", 0): E.NONE}
    assert (await coord.delete_groups(["g"])) == {"g": E.NONE}
    assert "g" not in coord.groups or coord.groups["g"].is_(DEAD)


@run
async def test_classic_and_consumer_protocols_do_not_mix():
    coord, _, _ = await coordinator()
    a = Member(coord)
    a.beat()
    res = await coord.join_group("g", "", None, client_id="c", client_host="/h", rebalance_timeout_ms=1000,
                                 session_timeout_ms=10000, protocol_type="consumer", protocols=[("range", b"")])
    assert res.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert coord.heartbeat("g", "x", None, 1) == E.UNKNOWN_MEMBER_ID
    # DescribeGroups reads a consumer-protocol group as Dead, as Kafka does
    err, s = coord.describe_group("g")
    assert (err, s["state"], s["members"]) == (E.NONE, DEAD, [])
    # an empty consumer-protocol group can be joined classically: it becomes a classic group
    a.beat(member_epoch=-1)
    task = coord.join_group("g", "", None, client_id="c", client_host="/h", rebalance_timeout_ms=1000,
                            session_timeout_ms=10000, protocol_type="consumer", protocols=[("range", b"")],
                            require_known_member_id=False)
    res = await task
    assert res.error == E.NONE and coord.groups["g"].modern is None
    # and a consumer-protocol member then gets Kafka's answer for a classic group
    out = Member(coord).beat()
    assert (out["error"], out["message"]) == (E.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")


@run
async def test_disabled_protocol_is_unsupported():
    coord, _, _ = await coordinator(group_coordinator_rebalance_protocols="classic")
    assert Member(coord).beat()["error"] == E.UNSUPPORTED_VERSION


@run
async def test_range_assignor_chosen_by_members():
    topics = {"a": Info("a", T1, dict.fromkeys(range(3))), "b": Info("b", T2, dict.fromkeys(range(3)))}
    coord, _, _ = await coordinator(topics)
    m1 = Member(coord, member_id="m1", topics=("a", "b"))
    m2 = Member(coord, member_id="m2", topics=("a", "b"))
    m1.beat(server_assignor="range")
    m2.beat(server_assignor="range")
    m1.beat(); m1.beat(); m2.beat()
    err, s = coord.consumer_group_describe("g")
    assert s["assignor"] == "range"
    # co-partitioned: each member has the same partition numbers of both topics
    assert m1.parts() == {(T1, 0), (T1, 1), (T2, 0), (T2, 1)}
    assert m2.parts() == {(T1, 2), (T2, 2)}

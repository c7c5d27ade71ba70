"""Online migration between the classic and the consumer group protocols (the coordinator's
``migration.py``): upgrade on a consumer-protocol join, classic members served by the new
state machine, downgrade when the last consumer-protocol member goes, the policy, errors,
timers and what the log holds."""
import asyncio

from broker.group import modern_records as MR
from broker.group import records as R
from broker.group.embedded import decode_assignment, encode_assignment
from broker.group.group import PREPARING_REBALANCE, STABLE
from protocol.errors import ErrorCode as E, NotLeaderOrFollowerError
from tests.group.support import Client, run, settle, subscription
from tests.group.test_consumer_protocol import Member, coordinator, reloaded


def parts_of(assignment: bytes) -> set:
    return {(t, p) for t, ps in decode_assignment(assignment).items() for p in ps}


async def classic_group(coord, n=2, instances=None, **kw):
    """A Stable classic group of ``n`` range members on topic t (6 partitions), split evenly."""
    clients = [Client(coord, client_id=f"c{i}", instance=instances[i] if instances else None, **kw)
               for i in range(n)]
    # all join in the same loop iteration (no MEMBER_ID_REQUIRED round), so the initial join,
    # due at once with group.initial.rebalance.delay.ms=0, sees every one of them
    tasks = [asyncio.ensure_future(c.join(require_known=False)) for c in clients]
    await settle(50)
    for t in tasks:
        r = await t
        assert r.error == E.NONE, r
    leader = next(c for c in clients if c.last_join.members)
    share = 6 // n
    plan = {c.member_id: encode_assignment({"t": list(range(i * share, (i + 1) * share))}, 0)
            for i, c in enumerate(clients)}
    syncs = [c.start_sync(plan if c is leader else None) for c in clients]
    results = [await s for s in syncs]
    assert all(r.error == E.NONE for r in results), results
    await coord.idle()
    assert coord.groups["g"].is_(STABLE)
    return clients, {c.member_id: parts_of(r.assignment) for c, r in zip(clients, results)}


async def classic_rejoin(coord, client):
    """What a classic client does after REBALANCE_IN_PROGRESS: JoinGroup, then SyncGroup."""
    r = client.join_done(await client.start_join())
    assert r.error == E.NONE, r
    assert (r.leader, r.members, r.protocol_name) == ("", [], "range")
    s = await client.start_sync()
    assert s.error == E.NONE, s
    return parts_of(s.assignment)


@run
async def test_upgrade_then_classic_members_rebalance_with_a_consumer_member():
    coord, timers, _ = await coordinator()
    (a, b), before = await classic_group(coord)
    generation = a.generation
    c = Member(coord, member_id="consumer-member-c")
    out = await c.beat()
    assert out["error"] == E.NONE, out
    group = coord.groups["g"]
    mg = group.modern
    assert mg is not None and set(mg.members) == {a.member_id, b.member_id, c.member_id}
    assert mg.members[a.member_id].classic[0] == a.session
    assert mg.members[a.member_id].epoch == generation
    assert mg.group_epoch == generation + 1 and c.epoch == generation + 1
    assert c.parts() == set()            # everything is still held by the classic members
    # the classic members learn of the rebalance through their heartbeats
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    assert b.heartbeat() == E.REBALANCE_IN_PROGRESS
    got_a = await classic_rejoin(coord, a)
    got_b = await classic_rejoin(coord, b)
    assert a.generation == b.generation == generation + 1
    await c.beat()
    await c.beat()
    mine = {(p_t, p) for (p_t, p) in c.parts()}
    assert len(mine) == 2 and len(got_a) == len(got_b) == 2
    names = {("t", p) for _, p in mine}
    assert not (names & got_a) and not (names & got_b) and not (got_a & got_b)
    assert names | got_a | got_b == {("t", p) for p in range(6)}
    # settled: nobody is asked to rejoin
    assert a.heartbeat() == E.NONE and b.heartbeat() == E.NONE
    assert before[a.member_id] | before[b.member_id] == {("t", p) for p in range(6)}


@run
async def test_upgrade_writes_a_tombstone_and_records_that_reload_with_classic_members():
    coord, timers, topics = await coordinator()
    (a, b), _ = await classic_group(coord)
    await Member(coord, member_id="m-c").beat()
    await coord.idle()
    part = coord.partition_for("g")
    recs = coord.log.read(part)
    assert (bytes(R.group_key("g")), None) in [(k, v) for _, k, v in recs]
    metas = [MR.parse_member_metadata_value(v) for _, k, v in recs
             if v is not None and MR.parse_key(k) is not None and MR.parse_key(k).kind == MR.MEMBER_METADATA]
    classic = {m.client_id: m.classic for m in metas if m.classic is not None}
    assert classic["c0"][0] == a.session and classic["c0"][1][0][0] == "range"
    # a coordinator that takes over the partition sees the same mixed group
    coord2, _ = await reloaded(coord, topics)
    await coord2.idle()
    g2 = coord2.groups["g"]
    assert g2.modern is not None
    assert {mid for mid, m in g2.modern.members.items() if m.classic is not None} == {a.member_id, b.member_id}


@run
async def test_downgrade_when_the_last_consumer_member_leaves():
    coord, timers, _ = await coordinator()
    (a, b), _ = await classic_group(coord)
    c = Member(coord, member_id="m-c")
    await c.beat()
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    await classic_rejoin(coord, a)
    await classic_rejoin(coord, b)
    epoch = coord.groups["g"].modern.group_epoch
    out = await c.beat(member_epoch=-1)
    assert out["error"] == E.NONE and out["member_epoch"] == -1
    group = coord.groups["g"]
    assert group.modern is None
    assert group.is_(PREPARING_REBALANCE) and group.generation_id == epoch
    assert set(group.members) == {a.member_id, b.member_id} and group.protocol_name == "range"
    # the classic members rejoin the classic group and the leader assigns again
    tasks = [asyncio.ensure_future(x.join()) for x in (a, b)]
    results = [await t for t in tasks]
    assert all(r.error == E.NONE for r in results)
    leader = next(x for x, r in zip((a, b), results) if r.members)
    plan = {a.member_id: encode_assignment({"t": [0, 1, 2]}), b.member_id: encode_assignment({"t": [3, 4, 5]})}
    syncs = [x.start_sync(plan if x is leader else None) for x in (a, b)]
    assert [parts_of((await s).assignment) for s in syncs] == [{("t", p) for p in range(3)},
                                                              {("t", p) for p in range(3, 6)}]
    await coord.idle()
    assert group.is_(STABLE) and group.generation_id == epoch + 1
    recs = [(k, v) for _, k, v in coord.log.read(coord.partition_for("g"))]
    assert (MR.key(MR.GROUP_METADATA, "g"), None) in recs
    assert recs[-1][0] == R.group_key("g") and recs[-1][1] is not None


@run
async def test_policy_disabled_and_upgrade_only():
    coord, _, _ = await coordinator(group_consumer_migration_policy="disabled")
    await classic_group(coord)
    out = await Member(coord).beat()
    assert (out["error"], out["message"]) == (E.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")

    coord, _, _ = await coordinator(group_consumer_migration_policy="UPGRADE")
    (a, b), _ = await classic_group(coord)
    c = Member(coord, member_id="m-c")
    assert (await c.beat())["error"] == E.NONE
    await c.beat(member_epoch=-1)
    assert coord.groups["g"].modern is not None          # no downgrade
    assert set(coord.groups["g"].modern.members) == {a.member_id, b.member_id}


@run
async def test_new_classic_member_joins_a_consumer_group():
    coord, _, _ = await coordinator()
    c = Member(coord, member_id="m-c")
    await c.beat()
    assert len(c.parts()) == 6
    d = Client(coord, client_id="d")
    r = d.join_done(await d.start_join())
    assert r.error == E.MEMBER_ID_REQUIRED
    r = d.join_done(await d.start_join())
    assert r.error == E.NONE and r.generation_id == 2 and r.protocol_type == "consumer"
    s = await d.start_sync()
    assert s.error == E.NONE and parts_of(s.assignment) == set()     # c still owns them
    await c.beat()                                                   # c revokes three
    await c.beat()
    assert len(c.parts()) == 3
    assert d.heartbeat() == E.REBALANCE_IN_PROGRESS                  # its partitions are free now
    got = await classic_rejoin(coord, d)
    assert len(got) == 3 and not ({("t", p) for _, p in c.parts()} & got)
    assert d.heartbeat() == E.NONE
    # with the policy disabled a new classic member is refused
    coord2, _, _ = await coordinator(group_consumer_migration_policy="disabled")
    await Member(coord2).beat()
    e = Client(coord2)
    assert (await e.start_join(require_known=False)).error == E.INCONSISTENT_GROUP_PROTOCOL


@run
async def test_classic_member_errors_in_a_consumer_group():
    coord, _, _ = await coordinator()
    c = Member(coord, member_id="m-c")
    await c.beat()
    d = Client(coord, client_id="d")
    await d.join()
    # wrong generation, unknown member, consumer-protocol member, wrong protocol name
    assert coord.heartbeat("g", d.member_id, None, d.generation + 5) == E.ILLEGAL_GENERATION
    assert coord.heartbeat("g", "nobody", None, d.generation) == E.UNKNOWN_MEMBER_ID
    assert coord.heartbeat("g", c.member_id, None, c.epoch) == E.UNKNOWN_MEMBER_ID
    r = await coord.sync_group("g", d.generation, d.member_id, None, {}, "consumer", "roundrobin")
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    r = await coord.sync_group("g", d.generation + 1, d.member_id, None, {})
    assert r.error == E.ILLEGAL_GENERATION
    # a protocol the classic members do not share is refused
    x = Client(coord, protocols=[("roundrobin", subscription("t"))])
    assert (await x.start_join(require_known=False)).error == E.INCONSISTENT_GROUP_PROTOCOL
    # offsets: a classic member commits with its generation id, at any version
    from broker.group import OffsetAndMetadata
    om = {("t", 0): OffsetAndMetadata(3)}
    assert await coord.commit_offsets("g", d.member_id, None, d.generation, om, api_version=8) == \
        {("t", 0): E.NONE}
    assert await coord.commit_offsets("g", d.member_id, None, d.generation + 1, om, api_version=8) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    # LeaveGroup removes it and bumps the epoch
    epoch = coord.groups["g"].modern.group_epoch
    err, errors = await d.leave()
    assert (err, errors) == (E.NONE, [E.NONE])
    assert d.member_id not in coord.groups["g"].modern.members
    assert coord.groups["g"].modern.group_epoch == epoch + 1
    assert await coord.leave_group("g", [(c.member_id, None, None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])


@run
async def test_classic_member_timers_in_a_consumer_group():
    coord, timers, _ = await coordinator()
    c = Member(coord, member_id="m-c")
    await c.beat()
    d = Client(coord, client_id="d", session=10_000, rebalance=20_000)
    await d.join()
    mg = coord.groups["g"].modern
    # no SyncGroup within the rebalance timeout: fenced
    timers.advance(20_001)
    await settle()
    assert d.member_id not in mg.members
    # session: a member that syncs but stops heartbeating is fenced after its session timeout
    e = Client(coord, client_id="e", session=10_000, rebalance=20_000)
    await e.join()
    assert (await e.start_sync()).error == E.NONE
    await c.beat()
    timers.advance(9_000)
    assert mg.members[e.member_id] is not None
    timers.advance(1_001)
    await settle()
    assert e.member_id not in mg.members


def test_classic_member_metadata_is_tagged_field_zero():
    """ConsumerGroupMemberMetadataValue v0 with its tagged ClassicMemberMetadata (tag 0), the
    bytes laid out by hand from the spec: compact strings, an int32 session timeout, a compact
    array of (name, metadata bytes) with empty tag sections."""
    m = MR.MemberMetadata(None, None, "cid", "/h", ("t",), None, 3000, None, (10000, (("range", b"\x00\x01"),)))
    inner = (b"\x00\x00\x27\x10" + b"\x02" + b"\x06range" + b"\x03\x00\x01" + b"\x00" + b"\x00")
    expected = (b"\x00\x00" + b"\x00" + b"\x00" + b"\x04cid" + b"\x03/h" + b"\x02" + b"\x02t" + b"\x00"
                + b"\x00\x00\x0b\xb8" + b"\x00" + b"\x01" + b"\x00" + bytes([len(inner)]) + inner)
    assert MR.member_metadata_value(m) == expected
    assert MR.parse_member_metadata_value(expected) == m
    plain = MR.MemberMetadata(None, None, "cid", "/h", ("t",), None, 3000, None)
    assert MR.member_metadata_value(plain) == expected[:expected.index(b"\x00\x00\x0b\xb8") + 5] + b"\x00"
    # an unknown tag is skipped
    other = expected[:-(len(inner) + 3)] + b"\x01" + b"\x05" + b"\x02" + b"\xaa\xbb"
    assert MR.parse_member_metadata_value(other) == plain


def test_embedded_subscription_versions():
    from broker.group.embedded import EmbeddedProtocolError, decode_subscription, version_of
    import pytest
    # v3: topics [t], no user data, owned [t: 1, 2], generation 7, rack "r1"
    v3 = (b"\x00\x03" + b"\x00\x00\x00\x01\x00\x01t" + b"\xff\xff\xff\xff"
          + b"\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x02"
          + b"\x00\x00\x00\x07" + b"\x00\x02r1")
    s = decode_subscription(v3)
    assert (s.version, s.topics, s.user_data, s.owned, s.generation, s.rack_id) == (3, ["t"], None, {"t": [1, 2]}, 7, "r1")
    # a v1 writer that stopped after the v0 fields, and a v0 one with user data
    s = decode_subscription(v3[:2 + 7 + 4].replace(b"\x00\x03", b"\x00\x01", 1))
    assert (s.version, s.owned, s.generation) == (1, {}, -1)
    s = decode_subscription(b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02ud")
    assert (s.topics, s.user_data) == ([], b"ud")
    assert version_of(v3) == 3
    for bad in (b"", b"\x00", b"\x00\x00\x00\x00\x00\x09", b"\xff\xff"):
        with pytest.raises(EmbeddedProtocolError):
            decode_subscription(bad)
    # an assignment at the member's version: version, [t: 0, 3], null user data
    assert encode_assignment({"t": [3, 0]}, 3) == (b"\x00\x03\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x02"
                                                  b"\x00\x00\x00\x00\x00\x00\x00\x03\xff\xff\xff\xff")
    assert decode_assignment(encode_assignment({"t": [3, 0]}, 1)) == {"t": [0, 3]}


@run
async def test_upgrade_of_a_group_completing_a_rebalance():
    """Members waiting in CompletingRebalance are told to rejoin; overlapping old assignments are
    held by one member only."""
    coord, timers, _ = await coordinator()
    (a, b), _ = await classic_group(coord)
    # a third classic member joins: a new generation is being completed, nobody has synced yet
    x = Client(coord, client_id="x")
    tx = asyncio.ensure_future(x.join())
    await settle()
    results = await asyncio.wait_for(asyncio.gather(tx, a.join(), b.join()), 5)
    assert all(r.error == E.NONE for r in results)
    group = coord.groups["g"]
    # give x the old assignment of a as well (as if it had synced a stale plan)
    group.members[x.member_id].assignment = group.members[a.member_id].assignment
    followers = [m for m, r in zip((x, a, b), results) if not r.members]
    syncs = [m.start_sync() for m in followers]      # the leader never sends its plan
    await settle()
    c = Member(coord, member_id="m-c")
    assert (await c.beat())["error"] == E.NONE
    assert [(await s).error for s in syncs] == [E.REBALANCE_IN_PROGRESS] * 2
    mg = coord.groups["g"].modern
    held = [(t, p) for m in mg.members.values() for t, ps in m.assigned.items() for p in ps]
    assert len(held) == len(set(held)) == 6


@run
async def test_static_classic_member_in_a_consumer_group():
    """A static classic member that restarts (unknown member id, same instance id) takes over its
    old member's partitions under a new member id; the old id is fenced."""
    coord, _, _ = await coordinator()
    c = Member(coord, member_id="m-c")
    await c.beat()
    s = Client(coord, client_id="s", instance="inst-1")
    r = s.join_done(await s.start_join())
    assert r.error == E.NONE                        # static members need no MEMBER_ID_REQUIRED
    await c.beat()
    await c.beat()
    assert s.heartbeat() == E.REBALANCE_IN_PROGRESS
    got = await classic_rejoin(coord, s)
    assert len(got) == 3
    old_id, old_gen = s.member_id, s.generation
    s.member_id = ""
    r = s.join_done(await s.start_join())
    assert r.error == E.NONE and r.member_id != old_id
    sync = await s.start_sync()
    assert sync.error == E.NONE and parts_of(sync.assignment) == got
    assert coord.heartbeat("g", old_id, "inst-1", old_gen) == E.FENCED_INSTANCE_ID
    assert coord.heartbeat("g", s.member_id, "inst-1", s.generation) == E.NONE
    assert coord.heartbeat("g", s.member_id, "inst-2", s.generation) == E.UNKNOWN_MEMBER_ID


@run
async def test_full_consumer_group_refuses_a_new_classic_member_but_not_a_static_rejoin():
    coord, _, _ = await coordinator(group_consumer_max_size=2)
    await Member(coord, member_id="m-c").beat()
    s = Client(coord, client_id="s", instance="inst-1")
    assert s.join_done(await s.start_join()).error == E.NONE
    x = Client(coord, client_id="x")
    assert (await x.start_join(require_known=False)).error == E.GROUP_MAX_SIZE_REACHED
    s.member_id = ""                                  # the static member restarts
    assert s.join_done(await s.start_join()).error == E.NONE


@run
async def test_no_upgrade_when_the_joining_member_would_not_fit():
    coord, _, _ = await coordinator(group_consumer_max_size=2)
    await classic_group(coord)
    out = await Member(coord).beat()
    assert out["error"] == E.GROUP_MAX_SIZE_REACHED
    assert coord.groups["g"].modern is None and coord.groups["g"].is_(STABLE)


@run
async def test_no_upgrade_when_a_classic_member_holds_the_joining_instance_id():
    coord, _, _ = await coordinator()
    (a, b), _ = await classic_group(coord, instances=("inst-1", None))
    out = await Member(coord, member_id="m-c", instance="inst-1").beat()
    assert (out["error"], out["message"]) == (
        E.UNRELEASED_INSTANCE_ID, f"Static member m-c with instance id inst-1 cannot join the group because the "
                                  f"instance id is owned by {a.member_id} member.")
    assert coord.groups["g"].modern is None and coord.groups["g"].is_(STABLE)      # still classic
    assert (await Member(coord, instance="inst-2").beat())["error"] == E.NONE
    assert coord.groups["g"].modern is not None


@run
async def test_malformed_embedded_protocol_refuses_the_upgrade_and_the_join():
    """A classic group whose members' subscriptions do not parse is not converted (Kafka's
    GROUP_ID_NOT_FOUND and message; it stays classic, nothing written); a classic JoinGroup with
    a malformed subscription into a consumer group gets UNKNOWN_SERVER_ERROR and joins nothing."""
    coord, _, _ = await coordinator()
    await classic_group(coord, protocols=[("range", b"\x00")])
    before = len(coord.log.read(coord.partition_for("g")))
    out = await Member(coord).beat()
    assert (out["error"], out["message"]) == (
        E.GROUP_ID_NOT_FOUND, "Cannot upgrade the classic group g to consumer group because the embedded consumer "
                              "protocol is malformed.")
    assert coord.groups["g"].modern is None and coord.groups["g"].is_(STABLE)
    await coord.idle()
    assert len(coord.log.read(coord.partition_for("g"))) == before

    coord, _, _ = await coordinator()
    c = Member(coord, member_id="m-c")
    await c.beat()
    bad = Client(coord, protocols=[("range", b"\x00\x00\x00\x00\x00\x09")])
    r = await bad.start_join(require_known=False)
    assert r.error == E.UNKNOWN_SERVER_ERROR
    assert set(coord.groups["g"].modern.members) == {c.member_id}


@run
async def test_classic_leave_from_a_consumer_group_is_answered_after_its_write():
    """Kafka answers a classic member's LeaveGroup in a consumer-protocol group once the
    member's tombstones are written; a failed write fails the request."""
    coord, _, _ = await coordinator()
    (a, b), _ = await classic_group(coord)
    await Member(coord, member_id="m-c").beat()
    await coord.idle()
    part = coord.partition_for("g")
    tombstone = (bytes(MR.key(MR.MEMBER_METADATA, "g", a.member_id)), None)
    coord.log.gate = asyncio.Event()
    leaving = asyncio.ensure_future(a.leave())
    await settle(20)
    assert not leaving.done()                      # held until the write completes
    assert tombstone not in [(k, v) for _, k, v in coord.log.read(part)]
    coord.log.gate.set()
    assert await leaving == (E.NONE, [E.NONE])
    assert tombstone in [(k, v) for _, k, v in coord.log.read(part)]
    # the log refuses the next write: the whole request fails, as the write's error
    coord.log.fail_with = NotLeaderOrFollowerError()
    assert await b.leave() == (E.NOT_COORDINATOR, [])

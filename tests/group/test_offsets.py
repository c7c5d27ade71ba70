"""Offset commit/fetch/delete, group deletion, listing, describing and offset expiry."""
import asyncio

from broker.group import OffsetAndMetadata
from broker.group import records as R
from broker.group.group import DEAD, EMPTY, STABLE
from broker.group.hashing import partition_for
from protocol.errors import ErrorCode as E, NotEnoughReplicasError, NotLeaderOrFollowerError, RecordListTooLargeError
from tests.group.support import Client, make_coordinator, run, settle
from tests.group.test_membership import stable_group


def om(offset, metadata="", ts=1000, epoch=-1, expire=-1):
    return OffsetAndMetadata(offset, epoch, metadata, ts, expire)


async def started(**props):
    coord, log, timers = make_coordinator(**props)
    await coord.start()
    return coord, log, timers


@run
async def test_commit_and_fetch_in_a_stable_group():
    coord, log, _ = await started()
    a, b = await stable_group(coord, 2)
    res = await coord.commit_offsets("g", a.member_id, None, a.generation,
                                     {("t", 0): om(10, "m0", epoch=3), ("t", 1): om(20)})
    assert res == {("t", 0): E.NONE, ("t", 1): E.NONE}
    err, rows = coord.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)])
    assert err == E.NONE
    got = {tp: (o.offset, o.metadata, o.leader_epoch) if o else None for tp, o, e in rows}
    assert got == {("t", 0): (10, "m0", 3), ("t", 1): (20, "", -1), ("t", 2): None}
    err, rows = coord.fetch_offsets("g", None)             # all partitions
    assert {tp for tp, _, _ in rows} == {("t", 0), ("t", 1)}
    # the records are in the group's partition, Kafka-formatted
    p = partition_for("g", log.num_partitions)
    keys = [R.parse_key(k) for _, k, _ in log.partitions[p]]
    assert R.OffsetKey("g", "t", 0) in keys and R.GroupKey("g") in keys


@run
async def test_commit_validation():
    coord, _, _ = await started()
    a, b = await stable_group(coord, 2)
    gen = a.generation
    assert (await coord.commit_offsets("g", a.member_id, None, gen + 1, {("t", 0): om(1)})) == {("t", 0): E.ILLEGAL_GENERATION}
    assert (await coord.commit_offsets("g", "ghost", None, gen, {("t", 0): om(1)})) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # a non-member cannot commit for a non-empty group
    assert (await coord.commit_offsets("g", "", None, -1, {("t", 0): om(1)})) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # unknown group with a generation: ILLEGAL_GENERATION
    assert (await coord.commit_offsets("zz", "m", None, 3, {("t", 0): om(1)})) == {("t", 0): E.ILLEGAL_GENERATION}
    # metadata too large
    big = "x" * 5000
    res = await coord.commit_offsets("g", a.member_id, None, gen, {("t", 0): om(1, big), ("t", 1): om(2)})
    assert res == {("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.NONE}
    # CompletingRebalance: REBALANCE_IN_PROGRESS
    ta, tb = a.start_join(), b.start_join()
    await settle()
    a.join_done(await ta), b.join_done(await tb)
    res = await coord.commit_offsets("g", a.member_id, None, a.generation, {("t", 0): om(1)})
    assert res == {("t", 0): E.REBALANCE_IN_PROGRESS}
    assert (await coord.commit_offsets("", "", None, -1, {("t", 0): om(1)})) == {("t", 0): E.NONE}


@run
async def test_commit_during_preparing_rebalance_is_allowed():
    coord, _, _ = await started()
    a, b = await stable_group(coord, 2)
    t = a.start_join()
    await settle()
    assert (await coord.commit_offsets("g", b.member_id, None, b.generation, {("t", 0): om(5)})) == {("t", 0): E.NONE}
    t.cancel()


@run
async def test_simple_consumer_group_via_manual_commit():
    coord, _, _ = await started()
    res = await coord.commit_offsets("simple", "", None, -1, {("t", 0): om(7)})
    assert res == {("t", 0): E.NONE}
    g = coord.groups["simple"]
    assert g.state == EMPTY and g.protocol_type is None
    err, rows = coord.fetch_offsets("simple", [("t", 0)])
    assert rows[0][1].offset == 7
    # unknown group: -1 for each requested partition, nothing for "all"
    assert coord.fetch_offsets("nope", [("t", 0)]) == (E.NONE, [(("t", 0), None, E.NONE)])
    assert coord.fetch_offsets("nope", None) == (E.NONE, [])


@run
async def test_append_failures_map_to_kafka_errors():
    coord, log, _ = await started()
    a, = await stable_group(coord, 1)
    for exc, code in [(NotLeaderOrFollowerError(), E.NOT_COORDINATOR),
                      (NotEnoughReplicasError(), E.COORDINATOR_NOT_AVAILABLE),
                      (RecordListTooLargeError(), E.INVALID_COMMIT_OFFSET_SIZE),
                      (RuntimeError("disk"), E.UNKNOWN_SERVER_ERROR)]:
        log.fail_with = exc
        res = await coord.commit_offsets("g", a.member_id, None, a.generation, {("t", 0): om(1)})
        assert res == {("t", 0): code}
    log.fail_with = None
    assert coord.fetch_offsets("g", [("t", 0)])[1][0][1] is None     # nothing applied


@run
async def test_sync_store_failure_propagates_error_and_rebalances():
    coord, log, _ = await started()
    a = Client(coord)
    await a.join()
    log.fail_with = NotLeaderOrFollowerError()
    r = await a.start_sync({a.member_id: b"x"})
    assert r.error == E.NOT_COORDINATOR
    assert coord.groups["g"].state == "PreparingRebalance"


@run
async def test_require_stable_sees_pending_commits():
    coord, log, _ = await started()
    a, = await stable_group(coord, 1)
    log.gate = asyncio.Event()
    t = asyncio.ensure_future(coord.commit_offsets("g", a.member_id, None, a.generation, {("t", 0): om(9)}))
    await settle()
    assert coord.fetch_offsets("g", [("t", 0)], require_stable=True)[1] == [(("t", 0), None, E.UNSTABLE_OFFSET_COMMIT)]
    assert coord.fetch_offsets("g", [("t", 0)], require_stable=False)[1] == [(("t", 0), None, E.NONE)]
    log.gate.set()
    assert (await t) == {("t", 0): E.NONE}
    assert coord.fetch_offsets("g", [("t", 0)], require_stable=True)[1][0][1].offset == 9


@run
async def test_offset_delete():
    coord, log, _ = await started()
    a, = await stable_group(coord, 1, topics=("t",))
    await coord.commit_offsets("g", a.member_id, None, a.generation, {("t", 0): om(1), ("u", 0): om(2)})
    err, res = await coord.delete_offsets("g", [("t", 0), ("u", 0)])
    assert err == E.NONE and res == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE}
    assert {tp for tp, _, _ in coord.fetch_offsets("g", None)[1]} == {("t", 0)}
    p = partition_for("g", log.num_partitions)
    assert (R.offset_key("g", "u", 0), None) in [(k, v) for _, k, v in log.partitions[p]]
    assert (await coord.delete_offsets("nope", [("t", 0)])) == (E.GROUP_ID_NOT_FOUND, {})
    # an Empty group: everything may go, and the group goes with its last offset
    assert await a.leave() == (E.NONE, [E.NONE])
    await settle()
    assert coord.groups["g"].state == EMPTY
    err, res = await coord.delete_offsets("g", [("t", 0)])
    assert err == E.NONE and res == {("t", 0): E.NONE}
    assert "g" not in coord.groups
    assert log.partitions[p][-1] == (len(log.partitions[p]) - 1, R.group_key("g"), None)


@run
async def test_offset_delete_non_consumer_group_is_non_empty():
    coord, _, _ = await started()
    c = Client(coord, protocols=[("assign", b"")])
    c.join_done(await c.start_join(protocol_type="connect"))
    c.join_done(await c.start_join(protocol_type="connect"))
    assert (await coord.delete_offsets("g", [("t", 0)])) == (E.NON_EMPTY_GROUP, {})


@run
async def test_delete_groups():
    coord, log, _ = await started()
    a, = await stable_group(coord, 1)
    await coord.commit_offsets("g", a.member_id, None, a.generation, {("t", 0): om(1)})
    await coord.commit_offsets("simple", "", None, -1, {("t", 0): om(1)})
    res = await coord.delete_groups(["g", "simple", "nope", ""])
    assert res == {"g": E.NON_EMPTY_GROUP, "simple": E.NONE, "nope": E.GROUP_ID_NOT_FOUND, "": E.GROUP_ID_NOT_FOUND}
    assert "simple" not in coord.groups
    assert coord.fetch_offsets("simple", None) == (E.NONE, [])
    await a.leave()
    await settle()
    assert (await coord.delete_groups(["g"])) == {"g": E.NONE}
    p = partition_for("g", log.num_partitions)
    tail = [(k, v) for _, k, v in log.partitions[p]][-2:]
    assert tail == [(R.offset_key("g", "t", 0), None), (R.group_key("g"), None)]


@run
async def test_list_and_describe_groups():
    coord, _, _ = await started()
    a, b = await stable_group(coord, 2)
    await coord.commit_offsets("simple", "", None, -1, {("t", 0): om(1)})
    err, groups = coord.list_groups()
    assert err == E.NONE and groups == [("g", "consumer", STABLE, "classic"), ("simple", "", EMPTY, "classic")]
    assert coord.list_groups(states=["stable"])[1] == [("g", "consumer", STABLE, "classic")]
    assert coord.list_groups(states=["Empty", "Dead"])[1] == [("simple", "", EMPTY, "classic")]
    assert coord.list_groups(types=["consumer"])[1] == []
    assert len(coord.list_groups(types=["Classic"])[1]) == 2
    err, s = coord.describe_group("g")
    assert err == E.NONE and s["state"] == STABLE and s["protocol_type"] == "consumer" and s["protocol"] == "range"
    by_id = {m[0]: m for m in s["members"]}
    assert by_id[a.member_id][2:4] == ("c0", "/127.0.0.1")
    assert by_id[b.member_id][5] == b"asg-c1" and by_id[b.member_id][4].startswith(b"\x00\x00")
    assert coord.describe_group("nope") == (E.NONE, {"state": DEAD, "protocol_type": "", "protocol": "", "members": [],
                                                     "not_found": "Group nope not found."})
    t = a.start_join()
    await settle()
    err, s = coord.describe_group("g")
    assert s["state"] == "PreparingRebalance" and s["protocol"] == "" and all(m[4] == b"" for m in s["members"])
    t.cancel()


@run
async def test_offsets_of_empty_groups_expire():
    coord, log, timers = await started(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    a, = await stable_group(coord, 1, session=60_000)
    await coord.commit_offsets("g", a.member_id, None, a.generation, {("t", 0): om(1, ts=timers.now_ms())})
    await coord.commit_offsets("simple", "", None, -1, {("t", 0): om(1, ts=timers.now_ms())})
    timers.advance(30_000)
    a.heartbeat()
    await settle()
    await coord.idle()
    assert "simple" in coord.groups
    timers.advance(30_000)      # simple's commit is a minute old; g is Stable, subscribed to t
    assert a.heartbeat() == E.NONE
    await settle()
    await coord.idle()
    assert "simple" not in coord.groups
    assert coord.fetch_offsets("g", [("t", 0)])[1][0][1].offset == 1
    await a.leave()
    await settle()
    timers.advance(50_000)
    await settle()
    await coord.idle()
    assert "g" in coord.groups              # Empty for only 50 s
    timers.advance(20_000)
    await settle()
    await coord.idle()
    assert "g" not in coord.groups
    p = partition_for("g", log.num_partitions)
    assert log.partitions[p][-1][1:] == (R.group_key("g"), None)


@run
async def test_explicit_retention_expires_unsubscribed_offsets():
    coord, _, timers = await started()
    a, = await stable_group(coord, 1, session=600_000)
    now = timers.now_ms()
    await coord.commit_offsets("g", a.member_id, None, a.generation,
                               {("t", 0): om(1, ts=now, expire=now + 5000), ("u", 0): om(1, ts=now, expire=now + 5000)})
    assert await coord.expire_offsets() == 0
    timers.advance(5000)
    assert await coord.expire_offsets() == 1      # u only: a Stable group keeps its subscribed topics
    assert [tp for tp, _, _ in coord.fetch_offsets("g", None)[1]] == [("t", 0)]


@run
async def test_offsets_of_deleted_topics_go():
    """Kafka's onPartitionsDeleted: a deleted topic's committed offsets leave every group, with
    tombstones; a simple group left with none goes Dead, a live group keeps its others."""
    coord, log, _ = await started()
    a, _b = await stable_group(coord, 2)
    await coord.commit_offsets("g", a.member_id, None, a.generation, {("t", 0): om(1), ("gone", 0): om(2)})
    await coord.commit_offsets("simple", "", None, -1, {("gone", 0): om(3), ("gone", 1): om(4)})
    coord.on_topics_deleted(["gone", "never-committed"])
    await settle(20)
    await coord.idle()
    assert set(coord.groups["g"].offsets) == {("t", 0)}
    assert "simple" not in coord.groups                    # Empty, no offsets left: Dead
    for gid, tps in (("g", [("gone", 0)]), ("simple", [("gone", 0), ("gone", 1)])):
        last = {}                     # key -> its last value in the group's partition
        for _, k, v in log.partitions[partition_for(gid, log.num_partitions)]:
            last[R.parse_key(k)] = v
        assert all(last[R.OffsetKey(gid, t, p)] is None for t, p in tps)       # tombstones
    err, rows = coord.fetch_offsets("g", [("gone", 0)])
    assert rows[0][1] is None

"""Write through one coordinator, load into a fresh one from the same log: same groups and offsets."""
from broker.group import OffsetAndMetadata
from broker.group import records as R
from broker.group.group import EMPTY, STABLE
from broker.group.hashing import partition_for
from protocol.errors import ErrorCode as E
from tests.group.support import Client, FakeGroupLog, make_coordinator, run, settle
from tests.group.test_membership import stable_group


async def reload(log, **props):
    coord, _, timers = make_coordinator(log, **props)
    await coord.start()
    return coord, timers


@run
async def test_round_trip_groups_and_offsets():
    coord, log, _ = make_coordinator()
    await coord.start()
    a, b = await stable_group(coord, 2)
    s = Client(coord, group="static", client_id="sc", instance="inst-1")
    await s.join()
    await s.start_sync({s.member_id: b"S"})
    await coord.commit_offsets("g", a.member_id, None, a.generation,
                               {("t", 0): OffsetAndMetadata(10, 4, "meta", 111), ("t", 1): OffsetAndMetadata(20, -1, "", 222)})
    await coord.commit_offsets("g", a.member_id, None, a.generation, {("t", 0): OffsetAndMetadata(11, 5, "m2", 333)})
    await coord.commit_offsets("simple", "", None, -1, {("x", 3): OffsetAndMetadata(7, -1, "", 444, 99999)})
    await coord.commit_offsets("gone", "", None, -1, {("x", 0): OffsetAndMetadata(1, -1, "", 1)})
    assert await coord.delete_groups(["gone"]) == {"gone": E.NONE}
    await coord.idle()

    fresh, timers = await reload(log)
    for p in range(log.num_partitions):
        fresh.on_become_leader(p)
    assert set(fresh.groups) == {"g", "static", "simple"}
    g, g0 = fresh.groups["g"], coord.groups["g"]
    assert (g.state, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id) == \
        (STABLE, g0.generation_id, "consumer", "range", g0.leader_id)
    assert {m: (x.client_id, x.client_host, x.session_timeout_ms, x.rebalance_timeout_ms, x.assignment,
                x.protocols) for m, x in g.members.items()} == \
        {m: (x.client_id, x.client_host, x.session_timeout_ms, x.rebalance_timeout_ms, x.assignment,
             x.protocols) for m, x in g0.members.items()}
    assert g.offsets == {("t", 0): OffsetAndMetadata(11, 5, "m2", 333), ("t", 1): OffsetAndMetadata(20, -1, "", 222)}
    assert g.subscribed == {"t"}
    st = fresh.groups["static"]
    assert st.static_members == {"inst-1": s.member_id} and st.get(s.member_id).assignment == b"S"
    assert fresh.groups["simple"].offsets == {("x", 3): OffsetAndMetadata(7, -1, "", 444, 99999)}
    assert fresh.groups["simple"].state == EMPTY and fresh.groups["simple"].protocol_type is None

    # loaded members keep working: heartbeat, sync (Stable: current assignment), commit
    a.coord = b.coord = s.coord = fresh
    assert a.heartbeat() == E.NONE and b.heartbeat() == E.NONE
    assert (await b.start_sync()).assignment == g0.get(b.member_id).assignment
    # a restarted static member gets back in without a rebalance
    s.member_id = ""
    r = await s.join()
    assert r.error == E.NONE and r.generation_id == st.generation_id and st.state == STABLE


@run
async def test_loaded_members_expire_without_heartbeats():
    coord, log, _ = make_coordinator()
    await coord.start()
    a, = await stable_group(coord, 1, session=10_000)
    await coord.idle()
    fresh, timers = await reload(log)
    fresh.on_become_leader(partition_for("g", log.num_partitions))
    timers.advance(10_001)
    await settle()
    await fresh.idle()
    g = fresh.groups["g"]
    assert g.state == EMPTY and g.size == 0 and g.generation_id == 2
    # and the empty generation was written
    third, _ = await reload(log)
    third.on_become_leader(partition_for("g", log.num_partitions))
    assert third.groups["g"].state == EMPTY and third.groups["g"].generation_id == 2


@run
async def test_last_value_wins_and_tombstones_delete():
    log = FakeGroupLog(1)
    v = lambda off: R.offset_value(R.OffsetValue(off, "", 1))
    log.partitions[0] = [
        (0, R.offset_key("g", "t", 0), v(1)),
        (1, R.offset_key("g", "t", 0), v(2)),
        (2, R.offset_key("g", "t", 1), v(5)),
        (3, R.offset_key("g", "t", 1), None),
        (4, R.group_key("h"), R.group_value(R.GroupValue("consumer", 3, None, None, 5, []), 2)),
        (5, R.group_key("h"), None),
        (6, R.group_key("k"), R.group_value(R.GroupValue("consumer", 1, None, None, 5, []), 0)),
        (7, b"\x00\x09junk", b"whatever"),            # unknown key version: ignored
        (8, R.offset_key("k", "t", 0), b"\x00"),     # unreadable value: ignored
    ]
    coord, _ = await reload(log, offsets_topic_num_partitions=1)
    coord.on_become_leader(0)
    assert coord.groups["g"].offsets == {("t", 0): OffsetAndMetadata(2, -1, "", 1)}
    assert "h" not in coord.groups
    assert coord.groups["k"].state == EMPTY and coord.groups["k"].generation_id == 1


@run
async def test_lazy_load_on_first_use_and_resign():
    coord, log, _ = make_coordinator()
    await coord.start()
    await coord.commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(3, -1, "", 1)})
    fresh, _ = await reload(log)
    # never told about leadership, but the log says it leads: loads on first use
    assert fresh.fetch_offsets("g", [("t", 0)])[1][0][1].offset == 3
    p = partition_for("g", log.num_partitions)
    fresh.on_resign(p)
    log.leader_of.discard(p)
    assert fresh.fetch_offsets("g", [("t", 0)]) == (E.NOT_COORDINATOR, [])


@run
async def test_written_bytes_are_kafka_versions():
    coord, log, _ = make_coordinator()
    await coord.start()
    a, = await stable_group(coord, 1)
    await coord.commit_offsets("g", a.member_id, None, a.generation, {("t", 0): OffsetAndMetadata(3, -1, "", 1)})
    await coord.commit_offsets("g", a.member_id, None, a.generation, {("t", 0): OffsetAndMetadata(3, -1, "", 1, 50)})
    p = partition_for("g", log.num_partitions)
    versions = [(k[:2], v[:2]) for _, k, v in log.partitions[p]]
    assert versions == [(b"\x00\x02", b"\x00\x03"), (b"\x00\x01", b"\x00\x03"), (b"\x00\x01", b"\x00\x01")]


@run
async def test_load_in_progress_for_a_long_partition(monkeypatch):
    """A partition longer than one load slice is read on in the background: its groups get
    COORDINATOR_LOAD_IN_PROGRESS meanwhile (Heartbeat: NONE; ListGroups: the error and the groups
    it has), other partitions are served, and a marker that lands meanwhile is applied after."""
    import broker.group.coordinator as gc
    monkeypatch.setattr(gc, "LOAD_SLICE_RECORDS", 2)
    coord, log, _ = make_coordinator()
    await coord.start()
    for i in range(10):
        await coord.commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(i, -1, "", 1)})
    other = next(f"o{i}" for i in range(100) if partition_for(f"o{i}", 4) != partition_for("g", 4))
    await coord.commit_offsets(other, "", None, -1, {("t", 0): OffsetAndMetadata(5, -1, "", 1)})
    fresh, _ = await reload(log)
    p = partition_for("g", log.num_partitions)
    fresh.on_become_leader(p)
    assert fresh.fetch_offsets("g", [("t", 0)]) == (E.COORDINATOR_LOAD_IN_PROGRESS, [])
    assert (await fresh.commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(99, -1, "", 1)})) == \
        {("t", 0): E.COORDINATOR_LOAD_IN_PROGRESS}
    assert fresh.heartbeat("g", "m", None, 1) == E.NONE
    assert fresh.describe_group("g")[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert fresh.list_groups()[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert fresh.fetch_offsets(other, [("t", 0)])[1][0][1].offset == 5        # a short partition: loaded at once
    fresh.complete_txn(7, [p], True)                                          # remembered for after loading
    await fresh.idle()
    assert fresh.fetch_offsets("g", [("t", 0)])[1][0][1].offset == 9
    assert fresh.list_groups()[0] == E.NONE
    assert fresh.loading == {}
    # resigning while loading drops the load
    again, _ = await reload(log)
    again.on_become_leader(p)
    again.on_resign(p)
    log.leader_of.discard(p)
    await again.idle()
    assert p not in again.owned and again.fetch_offsets("g", [("t", 0)]) == (E.NOT_COORDINATOR, [])

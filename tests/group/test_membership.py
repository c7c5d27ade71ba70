"""Classic group protocol: joins, rebalances, sync, heartbeats, leaves, timeouts, static members."""

import asyncio

from broker.group.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE
from protocol.errors import ErrorCode as E
from tests.group.support import Client, make_coordinator, run, settle, subscription


async def started(**props):
    coord, log, timers = make_coordinator(**props)
    await coord.start()
    return coord, log, timers


async def stable_group(coord, n=2, **kw):
    """n members joined, synced, Stable; returns the clients (clients[0] is the leader)."""
    clients = [Client(coord, client_id=f"c{i}", **kw) for i in range(n)]
    # first member alone
    for c in clients:
        r = c.join_done(await c.start_join())
        assert r.error == E.MEMBER_ID_REQUIRED
    tasks = [c.start_join() for c in clients]
    await settle()
    results = [c.join_done(await t) for c, t in zip(clients, tasks)]
    assert all(r.error == E.NONE for r in results), results
    leader = [c for c in clients if c.last_join.leader == c.member_id]
    assert len(leader) == 1
    leader = leader[0]
    others = [c for c in clients if c is not leader]
    for c in others:
        c.start_sync()
    await settle()
    assert not any(c.sync_task.done() for c in others)        # followers wait for the leader
    assignment = {c.member_id: f"asg-{c.client_id}".encode() for c in clients}
    leader.start_sync(assignment)
    await settle()
    for c in clients:
        r = await c.sync_task
        assert r.error == E.NONE and r.assignment == assignment[c.member_id]
        assert (r.protocol_type, r.protocol_name) == ("consumer", "range")
    return [leader] + others


@run
async def test_single_member_join_sync_heartbeat():
    coord, log, timers = await started()
    c = Client(coord)
    r = c.join_done(await c.start_join())
    assert r.error == E.MEMBER_ID_REQUIRED and r.member_id.startswith("c-")
    assert coord.groups["g"].state == EMPTY
    r = c.join_done(await c.start_join())
    assert r.error == E.NONE
    assert r.generation_id == 1 and r.leader == c.member_id and r.protocol_name == "range"
    assert r.members == [(c.member_id, None, subscription("t"))]
    assert coord.groups["g"].state == COMPLETING_REBALANCE
    assert c.heartbeat() == E.NONE                # heartbeats are fine while completing
    s = await c.start_sync({c.member_id: b"A"})
    assert s.error == E.NONE and s.assignment == b"A"
    assert coord.groups["g"].state == STABLE
    assert c.heartbeat() == E.NONE
    assert coord.heartbeat("g", c.member_id, None, 7) == E.ILLEGAL_GENERATION
    assert coord.heartbeat("g", "nobody", None, 1) == E.UNKNOWN_MEMBER_ID
    assert coord.heartbeat("nogroup", "x", None, 1) == E.UNKNOWN_MEMBER_ID
    assert coord.heartbeat("", "x", None, 1) == E.INVALID_GROUP_ID


@run
async def test_old_clients_join_without_member_id_round_trip():
    coord, _, _ = await started()
    c = Client(coord)
    r = c.join_done(await c.start_join(require_known=False))
    assert r.error == E.NONE and r.member_id and r.generation_id == 1


@run
async def test_second_member_triggers_rebalance_and_leader_gets_all_metadata():
    coord, log, timers = await started()
    a, = await stable_group(coord, 1)
    b = Client(coord, client_id="b", topics=("t", "u"))
    r = b.join_done(await b.start_join())
    assert r.error == E.MEMBER_ID_REQUIRED
    tb = b.start_join()
    await settle()
    assert coord.groups["g"].state == PREPARING_REBALANCE
    assert not tb.done()
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    ta = a.start_join()
    await settle()
    ra, rb = a.join_done(await ta), b.join_done(await tb)
    assert ra.generation_id == rb.generation_id == 2
    assert ra.leader == rb.leader == a.member_id          # the old leader stays leader
    assert {m[0] for m in ra.members} == {a.member_id, b.member_id}
    assert dict((m[0], m[2]) for m in ra.members)[b.member_id] == subscription("t", "u")
    assert rb.members == []
    b.start_sync()
    a.start_sync({a.member_id: b"p0,p1", b.member_id: b"p2,p3"})
    assert (await b.sync_task).assignment == b"p2,p3"
    assert (await a.sync_task).assignment == b"p0,p1"
    assert coord.groups["g"].state == STABLE


@run
async def test_sync_errors():
    coord, _, _ = await started()
    a, b = await stable_group(coord, 2)
    assert (await coord.sync_group("g", a.generation + 1, a.member_id, None, {})).error == E.ILLEGAL_GENERATION
    assert (await coord.sync_group("g", a.generation, "ghost", None, {})).error == E.UNKNOWN_MEMBER_ID
    assert (await coord.sync_group("zz", 1, "ghost", None, {})).error == E.UNKNOWN_MEMBER_ID
    r = await coord.sync_group("g", a.generation, a.member_id, None, {}, protocol_type="other")
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    r = await coord.sync_group("g", a.generation, a.member_id, None, {}, protocol_name="roundrobin")
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    # Stable: a repeated sync returns the current assignment
    r = await coord.sync_group("g", b.generation, b.member_id, None, {})
    assert r.error == E.NONE and r.assignment == b"asg-c1"
    # PreparingRebalance: REBALANCE_IN_PROGRESS
    t = a.start_join()
    await settle()
    r = await coord.sync_group("g", b.generation, b.member_id, None, {})
    assert r.error == E.REBALANCE_IN_PROGRESS
    t.cancel()


@run
async def test_protocol_vote_and_inconsistent_protocols():
    coord, _, _ = await started()
    c1 = Client(coord, client_id="a", protocols=[("range", b"1"), ("roundrobin", b"1"), ("sticky", b"1")])
    c2 = Client(coord, client_id="b", protocols=[("roundrobin", b"2"), ("range", b"2")])
    c3 = Client(coord, client_id="c", protocols=[("roundrobin", b"3"), ("sticky", b"3"), ("range", b"3")])
    for c in (c1, c2, c3):
        c.join_done(await c.start_join())
    tasks = [c.start_join() for c in (c1, c2, c3)]
    await settle()
    results = [await t for t in tasks]
    assert {r.protocol_name for r in results} == {"roundrobin"}     # 2 votes against 1
    leader = next(r for r in results if r.members)
    assert dict((m[0], m[2]) for m in leader.members)[c2.member_id] == b"2"
    # no protocol in common / another protocol type
    bad = Client(coord, client_id="d", protocols=[("sticky", b"")])
    assert (await bad.start_join()).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await bad.start_join(protocol_type="connect")).error == E.INCONSISTENT_GROUP_PROTOCOL
    empty = Client(coord, group="h", protocols=[])
    assert (await empty.start_join(require_known=False)).error == E.INCONSISTENT_GROUP_PROTOCOL


@run
async def test_a_protocol_named_twice_counts_once():
    """A member listing a protocol name twice still makes it a candidate (the first entry's
    metadata goes to the leader), and a second member with it once may join.  Counting both
    entries left no candidate and crashed the join timer; Kafka 3.9 does count both, and its join
    never completes (docs/groups.md, "Protocol")."""
    coord, _, _ = await started()
    c1 = Client(coord, client_id="a", protocols=[("range", b"first"), ("range", b"second")])
    c2 = Client(coord, client_id="b", protocols=[("range", b"b")])
    for c in (c1, c2):
        c.join_done(await c.start_join())
    tasks = [c.start_join() for c in (c1, c2)]
    await settle()
    results = [await asyncio.wait_for(t, 10) for t in tasks]
    assert [r.error for r in results] == [E.NONE, E.NONE]
    assert {r.protocol_name for r in results} == {"range"}
    leader = next(r for r in results if r.members)
    assert dict((m[0], m[2]) for m in leader.members)[c1.member_id] == b"first"


@run
async def test_invalid_session_timeout_and_unknown_member():
    coord, _, _ = await started(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=300000)
    assert (await Client(coord, session=5999).start_join()).error == E.INVALID_SESSION_TIMEOUT
    assert (await Client(coord, session=300001).start_join()).error == E.INVALID_SESSION_TIMEOUT
    c = Client(coord, session=6000)
    c.member_id = "made-up"
    assert (await c.start_join()).error == E.UNKNOWN_MEMBER_ID       # group does not exist
    c2 = Client(coord, session=6000)
    await c2.join()
    c.member_id = "made-up"
    assert (await c.start_join()).error == E.UNKNOWN_MEMBER_ID


@run
async def test_group_max_size():
    coord, _, _ = await started(group_max_size=2)
    a, b = await stable_group(coord, 2)
    c = Client(coord, client_id="x")
    r = await c.start_join(require_known=False)
    assert r.error == E.GROUP_MAX_SIZE_REACHED and r.member_id == ""
    assert coord.groups["g"].size == 2


@run
async def test_session_timeout_removes_member_and_rebalances():
    coord, _, timers = await started()
    a, b = await stable_group(coord, 2, session=10_000)
    timers.advance(6000)
    assert a.heartbeat() == E.NONE          # only a keeps heartbeating
    timers.advance(4500)                    # b's session (10 s since its sync) has expired
    g = coord.groups["g"]
    assert g.state == PREPARING_REBALANCE and not g.has(b.member_id)
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    r = a.join_done(await a.start_join())       # the only remaining member: completes at once
    assert r.error == E.NONE and r.generation_id == 2 and [m[0] for m in r.members] == [a.member_id]
    assert b.heartbeat() == E.UNKNOWN_MEMBER_ID


@run
async def test_rebalance_timeout_removes_members_that_do_not_rejoin():
    coord, _, timers = await started()
    a, b = await stable_group(coord, 2, session=10_000, rebalance=20_000)
    ta = a.start_join()      # leader rejoins: rebalance; b never rejoins (but keeps heartbeating)
    await settle()
    for _ in range(3):
        timers.advance(6000)
        assert b.heartbeat() == E.REBALANCE_IN_PROGRESS
    timers.advance(2100)                       # 20 s rebalance timeout
    await settle()
    r = a.join_done(await ta)
    assert r.error == E.NONE and r.generation_id == 2 and [m[0] for m in r.members] == [a.member_id]
    assert b.heartbeat() == E.UNKNOWN_MEMBER_ID


@run
async def test_leader_that_does_not_rejoin_is_replaced():
    coord, _, timers = await started()
    a, b = await stable_group(coord, 2, session=10_000, rebalance=5_000)
    tb = b.start_join()       # b (follower, metadata unchanged) rejoins? only leader/changed trigger
    r = await tb
    assert r.error == E.NONE and r.generation_id == 1 and r.members == []      # no rebalance
    b.protocols = [("range", subscription("t", "new"))]
    tb = b.start_join()
    await settle()
    timers.advance(5001)
    await settle()
    r = b.join_done(await tb)
    assert r.error == E.NONE and r.generation_id == 2 and r.leader == b.member_id


@run
async def test_initial_rebalance_delay_collects_members():
    coord, _, timers = await started(group_initial_rebalance_delay_ms=3000)
    a, b, c = (Client(coord, client_id=x, rebalance=10_000) for x in "abc")
    ta = a.start_join(require_known=False)
    await settle()
    assert not ta.done() and coord.groups["g"].state == PREPARING_REBALANCE
    timers.advance(2000)
    tb = b.start_join(require_known=False)
    await settle()
    timers.advance(1500)          # 3 s passed; b arrived meanwhile: extend by another delay
    await settle()
    assert not ta.done()
    tc = c.start_join(require_known=False)
    await settle()
    timers.advance(3000)
    await settle()
    assert not ta.done()           # c arrived during the extension: one more
    timers.advance(3000)
    await settle()
    results = [await t for t in (ta, tb, tc)]
    assert {r.generation_id for r in results} == {1}
    assert sum(1 for r in results if r.members) == 1
    assert len(next(r for r in results if r.members).members) == 3


@run
async def test_initial_delay_is_bounded_by_rebalance_timeout():
    coord, _, timers = await started(group_initial_rebalance_delay_ms=3000)
    a = Client(coord, client_id="a", rebalance=4000)
    ta = a.start_join(require_known=False)
    await settle()
    timers.advance(3000)
    await settle()
    assert ta.done() and (await ta).generation_id == 1


@run
async def test_pending_member_expires_after_session_timeout():
    coord, _, timers = await started()
    a, = await stable_group(coord, 1, session=60_000)
    p = Client(coord, client_id="p", session=10_000)
    r = p.join_done(await p.start_join())
    assert r.error == E.MEMBER_ID_REQUIRED and p.member_id in coord.groups["g"].pending_members
    timers.advance(10_001)
    assert p.member_id not in coord.groups["g"].pending_members
    assert coord.groups["g"].state == STABLE


@run
async def test_pending_members_hold_the_join_until_they_join_or_expire():
    coord, _, timers = await started()
    a, = await stable_group(coord, 1, session=10_000)
    p = Client(coord, client_id="p", session=10_000)
    p.join_done(await p.start_join())          # pending
    ta = a.start_join()                        # leader rejoins -> PreparingRebalance
    await settle()
    assert not ta.done()                       # waits for the pending member
    tp = p.start_join()
    await settle()
    ra, rp = await ta, await tp
    assert ra.generation_id == rp.generation_id == 2 and len(ra.members) == 2


@run
async def test_pending_sync_timeout_removes_silent_members():
    coord, _, timers = await started()
    a, b = await stable_group(coord, 2, session=10_000, rebalance=8_000)
    ta, tb = a.start_join(), b.start_join()
    # b's join is answered but b never sends SyncGroup; a (leader) does
    await settle()
    ra, _ = a.join_done(await ta), b.join_done(await tb)
    assert ra.generation_id == 2
    a.start_sync({a.member_id: b"x", b.member_id: b"y"})
    await settle()
    assert (await a.sync_task).error == E.NONE
    assert coord.groups["g"].state == STABLE
    timers.advance(5000)
    assert a.heartbeat() == E.NONE
    timers.advance(3001)
    g = coord.groups["g"]
    assert not g.has(b.member_id) and g.state == PREPARING_REBALANCE


@run
async def test_leave_group_single_and_batch():
    coord, _, _ = await started()
    a, b, c = await stable_group(coord, 3)
    assert await b.leave() == (E.NONE, [E.NONE])
    assert coord.groups["g"].state == PREPARING_REBALANCE
    err, errs = await coord.leave_group("g", [(a.member_id, None, "bye"), ("ghost", None, None), (c.member_id, None, None)])
    assert err == E.NONE and errs == [E.NONE, E.UNKNOWN_MEMBER_ID, E.NONE]
    await settle()
    g = coord.groups["g"]
    assert g.size == 0 and g.state == EMPTY and g.generation_id == 2
    assert await coord.leave_group("nogroup", [("x", None, None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
    assert (await coord.leave_group("", [("x", None, None)]))[0] == E.INVALID_GROUP_ID


@run
async def test_leave_answers_a_waiting_join_and_completes_the_rebalance():
    coord, _, _ = await started()
    a, b = await stable_group(coord, 2)
    ta = a.start_join()
    await settle()
    assert not ta.done()
    assert await b.leave() == (E.NONE, [E.NONE])     # b was the one not yet rejoined
    await settle()
    r = await ta
    assert r.error == E.NONE and r.generation_id == 2 and len(r.members) == 1


# ------------------------------------------------------------------ static membership
@run
async def test_static_member_rejoin_without_rebalance_and_fencing():
    coord, log, _ = await started()
    a, b = await stable_group(coord, 2)
    a.instance, b.instance = None, None
    # a group of two static members
    coord2, _, _ = await started()
    s1 = Client(coord2, client_id="c1", instance="i1")
    s2 = Client(coord2, client_id="c2", instance="i2")
    t1, t2 = s1.start_join(), s2.start_join()
    await settle()
    r1, r2 = s1.join_done(await t1), s2.join_done(await t2)
    assert r1.error == r2.error == E.NONE                 # static members get ids at once
    assert s1.member_id.startswith("i1-")
    leader, follower = (s1, s2) if r1.leader == s1.member_id else (s2, s1)
    follower.start_sync()
    leader.start_sync({leader.member_id: b"L", follower.member_id: b"F"})
    await settle()
    assert (await follower.sync_task).assignment == b"F"
    g = coord2.groups["g"]
    generation = g.generation_id
    # the follower restarts: unknown member id, same instance id and metadata
    old_id = follower.member_id
    follower.member_id = ""
    r = follower.join_done(await follower.start_join(skip_ok=False))
    assert r.error == E.NONE and r.member_id != old_id and r.generation_id == generation
    assert r.leader == leader.member_id and r.members == []
    assert g.state == STABLE and g.generation_id == generation
    s = await follower.start_sync()
    assert s.error == E.NONE and s.assignment == b"F"      # keeps its assignment
    # the old id is fenced
    assert coord2.heartbeat("g", old_id, follower.instance, generation) == E.FENCED_INSTANCE_ID
    assert coord2.heartbeat("g", old_id, None, generation) == E.UNKNOWN_MEMBER_ID
    assert follower.heartbeat() == E.NONE
    assert leader.heartbeat() == E.NONE


@run
async def test_static_leader_rejoin_v9_skips_assignment():
    coord, _, _ = await started()
    s1 = Client(coord, client_id="c1", instance="i1")
    r = s1.join_done(await s1.start_join())
    await s1.start_sync({s1.member_id: b"A"})
    s1.member_id = ""
    r = s1.join_done(await s1.start_join(skip_ok=True))
    assert r.error == E.NONE and r.skip_assignment and r.leader == s1.member_id
    assert [m[0] for m in r.members] == [s1.member_id]
    assert coord.groups["g"].generation_id == 1


@run
async def test_static_member_with_protocol_change_triggers_rebalance():
    coord, _, _ = await started()
    s1 = Client(coord, client_id="c1", instance="i1")
    s2 = Client(coord, client_id="c2", instance="i2", protocols=[("roundrobin", b"x"), ("range", b"x")])
    t1, t2 = s1.start_join(), s2.start_join()
    await settle()
    s1.join_done(await t1), s2.join_done(await t2)
    s2.start_sync()
    s1.start_sync({})
    await settle()
    assert coord.groups["g"].state == STABLE
    assert coord.groups["g"].protocol_name == "range"
    s1.member_id, s1.protocols = "", [("roundrobin", b"y"), ("range", b"y")]
    t1 = s1.start_join()
    await settle()
    assert coord.groups["g"].state == PREPARING_REBALANCE      # the vote now picks roundrobin
    t2 = s2.start_join()
    await settle()
    assert (await t1).protocol_name == (await t2).protocol_name == "roundrobin"


@run
async def test_static_members_are_kept_when_they_miss_a_rebalance():
    coord, _, timers = await started()
    s1 = Client(coord, client_id="c1", instance="i1", rebalance=5000)
    s2 = Client(coord, client_id="c2", instance="i2", rebalance=5000)
    t1, t2 = s1.start_join(), s2.start_join()
    await settle()
    s1.join_done(await t1), s2.join_done(await t2)
    for s in (s1, s2):
        s.start_sync({s1.member_id: b"1", s2.member_id: b"2"})
    await settle()
    leader = s1 if coord.groups["g"].leader_id == s1.member_id else s2
    tl = leader.start_join()
    await settle()
    timers.advance(5001)
    await settle()
    r = await tl
    assert r.error == E.NONE and r.generation_id == 2
    assert {m[0] for m in r.members} == {s1.member_id, s2.member_id}   # the static member stays


@run
async def test_fenced_static_member_join_and_leave_by_instance_id():
    coord, _, _ = await started()
    s1 = Client(coord, client_id="c1", instance="i1")
    s1.join_done(await s1.start_join())
    await s1.start_sync({s1.member_id: b"A"})
    impostor = Client(coord, client_id="c1", instance="i1")
    impostor.member_id = "i1-old"
    assert (await impostor.start_join()).error == E.FENCED_INSTANCE_ID
    # admin removal by instance id only (LeaveGroup v3+)
    assert await coord.leave_group("g", [("", "i1", "admin")]) == (E.NONE, [E.NONE])
    assert await coord.leave_group("g", [("", "i1", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])


@run
async def test_static_member_replaced_while_waiting_is_fenced():
    coord, _, _ = await started()
    s1 = Client(coord, client_id="c1", instance="i1")
    s2 = Client(coord, client_id="c2", instance="i2")
    t1, t2 = s1.start_join(), s2.start_join()
    await settle()
    s1.join_done(await t1), s2.join_done(await t2)
    assert coord.groups["g"].leader_id == s1.member_id
    s2.start_sync()
    await settle()
    # s2 waits for its sync; a new process with instance i2 joins: the old one is fenced
    new = Client(coord, client_id="c2", instance="i2")
    tn = new.start_join()
    await settle()
    assert (await s2.sync_task).error == E.FENCED_INSTANCE_ID
    tn.cancel()


# ------------------------------------------------------------------ cooperative (incremental) flow
@run
async def test_cooperative_two_phase_rebalance_is_just_two_generations():
    coord, _, _ = await started()
    coop = [("cooperative-sticky", subscription("t", version=1))]
    a = Client(coord, client_id="a", protocols=coop)
    r = await a.join()
    assert r.protocol_name == "cooperative-sticky"
    await a.start_sync({a.member_id: b"t0,t1,t2,t3"})
    b = Client(coord, client_id="b", protocols=coop)
    b.join_done(await b.start_join())
    tb = b.start_join()
    await settle()
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    ta = a.start_join()              # a keeps consuming (owned partitions in its metadata)
    await settle()
    ra, rb = a.join_done(await ta), b.join_done(await tb)
    assert ra.generation_id == 2
    # first phase: a revokes t2,t3; b gets nothing yet
    b.start_sync()
    a.start_sync({a.member_id: b"t0,t1", b.member_id: b""})
    assert (await b.sync_task).assignment == b""
    assert (await a.sync_task).assignment == b"t0,t1"
    # second phase: a rejoins at once after revoking
    ta = a.start_join()
    await settle()
    tb = b.start_join()
    await settle()
    ra, rb = a.join_done(await ta), b.join_done(await tb)
    assert ra.generation_id == rb.generation_id == 3
    b.start_sync()
    a.start_sync({a.member_id: b"t0,t1", b.member_id: b"t2,t3"})
    assert (await b.sync_task).assignment == b"t2,t3"
    assert coord.groups["g"].state == STABLE


# ------------------------------------------------------------------ coordinator ownership
@run
async def test_not_coordinator_and_unload_answers_waiters():
    coord, log, timers = await started()
    from broker.group.hashing import partition_for
    p = partition_for("g", log.num_partitions)
    log.leader_of.discard(p)
    assert (await Client(coord).start_join()).error == E.NOT_COORDINATOR
    log.leader_of.add(p)
    a, b = await stable_group(coord, 2)
    ta = a.start_join()
    await settle()
    coord.on_resign(p)
    assert (await ta).error == E.NOT_COORDINATOR
    assert "g" not in coord.groups
    log.leader_of.discard(p)
    assert a.heartbeat() == E.NOT_COORDINATOR


@run
async def test_not_started_or_stopped_is_coordinator_not_available():
    coord, _, _ = make_coordinator()
    assert (await Client(coord).start_join()).error == E.COORDINATOR_NOT_AVAILABLE
    await coord.start()
    await Client(coord).join()
    await coord.stop()
    assert coord.heartbeat("g", "x", None, 1) == E.COORDINATOR_NOT_AVAILABLE

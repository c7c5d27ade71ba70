"""The group API handlers at every version: requests decoded, responses encodable, per-version rules."""
from types import SimpleNamespace

import pytest

from broker.handlers import groups as H
from broker.group import records as R
from protocol.errors import ErrorCode as E
from protocol.messages import (DeleteGroupsRequest, DescribeGroupsRequest, DescribeGroupsResponse,
                               FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest,
                               HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
                               LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest,
                               OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
                               OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
                               DeleteGroupsResponse)
from tests.group.support import make_coordinator, run, subscription


class FakeController:
    def __init__(self, topics):
        self.topics_ = topics

    def topic(self, name):
        n = self.topics_.get(name)
        return None if n is None else SimpleNamespace(partitions={p: None for p in range(n)})


async def broker_with_groups(**props):
    coord, log, timers = make_coordinator(**props)
    await coord.start()
    return SimpleNamespace(groups=coord, controller=FakeController({"t": 4, "u": 1})), coord, log


def ctx(broker, version, client_id="cli"):
    return SimpleNamespace(broker=broker, api_version=version, client_id=client_id, client_host="127.0.0.1")


async def call(fn, broker, req_cls, resp_cls, version, **fields):
    """Encode the request at ``version``, decode it back (so absent fields get their defaults),
    run the handler and check the response encodes at that version."""
    req = req_cls.decode(req_cls(**fields).encode(version), version)
    resp = await fn(ctx(broker, version), req)
    return resp_cls.decode(resp.encode(version), version)


def join_fields(member_id="", instance=None):
    return dict(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=20000, member_id=member_id,
                group_instance_id=instance, protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription("t"))])


@pytest.mark.parametrize("version", range(0, 10))
@run
async def test_join_sync_heartbeat_leave_every_version(version):
    broker, coord, _ = await broker_with_groups()
    r = await call(H.join_group, broker, JoinGroupRequest, JoinGroupResponse, version, **join_fields())
    if version >= 4:
        assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id.startswith("cli-")
        r = await call(H.join_group, broker, JoinGroupRequest, JoinGroupResponse, version,
                       **join_fields(r.member_id))
    assert r.error_code == E.NONE and r.generation_id == 1 and r.leader == r.member_id
    assert r.protocol_name == "range" and [m.member_id for m in r.members] == [r.member_id]
    if version >= 7:
        assert r.protocol_type == "consumer"
    mid = r.member_id
    sync_v = min(version, 5)
    s = await call(H.sync_group, broker, SyncGroupRequest, SyncGroupResponse, sync_v, group_id="g", generation_id=1,
                   member_id=mid, protocol_type="consumer", protocol_name="range",
                   assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid, assignment=b"A")])
    assert s.error_code == E.NONE and s.assignment == b"A"
    hb_v = min(version, 4)
    h = await call(H.heartbeat, broker, HeartbeatRequest, HeartbeatResponse, hb_v, group_id="g", generation_id=1,
                   member_id=mid)
    assert h.error_code == E.NONE
    leave_v = min(version, 5)
    if leave_v >= 3:
        lv = await call(H.leave_group, broker, LeaveGroupRequest, LeaveGroupResponse, leave_v, group_id="g",
                        members=[LeaveGroupRequest.MemberIdentity(member_id=mid), LeaveGroupRequest.MemberIdentity(member_id="x")])
        assert lv.error_code == E.NONE and [m.error_code for m in lv.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    else:
        lv = await call(H.leave_group, broker, LeaveGroupRequest, LeaveGroupResponse, leave_v, group_id="g",
                        member_id=mid)
        assert lv.error_code == E.NONE
        lv = await call(H.leave_group, broker, LeaveGroupRequest, LeaveGroupResponse, leave_v, group_id="g",
                        member_id=mid)
        assert lv.error_code == E.UNKNOWN_MEMBER_ID


@run
async def test_join_errors_encode_at_old_versions():
    broker, coord, _ = await broker_with_groups()
    for v in range(0, 10):
        f = join_fields("unknown-member")
        r = await call(H.join_group, broker, JoinGroupRequest, JoinGroupResponse, v, **f)
        assert r.error_code == E.UNKNOWN_MEMBER_ID and r.generation_id == -1
    f = join_fields()
    f["session_timeout_ms"] = 1
    r = await call(H.join_group, broker, JoinGroupRequest, JoinGroupResponse, 5, **f)
    assert r.error_code == E.INVALID_SESSION_TIMEOUT


@run
async def test_join_v0_uses_session_timeout_as_rebalance_timeout():
    broker, coord, _ = await broker_with_groups()
    await call(H.join_group, broker, JoinGroupRequest, JoinGroupResponse, 0, **join_fields())
    m = next(iter(coord.groups["g"].members.values()))
    assert m.rebalance_timeout_ms == 10000 and m.client_id == "cli"


@pytest.mark.parametrize("version", range(0, 7))
@run
async def test_find_coordinator(version):
    broker, coord, log = await broker_with_groups()
    if version >= 4:
        r = await call(H.find_coordinator, broker, FindCoordinatorRequest, FindCoordinatorResponse, version,
                       key_type=0, coordinator_keys=["a", "b"])
        assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in r.coordinators] == \
            [("a", 0, "localhost", 9092, 0), ("b", 0, "localhost", 9092, 0)]
        r = await call(H.find_coordinator, broker, FindCoordinatorRequest, FindCoordinatorResponse, version,
                       key_type=1, coordinator_keys=["tx"])
        assert r.coordinators[0].error_code == E.COORDINATOR_NOT_AVAILABLE
    else:
        r = await call(H.find_coordinator, broker, FindCoordinatorRequest, FindCoordinatorResponse, version,
                       key="a", key_type=0)
        assert (r.error_code, r.node_id, r.host, r.port) == (0, 0, "localhost", 9092)
        if version >= 1:
            r = await call(H.find_coordinator, broker, FindCoordinatorRequest, FindCoordinatorResponse, version,
                           key="a", key_type=7)
            assert r.error_code == E.INVALID_REQUEST and r.node_id == -1
    assert log.created >= 1


@run
async def test_find_coordinator_without_leader():
    broker, coord, _ = await broker_with_groups()
    coord.node_lookup = lambda p: None
    r = await call(H.find_coordinator, broker, FindCoordinatorRequest, FindCoordinatorResponse, 2, key="a")
    assert r.error_code == E.COORDINATOR_NOT_AVAILABLE


@pytest.mark.parametrize("version", range(0, 10))
@run
async def test_offset_commit_and_fetch_every_version(version):
    broker, coord, _ = await broker_with_groups()
    P = OffsetCommitRequest.OffsetCommitRequestPartition
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    r = await call(H.offset_commit, broker, OffsetCommitRequest, OffsetCommitResponse, version, group_id="g",
                   generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
                   topics=[T(name="t", partitions=[P(partition_index=0, committed_offset=5, committed_leader_epoch=2,
                                                     committed_metadata="md"),
                                                   P(partition_index=9, committed_offset=5)]),
                           T(name="nope", partitions=[P(partition_index=0, committed_offset=1)])])
    errs = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
    assert errs == {("t", 0): E.NONE, ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    om = coord.groups["g"].offsets[("t", 0)]
    assert (om.offset, om.metadata, om.leader_epoch) == (5, "md", 2 if version >= 6 else -1)
    # fetch it back at the matching OffsetFetch version
    FT = OffsetFetchRequest.OffsetFetchRequestTopic
    if version >= 8:
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        FTs = OffsetFetchRequest.OffsetFetchRequestTopics
        f = await call(H.offset_fetch, broker, OffsetFetchRequest, OffsetFetchResponse, version, groups=[
            G(group_id="g", topics=[FTs(name="t", partition_indexes=[0, 1])]),
            G(group_id="g", topics=None),
            G(group_id="other", topics=None)], require_stable=True)
        got = [[(t.name, p.partition_index, p.committed_offset, p.metadata) for t in g.topics for p in t.partitions]
               for g in f.groups]
        assert got == [[("t", 0, 5, "md"), ("t", 1, -1, "")], [("t", 0, 5, "md")], []]
    else:
        f = await call(H.offset_fetch, broker, OffsetFetchRequest, OffsetFetchResponse, version, group_id="g",
                       topics=[FT(name="t", partition_indexes=[0, 1])])
        got = [(t.name, p.partition_index, p.committed_offset, p.metadata) for t in f.topics for p in t.partitions]
        assert got == [("t", 0, 5, "md"), ("t", 1, -1, "")]
        if version >= 5:
            assert f.topics[0].partitions[0].committed_leader_epoch == (2 if version >= 6 else -1)
        if version >= 2:
            f = await call(H.offset_fetch, broker, OffsetFetchRequest, OffsetFetchResponse, version, group_id="g",
                           topics=None)
            assert [(t.name, p.partition_index) for t in f.topics for p in t.partitions] == [("t", 0)]


@run
async def test_offset_commit_v2_retention_sets_expire_timestamp():
    broker, coord, _ = await broker_with_groups()
    P = OffsetCommitRequest.OffsetCommitRequestPartition
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    await call(H.offset_commit, broker, OffsetCommitRequest, OffsetCommitResponse, 2, group_id="g",
               generation_id_or_member_epoch=-1, retention_time_ms=60000,
               topics=[T(name="t", partitions=[P(partition_index=0, committed_offset=5)])])
    om = coord.groups["g"].offsets[("t", 0)]
    assert om.expire_timestamp == om.commit_timestamp + 60000


@pytest.mark.parametrize("retention", [(1 << 63) - 1, -5, -(1 << 63)])
@run
async def test_offset_commit_v2_retention_adds_as_java_longs(retention):
    """Kafka adds commit time and retention as Java longs: a huge retention wraps to a negative
    expire timestamp, which is stored (an OffsetCommitValue v1) and expires at the next check,
    like any expire timestamp in the past.  It once failed the request on a struct overflow."""
    broker, coord, _ = await broker_with_groups()
    P = OffsetCommitRequest.OffsetCommitRequestPartition
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    r = await call(H.offset_commit, broker, OffsetCommitRequest, OffsetCommitResponse, 2, group_id="g",
                   generation_id_or_member_epoch=-1, retention_time_ms=retention,
                   topics=[T(name="t", partitions=[P(partition_index=0, committed_offset=5)])])
    assert r.topics[0].partitions[0].error_code == E.NONE
    g = coord.groups["g"]
    om = g.offsets[("t", 0)]
    assert om.expire_timestamp == (om.commit_timestamp + retention + (1 << 63)) % (1 << 64) - (1 << 63)
    assert om.expire_timestamp < om.commit_timestamp
    assert R.offset_value(R.OffsetValue(5, "", om.commit_timestamp, -1, om.expire_timestamp))[:2] == b"\x00\x01"
    assert ("t", 0) in g.remove_expired_offsets(om.commit_timestamp, 7 * 24 * 3600 * 1000)


@run
async def test_offset_fetch_v1_group_error_goes_on_partitions():
    broker, coord, log = await broker_with_groups()
    coord.active = False
    FT = OffsetFetchRequest.OffsetFetchRequestTopic
    f = await call(H.offset_fetch, broker, OffsetFetchRequest, OffsetFetchResponse, 1, group_id="g",
                   topics=[FT(name="t", partition_indexes=[0])])
    assert f.topics[0].partitions[0].error_code == E.COORDINATOR_NOT_AVAILABLE
    f = await call(H.offset_fetch, broker, OffsetFetchRequest, OffsetFetchResponse, 3, group_id="g",
                   topics=[FT(name="t", partition_indexes=[0])])
    assert f.error_code == E.COORDINATOR_NOT_AVAILABLE and f.topics == []


@run
async def test_offset_delete_handler():
    broker, coord, _ = await broker_with_groups()
    await coord.commit_offsets("g", "", None, -1, {("t", 0): H.OffsetAndMetadata(1), ("u", 0): H.OffsetAndMetadata(1)})
    T = OffsetDeleteRequest.OffsetDeleteRequestTopic
    P = OffsetDeleteRequest.OffsetDeleteRequestPartition
    r = await call(H.offset_delete, broker, OffsetDeleteRequest, OffsetDeleteResponse, 0, group_id="g",
                   topics=[T(name="t", partitions=[P(partition_index=0)]), T(name="zz", partitions=[P(partition_index=0)])])
    assert r.error_code == E.NONE
    assert {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions} == \
        {("t", 0): E.NONE, ("zz", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    r = await call(H.offset_delete, broker, OffsetDeleteRequest, OffsetDeleteResponse, 0, group_id="none",
                   topics=[T(name="t", partitions=[P(partition_index=0)])])
    assert r.error_code == E.GROUP_ID_NOT_FOUND and r.topics == []


@pytest.mark.parametrize("version", range(0, 7))
@run
async def test_describe_and_list_groups(version):
    broker, coord, _ = await broker_with_groups()
    r = await call(H.join_group, broker, JoinGroupRequest, JoinGroupResponse, 3, **join_fields())
    mid = r.member_id
    await call(H.sync_group, broker, SyncGroupRequest, SyncGroupResponse, 3, group_id="g", generation_id=1,
               member_id=mid, assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid, assignment=b"A")])
    d = await call(H.describe_groups, broker, DescribeGroupsRequest, DescribeGroupsResponse, version,
                   groups=["g", "nope"], include_authorized_operations=True)
    g, n = d.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.client_host, m.member_assignment) for m in g.members] == \
        [(mid, "cli", "/127.0.0.1", b"A")]
    assert g.members[0].member_metadata == subscription("t")
    if version >= 6:        # KIP-1043
        assert (n.error_code, n.error_message, n.group_state, n.members) == \
            (E.GROUP_ID_NOT_FOUND, "Group nope not found.", "Dead", [])
        assert g.error_message is None
    else:
        assert (n.error_code, n.group_state, n.members) == (0, "Dead", [])
    if version >= 3:
        assert g.authorized_operations == H.GROUP_AUTHORIZED_OPERATIONS
    lv = min(version, 5)
    kw = {"states_filter": ["Stable"]} if lv >= 4 else {}
    lg = await call(H.list_groups, broker, ListGroupsRequest, ListGroupsResponse, lv, **kw)
    assert [(x.group_id, x.protocol_type) for x in lg.groups] == [("g", "consumer")]
    if lv >= 4:
        assert lg.groups[0].group_state == "Stable"
        lg = await call(H.list_groups, broker, ListGroupsRequest, ListGroupsResponse, lv, states_filter=["Empty"])
        assert lg.groups == []


@pytest.mark.parametrize("version", range(0, 3))
@run
async def test_delete_groups_handler(version):
    broker, coord, _ = await broker_with_groups()
    await coord.commit_offsets("s", "", None, -1, {("t", 0): H.OffsetAndMetadata(1)})
    r = await call(H.delete_groups, broker, DeleteGroupsRequest, DeleteGroupsResponse, version,
                   groups_names=["s", "nope"])
    assert [(x.group_id, x.error_code) for x in r.results] == [("s", E.NONE), ("nope", E.GROUP_ID_NOT_FOUND)]


@run
async def test_no_coordinator_answers_coordinator_not_available():
    broker = SimpleNamespace(groups=None, controller=None)
    r = await call(H.heartbeat, broker, HeartbeatRequest, HeartbeatResponse, 2, group_id="g", member_id="m")
    assert r.error_code == E.COORDINATOR_NOT_AVAILABLE
    r = await call(H.join_group, broker, JoinGroupRequest, JoinGroupResponse, 2, **join_fields())
    assert r.error_code == E.COORDINATOR_NOT_AVAILABLE

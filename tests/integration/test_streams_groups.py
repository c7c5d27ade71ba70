"""Streams groups (KIP-1071) on a broker process, with StreamsGroupHeartbeat and
StreamsGroupDescribe requests as Kafka Streams 4.2 sends them (no Python client speaks the
protocol; Java's Kafka Streams runs against it in tests/integration/test_kafka_streams.py, tier
``java``): the internal topics are created through the broker's controller with the topology's
configs, tasks move between members with revocation first, the group survives a restart,
ListGroups, DescribeGroups, OffsetCommit and DeleteGroups treat it as Kafka does, and a broker
without the protocol answers UNSUPPORTED_VERSION."""
from __future__ import annotations

import time

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (ApiVersionsRequest, CreateTopicsRequest as C, DeleteGroupsRequest,
                               DescribeConfigsRequest as DC, DescribeGroupsRequest, FindCoordinatorRequest,
                               JoinGroupRequest, ListGroupsRequest, OffsetCommitRequest as OC,
                               StreamsGroupDescribeRequest as D, StreamsGroupHeartbeatRequest as H)
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.rawkafka import SyncClient

GROUP = "wordcount"
PROPS = {"group.streams.initial.rebalance.delay.ms": 0}


def topology(epoch=0):
    return H.Topology(epoch=epoch, subtopologies=[
        H.Subtopology(subtopology_id="0", source_topics=["lines"], source_topic_regex=[], state_changelog_topics=[],
                      repartition_sink_topics=[f"{GROUP}-words-repartition"], repartition_source_topics=[],
                      copartition_groups=[]),
        H.Subtopology(subtopology_id="1", source_topics=[], source_topic_regex=[],
                      state_changelog_topics=[H.TopicInfo(
                          name=f"{GROUP}-counts-changelog", partitions=0, replication_factor=0,
                          topic_configs=[H.KeyValue(key="cleanup.policy", value="compact"),
                                         H.KeyValue(key="segment.ms", value="500")])],
                      repartition_sink_topics=[],
                      repartition_source_topics=[H.TopicInfo(
                          name=f"{GROUP}-words-repartition", partitions=0, replication_factor=0,
                          topic_configs=[H.KeyValue(key="cleanup.policy", value="delete"),
                                         H.KeyValue(key="retention.ms", value="-1")])],
                      copartition_groups=[])])


class Member:
    def __init__(self, client, member_id, process):
        self.c, self.member_id, self.process = client, member_id, process
        self.epoch = 0
        self.active: dict = {}
        self.last = None

    def beat(self, **over):
        joining = self.epoch == 0
        ids = [H.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(self.active.items()) if ps]
        fields = dict(group_id=GROUP, member_id=self.member_id, member_epoch=self.epoch, endpoint_information_epoch=0,
                      rebalance_timeout_ms=30000 if joining else -1, topology=topology() if joining else None,
                      active_tasks=None if joining else ids, standby_tasks=None if joining else [],
                      warmup_tasks=None if joining else [], process_id=self.process if joining else None)
        fields.update(over)
        r = self.last = self.c(H(**fields))
        if r.error_code == 0:
            self.epoch = r.member_epoch
            if r.active_tasks is not None:
                self.active = {t.subtopology_id: set(t.partitions) for t in r.active_tasks}
        return r

    def tasks(self):
        return {(s, p) for s, ps in self.active.items() for p in ps}


def _coordinator_ready(c):
    for _ in range(50):
        f = c(FindCoordinatorRequest(key=GROUP, key_type=0, coordinator_keys=[GROUP]), version=4)
        if f.coordinators[0].error_code == 0:
            return
        time.sleep(0.2)
    raise AssertionError("no group coordinator")


def _until(cond, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.fixture
def broker(tmp_path):
    with running(BrokerProcess(tmp_path / "b", name="broker", props=PROPS)) as b:
        yield b


def test_streams_group_on_a_broker(broker, tmp_path):
    c = SyncClient(broker.bootstrap)
    try:
        keys = {k.api_key: (k.min_version, k.max_version) for k in c(ApiVersionsRequest(), version=0).api_keys}
        assert keys[88] == (0, 0) and keys[89] == (0, 0)
        r = c(C(topics=[C.CreatableTopic(name="lines", num_partitions=4, replication_factor=1, assignments=[],
                                         configs=[])], timeout_ms=10000, validate_only=False))
        assert r.topics[0].error_code == 0
        _coordinator_ready(c)

        a = Member(c, "member-a", "process-a")
        r = a.beat()
        assert r.error_code == 0 and r.member_epoch == 2 and r.active_tasks == []
        assert [(s.status_code, s.status_detail) for s in r.status] == [
            (3, f"Internal topics are missing: {GROUP}-counts-changelog, {GROUP}-words-repartition")]

        # the broker creates the internal topics; then the member gets every task
        def ready():
            return a.beat().status == [] and len(a.tasks()) == 8
        _until(ready, "the internal topics created and the tasks assigned")
        cfg = c(DC(resources=[DC.DescribeConfigsResource(resource_type=2, resource_name=f"{GROUP}-counts-changelog",
                                                         configuration_keys=["cleanup.policy", "segment.ms"]),
                              DC.DescribeConfigsResource(resource_type=2, resource_name=f"{GROUP}-words-repartition",
                                                         configuration_keys=["retention.ms"])],
                   include_synonyms=False, include_documentation=False))
        got = {(res.resource_name, e.name): e.value for res in cfg.results for e in res.configs}
        assert got == {(f"{GROUP}-counts-changelog", "cleanup.policy"): "compact",
                       (f"{GROUP}-counts-changelog", "segment.ms"): "500",
                       (f"{GROUP}-words-repartition", "retention.ms"): "-1"}

        # a second member: a revokes half first, then b gets it
        b = Member(c, "member-b", "process-b")
        b.beat()
        assert b.tasks() == set()
        _until(lambda: (a.beat(), b.beat()) and len(a.tasks()) == len(b.tasks()) == 4,
               "the tasks split between the two members")
        assert not a.tasks() & b.tasks() and a.epoch == b.epoch

        d = c(D(group_ids=[GROUP], include_authorized_operations=False)).groups[0]
        assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch) == (0, "Stable", a.epoch, a.epoch)
        assert [(s.subtopology_id, [(t.name, t.partitions) for t in s.state_changelog_topics])
                for s in d.topology.subtopologies] == [("0", []), ("1", [(f"{GROUP}-counts-changelog", 4)])]
        members = {m.member_id: {(t.subtopology_id, p) for t in m.assignment.active_tasks for p in t.partitions}
                   for m in d.members}
        assert members == {"member-a": a.tasks(), "member-b": b.tasks()}
        assert {m.process_id for m in d.members} == {"process-a", "process-b"}

        # the group as the other group APIs see it
        lg = c(ListGroupsRequest(states_filter=[], types_filter=["streams"]), version=5)
        assert [(g.group_id, g.protocol_type, g.group_type, g.group_state) for g in lg.groups] == [
            (GROUP, "streams", "streams", "Stable")]
        dg = c(DescribeGroupsRequest(groups=[GROUP], include_authorized_operations=False), version=6).groups[0]
        assert (dg.error_code, dg.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {GROUP} is not a classic group.")
        jg = c(JoinGroupRequest(group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                                group_instance_id=None, protocol_type="consumer", protocols=[
                                    JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
                                reason=None), version=9)
        assert jg.error_code == E.INCONSISTENT_GROUP_PROTOCOL

        def commit(member, epoch, partition):
            r = c(OC(group_id=GROUP, generation_id_or_member_epoch=epoch, member_id=member, group_instance_id=None,
                     retention_time_ms=-1, topics=[OC.OffsetCommitRequestTopic(name="lines", partitions=[
                         OC.OffsetCommitRequestPartition(partition_index=partition, committed_offset=7,
                                                         committed_leader_epoch=-1, committed_metadata="")])]),
                  version=9)
            return r.topics[0].partitions[0].error_code
        mine = next(p for s, p in a.tasks() if s == "0")
        assert commit("member-a", a.epoch, mine) == 0
        assert commit("member-a", a.epoch + 1, mine) == E.STALE_MEMBER_EPOCH
        assert commit("member-x", a.epoch, mine) == E.UNKNOWN_MEMBER_ID
        assert c(DeleteGroupsRequest(groups_names=[GROUP]), version=2).results[0].error_code == E.NON_EMPTY_GROUP
    finally:
        c.close()

    # a restart: the group, its topology and its members are read back from __consumer_offsets
    broker.stop()
    broker.start()
    c = SyncClient(broker.bootstrap)
    try:
        _coordinator_ready(c)
        a.c = b.c = c
        d = c(D(group_ids=[GROUP], include_authorized_operations=False)).groups[0]
        assert (d.error_code, d.group_state, d.group_epoch) == (0, "Stable", a.epoch)
        assert {m.member_id: m.member_epoch for m in d.members} == {"member-a": a.epoch, "member-b": b.epoch}
        epoch = a.epoch
        r = a.beat()
        assert (r.error_code, r.member_epoch) == (0, epoch)
        # both leave; the empty group is deleted with its offsets
        assert a.beat(member_epoch=-1).member_epoch == -1
        assert b.beat(member_epoch=-1).member_epoch == -1
        d = c(D(group_ids=[GROUP], include_authorized_operations=False)).groups[0]
        assert (d.group_state, d.members) == ("Empty", [])
        assert c(DeleteGroupsRequest(groups_names=[GROUP]), version=2).results[0].error_code == 0
        d = c(D(group_ids=[GROUP], include_authorized_operations=False)).groups[0]
        assert (d.error_code, d.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {GROUP} not found.")
    finally:
        c.close()


def test_without_the_streams_protocol(tmp_path):
    props = dict(PROPS, **{"group.coordinator.rebalance.protocols": "classic,consumer"})
    with running(BrokerProcess(tmp_path / "b", name="broker", props=props)) as b:
        c = SyncClient(b.bootstrap)
        try:
            keys = {k.api_key for k in c(ApiVersionsRequest(), version=0).api_keys}
            assert {88, 89} <= keys                        # advertised, as Kafka 4.2 does
            r = Member(c, "m", "p").beat()
            assert r.error_code == E.UNSUPPORTED_VERSION
            d = c(D(group_ids=[GROUP], include_authorized_operations=False)).groups[0]
            assert d.error_code == E.UNSUPPORTED_VERSION
        finally:
            c.close()

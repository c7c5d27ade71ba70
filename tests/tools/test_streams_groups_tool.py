"""kafka-streams-groups.sh (Kafka 4.2's StreamsGroupCommand) against a broker serving streams
groups (KIP-1071): a group of two members made with raw StreamsGroupHeartbeats (the ``Member``
of tests/integration/test_streams_groups.py: group ``wordcount`` reading ``lines``, with the
``wordcount-words-repartition`` and ``wordcount-counts-changelog`` internal topics), offsets
committed with OffsetCommit v9 and the members' epochs; then --list, --describe (offsets,
members, state, each with --verbose), --delete refused while the members are there, and once
they left --reset-offsets (dry run, --execute, --export), --delete-offsets and --delete with
--delete-all-internal-topics.  Also kafka-streams-application-reset.sh on a streams group, which
Kafka 4.2's StreamsResetter treats like any group it cannot describe as a consumer group."""
from __future__ import annotations

import time

import pytest
from kafka import KafkaProducer

from protocol.messages import (CreateTopicsRequest as C, FindCoordinatorRequest, MetadataRequest,
                               OffsetCommitRequest as OC, OffsetFetchRequest, StreamsGroupDescribeRequest as D)
from tests.integration.test_streams_groups import Member
from tests.support.rawkafka import SyncClient
from tests.tools.conftest import tool

GROUP, SOURCE = "wordcount", "lines"
REPARTITION, CHANGELOG = f"{GROUP}-words-repartition", f"{GROUP}-counts-changelog"
PROPS = {"group.streams.initial.rebalance.delay.ms": 0}


def streams_groups(b, *args):
    return tool("kafka-streams-groups", "--bootstrap-server", b.bootstrap, *args)


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def until(cond, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def committed(c, group=GROUP) -> dict:
    r = c(OffsetFetchRequest(group_id=group, topics=None, require_stable=False), version=7)
    return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions
            if p.committed_offset >= 0}


def topics(c) -> set[str]:
    r = c(MetadataRequest(topics=None, allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                          include_topic_authorized_operations=False), version=9)
    return {t.name for t in r.topics}


def commit(c, member, partition, offset):
    r = c(OC(group_id=GROUP, generation_id_or_member_epoch=member.epoch, member_id=member.member_id,
             group_instance_id=None, retention_time_ms=-1, topics=[OC.OffsetCommitRequestTopic(name=SOURCE, partitions=[
                 OC.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset,
                                                 committed_leader_epoch=0, committed_metadata="")])]), version=9)
    assert r.topics[0].partitions[0].error_code == 0


def streams_group(b, members=("a", "b")):
    """``lines`` (2 partitions, 5 records each) and the ``wordcount`` group with these members,
    each holding its share of the 4 tasks; a SyncClient and the members."""
    c = SyncClient(b.bootstrap)
    r = c(C(topics=[C.CreatableTopic(name=SOURCE, num_partitions=2, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=10000, validate_only=False))
    assert r.topics[0].error_code == 0
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(10):
        p.send(SOURCE, value=b"%d" % i, partition=i % 2)
    p.flush()
    p.close()
    until(lambda: c(FindCoordinatorRequest(key=GROUP, key_type=0, coordinator_keys=[GROUP]),
                    version=4).coordinators[0].error_code == 0, "a group coordinator")
    ms = [Member(c, f"member-{m}", f"process-{m}") for m in members]
    ms[0].beat()
    until(lambda: ms[0].beat().status == [] and len(ms[0].tasks()) == 4, "the internal topics and the tasks")
    for m in ms[1:]:
        m.beat()
    share = 4 // len(ms)
    until(lambda: [m.beat() for m in ms] and all(len(m.tasks()) == share for m in ms), "the tasks spread")
    return c, ms


def owner(ms, partition):
    return next(m for m in ms if ("0", partition) in m.tasks())


def test_streams_groups_tool(broker_factory):
    b = broker_factory(props=PROPS)
    c, (a, m2) = streams_group(b)
    try:
        commit(c, owner([a, m2], 0), 0, 3)
        commit(c, owner([a, m2], 1), 1, 1)
        # a classic group that only holds offsets is not a streams group
        r = c(OC(group_id="plain", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                 retention_time_ms=-1, topics=[OC.OffsetCommitRequestTopic(name=SOURCE, partitions=[
                     OC.OffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                                     committed_metadata="")])]), version=8)
        assert r.topics[0].partitions[0].error_code == 0

        def alive():
            for m in (a, m2):
                assert m.beat().error_code == 0

        r = streams_groups(b, "--list")
        assert (r.rc, r.lines) == (0, [GROUP]), r
        r = streams_groups(b, "--list", "--state")
        assert r.lines == ["GROUP           STATE", "wordcount       Stable"], r
        r = streams_groups(b, "--list", "--state", "empty,notready")
        assert r.lines == ["GROUP           STATE"], r
        r = tool("kafka-groups", "--bootstrap-server", b.bootstrap, "--list", "--streams")
        assert rows(r.out) == [["GROUP", "TYPE", "PROTOCOL"], [GROUP, "Streams", "streams"]], r

        # --describe: the partitions of the active tasks, source and repartition topics
        alive()
        r = streams_groups(b, "--describe", "--group", GROUP)
        assert r.rc == 0, r
        assert r.lines[0] == f"{'GROUP':<15} {'TOPIC':<{len(REPARTITION)}} PARTITION  OFFSET-LAG", r
        assert rows(r.out)[1:] == [[GROUP, SOURCE, "0", "2"], [GROUP, SOURCE, "1", "4"],
                                   [GROUP, REPARTITION, "0", "0"], [GROUP, REPARTITION, "1", "0"]], r
        r = streams_groups(b, "--describe", "--group", GROUP, "--offsets", "--verbose")
        assert rows(r.out) == [
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LEADER-EPOCH", "LOG-END-OFFSET", "OFFSET-LAG"],
            [GROUP, SOURCE, "0", "3", "0", "5", "2"], [GROUP, SOURCE, "1", "1", "0", "5", "4"],
            [GROUP, REPARTITION, "0", "-", "-", "0", "0"], [GROUP, REPARTITION, "1", "-", "-", "0", "0"]], r

        d = c(D(group_ids=[GROUP], include_authorized_operations=False)).groups[0]
        client_id = {m.member_id: m.client_id for m in d.members}
        assert client_id.keys() == {"member-a", "member-b"}

        def tasks(m, prefix=""):
            ps = {s: [p for t, p in sorted(m.tasks()) if t == s] for s in ("0", "1")}
            return f"{prefix}ACTIVE: " + "".join(f"{s}:[{','.join(map(str, ps[s]))}]; " for s in ("0", "1") if ps[s])

        alive()
        r = streams_groups(b, "--describe", "--group", GROUP, "--members")
        assert r.lines[0].split() == ["GROUP", "MEMBER", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"], r
        got = {line.split()[1]: line for line in r.lines[1:]}
        assert got.keys() == {"member-a", "member-b"}, r
        for m in (a, m2):
            line = got[m.member_id]
            assert line.split()[:4] == [GROUP, m.member_id, m.process, client_id[m.member_id]], r
            assert line.endswith(" " + tasks(m)), r
        r = streams_groups(b, "--describe", "--group", GROUP, "--members", "--verbose")
        assert r.lines[0].split() == ["GROUP", "TARGET-ASSIGNMENT-EPOCH", "TOPOLOGY-EPOCH", "MEMBER", "MEMBER-PROTOCOL",
                                      "MEMBER-EPOCH", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"], r
        for line in r.lines[1:]:
            m = a if "member-a" in line else m2
            assert line.split()[:8] == [GROUP, str(a.epoch), "0", m.member_id, "streams", str(m.epoch), m.process,
                                        client_id[m.member_id]], r
            assert line.endswith(" " + tasks(m) + tasks(m, "TARGET-")), r

        r = streams_groups(b, "--describe", "--group", GROUP, "--state")
        assert r.lines == ["GROUP           COORDINATOR (ID)          STATE                     #MEMBERS",
                           f"wordcount       {b.bootstrap + ' (0)':<25} Stable                    2"], r
        r = streams_groups(b, "--describe", "--all-groups", "--state", "--verbose")
        assert rows(r.out) == [["GROUP", "COORDINATOR", "(ID)", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH",
                                "#MEMBERS"], [GROUP, b.bootstrap, "(0)", "Stable", str(a.epoch), str(a.epoch), "2"]], r

        r = streams_groups(b, "--describe", "--group", "nosuch")
        assert r.rc == 1 and r.err.strip() == ("Error: Executing streams group command failed due to "
                                               "org.apache.kafka.common.errors.GroupIdNotFoundException: "
                                               "Group nosuch not found."), r

        # members there: no delete, no reset
        alive()
        r = streams_groups(b, "--delete", "--group", GROUP)
        assert r.rc == 1 and r.lines == [
            "", "Error: Deletion of some streams groups failed:",
            f"* Group '{GROUP}' could not be deleted due to: org.apache.kafka.common.errors.GroupNotEmptyException: "
            f"Streams group '{GROUP}' is not EMPTY."], r
        r = streams_groups(b, "--reset-offsets", "--group", GROUP, "--all-input-topics", "--to-earliest",
                           "--execute")
        assert r.rc == 1 and (f"Error: Assignments can only be reset if the group '{GROUP}' is inactive, but the "
                              "current state is Stable.") in r.err, r
        assert committed(c) == {(SOURCE, 0): 3, (SOURCE, 1): 1}

        # the members leave
        for m in (a, m2):
            assert m.beat(member_epoch=-1).member_epoch == -1
        r = streams_groups(b, "--describe", "--group", GROUP, "--state")
        assert rows(r.out)[1][3:] == ["Empty", "0"] and f"Streams group '{GROUP}' has no active members." in r.err, r
        r = streams_groups(b, "--describe", "--group", GROUP)
        assert (r.rc, r.out) == (0, ""), r          # as Kafka's: nothing for a group without members

        r = streams_groups(b, "--reset-offsets", "--group", GROUP, "--all-input-topics", "--to-earliest",
                           "--dry-run")
        assert r.rc == 0, r
        assert r.lines[1] == "GROUP                          TOPIC                          PARTITION  NEW-OFFSET     "
        assert rows(r.out)[1:] == [[GROUP, SOURCE, "0", "0"], [GROUP, SOURCE, "1", "0"]], r
        assert committed(c) == {(SOURCE, 0): 3, (SOURCE, 1): 1}
        r = streams_groups(b, "--reset-offsets", "--group", GROUP, "--input-topic", f"{SOURCE}:1", "--shift-by", "2",
                           "--execute")
        assert r.rc == 0 and rows(r.out)[1:] == [[GROUP, SOURCE, "1", "3"]], r
        assert committed(c) == {(SOURCE, 0): 3, (SOURCE, 1): 3}
        r = streams_groups(b, "--reset-offsets", "--group", GROUP, "--input-topic", SOURCE, "--to-offset", "9",
                           "--dry-run", "--export")
        assert r.rc == 0 and r.out == f"{SOURCE},0,5\n{SOURCE},1,5\n\n", r
        assert "New offset (9) is higher than latest offset for topic partition lines-0. Value will be set to 5" \
            in r.err, r
        r = streams_groups(b, "--reset-offsets", "--group", GROUP, "--input-topic", REPARTITION, "--to-latest",
                           "--dry-run")
        assert r.rc == 1 and f"Error: One or more topics are not part of the group '{GROUP}'." in r.err, r

        r = streams_groups(b, "--delete-offsets", "--group", GROUP, "--input-topic", f"{SOURCE}:0")
        assert r.rc == 0 and r.lines == [f"Request succeeded for deleting offsets from group {GROUP}.", "",
                                         "TOPIC           PARTITION  STATUS         ",
                                         "lines           0          Successful     "], r
        assert committed(c) == {(SOURCE, 1): 3}

        assert {REPARTITION, CHANGELOG, SOURCE} <= topics(c)
        r = streams_groups(b, "--delete", "--group", GROUP, "--delete-all-internal-topics")
        assert r.rc == 0 and r.lines == [
            f"Deletion of requested streams groups ('{GROUP}') was successful.",
            f"Deletion of associated internal topics of the streams groups ('{GROUP}') was successful."], r
        assert REPARTITION not in topics(c) and CHANGELOG not in topics(c) and SOURCE in topics(c)
        r = streams_groups(b, "--list")
        assert (r.rc, r.out) == (0, ""), r
    finally:
        c.close()


def test_reset_tools_on_a_streams_group(broker_factory):
    """kafka-streams-application-reset.sh describes the application's group as a consumer group,
    as Kafka 4.2's does: a streams group is not one, so its members are neither reported nor
    removed by --force; the offset commit is then refused while they are there (exit 1, the
    internal topics kept).  Once they left it resets and deletes the internal topics; then
    kafka-streams-groups.sh --reset-offsets --execute --delete-all-internal-topics finds them gone."""
    b = broker_factory(props=PROPS)
    c, (a,) = streams_group(b, members=("a",))
    try:
        commit(c, a, 0, 4)
        commit(c, a, 1, 4)
        for extra in ((), ("--force",)):
            assert a.beat().error_code == 0
            r = tool("kafka-streams-application-reset", "--bootstrap-server", b.bootstrap, "--application-id", GROUP,
                     "--input-topics", SOURCE, *extra)
            assert r.rc == 1 and "UnknownMemberIdException" in r.err and "Force deleting" not in r.out, r
            assert committed(c) == {(SOURCE, 0): 4, (SOURCE, 1): 4}
            assert {REPARTITION, CHANGELOG} <= topics(c)
        assert a.beat(member_epoch=-1).member_epoch == -1

        r = tool("kafka-streams-application-reset", "--bootstrap-server", b.bootstrap, "--application-id", GROUP,
                 "--input-topics", SOURCE)
        assert r.rc == 0, r
        assert f"Deleting inferred internal topics [{CHANGELOG}, {REPARTITION}]" in r.lines, r
        assert committed(c) == {(SOURCE, 0): 0, (SOURCE, 1): 0}
        assert REPARTITION not in topics(c) and CHANGELOG not in topics(c)

        r = streams_groups(b, "--reset-offsets", "--all-groups", "--all-input-topics", "--to-offset", "2",
                           "--execute", "--delete-all-internal-topics")
        assert r.rc == 1 and rows(r.out)[1:] == [[GROUP, SOURCE, "0", "2"], [GROUP, SOURCE, "1", "2"]], r
        assert f"Error: Deleting internal topics for group '{GROUP}' failed because the topics do not exist." \
            in r.err, r
        assert committed(c) == {(SOURCE, 0): 2, (SOURCE, 1): 2}
    finally:
        c.close()


@pytest.mark.parametrize("args, message", [
    ([], "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, or "
         "--delete-offsets."),
    (["--describe"], "Option [describe] takes one of these options: [all-groups], [group]"),
    (["--describe", "--group", "g", "--members", "--state"],
     "Option [describe] takes at most one of these options: [members], [offsets], [state]"),
    (["--list", "--members"], "Option(s) [members] are unavailable given other options on the command line"),
    (["--list", "--group", "g"], 'Option "[group]" can\'t be used with option "[list]"'),
    (["--delete", "--group", "g", "--all-input-topics"],
     "Kafka Streams does not support topic-specific offset deletion from a streams group."),
    (["--delete-offsets", "--group", "g"],
     "Option [delete-offsets] takes the [group] and one of these options: [all-input-topics], [input-topic]"),
    (["--reset-offsets", "--group", "g", "--all-input-topics", "--to-earliest"],
     "Option [reset-offsets] takes the option: [execute] or [dry-run]"),
    (["--reset-offsets", "--group", "g", "--all-input-topics", "--to-earliest", "--to-latest", "--dry-run"],
     'Option "[to-earliest]" can\'t be used with option "[to-latest]"'),
    (["--reset-offsets", "--group", "g", "--to-earliest", "--dry-run"],
     "One of the reset scopes should be defined: --all-input-topics, --input-topic."),
    (["--reset-offsets", "--group", "g", "--all-input-topics", "--to-earliest", "--dry-run",
      "--delete-all-internal-topics"],
     "Option [delete-all-internal-topics] takes [execute] when [reset-offsets] is used."),
    (["--list", "--state", "bogus"],
     "Invalid state list 'bogus'. Valid states are: Empty, NotReady, Assigning, Reconciling, Stable, Dead"),
])
def test_usage_errors(args, message, down_port):
    r = tool("kafka-streams-groups", "--bootstrap-server", f"127.0.0.1:{down_port}", *args)
    assert r.rc == 1 and r.out == "" and r.err.splitlines()[0] == message, r

"""kafka-consumer-groups.sh as a subprocess against a real broker.

Groups are driven by kafka-python in the test process (and by our console consumer where the
walk-through needs it); every reset scenario is checked by a consumer that joins the group
afterwards and must start exactly at the new offsets."""
from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
import re
import time
import uuid

import pytest

from tests.tools.conftest import tool

pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

GROUP_APIS = (10, 11, 14, 12, 8, 9, 15, 16, 42, 47)
N = 10                    # records per partition in the standard topic
HOUR = 3600 * 1000


def name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def k(kafka, needs):
    needs(19, *GROUP_APIS)
    return kafka


def cg(kafka, *args, **kw):
    return tool("kafka-consumer-groups", "--bootstrap-server", kafka.bootstrap, *args, **kw)


def rows(out: str, first: str = "GROUP"):
    """Data rows of the tables in ``out`` (split on whitespace), headers left out."""
    return [ln.split() for ln in out.splitlines() if ln.strip() and not ln.startswith(first)]


def make_topic(kafka, partitions=3, records=N, stamps=None):
    """A topic with ``records`` records in every partition; record i of each partition has
    timestamp ``stamps[i]`` (default: now - (records - i) hours)."""
    t = name("cg")
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--create", "--topic", t,
             "--partitions", partitions)
    assert r.rc == 0, r
    now = int(time.time() * 1000)
    stamps = stamps or [now - (records - i) * HOUR for i in range(records)]
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all")
    try:
        for part in range(partitions):
            for i in range(records):
                p.send(t, f"{part}-{i}".encode(), partition=part, timestamp_ms=stamps[i])
        p.flush(30)
    finally:
        p.close(5)
    return t, stamps


def commit(kafka, group, offsets: dict):
    """Commit {(topic, partition): offset} for ``group`` as a simple (unsubscribed) consumer."""
    c = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group,
                      enable_auto_commit=False)
    try:
        c.commit({TopicPartition(t, p): oam(o) for (t, p), o in offsets.items()})
    finally:
        c.close(autocommit=False)


def oam(offset):
    if len(OffsetAndMetadata._fields) == 3:
        return OffsetAndMetadata(offset, None, -1)
    return OffsetAndMetadata(offset, None)


def subscribe(c, topic):
    """Subscribe, then fetch metadata until it has the topic: kafka-python's coordinator refreshes
    the metadata snapshot its leader assigns from only on a metadata response after subscribe(),
    and a leader whose snapshot changes after the join rejoins -- a rejoin kafka-python 3.0.12
    can lose if poll() times out while it is in flight (see tests/integration/test_groups.py)."""
    c.subscribe([topic])
    deadline = time.monotonic() + 20
    while not (topic in c.topics() and c.partitions_for_topic(topic)):
        assert time.monotonic() < deadline, f"no metadata for {topic}"
        time.sleep(0.1)


def member(kafka, group, topic, client_id="cg-test"):
    """An active member of ``group`` (subscribed to ``topic``), joined and assigned."""
    c = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group,
                      client_id=client_id, enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=10000,
                      heartbeat_interval_ms=500)
    subscribe(c, topic)
    deadline = time.monotonic() + 20
    while not c.assignment():
        assert time.monotonic() < deadline, "the consumer got no assignment"
        c.poll(200)
    return c


def starts_at(kafka, group, topic, partitions=3):
    """{partition: offset} where a new member of ``group`` starts: the offset of the first
    record it receives in each partition. A partition that stays silent after the member got
    its assignment gets one new record, which must then be the first it receives (the member
    started at the log end)."""
    c = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group,
                      enable_auto_commit=False, auto_offset_reset="latest",
                      fetch_max_wait_ms=100)
    subscribe(c, topic)
    first: dict[int, int] = {}
    marked: set[int] = set()
    try:
        deadline = time.monotonic() + 30
        assigned_at = None
        while len(first) < partitions:
            assert time.monotonic() < deadline, (first, marked)
            for tp, recs in c.poll(100).items():
                if recs:
                    first.setdefault(tp.partition, recs[0].offset)
            if assigned_at is None and len(c.assignment()) == partitions:
                assigned_at = time.monotonic()
            if assigned_at is not None and not marked and time.monotonic() - assigned_at > 1.0:
                silent = set(range(partitions)) - set(first)
                if silent:
                    p = KafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all")
                    for part in silent:
                        p.send(topic, b"marker", partition=part)
                    p.flush(30)
                    p.close(5)
                marked = silent or {-1}
        return first
    finally:
        c.close(autocommit=False)


# -- command line -------------------------------------------------------------------------------

def test_help_and_usage_errors(kafka):
    r = tool("kafka-consumer-groups", "--help")
    assert r.rc == 0 and "--reset-offsets" in r.out and "--bootstrap-server" in r.out
    b = ["--bootstrap-server", kafka.bootstrap]
    cases = [
        (["--no-such-flag"], "no-such-flag is not a recognized option"),
        ([*b], "Command must include exactly one action: --list, --describe, --delete, "
               "--reset-offsets, --delete-offsets"),
        ([*b, "--list", "--describe"], "Command must include exactly one action"),
        (["--list"], 'Missing required argument "[bootstrap-server]"'),
        ([*b, "--describe"], "Option [describe] takes one of these options: [group], "
                             "[all-groups]"),
        ([*b, "--describe", "--group", "g", "--members", "--state"],
         "Option [describe] takes at most one of these options"),
        ([*b, "--describe", "--group", "g", "--state", "stable"],
         "Option [describe] does not take a value for [state]"),
        ([*b, "--list", "--members"], "Option(s) [members] are unavailable"),
        ([*b, "--list", "--group", "g"], 'Option "[group]" can\'t be used with option "[list]"'),
        ([*b, "--describe", "--group", "g", "--all-groups"],
         'Option "[group]" can\'t be used with option "[all-groups]"'),
        ([*b, "--describe", "--group", "g", "--topic", "t"],
         'Option "[topic]" can\'t be used with option "[describe]"'),
        ([*b, "--delete", "--group", "g", "--topic", "t"],
         "The consumer does not support topic-specific offset deletion"),
        ([*b, "--delete-offsets", "--group", "g"],
         "Option [delete-offsets] takes the following options: [group], [topic]"),
        ([*b, "--reset-offsets", "--group", "g", "--topic", "t"],
         "Option '[reset-offsets]' requires one of the following scenarios"),
        ([*b, "--reset-offsets", "--group", "g", "--to-earliest"],
         "One of the reset scopes should be defined: --all-topics, --topic."),
        ([*b, "--reset-offsets", "--topic", "t", "--to-earliest"],
         "Option [reset-offsets] takes one of these options"),
        ([*b, "--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest",
          "--to-latest"], 'Option "[to-earliest]" can\'t be used with option "[to-latest]"'),
        ([*b, "--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest",
          "--dry-run", "--execute"],
         "Option [reset-offsets] only accepts one of [execute] and [dry-run]"),
        ([*b, "--reset-offsets", "--group", "g", "--topic", "t", "--shift-by", "x"],
         "Cannot parse argument 'x' of option shift-by"),
        ([*b, "--list", "--state", "sleepy"],
         "Invalid state list 'sleepy'. Valid states are: PreparingRebalance, "
         "CompletingRebalance, Stable, Dead, Empty, Assigning, Reconciling"),
        ([*b, "--describe", "--group", "g", "--execute"],
         'Option "[execute]" can\'t be used with option "[describe]"'),
    ]
    with ThreadPoolExecutor(8) as pool:       # independent subprocesses: run them together
        results = list(pool.map(lambda c: tool("kafka-consumer-groups", *c[0]), cases))
    for (args, message), r in zip(cases, results):
        assert r.rc == 1, (args, r)
        assert r.err.splitlines()[0].startswith(message), (args, r)
        assert "Traceback" not in r.err


def test_broker_down_is_one_line(down_port, fast_fail):
    t0 = time.monotonic()
    r = tool("kafka-consumer-groups", "--bootstrap-server", f"127.0.0.1:{down_port}",
             "--command-config", fast_fail, "--list", timeout=30)
    assert r.rc == 1 and time.monotonic() - t0 < 15, r
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err, r
    assert r.err.startswith("Error: Executing consumer group command failed due to "), r


# -- list ---------------------------------------------------------------------------------------

def test_list_with_state_and_type(k):
    t, _ = make_topic(k, partitions=1, records=2)
    empty, active = name("empty"), name("active")
    commit(k, empty, {(t, 0): 1})
    c = member(k, active, t)
    try:
        r = cg(k, "--list")
        assert r.rc == 0 and empty in r.lines and active in r.lines, r
        r = cg(k, "--list", "--state")
        assert r.rc == 0 and r.lines[0].split() == ["GROUP", "STATE"], r
        states = {x[0]: x[1] for x in rows(r.out)}
        assert states[empty] == "Empty" and states[active] == "Stable"
        assert re.match(rf"{re.escape(active)} +Stable +$", next(
            ln for ln in r.lines if ln.startswith(active + " ")))
        r = cg(k, "--list", "--state", "stable")
        assert r.rc == 0 and active in r.out and empty not in r.out, r
        r = cg(k, "--list", "--state", "Empty,DEAD")
        assert r.rc == 0 and empty in r.out and active not in r.out, r
        r = cg(k, "--list", "--type")
        assert r.rc == 0 and r.lines[0].split() == ["GROUP", "TYPE"], r
        assert {x[0]: x[1] for x in rows(r.out)}[active] == "Classic"
        r = cg(k, "--list", "--type", "classic", "--state")
        assert r.rc == 0 and r.lines[0].split() == ["GROUP", "TYPE", "STATE"], r
        assert {x[0]: x[1:] for x in rows(r.out)}[active] == ["Classic", "Stable"]
        r = cg(k, "--list", "--type", "consumer")
        assert r.rc == 0 and active not in r.out, r
    finally:
        c.close(autocommit=False)


# -- describe -----------------------------------------------------------------------------------

def test_describe_offsets_members_state(k):
    t, _ = make_topic(k)
    g = name("desc")
    c = member(k, g, t, client_id="describer")
    try:
        # joined but nothing committed yet: offsets and lag unknown
        r = cg(k, "--describe", "--group", g)
        assert r.rc == 0, r
        assert r.lines[0] == "" and r.lines[1].split() == [
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID"], r
        data = rows(r.out)
        assert [(x[1], x[2], x[3], x[4], x[5]) for x in data] == [
            (t, str(p), "-", str(N), "-") for p in range(3)], r
        member_id = data[0][6]
        assert member_id.startswith("describer-") and data[0][8] == "describer"
        assert "127.0.0.1" in data[0][7]
        # commit 3/5/10 as the member: lag = log end - committed
        c.commit({TopicPartition(t, 0): oam(3), TopicPartition(t, 1): oam(5),
                  TopicPartition(t, 2): oam(10)})
        r = cg(k, "--describe", "--group", g, "--offsets")
        assert r.rc == 0 and r.err == "", r
        assert [(x[2], x[3], x[4], x[5], x[6], x[8]) for x in rows(r.out)] == [
            ("0", "3", "10", "7", member_id, "describer"),
            ("1", "5", "10", "5", member_id, "describer"),
            ("2", "10", "10", "0", member_id, "describer")], r
        # column widths follow the longest consumer id, like Kafka's
        header = r.lines[1]
        assert header.index("HOST") == header.index("CONSUMER-ID") + len(member_id) + 1
        r = cg(k, "--describe", "--group", g, "--members")
        assert r.rc == 0, r
        assert r.lines[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        m = rows(r.out)
        assert len(m) == 1 and m[0][0] == g and m[0][1] == member_id and m[0][3:] == [
            "describer", "3"], r
        r = cg(k, "--describe", "--group", g, "--members", "--verbose")
        assert r.rc == 0 and r.lines[1].split()[-1] == "ASSIGNMENT", r
        assert rows(r.out)[0][-1] == f"{t}(0,1,2)", r
        r = cg(k, "--describe", "--group", g, "--state")
        assert r.rc == 0, r
        assert re.split(r"\s{2,}", r.lines[1].strip()) == [
            "GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"], r
        s = r.lines[2].split()
        assert s[0] == g and s[2] == "(0)" and s[3] in ("range", "roundrobin") and \
            s[4:] == ["Stable", "1"], r
        assert s[1] == f"127.0.0.1:{k.port}" or s[1].endswith(f":{k.port}"), r
    finally:
        c.close(autocommit=False)
    # after the member left: committed offsets stay, without an owner
    r = cg(k, "--describe", "--group", g)
    assert r.rc == 0 and f"Consumer group '{g}' has no active members." in r.err, r
    assert [(x[2], x[3], x[5], x[6], x[7], x[8]) for x in rows(r.out)] == [
        ("0", "3", "7", "-", "-", "-"), ("1", "5", "5", "-", "-", "-"),
        ("2", "10", "0", "-", "-", "-")], r
    r = cg(k, "--describe", "--group", g, "--members")
    assert r.rc == 0 and "has no active members" in r.err and rows(r.out) == [], r
    r = cg(k, "--describe", "--group", g, "--state")
    assert r.rc == 0 and r.lines[2].split()[3:] == ["-", "Empty", "0"], r


def test_describe_after_console_consumer_commits(k):
    """Our console consumer (a real group member) commits what it printed; describe shows it."""
    t, _ = make_topic(k, partitions=1)
    g = name("console")
    r = tool("kafka-console-consumer", "--bootstrap-server", k.bootstrap, "--topic", t,
             "--group", g, "--from-beginning", "--max-messages", 4, "--timeout-ms", 10000)
    assert r.rc == 0 and len(r.lines) == 4, r
    r = cg(k, "--describe", "--group", g)
    assert r.rc == 0, r
    assert [(x[1], x[2], x[3], x[4], x[5]) for x in rows(r.out)] == [(t, "0", "4", str(N), "6")]


def test_describe_missing_several_and_all_groups(k):
    t, _ = make_topic(k, partitions=1, records=3)
    g1, g2 = name("a"), name("b")
    commit(k, g1, {(t, 0): 1})
    commit(k, g2, {(t, 0): 2})
    missing = name("nope")
    r = cg(k, "--describe", "--group", missing)
    assert r.rc == 1 and r.err.strip() == f"Error: Consumer group '{missing}' does not exist.", r
    for args in (["--members"], ["--state"]):
        r = cg(k, "--describe", "--group", missing, *args)
        assert r.rc == 1 and f"Consumer group '{missing}' does not exist." in r.err, r
    r = cg(k, "--describe", "--group", g2, "--group", g1)
    assert r.rc == 0, r
    got = [(x[0], x[3]) for x in rows(r.out)]
    assert got == [(g1, "1"), (g2, "2")], r          # groups in name order, one table each
    assert r.out.count("\nGROUP ") == 2
    r = cg(k, "--describe", "--all-groups")
    assert r.rc == 0 and (g1, "1") in [(x[0], x[3]) for x in rows(r.out)], r
    r = cg(k, "--describe", "--all-groups", "--state")
    assert r.rc == 0 and {g1, g2} <= {x[0] for x in rows(r.out)}, r


# -- delete ---------------------------------------------------------------------------------------

def test_delete_groups(k):
    t, _ = make_topic(k, partitions=1, records=2)
    g1, g2, active = name("d1"), name("d2"), name("dact")
    commit(k, g1, {(t, 0): 1})
    commit(k, g2, {(t, 0): 1})
    r = cg(k, "--delete", "--group", g1)
    assert r.rc == 0 and r.out.strip() == \
        f"Deletion of requested consumer groups ('{g1}') was successful.", r
    assert g1 not in cg(k, "--list").lines
    r = cg(k, "--describe", "--group", g1)
    assert r.rc == 1 and "does not exist" in r.err
    c = member(k, active, t)
    try:
        r = cg(k, "--delete", "--group", active)
        assert r.rc == 1, r
        assert r.err.splitlines() == [
            "Error: Deletion of some consumer groups failed:",
            f"* Group '{active}' could not be deleted due to: "
            "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty."], r
        r = cg(k, "--delete", "--group", g2, "--group", active)
        assert r.rc == 1 and f"* Group '{active}' could not be deleted" in r.err, r
        assert f"These consumer groups were deleted successfully: '{g2}'" in r.out, r
        assert active in cg(k, "--list").lines
    finally:
        c.close(autocommit=False)
    missing = name("gone")
    r = cg(k, "--delete", "--group", missing)
    assert r.rc == 1 and "GroupIdNotFoundException: The group id does not exist." in r.err, r


def test_delete_offsets(k):
    t, _ = make_topic(k)
    other, _ = make_topic(k, partitions=1, records=2)
    g = name("doff")
    commit(k, g, {(t, 0): 1, (t, 1): 2, (t, 2): 3, (other, 0): 1})
    r = cg(k, "--delete-offsets", "--group", g, "--topic", f"{t}:0,2")
    assert r.rc == 0 and r.lines[0] == f"Request succeeded for deleting offsets from group {g}.", r
    assert rows(r.out, "TOPIC")[1:] == [[t, "0", "Successful"], [t, "2", "Successful"]], r
    r = cg(k, "--describe", "--group", g)
    assert sorted((x[1], x[2], x[3]) for x in rows(r.out)) == sorted(
        [(t, "1", "2"), (other, "0", "1")]), r
    r = cg(k, "--delete-offsets", "--group", g, "--topic", other)
    assert r.rc == 0 and rows(r.out, "TOPIC")[1:] == [[other, "0", "Successful"]], r
    r = cg(k, "--delete-offsets", "--group", g, "--topic", "no-such-topic-x")
    assert r.rc == 1 and "partition-level error" in r.err, r
    assert "UnknownTopicOrPartitionException" in r.out and "no-such-topic-x" in r.out, r
    # an active member subscribed to the topic keeps its offsets
    c = member(k, g, t)
    try:
        r = cg(k, "--delete-offsets", "--group", g, "--topic", t)
        assert r.rc == 1, r
        assert "GroupSubscribedToTopicException" in r.out, r
    finally:
        c.close(autocommit=False)
    r = cg(k, "--delete-offsets", "--group", name("none"), "--topic", t)
    assert r.rc == 1 and "does not exist" in r.err, r


# -- reset-offsets --------------------------------------------------------------------------------

def utc(ms: int) -> str:
    d = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}"


def reset_table(out: str):
    return {(x[1], int(x[2])): int(x[3]) for x in rows(out) if len(x) == 4}


@pytest.mark.parametrize("spec", ["to-earliest", "to-latest", "to-current", "to-offset",
                                  "to-offset-clamped", "shift-by", "shift-by-clamped",
                                  "to-datetime", "to-datetime-zone", "by-duration",
                                  "from-file"])
def test_reset_then_consume(k, spec, tmp_path):
    t, stamps = make_topic(k)
    g = name(spec)
    commit(k, g, {(t, 0): 5, (t, 1): 5, (t, 2): 5})
    args, expect = {
        "to-earliest": (["--to-earliest"], 0),
        "to-latest": (["--to-latest"], N),
        "to-current": (["--to-current"], 5),
        "to-offset": (["--to-offset", 7], 7),
        "to-offset-clamped": (["--to-offset", 99], N),
        "shift-by": (["--shift-by", -2], 3),
        "shift-by-clamped": (["--shift-by", -9], 0),
        "to-datetime": (["--to-datetime", utc(stamps[3])], 3),
        "to-datetime-zone": (["--to-datetime", utc(stamps[3] + 2 * HOUR) + "+02:00"], 3),
        "by-duration": (["--by-duration", "PT5H30M"], 5),    # records are 10h..1h old
        "from-file": (["--from-file", tmp_path / "plan.csv"], 4),
    }[spec]
    (tmp_path / "plan.csv").write_text("".join(f"{t},{p},4\n" for p in range(3)))
    r = cg(k, "--reset-offsets", "--group", g, "--topic", t, *args, "--dry-run")
    assert r.rc == 0, r
    assert r.lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], r
    assert reset_table(r.out) == {(t, p): expect for p in range(3)}, r
    if spec.endswith("clamped"):
        assert "Value will be set to" in r.err, r
    r = cg(k, "--describe", "--group", g)                     # dry run: nothing changed
    assert [x[3] for x in rows(r.out)] == ["5"] * 3, r
    r = cg(k, "--reset-offsets", "--group", g, "--topic", t, *args, "--execute")
    assert r.rc == 0 and reset_table(r.out) == {(t, p): expect for p in range(3)}, r
    assert starts_at(k, g, t) == {p: expect for p in range(3)}
    r = cg(k, "--describe", "--group", g)
    assert [(x[2], x[3]) for x in rows(r.out)] == [(str(p), str(expect)) for p in range(3)], r
    assert all(int(x[5]) == int(x[4]) - expect for x in rows(r.out)), r


def test_reset_scopes_and_default_dry_run(k):
    t, _ = make_topic(k)
    other, _ = make_topic(k, partitions=1)
    g = name("scope")
    commit(k, g, {(t, 0): 5, (t, 1): 5, (t, 2): 5, (other, 0): 5})
    r = cg(k, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest")
    assert r.rc == 0 and "WARN: No action will be performed as the --execute option is " \
                         "missing." in r.err, r
    assert starts_at(k, g, t) == {0: 5, 1: 5, 2: 5}
    r = cg(k, "--reset-offsets", "--group", g, "--topic", f"{t}:0,2", "--to-offset", 2,
           "--execute")
    assert r.rc == 0 and reset_table(r.out) == {(t, 0): 2, (t, 2): 2}, r
    assert starts_at(k, g, t) == {0: 2, 1: 5, 2: 2}
    r = cg(k, "--reset-offsets", "--group", g, "--topic", f"{t}:1", "--topic", other,
           "--shift-by", 3, "--execute")
    assert r.rc == 0 and reset_table(r.out) == {(t, 1): 8, (other, 0): 8}, r
    r = cg(k, "--reset-offsets", "--group", g, "--all-topics", "--to-latest", "--execute")
    assert r.rc == 0 and reset_table(r.out) == {(t, 0): N, (t, 1): N, (t, 2): N,
                                                 (other, 0): N}, r
    assert starts_at(k, g, other, partitions=1) == {0: N}
    r = cg(k, "--reset-offsets", "--group", g, "--topic", f"{t}:7", "--to-earliest")
    assert r.rc == 1 and f'The partitions "{t}-7" do not exist' in r.err, r
    r = cg(k, "--reset-offsets", "--group", g, "--topic", "no-such-topic-y", "--to-earliest")
    assert r.rc == 1 and "UnknownTopicOrPartitionException" in r.err, r
    r = cg(k, "--reset-offsets", "--group", g, "--topic", f"{t}:x", "--to-earliest",
           "--dry-run")
    assert r.rc == 1 and r.err.startswith("Invalid partition 'x' specified in topic arg"), r


def test_reset_refuses_active_group(k):
    t, _ = make_topic(k, partitions=1)
    g = name("busy")
    commit(k, g, {(t, 0): 4})
    c = member(k, g, t)
    try:
        r = cg(k, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest", "--execute")
        assert r.rc == 1, r
        assert f"Error: Assignments can only be reset if the group '{g}' is inactive, but the " \
               f"current state is Stable." in r.err, r
        assert reset_table(r.out) == {}, r
    finally:
        c.close(autocommit=False)
    assert starts_at(k, g, t, partitions=1) == {0: 4}


def test_reset_shift_without_commit_and_new_group(k):
    t, _ = make_topic(k, partitions=2)
    g = name("fresh")
    r = cg(k, "--reset-offsets", "--group", g, "--topic", t, "--shift-by", 1, "--dry-run")
    assert r.rc == 1 and r.err.startswith(
        f"Cannot shift offset for partition {t}-0 since there is no current committed offset"), r
    # a group that does not exist yet gets its offsets (Kafka treats it as inactive)
    r = cg(k, "--reset-offsets", "--group", g, "--topic", t, "--to-offset", 6, "--execute")
    assert r.rc == 0 and reset_table(r.out) == {(t, 0): 6, (t, 1): 6}, r
    assert g in cg(k, "--list").lines
    assert starts_at(k, g, t, partitions=2) == {0: 6, 1: 6}
    # --to-current where nothing is committed: the log end
    g2 = name("fresh2")
    commit(k, g2, {(t, 0): 3})
    r = cg(k, "--reset-offsets", "--group", g2, "--topic", t, "--to-current")
    assert r.rc == 0 and reset_table(r.out) == {(t, 0): 3, (t, 1): N}, r


def test_reset_export_and_from_file_several_groups(k, tmp_path):
    t, _ = make_topic(k, partitions=2)
    g1, g2 = sorted([name("x1"), name("x2")])
    commit(k, g1, {(t, 0): 1, (t, 1): 1})
    commit(k, g2, {(t, 0): 2, (t, 1): 2})
    r = cg(k, "--reset-offsets", "--group", g1, "--topic", t, "--shift-by", 2, "--export")
    assert r.rc == 0 and r.out == f"{t},0,3\n{t},1,3\n\n", r
    plan = tmp_path / "one.csv"
    plan.write_text(r.out)
    r = cg(k, "--reset-offsets", "--group", g1, "--from-file", plan, "--execute")
    assert r.rc == 0 and reset_table(r.out) == {(t, 0): 3, (t, 1): 3}, r
    r = cg(k, "--reset-offsets", "--group", g1, "--group", g2, "--topic", t, "--to-offset", 7,
           "--export")
    assert r.rc == 0 and r.out == "".join(f"{g},{t},{p},7\n" for g in (g1, g2)
                                          for p in (0, 1)) + "\n", r
    plan = tmp_path / "two.csv"
    plan.write_text(f"{g1},{t},0,8\n{g2},{t},1,9\n")
    r = cg(k, "--reset-offsets", "--group", g1, "--group", g2, "--from-file", plan, "--execute")
    assert r.rc == 0, r
    assert {(x[0], x[1], int(x[2])): int(x[3]) for x in rows(r.out)} == {
        (g1, t, 0): 8, (g2, t, 1): 9}, r
    assert starts_at(k, g1, t, partitions=2) == {0: 8, 1: 3}
    assert starts_at(k, g2, t, partitions=2) == {0: 2, 1: 9}
    r = cg(k, "--reset-offsets", "--group", name("other"), "--from-file", plan)
    assert r.rc == 1 and "No reset plan for group" in r.err, r


def test_reset_bad_datetime_and_duration(k):
    t, _ = make_topic(k, partitions=1, records=1)
    g = name("bad")
    r = cg(k, "--reset-offsets", "--group", g, "--topic", t, "--to-datetime", "yesterday")
    assert r.rc == 1 and "It does not contain a 'T' according to ISO8601 format" in r.err, r
    r = cg(k, "--reset-offsets", "--group", g, "--topic", t, "--to-datetime",
           "2024-13-01T00:00:00.000")
    assert r.rc == 1 and 'Unparseable date: "2024-13-01T00:00:00.000"' in r.err, r
    r = cg(k, "--reset-offsets", "--group", g, "--topic", t, "--by-duration", "1 hour",
           "--dry-run")
    assert r.rc == 1 and "Text cannot be parsed to a Duration" in r.err, r
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


def test_reset_to_datetime_after_last_record_falls_back_to_log_end(k):
    t, stamps = make_topic(k, partitions=1, records=3)
    g = name("late")
    r = cg(k, "--reset-offsets", "--group", g, "--topic", t, "--to-datetime",
           utc(stamps[-1] + HOUR), "--execute")
    assert r.rc == 0 and f"Warn: Partition 0 from topic {t} is empty. Falling back to " \
                         f"latest known offset." in r.out, r
    assert reset_table(r.out) == {(t, 0): 3}, r

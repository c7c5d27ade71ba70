"""kafka-streams-application-reset.sh against a real broker: a Streams-like application (its group
is the application id) that read and committed its input with kafka-python; the tool refuses while
a member is active (or removes it with --force), resets the input topic's committed offsets
(earliest by default, --to-offset with Kafka's clamping message, --shift-by), moves intermediate
topics to their end, deletes the application's internal topics (and only those), and with
--dry-run changes nothing.  Output lines and exit statuses are Kafka's."""
from __future__ import annotations

import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from tests.tools.conftest import tool


@pytest.fixture
def app(kafka):
    a = "app-" + uuid.uuid4().hex[:6]
    names = {"input": f"in-{a}", "mid": f"mid-{a}", "changelog": f"{a}-store-changelog",
             "repartition": f"{a}-KSTREAM-AGG-0000000003-repartition", "other": f"{a}-output"}
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    admin.create_topics([NewTopic(t, 2 if k == "input" else 1, 1) for k, t in names.items()])
    admin.close()
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    for i in range(10):
        p.send(names["input"], value=b"%d" % i, partition=i % 2)
        p.send(names["mid"], value=b"m%d" % i)
    p.flush()
    p.close()
    c = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=a, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    c.assign([TopicPartition(names["input"], 0), TopicPartition(names["input"], 1)])
    got = 0
    while got < 10:
        got += sum(len(v) for v in c.poll(timeout_ms=2000).values())
    c.commit()
    c.close()
    names["id"] = a
    return names


def committed(kafka, group, topic, partitions):
    c = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return [c.committed(TopicPartition(topic, p)) for p in range(partitions)]
    finally:
        c.close()


def topics(kafka):
    a = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        return set(a.list_topics())
    finally:
        a.close()


def reset(kafka, app, *args):
    return tool("kafka-streams-application-reset", "--bootstrap-server", kafka.bootstrap, "--application-id",
                app["id"], *args)


def test_dry_run_then_reset(kafka, app):
    a, inp = app["id"], app["input"]
    assert committed(kafka, a, inp, 2) == [5, 5]
    r = reset(kafka, app, "--input-topics", inp, "--intermediate-topics", app["mid"], "--dry-run")
    assert r.rc == 0, r
    assert r.lines == [
        "----Dry run displays the actions which will be performed when running Streams Reset Tool----",
        f"Reset-offsets for input topics [{inp}]",
        f"Seek-to-end for intermediate topics [{app['mid']}]",
        f"Following input topics offsets will be reset to (for consumer group {a})",
        f"Topic: {inp} Partition: 0 Offset: 0",
        f"Topic: {inp} Partition: 1 Offset: 0",
        f"Following intermediate topics offsets will be reset to end (for consumer group {a})",
        f"Topic: {app['mid']}",
        "Done.",
        f"Deleting inferred internal topics [{app['repartition']}, {app['changelog']}]",
        "Done."], r
    assert committed(kafka, a, inp, 2) == [5, 5]
    assert {app["changelog"], app["repartition"]} <= topics(kafka)

    r = reset(kafka, app, "--input-topics", inp, "--intermediate-topics", app["mid"])
    assert r.rc == 0 and r.lines[-2] == f"Deleting inferred internal topics [{app['repartition']}, " \
                                        f"{app['changelog']}]", r
    assert committed(kafka, a, inp, 2) == [0, 0]
    assert committed(kafka, a, app["mid"], 1) == [10]
    left = topics(kafka)
    assert app["changelog"] not in left and app["repartition"] not in left
    assert {inp, app["mid"], app["other"]} <= left          # input, intermediate and output topics stay


def test_offsets_options_and_refusals(kafka, app):
    a, inp = app["id"], app["input"]
    r = reset(kafka, app, "--input-topics", inp, "--to-offset", 9, "--internal-topics", app["changelog"])
    assert r.rc == 0, r
    assert r.lines[:6] == [f"Reset-offsets for input topics [{inp}]",
                           f"Following input topics offsets will be reset to (for consumer group {a})",
                           "New offset (9) is higher than latest offset. Value will be set to 5",
                           "New offset (9) is higher than latest offset. Value will be set to 5",
                           f"Topic: {inp} Partition: 0 Offset: 5", f"Topic: {inp} Partition: 1 Offset: 5"], r
    assert r.lines[-2:] == [f"Deleting specified internal topics [{app['changelog']}]", "Done."]
    assert app["repartition"] in topics(kafka) and app["changelog"] not in topics(kafka)
    r = reset(kafka, app, "--input-topics", inp, "--shift-by", -3)
    assert r.rc == 0 and f"Topic: {inp} Partition: 0 Offset: 2" in r.lines, r
    assert committed(kafka, a, inp, 2) == [2, 2]
    # a missing input topic: listed, status 1; an --internal-topics name that is not internal: refused
    r = reset(kafka, app, "--input-topics", f"{inp},nope-{a}")
    assert r.rc == 1 and r.lines[1:3] == ["Following input topics are not found, skipping them",
                                          f"Topic: nope-{a}"], r
    r = reset(kafka, app, "--internal-topics", app["other"])
    assert r.rc == 1 and "Invalid topic specified in the --internal-topics option" in r.err, r
    r = reset(kafka, app, "--to-earliest", "--to-latest")
    assert r.rc == 1 and 'Option "[to-earliest]" can\'t be used with option "[to-latest]"' in r.err, r
    r = tool("kafka-streams-application-reset", "--bootstrap-server", kafka.bootstrap)
    assert r.rc == 1 and 'Missing required argument "[application-id]"' in r.err, r


def test_active_members_refused_unless_forced(kafka, app):
    a, inp = app["id"], app["input"]
    c = KafkaConsumer(inp, bootstrap_servers=kafka.bootstrap, group_id=a, enable_auto_commit=False,
                      session_timeout_ms=60000)
    try:
        while not c.assignment():
            c.poll(timeout_ms=500)
        r = reset(kafka, app, "--input-topics", inp)
        assert r.rc == 1 and f"Consumer group '{a}' is still active and has following members: [(memberId=" \
            in r.err, r
        assert "You can use option '--force' to remove active members from the group." in r.err
        r = reset(kafka, app, "--input-topics", inp, "--force")
        assert r.rc == 0 and r.lines[0] == f"Force deleting all active members in the group: {a}", r
        assert committed(kafka, a, inp, 2) == [0, 0]
    finally:
        c.close(autocommit=False)


def test_time_and_file_resets(kafka, app, tmp_path):
    """--by-duration back past every record: earliest; --to-datetime after every record: Kafka's
    fallback line and the log end; --from-file: the plan's offsets, clamped into the log."""
    a, inp = app["id"], app["input"]
    r = reset(kafka, app, "--input-topics", inp, "--by-duration", "P1D")
    assert r.rc == 0 and f"Topic: {inp} Partition: 1 Offset: 0" in r.lines, r
    assert committed(kafka, a, inp, 2) == [0, 0]
    r = reset(kafka, app, "--input-topics", inp, "--to-datetime", "2999-01-01T00:00:00.000")
    assert r.rc == 0, r
    assert f"Partition 0 from topic {inp} is empty, without a committed record. Falling back to latest known " \
           "offset." in r.lines, r
    assert committed(kafka, a, inp, 2) == [5, 5]
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{inp},0,3\n{inp},1,100")
    r = reset(kafka, app, "--input-topics", inp, "--from-file", plan)
    assert r.rc == 0 and "New offset (100) is higher than latest offset. Value will be set to 5" in r.lines, r
    assert committed(kafka, a, inp, 2) == [3, 5]
    plan.write_text(f"{inp};0;3")
    r = reset(kafka, app, "--input-topics", inp, "--from-file", plan)
    assert r.rc == 1 and "Reset plan CSV file is not following the format `TOPIC,PARTITION,OFFSET`." in r.err, r
    assert committed(kafka, a, inp, 2) == [3, 5]

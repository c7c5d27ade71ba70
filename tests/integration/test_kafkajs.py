"""KafkaJS (Node.js, unmodified, from npm) against a real broker process.

KafkaJS speaks no flexible versions on the data path and picks each API's version from
ApiVersions, so it exercises the older ranges the other clients skip.  ``tests/kafkajs/driver.js``
runs one client operation per call (produce, consume with a group, transactions, admin) and
prints its result as JSON; the checks are here:

* 10,000 keyed records with headers and explicit timestamps, per codec KafkaJS has built in
  (none, gzip) and acks 0, 1 and all: read back byte-exact by a consumer group from the start,
  each on the partition and at the offset it was acknowledged on, the partition the one Kafka's
  murmur2 partitioner gives; the idempotent producer's batches carry one producer id with
  gap-free sequences;
* ListOffsets through the admin client (earliest, latest = log end, by time);
* topic administration: create (configs, validate-only, errors), metadata, describe/alter
  configs, create partitions, delete records, delete topics;
* consumer groups: commit, resume, two members splitting the partitions, describe/list,
  fetch/reset offsets, delete;
* transactions: committed and aborted ones, offsets sent in a transaction, read_committed
  (KafkaJS's default) against read_uncommitted.

``scripts/install-test-deps.sh`` runs ``npm ci`` in tests/kafkajs; without node or the package
the tests skip (fail with ODRADEK_STRICT_DEPS=1, as scripts/test.sh runs them).
"""
from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
import time
import zlib

import pytest

from tests.integration.test_single_broker import (expected_by_time, make_records, murmur2_partition,
                                                  producer_ids_on_disk, time_targets, verify)
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.deps import missing_dependency

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER_DIR = os.path.join(os.path.dirname(HERE), "kafkajs")
DRIVER = os.path.join(DRIVER_DIR, "driver.js")
N = 10_000
PARTITIONS = 3   # verify() and producer_ids_on_disk() count on it (test_single_broker's value)


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not os.path.isdir(os.path.join(DRIVER_DIR, "node_modules", "kafkajs")):
        return "kafkajs is not installed (npm ci in tests/kafkajs)"
    return None


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    why = _missing()
    if why:
        missing_dependency(why)
    with running(BrokerProcess(tmp_path_factory.mktemp("kafkajs-broker"), name="broker",
                               props={"num.partitions": PARTITIONS,
                                      # some records carry fixed 2023 timestamps: keep them from
                                      # time retention (its first pass runs 30 s after start)
                                      "log.retention.ms": -1,
                                      "group.initial.rebalance.delay.ms": 0,
                                      # for the consumer-protocol member of the migration test
                                      "group.consumer.heartbeat.interval.ms": 500,
                                      "group.consumer.min.heartbeat.interval.ms": 500})) as b:
        yield b


def run(kafka, command, timeout=120, **spec):
    """Run one driver command; returns its JSON result (a driver failure fails the test)."""
    spec.update(command=command, brokers=[kafka.bootstrap])
    path = os.path.join(str(kafka.log_dir), "..", f"kafkajs-{command}-{time.monotonic_ns()}.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ, KAFKAJS_NO_PARTITIONER_WARNING="1")
    p = subprocess.run(["node", DRIVER, path], capture_output=True, text=True, timeout=timeout,
                       env=env, cwd=DRIVER_DIR)
    lines = p.stdout.strip().splitlines()
    assert lines, f"driver printed nothing (exit {p.returncode}); stderr:\n{p.stderr[-4000:]}"
    out = json.loads(lines[-1])
    assert p.returncode == 0 and "fatal" not in out, f"{out}\nstderr:\n{p.stderr[-4000:]}"
    return out


def b64(b: bytes | None):
    return None if b is None else base64.b64encode(b).decode()


def unb64(s):
    return None if s is None else base64.b64decode(s)


def wire(records):
    return [{"key": b64(k), "value": b64(v), "headers": [[hk, b64(hv)] for hk, hv in h], "timestamp": ts}
            for k, v, h, ts in records]


def by_partition(recs):
    """driver records -> partition -> [(offset, key, value, headers, timestamp)] in offset order."""
    read: dict[int, list] = {p: [] for p in range(PARTITIONS)}
    for r in recs:
        read[r["partition"]].append((r["offset"], unb64(r["key"]), unb64(r["value"]),
                                     [(k, unb64(v)) for k, v in r["headers"]], r["timestamp"]))
    for p in read:
        read[p].sort(key=lambda r: r[0])
    return read


def consume(kafka, topic, count, group=None, **kw):
    return run(kafka, "consume", topic=topic, count=count,
               groupId=group or f"g-{topic}-{time.monotonic_ns()}", **kw)


def admin(kafka, *ops):
    return [r for r in run(kafka, "admin", ops=list(ops))["results"]]


def ok(result):
    assert "ok" in result, result
    return result["ok"]


# -- produce and read back ------------------------------------------------------------------

@pytest.mark.parametrize("codec,acks", [pytest.param(c, a, id=f"{c}-acks{'all' if a == -1 else a}")
                                        for c in ("none", "gzip") for a in (0, 1, -1)])
def test_produce_and_read_back(kafka, codec, acks):
    topic = f"kafkajs-{codec}-acks{'all' if acks == -1 else acks}"
    seed = zlib.crc32(topic.encode())
    records = make_records(N, seed)
    acked = run(kafka, "produce", topic=topic, records=wire(records), partitions=PARTITIONS,
                acks=acks, compression=codec)["acked"]
    if acks == 0:   # nothing answered: the partition is the partitioner's, the offset unknown
        acked = [(murmur2_partition(k, PARTITIONS), -1) for k, *_ in records]
    got = consume(kafka, topic, N)
    read = by_partition(got["records"])
    verify(records, [tuple(a) for a in acked], read, partitioner=murmur2_partition,
           acked_offsets=acks != 0)
    assert len(got["records"]) == N        # each exactly once


def test_idempotent_producer(kafka):
    topic = "kafkajs-idempotent"
    records = make_records(3000, 11)
    acked = run(kafka, "produce", topic=topic, records=wire(records), partitions=PARTITIONS,
                acks=-1, idempotent=True, chunk=100)["acked"]
    read = by_partition(consume(kafka, topic, len(records))["records"])
    verify(records, [tuple(a) for a in acked], read, partitioner=murmur2_partition)
    pids = producer_ids_on_disk(str(kafka.log_dir), topic)
    assert pids and all(pid >= 0 for _, pid in pids), pids
    assert len({pid for _, pid in pids}) == 1


def test_list_offsets_answers_like_kafka(kafka):
    topic = "kafkajs-offsets"
    records = make_records(2000, 23)
    run(kafka, "produce", topic=topic, records=wire(records), partitions=PARTITIONS, acks=1)
    read = by_partition(consume(kafka, topic, len(records))["records"])
    ends = {p: len(r) for p, r in read.items()}
    [offsets] = admin(kafka, {"op": "fetchTopicOffsets", "topic": topic})
    got = {o["partition"]: (int(o["low"]), int(o["high"]), int(o["offset"])) for o in ok(offsets)}
    assert got == {p: (0, ends[p], ends[p]) for p in range(PARTITIONS)}
    rnd = random.Random(5)
    targets = time_targets(read, rnd)
    results = admin(kafka, *({"op": "fetchTopicOffsetsByTimestamp", "topic": topic, "timestamp": t}
                             for _p, t in targets))
    for (p, t), res in zip(targets, results):
        answer = {o["partition"]: int(o["offset"]) for o in ok(res)}[p]
        want = expected_by_time(read, p, t)
        # KafkaJS itself turns Kafka's "-1, no such offset" into the latest offset
        assert answer == (ends[p] if want is None else want), (p, t)


# -- topic administration -------------------------------------------------------------------

def test_topic_administration(kafka):
    t = "kafkajs-admin"
    create = {"op": "createTopics", "topics": [{"topic": t, "numPartitions": 2, "replicationFactor": 1,
                                                 "configEntries": [{"name": "retention.ms", "value": "3600000"},
                                                                   {"name": "cleanup.policy", "value": "compact"}]}]}
    res = admin(kafka,
                # KafkaJS would wait for the leaders of a topic that validate-only did not create
                {"op": "createTopics", "validateOnly": True, "waitForLeaders": False,
                 "topics": [{"topic": "kafkajs-never", "numPartitions": 1}]},
                create, create,
                {"op": "createTopics", "topics": [{"topic": "bad/name", "numPartitions": 1}]},
                {"op": "listTopics"},
                {"op": "fetchTopicMetadata", "topics": [t]},
                {"op": "describeConfigs", "includeSynonyms": True,
                 "resources": [{"type": "TOPIC", "name": t, "configNames": ["retention.ms", "cleanup.policy", "segment.bytes"]}]})
    validate_only, created, again, bad, listed, meta, configs = res
    assert ok(validate_only) is True      # validated, and (below) not created
    assert ok(created) is True
    assert ok(again) is False             # KafkaJS's answer to TOPIC_ALREADY_EXISTS
    assert "error" in bad, bad
    assert t in ok(listed) and "kafkajs-never" not in ok(listed)
    [tm] = ok(meta)["topics"]
    assert tm["name"] == t and sorted(p["partitionId"] for p in tm["partitions"]) == [0, 1]
    assert all(p["leader"] == 0 and p["partitionErrorCode"] == 0 for p in tm["partitions"])
    [resource] = ok(configs)["resources"]
    entries = {e["configName"]: e for e in resource["configEntries"]}
    assert entries["retention.ms"]["configValue"] == "3600000"
    assert entries["retention.ms"]["isDefault"] is False
    assert entries["cleanup.policy"]["configValue"] == "compact"
    assert entries["segment.bytes"]["configValue"] == "1073741824"
    assert entries["segment.bytes"]["isDefault"] is True

    records = make_records(100, 3)
    run(kafka, "produce", topic=t, records=wire(records), partitions=2, acks=1)
    res = admin(kafka,
                {"op": "alterConfigs", "resources": [{"type": "TOPIC", "name": t,
                                                      "configEntries": [{"name": "retention.ms", "value": "7200000"}]}]},
                {"op": "describeConfigs", "resources": [{"type": "TOPIC", "name": t, "configNames": ["retention.ms", "cleanup.policy"]}]},
                {"op": "createPartitions", "topicPartitions": [{"topic": t, "count": 4}]},
                {"op": "fetchTopicMetadata", "topics": [t]},
                {"op": "fetchTopicOffsets", "topic": t},
                {"op": "deleteTopicRecords", "topic": t, "partitions": [{"partition": 0, "offset": "5"}]},
                {"op": "fetchTopicOffsets", "topic": t},
                {"op": "deleteTopics", "topics": [t]},
                {"op": "listTopics"})
    altered, described, grown, meta, before, deleted_records, after, deleted, listed = res
    ok(altered)
    entries = {e["configName"]: e["configValue"] for e in ok(described)["resources"][0]["configEntries"]}
    # AlterConfigs replaces the topic's whole set of overrides, as in Kafka
    assert entries == {"retention.ms": "7200000", "cleanup.policy": "delete"}
    ok(grown)                             # KafkaJS answers nothing; the metadata shows it
    assert len(ok(meta)["topics"][0]["partitions"]) == 4
    lows_before = {o["partition"]: int(o["low"]) for o in ok(before)}
    assert lows_before == {0: 0, 1: 0, 2: 0, 3: 0}
    ok(deleted_records)
    low0 = {o["partition"]: int(o["low"]) for o in ok(after)}[0]
    assert low0 == 5
    ok(deleted)
    assert t not in ok(listed)


# -- consumer groups ------------------------------------------------------------------------

def _values(recs):
    return [unb64(r["value"]).decode() for r in recs]


def test_group_commit_resume_reset_and_delete(kafka):
    topic, group = "kafkajs-group", "kafkajs-group-g"
    first = [(f"k{i}".encode(), f"first-{i}".encode(), [], 1_700_000_000_000 + i) for i in range(300)]
    second = [(f"k{i}".encode(), f"second-{i}".encode(), [], 1_700_000_100_000 + i) for i in range(100)]
    run(kafka, "produce", topic=topic, records=wire(first), partitions=PARTITIONS, acks=-1)
    got = consume(kafka, topic, 300, group=group, lingerMs=500)
    assert sorted(_values(got["records"])) == sorted(v.decode() for _, v, _, _ in first)
    assert [parts for _t, parts in got["assignments"]] == [[0, 1, 2]]
    res = admin(kafka, {"op": "fetchOffsets", "groupId": group, "topics": [topic]},
                {"op": "fetchTopicOffsets", "topic": topic},
                {"op": "listGroups"}, {"op": "describeGroups", "groupIds": [group]})
    committed, ends, listed, described = res
    [tc] = ok(committed)
    ends = {o["partition"]: o["offset"] for o in ok(ends)}
    assert {p["partition"]: p["offset"] for p in tc["partitions"]} == ends
    assert group in [g["groupId"] for g in ok(listed)["groups"]]
    [gd] = ok(described)["groups"]
    assert gd["groupId"] == group and gd["state"] == "Empty" and gd["protocolType"] == "consumer"

    run(kafka, "produce", topic=topic, records=wire(second), partitions=PARTITIONS, acks=-1)
    got = consume(kafka, topic, 100, group=group, lingerMs=1000)
    assert sorted(_values(got["records"])) == sorted(v.decode() for _, v, _, _ in second)

    ok(admin(kafka, {"op": "resetOffsets", "groupId": group, "topic": topic, "earliest": True})[0])
    got = consume(kafka, topic, 400, group=group, lingerMs=500)
    assert sorted(_values(got["records"])) == sorted(v.decode() for _, v, _, _ in first + second)

    deleted, listed = admin(kafka, {"op": "deleteGroups", "groupIds": [group]}, {"op": "listGroups"})
    assert [(g["groupId"], g["errorCode"]) for g in ok(deleted)] == [(group, 0)]
    assert group not in [g["groupId"] for g in ok(listed)["groups"]]


def test_two_members_split_the_partitions(kafka):
    topic, group = "kafkajs-split", "kafkajs-split-g"
    values = [(f"k{i}".encode(), f"v{i}".encode(), [], 1_700_000_000_000 + i) for i in range(600)]
    run(kafka, "produce", topic=topic, records=wire(values), partitions=PARTITIONS, acks=1)
    spec = dict(topic=topic, count=10**9, groupId=group, timeoutMs=12000, brokers=[kafka.bootstrap])
    procs, paths = [], []
    for i in range(2):
        path = os.path.join(str(kafka.log_dir), "..", f"kafkajs-split-{i}.json")
        with open(path, "w") as f:
            json.dump(dict(spec, command="consume"), f)
        paths.append(path)
        procs.append(subprocess.Popen(["node", DRIVER, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, cwd=DRIVER_DIR))
        time.sleep(1.0)
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    # the rebalance that let the second member in split the partitions between the two (each
    # member's assignment from that generation: the second's first, the first's nearest in time)
    t_b, b = outs[1]["assignments"][0]
    _t, a = min(outs[0]["assignments"], key=lambda e: abs(e[0] - t_b))
    a, b = set(a), set(b)
    assert a and b and not (a & b) and a | b == {0, 1, 2}, (outs[0]["assignments"], outs[1]["assignments"])
    seen = set(_values(outs[0]["records"]) + _values(outs[1]["records"]))
    assert seen == {v.decode() for _, v, _, _ in values}


def test_kafkajs_member_in_a_group_migrated_online_and_back(kafka):
    """A KafkaJS (classic, eager) member owns every partition; a confluent-kafka
    group.protocol=consumer member joins, the group is upgraded online and split; when that member
    leaves the group is classic again and the KafkaJS member owns everything once more."""
    from tests.integration.test_group_migration import group_type, modern_consumer, wait_type
    topic, group = "kafkajs-migrate", "kafkajs-migrate-g"
    run(kafka, "produce", topic=topic, records=wire([(b"k", b"first", [], 1_700_000_000_000)]),
        partitions=PARTITIONS, acks=1)
    path = os.path.join(str(kafka.log_dir), "..", "kafkajs-migrate.json")
    with open(path, "w") as f:
        json.dump(dict(command="consume", topic=topic, count=10**9, groupId=group, timeoutMs=15000,
                       brokers=[kafka.bootstrap]), f)
    proc = subprocess.Popen(["node", DRIVER, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=DRIVER_DIR, env=dict(os.environ, KAFKAJS_NO_PARTITIONER_WARNING="1"))
    m = None
    try:
        wait_type(kafka.bootstrap, group, "classic", timeout=20)
        time.sleep(2)                                   # its first generation is assigned by now
        m = modern_consumer(kafka.bootstrap, topic, group)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (m.snapshot()[0] and m.snapshot()[0] != set(range(PARTITIONS))):
            time.sleep(0.1)
        mine = m.snapshot()[0]
        assert mine and mine != set(range(PARTITIONS)), mine
        assert group_type(kafka.bootstrap, group) == "consumer"
        m.close()
        m = None
        wait_type(kafka.bootstrap, group, "classic", timeout=20)
    finally:
        if m is not None:
            m.close()
        out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err[-3000:]
    assignments = [set(a) for _, a in json.loads(out.strip().splitlines()[-1])["assignments"]]
    everything = set(range(PARTITIONS))
    assert assignments[0] == everything and assignments[-1] == everything, assignments
    assert any(a and a < everything and not (a & mine) for a in assignments), (assignments, mine)


# -- transactions ---------------------------------------------------------------------------

def test_transactions_commit_abort_and_offsets(kafka):
    topic, group = "kafkajs-txn", "kafkajs-txn-g"

    def recs(tag, n):
        return [(f"{tag}-k{i}".encode(), f"{tag}-{i}".encode(), [("tag", tag.encode())], 1_700_000_000_000 + i)
                for i in range(n)]

    committed1, aborted, committed2 = recs("c1", 150), recs("ab", 120), recs("c2", 90)
    steps = [{"records": wire(committed1), "end": "commit"},
             {"records": wire(aborted), "end": "abort"},
             {"records": wire(committed2), "end": "commit",
              "offsets": {"consumerGroupId": group,
                          "topics": [{"topic": topic, "partitions": [{"partition": 0, "offset": "42"}]}]}}]
    res = run(kafka, "transactions", topic=topic, partitions=PARTITIONS, transactionalId="kafkajs-tx-1",
              transactions=steps)["results"]
    assert [len(r["acked"]) for r in res] == [150, 120, 90]
    want_committed = sorted(v.decode() for _, v, _, _ in committed1 + committed2)
    got = consume(kafka, topic, len(want_committed), lingerMs=1500)      # read_committed (default)
    assert sorted(_values(got["records"])) == want_committed
    got = consume(kafka, topic, 360, readUncommitted=True, lingerMs=1500)
    assert sorted(_values(got["records"])) == sorted(v.decode() for _, v, _, _ in committed1 + aborted + committed2)
    [committed] = admin(kafka, {"op": "fetchOffsets", "groupId": group, "topics": [topic]})
    parts = {p["partition"]: p["offset"] for p in ok(committed)[0]["partitions"]}
    assert parts[0] == "42"

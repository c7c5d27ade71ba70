"""DescribeTopicPartitions (75) against a real broker, driven by kafka-python's
``KafkaAdminClient.describe_topic_partitions`` (and Java's admin client in the ``java`` tier, whose
``describeTopics`` uses it when offered): pages cut by the partition limit and continued from the
cursor, Kafka's answers for unknown and invalid topics and a bad cursor, every topic when none is
named, and the same partition facts as Metadata."""
from __future__ import annotations

import uuid

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from tests.support import BrokerProcess
from tests.support.broker import running

pytestmark = pytest.mark.integration

UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, INVALID_REQUEST = 3, 17, 42
INT_MIN = -2147483648


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("dtp-broker"), name="broker",
                               props={"max.request.partition.size.limit": 50})) as b:
        yield b


@pytest.fixture
def admin(kafka):
    a = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    yield a
    a.close()


@pytest.fixture
def topics(admin):
    """Three topics of 5, 3 and 2 partitions, named so they sort a < b < c."""
    p = f"dtp-{uuid.uuid4().hex[:8]}"
    names = {f"{p}-a": 5, f"{p}-b": 3, f"{p}-c": 2}
    admin.create_topics([NewTopic(n, k, 1) for n, k in names.items()])
    return list(names)


def pages(admin, names, limit):
    """Every page of a paged description: [(topics, next_cursor)]."""
    out, cursor = [], None
    while True:
        r = admin.describe_topic_partitions(names, response_partition_limit=limit, cursor=cursor)
        out.append(r)
        cursor = r["next_cursor"]
        if cursor is None or len(out) > 20:
            return out


def shape(page):
    return [(t["name"][-1], [p["partition_index"] for p in t["partitions"]]) for t in page["topics"]]


def test_pages_follow_the_partition_limit_and_the_cursor(admin, topics):
    a, b, c = topics
    got = pages(admin, [c, a, b], 4)          # answered in name order, whatever the request's order
    assert [shape(p) for p in got] == [
        [("a", [0, 1, 2, 3])],
        [("a", [4]), ("b", [0, 1, 2])],
        [("c", [0, 1])],
    ]
    assert got[0]["next_cursor"] == {"topic_name": a, "partition_index": 4}
    assert got[1]["next_cursor"] == {"topic_name": c, "partition_index": 0}   # b is done: c from 0
    assert got[2]["next_cursor"] is None
    one = admin.describe_topic_partitions([a, b, c], response_partition_limit=1)
    assert shape(one) == [("a", [0])] and one["next_cursor"] == {"topic_name": a, "partition_index": 1}


def test_the_broker_limit_caps_the_request(admin, kafka):
    p = f"dtp-big-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(p, 60, 1)])
    r = admin.describe_topic_partitions([p], response_partition_limit=2000)
    assert len(r["topics"][0]["partitions"]) == 50          # max.request.partition.size.limit=50
    assert r["next_cursor"] == {"topic_name": p, "partition_index": 50}
    r = admin.describe_topic_partitions([p], cursor=r["next_cursor"])
    assert [x["partition_index"] for x in r["topics"][0]["partitions"]] == list(range(50, 60))
    assert r["next_cursor"] is None


def test_same_facts_as_metadata(admin, topics):
    a = topics[0]
    md = {t["name"]: t for t in admin.describe_topics([a])}[a]          # Metadata
    r = admin.describe_topic_partitions([a])
    t = r["topics"][0]
    assert t["error_code"] == 0 and t["is_internal"] is False
    assert str(t["topic_id"]) == str(md["topic_id"])
    by_index = {p["partition_index"]: p for p in md["partitions"]}
    assert sorted(by_index) == [p["partition_index"] for p in t["partitions"]]
    fields = ("error_code", "leader_id", "leader_epoch", "replica_nodes", "isr_nodes", "offline_replicas")
    for p in t["partitions"]:
        m = by_index[p["partition_index"]]
        assert {k: p[k] for k in fields} == {k: m[k] for k in fields}
    # no authorizer: every operation a topic supports, as Kafka (READ WRITE CREATE DELETE ALTER
    # DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS)
    assert t["topic_authorized_operations"] == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def test_eligible_leader_replicas_are_empty_lists_not_null(kafka, topics):
    """Kafka answers [] for a partition without ELR; Java's admin client (3.8) throws
    NullPointerException on null.  kafka-python reads both as None, so look at the raw answer."""
    from protocol.messages import DescribeTopicPartitionsRequest as Q
    from tests.support.rawkafka import SyncClient
    c = SyncClient(kafka.bootstrap)
    try:
        r = c(Q(topics=[Q.TopicRequest(name=topics[1])], response_partition_limit=10, cursor=None))
    finally:
        c.close()
    parts = r.topics[0].partitions
    assert len(parts) == 3
    assert all(p.eligible_leader_replicas == [] and p.last_known_elr == [] for p in parts)


def test_unknown_and_invalid_topics(admin, topics):
    a = topics[0]
    missing = f"dtp-missing-{uuid.uuid4().hex[:8]}"
    r = admin.describe_topic_partitions([a, missing, "bad name!"])
    codes = {t["name"]: t["error_code"] for t in r["topics"]}
    assert codes == {a: 0, missing: UNKNOWN_TOPIC_OR_PARTITION, "bad name!": INVALID_TOPIC_EXCEPTION}
    assert [t["name"] for t in r["topics"]] == sorted(codes)


def test_a_cursor_outside_the_topic_list_is_an_invalid_request(admin, topics):
    a, b, c = topics
    r = admin.describe_topic_partitions([a, b], cursor={"topic_name": c, "partition_index": 0})
    assert {t["name"]: t["error_code"] for t in r["topics"]} == {a: INVALID_REQUEST, b: INVALID_REQUEST}
    r = admin.describe_topic_partitions([a], cursor={"topic_name": a, "partition_index": -1})
    assert r["topics"][0]["error_code"] == INVALID_REQUEST


def test_no_topic_named_describes_every_topic_in_name_order(admin, topics):
    a, b, c = topics
    seen = []
    for page in pages(admin, [], 7):
        for t in page["topics"]:
            assert t["error_code"] == 0
            if not seen or seen[-1] != t["name"]:
                seen.append(t["name"])
    assert seen == sorted(seen)
    assert {a, b, c} <= set(seen)
    # the cursor skips every topic named before its own
    r = admin.describe_topic_partitions([], cursor={"topic_name": b, "partition_index": 1})
    first = r["topics"][0]
    assert first["name"] == b and [p["partition_index"] for p in first["partitions"]] == [1, 2]
    assert a not in {t["name"] for t in r["topics"]}

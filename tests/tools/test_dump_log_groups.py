"""kafka-dump-log.sh --offsets-decoder over a real broker's __consumer_offsets: every record kind
a group writes is printed as Kafka 3.9's DumpLogSegments prints it (its JSON converters' field
names and order): a classic group's GroupMetadataValue with its members, their subscriptions
and assignments decoded; a consumer-protocol group's epoch, subscription metadata (with the
partitions' racks), member metadata, target assignment and current assignment."""
from __future__ import annotations

import glob
import json
import time

import pytest

from tests.support import BrokerProcess
from tests.support.broker import running
from tests.tools.conftest import tool

pytestmark = pytest.mark.integration


def records(log_dir) -> list[tuple[dict, object]]:
    out = []
    for seg in sorted(glob.glob(str(log_dir / "__consumer_offsets-*" / "*.log"))):
        r = tool("kafka-dump-log", "--files", seg, "--offsets-decoder")
        assert r.rc == 0, r
        for line in r.lines:
            if line.startswith("| ") and " key: " in line:
                key, payload = line.split(" key: ", 1)[1].split(" payload: ", 1)
                out.append((json.loads(key), payload if payload == "<DELETE>" else json.loads(payload)))
    return out


def test_offsets_decoder_prints_every_group_record(tmp_path):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    b = BrokerProcess(tmp_path / "b", props={"broker.rack": "rack-a", "offsets.topic.num.partitions": 1,
                                             "group.initial.rebalance.delay.ms": 0})
    with running(b):
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("dl", 2, 1)])["dl"].result(15)
        p = ck.Producer({"bootstrap.servers": b.bootstrap})
        for i in range(4):
            p.produce("dl", b"v%d" % i, partition=i % 2)
        p.flush(10)
        from confluent_kafka import TopicCollection
        topic_id = str(admin.describe_topics(TopicCollection(["dl"]))["dl"].result(15).topic_id)
        for group, extra in (("classic-g", {"partition.assignment.strategy": "range"}),
                             ("modern-g", {"group.protocol": "consumer"})):
            c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, **extra})
            c.subscribe(["dl"])
            got, deadline = 0, time.monotonic() + 30
            while got < 4 and time.monotonic() < deadline:
                m = c.poll(0.5)
                got += m is not None and m.error() is None
            assert got == 4
            c.commit(asynchronous=False)
            c.close()
    recs = records(b.log_dir)
    kinds = {k["type"] for k, _ in recs}
    assert {"1", "2", "3", "4", "5", "6", "7", "8"} <= kinds, kinds

    classic = [v for k, v in recs if k["type"] == "2" and k["data"]["group"] == "classic-g" and v != "<DELETE>"]
    stable = [v for v in classic if v["data"]["members"]]
    assert stable, classic
    data = stable[-1]["data"]
    assert (data["protocolType"], data["protocol"]) == ("consumer", "range")
    assert list(data) == ["protocolType", "generation", "protocol", "leader", "currentStateTimestamp", "members"]
    (member,) = data["members"]
    assert list(member) == ["memberId", "groupInstanceId", "clientId", "clientHost", "rebalanceTimeout",
                            "sessionTimeout", "subscription", "assignment"]
    assert member["subscription"]["topics"] == ["dl"]
    assert member["assignment"]["assignedPartitions"] == [{"topic": "dl", "partitions": [0, 1]}]

    modern = {k["type"]: v for k, v in recs if k["data"].get("groupId") == "modern-g" and v != "<DELETE>"}
    assert modern["3"]["data"]["epoch"] >= 1
    (t,) = modern["4"]["data"]["topics"]
    assert (t["topicName"], t["numPartitions"]) == ("dl", 2)
    assert t["partitionMetadata"] == [{"partition": 0, "racks": ["rack-a"]}, {"partition": 1, "racks": ["rack-a"]}]
    # Kafka's Uuid text is URL-safe base64; librdkafka prints the same id in standard base64
    assert t["topicId"] == topic_id.replace("+", "-").replace("/", "_")
    assert list(modern["5"]["data"]) == ["instanceId", "rackId", "clientId", "clientHost", "subscribedTopicNames",
                                         "subscribedTopicRegex", "rebalanceTimeoutMs", "serverAssignor"]
    assert modern["5"]["data"]["subscribedTopicNames"] == ["dl"]
    assert modern["6"]["data"]["assignmentEpoch"] >= 1
    assert modern["7"]["data"]["topicPartitions"] == [{"topicId": t["topicId"], "partitions": [0, 1]}]
    cur = modern["8"]["data"]
    assert list(cur) == ["memberEpoch", "previousMemberEpoch", "state", "assignedPartitions",
                         "partitionsPendingRevocation"]
    assert cur["state"] == 0 and cur["assignedPartitions"] == [{"topicId": t["topicId"], "partitions": [0, 1]}]

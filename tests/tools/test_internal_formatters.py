"""The records of the internal topics through the tools, on a real broker:
kafka-console-consumer.sh's formatters (OffsetsMessageFormatter, GroupMetadataMessageFormatter,
ShareGroupMessageFormatter, ShareGroupStateMessageFormatter) and kafka-dump-log.sh's
--offsets-decoder and --share-group-state-decoder over the same records."""
from __future__ import annotations

import base64
import glob
import json
import re
import uuid

import pytest

from protocol.messages import FindCoordinatorRequest, ShareFetchRequest, ShareGroupHeartbeatRequest
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.net import wait_for
from tests.support.rawkafka import RawConnection
from tests.tools.conftest import tool

pytestmark = pytest.mark.integration
PKG = "org.apache.kafka.tools.consumer."


def json_objects(text: str) -> list:
    """Kafka's coordinator formatters write one JSON object after another, with nothing between."""
    out, pos, dec = [], 0, json.JSONDecoder()
    while pos < len(text.strip()):
        obj, pos = dec.raw_decode(text, pos)
        out.append(obj)
    return out


def formatted(b, topic: str, formatter: str) -> list:
    r = tool("kafka-console-consumer", "--bootstrap-server", b.bootstrap, "--topic", topic, "--from-beginning",
             "--formatter", PKG + formatter, "--timeout-ms", 2500)
    assert r.rc == 0 and "Traceback" not in r.err, r
    return json_objects(r.out)


def test_internal_topics_through_the_formatters_and_dump_log(tmp_path):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    b = BrokerProcess(tmp_path / "b", props={"offsets.topic.num.partitions": 1,
                                             "share.coordinator.state.topic.num.partitions": 1})
    topic, group, share_group = "fmt", "fmt-group", "fmt-share"
    with running(b):
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
        p = ck.Producer({"bootstrap.servers": b.bootstrap})
        for i in range(4):
            p.produce(topic, b"v%d" % i, partition=i % 2)
        p.flush(15)
        c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "client.id": "fmt-client"})
        c.subscribe([topic])
        got = 0
        for _ in range(60):
            m = c.poll(0.5)
            got += m is not None and m.error() is None
            if got == 4:
                break
        c.commit(asynchronous=False)
        c.close()
        host, port = b.bootstrap.split(":")
        member = uuid.uuid4().hex[:22]
        with RawConnection(host, int(port)) as raw:
            answers = []

            def joined():
                raw.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[share_group]))
                answers.append(raw.request(76, 1, ShareGroupHeartbeatRequest(
                    group_id=share_group, member_id=member, member_epoch=0, rack_id=None,
                    subscribed_topic_names=[topic])))
                return answers[-1].error_code == 0
            wait_for(joined, 30, what="the share group coordinator")
            assert [t.partitions for t in answers[-1].assignment.topic_partitions] == [[0, 1]]
            tid = raw.metadata([topic], version=12).topics[0].topic_id
            F = ShareFetchRequest          # a first fetch of partition 0 alone finds its start offset
            fetched = raw.request(78, 1, F(group_id=share_group, member_id=member, share_session_epoch=0, max_wait_ms=0,
                                           min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500,
                                           topics=[F.FetchTopic(topic_id=tid, partitions=[F.FetchPartition(
                                               partition_index=0, partition_max_bytes=0, acknowledgement_batches=[])])],
                                           forgotten_topics_data=[]))
            assert fetched.error_code == 0 and fetched.responses[0].partitions[0].error_code == 0
        tid64 = base64.urlsafe_b64encode(tid.bytes).decode().rstrip("=")

        offsets = formatted(b, "__consumer_offsets", "OffsetsMessageFormatter")
        assert {(o["key"]["version"], o["key"]["data"]["group"], o["key"]["data"]["topic"],
                 o["key"]["data"]["partition"], o["value"]["data"]["offset"]) for o in offsets} == \
            {(1, group, topic, 0, 2), (1, group, topic, 1, 2)}
        assert all(set(o["value"]["data"]) >= {"offset", "metadata", "commitTimestamp"} for o in offsets)

        groups = formatted(b, "__consumer_offsets", "GroupMetadataMessageFormatter")
        assert groups and {g["key"]["version"] for g in groups} == {2}
        live = [g for g in groups if g["value"] is not None and g["value"]["data"]["members"]]
        assert live and live[-1]["value"]["data"]["protocolType"] == "consumer"
        m = live[-1]["value"]["data"]["members"][0]
        assert m["clientId"] == "fmt-client"
        base64.b64decode(m["subscription"])       # the embedded protocol stays bytes, as Kafka prints it
        assert groups[-1]["value"] is None or groups[-1]["value"]["data"]["members"] == []   # it left

        share = formatted(b, "__consumer_offsets", "ShareGroupMessageFormatter")
        kinds = {s["key"]["type"]: s for s in share}
        assert set(kinds) == {10, 11, 12, 13, 14, 15}, share
        assert kinds[10]["key"]["data"] == {"groupId": share_group, "memberId": member}
        assert kinds[10]["value"] == {"version": 0, "data": {"rackId": None, "clientId": kinds[10]["value"]["data"][
            "clientId"], "clientHost": kinds[10]["value"]["data"]["clientHost"], "subscribedTopicNames": [topic]}}
        assert kinds[14]["value"]["data"]["memberEpoch"] >= 1
        assert kinds[14]["value"]["data"]["assignedPartitions"] == [{"topicId": tid64, "partitions": [0, 1]}]
        assert set(kinds[11]["value"]["data"]) == {"epoch", "metadataHash"}
        assert kinds[15]["key"]["data"] == {"groupId": share_group}
        assert kinds[15]["value"]["data"] == {"initializingTopics": [], "initializedTopics": [
            {"topicId": tid64, "topicName": topic, "partitions": [0, 1]}], "deletingTopics": []}

        state = formatted(b, "__share_group_state", "group.share.ShareGroupStateMessageFormatter")
        assert {(s["key"]["type"], s["key"]["data"]["groupId"], s["key"]["data"]["topicId"],
                 s["key"]["data"]["partition"]) for s in state} == {(0, share_group, tid64, 0), (0, share_group, tid64, 1)}
        # the heartbeat initialized both with start -1; the first fetch of partition 0 found
        # its start: latest, the high watermark then
        assert [(s["key"]["data"]["partition"], s["value"]["data"]["startOffset"]) for s in state] == \
            [(0, -1), (1, -1), (0, 2)]
        assert all(s["value"]["data"]["stateBatches"] == [] for s in state)

        r = tool("kafka-console-consumer", "--bootstrap-server", b.bootstrap, "--topic", topic,
                 "--formatter", "com.example.NoSuchFormatter")
        assert r.rc == 1 and r.err.startswith("com.example.NoSuchFormatter\n"), r
        r = tool("kafka-console-consumer", "--bootstrap-server", b.bootstrap, "--topic", topic, "--from-beginning",
                 "--formatter", PKG + "NoOpMessageFormatter", "--max-messages", 4)
        assert r.rc == 0 and r.out == "" and "Processed a total of 4 messages" in r.err, r
        r = tool("kafka-console-consumer", "--bootstrap-server", b.bootstrap, "--topic", topic, "--from-beginning",
                 "--formatter", "kafka.tools.LoggingMessageFormatter", "--max-messages", 4)
        assert r.rc == 0 and sorted(r.lines) == ["v0", "v1", "v2", "v3"], r
        assert "kafka.tools.LoggingMessageFormatter is deprecated" in r.err

    dumped = []
    for seg in sorted(glob.glob(str(b.log_dir / "__consumer_offsets-*" / "*.log"))):
        r = tool("kafka-dump-log", "--files", seg, "--offsets-decoder")
        assert r.rc == 0, r
        dumped += [re.search(r" key: (.*?) payload: (.*)$", x).groups() for x in r.lines if x.startswith("| ")]
    keys = [json.loads(k) for k, _ in dumped]
    assert {k["type"] for k in keys} >= {"1", "2", "10", "11", "12", "13", "14", "15"}
    current = [json.loads(v) for k, v in dumped if json.loads(k)["type"] == "14"]
    assert current[-1]["data"]["assignedPartitions"] == [{"topicId": tid64, "partitions": [0, 1]}]
    assert "<unparseable>" not in {v for _, v in dumped} and "<unknown>" not in {v for _, v in dumped}
    seg = glob.glob(str(b.log_dir / "__share_group_state-0" / "*.log"))[0]
    r = tool("kafka-dump-log", "--files", seg, "--share-group-state-decoder")
    assert r.rc == 0, r
    pairs = [re.search(r" key: (.*?) payload: (.*)$", x).groups() for x in r.lines if x.startswith("| ")]
    assert {json.loads(k)["data"]["partition"] for k, _ in pairs} == {0, 1}
    assert {json.loads(v)["data"]["startOffset"] for _, v in pairs} == {-1, 2}

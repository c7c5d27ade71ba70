"""DescribeQuorum (key 55) on a real broker process: served on a KRaft configuration file
(this node the leader and only voter, the embedded store's change count as high watermark,
growing with metadata changes and kept over a restart, the metadata dir's directory id, the
configured controller endpoint), UNKNOWN_TOPIC_OR_PARTITION for anything but
__cluster_metadata-0, DESCRIBE on the cluster required; on an ordinary broker (no
``process.roles``) not advertised, and a request for it closes the connection, as on a Kafka 3.9
broker in ZooKeeper mode.  The quorum tool's own tests: tests/tools/test_metadata_quorum.py."""
from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest

from broker.config import BrokerConfig
from broker.handlers.describe_quorum import controller_endpoints, metadata_directory_id
from broker.security import acl as A
from broker.security.enforce import RULES
from controller.api import base64_to_uuid
from protocol.messages import ApiVersionsRequest, CreateTopicsRequest
from protocol.messages import DescribeQuorumRequest as Q
from protocol.messages import DescribeQuorumResponse as R
from storage.meta_properties import write_kraft_meta
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.kraft import kraft_broker_process
from tests.support.rawkafka import Closed, RawConnection

METADATA_TOPIC = "__cluster_metadata"
UNKNOWN = "This server does not host this topic-partition."
ZERO = uuid.UUID(int=0)


def quorum_request(topics=((METADATA_TOPIC, (0,)),)) -> Q:
    return Q(topics=[Q.TopicData(topic_name=t, partitions=[Q.PartitionData(partition_index=p) for p in parts])
                     for t, parts in topics])


def describe(b, version: int = 2, req: Q | None = None) -> R:
    with RawConnection(b.host, b.port) as c:
        return c.request(55, version, req or quorum_request())


def high_watermark(b) -> int:
    resp = describe(b)
    assert resp.error_code == 0 and resp.topics[0].partitions[0].error_code == 0, resp
    return resp.topics[0].partitions[0].high_watermark


def advertised(b) -> dict[int, tuple[int, int]]:
    with RawConnection(b.host, b.port) as c:
        resp = c.request(18, 0, ApiVersionsRequest())
    assert resp.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def create_topic(b, name: str) -> None:
    C = CreateTopicsRequest
    with RawConnection(b.host, b.port) as c:
        resp = c.request(19, 5, C(topics=[C.CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                                                           assignments=[], configs=[])],
                                  timeout_ms=10000, validate_only=False))
    assert resp.topics[0].error_code == 0, resp


@pytest.fixture(scope="module")
def kraft(tmp_path_factory):
    with running(kraft_broker_process(tmp_path_factory.mktemp("quorum") / "b")) as b:
        yield b


# ------------------------------------------------------------------------------------------ KRaft mode
def test_advertised_in_kraft_mode(kraft):
    assert advertised(kraft)[55] == (0, 2)


def test_v0_v1_v2_describe_this_node_as_leader_and_only_voter(kraft):
    hw = high_watermark(kraft)
    assert hw >= 1                                  # the store's creation at least
    for version in (0, 1, 2):
        before = int(time.time() * 1000)
        resp = describe(kraft, version)
        after = int(time.time() * 1000)
        assert resp.error_code == 0 and [t.topic_name for t in resp.topics] == [METADATA_TOPIC]
        [p] = resp.topics[0].partitions
        assert (p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.high_watermark) == (0, 0, 1, 1, hw)
        [me] = p.current_voters
        assert (me.replica_id, me.log_end_offset) == (1, hw) and p.observers == []
        if version == 0:                            # no timestamps, directory id or nodes on the wire
            assert (me.last_fetch_timestamp, me.last_caught_up_timestamp) == (-1, -1)
        else:                                       # a leader reports itself as fetching now
            assert before <= me.last_fetch_timestamp == me.last_caught_up_timestamp <= after
        if version < 2:
            assert me.replica_directory_id == ZERO and resp.nodes == []
        else:
            assert me.replica_directory_id == base64_to_uuid(kraft.directory_id)
            assert resp.nodes == [R.Node(node_id=1, listeners=[
                R.Listener(name="CONTROLLER", host="127.0.0.1", port=kraft.controller_port)])]


@pytest.mark.parametrize("topics", [
    ((METADATA_TOPIC, (1,)),),
    (("other", (0,)),),
    ((METADATA_TOPIC, (0, 1)),),
    ((METADATA_TOPIC, (0,)), ("other", (0, 3))),
    ((METADATA_TOPIC, ()),),
    (),
], ids=["partition-1", "other-topic", "two-partitions", "two-topics", "no-partition", "no-topic"])
@pytest.mark.parametrize("version", [0, 2])
def test_anything_but_the_metadata_partition_is_unknown(kraft, topics, version):
    """Kafka's answer: UNKNOWN_TOPIC_OR_PARTITION on every partition the request named (with
    Kafka's message from v2), the top-level error NONE, nothing else filled in."""
    resp = describe(kraft, version, quorum_request(topics))
    assert resp.error_code == 0 and resp.nodes == []
    assert [(t.topic_name, [p.partition_index for p in t.partitions]) for t in resp.topics] == \
        [(t, list(parts)) for t, parts in topics]
    for t in resp.topics:
        for p in t.partitions:
            assert (p.error_code, p.leader_id, p.high_watermark, p.current_voters) == (3, 0, 0, [])
            assert p.error_message == (UNKNOWN if version >= 2 else "")


def test_the_high_watermark_counts_metadata_changes_and_survives_a_restart(tmp_path):
    b = kraft_broker_process(tmp_path / "b")
    with running(b):
        first = high_watermark(b)
        create_topic(b, "counted-a")
        assert high_watermark(b) == first + 1
        create_topic(b, "counted-b")
        second = high_watermark(b)
        assert second == first + 2
    doc = json.loads((b.log_dir / "__cluster_metadata.json").read_text())
    assert doc["metadata_offset"] == second
    with running(b):
        assert high_watermark(b) >= second
        resp = describe(b)
        assert resp.topics[0].partitions[0].current_voters[0].log_end_offset == high_watermark(b)
        create_topic(b, "counted-c")
        assert high_watermark(b) > second


def test_describe_on_the_cluster_is_required(tmp_path):
    """No ACL for ANONYMOUS: Kafka's top-level CLUSTER_AUTHORIZATION_FAILED, no topics."""
    from tests.tools.conftest import tool
    b = kraft_broker_process(tmp_path / "b", props={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"})
    with running(b):
        for version in (0, 2):
            resp = describe(b, version)
            assert (resp.error_code, resp.topics) == (31, []), resp
            assert resp.error_message == ("Cluster authorization failed." if version >= 2 else "")
        r = tool("kafka-metadata-quorum", "--bootstrap-server", b.bootstrap, "describe", "--replication")
        assert r.rc == 1 and r.out == "", r
        assert r.err.strip() == ("org.apache.kafka.common.errors.ClusterAuthorizationException: "
                                 "Cluster authorization failed."), r


def test_the_rule_asks_for_describe_on_the_cluster():
    asked = []

    class Ctx:
        def authorize(self, op, rtype, name):
            asked.append((op, rtype, name))
            return True

    async def handler(ctx, req):
        return "answered"
    assert asyncio.run(RULES[55](Ctx(), quorum_request(), handler)) == "answered"
    assert asked == [(A.DESCRIBE, A.CLUSTER, A.CLUSTER_NAME)]


# ------------------------------------------------------------------------------------------ not KRaft
def test_an_ordinary_broker_neither_advertises_nor_serves_it(tmp_path):
    """As a Kafka 3.9 broker in ZooKeeper mode: not in ApiVersions, and the connection of a
    request for it is closed without an answer; the broker goes on serving."""
    with running(BrokerProcess(tmp_path / "b")) as b:
        apis = advertised(b)
        assert 55 not in apis and 60 in apis
        for version in (0, 2):
            with RawConnection(b.host, b.port) as c:
                c.send_raw(c.request_bytes(55, version, quorum_request()))
                with pytest.raises((Closed, ConnectionError)):
                    c.recv_frame()
        assert b.alive and advertised(b) == apis
        assert "DescribeQuorumRequest v2 is not served" in b.log_text()


# ------------------------------------------------------------------------------------------ units
def kraft_config(tmp_path, **extra) -> BrokerConfig:
    props = {"process.roles": "broker,controller", "node.id": "1", "controller.listener.names": "CONTROLLER",
             "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
             "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
             "log.dirs": str(tmp_path / "logs")}
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return BrokerConfig(props)


def test_controller_endpoint_from_the_configuration(tmp_path):
    # static voters: this node's entry, under the first controller listener name
    cfg = kraft_config(tmp_path, controller_quorum_voters="1@ctl-a:9093")
    assert controller_endpoints(cfg) == [("CONTROLLER", "ctl-a", 9093)]
    cfg = kraft_config(tmp_path, controller_quorum_voters="1@[::1]:9093")
    assert controller_endpoints(cfg) == [("CONTROLLER", "::1", 9093)]
    # a dynamic quorum: the advertised controller listener, else the bound one (no host: localhost)
    cfg = kraft_config(tmp_path, controller_quorum_bootstrap_servers="localhost:9093",
                       advertised_listeners="PLAINTEXT://h:9092,CONTROLLER://ctl.example:9193")
    assert controller_endpoints(cfg) == [("CONTROLLER", "ctl.example", 9193)]
    cfg = kraft_config(tmp_path, controller_quorum_bootstrap_servers="localhost:9093")
    assert controller_endpoints(cfg) == [("CONTROLLER", "localhost", 9093)]


def test_directory_id_of_the_metadata_dir(tmp_path):
    cfg = kraft_config(tmp_path, controller_quorum_voters="1@localhost:9093",
                       metadata_log_dir=str(tmp_path / "meta"))
    assert metadata_directory_id(cfg) == ZERO                 # not formatted
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "meta.properties").write_text("version=0\nbroker.id=1\ncluster.id=x\n")
    assert metadata_directory_id(cfg) == ZERO                 # a v0 file has none
    write_kraft_meta(str(tmp_path / "meta"), 1, "x", "Z6JB15ZcQ3-_li3eUpwnsA")
    assert metadata_directory_id(cfg) == base64_to_uuid("Z6JB15ZcQ3-_li3eUpwnsA")

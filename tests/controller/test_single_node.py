import asyncio
import json
import time
import uuid

import pytest

from broker.config import BrokerConfig, apply_incremental, OP_APPEND
from controller import api
from controller.api import CreatableTopic, TopicsChanged, ConfigsChanged, BrokerInfo, BrokersChanged
from controller.single_node import METADATA_FILE, MetadataStoreError, SingleNodeController


def run(coro):
    return asyncio.run(coro)


def make(tmp_path, **props):
    p = {"broker.id": "0", "log.dirs": str(tmp_path)}
    p.update({k.replace("_", "."): v for k, v in props.items()})
    return SingleNodeController(BrokerConfig(p))


async def started(tmp_path, **props):
    c = make(tmp_path, **props)
    await c.start()
    return c


def test_create_describe_and_reopen(tmp_path):
    async def go():
        c = await started(tmp_path, num_partitions="2")
        events = []
        c.subscribe(events.append)
        [r1, r2] = await c.create_topics([CreatableTopic("a", 3, 1, configs={"retention.ms": "1000"}),
                                          CreatableTopic("b")])
        assert (r1.error_code, r1.num_partitions, r1.replication_factor) == (0, 3, 1)
        assert r2.num_partitions == 2 and isinstance(r2.topic_id, uuid.UUID)
        t = c.topic("a")
        assert t.configs == {"retention.ms": "1000"} and not t.internal
        assert t.partitions[2] == api.PartitionState(2, [0], 0, 0, [0], 0)
        await asyncio.sleep(0)
        assert events == [TopicsChanged(created=["a", "b"], changed={"a": [0, 1, 2], "b": [0, 1]})]
        cid = c.cluster_id
        await c.stop()
        c2 = await started(tmp_path)
        assert c2.cluster_id == cid and len(cid) == 22
        assert c2.topics().keys() == {"a", "b"}
        assert c2.topic("a").topic_id == r1.topic_id and c2.topic("a").configs == {"retention.ms": "1000"}
        assert c2.topic("a").partitions == t.partitions
        assert c2.controller_id == 0
    run(go())


def test_validate_only_changes_nothing(tmp_path):
    async def go():
        c = await started(tmp_path)
        [r] = await c.create_topics([CreatableTopic("a", 2, 1)], validate_only=True)
        assert r.error_code == 0 and r.num_partitions == 2
        assert c.topics() == {}
        await c.create_topics([CreatableTopic("a", 2, 1)])
        r = await c.create_partitions("a", 5, validate_only=True)
        assert r.error_code == 0 and len(c.topic("a").partitions) == 2
        r = await c.alter_topic_configs("a", {"segment.bytes": "100"}, validate_only=True)
        assert r.error_code == 0 and c.topic("a").configs == {}
    run(go())


@pytest.mark.parametrize("spec,code", [
    (CreatableTopic("bad name"), api.INVALID_TOPIC_EXCEPTION),
    (CreatableTopic(".."), api.INVALID_TOPIC_EXCEPTION),
    (CreatableTopic("x" * 250), api.INVALID_TOPIC_EXCEPTION),
    (CreatableTopic("t", 0, 1), api.INVALID_PARTITIONS),
    (CreatableTopic("t", 1, 0), api.INVALID_REPLICATION_FACTOR),
    (CreatableTopic("t", 1, 2), api.INVALID_REPLICATION_FACTOR),
    (CreatableTopic("t", assignments={0: [0], 1: [1]}), api.INVALID_REPLICA_ASSIGNMENT),
    (CreatableTopic("t", assignments={0: [0], 2: [0]}), api.INVALID_REPLICA_ASSIGNMENT),
    (CreatableTopic("t", assignments={0: [0, 0]}), api.INVALID_REPLICA_ASSIGNMENT),
    (CreatableTopic("t", 1, -1, assignments={0: [0]}), api.INVALID_REQUEST),
    (CreatableTopic("t", configs={"segment.bytes": "1"}), api.INVALID_CONFIG),
    (CreatableTopic("t", configs={"bogus": "1"}), api.INVALID_CONFIG),
    (CreatableTopic("t", configs={"retention.ms": None}), api.INVALID_CONFIG),
])
def test_create_errors(tmp_path, spec, code):
    async def go():
        c = await started(tmp_path)
        [r] = await c.create_topics([spec])
        assert r.error_code == code and r.error_message
        assert c.topics() == {}
    run(go())


def test_exists_collision_and_duplicates(tmp_path):
    async def go():
        c = await started(tmp_path)
        rs = await c.create_topics([CreatableTopic("a.b"), CreatableTopic("a_b"), CreatableTopic("d"),
                                    CreatableTopic("d"), CreatableTopic("__consumer_offsets", 2, 1,
                                                                        configs={"cleanup.policy": "compact"})])
        assert [r.error_code for r in rs] == [0, api.INVALID_TOPIC_EXCEPTION, api.INVALID_REQUEST,
                                              api.INVALID_REQUEST, 0]
        assert "collides" in rs[1].error_message
        [r] = await c.create_topics([CreatableTopic("a.b")])
        assert r.error_code == api.TOPIC_ALREADY_EXISTS and r.error_message == "Topic 'a.b' already exists."
        assert c.topic("__consumer_offsets").internal
        [r] = await c.create_topics([CreatableTopic("m", assignments={0: [0], 1: [0]})])
        assert r.error_code == 0 and r.num_partitions == 2
    run(go())


def test_delete(tmp_path):
    async def go():
        c = await started(tmp_path)
        [a, b] = await c.create_topics([CreatableTopic("a"), CreatableTopic("b")])
        events = []
        c.subscribe(events.append)
        rs = await c.delete_topics(["a", b.topic_id, "zz", uuid.uuid4()])
        assert [r.error_code for r in rs] == [0, 0, api.UNKNOWN_TOPIC_OR_PARTITION, api.UNKNOWN_TOPIC_ID]
        assert rs[1].name == "b"
        await asyncio.sleep(0)
        assert events == [TopicsChanged(deleted=[("a", a.topic_id), ("b", b.topic_id)])]
        await c.stop()
        c2 = await started(tmp_path)
        assert c2.topics() == {}
        [r] = await c2.create_topics([CreatableTopic("a")])
        assert r.topic_id != a.topic_id
    run(go())


def test_delete_disabled(tmp_path):
    async def go():
        c = await started(tmp_path, delete_topic_enable="false")
        await c.create_topics([CreatableTopic("a")])
        [r] = await c.delete_topics(["a"])
        assert r.error_code == api.TOPIC_DELETION_DISABLED and c.topic("a")
    run(go())


def test_create_partitions(tmp_path):
    async def go():
        c = await started(tmp_path)
        await c.create_topics([CreatableTopic("a", 2, 1)])
        assert (await c.create_partitions("a", 2)).error_code == api.INVALID_PARTITIONS
        assert (await c.create_partitions("a", 1)).error_code == api.INVALID_PARTITIONS
        assert (await c.create_partitions("nope", 3)).error_code == api.UNKNOWN_TOPIC_OR_PARTITION
        assert (await c.create_partitions("a", 4, [[0]])).error_code == api.INVALID_REPLICA_ASSIGNMENT
        assert (await c.create_partitions("a", 3, [[7]])).error_code == api.INVALID_REPLICA_ASSIGNMENT
        assert (await c.create_partitions("a", 3, [[0, 0]])).error_code == api.INVALID_REPLICA_ASSIGNMENT
        r = await c.create_partitions("a", 4, [[0], [0]])
        assert r.error_code == 0 and r.num_partitions == 4
        r = await c.create_partitions("a", 6)
        assert r.error_code == 0
        await c.stop()
        c2 = await started(tmp_path)
        assert sorted(c2.topic("a").partitions) == [0, 1, 2, 3, 4, 5]
        assert c2.topic("a").partitions[5].leader == 0
    run(go())


def test_topic_configs(tmp_path):
    async def go():
        c = await started(tmp_path)
        await c.create_topics([CreatableTopic("a", configs={"retention.ms": "5"})])
        events = []
        c.subscribe(events.append)
        new = apply_incremental(c.topic("a").configs, [("cleanup.policy", OP_APPEND, "compact")])
        r = await c.alter_topic_configs("a", new)
        assert r.error_code == 0
        r = await c.alter_topic_configs("a", {"max.message.bytes": "-1"})
        assert r.error_code == api.INVALID_CONFIG and "max.message.bytes" in r.error_message
        r = await c.alter_topic_configs("nope", {})
        assert r.error_code == api.UNKNOWN_TOPIC_OR_PARTITION
        await asyncio.sleep(0)
        assert events == [ConfigsChanged("topics", "a")]
        await c.stop()
        c2 = await started(tmp_path)
        assert c2.topic("a").configs == {"retention.ms": "5", "cleanup.policy": "delete,compact"}
    run(go())


def test_broker_configs(tmp_path):
    async def go():
        c = await started(tmp_path)
        r = await c.alter_broker_configs(0, {"log.retention.ms": "1234"})
        assert r.error_code == 0
        r = await c.alter_broker_configs(None, {"min.insync.replicas": "2"})
        assert r.error_code == 0
        assert c._cfg.log_retention_ms() == 1234 and c._cfg.get("min.insync.replicas") == 2
        r = await c.alter_broker_configs(None, {"listeners": "PLAINTEXT://:1"})
        assert r.error_code == api.INVALID_REQUEST
        r = await c.alter_broker_configs(0, {"log.dirs": "/x"})
        assert r.error_code == api.INVALID_REQUEST
        r = await c.alter_broker_configs(0, {"message.max.bytes": "x"})
        assert r.error_code == api.INVALID_CONFIG
        assert c.broker_configs(0) == {"log.retention.ms": "1234"}
        await c.stop()
        c2 = make(tmp_path)
        await c2.start()
        assert c2.broker_configs(None) == {"min.insync.replicas": "2"}
        assert c2._cfg.log_retention_ms() == 1234
        assert (await c2.alter_broker_configs(0, {})).error_code == 0
        assert c2.broker_configs(0) == {} and c2._cfg.log_retention_ms() == 604800000
    run(go())


def test_alter_partition_isr(tmp_path):
    async def go():
        c = await started(tmp_path)
        await c.create_topics([CreatableTopic("a")])
        r = await c.alter_partition_isr("a", 0, 0, [0], 0, broker_id=0)
        assert r.error_code == 0 and r.state.partition_epoch == 0      # no change
        assert (await c.alter_partition_isr("a", 0, 1, [0], 0)).error_code == api.FENCED_LEADER_EPOCH
        assert (await c.alter_partition_isr("a", 9, 0, [0], 0)).error_code == api.UNKNOWN_TOPIC_OR_PARTITION
        assert (await c.alter_partition_isr("a", 0, 0, [0, 1], 0)).error_code == api.INELIGIBLE_REPLICA
        assert (await c.alter_partition_isr("a", 0, 0, [], 0)).error_code == api.INVALID_REQUEST
        assert (await c.alter_partition_isr("a", 0, 0, [0], 0, broker_id=5)).error_code == api.NOT_LEADER_OR_FOLLOWER
    run(go())


def test_producer_ids_and_brokers(tmp_path):
    async def go():
        c = await started(tmp_path)
        assert await c.allocate_producer_ids(0) == (0, 1000)
        assert await c.allocate_producer_ids(0) == (1000, 1000)
        events = []
        c.subscribe(events.append)
        await c.register_broker(BrokerInfo(0, [("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]))
        with pytest.raises(ValueError):
            await c.register_broker(BrokerInfo(1, []))
        assert c.brokers()[0].endpoints == [("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]
        await asyncio.sleep(0)
        assert events == [BrokersChanged(added=[0])]
        await c.stop()
        [r] = await c.create_topics([CreatableTopic("x")])
        assert r.error_code == api.NOT_CONTROLLER
        c2 = await started(tmp_path)
        assert await c2.allocate_producer_ids(0, 10) == (2000, 10)
    run(go())


def test_identity_checks(tmp_path):
    async def go():
        c = await started(tmp_path)
        await c.stop()
        with pytest.raises(MetadataStoreError):
            await make(tmp_path, broker_id="1").start()
        with pytest.raises(MetadataStoreError):
            await SingleNodeController(BrokerConfig({"log.dirs": str(tmp_path)}), cluster_id="x" * 22).start()
        c3 = SingleNodeController(BrokerConfig({"log.dirs": str(tmp_path)}))   # broker.id=-1 adopts stored id
        await c3.start()
        assert c3.broker_id == 0
    run(go())


def test_generated_broker_id(tmp_path):
    async def go():
        c = SingleNodeController(BrokerConfig({"log.dirs": str(tmp_path)}))
        await c.start()
        assert c.broker_id == 1001
    run(go())


def test_load_1000_topics_fast(tmp_path):
    async def go():
        c = await started(tmp_path)
        rs = await c.create_topics([CreatableTopic(f"topic-{i}", 3, 1) for i in range(1000)])
        assert all(r.error_code == 0 for r in rs)
        await c.stop()
        best = 1.0
        for _ in range(3):
            c2 = make(tmp_path)
            t = time.perf_counter()
            await c2.start()
            best = min(best, time.perf_counter() - t)
            assert len(c2.topics()) == 1000
        return best
    best = run(go())
    print(f"loaded 1000 topics in {best * 1000:.1f} ms")   # target < 100 ms; tests don't assert timings
    doc = json.loads((tmp_path / METADATA_FILE).read_text())
    assert len(doc["topics"]) == 1000


def test_topic_name_rules():
    assert api.validate_topic_name("a-Z_0.9") is None
    assert api.validate_topic_name("") and api.validate_topic_name(".")
    assert api.validate_topic_name("x" * 249) is None and api.validate_topic_name("x" * 250)
    u = api.random_kafka_uuid()
    assert api.base64_to_uuid(api.uuid_to_base64(u)) == u and len(api.uuid_to_base64(u)) == 22


def test_assign_replicas_spread():
    a = api.assign_replicas([0, 1, 2, 3, 4], 10, 3, start_index=0, shift=0)
    assert a[0] == [0, 1, 2] and a[5] == [0, 2, 3]
    for reps in a.values():
        assert len(set(reps)) == 3
    with pytest.raises(ValueError):
        api.assign_replicas([0], 1, 2)

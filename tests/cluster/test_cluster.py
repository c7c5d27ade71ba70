"""A ZooKeeper-coordinated cluster: real ZooKeeper, three or four broker processes.

Default tier: znode layout, replication and read back, kill -9 of a leader under an idempotent
acks=all producer (nothing acknowledged lost; the restarted broker rejoins the ISR), controlled
shutdown, unclean election off/on, reassignment [1,2,3] -> [2,3,4] while producing, a session
expiry of the controller.  Slow tier (-m slow): the kill drill repeated.
"""
from __future__ import annotations

import re
import time

import pytest

from tests.cluster.workload import GroupReader, NumberedProducer, check_group, check_no_loss, read_all

pytestmark = pytest.mark.cluster


def _admin(cluster):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)


# ----------------------------------------------------------------------------- layout

def test_znodes_match_kafka_layout(cluster):
    cluster.create_topic("layout", partitions=3, rf=3, configs={"retention.ms": "3600000"})
    zk = cluster.zk()
    assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
    for path in ("/consumers", "/brokers/seqid", "/config/changes", "/admin/delete_topics",
                 "/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification",
                 "/config/topics", "/config/clients", "/config/users", "/config/brokers", "/config/ips"):
        assert zk.exists(path) is not None, path

    b1 = cluster.get_json("/brokers/ids/1")
    port = cluster.brokers[1].port
    assert b1["version"] == 5
    assert b1["endpoints"] == [f"PLAINTEXT://127.0.0.1:{port}"]
    assert b1["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert (b1["host"], b1["port"], b1["jmx_port"]) == ("127.0.0.1", port, -1)
    assert isinstance(b1["timestamp"], str) and b1["timestamp"].isdigit()
    assert b1["features"] == {}
    _, stat = zk.get("/brokers/ids/1")
    assert stat.ephemeralOwner != 0 and stat.version == 1       # create empty + setData

    ctrl = cluster.get_json("/controller")
    assert set(ctrl) == {"version", "brokerid", "timestamp", "kraftControllerEpoch"}
    assert ctrl["version"] == 2 and ctrl["kraftControllerEpoch"] == -1 and ctrl["brokerid"] in (1, 2, 3)
    assert isinstance(ctrl["timestamp"], str)
    epoch = int(zk.get("/controller_epoch")[0].decode())
    assert epoch >= 1

    cid = cluster.get_json("/cluster/id")
    assert cid["version"] == "1" and re.fullmatch(r"[A-Za-z0-9_-]{22}", cid["id"])

    topic = cluster.get_json("/brokers/topics/layout")
    assert topic["version"] == 3
    assert sorted(topic["partitions"]) == ["0", "1", "2"]
    assert all(len(set(r)) == 3 for r in topic["partitions"].values())
    # leaders spread evenly: each broker is first replica once
    assert sorted(r[0] for r in topic["partitions"].values()) == [1, 2, 3]
    assert topic["adding_replicas"] == {} and topic["removing_replicas"] == {}
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", topic["topic_id"])

    for p in range(3):
        st = cluster.partition_state("layout", p)
        assert set(st) == {"version", "leader", "leader_epoch", "isr", "controller_epoch"}
        assert st["version"] == 1 and st["leader_epoch"] == 0
        assert st["leader"] == topic["partitions"][str(p)][0]
        assert sorted(st["isr"]) == [1, 2, 3]
        assert st["controller_epoch"] == epoch

    assert cluster.get_json("/config/topics/layout") == {"version": 1, "config": {"retention.ms": "3600000"}}

    # a config change writes the entity node and a change notification
    from kafka.admin import ConfigResource, ConfigResourceType
    admin = _admin(cluster)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "layout", configs={"retention.ms": "7200000"})])
    finally:
        admin.close()
    assert cluster.get_json("/config/topics/layout")["config"] == {"retention.ms": "7200000"}
    changes = sorted(zk.get_children("/config/changes"))
    assert changes and re.fullmatch(r"config_change_\d{10}", changes[-1])
    assert cluster.get_json(f"/config/changes/{changes[-1]}") == {"version": 2, "entity_path": "topics/layout"}

    # an idempotent producer takes a producer id block
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap, enable_idempotence=True, acks="all")
    p.send("layout", b"x", partition=0).get(30)
    p.close()
    blk = cluster.get_json("/latest_producer_id_block")
    assert blk["version"] == 1 and blk["block_start"] == "0" and blk["block_end"] == "999"
    assert blk["broker"] in (1, 2, 3)

    # deleting a topic goes through /admin/delete_topics and removes its znodes
    admin = _admin(cluster)
    try:
        admin.delete_topics(["layout"])
    finally:
        admin.close()
    cluster.wait_for(lambda: zk.exists("/brokers/topics/layout") is None, 30, "topic znode deleted")
    assert zk.exists("/config/topics/layout") is None
    assert zk.get_children("/admin/delete_topics") == []


# ----------------------------------------------------------------------------- replication

def test_every_broker_answers_metadata_for_the_cluster(cluster):
    from protocol.client import KafkaClientConnection
    from protocol.messages import MetadataRequest
    import asyncio
    cluster.create_topic("meta", partitions=3, rf=3)

    async def ask(b):
        c = await KafkaClientConnection.connect(b.host, b.port)
        try:
            return await c.send(MetadataRequest(topics=None))
        finally:
            await c.close()
    answers = []
    for b in cluster.brokers.values():
        r = cluster.wait_for(lambda: (lambda m: m if any(t.name == "meta" for t in m.topics) else None)(
            asyncio.run(ask(b))), 20, "metadata")
        answers.append(r)
    for r in answers:
        assert sorted(x.node_id for x in r.brokers) == [1, 2, 3]
        assert r.controller_id == cluster.controller_id()
        t = next(t for t in r.topics if t.name == "meta")
        for p in t.partitions:
            assert p.leader_id == cluster.leader("meta", p.partition_index)
            assert sorted(p.replica_nodes) == [1, 2, 3]


def test_idempotent_acks_all_produce_and_read_back(cluster):
    cluster.create_topic("rb", partitions=3, rf=3)
    prod = NumberedProducer(cluster.bootstrap, "rb", 3, rate_sleep=0).start()
    prod.wait_acked(3000, 60)
    prod.stop()
    assert not prod.failed
    got = read_all(cluster.bootstrap, "rb", 3)
    res = check_no_loss(prod.acked, got)
    assert res["n_problems"] == 0, res
    # every replica caught up (ISR full) and followers hold the same records
    for p in range(3):
        assert sorted(cluster.isr("rb", p)) == [1, 2, 3]


def test_not_leader_and_fenced_epochs_for_clients(cluster):
    import asyncio

    from protocol.client import KafkaClientConnection
    from protocol.messages import FetchRequest as F
    cluster.create_topic("nl", partitions=1, rf=3)
    leader = cluster.leader("nl", 0)
    follower = next(b for b in (1, 2, 3) if b != leader)
    epoch = cluster.partition_state("nl", 0)["leader_epoch"]

    async def fetch(b, cur_epoch, version=12):
        c = await KafkaClientConnection.connect(b.host, b.port)
        try:
            req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                    topics=[F.FetchTopic(topic="nl", partitions=[F.FetchPartition(
                        partition=0, current_leader_epoch=cur_epoch, fetch_offset=0, partition_max_bytes=1 << 20)])])
            r = await c.send(req, version=version)
            return r.responses[0].partitions[0].error_code
        finally:
            await c.close()
    # the leader is in ZooKeeper once create_topic returns; each broker answers
    # UNKNOWN_TOPIC_OR_PARTITION (3) until its LeaderAndIsr has arrived, as a Kafka broker would
    # (the follower's may arrive before the leader's)
    def settled(b, version=12):
        deadline = time.monotonic() + 15
        while (code := asyncio.run(fetch(cluster.brokers[b], epoch, version))) == 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        return code
    # before v11 only the leader serves consumers; from v11 a follower does too, as in Kafka
    # (KIP-392: the request carries client metadata, so the fetch need not be from the leader)
    assert settled(follower, version=10) == 6                                  # NOT_LEADER_OR_FOLLOWER
    assert settled(follower) == 0
    assert asyncio.run(fetch(cluster.brokers[follower], epoch + 5)) == 75      # UNKNOWN_LEADER_EPOCH there too
    assert settled(leader) == 0
    assert asyncio.run(fetch(cluster.brokers[leader], epoch + 5)) == 75        # UNKNOWN_LEADER_EPOCH
    if epoch > 0:
        assert asyncio.run(fetch(cluster.brokers[leader], epoch - 1)) == 74    # FENCED_LEADER_EPOCH


def test_not_leader_answers_carry_the_leader(cluster):
    """KIP-951, as Kafka 3.9: Produce v10+ answered NOT_LEADER_OR_FOLLOWER, and Fetch v16+ answered
    NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, name the partition's leader and epoch, and the
    answer carries the leader's endpoint; older versions carry neither."""
    import asyncio

    from protocol.client import KafkaClientConnection
    from protocol.messages import FetchRequest as F, MetadataRequest as M, ProduceRequest as P
    from protocol.records import build_batch
    cluster.create_topic("hint", partitions=1, rf=3)
    leader = cluster.leader("hint", 0)
    follower = next(b for b in (1, 2, 3) if b != leader)
    epoch = cluster.partition_state("hint", 0)["leader_epoch"]
    fb, lb = cluster.brokers[follower], cluster.brokers[leader]

    async def send(b, req, version):
        c = await KafkaClientConnection.connect(b.host, b.port)
        try:
            return await c.send(req, version=version)
        finally:
            await c.close()

    def produce(version):
        r = asyncio.run(send(fb, P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name="hint", partition_data=[P.PartitionProduceData(index=0, records=build_batch([(None, b"v")]))])]),
            version))
        p = r.responses[0].partition_responses[0]
        return (p.error_code, (p.current_leader.leader_id, p.current_leader.leader_epoch),
                [(e.node_id, e.host, e.port) for e in r.node_endpoints])

    def replica_fetch(version, as_broker, cur_epoch=-1):
        """A follower's fetch (replica id set) sent to a broker that does not lead the partition."""
        req = F(replica_id=as_broker, replica_state=F.ReplicaState(replica_id=as_broker, replica_epoch=-1),
                max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                topics=[F.FetchTopic(topic_id=topic_id, partitions=[F.FetchPartition(
                    partition=0, current_leader_epoch=cur_epoch, fetch_offset=0, partition_max_bytes=1 << 20)])])
        r = asyncio.run(send(fb, req, version))
        p = r.responses[0].partitions[0]
        return (p.error_code, (p.current_leader.leader_id, p.current_leader.leader_epoch),
                [(e.node_id, e.host, e.port) for e in r.node_endpoints])

    def leader_metadata():
        m = asyncio.run(send(lb, M(topics=[M.MetadataRequestTopic(name="hint")], allow_auto_topic_creation=False), 12))
        return m if m.topics[0].error_code == 0 and m.topics[0].topic_id.int != 0 else None
    # the leader may learn it leads (LeaderAndIsr) before its metadata cache has the topic
    # (UpdateMetadata): until then Metadata answers the topic unknown, with a zero id
    md = cluster.wait_for(leader_metadata, 15, "the topic in the leader's metadata")
    topic_id = md.topics[0].topic_id              # Fetch names topics by id from v13
    hint = ((leader, epoch), [(leader, lb.host, lb.port)])
    # the follower learns the partition from its LeaderAndIsr (UNKNOWN_TOPIC_OR_PARTITION before)
    got = cluster.wait_for(lambda: (lambda g: g if g[0] != 3 else None)(produce(10)), 15, "the follower's state")
    assert got == (6, *hint)                                             # NOT_LEADER_OR_FOLLOWER
    assert produce(9) == (6, (-1, -1), [])
    other = next(b for b in (1, 2, 3) if b not in (leader, follower))
    # and the topic's id from its UpdateMetadata (UNKNOWN_TOPIC_ID to a fetch by id before)
    got = cluster.wait_for(lambda: (lambda g: g if g[0] != 100 else None)(replica_fetch(16, other)), 15,
                           "the follower's topic id")
    assert got == (6, *hint)
    assert replica_fetch(15, other) == (6, (-1, -1), [])


def _kill_leader_round(cluster, topic, partitions, prod, victim_partition):
    leader = cluster.leader(topic, victim_partition)
    prod.wait_acked(300, 60)
    t0 = time.monotonic()
    cluster.kill(leader)
    for p in range(partitions):
        cluster.wait_for_leader(topic, p, not_in={leader}, timeout=30)
    elected_in = time.monotonic() - t0
    prod.wait_acked(300, 90)
    cluster.start_broker(leader)
    for p in range(partitions):
        cluster.wait_for_isr(topic, p, [leader], timeout=90)
    return leader, elected_in


def test_kill_leader_new_leader_no_acked_record_lost_and_rejoin(cluster):
    cluster.create_topic("kill", partitions=3, rf=3)
    prod = NumberedProducer(cluster.bootstrap, "kill", 3).start()
    try:
        leader, elected_in = _kill_leader_round(cluster, "kill", 3, prod, 0)
        prod.wait_acked(300, 60)
    finally:
        prod.stop()
    # session timeout (6 s) plus a few seconds
    assert elected_in < 6 + 8, elected_in
    got = read_all(cluster.bootstrap, "kill", 3)
    res = check_no_loss(prod.acked, got)
    assert res["n_problems"] == 0, res
    assert res["acked"] > 600


def test_controlled_shutdown_moves_leadership_first(cluster):
    cluster.create_topic("cs", partitions=3, rf=3)
    prod = NumberedProducer(cluster.bootstrap, "cs", 3).start()
    try:
        prod.wait_acked(300, 60)
        victim = cluster.leader("cs", 0)
        rc = cluster.stop(victim)
        assert rc == 0
        for p in range(3):
            assert cluster.leader("cs", p) not in (victim, -1)
        prod.wait_acked(300, 60)
        log = cluster.brokers[victim].log_text()
        assert "controlled shutdown succeeded" in log
        cluster.start_broker(victim)
        for p in range(3):
            cluster.wait_for_isr("cs", p, [victim], timeout=60)
    finally:
        prod.stop()
    res = check_no_loss(prod.acked, read_all(cluster.bootstrap, "cs", 3))
    assert res["n_problems"] == 0, res
    assert not prod.failed


def test_preferred_leader_election(cluster):
    cluster.create_topic("pref", partitions=1, rf=3)
    first = cluster.get_json("/brokers/topics/pref")["partitions"]["0"][0]
    cluster.stop(first)
    new = cluster.wait_for_leader("pref", 0, not_in={first})
    cluster.start_broker(first)
    cluster.wait_for_isr("pref", 0, [first])
    assert cluster.leader("pref", 0) == new
    import asyncio

    from protocol.client import ClusterClient
    from protocol.messages import ElectLeadersRequest as EL

    async def elect():
        async with ClusterClient(cluster.bootstrap) as cc:
            return await cc.send_to_controller(EL(election_type=0, timeout_ms=30000, topic_partitions=[
                EL.TopicPartitions(topic="pref", partitions=[0])]))
    r = asyncio.run(elect())
    assert r.replica_election_results[0].partition_result[0].error_code == 0
    cluster.wait_for(lambda: cluster.leader("pref", 0) == first, 20, "preferred leader back")


def test_auto_leader_rebalance_and_create_partitions(cluster_factory):
    cluster = cluster_factory(3, props={"auto.leader.rebalance.enable": "true",
                                        "leader.imbalance.check.interval.seconds": "1"})
    cluster.create_topic("bal", partitions=3, rf=3)
    pref = {p: cluster.get_json("/brokers/topics/bal")["partitions"][str(p)][0] for p in range(3)}
    victim = pref[0]
    cluster.stop(victim)
    cluster.wait_for_leader("bal", 0, not_in={victim})
    cluster.start_broker(victim)
    # the imbalance check (10% per broker) moves leadership back to the preferred replica
    cluster.wait_for(lambda: all(cluster.leader("bal", p) == pref[p] for p in range(3)), 60, "preferred leaders")

    from kafka.admin import NewPartitions
    admin = _admin(cluster)
    try:
        admin.create_partitions({"bal": NewPartitions(total_count=5)})
    finally:
        admin.close()
    for p in (3, 4):
        cluster.wait_for_leader("bal", p)
        assert sorted(cluster.isr("bal", p)) == [1, 2, 3]
    assert sorted(cluster.get_json("/brokers/topics/bal")["partitions"]) == ["0", "1", "2", "3", "4"]


# ----------------------------------------------------------------------------- unclean election

def test_unclean_election_disabled_stays_offline_enabled_comes_back(cluster):
    cluster.create_topic("uncl", assignment={0: [1, 2]}, configs={"min.insync.replicas": "1"})
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=5)
    for i in range(50):
        p.send("uncl", f"a{i}".encode(), partition=0)
    p.flush()
    cluster.wait_for_isr("uncl", 0, [1, 2])
    cluster.kill(2)                                  # follower dies: ISR shrinks to [1]
    cluster.wait_for(lambda: cluster.isr("uncl", 0) == [1], 30, "ISR [1]")
    for i in range(50):
        p.send("uncl", f"b{i}".encode(), partition=0)      # only broker 1 has these
    p.flush()
    p.close()
    cluster.kill(1)                                  # the only ISR member dies
    cluster.wait_for(lambda: cluster.leader("uncl", 0) == -1, 30, "partition offline")
    import asyncio

    from protocol.client import KafkaClientConnection
    from protocol.messages import MetadataRequest

    async def meta():
        c = await KafkaClientConnection.connect(cluster.brokers[3].host, cluster.brokers[3].port)
        try:
            r = await c.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="uncl")]))
            return r.topics[0].partitions[0]
        finally:
            await c.close()
    mp = cluster.wait_for(lambda: (lambda m: m if m.leader_id == -1 else None)(asyncio.run(meta())), 20, "metadata")
    assert mp.error_code == 5 and sorted(mp.offline_replicas) == [1, 2]      # LEADER_NOT_AVAILABLE
    cluster.start_broker(2)
    time.sleep(3)
    st = cluster.partition_state("uncl", 0)
    assert st["leader"] == -1, st                   # unclean election disabled: stays offline
    assert st["isr"] == [1]

    from kafka.admin import ConfigResource, ConfigResourceType
    admin = _admin(cluster)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "uncl", configs={
            "min.insync.replicas": "1", "unclean.leader.election.enable": "true"})])
    finally:
        admin.close()
    cluster.wait_for(lambda: cluster.leader("uncl", 0) == 2, 30, "unclean leader 2")
    st = cluster.partition_state("uncl", 0)
    assert st["isr"] == [2]
    # elected as RECOVERING (leader_recovery_state 1); the new leader reports it recovered
    cluster.wait_for(lambda: "leader_recovery_state" not in cluster.partition_state("uncl", 0), 20,
                     "leader recovery state cleared")
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": cluster.bootstrap_of([2, 3]), "group.id": "u", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("uncl", 0, 0)])
    vals = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(vals) < 50:
        m = c.poll(0.5)
        if m is not None and not m.error():
            vals.append(m.value().decode())
    c.close()
    # what unclean election lost: the 50 "b" records only broker 1 had
    assert vals == [f"a{i}" for i in range(50)], vals[:5]
    print(f"unclean election kept {len(vals)} records and lost the 50 written while broker 2 was down")

    # Fetch v12's truncation on fetch: a fetcher whose log still holds broker 1's 100 records of
    # epoch 0 is told where epoch 0 ends on the new leader, in place of records
    leader_epoch = cluster.partition_state("uncl", 0)["leader_epoch"]
    assert leader_epoch > 0
    div = asyncio.run(_fetch_v12(cluster.brokers[2], "uncl", 100, last_fetched_epoch=0))
    assert (div.error_code, div.diverging_epoch.epoch, div.diverging_epoch.end_offset) == (0, 0, 50), div
    assert len(div.records or b"") == 0 and div.high_watermark == 50
    agree = asyncio.run(_fetch_v12(cluster.brokers[2], "uncl", 10, last_fetched_epoch=0))
    assert (agree.error_code, agree.diverging_epoch.epoch) == (0, -1) and len(agree.records) > 0
    later = asyncio.run(_fetch_v12(cluster.brokers[2], "uncl", 50, last_fetched_epoch=leader_epoch + 5))
    assert later.error_code == 1, later                 # OFFSET_OUT_OF_RANGE: no such epoch here
    # broker 1 comes back as a follower: its first fetch is told the same and cuts its tail
    cluster.start_broker(1)
    cluster.wait_for(lambda: sorted(cluster.isr("uncl", 0)) == [1, 2], 60, "broker 1 back in the ISR")
    assert "truncating from 100 to 50 (leader 2: diverging at epoch 0" in cluster.brokers[1].log_text()
    back = asyncio.run(_fetch_v12(cluster.brokers[1], "uncl", 0, last_fetched_epoch=-1))
    assert back.high_watermark == 50 and back.error_code == 0


def test_a_follower_behind_the_leaders_log_start_starts_over_there(cluster):
    """A follower that was down while DeleteRecords moved the leader's log start past its log
    end is answered OFFSET_OUT_OF_RANGE; it drops its log, starts at the leader's log start and
    comes back into the ISR."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    cluster.create_topic("behind", assignment={0: [1, 2]}, configs={"min.insync.replicas": "1"})
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})

    def produce(prefix):
        for i in range(100):
            p.produce("behind", f"{prefix}{i}".encode(), partition=0)
        assert p.flush(30) == 0
    produce("a")
    cluster.wait_for_isr("behind", 0, [1, 2])
    cluster.kill(2)
    cluster.wait_for(lambda: cluster.isr("behind", 0) == [1], 30, "ISR [1]")
    produce("b")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    tp = TopicPartition("behind", 0, 150)
    assert admin.delete_records([tp])[tp].result(30).low_watermark == 150
    cluster.start_broker(2)
    cluster.wait_for(lambda: sorted(cluster.isr("behind", 0)) == [1, 2], 60, "broker 2 back in the ISR")
    assert "fetch offset 100 below the leader's log start 150: starting over there" in cluster.brokers[2].log_text()
    import asyncio
    # broker 2's log now starts at 150 (a consumer may read a follower from Fetch v11)
    assert asyncio.run(_fetch_v12(cluster.brokers[2], "behind", 0, -1)).error_code == 1
    got = asyncio.run(_fetch_v12(cluster.brokers[2], "behind", 150, -1))
    assert (got.error_code, got.log_start_offset) == (0, 150) and len(got.records) > 0, got
    p.flush(5)


async def _fetch_v12(broker, topic, offset, last_fetched_epoch):
    """One partition of a consumer's Fetch v12 (0 of ``topic``) sent straight to ``broker``."""
    from protocol.client import KafkaClientConnection
    from protocol.messages import FetchRequest as F
    c = await KafkaClientConnection.connect(broker.host, broker.port)
    try:
        r = await c.send(F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           topics=[F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                               partition=0, fetch_offset=offset, last_fetched_epoch=last_fetched_epoch,
                               partition_max_bytes=1 << 20)])]), version=12)
        return r.responses[0].partitions[0]
    finally:
        await c.close()


# ----------------------------------------------------------------------------- reassignment

def test_reassignment_123_to_234_while_producing(cluster_factory):
    cluster = cluster_factory(4)
    cluster.create_topic("move", assignment={0: [1, 2, 3]})
    prod = NumberedProducer(cluster.bootstrap, "move", 1).start()
    import asyncio

    from protocol.client import ClusterClient
    from protocol.errors import ErrorCode as E
    from protocol.messages import AlterPartitionReassignmentsRequest as A
    from protocol.messages import ListPartitionReassignmentsRequest as LR
    try:
        prod.wait_acked(500, 60)

        async def reassign():
            async with ClusterClient(cluster.bootstrap) as cc:
                # v1 (KIP-860): a replication factor change refused when not allowed
                r = await cc.send_to_controller(A(timeout_ms=30000, allow_replication_factor_change=False,
                                                  topics=[A.ReassignableTopic(name="move", partitions=[
                                                      A.ReassignablePartition(partition_index=0, replicas=[2, 3])])]))
                p = r.responses[0].partitions[0]
                assert (r.allow_replication_factor_change, p.error_code, p.error_message) == \
                    (False, E.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 2")
                r = await cc.send_to_controller(A(timeout_ms=30000, allow_replication_factor_change=False,
                                                  topics=[A.ReassignableTopic(name="move", partitions=[
                                                      A.ReassignablePartition(partition_index=0, replicas=[2, 3, 4])])]))
                assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
                return await cc.send_to_controller(LR(timeout_ms=30000, topics=None))
        asyncio.run(reassign())
        cluster.wait_for(lambda: cluster.get_json("/brokers/topics/move")["partitions"]["0"] == [2, 3, 4]
                         and not cluster.get_json("/brokers/topics/move")["adding_replicas"], 90,
                         "reassignment to finish")
        assert cluster.leader("move", 0) in (2, 3, 4)
        cluster.wait_for_isr("move", 0, [2, 3, 4])
        prod.wait_acked(500, 60)
    finally:
        prod.stop()
    assert not prod.failed
    res = check_no_loss(prod.acked, read_all(cluster.bootstrap, "move", 1))
    assert res["n_problems"] == 0, res
    # broker 1 no longer hosts the partition
    cluster.wait_for(lambda: not any(d.name.startswith("move-0") and not d.name.endswith("-delete")
                                     for d in (cluster.brokers[1].log_dir).iterdir()), 30, "replica removed from 1")


# ----------------------------------------------------------------------------- sessions

def test_controller_session_expiry_moves_the_controller(cluster):
    cluster.create_topic("exp", partitions=3, rf=3)
    prod = NumberedProducer(cluster.bootstrap, "exp", 3).start()
    try:
        prod.wait_acked(300, 60)
        old = cluster.controller_id()
        epoch = int(cluster.zk().get("/controller_epoch")[0].decode())
        cluster.expire_session(old)
        cluster.wait_for(lambda: int(cluster.zk().get("/controller_epoch")[0].decode()) > epoch, 30,
                         "a new controller epoch")
        cluster.wait_for(lambda: old in cluster.registered(), 30, "old controller re-registered")
        for p in range(3):
            cluster.wait_for_isr("exp", p, [1, 2, 3], timeout=60)
        prod.wait_acked(300, 60)
    finally:
        prod.stop()
    res = check_no_loss(prod.acked, read_all(cluster.bootstrap, "exp", 3))
    assert res["n_problems"] == 0, res


def _pause_leader_round(cluster, topic, partitions, prod, victim_partition):
    """SIGSTOP a leader past the session timeout (6 s), then SIGCONT it."""
    leader = cluster.leader(topic, victim_partition)
    prod.wait_acked(200, 60)
    t0 = time.monotonic()
    cluster.pause(leader)
    try:
        for p in range(partitions):
            cluster.wait_for_leader(topic, p, not_in={leader}, timeout=30)
        elected_in = time.monotonic() - t0
        prod.wait_acked(200, 90)
    finally:
        cluster.resume(leader)
    cluster.wait_for(lambda: leader in cluster.registered(), 60, "paused broker re-registered")
    for p in range(partitions):
        cluster.wait_for_isr(topic, p, [leader], timeout=90)
    return elected_in


def test_sigstop_leader_past_session_timeout_then_resume(cluster):
    cluster.create_topic("stop", partitions=3, rf=3)
    prod = NumberedProducer(cluster.bootstrap, "stop", 3).start()
    try:
        elected_in = _pause_leader_round(cluster, "stop", 3, prod, 0)
        prod.wait_acked(200, 60)
    finally:
        prod.stop()
    assert elected_in < 6 + 8, elected_in
    res = check_no_loss(prod.acked, read_all(cluster.bootstrap, "stop", 3))
    assert res["n_problems"] == 0, res


def _rolling_restart(cluster, topic, partitions, prod):
    for b in sorted(cluster.brokers):
        prod.wait_acked(200, 60)
        assert cluster.stop(b) == 0
        assert "controlled shutdown succeeded" in cluster.brokers[b].log_text().split("===== start")[-1]
        cluster.start_broker(b)
        for p in range(partitions):
            cluster.wait_for_isr(topic, p, [1, 2, 3], timeout=90)


def _rolling_restart_under_a_group(cluster, topic, group, protocol="classic"):
    """Restart every broker in turn (controlled shutdown) while a producer writes and a group
    member reads and commits; nothing acknowledged is lost, nothing below the group's commits
    was skipped, and the member still reads after the last restart."""
    cluster.create_topic(topic, partitions=3, rf=3)
    prod = NumberedProducer(cluster.bootstrap, topic, 3).start()
    reader = GroupReader(cluster.bootstrap, topic, group, protocol=protocol).start()
    try:
        _rolling_restart(cluster, topic, 3, prod)
        prod.wait_acked(200, 60)
        seen_before = sum(len(v) for v in reader.seen.values())
        deadline = time.monotonic() + 60
        while sum(len(v) for v in reader.seen.values()) <= seen_before and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        prod.stop()
        time.sleep(2)
        reader.stop()
    log = read_all(cluster.bootstrap, topic, 3)
    res = check_no_loss(prod.acked, log)
    assert res["n_problems"] == 0, res
    assert check_group(reader, log, 3) == []
    assert sum(len(v) for v in reader.seen.values()) > seen_before, "the member stopped reading after the restarts"


def test_rolling_restart_with_controlled_shutdown_and_a_group(cluster):
    _rolling_restart_under_a_group(cluster, "roll", "roll-group")


def test_rolling_restart_with_a_consumer_protocol_group(cluster_factory):
    """group.protocol=consumer: the coordinator moves with every restart; the new one loads the
    group from its records and the member goes on at its epoch."""
    cluster = cluster_factory(3, props={"group.consumer.heartbeat.interval.ms": 500,
                                        "group.consumer.min.heartbeat.interval.ms": 500,
                                        "group.consumer.session.timeout.ms": 6000,
                                        "group.consumer.min.session.timeout.ms": 6000})
    _rolling_restart_under_a_group(cluster, "roll848", "roll848-group", protocol="consumer")
    # the group's records moved with the coordinator: the member joined once and never again
    joins = sum(b.log_text().count("joined consumer group roll848-group") for b in cluster.brokers.values())
    assert joins == 1, joins


def _cut_leader_round(cluster, topic, partitions, prod, victim_partition):
    """Cut a leader off the network past the session timeout, then heal it."""
    leader = cluster.leader(topic, victim_partition)
    prod.wait_acked(200, 60)
    t0 = time.monotonic()
    cluster.cut(leader)
    try:
        for p in range(partitions):
            cluster.wait_for_leader(topic, p, not_in={leader}, timeout=30)
        elected_in = time.monotonic() - t0
        prod.wait_acked(200, 90)
    finally:
        cluster.heal(leader)
    cluster.wait_for(lambda: leader in cluster.registered(), 60, "cut-off broker re-registered")
    for p in range(partitions):
        cluster.wait_for_isr(topic, p, [leader], timeout=90)
    return leader, elected_in


def test_cut_leader_off_the_network_and_heal(netns_cluster):
    cluster = netns_cluster
    cluster.create_topic("cut", partitions=3, rf=3)
    prod = NumberedProducer(cluster.bootstrap, "cut", 3).start()
    try:
        leader, elected_in = _cut_leader_round(cluster, "cut", 3, prod, 0)
        prod.wait_acked(200, 60)
    finally:
        prod.stop()
    assert elected_in < 6 + 8, elected_in
    res = check_no_loss(prod.acked, read_all(cluster.bootstrap, "cut", 3))
    assert res["n_problems"] == 0, res
    # the isolated leader learned it was deposed and truncated what nobody acknowledged
    assert "follower of" in cluster.brokers[leader].log_text()


# ----------------------------------------------------------------------------- slow drills

@pytest.mark.slow
@pytest.mark.parametrize("round_", range(5))
def test_kill_each_leader_in_turn_repeated(cluster, round_):
    cluster.create_topic("drill", partitions=3, rf=3)
    prod = NumberedProducer(cluster.bootstrap, "drill", 3).start()
    try:
        for p in range(3):
            _kill_leader_round(cluster, "drill", 3, prod, p)
        prod.wait_acked(300, 60)
    finally:
        prod.stop()
    res = check_no_loss(prod.acked, read_all(cluster.bootstrap, "drill", 3))
    assert res["n_problems"] == 0, res


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(5))
def test_sigstop_drill_repeated(cluster, round_):
    cluster.create_topic("sdrill", partitions=3, rf=3)
    prod = NumberedProducer(cluster.bootstrap, "sdrill", 3).start()
    try:
        _pause_leader_round(cluster, "sdrill", 3, prod, round_ % 3)
        prod.wait_acked(200, 60)
    finally:
        prod.stop()
    res = check_no_loss(prod.acked, read_all(cluster.bootstrap, "sdrill", 3))
    assert res["n_problems"] == 0, res


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(5))
def test_controller_expiry_drill_repeated(cluster, round_):
    test_controller_session_expiry_moves_the_controller(cluster)


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(5))
def test_rolling_restart_drill_repeated(cluster, round_):
    test_rolling_restart_with_controlled_shutdown_and_a_group(cluster)


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(5))
def test_network_cut_drill_repeated(netns_cluster, round_):
    cluster = netns_cluster
    cluster.create_topic("ndrill", partitions=3, rf=3)
    prod = NumberedProducer(cluster.bootstrap, "ndrill", 3).start()
    try:
        _cut_leader_round(cluster, "ndrill", 3, prod, round_ % 3)
        prod.wait_acked(200, 60)
    finally:
        prod.stop()
    res = check_no_loss(prod.acked, read_all(cluster.bootstrap, "ndrill", 3))
    assert res["n_problems"] == 0, res

"""A Kafka KRaft configuration file (``process.roles=broker,controller``) on a real broker
process: it refuses to start until its directory is formatted, as Kafka's KRaft server does,
then runs on the embedded metadata store with the node id as broker id and the formatted
cluster id; the CONTROLLER listener is not opened; a directory formatted for another node is
refused.  Formatting is done here with storage.meta_properties (kafka-storage.sh's own tests:
tests/tools/)."""
from __future__ import annotations

import socket
import uuid

import pytest

from controller.api import random_kafka_uuid, uuid_to_base64
from storage.meta_properties import write_kraft_meta
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.net import free_port

kafka = pytest.importorskip("kafka")


def kraft_broker(workdir, node_id=1) -> BrokerProcess:
    port, ctl = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{ctl}"
    b = BrokerProcess(workdir, port=port, use_defaults=False, name="kraft-broker", props={
        "process.roles": "broker,controller", "node.id": node_id,
        "controller.quorum.voters": f"{node_id}@127.0.0.1:{ctl}", "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT", "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 4, "group.initial.rebalance.delay.ms": 0},
        overrides={"listeners": listeners, "advertised.listeners": listeners})
    b.controller_port = ctl
    return b


def test_unformatted_then_formatted(tmp_path):
    b = kraft_broker(tmp_path / "b")
    with pytest.raises(Exception):
        b.start()
    b.stop()
    assert (f"No `meta.properties` found in {b.log_dir} (have you run `kafka-storage.sh` to format the directory?)"
            in b.log_text())

    cluster = uuid_to_base64(random_kafka_uuid())
    write_kraft_meta(str(b.log_dir), 1, cluster, uuid_to_base64(random_kafka_uuid()))
    topic = "kraft-" + uuid.uuid4().hex[:6]
    with running(b):
        from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
        p = KafkaProducer(bootstrap_servers=b.bootstrap)
        for i in range(10):
            p.send(topic, b"v%d" % i)
        p.flush()
        p.close()
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            desc = admin.describe_cluster()
        finally:
            admin.close()
        assert desc["cluster_id"] == cluster and desc["controller_id"] == 1
        assert [br["broker_id"] for br in desc["brokers"]] == [1], desc["brokers"]
        # the controller listener is not opened
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", b.controller_port)) != 0
    with running(b):            # a restart keeps the records
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=None, consumer_timeout_ms=10000)
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got = [m.value for _, m in zip(range(10), c)]
        c.close()
        assert got == [b"v%d" % i for i in range(10)]


def test_a_directory_formatted_for_another_node_is_refused(tmp_path):
    b = kraft_broker(tmp_path / "b", node_id=1)
    write_kraft_meta(str(b.log_dir), 2, uuid_to_base64(random_kafka_uuid()), uuid_to_base64(random_kafka_uuid()))
    with pytest.raises(Exception):
        b.start()
    b.stop()
    assert "Stored node id 2 doesn't match previous node id 1" in b.log_text()

"""Requests about a topic whose deletion has started but cannot finish (a replica's broker is
down), answered as Kafka 3.9 in ZooKeeper mode answers them: DeleteTopics again is
UNKNOWN_TOPIC_OR_PARTITION (the metadata cache no longer has it), CreateTopics is
TOPIC_ALREADY_EXISTS "Topic 't' is marked for deletion.", CreatePartitions is
INVALID_TOPIC_EXCEPTION "The topic is queued for deletion."; once the broker is back the deletion
completes and the name can be used again."""
from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.cluster


def test_answers_while_a_deletion_waits_for_a_replica(cluster):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    cluster.create_topic("doomed", partitions=2, rf=3)
    cluster.stop(3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of([1, 2])})

    def outcome(futures):
        (f,) = futures.values()
        try:
            f.result(30)
            return None
        except KafkaException as e:
            return e.args[0].code(), e.args[0].str()

    assert outcome(admin.delete_topics(["doomed"], operation_timeout=30)) is None
    assert cluster.zk().exists("/admin/delete_topics/doomed")        # waiting for broker 3
    assert outcome(admin.delete_topics(["doomed"]))[0] == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert outcome(admin.create_topics([NewTopic("doomed", 1, 2)])) == (
        KafkaError.TOPIC_ALREADY_EXISTS, "Topic 'doomed' is marked for deletion.")
    assert outcome(admin.create_partitions([NewPartitions("doomed", 4)])) == (
        KafkaError.TOPIC_EXCEPTION, "The topic is queued for deletion.")
    cluster.start_broker(3)
    deadline = time.monotonic() + 60
    while cluster.zk().exists("/admin/delete_topics/doomed") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not cluster.zk().exists("/admin/delete_topics/doomed")
    assert outcome(admin.create_topics([NewTopic("doomed", 1, 3)])) is None


def test_offsets_of_a_deleted_topic_are_forgotten_on_a_cluster(cluster):
    """The group's coordinator learns of the deletion from UpdateMetadata (as a Kafka 3.9 broker
    does), whether or not it hosts a replica of the topic."""
    from tests.integration.test_deleted_topic_offsets import committed_offsets_forgotten
    committed_offsets_forgotten(cluster.bootstrap)

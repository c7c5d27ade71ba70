"""Reads straight after a write through another broker: a ZooKeeper-mode Kafka broker reads topic
configs (DescribeConfigs), SCRAM credentials (DescribeUserScramCredentials) and client quotas
(DescribeClientQuotas) from ZooKeeper on each request, so what broker 1 just wrote is what
brokers 2 and 3 answer at once.  (They used to answer from caches that the change notification
refreshes a moment later: 7, 11 and 12 of 12 such reads were stale.)"""
from __future__ import annotations

import asyncio
import os

import pytest

import protocol.messages as m
from protocol.client import KafkaClientConnection

pytestmark = pytest.mark.cluster


def test_describes_see_a_write_made_through_another_broker_at_once(cluster):
    cluster.create_topic("fresh", partitions=1, rf=3)
    ports = [cluster.brokers[i].port for i in (1, 2, 3)]

    def known_everywhere():       # CreateTopics answers before every broker has the topic
        from tests.support.rawkafka import RawConnection
        for i in (1, 2, 3):
            b = cluster.brokers[i]
            with RawConnection(b.host, b.port) as c:
                if c.metadata(["fresh"], auto_create=False).topics[0].error_code != 0:
                    return False
        return True
    cluster.wait_for(known_everywhere, 30, "every broker to know the topic")
    IAC, DC = m.IncrementalAlterConfigsRequest, m.DescribeConfigsRequest
    AS, DS = m.AlterUserScramCredentialsRequest, m.DescribeUserScramCredentialsRequest
    AQ, DQ = m.AlterClientQuotasRequest, m.DescribeClientQuotasRequest

    async def run():
        w, *rs = [await KafkaClientConnection.connect("127.0.0.1", p, timeout=5) for p in ports]
        stale = {"topic config": 0, "scram": 0, "quota": 0}
        try:
            for i in range(6):
                value = str(3_600_000 + i)
                r = await w.send(IAC(validate_only=False, resources=[IAC.AlterConfigsResource(
                    resource_type=2, resource_name="fresh",
                    configs=[IAC.AlterableConfig(name="retention.ms", config_operation=0, value=value)])]))
                assert r.responses[0].error_code == 0, r
                user = f"fresh-{os.getpid()}-{i}"
                r = await w.send(AS(deletions=[], upsertions=[AS.ScramCredentialUpsertion(
                    name=user, mechanism=1, iterations=4096, salt=os.urandom(16), salted_password=os.urandom(32))]))
                assert r.results[0].error_code == 0, r
                r = await w.send(AQ(validate_only=False, entries=[AQ.EntryData(
                    entity=[AQ.EntityData(entity_type="user", entity_name=user)],
                    ops=[AQ.OpData(key="producer_byte_rate", value=1000.0 + i, remove=False)])]))
                assert r.entries[0].error_code == 0, r
                for c in rs:
                    d = await c.send(DC(include_synonyms=False, include_documentation=False, resources=[
                        DC.DescribeConfigsResource(resource_type=2, resource_name="fresh",
                                                   configuration_keys=["retention.ms"])]))
                    stale["topic config"] += d.results[0].configs[0].value != value
                    d = await c.send(DS(users=[DS.UserName(name=user)]))
                    stale["scram"] += d.results[0].error_code != 0
                    d = await c.send(DQ(strict=True, components=[
                        DQ.ComponentData(entity_type="user", match_type=0, match=user)]))
                    stale["quota"] += [[(v.key, v.value) for v in e.values] for e in d.entries] != [
                        [("producer_byte_rate", 1000.0 + i)]]
        finally:
            for c in [w, *rs]:
                await c.close()
        return stale

    assert asyncio.run(run()) == {"topic config": 0, "scram": 0, "quota": 0}

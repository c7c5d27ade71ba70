"""Kerberos between brokers: three brokers whose inter-broker listener is SASL_PLAINTEXT with
GSSAPI, Kafka's default inter-broker mechanism, under the ACL authorizer with
``User:kafka`` (the brokers' short name) and ``User:alice`` as super users (and the harness's
PLAINTEXT ``User:ANONYMOUS``).  The controller's
channels, the replica fetchers and AlterPartition all log in with the brokers' keytab, so a
topic with three replicas gets its full ISR and takes acks=all records from kafka-python, itself
logged in with alice's ticket, and a follower serves them once the leader is gone."""
from __future__ import annotations

import pytest

from tests.support.kdc import Kdc, kdc_available, kerberos_env
from tests.support.net import free_port

pytestmark = pytest.mark.cluster

HOST = "localhost"
MODULE = "com.sun.security.auth.module.Krb5LoginModule"


def test_brokers_replicate_over_gssapi(cluster_factory, tmp_path):
    ok, why = kdc_available()
    if not ok:
        pytest.skip(why)
    kdc = Kdc(tmp_path).start()
    try:
        keytab = kdc.add_service(f"kafka/{HOST}")
        props = {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
                f'{MODULE} required useKeyTab=true storeKey=true keyTab="{keytab}" '
                f'principal="kafka/{HOST}@{kdc.realm}";',
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            # User:ANONYMOUS: the harness's PLAINTEXT listener (topic creation, probes); the
            # inter-broker listener is GSSAPI only, where the brokers are User:kafka
            "super.users": "User:kafka;User:alice;User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
        }
        c = cluster_factory(3, start=False, props=props)
        sasl = {}
        for i, b in c.brokers.items():
            sasl[i] = free_port("127.0.0.1")
            b.overrides.update({
                "listeners": f"PLAINTEXT://{b.host}:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl[i]}",
                "advertised.listeners": f"PLAINTEXT://{b.host}:{b.port},SASL_PLAINTEXT://{HOST}:{sasl[i]}"})
            b.extra_env.update(kdc.env())
        c.start()
        c.create_topic("krb-repl", partitions=2, rf=3)
        for p in range(2):
            c.wait_for_isr("krb-repl", p, [1, 2, 3])

        kdc.add_user("alice", "alice-secret")
        env = kdc.env(ccache=tmp_path / "cc-alice")
        kdc.kinit("alice", "alice-secret", env)
        with kerberos_env(env):
            from kafka import KafkaConsumer, KafkaProducer, TopicPartition
            conf = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                        sasl_kerberos_service_name="kafka", request_timeout_ms=15000)
            prod = KafkaProducer(bootstrap_servers=[f"{HOST}:{p}" for p in sasl.values()], acks="all", **conf)
            for i in range(200):
                prod.send("krb-repl", b"%d" % i, partition=i % 2)
            prod.flush(30)
            prod.close()
            leader = c.leader("krb-repl", 0)
            c.kill(leader)
            c.wait_for_leader("krb-repl", 0, not_in={leader})
            survivors = [f"{HOST}:{sasl[i]}" for i in sasl if i != leader]
            cons = KafkaConsumer(bootstrap_servers=survivors, enable_auto_commit=False,
                                 consumer_timeout_ms=15000, **conf)
            tp = TopicPartition("krb-repl", 0)
            cons.assign([tp])
            cons.seek_to_beginning(tp)
            got = [m.value for _, m in zip(range(100), cons)]
            cons.close()
        assert got == [b"%d" % i for i in range(0, 200, 2)]
    finally:
        kdc.stop()

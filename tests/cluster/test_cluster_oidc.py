"""OAUTHBEARER between brokers with tokens from an identity provider (KIP-768): three brokers
whose inter-broker listener validates tokens with the provider's JWKS (so unsecured tokens are
refused there) log in to each other with client-credentials tokens from its endpoint
(tests/support/idp.py), as ``User:broker``, the only super user of that listener.  The
controller's channels and the replica fetchers work: a topic with three replicas gets its full
ISR and keeps every acks=all record after its leader is killed."""
from __future__ import annotations

import pytest

from tests.support.net import free_port

pytestmark = pytest.mark.cluster
pytest.importorskip("cryptography")

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
SECURED = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def test_brokers_log_in_to_each_other_with_tokens_from_the_provider(cluster_factory, tmp_path):
    from tests.support.idp import Idp
    idp = Idp(clients={"broker": "broker-secret"}).start()
    try:
        L = "listener.name.sasl_plaintext.oauthbearer."
        props = {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
            L + "sasl.jaas.config": f'{MODULE} required clientId="broker" clientSecret="broker-secret";',
            L + "sasl.server.callback.handler.class": SECURED,
            L + "sasl.login.callback.handler.class": LOGIN,
            "sasl.oauthbearer.token.endpoint.url": idp.token_url,
            "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_path(tmp_path),
            "sasl.oauthbearer.expected.audience": "kafka",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            # User:ANONYMOUS: the harness's PLAINTEXT listener; between brokers only tokens count
            "super.users": "User:broker;User:ANONYMOUS",
        }
        c = cluster_factory(3, start=False, props=props)
        for i, b in c.brokers.items():
            port = free_port("127.0.0.1")
            eps = f"PLAINTEXT://{b.host}:{b.port},SASL_PLAINTEXT://127.0.0.1:{port}"
            b.overrides.update({"listeners": eps, "advertised.listeners": eps})
        c.start()
        c.create_topic("oidc-repl", partitions=2, rf=3)
        for p in range(2):
            c.wait_for_isr("oidc-repl", p, [1, 2, 3])
        assert {client for client, _ in idp.requests} == {"broker"}

        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        prod = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all")
        for i in range(100):
            prod.send("oidc-repl", b"%d" % i, partition=0)
        prod.flush(30)
        prod.close()
        leader = c.leader("oidc-repl", 0)
        c.kill(leader)
        c.wait_for_leader("oidc-repl", 0, not_in={leader})
        cons = KafkaConsumer(bootstrap_servers=c.bootstrap_of([i for i in c.brokers if i != leader]),
                             enable_auto_commit=False, consumer_timeout_ms=15000)
        tp = TopicPartition("oidc-repl", 0)
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        got = [m.value for _, m in zip(range(100), cons)]
        cons.close()
        assert got == [b"%d" % i for i in range(100)]
    finally:
        idp.stop()

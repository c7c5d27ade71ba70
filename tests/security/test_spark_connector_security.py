"""The Spark connector's Kafka side (odradek_spark._kafka: what the source's driver and tasks
and the sink's tasks run; no Spark needed) against a broker's TLS and SASL listeners, configured
with Spark's option names: ``kafka.security.protocol``, ``kafka.ssl.truststore.location``,
``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``.  Records written by RangeProducer over
SASL_SSL are read back by read_range over SSL; a wrong password and a missing trust store fail
with the connector's error."""
from __future__ import annotations

import pytest

from odradek_spark._kafka import ConnectorError, ConnectorOptions, RangeProducer, SyncKafka, read_range
from tests.support.sasl import ALICE

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'


def _create_topic(bootstrap, name, partitions=2):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap})
    for f in a.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(15)


def test_sink_over_sasl_ssl_and_source_over_ssl(secure_broker, pki):
    from tests.security.test_auth import _add_scram
    b = secure_broker(listeners=("SSL", "SASL_SSL"))
    _add_scram(b.plaintext, "carol", "carol-secret", "SCRAM-SHA-512")
    _create_topic(b.plaintext, "spark-secure")
    sink = ConnectorOptions({"kafka.bootstrap.servers": b.addr("SASL_SSL"), "topic": "spark-secure",
                             "kafka.security.protocol": "SASL_SSL", "kafka.ssl.truststore.location": str(pki.ca),
                             "kafka.sasl.mechanism": "SCRAM-SHA-512",
                             "kafka.sasl.jaas.config": SCRAM_JAAS.format("carol", "carol-secret")})
    p = RangeProducer(sink)
    try:
        for i in range(20):
            p.add("spark-secure", f"k{i}".encode(), f"v{i}".encode(), partition=i % 2)
        p.flush()
    finally:
        p.close()
    assert p.records_written == 20

    source = ConnectorOptions({"kafka.bootstrap.servers": b.addr("SSL"), "subscribe": "spark-secure",
                               "kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": str(pki.ca)})
    k = SyncKafka(source)
    try:
        assert k.partitions(["spark-secure"], must_exist=True) == {"spark-secure": 2}
        ends = k.offsets([("spark-secure", 0), ("spark-secure", 1)], -1)
    finally:
        k.close()
    assert ends == {("spark-secure", 0): 10, ("spark-secure", 1): 10}
    values = sorted(row[1] for p in (0, 1) for row in read_range(source, "spark-secure", p, 0, 10))
    assert values == sorted(f"v{i}".encode() for i in range(20))


def test_sasl_plain_with_a_wrong_password_and_tls_without_trust(secure_broker, pki):
    b = secure_broker(listeners=("SSL", "SASL_SSL"))
    user, _pw = ALICE
    bad = ConnectorOptions({"kafka.bootstrap.servers": b.addr("SASL_SSL"), "subscribe": "x",
                            "kafka.security.protocol": "SASL_SSL", "kafka.ssl.truststore.location": str(pki.ca),
                            "kafka.sasl.mechanism": "PLAIN", "kafka.request.timeout.ms": "5000",
                            "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                                      f'required username="{user}" password="wrong";'})
    k = SyncKafka(bad)
    try:
        with pytest.raises(Exception, match="Authentication failed: Invalid username or password"):
            k.partitions(["x"])
    finally:
        k.close()
    # the broker's certificate is signed by the test CA, which the system trust store lacks
    untrusted = ConnectorOptions({"kafka.bootstrap.servers": b.addr("SSL"), "subscribe": "x",
                                  "kafka.security.protocol": "SSL", "kafka.request.timeout.ms": "5000"})
    k = SyncKafka(untrusted)
    try:
        with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
            k.partitions(["x"])
    finally:
        k.close()
    with pytest.raises(ConnectorError, match="kafka.security.protocol"):
        ConnectorOptions({"kafka.bootstrap.servers": "h:1", "kafka.security.protocol": "TLS"})
    with pytest.raises(ConnectorError, match="sasl"):
        ConnectorOptions({"kafka.bootstrap.servers": "h:1", "kafka.security.protocol": "SASL_PLAINTEXT",
                          "kafka.sasl.mechanism": "PLAIN"}).client()

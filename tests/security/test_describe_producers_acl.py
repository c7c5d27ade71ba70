"""DescribeProducers (61) and kafka-transactions.sh under the ACL authorizer: READ on the topic is
needed (TOPIC_AUTHORIZATION_FAILED per partition otherwise, with Kafka's admin-client text in the
tool); abort needs CLUSTER_ACTION (WriteTxnMarkers answers 31 for every partition, as Kafka's
error response does)."""
from __future__ import annotations

import subprocess

import pytest

from tests.security.test_acls import REPO, _conf, _create_topic, acls, authz_broker  # noqa: F401 - fixture

pytestmark = pytest.mark.integration
ck = pytest.importorskip("confluent_kafka")


def _alice_cfg(tmp_path):
    cfg = tmp_path / "alice.properties"
    cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                   'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                   'username="alice" password="alice-secret";\n')
    return str(cfg)


def _txn_tool(b, cfg, *args):
    import os
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([str(REPO / "bin" / "kafka-transactions.sh"), "--bootstrap-server",
                           b.addr("SASL_PLAINTEXT"), "--command-config", cfg, *args],
                          capture_output=True, text=True, env=env, timeout=60)


def test_describe_producers_needs_read_and_abort_needs_cluster_action(authz_broker, tmp_path):
    from confluent_kafka import Producer
    b = authz_broker
    _create_topic(b, "dp-topic")
    p = Producer({**_conf(b, "admin", "admin-secret"), "transactional.id": "dp-tid"})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce("dp-topic", b"x", partition=0)
    assert p.flush(10) == 0
    alice = _alice_cfg(tmp_path)
    acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Describe", "--topic", "dp-topic")

    r = _txn_tool(b, alice, "describe-producers", "--topic", "dp-topic", "--partition", "0")
    assert r.returncode == 1 and r.stderr.strip() == (
        "Failed to describe producers for partition dp-topic-0 on leader: Failed to describe active producers "
        "for partition dp-topic-0 due to authorization failure on topic `dp-topic`. Enable debug logging for "
        "additional detail."), r

    r = acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "dp-topic")
    assert r.returncode == 0, r.stderr
    r = _txn_tool(b, alice, "describe-producers", "--topic", "dp-topic", "--partition", "0")
    assert r.returncode == 0, r
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert len(rows) == 2 and rows[1][5].strip() == "0", r.stdout

    # abort: WriteTxnMarkers needs CLUSTER_ACTION
    r = _txn_tool(b, alice, "abort", "--topic", "dp-topic", "--partition", "0", "--start-offset", "0")
    assert r.returncode == 1 and "failed due to cluster authorization error" in r.stderr, r
    r = _txn_tool(b, b.admin_cfg, "abort", "--topic", "dp-topic", "--partition", "0", "--start-offset", "0")
    assert r.returncode == 0, r
    r = _txn_tool(b, alice, "describe-producers", "--topic", "dp-topic", "--partition", "0")
    assert r.returncode == 0 and r.stdout.splitlines()[1].split("\t")[5].strip() == "None", r
    try:
        p.abort_transaction(10)
    except Exception:
        pass

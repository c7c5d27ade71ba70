"""DescribeClientQuotas (48) / AlterClientQuotas (49) under the ACL authorizer: DESCRIBE_CONFIGS /
ALTER_CONFIGS on the cluster, CLUSTER_AUTHORIZATION_FAILED otherwise (kafka-configs.sh fails)."""
from __future__ import annotations

import os
import subprocess

import pytest

from tests.security.test_acls import REPO, acls, authz_broker  # noqa: F401 - fixture

pytestmark = pytest.mark.integration


def _configs(b, cfg, *args):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([str(REPO / "bin" / "kafka-configs.sh"), "--bootstrap-server", b.addr("SASL_PLAINTEXT"),
                           "--command-config", cfg, *args], capture_output=True, text=True, env=env, timeout=60)


def test_quota_apis_need_cluster_config_rights(authz_broker, tmp_path):
    b = authz_broker
    alice = tmp_path / "alice.properties"
    alice.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                     'username="alice" password="alice-secret";\n')
    alice = str(alice)
    alter = ("--alter", "--client", "acl-app", "--add-config", "producer_byte_rate=1024")
    r = _configs(b, alice, "--describe", "--entity-type", "clients")
    assert r.returncode == 1 and "Cluster authorization failed" in r.stderr, r
    r = _configs(b, b.admin_cfg, *alter)
    assert r.returncode == 0, r.stderr
    acls(b, "--add", "--allow-principal", "User:alice", "--operation", "DescribeConfigs", "--cluster")
    r = _configs(b, alice, "--describe", "--entity-type", "clients")
    assert r.returncode == 0 and r.stdout.strip() == \
        "Quota configs for client-id 'acl-app' are producer_byte_rate=1024.0", r
    r = _configs(b, alice, "--alter", "--client", "acl-app", "--add-config", "producer_byte_rate=2048")
    assert r.returncode == 1 and "Cluster authorization failed" in r.stderr, r
    acls(b, "--add", "--allow-principal", "User:alice", "--operation", "AlterConfigs", "--cluster")
    r = _configs(b, alice, "--alter", "--client", "acl-app", "--add-config", "producer_byte_rate=2048")
    assert r.returncode == 0, r.stderr

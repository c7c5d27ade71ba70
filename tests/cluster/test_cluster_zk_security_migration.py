"""``zookeeper-security-migration.sh`` against a SASL-enabled ZooKeeper: the step of Kafka's
procedure that secures the znodes a cluster created while ``zookeeper.set.acl`` was false (the
brokers already log in), and its reverse.  Checked with ZooKeeper's own answers: the ACL of each
znode, what an anonymous client may read and change, and that the running broker still changes
its znodes afterwards."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE, Permissions

from tests.cluster.test_cluster_zk_acl import _kazoo, client_jaas, sasl_zookeeper  # noqa: F401 (fixture)
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster

BIN = Path(__file__).resolve().parents[2] / "bin"


def tool(*args, jaas=None, timeout=60):
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_OPTS"}
    if jaas is not None:
        env["KAFKA_OPTS"] = f"-Djava.security.auth.login.config={jaas}"
    return subprocess.run([str(BIN / "zookeeper-security-migration.sh"), *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def acl_of(client, path):
    acls, _ = client.get_acls(path)
    return sorted((a.id.scheme, a.id.id, a.perms) for a in acls)


OPEN = [("world", "anyone", Permissions.ALL)]
EVERYONE_READS = sorted([("sasl", "kafka", Permissions.ALL), ("world", "anyone", Permissions.READ)])
OWNER_ONLY = [("sasl", "kafka", Permissions.ALL)]


def test_secure_then_unsecure(sasl_zookeeper, tmp_path):
    zk = sasl_zookeeper
    jaas = client_jaas(tmp_path / "broker-jaas.conf")
    c = Cluster(tmp_path / "cluster", zk, 1, props={"zookeeper.set.acl": "false"})
    for b in c.brokers.values():
        b.extra_env["KAFKA_OPTS"] = f"-Xmx1g -Djava.security.auth.login.config={jaas}"
    try:
        c.start()
        c.create_topic("before", partitions=2, rf=1)
        c.wait_for_isr("before", 1, [1])
        # a credential written without a login: an open znode under a credential root
        r = subprocess.run([str(BIN / "kafka-configs.sh"), "--zookeeper", zk.connect_string(c.chroot), "--alter",
                            "--add-config", "SCRAM-SHA-256=[password=bob-secret]", "--entity-type", "users",
                            "--entity-name", "bob"], env={k: v for k, v in os.environ.items() if k != "KAFKA_OPTS"},
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        anon = _kazoo(zk, c.chroot)
        owner = _kazoo(zk, c.chroot, "kafka", "kafka-zk-secret")
        try:
            anon.create("/not-kafka/data", b"x", makepath=True)     # not Kafka's: left alone
            for path in ("/", "/brokers/topics/before", "/brokers/ids/1", "/config/users/bob", "/not-kafka/data"):
                assert acl_of(owner, path) == OPEN, path

            r = tool("--zookeeper.acl=secure", "--zookeeper.connect", zk.connect_string(c.chroot), jaas=jaas)
            assert r.returncode == 0, r.stdout + r.stderr
            assert "Set the ACLs of" in r.stdout and "sasl:kafka" in r.stdout, r.stdout
            for path in ("/", "/brokers", "/brokers/ids/1", "/brokers/topics/before",
                         "/brokers/topics/before/partitions/1/state", "/controller", "/controller_epoch",
                         "/cluster/id", "/config/topics/before", "/config/changes", "/admin",
                         "/latest_producer_id_block", "/feature", "/kafka-acl", "/kafka-acl-changes",
                         "/migration"):
                assert acl_of(owner, path) == EVERYONE_READS, path
            for path in ("/config/users", "/config/users/bob", "/config/brokers", "/delegation_token"):
                assert acl_of(owner, path) == OWNER_ONLY, path
            assert acl_of(owner, "/not-kafka/data") == OPEN
            assert acl_of(owner, "/not-kafka") == OPEN

            # anyone reads the state, but changes nothing and reads no credential
            assert anon.get("/brokers/topics/before")[0]
            with pytest.raises(NoAuthError):
                anon.set("/brokers/topics/before", b"{}")
            with pytest.raises(NoAuthError):
                anon.create("/brokers/topics/intruder", b"{}")
            with pytest.raises(NoAuthError):
                anon.get("/config/users/bob")

            # the running broker (logged in as the owner) still writes its znodes
            c.create_topic("after", partitions=2, rf=1)
            c.wait_for_isr("after", 1, [1])
            assert acl_of(owner, "/brokers/topics/after") == OPEN      # set.acl is still false

            # another identity may not take the tree over
            other = client_jaas(tmp_path / "other-jaas.conf", "other", "other-secret")
            r = tool("--zookeeper.acl=secure", "--zookeeper.connect", zk.connect_string(c.chroot), jaas=other)
            assert r.returncode == 1, r.stdout + r.stderr
            assert "not authorized" in r.stderr, r.stderr
            assert acl_of(owner, "/brokers/topics/before") == EVERYONE_READS

            # and back: everything open again
            r = tool("--zookeeper.acl", "unsecure", "--zookeeper.connect", zk.connect_string(c.chroot), jaas=jaas)
            assert r.returncode == 0, r.stdout + r.stderr
            for path in ("/", "/brokers/topics/before", "/brokers/ids/1", "/config/users/bob", "/delegation_token"):
                assert acl_of(owner, path) == [(a.id.scheme, a.id.id, a.perms) for a in OPEN_ACL_UNSAFE], path
            assert anon.get("/config/users/bob")[0]
        finally:
            for z in (anon, owner):
                z.stop()
                z.close()
    finally:
        c.shutdown()


def test_refusals_and_path_check(sasl_zookeeper, tmp_path):
    zk = sasl_zookeeper
    connect = zk.connect_string("/empty-chroot")
    # no login at all: Kafka's message, status 1
    r = tool("--zookeeper.acl=secure", "--zookeeper.connect", connect)
    assert r.returncode == 1
    assert "No JAAS configuration file has been specified and no TLS client certificate" in r.stderr
    # a JAAS file without a Client section
    bad = tmp_path / "no-client.conf"
    bad.write_text("KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required;\n};\n")
    r = tool("--zookeeper.acl=secure", "--zookeeper.connect", connect, jaas=bad)
    assert r.returncode == 1
    assert f"Security isn't enabled, most likely the file isn't set properly: {bad}" in r.stdout
    # neither secure nor unsecure: the usage
    jaas = client_jaas(tmp_path / "jaas.conf")
    r = tool("--zookeeper.acl=maybe", "--zookeeper.connect", connect, jaas=jaas)
    assert r.returncode == 1 and "--zookeeper.acl" in r.stdout + r.stderr
    # a chroot holding no cluster: the missing roots are listed, and the check stops the tool
    owner = _kazoo(zk, "", "kafka", "kafka-zk-secret")
    try:
        owner.ensure_path("/empty-chroot")
        r = tool("--zookeeper.acl=secure", "--zookeeper.connect", connect, "--enable.path.check", jaas=jaas)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "The following secure root paths do not exist in ZooKeeper: /admin,/brokers," in r.stdout
        assert "Exit the command." in r.stdout
        assert owner.exists("/empty-chroot/brokers") is None
    finally:
        owner.stop()
        owner.close()

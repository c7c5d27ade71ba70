"""``zookeeper.set.acl=true``: brokers that log in to a SASL-enabled ZooKeeper (DIGEST-MD5, the
JAAS file named in ``KAFKA_OPTS`` as Kafka's scripts take it) create their znodes with Kafka's
ACLs: everything for the brokers' identity, read for anyone, and nothing for anyone else under
the credential roots.  A client without that identity may read the cluster's state but not
change it, and may not read a SCRAM credential.  A broker whose identity is another one cannot
take over a znode of the first.  Without a ZooKeeper identity the setting stops the broker."""
from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

from tests.support.cluster import Cluster
from tests.support.zookeeper import ZooKeeperProcess, zookeeper_available

pytestmark = pytest.mark.cluster

SERVER_JAAS = """Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_kafka="kafka-zk-secret"
    user_other="other-secret";
};
"""


def client_jaas(path, user="kafka", password="kafka-zk-secret"):
    path.write_text(f"""// the brokers' ZooKeeper login
Client {{
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="{user}"
    password="{password}";
}};
""")
    return path


@pytest.fixture
def sasl_zookeeper(tmp_path):
    ok, why = zookeeper_available()
    if not ok:
        pytest.skip(why)
    jaas = tmp_path / "zk-server-jaas.conf"
    jaas.write_text(SERVER_JAAS)
    zk = ZooKeeperProcess(tmp_path / "zk", config={
        "authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"},
        jvm_args=[f"-Djava.security.auth.login.config={jaas}"])
    zk.start()
    try:
        yield zk
    finally:
        zk.kill()


def _kazoo(zk, chroot, user=None, password=None):
    sasl = {"mechanism": "DIGEST-MD5", "username": user, "password": password} if user else None
    c = KazooClient(hosts=zk.connect_string(chroot), sasl_options=sasl, timeout=15)
    c.start(15)
    return c


def test_znodes_get_kafkas_acls(sasl_zookeeper, tmp_path):
    zk = sasl_zookeeper
    jaas = client_jaas(tmp_path / "broker-jaas.conf")
    c = Cluster(tmp_path / "cluster", zk, 2, props={
        "zookeeper.set.acl": "true", "default.replication.factor": 2, "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 2, "transaction.state.log.replication.factor": 2,
        "transaction.state.log.min.isr": 1})
    for b in c.brokers.values():
        b.extra_env["KAFKA_OPTS"] = f"-Xmx1g -Djava.security.auth.login.config={jaas}"
    try:
        c.start()
        c.create_topic("guarded", partitions=2, rf=2)
        c.wait_for_isr("guarded", 0, [1, 2])

        owner = _kazoo(zk, c.chroot, "kafka", "kafka-zk-secret")
        anon = _kazoo(zk, c.chroot)
        other = _kazoo(zk, c.chroot, "other", "other-secret")
        try:
            # a SCRAM credential, written by a broker (AlterUserScramCredentials)
            from kafka.admin import KafkaAdminClient, ScramMechanism, UserScramCredentialUpsertion
            admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=15000)
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "alice", ScramMechanism.SCRAM_SHA_256, "alice-secret", 4096)])
            admin.close()
            c.wait_for(lambda: owner.exists("/config/users/alice") is not None, 15, "alice's credential")
            # and one written by kafka-configs.sh --zookeeper, which logs in the same way
            import os
            import subprocess
            from pathlib import Path
            tool = Path(__file__).resolve().parents[2] / "bin" / "kafka-configs.sh"
            r = subprocess.run([str(tool), "--zookeeper", zk.connect_string(c.chroot), "--alter", "--add-config",
                                "SCRAM-SHA-512=[password=bob-secret]", "--entity-type", "users", "--entity-name",
                                "bob"], env={**os.environ, "KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"},
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stdout + r.stderr

            def acl(path):
                acls, _ = owner.get_acls(path)
                return sorted((a.id.scheme, a.id.id, a.perms) for a in acls)
            everyone_reads = sorted([("sasl", "kafka", Permissions.ALL), ("world", "anyone", Permissions.READ)])
            for path in ("/brokers/ids/1", "/brokers/topics/guarded", "/brokers/topics/guarded/partitions/0/state",
                         "/controller", "/controller_epoch", "/cluster/id"):
                assert acl(path) == everyone_reads, path
            assert acl("/config/users/alice") == [("sasl", "kafka", Permissions.ALL)]
            assert acl("/config/users/bob") == [("sasl", "kafka", Permissions.ALL)]

            # anyone reads the cluster's state, but changes nothing
            assert anon.get("/brokers/topics/guarded")[0]
            for client in (anon, other):
                with pytest.raises(NoAuthError):
                    client.set("/brokers/topics/guarded", b"{}")
                with pytest.raises(NoAuthError):
                    client.delete("/controller")
                for user in ("alice", "bob"):
                    with pytest.raises(NoAuthError):
                        client.get(f"/config/users/{user}")
        finally:
            for z in (owner, anon, other):
                z.stop()
                z.close()

        # a broker with another identity cannot take the controller's or its peers' znodes
        c.stop(2)
        other_jaas = client_jaas(tmp_path / "other-jaas.conf", "other", "other-secret")
        c.brokers[2].extra_env["KAFKA_OPTS"] = f"-Djava.security.auth.login.config={other_jaas}"
        c.brokers[2].start(wait=False)
        assert c.brokers[2].proc.wait(60) == 1
        assert "ZooKeeper refused this broker access to a znode (NoAuth)" in \
            c.brokers[2].log_path.read_text(errors="replace")
    finally:
        c.shutdown()


def test_set_acl_without_a_zookeeper_identity_stops_the_broker(sasl_zookeeper, tmp_path):
    c = Cluster(tmp_path / "cluster", sasl_zookeeper, 1, props={"zookeeper.set.acl": "true"})
    b = c.brokers[1]
    b.extra_env["KAFKA_OPTS"] = ""
    try:
        b.start(wait=False)
        assert b.proc.wait(60) == 1
        text = b.log_path.read_text(errors="replace")
        assert "zookeeper.set.acl is true, but there is no authenticated ZooKeeper identity" in text
    finally:
        c.shutdown()

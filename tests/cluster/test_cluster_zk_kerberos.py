"""A Kerberos login to ZooKeeper: a ZooKeeper that authenticates clients with SASL GSSAPI (its
Server section logs in from a keytab of the test's KDC), and a broker whose ``Client`` section
is a Krb5LoginModule keytab entry, as Kafka's brokers log in to a Kerberized ZooKeeper.  With
``zookeeper.set.acl=true`` the znodes belong to the broker's principal; an anonymous client reads
but changes nothing.  ``kafka-configs.sh --zookeeper`` logs in the same way."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

from tests.support.cluster import Cluster
from tests.security.test_gssapi import kdc  # noqa: F401 (the tests' KDC, a fixture)
from tests.support.kdc import kerberos_env
from tests.support.zookeeper import ZooKeeperProcess, zookeeper_available

pytestmark = pytest.mark.cluster

MODULE = "com.sun.security.auth.module.Krb5LoginModule"
BIN = Path(__file__).resolve().parents[2] / "bin"


@pytest.fixture
def kerberized_zookeeper(kdc, tmp_path):
    yield from _kerberized_zookeeper(kdc, tmp_path, "127.0.0.1")


def _kerberized_zookeeper(kdc, tmp_path, host):
    ok, why = zookeeper_available()
    if not ok:
        pytest.skip(why)
    keytab = kdc.add_service(f"zookeeper/{host}")
    jaas = tmp_path / "zk-server-jaas.conf"
    jaas.write_text(f"""Server {{
    {MODULE} required
    useKeyTab=true
    storeKey=true
    useTicketCache=false
    keyTab="{keytab}"
    principal="zookeeper/{host}@{kdc.realm}";
}};
""")
    zk = ZooKeeperProcess(tmp_path / "zk", config={
        "authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"},
        jvm_args=[f"-Djava.security.auth.login.config={jaas}", f"-Djava.security.krb5.conf={kdc.conf}"])
    zk.start()
    try:
        yield zk
    finally:
        zk.kill()


def client_jaas(path, keytab, principal):
    path.write_text(f"""Client {{
    {MODULE} required
    useKeyTab=true
    storeKey=true
    keyTab="{keytab}"
    principal="{principal}";
}};
""")
    return path


def test_broker_logs_in_to_zookeeper_with_kerberos(kdc, kerberized_zookeeper, tmp_path):
    zk = kerberized_zookeeper
    principal = f"kafka/localhost@{kdc.realm}"
    keytab = kdc.add_service("kafka/localhost")
    jaas = client_jaas(tmp_path / "broker-jaas.conf", keytab, principal)
    kafka_opts = f"-Djava.security.auth.login.config={jaas}"
    c = Cluster(tmp_path / "cluster", zk, 1, props={"zookeeper.set.acl": "true"})
    for b in c.brokers.values():
        b.extra_env.update(kdc.env())
        b.extra_env["KAFKA_OPTS"] = kafka_opts
    anon = None
    try:
        c.start()
        c.create_topic("kerberized", partitions=2, rf=1)
        c.wait_for_isr("kerberized", 1, [1])
        log = c.brokers[1].log_path.read_text(errors="replace")
        assert f"sasl:{principal}" in log, "the broker names its ZooKeeper identity at start-up"

        r = subprocess.run([str(BIN / "kafka-configs.sh"), "--zookeeper", zk.connect_string(c.chroot), "--alter",
                            "--add-config", "SCRAM-SHA-256=[password=carol-secret]", "--entity-type", "users",
                            "--entity-name", "carol"],
                           env={**os.environ, **kdc.env(), "KAFKA_OPTS": kafka_opts},
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr

        anon = KazooClient(hosts=zk.connect_string(c.chroot), timeout=15)
        anon.start(15)

        def acl(path):
            acls, _ = anon.get_acls(path)
            return sorted((a.id.scheme, a.id.id, a.perms) for a in acls)
        owner_and_readers = sorted([("sasl", principal, Permissions.ALL), ("world", "anyone", Permissions.READ)])
        for path in ("/brokers/ids/1", "/brokers/topics/kerberized", "/brokers/topics/kerberized/partitions/0/state",
                     "/controller", "/cluster/id"):
            assert acl(path) == owner_and_readers, path
        with pytest.raises(NoAuthError):       # not even its ACL may be read without the identity
            acl("/config/users/carol")
        # the broker's identity sees it (a Kerberos kazoo session of this process, same login)
        from broker.security.kerberos import ZK_GSSAPI, register_zookeeper_gssapi
        register_zookeeper_gssapi()
        with kerberos_env(kdc.env()):
            owner = KazooClient(hosts=zk.connect_string(c.chroot), timeout=15, sasl_options={
                "mechanism": ZK_GSSAPI, "service": "zookeeper",
                "jaas": {"useKeyTab": "true", "keyTab": str(keytab), "principal": principal}})
            owner.start(15)
            try:
                acls, _ = owner.get_acls("/config/users/carol")
                assert sorted((a.id.scheme, a.id.id, a.perms) for a in acls) == [("sasl", principal, Permissions.ALL)]
                assert b"stored_key" in owner.get("/config/users/carol")[0]
            finally:
                owner.stop()
                owner.close()
        assert anon.get("/brokers/topics/kerberized")[0]
        with pytest.raises(NoAuthError):
            anon.set("/brokers/topics/kerberized", b"{}")
        with pytest.raises(NoAuthError):
            anon.get("/config/users/carol")
    finally:
        if anon is not None:
            anon.stop()
            anon.close()
        c.shutdown()


def test_a_principal_missing_from_the_keytab_stops_the_broker(kdc, kerberized_zookeeper, tmp_path):
    keytab = kdc.add_service("kafka/localhost")
    jaas = client_jaas(tmp_path / "broker-jaas.conf", keytab, f"someone-else/localhost@{kdc.realm}")
    c = Cluster(tmp_path / "cluster", kerberized_zookeeper, 1, props={"zookeeper.set.acl": "true"})
    b = c.brokers[1]
    b.extra_env.update(kdc.env())
    b.extra_env["KAFKA_OPTS"] = f"-Djava.security.auth.login.config={jaas}"
    try:
        b.start(wait=False)
        assert b.proc.wait(60) == 1
        out = b.log_path.read_text(errors="replace")
        assert "the Client section of" in out and "no Kerberos credentials" in out, out[-2000:]
    finally:
        c.shutdown()


def test_zookeeper_server_principal(kdc, tmp_path):
    """A ZooKeeper whose principal is not named after the host the broker connects to
    (``zookeeper/zk.odradek.test``, reached as 127.0.0.1): the login fails unless
    -Dzookeeper.server.principal names it (the realm then the client's own, as ZooKeeper's client
    does); with it the broker starts and owns its znodes."""
    gen = _kerberized_zookeeper(kdc, tmp_path, "zk.odradek.test")
    zk = next(gen)
    principal = f"kafka/localhost@{kdc.realm}"
    keytab = kdc.add_service("kafka/localhost")
    jaas = client_jaas(tmp_path / "broker-jaas.conf", keytab, principal)
    from broker.security.kerberos import ZK_GSSAPI, register_zookeeper_gssapi
    register_zookeeper_gssapi()
    login = {"mechanism": ZK_GSSAPI, "service": "zookeeper",
             "jaas": {"useKeyTab": "true", "keyTab": str(keytab), "principal": principal}}
    c = Cluster(tmp_path / "cluster", zk, 1, props={"zookeeper.set.acl": "true"})
    for b in c.brokers.values():
        b.extra_env.update(kdc.env())
        b.extra_env["KAFKA_OPTS"] = (f"-Djava.security.auth.login.config={jaas} "
                                     "-Dzookeeper.server.principal=zookeeper/zk.odradek.test")
    try:
        from broker.security.kerberos import GssapiClient, initiator_credentials
        with kerberos_env(kdc.env()):
            creds = initiator_credentials(login["jaas"])
            with pytest.raises(Exception, match="not found in Kerberos database"):
                GssapiClient(creds, "zookeeper", "127.0.0.1").step(None)     # the host-based name
            assert GssapiClient(creds, "zookeeper", "127.0.0.1", f"zookeeper/zk.odradek.test@{kdc.realm}").step(None)
        c.start()
        c.create_topic("named-server", partitions=1, rf=1)
        c.wait_for_isr("named-server", 0, [1])
        with kerberos_env(kdc.env()):
            owner = KazooClient(hosts=zk.connect_string(c.chroot), timeout=15, sasl_options={
                **login, "server": {"principal": "zookeeper/zk.odradek.test"}})
            owner.start(15)
            try:
                acls, _ = owner.get_acls("/brokers/topics/named-server")
                assert ("sasl", principal, Permissions.ALL) in [(a.id.scheme, a.id.id, a.perms) for a in acls]
            finally:
                owner.stop()
                owner.close()
    finally:
        c.shutdown()
        gen.close()

"""ZooKeeper over TLS (KIP-515): brokers reach a ZooKeeper whose only client port is its TLS one
(Netty, ``ssl.clientAuth=need``, X509AuthenticationProvider) with ``zookeeper.ssl.*``, PEM and
PKCS12 stores, and with ``zookeeper.set.acl=true`` their certificate's subject owns the znodes.
The ZooKeeper tools reach it with ``--zk-tls-config-file``.  A broker whose trust store does not
hold ZooKeeper's CA, or that names no client socket, does not start."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cluster import Cluster
from tests.support.net import free_port
from tests.support.zookeeper import ZooKeeperProcess, zookeeper_available

pytestmark = pytest.mark.cluster
pytest.importorskip("cryptography")

REPO = Path(__file__).resolve().parents[2]
NETTY_CODEC = "/usr/share/java/netty-codec.jar"     # Debian's zookeeper.jar manifest leaves it out


@pytest.fixture
def tls_zookeeper(tmp_path):
    ok, why = zookeeper_available()
    if not ok:
        pytest.skip(why)
    if not os.path.exists(NETTY_CODEC):
        pytest.skip(f"{NETTY_CODEC} not installed (Debian's libnetty-java)")
    from tests.support.pki import issue, make_pki
    pki = make_pki(tmp_path / "pki")
    server = issue(pki, "zookeeper", "zookeeper")
    secure = free_port()
    zk = ZooKeeperProcess(tmp_path / "zk", config={
        "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
        "secureClientPort": secure, "secureClientPortAddress": "127.0.0.1",
        "ssl.keyStore.location": str(server.pem), "ssl.keyStore.type": "PEM",
        "ssl.trustStore.location": str(pki.ca), "ssl.trustStore.type": "PEM",
        "ssl.clientAuth": "need",
        "authProvider.x509": "org.apache.zookeeper.server.auth.X509AuthenticationProvider"},
        classpath=[NETTY_CODEC])
    zk.start()          # readiness is probed on the plain port, which the brokers never use
    zk.secure_connect = f"127.0.0.1:{secure}"
    zk.pki = pki
    try:
        yield zk
    finally:
        zk.kill()


def _tls_props(pki, cert, store="pem"):
    p = {"zookeeper.ssl.client.enable": "true",
         "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
         "zookeeper.ssl.truststore.location": str(pki.ca), "zookeeper.ssl.truststore.type": "PEM"}
    if store == "pem":
        p.update({"zookeeper.ssl.keystore.location": str(cert.pem), "zookeeper.ssl.keystore.type": "PEM"})
    else:
        p.update({"zookeeper.ssl.keystore.location": str(cert.p12), "zookeeper.ssl.keystore.type": "PKCS12",
                  "zookeeper.ssl.keystore.password": cert.password})
    return p


def test_brokers_over_zookeeper_tls_own_their_znodes(tls_zookeeper, tmp_path):
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError
    from tests.support.pki import issue
    zk, pki = tls_zookeeper, tls_zookeeper.pki
    cert = issue(pki, "brokers", "kafka-brokers", ou="brokers")
    chroot = zk.new_chroot()

    class TlsZk:                        # the cluster harness reads only these two
        def connect_string(self, c=None):
            return zk.secure_connect + (c or "")

        def new_chroot(self):
            return chroot
    c = Cluster(tmp_path / "cluster", TlsZk(), 2, props={
        "zookeeper.set.acl": "true", "default.replication.factor": 2, "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 2, "transaction.state.log.replication.factor": 2,
        "transaction.state.log.min.isr": 1})
    for i, b in c.brokers.items():
        b.props.update(_tls_props(pki, cert, "pem" if i == 1 else "pkcs12"))
    c._zk = KazooClient(hosts=zk.secure_connect + chroot, use_ssl=True, ca=str(pki.ca), certfile=str(cert.chain),
                        keyfile=str(cert.key), verify_certs=True, timeout=15)
    c._zk.start(15)
    try:
        c.start()
        c.create_topic("tls-zk", partitions=2, rf=2)
        c.wait_for_isr("tls-zk", 0, [1, 2])
        acls, _ = c._zk.get_acls("/brokers/topics/tls-zk")
        assert sorted((a.id.scheme, a.id.id, a.perms) for a in acls) == [
            ("world", "anyone", 1), ("x509", cert.subject, 31)]

        # another certificate of the same CA may read but not change
        other = issue(pki, "other", "someone-else")
        o = KazooClient(hosts=zk.secure_connect + chroot, use_ssl=True, ca=str(pki.ca), certfile=str(other.chain),
                        keyfile=str(other.key), verify_certs=True, timeout=15)
        o.start(15)
        try:
            assert o.get("/brokers/topics/tls-zk")[0]
            with pytest.raises(NoAuthError):
                o.set("/brokers/topics/tls-zk", b"{}")
        finally:
            o.stop()
            o.close()

        # the ZooKeeper tools with --zk-tls-config-file
        tls_file = tmp_path / "zk-tls.properties"
        tls_file.write_text("".join(f"{k}={v}\n" for k, v in _tls_props(pki, cert).items()))
        r = subprocess.run([str(REPO / "bin" / "kafka-configs.sh"), "--zookeeper", zk.secure_connect + chroot,
                            "--zk-tls-config-file", str(tls_file), "--alter", "--entity-type", "users",
                            "--entity-name", "tls-user", "--add-config", "SCRAM-SHA-512=[password=x-secret]"],
                           capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert r.returncode == 0, r.stdout + r.stderr
        acls, _ = c._zk.get_acls("/config/users/tls-user")
        assert [(a.id.scheme, a.id.id) for a in acls] == [("x509", cert.subject)]
    finally:
        c.shutdown()            # closes c._zk too


def test_a_broker_that_cannot_trust_zookeeper_does_not_start(tls_zookeeper, tmp_path):
    from tests.support.pki import issue, make_pki
    zk = tls_zookeeper
    stranger = make_pki(tmp_path / "other-pki", "Another CA")
    cert = issue(zk.pki, "broker", "kafka-broker")
    props = _tls_props(stranger, cert)      # trusts another CA than the one that signed ZooKeeper's
    c = Cluster(tmp_path / "c1", zk, 1, props={**props, "zookeeper.connection.timeout.ms": 3000})
    c.connect = zk.secure_connect + c.chroot
    b = c.brokers[1]
    b.props["zookeeper.connect"] = c.connect
    try:
        b.start(wait=False)
        assert b.proc.wait(60) == 1
    finally:
        c.shutdown()
    props.pop("zookeeper.clientCnxnSocket")
    c2 = Cluster(tmp_path / "c2", zk, 1, props=props)
    b2 = c2.brokers[1]
    try:
        b2.start(wait=False)
        assert b2.proc.wait(60) == 1
        assert "zookeeper.clientCnxnSocket must be org.apache.zookeeper.ClientCnxnSocketNetty" in \
            b2.log_path.read_text(errors="replace")
    finally:
        c2.shutdown()


def test_zookeeper_tls_versions_and_ciphers_are_applied(tls_zookeeper, tmp_path):
    """``zookeeper.ssl.protocol`` alone (TLSv1.2 by default, as Kafka's client enables it),
    ``zookeeper.ssl.enabled.protocols`` and ``zookeeper.ssl.cipher.suites`` decide what the
    session with the real ZooKeeper negotiates.  This ZooKeeper (Debian's, on Java 17) offers
    TLSv1.2 only: a client that allows only TLSv1.3 does not get in, and ZooKeeper's log says why."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    from broker.config import ConfigError
    from controller.zookeeper.zkauth import zk_security
    from tests.support.pki import issue
    zk, pki = tls_zookeeper, tls_zookeeper.pki
    cert = issue(pki, "client", "kafka-client")

    def negotiated(extra, timeout=15):
        props = {**_tls_props(pki, cert), **extra}
        sec = zk_security(False, environ={}, get=props.get)
        client = KazooClient(hosts=zk.secure_connect, timeout=15, **sec.client_args())
        try:
            client.start(timeout)
            assert client.get_children("/") is not None
            sock = client._connection._socket
            return sock.version(), sock.cipher()[0]
        finally:
            client.stop()
            client.close()

    assert negotiated({})[0] == "TLSv1.2"                                   # Kafka's default
    assert negotiated({"zookeeper.ssl.enabled.protocols": "TLSv1.2,TLSv1.3"})[0] == "TLSv1.2"
    version, cipher = negotiated({"zookeeper.ssl.cipher.suites": "ECDHE+AESGCM:!AES256"})
    assert version == "TLSv1.2" and "AES128-GCM" in cipher, cipher
    version, cipher = negotiated({"zookeeper.ssl.cipher.suites": "ECDHE+AESGCM:!AES128"})
    assert "AES256-GCM" in cipher, cipher
    with pytest.raises(KazooTimeoutError):
        negotiated({"zookeeper.ssl.protocol": "TLSv1.3"}, timeout=3)
    assert "The client supported protocol versions [TLSv1.3] are not accepted" in \
        zk.log_path.read_text(errors="replace")
    with pytest.raises(ConfigError, match="TLS protocol SSLv3 is not supported"):
        zk_security(False, environ={}, get={**_tls_props(pki, cert), "zookeeper.ssl.protocol": "SSLv3"}.get)
    # Kafka's (Java's, IANA's) names work as well as OpenSSL's
    version, cipher = negotiated({"zookeeper.ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"})
    assert (version, cipher) == ("TLSv1.2", "ECDHE-ECDSA-AES256-GCM-SHA384")
    with pytest.raises(ConfigError, match="NOPE-CIPHER is not a cipher suite"):
        zk_security(False, environ={}, get={**_tls_props(pki, cert), "zookeeper.ssl.cipher.suites": "NOPE-CIPHER"}.get)

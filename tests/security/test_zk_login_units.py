"""The pieces of the brokers' ZooKeeper login without a ZooKeeper: JAAS files, KAFKA_OPTS'
-D options, and zkauth's choice of identity and ACLs (the real thing: tests/cluster/
test_cluster_zk_acl.py and test_cluster_zk_tls.py)."""
import pytest

from broker.config import ConfigError
from broker.security.jaas import java_system_properties, parse_jaas_file
from controller.zookeeper.zkauth import SENSITIVE_ROOTS, zk_security, zk_tls


def test_jaas_file_sections_and_comments():
    text = """/* the broker's logins */
    KafkaServer {
        org.apache.kafka.common.security.plain.PlainLoginModule required
        user_admin="a;b" // a comment after a quoted value that holds a ;
        ;
    };
    // ZooKeeper
    Client { org.apache.zookeeper.server.auth.DigestLoginModule required username="kafka" password="s3cret"; };
    """
    sections = parse_jaas_file(text)
    assert sections["Client"] == ("org.apache.zookeeper.server.auth.DigestLoginModule",
                                  {"username": "kafka", "password": "s3cret"})
    assert sections["KafkaServer"][1] == {"user_admin": "a;b"}
    with pytest.raises(ConfigError):
        parse_jaas_file("Client { x required; }; stray")


def test_kafka_opts_system_properties():
    props = java_system_properties('-Xmx1G -Djava.security.auth.login.config=/etc/k.conf '
                                   '-Dzookeeper.sasl.client=false "-Da.b=c d" -XX:+UseG1GC')
    assert props == {"java.security.auth.login.config": "/etc/k.conf", "zookeeper.sasl.client": "false",
                     "a.b": "c d"}
    assert java_system_properties(None) == {}


def _jaas(tmp_path, body):
    p = tmp_path / "jaas.conf"
    p.write_text(body)
    return {"KAFKA_OPTS": f"-Djava.security.auth.login.config={p}"}


def test_digest_login_and_acls(tmp_path):
    env = _jaas(tmp_path, 'Client { org.apache.zookeeper.server.auth.DigestLoginModule required '
                          'username="kafka" password="pw"; };')
    sec = zk_security(True, env)
    assert sec.sasl_options == {"mechanism": "DIGEST-MD5", "username": "kafka", "password": "pw",
                                "service": "zookeeper"}
    assert sec.identity == "sasl:kafka"
    default = sec.default_acl()
    assert sorted((a.id.scheme, a.perms) for a in default) == [("auth", 31), ("world", 1)]
    for root in SENSITIVE_ROOTS:
        assert [a.id.scheme for a in sec.acl_for(root + "/x")] == ["auth"]
    assert sec.acl_for("/brokers/ids/1") is None and sec.acl_for("/config/usersx") is None
    off = zk_security(False, env)
    assert off.default_acl() is None and off.acl_for("/config/users/a") is None and off.sasl_options


def test_refusals(tmp_path):
    with pytest.raises(ConfigError, match="no JAAS file is given"):
        zk_security(True, {})
    with pytest.raises(ConfigError, match="has no Client section"):
        zk_security(True, _jaas(tmp_path, "Other { a.B required; };"))
    with pytest.raises(ConfigError, match="zookeeper.sasl.client is false"):
        env = _jaas(tmp_path, 'Client { org.apache.zookeeper.server.auth.DigestLoginModule required '
                              'username="k" password="p"; };')
        env["KAFKA_OPTS"] += " -Dzookeeper.sasl.client=false"
        zk_security(True, env)
    with pytest.raises(ConfigError, match="needs username and password"):
        zk_security(False, _jaas(tmp_path, "Client { org.apache.zookeeper.server.auth.DigestLoginModule "
                                           "required username=\"k\"; };"))
    assert zk_security(False, {}).identity is None


def test_tls_settings(tmp_path):
    from tests.support.pki import issue, make_pki
    pki = make_pki(tmp_path / "pki")
    cert = issue(pki, "zkclient", "zk-client")
    base = {"zookeeper.ssl.client.enable": "true",
            "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
            "zookeeper.ssl.truststore.location": str(pki.ca),
            "zookeeper.ssl.endpoint.identification.algorithm": "HTTPS"}
    args, subject = zk_tls(base.get)
    import ssl
    assert args == {"use_ssl": True, "verify_certs": True, "ca": str(pki.ca), "check_hostname": True,
                    "tls_policy": (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2, None)}   # Kafka's TLSv1.2
    policy = zk_tls({**base, "zookeeper.ssl.enabled.protocols": ["TLSv1.3", "TLSv1.2"],
                     "zookeeper.ssl.cipher.suites": "ECDHE+AESGCM, ECDHE+CHACHA20"}.get)[0]["tls_policy"]
    assert policy == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3, "ECDHE+AESGCM:ECDHE+CHACHA20")
    client = zk_security(False, {}, get=base.get).client_args()
    assert "tls_policy" not in client and type(client["handler"]).__name__ == "ZkTlsHandler"
    assert subject is None
    with_key = {**base, "zookeeper.ssl.keystore.location": str(cert.p12), "zookeeper.ssl.keystore.type": "PKCS12",
                "zookeeper.ssl.keystore.password": cert.password, "zookeeper.ssl.endpoint.identification.algorithm": ""}
    args, subject = zk_tls(with_key.get)
    assert subject == cert.subject and args["certfile"] == args["keyfile"] and not args["check_hostname"]
    sec = zk_security(True, {}, get=with_key.get)      # the certificate is an identity for set.acl
    assert sec.identity == f"x509:{cert.subject}" and sec.tls["use_ssl"]
    for bad, why in (({**base, "zookeeper.clientCnxnSocket": None}, "ClientCnxnSocketNetty"),
                     ({**base, "zookeeper.ssl.ocsp.enable": "true"}, "ocsp.enable=true is not supported"),
                     ({**base, "zookeeper.ssl.truststore.type": "BKS"}, "BKS is not supported"),
                     ({**base, "zookeeper.ssl.truststore.type": "JCEKS"}, "JCEKS file .* Invalid keystore format")):
        with pytest.raises(ConfigError, match=why):
            zk_tls(bad.get)
    assert zk_tls({}.get) == (None, None)


def test_zookeeper_server_principal_naming():
    """ZooKeeper's client naming of the server: nothing given leaves the host-based name to the
    Kerberos library; a configured principal wins (the client's realm added when it has none);
    otherwise service/host, canonicalized unless told not to, in the server realm or the client's."""
    from broker.security.kerberos import canonical_host_name, zookeeper_server_principal as name
    client = "kafka/localhost@EXAMPLE.COM"
    assert name("zk1", "zookeeper", {}, client) is None
    assert name("zk1", "zookeeper", {"principal": "zookeeper/zk.example.com"}, client) == \
        "zookeeper/zk.example.com@EXAMPLE.COM"
    assert name("zk1", "zookeeper", {"principal": "zk/x@OTHER", "realm": "R"}, client) == "zk/x@OTHER"
    assert name("10.9.8.7", "zookeeper", {"canonicalize": "false"}, client) == "zookeeper/10.9.8.7@EXAMPLE.COM"
    assert name("10.9.8.7", "zk", {"canonicalize": "false", "realm": "ZK.REALM"}, client) == "zk/10.9.8.7@ZK.REALM"
    # canonical: what a reverse lookup of the address says; the address itself when that fails
    assert name("127.0.0.1", "zookeeper", {"realm": "R"}, client) == f"zookeeper/{canonical_host_name('127.0.0.1')}@R"
    assert canonical_host_name("no-such-host.invalid") == "no-such-host.invalid"

"""Java KeyStore (JKS) files, Kafka's default key and trust store type, and Sun's JCEKS files,
written by the JDK's own ``keytool`` and read by ``broker/security/jks.py``: the key and chain
come back as they went in, a wrong store or key password and a tampered file are refused, and a
broker whose SSL listener uses JKS stores (type left at the default) or JCEKS stores serves
clients with mutual TLS."""
from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from broker.config import ConfigError
from broker.security import jks
from tests.support.pki import issue

pytest.importorskip("cryptography")
KEYTOOL = shutil.which("keytool")
pytestmark = pytest.mark.skipif(KEYTOOL is None, reason="keytool (a JDK) is not installed")
STORE_PW = "store-secret"


def keytool(*args):
    cp = subprocess.run([KEYTOOL, *args], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    return cp


def jks_keystore(issued, path, store_pw=STORE_PW, key_pw=None):
    """``issued``'s PKCS12 file converted by keytool into a JKS key store."""
    return jks_keystore_of(issued, path, "JKS", store_pw, key_pw)


def jks_keystore_of(issued, path, store_type, store_pw=STORE_PW, key_pw=None):
    keytool("-importkeystore", "-noprompt", "-srckeystore", str(issued.p12), "-srcstoretype", "PKCS12",
            "-srcstorepass", issued.password, "-destkeystore", str(path), "-deststoretype", store_type,
            "-deststorepass", store_pw, "-destkeypass", key_pw or store_pw)
    return path


def jks_truststore(ca_pem, path, store_pw=STORE_PW, store_type="JKS"):
    keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem), "-keystore", str(path),
            "-storetype", store_type, "-storepass", store_pw)
    return path


def _der_certs(pem_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    return [c.public_bytes(serialization.Encoding.DER) for c in x509.load_pem_x509_certificates(pem_path.read_bytes())]


def test_key_store_round_trip(pki, tmp_path):
    from cryptography.hazmat.primitives import serialization
    issued = issue(pki, "jks-" + uuid.uuid4().hex[:6], "localhost")
    data = jks_keystore(issued, tmp_path / "ks.jks").read_bytes()
    assert jks.is_jks(data)
    store = jks.load(data, STORE_PW)
    assert len(store.keys) == 1 and store.certificates == []
    entry = store.keys[0]
    assert entry.chain == _der_certs(issued.chain)                 # leaf, then the CA
    key = serialization.load_der_private_key(jks.unprotect(entry.key_der, STORE_PW), None)
    original = serialization.load_pem_private_key(issued.key.read_bytes(), None)
    assert key.private_numbers() == original.private_numbers()


def test_passwords_and_tampering(pki, tmp_path):
    issued = issue(pki, "jks-" + uuid.uuid4().hex[:6], "localhost")
    data = jks_keystore(issued, tmp_path / "ks.jks", key_pw="key-secret").read_bytes()
    with pytest.raises(jks.JksError, match="tampered with, or password was incorrect"):
        jks.load(data, "wrong")
    store = jks.load(data, None)           # no store password: read without the integrity check
    with pytest.raises(jks.JksError, match="key password is incorrect"):
        jks.unprotect(store.keys[0].key_der, STORE_PW)
    assert jks.unprotect(store.keys[0].key_der, "key-secret")
    bad = bytearray(data)
    bad[len(bad) // 2] ^= 1
    with pytest.raises(jks.JksError, match="tampered"):
        jks.load(bytes(bad), STORE_PW)
    with pytest.raises(jks.JksError):
        jks.load(data[:40], None)


def test_trust_store_entries(pki, tmp_path):
    store = jks.load(jks_truststore(pki.ca, tmp_path / "ts.jks").read_bytes(), STORE_PW)
    assert store.keys == [] and [d for _, d in store.certificates] == _der_certs(pki.ca)


def test_tls_config_errors_name_the_key(pki, tmp_path):
    from broker.config import BrokerConfig
    from broker.security.tls import server_context
    issued = issue(pki, "jks-" + uuid.uuid4().hex[:6], "localhost")
    ks = jks_keystore(issued, tmp_path / "ks.jks", key_pw="key-secret")
    base = {"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL",
            "ssl.keystore.location": str(ks),
            "ssl.keystore.password": STORE_PW}
    with pytest.raises(ConfigError, match="key password is incorrect") as e:
        server_context(BrokerConfig.from_dict(base), "SSL")      # ssl.key.password missing: store pw tried
    assert e.value.key == "ssl.keystore.location"
    with pytest.raises(ConfigError, match="tampered"):
        server_context(BrokerConfig.from_dict({**base, "ssl.keystore.password": "nope"}), "SSL")
    assert server_context(BrokerConfig.from_dict({**base, "ssl.key.password": "key-secret"}), "SSL")


def test_broker_serves_mutual_tls_from_jks_stores(secure_broker, pki, tmp_path):
    """A server.properties as written for Kafka: JKS key and trust stores, no store type given
    (Kafka's default is JKS), a key password of its own; confluent-kafka with a client
    certificate produces and consumes."""
    from tests.security.test_auth import _produce_consume
    issued = issue(pki, "jks-" + uuid.uuid4().hex[:6], "localhost")
    ks = jks_keystore(issued, tmp_path / "kafka.server.keystore.jks", key_pw="key-secret")
    ts = jks_truststore(pki.ca, tmp_path / "kafka.server.truststore.jks")
    b = secure_broker(listeners=("SSL",), client_auth="required", props={
        "ssl.keystore.type": None, "ssl.keystore.location": str(ks), "ssl.keystore.password": STORE_PW,
        "ssl.key.password": "key-secret", "ssl.truststore.location": str(ts),
        "ssl.truststore.password": STORE_PW})
    conf = {"bootstrap.servers": b.addr("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
    assert _produce_consume(conf, "jks-mtls", 3) == [b"v0", b"v1", b"v2"]
    # Kafka's tools with a client properties file as Kafka's docs write it: JKS stores again
    from pathlib import Path
    client = issue(pki, "jks-client-" + uuid.uuid4().hex[:6], "jks-client")
    cks = jks_keystore(client, tmp_path / "client.keystore.jks")
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.location={ts}\nssl.truststore.password={STORE_PW}\n"
                     f"ssl.keystore.location={cks}\nssl.keystore.password={STORE_PW}\n"
                     f"ssl.key.password={STORE_PW}\n")
    tool = Path(__file__).resolve().parents[2] / "bin" / "kafka-topics.sh"
    cp = subprocess.run([str(tool), "--bootstrap-server", b.addr("SSL"), "--command-config", str(props), "--list"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "jks-mtls" in cp.stdout.split()


# -- JCEKS ------------------------------------------------------------------------------------------

def test_jceks_key_and_trust_stores(pki, tmp_path):
    """A JCEKS key store (its key under PBEWithMD5AndTripleDES) gives back the key and chain that
    went in; wrong passwords and a changed byte are refused; a trust store lists its CA; a secret
    key entry (a serialized Java object) is passed over, and one cut short is refused with its
    alias named."""
    from cryptography.hazmat.primitives import serialization
    issued = issue(pki, "jceks-" + uuid.uuid4().hex[:6], "localhost")
    data = jks_keystore_of(issued, tmp_path / "ks.jceks", "JCEKS", key_pw="key-secret").read_bytes()
    assert data[:4] == bytes.fromhex("cececece") and jks.is_jks(data)
    store = jks.load(data, STORE_PW)
    entry = store.keys[0]
    assert entry.chain == _der_certs(issued.chain)
    key = serialization.load_der_private_key(jks.unprotect(entry.key_der, "key-secret"), None)
    original = serialization.load_pem_private_key(issued.key.read_bytes(), None)
    assert key.private_numbers() == original.private_numbers()
    with pytest.raises(jks.JksError, match="key password is incorrect"):
        jks.unprotect(entry.key_der, STORE_PW)
    with pytest.raises(jks.JksError, match="tampered with, or password was incorrect"):
        jks.load(data, "wrong")
    bad = bytearray(data)
    bad[len(bad) // 2] ^= 1
    with pytest.raises(jks.JksError, match="tampered"):
        jks.load(bytes(bad), STORE_PW)
    trust = jks.load(jks_truststore(pki.ca, tmp_path / "ts.jceks", store_type="JCEKS").read_bytes(), STORE_PW)
    assert trust.keys == [] and [d for _, d in trust.certificates] == _der_certs(pki.ca)
    # secret keys (serialized Java objects) are passed over, before and after the private key
    keytool("-genseckey", "-alias", "aes1", "-keyalg", "AES", "-keysize", "128", "-keystore",
            str(tmp_path / "ks.jceks"), "-storetype", "JCEKS", "-storepass", STORE_PW, "-keypass", STORE_PW)
    keytool("-genseckey", "-alias", "hmac1", "-keyalg", "HmacSHA256", "-keysize", "256", "-keystore",
            str(tmp_path / "ks.jceks"), "-storetype", "JCEKS", "-storepass", STORE_PW, "-keypass", "other")
    mixed = jks.load((tmp_path / "ks.jceks").read_bytes(), STORE_PW)
    assert sorted(mixed.secret_keys) == ["aes1", "hmac1"]
    assert [(e.alias, e.chain) for e in mixed.keys] == [(entry.alias, entry.chain)]
    assert jks.unprotect(mixed.keys[0].key_der, "key-secret") == jks.unprotect(entry.key_der, "key-secret")
    secret = tmp_path / "secret.jceks"
    keytool("-genseckey", "-alias", "aes2", "-keyalg", "AES", "-keysize", "128", "-keystore", str(secret),
            "-storetype", "JCEKS", "-storepass", STORE_PW, "-keypass", STORE_PW)
    only = jks.load(secret.read_bytes(), STORE_PW)
    assert only.keys == [] and only.certificates == [] and only.secret_keys == ("aes2",)
    cut = bytearray(secret.read_bytes()[:-40])     # the serialized object cut short
    with pytest.raises(jks.JksError, match="'aes2' cannot be read"):
        jks.load(bytes(cut), None)


def test_jceks_type_and_config_errors(pki, tmp_path):
    from broker.config import BrokerConfig
    from broker.security.tls import server_context
    issued = issue(pki, "jceks-" + uuid.uuid4().hex[:6], "localhost")
    ks = jks_keystore_of(issued, tmp_path / "ks.jceks", "JCEKS", key_pw="key-secret")
    base = {"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL",
            "ssl.keystore.type": "JCEKS", "ssl.keystore.location": str(ks), "ssl.keystore.password": STORE_PW,
            "ssl.key.password": "key-secret"}
    assert server_context(BrokerConfig.from_dict(base), "SSL")
    with pytest.raises(ConfigError, match="key password is incorrect") as e:
        server_context(BrokerConfig.from_dict({**base, "ssl.key.password": "nope"}), "SSL")
    assert e.value.key == "ssl.keystore.location"
    # Java's JCEKS type reads JKS files too, but not PKCS12 ones
    jks_file = jks_keystore(issued, tmp_path / "ks.jks", key_pw="key-secret")
    assert server_context(BrokerConfig.from_dict({**base, "ssl.keystore.location": str(jks_file)}), "SSL")
    with pytest.raises(ConfigError, match="Invalid keystore format"):
        server_context(BrokerConfig.from_dict({**base, "ssl.keystore.location": str(issued.p12),
                                               "ssl.keystore.password": issued.password}), "SSL")
    with pytest.raises(ConfigError, match="ssl.keystore.type=BKS is not supported"):
        server_context(BrokerConfig.from_dict({**base, "ssl.keystore.type": "BKS"}), "SSL")


def test_broker_serves_mutual_tls_from_jceks_stores(secure_broker, pki, tmp_path):
    from tests.security.test_auth import _produce_consume
    issued = issue(pki, "jceks-" + uuid.uuid4().hex[:6], "localhost")
    ks = jks_keystore_of(issued, tmp_path / "kafka.server.keystore.jceks", "JCEKS", key_pw="key-secret")
    ts = jks_truststore(pki.ca, tmp_path / "kafka.server.truststore.jceks", store_type="JCEKS")
    b = secure_broker(listeners=("SSL",), client_auth="required", props={
        "ssl.keystore.type": "JCEKS", "ssl.keystore.location": str(ks), "ssl.keystore.password": STORE_PW,
        "ssl.key.password": "key-secret", "ssl.truststore.type": "JCEKS", "ssl.truststore.location": str(ts),
        "ssl.truststore.password": STORE_PW})
    conf = {"bootstrap.servers": b.addr("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
    assert _produce_consume(conf, "jceks-mtls", 3) == [b"v0", b"v1", b"v2"]

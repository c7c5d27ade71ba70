"""Unit tests: certificate subjects as Kafka's principals (RFC 2253 as Java prints it),
``ssl.principal.mapping.rules``, inline PEM normalisation and
``ssl.endpoint.identification.algorithm`` (no broker needed)."""
from __future__ import annotations

import datetime

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.security.principal import NoMatchingRule, PrincipalMapper, subject_from_der
from broker.security.tls import client_context, endpoint_identification, normalize_pem


def _der_cert(rdns) -> bytes:
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    name = x509.Name([x509.RelativeDistinguishedName(r) for r in rdns])
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(7).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


def test_subject_most_specific_first_with_keywords_escapes_and_oids():
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.x509.oid import NameOID
    A = x509.NameAttribute
    der = _der_cert([
        [A(NameOID.COUNTRY_NAME, "DE")],
        [A(NameOID.ORGANIZATION_NAME, "Acme, Inc.")],
        [A(NameOID.ORGANIZATIONAL_UNIT_NAME, "ops+dev")],
        [A(NameOID.EMAIL_ADDRESS, "ops@acme.test")],           # no RFC 2253 keyword: OID and DER hex
        [A(NameOID.COMMON_NAME, " kafka-1 ")],                 # leading/trailing spaces escaped
    ])
    email_der = "16" + "0d" + b"ops@acme.test".hex()           # IA5String, 13 bytes
    assert subject_from_der(der) == (f"CN=\\ kafka-1\\ ,1.2.840.113549.1.9.1=#{email_der},"
                                     "OU=ops\\+dev,O=Acme\\, Inc.,C=DE")


def test_subject_multi_valued_rdn_and_special_characters():
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.x509.oid import NameOID
    A = x509.NameAttribute
    der = _der_cert([[A(NameOID.DOMAIN_COMPONENT, "test")], [A(NameOID.DOMAIN_COMPONENT, "example")],
                     [A(NameOID.COMMON_NAME, "a=b#c;<d>\"e\\")],
                     ])
    assert subject_from_der(der) == 'CN=a\\=b\\#c\\;\\<d\\>\\"e\\\\,DC=example,DC=test'
    der = _der_cert([[A(NameOID.ORGANIZATION_NAME, "Org")],
                     [A(NameOID.COMMON_NAME, "svc"), A(NameOID.USER_ID, "42")]])
    assert subject_from_der(der) in ("CN=svc+UID=42,O=Org", "UID=42+CN=svc,O=Org")   # encoded (DER set) order


def test_mapping_rules_first_applicable_rule_wins():
    m = PrincipalMapper("RULE:^CN=([^,]+),OU=brokers,.*$/$1/L, RULE:^CN=([^,]+),OU=([^,]+),.*$/$2-$1/U ,DEFAULT")
    assert m.name("CN=Broker7,OU=brokers,O=Acme") == "broker7"
    assert m.name("CN=app,OU=payments,O=Acme") == "PAYMENTS-APP"
    assert m.name("CN=plain,O=Acme") == "CN=plain,O=Acme"          # DEFAULT: the subject as it is
    assert PrincipalMapper(None).name("CN=x") == "CN=x"
    assert PrincipalMapper("DEFAULT").is_default


def test_mapping_rule_references_and_no_match():
    m = PrincipalMapper("RULE:^CN=(\\w+),O=(\\w+)$/$2:$1:$3/")
    assert m.name("CN=alice,O=acme") == "acme:alice:$3"             # no group 3: literal
    m = PrincipalMapper("RULE:^CN=(\\w+)$/user-\\$$1/")
    assert m.name("CN=bob") == "user-$bob"                           # \$ is a literal dollar
    with pytest.raises(NoMatchingRule):
        m.name("CN=bob,O=acme")                                      # must match the whole subject
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("").name("CN=bob")                           # no rules at all


@pytest.mark.parametrize("rules", ["default", "DEFAULT/U", "RULE:^CN=(.*)$/$1/X", "RULE:^CN=(.*)$/L",
                                   "RULE:^CN=(.*)$/$1", "RULE:^CN=((.*)$/$1/"])
def test_mapping_rules_that_do_not_parse(rules):
    with pytest.raises(ValueError):
        PrincipalMapper(rules)


def test_mapping_rules_split_with_spaces_and_empty_entries():
    m = PrincipalMapper(" , RULE:^CN=(x)$/y/L ,, DEFAULT , ")
    assert [r.text for r in m.rules] == ["RULE:^CN=(x)$/y/L", "DEFAULT"]


def test_inline_pem_on_one_line_or_with_escaped_newlines_is_rewrapped():
    body = "QUJD" * 40
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    want = "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"
    assert normalize_pem(f"-----BEGIN CERTIFICATE----- {body[:50]} {body[50:]} -----END CERTIFICATE-----") == want
    assert normalize_pem(want.replace("\n", "\\n")) == want
    two = normalize_pem(want + want.replace("CERTIFICATE", "PRIVATE KEY"))
    assert two.count("-----BEGIN") == 2 and "-----END PRIVATE KEY-----" in two


def test_endpoint_identification_empty_value_turns_host_name_checks_off():
    assert endpoint_identification(BrokerConfig({}), "SSL") is True
    assert endpoint_identification(BrokerConfig({"ssl.endpoint.identification.algorithm": ""}), "SSL") is False
    assert endpoint_identification(BrokerConfig({"ssl.endpoint.identification.algorithm": "HTTPS"}), "SSL") is True
    both = {"ssl.endpoint.identification.algorithm": "https",
            "listener.name.internal.ssl.endpoint.identification.algorithm": ""}
    assert endpoint_identification(BrokerConfig(both), "INTERNAL") is False
    assert endpoint_identification(BrokerConfig(both), "SSL") is True
    assert client_context(BrokerConfig({"ssl.endpoint.identification.algorithm": ""}), "SSL").check_hostname is False
    with pytest.raises(ConfigError):
        endpoint_identification(BrokerConfig({"ssl.endpoint.identification.algorithm": "ldaps"}), "SSL")


def test_inter_broker_tls_versions_follow_enabled_protocols_and_ssl_protocol():
    """A broker's own TLS connections take ``ssl.enabled.protocols`` as its listeners do, and
    ``ssl.protocol`` caps them, as it caps a Kafka client's."""
    import ssl
    v = ssl.TLSVersion
    ctx = client_context(BrokerConfig({}), "SSL")
    assert (ctx.minimum_version, ctx.maximum_version) == (v.TLSv1_2, v.TLSv1_3)
    ctx = client_context(BrokerConfig({"ssl.enabled.protocols": "TLSv1.3"}), "SSL")
    assert (ctx.minimum_version, ctx.maximum_version) == (v.TLSv1_3, v.TLSv1_3)
    ctx = client_context(BrokerConfig({"listener.name.ssl.ssl.protocol": "TLSv1.2"}), "SSL")
    assert (ctx.minimum_version, ctx.maximum_version) == (v.TLSv1_2, v.TLSv1_2)
    ctx = client_context(BrokerConfig({"ssl.protocol": "tlsv1.2"}), "SSL")     # Java ignores the case
    assert ctx.maximum_version == v.TLSv1_2
    ctx = client_context(BrokerConfig({"ssl.protocol": "TLS"}), "SSL")
    assert ctx.maximum_version == v.TLSv1_3
    with pytest.raises(ConfigError) as e:
        client_context(BrokerConfig({"ssl.protocol": "TLSv1.2", "ssl.enabled.protocols": "TLSv1.3"}), "SSL")
    assert e.value.key == "ssl.protocol"


def test_cipher_suites_in_kafkas_names_or_openssls():
    """``ssl.cipher.suites`` as a Kafka property file has it (Java's IANA names) or in OpenSSL's;
    TLS 1.3 suites cannot be chosen one by one here, so naming none keeps TLS 1.2 and naming only
    TLS 1.3 ones keeps TLS 1.3, as with JSSE's enabled suites."""
    import ssl
    from broker.security.tls import apply_cipher_suites, cipher_suites
    v = ssl.TLSVersion
    assert cipher_suites(None) == (None, True, True)
    assert cipher_suites("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384") == \
        ("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384", True, False)
    # OpenSSL's names or strings keep OpenSSL's meaning: TLS 1.3 is not governed by them
    assert cipher_suites("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ECDHE-ECDSA-AES256-GCM-SHA384") == \
        ("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384", True, True)
    assert cipher_suites("ECDHE+AESGCM") == ("ECDHE+AESGCM", True, True)
    assert cipher_suites("TLS_AES_128_GCM_SHA256") == (None, False, True)
    with pytest.raises(ConfigError) as e:
        cipher_suites("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,NO_SUCH_SUITE")
    assert e.value.key == "ssl.cipher.suites" and "NO_SUCH_SUITE" in str(e.value)

    ctx = client_context(BrokerConfig({"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}), "SSL")
    assert ctx.maximum_version == v.TLSv1_2
    assert [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"] == ["ECDHE-ECDSA-AES128-GCM-SHA256"]
    ctx = client_context(BrokerConfig({"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"}), "SSL")
    assert (ctx.minimum_version, ctx.maximum_version) == (v.TLSv1_3, v.TLSv1_3)
    ctx = client_context(BrokerConfig({"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}), "SSL")
    assert (ctx.minimum_version, ctx.maximum_version) == (v.TLSv1_2, v.TLSv1_3)
    bare = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    bare.minimum_version = bare.maximum_version = v.TLSv1_3
    with pytest.raises(ConfigError, match="no suite for the TLS versions"):
        apply_cipher_suites(bare, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")


def test_pkcs12_stores_written_by_keytool_are_read(tmp_path):
    """Key and trust stores as Java's keytool writes them (what Kafka users have) load into the
    listener and inter-broker contexts."""
    import shutil
    import subprocess
    if shutil.which("keytool") is None:
        pytest.skip("no keytool")
    pytest.importorskip("cryptography")
    from tests.support.pki import issue, make_pki
    pki = make_pki(tmp_path / "pki")
    cert = issue(pki, "b1", "broker1", ou="brokers", password="changeit")
    trust, keys = tmp_path / "truststore.p12", tmp_path / "keystore.p12"
    run = lambda *a: subprocess.run(["keytool", *a], check=True, capture_output=True, timeout=60)  # noqa: E731
    run("-importcert", "-noprompt", "-alias", "ca", "-file", str(pki.ca), "-keystore", str(trust),
        "-storetype", "PKCS12", "-storepass", "trust-pw")
    run("-importkeystore", "-noprompt", "-srckeystore", str(cert.p12), "-srcstoretype", "PKCS12",
        "-srcstorepass", "changeit", "-destkeystore", str(keys), "-deststoretype", "PKCS12",
        "-deststorepass", "key-pw")
    from broker.security.tls import server_context
    cfg = BrokerConfig({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keys),
                        "ssl.keystore.password": "key-pw", "ssl.truststore.type": "PKCS12",
                        "ssl.truststore.location": str(trust), "ssl.truststore.password": "trust-pw",
                        "ssl.client.auth": "required"})
    for ctx in (server_context(cfg, "SSL"), client_context(cfg, "SSL")):
        assert [dict(x[0] for x in c["subject"])["commonName"] for c in ctx.get_ca_certs()] == ["Odradek Test CA"]
    # a wrong password or a missing file stops the broker with a message naming the key
    for change, key in (({"ssl.keystore.password": "wrong"}, "ssl.keystore.location"),
                        ({"ssl.truststore.location": str(tmp_path / "missing.p12")}, "ssl.truststore.location")):
        bad = BrokerConfig({k: str(cfg.get(k)) for k in ("ssl.keystore.type", "ssl.keystore.location",
                                                          "ssl.keystore.password", "ssl.truststore.type",
                                                          "ssl.truststore.location", "ssl.truststore.password")}
                           | change)
        with pytest.raises(ConfigError) as e:
            server_context(bad, "SSL")
        assert e.value.args and key in str(e.value), e.value

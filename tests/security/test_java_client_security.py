"""Apache Kafka's Java client over TLS and SASL (marker ``java``; see
tests/integration/test_java_client.py for the class path it needs).

Java's own TLS engine and SCRAM implementation against Odradek's:
* SASL_SSL with SCRAM-SHA-512 under the ACL authorizer (the client is the super user ``admin``),
  the CA given as a PEM trust store, host names checked;
* SSL with ``ssl.client.auth=required``: the client presents a PKCS12 key store, and its
  certificate's subject is its principal, granted what the checks need by kafka-acls.sh;
* SASL_PLAINTEXT with GSSAPI: Java's own Kerberos (Krb5LoginModule from a keytab, its SASL
  GSSAPI client) against a KDC of the test's (tests/support/kdc.py) and Odradek's GSSAPI server.
A subset of the driver's checks runs on each: topic administration, zstd with acks=all, the
idempotent default, a group's commit and resume, transactions.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_java_client import run_checks
from tests.security.conftest import ADMIN
from tests.support.pki import issue

pytestmark = pytest.mark.java

REPO = Path(__file__).resolve().parents[2]
CHECKS = ["admin_topics", "produce_zstd_acksall", "idempotent_default", "group_commit_resume", "transactions"]
AUTHZ = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}


def _add_scram(b, pki, user, pw):
    """SCRAM-SHA-512 credentials for ``user``, set by the super user over SASL_SSL with PLAIN."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    a = AdminClient({"bootstrap.servers": b.addr("SASL_SSL"), "security.protocol": "SASL_SSL",
                     "sasl.mechanism": "PLAIN", "sasl.username": ADMIN[0], "sasl.password": ADMIN[1],
                     "ssl.ca.location": str(pki.ca)})
    fs = a.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), pw.encode())])
    for f in fs.values():
        f.result(15)


def _all_ok(results: dict, checks=CHECKS) -> None:
    missing = [c for c in checks if c not in results]
    failed = {c: r["detail"] for c, r in results.items() if not r["ok"]}
    assert not missing and not failed, f"missing {missing}, failed {failed}"


@pytest.fixture
def scram_results(secure_broker, pki, tmp_path):
    b = secure_broker(listeners=("SASL_SSL",), props={**AUTHZ, "delegation.token.secret.key": "java-check-secret"})
    _add_scram(b, pki, *ADMIN)
    conf = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                f'username="{ADMIN[0]}" password="{ADMIN[1]}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)}
    return run_checks(tmp_path, b.addr("SASL_SSL"), checks=CHECKS + ["delegation_tokens"], client_config=conf)


@pytest.fixture
def mtls_results(secure_broker, pki, tmp_path):
    b = secure_broker(listeners=("SSL", "SASL_PLAINTEXT"), props=AUTHZ, client_auth="required")
    cert = issue(pki, "java-client", "java-client", ou="clients")
    principal = f"User:{cert.subject}"
    admin_cfg = tmp_path / "admin.properties"
    admin_cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                         'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                         f'username="{ADMIN[0]}" password="{ADMIN[1]}";\n')
    for args in (["--topic", "*", "--operation", "All"], ["--group", "*", "--operation", "All"],
                 ["--transactional-id", "*", "--operation", "All"], ["--cluster", "--operation", "All"]):
        r = subprocess.run([str(REPO / "bin" / "kafka-acls.sh"), "--bootstrap-server", b.addr("SASL_PLAINTEXT"),
                            "--command-config", str(admin_cfg), "--add", "--allow-principal", principal, *args],
                           capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert r.returncode == 0, r.stdout + r.stderr
    conf = {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca),
            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(cert.p12),
            "ssl.keystore.password": cert.password, "ssl.key.password": cert.password}
    return run_checks(tmp_path, b.addr("SSL"), checks=CHECKS, client_config=conf)


def test_java_client_over_sasl_ssl_scram(scram_results):
    """... and delegation tokens: created, described, renewed and expired by Java's admin, a
    producer logging in with the token (SCRAM-SHA-512, tokenauth)."""
    _all_ok(scram_results, CHECKS + ["delegation_tokens"])


def test_java_client_with_a_client_certificate(mtls_results):
    _all_ok(mtls_results)


def test_java_client_over_gssapi(broker_factory, tmp_path):
    from tests.security.test_gssapi import gssapi_broker
    from tests.support.kdc import Kdc, kdc_available
    ok, why = kdc_available()
    if not ok:
        pytest.fail(why)          # the java tier runs where its setup is complete
    kdc = Kdc(tmp_path).start()
    try:
        b = gssapi_broker(broker_factory, kdc)
        keytab = kdc.add_service("javauser")
        conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
                "sasl.kerberos.service.name": "kafka",
                "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
                                    f'storeKey=true keyTab="{keytab}" principal="javauser@{kdc.realm}";'}
        results = run_checks(tmp_path, b.sasl_bootstrap, checks=CHECKS, client_config=conf,
                             jvm_args=[f"-Djava.security.krb5.conf={kdc.conf}"])
    finally:
        kdc.stop()
    _all_ok(results)

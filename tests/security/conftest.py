"""Fixtures for the security tests: a throwaway CA with broker and client certificates, and
a broker with PLAINTEXT (for readiness checks) plus SSL / SASL_PLAINTEXT / SASL_SSL listeners."""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.net import free_port

ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")
BOB = ("bob", "bob-secret")


@dataclass
class Pki:
    ca: Path             # CA certificate (PEM)
    broker: Path         # broker key + certificate chain (PEM)
    client_cert: Path
    client_key: Path
    client_subject: str  # RFC 2253 form, as the broker's principal shows it


def _cert(subject_cn, issuer_key, issuer_name, key, *, ca=False, san=None, extra_name=()):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Odradek Tests"),
                      *extra_name, x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)])
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name or name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return b.sign(issuer_key, hashes.SHA256()), name


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    pytest.importorskip("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    d = tmp_path_factory.mktemp("pki")
    pem = serialization.Encoding.PEM
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert, ca_name = _cert("Odradek Test CA", ca_key, None, ca_key, ca=True)
    bkey = ec.generate_private_key(ec.SECP256R1())
    bcert, _ = _cert("localhost", ca_key, ca_name, bkey,
                     san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    ckey = ec.generate_private_key(ec.SECP256R1())
    ccert, _ = _cert("client1", ca_key, ca_name, ckey)
    keybytes = lambda k: k.private_bytes(pem, serialization.PrivateFormat.PKCS8,  # noqa: E731
                                         serialization.NoEncryption())
    (d / "ca.pem").write_bytes(ca_cert.public_bytes(pem))
    (d / "broker.pem").write_bytes(keybytes(bkey) + bcert.public_bytes(pem) + ca_cert.public_bytes(pem))
    (d / "client.pem").write_bytes(ccert.public_bytes(pem))
    (d / "client.key").write_bytes(keybytes(ckey))
    return Pki(d / "ca.pem", d / "broker.pem", d / "client.pem", d / "client.key", "CN=client1,O=Odradek Tests")


def jaas_plain(users=(ADMIN, ALICE, BOB)) -> str:
    opts = " ".join(f'user_{u}="{p}"' for u, p in users)
    return f'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" {opts};'


@dataclass
class SecureBroker:
    proc: object
    plaintext: str
    ports: dict          # listener name -> port

    def addr(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture
def secure_broker(broker_factory, pki):
    """secure_broker(listeners=("SSL",), props={...}) -> SecureBroker."""
    def make(listeners=("SSL", "SASL_PLAINTEXT", "SASL_SSL"), props=None, client_auth="none"):
        port = free_port("127.0.0.1")
        ports = {name: free_port("127.0.0.1") for name in listeners}
        eps = [f"PLAINTEXT://127.0.0.1:{port}"] + [f"{n}://127.0.0.1:{p}" for n, p in ports.items()]
        p = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.broker),
            "ssl.truststore.location": str(pki.ca),
            "ssl.client.auth": client_auth,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_plain(),
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_plain(),
        }
        p.update(props or {})
        proc = broker_factory(port=port, props=p, overrides={"listeners": ",".join(eps),
                                                             "advertised.listeners": ",".join(eps)})
        return SecureBroker(proc, f"127.0.0.1:{port}", ports)
    return make

"""A throwaway certificate authority for TLS tests (needs the ``cryptography`` package):
``make_pki(directory)`` writes a CA, a broker certificate for localhost / 127.0.0.1 (key and
chain in one PEM file) and a client certificate, and returns their paths as a ``Pki``."""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path


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


def make_pki(d: Path, ca_name: str = "Odradek Test CA") -> Pki:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert, ca_x509_name = _cert(ca_name, ca_key, None, ca_key, ca=True)
    bkey = ec.generate_private_key(ec.SECP256R1())
    bcert, _ = _cert("localhost", ca_key, ca_x509_name, bkey,
                     san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    ckey = ec.generate_private_key(ec.SECP256R1())
    ccert, _ = _cert("client1", ca_key, ca_x509_name, ckey)
    keybytes = lambda k: k.private_bytes(pem, serialization.PrivateFormat.PKCS8,  # noqa: E731
                                         serialization.NoEncryption())
    (d / "ca.pem").write_bytes(ca_cert.public_bytes(pem))
    (d / "broker.pem").write_bytes(keybytes(bkey) + bcert.public_bytes(pem) + ca_cert.public_bytes(pem))
    (d / "client.pem").write_bytes(ccert.public_bytes(pem))
    (d / "client.key").write_bytes(keybytes(ckey))
    return Pki(d / "ca.pem", d / "broker.pem", d / "client.pem", d / "client.key", "CN=client1,O=Odradek Tests")

"""A throwaway certificate authority for TLS tests (needs the ``cryptography`` package):
``make_pki(directory)`` writes a CA, a broker certificate for localhost / 127.0.0.1 (key and
chain in one PEM file) and a client certificate, and returns their paths as a ``Pki``.

``issue(pki, name, cn, ...)`` signs one more certificate with that CA (its own subject and
subject alternative names), written as PEM files and as a password-protected PKCS12 key store;
``pkcs12_truststore(pki, password)`` writes the CA certificate as a PKCS12 trust store."""
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
    ca_key: Path | None = None   # the CA's private key (PEM), for ``issue``


@dataclass
class Issued:
    pem: Path            # private key + certificate chain (leaf, CA) in one PEM file
    key: Path            # private key alone (PKCS8 PEM, unencrypted)
    chain: Path          # certificate chain alone (leaf, CA)
    p12: Path            # PKCS12 key store holding key, leaf and CA, protected by ``password``
    password: str
    subject: str         # RFC 2253 form (most specific first), as Kafka's principal shows it


def _cert(subject_cn, issuer_key, issuer_name, key, *, ca=False, san=None, extra_name=()):
    """``extra_name``: attributes between O and CN (the subject is O, *extra_name, CN in DER order)."""
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
    (d / "ca.key").write_bytes(keybytes(ca_key))
    return Pki(d / "ca.pem", d / "broker.pem", d / "client.pem", d / "client.key", "CN=client1,O=Odradek Tests",
               d / "ca.key")


def issue(pki: Pki, name: str, cn: str, *, sans=("localhost", "127.0.0.1"), ou: str | None = None,
          password: str = "changeit") -> Issued:
    """A certificate for ``cn`` (subject ``O=Odradek Tests[,OU=ou],CN=cn``) signed by ``pki``'s CA,
    with ``sans`` as subject alternative names (IP addresses or DNS names), written under the
    CA's directory as ``<name>.pem`` (key + chain), ``<name>.key``, ``<name>.chain.pem`` and
    ``<name>.p12``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID
    pem = serialization.Encoding.PEM
    d = pki.ca.parent
    ca_cert = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), None)
    san = []
    for s in sans:
        try:
            san.append(x509.IPAddress(ipaddress.ip_address(s)))
        except ValueError:
            san.append(x509.DNSName(s))
    key = ec.generate_private_key(ec.SECP256R1())
    extra = [x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou)] if ou else []
    cert, _ = _cert(cn, ca_key, ca_cert.subject, key, san=san or None, extra_name=extra)
    keypem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    chain = cert.public_bytes(pem) + ca_cert.public_bytes(pem)
    out = Issued(d / f"{name}.pem", d / f"{name}.key", d / f"{name}.chain.pem", d / f"{name}.p12", password,
                 f"CN={cn}" + (f",OU={ou}" if ou else "") + ",O=Odradek Tests")
    out.pem.write_bytes(keypem + chain)
    out.key.write_bytes(keypem)
    out.chain.write_bytes(chain)
    out.p12.write_bytes(pkcs12.serialize_key_and_certificates(
        name.encode(), key, cert, [ca_cert], serialization.BestAvailableEncryption(password.encode())))
    return out


def pkcs12_truststore(pki: Pki, password: str = "changeit") -> Path:
    """The CA certificate alone in a password-protected PKCS12 file (``truststore.p12``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    ca_cert = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    path = pki.ca.parent / "truststore.p12"
    path.write_bytes(pkcs12.serialize_key_and_certificates(
        b"ca", None, None, [ca_cert], serialization.BestAvailableEncryption(password.encode())))
    return path

"""Dynamic key store updates of a TLS listener (Kafka's reconfigurable SslFactory), driven by
kafka-configs.sh as an operator rotating a certificate would: the new certificate is served to new
connections without a restart, an update that does not load or that changes the certificate's
subject or alternative names is refused (``ssl.allow.dn.changes`` / ``ssl.allow.san.changes``
false), and a store rewritten in place is picked up when the same value is set again."""
from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.support.pki import issue

pytest.importorskip("cryptography")
BIN = Path(__file__).resolve().parents[2] / "bin"
KEY = "listener.name.ssl.ssl.keystore.location"


def served_serial(addr: str, ca: Path) -> int:
    """The serial number of the certificate a new TLS connection to ``addr`` is shown."""
    from cryptography import x509
    host, port = addr.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return x509.load_der_x509_certificate(s.getpeercert(binary_form=True)).serial_number


def serial_of(issued) -> int:
    from cryptography import x509
    return x509.load_pem_x509_certificate(issued.chain.read_bytes()).serial_number


def alter(b, value: str):
    return subprocess.run([str(BIN / "kafka-configs.sh"), "--bootstrap-server", b.plaintext, "--entity-type", "brokers",
                           "--entity-name", "0", "--alter", "--add-config", f"{KEY}={value}"],
                          capture_output=True, text=True, timeout=60)


def test_key_store_rotation_without_restart(secure_broker, pki, tmp_path):
    first = issue(pki, "rot-a-" + uuid.uuid4().hex[:4], "localhost")
    b = secure_broker(listeners=("SSL",), props={"ssl.keystore.location": str(first.pem)})
    addr = b.addr("SSL")
    assert served_serial(addr, pki.ca) == serial_of(first)

    # a new key and certificate for the same name: accepted, served to new connections
    second = issue(pki, "rot-b-" + uuid.uuid4().hex[:4], "localhost")
    cp = alter(b, str(second.pem))
    assert cp.returncode == 0 and "Completed updating config for broker 0." in cp.stdout, cp.stdout + cp.stderr
    assert served_serial(addr, pki.ca) == serial_of(second)

    # another subject: refused with Kafka's reason, the current certificate stays
    stranger = issue(pki, "rot-c-" + uuid.uuid4().hex[:4], "someone-else")
    cp = alter(b, str(stranger.pem))
    assert cp.returncode != 0
    assert "Keystore DistinguishedName does not match" in cp.stdout + cp.stderr
    # other alternative names, same subject: refused too
    narrower = issue(pki, "rot-d-" + uuid.uuid4().hex[:4], "localhost", sans=("localhost",))
    cp = alter(b, str(narrower.pem))
    assert cp.returncode != 0 and "SubjectAltNames do not match" in cp.stdout + cp.stderr
    # a store that does not load: refused
    cp = alter(b, str(tmp_path / "missing.pem"))
    assert cp.returncode != 0 and "Validation of dynamic config update of SSLFactory failed" in cp.stdout + cp.stderr
    assert served_serial(addr, pki.ca) == serial_of(second)

    # the store file rewritten in place, then the same value set again: reloaded
    in_place = tmp_path / "broker-keystore.pem"
    shutil.copy(second.pem, in_place)
    assert alter(b, str(in_place)).returncode == 0
    assert served_serial(addr, pki.ca) == serial_of(second)
    third = issue(pki, "rot-e-" + uuid.uuid4().hex[:4], "localhost")
    shutil.copy(third.pem, in_place)
    assert alter(b, str(in_place)).returncode == 0
    assert served_serial(addr, pki.ca) == serial_of(third)


def test_subject_change_allowed_when_configured(secure_broker, pki):
    first = issue(pki, "rot-f-" + uuid.uuid4().hex[:4], "localhost")
    b = secure_broker(listeners=("SSL",), props={"ssl.keystore.location": str(first.pem),
                                                 "ssl.allow.dn.changes": "true"})
    renamed = issue(pki, "rot-g-" + uuid.uuid4().hex[:4], "broker-renamed")
    cp = alter(b, str(renamed.pem))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert served_serial(b.addr("SSL"), pki.ca) == serial_of(renamed)

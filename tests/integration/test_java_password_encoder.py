"""broker/password_encoder.py against Java's JCE used the way Kafka's EncryptingPasswordEncoder
uses it (``tests/java/PasswordEncoderCheck.java``, ours): Java decodes what we encode and we decode
what Java encodes, for both ciphers and a password outside the BMP.  Marker ``java`` (needs a
JDK, not the kafka-clients jar)."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from broker.password_encoder import PasswordEncoder

pytestmark = pytest.mark.java
pytest.importorskip("cryptography")
SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "java", "PasswordEncoderCheck.java")
PASSWORD = "pä𝄞ss-wörd"


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    for tool in ("javac", "java"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} not found (a JDK is needed)")
    out = tmp_path_factory.mktemp("pe-java")
    subprocess.run(["javac", "-d", str(out), SOURCE], check=True, timeout=300)

    def run(*args):
        cp = subprocess.run(["java", "-cp", str(out), "PasswordEncoderCheck", *args], capture_output=True,
                            text=True, timeout=60, env=dict(os.environ, LC_ALL="C.UTF-8"))
        assert cp.returncode == 0, cp.stderr
        return cp.stdout.rstrip("\n")
    return run


@pytest.mark.parametrize("cipher", ["AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"])
def test_both_ways(java, cipher):
    ours = PasswordEncoder("broker-secret", cipher=cipher).encode(PASSWORD)
    assert java("decode", "broker-secret", ours) == PASSWORD
    theirs = java("encode", "broker-secret", cipher, PASSWORD)
    assert PasswordEncoder("broker-secret").decode(theirs) == PASSWORD

"""Fixtures for the security tests: a throwaway CA with broker and client certificates, and
a broker with PLAINTEXT (for readiness checks) plus SSL / SASL_PLAINTEXT / SASL_SSL listeners."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.support.net import free_port
from tests.support.pki import Pki, make_pki  # noqa: F401 - Pki for the tests' annotations

from tests.support.sasl import ADMIN, ALICE, BOB, jaas_config  # noqa: F401 - the users, for the tests


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    pytest.importorskip("cryptography")
    return make_pki(tmp_path_factory.mktemp("pki"))


def jaas_plain(users=(ADMIN, ALICE, BOB)) -> str:
    return jaas_config(users=users)


@dataclass
class SecureBroker:
    proc: object
    plaintext: str
    ports: dict          # listener name -> port

    def addr(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture
def secure_broker(broker_factory, pki):
    """secure_broker(listeners=("SSL",), props={...}) -> SecureBroker; a prop set to None is left out."""
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
        p = {k: v for k, v in p.items() if v is not None}     # None: leave the key out (its default)
        proc = broker_factory(port=port, props=p, overrides={"listeners": ",".join(eps),
                                                             "advertised.listeners": ",".join(eps)})
        return SecureBroker(proc, f"127.0.0.1:{port}", ports)
    return make

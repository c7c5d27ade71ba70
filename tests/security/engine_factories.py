"""``ssl.engine.factory.class`` plug-ins loaded by the broker processes of
tests/security/test_engine_factory.py (broker/security/tls.py).  Each writes what the broker asked
it, one JSON object per line, to the file named by ``odradek.test.engine.record``."""
from __future__ import annotations

import json
import ssl


class PemEngineFactory:
    """Builds the contexts from a PEM key store (``ssl.keystore.location``: key and chain) and a PEM
    trust store, the way an organisation's own factory might; asks for a rebuild only when the key
    store location changes."""

    def __init__(self):
        self.configs = {}
        self.record = None

    def _write(self, kind, **fields):
        if self.record:
            with open(self.record, "a") as f:
                f.write(json.dumps({"kind": kind, "id": id(self), **fields}) + "\n")

    def configure(self, configs):
        self.configs = dict(configs)
        self.record = configs.get("odradek.test.engine.record")
        self._write("configure", keystore=configs.get("ssl.keystore.location"))

    def create_server_context(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3          # this factory's own policy
        ctx.load_cert_chain(self.configs["ssl.keystore.location"])
        self._write("server")
        return ctx

    def create_client_context(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(self.configs["ssl.truststore.location"])
        ctx.load_cert_chain(self.configs["ssl.keystore.location"])
        self._write("client")
        return ctx

    def should_be_rebuilt(self, next_configs):
        changed = next_configs.get("ssl.keystore.location") != self.configs.get("ssl.keystore.location")
        self._write("should_be_rebuilt", answer=changed)
        return changed

    def close(self):
        self._write("close")


class WrongSide(PemEngineFactory):
    """Hands a client context where a server one is wanted: start-up stops."""

    def create_server_context(self):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class ServerOnly:
    """No create_client_context: start-up stops, naming the method."""

    def create_server_context(self):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)

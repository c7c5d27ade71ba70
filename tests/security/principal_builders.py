"""Principal builders for tests/security/test_principal_builder.py (``principal.builder.class``
names these by module path; the broker imports them from the checkout)."""
from __future__ import annotations

import json


class Recording:
    """``User:svc-<authorization id>`` after SASL, ``User:svc-<CN>`` for a client certificate,
    ``User:svc-anonymous`` otherwise; every context is appended to the file named by the
    ``principal.builder.test.record`` setting, one JSON object per line."""

    def configure(self, configs):
        self.path = configs["principal.builder.test.record"]
        self.prefix = configs.get("principal.builder.test.prefix", "svc-")

    def build(self, ctx):
        with open(self.path, "a") as f:
            f.write(json.dumps({"protocol": ctx.security_protocol, "listener": ctx.listener_name,
                                "address": ctx.client_address, "cert": ctx.peer_certificate is not None,
                                "subject": ctx.ssl_subject, "mechanism": ctx.sasl_mechanism,
                                "authorization_id": ctx.sasl_authorization_id}) + "\n")
        if ctx.sasl_authorization_id is not None:
            return "User:" + self.prefix + ctx.sasl_authorization_id
        if ctx.ssl_subject:
            cn = [part[3:] for part in ctx.ssl_subject.split(",") if part.startswith("CN=")]
            return "User:" + self.prefix + cn[0]
        return "User:" + self.prefix + "anonymous"


class Principal:
    def __init__(self, principal_type, name):
        self.principal_type, self.name = principal_type, name


class Typed:
    """Returns a principal object rather than a string: ``Service:<authorization id>``."""

    def build(self, ctx):
        return Principal("Service", ctx.sasl_authorization_id or "none")


class Failing:
    def build(self, ctx):
        raise RuntimeError("no principal for " + str(ctx.client_address))

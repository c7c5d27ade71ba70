"""``principal.builder.class``: a custom principal builder, Kafka's ``KafkaPrincipalBuilder``
plug-in in Python.

Kafka's default (``org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder``,
also what an empty value means) is built in: ``User:ANONYMOUS`` on PLAINTEXT, the certificate
subject through ``ssl.principal.mapping.rules`` on SSL, ``User:<authorization id>`` after SASL.

Any other value names a Python class, ``package.module.ClassName`` (or
``package.module:ClassName``), importable by the broker. One instance is made per listener at
start-up. If it has ``configure(configs)``, that is called with the broker's configuration as a
dict of strings, the listener's ``listener.name.<l>.`` keys overriding the bare ones (what Kafka
hands a plug-in). For every connection the broker then calls ``build(context)`` with an
``AuthenticationContext``:

* ``security_protocol``: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``;
* ``listener_name`` and ``client_address`` (the peer's IP);
* on TLS: ``peer_certificate`` (the client certificate, DER bytes, or None) and ``ssl_subject``
  (its subject as Kafka's default builder writes it, before the mapping rules);
* after SASL: ``sasl_mechanism`` and ``sasl_authorization_id``.

``build`` returns the principal as ``"Type:name"`` (``"User:alice"``) or as an object with
``principal_type`` and ``name`` attributes. If it raises or returns something else, the client
fails authentication and its connection is closed, and the broker logs why. A delegation-token
login keeps the token owner as its principal (Kafka's default builder does the same).
"""
from __future__ import annotations

import importlib
import logging

from broker.config import ConfigError

log = logging.getLogger("odradek.security")

DEFAULT_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"


class PrincipalBuilderError(Exception):
    """The configured builder failed for one connection."""


class AuthenticationContext:
    __slots__ = ("security_protocol", "listener_name", "client_address", "peer_certificate", "ssl_subject",
                 "sasl_mechanism", "sasl_authorization_id")

    def __init__(self, security_protocol: str, listener_name: str, client_address: str | None = None, *,
                 peer_certificate: bytes | None = None, ssl_subject: str | None = None,
                 sasl_mechanism: str | None = None, sasl_authorization_id: str | None = None):
        self.security_protocol = security_protocol
        self.listener_name = listener_name
        self.client_address = client_address
        self.peer_certificate = peer_certificate
        self.ssl_subject = ssl_subject
        self.sasl_mechanism = sasl_mechanism
        self.sasl_authorization_id = sasl_authorization_id

    def __repr__(self):
        return (f"AuthenticationContext({self.security_protocol}, listener={self.listener_name}, "
                f"client={self.client_address})")


def import_class(path: str, key: str = "principal.builder.class"):
    """The Python class a ``key`` setting names (``package.module.Class`` or ``package.module:Class``);
    ConfigError in Kafka's words when there is none."""
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    if not module or not name:
        raise ConfigError(f"Invalid value {path} for configuration {key}: not a "
                          "module.ClassName path", key)
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"Invalid value {path} for configuration {key}: Class {path} "
                          f"cannot be found ({e})", key) from None


def instantiate(path: str, key: str, configs: dict[str, str], needed: tuple[str, ...] = (),
                what: str = ""):
    """A plug-in: the class ``path`` names (``key`` is the setting, for the errors), built with no
    arguments and given ``configure(configs)`` when it has one.  ConfigError when it cannot be
    imported or set up, or lacks one of the ``needed`` methods, named as the error shows them
    ("validate(request)"; start-up stops on it, as an unloadable Java class stops Kafka's)."""
    cls = import_class(str(path).strip(), key)
    try:
        plugin = cls()
        if hasattr(plugin, "configure"):
            plugin.configure(configs)
    except Exception as e:
        raise ConfigError(f"{key} {path} could not be set up{what}: {e}", key) from None
    missing = [m for m in needed if not callable(getattr(plugin, m.partition("(")[0], None))]
    if missing:
        raise ConfigError(f"Invalid value {path} for configuration {key}: the class has no "
                          f"{' or '.join(missing)} method", key)
    return plugin


def broker_settings(cfg) -> dict[str, str]:
    """The broker's raw settings, every layer applied (static, cluster default, per broker): what a
    plugin's ``configure`` gets, as Kafka hands its plugins the broker's originals."""
    out: dict[str, str] = {}
    for layer in (cfg.static_configs, cfg.dynamic_default_configs, cfg.dynamic_broker_configs):
        out.update({k: v for k, v in layer.items() if v is not None})
    return out


def listener_configs(cfg, listener: str) -> dict[str, str]:
    """The broker's raw settings with the listener's prefixed keys applied (and kept)."""
    out = broker_settings(cfg)
    prefix = f"listener.name.{listener.lower()}."
    for k, v in list(out.items()):
        if k.startswith(prefix) and len(k) > len(prefix):
            out[k[len(prefix):]] = v
    return out


def load_builder(cfg, listener: str):
    """The listener's custom builder instance, or None for Kafka's default."""
    from broker.security.tls import listener_value
    path = listener_value(cfg, listener, "principal.builder.class", None)
    if not path or path == DEFAULT_BUILDER:
        return None
    builder = instantiate(path, "principal.builder.class", listener_configs(cfg, listener),
                          what=f" for listener {listener}")
    log.info("listener %s: principals are built by %s", listener, path)
    return builder


def build(builder, context: AuthenticationContext) -> str:
    """``"Type:name"`` from the builder; PrincipalBuilderError if it fails."""
    try:
        p = builder.build(context)
    except Exception as e:
        raise PrincipalBuilderError(f"{type(builder).__name__}.build failed: {type(e).__name__}: {e}") from None
    if isinstance(p, str):
        ptype, sep, name = p.partition(":")
    else:
        ptype, name = getattr(p, "principal_type", None), getattr(p, "name", None)
        sep = ":" if isinstance(ptype, str) and isinstance(name, str) else ""
    if not sep or not ptype or name is None:
        raise PrincipalBuilderError(f"{type(builder).__name__}.build returned {p!r}, not a principal "
                                    "('Type:name' or an object with principal_type and name)")
    return f"{ptype}:{name}"


def context_for(protocol: str, listener: str, transport, **sasl) -> AuthenticationContext:
    """The context of a connection: its peer address and, on TLS, the client certificate."""
    from broker.security import peer_subject
    addr = cert = subject = None
    if transport is not None:
        peer = transport.get_extra_info("peername")
        addr = peer[0] if peer else None
        obj = transport.get_extra_info("ssl_object")
        if obj is not None:
            cert = obj.getpeercert(binary_form=True) or None
            subject = peer_subject(transport) if cert else None
    return AuthenticationContext(protocol, listener, addr, peer_certificate=cert, ssl_subject=subject, **sasl)

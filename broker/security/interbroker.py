"""How a broker secures its own connections to other brokers (replica fetchers, the controller's
channels and its AlterPartition connection, transaction markers), as Kafka decides it:

* The listener is ``inter.broker.listener.name`` (else the one named by
  ``security.inter.broker.protocol``); its security protocol comes from
  ``listener.security.protocol.map``.
* SSL / SASL_SSL: a client TLS context from the listener's ``ssl.*`` keys (``tls.client_context``).
* SASL_PLAINTEXT / SASL_SSL: ``sasl.mechanism.inter.broker.protocol`` (PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512 or OAUTHBEARER; it must be one of the listener's ``sasl.enabled.mechanisms``), with the
  ``username``/``password`` options of the listener's JAAS entry for that mechanism
  (``listener.name.<l>.<mechanism>.sasl.jaas.config``, then ``listener.name.<l>.sasl.jaas.config``,
  then ``sasl.jaas.config``).  For SCRAM that user's credential must exist in the metadata store
  before the brokers need it (Kafka: ``kafka-configs.sh --zookeeper ... --entity-type users``).
* OAUTHBEARER: Kafka's default (unsecured) login, ``unsecuredLoginStringClaim_sub="<name>"`` and
  optionally ``unsecuredLoginLifetimeSeconds`` (3600) in that JAAS entry: the broker presents an
  unsigned JWS (``{"alg":"none"}``, claims sub/iat/exp) minted for each connection, which the
  other brokers' unsecured validator accepts as ``User:<name>``.

The settings are computed once per config object (``inter_broker_security``) and checked at
start-up by ``SecurityManager`` so a broken set-up stops the broker with a message naming the key.
"""
from __future__ import annotations

import weakref
from typing import NamedTuple

from broker.config import ConfigError
from broker.security import jaas
from broker.security.tls import client_context, listener_value

SUPPORTED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


class InterBrokerSecurity(NamedTuple):
    listener: str
    protocol: str
    ssl: object          # ssl.SSLContext or None
    sasl: object         # protocol.client.SaslSettings or None


_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()



def build(cfg, listener: str | None = None) -> InterBrokerSecurity:
    """The settings for connections to other brokers' ``listener`` (default: the inter-broker
    listener; the controller's channels name ``control.plane.listener.name``, for which Kafka
    takes the same ``sasl.mechanism.inter.broker.protocol`` with that listener's own keys)."""
    from protocol.client import SaslSettings
    listener = listener or cfg.inter_broker_listener_name()
    proto_map = cfg.security_protocol_map() if hasattr(cfg, "security_protocol_map") else {}
    protocol = proto_map.get(listener, listener)
    ctx = client_context(cfg, listener) if protocol in ("SSL", "SASL_SSL") else None
    sasl = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mech = str(cfg.get("sasl.mechanism.inter.broker.protocol") or "GSSAPI").strip().upper()
        if mech not in SUPPORTED:
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mech} is not supported for inter-broker "
                              f"connections on {listener} ({protocol}); use GSSAPI, PLAIN, SCRAM-SHA-256, "
                              "SCRAM-SHA-512 or OAUTHBEARER",
                              "sasl.mechanism.inter.broker.protocol")
        raw = listener_value(cfg, listener, "sasl.enabled.mechanisms", ["GSSAPI"])
        enabled = [m.strip().upper() for m in (raw.split(",") if isinstance(raw, str) else raw) if m.strip()]
        if mech not in enabled:
            raise ConfigError("sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms "
                              "when SASL is used for inter-broker communication", "sasl.mechanism.inter.broker.protocol")
        text = jaas.jaas_text(cfg, listener, mech)
        opts = jaas.parse_jaas(text)[1] if text else {}
        if mech == "OAUTHBEARER":
            return InterBrokerSecurity(listener, protocol, ctx, _oauthbearer_login(cfg, listener, opts))
        if mech == "GSSAPI":
            # the broker logs in to the others from the keytab of its own GSSAPI JAAS entry, as
            # Kafka's inter-broker client does, for their sasl.kerberos.service.name
            from broker.security.kerberos import initiator_credentials
            service = listener_value(cfg, listener, "sasl.kerberos.service.name", None, mechanism="GSSAPI")
            if not service or str(opts.get("useKeyTab", "false")).lower() != "true":
                raise ConfigError(f"inter-broker SASL/GSSAPI on listener {listener} needs sasl.kerberos.service.name "
                                  f"and useKeyTab=true, keyTab and principal in "
                                  f"listener.name.{listener.lower()}.gssapi.sasl.jaas.config", "sasl.jaas.config")
            sasl = SaslSettings(mech, opts.get("principal", ""), None,
                                kerberos=(initiator_credentials(opts), service))
            return InterBrokerSecurity(listener, protocol, ctx, sasl)
        user, password = opts.get("username"), opts.get("password")
        if not user or password is None:
            raise ConfigError(f"inter-broker SASL/{mech} on listener {listener} needs username and password in "
                              f"listener.name.{listener.lower()}.{mech.lower()}.sasl.jaas.config", "sasl.jaas.config")
        sasl = SaslSettings(mech, user, password)
    return InterBrokerSecurity(listener, protocol, ctx, sasl)


def _oauthbearer_login(cfg, listener: str, opts: dict):
    """The broker's own OAUTHBEARER login (broker/security/oauth_login.py): a token from
    ``sasl.oauthbearer.token.endpoint.url`` when ``sasl.login.callback.handler.class`` is Kafka's
    OAuthBearerLoginCallbackHandler, else Kafka's default unsecured token whose ``sub`` is
    ``unsecuredLoginStringClaim_sub``, valid ``unsecuredLoginLifetimeSeconds`` (3600)."""
    from protocol.client import SaslSettings
    from broker.security.oauth_login import login_for
    name, token = login_for(lambda key, default: listener_value(cfg, listener, key, default, mechanism="OAUTHBEARER"),
                            opts, f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config")
    return SaslSettings("OAUTHBEARER", name, None, token=token)


def inter_broker_security(cfg, listener: str | None = None) -> InterBrokerSecurity:
    listener = listener or cfg.inter_broker_listener_name()     # one entry per listener
    try:
        per_listener = _cache.get(cfg)
    except TypeError:                    # a config stand-in that cannot be weakly referenced
        return build(cfg, listener)
    if per_listener is None:
        per_listener = _cache[cfg] = {}
    sec = per_listener.get(listener)
    if sec is None:
        sec = per_listener[listener] = build(cfg, listener)
    return sec


async def connect_to_broker(cfg, host: str, port: int, *, listener: str | None = None, **kwargs):
    """``KafkaClientConnection.connect`` to another broker's ``listener`` (default: the
    inter-broker one) with this broker's TLS and SASL settings for it."""
    from protocol.client import KafkaClientConnection
    sec = inter_broker_security(cfg, listener)
    return await KafkaClientConnection.connect(host, port, ssl=sec.ssl, sasl=sec.sasl, **kwargs)

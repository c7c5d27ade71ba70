"""Authentication and authorization: TLS listeners, SASL, principals, the ACL authorizer.

``SecurityManager`` is built once per broker from its config (``broker.security``):

* ``ssl_context(listener)`` — the server SSLContext of an SSL/SASL_SSL listener (``tls.py``),
  None for the others.  Handed to ``loop.create_server(ssl=...)``.
* ``new_session(listener, transport)`` — a ``SecuritySession`` per connection: the principal
  (``User:ANONYMOUS`` on PLAINTEXT, the certificate subject on SSL when the client presented
  one, mapped by the listener's ``ssl.principal.mapping.rules`` (``principal.py``; NoMatchingRule
  when none applies: the connection is refused), ``User:<name>`` after SASL) and the SASL state
  machine (``sasl.py``).
* ``authorizer`` — None unless ``authorizer.class.name`` names Kafka's ACL authorizer
  (``authorizer.py``); then ``RequestContext.authorize`` consults it.

SASL configuration per listener (``listener.name.<l>.`` prefix first, then the bare key):
``sasl.enabled.mechanisms`` (GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER) and, for PLAIN, the JAAS entry ``listener.name.<l>.plain.sasl.jaas.config`` (or
``listener.name.<l>.sasl.jaas.config`` / ``sasl.jaas.config``) whose ``user_<name>="<pw>"``
options are the accepted users.  SCRAM credentials come from the metadata store
(``Controller.scram_credentials``), written with AlterUserScramCredentials.  OAUTHBEARER needs an
OAuthBearerLoginModule JAAS entry found the same way; its token validator is built once per
listener (``oauthbearer.py``): the unsecured one with the entry's ``unsecuredValidator*``
options, or, when ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`` is Kafka's
OAuthBearerValidatorCallbackHandler, the JWKS-backed one configured by ``sasl.oauthbearer.*``
(whose reload thread ``close()`` stops).  GSSAPI needs a Krb5LoginModule JAAS entry with the
broker's keytab and principal and ``sasl.kerberos.service.name`` (``kerberos.py``).
"""
from __future__ import annotations

import logging

from broker.config import ConfigError
from broker.security import jaas
from broker.security.authorizer import AUTHORIZER_CLASSES, AclAuthorizer, parse_super_users
from broker.security.sasl import ANONYMOUS, PlainServer, ScramServer, SecuritySession
from broker.security.principal import DerError, PrincipalMapper, subject_from_der
from broker.security.tls import listener_value, principal_from_peercert, server_context, ssl_fingerprint
from protocol import scram as S

log = logging.getLogger("odradek.security")

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


def peer_subject(transport) -> str | None:
    """The verified client certificate's subject (RFC 2253, as Kafka prints it), or None."""
    obj = transport.get_extra_info("ssl_object")
    der = obj.getpeercert(binary_form=True) if obj is not None else None
    if der:
        try:
            return subject_from_der(der)
        except DerError:
            pass
    return principal_from_peercert(transport.get_extra_info("peercert"))


class SecurityManager:
    def __init__(self, broker, config=None):
        self.broker = broker
        self.config = config if config is not None else broker.config
        self._ssl: dict[str, object] = {}           # listener -> the context its server was created with
        self._ssl_current: dict[str, object] = {}   # listener -> the context after a dynamic update
        self._ssl_fp: dict[str, tuple] = {}         # listener -> what its current context was built from
        self._mechanisms: dict[str, list[str]] = {}
        self._plain_users: dict[str, dict[str, str]] = {}
        self._oauth_validators: dict[str, object] = {}
        self._kerberos: dict[str, tuple] = {}          # listener -> (GSSAPI credentials, short namer)
        self._protocols: dict[str, str] = {}
        self._mappers: dict[str, PrincipalMapper] = {}
        self._builders: dict[str, object] = {}     # listener -> principal.builder.class instance (builder.py)
        self.authorizer: AclAuthorizer | None = None
        self.enforcer = None            # broker.security.enforce.Enforcer when authorizing
        self.configure()

    # ------------------------------------------------------------------ set-up
    def configure(self) -> None:
        cfg = self.config
        for ep in cfg.listeners():
            name, proto = ep.listener_name, ep.security_protocol
            self._protocols[name] = proto
            if proto in ("SSL", "SASL_SSL"):
                self._ssl[name] = server_context(cfg, name)
                self._ssl_fp[name] = ssl_fingerprint(cfg, name)
            if proto == "SSL":
                rules = listener_value(cfg, name, "ssl.principal.mapping.rules", "DEFAULT")
                try:
                    self._mappers[name] = PrincipalMapper(rules)
                except ValueError as e:
                    raise ConfigError(f"Invalid value {rules} for configuration ssl.principal.mapping.rules: {e}",
                                      "ssl.principal.mapping.rules") from None
            if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
                self._configure_sasl(name)
            from broker.security.builder import load_builder
            builder = load_builder(cfg, name)
            if builder is not None:
                self._builders[name] = builder
        if cfg.zookeeper_connect:
            # this broker's own connections to the others (checked now so that a bad set-up stops it)
            from broker.security.interbroker import inter_broker_security
            ib = inter_broker_security(cfg)
            if ib.ssl is not None:
                log.info("inter-broker connections on %s use TLS (host name check %s)", ib.listener,
                         "on" if ib.ssl.check_hostname else "off")
            if ib.sasl is not None:
                log.info("inter-broker connections on %s authenticate with SASL/%s as %s", ib.listener,
                         ib.sasl.mechanism, ib.sasl.username)
            cpl = cfg.control_plane_listener_name()
            if cpl is not None:
                cp = inter_broker_security(cfg, cpl)
                log.info("controller requests go through listener %s (%s%s)", cpl, cp.protocol,
                         f", SASL/{cp.sasl.mechanism} as {cp.sasl.username}" if cp.sasl is not None else "")
        cls = (cfg.get("authorizer.class.name") or "").strip()
        if cls:
            if cls not in AUTHORIZER_CLASSES:
                raise ConfigError(f"authorizer.class.name={cls} is not supported; use "
                                  "kafka.security.authorizer.AclAuthorizer or "
                                  "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "authorizer.class.name")
            self.authorizer = AclAuthorizer(self._acls, parse_super_users(self._opt("super.users")),
                                            str(self._opt("allow.everyone.if.no.acl.found", "false")).lower() == "true")
            from broker.security.enforce import Enforcer
            self.enforcer = Enforcer(self.authorizer)
            log.info("authorizer %s enabled (super users: %s)", cls, ", ".join(sorted(self.authorizer.super_users))
                     or "none")

    def _opt(self, key, default=None):
        try:
            v = self.config.get(key)
        except KeyError:
            return default
        return default if v is None else v

    def _configure_sasl(self, listener: str) -> None:
        cfg = self.config
        raw = listener_value(cfg, listener, "sasl.enabled.mechanisms", ["GSSAPI"])
        mechs = [m.strip().upper() for m in (raw.split(",") if isinstance(raw, str) else raw) if m.strip()]
        unsupported = [m for m in mechs if m not in SUPPORTED_MECHANISMS]
        if unsupported:
            log.warning("listener %s: SASL mechanisms %s are not supported and not offered", listener,
                        ", ".join(unsupported))
        mechs = [m for m in mechs if m in SUPPORTED_MECHANISMS]
        if not mechs:
            raise ConfigError(f"listener {listener}: sasl.enabled.mechanisms must include GSSAPI, PLAIN, "
                              "SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", "sasl.enabled.mechanisms")
        self._mechanisms[listener] = mechs
        if "PLAIN" in mechs:
            text = jaas.jaas_text(cfg, listener, "PLAIN")
            if not text:
                raise ConfigError(f"listener {listener}: SASL PLAIN needs "
                                  f"listener.name.{listener.lower()}.plain.sasl.jaas.config with user_<name>=\"<password>\" "
                                  "options", "sasl.jaas.config")
            _module, opts = jaas.parse_jaas(text)
            self._plain_users[listener] = jaas.plain_users(opts)
        if "OAUTHBEARER" in mechs:
            self._oauth_validators[listener] = self._oauthbearer_validator(listener)
        if "GSSAPI" in mechs:
            self._kerberos[listener] = self._kerberos_service(listener)

    def _kerberos_service(self, listener: str):
        """(credentials, short namer) of a GSSAPI listener (broker/security/kerberos.py)."""
        from broker.security import kerberos
        cfg = self.config
        text = jaas.jaas_text(cfg, listener, "GSSAPI")
        if not text:
            raise ConfigError(f"listener {listener}: SASL GSSAPI needs a JAAS entry "
                              f"(listener.name.{listener.lower()}.gssapi.sasl.jaas.config) with the login module "
                              f"{kerberos.KRB5_LOGIN_MODULE}, useKeyTab=true, keyTab and principal",
                              "sasl.jaas.config")
        module, opts = jaas.parse_jaas(text)
        if module != kerberos.KRB5_LOGIN_MODULE:
            raise ConfigError(f"listener {listener}: the GSSAPI JAAS entry names {module}; expected "
                              f"{kerberos.KRB5_LOGIN_MODULE}", "sasl.jaas.config")

        def lookup(key, default):
            return listener_value(cfg, listener, key, default, mechanism="GSSAPI")
        creds, namer = kerberos.service_config(cfg, listener, opts, lookup)
        log.info("listener %s: GSSAPI as %s", listener, opts.get("principal"))
        return creds, namer

    def _oauthbearer_validator(self, listener: str):
        from broker.security import oauthbearer
        cfg = self.config
        prefix = f"listener.name.{listener.lower()}."
        text = jaas.jaas_text(cfg, listener, "OAUTHBEARER")
        if not text:
            raise ConfigError(f"listener {listener}: SASL OAUTHBEARER needs a JAAS entry "
                              f"({prefix}oauthbearer.sasl.jaas.config, {prefix}sasl.jaas.config or sasl.jaas.config) "
                              f"with the login module {oauthbearer.LOGIN_MODULE}", "sasl.jaas.config")
        module, opts = jaas.parse_jaas(text)
        if module != oauthbearer.LOGIN_MODULE:
            raise ConfigError(f"listener {listener}: the OAUTHBEARER JAAS entry names {module}; expected "
                              f"{oauthbearer.LOGIN_MODULE}", "sasl.jaas.config")
        try:       # Kafka reads the server callback handler only under the listener and mechanism prefix
            handler = cfg.get(f"{prefix}oauthbearer.sasl.server.callback.handler.class")
        except KeyError:
            handler = None
        validator = oauthbearer.build_validator(cfg, listener, opts, handler)
        log.info("listener %s: OAUTHBEARER tokens checked by the %s validator", listener,
                 "unsecured" if isinstance(validator, oauthbearer.UnsecuredValidator) else "JWKS (secured)")
        return validator

    def close(self) -> None:
        """Stop the background work of the OAUTHBEARER validators (JWKS reloads); close the TLS
        engine factories."""
        for v in self._oauth_validators.values():
            v.close()
        from broker.security.tls import close_engine_factories
        close_engine_factories()

    # ------------------------------------------------------------------ connections
    def ssl_context(self, listener: str):
        """The context the listener's server is created with.  Its SNI callback (which OpenSSL
        runs for every ClientHello, with or without a server name) hands each new connection the
        listener's current context, so a dynamic key store update (``reload_ssl``) applies to new
        connections without reopening the listener; established ones keep theirs."""
        front = self._ssl.get(listener)
        if front is not None and front.sni_callback is None:
            def pick(ssl_obj, _server_name, ctx, _listener=listener):
                current = self._ssl_current.get(_listener)
                if current is not None and current is not ctx:
                    ssl_obj.context = current
            front.sni_callback = pick
        return front

    def reload_ssl(self) -> None:
        """After a dynamic broker config change: rebuild the server context of each TLS listener
        whose ``ssl.*`` configs (or store files) changed.  The update was validated when it was
        altered (``check_reconfiguration``); a context that fails now is logged and the old one
        kept."""
        from broker.security.builder import listener_configs
        from broker.security.tls import close_engine_factory, server_context, ssl_fingerprint
        for listener in list(self._ssl):
            fp = ssl_fingerprint(self.config, listener)
            if fp == self._ssl_fp.get(listener):
                continue
            old = self._ssl_current.get(listener) or self._ssl[listener]
            factory = getattr(old, "odradek_engine_factory", None)
            ask = getattr(factory, "should_be_rebuilt", None)
            if callable(ask):       # an engine factory decides whether the change concerns it
                try:
                    rebuild = ask(listener_configs(self.config, listener))
                except Exception:
                    log.exception("listener %s: should_be_rebuilt failed; keeping the current context", listener)
                    continue
                if not rebuild:
                    self._ssl_fp[listener] = fp
                    continue
            try:
                ctx = server_context(self.config, listener)
            except ConfigError as e:
                log.error("listener %s: the updated key/trust stores do not load, keeping the current ones: %s",
                          listener, e)
                continue
            self._ssl_current[listener] = ctx
            self._ssl_fp[listener] = fp
            if factory is not None:
                close_engine_factory(factory)   # connections made with its context keep working
            log.info("listener %s: key and trust stores reloaded; new connections use them", listener)

    def mechanisms(self, listener: str) -> list[str]:
        return list(self._mechanisms.get(listener, ()))

    def new_session(self, listener: str, transport=None) -> SecuritySession:
        """The connection's session; raises NoMatchingRule (no mapping rule for the certificate)
        or PrincipalBuilderError (the custom builder failed): the connection is then closed."""
        protocol = self._protocols.get(listener, "PLAINTEXT")
        principal = ANONYMOUS
        builder = self._builders.get(listener)
        if builder is not None:
            from broker.security.builder import build, context_for
            if protocol in ("PLAINTEXT", "SSL"):
                principal = build(builder, context_for(protocol, listener, transport))
            build_principal = (lambda mech, authz_id: build(builder, context_for(
                protocol, listener, transport, sasl_mechanism=mech, sasl_authorization_id=authz_id)))
        else:
            build_principal = None
            if protocol == "SSL" and transport is not None:
                subject = peer_subject(transport)
                if subject:
                    mapper = self._mappers.get(listener)
                    principal = "User:" + (mapper.name(subject) if mapper is not None else subject)
        return SecuritySession(listener, protocol, self._mechanisms.get(listener, ()),
                               lambda mech: self._mechanism_server(listener, mech), principal,
                               lambda mech: self._reauth_ms(listener, mech), build_principal)

    def _reauth_ms(self, listener: str, mechanism: str) -> int:
        """``connections.max.reauth.ms`` for a mechanism on a listener (Kafka's lookup:
        ``listener.name.<l>.<mechanism>.``, ``listener.name.<l>.``, then the bare key)."""
        for key in (f"listener.name.{listener.lower()}.{mechanism.lower()}.connections.max.reauth.ms",
                    f"listener.name.{listener.lower()}.connections.max.reauth.ms", "connections.max.reauth.ms"):
            try:
                v = self.config.get(key)
            except KeyError:
                continue
            if v is not None and v != "":
                try:
                    return int(v)
                except (TypeError, ValueError):
                    log.warning("%s=%r is not a number; re-authentication stays off", key, v)
                    return 0
        return 0

    def _mechanism_server(self, listener: str, mechanism: str):
        if mechanism == "PLAIN":
            return PlainServer(self._plain_users.get(listener, {}))
        if mechanism == "OAUTHBEARER":
            from broker.security.oauthbearer import OAuthBearerServer
            return OAuthBearerServer(self._oauth_validators[listener])
        if mechanism == "GSSAPI":
            from broker.security.kerberos import GssapiServer
            creds, namer = self._kerberos[listener]
            return GssapiServer(creds, namer, short_names=listener not in self._builders)
        tokens = getattr(self.broker, "tokens", None)
        return ScramServer(mechanism, lambda user: self.scram_credential(user, mechanism),
                           tokens.scram_login if tokens is not None else None)

    @staticmethod
    def raw_token(conn, frame) -> None:
        """A bare SASL token after SaslHandshake v0: answer with a bare size-prefixed token, or
        close the connection when authentication fails."""
        from broker.security.sasl import SaslFailure
        try:
            out = conn.security.step(frame)
        except SaslFailure:
            conn.close_after_auth_failure()
            return
        if conn.security.authenticated:
            conn.lift_pre_auth_limit()
        conn.transport.write(len(out).to_bytes(4, "big") + out)

    # ------------------------------------------------------------------ stores
    def _acls(self):
        ctrl = self.broker.controller
        return ctrl.acls() if ctrl is not None else ()

    def scram_credential(self, user: str, mechanism: str) -> S.Credential | None:
        ctrl = self.broker.controller
        text = (ctrl.scram_credentials().get(user) or {}).get(mechanism) if ctrl is not None else None
        if not text:
            return None
        try:
            return S.Credential.from_config(text)
        except S.ScramError:
            log.warning("stored %s credential of user %s is malformed", mechanism, user)
            return None

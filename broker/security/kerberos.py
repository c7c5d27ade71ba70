"""SASL/GSSAPI (Kerberos, RFC 4752) on the server side, and Kafka's Kerberos short names.

How this works
--------------
* The broker's service credentials come from the listener's GSSAPI JAAS entry, as Kafka's:
  ``com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true
  keyTab="/path/kafka.keytab" principal="kafka/host@REALM";``.  Kerberos itself is MIT's, through
  the ``gssapi`` package (the optional ``kerberos`` extra): ``krb5.conf`` comes from
  ``KRB5_CONFIG`` or ``/etc/krb5.conf`` (where Kafka reads ``java.security.krb5.conf``).
* ``GssapiServer`` runs the exchange: GSS-API context tokens until the context is established
  (the last one, Kerberos' AP-REP, answered with an empty token by the client), then the
  security layer negotiation of RFC 4752 section 3.1: the server wraps four octets (supported
  layers: 1, no security layer, the only one Kafka offers; its largest buffer), the client
  answers with its choice, buffer size and an authorization id, wrapped.  As Kafka's callback
  handler does, any authorization id is accepted; the principal is the authenticated Kerberos
  name.
* ``ShortNamer`` maps that name to the principal's name with ``sasl.kerberos.principal.to.local.rules``
  (Kafka's KerberosShortNamer): ``DEFAULT`` (the first component of a name in the default
  realm) and ``RULE:[n:format](regex)s/pattern/replacement/[g][/L|/U]``.  A name no rule maps
  fails the authentication.
"""
from __future__ import annotations

import os
import re
import struct

from broker.config import ConfigError
from broker.security.sasl import SaslFailure

KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
NO_SECURITY_LAYER = 1
MAX_BUFFER = 65536


def default_realm() -> str | None:
    """``[libdefaults] default_realm`` of the krb5.conf MIT Kerberos reads."""
    paths = (os.environ.get("KRB5_CONFIG") or "/etc/krb5.conf").split(":")
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError:
            continue
        section = None
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1].strip()
            elif section == "libdefaults" and "=" in line:
                k, _, v = line.partition("=")
                if k.strip() == "default_realm":
                    return v.strip()
    return None


class KerberosName:
    """``service/host@REALM`` split in its parts (host and realm may be absent)."""
    _RE = re.compile(r"([^/@]+)(/([^/@]+))?(@([^/@]+))?")

    def __init__(self, text: str):
        m = self._RE.fullmatch(text)
        if m is None:
            raise ValueError(f"malformed Kerberos name: {text}")
        self.service, self.host, self.realm = m.group(1), m.group(3), m.group(5)

    def __str__(self):
        out = self.service + (f"/{self.host}" if self.host else "")
        return out + (f"@{self.realm}" if self.realm else "")


_RULE = re.compile(r"\s*((DEFAULT)|(RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?))")


class _Rule:
    def __init__(self, default: bool, n: int = 0, fmt: str = "", match: str | None = None,
                 pattern: str | None = None, repl: str = "", repeat: bool = False, case: str | None = None):
        self.default, self.n, self.fmt, self.case = default, n, fmt, case
        self.match = re.compile(match) if match is not None else None
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.repl, self.repeat = repl, repeat

    def apply(self, name: KerberosName, realm: str | None) -> str | None:
        if self.default:
            if name.realm is None or name.realm == realm:
                return name.service
            return None
        parts = [name.service] + ([name.host] if name.host else [])
        if len(parts) != self.n:
            return None
        params = [name.realm or realm or ""] + parts

        def sub(m):
            i = int(m.group(1))
            if i >= len(params):
                raise ValueError(f"index {i} out of range in {self.fmt}")
            return params[i]
        base = re.sub(r"\$(\d+)", sub, self.fmt)
        if self.match is not None and not self.match.fullmatch(base):
            return None
        if self.pattern is not None:
            repl = re.sub(r"\$(\d)", r"\\\1", self.repl)
            base = self.pattern.sub(repl, base, count=0 if self.repeat else 1)
        if "@" in base or "/" in base:
            raise ValueError(f"non-simple name {base} after auth_to_local rule")
        return base.lower() if self.case == "L" else base.upper() if self.case == "U" else base


def parse_rules(rules) -> list[_Rule]:
    """``sasl.kerberos.principal.to.local.rules`` (a list, or a comma-separated string)."""
    if isinstance(rules, str):
        rules = [rules]
    out = []
    for text in rules or ["DEFAULT"]:
        text = str(text).strip()
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ConfigError(f"invalid Kerberos rule: {text[pos:]}", "sasl.kerberos.principal.to.local.rules")
            if m.group(2):
                out.append(_Rule(True))
            else:
                out.append(_Rule(False, int(m.group(4) or 0), m.group(5), m.group(7), m.group(9),
                                 m.group(10) or "", bool(m.group(11)), m.group(12)))
            pos = m.end()
            while pos < len(text) and text[pos] in ", \t\n":
                pos += 1
    return out


class ShortNamer:
    def __init__(self, rules, realm: str | None):
        self.rules = parse_rules(rules)
        self.realm = realm

    def short_name(self, principal: str) -> str:
        name = KerberosName(principal)
        for rule in self.rules:
            try:
                out = rule.apply(name, self.realm)
            except ValueError as e:
                raise SaslFailure(str(e)) from None
            if out is not None:
                return out
        raise SaslFailure(f"No rules apply to {principal}, rules {[r.fmt or 'DEFAULT' for r in self.rules]}")


def acceptor_credentials(options: dict[str, str]):
    """The service's Kerberos credentials from the Krb5LoginModule options (``keyTab`` and
    ``principal``); ConfigError when the keytab does not hold them."""
    try:
        import gssapi
    except ImportError:
        raise ConfigError("SASL GSSAPI needs the gssapi package (pip install odradek[kerberos])",
                          "sasl.enabled.mechanisms") from None
    keytab, principal = options.get("keyTab"), options.get("principal")
    if not keytab or not principal:
        raise ConfigError("the GSSAPI JAAS entry needs keyTab=\"...\" and principal=\"...\"",
                          "sasl.jaas.config")
    if str(options.get("useKeyTab", "false")).lower() != "true":
        raise ConfigError("the GSSAPI JAAS entry needs useKeyTab=true (a broker logs in from its keytab)",
                          "sasl.jaas.config")
    name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
    try:
        return gssapi.Credentials(name=name, usage="accept", store={"keytab": keytab})
    except gssapi.exceptions.GSSError as e:
        raise ConfigError(f"no Kerberos key for {principal} in {keytab}: {e}", "sasl.jaas.config") from None


def initiator_credentials(options: dict[str, str]):
    """A client's Kerberos credentials from Krb5LoginModule options: the key of ``principal`` in
    ``keyTab`` with ``useKeyTab=true`` (tickets then go to a private in-memory cache), else the
    ticket cache (``useTicketCache=true``; ``KRB5CCNAME`` or the default one)."""
    try:
        import gssapi
    except ImportError:
        raise ConfigError("SASL GSSAPI needs the gssapi package (pip install odradek[kerberos])",
                          "sasl.mechanism") from None
    try:
        if str(options.get("useKeyTab", "false")).lower() == "true":
            keytab, principal = options.get("keyTab"), options.get("principal")
            if not keytab or not principal:
                raise ConfigError("useKeyTab=true needs keyTab=\"...\" and principal=\"...\"", "sasl.jaas.config")
            name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
            cache = f"MEMORY:odradek-{os.getpid()}-{id(options)}"
            return gssapi.Credentials(name=name, usage="initiate",
                                      store={"client_keytab": keytab, "ccache": cache})
        return gssapi.Credentials(usage="initiate")
    except gssapi.exceptions.GSSError as e:
        raise ConfigError(f"no Kerberos credentials: {e}", "sasl.jaas.config") from None


class GssapiClient:
    """The client's side of RFC 4752's exchange: ``step(challenge)`` gives the next token to send
    (``None`` for the first); ``complete`` is true once the last one was given, the answer to the
    server's security-layer offer, whose authorization id is the client's own principal."""

    def __init__(self, creds, service: str, host: str, principal: str | None = None):
        """The target is ``service@host`` (a host-based name the Kerberos library resolves), or
        the full Kerberos ``principal`` when one is given."""
        import gssapi
        if principal:
            name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
        else:
            name = gssapi.Name(f"{service}@{host}", gssapi.NameType.hostbased_service)
        self._ctx = gssapi.SecurityContext(name=name, creds=creds, usage="initiate")
        self._started = False
        self.complete = False

    def step(self, challenge: bytes | None) -> bytes:
        ctx = self._ctx
        if not self._started:           # the first step asks the KDC for a service ticket
            self._started = True
            return ctx.step(None) or b""
        if not ctx.complete:
            return ctx.step(challenge or b"") or b""
        if not challenge:               # the context completed with the server's token: it offers next
            return b""
        offer = ctx.unwrap(challenge).message
        if len(offer) < 4 or not offer[0] & NO_SECURITY_LAYER:
            raise SaslFailure("GSSAPI: the server offers no 'auth' security layer")
        self.complete = True
        return ctx.wrap(bytes([NO_SECURITY_LAYER]) + offer[1:4] + str(ctx.initiator_name).encode(), False).message


ZK_GSSAPI = "ODRADEK-GSSAPI"     # the name kazoo's SASL options give the mechanism below


def zookeeper_server_principal(host: str, service: str, server: dict, client_principal: str) -> str | None:
    """The ZooKeeper server's principal as ZooKeeper's client names it, when one of its system
    properties is given (``server``: ``principal`` from -Dzookeeper.server.principal, ``realm``
    from -Dzookeeper.server.realm, ``canonicalize`` from
    -Dzookeeper.sasl.client.canonicalize.hostname): that principal, else ``service/host`` with the
    host's canonical name (a reverse lookup of its address, kept unless it is the bare address)
    unless canonicalize is false; the realm, when the principal has none, is the server realm or
    the client's own.  None (no property given): ``service@host`` is left to the Kerberos
    library's host-based naming."""
    if not server:
        return None
    principal = server.get("principal")
    if not principal:
        if str(server.get("canonicalize", "true")).strip().lower() != "false":
            host = canonical_host_name(host)
        principal = f"{service}/{host}"
    if "@" not in principal:
        realm = server.get("realm") or client_principal.rpartition("@")[2]
        if realm:
            principal = f"{principal}@{realm}"
    return principal


def canonical_host_name(host: str) -> str:
    """Java's InetAddress.getCanonicalHostName as ZooKeeper's client uses it: the name a reverse
    lookup of the host's address gives, or ``host`` when that fails or gives the address back."""
    import socket
    try:
        addr = socket.getaddrinfo(host, None)[0][4][0]
        name = socket.gethostbyaddr(addr)[0]
    except OSError:
        return host
    return host if name == addr else name


def register_zookeeper_gssapi() -> None:
    """Make the GSSAPI client below a mechanism of the ``pure-sasl`` package, which kazoo's SASL
    login uses (its own GSSAPI mechanism needs the ``kerberos`` package, which Odradek does not
    carry), under the name ``ZK_GSSAPI``.  ZooKeeper's SASL exchange is RFC 4752's, as Kafka's:
    the context tokens, then the server's security-layer offer and the client's answer, whose
    authorization id is the client's principal (ZooKeeper refuses any other)."""
    import puresasl.mechanisms as mechanisms
    if ZK_GSSAPI in mechanisms.mechanisms:
        return

    class ZooKeeperGssapi(mechanisms.Mechanism):
        name = ZK_GSSAPI
        score = 100
        allows_anonymous = False
        uses_plaintext = False
        active_safe = True

        def __init__(self, sasl, jaas=None, server=None, **props):
            super().__init__(sasl)
            self._jaas = dict(jaas or {})
            self._server = dict(server or {})
            self._client = None

        def process(self, challenge=None):
            if self._client is None:
                creds = initiator_credentials(self._jaas)
                target = zookeeper_server_principal(self.sasl.host, self.sasl.service, self._server, str(creds.name))
                self._client = GssapiClient(creds, self.sasl.service, self.sasl.host, target)
            token = self._client.step(challenge)
            self.complete = self._client.complete
            return token

        def dispose(self):
            self._client = None

    mechanisms.mechanisms[ZK_GSSAPI] = ZooKeeperGssapi


class GssapiServer:
    mechanism = "GSSAPI"

    def __init__(self, creds, namer: ShortNamer, short_names: bool = True):
        import gssapi
        self._gssapi = gssapi
        self._ctx = gssapi.SecurityContext(creds=creds, usage="accept")
        self._namer = namer
        self._short_names = short_names
        self._stage = "context"
        self.complete = False
        self.authorization_id: str | None = None
        self.principal: str | None = None
        self.kerberos_name: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        errors = self._gssapi.exceptions.GSSError
        try:
            if self._stage == "context":
                out = self._ctx.step(token)
                if not self._ctx.complete:
                    return out or b""
                self.kerberos_name = str(self._ctx.initiator_name)
                if out:                 # the client answers Kerberos' AP-REP with an empty token
                    self._stage = "offer"
                    return out
                return self._offer()
            if self._stage == "offer":
                return self._offer()
            if self._stage == "answer":
                return self._answer(token)
        except errors as e:
            raise SaslFailure(f"GSSAPI authentication failed: {e}") from None
        raise SaslFailure("GSSAPI exchange already complete")

    def _offer(self) -> bytes:
        self._stage = "answer"
        layer = struct.pack(">I", MAX_BUFFER)[1:]
        return self._ctx.wrap(bytes([NO_SECURITY_LAYER]) + layer, False).message

    def _answer(self, token: bytes) -> bytes:
        msg = self._ctx.unwrap(token).message
        if len(msg) < 4:
            raise SaslFailure("GSSAPI: malformed security layer answer")
        if not msg[0] & NO_SECURITY_LAYER:
            raise SaslFailure("GSSAPI: the client asked for a security layer; only 'auth' is offered")
        short = self._namer.short_name(self.kerberos_name)
        if self._short_names:
            self.principal = "User:" + short
        self.authorization_id = self.kerberos_name
        self.complete = True
        return b""


def service_config(cfg, listener: str, jaas_opts: dict[str, str], lookup) -> tuple[object, ShortNamer]:
    """(credentials, short namer) for a GSSAPI listener; ``lookup(key, default)`` reads a config
    the way Kafka does for a listener's mechanism."""
    service = lookup("sasl.kerberos.service.name", None)
    if not service:
        raise ConfigError(f"listener {listener}: SASL GSSAPI needs sasl.kerberos.service.name",
                          "sasl.kerberos.service.name")
    principal = jaas_opts.get("principal") or ""
    try:
        own = KerberosName(principal).service
    except ValueError:
        raise ConfigError(f"listener {listener}: malformed principal {principal!r} in the GSSAPI JAAS entry",
                          "sasl.jaas.config") from None
    if own != service:
        raise ConfigError(f"listener {listener}: the GSSAPI principal {principal} is not of the service "
                          f"sasl.kerberos.service.name={service}", "sasl.kerberos.service.name")
    creds = acceptor_credentials(jaas_opts)
    namer = ShortNamer(lookup("sasl.kerberos.principal.to.local.rules", ["DEFAULT"]), default_realm())
    return creds, namer


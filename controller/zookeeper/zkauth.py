"""The broker's ZooKeeper identity and znode ACLs (``zookeeper.set.acl``), as Kafka sets them up.

How this works
--------------
* **Identity.** Kafka's ZooKeeper client logs in with SASL when the JVM's JAAS file
  (``-Djava.security.auth.login.config=...``, given to the broker's scripts in ``KAFKA_OPTS``)
  has a ``Client`` section (another name with ``-Dzookeeper.sasl.clientconfig``;
  ``-Dzookeeper.sasl.client=false`` turns it off).  Odradek reads the same: ``KAFKA_OPTS`` from
  the environment, then the section.  ZooKeeper's DigestLoginModule (``username``,
  ``password``) becomes a DIGEST-MD5 login of kazoo (through the ``pure-sasl`` package), for the
  service ``-Dzookeeper.sasl.client.username`` (default ``zookeeper``).  A Kerberos
  (Krb5LoginModule) section, with ``useKeyTab=true``, ``keyTab`` and ``principal`` or the ticket
  cache, becomes a GSSAPI login of kazoo through Odradek's own GSSAPI client
  (``broker/security/kerberos.py``, python-gssapi) for ``<service>@<ZooKeeper host>``.
* **TLS** (KIP-515): ``zookeeper.ssl.client.enable=true`` with
  ``zookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty`` connects over TLS:
  the trust store checks ZooKeeper's certificate (and its host name, unless
  ``zookeeper.ssl.endpoint.identification.algorithm`` is empty), the key store, when given, is the
  client certificate, which ZooKeeper's X509AuthenticationProvider makes the broker's identity
  (``x509:<subject>``).  PEM, PKCS12 and JKS stores are read as the listeners' are (kazoo takes PEM
  files, so the others are converted to private temporary files).  The TLS versions are
  ``zookeeper.ssl.enabled.protocols`` or, unset, ``zookeeper.ssl.protocol`` alone (TLSv1.2 by
  default, as Kafka's client enables them), the ciphers ``zookeeper.ssl.cipher.suites`` (OpenSSL
  names); kazoo takes neither, so a handler of Odradek's sets up the TLS layer.  CRL and OCSP
  checks are refused.
* **ACLs.** With ``zookeeper.set.acl=true`` every znode the broker creates gets Kafka's ACLs:
  everything for its creator (the SASL identity) and read for anyone, except under the sensitive
  roots (``/config/users``, ``/config/brokers``, ``/delegation_token``: credentials and secrets),
  which only the creator may read.  Without a SASL identity the setting is refused at start-up,
  as Kafka refuses it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from broker.config import ConfigError

DIGEST_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token")


@dataclass
class ZkSecurity:
    sasl_options: dict | None = None
    set_acl: bool = False
    identity: str | None = None          # for log lines: "sasl:<user>" or "x509:<subject>"
    tls: dict | None = None              # kazoo's SSL arguments (use_ssl, ca, certfile, ...)

    def client_args(self) -> dict:
        """KazooClient keyword arguments for the login, TLS and default ACL."""
        tls = dict(self.tls or {})
        policy = tls.pop("tls_policy", None)
        args = {"sasl_options": self.sasl_options, "default_acl": self.default_acl(), **tls}
        if policy is not None:
            args["handler"] = _tls_handler(*policy)     # one per client: a handler owns threads
        return args

    def default_acl(self):
        """The ACL of a znode kazoo creates without one (None: kazoo's open one)."""
        if not self.set_acl:
            return None
        from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE
        return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)

    def acl_for(self, path: str):
        """The ACL for a new znode at ``path`` (relative to the chroot), or None for the default."""
        if not self.set_acl:
            return None
        if any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS):
            from kazoo.security import CREATOR_ALL_ACL
            return list(CREATOR_ALL_ACL)
        return None


NETTY = "org.apache.zookeeper.ClientCnxnSocketNetty"


def zk_tls(get) -> tuple[dict | None, str | None]:
    """(kazoo's SSL arguments or None, the client certificate's subject or None) from the
    ``zookeeper.ssl.*`` configs (``get(key)``: None when unset)."""
    from broker.security import tls as T
    if str(get("zookeeper.ssl.client.enable") or "false").lower() != "true":
        return None, None
    sock = get("zookeeper.clientCnxnSocket")
    if sock != NETTY:
        raise ConfigError(f"zookeeper.ssl.client.enable is true, so zookeeper.clientCnxnSocket must be {NETTY}",
                          "zookeeper.clientCnxnSocket")
    for key in ("zookeeper.ssl.crl.enable", "zookeeper.ssl.ocsp.enable"):
        if str(get(key) or "false").lower() == "true":
            raise ConfigError(f"{key}=true is not supported", key)

    def store(kind: str) -> str | None:
        location = get(f"zookeeper.ssl.{kind}store.location")
        if not location:
            return None
        typ = str(get(f"zookeeper.ssl.{kind}store.type") or "").upper() or \
            ("JKS" if T._is_jks_file(location) else "PEM")
        password = get(f"zookeeper.ssl.{kind}store.password")
        key = f"zookeeper.ssl.{kind}store.location"
        if typ == "PEM":
            return location
        if typ in T.STORE_TYPES:
            return T.store_as_pem(typ, location, password, None, key, trust=kind == "trust")
        raise T.unsupported_store_type(typ, f"zookeeper.ssl.{kind}store.type")
    ca, cert = store("trust"), store("key")
    args = {"use_ssl": True, "verify_certs": True, "ca": ca,
            "check_hostname": (get("zookeeper.ssl.endpoint.identification.algorithm") or "").upper() == "HTTPS",
            "tls_policy": _tls_policy(get)}
    subject = None
    if cert:
        args.update(certfile=cert, keyfile=cert)
        if str(get("zookeeper.ssl.keystore.type") or "").upper() in ("", "PEM"):
            args["keyfile_password"] = get("zookeeper.ssl.keystore.password")
        subject = _subject(cert)
    return args, subject


def _tls_policy(get) -> tuple:
    """(lowest, highest TLS version, OpenSSL cipher string or None) for ZooKeeper's TLS, from
    ``zookeeper.ssl.enabled.protocols`` or, when unset, ``zookeeper.ssl.protocol`` alone (default
    TLSv1.2), as ZooKeeper's client enables them; ``zookeeper.ssl.cipher.suites`` in Kafka's (IANA)
    names or OpenSSL's, as the listeners' ``ssl.cipher.suites``."""
    import ssl

    from broker.security.tls import TLS_VERSIONS, cipher_suites, names, version_range
    key = "zookeeper.ssl.enabled.protocols" if names(get("zookeeper.ssl.enabled.protocols")) else "zookeeper.ssl.protocol"
    protocols = names(get(key) or "TLSv1.2")
    for p in protocols:
        if p not in TLS_VERSIONS:
            raise ConfigError(f"ZooKeeper TLS protocol {p} is not supported (use {', '.join(TLS_VERSIONS)})", key)
    ciphers, older, tls13 = cipher_suites(get("zookeeper.ssl.cipher.suites"), "zookeeper.ssl.cipher.suites")
    lo, hi = version_range(protocols)
    if not tls13:
        hi = min(hi, ssl.TLSVersion.TLSv1_2)     # no TLS 1.3 suite named: nothing to negotiate there
    if not older:
        lo = max(lo, ssl.TLSVersion.TLSv1_3)
    if lo > hi:
        raise ConfigError("zookeeper.ssl.cipher.suites names no suite for the TLS versions enabled",
                          "zookeeper.ssl.cipher.suites")
    return lo, hi, ciphers


def _tls_handler(lowest, highest, ciphers):
    """A kazoo handler whose TLS connections allow only ``lowest``..``highest`` and ``ciphers``
    (kazoo builds its TLS context itself and takes neither setting): the TCP connection is
    kazoo's own, the TLS layer over it is set up here."""
    import ssl

    from kazoo.handlers.threading import SequentialThreadingHandler

    class ZkTlsHandler(SequentialThreadingHandler):
        def create_connection(self, address, hostname=None, timeout=None, use_ssl=False, ca=None, certfile=None,
                              keyfile=None, keyfile_password=None, verify_certs=True, check_hostname=False, **kw):
            if not use_ssl:
                return super().create_connection(address, hostname=hostname, timeout=timeout, **kw)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.minimum_version, ctx.maximum_version = lowest, highest
            if ciphers:
                ctx.set_ciphers(ciphers)
            ctx.check_hostname = bool(check_hostname)
            ctx.verify_mode = ssl.CERT_REQUIRED if verify_certs else ssl.CERT_NONE
            if ca:
                ctx.load_verify_locations(ca)
            else:
                ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
            if certfile:
                ctx.load_cert_chain(certfile=certfile, keyfile=keyfile, password=keyfile_password)
            plain = super().create_connection(address, hostname=hostname, timeout=timeout)
            try:
                return ctx.wrap_socket(plain, server_hostname=hostname)
            except BaseException:
                plain.close()
                raise

    return ZkTlsHandler()


def _subject(pem_path: str) -> str | None:
    """The first certificate's subject in RFC 2253 form, as ZooKeeper's x509 identity shows it."""
    try:
        from cryptography import x509
        with open(pem_path, "rb") as f:
            return x509.load_pem_x509_certificate(f.read()).subject.rfc4514_string()
    except (ImportError, OSError, ValueError):
        return None


def zk_security(set_acl: bool, environ=None, get=None) -> ZkSecurity:
    """The broker's ZooKeeper login (SASL from ``KAFKA_OPTS``'s JAAS file, or a TLS client
    certificate from the ``zookeeper.ssl.*`` configs ``get`` reads) and ACL policy; ConfigError
    for settings that cannot be used, or ``zookeeper.set.acl`` without an identity."""
    from broker.security.jaas import java_system_properties, parse_jaas_file
    env = os.environ if environ is None else environ
    props = java_system_properties(env.get("KAFKA_OPTS"))
    sasl = None
    identity = None
    path = props.get("java.security.auth.login.config")
    enabled = props.get("zookeeper.sasl.client", "true").strip().lower() != "false"
    section = props.get("zookeeper.sasl.clientconfig", "Client")
    why = "no JAAS file is given (KAFKA_OPTS=-Djava.security.auth.login.config=...)"
    if path and enabled:
        try:
            with open(path, encoding="utf-8") as f:
                sections = parse_jaas_file(f.read())
        except OSError as e:
            raise ConfigError(f"cannot read the JAAS file {path}: {e}", "java.security.auth.login.config") from None
        entry = sections.get(section)
        if entry is None:
            why = f"the JAAS file {path} has no {section} section"
        else:
            module, opts = entry
            if module == KRB5_MODULE:
                sasl, identity = _kerberos_login(path, section, opts, props)
            else:
                sasl, identity = _digest_login(path, section, module, opts, props)
    elif path:
        why = "zookeeper.sasl.client is false"
    return _finish(set_acl, sasl, identity, get, why, section)


def _require_pure_sasl() -> None:
    try:
        import puresasl  # noqa: F401  (kazoo's SASL needs it)
    except ImportError:
        raise ConfigError("a SASL login to ZooKeeper needs the pure-sasl package",
                          "java.security.auth.login.config") from None


def _digest_login(path: str, section: str, module: str, opts: dict, props: dict) -> tuple[dict, str]:
    """kazoo's SASL options for ZooKeeper's DigestLoginModule (DIGEST-MD5)."""
    if module != DIGEST_MODULE:
        raise ConfigError(f"the {section} section of {path} names {module}; expected {DIGEST_MODULE} or "
                          f"{KRB5_MODULE}", "java.security.auth.login.config")
    if not opts.get("username") or opts.get("password") is None:
        raise ConfigError(f"the {section} section of {path} needs username and password",
                          "java.security.auth.login.config")
    _require_pure_sasl()
    sasl = {"mechanism": "DIGEST-MD5", "username": opts["username"], "password": opts["password"],
            "service": props.get("zookeeper.sasl.client.username", "zookeeper")}
    return sasl, f"sasl:{opts['username']}"


def _finish(set_acl, sasl, identity, get, why, section="Client") -> ZkSecurity:
    tls, subject = zk_tls(get) if get is not None else (None, None)
    if sasl is None and subject:
        identity = f"x509:{subject}"
    if set_acl and sasl is None and subject is None:
        raise ConfigError("zookeeper.set.acl is true, but there is no authenticated ZooKeeper identity to own the "
                          f"znodes: {why}, and no ZooKeeper TLS key store (zookeeper.ssl.keystore.location). Give a "
                          f"JAAS file with a {section} section ({DIGEST_MODULE} or {KRB5_MODULE}) or a client certificate, or set "
                          "zookeeper.set.acl to false", "zookeeper.set.acl")
    return ZkSecurity(sasl, set_acl, identity, tls)


def _kerberos_login(path: str, section: str, opts: dict, props: dict) -> tuple[dict, str]:
    """kazoo's SASL options for a Krb5LoginModule section (a keytab with ``useKeyTab=true``, or the
    ticket cache), checked now: a keytab without the principal's key is a ConfigError at start-up."""
    from broker.security import kerberos
    _require_pure_sasl()
    try:
        creds = kerberos.initiator_credentials(opts)
        principal = str(creds.name)
    except ConfigError as e:
        raise ConfigError(f"the {section} section of {path}: {e}", "java.security.auth.login.config") from None
    kerberos.register_zookeeper_gssapi()
    sasl = {"mechanism": kerberos.ZK_GSSAPI, "service": props.get("zookeeper.sasl.client.username", "zookeeper"),
            "jaas": dict(opts)}
    server = {k: props[p] for k, p in (("principal", "zookeeper.server.principal"),
                                        ("realm", "zookeeper.server.realm"),
                                        ("canonicalize", "zookeeper.sasl.client.canonicalize.hostname"))
              if props.get(p)}
    if server:
        sasl["server"] = server
    return sasl, f"sasl:{principal}"

"""TLS server contexts for SSL and SASL_SSL listeners, from Kafka's ``ssl.*`` keys.

Every key is looked up as ``listener.name.<listener>.<key>`` first, then ``<key>``.

Key material (``ssl.keystore.type``, default PEM here):

* PEM: ``ssl.keystore.location`` names a PEM file holding the private key and the certificate
  chain, or ``ssl.keystore.key`` (the private key, PEM text) and
  ``ssl.keystore.certificate.chain`` (PEM text) are given inline.  An encrypted key is opened
  with ``ssl.key.password``.
* PKCS12: read with the ``cryptography`` package when it is installed
  (``ssl.keystore.password`` opens the file).
* JKS (Kafka's default type): Java KeyStore files read by ``jks.py`` (the store password checks
  the file, ``ssl.key.password`` — else the store password — opens the key); a PKCS12 file is
  accepted under this type too, as Java does.  JCEKS: Sun's JceKeyStore files (a JKS file too,
  as Java's JCEKS type reads both), with ``cryptography`` for their Triple DES.

Trust (for client certificates): ``ssl.truststore.location`` (PEM file of CA certificates, or
PKCS12 / JKS with ``cryptography``) or ``ssl.truststore.certificates`` (PEM text inline).

Inline PEM values are re-wrapped (``normalize_pem``): Kafka accepts a block on one line, as a
properties value continued with ``\\`` reads, or with ``\\n`` escapes.

Inter-broker client contexts (``client_context``) check host names unless
``ssl.endpoint.identification.algorithm`` is empty (``endpoint_identification``).

``ssl.client.auth``: ``required`` (CERT_REQUIRED), ``requested`` (CERT_OPTIONAL), ``none``.
``ssl.enabled.protocols`` (default TLSv1.2,TLSv1.3) sets the version range;
``ssl.cipher.suites`` (Kafka's IANA names or OpenSSL's) restricts ciphers when given.  The
broker's own client connections to other brokers take the same, with ``ssl.protocol`` as their
highest version (``client_version_range``).

``ssl.engine.factory.class`` (Kafka's SslEngineFactory; a Python class here) replaces all of
the above for a listener: the class is built with no arguments, ``configure(configs)`` (the
broker's settings with the listener's prefixed ones applied) is called when it has one, and
``create_server_context()`` / ``create_client_context()`` (both required) return the
``ssl.SSLContext`` (PROTOCOL_TLS_SERVER / PROTOCOL_TLS_CLIENT) the listener serves with and the
broker connects to other brokers' listener with.  On a dynamic key store update its
``should_be_rebuilt(next_configs)`` (optional; without it: yes) decides whether a new factory,
configured with the new settings, replaces it; ``close()`` (optional) ends a replaced factory
and every factory when the broker stops.  The principal of a client certificate is read from
the connection as without a factory.
"""
from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile

from broker.config import ConfigError

log = logging.getLogger("odradek.security")


def listener_value(cfg, listener: str, key: str, default=None, mechanism: str | None = None):
    """``listener.name.<l>.<key>`` if set, else ``<key>`` (if set or known), else ``default``;
    with a SASL ``mechanism``, ``listener.name.<l>.<mechanism>.<key>`` comes first."""
    names = (f"listener.name.{listener.lower()}.{key}", key)
    if mechanism:
        names = (f"listener.name.{listener.lower()}.{mechanism.lower()}.{key}",) + names
    for name in names:
        try:
            v = cfg.get(name)
        except KeyError:
            continue
        if v is not None and v != "":
            return v
    return default


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normalize_pem(text: str) -> str:
    """Inline PEM as it comes out of a properties file, made readable for OpenSSL: Kafka accepts
    the blocks on one line (``-----BEGIN CERTIFICATE----- MIIB... -----END CERTIFICATE-----``,
    as a value continued with ``\\`` at the ends of lines reads) or with literal ``\\n``; each
    block's base64 is re-wrapped here.  Text without PEM blocks is returned as it is."""
    text = text.replace("\\n", "\n")
    blocks = []
    for m in _PEM_BLOCK.finditer(text):
        body = "".join(m.group(2).split())
        lines = [body[i:i + 64] for i in range(0, len(body), 64)]
        blocks.append("\n".join([f"-----BEGIN {m.group(1)}-----", *lines, f"-----END {m.group(1)}-----"]))
    return "\n".join(blocks) + "\n" if blocks else text


def _pem_to_files(*texts: str) -> str:
    fd, path = tempfile.mkstemp(prefix="odradek-tls-", suffix=".pem")
    with os.fdopen(fd, "w") as f:
        for t in texts:
            f.write(normalize_pem(t.strip()).strip() + "\n")
    return path


def _pkcs12_to_pem(path: str, password: str | None, key: str = "ssl.keystore.location") -> str:
    """The contents of a PKCS12 file as a temporary PEM file; ConfigError naming ``key`` when
    the file cannot be read or opened with ``password``."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError("ssl.keystore.type=PKCS12 needs the 'cryptography' package; use PEM",
                          "ssl.keystore.type") from None
    try:
        with open(path, "rb") as f:
            pkey, cert, extra = pkcs12.load_key_and_certificates(f.read(), password.encode() if password else None)
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read the PKCS12 file {path} ({key}): {e}", key) from None
    parts = []
    if pkey is not None:
        parts.append(pkey.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()).decode())
    for c in ([cert] if cert is not None else []) + list(extra or []):
        parts.append(c.public_bytes(serialization.Encoding.PEM).decode())
    return _pem_to_files(*parts)


STORE_TYPES = ("PEM", "PKCS12", "JKS", "JCEKS")


def store_as_pem(typ: str, path: str, store_password: str | None, key_password: str | None, key: str,
                 trust: bool = False) -> str:
    """A PKCS12, JKS or JCEKS store (``typ``, upper case) as a temporary PEM file."""
    if typ == "PKCS12":
        return _pkcs12_to_pem(path, store_password, key)
    return _jks_to_pem(path, store_password, key_password, key, trust=trust, pkcs12=typ == "JKS")


def unsupported_store_type(typ: str, setting: str) -> ConfigError:
    return ConfigError(f"{setting}={typ} is not supported (use PEM, PKCS12, JKS or JCEKS)", setting)


def _jks_to_pem(path: str, store_password: str | None, key_password: str | None, key: str,
                trust: bool = False, pkcs12: bool = True) -> str:
    """A JKS or JCEKS file (``broker/security/jks.py``) as a temporary PEM file: the private key
    entry's key and chain for a key store, the trusted certificates for a trust store
    (``trust``).  A file without either magic is read as PKCS12 (``pkcs12``, Java's JKS type
    since Java 9), else refused (Java's JCEKS type)."""
    from broker.security import jks
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError(f"cannot read the JKS file {path} ({key}): {e}", key) from None
    if not jks.is_jks(data):
        if not pkcs12:
            raise ConfigError(f"cannot read the JCEKS file {path} ({key}): Invalid keystore format", key)
        return _pkcs12_to_pem(path, store_password, key)
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise ConfigError("JKS key stores need the 'cryptography' package; use PEM", key) from None
    pem = serialization.Encoding.PEM
    try:
        store = jks.load(data, store_password)
        parts = []
        if trust:
            if not store.certificates:
                raise jks.JksError("it holds no trusted certificate entry")
            parts = [x509.load_der_x509_certificate(der).public_bytes(pem).decode()
                     for _, der in store.certificates]
        else:
            if not store.keys:
                raise jks.JksError("it holds no private key entry")
            if len(store.keys) > 1:
                log.warning("%s holds %d private key entries; using the first, %r", path, len(store.keys),
                            store.keys[0].alias)
            entry = store.keys[0]
            der = jks.unprotect(entry.key_der, key_password if key_password is not None else (store_password or ""))
            pkey = serialization.load_der_private_key(der, None)
            parts.append(pkey.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()).decode())
            parts += [x509.load_der_x509_certificate(c).public_bytes(pem).decode() for c in entry.chain]
    except ValueError as e:         # JksError, and cryptography's errors on bad DER
        raise ConfigError(f"cannot read the JKS file {path} ({key}): {e}", key) from None
    return _pem_to_files(*parts)


def _is_jks_file(path: str) -> bool:
    from broker.security import jks
    try:
        with open(path, "rb") as f:
            return jks.is_jks(f.read(4))
    except OSError:
        return False


def _str(v) -> str | None:
    return None if v is None else str(v)


def _load_key_store(ctx: ssl.SSLContext, get, listener: str, temp: list[str], *, required: bool) -> None:
    """The certificate chain and key from ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``
    (inline PEM) or ``ssl.keystore.location`` (PEM, or PKCS12 converted to a temporary PEM file
    appended to ``temp``).  A listener (``required``) must have one; a client may go without."""
    ks_type = str(get("ssl.keystore.type", "PEM")).upper()
    password = _str(get("ssl.key.password")) or _str(get("ssl.keystore.password"))
    location = _str(get("ssl.keystore.location"))
    if ks_type == "PEM" and location and _is_jks_file(location):
        ks_type = "JKS"     # Kafka's default type is JKS: a server.properties written for Kafka works
    certfile = keyfile = None
    if ks_type == "PEM":
        key_text, chain_text = _str(get("ssl.keystore.key")), _str(get("ssl.keystore.certificate.chain"))
        if key_text and chain_text:
            certfile, keyfile = _pem_to_files(chain_text), _pem_to_files(key_text)
            temp += [certfile, keyfile]
        elif location:
            certfile = location
        elif required:
            raise ConfigError(f"listener {listener}: ssl.keystore.location (a PEM file) or "
                              "ssl.keystore.key + ssl.keystore.certificate.chain must be set",
                              "ssl.keystore.location")
    elif ks_type in STORE_TYPES:
        if location:
            certfile = store_as_pem(ks_type, location, _str(get("ssl.keystore.password")),
                                    _str(get("ssl.key.password")), "ssl.keystore.location")
            password = None
            temp.append(certfile)
        elif required:
            raise ConfigError(f"listener {listener}: ssl.keystore.location must be set", "ssl.keystore.location")
    else:
        raise unsupported_store_type(ks_type, "ssl.keystore.type")
    if certfile is None:
        return
    try:
        ctx.load_cert_chain(certfile, keyfile, password=password)
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"listener {listener}: cannot load the key store: {e}", "ssl.keystore.location") from None
    try:                    # the leaf certificate, for the checks of a dynamic key store update
        with open(certfile) as f:
            certs = [m.group(0) for m in _PEM_BLOCK.finditer(normalize_pem(f.read())) if m.group(1) == "CERTIFICATE"]
        ctx.odradek_leaf_pem = certs[0] if certs else None
    except (OSError, UnicodeDecodeError):
        ctx.odradek_leaf_pem = None


def _load_trust_store(ctx: ssl.SSLContext, get, listener: str, temp: list[str], *, system_default: bool) -> bool:
    """CAs from ``ssl.truststore.certificates`` (inline PEM) or ``ssl.truststore.location`` (PEM,
    or PKCS12 converted to a temporary PEM file appended to ``temp``); with neither, the system's
    CAs when ``system_default`` (a client), else none.  True when a trust store is configured."""
    ts_type = str(get("ssl.truststore.type", "PEM")).upper()
    ts_location, ts_inline = _str(get("ssl.truststore.location")), _str(get("ssl.truststore.certificates"))
    if ts_type == "PEM" and ts_location and _is_jks_file(ts_location):
        ts_type = "JKS"
    try:
        if ts_inline:
            ctx.load_verify_locations(cadata=normalize_pem(ts_inline))
        elif ts_location:
            if ts_type in STORE_TYPES and ts_type != "PEM":
                path = store_as_pem(ts_type, ts_location, _str(get("ssl.truststore.password")), None,
                                    "ssl.truststore.location", trust=True)
                temp.append(path)
                ctx.load_verify_locations(cafile=path)
            elif ts_type != "PEM":
                raise unsupported_store_type(ts_type, "ssl.truststore.type")
            else:
                ctx.load_verify_locations(cafile=ts_location)
        elif system_default:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"listener {listener}: cannot load the trust store: {e}",
                          "ssl.truststore.location") from None
    return bool(ts_inline or ts_location)


TLS_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
                "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def names(value) -> list[str]:
    """A list config (a list, or a comma-separated string, or None) as its non-empty names."""
    if value is None:
        return []
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [str(v).strip() for v in items if str(v).strip()]


def version_range(protocols) -> tuple | None:
    """(lowest, highest) ``ssl.TLSVersion`` of Kafka's protocol names (``TLSv1.2`` ...); names
    outside ``TLS_VERSIONS`` are skipped; None when none is left."""
    chosen = [TLS_VERSIONS[p] for p in names(protocols) if p in TLS_VERSIONS]
    return (min(chosen), max(chosen)) if chosen else None


def cipher_suites(value, key: str = "ssl.cipher.suites") -> tuple[str | None, bool, bool]:
    """A ``ssl.cipher.suites`` list, in Kafka's (Java's, IANA's) names or OpenSSL's, as
    (OpenSSL's cipher string for TLS 1.2 and below or None, whether TLS 1.2 and below keep any
    suite, whether TLS 1.3 does); an empty list allows everything.  A list of Kafka's names
    means what JSSE makes of it: no TLS 1.3 suite named, no TLS 1.3.  A list with OpenSSL names
    or cipher strings in it (``ECDHE+AESGCM``) means what OpenSSL makes of it: TLS 1.3 suites
    are not governed by it.  ConfigError for a name OpenSSL does not know, as JSSE refuses an
    unsupported suite."""
    from broker.security.cipher_names import IANA_TO_OPENSSL, TLS13_SUITES
    wanted = names(value)
    if not wanted:
        return None, True, True
    kafka_names = all(n in IANA_TO_OPENSSL or n in TLS13_SUITES for n in wanted)
    older, tls13 = [], False
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    for name in wanted:
        if name in TLS13_SUITES:
            tls13 = True
            continue
        openssl_name = IANA_TO_OPENSSL.get(name, name)
        try:
            probe.set_ciphers(openssl_name)
        except ssl.SSLError:
            raise ConfigError(f"{key}: {name} is not a cipher suite this broker's OpenSSL knows", key) from None
        older.append(openssl_name)
    if not kafka_names:
        return (":".join(older) or None), True, True
    return (":".join(older) or None), bool(older), tls13


def apply_cipher_suites(ctx: ssl.SSLContext, value, key: str = "ssl.cipher.suites") -> None:
    """Restrict ``ctx`` to the suites of ``value`` (``cipher_suites``).  Python's ssl module
    cannot choose TLS 1.3 suites one by one, so a list naming none of them keeps the context at
    TLS 1.2 and below, and a list naming only TLS 1.3 suites keeps it at TLS 1.3, as JSSE's
    enabled suites leave no other version to negotiate.  ConfigError when that leaves no
    version of the context's range."""
    ciphers, older, tls13 = cipher_suites(value, key)
    if ciphers:
        ctx.set_ciphers(ciphers)
    lo, hi = ctx.minimum_version, ctx.maximum_version
    lo = ssl.TLSVersion.TLSv1 if lo == ssl.TLSVersion.MINIMUM_SUPPORTED else lo
    hi = ssl.TLSVersion.TLSv1_3 if hi == ssl.TLSVersion.MAXIMUM_SUPPORTED else hi
    if not tls13 and hi > ssl.TLSVersion.TLSv1_2:
        hi = ssl.TLSVersion.TLSv1_2
    if not older and lo < ssl.TLSVersion.TLSv1_3:
        lo = ssl.TLSVersion.TLSv1_3
    if lo > hi:
        raise ConfigError(f"{key} names no suite for the TLS versions enabled", key)
    ctx.minimum_version, ctx.maximum_version = lo, hi


def client_version_range(get) -> tuple | None:
    """The TLS versions of a broker's own connections to other brokers: ``ssl.enabled.protocols``
    as on the listener, at most ``ssl.protocol`` (Kafka: with ``ssl.protocol=TLSv1.2`` a client
    does not use TLSv1.3 even when it is enabled; ``TLS`` or ``TLSv1.3``, the default, caps
    nothing).  ConfigError when the cap leaves no enabled version."""
    chosen = version_range(get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3"))
    wanted = str(get("ssl.protocol", "TLSv1.3") or "").strip().lower()    # Java: case-insensitive
    cap = next((v for name, v in TLS_VERSIONS.items() if name.lower() == wanted), None)
    if chosen is None or cap is None or cap >= chosen[1]:
        return chosen
    if cap < chosen[0]:
        raise ConfigError(f"ssl.protocol={get('ssl.protocol')} is below every version of ssl.enabled.protocols="
                          f"{get('ssl.enabled.protocols', 'TLSv1.2,TLSv1.3')}", "ssl.protocol")
    return chosen[0], cap


def check_jsse_settings(get, listener: str) -> None:
    """Java's JSSE settings are accepted for Kafka's property files (and not used)."""
    provider = get("ssl.provider")
    if provider:
        log.warning("listener %s: ssl.provider=%s is a Java security provider and is not used", listener, provider)


# -- ssl.engine.factory.class: Kafka's SslEngineFactory, a Python class here ---------------------
ENGINE_FACTORY_KEY = "ssl.engine.factory.class"
ENGINE_FACTORY_NEEDS = ("create_server_context()", "create_client_context()")
_factories: list = []           # every factory built, closed by close_engine_factories()


def load_engine_factory(cfg, listener: str):
    """The listener's ``ssl.engine.factory.class`` instance (listener prefix first), configured
    with the listener's settings, or None.  ConfigError when it cannot be loaded or lacks a
    method: an unloadable factory stops start-up, as in Kafka."""
    path = listener_value(cfg, listener, ENGINE_FACTORY_KEY)
    if not path:
        return None
    from broker.security.builder import instantiate, listener_configs
    factory = instantiate(path, ENGINE_FACTORY_KEY, listener_configs(cfg, listener), ENGINE_FACTORY_NEEDS,
                          f" for listener {listener}")
    _factories.append(factory)
    return factory


def factory_context(factory, method: str, listener: str) -> ssl.SSLContext:
    """``factory.<method>()``, checked to be an ``ssl.SSLContext`` of the right side."""
    try:
        ctx = getattr(factory, method)()
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(f"{ENGINE_FACTORY_KEY} {type(factory).__name__}.{method}() failed for listener "
                          f"{listener}: {e}", ENGINE_FACTORY_KEY) from None
    want = "server" if method == "create_server_context" else "client"
    if not isinstance(ctx, ssl.SSLContext) or ctx.protocol != (ssl.PROTOCOL_TLS_SERVER if want == "server"
                                                                else ssl.PROTOCOL_TLS_CLIENT):
        raise ConfigError(f"{ENGINE_FACTORY_KEY} {type(factory).__name__}.{method}() must return an "
                          f"ssl.SSLContext(ssl.PROTOCOL_TLS_{want.upper()}), not {ctx!r}", ENGINE_FACTORY_KEY)
    ctx.odradek_engine_factory = factory
    return ctx


def _made_by(factory, method: str, listener: str) -> ssl.SSLContext:
    try:
        return factory_context(factory, method, listener)
    except ConfigError:
        close_engine_factory(factory)
        raise


def close_engine_factory(factory) -> None:
    close = getattr(factory, "close", None)
    if callable(close):
        try:
            close()
        except Exception:
            log.exception("closing %s %r failed", ENGINE_FACTORY_KEY, factory)
    if factory in _factories:
        _factories.remove(factory)


def close_engine_factories() -> None:
    for f in list(_factories):
        close_engine_factory(f)


def server_context(cfg, listener: str) -> ssl.SSLContext:
    """The SSLContext for one listener; ConfigError when the key material is missing or bad.
    With an ``ssl.engine.factory.class`` the factory makes it (a new factory each call: the
    context keeps it as ``odradek_engine_factory``)."""
    get = lambda key, default=None: listener_value(cfg, listener, key, default)  # noqa: E731
    check_jsse_settings(get, listener)
    factory = load_engine_factory(cfg, listener)
    if factory is not None:
        return _made_by(factory, "create_server_context", listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    chosen = version_range(get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3"))
    if chosen:
        ctx.minimum_version, ctx.maximum_version = chosen
    apply_cipher_suites(ctx, get("ssl.cipher.suites"))
    temp: list[str] = []
    try:
        _load_key_store(ctx, get, listener, temp, required=True)
        own_trust = _load_trust_store(ctx, get, listener, temp, system_default=False)
    finally:
        for p in temp:
            try:
                os.unlink(p)
            except OSError:
                pass
    auth = str(get("ssl.client.auth", "none")).lower()
    if auth == "required":
        ctx.verify_mode = ssl.CERT_REQUIRED
    elif auth == "requested":
        ctx.verify_mode = ssl.CERT_OPTIONAL
    elif auth == "none":
        ctx.verify_mode = ssl.CERT_NONE
    else:
        raise ConfigError(f"Invalid value {auth} for configuration ssl.client.auth", "ssl.client.auth")
    if ctx.verify_mode != ssl.CERT_NONE and not own_trust:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return ctx


def endpoint_identification(cfg, listener: str) -> bool:
    """Whether host names are checked: ``ssl.endpoint.identification.algorithm`` (listener prefix
    first) is ``https`` (Kafka's default) or empty (no check).  An empty value counts as set."""
    for name in (f"listener.name.{listener.lower()}.ssl.endpoint.identification.algorithm",
                 "ssl.endpoint.identification.algorithm"):
        try:
            v = cfg.get(name)
        except KeyError:
            continue
        if v is None:
            continue
        v = str(v).strip()
        if v and v.lower() != "https":
            raise ConfigError(f"ssl.endpoint.identification.algorithm={v} is not supported (https, or empty for "
                              "no host name check)", "ssl.endpoint.identification.algorithm")
        return bool(v)
    return True


def principal_from_peercert(cert: dict | None) -> str | None:
    """The certificate subject as an RFC 2253 distinguished name (most specific first) from
    Python's decoded certificate: ``CN=alice,OU=eng,O=Example,C=US``.  A fallback only: the
    broker reads the subject from the DER certificate (``principal.subject_from_der``), which
    also renders attributes without an RFC 2253 keyword as Java does (OID and hex)."""
    if not cert or "subject" not in cert:
        return None
    short = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
             "stateOrProvinceName": "ST", "localityName": "L", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}
    rdns = []
    for rdn in cert["subject"]:
        parts = []
        for k, v in rdn:
            v = v.replace("\\", "\\\\").replace(",", "\\,").replace("+", "\\+").replace('"', '\\"') \
                 .replace("<", "\\<").replace(">", "\\>").replace(";", "\\;")
            parts.append(f"{short.get(k, k)}={v}")
        rdns.append("+".join(parts))
    return ",".join(reversed(rdns))


def client_context(cfg, listener: str) -> ssl.SSLContext:
    """The client SSLContext a broker uses for its own connections to the ``listener`` of other
    brokers (inter-broker): trust from ``ssl.truststore.*`` (the system CAs when unset), the key
    store as the client certificate when one is configured (for ``ssl.client.auth``), and host name
    checks unless ``ssl.endpoint.identification.algorithm`` is empty (Kafka's default: https)."""
    factory = load_engine_factory(cfg, listener)
    if factory is not None:
        return _made_by(factory, "create_client_context", listener)
    get = lambda key, default=None: listener_value(cfg, listener, key, default)  # noqa: E731
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.check_hostname = endpoint_identification(cfg, listener)
    chosen = client_version_range(get)
    if chosen:
        ctx.minimum_version, ctx.maximum_version = chosen
    apply_cipher_suites(ctx, get("ssl.cipher.suites"))
    temp: list[str] = []
    try:
        _load_trust_store(ctx, get, listener, temp, system_default=True)
        _load_key_store(ctx, get, listener, temp, required=False)
    finally:
        for p in temp:
            try:
                os.unlink(p)
            except OSError:
                pass
    return ctx


# -- dynamic key store updates (Kafka's reconfigurable SslFactory) -------------------------------
RELOAD_KEYS = ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
               "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type",
               "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
               "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites", ENGINE_FACTORY_KEY)


def ssl_fingerprint(cfg, listener: str) -> tuple:
    """What a listener's server context is built from: the effective ``ssl.*`` values and the
    modification times of the store files (a store rewritten in place counts as a change, as in
    Kafka, once a config update asks for a reload)."""
    vals = tuple(str(listener_value(cfg, listener, k)) for k in RELOAD_KEYS)
    times = []
    for k in ("ssl.keystore.location", "ssl.truststore.location"):
        path = listener_value(cfg, listener, k)
        try:
            times.append(os.stat(path).st_mtime_ns if path else None)
        except OSError:
            times.append(None)
    return vals + tuple(times)


def _identity(pem: str | None):
    """(subject DN, sorted SAN strings) of a PEM certificate; None when unknown."""
    if not pem:
        return None
    try:
        from cryptography import x509
    except ImportError:
        return None
    cert = x509.load_pem_x509_certificate(pem.encode())
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        sans = sorted(str(g.value) for g in san)
    except x509.ExtensionNotFound:
        sans = []
    return cert.subject.rfc4514_string(), sans


def check_reconfiguration(old_cfg, new_cfg, listener: str) -> None:
    """Check a dynamic update of a listener's ``ssl.*`` configs before it is accepted; ConfigError:
    the new stores do not load, or the new certificate's subject or subject alternative names
    differ from the current one's while ``ssl.allow.dn.changes`` / ``ssl.allow.san.changes`` are
    false (Kafka's checks).  An engine factory built for the check is closed after it."""
    built = []
    try:
        try:
            new = server_context(new_cfg, listener)
        except ConfigError as e:
            raise ConfigError(f"Validation of dynamic config update of SSLFactory failed: {e}", e.key) from None
        built.append(new)
        try:
            old = server_context(old_cfg, listener)
        except ConfigError:
            return              # nothing valid to compare with
        built.append(old)
        before = _identity(getattr(old, "odradek_leaf_pem", None))
        after = _identity(getattr(new, "odradek_leaf_pem", None))
        if before is not None and after is not None:
            get = lambda key, default=None: listener_value(new_cfg, listener, key, default)  # noqa: E731
            if before[0] != after[0] and not _true(get("ssl.allow.dn.changes", False)):
                raise ConfigError("Validation of dynamic config update of SSLFactory failed: Keystore "
                                  f"DistinguishedName does not match: existing={{{before[0]}}}, new={{{after[0]}}}",
                                  "ssl.keystore.location")
            if before[1] != after[1] and not _true(get("ssl.allow.san.changes", False)):
                raise ConfigError("Validation of dynamic config update of SSLFactory failed: Keystore "
                                  f"SubjectAltNames do not match: existing={before[1]}, new={after[1]}",
                                  "ssl.keystore.location")
    finally:
        for ctx in built:
            factory = getattr(ctx, "odradek_engine_factory", None)
            if factory is not None:
                close_engine_factory(factory)


def _true(v) -> bool:
    return v is True or str(v).strip().lower() == "true"

"""Reading Java KeyStore (JKS) files: Kafka's default ``ssl.keystore.type`` / ``ssl.truststore.type``.

The format (Sun's ``JavaKeyStore``, version 2), all integers big-endian::

    magic 0xFEEDFEED, version (4 bytes, 1 or 2), entry count (4 bytes), then per entry:
      tag (4 bytes): 1 = private key, 2 = trusted certificate
      alias (2-byte length + modified UTF-8), creation time (8 bytes, ms)
      tag 1: protected key (4-byte length + DER EncryptedPrivateKeyInfo), chain length (4 bytes),
             per certificate: type (2-byte length + UTF-8, "X.509" in version 2), 4-byte length + DER
      tag 2: type (version 2 only), 4-byte length + DER certificate
    SHA-1(store password as UTF-16BE || b"Mighty Aphrodite" || everything before) (20 bytes)

A private key is protected with Sun's own scheme (algorithm OID 1.3.6.1.4.1.42.2.17.1.1): the
octet string is salt (20 bytes) || key XOR keystream || check (20 bytes), where the keystream is
d1 || d2 || ... with d1 = SHA-1(pw || salt), d(i+1) = SHA-1(pw || d(i)), pw the key password as
UTF-16BE, and check = SHA-1(pw || key).  The key is PKCS #8 PrivateKeyInfo DER.

Java's "JKS" key store type also reads PKCS #12 files (``keystore.type.compat``, the default since
Java 9), so a file that does not start with the JKS magic is handed to the PKCS #12 reader; the
caller does that.

JCEKS (Sun's ``JceKeyStore``, magic 0xCECECECE, version 2) has the same layout and digest; its
private keys are protected with PBEWithMD5AndTripleDES (OID 1.3.6.1.4.1.42.2.19.1, parameters
salt (8 bytes) and iteration count): key and IV come from Sun's PBES1 variant (each half of the
salt -- the first half reversed when the halves are equal -- hashed with the password, as bytes,
``count`` times with MD5; 24 bytes of key, 8 of IV), then DESede/CBC with PKCS #5 padding
(``cryptography``'s TripleDES).  Its secret-key entries (tag 3) are serialized Java objects
(a ``SealedObjectForKeyProtector``) with no length before them: ``_JavaObjectSkipper`` walks
Java's object serialization grammar far enough to find where one ends, and the entry is passed
over (its alias is listed in ``Store.secret_keys``).  TLS has no use for a secret key: Java's key
manager, too, looks only at private key entries.
"""
from __future__ import annotations

import hashlib
import hmac
import struct
from typing import NamedTuple

JKS_MAGIC = 0xFEEDFEED
JCEKS_MAGIC = 0xCECECECE
_SUN_KEY_PROTECTOR = "1.3.6.1.4.1.42.2.17.1.1"
_SUN_JCE_KEY_PROTECTOR = "1.3.6.1.4.1.42.2.19.1"          # PBEWithMD5AndTripleDES
_WHITENER = b"Mighty Aphrodite"


class JksError(ValueError):
    """The file is not a readable JKS key store, or a password does not open it."""


class PrivateKeyEntry(NamedTuple):
    alias: str
    key_der: bytes                  # PKCS #8 PrivateKeyInfo
    chain: list[bytes]              # DER certificates, leaf first


class Store(NamedTuple):
    keys: list[PrivateKeyEntry]
    certificates: list[tuple[str, bytes]]   # trusted certificate entries: (alias, DER)
    secret_keys: tuple[str, ...] = ()       # aliases of JCEKS secret-key entries (passed over)


def is_jks(data: bytes) -> bool:
    """A JKS or JCEKS file (both are read by ``load``)."""
    return len(data) >= 4 and struct.unpack_from(">I", data)[0] in (JKS_MAGIC, JCEKS_MAGIC)


def _password_bytes(password: str) -> bytes:
    return password.encode("utf-16-be")


class _Reader:
    def __init__(self, data: bytes, end: int):
        self.data, self.pos, self.end = data, 0, end

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise JksError("truncated JKS key store")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def utf(self) -> str:
        n = struct.unpack(">H", self.take(2))[0]
        raw = self.take(n)
        try:                # modified UTF-8: plain UTF-8 for everything but NUL and supplementary chars
            return raw.replace(b"\xc0\x80", b"\0").decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("utf-8", "replace")


def load(data: bytes, store_password: str | None) -> Store:
    """Parse a JKS file.  The integrity digest is checked when a store password is given (Java
    skips the check without one, and so does this)."""
    if len(data) < 4:
        raise JksError("not a JKS key store (too short)")
    magic = struct.unpack_from(">I", data)[0]
    if magic == JCEKS_MAGIC:
        if len(data) < 32:
            raise JksError("not a JCEKS key store")
    elif magic != JKS_MAGIC or len(data) < 32:
        raise JksError("not a JKS key store")
    body_end = len(data) - 20
    if store_password is not None:
        want = hashlib.sha1(_password_bytes(store_password) + _WHITENER + data[:body_end]).digest()
        if not hmac.compare_digest(want, data[body_end:]):
            raise JksError("Keystore was tampered with, or password was incorrect")
    r = _Reader(data, body_end)
    r.take(4)
    version = r.u32()
    if version not in (1, 2):
        raise JksError(f"unsupported JKS version {version}")
    keys: list[tuple[str, bytes, list[bytes]]] = []
    certs: list[tuple[str, bytes]] = []
    secrets: list[str] = []
    for _ in range(r.u32()):
        tag = r.u32()
        alias = r.utf()
        r.take(8)                               # creation date
        if tag == 1:
            protected = r.take(r.u32())
            chain = []
            for _ in range(r.u32()):
                if version == 2:
                    ctype = r.utf()
                    if ctype != "X.509":
                        raise JksError(f"certificate type {ctype!r} in entry {alias!r} is not supported")
                chain.append(r.take(r.u32()))
            keys.append((alias, protected, chain))
        elif tag == 2:
            if version == 2:
                ctype = r.utf()
                if ctype != "X.509":
                    raise JksError(f"certificate type {ctype!r} in entry {alias!r} is not supported")
            certs.append((alias, r.take(r.u32())))
        elif tag == 3 and magic == JCEKS_MAGIC:
            try:
                r.pos = _JavaObjectSkipper(data, r.pos, r.end).skip_stream()
            except (JksError, IndexError, struct.error, ValueError, RecursionError) as e:
                raise JksError(f"JCEKS secret key entry {alias!r} cannot be read: {e}") from None
            secrets.append(alias)
        else:
            raise JksError(f"unknown JKS entry tag {tag}")
    return Store([PrivateKeyEntry(a, p, c) for a, p, c in keys], certs, tuple(secrets))


class _JavaObjectSkipper(_Reader):
    """Where one object written by Java's ObjectOutputStream ends (stream magic, version, one
    top-level content).  Only the grammar is followed: class descriptors (kept, as later objects
    refer to them by handle), objects with serializable fields, arrays, strings, enums, block
    data and the null and back-reference markers.  Nothing is built."""

    _PRIMITIVE = {"B": 1, "C": 2, "D": 8, "F": 4, "I": 4, "J": 8, "S": 2, "Z": 1}
    _BASE_HANDLE = 0x7E0000

    def __init__(self, data: bytes, pos: int, end: int):
        super().__init__(data, end)
        self.pos = pos
        self.handles: list = []

    def _u(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def skip_stream(self) -> int:
        if self._u(">H") != 0xACED or self._u(">H") != 5:
            raise ValueError("not a Java serialization stream")
        self._content()
        return self.pos

    def _new_handle(self, value=None) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def _content(self):
        tc = self._u(">B")
        if tc == 0x70:                                  # TC_NULL
            return None
        if tc == 0x71:                                  # TC_REFERENCE
            index = self._u(">I") - self._BASE_HANDLE
            if not 0 <= index < len(self.handles):
                raise ValueError(f"reference to unknown handle {index}")
            return self.handles[index]
        if tc == 0x74:                                  # TC_STRING
            text = self.utf()
            self._new_handle(text)
            return text
        if tc == 0x7C:                                  # TC_LONGSTRING
            text = self.take(self._u(">Q")).decode("utf-8", "replace")
            self._new_handle(text)
            return text
        if tc == 0x72:                                  # TC_CLASSDESC
            return self._class_desc()
        if tc == 0x7D:                                  # TC_PROXYCLASSDESC
            h = self._new_handle()
            for _ in range(self._u(">I")):
                self.utf()
            self._annotations()
            desc = ("proxy", 0, [], self._content())
            self.handles[h] = desc
            return desc
        if tc == 0x76:                                  # TC_CLASS
            desc = self._content()
            self._new_handle(desc)
            return desc
        if tc == 0x73:                                  # TC_OBJECT
            return self._object()
        if tc == 0x75:                                  # TC_ARRAY
            desc = self._content()
            self._new_handle()
            n = self._u(">i")
            kind = desc[0][1:2] if desc else ""
            if kind in self._PRIMITIVE:
                self.take(n * self._PRIMITIVE[kind])
            else:
                for _ in range(n):
                    self._content()
            return desc
        if tc == 0x7E:                                  # TC_ENUM
            self._content()
            h = self._new_handle()
            self.handles[h] = self._content()
            return self.handles[h]
        if tc == 0x77:                                  # TC_BLOCKDATA
            self.take(self._u(">B"))
            return None
        if tc == 0x7A:                                  # TC_BLOCKDATALONG
            self.take(self._u(">I"))
            return None
        raise ValueError(f"unexpected serialization code 0x{tc:02x}")

    def _class_desc(self):
        name = self.utf()
        self.take(8)                                   # serialVersionUID
        h = self._new_handle()
        flags = self._u(">B")
        fields = []
        for _ in range(self._u(">H")):
            code = chr(self._u(">B"))
            self.utf()                                 # field name
            if code in "[L":
                self._content()                         # its class name, a string
            fields.append(code)
        self._annotations()
        desc = (name, flags, fields, self._content())   # the superclass's descriptor (or None)
        self.handles[h] = desc
        return desc

    def _annotations(self) -> None:
        """Contents up to TC_ENDBLOCKDATA."""
        while self.data[self.pos:self.pos + 1] != b"\x78":
            if self.pos >= self.end:
                raise ValueError("truncated serialized object")
            self._content()
        self.pos += 1

    def _object(self):
        desc = self._content()
        self._new_handle()
        chain = []
        while desc is not None:
            chain.append(desc)
            desc = desc[3]
        for name, flags, fields, _super in reversed(chain):     # superclass data first
            if flags & 0x04:                            # SC_EXTERNALIZABLE
                if not flags & 0x08:                    # without SC_BLOCK_DATA its length is unknown
                    raise ValueError(f"externalizable {name} in the old format")
                self._annotations()
                continue
            for code in fields:
                if code in self._PRIMITIVE:
                    self.take(self._PRIMITIVE[code])
                else:
                    self._content()
            if flags & 0x01:                            # SC_WRITE_METHOD: its own data follows
                self._annotations()
        return chain[0] if chain else None


def unprotect(protected: bytes, key_password: str) -> bytes:
    """The PKCS #8 key of a private key entry (``PrivateKeyEntry.key_der`` as stored: the
    EncryptedPrivateKeyInfo).  JksError when the password is wrong."""
    alg, params, blob = _encrypted_private_key_info(protected)
    if alg == _SUN_JCE_KEY_PROTECTOR:
        return _unprotect_jce(params, blob, key_password)
    if alg != _SUN_KEY_PROTECTOR:
        raise JksError(f"private key protected with {alg}, which is not supported (only the JKS and JCEKS schemes)")
    if len(blob) < 40:
        raise JksError("protected key too short")
    salt, body, check = blob[:20], blob[20:-20], blob[-20:]
    pw = _password_bytes(key_password)
    stream = bytearray()
    d = salt
    while len(stream) < len(body):
        d = hashlib.sha1(pw + d).digest()
        stream += d
    key = bytes(a ^ b for a, b in zip(body, stream))
    if not hmac.compare_digest(hashlib.sha1(pw + key).digest(), check):
        raise JksError("Cannot recover key: the key password is incorrect")
    return key


# -- the DER of the protected key (the DER reader of principal.py) ------------------------------
def _encrypted_private_key_info(der: bytes) -> tuple[str, bytes, bytes]:
    """EncryptedPrivateKeyInfo ::= SEQUENCE { AlgorithmIdentifier, OCTET STRING } -> (OID, the
    DER of the algorithm's parameters (empty when absent), octets)."""
    from broker.security.principal import DerError, _oid, _tlv
    try:
        tag, start, end, _ = _tlv(der, 0)
        if tag != 0x30:
            raise JksError("protected key is not a DER SEQUENCE")
        tag, a_start, a_end, _ = _tlv(der, start)
        if tag != 0x30:
            raise JksError("protected key has no algorithm identifier")
        tag, o_start, o_end, _ = _tlv(der, a_start)
        if tag != 0x06:
            raise JksError("protected key algorithm is not an OID")
        tag, s_start, s_end, _ = _tlv(der, a_end)
        if tag != 0x04 or s_end > end:
            raise JksError("protected key has no encrypted data")
        return _oid(der[o_start:o_end]), der[o_end:a_end], der[s_start:s_end]
    except DerError as e:
        raise JksError(f"malformed protected key: {e}") from None


def _unprotect_jce(params: bytes, blob: bytes, key_password: str) -> bytes:
    """PBEWithMD5AndTripleDES (JCEKS): PBEParameter ::= SEQUENCE { salt OCTET STRING (8),
    iterationCount INTEGER } -> the PKCS #8 key."""
    from broker.security.principal import DerError, _tlv
    try:
        tag, start, end, _ = _tlv(params, 0)
        t_salt, s0, s1, _ = _tlv(params, start)
        t_count, c0, c1, _ = _tlv(params, s1)
    except DerError as e:
        raise JksError(f"malformed JCEKS key parameters: {e}") from None
    if tag != 0x30 or t_salt != 0x04 or t_count != 0x02 or s1 - s0 != 8 or not 0 < c1 - c0 <= 4:
        raise JksError("malformed JCEKS key parameters")
    salt, count = bytearray(params[s0:s1]), int.from_bytes(params[c0:c1], "big")
    if not 0 < count <= 10_000_000 or not blob or len(blob) % 8:
        raise JksError("malformed JCEKS protected key")
    if salt[:4] == salt[4:]:
        salt[:4] = salt[3::-1]
    pw = bytes(ord(c) & 0xFF for c in key_password)
    derived = b""
    for half in (bytes(salt[:4]), bytes(salt[4:])):
        d = half
        for _ in range(count):
            d = hashlib.md5(d + pw).digest()
        derived += d
    try:
        from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
    except ImportError:     # cryptography < 43
        from cryptography.hazmat.primitives.ciphers.algorithms import TripleDES
    from cryptography.hazmat.primitives.ciphers import Cipher, modes
    dec = Cipher(TripleDES(derived[:24]), modes.CBC(derived[24:32])).decryptor()
    padded = dec.update(blob) + dec.finalize()
    pad = padded[-1]
    if not 1 <= pad <= 8 or padded[-pad:] != bytes([pad]) * pad:
        raise JksError("Cannot recover key: the key password is incorrect")
    key = padded[:-pad]
    if not key.startswith(b"\x30"):
        raise JksError("Cannot recover key: the key password is incorrect")
    return key

"""SCRAM (RFC 5802, RFC 7677) as Kafka uses it: SCRAM-SHA-256 and SCRAM-SHA-512 over SASL.

Sans-io helpers shared by the broker (server side, ``broker/security/sasl.py``) and the
project's client (``protocol/client.py``):

* ``Credential`` — what a server stores per user and mechanism: salt, StoredKey, ServerKey,
  iteration count.  ``to_config``/``from_config`` use Kafka's text form, the value of the
  ``SCRAM-SHA-256`` key of ``/config/users/<user>``:
  ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``.
* ``ScramClient`` — the client side of the exchange (client-first, client-final, verify
  server-final).
* The message parsing and proof math used by both sides.

Kafka specifics: the SASL user name is ``saslname`` escaped (``=2C`` for ',' and ``=3D`` for
'='); no channel binding (gs2 header ``n,,``); minimum 4096 iterations for credentials a
client creates with the admin API (the broker accepts 4096..16384).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# AlterUserScramCredentials / DescribeUserScramCredentials mechanism ids
MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_IDS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramError(ValueError):
    pass


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(s: str) -> bytes:
    try:
        return base64.b64decode(s.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ScramError(f"invalid base64 {s!r}") from None


def hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism.upper()]
    except KeyError:
        raise ScramError(f"unsupported SCRAM mechanism {mechanism}") from None


def salted_password(mechanism: str, password: str | bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) = PBKDF2 with HMAC-H."""
    pw = password.encode("utf-8") if isinstance(password, str) else password
    return hashlib.pbkdf2_hmac(hash_name(mechanism), pw, salt, iterations)


def _hmac(h: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, h).digest()


def client_key(mechanism: str, salted: bytes) -> bytes:
    return _hmac(hash_name(mechanism), salted, b"Client Key")


def server_key(mechanism: str, salted: bytes) -> bytes:
    return _hmac(hash_name(mechanism), salted, b"Server Key")


def stored_key(mechanism: str, ckey: bytes) -> bytes:
    return hashlib.new(hash_name(mechanism), ckey).digest()


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


@dataclass(frozen=True)
class Credential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted: bytes, iterations: int) -> "Credential":
        return cls(salt, stored_key(mechanism, client_key(mechanism, salted)), server_key(mechanism, salted),
                   iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                      salt: bytes | None = None) -> "Credential":
        salt = os.urandom(32) if salt is None else salt
        return cls.from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                        iterations)

    def to_config(self) -> str:
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_config(cls, text: str) -> "Credential":
        fields = {}
        for part in text.split(","):
            k, sep, v = part.partition("=")
            if not sep:
                raise ScramError(f"invalid SCRAM credential {text!r}")
            fields[k.strip()] = v.strip()
        try:
            return cls(unb64(fields["salt"]), unb64(fields["stored_key"]), unb64(fields["server_key"]),
                       int(fields["iterations"]))
        except (KeyError, ValueError) as e:
            raise ScramError(f"invalid SCRAM credential: {e}") from None


def parse_attributes(msg: str) -> dict[str, str]:
    """``a=1,b=2`` -> {'a': '1', 'b': '2'} (values may contain '=')."""
    out = {}
    for part in msg.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"invalid SCRAM message {msg!r}")
        out[part[0]] = part[2:]
    return out


def parse_client_first_bare(bare: str) -> tuple[dict[str, str], dict[str, str]]:
    """``n=user,r=nonce[,key=value...]`` -> ({'n': .., 'r': ..}, extensions).  Kafka's SCRAM
    extensions (``tokenauth=true`` for delegation tokens) follow the nonce as ``key=value``
    attributes with names longer than one letter."""
    parts = bare.split(",")
    if len(parts) < 2 or not parts[0].startswith("n=") or not parts[1].startswith("r="):
        raise ScramError("invalid client-first-message")
    extensions = {}
    for part in parts[2:]:
        k, sep, v = part.partition("=")
        if not sep or not k:
            raise ScramError(f"invalid SCRAM extension {part!r}")
        extensions[k] = v
    return {"n": parts[0][2:], "r": parts[1][2:]}, extensions


def escape_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(name: str) -> str:
    out = []
    i = 0
    while i < len(name):
        c = name[i]
        if c == "=":
            code = name[i + 1:i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ScramError(f"invalid username escape in {name!r}")
            i += 3
            continue
        if c == ",":
            raise ScramError(f"invalid username {name!r}")
        out.append(c)
        i += 1
    return "".join(out)


def nonce() -> str:
    return base64.b64encode(os.urandom(24)).decode("ascii").replace(",", "-")


class ScramClient:
    """Client side: ``first()`` -> bytes; ``final(server_first)`` -> bytes; ``verify(server_final)``."""

    def __init__(self, mechanism: str, username: str, password: str, extensions: dict | None = None):
        hash_name(mechanism)
        self.mechanism = mechanism.upper()
        self.username = username
        self.password = password
        self.client_nonce = nonce()
        ext = "".join(f",{k}={v}" for k, v in (extensions or {}).items())
        self._bare = f"n={escape_username(username)},r={self.client_nonce}{ext}"
        self._server_signature = b""

    def first(self) -> bytes:
        return ("n,," + self._bare).encode("utf-8")

    def final(self, server_first: bytes) -> bytes:
        sf = server_first.decode("utf-8")
        attrs = parse_attributes(sf)
        if "e" in attrs:
            raise ScramError(attrs["e"])
        r, s, i = attrs.get("r"), attrs.get("s"), attrs.get("i")
        if not r or s is None or i is None or not r.startswith(self.client_nonce):
            raise ScramError("invalid server-first-message")
        salted = salted_password(self.mechanism, self.password, unb64(s), int(i))
        without_proof = f"c={b64(b'n,,')},r={r}"
        auth_message = f"{self._bare},{sf},{without_proof}".encode("utf-8")
        ck = client_key(self.mechanism, salted)
        sig = _hmac(hash_name(self.mechanism), stored_key(self.mechanism, ck), auth_message)
        proof = xor(ck, sig)
        self._server_signature = _hmac(hash_name(self.mechanism), server_key(self.mechanism, salted),
                                       auth_message)
        return f"{without_proof},p={b64(proof)}".encode("utf-8")

    def verify(self, server_final: bytes) -> None:
        attrs = parse_attributes(server_final.decode("utf-8"))
        if "e" in attrs:
            raise ScramError(attrs["e"])
        if not hmac.compare_digest(unb64(attrs.get("v", "")), self._server_signature):
            raise ScramError("invalid server signature")

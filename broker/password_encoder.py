"""Kafka's password encoder for dynamic password configs kept in ZooKeeper
(``password.encoder.*``), in Kafka's stored format, so that the values a Kafka broker wrote can be
read here and the other way round.

A value is stored as ``key:value`` pairs joined by commas: ``keyFactoryAlgorithm``,
``cipherAlgorithm``, ``keyLength``, ``salt`` (256 random bytes, base64), ``iterations``,
``encryptedPassword`` (base64), ``passwordLength`` and the cipher's parameters
(``initializationVector``; ``authenticationTagLength`` for GCM).  The key is PBKDF2 of
``password.encoder.secret`` over the salt (``password.encoder.keyfactory.algorithm``, default
PBKDF2WithHmacSHA512); the cipher is ``password.encoder.cipher.algorithm`` (AES/CBC/PKCS5Padding by
default; AES/GCM/NoPadding also works here).  Decoding uses the parameters stored with the value,
as Kafka's does.  AES comes from the ``cryptography`` package.
"""
from __future__ import annotations

import base64
import hashlib
import os

from broker.config import ConfigError

KDF_HASHES = {"PBKDF2WithHmacSHA512": "sha512", "PBKDF2WithHmacSHA256": "sha256", "PBKDF2WithHmacSHA1": "sha1"}
CIPHERS = ("AES/CBC/PKCS5Padding", "AES/GCM/NoPadding")
MARKER = "encryptedPassword:"


class PasswordEncoderError(Exception):
    pass


def _csv_map(text: str) -> dict[str, str]:
    out = {}
    for item in text.split(","):
        k, sep, v = item.partition(":")
        if not sep:
            raise PasswordEncoderError("Password could not be decoded: not an encoded password")
        out[k.strip()] = v.strip()
    return out


def _key(secret: str, kdf: str, salt: bytes, iterations: int, key_length: int) -> bytes:
    digest = KDF_HASHES.get(kdf)
    if digest is None:
        raise PasswordEncoderError(f"Unsupported key factory algorithm {kdf}")
    return hashlib.pbkdf2_hmac(digest, secret.encode("utf-8"), salt, iterations, key_length // 8)


def _cipher(algorithm: str):
    try:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    except ImportError:
        raise PasswordEncoderError("encoding passwords needs the 'cryptography' package") from None
    if algorithm not in CIPHERS:
        raise PasswordEncoderError(f"Unsupported cipher algorithm {algorithm}")
    return Cipher, algorithms, modes


class PasswordEncoder:
    def __init__(self, secret: str, *, key_factory: str | None = None, cipher: str = "AES/CBC/PKCS5Padding",
                 key_length: int = 128, iterations: int = 4096):
        self.secret = secret
        self.key_factory = key_factory or "PBKDF2WithHmacSHA512"
        self.cipher = cipher
        self.key_length = key_length
        self.iterations = iterations

    @classmethod
    def from_config(cls, cfg, secret_key: str = "password.encoder.secret") -> "PasswordEncoder | None":
        """The encoder of ``secret_key`` (or of ``password.encoder.old.secret``), or None when unset;
        ConfigError for an algorithm this broker cannot use."""
        secret = cfg.get(secret_key)
        if not secret:
            return None
        enc = cls(str(secret), key_factory=cfg.get("password.encoder.keyfactory.algorithm"),
                  cipher=cfg.get("password.encoder.cipher.algorithm"),
                  key_length=cfg.get("password.encoder.key.length"), iterations=cfg.get("password.encoder.iterations"))
        if enc.key_factory not in KDF_HASHES:
            raise ConfigError(f"Invalid value {enc.key_factory} for configuration password.encoder.keyfactory.algorithm: "
                              f"one of {', '.join(KDF_HASHES)}", "password.encoder.keyfactory.algorithm")
        if enc.cipher not in CIPHERS:
            raise ConfigError(f"Invalid value {enc.cipher} for configuration password.encoder.cipher.algorithm: "
                              f"one of {', '.join(CIPHERS)}", "password.encoder.cipher.algorithm")
        return enc

    def encode(self, password: str) -> str:
        Cipher, algorithms, modes = _cipher(self.cipher)
        salt = os.urandom(256)
        key = _key(self.secret, self.key_factory, salt, self.iterations, self.key_length)
        data = password.encode("utf-8")
        params = {}
        if self.cipher.startswith("AES/GCM/"):
            iv = os.urandom(12)
            enc = Cipher(algorithms.AES(key), modes.GCM(iv)).encryptor()
            out = enc.update(data) + enc.finalize() + enc.tag
            params = {"initializationVector": base64.b64encode(iv).decode(), "authenticationTagLength": "128"}
        else:
            from cryptography.hazmat.primitives import padding
            iv = os.urandom(16)
            padder = padding.PKCS7(128).padder()
            enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            out = enc.update(padder.update(data) + padder.finalize()) + enc.finalize()
            params = {"initializationVector": base64.b64encode(iv).decode()}
        fields = {"keyFactoryAlgorithm": self.key_factory, "cipherAlgorithm": self.cipher,
                  "keyLength": str(self.key_length), "salt": base64.b64encode(salt).decode(),
                  "iterations": str(self.iterations), "encryptedPassword": base64.b64encode(out).decode(),
                  "passwordLength": str(_java_length(password)), **params}
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        try:
            p = _csv_map(encoded)
            Cipher, algorithms, modes = _cipher(p["cipherAlgorithm"])
            key = _key(self.secret, p["keyFactoryAlgorithm"], base64.b64decode(p["salt"]), int(p["iterations"]),
                       int(p["keyLength"]))
            data = base64.b64decode(p["encryptedPassword"])
            iv = base64.b64decode(p["initializationVector"])
            if p["cipherAlgorithm"].startswith("AES/GCM/"):
                tag_len = int(p.get("authenticationTagLength", "128")) // 8
                dec = Cipher(algorithms.AES(key), modes.GCM(iv, data[-tag_len:], min_tag_length=tag_len)).decryptor()
                plain = dec.update(data[:-tag_len]) + dec.finalize()
            else:
                from cryptography.hazmat.primitives import padding
                dec = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                unpadder = padding.PKCS7(128).unpadder()
                plain = unpadder.update(dec.update(data) + dec.finalize()) + unpadder.finalize()
            password = plain.decode("utf-8")
        except PasswordEncoderError:
            raise
        except Exception as e:      # noqa: BLE001 - bad padding, tag, base64, fields: all "could not be decoded"
            raise PasswordEncoderError(f"Password could not be decoded ({type(e).__name__})") from None
        if _java_length(password) != int(p["passwordLength"]):
            raise PasswordEncoderError("Password could not be decoded, sanity check of length failed")
        return password


def _java_length(s: str) -> int:
    """String.length() in Java: UTF-16 code units."""
    return len(s.encode("utf-16-le")) // 2


def looks_encoded(value: str) -> bool:
    return MARKER in value

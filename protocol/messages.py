"""Every Kafka message as a class, built from the generated schema tables.

>>> from protocol.messages import MetadataRequest
>>> req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")])
>>> MetadataRequest.decode(req.encode(4), 4).topics[0].name
't'

``REQUESTS[api_key]`` / ``RESPONSES[api_key]`` map API keys to classes; each class carries
``API_KEY``, ``DEF`` (the ``codec.MessageDef``) and ``decode`` / ``encode`` taking the version.
"""
from __future__ import annotations

import struct as _struct

from protocol import codec as _codec
from protocol.primitives import DecodeError, EncodeError
from protocol.schema.tables import MESSAGES as _TABLES

try:  # committed, generated ahead of time for the hot messages
    from protocol.schema import hot as _hot
except ImportError:  # pragma: no cover - only while regenerating
    _hot = None

_BUILT, _NAMESPACE = _codec.build_messages(_TABLES, _hot)

REQUESTS: dict = {}
RESPONSES: dict = {}
DATA: dict = {}
ALL: dict = {}

_CATCH = (_struct.error, IndexError, TypeError, ValueError, OverflowError, UnicodeDecodeError)


def _functions(cls, version):
    fns = cls._codecs.get(version)
    if fns is None:
        mdef = cls.DEF
        lo, hi = mdef.valid_versions
        if not lo <= version <= hi:
            raise _VersionError(mdef, version)
        fns = cls._codecs[version] = _codec.compile_version(mdef, version, _NAMESPACE, _hot)
    return fns


class _VersionError(DecodeError):
    def __init__(self, mdef, version):
        super().__init__(f"{mdef.name} has no version {version} "
                         f"(valid {mdef.valid_versions[0]}-{mdef.valid_versions[1]})")


def _decode_from(cls, buf, pos, version, end=None):
    """Decode at ``pos``; returns (message, new_pos).  ``buf`` should be a memoryview."""
    d = _functions(cls, version)[0]
    if not isinstance(buf, memoryview):
        buf = memoryview(buf)
    try:
        return d(buf, pos, len(buf) if end is None else end)
    except DecodeError:
        raise
    except _CATCH as e:
        raise DecodeError(f"malformed {cls.__name__} v{version}: {e}") from None


def _decode(cls, buf, version):
    """Decode a whole buffer; trailing bytes are an error."""
    obj, pos = _decode_from(cls, buf, 0, version)
    if pos != len(buf):
        raise DecodeError(f"{len(buf) - pos} unexpected trailing bytes after {cls.__name__} v{version}")
    return obj


def _encode_into(self, out, version, regions=None):
    e = _functions(type(self), version)[1]
    try:
        e(self, out, regions)
    except EncodeError:
        raise
    except (_struct.error, TypeError, AttributeError, ValueError, OverflowError) as exc:
        raise EncodeError(f"cannot encode {type(self).__name__} v{version}: {exc}") from None


def _encode(self, version):
    out = bytearray()
    _encode_into(self, out, version)
    return bytes(out)


for _name, (_mdef, _cls) in _BUILT.items():
    _cls.API_KEY = _mdef.api_key
    _cls.DEF = _mdef
    _cls._codecs = {}
    _cls.decode = classmethod(_decode)
    _cls.decode_from = classmethod(_decode_from)
    _cls.encode = _encode
    _cls.encode_into = _encode_into
    globals()[_name] = _cls
    ALL[_name] = _cls
    if _mdef.kind == "request":
        REQUESTS[_mdef.api_key] = _cls
    elif _mdef.kind == "response":
        RESPONSES[_mdef.api_key] = _cls
    else:
        DATA[_name] = _cls

API_NAMES = {k: c.__name__[:-len("Request")] for k, c in REQUESTS.items()}

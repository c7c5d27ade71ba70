"""Wire primitives the generated codec calls: strings, bytes, records, varints, arrays, uuids.

Readers take ``(buf, pos, end)`` where ``buf`` is a memoryview and return ``(value, new_pos)``;
they raise ``DecodeError`` on anything that does not fit (never an IndexError).  Writers append
to a ``bytearray``.  Fixed-width integers are handled inline by the generated code with
precompiled ``struct.Struct`` objects.

>>> out = bytearray(); w_uvarint(out, 300); bytes(out)
b'\\xac\\x02'
>>> r_uvarint(memoryview(out), 0, len(out))
(300, 2)
"""
from __future__ import annotations

import struct
import uuid as _uuid

__all__ = [
    "DecodeError", "EncodeError", "UUID0",
    "r_uvarint", "w_uvarint", "uvarint_size",
    "r_str", "r_nstr", "r_cstr", "r_ncstr", "w_str", "w_nstr", "w_cstr", "w_ncstr",
    "r_bytes", "r_nbytes", "r_cbytes", "r_ncbytes", "w_bytes", "w_nbytes", "w_cbytes", "w_ncbytes",
    "r_records", "r_crecords", "w_records", "w_crecords",
    "r_uuid", "w_uuid", "r_count", "r_ccount", "r_fixed_array", "w_fixed_array",
    "r_tag_header", "w_unknown_tags", "S_B", "S_b", "S_h", "S_i", "S_q",
]


class DecodeError(ValueError):
    """Bytes that are not a valid message of the expected type and version."""


class EncodeError(ValueError):
    """A message object that cannot be written at the requested version."""


UUID0 = _uuid.UUID(int=0)

S_B = struct.Struct(">B")
S_b = struct.Struct(">b")
S_h = struct.Struct(">h")
S_i = struct.Struct(">i")
S_q = struct.Struct(">q")
_h_unpack = S_h.unpack_from
_i_unpack = S_i.unpack_from
_h_pack = S_h.pack
_i_pack = S_i.pack


def _truncated(what="field"):
    return DecodeError(f"{what} extends past the end of the frame")


# --- unsigned varints (lengths, counts, tags in flexible versions) -----------------------------

def r_uvarint(buf, pos, end):
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise _truncated("varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise DecodeError("unsigned varint is longer than 5 bytes")


_B1 = struct.Struct(">B")
_B2 = struct.Struct(">BB")
_B3 = struct.Struct(">BBB")


def w_uvarint(out, value):
    if value < 0x80:
        if value >= 0:
            out.append(value)
            return
    elif value < 0x4000:
        out += _B2.pack((value & 0x7F) | 0x80, value >> 7)
        return
    elif value < 0x200000:
        out += _B3.pack((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14)
        return
    if value < 0:
        raise EncodeError(f"negative unsigned varint {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_size(value):
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


# --- strings ----------------------------------------------------------------------------------

def _utf8(buf, pos, n, end):
    stop = pos + n
    if stop > end:
        raise _truncated("string")
    try:
        return str(buf[pos:stop], "utf-8"), stop
    except UnicodeDecodeError as e:
        raise DecodeError(f"string is not valid UTF-8: {e.reason}") from None


def r_str(buf, pos, end):
    if pos + 2 > end:
        raise _truncated("string length")
    n = _h_unpack(buf, pos)[0]
    if n < 0:
        raise DecodeError("null string in a non-nullable field")
    return _utf8(buf, pos + 2, n, end)


def r_nstr(buf, pos, end):
    if pos + 2 > end:
        raise _truncated("string length")
    n = _h_unpack(buf, pos)[0]
    if n < 0:
        if n != -1:
            raise DecodeError(f"invalid string length {n}")
        return None, pos + 2
    return _utf8(buf, pos + 2, n, end)


def r_cstr(buf, pos, end):
    n, pos = r_uvarint(buf, pos, end)
    if n == 0:
        raise DecodeError("null string in a non-nullable field")
    return _utf8(buf, pos, n - 1, end)


def r_ncstr(buf, pos, end):
    n, pos = r_uvarint(buf, pos, end)
    if n == 0:
        return None, pos
    return _utf8(buf, pos, n - 1, end)


def _encode_str(s):
    if s is None:
        raise EncodeError("null string in a non-nullable field")
    return s.encode("utf-8")


def w_str(out, s):
    b = _encode_str(s)
    if len(b) > 0x7FFF:
        raise EncodeError("string longer than 32767 bytes")
    out += _h_pack(len(b))
    out += b


def w_nstr(out, s):
    if s is None:
        out += b"\xff\xff"
    else:
        w_str(out, s)


def w_cstr(out, s):
    b = _encode_str(s)
    w_uvarint(out, len(b) + 1)
    out += b


def w_ncstr(out, s):
    if s is None:
        out.append(0)
    else:
        w_cstr(out, s)


# --- bytes and records ------------------------------------------------------------------------

def r_bytes(buf, pos, end):
    v, pos = r_nbytes(buf, pos, end)
    if v is None:
        raise DecodeError("null bytes in a non-nullable field")
    return v, pos


def r_nbytes(buf, pos, end):
    if pos + 4 > end:
        raise _truncated("bytes length")
    n = _i_unpack(buf, pos)[0]
    pos += 4
    if n < 0:
        if n != -1:
            raise DecodeError(f"invalid bytes length {n}")
        return None, pos
    stop = pos + n
    if stop > end:
        raise _truncated("bytes")
    return bytes(buf[pos:stop]), stop


def r_cbytes(buf, pos, end):
    v, pos = r_ncbytes(buf, pos, end)
    if v is None:
        raise DecodeError("null bytes in a non-nullable field")
    return v, pos


def r_ncbytes(buf, pos, end):
    n, pos = r_uvarint(buf, pos, end)
    if n == 0:
        return None, pos
    stop = pos + n - 1
    if stop > end:
        raise _truncated("bytes")
    return bytes(buf[pos:stop]), stop


def r_records(buf, pos, end):
    """Records stay a zero-copy memoryview slice of the frame."""
    if pos + 4 > end:
        raise _truncated("records length")
    n = _i_unpack(buf, pos)[0]
    pos += 4
    if n < 0:
        if n != -1:
            raise DecodeError(f"invalid records length {n}")
        return None, pos
    stop = pos + n
    if stop > end:
        raise _truncated("records")
    return buf[pos:stop], stop


def r_crecords(buf, pos, end):
    n, pos = r_uvarint(buf, pos, end)
    if n == 0:
        return None, pos
    stop = pos + n - 1
    if stop > end:
        raise _truncated("records")
    return buf[pos:stop], stop


def _to_bytes(v):
    if v is None:
        raise EncodeError("null bytes in a non-nullable field")
    return v


def w_bytes(out, v):
    v = _to_bytes(v)
    out += _i_pack(len(v))
    out += v


def w_nbytes(out, v):
    if v is None:
        out += b"\xff\xff\xff\xff"
    else:
        out += _i_pack(len(v))
        out += v


def w_cbytes(out, v):
    v = _to_bytes(v)
    w_uvarint(out, len(v) + 1)
    out += v


def w_ncbytes(out, v):
    if v is None:
        out.append(0)
    else:
        w_uvarint(out, len(v) + 1)
        out += v


def _region_len(v):
    # A file region (an object with ``length`` and ``read()``, such as storage's FileRegion) is
    # written by reference: the connection sends it after the bytes before it.
    return v.length


def w_records(out, v, regions):
    if v is None:
        out += b"\xff\xff\xff\xff"
    elif isinstance(v, (bytes, bytearray, memoryview)):
        out += _i_pack(len(v))
        out += v
    else:
        out += _i_pack(_region_len(v))
        _add_region(out, v, regions)


_BUFFERS = frozenset((bytes, bytearray, memoryview))


def w_crecords(out, v, regions):
    # The Fetch response path: one call per partition, so the common cases are spelled out.
    if v is None:
        out.append(0)
        return
    if v.__class__ not in _BUFFERS:
        try:
            n = v.length + 1
        except AttributeError:      # a subclass of a buffer type
            n = None
    else:
        n = None
    if n is None:
        w_uvarint(out, len(v) + 1)
        out += v
    else:
        if 0x80 <= n < 0x4000:
            out.append((n & 0x7F) | 0x80)
            out.append(n >> 7)
        else:
            w_uvarint(out, n)
        if regions is None:
            out += v.read()
        else:
            regions.append((len(out), v))


def _add_region(out, v, regions):
    if regions is None:
        # No caller to send the region: materialise it.
        out += v.read()
    else:
        regions.append((len(out), v))


# --- uuid, arrays, tags -----------------------------------------------------------------------

def r_uuid(buf, pos, end):
    stop = pos + 16
    if stop > end:
        raise _truncated("uuid")
    return _uuid.UUID(bytes=bytes(buf[pos:stop])), stop


def w_uuid(out, u):
    if u is None:
        raise EncodeError("null uuid")
    out += u.bytes


def r_count(buf, pos, end):
    """int32 array count; -1 -> None.  A count above the bytes left is refused up front."""
    if pos + 4 > end:
        raise _truncated("array length")
    n = _i_unpack(buf, pos)[0]
    pos += 4
    if n < 0:
        if n != -1:
            raise DecodeError(f"invalid array length {n}")
        return None, pos
    if n > end - pos:
        raise DecodeError(f"array length {n} exceeds the {end - pos} bytes left")
    return n, pos


def r_ccount(buf, pos, end):
    n, pos = r_uvarint(buf, pos, end)
    if n == 0:
        return None, pos
    n -= 1
    if n > end - pos:
        raise DecodeError(f"array length {n} exceeds the {end - pos} bytes left")
    return n, pos


_fixed_cache: dict = {}


def r_fixed_array(buf, pos, end, n, code, size):
    stop = pos + n * size
    if stop > end:
        raise _truncated("array")
    s = _fixed_cache.get((code, n))
    if s is None:
        s = _fixed_cache[(code, n)] = struct.Struct(f">{n}{code}")
    return list(s.unpack_from(buf, pos)), stop


def w_fixed_array(out, values, code):
    n = len(values)
    s = _fixed_cache.get((code, n))
    if s is None:
        s = _fixed_cache[(code, n)] = struct.Struct(f">{n}{code}")
    out += s.pack(*values)


def r_tag_header(buf, pos, end, last):
    tag, pos = r_uvarint(buf, pos, end)
    if tag <= last:
        raise DecodeError(f"tagged field {tag} is out of order or repeated")
    size, pos = r_uvarint(buf, pos, end)
    if pos + size > end:
        raise _truncated("tagged field")
    return tag, size, pos


def w_unknown_tags(out, tags):
    w_uvarint(out, len(tags))
    for tag, data in tags:
        w_uvarint(out, tag)
        w_uvarint(out, len(data))
        out += data

"""The ``consumer`` embedded protocol that classic members carry in JoinGroup and SyncGroup:
ConsumerProtocolSubscription and ConsumerProtocolAssignment (Kafka's layouts, not flexible).

The coordinator reads them only when a group changes protocol online (``migration.py``): the
subscription a classic member joins with becomes its consumer-protocol subscription, and the
assignment a consumer group computes for a classic member goes back to it in SyncGroup.

Subscription, by version:

* v0: version int16, topics [string], user data bytes (nullable)
* v1: + owned partitions [topic string, partitions [int32]]
* v2: + generation id int32
* v3: + rack id string (nullable)

Assignment (v0 to v3 share one layout): version int16, assigned partitions [topic string,
partitions [int32]], user data bytes (nullable).  A reader accepts a shorter buffer that ends
after a complete older version's fields (some clients write their own version number with
fewer fields), as Kafka's readers do.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from broker.group.records import RecordFormatError, _Reader as _RecordReader

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class EmbeddedProtocolError(RecordFormatError):
    """The bytes are not a consumer-protocol subscription or assignment."""


@dataclass
class Subscription:
    version: int
    topics: list[str]
    user_data: bytes | None = None
    owned: dict[str, list[int]] = field(default_factory=dict)
    generation: int = -1
    rack_id: str | None = None


class _Reader(_RecordReader):
    """The records' non-flexible reader with this module's error and the embedded protocol's
    nullable bytes."""
    __slots__ = ()

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else bytes(self._take(n))

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > len(self.buf):
            raise EmbeddedProtocolError("embedded consumer protocol: bad array length")
        return n

    def topic_partitions(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for _ in range(self.count()):
            topic = self.string()
            out.setdefault(topic, []).extend(self.i32() for _ in range(self.count()))
        return out


def version_of(data) -> int:
    """The version a subscription (or assignment) was written with."""
    if not data or len(data) < 2:
        raise EmbeddedProtocolError("embedded consumer protocol: no version")
    v = _I16.unpack_from(bytes(data[:2]))[0]
    if v < 0:
        raise EmbeddedProtocolError(f"embedded consumer protocol: version {v}")
    return v


def _decoding(fn):
    def wrapper(data):
        try:
            return fn(data)
        except EmbeddedProtocolError:
            raise
        except RecordFormatError as e:
            raise EmbeddedProtocolError(f"embedded consumer protocol: {e}") from None
    wrapper.__doc__ = fn.__doc__
    return wrapper


@_decoding
def decode_subscription(data) -> Subscription:
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise EmbeddedProtocolError(f"embedded consumer protocol: version {version}")
    sub = Subscription(version, [r.string() for _ in range(r.count())], r.nullable_bytes())
    if version >= 1 and not r.at_end():
        sub.owned = r.topic_partitions()
        if version >= 2 and not r.at_end():
            sub.generation = r.i32()
            if version >= 3 and not r.at_end():
                sub.rack_id = r.string(nullable=True)
    return sub


@_decoding
def decode_assignment(data) -> dict[str, list[int]]:
    """The partitions of an assignment; empty bytes (a member never assigned) are none."""
    if not data:
        return {}
    r = _Reader(data)
    if r.i16() < 0:
        raise EmbeddedProtocolError("embedded consumer protocol: negative version")
    return r.topic_partitions()


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    """An assignment at ``version`` (capped at 3, the highest Kafka defines), no user data."""
    out = bytearray(_I16.pack(min(max(version, 0), 3)))
    items = [(t, sorted(ps)) for t, ps in sorted(partitions.items()) if ps]
    out += _I32.pack(len(items))
    for topic, ps in items:
        b = topic.encode()
        out += _I16.pack(len(b)) + b + _I32.pack(len(ps))
        for p in ps:
            out += _I32.pack(p)
    out += _I32.pack(-1)
    return bytes(out)


__all__ = ["EmbeddedProtocolError", "Subscription", "decode_assignment", "decode_subscription",
           "encode_assignment", "version_of"]

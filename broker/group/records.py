"""Record formats of ``__consumer_offsets`` (Kafka's byte layouts, our own encoder).

Every record is keyed.  Key and value each start with an int16 *version*; the rest is the struct
of that version, big-endian, non-flexible (int16-length strings, int32-length bytes, int32 array
counts) up to version 3 and flexible (compact strings/bytes/arrays, tagged-field sections) in
version 4 of the values.

Keys
  * version 0 or 1 -> OffsetCommitKey: group (string), topic (string), partition (int32)
  * version 2      -> GroupMetadataKey: group (string)

Values (a null value is a tombstone: the offset or the group was deleted)
  * OffsetCommitValue v0..v4: offset int64, leader_epoch int32 (v3+), metadata string,
    commit_timestamp int64, expire_timestamp int64 (v1 only)
  * GroupMetadataValue v0..v4: protocol_type string, generation int32, protocol string?,
    leader string?, current_state_timestamp int64 (v2+), members[]: member_id, group_instance_id?
    (v3+), client_id, client_host, rebalance_timeout int32 (v1+), session_timeout int32,
    subscription bytes, assignment bytes

Written versions follow Kafka 3.x: offset keys v1, offset values v3 (v1 when an explicit expire
timestamp is present, i.e. OffsetCommit v2-v4 with a retention time), group keys v2, group values
v3.  All versions are readable.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value in ``__consumer_offsets`` that cannot be parsed."""


# --------------------------------------------------------------------------- data classes
@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass
class OffsetValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1          # -1: none
    expire_timestamp: int = -1      # -1: none (only version 1 stores one)


@dataclass
class MemberValue:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


@dataclass
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


# --------------------------------------------------------------------------- writer
class _Writer:
    __slots__ = ("out", "flexible")

    def __init__(self, version: int, flexible: bool = False):
        self.out = bytearray(_I16.pack(version))
        self.flexible = flexible

    def i32(self, v: int):
        self.out += _I32.pack(v)

    def i64(self, v: int):
        self.out += _I64.pack(v)

    def uvarint(self, n: int):
        while n >= 0x80:
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7
        self.out.append(n)

    def string(self, s: str | None):
        if s is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.out += _I16.pack(-1)
            return
        b = s.encode()
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.out += _I16.pack(len(b))
        self.out += b

    def bytes_(self, b: bytes | None):
        if b is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.out += _I32.pack(-1)
            return
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.out += _I32.pack(len(b))
        self.out += b

    def array_len(self, n: int):
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.out += _I32.pack(n)

    def tags(self):
        if self.flexible:
            self.uvarint(0)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    w = _Writer(1)
    w.string(group)
    w.string(topic)
    w.i32(partition)
    return bytes(w.out)


def group_key(group: str) -> bytes:
    w = _Writer(2)
    w.string(group)
    return bytes(w.out)


def offset_value(v: OffsetValue, version: int | None = None) -> bytes:
    """Encode an offset commit; the version defaults to Kafka 3.x's choice (1 or 3)."""
    if version is None:
        version = 1 if v.expire_timestamp != -1 else 3
    if not 0 <= version <= 4:
        raise ValueError(f"OffsetCommitValue has no version {version}")
    w = _Writer(version, flexible=version >= 4)
    w.i64(v.offset)
    if version >= 3:
        w.i32(v.leader_epoch)
    w.string(v.metadata if v.metadata is not None else "")
    w.i64(v.commit_timestamp)
    if version == 1:
        w.i64(v.expire_timestamp)
    w.tags()
    return bytes(w.out)


def group_value(v: GroupValue, version: int = 3) -> bytes:
    """Encode group metadata (version 3 by default, as Kafka 3.x writes)."""
    if not 0 <= version <= 4:
        raise ValueError(f"GroupMetadataValue has no version {version}")
    w = _Writer(version, flexible=version >= 4)
    w.string(v.protocol_type)
    w.i32(v.generation)
    w.string(v.protocol)
    w.string(v.leader)
    if version >= 2:
        w.i64(v.current_state_timestamp)
    w.array_len(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return bytes(w.out)


# --------------------------------------------------------------------------- reader
class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf, flexible: bool = False, pos: int = 0):
        self.buf = memoryview(buf)
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise RecordFormatError("record too short")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            b = self._take(1)[0]
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            if shift > 63:
                raise RecordFormatError("varint too long")

    def string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            if nullable:
                return None
            raise RecordFormatError("null string in a non-nullable field")
        try:
            return bytes(self._take(n)).decode()
        except UnicodeDecodeError as e:
            raise RecordFormatError(str(e)) from None

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return b""
        return bytes(self._take(n))

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise RecordFormatError("null array")
        return n

    def skip_tags(self):
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())


def parse_key(key) -> OffsetKey | GroupKey | None:
    """Parse a record key; ``None`` for a key version this coordinator does not know."""
    r = _Reader(key)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(r.string())
    return None


def parse_offset_value(value) -> OffsetValue:
    r = _Reader(value)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.skip_tags()
    return OffsetValue(offset, metadata, commit_ts, epoch, expire_ts)


def parse_group_value(value) -> GroupValue:
    r = _Reader(value)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string()
        instance = r.string(nullable=True) if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tags()
        if rebalance_timeout < 0:      # version 0 had none: Kafka uses the session timeout
            rebalance_timeout = session_timeout
        members.append(MemberValue(member_id, client_id, client_host, session_timeout,
                                   subscription, assignment, rebalance_timeout, instance))
    r.skip_tags()
    return GroupValue(protocol_type, generation, protocol, leader, ts, members)


# --------------------------------------------------------------------------- consumer protocol
def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a ``consumer`` protocol subscription, read with the version-0 layout that every
    later version starts with (int16 version, then an int32-counted array of int16 strings).
    ``None`` when the bytes do not parse."""
    try:
        r = _Reader(subscription)
        r.i16()
        n = r.array_len()
        if n > len(subscription):
            return None
        return {r.string() for _ in range(n)}
    except (RecordFormatError, struct.error):
        return None

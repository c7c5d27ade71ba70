"""Records of consumer-protocol (KIP-848) groups in ``__consumer_offsets``: Kafka's byte layouts,
our own encoder and decoder (the same ``_Writer``/``_Reader`` as ``records.py``).

Keys are non-flexible, an int16 version then the fields; values are version 0, flexible
(compact strings and arrays, uuids, an empty tagged-field section after every struct).

==== ====================================== ================== ==========================================
key  record                                 key fields         value fields
==== ====================================== ================== ==========================================
3    ConsumerGroupMetadata                  group              epoch int32
4    ConsumerGroupPartitionMetadata         group              topics[]: id uuid, name, partitions int32,
                                                               partition metadata[] (partition, racks[])
5    ConsumerGroupMemberMetadata            group, member      instance?, rack?, client id, client host,
                                                               subscribed names[], regex?, rebalance
                                                               timeout int32, server assignor?; tag 0:
                                                               classic member metadata (session timeout
                                                               int32, protocols[]: name, metadata bytes)
6    ConsumerGroupTargetAssignmentMetadata  group              assignment epoch int32
7    ConsumerGroupTargetAssignmentMember    group, member      topic partitions[]: id uuid, partitions[]
8    ConsumerGroupCurrentMemberAssignment   group, member      epoch, previous epoch int32, state int8
                                                               (0 stable, 1 unrevoked, 2 unreleased,
                                                               127 unknown), assigned[], pending revocation[]
==== ====================================== ================== ==========================================

A null value is a tombstone.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from broker.group.records import RecordFormatError, _Reader, _Writer

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
KINDS = (GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
_WITH_MEMBER = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)

STATE_CODES = {"stable": 0, "unrevoked_partitions": 1, "unreleased_partitions": 2}
STATE_NAMES = {v: k for k, v in STATE_CODES.items()}


@dataclass(frozen=True)
class ModernKey:
    kind: int                 # the key version, 3..8
    group: str
    member: str | None = None


@dataclass
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed: tuple
    regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # a member that joined with JoinGroup (online migration): (session timeout ms,
    # ((protocol name, metadata bytes), ...)); None for a consumer-protocol member
    classic: tuple | None = None


@dataclass
class CurrentAssignment:
    epoch: int
    previous_epoch: int
    state: str                 # stable / unrevoked_partitions / unreleased_partitions / unknown
    assigned: dict
    revoking: dict


def key(kind: int, group: str, member: str | None = None, with_member=_WITH_MEMBER) -> bytes:
    """The key of record type ``kind``: the group, and the member for the types ``with_member``."""
    w = _Writer(kind)
    w.string(group)
    if kind in with_member:
        w.string(member)
    return bytes(w.out)


def parse_key(data, kinds=KINDS, with_member=_WITH_MEMBER, cls=ModernKey):
    """A consumer-protocol group key (or, with other ``kinds``, ``with_member`` and ``cls``, a
    share group key), or None for any other key version."""
    r = _Reader(data)
    kind = r.i16()
    if kind not in kinds:
        return None
    group = r.string()
    return cls(kind, group, r.string() if kind in with_member else None)


# --------------------------------------------------------------------------- values
def _w() -> _Writer:
    return _Writer(0, flexible=True)


def _uuid(w: _Writer, u: uuid.UUID) -> None:
    w.out += u.bytes


def _partitions(w: _Writer, parts: dict) -> None:
    items = [(t, sorted(ps)) for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0])) if ps]
    w.array_len(len(items))
    for tid, ps in items:
        _uuid(w, tid)
        w.array_len(len(ps))
        for p in ps:
            w.i32(p)
        w.tags()


def epoch_value(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue and ConsumerGroupTargetAssignmentMetadataValue."""
    w = _w()
    w.i32(epoch)
    w.tags()
    return bytes(w.out)


def partition_metadata_value(topics: dict) -> bytes:
    """``topics``: {name: (topic id, partitions, racks)}, ``racks`` ((partition, (rack, ...)), ...)
    for the partitions whose replicas have racks (Kafka 3.9 writes them; its assignors do not
    read them yet); a 2-tuple (no racks) is accepted too."""
    w = _w()
    w.array_len(len(topics))
    for name, meta in sorted(topics.items()):
        tid, n = meta[0], meta[1]
        racks = meta[2] if len(meta) > 2 else ()
        _uuid(w, tid)
        w.string(name)
        w.i32(n)
        w.array_len(len(racks))
        for partition, names in racks:
            w.i32(partition)
            w.array_len(len(names))
            for rack in names:
                w.string(rack)
            w.tags()
        w.tags()
    w.tags()
    return bytes(w.out)


def member_metadata_value(m: MemberMetadata) -> bytes:
    w = _w()
    w.string(m.instance_id)
    w.string(m.rack_id)
    w.string(m.client_id)
    w.string(m.client_host)
    w.array_len(len(m.subscribed))
    for t in m.subscribed:
        w.string(t)
    w.string(m.regex)
    w.i32(m.rebalance_timeout_ms)
    w.string(m.server_assignor)
    if m.classic is None:
        w.tags()
    else:                               # tagged field 0, ClassicMemberMetadata
        inner = _w()
        del inner.out[:2]               # a struct: no version prefix
        session, protocols = m.classic
        inner.i32(session)
        inner.array_len(len(protocols))
        for name, meta in protocols:
            inner.string(name)
            inner.bytes_(bytes(meta))
            inner.tags()
        inner.tags()
        w.uvarint(1)
        w.uvarint(0)
        w.uvarint(len(inner.out))
        w.out += inner.out
    return bytes(w.out)


def target_member_value(parts: dict) -> bytes:
    w = _w()
    _partitions(w, parts)
    w.tags()
    return bytes(w.out)


def current_assignment_value(c: CurrentAssignment) -> bytes:
    w = _w()
    w.i32(c.epoch)
    w.i32(c.previous_epoch)
    w.out.append(STATE_CODES.get(c.state, 127) & 0xFF)
    _partitions(w, c.assigned)
    _partitions(w, c.revoking)
    w.tags()
    return bytes(w.out)


def _reader(data) -> _Reader:
    r = _Reader(data, flexible=True)
    version = r.i16()
    if version != 0:
        raise RecordFormatError(f"unknown consumer group record value version {version}")
    return r


def _read_uuid(r: _Reader) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(r._take(16)))


def _read_partitions(r: _Reader) -> dict:
    out = {}
    for _ in range(r.array_len()):
        tid = _read_uuid(r)
        out[tid] = {r.i32() for _ in range(r.array_len())}
        r.skip_tags()
    return out


def parse_epoch_value(data) -> int:
    r = _reader(data)
    epoch = r.i32()
    r.skip_tags()
    return epoch


def parse_partition_metadata_value(data) -> dict:
    r = _reader(data)
    out = {}
    for _ in range(r.array_len()):
        tid = _read_uuid(r)
        name = r.string()
        n = r.i32()
        racks = []
        for _ in range(r.array_len()):
            partition = r.i32()
            racks.append((partition, tuple(r.string() for _ in range(r.array_len()))))
            r.skip_tags()
        r.skip_tags()
        out[name] = (tid, n, tuple(racks))
    r.skip_tags()
    return out


def parse_member_metadata_value(data) -> MemberMetadata:
    r = _reader(data)
    instance = r.string(nullable=True)
    rack = r.string(nullable=True)
    client_id = r.string()
    client_host = r.string()
    subscribed = tuple(r.string() for _ in range(r.array_len()))
    regex = r.string(nullable=True)
    rebalance = r.i32()
    assignor = r.string(nullable=True)
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == 0:
            session = r.i32()
            protocols = []
            for _ in range(r.array_len()):
                name = r.string()
                protocols.append((name, r.bytes_()))
                r.skip_tags()
            r.skip_tags()
            classic = (session, tuple(protocols))
        if r.pos > end:
            raise RecordFormatError("ClassicMemberMetadata longer than its tag")
        r.pos = end
        r._take(0)
    return MemberMetadata(instance, rack, client_id, client_host, subscribed, regex, rebalance, assignor, classic)


def parse_target_member_value(data) -> dict:
    r = _reader(data)
    parts = _read_partitions(r)
    r.skip_tags()
    return parts


def parse_current_assignment_value(data) -> CurrentAssignment:
    r = _reader(data)
    epoch = r.i32()
    previous = r.i32()
    code = r._take(1)[0]
    state = STATE_NAMES.get(code if code < 128 else code - 256, "unknown")
    assigned = _read_partitions(r)
    revoking = _read_partitions(r)
    r.skip_tags()
    return CurrentAssignment(epoch, previous, state, assigned, revoking)


PARSERS = {
    GROUP_METADATA: parse_epoch_value,
    PARTITION_METADATA: parse_partition_metadata_value,
    MEMBER_METADATA: parse_member_metadata_value,
    TARGET_METADATA: parse_epoch_value,
    TARGET_MEMBER: parse_target_member_value,
    CURRENT_ASSIGNMENT: parse_current_assignment_value,
}

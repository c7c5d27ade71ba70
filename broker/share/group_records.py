"""Records of share groups (KIP-932) in ``__consumer_offsets``: Kafka 4.2's byte layouts, written
and read with the helpers of ``broker/group/modern_records.py``.

Keys are non-flexible, an int16 version (the record type) then the fields; values are version 0,
flexible.  A null value is a tombstone.

==== ===================================== ============= =============================================
key  record                                key fields    value fields
==== ===================================== ============= =============================================
10   ShareGroupMemberMetadata              group, member rack?, client id, client host, subscribed
                                                         topic names[]
11   ShareGroupMetadata                    group         epoch int32, metadata hash int64
12   ShareGroupTargetAssignmentMetadata    group         assignment epoch int32
13   ShareGroupTargetAssignmentMember      group, member topic partitions[]: id uuid, partitions[]
14   ShareGroupCurrentMemberAssignment     group, member epoch, previous epoch int32, state int8 (0
                                                         stable), assigned[]
==== ===================================== ============= =============================================

15   ShareGroupStatePartitionMetadata      group         initializing topics[]: id uuid, name,
                                                         partitions[]; initialized topics[] (the
                                                         same); deleting topics[]: id uuid, name

Kafka writes record 15 in two steps, the topics "initializing" and then, once the share
coordinator has them, "initialized".  Odradek's share coordinator is the same broker and writes
``__share_group_state`` before the group's records, so it writes the second step only: the
topics whose share partitions are initialized (``manager.py``).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from broker.group.modern_records import (_partitions, _read_partitions, _read_uuid, _reader, _w, key as _key,
                                         parse_epoch_value, parse_key as _parse_key, parse_target_member_value)

MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 10, 11, 12, 13, 14
STATE_PARTITION_METADATA = 15
KINDS = (MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT,
         STATE_PARTITION_METADATA)
_WITH_MEMBER = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
MEMBER_KINDS = (CURRENT_ASSIGNMENT, TARGET_MEMBER, MEMBER_METADATA)     # tombstones in this order
STABLE = 0


@dataclass(frozen=True)
class ShareKey:
    kind: int
    group: str
    member: str | None = None


@dataclass(frozen=True)
class MemberMetadata:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed: tuple


@dataclass(frozen=True)
class CurrentAssignment:
    epoch: int
    previous_epoch: int
    assigned: dict              # topic id -> partitions


def key(kind: int, group: str, member: str | None = None) -> bytes:
    return _key(kind, group, member, _WITH_MEMBER)


def parse_key(data) -> ShareKey | None:
    """A share group key, or None for any other key version."""
    return _parse_key(data, KINDS, _WITH_MEMBER, ShareKey)


def topics_hash(topics: dict) -> int:
    """A signed 64-bit digest of {topic name: (topic id, partition count)}: the group epoch moves
    on when it changes.  (Kafka hashes its own view of the topics; the value is only ever
    compared with what the same broker computes.)"""
    h = hashlib.blake2b(digest_size=8)
    for name, (tid, n) in sorted(topics.items()):
        h.update(f"{name}\0{tid}\0{n}\n".encode())
    return int.from_bytes(h.digest(), "big", signed=True)


def group_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    w = _w()
    w.i32(epoch)
    w.i64(metadata_hash)
    w.tags()
    return bytes(w.out)


def parse_group_metadata_value(data) -> tuple[int, int]:
    r = _reader(data)
    epoch = r.i32()
    metadata_hash = r.i64()
    r.skip_tags()
    return epoch, metadata_hash


def member_metadata_value(m: MemberMetadata) -> bytes:
    w = _w()
    w.string(m.rack_id)
    w.string(m.client_id)
    w.string(m.client_host)
    w.array_len(len(m.subscribed))
    for t in m.subscribed:
        w.string(t)
    w.tags()
    return bytes(w.out)


def parse_member_metadata_value(data) -> MemberMetadata:
    r = _reader(data)
    rack = r.string(nullable=True)
    client_id = r.string()
    client_host = r.string()
    subscribed = tuple(r.string() for _ in range(r.array_len()))
    r.skip_tags()
    return MemberMetadata(rack, client_id, client_host, subscribed)


def current_assignment_value(c: CurrentAssignment) -> bytes:
    w = _w()
    w.i32(c.epoch)
    w.i32(c.previous_epoch)
    w.out.append(STABLE)
    _partitions(w, c.assigned)
    w.tags()
    return bytes(w.out)


def parse_current_assignment_value(data) -> CurrentAssignment:
    r = _reader(data)
    epoch = r.i32()
    previous = r.i32()
    r._take(1)                  # the state: a share member is always stable
    assigned = _read_partitions(r)
    r.skip_tags()
    return CurrentAssignment(epoch, previous, assigned)


def state_partition_metadata_value(initialized: dict) -> bytes:
    """ShareGroupStatePartitionMetadataValue with nothing initializing or deleting and
    ``initialized`` ({topic id: (name, partitions)}) initialized, in topic id order."""
    w = _w()
    w.array_len(0)
    w.array_len(len(initialized))
    for tid, (name, parts) in sorted(initialized.items(), key=lambda kv: str(kv[0])):
        w.out += tid.bytes
        w.string(name)
        w.array_len(len(parts))
        for p in sorted(parts):
            w.i32(p)
        w.tags()
    w.array_len(0)
    w.tags()
    return bytes(w.out)


def parse_state_partition_metadata_value(data) -> dict:
    """ShareGroupStatePartitionMetadataValue: {"initializing" and "initialized": [(topic id,
    name, partitions)], "deleting": [(topic id, name)]}."""
    r = _reader(data)
    out = {}
    for name in ("initializing", "initialized"):
        topics = []
        for _ in range(r.array_len()):
            tid, topic = _read_uuid(r), r.string()
            topics.append((tid, topic, [r.i32() for _ in range(r.array_len())]))
            r.skip_tags()
        out[name] = topics
    deleting = []
    for _ in range(r.array_len()):
        deleting.append((_read_uuid(r), r.string()))
        r.skip_tags()
    out["deleting"] = deleting
    r.skip_tags()
    return out


PARSERS = {
    MEMBER_METADATA: parse_member_metadata_value,
    GROUP_METADATA: parse_group_metadata_value,
    TARGET_METADATA: parse_epoch_value,
    TARGET_MEMBER: parse_target_member_value,
    CURRENT_ASSIGNMENT: parse_current_assignment_value,
    STATE_PARTITION_METADATA: parse_state_partition_metadata_value,
}

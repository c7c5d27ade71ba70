"""Records of streams groups (KIP-1071) in ``__consumer_offsets``, in Kafka 4.2's layouts.

Keys are non-flexible: an int16 version, the group id, and the member id for the member records
(``modern_records.key``).  Values are version 0 of the value specs that ``protocol/generate.py``
carries as data messages (``protocol.messages.DATA``), behind an int16 version; a null value is a
tombstone.

==== ========================================= ================ ====================================
key  record                                    key fields       value (``DATA`` message)
==== ========================================= ================ ====================================
17   StreamsGroupMetadata                      group            epoch, metadata hash, validated
                                                                topology epoch, assignment configs
19   StreamsGroupMemberMetadata                group, member    instance?, rack?, client id/host,
                                                                rebalance timeout, topology epoch,
                                                                process id, endpoint?, client tags
20   StreamsGroupTargetAssignmentMetadata      group            assignment epoch
21   StreamsGroupTargetAssignmentMember        group, member    active, standby, warm-up tasks
22   StreamsGroupCurrentMemberAssignment       group, member    epoch, previous epoch, state, tasks
                                                                and tasks pending revocation (active
                                                                tasks with their assignment epochs)
23   StreamsGroupTopology                      group            the topology (subtopologies, topics)
==== ========================================= ================ ====================================

Key 18 (StreamsGroupPartitionMetadata, Kafka 4.0 and 4.1) is no longer written by 4.2 and is
skipped when read.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.messages import DATA

from broker.group.modern_records import key as _key, parse_key as _parse_key
from broker.group.records import RecordFormatError

GROUP_METADATA, OLD_PARTITION_METADATA, MEMBER_METADATA = 17, 18, 19
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, TOPOLOGY = 20, 21, 22, 23
KINDS = (GROUP_METADATA, OLD_PARTITION_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER,
         CURRENT_ASSIGNMENT, TOPOLOGY)
_WITH_MEMBER = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)

_VALUES = {GROUP_METADATA: DATA["StreamsGroupMetadataValue"],
           MEMBER_METADATA: DATA["StreamsGroupMemberMetadataValue"],
           TARGET_METADATA: DATA["StreamsGroupTargetAssignmentMetadataValue"],
           TARGET_MEMBER: DATA["StreamsGroupTargetAssignmentMemberValue"],
           CURRENT_ASSIGNMENT: DATA["StreamsGroupCurrentMemberAssignmentValue"],
           TOPOLOGY: DATA["StreamsGroupTopologyValue"]}
_V0 = struct.pack(">h", 0)


@dataclass(frozen=True)
class StreamsKey:
    kind: int
    group: str
    member: str | None = None


def key(kind: int, group: str, member: str | None = None) -> bytes:
    return _key(kind, group, member, with_member=_WITH_MEMBER)


def parse_key(data):
    """A streams group key, or None for any other key version."""
    return _parse_key(data, kinds=KINDS, with_member=_WITH_MEMBER, cls=StreamsKey)


def value_class(kind: int):
    return _VALUES[kind]


def encode(kind: int, message) -> bytes:
    return _V0 + bytes(message.encode(0))


def decode(kind: int, data):
    """The value message of record ``kind`` (``DATA`` class instance)."""
    view = memoryview(data)
    if len(view) < 2:
        raise RecordFormatError("streams group record value too short")
    version = struct.unpack_from(">h", view, 0)[0]
    if version != 0:
        raise RecordFormatError(f"unknown streams group record value version {version}")
    try:
        return _VALUES[kind].decode(view[2:], 0)
    except Exception as e:          # the codec's DecodeError and friends
        raise RecordFormatError(f"unreadable streams group record (key {kind}): {e}") from e


PARSERS = {k: (lambda data, k=k: decode(k, data)) for k in _VALUES}
PARSERS[OLD_PARTITION_METADATA] = lambda data: None


# ----------------------------------------------------------------------------- task sets
def task_ids(cls, tasks: dict, epochs: bool = False) -> list:
    """``tasks`` ({subtopology: {partition: epoch}} or {subtopology: set}) as ``cls`` TaskIds
    structs, sorted; with ``epochs`` the active tasks' assignment epochs go in AssignmentEpochs."""
    out = []
    for sid in sorted(tasks):
        parts = tasks[sid]
        if not parts:
            continue
        ps = sorted(parts)
        if epochs:
            out.append(cls(subtopology_id=sid, partitions=ps, assignment_epochs=[parts[p] for p in ps]))
        else:
            out.append(cls(subtopology_id=sid, partitions=ps))
    return out


def read_tasks(items, with_epochs: bool = False, default_epoch: int = 0) -> dict:
    out: dict = {}
    for t in items or ():
        if with_epochs:
            eps = t.assignment_epochs if getattr(t, "assignment_epochs", None) is not None else ()
            d = out.setdefault(t.subtopology_id, {})
            for i, p in enumerate(t.partitions):
                d[p] = eps[i] if i < len(eps) else default_epoch
        else:
            out.setdefault(t.subtopology_id, set()).update(t.partitions)
    return out


__all__ = ["key", "parse_key", "encode", "decode", "value_class", "task_ids", "read_tasks", "PARSERS", "KINDS",
           "GROUP_METADATA", "MEMBER_METADATA", "TARGET_METADATA", "TARGET_MEMBER", "CURRENT_ASSIGNMENT",
           "TOPOLOGY", "StreamsKey"]

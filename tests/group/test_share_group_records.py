"""Share group records in __consumer_offsets (broker/share/group_records.py): the bytes, built
here by hand from Kafka 4.2's record definitions (keys non-flexible, values version 0 flexible:
compact strings and arrays are length + 1 as an unsigned varint, then an empty tag section)."""
import struct
import uuid

from broker.group import records as R
from broker.group.modern_records import parse_key as modern_parse_key
from broker.share import group_records as SR

TID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def test_keys_carry_the_record_type_then_group_and_member():
    assert SR.key(SR.GROUP_METADATA, "g") == struct.pack(">h", 11) + b"\x00\x01g"
    assert SR.key(SR.MEMBER_METADATA, "g", "m1") == struct.pack(">h", 10) + b"\x00\x01g" + b"\x00\x02m1"
    assert SR.key(SR.CURRENT_ASSIGNMENT, "g", "m") == struct.pack(">h", 14) + b"\x00\x01g\x00\x01m"
    assert SR.parse_key(SR.key(SR.TARGET_MEMBER, "g", "m")) == SR.ShareKey(13, "g", "m")
    assert SR.parse_key(struct.pack(">h", 15) + b"\x00\x01g") == SR.ShareKey(15, "g")
    # the consumer group readers leave them alone, and this one theirs
    assert R.parse_key(SR.key(SR.GROUP_METADATA, "g")) is None
    assert modern_parse_key(SR.key(SR.GROUP_METADATA, "g")) is None
    assert SR.parse_key(struct.pack(">h", 3) + b"\x00\x01g") is None


def test_group_metadata_value():
    v = SR.group_metadata_value(7, -2)
    assert v == struct.pack(">hiq", 0, 7, -2) + b"\x00"
    assert SR.parse_group_metadata_value(v) == (7, -2)


def test_member_metadata_value():
    m = SR.MemberMetadata(None, "cid", "/127.0.0.1", ("a", "bc"))
    v = SR.member_metadata_value(m)
    assert v == struct.pack(">h", 0) + b"\x00" + b"\x04cid" + b"\x0b/127.0.0.1" + b"\x03\x02a\x03bc" + b"\x00"
    assert SR.parse_member_metadata_value(v) == m
    assert SR.parse_member_metadata_value(SR.member_metadata_value(m.__class__("r1", "", "h", ()))).rack_id == "r1"


def test_current_assignment_value():
    v = SR.current_assignment_value(SR.CurrentAssignment(5, 4, {TID: [2, 0]}))
    assert v == (struct.pack(">hii", 0, 5, 4) + b"\x00"                  # state 0: stable
                 + b"\x02" + TID.bytes + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"
                 + b"\x00")
    got = SR.parse_current_assignment_value(v)
    assert (got.epoch, got.previous_epoch, got.assigned) == (5, 4, {TID: {0, 2}})


def test_topics_hash_follows_the_topics():
    a = SR.topics_hash({"t": (TID, 2)})
    assert a == SR.topics_hash({"t": (TID, 2)}) and -2**63 <= a < 2**63
    assert len({a, SR.topics_hash({"t": (TID, 3)}), SR.topics_hash({"u": (TID, 2)}), SR.topics_hash({})}) == 4


def test_state_partition_metadata_value():
    """ShareGroupStatePartitionMetadataValue: initializing topics (none: Odradek writes the
    initialized step only), initialized topics (id, name, partitions), deleting topics (none)."""
    v = SR.state_partition_metadata_value({TID: ("tp", (1, 0))})
    assert v == (struct.pack(">h", 0) + b"\x01"                                  # initializing: []
                 + b"\x02" + TID.bytes + b"\x03tp" + b"\x03" + struct.pack(">ii", 0, 1) + b"\x00"
                 + b"\x01"                                                     # deleting: []
                 + b"\x00")
    assert SR.parse_state_partition_metadata_value(v) == {"initializing": [], "initialized": [(TID, "tp", [0, 1])],
                                                          "deleting": []}
    assert SR.state_partition_metadata_value({}) == struct.pack(">h", 0) + b"\x01\x01\x01\x00"

"""Group -> partition hashing and the __consumer_offsets record formats."""
import struct

import pytest
from hypothesis import given, strategies as st

from broker.group import records as R
from broker.group.hashing import java_string_hash, kafka_abs, partition_for


@pytest.mark.parametrize("s,h", [
    ("", 0), ("a", 97), ("hello", 99162322), ("Aa", 2112), ("BB", 2112),
    ("hello world", 1794106052),
    ("polygenelubricants", -2147483648),      # Integer.MIN_VALUE
    ("\U0001F600", 1772899),                   # surrogate pair D83D DE00: 0xD83D*31 + 0xDE00
    ("\u00e9", 233),                           # one UTF-16 unit, not two UTF-8 bytes
])
def test_java_string_hash_known_values(s, h):
    assert java_string_hash(s) == h


def test_abs_of_min_value_is_zero_as_in_kafka_utils_abs():
    assert kafka_abs(-2147483648) == 0
    assert kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("polygenelubricants", 7) == 0      # abs() would give 2147483648 % 7 == 2


def test_partition_for_negative_hash():
    s = "console-consumer-12345"
    h = java_string_hash(s)
    assert partition_for(s, 50) == abs(h) % 50


@given(st.text(max_size=40))
def test_hash_is_int32_and_partition_in_range(s):
    h = java_string_hash(s)
    assert -2**31 <= h < 2**31
    assert 0 <= partition_for(s, 50) < 50


# ------------------------------------------------------------------ record formats
def test_offset_key_layout_v1():
    k = R.offset_key("g", "t", 3)
    assert k == struct.pack(">h", 1) + b"\x00\x01g" + b"\x00\x01t" + struct.pack(">i", 3)
    assert R.parse_key(k) == R.OffsetKey("g", "t", 3)
    # version 0 keys have the same layout
    assert R.parse_key(struct.pack(">h", 0) + k[2:]) == R.OffsetKey("g", "t", 3)


def test_group_key_layout_v2():
    k = R.group_key("grp")
    assert k == b"\x00\x02\x00\x03grp"
    assert R.parse_key(k) == R.GroupKey("grp")
    assert R.parse_key(b"\x00\x07\x00\x00") is None


def test_offset_value_v3_layout():
    v = R.offset_value(R.OffsetValue(42, "meta", 1000, 5))
    assert v == struct.pack(">hqi", 3, 42, 5) + b"\x00\x04meta" + struct.pack(">q", 1000)
    assert R.parse_offset_value(v) == R.OffsetValue(42, "meta", 1000, 5, -1)


def test_offset_value_v1_when_expire_timestamp():
    v = R.offset_value(R.OffsetValue(42, "", 1000, 5, expire_timestamp=2000))
    assert v[:2] == b"\x00\x01"
    assert v == struct.pack(">hq", 1, 42) + b"\x00\x00" + struct.pack(">qq", 1000, 2000)
    got = R.parse_offset_value(v)
    assert (got.offset, got.leader_epoch, got.commit_timestamp, got.expire_timestamp) == (42, -1, 1000, 2000)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_value_all_versions_round_trip(version):
    ov = R.OffsetValue(7, "m\u00e9ta", 123, 9 if version >= 3 else -1, 456 if version == 1 else -1)
    assert R.parse_offset_value(R.offset_value(ov, version)) == ov


def test_offset_value_v4_skips_tagged_fields():
    body = bytearray(R.offset_value(R.OffsetValue(7, "x", 123, 2), 4))
    assert body[-1] == 0             # empty tagged-field section
    body[-1:] = bytes([1, 5, 2, 0xAB, 0xCD])   # one unknown tag (5) with 2 bytes
    assert R.parse_offset_value(bytes(body)) == R.OffsetValue(7, "x", 123, 2)


def _group(version):
    members = [R.MemberValue("m1", "c1", "/h1", 10000, b"sub1", b"asg1",
                             30000 if version >= 1 else 10000, "i1" if version >= 3 else None),
               R.MemberValue("m2", "c2", "/h2", 20000, b"", b"",
                             40000 if version >= 1 else 20000, None)]
    return R.GroupValue("consumer", 5, "range", "m1", 99 if version >= 2 else -1, members)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_value_all_versions_round_trip(version):
    gv = _group(version)
    assert R.parse_group_value(R.group_value(gv, version)) == gv


def test_group_value_v3_layout_head_and_empty_group():
    v = R.group_value(R.GroupValue("consumer", 2, None, None, 77, []))
    assert v == (struct.pack(">h", 3) + b"\x00\x08consumer" + struct.pack(">i", 2) + b"\xff\xff\xff\xff"
                 + struct.pack(">q", 77) + struct.pack(">i", 0))
    assert R.parse_group_value(v) == R.GroupValue("consumer", 2, None, None, 77, [])


def test_truncated_values_raise_format_error():
    v = R.group_value(_group(3))
    with pytest.raises(R.RecordFormatError):
        R.parse_group_value(v[:-3])


def test_subscribed_topics_from_consumer_protocol():
    from tests.group.support import subscription
    assert R.subscribed_topics(subscription("a", "b")) == {"a", "b"}
    assert R.subscribed_topics(subscription("a", version=3, user_data=b"x")) == {"a"}
    assert R.subscribed_topics(b"\x00") is None

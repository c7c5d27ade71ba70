"""Which ``__consumer_offsets`` partition coordinates a group.

Kafka computes ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`` where ``hashCode``
is Java's ``String.hashCode`` (``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, in int32
arithmetic) and ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 (plain ``Math.abs`` would leave it
negative).

>>> java_string_hash("hello")
99162322
>>> java_string_hash("polygenelubricants")   # hashes to Integer.MIN_VALUE
-2147483648
>>> partition_for("polygenelubricants", 50)
0
"""
from __future__ import annotations

_INT_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` of ``s`` (a signed 32-bit int)."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Integer.MIN_VALUE`` becomes 0, everything else ``abs``."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(key: str, num_partitions: int) -> int:
    """The coordinator partition of a group id (or transactional id) among ``num_partitions``."""
    return kafka_abs(java_string_hash(key)) % num_partitions

"""Server-side partition assignors of the consumer group protocol (KIP-848): ``uniform`` and ``range``.

An assignor sees the members' subscriptions (topic ids), the partition counts of the subscribed
topics and the current target assignment, and returns the new target assignment.  Both are
deterministic (same input, same output), so every coordinator that recomputes a group's target
from the same state agrees.

* ``uniform`` (the default, Kafka's ``UniformAssignor``): every partition a member subscribes to
  is assigned to exactly one subscribed member; the counts of any two members that could swap a
  partition differ by at most one; partitions stay where the current target put them unless a move
  is needed for that balance (sticky).
* ``range`` (Kafka's ``RangeAssignor``): per topic, the subscribed members in member-id order get
  contiguous ranges, the first ``partitions % members`` of them one partition more -- so members
  subscribed to co-partitioned topics get the same partition numbers of each.

Shapes: ``subscriptions`` {member_id: set(topic_id)}, ``topics`` {topic_id: partition count},
``current`` {member_id: {topic_id: set(partition)}}; the result has the shape of ``current`` with
an entry (possibly empty) for every member.
"""
from __future__ import annotations

from typing import Callable

Assignment = dict  # {member_id: {topic_id: set[int]}}


def uniform(subscriptions: dict, topics: dict, current: dict) -> Assignment:
    members = sorted(subscriptions)
    out: Assignment = {m: {} for m in members}
    count = {m: 0 for m in members}
    owner: dict = {}
    eligible_cache: dict = {}

    def eligible(tid):
        e = eligible_cache.get(tid)
        if e is None:
            e = eligible_cache[tid] = [m for m in members if tid in subscriptions[m]]
        return e

    def give(m, tid, p):
        out[m].setdefault(tid, set()).add(p)
        owner[(tid, p)] = m
        count[m] += 1

    def take(m, tid, p):
        s = out[m][tid]
        s.discard(p)
        if not s:
            del out[m][tid]
        count[m] -= 1

    # 1. keep what the current target gave, where still valid
    for m in members:
        for tid, parts in sorted((current.get(m) or {}).items()):
            n = topics.get(tid)
            if n is None or tid not in subscriptions[m]:
                continue
            for p in sorted(parts):
                if p < n and (tid, p) not in owner:
                    give(m, tid, p)
    # 2. hand out the rest, each to the least loaded subscriber
    for tid in sorted(topics):
        cands = eligible(tid)
        if not cands:
            continue
        for p in range(topics[tid]):
            if (tid, p) not in owner:
                give(min(cands, key=lambda m: (count[m], m)), tid, p)
    # 3. balance: move partitions from a member to a subscriber with two or more fewer
    moved = True
    rounds = 0
    while moved and rounds < 1 + len(owner):
        moved = False
        rounds += 1
        for (tid, p), m in sorted(owner.items(), key=lambda kv: (-count[kv[1]], kv[1], kv[0])):
            if owner[(tid, p)] != m:
                continue
            target = min(eligible(tid), key=lambda c: (count[c], c))
            if count[target] + 1 < count[m]:
                take(m, tid, p)
                give(target, tid, p)
                moved = True
    return out


def range_(subscriptions: dict, topics: dict, current: dict) -> Assignment:
    members = sorted(subscriptions)
    out: Assignment = {m: {} for m in members}
    for tid in sorted(topics):
        subs = [m for m in members if tid in subscriptions[m]]
        if not subs:
            continue
        for m, r in zip(subs, contiguous_ranges(topics[tid], len(subs))):
            if r:
                out[m][tid] = set(r)
    return out


def contiguous_ranges(n: int, k: int) -> list[range]:
    """``n`` partitions in ``k`` consecutive ranges, the first ``n % k`` one longer (the range
    assignor's split, server side here and client side in ``tools/kclient.py``)."""
    per, extra = divmod(n, k)
    out, start = [], 0
    for i in range(k):
        size = per + (1 if i < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


# name -> function; the names are what clients send in ServerAssignor (group.remote.assignor)
ASSIGNORS: dict[str, Callable[[dict, dict, dict], Assignment]] = {"uniform": uniform, "range": range_}

# group.consumer.assignors takes Kafka's class names too
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
    "org.apache.kafka.coordinator.group.api.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.api.assignor.RangeAssignor": "range",
}


def assignor_name(configured: str) -> str | None:
    """The assignor a ``group.consumer.assignors`` entry names, or None."""
    name = CLASS_NAMES.get(configured.strip(), configured.strip())
    return name if name in ASSIGNORS else None


__all__ = ["ASSIGNORS", "assignor_name", "contiguous_ranges", "uniform", "range_"]

"""Share group membership (KIP-932): ShareGroupHeartbeat and the simple assignor.

A share group's members heartbeat to the group coordinator.  Each heartbeat carries the
member's epoch: 0 to join, -1 to leave, otherwise the epoch the member was last given.  The
member id is the client's own (v1).  The group epoch grows whenever membership or a
subscription changes; the coordinator then computes a new target assignment and hands each
member its partitions with the group epoch as its new member epoch.  Unlike consumer groups,
nothing is revoked first: a partition may be assigned to several members at once, and the share
partition's locks keep any record to one member at a time.

The simple assignor spreads the subscribed partitions over the members: with at least as many
partitions as members each partition goes to one member (round robin over the sorted members);
with more members than partitions every partition goes to several members, so that each member
has one.  A member whose session (``group.share.session.timeout.ms``) passes without a
heartbeat is removed.

A group's epochs, members and assignments are written to ``__consumer_offsets`` before a
heartbeat is answered (Kafka 4.2's records, ``group_records.py``) and read back when the broker
starts, so a member goes on at its epoch after a restart; the records a group consumed are kept
by the share partitions (``broker/share/manager.py``) in ``__share_group_state``.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from broker.share.group_records import topics_hash

log = logging.getLogger("odradek.share")

EMPTY, STABLE, DEAD = "Empty", "Stable", "Dead"
EMPTY_HASH = topics_hash({})


@dataclass
class ShareMember:
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed: tuple = ()
    epoch: int = 0
    previous_epoch: int = -1                           # accepted too: the answer giving ``epoch`` may be lost
    assigned: dict = field(default_factory=dict)       # topic id -> sorted partitions (the target)
    current: dict = field(default_factory=dict)        # the assignment the member was last told
    sent_epoch: int = -1                               # the epoch whose assignment it was told
    deadline_ms: int = 0


@dataclass
class ShareGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict = field(default_factory=dict)        # member id -> ShareMember
    topics_seen: dict = field(default_factory=dict)    # topic name -> (topic id, partition count)
    metadata_hash: int = EMPTY_HASH                    # topics_hash(topics_seen), written with the epoch
    initialized: dict = field(default_factory=dict)    # topic id -> (name, partitions) with share state (record 15)
    persisted: dict | None = None                      # what __consumer_offsets holds (manager._records)
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def subscribed_topics(self) -> set:
        out: set = set()
        for m in self.members.values():
            out.update(m.subscribed)
        return out


def simple_assign(members: list[str], subscriptions: dict, topics: dict, previous: dict | None = None) -> dict:
    """{member id: {topic id: [partition]}}, Kafka's simple share assignor.  ``subscriptions``:
    member id -> topic names; ``topics``: topic name -> (topic id, partition count), for the
    topics that exist; ``previous``: member id -> {topic id: [partition]}, kept where the targets
    allow.  Members with the same subscription are assigned together; otherwise each topic is
    assigned over its own subscribers."""
    previous = previous or {}
    members = sorted(members)
    out: dict = {m: {} for m in members}
    subs = {m: tuple(sorted(t for t in subscriptions.get(m, ()) if t in topics)) for m in members}
    if len(set(subs.values())) <= 1:
        groups = [(members, [t for t in (subs[members[0]] if members else ())])]
    else:
        groups = [([m for m in members if t in subs[m]], [t]) for t in sorted({t for v in subs.values() for t in v})]
    for ms, ts in groups:
        parts = [(topics[t][0], p) for t in ts for p in range(topics[t][1])]
        for m, got in _assign_group(ms, parts, previous).items():
            for tid, p in got:
                out[m].setdefault(tid, []).append(p)
    return {m: {tid: sorted(ps) for tid, ps in a.items()} for m, a in out.items()}


def _assign_group(members: list[str], parts: list, previous: dict) -> dict:
    n_members, n_parts = len(members), len(parts)
    assigned: dict = {m: [] for m in members}
    if not n_members or not n_parts:
        return assigned
    sharing = -(-n_members // n_parts)                  # members per partition
    total = sharing * n_parts

    def ceil_div(a, b):
        return -(-a // b)
    quota = {m: ceil_div(total * (i + 1), n_members) - ceil_div(total * i, n_members)
             for i, m in enumerate(members)}
    wanted = set(parts)
    holders: dict = {tp: [] for tp in parts}
    for m in members:                                   # keep what each member had, to its quota
        for tid, ps in sorted(previous.get(m, {}).items(), key=lambda kv: str(kv[0])):
            for p in ps:
                tp = (tid, p)
                if tp in wanted and len(assigned[m]) < quota[m] and len(holders[tp]) < sharing:
                    assigned[m].append(tp)
                    holders[tp].append(m)
    i = 0
    for tp in parts:                                    # fill round robin
        tries = 0
        while len(holders[tp]) < sharing and tries < n_members:
            m = members[i % n_members]
            i += 1
            tries += 1
            if len(assigned[m]) < quota[m] and m not in holders[tp]:
                assigned[m].append(tp)
                holders[tp].append(m)
                tries = 0
    return assigned

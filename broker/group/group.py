"""A classic-protocol group's state (Kafka's ``GroupMetadata``): members, generation, offsets.

How this works
--------------
States and their legal predecessors (a transition from any other state is a bug and raises):

================== ==================================================== =========================
state              reached from                                         meaning
================== ==================================================== =========================
Empty              PreparingRebalance                                   no members; offsets may
                                                                        linger until they expire
PreparingRebalance Stable, CompletingRebalance, Empty                   waiting for members to
                                                                        (re)join
CompletingRebalance PreparingRebalance                                  generation chosen; waiting
                                                                        for the leader's SyncGroup
Stable             CompletingRebalance                                  assignment distributed
Dead               any state                                            removed (deleted, expired,
                                                                        or partition unloaded)
================== ==================================================== =========================

A new group starts Empty; a loaded group starts Stable (members) or Empty (none).

This class only keeps state and answers questions about it; it never awaits, never schedules
timers and never writes records -- the coordinator does that.  It is owned by the event loop
and not safe to share across threads.
"""
from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import dataclass

from broker.group.member import Member
from broker.group.records import subscribed_topics

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)

VALID_PREVIOUS = {
    EMPTY: {PREPARING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
}

CONSUMER_PROTOCOL_TYPE = "consumer"


class IllegalStateTransition(RuntimeError):
    pass


@dataclass
class OffsetAndMetadata:
    """A committed offset as the coordinator keeps it."""
    offset: int
    leader_epoch: int = -1           # -1: none
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1       # -1: none (offsets.retention.minutes applies)


class Group:
    """One group: members, protocol, generation, pending sets and committed offsets."""

    def __init__(self, group_id: str, now_ms: int, state: str = EMPTY):
        self.group_id = group_id
        self.state = state
        self.state_timestamp: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}          # group.instance.id -> member id
        self.pending_members: set[str] = set()            # ids issued with MEMBER_ID_REQUIRED
        self.pending_sync: set[str] = set()               # members yet to send SyncGroup
        self.supported_protocols: Counter = Counter()
        self.new_member_added = False
        self.subscribed: set[str] | None = None
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.pending_offset_commits: Counter = Counter()  # (topic, partition) -> in-flight writes
        # TxnOffsetCommit (txn_offsets.py): producer id -> offsets awaiting the transaction's marker,
        # and producer id -> partitions whose transactional write is in flight
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.inflight_txn_offsets: dict[int, set] = {}
        # timers owned by the coordinator
        self.join_op = None       # the delayed join (rebalance) timer, see coordinator
        self.sync_op = None       # the pending-sync timer
        self.pending_timers: dict[str, object] = {}
        self._write_lock: asyncio.Lock | None = None
        # the consumer group protocol's state (consumer_protocol.ModernGroup) when the group uses it
        self.modern = None

    # ------------------------------------------------------------------ basics
    @property
    def write_lock(self) -> asyncio.Lock:
        """Serialises this group's appends to ``__consumer_offsets`` (log order = call order)."""
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        return self._write_lock

    def is_(self, state: str) -> bool:
        return self.state == state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> Member:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.join_waiter is not None)

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[PREPARING_REBALANCE]

    def transition_to(self, state: str, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalStateTransition(
                f"group {self.group_id} must be in {sorted(VALID_PREVIOUS[state])} to move to {state}; it is {self.state}")
        self.state = state
        self.state_timestamp = now_ms

    @staticmethod
    def generate_member_id(client_id: str, group_instance_id: str | None) -> str:
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    # ------------------------------------------------------------------ membership
    def add(self, member: Member) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise IllegalStateTransition(f"static member {member.group_instance_id} is already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names())
            if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def update_member(self, member: Member, protocols, rebalance_timeout_ms: int, session_timeout_ms: int,
                      join_waiter) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = list(protocols)
        self.supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_waiter = join_waiter

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """Give the static member ``group_instance_id`` a new member id, keeping everything else.
        The caller must fence the old id's outstanding requests (they are returned untouched)."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync:
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(new_member_id)
        return member

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did; ``False`` when there is
        no leader (empty group) or no member rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for mid, m in self.members.items():
            if m.is_awaiting_join:
                self.leader_id = mid
                return True
        return False

    # ------------------------------------------------------------------ protocols
    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, c in self.supported_protocols.items() if c == n and n > 0}

    def select_protocol(self) -> str:
        """The protocol supported by every member with the most first-preference votes (ties go to
        the protocol that reached the top count first, in member order)."""
        if not self.members:
            raise IllegalStateTransition(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        if self.state == EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        n = len(self.members)
        return (self.protocol_type == protocol_type
                and any(self.supported_protocols.get(p, 0) == n for p in protocol_names))

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                t = subscribed_topics(m.metadata(self.protocol_name))
            except KeyError:
                return None
            if t is None:
                return None
            topics |= t
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Unknown subscriptions count as subscribed (Kafka errs on the safe side)."""
        return True if self.subscribed is None else topic in self.subscribed

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed = self.compute_subscribed_topics()
            self.transition_to(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed = self.compute_subscribed_topics()
            self.transition_to(EMPTY, now_ms)
        self.pending_sync.clear()

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, group instance id, metadata of the chosen protocol) of every member."""
        return [(mid, m.group_instance_id, m.metadata(self.protocol_name)) for mid, m in self.members.items()]

    # ------------------------------------------------------------------ offsets
    @property
    def has_offsets(self) -> bool:
        return (bool(self.offsets) or any(v > 0 for v in self.pending_offset_commits.values())
                or any(self.pending_txn_offsets.values()))

    def has_pending_commit(self, tp: tuple[str, int]) -> bool:
        if self.pending_offset_commits.get(tp, 0) > 0:
            return True
        return (any(tp in p for p in self.pending_txn_offsets.values())
                or any(tp in p for p in self.inflight_txn_offsets.values()))

    def remove_offsets(self, tps) -> dict:
        removed = {}
        for tp in tps:
            o = self.offsets.pop(tp, None)
            if o is not None:
                removed[tp] = o
        return removed

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> dict:
        """Kafka's expiry rules: an Empty group's offsets expire ``retention`` after the group became
        Empty; a Stable consumer group's offsets of topics it no longer subscribes to expire
        ``retention`` after their commit; offsets of a group without a protocol type (offset
        storage only) expire ``retention`` after their commit.  An explicit expire timestamp
        (OffsetCommit v2-v4 retention) overrides all of that."""
        def expired(base, exclude=frozenset()):
            out = {}
            for tp, o in self.offsets.items():
                if tp[0] in exclude or self.has_pending_commit(tp):
                    continue
                if o.expire_timestamp != -1:
                    if now_ms >= o.expire_timestamp:
                        out[tp] = o
                elif now_ms - base(o) >= retention_ms:
                    out[tp] = o
            return out

        if self.protocol_type is not None and self.state == EMPTY:
            st = self.state_timestamp
            found = expired(lambda o: st if st is not None and st >= 0 else o.commit_timestamp)
        elif self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed is not None and self.state == STABLE:
            found = expired(lambda o: o.commit_timestamp, self.subscribed)
        elif self.protocol_type is None:
            found = expired(lambda o: o.commit_timestamp)
        else:
            found = {}
        for tp in found:
            del self.offsets[tp]
        return found

    def __repr__(self):
        return (f"Group({self.group_id!r}, {self.state}, generation={self.generation_id}, "
                f"protocol={self.protocol_type}/{self.protocol_name}, leader={self.leader_id}, "
                f"members={list(self.members)})")

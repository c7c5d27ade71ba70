"""One member of a classic-protocol group (Kafka's ``MemberMetadata``).

A member owns nothing asynchronous itself: ``join_waiter`` / ``sync_waiter`` are the
``asyncio.Future`` objects of its outstanding JoinGroup / SyncGroup request (``None`` when it has
none) and ``heartbeat_timer`` is the handle of its session-expiry timer.  The group coordinator
sets and completes them; see ``coordinator.py`` for the rules.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class JoinResult:
    """What a JoinGroup request is answered with."""
    error: int
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata) -- only the leader gets them
    members: list = field(default_factory=list)


@dataclass
class SyncResult:
    """What a SyncGroup request is answered with."""
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class Member:
    """A group member: identity, timeouts, supported protocols and the current assignment."""

    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "protocols", "assignment", "join_waiter",
                 "sync_waiter", "is_new", "heartbeat_satisfied", "heartbeat_timer")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 protocols: list[tuple[str, bytes]], assignment: bytes = b""):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = list(protocols)
        self.assignment = assignment
        self.join_waiter = None
        self.sync_waiter = None
        self.is_new = False
        self.heartbeat_satisfied = False
        self.heartbeat_timer = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def protocol_names(self) -> list[str]:
        """The names, each once, in order.  Kafka 3.9 counts every entry, so a name listed twice
        never equals the member count and its vote throws inside the coordinator (the join never
        completes); here it counts once (docs/groups.md, "Protocol")."""
        return list(dict.fromkeys(name for name, _ in self.protocols))

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, in the same order, with identical metadata."""
        if len(protocols) != len(self.protocols):
            return False
        return all(a[0] == b[0] and bytes(a[1]) == bytes(b[1]) for a, b in zip(protocols, self.protocols))

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Whether the member counts as alive when its session timer fires: a new member must have
        completed its join; a member waiting for a join or sync answer is alive; anyone else needs
        a heartbeat (or equivalent) since the timer was set."""
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def cancel_heartbeat(self):
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None

    def __repr__(self):
        return (f"Member({self.member_id!r}, instance={self.group_instance_id!r}, client={self.client_id!r}, "
                f"session={self.session_timeout_ms}, rebalance={self.rebalance_timeout_ms}, "
                f"protocols={self.protocol_names()})")

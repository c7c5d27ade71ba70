"""JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance timers (mixin of GroupCoordinator).

How a rebalance runs
--------------------
1. A join that changes membership (new member, changed metadata, leader rejoin, member removed)
   calls ``_maybe_prepare_rebalance``: an Empty group waits ``group.initial.rebalance.delay.ms``
   (extended by the same delay while new members keep arriving, up to the rebalance timeout);
   any other group waits until every member has rejoined or the rebalance timeout (the largest
   ``rebalance_timeout_ms`` of the members) passes.  This wait is ``group.join_op``.
2. ``_on_complete_join``: dynamic members that did not rejoin are removed; a new generation
   starts with the protocol chosen by vote; every waiting JoinGroup is answered (the leader gets
   all members' metadata) and the group is CompletingRebalance.  Members then have the rebalance
   timeout to send SyncGroup (``group.sync_op``); those that do not are removed and the group
   rebalances again.
3. The leader's SyncGroup carries the assignment: it is written to ``__consumer_offsets`` and,
   if the group is still in that generation, handed to every waiting member; the group is
   Stable.

Liveness: each member has one session timer (``member.heartbeat_timer``), re-armed by every
heartbeat, commit, sync and join answer.  When it fires, a member that is not waiting for a join
or sync answer (or a new member whose first join never completed) is removed.  Ids handed out
with MEMBER_ID_REQUIRED expire after the session timeout if never used.

Concurrency rule: all of this runs on the event loop, and every state change happens
synchronously between awaits -- check and change never straddle an ``await``.  Requests wait on
futures (``member.join_waiter`` / ``member.sync_waiter``) that state changes complete.  The only
awaits inside the coordinator are appends to ``__consumer_offsets``; after one, the code re-checks
the group's state and generation before acting (as Kafka's callbacks do), and appends of one
group are serialised by ``group.write_lock`` so the log order is the order of the calls.
"""
from __future__ import annotations

import asyncio
import logging

from protocol.errors import ErrorCode as E

from broker.group.group import (COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, Group)
from broker.group.member import JoinResult, Member, SyncResult

log = logging.getLogger("odradek.group")

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member's first join expires after this.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class _JoinOp:
    """The group's delayed join: ``initial`` ops never complete early."""
    __slots__ = ("handle", "initial", "configured_delay", "delay", "remaining")

    def __init__(self, initial=False, configured_delay=0, delay=0, remaining=0):
        self.handle = None
        self.initial = initial
        self.configured_delay = configured_delay
        self.delay = delay
        self.remaining = remaining


class MembershipMixin:
    # ================================================================== JoinGroup
    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None, *,
                         client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]],
                         require_known_member_id: bool = True, support_skip_assignment: bool = True,
                         reason: str | None = None) -> JoinResult:
        fut = asyncio.get_running_loop().create_future()
        self._join(fut, group_id, member_id or "", group_instance_id, client_id or "", client_host or "",
                   rebalance_timeout_ms, session_timeout_ms, protocol_type, [(n, bytes(m)) for n, m in protocols],
                   require_known_member_id, support_skip_assignment, reason or "not provided")
        return await fut

    def _join(self, fut, group_id, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
              session_timeout_ms, protocol_type, protocols, require_known, skip_ok, reason):
        def respond(result):
            if not fut.done():
                fut.set_result(result)

        err = self._validate_group_status(group_id, "join")
        if err:
            return respond(JoinResult(err, member_id))
        if self.is_share_group(group_id):
            return respond(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if not self._min_session_ms() <= session_timeout_ms <= self._max_session_ms():
            return respond(JoinResult(E.INVALID_SESSION_TIMEOUT, member_id))
        is_unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is not None and group.modern is not None:
            if group.modern.kind != "consumer" and group.modern.members:     # a live streams group
                return respond(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
            if group.modern.members:        # a classic member in a consumer-protocol group: migration.py
                if self._classic_join_refused(group, member_id):
                    return respond(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
                return self._classic_join_modern(group, respond, member_id, instance_id, client_id, client_host,
                                                 rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                                 protocols, require_known)
            self._make_classic(group)
        if group is None:
            if not is_unknown:
                return respond(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))
            group = self._add_group(Group(group_id, self.timers.now_ms()))
        if not self._accept_joining_member(group, member_id):
            removed = group.remove(member_id)
            if removed is not None:
                removed.cancel_heartbeat()
            respond(JoinResult(E.GROUP_MAX_SIZE_REACHED, ""))
        elif is_unknown:
            self._new_member_join(group, instance_id, require_known, skip_ok, client_id, client_host,
                                  rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond, reason)
        else:
            self._current_member_join(group, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                      session_timeout_ms, protocol_type, protocols, respond, reason)
        if group.is_(PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        max_size = self._max_group_size()
        if group.state in (EMPTY, DEAD):
            return True
        if group.state == PREPARING_REBALANCE:
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or group.num_awaiting_join < max_size
        return group.has(member_id) or group.size < max_size

    def _new_member_join(self, group, instance_id, require_known, skip_ok, client_id, client_host,
                         rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond, reason):
        if group.is_(DEAD):
            return respond(JoinResult(E.COORDINATOR_NOT_AVAILABLE, ""))
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return respond(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, ""))
        new_id = Group.generate_member_id(client_id, instance_id)
        if instance_id is not None:
            old_id = group.current_static_member_id(instance_id)
            if old_id is not None:
                log.info("static member %s of group %s rejoins with a new member id %s (was %s) in state %s",
                         instance_id, group.group_id, new_id, old_id, group.state)
                self._update_static_member_and_rebalance(group, old_id, new_id, instance_id, protocols,
                                                         rebalance_timeout_ms, session_timeout_ms, respond,
                                                         reason, skip_ok)
            else:
                self._add_member_and_rebalance(group, new_id, instance_id, client_id, client_host,
                                               rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                               protocols, respond, reason)
        elif require_known:
            group.pending_members.add(new_id)
            self._schedule_pending_expiry(group, new_id, session_timeout_ms)
            respond(JoinResult(E.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(group, new_id, None, client_id, client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols, respond, reason)

    def _validate_current_member(self, group: Group, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            current = group.current_static_member_id(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("member %s with instance id %s of group %s is fenced by %s",
                         member_id, instance_id, group.group_id, current)
                return E.FENCED_INSTANCE_ID
            return E.NONE
        return E.NONE if group.has(member_id) else E.UNKNOWN_MEMBER_ID

    def _current_member_join(self, group, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                             session_timeout_ms, protocol_type, protocols, respond, reason):
        if group.is_(DEAD):
            return respond(JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id))
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return respond(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if member_id in group.pending_members:
            if instance_id is not None:     # pending ids are only issued to dynamic members
                return respond(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))
            self._cancel_pending_expiry(group, member_id)
            return self._add_member_and_rebalance(group, member_id, None, client_id, client_host,
                                                  rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                                  protocols, respond, reason)
        err = self._validate_current_member(group, member_id, instance_id)
        if err:
            return respond(JoinResult(err, member_id))
        member = group.get(member_id)
        if group.is_(PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                              respond, f"member {member_id} joining during PreparingRebalance")
        elif group.is_(COMPLETING_REBALANCE):
            if member.matches(protocols):
                # the member lost the join answer: give it the current generation again
                respond(self._join_result(group, member_id, include_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, respond,
                                                  f"member {member_id} changed metadata during CompletingRebalance")
        elif group.is_(STABLE):
            if group.is_leader(member_id):
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                                  respond, f"leader {member_id} rejoining; reason: {reason}")
            elif not member.matches(protocols):
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                                  respond, f"member {member_id} changed metadata; reason: {reason}")
            else:
                respond(self._join_result(group, member_id, include_members=False))
        else:   # Empty: the group lost its members; the member must start over
            log.warning("member %s rejoins group %s in unexpected state %s", member_id, group.group_id, group.state)
            respond(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))

    def _join_result(self, group: Group, member_id: str, include_members: bool, leader=None,
                     skip_assignment=False) -> JoinResult:
        return JoinResult(
            E.NONE, member_id, group.generation_id, group.protocol_type, group.protocol_name,
            group.leader_id if leader is None else leader, skip_assignment,
            group.current_member_metadata() if include_members else [])

    def _add_member_and_rebalance(self, group, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                  session_timeout_ms, protocol_type, protocols, respond, reason):
        member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                        protocol_type, protocols)
        member.is_new = True
        if group.is_(PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        member.join_waiter = respond
        # New members cannot heartbeat yet: bound how long their JoinGroup may wait.
        self._complete_and_schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id} with instance id {instance_id}; "
                                             f"reason: {reason}")

    def _update_member_and_rebalance(self, group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                     respond, reason):
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, respond)
        self._maybe_prepare_rebalance(group, reason)

    def _update_static_member_and_rebalance(self, group, old_id, new_id, instance_id, protocols,
                                            rebalance_timeout_ms, session_timeout_ms, respond, reason, skip_ok):
        current_leader = group.leader_id
        member = group.get(old_id)
        # fence whoever still uses the old id
        self._invoke_join(member, JoinResult(E.FENCED_INSTANCE_ID, old_id))
        self._invoke_sync(member, SyncResult(E.FENCED_INSTANCE_ID))
        group.replace_static_member(instance_id, old_id, new_id)
        self._complete_and_schedule_heartbeat(group, member)
        old_protocols, old_rebalance, old_session = member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, respond)

        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                assignment = {mid: m.assignment for mid, m in group.members.items()}
                generation = group.generation_id
                record = self._group_record(group, assignment)

                async def persist():
                    err = self._store_group_error(await self._append(group, [record]))
                    if member.join_waiter is not respond:
                        return      # answered meanwhile (fenced by a newer join, removed, unloaded)
                    if err:
                        log.warning("failed to persist static member %s of group %s: %s", instance_id,
                                    group.group_id, err)
                        group.update_member(member, old_protocols, old_rebalance, old_session, None)
                        if group.current_static_member_id(instance_id) == new_id:
                            group.replace_static_member(instance_id, new_id, old_id)
                            self._complete_and_schedule_heartbeat(group, member)
                        return respond(JoinResult(err, "", generation, group.protocol_type, group.protocol_name,
                                                  current_leader or ""))
                    if skip_ok:
                        is_leader = group.is_leader(new_id)
                        result = JoinResult(E.NONE, new_id, group.generation_id, group.protocol_type,
                                            group.protocol_name, group.leader_id or "", is_leader,
                                            group.current_member_metadata() if is_leader else [])
                    else:
                        # before v9 the old leader id is returned so the member does not run an
                        # assignment a Stable group would ignore
                        result = JoinResult(E.NONE, new_id, group.generation_id, group.protocol_type,
                                            group.protocol_name, current_leader or "")
                    self._invoke_join(member, result)

                self._spawn(persist())
            else:
                self._maybe_prepare_rebalance(group, f"static member {instance_id} rejoined with a protocol change")
        elif group.is_(COMPLETING_REBALANCE):
            # the leader may already be assigning with the old id: redo the rebalance
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        # PreparingRebalance: the member now simply waits for the join to complete

    # ------------------------------------------------------------------ waiters
    @staticmethod
    def _invoke_join(member: Member, result: JoinResult) -> bool:
        w = member.join_waiter
        if w is None:
            return False
        member.join_waiter = None
        w(result)
        return True

    @staticmethod
    def _invoke_sync(member: Member, result: SyncResult) -> bool:
        w = member.sync_waiter
        if w is None:
            return False
        member.sync_waiter = None
        w(result)
        return True

    # ------------------------------------------------------------------ rebalance
    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        if group.is_(EMPTY):
            delay = self._initial_rebalance_delay_ms()
            op = _JoinOp(True, delay, delay, max(group.rebalance_timeout_ms - delay, 0))
        else:
            op = _JoinOp(False, delay=group.rebalance_timeout_ms)
        group.transition_to(PREPARING_REBALANCE, self.timers.now_ms())
        log.info("preparing to rebalance group %s (generation %d, %s-%d): %s", group.group_id, group.generation_id,
                 "__consumer_offsets", self.partition_for(group.group_id), reason)
        self._watch_join(group, op)

    def _watch_join(self, group: Group, op: _JoinOp) -> None:
        self._cancel_join_op(group)
        group.join_op = op
        if not op.initial and group.has_all_members_joined():
            group.join_op = None
            self._on_complete_join(group)
            return
        op.handle = self.timers.call_later(op.delay, lambda: self._on_join_expired(group, op))

    def _cancel_join_op(self, group: Group) -> None:
        if group.join_op is not None:
            if group.join_op.handle is not None:
                group.join_op.handle.cancel()
            group.join_op = None

    def _try_complete_join(self, group: Group) -> None:
        op = group.join_op
        if op is not None and not op.initial and group.has_all_members_joined():
            self._cancel_join_op(group)
            self._on_complete_join(group)

    def _on_join_expired(self, group: Group, op: _JoinOp) -> None:
        if group.join_op is not op:
            return
        group.join_op = None
        if op.initial and group.new_member_added and op.remaining != 0:
            group.new_member_added = False
            delay = min(op.configured_delay, op.remaining)
            remaining = max(op.remaining - op.delay, 0)
            self._watch_join(group, _JoinOp(True, op.configured_delay, delay, remaining))
            return
        self._on_complete_join(group)

    def _on_complete_join(self, group: Group) -> None:
        for m in [m for m in group.not_yet_rejoined() if not m.is_static]:
            log.info("group %s removes member %s which did not rejoin in time", group.group_id, m.member_id)
            group.remove(m.member_id)
            m.cancel_heartbeat()
            self._invoke_sync(m, SyncResult(E.UNKNOWN_MEMBER_ID))
        if group.is_(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s could not complete the rebalance because no member rejoined", group.group_id)
            self._watch_join(group, _JoinOp(False, delay=group.rebalance_timeout_ms))
            return
        group.init_next_generation(self.timers.now_ms())
        if group.is_(EMPTY):
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            record = self._group_record(group, {})

            async def persist():
                err = await self._append(group, [record])
                if err:
                    log.warning("failed to write the empty metadata of group %s: error %d", group.group_id, err)
            self._spawn(persist())
            return
        log.info("stabilized group %s generation %d (%d members, protocol %s)", group.group_id,
                 group.generation_id, group.size, group.protocol_name)
        for mid, member in list(group.members.items()):
            self._invoke_join(member, self._join_result(group, mid, include_members=group.is_leader(mid)))
            self._complete_and_schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(mid)
        self._schedule_pending_sync(group)

    def _reset_and_propagate_assignment_error(self, group: Group, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: Group, assignment: dict[str, bytes]) -> None:
        for mid, m in group.members.items():
            m.assignment = assignment.get(mid, b"")
        self._propagate_assignment(group, E.NONE)

    def _propagate_assignment(self, group: Group, error: int) -> None:
        ptype, pname = (group.protocol_type, group.protocol_name) if error == E.NONE else (None, None)
        for m in list(group.members.values()):
            if self._invoke_sync(m, SyncResult(error, ptype, pname, m.assignment)):
                self._complete_and_schedule_heartbeat(group, m)

    # ------------------------------------------------------------------ pending sync
    def _schedule_pending_sync(self, group: Group) -> None:
        self._cancel_sync_op(group)
        generation = group.generation_id
        group.sync_op = self.timers.call_later(group.rebalance_timeout_ms,
                                               lambda: self._on_sync_expired(group, generation))

    def _cancel_sync_op(self, group: Group) -> None:
        if group.sync_op is not None:
            group.sync_op.cancel()
            group.sync_op = None

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync.clear()
        self._cancel_sync_op(group)

    def _remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._cancel_sync_op(group)

    def _on_sync_expired(self, group: Group, generation: int) -> None:
        group.sync_op = None
        if generation != group.generation_id or group.state not in (COMPLETING_REBALANCE, STABLE):
            return
        if group.pending_sync:
            missing = sorted(group.pending_sync)
            for mid in missing:
                m = group.remove(mid)
                if m is not None:
                    m.cancel_heartbeat()
            log.info("group %s removes members %s which did not send SyncGroup in time", group.group_id, missing)
            self._prepare_rebalance(group, f"removing {missing} on pending sync expiration")

    # ------------------------------------------------------------------ heartbeats
    def _complete_and_schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        member.cancel_heartbeat()
        member.heartbeat_satisfied = False
        member_id = member.member_id
        member.heartbeat_timer = self.timers.call_later(
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self._on_heartbeat_expired(group, member, member_id))

    def _on_heartbeat_expired(self, group: Group, member: Member, member_id: str) -> None:
        if member.member_id == member_id:
            member.heartbeat_timer = None
        if group.is_(DEAD) or group.members.get(member_id) is not member:
            return
        if not member.has_satisfied_heartbeat():
            log.info("member %s of group %s has failed (no heartbeat within %d ms); removing it",
                     member_id, group.group_id, member.session_timeout_ms)
            self._remove_member_and_update_group(group, member, "heartbeat expiration")

    def _schedule_pending_expiry(self, group: Group, member_id: str, timeout_ms: int) -> None:
        self._cancel_pending_expiry(group, member_id)
        group.pending_timers[member_id] = self.timers.call_later(
            timeout_ms, lambda: self._on_pending_expired(group, member_id))

    def _cancel_pending_expiry(self, group: Group, member_id: str) -> None:
        h = group.pending_timers.pop(member_id, None)
        if h is not None:
            h.cancel()

    def _on_pending_expired(self, group: Group, member_id: str) -> None:
        group.pending_timers.pop(member_id, None)
        if group.is_(DEAD) or member_id not in group.pending_members:
            return
        log.info("pending member %s of group %s never joined; removing it", member_id, group.group_id)
        self._remove_pending_member_and_update_group(group, member_id)

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        self._invoke_join(member, JoinResult(E.UNKNOWN_MEMBER_ID, ""))
        self._invoke_sync(member, SyncResult(E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        member.cancel_heartbeat()
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_(PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: Group, member_id: str) -> None:
        group.remove(member_id)
        self._cancel_pending_expiry(group, member_id)
        if group.is_(PREPARING_REBALANCE):
            self._try_complete_join(group)

    # ================================================================== SyncGroup
    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         assignments: dict[str, bytes], protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncResult:
        fut = asyncio.get_running_loop().create_future()

        def respond(result):
            if not fut.done():
                fut.set_result(result)

        self._sync(respond, group_id, generation_id, member_id, group_instance_id, assignments,
                   protocol_type, protocol_name)
        return await fut

    def _sync(self, respond, group_id, generation_id, member_id, instance_id, assignments, ptype, pname):
        err = self._validate_group_status(group_id, "sync")
        if err == E.COORDINATOR_LOAD_IN_PROGRESS:
            return respond(SyncResult(E.REBALANCE_IN_PROGRESS))
        if err:
            return respond(SyncResult(err))
        group = self.groups.get(group_id)
        if group is not None and group.modern is not None and group.modern.kind != "consumer":
            return respond(SyncResult(E.UNKNOWN_MEMBER_ID))      # a streams group has no classic members
        if group is not None and group.modern is not None and not group.is_(DEAD):
            return self._classic_sync_modern(group, respond, generation_id, member_id, instance_id, ptype, pname)
        if group is None or group.modern is not None:
            return respond(SyncResult(E.UNKNOWN_MEMBER_ID))
        if group.is_(DEAD):
            return respond(SyncResult(E.COORDINATOR_NOT_AVAILABLE))
        err = self._validate_current_member(group, member_id, instance_id)
        if not err:
            if generation_id != group.generation_id:
                err = E.ILLEGAL_GENERATION
            elif ptype is not None and ptype != group.protocol_type:
                err = E.INCONSISTENT_GROUP_PROTOCOL
            elif pname is not None and pname != group.protocol_name:
                err = E.INCONSISTENT_GROUP_PROTOCOL
        if err:
            return respond(SyncResult(err))
        if group.is_(EMPTY):
            return respond(SyncResult(E.UNKNOWN_MEMBER_ID))
        if group.is_(PREPARING_REBALANCE):
            return respond(SyncResult(E.REBALANCE_IN_PROGRESS))
        member = group.get(member_id)
        if group.is_(STABLE):
            self._remove_pending_sync_member(group, member_id)
            respond(SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._complete_and_schedule_heartbeat(group, member)
            return
        # CompletingRebalance
        if member.sync_waiter is not None:
            self._invoke_sync(member, SyncResult(E.REBALANCE_IN_PROGRESS))
        member.sync_waiter = respond
        self._remove_pending_sync_member(group, member_id)
        if not group.is_leader(member_id):
            return
        log.info("assignment received from leader %s of group %s for generation %d (%d members)",
                 member_id, group.group_id, group.generation_id, group.size)
        assignment = {mid: bytes(assignments.get(mid, b"") or b"") for mid in group.members}
        missing = [mid for mid in group.members if mid not in assignments]
        if missing:
            log.warning("empty assignments for members %s of group %s generation %d", missing, group.group_id,
                        group.generation_id)
        record = self._group_record(group, assignment)
        generation = group.generation_id

        async def persist():
            err = self._store_group_error(await self._append(group, [record]))
            if group.is_(COMPLETING_REBALANCE) and group.generation_id == generation:
                if err:
                    self._reset_and_propagate_assignment_error(group, err)
                    self._maybe_prepare_rebalance(group, f"error {err} storing the assignment")
                else:
                    self._set_and_propagate_assignment(group, assignment)
                    group.transition_to(STABLE, self.timers.now_ms())
        self._spawn(persist())

    # ================================================================== Heartbeat
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        err = self._validate_group_status(group_id, "heartbeat")
        if err == E.COORDINATOR_LOAD_IN_PROGRESS:
            return E.NONE
        if err:
            return err
        group = self.groups.get(group_id)
        if group is not None and group.modern is not None and group.modern.kind != "consumer":
            return E.UNKNOWN_MEMBER_ID
        if group is not None and group.modern is not None and not group.is_(DEAD):
            return self._classic_heartbeat_modern(group, member_id, group_instance_id, generation_id)
        if group is None or group.modern is not None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        err = self._validate_current_member(group, member_id, group_instance_id)
        if err:
            return err
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return E.UNKNOWN_MEMBER_ID
        member = group.get(member_id)
        self._complete_and_schedule_heartbeat(group, member)
        if group.is_(PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # ================================================================== LeaveGroup
    async def leave_group(self, group_id: str,
                          members: list[tuple[str, str | None, str | None]]) -> tuple[int, list[int]]:
        """``members``: (member id, group instance id, reason).  Returns (group error, per-member
        errors); with a group error the per-member list is empty.  Classic members leaving a
        consumer-protocol group are answered once their records are written, as Kafka answers
        after its write (a failed write fails the whole request).  A classic group's leave is
        answered at once, as by Kafka's classic coordinator: what it changes is written when the
        rebalance it starts completes."""
        err, errors = self._leave_group(group_id, members)
        group = self.groups.get(group_id)
        if not err and E.NONE in errors and group is not None and group.modern is not None:
            werr = await self._persist_modern(group)
            if werr:
                return werr, []
        return err, errors

    def _leave_group(self, group_id: str, members) -> tuple[int, list[int]]:
        err = self._validate_group_status(group_id, "leave")
        if err:
            return err, []
        group = self.groups.get(group_id)
        if group is not None and group.modern is not None and group.modern.kind != "consumer":
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(members)
        if group is not None and group.modern is not None and not group.is_(DEAD):
            return self._classic_leave_modern(group, members)
        if group is None or group.modern is not None:
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, []
        errors = []
        for member_id, instance_id, reason in members:
            if member_id == "":
                current = group.current_static_member_id(instance_id) if instance_id is not None else None
                if current is None:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
                self._leave(group, current, reason)
                errors.append(E.NONE)
            elif member_id in group.pending_members:
                self._remove_pending_member_and_update_group(group, member_id)
                log.info("pending member %s has left group %s", member_id, group.group_id)
                errors.append(E.NONE)
            else:
                e = self._validate_current_member(group, member_id, instance_id)
                if not e:
                    self._leave(group, member_id, reason)
                errors.append(e)
        return E.NONE, errors

    def _leave(self, group: Group, member_id: str, reason: str | None) -> None:
        member = group.get(member_id)
        log.info("member %s has left group %s (reason: %s)", member_id, group.group_id, reason or "not provided")
        self._remove_member_and_update_group(group, member, f"LeaveGroup; reason: {reason or 'not provided'}")

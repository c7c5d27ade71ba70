"""Online migration between the classic and the consumer group protocols (Kafka's
``group.consumer.migration.policy``, KIP-848): mixin of GroupCoordinator.

How it works
------------
Consumers are moved to ``group.protocol=consumer`` by a rolling restart, so for a while one group
has members of both kinds.  Such a group is a consumer-protocol group (``group.modern``) in which
some members joined with JoinGroup: their ``ModernMember.classic`` holds the session timeout and
the protocols (name, embedded subscription) they joined with.

* **Upgrade.** A ConsumerGroupHeartbeat that joins (epoch 0) a non-empty classic group converts
  it, if the policy allows upgrades, the group's protocol type is ``consumer`` and it is no larger
  than ``group.consumer.max.size``.  Waiting JoinGroup / SyncGroup requests are answered
  REBALANCE_IN_PROGRESS.  Every classic member becomes a member at epoch = the generation, Stable,
  with its last assignment as both current and target assignment and its subscription from the
  embedded protocol; the group epoch and target epoch are the generation.  The group's
  GroupMetadata record gets a tombstone and the consumer-protocol records are written.  The
  joining member then bumps the group epoch as any new member does.
* **Classic members in a consumer-protocol group** are served through the new state machine:
  - JoinGroup (MEMBER_ID_REQUIRED first, as classic groups do from v4) updates the member from its
    embedded subscription, recomputes the target if the group epoch moved and reconciles with the
    partitions the subscription says it owns (none for eager clients, which revoke everything
    before joining).  The answer: generation id = member epoch, protocol = the member's first,
    no leader, no member list.  The member must send SyncGroup within its rebalance timeout.
  - SyncGroup returns the member's current assignment, encoded at the version of its own
    subscription; REBALANCE_IN_PROGRESS if the group epoch moved past it meanwhile.
  - Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin: the group epoch is ahead
    of it, it has partitions to revoke, or partitions it waits for have been released.  From then
    on it must rejoin within its rebalance timeout.
  - LeaveGroup removes the member and bumps the group epoch; it is answered once the records
    are written.
  - Offset commits carry the generation id, checked against the member epoch
    (ILLEGAL_GENERATION); any OffsetCommit version is accepted from them.
* **Downgrade.** When the last consumer-protocol member leaves or is fenced and classic members
  remain, a policy that allows downgrades turns the group back into a classic group (if it fits
  ``group.max.size``): Stable at generation = the group epoch, each member with its target
  assignment encoded for its protocol, then a rebalance so that the classic members rejoin.  The
  consumer-protocol records get tombstones and a GroupMetadata record is written.

A join that Kafka would refuse after converting (so that the conversion's records are dropped
with the join's) is refused before converting here: a group it would take past
``group.consumer.max.size`` (GROUP_MAX_SIZE_REACHED) or an instance id a classic member holds
(UNRELEASED_INSTANCE_ID); the group stays classic either way.

Kafka 4.0's default policy is ``bidirectional`` (Kafka 3.9 had the same option, internal and
``disabled``).  With ``disabled``, a classic JoinGroup into a non-empty consumer-protocol group is
refused with INCONSISTENT_GROUP_PROTOCOL (as Kafka 4.0.x does since KAFKA-20640); members already
in a mixed group go on.
"""
from __future__ import annotations

import logging
from collections import Counter
from typing import NamedTuple

from protocol.errors import ErrorCode as E

from broker.group.consumer_protocol import (M_STABLE, M_UNRELEASED, M_UNREVOKED, HeartbeatError, ModernGroup,
                                            ModernMember, _new_member_id)
from broker.group.embedded import (EmbeddedProtocolError, decode_assignment, decode_subscription,
                                   encode_assignment, version_of)
from broker.group.group import CONSUMER_PROTOCOL_TYPE, STABLE, Group
from broker.group.member import JoinResult, Member, SyncResult

log = logging.getLogger("odradek.group")

POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


class _Owned(NamedTuple):
    """A partition set as a ConsumerGroupHeartbeat reports it (topic id, partitions)."""
    topic_id: object
    partitions: list


class MigrationMixin:
    # ------------------------------------------------------------------ policy
    def _migration_policy(self) -> str:
        return str(self._cfg("group.consumer.migration.policy")).lower()

    def _classic_join_refused(self, group: Group, member_id: str) -> bool:
        """With the policy ``disabled`` a new classic member may not join a consumer group (the
        group could never go back to one protocol); a classic member already in it may rejoin."""
        if self._migration_policy() != "disabled":
            return False
        member = group.modern.members.get(member_id) if member_id else None
        return member is None or member.classic is None

    def _can_upgrade(self, group: Group) -> bool:
        gid = group.group_id
        if self._migration_policy() not in ("upgrade", "bidirectional"):
            log.info("cannot upgrade classic group %s to a consumer group: online upgrade is disabled", gid)
            return False
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            log.info("cannot upgrade classic group %s to a consumer group: it does not use the consumer "
                     "embedded protocol", gid)
            return False
        if group.size > self._cfg("group.consumer.max.size"):
            log.info("cannot upgrade classic group %s to a consumer group: %d members exceed "
                     "group.consumer.max.size", gid, group.size)
            return False
        return True

    def _can_downgrade(self, group: Group, leaving: ModernMember) -> bool:
        mg = group.modern
        if leaving.classic is not None or mg.members.get(leaving.member_id) is not leaving:
            return False
        if any(m.classic is None for mid, m in mg.members.items() if mid != leaving.member_id):
            return False
        if len(mg.members) <= 1:
            return False
        gid = group.group_id
        if self._migration_policy() not in ("downgrade", "bidirectional"):
            log.info("cannot downgrade consumer group %s to a classic group: online downgrade is disabled", gid)
            return False
        if len(mg.members) - 1 > self._max_group_size():
            log.info("cannot downgrade consumer group %s to a classic group: its size exceeds group.max.size", gid)
            return False
        return True

    # ------------------------------------------------------------------ classic -> consumer
    def _upgrade_to_consumer(self, group: Group) -> None:
        gid = group.group_id
        generation = group.generation_id
        converted = []
        try:
            for m in group.members.values():
                meta = m.metadata(group.protocol_name) if group.protocol_name else m.protocols[0][1]
                converted.append((m, decode_subscription(meta), decode_assignment(m.assignment)))
        except (EmbeddedProtocolError, KeyError, IndexError) as e:
            log.warning("cannot upgrade classic group %s: malformed embedded consumer protocol (%s)", gid, e)
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND,
                                 f"Cannot upgrade the classic group {gid} to consumer group because the embedded "
                                 f"consumer protocol is malformed.") from None
        # whoever waits on the classic rebalance rejoins the new one
        for m in group.members.values():
            self._invoke_join(m, JoinResult(E.REBALANCE_IN_PROGRESS, m.member_id))
            self._invoke_sync(m, SyncResult(E.REBALANCE_IN_PROGRESS))
            m.cancel_heartbeat()
        self._cancel_join_op(group)
        self._remove_sync_expiration(group)
        for mid in list(group.pending_members):
            self._cancel_pending_expiry(group, mid)

        mg = ModernGroup()
        mg.group_epoch = mg.assignment_epoch = generation
        mg.classic_record = True
        for m, sub, parts in converted:
            mm = ModernMember(m.member_id)
            mm.epoch = mm.previous_epoch = generation
            mm.state = M_STABLE
            mm.instance_id = m.group_instance_id
            mm.rack_id = sub.rack_id
            mm.rebalance_timeout_ms = m.rebalance_timeout_ms
            mm.client_id, mm.client_host = m.client_id, m.client_host
            mm.subscribed = tuple(sorted(set(sub.topics)))
            # in CompletingRebalance the assignments are the previous generation's and may overlap
            # (a member that joined since holds none): a partition goes to the first member listing it
            mm.assigned = {}
            for tid, ps in self._ids_of(parts).items():
                free = {p for p in ps if (tid, p) not in mg.owners}
                if free != ps:
                    log.info("member %s of group %s: partitions %s of topic %s are already held by another "
                             "member", m.member_id, gid, sorted(ps - free), tid)
                if free:
                    mm.assigned[tid] = free
            mm.classic = (m.session_timeout_ms, tuple((n, bytes(md)) for n, md in m.protocols))
            mg.target[mm.member_id] = {t: set(ps) for t, ps in mm.assigned.items()}
            mg.members[mm.member_id] = mm
            if mm.instance_id is not None:
                mg.static[mm.instance_id] = mm.member_id
            mg.hold(mm)
        group.members = {}
        group.static_members = {}
        group.pending_members = set()
        group.supported_protocols = Counter()
        group.leader_id = None
        group.protocol_name = None
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        group.generation_id = 0
        group.modern = mg
        for mm in mg.members.values():
            self._arm_session(group, mm)
        self._sync_group_fields(group)
        log.info("classic group %s upgraded to a consumer group at epoch %d with %d members", gid, generation,
                 len(mg.members))

    def _ids_of(self, parts: dict[str, list[int]]) -> dict:
        """{topic name: partitions} -> {topic id: set(partitions)}; unknown topics and partitions drop."""
        out: dict = {}
        for name, ps in parts.items():
            info = self.topic_lookup(name) if self.topic_lookup is not None else None
            if info is None:
                continue
            valid = {p for p in ps if 0 <= p < len(info.partitions)}
            if valid:
                out.setdefault(info.topic_id, set()).update(valid)
        return out

    def _names_of(self, mg: ModernGroup, parts: dict) -> dict[str, list[int]]:
        """{topic id: partitions} -> {topic name: sorted partitions} through the group's metadata."""
        names = {meta[0]: name for name, meta in mg.metadata.items()}
        out: dict[str, list[int]] = {}
        for tid, ps in parts.items():
            name = names.get(tid)
            if name is not None and ps:
                out[name] = sorted(ps)
        return out

    @staticmethod
    def _assignment_bytes(parts: dict[str, list[int]], metadata: bytes) -> bytes:
        try:
            version = version_of(metadata)
        except EmbeddedProtocolError:
            version = 0
        return encode_assignment(parts, version)

    # ------------------------------------------------------------------ consumer -> classic
    def _downgrade_to_classic(self, group: Group, leaving: ModernMember) -> None:
        mg: ModernGroup = group.modern
        gid = group.group_id
        ids = set(mg.members) | set((mg.persisted or {}).get("members", ()))
        for m in mg.members.values():
            m.cancel_timers()
        tombstones = self._modern_tombstones_for(gid, ids)
        group.modern = None
        group.members = {}
        group.static_members = {}
        group.supported_protocols = Counter()
        group.leader_id = None
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        group.generation_id = mg.group_epoch
        for mm in mg.members.values():
            if mm is leaving:
                continue
            session, protocols = mm.classic
            group.add(Member(mm.member_id, mm.instance_id, mm.client_id, mm.client_host, mm.rebalance_timeout_ms,
                             session, CONSUMER_PROTOCOL_TYPE, list(protocols)))
        group.protocol_name = group.select_protocol()
        for mid, m in group.members.items():
            parts = self._names_of(mg, mg.target.get(mid, {}))
            m.assignment = self._assignment_bytes(parts, m.metadata(group.protocol_name))
        group.subscribed = group.compute_subscribed_topics()
        group.state = STABLE
        group.state_timestamp = self.timers.now_ms()
        record = self._group_record(group, {mid: m.assignment for mid, m in group.members.items()})

        async def persist():
            err = await self._append(group, tombstones + [record])
            if err:
                log.warning("failed to write the downgrade of group %s: error %d", gid, err)
        self._spawn(persist())
        for m in group.members.values():
            self._complete_and_schedule_heartbeat(group, m)
        log.info("consumer group %s downgraded to a classic group at generation %d with %d members "
                 "(member %s left)", gid, group.generation_id, group.size, leaving.member_id)
        self._prepare_rebalance(group, f"Downgrade group {gid} from consumer to classic.")

    # ------------------------------------------------------------------ classic requests to a consumer group
    def _classic_member(self, mg: ModernGroup, group_id: str, member_id: str, instance_id: str | None):
        """(error, member) for a SyncGroup / Heartbeat naming a member: the consumer protocol's
        lookup (``_known_member``), and the member must be a classic one."""
        try:
            member = self._known_member(mg, group_id, member_id, instance_id)
        except HeartbeatError as e:
            return e.code, None
        return (E.NONE, member) if member.classic is not None else (E.UNKNOWN_MEMBER_ID, None)

    def _classic_join_modern(self, group: Group, respond, member_id, instance_id, client_id, client_host,
                             rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, require_known):
        mg: ModernGroup = group.modern
        is_unknown = member_id == ""
        if is_unknown:
            member_id = _new_member_id()
        rejoining = member_id in mg.members or (instance_id is not None and instance_id in mg.static)
        if not rejoining and len(mg.members) >= self._cfg("group.consumer.max.size"):
            return respond(JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id))
        names = [n for n, _ in protocols]
        supported = Counter()
        n_classic = 0
        for m in mg.members.values():
            if m.classic is not None:
                n_classic += 1
                supported.update(n for n, _ in m.classic[1])
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names or \
                not any(supported.get(n, 0) == n_classic for n in names):
            return respond(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if require_known and is_unknown and instance_id is None:
            log.info("dynamic member with unknown member id joins consumer group %s; new member id %s",
                     group.group_id, member_id)
            return respond(JoinResult(E.MEMBER_ID_REQUIRED, member_id))
        try:
            sub = decode_subscription(protocols[0][1])
        except EmbeddedProtocolError as e:
            log.warning("member %s of group %s joined with a malformed subscription: %s", member_id,
                        group.group_id, e)
            return respond(JoinResult(E.UNKNOWN_SERVER_ERROR, member_id))

        if instance_id is None:
            member = mg.members.get(member_id) or ModernMember(member_id)
        else:
            holder = mg.static.get(instance_id)
            if is_unknown:
                member = ModernMember(member_id) if holder is None else \
                    self._replace_static(mg, mg.members[holder], member_id)
            elif holder is None:
                return respond(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))
            elif holder != member_id:
                return respond(JoinResult(E.FENCED_INSTANCE_ID, member_id))
            else:
                member = mg.members[holder]

        bump = False
        if instance_id is not None:
            member.instance_id = instance_id
        if sub.rack_id is not None:
            member.rack_id = sub.rack_id
        if rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        member.client_id, member.client_host = client_id, client_host
        member.classic = (session_timeout_ms, tuple((n, bytes(md)) for n, md in protocols))
        subscribed = tuple(sorted(set(sub.topics)))
        if subscribed != member.subscribed:
            member.subscribed = subscribed
            bump = True
        self._admit_and_retarget(mg, member, bump, group.group_id, " with the classic protocol")
        owned = [_Owned(tid, sorted(ps)) for tid, ps in self._ids_of(sub.owned).items()]
        self._reconcile(group, mg, member, owned)
        mg.touch(member.member_id)
        self._sync_group_fields(group)
        self._cancel_member_timer(member, "join_timer")
        self._arm_session(group, member)
        result = JoinResult(E.NONE, member.member_id, member.epoch, CONSUMER_PROTOCOL_TYPE, names[0], "")

        async def persist():
            err = await self._persist_modern(group)
            if err:
                return respond(JoinResult(err, member.member_id))
            if group.modern is mg and mg.members.get(member.member_id) is member:
                self._schedule_member_timer(group, member, "sync_timer", rebalance_timeout_ms,
                                            "did not send SyncGroup within its rebalance timeout")
            respond(result)
        self._spawn(persist())

    def _classic_sync_modern(self, group: Group, respond, generation_id, member_id, instance_id, ptype, pname):
        mg: ModernGroup = group.modern
        if not mg.members:
            return respond(SyncResult(E.UNKNOWN_MEMBER_ID))
        err, member = self._classic_member(mg, group.group_id, member_id, instance_id)
        if err:
            return respond(SyncResult(err))
        if generation_id != member.epoch:
            return respond(SyncResult(E.ILLEGAL_GENERATION))
        if (ptype is not None and ptype != CONSUMER_PROTOCOL_TYPE) or \
                (pname is not None and pname != member.classic[1][0][0]):
            return respond(SyncResult(E.INCONSISTENT_GROUP_PROTOCOL))
        if mg.group_epoch > member.epoch and member.state != M_UNREVOKED:
            self._schedule_member_timer(group, member, "join_timer", member.rebalance_timeout_ms,
                                        "did not rejoin within its rebalance timeout", if_absent=True)
            return respond(SyncResult(E.REBALANCE_IN_PROGRESS))

        async def answer():
            err = await self._persist_modern(group)     # what the member is told is in the log first
            if err:
                return respond(SyncResult(err))
            if group.modern is not mg or mg.members.get(member.member_id) is not member:
                return respond(SyncResult(E.UNKNOWN_MEMBER_ID))
            self._cancel_member_timer(member, "sync_timer")
            self._arm_session(group, member)
            assignment = self._assignment_bytes(self._names_of(mg, member.assigned), member.classic[1][0][1])
            respond(SyncResult(E.NONE, ptype, pname, assignment))
        self._spawn(answer())

    def _classic_heartbeat_modern(self, group: Group, member_id, instance_id, generation_id) -> int:
        mg: ModernGroup = group.modern
        err, member = self._classic_member(mg, group.group_id, member_id, instance_id)
        if err:
            return err
        if generation_id != member.epoch:
            return E.ILLEGAL_GENERATION
        self._arm_session(group, member)
        if member.epoch < mg.group_epoch or member.state == M_UNREVOKED or \
                (member.state == M_UNRELEASED and not self._waiting_on_unreleased(mg, member)):
            self._schedule_member_timer(group, member, "join_timer", member.rebalance_timeout_ms,
                                        "did not rejoin within its rebalance timeout", if_absent=True)
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    @staticmethod
    def _waiting_on_unreleased(mg: ModernGroup, member: ModernMember) -> bool:
        """Whether a partition of the member's target is still held by another member."""
        if member.state != M_UNRELEASED:
            return False
        for tid, ps in mg.target.get(member.member_id, {}).items():
            have = member.assigned.get(tid, ())
            for p in ps:
                if p not in have and (tid, p) in mg.owners:
                    return True
        return False

    def _classic_leave_modern(self, group: Group, members) -> tuple[int, list[int]]:
        mg: ModernGroup = group.modern
        errors = []
        removed = []
        for member_id, instance_id, reason in members:
            if instance_id is not None:
                holder = mg.static.get(instance_id)
                if holder is None:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
                if member_id != "" and holder != member_id:
                    errors.append(E.FENCED_INSTANCE_ID)
                    continue
                member_id = holder
            member = mg.members.get(member_id)
            if member is None or member.classic is None:
                errors.append(E.UNKNOWN_MEMBER_ID)
                continue
            log.info("member %s (instance %s) left consumer group %s through LeaveGroup; reason: %s", member_id,
                     instance_id, group.group_id, reason or "not provided")
            self._drop_member(mg, member)
            removed.append(member_id)
            errors.append(E.NONE)
        if removed:
            mg.metadata = self._subscription_metadata(mg)
            mg.group_epoch += 1
            self.consumer_rebalances += 1
            self._sync_group_fields(group)     # written by leave_group before it answers
        return E.NONE, errors

    # ------------------------------------------------------------------ the join and sync timers
    def _schedule_member_timer(self, group: Group, member: ModernMember, slot: str, timeout_ms: int, why: str,
                               if_absent: bool = False) -> None:
        if getattr(member, slot) is not None:
            if if_absent:
                return
            getattr(member, slot).cancel()

        def expired():
            setattr(member, slot, None)
            mg = group.modern
            if mg is not None and mg.members.get(member.member_id) is member:
                log.info("classic member %s of consumer group %s %s (%d ms); fenced", member.member_id,
                         group.group_id, why, timeout_ms)
                self._fence(group, member)
                self._spawn(self._persist_modern(group))
        setattr(member, slot, self.timers.call_later(max(timeout_ms, 0), expired))

    @staticmethod
    def _cancel_member_timer(member: ModernMember, slot: str) -> None:
        h = getattr(member, slot)
        if h is not None:
            h.cancel()
            setattr(member, slot, None)


__all__ = ["MigrationMixin", "POLICIES"]

"""OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups and offset expiry (mixin of GroupCoordinator).

Commits are validated synchronously against the group (generation, member id, static
instance), marked pending, written to ``__consumer_offsets`` under the group's write lock and only
then applied to the group's offset cache -- so a fetch never returns an offset that is not in the
log, and ``require_stable`` fetches see UNSTABLE_OFFSET_COMMIT while a commit is in flight.

Deleting offsets or groups and expiring offsets change the cache first, then append tombstones
(null values); a tombstone that fails to append is not retried by the caller (the next expiry
pass or a later delete will write it again), as in Kafka.
"""
from __future__ import annotations

import logging

from protocol.errors import ErrorCode as E

from broker.group import records as R
from broker.group.group import (COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, Group,
                                OffsetAndMetadata)

log = logging.getLogger("odradek.group")

TopicPartition = tuple  # (topic, partition)


class OffsetsMixin:
    # ================================================================== OffsetCommit
    async def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                             generation_id: int, offsets: dict, api_version: int | None = None) -> dict:
        """``offsets``: {(topic, partition): OffsetAndMetadata}.  Returns {(topic, partition): error}.
        ``generation_id`` is the member epoch for a consumer-protocol group (OffsetCommit v9+)."""
        def all_(code):
            return {tp: code for tp in offsets}

        err = self._validate_group_status(group_id, "commit")
        if err:
            return all_(err)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_(E.GROUP_ID_NOT_FOUND if api_version is not None and api_version >= 9
                            else E.ILLEGAL_GENERATION)
            log.info("creating simple consumer group %s via a manual offset commit", group_id)
            group = self._add_group(Group(group_id, self.timers.now_ms()))
        if group.modern is not None:
            err = self._validate_modern_commit(group, member_id, generation_id, api_version)
            if callable(err):           # a streams member's older epoch: decided per partition
                return await self._commit_checked(group, offsets, err)
            return all_(err) if err else await self._store_offsets(group, offsets)
        err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if err:
            return all_(err)
        if group.is_(COMPLETING_REBALANCE):
            return all_(E.REBALANCE_IN_PROGRESS)
        if group.state in (STABLE, PREPARING_REBALANCE):
            self._complete_and_schedule_heartbeat(group, group.get(member_id))
        return await self._store_offsets(group, offsets)

    async def _commit_checked(self, group: Group, offsets: dict, check) -> dict:
        """Store the offsets ``check(topic, partition)`` accepts; the others get its error."""
        refused = {tp: check(*tp) for tp in offsets}
        refused = {tp: e for tp, e in refused.items() if e}
        result = await self._store_offsets(group, {tp: om for tp, om in offsets.items() if tp not in refused}) \
            if len(refused) < len(offsets) else {}
        result.update(refused)
        return result

    def _validate_offset_commit(self, group: Group, generation_id: int, member_id: str,
                                instance_id: str | None) -> int:
        if group.is_(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(EMPTY):
            return E.NONE           # admin client or a consumer without group management
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            err = self._validate_current_member(group, member_id, instance_id)
            if err:
                return err
            return E.ILLEGAL_GENERATION if generation_id != group.generation_id else E.NONE
        if not group.is_(EMPTY):
            return E.UNKNOWN_MEMBER_ID   # only members may commit for a non-empty group
        return E.NONE

    async def _store_offsets(self, group: Group, offsets: dict) -> dict:
        max_meta = self._max_metadata_bytes()
        result = {}
        valid = {}
        for tp, om in offsets.items():
            if om.metadata is not None and len(om.metadata) > max_meta:
                result[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = om
        if not valid:
            return result
        records = [(R.offset_key(group.group_id, tp[0], tp[1]),
                    R.offset_value(R.OffsetValue(om.offset, om.metadata or "", om.commit_timestamp,
                                                 om.leader_epoch, om.expire_timestamp)))
                   for tp, om in valid.items()]
        for tp in valid:
            group.pending_offset_commits[tp] += 1
        try:
            async with group.write_lock:
                err = self._commit_error(await self._append_unlocked(group, records))
                if not err and not group.is_(DEAD):
                    group.offsets.update(valid)
        finally:
            for tp in valid:
                group.pending_offset_commits[tp] -= 1
                if group.pending_offset_commits[tp] <= 0:
                    del group.pending_offset_commits[tp]
        for tp in valid:
            result[tp] = err
        return result

    # ================================================================== OffsetFetch
    def fetch_offsets(self, group_id: str, partitions: list | None, require_stable: bool = False):
        """Returns (group error, [((topic, partition), OffsetAndMetadata | None, error)]).
        ``partitions=None`` means every partition the group has an offset for."""
        err = self._validate_group_status(group_id, "fetch")
        if err:
            return err, []
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return E.NONE, [(tp, None, E.NONE) for tp in (partitions or [])]
        tps = list(group.offsets) if partitions is None else partitions
        out = []
        for tp in tps:
            tp = (tp[0], tp[1])
            if require_stable and group.has_pending_commit(tp):
                out.append((tp, None, E.UNSTABLE_OFFSET_COMMIT))
            else:
                out.append((tp, group.offsets.get(tp), E.NONE))
        return E.NONE, out

    # ================================================================== OffsetDelete
    async def delete_offsets(self, group_id: str, partitions: list):
        """Returns (group error, {(topic, partition): error}); with a group error the dict is empty."""
        err = self._validate_group_status(group_id, "offset_delete")
        if err:
            return err, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return E.GROUP_ID_NOT_FOUND, {}
        result = {}
        if group.is_(EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group or (group.modern is not None and group.modern.kind == "streams"):
            # a streams group (Kafka 4.2): the topology's input topics are its subscription
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to_topic(tp[0]):
                    result[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return E.NON_EMPTY_GROUP, {}
        if eligible and group.modern is not None:
            # a consumer or streams group: Kafka 4.x's coordinator deletes the offsets only; an
            # empty group without offsets goes at the next periodic cleanup (expire_offsets)
            err = await self._drop_offsets(group, eligible)
            if err:
                return self._modern_write_error(err), {}
        elif eligible:
            await self._cleanup_groups([group], lambda g: g.remove_offsets(eligible))
        for tp in eligible:
            result[tp] = E.NONE
        return E.NONE, result

    async def _drop_offsets(self, group: Group, tps) -> int:
        """Remove the committed offsets of ``tps`` from ``group`` and write their tombstones; the
        group stays, whatever it has left."""
        removed = group.remove_offsets(tps)
        if not removed:
            return E.NONE
        return await self._append(group, [(R.offset_key(group.group_id, t, p), None) for t, p in removed])

    def on_topics_deleted(self, topics) -> None:
        """Kafka's onPartitionsDeleted: the committed (and pending transactional) offsets of
        deleted topics leave every group this broker coordinates, with tombstones, so that a
        topic created again under the same name starts without them (kafka-streams-application-
        reset.sh deletes and Kafka Streams recreates its internal topics).  An Empty classic group
        left without offsets goes Dead, as in Kafka 3.9; the groups of the new protocols stay
        until the periodic cleanup, as in Kafka 4.x."""
        names = set(topics)
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) not in self.owned or group.is_(DEAD):
                continue
            for pending in group.pending_txn_offsets.values():
                for tp in [tp for tp in pending if tp[0] in names]:
                    del pending[tp]
            gone = [tp for tp in group.offsets if tp[0] in names]
            if not gone:
                continue
            log.info("removing %d offsets of deleted topics from group %s", len(gone), group.group_id)
            removed = group.remove_offsets(gone)        # at once: a second event finds nothing
            if group.modern is not None:
                self._spawn(self._append(group, [(R.offset_key(group.group_id, t, p), None) for t, p in removed]))
            else:
                self._spawn(self._cleanup_groups([group], lambda g, removed=removed: removed))

    # ================================================================== DeleteGroups
    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        result: dict[str, int] = {}
        eligible = []
        for gid in group_ids:
            err = self._validate_group_status(gid, "delete")
            if err:
                result[gid] = err
                continue
            group = self.groups.get(gid)
            if (group is None or group.is_(DEAD)) and self.is_share_group(gid):
                result[gid] = await self.share.delete_group(gid)
            elif group is None or group.is_(DEAD):
                result[gid] = E.GROUP_ID_NOT_FOUND
            elif group.is_(EMPTY):
                group.transition_to(DEAD, self.timers.now_ms())
                eligible.append(group)
            else:
                result[gid] = E.NON_EMPTY_GROUP
        if eligible:
            removed = await self._cleanup_groups(eligible, lambda g: g.remove_offsets(list(g.offsets)))
            for g in eligible:
                result[g.group_id] = E.NONE
            log.info("deleted groups %s (%d offsets removed)", [g.group_id for g in eligible], removed)
        return result

    # ================================================================== expiry
    async def expire_offsets(self) -> int:
        """One pass of offset expiry over every loaded group; returns the number of offsets removed."""
        now = self.timers.now_ms()
        retention = self._offsets_retention_ms()
        n = await self._cleanup_groups(list(self.groups.values()),
                                       lambda g: g.remove_expired_offsets(now, retention))
        if n:
            log.info("removed %d expired offsets", n)
        return n

    async def _cleanup_groups(self, groups, selector) -> int:
        """Apply ``selector`` (removes offsets from a group, returns them) to each group; Empty
        groups left without offsets become Dead and leave the cache; tombstones follow."""
        total = 0
        for group in groups:
            removed = selector(group)
            if group.is_(EMPTY) and not group.has_offsets:
                log.info("group %s transitioned to Dead in generation %d", group.group_id, group.generation_id)
                group.transition_to(DEAD, self.timers.now_ms())
            tombstones = [(R.offset_key(group.group_id, tp[0], tp[1]), None) for tp in removed]
            if group.is_(DEAD) and self.groups.get(group.group_id) is group:
                self._remove_group(group)
                if group.modern is not None:
                    tombstones += self._modern_tombstones(group)
                elif group.generation_id > 0:
                    tombstones.append((R.group_key(group.group_id), None))
            if tombstones:
                err = await self._append(group, tombstones)
                if err:
                    log.warning("failed to append %d tombstones for group %s: error %d", len(tombstones),
                                group.group_id, err)
                else:
                    total += len(removed)
        return total


def offset_and_metadata(offset: int, leader_epoch: int, metadata: str | None, commit_timestamp: int,
                        expire_timestamp: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, leader_epoch, metadata or "", commit_timestamp, expire_timestamp)

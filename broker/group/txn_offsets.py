"""Transactional offset commits (TxnOffsetCommit) — mixin of GroupCoordinator.

A transactional producer commits a consumer group's offsets as part of its transaction
(``send_offsets_to_transaction``): the offsets are written to the group's ``__consumer_offsets``
partition as a transactional batch of that producer, and kept in
``group.pending_txn_offsets[producer_id]`` — invisible to OffsetFetch (``require_stable`` fetches
see UNSTABLE_OFFSET_COMMIT) — until the transaction coordinator's marker reaches that partition:
``complete_txn`` then moves them into the committed offsets (COMMIT) or drops them (ABORT).

On loading, ``ConsumerOffsetsLog.read`` already resolved the transactions that have a marker;
the ones still open come from ``take_open_transactions`` and go back to pending.

Simplification: Kafka keeps a plain commit that was appended after a transactional one but
before its COMMIT marker; here the marker's offsets win while the broker runs (loading applies
Kafka's rule).
"""
from __future__ import annotations

import asyncio
import logging

from protocol.errors import ErrorCode as E, code_for_exception

from broker.group import records as R
from broker.group.group import DEAD, Group, OffsetAndMetadata

log = logging.getLogger("odradek.group")


class TxnOffsetsMixin:
    async def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                 group_instance_id: str | None, generation_id: int, offsets: dict) -> dict:
        """``offsets``: {(topic, partition): OffsetAndMetadata}.  Returns {(topic, partition): error}."""
        def all_(code):
            return {tp: code for tp in offsets}

        refused: dict = {}
        err = self._validate_group_status(group_id, "txn_commit")
        if err:
            return all_(err)
        group = self.groups.get(group_id)
        if group is None:
            group = self._add_group(Group(group_id, self.timers.now_ms()))
        if group.is_(DEAD):
            return all_(E.COORDINATOR_NOT_AVAILABLE)
        if group.modern is not None:
            if member_id or generation_id >= 0:
                err = self._validate_modern_commit(group, member_id, generation_id, None, transactional=True)
                if callable(err):       # a streams member's older epoch: decided per partition
                    refused = {tp: e for tp, e in ((tp, err(*tp)) for tp in offsets) if e}
                    offsets = {tp: om for tp, om in offsets.items() if tp not in refused}
                elif err:
                    return all_(err)
        else:
            if group_instance_id is not None and group.static_members.get(group_instance_id) not in (None, member_id):
                return all_(E.FENCED_INSTANCE_ID)
            if member_id and not group.has(member_id):
                return all_(E.UNKNOWN_MEMBER_ID)
            if generation_id >= 0 and generation_id != group.generation_id:
                return all_(E.ILLEGAL_GENERATION)
        max_meta = self._max_metadata_bytes()
        result, valid = dict(refused), {}
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
        pending = group.pending_txn_offsets.setdefault(producer_id, {})
        inflight = group.inflight_txn_offsets.setdefault(producer_id, set())
        inflight.update(valid)
        try:
            async with group.write_lock:
                err = self._commit_error(await self._append_txn(group, records, producer_id, producer_epoch))
        finally:
            inflight.difference_update(valid)
            if not inflight:
                group.inflight_txn_offsets.pop(producer_id, None)
        if not err and not group.is_(DEAD):
            pending = group.pending_txn_offsets.setdefault(producer_id, pending)
            pending.update(valid)
        elif not pending:
            group.pending_txn_offsets.pop(producer_id, None)
        for tp in valid:
            result[tp] = err
        return result

    async def _append_txn(self, group: Group, records, producer_id: int, producer_epoch: int) -> int:
        partition = self.partition_for(group.group_id)
        if partition not in self.owned:
            return E.NOT_LEADER_OR_FOLLOWER
        append = getattr(self.log, "append_transactional", None)
        if append is None:
            return E.UNSUPPORTED_VERSION
        try:
            await append(partition, records, producer_id, producer_epoch)
            return E.NONE
        except asyncio.CancelledError:
            raise
        except Exception as e:
            code = code_for_exception(e)
            log.warning("transactional offset append for group %s failed: %r (error %d)", group.group_id, e, code)
            return code

    def complete_txn(self, producer_id: int, partitions, commit: bool) -> int:
        """A COMMIT/ABORT marker of ``producer_id`` is in these ``__consumer_offsets`` partitions."""
        partitions = set(partitions)
        for p in partitions & set(self.loading):
            self.loading[p].append((producer_id, commit))   # applied once the partition is loaded
        n = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) not in partitions:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if not pending:
                continue
            if commit and not group.is_(DEAD):
                group.offsets.update(pending)
                n += len(pending)
            log.info("%s %d transactional offsets of producer %d for group %s",
                     "committed" if commit else "dropped", len(pending), producer_id, group.group_id)
        return n

    def _load_open_txn_offsets(self, partition: int) -> None:
        take = getattr(self.log, "take_open_transactions", None)
        if take is None:
            return
        for pid, items in take(partition).items():
            for _offset, key, value in items:
                try:
                    k = R.parse_key(key) if key is not None else None
                    if not isinstance(k, R.OffsetKey) or value is None:
                        continue
                    v = R.parse_offset_value(value)
                except (R.RecordFormatError, ValueError):
                    continue
                if self.partition_for(k.group) != partition:
                    continue
                group = self.groups.get(k.group)
                if group is None:
                    group = self.groups[k.group] = Group(k.group, self.timers.now_ms())
                group.pending_txn_offsets.setdefault(pid, {})[(k.topic, k.partition)] = OffsetAndMetadata(
                    v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)

"""Moving a hosted replica to another of this broker's log dirs (AlterReplicaLogDirs, key 34).

How this works (Kafka's ReplicaAlterLogDirsThread, on the event loop):

* ``alter(tp, dir)`` answers one partition of an AlterReplicaLogDirs request with Kafka's error
  code and, when the replica is hosted in another dir, creates its future log there
  (``LogManager.create_future_log``: ``<dir>/<topic>-<p>.<uuid hex>-future``) and starts a copy
  task.  A request for a replica this broker does not host yet records the dir, so the log is
  created there later (REPLICA_NOT_AVAILABLE meanwhile, as Kafka answers); one for the dir the
  replica is in already cancels a move under way to another dir.
* The copy task reads whole batches from the current log, from the future log's end, and
  appends them with ``append_as_follower`` (offsets, leader epochs, producer state and aborted
  transactions come with the batches), 1 MiB at a time with a yield to the loop in between.
  A truncation of the current log (a follower's, after a leader change) starts the copy again
  from the current log's start; retention past the copy leaves a gap below the start, as a
  follower's log may have, and a current log emptied by it restarts the copy at its end.
* Caught up, it fsyncs the future log off the loop, copies what arrived meanwhile without
  yielding, and swaps (``LogManager.replace_current_with_future``): from that step on the
  partition's ``Partition.log`` is the new one.  Handlers read ``part.log`` when they use it, and
  the replaced log refuses appends, so nothing can be written to the old copy.
* ``replica.alter.log.dirs.io.max.bytes.per.second`` (a dynamic broker config, as in Kafka;
  kafka-reassign-partitions.sh ``--replica-alter-log-dirs-throttle`` sets it) paces the copy:
  after each chunk the task sleeps as long as the chunk takes at that rate.
* Compaction of a moving log is paused (storage/cleaner.py skips it), as in Kafka.
* A broker that stops during a copy finds the ``-future`` directory at start-up and the copy
  goes on once the partition is hosted again (``ensure``).
"""
from __future__ import annotations

import asyncio
import logging

from broker.configdefs import LONG_MAX
from protocol.errors import ErrorCode as E
from storage.errors import OffsetOutOfRangeError
from storage.log import future_dir_name

log = logging.getLogger("odradek.logdirs")

CHUNK = 1 << 20
THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"


def first_batch_base(lg) -> int:
    """Base offset of the batch holding the log start offset (the log end offset if empty)."""
    for _, h in lg.stored_batches(lg.log_start_offset, chunk=64 * 1024):
        return min(h.base_offset, lg.log_start_offset)
    return lg.log_start_offset


def copy_some(cur, fut, budget: int = CHUNK) -> int:
    """Append the current log's whole batches after the future log's end, about ``budget``
    bytes (at least one batch); returns the bytes appended."""
    start = fut.log_end_offset
    if start >= cur.log_end_offset:
        return 0
    if cur.log_start_offset >= cur.log_end_offset:
        # retention or DeleteRecords emptied the current log past the copy: nothing to read,
        # the future log just starts where the current one ends
        fut.truncate_fully_and_start_at(cur.log_end_offset)
        return 0
    # from the batch holding ``start``; below the current log's start (the copy began with the
    # batch that holds it, or retention passed the copy) from the batch holding that start,
    # which may leave a gap in the copy's offsets below the start, as a follower's log may have
    data = cur.read_bytes(max(start, cur.log_start_offset), budget, max_offset=cur.log_end_offset)
    return fut.append_new_batches(data)


class LogDirMover:
    def __init__(self, broker):
        self.broker = broker
        self.tasks: dict[tuple[str, int], asyncio.Task] = {}
        self.completed = 0      # moves finished since start (tests, metrics)

    # -- AlterReplicaLogDirs -----------------------------------------------------------------
    def alter(self, topic: str, partition: int, dest: str) -> int:
        """One partition of an AlterReplicaLogDirs request; returns its error code."""
        lm = self.broker.log_manager
        tp = (topic, partition)
        if len(future_dir_name(topic, partition)) > 255:
            return E.INVALID_TOPIC_EXCEPTION        # Kafka: "The topic name is too long."
        if not lm.is_log_dir(dest):
            return E.LOG_DIR_NOT_FOUND
        if dest in lm.offline_dirs:
            return E.KAFKA_STORAGE_ERROR
        moving_to = lm.future_dir_of.get(tp)
        if moving_to is not None and moving_to != dest:
            self.cancel(tp)                         # redirected, or back to where it is
        part = self.broker.replicas.get(topic, partition) if self.broker.replicas else None
        cur = lm.get_log(topic, partition)
        if part is None or cur is None:
            lm.preferred_dir[tp] = dest             # the log will be created there
            info = self.broker.controller.topic(topic)
            if info is None or partition not in info.partitions:
                return E.UNKNOWN_TOPIC_OR_PARTITION  # as Kafka: not in the metadata at all
            return E.REPLICA_NOT_AVAILABLE
        if lm.log_dir_of[tp] == dest:
            return E.NONE
        if tp not in lm.future_logs:
            lm.create_future_log(tp, dest, first_batch_base(cur))
            log.info("moving %s-%d from %s to %s", topic, partition, lm.log_dir_of[tp], dest)
        self.ensure(tp)
        return E.NONE

    def cancel(self, tp) -> None:
        task = self.tasks.pop(tp, None)
        if task is not None:
            task.cancel()
        self.broker.log_manager.abort_future_log(tp)

    def ensure(self, tp) -> None:
        """Run the copy of ``tp``'s future log, if it has one and none runs."""
        if tp not in self.broker.log_manager.future_logs or tp in self.tasks:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self.tasks[tp] = loop.create_task(self._run(tp), name=f"alter-log-dirs-{tp[0]}-{tp[1]}")

    def stop(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        self.tasks.clear()

    # -- the copy ------------------------------------------------------------------------------
    async def _run(self, tp) -> None:
        lm = self.broker.log_manager
        loop = asyncio.get_running_loop()
        me = asyncio.current_task()
        truncations = None
        try:
            while True:
                state = self._state(tp)
                if state is None:
                    return
                part, cur, fut = state
                if truncations is not None and cur.truncations != truncations:
                    fut.truncate_fully_and_start_at(first_batch_base(cur))
                truncations = cur.truncations
                rate = self._rate()
                try:
                    n = copy_some(cur, fut, CHUNK if rate is None else max(1, min(CHUNK, rate)))
                except OffsetOutOfRangeError:       # the current log's start passed the copy
                    fut.truncate_fully_and_start_at(first_batch_base(cur))
                    continue
                if fut.log_end_offset < cur.log_end_offset:
                    await asyncio.sleep(0 if rate is None else n / max(rate, 1))
                    continue
                job = fut.start_flush()
                await loop.run_in_executor(None, job.run)
                if self._state(tp) != state or cur.truncations != truncations:
                    continue
                fut.finish_flush(job)
                while copy_some(cur, fut, 16 * CHUNK):     # what arrived during the fsync
                    pass
                if fut.log_end_offset != cur.log_end_offset:
                    continue
                self._swap(tp, part, cur)
                return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("moving %s-%d to another log dir failed; the replica stays where it is", *tp)
            if self.tasks.get(tp) is me:
                lm.abort_future_log(tp)
        finally:
            if self.tasks.get(tp) is me:
                del self.tasks[tp]

    def _rate(self) -> int | None:
        rate = self.broker.config.get(THROTTLE)
        return None if rate is None or rate >= LONG_MAX else int(rate)

    def _state(self, tp):
        """(partition, current log, future log), or None when the move is over: the future
        log was dropped or the partition is no longer hosted here."""
        lm = self.broker.log_manager
        fut = lm.future_logs.get(tp)
        cur = lm.get_log(*tp)
        part = self.broker.replicas.get(*tp) if self.broker.replicas else None
        if fut is None or cur is None or part is None or part.log is not cur:
            return None
        return part, cur, fut

    def _swap(self, tp, part, cur) -> None:
        lm = self.broker.log_manager
        old_dir = lm.log_dir_of[tp]
        new = lm.replace_current_with_future(tp, cur.log_start_offset, cur.high_watermark)
        for epoch, start in cur.epoch_cache.entries:
            if epoch > new.epoch_cache.latest_epoch:    # epochs begun without a batch yet
                new.epoch_cache.assign(epoch, start)
        new.producer_state.adopt(cur.producer_state, new.log_end_offset)
        new.delete_old_segments()       # segments the copy holds below the current log's start
        part.log = new
        part.wake()
        self.completed += 1
        log.info("moved %s-%d from %s to %s (log end offset %d)", tp[0], tp[1], old_dir,
                 lm.log_dir_of[tp], new.log_end_offset)
        self.broker.replicas.schedule_dir_removal()

"""LogManager: every partition log in the broker's ``log.dirs``.

How this works:

* ``__init__`` takes an exclusive ``fcntl.flock`` on ``<dir>/.lock`` in every log dir (a second
  process fails with ``LogDirLockedError``), checks/creates ``meta.properties`` (version 0,
  broker.id, cluster.id), removes leftover ``-delete`` directories, and opens every
  ``<topic>-<partition>`` directory.  If ``.kafka_cleanshutdown`` is present the start is
  "clean": no segment is scanned; otherwise each log recovers the segments from its
  recovery point on.  The marker is deleted once loading is done.
* Root checkpoints (recovery-point-offset, replication-offset, log-start-offset) are read at
  start and written by ``checkpoint_*`` methods the broker schedules (Kafka's intervals:
  ``log.flush.offset.checkpoint.interval.ms`` 60 s, ``replica.high.watermark.checkpoint.interval.ms``
  5 s, ``log.flush.start.offset.checkpoint.interval.ms`` 60 s) and at ``shutdown``.
* ``shutdown`` flushes and closes every log, writes all checkpoints with recovery point = log
  end offset, writes ``.kafka_cleanshutdown`` and releases the locks.
* ``delete_log`` renames the log's directory to ``<name>.<uuid hex>-delete``, closes its files
  after ``file.delete.delay.ms`` (as Kafka does: fetch answers already handed out read them)
  and ``remove_deleted_dirs`` (may run in an executor) removes it.
* A replica moving to another log dir (AlterReplicaLogDirs) has a second, "future" log in
  ``<dest>/<name>.<uuid hex>-future`` (``future_logs``), which the broker fills from the
  current one (broker/log_dir_mover.py).  ``replace_current_with_future`` swaps them: the
  current directory becomes ``-delete`` first (from then on the future copy is the one that
  counts: a ``-future`` directory found alone at start-up is promoted), then the future one
  takes the partition's name and is opened as the partition's log.  The replaced Log's files
  stay open for ``file.delete.delay.ms``, so fetch regions already handed out still read.  A
  partition found twice at start-up (a crash between the two renames on two file systems
  whose renames did not both reach the disk) keeps the copy with the higher log end offset.

* A failed log dir (Kafka's LogDirFailureChannel): an I/O error other than a full disk
  (``errors.is_log_dir_failure``) reported with ``report_error`` goes to
  ``dir_failure_listener`` (the broker; it may be called from any thread), which calls
  ``fail_dir`` on the loop.  ``fail_dir`` takes the dir offline: its logs leave ``logs`` for
  ``offline_logs`` (their files are closed after ``file.delete.delay.ms``, as a deleted log's),
  no checkpoint or clean-shutdown marker is written there again, no new log is placed there,
  and ``get_or_create_log`` refuses an offline partition rather than start it empty elsewhere.
  At start-up a dir that cannot be created, locked, read or loaded (an OSError) starts offline;
  with no dir left online the start fails.

Threading: same rule as Log — one thread at a time (the event loop).  Loading at start-up and
``shutdown`` happen before/after serving and may run in an executor as a whole.
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import uuid

from .checkpoint import (CheckpointError, read_offsets_checkpoint, write_atomic,
                         write_offsets_checkpoint)
from .config import LogConfig
from .errors import LogDirLockedError, StorageError, is_log_dir_failure
from .meta_properties import META_PROPERTIES, read_properties
from .log import Log, future_dir_name, now_ms, parse_log_dir_name

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_SUFFIX = "-delete"

logger = logging.getLogger("odradek.logmanager")


def _rename_for_deletion(path: str, tp, d: str) -> str:
    """Rename a partition directory in log dir ``d`` to ``<name>.<uuid hex>-delete``."""
    name = f"{tp[0]}-{tp[1]}"
    target = os.path.join(d, f"{name[:255 - 40]}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
    os.replace(path, target)
    return target


class LogManager:
    """Owns the log dirs and every Log in them."""

    def __init__(self, log_dirs: list[str], default_config: LogConfig | None = None, *,
                 broker_id: int = 0, cluster_id: str | None = None, topic_configs=None,
                 time_ms=now_ms):
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self.topic_configs = topic_configs or (lambda topic: self.default_config)
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.time_ms = time_ms
        self.logs: dict[tuple[str, int], Log] = {}
        self.log_dir_of: dict[tuple[str, int], str] = {}
        self._locks: dict[str, int] = {}
        self.clean_start: dict[str, bool] = {}
        self.offline_dirs: set[str] = set()
        self.future_logs: dict[tuple[str, int], Log] = {}      # replicas moving to another dir
        self.future_dir_of: dict[tuple[str, int], str] = {}
        self.preferred_dir: dict[tuple[str, int], str] = {}    # AlterReplicaLogDirs before the log exists
        self._retired: list[tuple[int, Log]] = []              # replaced logs: (close after, log)
        self.offline_logs: dict[tuple[str, int], str] = {}    # partition -> its offline log dir
        self.dir_failure_listener = None    # callable(dir, exc), any thread; None: fail_dir at once
        try:
            for d in self.log_dirs:
                try:
                    os.makedirs(d, exist_ok=True)
                    self._lock(d)
                    self._check_meta(d)
                except LogDirLockedError:
                    raise
                except OSError as e:
                    self._start_offline(d, e)
            for d in self.online_dirs:
                try:
                    self._load_dir(d)
                except OSError as e:
                    self._start_offline(d, e)
            if not self.online_dirs:
                raise StorageError("no log dir is online: " + ", ".join(self.log_dirs))
            self._promote_lone_futures()
        except BaseException:
            self._unlock_all()
            for lg in (*self.logs.values(), *self.future_logs.values()):
                lg.close_handles()
            raise

    @property
    def online_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def _start_offline(self, d: str, exc: OSError) -> None:
        logger.error("Error while loading log dir %s: %s; it stays offline", d, exc)
        self.fail_dir(d)
        fd = self._locks.pop(d, None)
        if fd is not None:
            os.close(fd)

    # -- start-up ---------------------------------------------------------------------------
    def _lock(self, d: str) -> None:
        fd = os.open(os.path.join(d, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise LogDirLockedError(
                    f"log dir {d} is in use by another process (could not lock {LOCK_FILE})"
                ) from None
            raise
        self._locks[d] = fd

    def _unlock_all(self) -> None:
        for fd in self._locks.values():
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._locks.clear()

    def _check_meta(self, d: str) -> None:
        path = os.path.join(d, META_PROPERTIES)
        if os.path.exists(path):
            props = read_properties(path)
            bid = int(props.get("broker.id", props.get("node.id", "-1")))
            if self.broker_id >= 0 and bid != self.broker_id:
                raise StorageError(f"{path}: broker.id {bid} does not match configured "
                                   f"{self.broker_id}")
            cid = props.get("cluster.id")
            if self.cluster_id is not None and cid not in (None, self.cluster_id):
                raise StorageError(f"{path}: cluster.id {cid} does not match {self.cluster_id}")
            if self.cluster_id is None:
                self.cluster_id = cid
            if self.broker_id < 0:
                self.broker_id = bid
        elif self.cluster_id is not None:
            self.write_meta_properties(d)

    def write_meta_properties(self, d: str) -> None:
        text = f"#\n#Written by Odradek\nversion=0\nbroker.id={self.broker_id}\n"
        if self.cluster_id:
            text += f"cluster.id={self.cluster_id}\n"
        write_atomic(os.path.join(d, META_PROPERTIES), text.encode())

    def _read_cp(self, d: str, name: str) -> dict:
        try:
            return read_offsets_checkpoint(os.path.join(d, name))
        except CheckpointError:
            return {}   # treated as missing: recovery from the start is always safe

    def _load_dir(self, d: str) -> None:
        marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        self.clean_start[d] = clean
        rps = self._read_cp(d, RECOVERY_POINT_CHECKPOINT)
        hws = self._read_cp(d, REPLICATION_OFFSET_CHECKPOINT)
        starts = self._read_cp(d, LOG_START_OFFSET_CHECKPOINT)
        with os.scandir(d) as it:       # d_type from the listing: no stat per entry
            entries = sorted((e.name, e.path, e.is_dir()) for e in it)
        for name, path, is_dir in entries:
            if name.endswith(DELETE_SUFFIX) and is_dir:
                shutil.rmtree(path, ignore_errors=True)
                continue
            if not is_dir or name.endswith("-stray"):
                continue
            try:
                topic, partition, future = parse_log_dir_name(name)
            except ValueError:
                continue
            tp = (topic, partition)
            logs, dir_of = (self.future_logs, self.future_dir_of) if future else (self.logs, self.log_dir_of)
            if future and tp in logs:       # two moves' leftovers: the copy is started again
                _rename_for_deletion(path, tp, d)
                continue
            log_ = Log(path, self.topic_configs(topic), recovery_point=rps.get(tp, 0),
                       log_start_offset=starts.get(tp), high_watermark=hws.get(tp),
                       clean_shutdown=clean, time_ms=self.time_ms)
            other = logs.get(tp)
            if other is not None:
                log_ = self._keep_one(tp, other, dir_of[tp], log_, d)
                if log_ is other:
                    continue
            logs[tp] = log_
            dir_of[tp] = d
        if clean:
            os.unlink(marker)
        else:
            # make recovery durable in the checkpoints right away
            self._write_dir_checkpoints(d)

    @staticmethod
    def _discard(log_: Log, d: str) -> None:
        """Close ``log_`` without a snapshot and rename its directory to ``-delete``."""
        log_.close_handles()
        _rename_for_deletion(log_.dir, (log_.topic, log_.partition), d)

    def _keep_one(self, tp, first: Log, first_dir: str, second: Log, second_dir: str) -> Log:
        """The same partition in two log dirs (a move's two renames, on two file systems, did
        not both reach the disk before a crash): both copies were equal when the move swapped
        them and only the new one was written after, so the one with the higher log end offset
        is kept (the first found on a tie) and the other is deleted."""
        keep, drop, drop_dir = (second, first, first_dir) \
            if second.log_end_offset > first.log_end_offset else (first, second, second_dir)
        logger.warning(
            "%s-%d found in %s and %s: keeping %s (log end offset %d against %d)", tp[0], tp[1],
            first.dir, second.dir, keep.dir, keep.log_end_offset, drop.log_end_offset)
        self._discard(drop, drop_dir)
        return keep

    def _promote_lone_futures(self) -> None:
        """A future log without a current one: the broker stopped between the swap's two
        renames, after the current copy had become ``-delete`` — the future copy is complete
        and becomes the partition's log."""
        for tp in [tp for tp in self.future_logs if tp not in self.logs]:
            fut = self.future_logs.pop(tp)
            d = self.future_dir_of.pop(tp)
            fut.close()
            final = os.path.join(d, f"{tp[0]}-{tp[1]}")
            os.replace(fut.dir, final)
            self.logs[tp] = Log(final, self.topic_configs(tp[0]), recovery_point=fut.recovery_point,
                                log_start_offset=fut.log_start_offset, high_watermark=fut.high_watermark,
                                clean_shutdown=True, time_ms=self.time_ms)
            self.log_dir_of[tp] = d

    # -- logs -------------------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                          topic_id: str | None = None, is_new: bool = True) -> Log:
        """The partition's log, created in an online dir if there is none.  A partition whose
        dir is offline is refused, and so is one that is not new (``is_new``: the controller
        created it just now) while any dir is offline: its log may be in that dir, and starting
        it empty elsewhere would hide the data (Kafka's rule)."""
        tp = (topic, partition)
        log = self.logs.get(tp)
        if log is None:
            if tp in self.offline_logs:
                raise StorageError(f"the log dir {self.offline_logs[tp]} of {topic}-{partition} "
                                   "is offline")
            if not is_new and self.offline_dirs:
                raise StorageError(f"cannot create a log for {topic}-{partition}: log dirs "
                                   f"{', '.join(sorted(self.offline_dirs))} are offline")
            d = self.preferred_dir.pop(tp, None)
            if d not in self.log_dirs or d in self.offline_dirs:
                d = self._pick_dir()
            log = Log(os.path.join(d, f"{topic}-{partition}"),
                      config or self.topic_configs(topic), time_ms=self.time_ms,
                      topic_id=topic_id)
            self.logs[tp] = log
            self.log_dir_of[tp] = d
        elif topic_id is not None:
            log.set_topic_id(topic_id)
        return log

    def _pick_dir(self) -> str:
        """The online dir with the fewest partitions (Kafka's rule)."""
        online = self.online_dirs
        if not online:
            raise StorageError("no online log directory")
        counts = {d: 0 for d in online}
        for tp, d in self.log_dir_of.items():
            if d in counts:
                counts[d] += 1
        return min(online, key=lambda d: (counts[d], online.index(d)))

    # -- moving a replica to another log dir (AlterReplicaLogDirs) ---------------------------
    def is_log_dir(self, path: str) -> bool:
        """``path`` names one of the log dirs exactly, as Kafka compares it (absolute)."""
        return path in self.log_dirs

    def create_future_log(self, tp, dest: str, start_offset: int, topic_id: str | None = None) -> Log:
        """An empty future log for ``tp`` in the log dir ``dest``, starting at ``start_offset``."""
        dest = os.path.abspath(dest)
        cur = self.logs[tp]
        fut = Log(os.path.join(dest, future_dir_name(*tp)), cur.config, log_start_offset=start_offset,
                  time_ms=self.time_ms, topic_id=topic_id or cur.topic_id)
        self.future_logs[tp] = fut
        self.future_dir_of[tp] = dest
        return fut

    def abort_future_log(self, tp) -> None:
        """Drop the future log of ``tp`` (a move cancelled, redirected or of a deleted log)."""
        fut = self.future_logs.pop(tp, None)
        d = self.future_dir_of.pop(tp, None)
        if fut is not None:
            self._discard(fut, d)

    def replace_current_with_future(self, tp, log_start_offset: int, high_watermark: int) -> Log:
        """Make the caught-up future log of ``tp`` the partition's log (loop only; nothing may
        append between the caller's last copy and this call).  Returns the new Log."""
        cur, fut = self.logs[tp], self.future_logs.pop(tp)
        cur_dir, dest = self.log_dir_of[tp], self.future_dir_of.pop(tp)
        if fut.log_end_offset != cur.log_end_offset:
            raise StorageError(f"future log of {tp[0]}-{tp[1]} is at {fut.log_end_offset}, "
                               f"the current one at {cur.log_end_offset}")
        recovery_point = fut.recovery_point
        fut.close()
        # the commit point: once the current directory is "-delete", the future copy counts
        _rename_for_deletion(cur.dir, tp, cur_dir)
        final = os.path.join(dest, f"{tp[0]}-{tp[1]}")
        os.replace(fut.dir, final)
        new = Log(final, cur.config, recovery_point=recovery_point,
                  log_start_offset=log_start_offset, high_watermark=high_watermark,
                  clean_shutdown=True, time_ms=self.time_ms, topic_id=cur.topic_id)
        self.logs[tp] = new
        self.log_dir_of[tp] = dest
        # in-flight fetch regions still read the old files: close them later (Kafka deletes a
        # replaced log's files after file.delete.delay.ms too)
        self._retire(cur)
        return new

    def close_retired_logs(self, now: int | None = None, force: bool = False) -> int:
        """Close the files of replaced logs whose delay has passed; returns how many."""
        now = self.time_ms() if now is None else now
        due = [lg for t, lg in self._retired if force or t <= now]
        self._retired = [(t, lg) for t, lg in self._retired if not (force or t <= now)]
        for lg in due:
            try:
                lg.close_handles()
            except OSError as e:        # a failed disk may fail close too; the fds are gone
                logger.warning("closing the files of %s: %s", lg.dir, e)
        return len(due)

    def delete_log(self, topic: str, partition: int) -> str | None:
        """Rename the log's dir to ``<name>.<uuid>-delete`` and return that path; the log refuses
        appends at once and its files are closed after ``file.delete.delay.ms``
        (``close_retired_logs``), so fetch regions already handed out never read a descriptor
        that was closed and reused meanwhile.  Call ``remove_deleted_dirs`` (off-loop is fine)
        to remove the files."""
        tp = (topic, partition)
        self.preferred_dir.pop(tp, None)
        self.offline_logs.pop(tp, None)     # its files stay in the failed dir
        self.abort_future_log(tp)
        lg = self.logs.pop(tp, None)
        d = self.log_dir_of.pop(tp, None)
        if lg is None:
            return None
        path = _rename_for_deletion(lg.dir, tp, d)
        self._retire(lg)
        return path

    def _retire(self, lg: Log) -> None:
        lg.closed = True        # refuses appends from here on
        self._retired.append((self.time_ms() + lg.config.file_delete_delay_ms, lg))

    def remove_deleted_dirs(self) -> None:
        for d in self.online_dirs:
            for name in os.listdir(d):
                if name.endswith(DELETE_SUFFIX):
                    shutil.rmtree(os.path.join(d, name), ignore_errors=True)

    # -- failed log dirs ---------------------------------------------------------------------
    def dir_of(self, tp) -> str | None:
        return self.log_dir_of.get(tp)

    def report_error(self, where, exc: BaseException) -> bool:
        """An error from an operation on a log dir (``where``: a partition or a dir path).  If
        it means the dir failed (not a full disk), the dir goes to ``dir_failure_listener`` (or
        offline at once without one) and True is returned."""
        if where is None or not is_log_dir_failure(exc):
            return False
        d = where if isinstance(where, str) else self.log_dir_of.get(where)
        if d is None or d in self.offline_dirs:
            return d is not None
        listener = self.dir_failure_listener
        if listener is None:
            self.fail_dir(d)
        else:
            listener(d, exc)
        return True

    def fail_dir(self, d: str) -> list[tuple[str, int]]:
        """Take the log dir ``d`` offline (loop only); returns the partitions whose current log
        was there.  Their logs stop taking appends now and their files are closed after
        ``file.delete.delay.ms`` (fetch answers already handed out may still read them)."""
        d = os.path.abspath(d)
        if d not in self.log_dirs or d in self.offline_dirs:
            return []
        self.offline_dirs.add(d)
        for tp in [tp for tp, x in self.future_dir_of.items() if x == d]:
            fut = self.future_logs.pop(tp)
            del self.future_dir_of[tp]
            self._retire(fut)
        tps = [tp for tp, x in self.log_dir_of.items() if x == d]
        for tp in tps:
            lg = self.logs.pop(tp)
            del self.log_dir_of[tp]
            self.offline_logs[tp] = d
            self._retire(lg)
            try:
                self.abort_future_log(tp)   # a copy of an offline log cannot go on
            except OSError as e:
                logger.error("dropping the future log of %s-%d failed: %s", tp[0], tp[1], e)
        for tp in [tp for tp, x in self.preferred_dir.items() if x == d]:
            del self.preferred_dir[tp]
        logger.error("Logs for partitions %s are offline due to failure on log directory %s",
                     ",".join(f"{t}-{p}" for t, p in sorted(tps)) or "(none)", d)
        return tps

    # -- periodic tasks ---------------------------------------------------------------------
    def _logs_in(self, d: str):
        """Current and future logs in ``d`` (a partition's two copies are never in one dir)."""
        out = {tp: log for tp, log in self.logs.items() if self.log_dir_of[tp] == d}
        for tp, log in self.future_logs.items():
            if self.future_dir_of[tp] == d:
                out[tp] = log
        return out

    # Each checkpoint is taken in two steps so the broker can keep fsync off its event loop: the
    # ``*_files()`` snapshot (which file gets which offsets) is read on the loop, and
    # ``write_checkpoint_files`` writes and fsyncs those files anywhere, one writer at a time.
    def _checkpoint_files(self, name, value, keep=None) -> list:
        return [(os.path.join(d, name),
                 {tp: value(l) for tp, l in self._logs_in(d).items() if keep is None or keep(l)})
                for d in self.online_dirs]

    def recovery_point_files(self) -> list:
        return self._checkpoint_files(RECOVERY_POINT_CHECKPOINT, lambda l: l.recovery_point)

    def high_watermark_files(self) -> list:
        return self._checkpoint_files(REPLICATION_OFFSET_CHECKPOINT, lambda l: l.high_watermark)

    def log_start_offset_files(self) -> list:
        return self._checkpoint_files(LOG_START_OFFSET_CHECKPOINT, lambda l: l.log_start_offset,
                                      lambda l: l.log_start_offset > l.segments[0].base_offset)

    def write_checkpoint_files(self, files) -> None:
        """Write each file; a failure is reported against its log dir (any thread)."""
        for path, offsets in files:
            try:
                write_offsets_checkpoint(path, offsets)
            except OSError as e:
                logger.error("writing %s failed: %s", path, e)
                self.report_error(os.path.dirname(path), e)

    def checkpoint_recovery_points(self) -> None:
        self.write_checkpoint_files(self.recovery_point_files())

    def checkpoint_high_watermarks(self) -> None:
        self.write_checkpoint_files(self.high_watermark_files())

    def checkpoint_log_start_offsets(self) -> None:
        self.write_checkpoint_files(self.log_start_offset_files())

    def _write_dir_checkpoints(self, d: str) -> None:
        logs = self._logs_in(d)
        write_offsets_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT),
                                 {tp: l.recovery_point for tp, l in logs.items()})
        write_offsets_checkpoint(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT),
                                 {tp: l.high_watermark for tp, l in logs.items()})
        write_offsets_checkpoint(os.path.join(d, LOG_START_OFFSET_CHECKPOINT),
                                 {tp: l.log_start_offset for tp, l in logs.items()
                                  if l.log_start_offset > l.segments[0].base_offset})

    def cleanup_logs(self, now: int | None = None) -> int:
        """Retention pass over every log (``log.retention.check.interval.ms``)."""
        now = self.time_ms() if now is None else now
        deleted = 0
        for tp, log in list(self.logs.items()):
            try:
                deleted += log.delete_old_segments(now)
                log.delete_expired_files(now)
            except (OSError, StorageError) as e:
                logger.error("retention of %s-%d failed: %s", tp[0], tp[1], e)
                self.report_error(tp, e)
        for tp, log in list(self.future_logs.items()):
            try:
                log.delete_expired_files(now)
            except (OSError, StorageError) as e:
                self.report_error(self.future_dir_of.get(tp), e)
        self.close_retired_logs(now)
        return deleted

    def remove_expired_producers(self, expiration_ms: int, now: int | None = None) -> int:
        """Kafka's producer-state expiry (``producer.id.expiration.ms``, checked every
        ``producer.id.expiration.check.interval.ms``): every log forgets the producers whose
        last batch's max timestamp is ``expiration_ms`` old or more and that have no open
        transaction.  Returns how many entries went."""
        now = self.time_ms() if now is None else now
        return sum(lg.producer_state.remove_expired(now, expiration_ms) for lg in list(self.logs.values()))

    def flush_dirty_logs(self, now: int | None = None) -> list:
        """Logs whose flush policy asks for an fsync now (broker runs their FlushJobs)."""
        now = self.time_ms() if now is None else now
        return [log for log in self.logs.values() if log.flush_due(now)]

    def dir_sizes(self) -> dict[str, dict[tuple[str, int], int]]:
        """DescribeLogDirs: {dir: {(topic, partition): bytes}} of the current logs."""
        out = {d: {} for d in self.log_dirs}
        for tp, log in self.logs.items():
            try:
                out[self.log_dir_of[tp]][tp] = log.size()
            except OSError as e:
                self.report_error(tp, e)
        return out

    def future_dir_sizes(self) -> dict[str, dict[tuple[str, int], tuple[int, int]]]:
        """DescribeLogDirs: {dir: {(topic, partition): (bytes, offset lag)}} of the future logs;
        the lag is how far the future log's end is behind the current one's."""
        out = {d: {} for d in self.log_dirs}
        for tp, log in self.future_logs.items():
            cur = self.logs.get(tp)
            lag = max(0, cur.log_end_offset - log.log_end_offset) if cur is not None else 0
            out[self.future_dir_of[tp]][tp] = (log.size(), lag)
        return out

    # -- shutdown ---------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints and the clean-shutdown marker."""
        try:
            for log in (*self.logs.values(), *self.future_logs.values()):
                log.flush()
                log.close()
            self.close_retired_logs(force=True)
            for d in self.online_dirs:
                self._write_dir_checkpoints(d)
                write_atomic(os.path.join(d, CLEAN_SHUTDOWN_FILE),
                             b'{"version":0,"brokerEpoch":-1}')
        finally:
            self._unlock_all()

    def close_without_checkpoint(self) -> None:
        """Simulated crash: drop descriptors and locks, write nothing."""
        for log in (*self.logs.values(), *self.future_logs.values()):
            log.close_handles()
        self.close_retired_logs(force=True)
        self._unlock_all()

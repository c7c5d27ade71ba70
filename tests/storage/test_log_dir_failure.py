"""A failed log dir (Kafka's LogDirFailureChannel), in the log manager alone: which errors take a
dir offline, what fail_dir does to its logs and checkpoints, and dirs that fail at start-up."""
import errno
import os

import pytest

from storage.config import LogConfig
from storage.errors import StorageError, is_log_dir_failure
from storage.log_manager import (CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT, LogManager)
from tests.storage.helpers import make_batch


def cfg():
    return LogConfig(segment_bytes=10_000, index_interval_bytes=64, segment_index_bytes=4096)


def two_dirs(tmp_path, clock):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    lm = LogManager([a, b], cfg(), broker_id=1, cluster_id="c", time_ms=clock)
    return lm, os.path.abspath(a), os.path.abspath(b)


@pytest.mark.parametrize("exc, failed", [
    (OSError(errno.EIO, "Input/output error"), True),
    (OSError(errno.EROFS, "Read-only file system"), True),
    (OSError(errno.ENOSPC, "No space left on device"), False),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), False),
    (StorageError("log is closed"), False),
    (StorageError("fsync failed: [Errno 28] No space left on device", dir_failure=True), True),
])
def test_which_errors_fail_a_dir(exc, failed):
    assert is_log_dir_failure(exc) is failed


def test_storage_error_carries_the_errno_of_its_cause():
    try:
        try:
            raise OSError(errno.EIO, "Input/output error")
        except OSError as e:
            raise StorageError("write failed") from e
    except StorageError as wrapped:
        assert is_log_dir_failure(wrapped)


def test_fail_dir_takes_its_logs_offline_and_keeps_the_others(tmp_path, clock):
    lm, a, b = two_dirs(tmp_path, clock)
    la = lm.get_or_create_log("t", 0)
    lb = lm.get_or_create_log("t", 1)
    assert (lm.log_dir_of[("t", 0)], lm.log_dir_of[("t", 1)]) == (a, b)
    la.append(make_batch([b"x"]), 0)
    lb.append(make_batch([b"y"]), 0)
    assert lm.fail_dir(b) == [("t", 1)]
    assert lm.fail_dir(b) == []                     # once
    assert lm.online_dirs == [a] and lm.offline_dirs == {b}
    assert ("t", 1) not in lm.logs and lm.offline_logs == {("t", 1): b}
    with pytest.raises(StorageError, match="closed"):
        lb.append(make_batch([b"z"]), 0)            # the offline log takes nothing more
    with pytest.raises(StorageError, match="offline"):
        lm.get_or_create_log("t", 1)                # and is not started empty elsewhere
    # a partition that is not new is refused while a dir is offline (its log may be there) ...
    with pytest.raises(StorageError, match="offline"):
        lm.get_or_create_log("u", 0, is_new=False)
    # ... a new one goes to an online dir
    assert lm.get_or_create_log("u", 1).dir.startswith(a + os.sep)
    assert lm.get_log("t", 0) is la
    la.append(make_batch([b"w"]), 0)
    assert la.log_end_offset == 2
    # checkpoints and the clean-shutdown marker are written to the online dir only
    assert [os.path.dirname(p) for p, _ in lm.recovery_point_files()] == [a]
    lm.shutdown()
    assert os.path.exists(os.path.join(a, CLEAN_SHUTDOWN_FILE))
    assert not os.path.exists(os.path.join(b, CLEAN_SHUTDOWN_FILE))


def test_the_data_of_a_failed_dir_comes_back_with_the_dir(tmp_path, clock):
    """The failed dir's files are left alone: once the disk is back, the next start reads them."""
    lm, a, b = two_dirs(tmp_path, clock)
    lb = lm.get_or_create_log("t", 1)
    lb.append(make_batch([b"y", b"z"]), 0)
    lb.flush()
    lm.fail_dir(b)
    lm.shutdown()
    lm2 = LogManager([a, b], cfg(), broker_id=1, cluster_id="c", time_ms=clock)
    assert lm2.offline_dirs == set()
    assert lm2.get_log("t", 1).log_end_offset == 2
    lm2.shutdown()


def test_report_error_routes_dir_failures_to_the_listener(tmp_path, clock):
    lm, a, b = two_dirs(tmp_path, clock)
    lm.get_or_create_log("t", 0)
    lm.get_or_create_log("t", 1)
    assert lm.log_dir_of[("t", 1)] == b
    seen = []
    lm.dir_failure_listener = lambda d, exc: seen.append((d, exc.errno))
    assert not lm.report_error(("t", 1), OSError(errno.ENOSPC, "full"))
    assert lm.report_error(("t", 1), OSError(errno.EIO, "io"))
    assert lm.report_error(b, OSError(errno.EROFS, "ro"))
    assert not lm.report_error(("nope", 0), OSError(errno.EIO, "io"))
    assert seen == [(b, errno.EIO), (b, errno.EROFS)]
    assert lm.offline_dirs == set()                 # the listener decides
    lm.shutdown()


def test_a_failed_checkpoint_write_reports_its_dir(tmp_path, clock, monkeypatch):
    lm, a, b = two_dirs(tmp_path, clock)
    lm.get_or_create_log("t", 0)
    lm.get_or_create_log("t", 1)
    import storage.log_manager as m
    real = m.write_offsets_checkpoint

    def failing(path, offsets):
        if path.startswith(b + os.sep):
            raise OSError(errno.EIO, "Input/output error")
        real(path, offsets)
    monkeypatch.setattr(m, "write_offsets_checkpoint", failing)
    lm.checkpoint_recovery_points()
    assert lm.offline_dirs == {b}                   # no listener: offline at once
    assert os.path.exists(os.path.join(a, RECOVERY_POINT_CHECKPOINT))
    monkeypatch.setattr(m, "write_offsets_checkpoint", real)
    lm.shutdown()


def test_a_dir_that_cannot_be_opened_starts_offline(tmp_path, clock):
    a = str(tmp_path / "a")
    bad = tmp_path / "not-a-dir"
    bad.write_bytes(b"a file where a log dir should be")
    lm = LogManager([a, str(bad)], cfg(), broker_id=1, cluster_id="c", time_ms=clock)
    assert lm.offline_dirs == {str(bad)} and lm.online_dirs == [os.path.abspath(a)]
    with pytest.raises(StorageError, match="offline"):
        lm.get_or_create_log("t", 0, is_new=False)
    assert lm.get_or_create_log("t", 1).dir.startswith(os.path.abspath(a))
    lm.shutdown()


def test_no_online_dir_fails_the_start(tmp_path, clock):
    bad = tmp_path / "not-a-dir"
    bad.write_bytes(b"x")
    with pytest.raises(StorageError, match="no log dir is online"):
        LogManager([str(bad)], cfg(), broker_id=1, cluster_id="c", time_ms=clock)


def test_a_dir_that_fails_while_loading_starts_offline(tmp_path, clock, monkeypatch):
    lm, a, b = two_dirs(tmp_path, clock)
    lm.get_or_create_log("t", 0).append(make_batch([b"x"]), 0)
    lm.get_or_create_log("t", 1).append(make_batch([b"y"]), 0)
    lm.shutdown()
    real = LogManager._load_dir

    def load(self, d):
        if d == b:
            raise OSError(errno.EIO, "Input/output error")
        real(self, d)
    monkeypatch.setattr(LogManager, "_load_dir", load)
    lm2 = LogManager([a, b], cfg(), broker_id=1, cluster_id="c", time_ms=clock)
    assert lm2.offline_dirs == {b}
    assert lm2.get_log("t", 0).log_end_offset == 1 and lm2.get_log("t", 1) is None
    lm2.shutdown()
    # the lock of the offline dir was released: another process may take the dir
    monkeypatch.setattr(LogManager, "_load_dir", real)
    lm3 = LogManager([a, b], cfg(), broker_id=1, cluster_id="c", time_ms=clock)
    assert lm3.get_log("t", 1).log_end_offset == 1
    lm3.shutdown()

"""``preallocate=true``: a new segment's .log file is made segment.bytes long at once (Kafka's
FileRecords), trimmed to its data when the segment rolls or closes, and after a crash the
zeros past the data are a torn tail that recovery cuts off."""
import os

from protocol.records import iter_batches
from storage.config import LogConfig
from storage.log import Log
from tests.storage.helpers import make_batch

SEG = 64 * 1024


def cfg(preallocate=True):
    return LogConfig(segment_bytes=SEG, index_interval_bytes=256, segment_index_bytes=4096,
                     preallocate=preallocate)


def on_disk(seg):
    return os.path.getsize(seg.log_path)


def values(log):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read_bytes(offset, 1 << 20)
        hs = list(iter_batches(data))
        assert hs, offset
        out += [(h.base_offset, h.last_offset) for h in hs]
        offset = hs[-1].last_offset + 1
    return out


def fill(log, n, size=1000):
    for i in range(n):
        log.append(make_batch([b"%05d" % i + b"x" * size]), 0)


def test_active_segment_is_preallocated_and_trimmed_when_it_rolls(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), cfg(), time_ms=clock)
    fill(log, 10)
    first = log.active
    assert on_disk(first) == SEG and 0 < first.size < SEG
    fill(log, 100)                          # past segment.bytes: rolls
    assert len(log.segments) > 1
    assert on_disk(first) == first.size     # trimmed to its data
    assert on_disk(log.active) == SEG
    assert [b for b, _ in values(log)] == list(range(110))


def test_clean_close_trims_and_reopens_where_it_was(tmp_path, clock):
    d = str(tmp_path / "t-0")
    log = Log(d, cfg(), time_ms=clock)
    fill(log, 30)
    leo, size = log.log_end_offset, log.active.size
    log.close()
    assert os.path.getsize(log.active.log_path) == size
    log2 = Log(d, cfg(), time_ms=clock)
    assert log2.log_end_offset == leo and log2.active.size == size
    fill(log2, 3)
    assert [b for b, _ in values(log2)] == list(range(leo + 3))
    log2.close()


def test_crash_leaves_zeros_that_recovery_cuts_off(tmp_path, clock):
    d = str(tmp_path / "t-0")
    log = Log(d, cfg(), time_ms=clock)
    fill(log, 100)
    leo, active_size = log.log_end_offset, log.active.size
    path = log.active.log_path
    log.flush()
    log.close_handles()                     # kill -9: nothing trimmed
    assert os.path.getsize(path) == SEG
    log2 = Log(d, cfg(), recovery_point=0, clean_shutdown=False, time_ms=clock)
    assert log2.log_end_offset == leo
    assert log2.active.size == active_size and os.path.getsize(path) == active_size
    fill(log2, 5)
    assert [b for b, _ in values(log2)] == list(range(leo + 5))
    log2.close()


def test_off_by_default(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), cfg(preallocate=False), time_ms=clock)
    fill(log, 3)
    assert on_disk(log.active) == log.active.size
    log.close()

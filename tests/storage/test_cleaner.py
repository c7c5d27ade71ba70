"""Log cleaner (compaction): retention rules, offsets, producer state, transactions, crash-safe
swap, choice of logs, checkpoints, and a hypothesis property."""
from __future__ import annotations

import asyncio
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.records import (DELETE_HORIZON_MASK, InvalidRecordError, build_batch,
                              build_control_batch, iter_batches, iter_records)
from storage.cleaner import (CLEANER_OFFSET_CHECKPOINT, CleanerConfig, CleanJob, LogCleaner,
                             Throttler, clean_log, is_cleanable, log_to_clean)
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LogManager
from storage.producer_state import SeqResult

DAY = 86_400_000


def _cfg(**kw):
    base = dict(cleanup_policy="compact", segment_bytes=600, min_cleanable_dirty_ratio=0.0,
                delete_retention_ms=1000)
    base.update(kw)
    return LogConfig(**base)


def _open(path, clock, clean=True, **kw):
    return Log(str(path / "t-0"), _cfg(**kw), time_ms=clock, clean_shutdown=clean)


def put(log, pairs, *, ts=None, pid=-1, epoch=-1, seq=-1, txn=False):
    ts = log.time_ms() if ts is None else ts
    info = log.append(build_batch([(k, v, (), ts) for k, v in pairs], producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq,
                                  is_transactional=txn), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    return info


def marker(log, pid, commit, epoch=0):
    log.append(build_control_batch("COMMIT" if commit else "ABORT", pid, epoch, 0,
                                   timestamp=log.time_ms()), leader_epoch=0, origin="coordinator")
    log.update_high_watermark(log.log_end_offset)


def batches(log):
    """(header, records) of every batch, read through Log.read like a fetch."""
    out = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        data = log.read_bytes(off, 1 << 20)
        if not data:
            break
        for h in iter_batches(data):
            out.append((h, list(iter_records(data, h))))
            off = h.next_offset
    return out


def records(log):
    """(offset, key, value) of every data record, in log order."""
    return [(r.offset, bytes(r.key) if r.key is not None else None,
             bytes(r.value) if r.value is not None else None)
            for h, recs in batches(log) if not h.is_control for r in recs]


def roll(log):
    log.roll()


# -- the basics ----------------------------------------------------------------------------

def test_latest_value_per_key_survives_and_offsets_preserved(tmp_path, clock):
    log = _open(tmp_path, clock)
    expect = {}
    for i in range(60):
        k = b"k%d" % (i % 7)
        info = put(log, [(k, b"v%d" % i)])
        expect[k] = (info.first_offset, b"v%d" % i)
    roll(log)
    put(log, [(b"k0", b"active")])          # the active segment is never cleaned
    assert len(log.segments) > 3
    leo, size_before = log.log_end_offset, log.size()
    end, stats = clean_log(log)
    assert end == log.segments[-1].base_offset == leo - 1
    assert log.log_end_offset == leo and log.log_start_offset == 0
    got = records(log)
    assert got[:-1] == sorted((off, k, v) for k, (off, v) in expect.items())
    assert got[-1] == (leo - 1, b"k0", b"active")
    assert log.size() < size_before and stats.messages_written == 7
    # every surviving record is still found at its offset
    for off, k, v in got:
        assert log.read_bytes(off, 1) != b""
    log.close()
    again = _open(tmp_path, clock, clean=False)
    assert records(again) == got
    again.close()


def test_segments_grouped_within_segment_bytes(tmp_path, clock):
    log = _open(tmp_path, clock, segment_bytes=800)
    for i in range(80):
        put(log, [(b"key%02d" % i, b"x" * 20)])      # all distinct: nothing removed
    roll(log)
    n_before = len(log.segments)
    clean_log(log)
    assert len(log.segments) <= n_before
    assert all(s.size <= 800 for s in log.segments)
    assert len(records(log)) == 80
    # second pass with a larger segment.bytes merges them
    log.config.segment_bytes = 1 << 20
    put(log, [(b"key00", b"new")])
    roll(log)
    clean_log(log, 0, force=True)
    assert len(log.segments) == 2          # one cleaned segment + the active one
    assert len(records(log)) == 80
    log.close()


def test_keyless_records_dropped_and_rejected(tmp_path, clock):
    log = _open(tmp_path, clock)
    with pytest.raises(InvalidRecordError):
        log.append(build_batch([(None, b"v")]), leader_epoch=0)
    # a follower/replica may still carry them (e.g. policy changed later): the cleaner drops them
    log.config.cleanup_policy = "delete"
    put(log, [(None, b"nokey"), (b"a", b"1")])
    log.config.cleanup_policy = "compact"
    roll(log)
    clean_log(log)
    assert records(log) == [(1, b"a", b"1")]
    log.close()


def test_tombstones_kept_until_delete_horizon(tmp_path, clock):
    log = _open(tmp_path, clock, delete_retention_ms=1000)
    put(log, [(b"a", b"1"), (b"b", b"1")])
    put(log, [(b"a", None)])
    roll(log)
    now0 = clock.now
    end, _ = clean_log(log)
    assert records(log) == [(1, b"b", b"1"), (2, b"a", None)]
    tomb = [h for h, recs in batches(log) if any(r.value is None for r in recs)][0]
    assert tomb.attributes & DELETE_HORIZON_MASK and tomb.base_timestamp == now0 + 1000
    (rec,) = [r for h, recs in batches(log) for r in recs if r.value is None]
    assert rec.timestamp == now0           # record timestamps survive the new base timestamp
    # before the horizon: kept
    clock.now += 500
    put(log, [(b"c", b"1")])
    roll(log)
    end, _ = clean_log(log, end)
    assert (2, b"a", None) in records(log)
    # after the horizon: removed
    clock.now += 600
    put(log, [(b"d", b"1")])
    roll(log)
    end, _ = clean_log(log, end)
    assert [r[1] for r in records(log)] == [b"b", b"c", b"d"]
    log.close()


def test_active_segment_and_high_watermark_bound_cleaning(tmp_path, clock):
    log = _open(tmp_path, clock)
    put(log, [(b"a", b"1")])
    put(log, [(b"a", b"2")])
    assert clean_log(log) == (None, None)          # everything is in the active segment
    roll(log)
    put(log, [(b"a", b"3")])
    log.update_high_watermark(1)
    ltc = log_to_clean(log, None, clock.now)
    assert ltc.first_uncleanable == 0 and not is_cleanable(log, ltc)
    log.update_high_watermark(log.log_end_offset)
    clean_log(log)
    assert records(log) == [(1, b"a", b"2"), (2, b"a", b"3")]
    log.close()


def test_dirty_ratio_and_compaction_lags(tmp_path, clock):
    log = _open(tmp_path, clock, min_cleanable_dirty_ratio=0.5)
    for i in range(20):
        put(log, [(b"k%d" % (i % 3), b"x" * 30)])
    roll(log)
    ltc = log_to_clean(log, None, clock.now)
    assert ltc.clean_bytes == 0 and ltc.ratio == 1.0 and is_cleanable(log, ltc)
    end, _ = clean_log(log)
    ltc = log_to_clean(log, end, clock.now)
    assert ltc.ratio == 0.0 and not is_cleanable(log, ltc)
    put(log, [(b"k0", b"y")])
    roll(log)
    ltc = log_to_clean(log, end, clock.now)
    assert 0 < ltc.ratio < 0.5 and not is_cleanable(log, ltc)
    # ratio exactly at the threshold is not enough (Kafka compares with >)
    log.config.min_cleanable_dirty_ratio = ltc.ratio
    assert not is_cleanable(log, ltc)
    log.config.min_cleanable_dirty_ratio = 0.5
    # max.compaction.lag.ms forces cleaning of an old dirty segment
    log.config.max_compaction_lag_ms = 1000
    clock.now += 2000
    ltc = log_to_clean(log, end, clock.now)
    assert ltc.need_compaction_now and is_cleanable(log, ltc)
    # min.compaction.lag.ms keeps young segments out
    log.config.max_compaction_lag_ms = 2 ** 63 - 1
    log.config.min_compaction_lag_ms = 10 * DAY
    ltc = log_to_clean(log, end, clock.now)
    assert ltc.first_uncleanable <= end and not is_cleanable(log, ltc)
    log.close()


def test_checkpoint_outside_log_resets_to_start(tmp_path, clock):
    log = _open(tmp_path, clock)
    put(log, [(b"a", b"1")])
    roll(log)
    put(log, [(b"a", b"2")])
    assert log_to_clean(log, 99, clock.now).first_dirty == 0
    assert log_to_clean(log, -5, clock.now).first_dirty == 0
    log.close()


# -- producers and transactions ------------------------------------------------------------

def test_last_batch_of_active_producer_kept_empty(tmp_path, clock):
    log = _open(tmp_path, clock)
    put(log, [(b"a", b"1"), (b"b", b"1")], pid=5, epoch=0, seq=0)
    put(log, [(b"a", b"2"), (b"b", b"2")])         # supersedes the producer's batch
    roll(log)
    put(log, [(b"z", b"z")])
    clean_log(log)
    hs = [h for h, _ in batches(log)]
    first = hs[0]
    assert first.producer_id == 5 and first.records_count == 0
    assert (first.base_offset, first.last_offset_delta, first.base_sequence) == (0, 1, 0)
    assert records(log)[:2] == [(2, b"a", b"2"), (3, b"b", b"2")]
    # the retry of the producer's last batch is still a duplicate, sequence continues
    log.close()
    again = _open(tmp_path, clock, clean=False)
    for n in os.listdir(again.dir):
        assert not n.endswith(".cleaned") and not n.endswith(".swap")
    retry = build_batch([(b"a", b"1"), (b"b", b"1")], producer_id=5, producer_epoch=0,
                        base_sequence=0)
    check = again.producer_state.check(_header(retry))
    assert check.result is SeqResult.DUPLICATE and check.first_offset == 0
    info = put(again, [(b"c", b"1")], pid=5, epoch=0, seq=2)
    assert not info.duplicate
    again.close()


def _header(buf):
    return next(iter_batches(buf))


def test_aborted_transactions_removed_markers_after_horizon(tmp_path, clock):
    log = _open(tmp_path, clock, delete_retention_ms=1000)
    put(log, [(b"a", b"committed")])                            # 0
    put(log, [(b"a", b"aborted"), (b"b", b"aborted")], pid=7, epoch=0, seq=0, txn=True)  # 1-2
    marker(log, 7, commit=False)                                 # 3
    put(log, [(b"c", b"txn")], pid=8, epoch=0, seq=0, txn=True)  # 4
    marker(log, 8, commit=True)                                  # 5
    put(log, [(b"q", b"1")], pid=9, epoch=0, seq=0)              # 6: 7 and 8 are now
    put(log, [(b"q", b"2")], pid=9, epoch=0, seq=1)              # 7  not the last batches
    # make producers 7 and 8 move on so their markers are not their last entries
    put(log, [(b"x", b"1")], pid=7, epoch=0, seq=2)              # 8
    put(log, [(b"y", b"1")], pid=8, epoch=0, seq=1)              # 9
    roll(log)
    put(log, [(b"z", b"1")])
    assert log.aborted_transactions(0, log.log_end_offset) == [(7, 1)]
    end, _ = clean_log(log)
    got = records(log)
    assert (0, b"a", b"committed") in got and all(v != b"aborted" for _, _, v in got)
    assert (4, b"c", b"txn") in got
    kinds = [(h.base_offset, h.attributes & DELETE_HORIZON_MASK != 0)
             for h, _ in batches(log) if h.is_control]
    # ABORT marker: its data was seen in this pass -> kept without horizon;
    # COMMIT marker: data seen -> kept
    assert [k[0] for k in kinds] == [3, 5]
    # second pass: the abort's data is gone -> marker stamped with a horizon
    put(log, [(b"w", b"1")])
    roll(log)
    end, _ = clean_log(log, end)
    ctrl = {h.base_offset: h for h, _ in batches(log) if h.is_control}
    assert ctrl[3].attributes & DELETE_HORIZON_MASK
    # after the horizon the abort marker goes; the commit marker stays while its data is there
    clock.now += 2000
    put(log, [(b"v", b"1")])
    roll(log)
    clean_log(log, end)
    ctrl = {h.base_offset for h, _ in batches(log) if h.is_control}
    assert 3 not in ctrl and 5 in ctrl
    assert records(log)[0] == (0, b"a", b"committed")
    log.close()


def test_open_transaction_bounds_cleaning(tmp_path, clock):
    log = _open(tmp_path, clock)
    put(log, [(b"a", b"1")])
    put(log, [(b"a", b"open")], pid=3, epoch=0, seq=0, txn=True)  # offset 1, still open
    roll(log)
    put(log, [(b"a", b"3")])
    ltc = log_to_clean(log, None, clock.now)
    assert log.last_stable_offset() == 1 and ltc.first_uncleanable == 0
    assert clean_log(log) == (None, None)
    log.close()


# -- swap and crash safety ----------------------------------------------------------------

def _prepared_job(log, clock):
    ltc = log_to_clean(log, None, clock.now)
    job = CleanJob(log, ltc, clock.now, CleanerConfig().max_map_entries)
    job.run()
    return job


def _fill(log):
    for i in range(40):
        put(log, [(b"k%d" % (i % 5), b"v%d" % i)])
    roll(log)
    put(log, [(b"tail", b"t")])
    log.config.segment_bytes = 1 << 20      # the cleaner makes one group of them all


def _expected_after_clean(tmp_path, clock):
    ref = Log(str(tmp_path / "ref" / "t-0"), _cfg(), time_ms=clock)
    _fill(ref)
    clean_log(ref)
    got = records(ref)
    ref.close()
    return got


@pytest.mark.parametrize("stage", ["cleaned", "swap", "old-deleted", "done"])
def test_crash_during_swap_recovers(tmp_path, clock, stage):
    expected_clean = _expected_after_clean(tmp_path, clock)
    log = _open(tmp_path, clock)
    _fill(log)
    original = records(log)
    job = _prepared_job(log, clock)
    (group, new), = job.results
    if stage != "cleaned":
        new.change_suffix(".cleaned", ".swap")
    if stage in ("old-deleted", "done"):
        for s in group:
            s.segment.mark_deleted()
    if stage == "done":
        new.change_suffix(".swap", "")
    log.close_handles()                     # kill -9
    os.close(new.fd)
    new.fd = -1
    again = _open(tmp_path, clock, clean=False)
    names = os.listdir(again.dir)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    if stage == "cleaned":
        assert records(again) == original
    else:
        assert records(again) == expected_clean
    assert again.log_end_offset == 41
    again.close()


def test_swap_abandoned_when_log_changed(tmp_path, clock):
    log = _open(tmp_path, clock)
    _fill(log)
    original = records(log)
    ltc = log_to_clean(log, None, clock.now)
    job = CleanJob(log, ltc, clock.now, 1000)
    log.truncate_to(30)                      # a follower truncation while cleaning runs
    job.run()
    assert job.finish(log) is None
    assert records(log) == original[:30]
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
    log.close()


def test_abort_deletes_partial_output(tmp_path, clock):
    log = _open(tmp_path, clock)
    _fill(log)
    job = CleanJob(log, log_to_clean(log, None, clock.now), clock.now, 1000)
    job.abort()
    with pytest.raises(Exception):
        job.run()
    assert not [n for n in os.listdir(log.dir) if n.endswith(".cleaned")]
    log.close()


# -- the driver: checkpoints, choice, asyncio task -----------------------------------------

def _manager(tmp_path, clock, **kw):
    return LogManager([str(tmp_path / "logs")], _cfg(**kw), broker_id=0, cluster_id="c",
                      time_ms=clock)


def test_log_cleaner_checkpoints_and_truncation(tmp_path, clock):
    lm = _manager(tmp_path, clock)
    lg = lm.get_or_create_log("t", 0)
    other = lm.get_or_create_log("plain", 0, LogConfig())     # delete policy: never cleaned
    for log_ in (lg, other):
        for i in range(30):
            put(log_, [(b"k%d" % (i % 3), b"v")])
        roll(log_)
        put(log_, [(b"x", b"y")])
    cleaner = LogCleaner(lm, CleanerConfig(backoff_ms=10))
    cp_path = os.path.join(lm.log_dirs[0], CLEANER_OFFSET_CHECKPOINT)
    assert open(cp_path).read() == "0\n0\n"
    assert cleaner.clean_one_sync() is True
    assert cleaner.clean_one_sync() is False                 # nothing dirty any more
    assert open(cp_path).read() == "0\n1\nt 0 30\n"
    assert len(records(other)) == 31
    lg.truncate_to(10)          # (compaction emptied the segments below: LEO falls to 8)
    assert cleaner.checkpoint_of(("t", 0), lg) == lg.log_end_offset < 30
    lm.shutdown()


def _dirty(lg, n, keys, value=lambda i: b"v%d" % i):
    """``n`` records over ``keys`` keys, a roll, and one more record: a cleanable dirty section."""
    for i in range(n):
        put(lg, [(b"k%d" % (i % keys), value(i))])
    roll(lg)
    put(lg, [(b"x", b"y")])


def test_log_cleaner_async_task(tmp_path, clock):
    lm = _manager(tmp_path, clock)
    lg = lm.get_or_create_log("t", 0)
    _dirty(lg, 30, 3)

    async def main():
        cleaner = LogCleaner(lm, CleanerConfig(backoff_ms=20))
        task = asyncio.get_running_loop().create_task(cleaner.run())
        for _ in range(200):
            await asyncio.sleep(0.01)
            if len(records(lg)) == 4:
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert [r[2] for r in records(lg)] == [b"v27", b"v28", b"v29", b"y"]
    lm.shutdown()


# -- the I/O throttle, threads, dynamic configs -------------------------------------------------

class _FakeTime:
    def __init__(self):
        self.t = 100.0
        self.waits = []

    def __call__(self):
        return self.t

    def wait(self, s):
        self.waits.append(s)
        self.t += s


def test_throttler_sleeps_the_excess_of_each_period():
    ft = _FakeTime()
    th = Throttler(1000.0, clock=ft)           # 1,000 bytes a second
    assert th.maybe_throttle(500, ft.wait) == 0.0 and ft.waits == []   # period not over
    ft.t += 0.5
    # 500 + 1500 bytes in 0.5 s: 2 s' worth at the rate, so 1.5 s more (in slices, so that
    # a change of the rate is seen)
    assert th.maybe_throttle(1500, ft.wait) == pytest.approx(1.5) and ft.waits == [0.25] * 6
    # a new period began when the sleep ended; bytes within the rate cost nothing
    ft.t += 1.0
    assert th.maybe_throttle(900, ft.wait) == 0.0 and len(ft.waits) == 6
    # the rate can change while it runs
    th.set_rate(10_000.0)
    ft.t += 0.4
    assert th.maybe_throttle(3000, ft.wait) == 0.0
    assert Throttler(1.7976931348623157e308).unlimited and not th.unlimited


def test_a_thread_that_looks_while_another_sleeps_waits_too():
    """Kafka sleeps holding the throttle's lock, so every cleaner thread stops while one sleeps
    off the period's excess; here the others wait for that sleep's end the same way, and their
    bytes count in the period that begins then (they are paid for at its next look)."""
    ft = _FakeTime()
    th = Throttler(100.0, clock=ft)
    ft.t += 0.4
    others = []

    def wait(s):           # another thread reads 1,000 bytes while this one sleeps
        if not others:
            others.append(th.maybe_throttle(1000, ft.wait))
        ft.t += s

    assert th.maybe_throttle(100, wait) == pytest.approx(0.6)
    assert others == [pytest.approx(0.6)]                 # it waited for the sleep's end too
    ft.t += 0.4            # the period began at 101.0, 0.65 s ago: 1,000 B at 100 B/s is 10 s
    assert th.maybe_throttle(0, ft.wait) == pytest.approx(9.35)


def test_threads_together_stay_within_the_rate():
    """Real threads, as the cleaner's run: two threads reading 64 KiB every 10 ms (13 MB/s
    together) under a 4 MB/s limit.  Over the run they stay near the limit; the last period's
    bytes (at most 0.3 s of reading, 4 MB) are not paid for yet when the run stops."""
    import threading
    import time as _time
    th = Throttler(4_000_000.0)
    stop = _time.monotonic() + 2.5
    total = [0]
    lock = threading.Lock()

    def reader():
        while _time.monotonic() < stop:
            _time.sleep(0.01)
            th.maybe_throttle(65536)
            with lock:
                total[0] += 65536
    t0 = _time.monotonic()
    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = _time.monotonic() - t0
    # when the other thread did not wait, this came to 6.8 MB/s against a bound of 5.4
    assert total[0] <= 4_000_000 * elapsed + 0.3 * 13_200_000 + 65536 * 2, (total[0], elapsed)


def test_a_rate_change_or_an_abort_ends_a_throttled_sleep():
    ft = _FakeTime()
    th = Throttler(100.0, clock=ft)
    ft.t += 1.0

    def wait(s):
        ft.t += s
        if ft.t > 102.0:
            th.set_rate(1.7976931348623157e308)   # kafka-configs.sh took the limit away
    assert th.maybe_throttle(1000, wait) == pytest.approx(1.25)   # not the 9 s it began
    assert th.maybe_throttle(10**9, ft.wait) == 0.0 and th.unlimited

    th = Throttler(100.0, clock=ft)
    ft.t += 1.0
    calls = []

    def aborted(s):
        calls.append(s)
        ft.t += s
        return len(calls) == 2                  # the job's abort event was set
    assert th.maybe_throttle(1000, aborted) == pytest.approx(0.5)


def test_cleaning_is_throttled_and_counts_what_it_slept(tmp_path, clock):
    log = _open(tmp_path, clock, segment_bytes=100_000)
    for i in range(400):
        put(log, [(b"k%d" % (i % 10), b"v" * 500)])
    roll(log)
    put(log, [(b"x", b"y")])
    ft = _FakeTime()
    th = Throttler(100_000.0, clock=ft)        # 100 KB/s, for a cleaner that runs at 1 MB/s
    job = CleanJob(log, log_to_clean(log, None, clock.now), clock.now, 1000, th)
    job._abort.wait = ft.wait                  # sleep in fake time
    real_io = job._io

    def io(n):
        ft.t += n / 1_000_000
        real_io(n)
    job._io = io
    job.run()
    s = job.stats
    total = s.map_bytes_read + s.bytes_read + s.bytes_written
    assert s.map_bytes_read > 200_000 and s.bytes_written < s.bytes_read
    assert s.throttled == pytest.approx(sum(ft.waits)) and s.throttled > 0
    # the pass took what its bytes take at the rate, but for the last period's (at most 0.3 s
    # of work at 1 MB/s) and the last chunk not yet shown to the throttler (64 KiB)
    busy = total / 1_000_000
    unpaid = 0.3 * 1_000_000 + 65536
    assert (total - unpaid) / 100_000 <= s.throttled + busy <= total / 100_000 + 0.001 * len(ft.waits)
    assert job.finish(log) is not None
    assert {r[1] for r in records(log)} == {b"k%d" % i for i in range(10)} | {b"x"}
    log.close()


def test_abort_ends_a_throttled_sleep(tmp_path, clock):
    log = _open(tmp_path, clock, segment_bytes=200_000)
    for i in range(300):
        put(log, [(b"k%d" % i, b"v" * 500)])
    roll(log)
    put(log, [(b"x", b"y")])
    th = Throttler(1000.0)                    # 150 KB would take minutes at 1 KB/s
    job = CleanJob(log, log_to_clean(log, None, clock.now), clock.now, 1000, th)

    async def main():
        loop = asyncio.get_running_loop()
        await asyncio.sleep(0.35)             # the throttle's first period is over...
        fut = loop.run_in_executor(None, job.run)
        await asyncio.sleep(0.8)              # ...so the first 64 KiB cost a minute's sleep
        job.abort()
        from storage.cleaner import CleaningAborted
        with pytest.raises(CleaningAborted):
            await asyncio.wait_for(fut, 5)
    asyncio.run(main())
    assert job.stats.throttled > 0
    assert not [n for n in os.listdir(log.dir) if n.endswith(".cleaned")]
    log.close()


def test_two_cleaner_threads_clean_two_logs_at_once(tmp_path, clock):
    lm = _manager(tmp_path, clock)
    logs = [lm.get_or_create_log(t, 0) for t in ("a", "b")]
    for lg in logs:
        _dirty(lg, 40, 4)
    cleaner = LogCleaner(lm, CleanerConfig(backoff_ms=10, threads=2))
    seen = []

    async def main():
        # both picks happen before either pass ends: the second must not take the first's log
        return await asyncio.gather(cleaner.clean_one(0), cleaner.clean_one(1))

    orig = cleaner.grab_filthiest

    def grab(now=None, worker=0):
        pick = orig(now, worker)
        seen.append((worker, pick[0] if pick else None))
        return pick
    cleaner.grab_filthiest = grab
    assert asyncio.run(main()) == [True, True]
    assert sorted(tp for _, tp in seen) == [("a", 0), ("b", 0)]
    assert set(cleaner.last_stats) == {0, 1} and not cleaner.in_progress
    for lg in logs:
        assert [r[2] for r in records(lg)] == [b"v36", b"v37", b"v38", b"v39", b"y"]
    cleaner.stop()
    lm.shutdown()


def test_what_the_cleaner_gauges_read(tmp_path, clock):
    lm = _manager(tmp_path, clock, max_compaction_lag_ms=60_000)
    a, b = lm.get_or_create_log("a", 0), lm.get_or_create_log("b", 0)
    for lg in (a, b):
        for i in range(20):
            put(lg, [(b"k%d" % (i % 2), b"v" * 50)])
        roll(lg)
        put(lg, [(b"x", b"y")])
    cleaner = LogCleaner(lm, CleanerConfig(backoff_ms=10))
    clock.now += 100_000                  # 40 s past max.compaction.lag.ms
    pick = cleaner.grab_filthiest(worker=3)
    assert pick is not None and cleaner.dirtiest_ratio == 1.0
    assert 39 <= cleaner.last_delay_ms[3] / 1000 <= 41
    d = lm.log_dirs[0]
    assert cleaner.uncleanable_by_dir() == {d: (0, 0)}
    cleaner.uncleanable.add(("b", 0))    # a pass of b failed
    n, nbytes = cleaner.uncleanable_by_dir()[d]
    assert n == 1 and nbytes == log_to_clean(b, None, clock.now).cleanable_bytes > 0
    assert cleaner.grab_filthiest()[0] == ("a", 0)       # b is skipped
    lm.delete_log("b", 0)
    cleaner.grab_filthiest()                             # and forgotten once deleted
    assert cleaner.uncleanable == set() and cleaner.uncleanable_by_dir() == {d: (0, 0)}
    lm.shutdown()


def test_a_log_deleted_during_its_pass_is_not_a_failed_dir(tmp_path, clock, monkeypatch):
    """A partition deleted (its dir renamed) while a pass reads it, and made again under the same
    name: the pass's I/O error is no dir failure and the new partition is not uncleanable.
    The supervisor also aborts the passes of deleted logs (a throttled pass may sleep long)."""
    import errno
    import threading as th_
    lm = _manager(tmp_path, clock)
    lg = lm.get_or_create_log("t", 0)
    _dirty(lg, 40, 4)
    cleaner = LogCleaner(lm, CleanerConfig(backoff_ms=10))
    release = th_.Event()

    def failing_run(job):
        release.wait(10)
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", job.dir + "/x.cleaned")
    monkeypatch.setattr(CleanJob, "run", failing_run)
    failed = []
    lm.dir_failure_listener = lambda d, e: failed.append(d)

    async def main():
        task = asyncio.get_running_loop().create_task(cleaner.clean_one(0))
        await asyncio.sleep(0.05)
        assert ("t", 0) in cleaner.in_progress
        lm.delete_log("t", 0)
        again = lm.get_or_create_log("t", 0)
        put(again, [(b"new", b"1")])
        assert cleaner.abort_gone() == 1
        release.set()
        return await task, again
    done, again = asyncio.run(main())
    assert done is False and failed == [] and not lm.offline_dirs
    assert cleaner.uncleanable == set() and not cleaner.in_progress
    assert [r[1] for r in records(again)] == [b"new"]
    lm.shutdown()


class _BrokerCfg:
    def __init__(self, **kv):
        self.kv = {"log.cleaner.enable": True, "log.cleaner.backoff.ms": 15000,
                   "log.cleaner.dedupe.buffer.size": 134217728,
                   "log.cleaner.io.buffer.load.factor": 0.9, "log.cleaner.threads": 1,
                   "log.cleaner.io.max.bytes.per.second": 1.7976931348623157e308}
        self.kv.update(kv)

    def get(self, k):
        return self.kv[k]


def test_cleaner_reads_its_dynamic_configs_again(tmp_path, clock):
    lm = _manager(tmp_path, clock)
    bc = _BrokerCfg()
    cleaner = LogCleaner(lm, broker_config=bc)
    assert cleaner.throttler.unlimited and cleaner.config.max_map_entries == 134217728 // 24 * 0.9 // 1
    bc.kv.update({"log.cleaner.io.max.bytes.per.second": 2048.0, "log.cleaner.threads": 2,
                  "log.cleaner.dedupe.buffer.size": 24_000})
    cleaner.refresh_config()
    assert cleaner.throttler.rate == 2048.0 and not cleaner.throttler.unlimited
    assert cleaner.config.threads == 2 and cleaner.generation == 1
    assert cleaner.config.map_slots == 500 and cleaner.config.max_map_entries == 450
    cleaner.refresh_config()
    assert cleaner.generation == 1                    # nothing changed

    bc.kv["log.cleaner.backoff.ms"] = 10
    cleaner.last_stats[1] = "a pass of worker 1"
    rate_changes = cleaner.throttler._changes

    async def main():                 # the supervisor starts a worker per thread
        task = asyncio.get_running_loop().create_task(cleaner.run())
        await asyncio.sleep(0.05)
        workers = dict(cleaner._workers)
        bc.kv["log.cleaner.threads"] = 1
        for _ in range(40):           # worker 1 ends; the supervisor looks every second
            await asyncio.sleep(0.05)
            if 1 not in cleaner._workers:
                break
        left = dict(cleaner._workers)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return workers, left
    started, left = asyncio.run(main())
    assert sorted(started) == [0, 1] and sorted(left) == [0]
    assert 1 not in cleaner.last_stats               # its figures left the gauges with it
    assert cleaner.throttler._changes == rate_changes  # only a new rate resets the throttle
    lm.shutdown()


# -- property ------------------------------------------------------------------------------

ops = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e"]),
                         st.one_of(st.none(), st.binary(min_size=0, max_size=12)),
                         st.booleans()),
               min_size=1, max_size=60)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, seg=st.integers(150, 900), tombstones_expire=st.booleans())
def test_property_latest_value_per_key(tmp_path_factory, clock, ops, seg, tombstones_expire):
    path = tmp_path_factory.mktemp("prop")
    log = Log(str(path / "p-0"), _cfg(segment_bytes=seg, delete_retention_ms=100),
              time_ms=clock)
    latest = {}
    for key, value, roll_after in ops:
        info = put(log, [(key, value)])
        latest[key] = (info.first_offset, value)
        if roll_after:
            roll(log)
    roll(log)
    put(log, [(b"zz-last", b"!")])                 # active segment
    end, _ = clean_log(log, force=True)
    expect = sorted((o, k, v) for k, (o, v) in latest.items())
    assert records(log)[:-1] == expect
    if tombstones_expire:
        clock.now += 1000
        put(log, [(b"zz-more", b"!")])
        roll(log)
        end, _ = clean_log(log, end, force=True)
        live = [(o, k, v) for o, k, v in expect if v is not None]
        assert records(log)[:-2] == live
    log.close()

import os

import pytest

from protocol.records import CorruptRecordError, iter_batches, read_header
from storage.config import LogConfig
from storage.errors import (InvalidProducerEpochError, OffsetOutOfRangeError,
                            OutOfOrderSequenceError, RecordTooLargeError, StorageError)
from storage.log import Log
from storage.log_manager import LogManager
from storage.errors import LogDirLockedError
from tests.storage.helpers import make_batch, make_marker


def cfg(**kw):
    base = dict(segment_bytes=1000, index_interval_bytes=64, segment_index_bytes=4096)
    base.update(kw)
    return LogConfig(**base)


def offsets_in(data: bytes):
    return [(h.base_offset, h.last_offset) for h in iter_batches(data)]


def test_append_assigns_offsets_and_epoch(tmp_path, clock):
    log = Log(str(tmp_path / "my-topic-0"), cfg(), time_ms=clock)
    assert (log.topic, log.partition) == ("my-topic", 0)
    buf = make_batch([b"a", b"b", b"c"]) + make_batch([b"d"])
    info = log.append(buf, leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, 3, 2)
    assert read_header(buf).partition_leader_epoch == 7
    assert read_header(buf, 0).base_offset == 0
    assert log.log_end_offset == 4
    data = log.read_bytes(0, 10 ** 6)
    assert offsets_in(data) == [(0, 2), (3, 3)]
    assert log.epoch_cache.entries == [(7, 0)]
    log.update_high_watermark(3)
    assert offsets_in(log.read_bytes(0, 10 ** 6, max_offset=log.high_watermark)) == [(0, 2)]


def test_append_rejects_bad_batches(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), cfg(max_message_bytes=100), time_ms=clock)
    b = make_batch([b"x"])
    b[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append(b, 0)
    with pytest.raises(CorruptRecordError):
        log.append(make_batch([b"x"])[:-3], 0)
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch([b"x" * 200]), 0)
    assert log.log_end_offset == 0 and log.size() == 0


def test_client_batches_kafka_refuses_as_invalid_records(tmp_path, clock):
    """LogValidator.validateBatch for a client: a batch reporting no records, and a batch of a
    producer id without a sequence, are INVALID_RECORD; the coordinator's appends are not held
    to the first rule (an empty control batch is not theirs to write either way)."""
    from protocol.records import InvalidRecordError
    log = Log(str(tmp_path / "t-0"), cfg(), time_ms=clock)
    with pytest.raises(InvalidRecordError, match="count"):
        log.append(make_batch([]), 0)
    with pytest.raises(InvalidRecordError, match="sequence"):
        log.append(make_batch([b"x"], producer_id=5, producer_epoch=0, base_sequence=-1), 0)
    assert log.log_end_offset == 0 and log.size() == 0
    log.append(make_batch([b"x"], producer_id=5, producer_epoch=0, base_sequence=0), 0)
    assert log.log_end_offset == 1


def test_read_out_of_range_and_min_one_message(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), cfg(), time_ms=clock)
    for _ in range(5):
        log.append(make_batch([b"x" * 50]), 0)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 100)
    assert log.read(5, 100).regions == ()
    one = log.read(0, 1)
    assert one.length == len(make_batch([b"x" * 50]))
    assert log.read(0, 1, min_one_message=False).length == 1


def test_roll_by_size_and_index_and_time(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), cfg(segment_bytes=500), time_ms=clock)
    for i in range(20):
        log.append(make_batch([b"x" * 60], timestamps=[clock.now]), 0)
    assert len(log.segments) > 1
    for s in log.segments:
        assert s.size <= 500
    names = sorted(os.listdir(log.dir))
    assert "00000000000000000000.log" in names
    assert any(n.endswith(".snapshot") for n in names)
    # time roll: segment.ms passes between first batch timestamp and incoming one
    log2 = Log(str(tmp_path / "t-1"), cfg(segment_ms=1000), time_ms=clock)
    log2.append(make_batch([b"a"], timestamps=[clock.now]), 0)
    log2.append(make_batch([b"a"], timestamps=[clock.now + 500]), 0)
    assert len(log2.segments) == 1
    log2.append(make_batch([b"a"], timestamps=[clock.now + 1001]), 0)
    assert log2.bases == [0, 2]
    # index full
    log3 = Log(str(tmp_path / "t-2"), cfg(segment_index_bytes=16, index_interval_bytes=0),
               time_ms=clock)
    for _ in range(6):
        log3.append(make_batch([b"a"]), 0)
    assert len(log3.segments) >= 2
    # inactive segment indexes trimmed
    seg0 = log3.segments[0]
    assert os.path.getsize(seg0.offset_index.path) == seg0.offset_index.entries * 8


def test_offset_for_timestamp(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), cfg(segment_bytes=300), time_ms=clock)
    for i in range(10):
        log.append(make_batch([b"a", b"b"], timestamps=[100 * i, 100 * i + 50]), 0)
    assert log.offset_for_timestamp(0) == (0, 0)
    assert log.offset_for_timestamp(120) == (150, 3)
    assert log.offset_for_timestamp(450) == (450, 9)
    assert log.offset_for_timestamp(10 ** 9) is None
    assert log.offset_for_timestamp(-2) == (-1, 0)
    assert log.offset_for_timestamp(-1) == (-1, 20)
    assert log.offset_for_timestamp(-3) == (950, 19)


def test_offset_for_timestamp_after_delete_records_answers_as_kafka(tmp_path, clock):
    """Kafka's two lookups read what DeleteRecords left in the files: the max timestamp
    (-3) is the segment's, deleted records included, and a search by time stops at the first
    segment whose largest timestamp reaches the target, found or not."""
    log = Log(str(tmp_path / "t-0"), cfg(retention_ms=-1), time_ms=clock)
    log.append(make_batch([b"a", b"b"], timestamps=[100, 900]), 0)     # offsets 0-1
    log.append(make_batch([b"c", b"d"], timestamps=[200, 300]), 0)     # 2-3
    log.roll()
    log.append(make_batch([b"e"], timestamps=[600]), 0)                # 4, next segment
    log.append(make_batch([b"f"], timestamps=[900]), 0)                # 5: the max again
    log.update_high_watermark(6)
    assert log.offset_for_timestamp(-3) == (900, 1)
    assert log.offset_for_timestamp(400) == (900, 1)
    assert log.delete_records(2) == 2
    assert log.offset_for_timestamp(-3) == (900, 1)     # below the log start, as Kafka answers
    assert log.offset_for_timestamp(250) == (300, 3)
    assert log.offset_for_timestamp(400) is None        # the first segment reaches 400: not found
    assert log.offset_for_timestamp(950) is None
    assert log.delete_records(4) == 4                   # the first segment now ends below the start
    log.delete_old_segments()
    assert log.bases[0] == 4
    assert log.offset_for_timestamp(-3) == (900, 5)
    assert log.offset_for_timestamp(400) == (600, 4)


def test_retention_by_size_time_and_log_start(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), cfg(segment_bytes=300, retention_bytes=600,
                                          retention_ms=-1, file_delete_delay_ms=0),
              time_ms=clock)
    for i in range(30):
        log.append(make_batch([b"x" * 40], timestamps=[clock.now]), 0)
    assert log.delete_old_segments() == 0          # high watermark at 0 protects everything
    log.update_high_watermark(log.log_end_offset)
    n = log.delete_old_segments()
    assert n > 0 and log.size() - log.segments[0].size < 600
    assert log.log_start_offset == log.bases[0]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log.delete_expired_files()
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))
    # time retention deletes all, rolling a new empty active segment first
    log.config.retention_bytes = -1
    log.config.retention_ms = 1000
    clock.now += 5000
    log.delete_old_segments()
    assert len(log.segments) == 1 and log.active.size == 0
    assert log.log_start_offset == log.log_end_offset == 30
    assert log.delete_old_segments() == 0        # never the empty active segment
    # DeleteRecords
    for i in range(10):
        log.append(make_batch([b"x" * 40], timestamps=[clock.now]), 0)
    log.update_high_watermark(35)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(36)
    assert log.delete_records(33) == 33
    assert log.read(33, 10).segment_base_offset <= 33
    with pytest.raises(OffsetOutOfRangeError):
        log.read(32, 10)


def test_retention_logs_each_deleted_segment_and_why(tmp_path, clock, caplog):
    log = Log(str(tmp_path / "t-0"), cfg(segment_bytes=300, retention_bytes=600, retention_ms=-1),
              time_ms=clock)
    for i in range(30):
        log.append(make_batch([b"x" * 40], timestamps=[clock.now]), 0)
    log.update_high_watermark(log.log_end_offset)
    with caplog.at_level("INFO", logger="odradek.log"):
        n = log.delete_old_segments()
        by_size = [r.getMessage() for r in caplog.records]
        assert len(by_size) == n > 0
        assert all(m.startswith("deleting segment ") and " of t-0 " in m and "retention.bytes 600" in m
                   for m in by_size)
        caplog.clear()
        log.config.retention_bytes = -1
        log.config.retention_ms = 1000
        clock.now += 5000
        n = log.delete_old_segments()
        assert [r.getMessage() for r in caplog.records][-1].endswith("is more than retention.ms 1000 old")
        assert len(caplog.records) == n


def test_truncate_and_reopen(tmp_path, clock):
    d = str(tmp_path / "t-0")
    log = Log(d, cfg(segment_bytes=300), time_ms=clock)
    for i in range(20):
        log.append(make_batch([b"x" * 30]), i // 5)
    assert log.end_offset_for_epoch(1) == (1, 10)
    log.update_high_watermark(20)
    assert log.truncate_to(8)
    assert log.log_end_offset == 8 and log.high_watermark == 8
    assert log.epoch_cache.entries == [(0, 0), (1, 5)]
    log.append(make_batch([b"y"]), 4)
    assert log.epoch_cache.entries[-1] == (4, 8)
    log.close()
    log = Log(d, cfg(segment_bytes=300), time_ms=clock, high_watermark=9)
    assert log.log_end_offset == 9 and log.high_watermark == 9
    assert offsets_in(log.read_bytes(7, 10 ** 6))[-1] == (8, 8)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.bases) == (100, 100, [100])
    log.append(make_batch([b"z"]), 5)
    assert log.log_end_offset == 101


def test_unclean_reopen_recovers_torn_tail(tmp_path, clock):
    d = str(tmp_path / "t-0")
    log = Log(d, cfg(segment_bytes=400), time_ms=clock)
    for i in range(12):
        log.append(make_batch([b"x" * 30]), 0)
    active = log.active.log_path
    log.close_handles()                     # crash: nothing persisted beyond the writes
    with open(active, "r+b") as f:
        size = f.seek(0, 2)
        f.truncate(size - 5)
    log = Log(d, cfg(segment_bytes=400), time_ms=clock, clean_shutdown=False)
    assert log.log_end_offset == 11
    log.append(make_batch([b"again"]), 0)
    assert offsets_in(log.read_bytes(10, 10 ** 6)) == [(10, 10), (11, 11)]


def test_producer_sequences_and_duplicates(tmp_path, clock):
    d = str(tmp_path / "t-0")
    log = Log(d, cfg(), time_ms=clock)
    pid = 42
    b0 = make_batch([b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0)
    assert log.append(bytearray(b0), 0).first_offset == 0
    dup = log.append(bytearray(b0), 0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 1)
    assert log.log_end_offset == 2
    with pytest.raises(OutOfOrderSequenceError):
        log.append(make_batch([b"c"], producer_id=pid, producer_epoch=0, base_sequence=5), 0)
    log.append(make_batch([b"c"], producer_id=pid, producer_epoch=0, base_sequence=2), 0)
    # epoch bump must restart at 0
    with pytest.raises(OutOfOrderSequenceError):
        log.append(make_batch([b"d"], producer_id=pid, producer_epoch=1, base_sequence=3), 0)
    log.append(make_batch([b"d"], producer_id=pid, producer_epoch=1, base_sequence=0), 0)
    with pytest.raises(InvalidProducerEpochError):
        log.append(make_batch([b"e"], producer_id=pid, producer_epoch=0, base_sequence=4), 0)
    # unknown producer: any sequence accepted (KIP-360)
    log.append(make_batch([b"f"], producer_id=7, producer_epoch=3, base_sequence=99), 0)
    # sequence wrap
    log.append(make_batch([b"g"], producer_id=8, producer_epoch=0,
                          base_sequence=0x7FFFFFFF), 0)
    log.append(make_batch([b"h"], producer_id=8, producer_epoch=0, base_sequence=0), 0)
    leo = log.log_end_offset
    log.close()
    log = Log(d, cfg(), time_ms=clock)
    e = log.producer_state.last_entry(pid)
    assert (e.producer_epoch, e.last_seq, e.last_offset) == (1, 0, 3)
    again = log.append(make_batch([b"d"], producer_id=pid, producer_epoch=1,
                                  base_sequence=0), 0)
    assert again.duplicate and again.first_offset == 3
    assert log.log_end_offset == leo


def test_transaction_version_2_first_batch_starts_at_sequence_0(tmp_path, clock):
    """Kafka 4.x: from a transaction version 2 client (Produce v12+), a transactional batch of a
    producer the partition has no batches of must start at sequence 0; an idempotent batch and
    a transaction version 1 client keep KIP-360's rule (any sequence for an unknown producer)."""
    log = Log(str(tmp_path / "t-0"), cfg(), time_ms=clock)
    with pytest.raises(OutOfOrderSequenceError, match="Expected sequence 0 for transactions v2"):
        log.append(make_batch([b"a"], producer_id=5, producer_epoch=2, base_sequence=3, transactional=True), 0,
                   transaction_version=2)
    assert log.log_end_offset == 0
    log.append(make_batch([b"a"], producer_id=5, producer_epoch=2, base_sequence=3, transactional=True), 0)
    log.append(make_batch([b"b"], producer_id=6, producer_epoch=0, base_sequence=4), 0, transaction_version=2)
    log.append(make_batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True), 0,
               transaction_version=2)
    log.append(make_batch([b"d"], producer_id=7, producer_epoch=0, base_sequence=1, transactional=True), 0,
               transaction_version=2)           # it has batches here now: the usual rule
    assert log.log_end_offset == 4


def test_transactions_and_lso(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), cfg(), time_ms=clock)
    log.append(make_batch([b"x"]), 0)
    log.append(make_batch([b"t1", b"t2"], producer_id=9, producer_epoch=0, base_sequence=0,
                          transactional=True), 0)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset() == 1
    log.append(make_marker(9, 0, commit=False, coordinator_epoch=3), 0, origin="coordinator")
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset() == 4
    assert log.producer_state.last_entry(9).coordinator_epoch == 3
    with pytest.raises(Exception):
        log.append(make_marker(9, 0, commit=True), 0)   # clients may not write markers


def test_producer_snapshot_roundtrip(tmp_path):
    from storage.producer_state import ProducerStateManager
    d = str(tmp_path)
    pm = ProducerStateManager(d)
    s = pm.session()
    for off, (pid, seq) in enumerate([(1, 0), (2, 0), (1, 1)]):
        b = make_batch([b"v"], producer_id=pid, producer_epoch=2, base_sequence=seq,
                       transactional=pid == 2)
        from protocol.records import set_base_offset
        set_base_offset(b, 0, off)
        s.stage(read_header(b))
    s.commit(3)
    path = pm.take_snapshot()
    assert path.endswith("00000000000000000003.snapshot")
    raw = open(path, "rb").read()
    assert raw[:2] == b"\x00\x01" and len(raw) == 10 + 2 * 46
    pm2 = ProducerStateManager(d)
    assert pm2.load_snapshot(10) == 3
    assert pm2.producers[1].last_seq == 1 and pm2.producers[1].last_offset == 2
    assert pm2.producers[2].current_txn_first_offset == 1
    assert pm2.first_unstable_offset() == 1
    with open(path, "r+b") as f:
        f.seek(20)
        f.write(b"\xee")
    assert ProducerStateManager(d).load_snapshot(10) is None   # CRC mismatch rejected


def test_storage_error_on_failed_write(tmp_path, clock, monkeypatch):
    log = Log(str(tmp_path / "t-0"), cfg(), time_ms=clock)
    log.append(make_batch([b"ok"]), 0)
    size = log.size()
    real = os.pwrite

    def failing(fd, data, pos):
        real(fd, bytes(data)[:10], pos)
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "pwrite", failing)
    with pytest.raises(StorageError, match="ENOSPC"):
        log.append(make_batch([b"fails"]), 0)
    monkeypatch.setattr(os, "pwrite", real)
    assert log.size() == size and os.path.getsize(log.active.log_path) == size
    assert log.log_end_offset == 1
    assert offsets_in(log.read_bytes(0, 1000)) == [(0, 0)]
    log.append(make_batch([b"later"]), 0)
    assert log.log_end_offset == 2


def test_flush_job(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), cfg(flush_messages=3), time_ms=clock)
    log.append(make_batch([b"a"]), 0)
    assert not log.flush_due()
    log.append(make_batch([b"a", b"b"]), 0)      # flush.messages reached: flushed inline
    assert log.recovery_point == 3
    log.append(make_batch([b"c"]), 0)
    job = log.start_flush()
    log.finish_flush(job.run())
    assert log.recovery_point == 4


def test_log_manager_lifecycle(tmp_path, clock):
    d = str(tmp_path / "data")
    lm = LogManager([d], cfg(), cluster_id="abc", broker_id=1, time_ms=clock)
    with pytest.raises(LogDirLockedError):
        import subprocess
        import sys
        r = subprocess.run([sys.executable, "-c", (
            "import sys; sys.path.insert(0, %r)\n"
            "from storage.log_manager import LogManager\n"
            "LogManager([%r], broker_id=1)\n") % (os.getcwd(), d)], capture_output=True)
        if b"LogDirLockedError" in r.stderr:
            raise LogDirLockedError("second process refused")
    log = lm.get_or_create_log("orders", 0, topic_id="Mx3kOzTbQ9u4hQhz2mYI0A")
    lm.get_or_create_log("orders", 1)
    for _ in range(5):
        log.append(make_batch([b"x"]), 0)
    log.update_high_watermark(4)
    lm.checkpoint_high_watermarks()
    assert open(os.path.join(d, "replication-offset-checkpoint")).read() == \
        "0\n2\norders 0 4\norders 1 0\n"
    assert lm.dir_sizes()[os.path.abspath(d)][("orders", 0)] == log.size()
    lm.shutdown()
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    assert "broker.id=1" in open(os.path.join(d, "meta.properties")).read()
    lm = LogManager([d], cfg(), cluster_id="abc", broker_id=1, time_ms=clock)
    assert lm.clean_start[os.path.abspath(d)]
    log = lm.get_log("orders", 0)
    assert (log.log_end_offset, log.high_watermark, log.recovery_point) == (5, 4, 5)
    assert log.topic_id == "Mx3kOzTbQ9u4hQhz2mYI0A"
    path = lm.delete_log("orders", 1)
    assert path.endswith("-delete") and os.path.isdir(path)
    lm.remove_deleted_dirs()
    assert not os.path.exists(path)
    log.append(make_batch([b"y"]), 0)
    lm.close_without_checkpoint()               # crash
    lm = LogManager([d], cfg(), cluster_id="abc", broker_id=1, time_ms=clock)
    assert not lm.clean_start[os.path.abspath(d)]
    assert lm.get_log("orders", 0).log_end_offset == 6
    assert lm.get_log("orders", 1) is None
    with pytest.raises(StorageError):
        LogManager([str(tmp_path / "other")], broker_id=1, cluster_id="x")._check_meta(d)
    lm.shutdown()


def test_append_patches_a_writable_memoryview_in_place_and_keeps_no_reference(tmp_path, clock):
    """The produce path hands over a memoryview into the received frame: no copy, no leak."""
    log = Log(str(tmp_path / "mv-0"), cfg(), time_ms=clock)
    log.append(make_batch([b"x"]), leader_epoch=0)
    frame = bytearray(b"HEAD") + make_batch([b"a", b"b"]) + bytearray(b"TAIL")
    view = memoryview(frame)[4:-4]
    info = log.append(view, leader_epoch=3)
    assert (info.first_offset, info.last_offset) == (1, 2)
    h = read_header(frame, 4)           # patched in the frame itself: nothing was copied
    assert (h.base_offset, h.partition_leader_epoch) == (1, 3)
    view.release()
    frame.extend(b"!")                  # BufferError if the log still exported the frame
    assert offsets_in(log.read_bytes(1, 10 ** 6)) == [(1, 2)]


def test_append_copies_read_only_input(tmp_path, clock):
    log = Log(str(tmp_path / "ro-0"), cfg(), time_ms=clock)
    data = bytes(make_batch([b"a"]))
    log.append(memoryview(data), leader_epoch=0)
    log.append(data, leader_epoch=0)
    assert offsets_in(log.read_bytes(0, 10 ** 6)) == [(0, 0), (1, 1)]


def test_stored_batches_reads_back_every_batch_from_the_log_start(tmp_path):
    lg = Log(str(tmp_path / "t-0"), LogConfig(segment_bytes=2048))
    for i in range(40):
        lg.append(make_batch([b"v" * 50]), 0)
    lg.update_high_watermark(lg.log_end_offset)
    lg.delete_records(5)
    got = [h.base_offset for _, h in lg.stored_batches(chunk=512)]
    assert got == list(range(5, 40)) and len(lg.segments) > 2
    assert [h.base_offset for _, h in lg.stored_batches(10, 12)] == [10, 11]


def test_new_partition_files_appear_with_its_first_data(tmp_path, clock):
    """A brand-new log is an empty directory; the first append creates the .log,
    partition.metadata and leader-epoch-checkpoint, a close the index files."""
    d = tmp_path / "fresh-0"
    tid = "AAAAAAAAAAAAAAAAAAAAAA"
    log = Log(str(d), cfg(), time_ms=clock, topic_id=tid)
    log.assign_leader_epoch(3)
    assert os.listdir(d) == []
    assert log.epoch_cache.end_offset_for(3, log.log_end_offset) == (3, 0)
    assert log.read_bytes(0, 1000) == b""
    log.flush()                                     # nothing to flush, nothing created
    assert os.listdir(d) == []
    log.append(make_batch([b"a", b"b"]), leader_epoch=3)
    assert sorted(os.listdir(d)) == ["00000000000000000000.log", "leader-epoch-checkpoint",
                                     "partition.metadata"]
    log.close()
    assert {"00000000000000000000.index", "00000000000000000000.timeindex"} <= set(os.listdir(d))
    again = Log(str(d), cfg(), time_ms=clock, topic_id=tid)
    assert again.topic_id == tid and again.log_end_offset == 2
    assert again.epoch_cache.entries == [(3, 0)]
    assert offsets_in(again.read_bytes(0, 1000)) == [(0, 1)]
    again.close()


def test_new_partition_closed_before_any_data_reopens_empty(tmp_path, clock):
    d = tmp_path / "idle-0"
    tid = "BBBBBBBBBBBBBBBBBBBBBB"
    log = Log(str(d), cfg(), time_ms=clock, topic_id=tid)
    log.assign_leader_epoch(0)
    log.close()
    again = Log(str(d), cfg(), time_ms=clock, topic_id=tid)
    assert (again.log_start_offset, again.log_end_offset) == (0, 0)
    assert again.topic_id == tid
    assert os.path.exists(d / "partition.metadata")     # written when the id was set on reopen
    again.append(make_batch([b"x"]), leader_epoch=0)
    assert offsets_in(again.read_bytes(0, 1000)) == [(0, 0)]
    again.close()

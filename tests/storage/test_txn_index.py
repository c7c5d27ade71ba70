"""Transaction index (.txnindex): file format, queries, truncation, Log integration, rebuild."""
from __future__ import annotations

import os
import struct

import pytest

from protocol.records import build_batch, build_control_batch
from storage.config import LogConfig
from storage.errors import CorruptIndexError
from storage.log import Log
from storage.producer_state import CompletedTxn
from storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex, aborted_entries


def test_entry_format_and_lazy_file(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    idx = TransactionIndex(path)
    assert idx.entries == [] and not os.path.exists(path)
    idx.append(AbortedTxn(7, 10, 15, 16))
    idx.append(AbortedTxn(8, 12, 20, 21))
    data = open(path, "rb").read()
    assert len(data) == 2 * ENTRY_SIZE == 68
    assert struct.unpack(">hqqqq", data[:34]) == (0, 7, 10, 15, 16)
    again = TransactionIndex(path)
    assert again.entries == [AbortedTxn(7, 10, 15, 16), AbortedTxn(8, 12, 20, 21)]
    with pytest.raises(ValueError):
        again.append(AbortedTxn(9, 1, 20, 21))      # last offsets must increase


def test_torn_entry_dropped_and_bad_version(tmp_path):
    path = str(tmp_path / "x.txnindex")
    TransactionIndex(path).append(AbortedTxn(1, 0, 5, 6))
    with open(path, "ab") as f:
        f.write(b"\x00" * 10)
    idx = TransactionIndex(path)
    assert len(idx) == 1 and os.path.getsize(path) == ENTRY_SIZE
    with open(path, "wb") as f:
        f.write(struct.pack(">hqqqq", 3, 1, 0, 5, 6))
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path).entries


def test_collect_and_completion(tmp_path):
    idx = TransactionIndex(str(tmp_path / "a.txnindex"))
    idx.append(AbortedTxn(1, 0, 5, 3))       # another txn still open from 3
    idx.append(AbortedTxn(2, 3, 9, 10))
    idx.append(AbortedTxn(3, 12, 14, 15))
    found, complete = idx.collect(6, 12)
    assert [t.producer_id for t in found] == [2] and complete      # lso 10 < 12, then 15 ≥ 12
    found, complete = idx.collect(0, 100)
    assert len(found) == 3 and not complete
    found, complete = idx.collect(0, 4)
    assert [t.producer_id for t in found] == [1, 2] and complete


def test_truncate_and_reset(tmp_path):
    path = str(tmp_path / "a.txnindex")
    idx = TransactionIndex(path)
    for i in range(4):
        idx.append(AbortedTxn(i, i * 10, i * 10 + 5, i * 10 + 6))
    idx.truncate_to(25)
    assert [t.last_offset for t in idx.entries] == [5, 15]
    assert os.path.getsize(path) == 2 * ENTRY_SIZE
    assert [t.last_offset for t in TransactionIndex(path).entries] == [5, 15]
    idx.reset()
    assert idx.entries == [] and not os.path.exists(path)


def test_aborted_entries_last_stable_offset():
    done = [CompletedTxn(1, 10, 20, True), CompletedTxn(2, 15, 25, True),
            CompletedTxn(3, 30, 31, False)]
    out = aborted_entries(done, ongoing_first_offsets=[18])
    # txn 1: txns 2 (first 15) and the open one at 18 were open at offset 20 -> 15
    # txn 2: the open one at 18 -> 18
    assert out == [AbortedTxn(1, 10, 20, 15), AbortedTxn(2, 15, 25, 18)]
    assert aborted_entries([CompletedTxn(4, 5, 9, True)], []) == [AbortedTxn(4, 5, 9, 10)]


# -- through the Log ---------------------------------------------------------------------

def _txn(log, pid, seq, keys, epoch=0):
    log.append(build_batch([(k, b"v") for k in keys], producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq, is_transactional=True), leader_epoch=0)


def _end(log, pid, commit, epoch=0):
    log.append(build_control_batch("COMMIT" if commit else "ABORT", pid, epoch, 0),
               leader_epoch=0, origin="coordinator")


def _open(tmp_path, clock, clean=True, **cfg):
    return Log(str(tmp_path / "t-0"), LogConfig(**cfg), time_ms=clock, clean_shutdown=clean)


def test_log_indexes_aborts_and_answers_fetches(tmp_path, clock):
    log = _open(tmp_path, clock, segment_bytes=400)
    _txn(log, 1, 0, [b"a", b"b"])            # 0-1
    _txn(log, 2, 0, [b"c"])                  # 2
    _end(log, 1, commit=False)               # 3: abort pid 1 (pid 2 still open from 2)
    log.append(build_batch([(b"x", b"y")]), leader_epoch=0)   # 4
    _end(log, 2, commit=True)                # 5
    _txn(log, 1, 2, [b"d"])                  # 6
    _end(log, 1, commit=False)               # 7
    assert len(log.segments) > 1
    assert log.aborted_transactions(0, 8) == [(1, 0), (1, 6)]
    assert log.aborted_transactions(4, 6) == []
    assert log.aborted_transactions(2, 4) == [(1, 0)]
    entries = [t for s in log.segments for t in s.txn_index.entries]
    assert entries == [AbortedTxn(1, 0, 3, 2), AbortedTxn(1, 6, 7, 8)]
    # truncation removes the entry of the later abort
    log.truncate_to(7)
    assert log.aborted_transactions(0, 8) == [(1, 0)]
    log.close()


def test_txn_index_rebuilt_on_unclean_recovery(tmp_path, clock):
    log = _open(tmp_path, clock, segment_bytes=300)
    for i in range(6):
        _txn(log, 10 + i, 0, [b"k%d" % i])
        _end(log, 10 + i, commit=bool(i % 2))
    expect = log.aborted_transactions(0, log.log_end_offset)
    assert expect == [(10, 0), (12, 4), (14, 8)]
    files = sorted(n for n in os.listdir(log.dir) if n.endswith(".txnindex"))
    assert files
    log.close_handles()                      # crash: nothing written at close
    for n in files:
        os.unlink(os.path.join(log.dir, n))
    again = _open(tmp_path, clock, clean=False, segment_bytes=300)
    assert again.aborted_transactions(0, again.log_end_offset) == expect
    assert sorted(n for n in os.listdir(again.dir) if n.endswith(".txnindex")) == files
    again.close()


def test_txn_index_deleted_with_segments(tmp_path, clock):
    log = _open(tmp_path, clock, segment_bytes=200, retention_ms=1000)
    _txn(log, 1, 0, [b"a"])
    _end(log, 1, commit=False)
    for i in range(4):
        log.append(build_batch([(b"k", b"v" * 50)], base_timestamp=clock.now), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    first = log.segments[0]
    assert first.txn_index.exists()
    clock.now += 10 ** 12
    assert log.delete_old_segments() >= 1
    assert first.txn_index.path.endswith(".deleted") and os.path.exists(first.txn_index.path)
    log.delete_expired_files(force=True)
    assert not os.path.exists(first.txn_index.path)
    log.close()

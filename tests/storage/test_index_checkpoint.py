import os

import pytest

from storage.checkpoint import (CheckpointError, read_checkpoint, read_offsets_checkpoint,
                                write_checkpoint, write_offsets_checkpoint)
from storage.errors import CorruptIndexError
from storage.index import OffsetIndex, TimeIndex
from storage.leader_epoch import LeaderEpochCache


def test_offset_index_lookup_and_layout(tmp_path):
    p = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(p, 100, 80)
    idx.create(active=True)
    assert os.path.getsize(p) == 80          # preallocated
    for i in range(1, 6):
        idx.append(100 + i * 10, i * 1000)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(125) == (120, 2000)
    assert idx.lookup(150) == (150, 5000)
    assert idx.lookup(10**6) == (150, 5000)
    idx.persist()
    with open(p, "rb") as f:
        data = f.read()
    assert data[:8] == (10).to_bytes(4, "big") + (1000).to_bytes(4, "big")
    assert data[40:] == bytes(40)
    # reopen a preallocated file: zero tail ignored
    again = OffsetIndex(p, 100, 80)
    assert again.entries == 5 and again.lookup(141) == (140, 4000)
    idx.set_active(False)
    assert os.path.getsize(p) == 40
    idx.truncate_to(130)
    assert idx.entries == 2
    idx.persist()
    assert os.path.getsize(p) == 16


def test_offset_index_full_and_ordering(tmp_path):
    idx = OffsetIndex(str(tmp_path / "0.index"), 0, 16)
    idx.create()
    idx.append(1, 10)
    with pytest.raises(ValueError):
        idx.append(1, 20)
    idx.append(2, 20)
    assert idx.is_full
    with pytest.raises(ValueError):
        idx.append(3, 30)


def test_offset_index_sanity_check(tmp_path):
    p = tmp_path / "0.index"
    p.write_bytes((5).to_bytes(4, "big") + (10).to_bytes(4, "big") +
                  (3).to_bytes(4, "big") + (20).to_bytes(4, "big"))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(str(p), 0, 1024).load()
    p.write_bytes(b"\x00" * 7)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(str(p), 0, 1024).load()


def test_time_index(tmp_path):
    p = str(tmp_path / "00000000000000000000.timeindex")
    ti = TimeIndex(p, 0, 120)
    ti.create()
    ti.maybe_append(100, 5)
    ti.maybe_append(100, 7)          # not greater: skipped
    ti.maybe_append(200, 9)
    assert ti.entries == 2
    assert ti.lookup(50) == (-1, 0)
    assert ti.lookup(150) == (100, 5)
    assert ti.last_entry() == (200, 9)
    ti.persist()
    assert TimeIndex(p, 0, 120).entries == 2
    ti.truncate_to(9)
    assert ti.last_entry() == (100, 5)
    ti.set_active(False)
    assert os.path.getsize(p) == 12


def test_checkpoint_roundtrip_and_rejects(tmp_path):
    p = str(tmp_path / "replication-offset-checkpoint")
    write_offsets_checkpoint(p, {("orders", 0): 1532, ("my-topic", 1): 7})
    assert open(p).read() == "0\n2\nmy-topic 1 7\norders 0 1532\n"
    assert read_offsets_checkpoint(p) == {("orders", 0): 1532, ("my-topic", 1): 7}
    assert not os.path.exists(p + ".tmp")
    open(p, "w").write("1\n0\n")
    with pytest.raises(CheckpointError):
        read_checkpoint(p, 3)
    open(p, "w").write("0\n2\na 0 1\n")
    with pytest.raises(CheckpointError):
        read_checkpoint(p, 3)
    open(p, "w").write("")
    assert read_checkpoint(p, 3) == []
    assert read_checkpoint(str(tmp_path / "missing"), 3) == []
    write_checkpoint(p, [])
    assert open(p).read() == "0\n0\n"


def test_leader_epoch_cache(tmp_path):
    p = str(tmp_path / "leader-epoch-checkpoint")
    c = LeaderEpochCache(p)
    c.assign(0, 0)
    c.assign(0, 5)                  # same epoch: no entry
    c.assign(2, 1187)
    c.assign(5, 4410)
    assert open(p).read() == "0\n3\n0 0\n2 1187\n5 4410\n"
    assert c.end_offset_for(5, 5000) == (5, 5000)
    assert c.end_offset_for(2, 5000) == (2, 4410)
    assert c.end_offset_for(3, 5000) == (2, 4410)
    assert c.end_offset_for(6, 5000) == (-1, -1)
    assert LeaderEpochCache(p).entries == c.entries
    c.truncate_from_end(1187)
    assert c.entries == [(0, 0)]
    c.assign(3, 100)
    c.truncate_from_start(150)
    assert c.entries == [(3, 150)]
    assert c.end_offset_for(1, 200) == (1, 150)

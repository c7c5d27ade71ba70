"""Rebuilding an index in place after ``reset()`` (recovery): the file is not truncated, the
next ``persist`` writes the new entries over the old ones and zeroes what is left of them."""
import os

import pytest
from hypothesis import given, settings, strategies as st

from storage.errors import CorruptIndexError
from storage.index import OffsetIndex, TimeIndex

MAX_BYTES = 8 * 4096        # eight pages of offset entries: old entries can span pages


def _fill_offsets(idx, n, step=7):
    for i in range(1, n + 1):
        idx.append(idx.base_offset + i * step, i * 1000)


def _file(path):
    with open(path, "rb") as f:
        return f.read()


@settings(max_examples=60, deadline=None)
@given(old=st.integers(0, MAX_BYTES // 8), new=st.integers(0, MAX_BYTES // 8),
       old_active=st.booleans(), new_active=st.booleans(), step=st.integers(1, 5))
def test_offset_index_rebuilt_in_place_reads_back_only_new_entries(tmp_path_factory, old, new,
                                                                   old_active, new_active, step):
    p = str(tmp_path_factory.mktemp("idx") / "00000000000000000050.index")
    idx = OffsetIndex(p, 50, MAX_BYTES)
    idx.create(active=old_active)
    _fill_offsets(idx, old)
    idx.persist()
    idx._active = new_active
    idx.reset()
    _fill_offsets(idx, new, step)
    idx.persist()
    data = _file(p)
    assert len(data) == (MAX_BYTES if new_active else new * 8)
    assert not any(data[new * 8:])              # nothing of the old entries is left
    again = OffsetIndex(p, 50, MAX_BYTES)
    assert again.entries == new
    if new:
        assert again.last_entry() == (50 + new * step, new * 1000)
        assert again.lookup(50 + step) == (50 + step, 1000)


def test_reset_does_not_truncate_and_a_crash_before_persist_keeps_the_old_file(tmp_path):
    p = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(p, 0, MAX_BYTES)
    idx.create(active=True)
    _fill_offsets(idx, 600)          # 4,800 bytes: over one page
    idx.persist()
    before = _file(p)
    idx._active = True
    idx.reset()
    assert idx.entries == 0
    assert _file(p) == before           # untouched until the next persist
    # a crash here: the file still holds its old, valid entries
    assert OffsetIndex(p, 0, MAX_BYTES).entries == 600


def test_time_index_rebuilt_in_place(tmp_path):
    p = str(tmp_path / "00000000000000000000.timeindex")
    ti = TimeIndex(p, 0, 1200)
    ti.create(active=True)
    for i in range(1, 90):
        ti.maybe_append(1000 + i, i)
    ti.persist()
    ti._active = True
    ti.reset()
    ti.maybe_append(5000, 3)
    ti.persist()
    data = _file(p)
    assert len(data) == 1200 and not any(data[12:])
    again = TimeIndex(p, 0, 1200)
    assert again.entries == 1 and again.last_entry() == (5000, 3)


def test_reset_of_a_missing_file_creates_it_at_persist(tmp_path):
    p = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(p, 0, 800)
    idx._active = True
    idx.reset()
    _fill_offsets(idx, 3)
    idx.persist()
    assert os.path.getsize(p) == 800
    assert OffsetIndex(p, 0, 800).entries == 3


def test_non_zero_bytes_after_a_gap_are_never_read_as_entries(tmp_path):
    """Old bytes beyond a page of zeros are left by the rebuild (it stops at the first zero
    page); the load then refuses the file instead of reading them as entries."""
    p = str(tmp_path / "00000000000000000000.index")
    with open(p, "wb") as f:
        f.write(bytes(3 * 4096))
        f.write((9).to_bytes(4, "big") + (77).to_bytes(4, "big"))
        f.write(bytes(4096 - 8))
    idx = OffsetIndex(p, 0, 4 * 4096)
    idx._active = True
    idx.reset()
    _fill_offsets(idx, 2)
    idx.persist()
    data = _file(p)
    again = OffsetIndex(p, 0, 4 * 4096)
    if any(data[16:]):
        with pytest.raises(CorruptIndexError):
            again.load()
    else:
        assert again.entries == 2

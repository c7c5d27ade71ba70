"""walk_headers reads a window of the file at a time: the headers it yields must be exactly the
batches' own, whatever their sizes against the window, and it must stop at a torn tail."""
from __future__ import annotations

import os

from hypothesis import given, settings, strategies as st

from protocol.records import build_batch, read_header
from storage import scan
from storage.scan import walk_headers


def _file(tmp_path, batches, tail=b""):
    data = b"".join(batches) + tail
    path = tmp_path / "walk.log"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY), len(data)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 12000), min_size=1, max_size=12), torn=st.integers(0, 60),
       start_at=st.integers(0, 11))
def test_headers_match_the_batches(tmp_path_factory, sizes, torn, start_at):
    tmp = tmp_path_factory.mktemp("walk")
    batches, offset = [], 0
    for n in sizes:
        b = build_batch([(None, os.urandom(n), [], 1700000000000)], base_offset=offset)
        batches.append(bytes(b))
        offset += 1
    tail = batches[-1][:torn] if torn else b""      # a torn copy of a batch after the last whole one
    fd, size = _file(tmp, batches, tail)
    try:
        positions, pos = [], 0
        for b in batches:
            positions.append(pos)
            pos += len(b)
        first = min(start_at, len(batches) - 1)
        got = list(walk_headers(fd, positions[first], size))
        assert [h.pos for h in got] == positions[first:]
        assert [h.base_offset for h in got] == list(range(first, len(batches)))
        for h, b in zip(got, batches[first:]):
            assert h[:-1] == read_header(b, 0)[:-1]       # every field but the position
    finally:
        os.close(fd)


def test_a_walk_within_one_window_is_one_read(tmp_path, monkeypatch):
    batches = [bytes(build_batch([(None, b"x" * 300, [], 0)], base_offset=i)) for i in range(10)]
    fd, size = _file(tmp_path, batches)
    reads = []
    real = scan.pread_exact
    monkeypatch.setattr(scan, "pread_exact", lambda *a: reads.append(a) or real(*a))
    try:
        assert len(list(walk_headers(fd, 0, size))) == 10
        assert len(reads) == 1
    finally:
        os.close(fd)

"""FrameReader: frames split out of a byte stream, through both faces, and FramePool's lending
of large-frame buffers: a buffer is lent again only once no frame view of it is alive."""
import struct

import pytest
from hypothesis import given, settings, strategies as st

from protocol.framing import FramePool, FrameReader, FrameTooLarge, InvalidFrame, frame

SMALL = FrameReader.SMALL


def feed_buffered(reader, data: bytes, cuts) -> list:
    """Deliver ``data`` as asyncio's BufferedProtocol would: into get_buffer()'s view, at most as
    much as it offers and as the next cut allows."""
    frames = []
    pos = 0
    cuts = list(cuts) or [len(data)]
    i = 0
    while pos < len(data):
        buf = reader.get_buffer(-1)
        n = min(len(buf), cuts[i % len(cuts)], len(data) - pos)
        i += 1
        buf[:n] = data[pos:pos + n]
        pos += n
        frames.extend(reader.buffer_updated(n))
    return frames


payloads = st.lists(st.one_of(st.binary(max_size=64),
                              st.integers(min_value=SMALL + 1, max_value=3 * SMALL).map(lambda n: bytes([n % 251]) * n)),
                    min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(payloads, st.lists(st.integers(min_value=1, max_value=70000), max_size=6))
def test_frames_come_out_whole_through_both_faces(items, cuts):
    data = b"".join(frame(p) for p in items)
    plain = FrameReader().feed(data)
    buffered = feed_buffered(FrameReader(pool=FramePool()), data, cuts)
    assert [bytes(f) for f in plain] == items
    assert [bytes(f) for f in buffered] == items


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=SMALL + 1, max_value=4 * SMALL), st.booleans()),
                min_size=1, max_size=20),
       st.lists(st.integers(min_value=1, max_value=200000), max_size=6))
def test_a_frame_still_referred_to_is_never_written_over(sizes_kept, cuts):
    """Each large frame gets a distinct fill byte; frames (or slices of them) kept alive must read
    the same after every later frame has come in, while dropped frames' buffers are lent again."""
    pool = FramePool(max_buffers=3)
    reader = FrameReader(pool=pool)
    kept = []
    for i, (size, keep) in enumerate(sizes_kept):
        payload = bytes([i % 256]) * size
        (f,) = feed_buffered(reader, frame(payload), cuts)
        assert bytes(f) == payload
        if keep:
            kept.append((f[10:size // 2], i))   # a slice keeps the buffer exported as the frame does
        del f
        for view, j in kept:
            assert bytes(view) == bytes([j % 256]) * len(view)


def test_released_buffer_is_reused_and_small_or_huge_frames_are_not_pooled():
    pool = FramePool(max_buffers=2, max_size=4 * SMALL)
    reader = FrameReader(pool=pool)
    (a,) = feed_buffered(reader, frame(b"a" * (2 * SMALL)), [])
    (b,) = feed_buffered(reader, frame(b"b" * (2 * SMALL)), [])     # a still alive: a new buffer
    assert pool.reused == 0
    del a
    (c,) = feed_buffered(reader, frame(b"c" * (SMALL + 5)), [])     # fits in a's buffer
    assert pool.reused == 1 and bytes(b) == b"b" * (2 * SMALL) and bytes(c) == b"c" * (SMALL + 5)
    assert len(c) == SMALL + 5
    del b, c
    feed_buffered(reader, frame(b"x" * 10), [])                     # small: never from the pool
    (d,) = feed_buffered(reader, frame(b"d" * (5 * SMALL)), [])     # over max_size: never pooled
    assert pool.reused == 1 and len(pool._buffers) == 2 and bytes(d) == b"d" * (5 * SMALL)
    del d
    for i in range(10):     # nothing kept: every frame that fits a pooled buffer reuses one
        (f,) = feed_buffered(reader, frame(bytes([i]) * (4 * SMALL - i)), [1000, 70000])
        assert bytes(f) == bytes([i]) * (4 * SMALL - i)
        del f
    assert pool.reused == 1 + 9


def test_bad_sizes():
    with pytest.raises(FrameTooLarge):
        FrameReader(max_size=100).feed(struct.pack(">i", 101))
    with pytest.raises(InvalidFrame):
        FrameReader().feed(struct.pack(">i", -1))
    assert [bytes(f) for f in FrameReader().feed(struct.pack(">i", 0))] == [b""]

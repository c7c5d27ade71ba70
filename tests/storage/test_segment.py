import os

from hypothesis import given, settings, strategies as st

from protocol.records import build_batch, read_header, set_base_offset

from storage.segment import LogSegment
from tests.storage.helpers import make_batch


def batch_at(offset, n=1, size=10, ts=None):
    b = make_batch([b"x" * size] * n, timestamps=ts or [1000 + offset + i for i in range(n)])
    set_base_offset(b, 0, offset)
    return b


def append(seg, b):
    seg.append(b, [read_header(b)])


def test_index_entries_follow_interval_rule(tmp_path):
    seg = LogSegment(str(tmp_path), 0, index_interval_bytes=150, create=True, active=True)
    sizes = []
    for off in range(10):
        b = batch_at(off, size=40)
        sizes.append(len(b))
        append(seg, b)
    # first append never indexed; an entry when MORE than 100 bytes since the last one
    entries = [seg.offset_index.lookup(o) for o in range(10)]
    positions = sorted({p for _, p in entries})
    assert positions[0] == 0
    assert sizes[0] == 108
    # 108 bytes (no), 216 > 150 -> entry at batches 2, 4, 6, 8
    assert [seg.offset_index.lookup(o) for o in (2, 4, 6, 8)] == \
        [(2, 216), (4, 432), (6, 648), (8, 864)]
    assert seg.offset_index.entries == 4
    assert seg.next_offset == 10
    assert seg.max_timestamp == 1009 and seg.offset_of_max_timestamp == 9


def test_read_regions(tmp_path):
    seg = LogSegment(str(tmp_path), 50, index_interval_bytes=0, create=True, active=True)
    for off in range(50, 60):
        append(seg, batch_at(off))
    one = len(batch_at(0))
    region, h = seg.read(53, 10 ** 6)
    assert h.base_offset == 53 and region.position == 3 * one and region.length == 7 * one
    region, _ = seg.read(53, 5, min_one_message=True)
    assert region.length == one
    region, _ = seg.read(53, 5, min_one_message=False)
    assert region.length == 5
    region, _ = seg.read(53, 10 ** 6, max_position=5 * one)
    assert region.length == 2 * one
    assert seg.read(60, 100) is None
    data = seg.read_bytes(55, 2 * one)
    assert read_header(data).base_offset == 55 and len(data) == 2 * one
    assert seg.find_offset_by_timestamp(1056) == (1056, 56)
    assert seg.find_offset_by_timestamp(5000) is None


def test_recover_truncates_torn_tail_and_rebuilds(tmp_path):
    seg = LogSegment(str(tmp_path), 0, index_interval_bytes=50, create=True, active=True)
    for off in range(20):
        append(seg, batch_at(off, size=30))
    good = seg.size
    seg.close()
    path = os.path.join(str(tmp_path), "00000000000000000000.log")
    with open(path, "r+b") as f:
        f.truncate(good - 7)           # torn last batch
    os.unlink(path.replace(".log", ".index"))
    seg = LogSegment(str(tmp_path), 0, index_interval_bytes=50, active=True)
    removed = seg.recover()
    one = len(batch_at(0, size=30))
    assert removed == one - 7 and seg.next_offset == 19 and seg.size == 19 * one
    assert seg.offset_index.entries > 0
    assert seg.read(18, 10 ** 6)[1].base_offset == 18


def test_recover_stops_at_crc_error(tmp_path):
    seg = LogSegment(str(tmp_path), 0, index_interval_bytes=50, create=True, active=True)
    for off in range(10):
        append(seg, batch_at(off, size=30))
    one = len(batch_at(0, size=30))
    seg.close()
    path = os.path.join(str(tmp_path), "00000000000000000000.log")
    with open(path, "r+b") as f:
        f.seek(6 * one + 70)
        f.write(b"\xff")
    seg = LogSegment(str(tmp_path), 0, index_interval_bytes=50, active=True)
    assert seg.recover() == 4 * one
    assert seg.next_offset == 6


def test_truncate_to(tmp_path):
    seg = LogSegment(str(tmp_path), 0, index_interval_bytes=20, create=True, active=True)
    for off in range(10):
        append(seg, batch_at(off))
    one = len(batch_at(0))
    assert seg.truncate_to(4) == 6 * one
    assert seg.next_offset == 4 and seg.size == 4 * one
    assert seg.offset_index.last_entry()[0] < 4
    append(seg, batch_at(4))
    assert seg.next_offset == 5
    assert seg.truncate_to(0) == 5 * one and seg.size == 0


def test_index_corruption_triggers_rebuild(tmp_path):
    seg = LogSegment(str(tmp_path), 0, index_interval_bytes=20, create=True, active=True)
    for off in range(10):
        append(seg, batch_at(off))
    seg.close()
    p = os.path.join(str(tmp_path), "00000000000000000000.index")
    with open(p, "r+b") as f:
        f.write(b"\x7f\xff\xff\xff\x7f\xff\xff\xff")   # points past the log
    seg = LogSegment(str(tmp_path), 0, index_interval_bytes=20)
    assert seg.read(7, 100)[1].base_offset == 7


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 9000), min_size=1, max_size=15),
       interval=st.sampled_from([0, 100, 4096, 10 ** 6]),
       start=st.integers(0, 14), max_size=st.integers(0, 150000), min_one=st.booleans())
def test_whole_first_empties_a_region_whose_first_batch_does_not_fit(tmp_path_factory, sizes,
                                                                     interval, start, max_size,
                                                                     min_one):
    """Kafka answers Fetch v3+ whose first batch does not fit (and no min-one rule) with no
    records; otherwise the region is the same, its last batch possibly cut, as Kafka's."""
    seg = LogSegment(str(tmp_path_factory.mktemp("whole")), 0, index_interval_bytes=interval,
                     create=True, active=True)
    ends, pos = [], 0
    for off, n in enumerate(sizes):
        b = build_batch([(None, b"v" * n, [], 1700000000000)], base_offset=off)
        append(seg, b)
        pos += len(b)
        ends.append(pos)
    first = min(start, len(sizes) - 1)
    begin = ends[first - 1] if first else 0
    first_size = ends[first] - begin
    plain, h = seg.read(first, max_size, min_one_message=min_one)
    whole, h2 = seg.read(first, max_size, min_one_message=min_one, whole_first=True)
    assert h2.pos == h.pos == begin and whole.position == plain.position == begin
    assert plain.length == min(seg.size - begin, max(max_size, first_size) if min_one else max_size)
    if min_one or max_size >= first_size:
        assert whole.length == plain.length
    else:
        assert whole.length == 0 and plain.length == max_size

"""consumer_records: what a consumer hands to its application from fetched record batches."""
from protocol import records as rec


def _batch(base, pid=-1, values=(b"a",), txn=False):
    return bytes(rec.build_batch([(None, v, [], 1000 + i) for i, v in enumerate(values)],
                                 base_offset=base, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                 base_sequence=0 if pid >= 0 else -1, is_transactional=txn))


def _marker(base, kind, pid):
    b = rec.build_control_batch(kind, pid, 0, 0)
    rec.set_base_offset(b, 0, base)
    return bytes(b)


def test_read_committed_drops_aborted_data_and_markers_and_skips_before_fetch_offset():
    blob = b"".join([
        _batch(0, values=(b"p0", b"p1")),                  # plain, offsets 0-1
        _batch(2, pid=7, values=(b"x2", b"x3"), txn=True),  # aborted below
        _batch(4, pid=8, values=(b"c4",), txn=True),        # committed
        _marker(5, rec.ControlRecordType.ABORT, 7),
        _marker(6, rec.ControlRecordType.COMMIT, 8),
        _batch(7, values=(b"p7",)),
    ])
    got, nxt = rec.consumer_records(memoryview(blob), 1, aborted=[(2, 7)])
    assert [(r.offset, bytes(r.value)) for r in got] == [(1, b"p1"), (4, b"c4"), (7, b"p7")]
    assert nxt == 8
    # read_uncommitted sees the aborted data too, never the markers
    got, _ = rec.consumer_records(memoryview(blob), 0)
    assert [r.offset for r in got] == [0, 1, 2, 3, 4, 7]
    # an end bound stops early and caps the next offset
    got, nxt = rec.consumer_records(memoryview(blob), 0, end=3)
    assert [r.offset for r in got] == [0, 1, 2] and nxt == 3


def test_legacy_entries_are_read_even_when_shorter_than_a_v2_header():
    blob = bytes(rec.build_legacy([(b"k", b"v", [], 5), (b"k2", b"v2", [], 6)], 1, base_offset=10))
    got, nxt = rec.consumer_records(memoryview(blob), 11)
    assert [(r.offset, bytes(r.key), bytes(r.value)) for r in got] == [(11, b"k2", b"v2")] and nxt == 12
    gz = bytes(rec.build_legacy([(None, b"x%d" % i, [], 5) for i in range(3)], 1, "gzip", base_offset=20))
    got, nxt = rec.consumer_records(memoryview(gz), 20)
    assert [r.offset for r in got] == [20, 21, 22] and nxt == 23

"""odradek_spark pieces that need no Spark: options, offset JSON, rate limiting, range planning."""
from __future__ import annotations

import importlib.util

import pytest

from odradek_spark._kafka import (ConnectorError, ConnectorOptions, from_offset_dict,
                                  limit_ranges, parse_offsets_option, timestamp_of,
                                  to_offset_dict)


def test_options_parse_like_sparks_kafka_connector():
    o = ConnectorOptions({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a, b",
                          "startingOffsets": "earliest", "maxOffsetsPerTrigger": "100",
                          "includeHeaders": "true", "kafka.isolation.level": "read_committed"})
    assert o.topics == ["a", "b"] and o.starting == "earliest"
    assert o.max_offsets_per_trigger == 100 and o.include_headers and o.isolation_level == 1
    assert o.acks == -1 and o.idempotence
    assert ConnectorOptions({"bootstrap.servers": "h:1"}).starting == "latest"
    with pytest.raises(ConnectorError, match="bootstrap.servers"):
        ConnectorOptions({"subscribe": "a"})
    with pytest.raises(ConnectorError, match="exactly one of"):
        ConnectorOptions({"bootstrap.servers": "h:1"}).require_subscription()
    with pytest.raises(ConnectorError, match="got subscribe, subscribePattern"):
        ConnectorOptions({"bootstrap.servers": "h:1", "subscribe": "a",
                          "subscribePattern": "a.*"}).require_subscription()
    o = ConnectorOptions({"bootstrap.servers": "h:1", "assign": '{"t": [1, 0], "u": [2]}'})
    o.require_subscription()
    assert o.assign == [("t", 0), ("t", 1), ("u", 2)]
    with pytest.raises(ConnectorError, match="assign"):
        ConnectorOptions({"bootstrap.servers": "h:1", "assign": '["t"]'})
    with pytest.raises(ConnectorError, match="regular expression"):
        ConnectorOptions({"bootstrap.servers": "h:1", "subscribePattern": "("})
    with pytest.raises(ConnectorError, match="maxOffsetsPerTrigger"):
        ConnectorOptions({"bootstrap.servers": "h:1", "maxOffsetsPerTrigger": "0"})
    assert not ConnectorOptions({"bootstrap.servers": "h:1", "kafka.acks": "1"}).idempotence


def test_timestamp_options():
    o = ConnectorOptions({"bootstrap.servers": "h:1", "startingTimestamp": "1000",
                          "startingOffsetsByTimestamp": '{"t": {"0": 5}}', "endingOffsetsByTimestamp": '{"t": {"1": 7}}'})
    assert o.starting_ts == 1000 and o.ending_ts == {("t", 1): 7} and o.ts_strategy == "error"
    o = ConnectorOptions({"bootstrap.servers": "h:1", "startingOffsetsByTimestamp": '{"t": {"0": 5, "2": 9}}',
                          "startingOffsetsByTimestampStrategy": "LATEST"})
    assert o.starting_ts == {("t", 0): 5, ("t", 2): 9} and o.ending_ts is None and o.ts_strategy == "latest"
    with pytest.raises(ConnectorError, match="startingOffsetsByTimestamp must be JSON"):
        ConnectorOptions({"bootstrap.servers": "h:1", "startingOffsetsByTimestamp": "[1]"})
    with pytest.raises(ConnectorError, match="negative timestamps"):
        ConnectorOptions({"bootstrap.servers": "h:1", "endingOffsetsByTimestamp": '{"t": {"0": -1}}'})
    with pytest.raises(ConnectorError, match="startingOffsetsByTimestampStrategy"):
        ConnectorOptions({"bootstrap.servers": "h:1", "startingOffsetsByTimestampStrategy": "earliest"})
    with pytest.raises(ConnectorError, match="startingTimestamp"):
        ConnectorOptions({"bootstrap.servers": "h:1", "startingTimestamp": "-5"})


def test_trigger_options():
    from odradek_spark._kafka import duration_seconds
    o = ConnectorOptions({"bootstrap.servers": "h:1", "minOffsetsPerTrigger": "20"})
    assert o.min_offsets_per_trigger == 20 and o.max_trigger_delay == 900.0
    assert [duration_seconds(v, "x") for v in ("15m", "30s", "500ms", "2h", "1d", "250", "3 min")] == \
        [900.0, 30.0, 0.5, 7200.0, 86400.0, 0.25, 180.0]
    with pytest.raises(ConnectorError, match="maxTriggerDelay"):
        ConnectorOptions({"bootstrap.servers": "h:1", "maxTriggerDelay": "soon"})
    with pytest.raises(ConnectorError, match="is more than maxOffsetsPerTrigger"):
        ConnectorOptions({"bootstrap.servers": "h:1", "minOffsetsPerTrigger": "30", "maxOffsetsPerTrigger": "20"})


def test_offsets_json():
    assert parse_offsets_option('{"t": {"0": 5, "1": -2}}', "x", "latest") == \
        {("t", 0): 5, ("t", 1): -2}
    assert parse_offsets_option(None, "x", "earliest") == "earliest"
    with pytest.raises(ConnectorError):
        parse_offsets_option("[1]", "x", "latest")
    with pytest.raises(ConnectorError):
        parse_offsets_option("{bad", "x", "latest")
    d = to_offset_dict({("b", 10): 1, ("a", 2): 3, ("b", 9): 4})
    assert list(d) == ["a", "b"] and list(d["b"]) == ["9", "10"]      # canonical order
    assert from_offset_dict(d) == {("b", 10): 1, ("a", 2): 3, ("b", 9): 4}


def test_limit_ranges_is_proportional_and_exact():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    end = {("t", 0): 90, ("t", 1): 110, ("t", 2): 5}
    cut = limit_ranges(start, end, 20)
    assert sum(cut[tp] - start[tp] for tp in start) == 20
    assert cut[("t", 0)] == 18 and cut[("t", 1)] == 102 and cut[("t", 2)] == 5
    assert limit_ranges(start, end, 1000) == end
    # a partition absent from start (new) is not limited here; plan_ranges reads it from 0
    assert limit_ranges({}, {("t", 0): 7}, 1) == {("t", 0): 7}
    # tiny limits still make progress somewhere
    one = limit_ranges(start, end, 1)
    assert sum(one[tp] - start[tp] for tp in start) == 1


def test_timestamps_are_exact():
    t = timestamp_of(1_700_000_000_123)
    assert t.isoformat() == "2023-11-14T22:13:20.123000+00:00"


@pytest.mark.skipif(importlib.util.find_spec("pyspark") is None, reason="pyspark is not installed")
def test_plan_ranges_one_task_per_partition_and_split():
    from odradek_spark.source import plan_ranges
    start = {("t", 0): 0, ("t", 1): 10}
    end = {("t", 0): 100, ("t", 1): 10, ("t", 2): 4}
    r = plan_ranges(start, end)
    assert [(x.partition, x.start, x.end, x.new_partition) for x in r] == \
        [(0, 0, 100, False), (2, 0, 4, True)]
    r = plan_ranges(start, end, min_partitions=6)
    assert len(r) >= 6
    covered = sorted((x.partition, o) for x in r for o in range(x.start, x.end))
    assert covered == [(0, o) for o in range(100)] + [(2, o) for o in range(4)]


def _decoder(isolation_level, start, end, headers=False):
    from odradek_spark._kafka import _RangeReader
    opts = ConnectorOptions({"bootstrap.servers": "127.0.0.1:1", "includeHeaders": str(headers),
                             "kafka.isolation.level": ["read_uncommitted",
                                                       "read_committed"][isolation_level]})
    return _RangeReader(opts, None, "t", 0, start, end, False)


def _log():
    """Offsets 0-1 plain, 2-3 txn pid 7 (aborted, marker at 4), 5-6 txn pid 8 (committed,
    marker at 7), 8-9 plain."""
    from types import SimpleNamespace

    from protocol import records as rec
    parts = [
        rec.build_batch([(b"k0", b"v0", [("h", b"1")], 1000), (None, b"v1", [], 1001)]),
        rec.build_batch([(b"a", b"x2", [], 1002), (b"a", b"x3", [], 1003)], base_offset=2,
                        producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True),
        rec.build_control_batch("ABORT", 7, 0, 0, base_offset=4, timestamp=1004),
        rec.build_batch([(b"c", b"y5", [], 1005), (b"c", b"y6", [], 1006)], base_offset=5,
                        producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True),
        rec.build_control_batch("COMMIT", 8, 0, 0, base_offset=7, timestamp=1007),
        rec.build_batch([(b"k8", b"v8", [], 1008), (b"k9", b"v9", [], 1009)], base_offset=8),
    ]
    aborted = [SimpleNamespace(producer_id=7, first_offset=2)]
    return SimpleNamespace(records=b"".join(bytes(p) for p in parts), aborted_transactions=aborted)


def test_decode_skips_control_records_and_aborted_transactions():
    r = _decoder(1, 0, 10, headers=True)
    c = r._decode(_log())
    assert c.offsets == [0, 1, 5, 6, 8, 9] and r.done and r.pos == 10
    assert c.values == [b"v0", b"v1", b"y5", b"y6", b"v8", b"v9"]
    assert c.keys[1] is None and c.headers[0] == [("h", b"1")]
    assert c.timestamps == [1000, 1001, 1005, 1006, 1008, 1009]
    # read_uncommitted sees the aborted records too, never the markers
    r = _decoder(0, 0, 10)
    assert r._decode(_log()).offsets == [0, 1, 2, 3, 5, 6, 8, 9]


def test_decode_honours_the_range():
    r = _decoder(0, 3, 6)
    c = r._decode(_log())
    assert c.offsets == [3, 5] and r.done and r.pos == 6
    rows = list(c.rows("t", 0))
    assert rows[0][:5] == (b"a", b"x3", "t", 0, 3)
    # a range that ends inside a marker's offset still completes
    r = _decoder(1, 2, 5)
    assert r._decode(_log()).offsets == [] and r.done

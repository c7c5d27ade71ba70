"""examples/spark_pipeline.py end to end on small data: sample events written with the batch
sink, the streaming window aggregation, results read back from the output topic."""
from __future__ import annotations

import importlib.util
import json
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.spark.support import (NEEDS_42, consume_all, create_topic, pyspark_before,
                                 spark_missing)

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(bool(spark_missing()), reason=spark_missing() or "ok"),
              pytest.mark.timeout(300)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"


def load_example():
    spec = importlib.util.spec_from_file_location("spark_pipeline_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def expected_stats(events):
    """(page, window start) -> (views, amount, users) for 1-minute windows."""
    acc = defaultdict(lambda: [0, 0.0, set()])
    for e in events:
        t = datetime.strptime(e["event_time"], "%Y-%m-%dT%H:%M:%SZ")
        start = t.replace(second=0).strftime("%Y-%m-%dT%H:%M:%SZ")
        a = acc[(e["page"], start)]
        a[0] += 1
        a[1] += e["amount"]
        a[2].add(e["user"])
    return {k: (v[0], round(v[1], 2), len(v[2])) for k, v in acc.items()}


def latest_per_key(records):
    out = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        out[r.key.decode()] = json.loads(r.value)
    return out


@pytest.mark.skipif(pyspark_before(4, 2), reason=NEEDS_42)
def test_example_pipeline_end_to_end(spark, spark_broker, topic_name, tmp_path):
    ex = load_example()
    bs = spark_broker.bootstrap
    src, dst = topic_name("views"), topic_name("stats")
    create_topic(bs, src, 3)
    create_topic(bs, dst, 2)
    start = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
    events = ex.sample_events(120, start=start, span_seconds=180, pages=("/", "/docs"))
    ex.write_events(spark, bs, src, events)
    # a record that is not JSON is dropped by the pipeline
    spark.createDataFrame([("x", "not json")], "key STRING, value STRING").write \
        .format("odradek").option("kafka.bootstrap.servers", bs).option("topic", src) \
        .mode("append").save()

    ckpt = str(tmp_path / "ckpt")

    def run():
        q = ex.build_query(spark, bs, src, dst, ckpt, window="1 minute", watermark="10 minutes",
                           available_now=True, max_offsets_per_trigger=50).start()
        q.awaitTermination(240)
        assert q.exception() is None, q.exception()
        return sum(p["numInputRows"] for p in q.recentProgress)

    # Append mode: no window is final yet (the watermark is 10 minutes behind the events).
    assert run() == len(events) + 1
    assert consume_all(bs, dst) == []
    # A much later event moves the watermark past every window; the restarted query (state
    # from the checkpoint) writes each window once.
    ex.write_events(spark, bs, src, [{"user": "u0", "page": "/late", "amount": 0.0,
                                      "event_time": "2024-05-01T12:30:00Z"}])
    assert run() == 1

    out = consume_all(bs, dst)
    got = latest_per_key(out)
    assert len(out) == len(got)                       # one record per window and page
    want = expected_stats(events)
    assert set(got) == {f"{page}@{ws}" for page, ws in want}
    for (page, ws), (views, amount, users) in want.items():
        g = got[f"{page}@{ws}"]
        assert (g["page"], g["window_start"], g["views"]) == (page, ws, views)
        assert g["amount"] == pytest.approx(amount, abs=0.011)
        assert abs(g["users"] - users) <= 1 + users // 4          # approx_count_distinct

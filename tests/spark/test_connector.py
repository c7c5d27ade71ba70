"""The odradek Spark data source against a real broker and a local[2] SparkSession.

Skipped (with the reason) when pyspark>=4.0, pyarrow or java is missing.  One broker and one
SparkSession serve the whole directory (tests/spark/conftest.py)."""
from __future__ import annotations

import ast
import json
import time
from datetime import datetime, timezone

import pytest

from tests.spark.support import (NEEDS_42, add_partitions, batch_headers, consume_all,
                                 create_topic, delete_records, produce, pyspark_before,
                                 spark_missing)

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(bool(spark_missing()), reason=spark_missing() or "ok"),
              pytest.mark.timeout(300)]

T0 = 1_700_000_000_000           # a fixed record timestamp base (ms)


def records_for(n, partitions=3, start=0):
    """(partition, key, value, headers, timestamp) for records start..start+n-1."""
    return [(i % partitions, f"k{i}".encode(), json.dumps({"i": i}).encode(),
             [("n", str(i).encode())], T0 + i) for i in range(start, start + n)]


def stream(spark, bootstrap, topic, **options):
    r = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic))
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def run_available_now(df, out_dir, checkpoint):
    """Run ``df`` into parquet files under ``out_dir`` (a sink that, unlike the memory sink,
    recovers from a checkpoint and commits exactly once) until the data now available is read."""
    q = (df.writeStream.format("parquet").option("path", str(out_dir))
         .option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert not q.isActive, "the AvailableNow query did not finish"
    assert q.exception() is None, q.exception()
    return q


def input_rows(q) -> int:
    return sum(p["numInputRows"] for p in q.recentProgress)


def table(spark, out_dir):
    try:
        return spark.read.parquet(str(out_dir)).collect()
    except Exception as e:            # no batch with data ever ran: no files yet
        if "PATH_NOT_FOUND" in str(e) or "UNABLE_TO_INFER_SCHEMA" in str(e):
            return []
        raise


@pytest.mark.slow     # ~30 s: the slow tier, to keep .ci/run's default tier well inside its limit
def test_stream_reads_each_record_once_and_resumes_from_checkpoint(spark, spark_broker,
                                                                   topic_name, tmp_path):
    bs = spark_broker.bootstrap
    topic = topic_name("src")
    create_topic(bs, topic, 3)
    first = records_for(90)
    placed = produce(bs, topic, first)
    expected = {pl: rec for pl, rec in zip(placed, first)}

    df = stream(spark, bs, topic, startingOffsets="earliest", includeHeaders="true")
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset",
                                                  "timestamp", "timestampType", "headers"]
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    q = run_available_now(df, out, ckpt)
    rows = table(spark, out)
    got = {(r.partition, r.offset): r for r in rows}
    assert len(rows) == len(first) == len(got)               # each record exactly once
    assert set(got) == set(expected)
    for pl, (part, key, value, headers, ts) in expected.items():
        r = got[pl]
        assert (r.topic, r.key, r.value) == (topic, key, value)
        assert [(h.key, h.value) for h in r.headers] == headers
        assert r.timestampType == 0
        assert r.timestamp.replace(tzinfo=timezone.utc) == \
            datetime.fromtimestamp(ts / 1000, timezone.utc)
    end = q.lastProgress["sources"][0]["endOffset"]
    if isinstance(end, str):      # a JSON string (PySpark 4.0 reports a Python dict repr)
        end = ast.literal_eval(end) if end.startswith("{'") else json.loads(end)
    assert end == {topic: {"0": 30, "1": 30, "2": 30}}

    # More records, then the same checkpoint: only the new ones, at the following offsets.
    second = records_for(30, start=90)
    placed2 = produce(bs, topic, second)
    q2 = run_available_now(stream(spark, bs, topic, startingOffsets="earliest",
                                  includeHeaders="true"), out, ckpt)
    assert input_rows(q2) == len(second)
    rows_all = table(spark, out)
    assert len(rows_all) == len(first) + len(second)
    rows2 = [r for r in rows_all if (r.partition, r.offset) not in expected]
    assert sorted((r.partition, r.offset) for r in rows2) == sorted(placed2)
    assert {(r.partition, r.offset): r.value for r in rows2} == \
        {pl: rec[2] for pl, rec in zip(placed2, second)}

    # Nothing new: a third run reads nothing.
    q3 = run_available_now(stream(spark, bs, topic, includeHeaders="true"), out, ckpt)
    assert input_rows(q3) == 0
    assert len(table(spark, out)) == len(first) + len(second)


def test_partitions_added_while_running_are_read_from_the_start(spark, spark_broker,
                                                               topic_name, tmp_path):
    bs = spark_broker.bootstrap
    topic = topic_name("grow")
    create_topic(bs, topic, 1)
    produce(bs, topic, records_for(5, partitions=1))
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    run_available_now(stream(spark, bs, topic, startingOffsets="latest"), out, ckpt)
    add_partitions(bs, topic, 2)
    placed = produce(bs, topic, [(i % 2, None, b"v%d" % i, [], T0) for i in range(7)])
    q = run_available_now(stream(spark, bs, topic), out, ckpt)
    assert input_rows(q) == 7
    assert sorted((r.partition, r.offset) for r in table(spark, out)) == sorted(placed)
    assert sorted(placed)[-3:] == [(1, 0), (1, 1), (1, 2)]


@pytest.mark.skipif(pyspark_before(4, 2), reason=NEEDS_42)
def test_max_offsets_per_trigger_splits_batches(spark, spark_broker, topic_name, tmp_path):
    bs = spark_broker.bootstrap
    topic = topic_name("limit")
    create_topic(bs, topic, 3)
    produce(bs, topic, records_for(100))
    q = run_available_now(stream(spark, bs, topic, startingOffsets="earliest",
                                 maxOffsetsPerTrigger=25), tmp_path / "out", tmp_path / "ckpt")
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 100 and max(sizes) <= 25 and len(sizes) >= 4, sizes
    rows = table(spark, tmp_path / "out")
    assert len({(r.partition, r.offset) for r in rows}) == len(rows) == 100


def test_min_offsets_per_trigger_waits_for_enough_data_or_the_delay(spark, spark_broker, topic_name, tmp_path):
    """minOffsetsPerTrigger=20: after the first batch, 5 new records wait (maxTriggerDelay 1h)
    until 20 more arrive, then one batch reads all 25; with maxTriggerDelay=1s a small batch runs
    once the delay has passed."""
    bs = spark_broker.bootstrap
    topic = topic_name("minrows")
    create_topic(bs, topic, 3)
    produce(bs, topic, records_for(30))

    def run(delay, out):
        q = (stream(spark, bs, topic, startingOffsets="earliest", minOffsetsPerTrigger=20, maxTriggerDelay=delay)
             .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(out) + "-ck")
             .trigger(processingTime="100 milliseconds").start())
        return q

    def rows(q):
        return sum(p["numInputRows"] for p in q.recentProgress)

    def wait_rows(q, n, timeout=60):
        deadline = time.monotonic() + timeout
        while rows(q) < n and time.monotonic() < deadline:
            time.sleep(0.2)
        return rows(q)

    q = run("1h", tmp_path / "out")
    try:
        assert wait_rows(q, 30) == 30                  # the first batch never waits
        produce(bs, topic, records_for(5, start=30))
        time.sleep(3)                                 # about 30 triggers: none may read the 5
        assert rows(q) == 30, q.recentProgress[-3:]
        produce(bs, topic, records_for(20, start=35))
        assert wait_rows(q, 31) >= 50                 # a batch ran once 20 were there: the 5 and 15+
        sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
        assert sizes[0] == 30 and all(n >= 20 for n in sizes[1:]), sizes
    finally:
        q.stop()
    q = run("1s", tmp_path / "out2")
    try:
        assert wait_rows(q, 55) == 55
        produce(bs, topic, records_for(5, start=55))
        assert wait_rows(q, 60) == 60                  # 5 < 20, read once a second has passed
    finally:
        q.stop()


def test_starting_offsets_latest_and_json(spark, spark_broker, topic_name, tmp_path):
    bs = spark_broker.bootstrap
    topic = topic_name("start")
    create_topic(bs, topic, 3)
    produce(bs, topic, records_for(30))                 # 10 per partition

    # Batch read with per-partition JSON offsets: -2 earliest, -1 latest.
    df = (spark.read.format("odradek").option("kafka.bootstrap.servers", bs)
          .option("subscribe", topic)
          .option("startingOffsets", json.dumps({topic: {"0": 4, "1": -2, "2": -1}}))
          .option("endingOffsets", json.dumps({topic: {"0": 8, "1": -1, "2": -1}})).load())
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(4, 8)] + [(1, o) for o in range(10)]

    # A stream starting at "latest" skips what is already there.
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    q = run_available_now(stream(spark, bs, topic, startingOffsets="latest"), out, ckpt)
    assert input_rows(q) == 0
    placed = produce(bs, topic, records_for(6, start=30))
    run_available_now(stream(spark, bs, topic, startingOffsets="latest"), out, ckpt)
    assert sorted((r.partition, r.offset) for r in table(spark, out)) == sorted(placed)


def test_starting_and_ending_by_timestamp(spark, spark_broker, topic_name, tmp_path):
    """startingTimestamp / startingOffsetsByTimestamp / endingTimestamp: the first offset at or
    after the time (ListOffsets by timestamp); none there fails the query unless
    startingOffsetsByTimestampStrategy=latest."""
    bs = spark_broker.bootstrap
    topic = topic_name("bytime")
    create_topic(bs, topic, 3)
    produce(bs, topic, records_for(30))       # record i: partition i % 3, offset i // 3, time T0 + i

    def offsets(df):
        return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    # T0 + 15 is record 15, 16, 17 on partitions 0, 1, 2: offset 5 everywhere; T0 + 24: offset 8
    got = offsets(batch(spark, bs, topic, startingTimestamp=T0 + 15, endingTimestamp=T0 + 24,
                        startingOffsets="latest"))      # the timestamp wins over startingOffsets
    assert got == [(p, o) for p in range(3) for o in range(5, 8)]
    by = json.dumps({topic: {"0": T0, "1": T0 + 10_000, "2": T0 + 27}})
    with pytest.raises(Exception, match="No offset matched the starting timestamp"):
        batch(spark, bs, topic, startingOffsetsByTimestamp=by).collect()
    got = offsets(batch(spark, bs, topic, startingOffsetsByTimestamp=by,
                        startingOffsetsByTimestampStrategy="latest"))
    assert got == [(0, o) for o in range(10)] + [(2, 9)]
    with pytest.raises(Exception, match="you must specify all TopicPartitions"):
        batch(spark, bs, topic, startingOffsetsByTimestamp=json.dumps({topic: {"0": T0}})).collect()
    # a stream starts there too, then reads on
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    run_available_now(stream(spark, bs, topic, startingTimestamp=T0 + 27), out, ckpt)
    assert sorted((r.partition, r.offset) for r in table(spark, out)) == [(0, 9), (1, 9), (2, 9)]


def batch(spark, bootstrap, topic, **options):
    r = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    if topic is not None:
        r = r.option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def test_rows_and_arrow_paths_agree(spark, spark_broker, topic_name):
    bs = spark_broker.bootstrap
    topic = topic_name("paths")
    create_topic(bs, topic, 2)
    recs = records_for(40, partitions=2)
    recs.append((0, None, None, [], T0))               # null key and value
    produce(bs, topic, recs)
    arrow = batch(spark, bs, topic, includeHeaders="true").collect()
    rows = batch(spark, bs, topic, includeHeaders="true", useArrow="false").collect()
    assert len(arrow) == 41
    key = lambda r: (r.partition, r.offset)             # noqa: E731
    assert sorted(arrow, key=key) == sorted(rows, key=key)
    nulls = [r for r in arrow if r.value is None]
    assert len(nulls) == 1 and nulls[0].key is None and nulls[0].headers == []


def test_subscribe_pattern_and_assign(spark, spark_broker, topic_name):
    bs = spark_broker.bootstrap
    prefix = topic_name("pat")
    for name in (f"{prefix}-a", f"{prefix}-b", f"x{prefix}-c"):
        create_topic(bs, name, 2)
        produce(bs, name, records_for(4, partitions=2))
    got = batch(spark, bs, None, subscribePattern=f"{prefix}-.*").select("topic").collect()
    assert sorted({r.topic for r in got}) == [f"{prefix}-a", f"{prefix}-b"] and len(got) == 8
    got = batch(spark, bs, None, assign=json.dumps({f"{prefix}-b": [1]})).collect()
    assert sorted((r.topic, r.partition, r.offset) for r in got) == \
        [(f"{prefix}-b", 1, 0), (f"{prefix}-b", 1, 1)]


def test_read_committed_stops_at_open_transactions(spark, spark_broker, topic_name, tmp_path):
    ck = pytest.importorskip("confluent_kafka")
    bs = spark_broker.bootstrap
    topic = topic_name("txn")
    create_topic(bs, topic, 1)
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": topic_name("tid"),
                     "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"c%d" % i, partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"a%d" % i, partition=0)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=0)
    p.flush(30)                                   # left open for now

    everything = batch(spark, bs, topic).collect()
    assert sorted(r.value for r in everything) == sorted(
        [b"c%d" % i for i in range(5)] + [b"a%d" % i for i in range(3)] + [b"open"])
    committed = {"kafka.isolation.level": "read_committed", "startingOffsets": "earliest"}
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    run_available_now(stream(spark, bs, topic, **committed), out, ckpt)
    assert sorted(r.value for r in table(spark, out)) == [b"c%d" % i for i in range(5)]
    p.commit_transaction(30)
    q = run_available_now(stream(spark, bs, topic, **committed), out, ckpt)
    assert input_rows(q) == 1
    assert sorted(r.value for r in table(spark, out)) == [b"c%d" % i for i in range(5)] + [b"open"]


def test_fail_on_data_loss(spark, spark_broker, topic_name):
    bs = spark_broker.bootstrap
    topic = topic_name("loss")
    create_topic(bs, topic, 1)
    produce(bs, topic, records_for(20, partitions=1))
    delete_records(bs, topic, 0, 12)
    start = json.dumps({topic: {"0": 5}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        batch(spark, bs, topic, startingOffsets=start).collect()
    got = batch(spark, bs, topic, startingOffsets=start, failOnDataLoss="false").collect()
    assert sorted(r.offset for r in got) == list(range(12, 20))


def test_batch_sink_writes_keys_values_headers(spark, spark_broker, topic_name):
    from tools.kclient import partition_for_key
    bs = spark_broker.bootstrap
    topic = topic_name("sink")
    create_topic(bs, topic, 3)
    rows = [(f"key-{i}", f"value-{i}", [("h", bytearray(b"%d" % i))]) for i in range(200)]
    rows.append((None, "no key", []))
    df = spark.createDataFrame(rows, "key STRING, value STRING, "
                                     "headers ARRAY<STRUCT<key: STRING, value: BINARY>>")
    (df.repartition(3).write.format("odradek").option("kafka.bootstrap.servers", bs)
     .option("topic", topic).mode("append").save())
    out = consume_all(bs, topic)
    assert len(out) == len(rows)
    by_value = {r.value.decode(): r for r in out}
    assert set(by_value) == {v for _, v, _ in rows}
    for k, v, h in rows:
        r = by_value[v]
        assert r.key == (k.encode() if k is not None else None)
        assert [(hk, bytes(hv)) for hk, hv in r.headers] == [(hk, bytes(hv)) for hk, hv in h]
        if k is not None:                     # Kafka's default partitioner
            assert r.partition == partition_for_key(k.encode(), 3)
    # Every partition's offsets are dense: nothing was written twice.
    for p in range(3):
        offs = sorted(r.offset for r in out if r.partition == p)
        assert offs == list(range(len(offs)))
        # written by an idempotent producer: a producer id and gap-free sequences per producer
        seqs = {}
        for h in batch_headers(bs, topic, p):
            assert h.producer_id >= 0 and h.base_sequence >= 0
            assert h.base_sequence == seqs.get(h.producer_id, 0)
            seqs[h.producer_id] = h.base_sequence + h.last_offset_delta + 1


def test_stream_to_stream_with_topic_column(spark, spark_broker, topic_name, tmp_path):
    from pyspark.sql import functions as F
    bs = spark_broker.bootstrap
    src, dst = topic_name("copy-src"), topic_name("copy-dst")
    create_topic(bs, src, 3)
    create_topic(bs, dst, 2)
    produce(bs, src, records_for(60))
    out = (stream(spark, bs, src, startingOffsets="earliest")
           .select("key", F.upper(F.col("value").cast("string")).alias("value"),
                   F.lit(dst).alias("topic")))
    q = (out.writeStream.format("odradek").option("kafka.bootstrap.servers", bs)
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert q.exception() is None, q.exception()
    got = consume_all(bs, dst)
    assert sorted(r.value for r in got) == sorted(json.dumps({"I": i}).encode().upper()
                                                  for i in range(60))


def test_missing_options_are_reported(spark, spark_broker):
    from pyspark.errors import PySparkException
    from py4j.protocol import Py4JJavaError
    with pytest.raises((PySparkException, Py4JJavaError, Exception)) as e:
        spark.read.format("odradek").option("subscribe", "x").load().collect()
    assert "bootstrap.servers" in str(e.value)

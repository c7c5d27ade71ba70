#!/usr/bin/env python3
"""Example: a Spark Structured Streaming pipeline between two Odradek topics.

Reads JSON page-view events from an input topic, counts views and sums amounts per page in
tumbling event-time windows, and writes one JSON record per (window, page) to an output topic,
keyed "page@window-start".  In the default append mode a window is written once, final, when
the watermark (the latest event time seen minus --watermark) passes its end; --output-mode
update writes running counts after every micro-batch instead (a later record for a key replaces
an earlier one, so the output topic suits compaction).

    # a broker on 127.0.0.1:9092, then:
    python examples/spark_pipeline.py --bootstrap-server 127.0.0.1:9092 \\
        --input page-views --output page-stats --generate 1000 --available-now

Input records look like {"user": "u3", "page": "/docs", "amount": 2.5,
"event_time": "2024-05-01T12:00:07Z"}; records that are not valid JSON (or lack a page or a
time) are dropped.  Without --available-now the query runs until interrupted (Ctrl-C), a
micro-batch every --trigger seconds; the checkpoint directory lets a restarted pipeline
resume exactly where it stopped.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

EVENT_SCHEMA = "user STRING, page STRING, amount DOUBLE, event_time TIMESTAMP"


def parse_events(raw):
    """Odradek records -> typed events (invalid JSON and incomplete events dropped)."""
    from pyspark.sql import functions as F
    events = raw.select(
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"),
        F.col("timestamp").alias("log_time"))
    return (events.select("e.*", "log_time")
            .where(F.col("page").isNotNull() & F.col("event_time").isNotNull()))


def page_stats(events, window: str, watermark: str):
    """Views and amount per page per tumbling event-time window."""
    from pyspark.sql import functions as F
    return (events.withWatermark("event_time", watermark)
            .groupBy(F.window("event_time", window).alias("w"), "page")
            .agg(F.count("*").alias("views"),
                 F.round(F.sum(F.coalesce("amount", F.lit(0.0))), 2).alias("amount"),
                 F.approx_count_distinct("user").alias("users")))


def to_records(stats):
    """Aggregates -> (key, value) columns for the Odradek sink."""
    from pyspark.sql import functions as F
    start = F.date_format("w.start", "yyyy-MM-dd'T'HH:mm:ss'Z'")
    end = F.date_format("w.end", "yyyy-MM-dd'T'HH:mm:ss'Z'")
    return stats.select(
        F.concat_ws("@", "page", start).alias("key"),
        F.to_json(F.struct(start.alias("window_start"), end.alias("window_end"), "page",
                           "views", "amount", "users")).alias("value"))


def build_query(spark, bootstrap: str, input_topic: str, output_topic: str, checkpoint: str, *,
                window: str = "1 minute", watermark: str = "2 minutes",
                starting_offsets: str = "earliest", max_offsets_per_trigger: int | None = None,
                available_now: bool = False, trigger_seconds: float = 5.0,
                output_mode: str = "append"):
    """Wire source -> parse -> window aggregate -> sink; returns the DataStreamWriter."""
    reader = (spark.readStream.format("odradek")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", input_topic)
              .option("startingOffsets", starting_offsets))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    records = to_records(page_stats(parse_events(reader.load()), window, watermark))
    if output_mode == "append":
        # Final results: a window is written once, when the watermark passes its end.
        writer = (records.writeStream.format("odradek")
                  .option("kafka.bootstrap.servers", bootstrap)
                  .option("topic", output_topic))
    elif output_mode == "update":
        # Running results after every micro-batch.  Python streaming sinks take append mode
        # only, so each batch's changed rows go through the batch sink in foreachBatch.
        def write_batch(batch_df, batch_id):
            (batch_df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", output_topic).mode("append").save())
        writer = records.writeStream.foreachBatch(write_batch)
    else:
        raise ValueError(f"output mode must be append or update, not {output_mode!r}")
    writer = (writer.option("checkpointLocation", checkpoint)
              .outputMode(output_mode)
              .queryName(f"page_stats_{output_topic.replace('-', '_')}"))
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    return writer


def sample_events(n: int, *, start: datetime | None = None, seed: int = 7,
                  pages=("/", "/docs", "/pricing", "/blog"), span_seconds: int = 300) -> list[dict]:
    """``n`` page views spread over ``span_seconds`` from ``start``."""
    rnd = random.Random(seed)
    start = start or datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=span_seconds)
    out = []
    for i in range(n):
        t = start + timedelta(seconds=rnd.randrange(span_seconds))
        out.append({"user": f"u{rnd.randrange(50)}", "page": rnd.choice(pages),
                    "amount": round(rnd.random() * 10, 2),
                    "event_time": t.strftime("%Y-%m-%dT%H:%M:%SZ")})
    return out


def write_events(spark, bootstrap: str, topic: str, events: list[dict]) -> None:
    """Batch-write events to ``topic`` with the Odradek sink (value = JSON, key = user)."""
    rows = [(e["user"], json.dumps(e)) for e in events]
    (spark.createDataFrame(rows, "key STRING, value STRING")
     .write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).mode("append").save())


def make_session(app: str = "odradek-spark-pipeline", master: str = "local[2]"):
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    pp = os.environ.get("PYTHONPATH", "")
    if str(REPO_ROOT) not in pp.split(os.pathsep):      # Python workers import odradek_spark
        os.environ["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + pp if pp else "")
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from pyspark.sql import SparkSession

    import odradek_spark
    spark = (SparkSession.builder.master(master).appName(app)
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    odradek_spark.register(spark)
    return spark


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    ap.add_argument("--input", default="page-views", help="topic of JSON events")
    ap.add_argument("--output", default="page-stats", help="topic for the window aggregates")
    ap.add_argument("--checkpoint", default=None,
                    help="checkpoint directory (default: a new temporary one)")
    ap.add_argument("--window", default="1 minute")
    ap.add_argument("--watermark", default="2 minutes")
    ap.add_argument("--starting-offsets", default="earliest")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None)
    ap.add_argument("--output-mode", choices=("append", "update"), default="append")
    ap.add_argument("--trigger", type=float, default=5.0, help="seconds between micro-batches")
    ap.add_argument("--available-now", action="store_true",
                    help="process what is in the topic now, then stop")
    ap.add_argument("--generate", type=int, default=0, metavar="N",
                    help="first write N sample events to the input topic")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)

    spark = make_session(master=args.master)
    spark.sparkContext.setLogLevel("WARN")
    try:
        if args.generate:
            write_events(spark, args.bootstrap_server, args.input, sample_events(args.generate))
            print(f"wrote {args.generate} sample events to {args.input}")
        checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="odradek-spark-ckpt-")
        query = build_query(spark, args.bootstrap_server, args.input, args.output, checkpoint,
                            window=args.window, watermark=args.watermark,
                            starting_offsets=args.starting_offsets,
                            max_offsets_per_trigger=args.max_offsets_per_trigger,
                            available_now=args.available_now, trigger_seconds=args.trigger,
                            output_mode=args.output_mode).start()
        print(f"query {query.name} running; checkpoint {checkpoint}")
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
        for p in query.recentProgress:
            print(f"batch {p['batchId']}: {p['numInputRows']} input rows")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The ``odradek`` Python data source: Odradek (or any Kafka) topics as Spark DataFrames.

Streaming reads (``spark.readStream.format("odradek")``) plan one input partition per
topic-partition and micro-batch; the offsets of each batch are Spark's checkpointed source
offsets, ``{"topic": {"partition": next offset to read}}``, so a restarted query resumes at
exactly the next unread record.  Batch reads (``spark.read.format("odradek")``) read
``startingOffsets`` .. ``endingOffsets`` once.  Writes go to ``sink.py``.
"""
from __future__ import annotations

import logging
import time
from typing import Iterator

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader,
                                    InputPartition)
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from odradek_spark._kafka import (EARLIEST, LATEST, ConnectorError, ConnectorOptions, SyncKafka,
                                  from_offset_dict, limit_ranges, read_range, read_range_arrow,
                                  to_offset_dict)

try:  # PySpark 4.2+: admission control (maxOffsetsPerTrigger) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows,
                                                  SupportsTriggerAvailableNow)
except ImportError:  # PySpark 4.0 / 4.1
    ReadAllAvailable = ReadMaxRows = None

    class SupportsTriggerAvailableNow:   # type: ignore[no-redef]
        pass

log = logging.getLogger("odradek.spark")

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType(), False),
                                     StructField("value", BinaryType(), True)]), False)


def source_schema(include_headers: bool = False) -> StructType:
    """The schema of Spark's Kafka source (headers only with ``includeHeaders=true``)."""
    fields = [StructField("key", BinaryType(), True),
              StructField("value", BinaryType(), True),
              StructField("topic", StringType(), False),
              StructField("partition", IntegerType(), False),
              StructField("offset", LongType(), False),
              StructField("timestamp", TimestampType(), False),
              StructField("timestampType", IntegerType(), False)]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE, True))
    return StructType(fields)


def arrow_schema(include_headers: bool = False):
    """The Arrow schema Spark expects for ``source_schema`` (UTC microsecond timestamps)."""
    schema = source_schema(include_headers)
    try:
        from pyspark.sql.pandas.types import to_arrow_schema
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:                 # an older signature: build it by hand
        import pyarrow as pa
        fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary()),
                  pa.field("topic", pa.string(), False), pa.field("partition", pa.int32(), False),
                  pa.field("offset", pa.int64(), False),
                  pa.field("timestamp", pa.timestamp("us", tz="UTC"), False),
                  pa.field("timestampType", pa.int32(), False)]
        if include_headers:
            entry = pa.struct([pa.field("key", pa.string(), False),
                               pa.field("value", pa.binary())])
            fields.append(pa.field("headers", pa.list_(pa.field("element", entry, False))))
        return pa.schema(fields)


class TopicPartitionRange(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one topic-partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int,
                 new_partition: bool = False):
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        self.new_partition = new_partition

    def __repr__(self):
        return f"TopicPartitionRange({self.topic}-{self.partition} [{self.start}, {self.end}))"


def plan_ranges(start: dict[tuple[str, int], int], end: dict[tuple[str, int], int],
                min_partitions: int = 0) -> list[TopicPartitionRange]:
    """Input partitions for ``start`` -> ``end``: one per non-empty topic-partition range; when
    ``min_partitions`` asks for more tasks, the biggest ranges are split."""
    ranges = []
    for tp in sorted(end):
        hi = end[tp]
        if tp in start:
            lo, new = start[tp], False
        else:
            lo, new = 0, True         # appeared after the previous batch: from its beginning
        if hi > lo:
            ranges.append([tp[0], tp[1], lo, hi, new])
    if min_partitions and len(ranges) < min_partitions and ranges:
        total = sum(r[3] - r[2] for r in ranges)
        split = []
        for t, p, lo, hi, new in ranges:
            pieces = max(1, round((hi - lo) * min_partitions / total)) if total else 1
            step = -(-(hi - lo) // pieces)
            for a in range(lo, hi, step):
                split.append([t, p, a, min(hi, a + step), new and a == lo])
        ranges = split
    return [TopicPartitionRange(*r) for r in ranges]


class _ReaderBase:
    """What the stream and batch readers share: options and a lazily opened driver client."""

    def __init__(self, opts: ConnectorOptions):
        self.opts = opts
        self._kafka: SyncKafka | None = None

    # Spark pickles readers to ship ``read`` to executors: never a loop or a socket.
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_kafka"] = None
        return state

    @property
    def kafka(self) -> SyncKafka:
        if self._kafka is None:
            self._kafka = SyncKafka(self.opts)
        return self._kafka

    def _close(self):
        if self._kafka is not None:
            self._kafka.close()
            self._kafka = None

    def current_partitions(self, must_exist: bool) -> list[tuple[str, int]]:
        """The subscribed topic-partitions now (``must_exist``: fail if some are missing)."""
        o = self.opts
        if o.pattern is not None:
            counts = self.kafka.matching_topics(o.pattern)
        elif o.assign is not None:
            counts = self.kafka.partitions(sorted({t for t, _ in o.assign}), must_exist=must_exist)
            missing = [tp for tp in o.assign if tp[1] >= counts.get(tp[0], 0)]
            if missing and must_exist:
                raise ConnectorError(f"assigned partitions do not exist: {missing}")
            return [tp for tp in o.assign if tp not in missing]
        else:
            counts = self.kafka.partitions(o.topics, must_exist=must_exist)
        return [(t, p) for t, n in sorted(counts.items()) for p in range(n)]

    def resolve(self, spec, tps, default_missing: int) -> dict[tuple[str, int], int]:
        """Concrete offsets for ``spec`` (earliest / latest / {tp: off}) over ``tps``."""
        if spec == "earliest":
            return self.kafka.offsets(tps, EARLIEST)
        if spec == "latest":
            return self.kafka.offsets(tps, LATEST)
        unknown = sorted(tp for tp in spec if tp not in set(tps))
        if unknown:
            raise ConnectorError(f"offsets given for partitions that are not subscribed or do "
                                 f"not exist: {unknown}")
        wanted = {tp: spec.get(tp, default_missing) for tp in tps}
        out = {tp: off for tp, off in wanted.items() if off >= 0}
        need_early = [tp for tp, off in wanted.items() if off == EARLIEST]
        need_late = [tp for tp, off in wanted.items() if off == LATEST]
        out.update(self.kafka.offsets(need_early, EARLIEST))
        out.update(self.kafka.offsets(need_late, LATEST))
        bad = sorted(tp for tp, off in wanted.items() if off < -2)
        if bad:
            raise ConnectorError(f"invalid offsets for {bad} (use -2 for earliest, -1 for latest)")
        return out

    def resolve_start(self, tps, default_missing: int, spec=None) -> dict[tuple[str, int], int]:
        """Start offsets: by timestamp when startingTimestamp / startingOffsetsByTimestamp is
        given, else ``spec`` (startingOffsets)."""
        if self.opts.starting_ts is None:
            return self.resolve(self.opts.starting if spec is None else spec, tps, default_missing)
        return self.by_timestamp(self.opts.starting_ts, tps, "starting", self.opts.ts_strategy)

    def resolve_end(self, tps) -> dict[tuple[str, int], int]:
        if self.opts.ending_ts is None:
            return self.resolve(self.opts.ending, tps, default_missing=LATEST)
        return self.by_timestamp(self.opts.ending_ts, tps, "ending", "latest")

    def by_timestamp(self, ts, tps, which: str, strategy: str) -> dict[tuple[str, int], int]:
        """The first offset at or after each partition's timestamp (ListOffsets by time).  Where
        none is (every record is older), ``strategy`` decides: ``latest`` takes the log end,
        ``error`` fails the query (Spark's startingOffsetsByTimestampStrategy)."""
        if isinstance(ts, dict):
            if set(ts) != set(tps):
                raise ConnectorError(
                    f"If {which}OffsetsByTimestamp contains specific offsets, you must specify all "
                    f"TopicPartitions. Use -1 for latest, -2 for earliest. Specified: {sorted(ts)} "
                    f"Assigned: {sorted(tps)}")
            wanted = dict(ts)
        else:
            wanted = dict.fromkeys(tps, ts)
        out: dict[tuple[str, int], int] = {}
        for value in sorted(set(wanted.values())):
            group = [tp for tp, v in wanted.items() if v == value]
            out.update(self.kafka.offsets(group, value))
        missing = sorted(tp for tp, off in out.items() if off < 0)
        if missing:
            if strategy == "error":
                raise ConnectorError(f"No offset matched the {which} timestamp for partitions {missing} "
                                     f"(their records are all older); set "
                                     f"startingOffsetsByTimestampStrategy=latest to start at their end")
            out.update(self.kafka.offsets(missing, LATEST))
        return out

    def read(self, partition: TopicPartitionRange) -> Iterator:
        """Executor side: the records of one range, as Arrow batches (or rows with
        ``useArrow=false``)."""
        p = partition
        if self.opts.use_arrow:
            return read_range_arrow(self.opts, p.topic, p.partition, p.start, p.end,
                                    arrow_schema(self.opts.include_headers),
                                    new_partition=p.new_partition)
        return read_range(self.opts, p.topic, p.partition, p.start, p.end,
                          new_partition=p.new_partition)


class OdradekStreamReader(_ReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader.  The driver-side instance lives across batches in one Python worker;
    the executor-side copies only ``read``."""

    def __init__(self, opts: ConnectorOptions):
        super().__init__(opts)
        self._target: dict[tuple[str, int], int] | None = None   # Trigger.AvailableNow
        self._last: dict | None = None                            # for PySpark < 4.2
        self._last_batch: float | None = None     # monotonic time of the last batch with data
        if self.opts.max_offsets_per_trigger and ReadMaxRows is None:
            log.warning("maxOffsetsPerTrigger needs PySpark 4.2 or later; ignored")

    def initialOffset(self) -> dict:
        tps = self.current_partitions(must_exist=True)
        start = self.resolve_start(tps, default_missing=LATEST)
        self._last = to_offset_dict(start)
        return self._last

    def _latest(self) -> dict[tuple[str, int], int]:
        tps = self.current_partitions(must_exist=False)
        return self.kafka.offsets(tps, LATEST)

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        """End offset of the next batch: the latest offsets, capped by the AvailableNow target
        and by ``limit`` (``ReadMaxRows`` from maxOffsetsPerTrigger)."""
        if start is None:                 # PySpark 4.0/4.1 call latestOffset() bare
            start = self._last
        begin = from_offset_dict(start)
        latest = self._target if self._target is not None else self._latest()
        end = {}
        for tp, off in latest.items():
            b = begin.get(tp)
            # Never go back: a checkpointed offset past a (truncated) log end stays put.
            end[tp] = off if b is None else max(b, off)
        for tp, b in begin.items():
            end.setdefault(tp, b)             # a partition that vanished keeps its offset
        if self._hold_batch(begin, end):
            end = dict(begin)
        # PySpark < 4.2 passes no limit and no start: maxOffsetsPerTrigger cannot be honoured
        # safely there (after a restart the checkpointed start is unknown), so it is ignored.
        max_rows = getattr(limit, "max_rows", None)
        if max_rows is not None:
            end = limit_ranges(begin, end, max_rows)
        result = to_offset_dict(end)
        self._last = result
        return result

    def _hold_batch(self, begin, end) -> bool:
        """minOffsetsPerTrigger: hold back a batch that would have fewer new offsets, unless
        maxTriggerDelay has passed since the last batch with data (the first one never waits;
        Trigger.AvailableNow never waits)."""
        new = sum(off - begin.get(tp, 0) for tp, off in end.items())
        if new <= 0:
            return False
        now = time.monotonic()
        minimum = self.opts.min_offsets_per_trigger
        if minimum and self._target is None and new < minimum and self._last_batch is not None \
                and now - self._last_batch < self.opts.max_trigger_delay:
            return True
        self._last_batch = now
        return False

    def reportLatestOffset(self):
        try:
            return to_offset_dict(self._latest())
        except Exception:                     # progress reporting only
            return None

    def partitions(self, start: dict, end: dict):
        return plan_ranges(from_offset_dict(start), from_offset_dict(end),
                           self.opts.min_partitions)

    def commit(self, end: dict) -> None:
        pass                                  # offsets live in Spark's checkpoint

    def stop(self) -> None:
        self._close()


class OdradekBatchReader(_ReaderBase, DataSourceReader):
    """``spark.read.format("odradek")``: startingOffsets (default earliest) to endingOffsets
    (default latest), resolved when the query is planned."""

    def partitions(self):
        try:
            tps = self.current_partitions(must_exist=True)
            starting = self.opts.starting if "startingoffsets" in self.opts.raw else "earliest"
            start = self.resolve_start(tps, default_missing=EARLIEST, spec=starting)
            end = self.resolve_end(tps)
        finally:
            self._close()
        for tp in tps:
            if end[tp] < start[tp]:
                raise ConnectorError(f"endingOffsets {end[tp]} is before startingOffsets "
                                     f"{start[tp]} for {tp[0]}-{tp[1]}")
        ranges = plan_ranges(start, end, self.opts.min_partitions)
        # Spark wants at least one partition to run the read function at all.
        return ranges or [TopicPartitionRange(tps[0][0] if tps else "", 0, 0, 0)]


class OdradekDataSource(DataSource):
    """``format("odradek")``.  Options follow Spark's Kafka connector:

    ``kafka.bootstrap.servers`` (or ``bootstrap.servers``), one of ``subscribe`` /
    ``subscribePattern`` / ``assign``, ``startingOffsets``, ``startingTimestamp``,
    ``startingOffsetsByTimestamp`` (with ``startingOffsetsByTimestampStrategy``),
    ``endingOffsets``, ``endingTimestamp``, ``endingOffsetsByTimestamp`` (batch),
    ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` with ``maxTriggerDelay``, ``failOnDataLoss``,
    ``includeHeaders``, ``minPartitions``, ``kafka.isolation.level``, ``kafkaConsumer.pollTimeoutMs``,
    ``kafka.security.protocol`` with ``kafka.ssl.*`` / ``kafka.sasl.*``; for writing
    ``topic``, ``kafka.acks``, ``kafka.enable.idempotence``, ``kafka.batch.size``,
    ``kafka.compression.type``.
    """

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def _opts(self) -> ConnectorOptions:
        return ConnectorOptions(self.options)

    def schema(self):
        return source_schema(self._opts().include_headers)

    def streamReader(self, schema: StructType) -> OdradekStreamReader:
        opts = self._opts()
        opts.require_subscription()
        return OdradekStreamReader(opts)

    def reader(self, schema: StructType) -> OdradekBatchReader:
        opts = self._opts()
        opts.require_subscription()
        return OdradekBatchReader(opts)

    def writer(self, schema: StructType, overwrite: bool):
        from odradek_spark.sink import OdradekBatchWriter
        if overwrite:
            raise ConnectorError("an Odradek topic can only be appended to (use mode('append'))")
        return OdradekBatchWriter(self._opts(), schema)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from odradek_spark.sink import OdradekStreamWriter
        return OdradekStreamWriter(self._opts(), schema)

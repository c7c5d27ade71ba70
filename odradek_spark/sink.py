"""Writing DataFrames to Odradek topics (``df.write`` / ``df.writeStream`` with
``format("odradek")``).

Columns, as in Spark's Kafka sink: ``value`` (required; binary or string), ``key`` (optional;
binary or string), ``topic`` (string; needed per row unless the ``topic`` option is set, which
then wins), ``partition`` (optional int; otherwise murmur2 of the key, or a sticky partition for
null keys), ``headers`` (optional array of (key string, value binary)).  Other columns are
ignored.  Each Spark task is one producer: v2 batches per partition, acks=all, idempotent
(InitProducerId + sequence numbers) so a retried request is never appended twice.  A task that
Spark re-runs writes its rows again: the sink is at-least-once, like Spark's Kafka sink.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterator

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, ShortType,
                               StringType, StructType)

from odradek_spark._kafka import ConnectorError, ConnectorOptions, RangeProducer

try:  # PySpark 4.1+: streaming writers may take Arrow batches (no Row objects)
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
    _STREAM_ARROW = True
except ImportError:
    _StreamWriterBase = DataSourceStreamWriter
    _STREAM_ARROW = False

log = logging.getLogger("odradek.spark")


@dataclass
class OdradekCommitMessage(WriterCommitMessage):
    records: int = 0
    offsets: dict = field(default_factory=dict)      # "topic-partition" -> [first, last]


def _as_bytes(v, what: str):
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    raise ConnectorError(f"{what} must be binary or string, not {type(v).__name__}")


class _WriterBase:
    def __init__(self, opts: ConnectorOptions, schema: StructType):
        self.opts = opts
        names = {f.name.lower(): i for i, f in enumerate(schema.fields)}
        types = {f.name.lower(): f.dataType for f in schema.fields}

        def col(name, allowed, required=False):
            if name not in names:
                if required:
                    raise ConnectorError(f"the DataFrame written to Odradek needs a {name!r} "
                                         f"column (got {', '.join(schema.fieldNames())})")
                return None
            if not isinstance(types[name], allowed):
                raise ConnectorError(f"column {name!r} has type {types[name].simpleString()}; "
                                     f"expected {' or '.join(a.typeName() for a in allowed)}")
            return names[name]

        self.value_idx = col("value", (BinaryType, StringType), required=True)
        self.key_idx = col("key", (BinaryType, StringType))
        self.partition_idx = col("partition", (IntegerType, LongType, ShortType))
        self.headers_idx = col("headers", (ArrayType,))
        self.value_is_str = isinstance(types["value"], StringType)
        self.key_is_str = isinstance(types.get("key"), StringType)
        self.topic_idx = None
        if not opts.sink_topic:
            self.topic_idx = col("topic", (StringType,), required=False)
            if self.topic_idx is None:
                raise ConnectorError("set the topic option or give the DataFrame a 'topic' column")

    def _from_rows(self, rows) -> Iterator[tuple]:
        """Spark Rows -> (topic, key, value, headers, partition)."""
        fixed_topic = self.opts.sink_topic
        vi, ki, pi, hi, ti = (self.value_idx, self.key_idx, self.partition_idx,
                              self.headers_idx, self.topic_idx)
        for row in rows:
            headers = ()
            if hi is not None and row[hi]:
                headers = [(h[0], _as_bytes(h[1], "header value")) for h in row[hi]]
            yield (fixed_topic or row[ti], _as_bytes(row[ki], "key") if ki is not None else None,
                   _as_bytes(row[vi], "value"), headers, row[pi] if pi is not None else None)

    def _from_arrow(self, batches) -> Iterator[tuple]:
        """Arrow record batches -> (topic, key, value, headers, partition), column-wise."""
        fixed_topic = self.opts.sink_topic
        for b in batches:
            n = b.num_rows
            if not n:
                continue

            def column(idx, default=None):
                return b.column(idx).to_pylist() if idx is not None else [default] * n
            values = column(self.value_idx)
            keys = column(self.key_idx)
            if self.value_is_str:
                values = [None if v is None else v.encode("utf-8") for v in values]
            if self.key_is_str:
                keys = [None if k is None else k.encode("utf-8") for k in keys]
            topics = [fixed_topic] * n if fixed_topic else column(self.topic_idx)
            parts = column(self.partition_idx)
            if self.headers_idx is None:
                headers = [()] * n
            else:
                headers = [[(h["key"], _as_bytes(h["value"], "header value")) for h in hs]
                           if hs else () for hs in column(self.headers_idx)]
            yield from zip(topics, keys, values, headers, parts)

    def _write(self, records: Iterator[tuple]) -> OdradekCommitMessage:
        producer = None                   # opened at the first row: empty tasks cost nothing
        try:
            for topic, key, value, headers, partition in records:
                if not topic:
                    raise ConnectorError("a row has a null topic and no topic option is set")
                if producer is None:
                    producer = RangeProducer(self.opts)
                producer.add(topic, key, value, headers, partition)
            if producer is None:
                return OdradekCommitMessage()
            producer.flush()
            return OdradekCommitMessage(
                records=producer.records_written,
                offsets={f"{t}-{p}": list(v) for (t, p), v in producer.offsets.items()})
        finally:
            if producer is not None:
                producer.close()


class _RowsWriter(_WriterBase):
    def write(self, iterator: Iterator) -> OdradekCommitMessage:
        return self._write(self._from_rows(iterator))


class _ArrowWriter(_WriterBase):
    def write(self, iterator: Iterator) -> OdradekCommitMessage:
        return self._write(self._from_arrow(iterator))


class OdradekBatchWriter(_ArrowWriter, DataSourceArrowWriter):
    def commit(self, messages) -> None:
        total = sum(m.records for m in messages if m is not None)
        log.info("wrote %d records to Odradek", total)

    def abort(self, messages) -> None:
        written = sum(m.records for m in messages if m is not None)
        if written:
            log.warning("write aborted; %d records were already written by successful tasks",
                        written)


class OdradekStreamWriter(_ArrowWriter if _STREAM_ARROW else _RowsWriter, _StreamWriterBase):
    def commit(self, messages, batchId: int) -> None:
        total = sum(m.records for m in messages if m is not None)
        log.info("batch %d: wrote %d records to Odradek", batchId, total)

    def abort(self, messages, batchId: int) -> None:
        written = sum(m.records for m in messages if m is not None)
        if written:
            log.warning("batch %d aborted; %d records were already written (they will be "
                        "written again when the batch is retried)", batchId, written)

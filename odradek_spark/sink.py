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

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, ShortType,
                               StringType, StructType)

from odradek_spark._kafka import ConnectorError, ConnectorOptions, RangeProducer

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
        self.topic_idx = None
        if not opts.sink_topic:
            self.topic_idx = col("topic", (StringType,), required=False)
            if self.topic_idx is None:
                raise ConnectorError("set the topic option or give the DataFrame a 'topic' column")

    def write(self, iterator: Iterator) -> OdradekCommitMessage:
        producer = None                   # opened at the first row: empty tasks cost nothing
        try:
            fixed_topic = self.opts.sink_topic
            vi, ki, pi, hi, ti = (self.value_idx, self.key_idx, self.partition_idx,
                                  self.headers_idx, self.topic_idx)
            for row in iterator:
                topic = fixed_topic or row[ti]
                if not topic:
                    raise ConnectorError("a row has a null topic and no topic option is set")
                key = _as_bytes(row[ki], "key") if ki is not None else None
                value = _as_bytes(row[vi], "value")
                headers = ()
                if hi is not None and row[hi]:
                    headers = [(h[0], _as_bytes(h[1], "header value")) for h in row[hi]]
                partition = row[pi] if pi is not None else None
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


class OdradekBatchWriter(_WriterBase, DataSourceWriter):
    def commit(self, messages) -> None:
        total = sum(m.records for m in messages if m is not None)
        log.info("wrote %d records to Odradek", total)

    def abort(self, messages) -> None:
        written = sum(m.records for m in messages if m is not None)
        if written:
            log.warning("write aborted; %d records were already written by successful tasks",
                        written)


class OdradekStreamWriter(_WriterBase, DataSourceStreamWriter):
    def commit(self, messages, batchId: int) -> None:
        total = sum(m.records for m in messages if m is not None)
        log.info("batch %d: wrote %d records to Odradek", batchId, total)

    def abort(self, messages, batchId: int) -> None:
        written = sum(m.records for m in messages if m is not None)
        if written:
            log.warning("batch %d aborted; %d records were already written (they will be "
                        "written again when the batch is retried)", batchId, written)

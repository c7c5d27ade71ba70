"""Spark Structured Streaming source and sink for Odradek topics (PySpark 4.0+).

>>> import odradek_spark
>>> odradek_spark.register(spark)                     # adds format("odradek")
>>> df = (spark.readStream.format("odradek")
...       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
...       .option("subscribe", "events").load())

Built on PySpark's Python Data Source API and the project's own asyncio Kafka client; no JVM
Kafka jars are needed.  See docs/spark.md.
"""
from __future__ import annotations

__all__ = ["register", "OdradekDataSource", "source_schema"]


def register(spark) -> None:
    """Register the ``odradek`` format with ``spark`` (a SparkSession)."""
    from odradek_spark.source import OdradekDataSource
    spark.dataSource.register(OdradekDataSource)


def __getattr__(name):
    # Lazy, so ``import odradek_spark`` works (and says what is missing) without pyspark.
    if name in ("OdradekDataSource", "source_schema"):
        try:
            from odradek_spark import source
        except ImportError as e:
            raise ImportError(f"odradek_spark needs pyspark>=4.0 and pyarrow "
                              f"(pip install 'odradek[spark]'): {e}") from e
        return getattr(source, name)
    raise AttributeError(name)

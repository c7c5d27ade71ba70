"""Fixtures for the Spark connector tests: one broker and one local SparkSession shared by all
of tests/spark (Spark takes 8-20 s to start; each test uses its own topics).  Package-scoped,
so the JVM is gone before the rest of a full test run goes on."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from tests.spark.support import spark_missing
from tests.support import BrokerProcess
from tests.support.broker import running

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="package")
def spark_broker(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("spark-broker"), name="broker",
                               props={"num.partitions": 3,
                                      # the tests' records carry fixed 2023 timestamps: keep them
                                      # from time retention (its first pass runs 30 s after start)
                                      "log.retention.ms": -1})) as b:
        yield b


@pytest.fixture(scope="package")
def spark():
    why = spark_missing()
    if why:
        pytest.skip(why)
    # Loopback only; Python workers must import odradek_spark even without an install.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    pp = os.environ.get("PYTHONPATH", "")
    if str(REPO_ROOT) not in pp.split(os.pathsep):
        os.environ["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + pp if pp else "")
    from pyspark.sql import SparkSession

    import odradek_spark
    session = (SparkSession.builder.master("local[2]").appName("odradek-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    odradek_spark.register(session)
    yield session
    session.stop()


@pytest.fixture
def topic_name():
    def make(prefix="t"):
        return f"{prefix}-{uuid.uuid4().hex[:8]}"
    return make

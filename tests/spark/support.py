"""Helpers for the Spark connector tests: skip reasons, topics, producing and consuming with the
project's own client (tools.kclient), independent of the connector's code paths."""
from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil

from protocol.client import ClusterClient
from protocol.messages import CreateTopicsRequest


def spark_missing() -> str:
    """Why the Spark tests cannot run here ('' when they can)."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install -e '.[spark]' installs pyspark>=4.0 and pyarrow)"
    from importlib.metadata import version
    v = version("pyspark")
    if int(v.split(".")[0]) < 4:
        return f"pyspark {v} has no Python Data Source API (needs 4.0+)"
    if importlib.util.find_spec("pyarrow") is None:
        return "pyarrow is not installed (PySpark's Python data sources need it)"
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        return "no java on PATH (Spark needs a JVM, 17+)"
    return ""


def run(coro):
    return asyncio.run(coro)


async def _create_topic(bootstrap: str, name: str, partitions: int):
    async with ClusterClient(bootstrap) as c:
        T = CreateTopicsRequest
        topic = T.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
        resp = await c.send_to_controller(T(topics=[topic], timeout_ms=30000))
        code = resp.topics[0].error_code
        assert code in (0, 36), f"CreateTopics {name}: error {code}"     # 36: already exists
        for _ in range(100):
            await c.refresh_metadata([name])
            t = c.topics.get(name)
            if t is not None and len(t.partitions) == partitions and \
                    all(p.leader_id >= 0 for p in t.partitions):
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"topic {name} has no leaders")


def create_topic(bootstrap: str, name: str, partitions: int = 3):
    run(_create_topic(bootstrap, name, partitions))


async def _produce(bootstrap: str, topic: str, records):
    from tools.kclient import Producer
    async with ClusterClient(bootstrap) as c:
        p = Producer(c, acks=-1, linger_ms=1)
        futs = [await p.send(topic, value, key=key, headers=headers, partition=partition,
                             timestamp=ts)
                for (partition, key, value, headers, ts) in records]
        await p.flush()
        out = []
        for f in futs:
            r = await f
            assert r.error is None, r.error
            out.append((r.partition, r.offset))
        return out


def produce(bootstrap: str, topic: str, records) -> list[tuple[int, int]]:
    """records: (partition, key, value, headers, timestamp_ms) -> [(partition, offset)]."""
    return run(_produce(bootstrap, topic, records))


async def _consume_all(bootstrap: str, topic: str):
    from tools.kclient import EARLIEST, LATEST, Consumer, list_offsets
    async with ClusterClient(bootstrap) as c:
        await c.refresh_metadata([topic])
        tps = [(topic, p.partition_index) for p in c.topics[topic].partitions]
        ends = await list_offsets(c, tps, LATEST)
        want = {tp: ends[tp][0] for tp in tps}
        cons = Consumer(c, auto_offset_reset="earliest")
        await cons.assign(tps, start=EARLIEST)
        out = []
        for _ in range(200):
            if all(cons.positions.get(tp, 0) >= want[tp] for tp in tps):
                break
            out.extend(await cons.poll(0.5))
        await cons.close(commit=False)
        return out


def consume_all(bootstrap: str, topic: str):
    """Every record now in ``topic`` (tools.kclient ConsumerRecord objects)."""
    return run(_consume_all(bootstrap, topic))


async def _delete_records(bootstrap: str, topic: str, partition: int, before: int):
    from protocol.messages import DeleteRecordsRequest as R
    async with ClusterClient(bootstrap) as c:
        req = R(topics=[R.DeleteRecordsTopic(name=topic, partitions=[
            R.DeleteRecordsPartition(partition_index=partition, offset=before)])], timeout_ms=30000)
        resp = await c.send_to_leader(topic, partition, req)
        p = resp.topics[0].partitions[0]
        assert p.error_code == 0 and p.low_watermark == before, p


def delete_records(bootstrap: str, topic: str, partition: int, before: int):
    """Move the log start offset of ``topic``-``partition`` to ``before``."""
    run(_delete_records(bootstrap, topic, partition, before))


async def _batch_headers(bootstrap: str, topic: str, partition: int):
    from protocol import records as rec
    from protocol.messages import FetchRequest as F
    async with ClusterClient(bootstrap) as c:
        part = F.FetchPartition(partition=partition, current_leader_epoch=-1, fetch_offset=0,
                                last_fetched_epoch=-1, log_start_offset=-1,
                                partition_max_bytes=8 << 20)
        req = F(cluster_id=None, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 << 20,
                isolation_level=0, session_id=0, session_epoch=-1,
                topics=[F.FetchTopic(topic=topic, partitions=[part])],
                forgotten_topics_data=[], rack_id="")
        conn = await c.connection(await c.leader(topic, partition))
        resp = await conn.send(req, max_version=12)
        records = resp.responses[0].partitions[0].records or b""
        return list(rec.iter_batches(memoryview(records)))


def batch_headers(bootstrap: str, topic: str, partition: int):
    """The v2 batch headers stored in ``topic``-``partition`` (up to 8 MiB of them)."""
    return run(_batch_headers(bootstrap, topic, partition))


def pyspark_before(major: int, minor: int) -> bool:
    """True when the installed pyspark is older than ``major.minor`` (False if none)."""
    if importlib.util.find_spec("pyspark") is None:
        return False
    from importlib.metadata import version
    parts = version("pyspark").split(".")
    return (int(parts[0]), int(parts[1])) < (major, minor)


# PySpark 4.0/4.1 stream readers get no read limit and no AvailableNow preparation: Spark runs
# Trigger.AvailableNow as one batch, without the trailing no-data batch that lets a watermark
# close windows.
NEEDS_42 = "needs PySpark 4.2+ (read limits and Trigger.AvailableNow for Python sources)"


async def _add_partitions(bootstrap: str, topic: str, count: int):
    from protocol.messages import CreatePartitionsRequest as R
    async with ClusterClient(bootstrap) as c:
        resp = await c.send_to_controller(R(topics=[R.CreatePartitionsTopic(
            name=topic, count=count, assignments=None)], timeout_ms=30000, validate_only=False))
        assert resp.results[0].error_code == 0, resp.results[0]
        for _ in range(100):
            await c.refresh_metadata([topic])
            t = c.topics.get(topic)
            if t is not None and len(t.partitions) == count and \
                    all(p.leader_id >= 0 for p in t.partitions):
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{topic} did not grow to {count} partitions")


def add_partitions(bootstrap: str, topic: str, count: int):
    """CreatePartitions: grow ``topic`` to ``count`` partitions."""
    run(_add_partitions(bootstrap, topic, count))

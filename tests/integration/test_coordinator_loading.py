"""COORDINATOR_LOAD_IN_PROGRESS from a real broker loading a large ``__consumer_offsets`` partition.

150,000 offset records (300 groups x 500 partitions) in the only ``__consumer_offsets`` partition;
after a kill -9 and restart the broker reads them back in the background (a few seconds) and,
meanwhile, answers OffsetFetch for those groups with COORDINATOR_LOAD_IN_PROGRESS while
FindCoordinator answers normally.  Unmodified clients started in that window (confluent-kafka
``committed()`` and a subscribing consumer, kafka-python's ``committed()``) retry and succeed.
"""
from __future__ import annotations

import asyncio
import threading
import time


NPART, NGROUPS = 500, 300
WAIT = 60


async def _fill(b) -> None:
    from protocol.client import KafkaClientConnection
    from protocol.messages import CreateTopicsRequest as C, FindCoordinatorRequest as FC, OffsetCommitRequest as Q
    conn = await KafkaClientConnection.connect(b.host, b.port, timeout=10)
    try:
        r = await conn.send(C(topics=[C.CreatableTopic(name="big", num_partitions=NPART, replication_factor=1,
                                                       assignments=[], configs=[])],
                              timeout_ms=30000, validate_only=False))
        assert r.topics[0].error_code == 0, r
        while (await conn.send(FC(key="g0", key_type=0), version=3)).error_code:   # creates __consumer_offsets
            await asyncio.sleep(0.2)
        sem = asyncio.Semaphore(32)

        async def commit(g):
            async with sem:
                req = Q(group_id=f"g{g}", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                        retention_time_ms=-1, topics=[Q.OffsetCommitRequestTopic(name="big", partitions=[
                            Q.OffsetCommitRequestPartition(partition_index=p, committed_offset=g,
                                                           committed_leader_epoch=-1, committed_metadata="")
                            for p in range(NPART)])])
                resp = await conn.send(req, version=9)        # by name (v10 names topics by id)
                assert {p.error_code for p in resp.topics[0].partitions} == {0}, resp
        await asyncio.gather(*(commit(g) for g in range(NGROUPS)))
    finally:
        await conn.close()


async def _probe(b) -> list[tuple[int, int]]:
    """(FindCoordinator error, OffsetFetch error) until OffsetFetch of group g1 answers."""
    from protocol.client import KafkaClientConnection
    from protocol.messages import FindCoordinatorRequest as FC, OffsetFetchRequest as F
    conn = await KafkaClientConnection.connect(b.host, b.port, timeout=10)
    seen = []
    try:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            fc = await conn.send(FC(key="g1", key_type=0), version=3)
            r = await conn.send(F(group_id="g1", topics=[F.OffsetFetchRequestTopic(name="big", partition_indexes=[0])],
                                  require_stable=False), version=7)
            seen.append((fc.error_code, r.error_code))
            if r.error_code == 0:
                assert r.topics[0].partitions[0].committed_offset == 1
                break
            await asyncio.sleep(0.02)
    finally:
        await conn.close()
    return seen


def test_offsets_partition_loading_answers_load_in_progress(broker_factory):
    from confluent_kafka import Consumer, TopicPartition
    b = broker_factory(props={"offsets.topic.num.partitions": 1, "num.partitions": 1})
    asyncio.run(_fill(b))

    b.restart(clean=False)                    # kill -9: the group coordinator loads the partition again
    results: dict = {}

    def confluent_committed():
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g7", "enable.auto.commit": False})
        try:
            results["confluent"] = [tp.offset for tp in c.committed([TopicPartition("big", p) for p in range(3)],
                                                                    timeout=WAIT)]
        finally:
            c.close()

    def confluent_subscriber():
        assigned = threading.Event()
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g9", "enable.auto.commit": False,
                      "session.timeout.ms": 10000})
        try:
            c.subscribe(["big"], on_assign=lambda _c, parts: assigned.set() if parts else None)
            deadline = time.monotonic() + WAIT
            while not assigned.is_set() and time.monotonic() < deadline:
                c.poll(0.2)
            results["subscriber"] = assigned.is_set()
        finally:
            c.close()

    def kafka_python_committed():
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="g8", enable_auto_commit=False)
        try:
            results["kafka-python"] = c.committed(KTP("big", 2))
        finally:
            c.close()

    threads = [threading.Thread(target=f, daemon=True)
               for f in (confluent_committed, confluent_subscriber, kafka_python_committed)]
    for t in threads:
        t.start()
    seen = asyncio.run(_probe(b))
    for t in threads:
        t.join(WAIT + 10)

    assert seen[-1] == (0, 0)
    assert (0, 14) in seen, f"no COORDINATOR_LOAD_IN_PROGRESS seen while loading: {seen[:5]}"
    assert all(fc == 0 for fc, _ in seen)                 # FindCoordinator is answered meanwhile
    assert results == {"confluent": [7, 7, 7], "subscriber": True, "kafka-python": 8}
    log = (b.workdir / f"{b.name}.log").read_text()
    assert f"loaded {NGROUPS} groups from __consumer_offsets-0 ({NGROUPS * NPART} records)" in log

"""Produce throughput: acks=all on a three-broker RF=3 cluster next to acks=1 on one broker.

    python bench/cluster_bench.py [--records 200000] [--size 512] [--partitions 3] [--prop K=V ...]

Starts a ZooKeeper (Debian's 3.8) and three Odradek brokers (min.insync.replicas=2) on loopback,
then one standalone broker, and drives each with the same confluent-kafka producer
(idempotent for acks=all; linger.ms=5, batch up to 1 MiB).  Prints records/s and MB/s per run,
each run in its own fresh processes.  All processes share this machine's cores, so the cluster
numbers include two followers' replication work on the same CPUs.  ``--prop`` sets a broker
config on the three cluster brokers (``--prop replica.socket.receive.buffer.bytes=-1``);
``--cluster-only`` skips the single broker.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import BrokerProcess, ZooKeeperProcess  # noqa: E402
from tests.support.cluster import Cluster  # noqa: E402


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str, idempotent: bool) -> dict:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": idempotent,
                  "linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.messages": 1000000,
                  "queue.buffering.max.kbytes": 1 << 20, "compression.type": "none"})
    payload = os.urandom(size)
    errors = [0]
    done = [0]

    def cb(err, msg):
        if err is not None:
            errors[0] += 1
        else:
            done[0] += 1
    # warm-up: metadata and connections
    p.produce(topic, payload, on_delivery=cb)
    p.flush(30)
    done[0] = 0
    t0 = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, payload, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(300)
    dt = time.perf_counter() - t0
    return {"records": done[0], "errors": errors[0], "seconds": dt, "rps": done[0] / dt,
            "mbps": done[0] * size / dt / 1e6}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200000)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--prop", action="append", default=[], metavar="K=V")
    ap.add_argument("--cluster-only", action="store_true")
    args = ap.parse_args()
    props = dict(p.split("=", 1) for p in args.prop)
    work = Path(tempfile.mkdtemp(prefix="odradek-cluster-bench-"))
    results = []

    zk = ZooKeeperProcess(work / "zk")
    zk.start()
    cluster = Cluster(work / "cluster", zk, 3, props=props)
    try:
        cluster.start()
        cluster.create_topic("bench3", partitions=args.partitions, rf=3)
        r = produce(cluster.bootstrap, "bench3", args.records, args.size, "all", True)
        results.append(("3 brokers, RF=3, acks=all (idempotent), min.insync=2"
                        + "".join(f", {k}={v}" for k, v in props.items()), r))
        isr = [sorted(cluster.isr("bench3", p)) for p in range(args.partitions)]
    finally:
        cluster.shutdown()
        zk.kill()

    if not args.cluster_only:
        single = BrokerProcess(work / "single", name="single", props={"num.partitions": args.partitions})
        single.start()
        try:
            produce(single.bootstrap, "warm", 10, args.size, "1", False)
            r = produce(single.bootstrap, "bench1", args.records, args.size, "1", False)
            results.append(("1 broker, RF=1, acks=1", r))
        finally:
            single.stop()

    print(f"\n{args.records} records of {args.size} bytes, {args.partitions} partitions, "
          f"{os.cpu_count()} CPUs, confluent-kafka producer, linger.ms=5")
    print(f"{'setup':55s} {'records/s':>10s} {'MB/s':>8s} {'errors':>7s}")
    for name, r in results:
        print(f"{name:55s} {r['rps']:10.0f} {r['mbps']:8.1f} {r['errors']:7d}")
    print(f"ISR after the cluster run: {isr}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

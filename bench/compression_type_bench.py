"""What a topic's ``compression.type`` costs the broker when producers send in another codec.

    python bench/compression_type_bench.py [--records 100000] [--size 1000] [--rounds 2]
                                           [--sent none] [--targets producer,lz4,snappy,zstd,gzip]

Starts a real broker (python -m broker) on a free port with a temp log dir and, for each round
and each target, creates a topic of one partition with ``compression.type`` = target and writes
``--records`` values of ``--size`` bytes (4,096 distinct values of words, so every codec has
something to do) with one confluent-kafka producer compressing in ``--sent``
(acks=1, linger.ms=5, batches up to 1 MiB).  Printed per run: MB/s of values, the broker's CPU
seconds per GB of values, and the bytes stored on disk.  ``producer`` (the default: stored as
sent) is the baseline.  Nothing is asserted.
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.trickle import proc_cpu_s  # noqa: E402
from tests.support import BrokerProcess  # noqa: E402


def values(size: int, n: int = 4096) -> list[bytes]:
    """``n`` distinct values (more than a 1 MiB batch holds): words from a vocabulary of 2,000,
    so a codec finds repeats within a value and across values, as in text-like payloads."""
    rnd = random.Random(7)
    words = [bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 9)))
             for _ in range(2000)]
    return [b" ".join(rnd.choice(words) for _ in range(size // 4))[:size].ljust(size, b".")
            for _ in range(n)]


def create(bootstrap: str, topic: str, target: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(topic, 1, 1, config={"compression.type": target})])[topic].result(30)


def produce(bootstrap: str, topic: str, records: int, vals: list[bytes], sent: str) -> float:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
                  "compression.type": sent, "queue.buffering.max.kbytes": 1 << 20,
                  "enable.idempotence": False})
    errors = []
    p.produce(topic, vals[0], on_delivery=lambda err, m: err and errors.append(err))   # warm-up
    p.flush(30)
    t0 = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, vals[i % len(vals)], partition=0,
                          on_delivery=lambda err, m: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.005)
        if i & 1023 == 0:
            p.poll(0)
    left = p.flush(300)
    if left or errors:
        raise SystemExit(f"{topic}: {left} unsent, {len(errors)} failed: {errors[:3]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sent", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--targets", default="producer,lz4,snappy,zstd,gzip")
    a = ap.parse_args()
    vals = values(a.size)
    gb = a.records * a.size / 1e9
    with tempfile.TemporaryDirectory() as d:
        b = BrokerProcess(d, name="bench")
        b.start()
        try:
            print(f"{a.records} values of {a.size} B sent in {a.sent}, one partition, acks=1")
            for rnd in range(1, a.rounds + 1):
                for target in a.targets.split(","):
                    topic = f"ct-{target}-{rnd}"
                    create(b.bootstrap, topic, target)
                    cpu0 = proc_cpu_s(b.pid)
                    secs = produce(b.bootstrap, topic, a.records, vals, a.sent)
                    cpu = proc_cpu_s(b.pid) - cpu0
                    stored = sum(os.path.getsize(p) for p in glob.glob(os.path.join(b.log_dir, f"{topic}-0", "*.log")))
                    print(f"round {rnd} compression.type={target:9s}: {gb * 1e3 / secs:7.1f} MB/s, "
                          f"broker CPU {cpu:5.2f} s = {cpu / gb:5.2f} s/GB, stored {stored / 1e6:7.1f} MB")
        finally:
            b.stop()


if __name__ == "__main__":
    main()

"""What a share group (KIP-932) costs next to a consumer group reading the same records.

    python bench/share_bench.py [--records 200000] [--size 1000] [--partitions 4] [--rounds 2]

Starts a real broker (python -m broker) on a free port with a temp log dir, writes ``--records``
records of ``--size`` bytes over ``--partitions`` partitions (confluent-kafka, acks=1), then, in
turn for ``--rounds`` rounds, reads them all with:

* a confluent-kafka consumer (group.protocol classic, from the earliest offset);
* a confluent-kafka ShareConsumer (implicit acknowledgement, ``share.auto.offset.reset`` set to
  earliest on its group), whose records the broker acquires, locks, and acknowledges, writing
  each acknowledgement to ``__share_group_state``.

Printed for each: MB/s of record values read, and the broker's CPU seconds per GB.  Nothing is
asserted.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.support import BrokerProcess  # noqa: E402
from bench.trickle import proc_cpu_s  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(bootstrap, topic, n, size):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "1", "batch.size": 1 << 20})
    value = os.urandom(size)
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, key=str(i).encode())
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def read_consumer(bootstrap, topic, n):
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + uuid.uuid4().hex[:6],
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = size = 0
    deadline = time.time() + 300
    while got < n and time.time() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                got += 1
                size += len(m.value())
    c.close()
    return got, size


def read_share(bootstrap, topic, n):
    from confluent_kafka import ShareConsumer
    group = "share-bench-" + uuid.uuid4().hex[:6]
    r = subprocess.run([os.path.join(REPO, "bin", "kafka-configs.sh"), "--bootstrap-server", bootstrap,
                        "--entity-type", "groups", "--entity-name", group, "--alter", "--add-config",
                        "share.auto.offset.reset=earliest"], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stdout + r.stderr)
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 1000})
    c.subscribe([topic])
    got = size = 0
    deadline = time.time() + 300
    while got < n and time.time() < deadline:
        for m in c.poll(1.0):
            if m.error() is None:
                got += 1
                size += len(m.value())
    c.commit_sync(30)
    c.close()
    return got, size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        b = BrokerProcess(d, name="bench", props={"num.partitions": a.partitions,
                                                  "share.coordinator.state.topic.num.partitions": 5})
        b.start()
        try:
            topic = "share-bench"
            write(b.bootstrap, topic, a.records, a.size)
            print(f"{a.records} records of {a.size} B over {a.partitions} partitions written")
            for rnd in range(1, a.rounds + 1):
                for name, fn in (("consumer group", read_consumer), ("share group", read_share)):
                    cpu0, t0 = proc_cpu_s(b.pid), time.perf_counter()
                    got, size = fn(b.bootstrap, topic, a.records)
                    secs, cpu = time.perf_counter() - t0, proc_cpu_s(b.pid) - cpu0
                    gb = size / 1e9
                    print(f"round {rnd} {name:15s}: {got} records, {size / 1e6 / secs:7.1f} MB/s, "
                          f"broker CPU {cpu:.2f} s = {cpu / gb if gb else float('nan'):.2f} s/GB")
        finally:
            b.stop()


if __name__ == "__main__":
    main()

"""What a Prometheus scrape costs a broker that holds many partitions.

    python bench/metrics_scrape_bench.py [--partitions 1000] [--scrapes 20]

Starts one broker with its metrics endpoint, creates one topic with ``--partitions``
partitions, writes one record to each, then scrapes ``/metrics`` ``--scrapes`` times and prints
the median and slowest wall time of a scrape, its size and its sample count, and the broker's
CPU seconds per scrape (from its own ``process_cpu_seconds_total``).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import BrokerProcess  # noqa: E402
from tests.support.broker import running  # noqa: E402
from tests.support.net import free_port  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--scrapes", type=int, default=20)
    args = ap.parse_args()
    port = free_port()
    b = BrokerProcess(Path(tempfile.mkdtemp(prefix="odradek-scrape-bench-")), name="broker",
                      props={"odradek.metrics.prometheus.port": port,
                             "odradek.metrics.prometheus.host": "127.0.0.1"})
    url = f"http://127.0.0.1:{port}/metrics"
    with running(b):
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("scrape", args.partitions, 1)])["scrape"].result(120)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 50})
        for i in range(args.partitions):
            p.produce("scrape", b"x", partition=i)
        assert p.flush(60) == 0

        def cpu() -> float:
            with urllib.request.urlopen(url, timeout=30) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("process_cpu_seconds_total "):
                        return float(line.split()[1])
            return 0.0

        times, size, samples = [], 0, 0
        start_cpu = cpu()
        for _ in range(args.scrapes):
            t0 = time.perf_counter()
            with urllib.request.urlopen(url, timeout=30) as r:
                body = r.read()
            times.append(time.perf_counter() - t0)
            size = len(body)
            samples = sum(1 for ln in body.splitlines() if ln and not ln.startswith(b"#"))
        cpu_per = (cpu() - start_cpu) / (args.scrapes + 1)
    print(f"{args.partitions} partitions: scrape median {statistics.median(times) * 1000:.1f} ms, "
          f"slowest {max(times) * 1000:.1f} ms, {size / 1024:.0f} KiB, {samples} samples, "
          f"broker CPU {cpu_per * 1000:.0f} ms a scrape")
    return 0


if __name__ == "__main__":
    sys.exit(main())

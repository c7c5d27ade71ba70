"""What replication of many partitions costs when little is written: two brokers, one topic of
``--partitions`` partitions with two replicas each, and the brokers' CPU over ``--seconds``.

    python bench/replication_idle_bench.py [--partitions 1000] [--seconds 20] [--rate 0]

Starts a ZooKeeper (Debian's) and two Odradek brokers on loopback, creates the topic, waits for
every ISR to be whole, then measures each broker's CPU seconds while a confluent-kafka producer
writes ``--rate`` records a second (100 bytes, acks=1) spread over the partitions (0: nothing is
written and the followers' fetches wait out ``replica.fetch.wait.max.ms``).  Each broker leads
half the partitions and follows the other half, so both numbers hold a leader's and a
follower's share.  Nothing is asserted; run it from another commit's worktree for an A/B.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import ZooKeeperProcess  # noqa: E402
from tests.support.cluster import Cluster  # noqa: E402
from bench.trickle import produce, proc_cpu_s  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rate", type=int, default=0, help="records per second over all partitions")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="odradek-repl-idle-"))
    zk = ZooKeeperProcess(work / "zk")
    zk.start()
    cluster = Cluster(work / "cluster", zk, 2)
    try:
        cluster.start()
        t0 = time.monotonic()
        cluster.create_topic("idle", partitions=args.partitions, rf=2)
        for p in range(args.partitions):
            cluster.wait_for_isr("idle", p, [1, 2], timeout=300)
        print(f"{args.partitions} partitions, RF=2 on 2 brokers, in sync after "
              f"{time.monotonic() - t0:.1f} s; {args.rate} records/s; {args.seconds:.0f} s a round")
        stop = threading.Event()
        prod = None
        if args.rate:
            prod = threading.Thread(target=produce, args=(cluster.bootstrap, "idle", args.partitions,
                                                          args.rate, stop), daemon=True)
            prod.start()
        time.sleep(3)           # settle: sessions made, the first fetches answered
        pids = {i: b.pid for i, b in cluster.brokers.items()}
        for r in range(args.rounds):
            c0 = {i: proc_cpu_s(pid) for i, pid in pids.items()}
            time.sleep(args.seconds)
            used = {i: proc_cpu_s(pid) - c0[i] for i, pid in pids.items()}
            print(f"round {r + 1}: " + ", ".join(f"broker {i} {u:.2f} s" for i, u in used.items())
                  + f"; {sum(used.values()) / args.seconds * 100:.1f} % of a core together")
        stop.set()
        if prod is not None:
            prod.join(15)
    finally:
        cluster.shutdown()
        zk.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())

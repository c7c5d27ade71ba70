"""What incremental fetch sessions (KIP-227) save: one consumer following many partitions, with
sessions and without, on the same broker.

    python bench/fetch_session_bench.py [--partitions 1000] [--rate 500] [--seconds 10] [--rounds 2]

Starts a real broker (python -m broker) on a free port with a temp log dir and creates a topic
of ``--partitions`` partitions.  kafka-python 3 consumers then follow every partition from its
end for ``--seconds`` each, in turn with ``enable_incremental_fetch_sessions`` true (its
default) and false:

* quiet: nothing is produced, so each fetch waits its ``fetch.max.wait.ms`` (100) and answers
  no records.  Printed: fetch requests, the broker's CPU seconds and CPU per request, and the
  partitions named per request and per answer;
* trickle: a confluent-kafka producer writes ``--rate`` records a second spread over every
  partition.  Printed: the same, the broker's CPU including the producer's, and records read.

Nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.support import BrokerProcess  # noqa: E402
from tests.support.rawkafka import RawConnection  # noqa: E402
from bench.trickle import produce, proc_cpu_s  # noqa: E402


class _Counts:
    """Fetch requests made by kafka-python's fetcher, and the partitions they and their answers
    carried (counted by wrapping two of its methods: this is a probe, not an API)."""

    def __init__(self):
        from kafka.consumer import fetcher as F
        self.requests = self.req_partitions = self.resp_partitions = 0
        create, handle = F.Fetcher._create_fetch_requests, F.Fetcher._handle_fetch_response
        counts = self

        def counted_create(fetcher):
            out = create(fetcher)
            for request, _ in out.values():
                counts.requests += 1
                counts.req_partitions += sum(len(t.partitions) for t in request.topics)
            return out

        def counted_handle(fetcher, node_id, offsets, send_time, response):
            counts.resp_partitions += sum(len(t.partitions) for t in response.responses)
            return handle(fetcher, node_id, offsets, send_time, response)
        F.Fetcher._create_fetch_requests = counted_create
        F.Fetcher._handle_fetch_response = counted_handle

    def snapshot(self):
        return self.requests, self.req_partitions, self.resp_partitions


COUNTS = None


def consume(bootstrap: str, topic: str, partitions: int, seconds: float, sessions: bool,
            broker_pid: int) -> dict:
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      enable_incremental_fetch_sessions=sessions, fetch_max_wait_ms=100)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_end()
    c.poll(timeout_ms=2000)         # positions known and the first fetches made
    r0, q0, a0 = COUNTS.snapshot()
    cpu0 = proc_cpu_s(broker_pid)
    n = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=100).values():
            n += len(recs)
    cpu = proc_cpu_s(broker_pid) - cpu0
    r1, q1, a1 = COUNTS.snapshot()
    c.close()
    return {"requests": r1 - r0, "broker_cpu_s": cpu, "req_parts": q1 - q0,
            "resp_parts": a1 - a0, "records": n}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--rate", type=int, default=500, help="records per second, all partitions")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    global COUNTS
    COUNTS = _Counts()
    topic = "sessions-bench"
    with tempfile.TemporaryDirectory(prefix="odradek-sessions-") as tmp:
        b = BrokerProcess(tmp, name="broker", props={"num.partitions": args.partitions},
                          startup_timeout=120)
        b.start()
        try:
            with RawConnection(b.host, b.port, timeout=60) as conn:
                assert conn.metadata([topic]).topics[0].error_code == 0
            print(f"{args.partitions} partitions, {args.seconds:.0f} s per consumer, "
                  f"kafka-python with and without fetch sessions (fetch.max.wait 100 ms)")
            def rounds(phase):
                for r in range(args.rounds):
                    for sessions in (True, False):
                        x = consume(b.bootstrap, topic, args.partitions, args.seconds, sessions,
                                    b.pid)
                        q = max(x["requests"], 1)
                        extra = ("" if phase == "quiet" else
                                 f" (the producer's included), {x['records']} records read")
                        print(f"{phase:7s} round {r + 1} sessions={'on ' if sessions else 'off'}: "
                              f"{x['requests']:.0f} requests, broker CPU {x['broker_cpu_s']:.2f} s, "
                              f"{1000 * x['broker_cpu_s'] / q:.2f} ms a request{extra}; "
                              f"partitions named {x['req_parts'] / q:.0f} a request and "
                              f"{x['resp_parts'] / q:.0f} an answer")
            # quiet: nothing is produced, every fetch waits its 100 ms and answers no records;
            # what the broker spends is per request, no producer's share blurs it
            rounds("quiet")
            # trickle: --rate records a second over every partition; the broker's CPU includes
            # the producer's, the same in both
            stop = threading.Event()
            prod = threading.Thread(target=produce, args=(b.bootstrap, topic, args.partitions,
                                                          args.rate, stop), daemon=True)
            prod.start()
            time.sleep(1)
            rounds("trickle")
            stop.set()
            prod.join(15)
        finally:
            b.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())

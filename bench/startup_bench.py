"""Broker start-up time with many partitions (issue 3: "start-up with 1,000 partitions takes
under 2 s" — printed here, never asserted).

    python bench/startup_bench.py [--partitions 1000] [--topics 10] [--records 10] [--runs 3]

Starts a real broker process (python -m broker) on a free loopback port with a temp log dir,
creates ``--topics`` topics of partitions/topics partitions each through Metadata
auto-creation (num.partitions override), writes ``--records`` small batches to every
partition, then measures, for a clean restart (SIGTERM) and an unclean one (SIGKILL, recovery):

* ready:    process spawn → first ApiVersions answer on the listener
* metadata: process spawn → a Metadata answer listing every partition with a leader
* loaded:   the broker's own "loaded N logs in X ms" line (log manager start-up)

Before each unclean restart one more batch goes to every partition, so the kill leaves every
partition with data past its recovery point (the recovery path, not only the unclean flag).

It also says whether the broker's modules start from cached bytecode: with
PYTHONDONTWRITEBYTECODE set and no ``__pycache__`` (this sandbox's default), every start compiles
the sources first, about 0.6 s here.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from protocol.records import build_batch  # noqa: E402
from tests.support import BrokerProcess, kafka_ready  # noqa: E402
from tests.support.rawkafka import RawConnection  # noqa: E402


def populate(b: BrokerProcess, topics: list[str], per_topic: int, records: int) -> None:
    with RawConnection(b.host, b.port, timeout=60) as c:
        for t in topics:
            md = c.metadata([t])
            assert md.topics[0].error_code == 0, md.topics[0].error_code
            assert len(md.topics[0].partitions) == per_topic
        ts = int(time.time() * 1000)
        for t in topics:
            for p in range(per_topic):
                for i in range(records):
                    r = c.produce(t, p, build_batch([(b"k%d" % i, b"x" * 100, (), ts)]),
                                  acks=1)
                    assert r.error_code == 0, r.error_code


def bytecode_note() -> str:
    """Whether a start of the broker finds its modules compiled (same environment as here)."""
    import importlib.util
    import sys as _sys
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "broker", "server.py")
    cached = importlib.util.cache_from_source(src)
    fresh = os.path.exists(cached) and os.path.getmtime(cached) >= os.path.getmtime(src)
    if fresh:
        return f"bytecode: cached ({os.path.dirname(cached)})"
    if _sys.flags.dont_write_bytecode:
        return "bytecode: none, and PYTHONDONTWRITEBYTECODE is set: every start compiles the sources"
    return "bytecode: not yet cached (the first start writes it)"


def timed_start(b: BrokerProcess, total_partitions: int) -> dict:
    t0 = time.monotonic()
    b.start(wait=False)
    while kafka_ready(b.host, b.port, timeout=0.5) is None:
        if not b.alive:
            raise RuntimeError("broker exited:\n" + b.log_tail(30))
        time.sleep(0.005)
    ready = time.monotonic() - t0
    with RawConnection(b.host, b.port, timeout=30) as c:
        while True:
            md = c.metadata(None)
            n = sum(1 for t in md.topics for p in t.partitions if p.leader_id >= 0)
            if n >= total_partitions:
                break
            time.sleep(0.005)
    meta = time.monotonic() - t0
    loaded = None
    found = re.findall(r"loaded (\d+) logs in (\d+) ms", b.log_text())
    if found:
        loaded = int(found[-1][1])
    return {"ready": ready, "metadata": meta, "loaded_ms": loaded}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--records", type=int, default=10, help="batches written per partition")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    per_topic = args.partitions // args.topics
    total = per_topic * args.topics
    with tempfile.TemporaryDirectory(prefix="odradek-startup-") as tmp:
        b = BrokerProcess(tmp, name="broker", props={"num.partitions": per_topic},
                          startup_timeout=120)
        try:
            t0 = time.monotonic()
            b.start()
            topics = [f"startup-{i}" for i in range(args.topics)]
            populate(b, topics, per_topic, args.records)
            print(bytecode_note())
            print(f"created {total} partitions ({args.topics} topics), {args.records} batches "
                  f"each, in {time.monotonic() - t0:.1f} s")
            for kind in ("clean", "unclean"):
                for run in range(args.runs):
                    if kind == "clean":
                        b.stop()
                    else:
                        # a kill -9 in the middle of work: every partition has a batch past its
                        # recovery point, so every active segment is recovered on the way up
                        populate(b, topics, per_topic, 1)
                        b.kill()
                    r = timed_start(b, total)
                    loaded = f"{r['loaded_ms']} ms" if r["loaded_ms"] is not None else "?"
                    print(f"{kind:7s} restart #{run + 1}: ready {r['ready']:.2f} s, "
                          f"all {total} partitions in metadata {r['metadata']:.2f} s, "
                          f"logs loaded in {loaded}  (target < 2 s)")
        finally:
            b.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())

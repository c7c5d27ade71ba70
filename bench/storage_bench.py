"""Storage benchmarks: prints figures, asserts nothing.

    python bench/storage_bench.py [--partitions 1000] [--dir /tmp/x]

1. start-up of a LogManager with N partitions (each with a few batches) after a clean shutdown,
   and after an unclean one (recovery of the active segments);
2. append throughput (MB/s) with 1 MiB and 16 KiB batches, offsets assigned in place;
3. index lookup cost (in-memory bisect, as used by storage/index.py).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from storage.config import LogConfig           # noqa: E402
from storage.index import OffsetIndex          # noqa: E402
from storage.log import Log                    # noqa: E402
from storage.log_manager import LogManager     # noqa: E402
from tests.storage.helpers import make_batch   # noqa: E402


def bench_startup(root: str, partitions: int) -> None:
    d = os.path.join(root, "startup")
    lm = LogManager([d], LogConfig(), broker_id=0, cluster_id="bench")
    batch = make_batch([b"x" * 100] * 10)
    t0 = time.perf_counter()
    for p in range(partitions):
        log = lm.get_or_create_log(f"topic{p % 10}", p)
        for _ in range(5):
            log.append(bytearray(batch), 0)
    t_create = time.perf_counter() - t0
    t0 = time.perf_counter()
    lm.shutdown()
    t_shut = time.perf_counter() - t0
    t0 = time.perf_counter()
    lm = LogManager([d], LogConfig(), broker_id=0, cluster_id="bench")
    t_clean = time.perf_counter() - t0
    assert len(lm.logs) == partitions
    lm.close_without_checkpoint()
    t0 = time.perf_counter()
    lm = LogManager([d], LogConfig(), broker_id=0, cluster_id="bench")
    t_unclean = time.perf_counter() - t0
    lm.shutdown()
    print(f"startup, {partitions} partitions: create+append {t_create:.2f} s, "
          f"clean shutdown (fsync all) {t_shut:.2f} s")
    print(f"  start after clean shutdown:   {t_clean:.3f} s "
          f"({t_clean / partitions * 1e6:.0f} us/partition)")
    print(f"  start after unclean shutdown: {t_unclean:.3f} s (recovers active segments)")


def bench_append(root: str, batch_bytes: int, total: int) -> None:
    d = os.path.join(root, f"append{batch_bytes}-0")
    log = Log(d, LogConfig(segment_bytes=256 * 1024 * 1024))
    rec = 1000
    n = max(1, (batch_bytes - 100) // (rec + 12))
    template = make_batch([b"v" * rec] * n)
    count = max(1, total // len(template))
    bufs = [bytearray(template) for _ in range(min(count, 64))]
    t0 = time.perf_counter()
    for i in range(count):
        log.append(bufs[i % len(bufs)], 0)
    dt = time.perf_counter() - t0
    written = count * len(template)
    print(f"append {len(template) / 1024:.0f} KiB batches: {written / dt / 1e6:.0f} MB/s "
          f"({count / dt:.0f} batches/s, CRC checked, page cache, no fsync)")
    t0 = time.perf_counter()
    pos, got = 0, 0
    while pos < log.log_end_offset:
        info = log.read(pos, 1 << 20)
        got += len(info.read())
        pos += n * max(1, info.length // len(template))
    dt = time.perf_counter() - t0
    print(f"  read back via FileRegion + pread (1 MiB fetches): {got / dt / 1e6:.0f} MB/s")
    log.close()
    shutil.rmtree(d)


def bench_index(root: str) -> None:
    idx = OffsetIndex(os.path.join(root, "0.index"), 0, 10 * 1024 * 1024)
    idx.create()
    for i in range(1, 200001):
        idx.append(i * 10, i * 4096)
    t0 = time.perf_counter()
    for i in range(200000):
        idx.lookup(i * 7)
    dt = time.perf_counter() - t0
    print(f"offset index lookup (200k entries): {dt / 200000 * 1e6:.2f} us")
    t0 = time.perf_counter()
    idx.persist()
    idx.set_active(False)
    again = OffsetIndex(idx.path, 0, 10 * 1024 * 1024)
    _ = again.entries
    print(f"persist + reload 200k entries: {(time.perf_counter() - t0) * 1e3:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--mb", type=int, default=512)
    args = ap.parse_args()
    root = tempfile.mkdtemp(dir=args.dir)
    try:
        bench_startup(root, args.partitions)
        bench_append(root, 1 << 20, args.mb << 20)
        bench_append(root, 16 << 10, args.mb << 20)
        bench_index(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

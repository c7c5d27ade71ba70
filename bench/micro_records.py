#!/usr/bin/env python3
"""Micro-benchmark of the record-batch hot path (protocol/records.py).

Prints microseconds per operation (median of --reps timed runs):

* validate + patch a 1 MiB batch: read_header, validate_batch (CRC-32C over ~1 MiB),
  set_base_offset, set_partition_leader_epoch  (target <= 60 us)
* read_header of one batch
* iterate the headers of 100 batches in one blob (iter_batches)
* for reference: decode the records of a 100-record batch (iter_records), build_batch

Usage: python bench/micro_records.py [--reps 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from protocol.records import (build_batch, iter_batches, iter_records, read_header,  # noqa: E402
                              set_base_offset, set_partition_leader_epoch, validate_batch)


def per_op_us(fn, number: int, reps: int) -> tuple[float, float, float]:
    runs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(number)
        runs.append((time.perf_counter() - t0) / number * 1e6)
    return statistics.median(runs), min(runs), max(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()

    value = os.urandom(1000)
    big = build_batch([(b"key-%d" % i, value, (), 1_700_000_000_000 + i) for i in range(1040)])
    assert 1_000_000 < len(big) < 1_100_000
    small = build_batch([(b"k%d" % i, value[:100], (), 1_700_000_000_000) for i in range(100)])
    blob = bytearray(small) * 100

    def validate_patch(n):
        buf = big
        for i in range(n):
            h = read_header(buf, 0)
            validate_batch(buf, h)
            set_base_offset(buf, 0, i)
            set_partition_leader_epoch(buf, 0, 5)

    def header(n):
        buf = small
        for _ in range(n):
            read_header(buf, 0)

    def iterate(n):
        for _ in range(n):
            for _h in iter_batches(blob):
                pass

    small_h = read_header(small)

    def decode(n):
        for _ in range(n):
            for _r in iter_records(small, small_h):
                pass

    recs = [(b"k%d" % i, value[:100], (), 1_700_000_000_000) for i in range(100)]

    def build(n):
        for _ in range(n):
            build_batch(recs)

    rows = [
        (f"validate + patch {len(big) / 2**20:.2f} MiB batch", validate_patch, 300),
        ("read_header", header, 200_000),
        ("iter_batches over 100 batches", iterate, 2_000),
        ("iter_records, 100 records of 100 B", decode, 300),
        ("build_batch, 100 records of 100 B", build, 300),
    ]
    print(f"{'operation':<40} {'median us':>10} {'min':>9} {'max':>9}")
    for name, fn, number in rows:
        med, lo, hi = per_op_us(fn, number, args.reps)
        print(f"{name:<40} {med:>10.2f} {lo:>9.2f} {hi:>9.2f}")


if __name__ == "__main__":
    main()

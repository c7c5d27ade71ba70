#!/usr/bin/env python3
"""What a page-cache write costs on this machine, by the state of the memory it lands in.

Produce CPU per GB moves by a factor of two from run to run on the project's VMs. This probe
separates the broker from the machine: it writes ``--mb`` MiB in 1 MiB ``os.write`` calls (as a
produce append does) to

* a new file (pages the kernel has to find: on a VM whose memory the host backs lazily, or has
  taken back through free page reporting, the first touch of each page is slow);
* the same file again (pages already in the page cache);
* a new file right after deleting one of the same size (pages just freed by the kernel);

and prints CPU seconds per GB for each (user + system of this process; the copy is all kernel).

``--writeback MB`` starts the kernel's writeback of every ``MB`` MiB just written
(``sync_file_range(SYNC_FILE_RANGE_WRITE)``, Linux; what RocksDB's ``bytes_per_sync`` does), to
see whether early writeback spares the writer the cost of dirty-page throttling (docs/benchmarks.md,
twenty-eighth session: it did not, reliably, here).

Usage: python bench/page_cache_probe.py [--mb 300] [--dir /tmp] [--writeback MB]
"""
from __future__ import annotations

import argparse
import ctypes
import os
import resource
import tempfile

SYNC_FILE_RANGE_WRITE = 2


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def write(path: str, mb: int, flags: int, chunk: bytes, writeback: int = 0) -> float:
    fd = os.open(path, flags, 0o644)
    start_writeback = None
    if writeback:
        start_writeback = ctypes.CDLL("libc.so.6", use_errno=True).sync_file_range
        start_writeback.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    c0 = cpu()
    for i in range(1, mb + 1):
        os.write(fd, chunk)
        if start_writeback is not None and i % writeback == 0 and start_writeback(
                fd, (i - writeback) * len(chunk), writeback * len(chunk), SYNC_FILE_RANGE_WRITE):
            e = ctypes.get_errno()
            raise OSError(e, f"sync_file_range: {os.strerror(e)}")
    spent = cpu() - c0
    os.close(fd)
    return spent / (mb * len(chunk) / 1e9)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--writeback", type=int, default=0, metavar="MB",
                    help="start writeback of every MB MiB written (0: leave it to the kernel)")
    a = ap.parse_args()
    chunk = os.urandom(1 << 20)
    new = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    d = tempfile.mkdtemp(prefix="page-cache-probe-", dir=a.dir)
    first, second = os.path.join(d, "first"), os.path.join(d, "second")
    try:
        wb = a.writeback
        print(f"new file:                {write(first, a.mb, new, chunk, wb):.3f} s/GB")
        print(f"same file again:         {write(first, a.mb, os.O_WRONLY, chunk, wb):.3f} s/GB")
        os.unlink(first)
        print(f"new file after a delete: {write(second, a.mb, new, chunk, wb):.3f} s/GB")
    finally:
        for p in (first, second):
            if os.path.exists(p):
                os.unlink(p)
        os.rmdir(d)


if __name__ == "__main__":
    main()

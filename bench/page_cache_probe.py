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

Usage: python bench/page_cache_probe.py [--mb 300] [--dir /tmp]
"""
from __future__ import annotations

import argparse
import os
import resource
import tempfile


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def write(path: str, mb: int, flags: int, chunk: bytes) -> float:
    fd = os.open(path, flags, 0o644)
    c0 = cpu()
    for _ in range(mb):
        os.write(fd, chunk)
    spent = cpu() - c0
    os.close(fd)
    return spent / (mb * len(chunk) / 1e9)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    a = ap.parse_args()
    chunk = os.urandom(1 << 20)
    new = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    d = tempfile.mkdtemp(prefix="page-cache-probe-", dir=a.dir)
    first, second = os.path.join(d, "first"), os.path.join(d, "second")
    try:
        print(f"new file:                {write(first, a.mb, new, chunk):.3f} s/GB")
        print(f"same file again:         {write(first, a.mb, os.O_WRONLY, chunk):.3f} s/GB")
        os.unlink(first)
        print(f"new file after a delete: {write(second, a.mb, new, chunk):.3f} s/GB")
    finally:
        for p in (first, second):
            if os.path.exists(p):
                os.unlink(p)
        os.rmdir(d)


if __name__ == "__main__":
    main()

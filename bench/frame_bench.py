#!/usr/bin/env python3
"""The receive path of large request frames, alone: CPU per GB to read 1 MiB frames from a socket
into FrameReader (as asyncio's BufferedProtocol does: get_buffer, recv_into, buffer_updated) and
CRC-32C each one, as a produce request's batch is checked.

Prints user and system seconds per GB of the reading thread, and GB/s. ``--checkout DIR`` runs
another checkout's protocol/framing.py (an older commit in a git worktree, say) for an A/B; one
without FramePool allocates a new bytearray per frame, as before the pool.

Usage: python bench/frame_bench.py [--frames 1500] [--size 1048576] [--checkout DIR]
"""
from __future__ import annotations

import argparse
import os
import resource
import socket
import struct
import sys
import threading
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=1500)
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--checkout", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    a = ap.parse_args()
    sys.path.insert(0, a.checkout)
    import crc32c
    import protocol.framing as framing

    pool = framing.FramePool() if hasattr(framing, "FramePool") else None
    reader = framing.FrameReader(pool=pool) if pool is not None else framing.FrameReader()
    payload = struct.pack(">i", a.size) + os.urandom(a.size)
    rx, tx = socket.socketpair()

    def writer():
        for _ in range(a.frames):
            tx.sendall(payload)
        tx.close()

    threading.Thread(target=writer, daemon=True).start()
    r0, t0 = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter()
    got = 0
    while got < a.frames:
        n = rx.recv_into(reader.get_buffer(-1))
        if not n:
            break
        for f in reader.buffer_updated(n):
            crc32c.crc32c(f)
            got += 1
            del f
    r1, secs = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter() - t0
    gb = got * a.size / 1e9
    print(f"{os.path.abspath(a.checkout)}: {'FramePool' if pool else 'new bytearray per frame'}: "
          f"user {(r1.ru_utime - r0.ru_utime) / gb:.3f} s/GB, sys {(r1.ru_stime - r0.ru_stime) / gb:.3f} s/GB, "
          f"{gb / secs:.2f} GB/s ({got} frames)")


if __name__ == "__main__":
    main()

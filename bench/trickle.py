"""Helpers shared by the benches that follow many partitions: a process's CPU seconds, and a
producer writing a steady trickle of small records spread over every partition."""
from __future__ import annotations

import os
import threading
import time


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(bootstrap: str, topic: str, partitions: int, rate: int, stop: threading.Event) -> None:
    """``rate`` records of 100 bytes a second, round-robin over ``partitions`` (confluent-kafka,
    acks=1, linger.ms=5), until ``stop`` is set."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "1"})
    i = 0
    t0 = time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - t0) * rate)
        while i < due:
            p.produce(topic, b"x" * 100, partition=i % partitions)
            i += 1
        p.poll(0)
        time.sleep(0.01)
    p.flush(10)

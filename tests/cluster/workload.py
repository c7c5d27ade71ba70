"""Numbered-record workload for cluster drills: an idempotent acks=all producer that writes
continuously and remembers what was acknowledged, and a checker that reads everything back."""
from __future__ import annotations

import threading
import time
from collections import defaultdict


class NumberedProducer:
    """confluent-kafka idempotent producer writing "<seq>" values round-robin over partitions."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate_sleep: float = 0.002):
        from confluent_kafka import Producer
        self.topic = topic
        self.partitions = partitions
        self.acked: dict[int, list[tuple[int, int]]] = defaultdict(list)   # partition -> [(offset, seq)]
        self.failed: list[tuple[int, str]] = []
        self.sent = 0
        self._stop = threading.Event()
        self._sleep = rate_sleep
        self.p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                           "linger.ms": 5, "message.timeout.ms": 120000, "retry.backoff.ms": 100,
                           "topic.metadata.refresh.interval.ms": 1000})
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _cb(self, err, msg):
        seq = int(msg.value())
        if err is not None:
            self.failed.append((seq, str(err)))
        else:
            off = msg.offset()
            self.acked[msg.partition()].append((-1 if off is None else off, seq))   # -1: offset not reported

    def _run(self):
        seq = 0
        while not self._stop.is_set():
            try:
                self.p.produce(self.topic, value=str(seq).encode(), partition=seq % self.partitions,
                               on_delivery=self._cb)
                seq += 1
                self.sent = seq
            except BufferError:
                pass
            self.p.poll(0)
            time.sleep(self._sleep)
        self.p.flush(120)

    def start(self) -> "NumberedProducer":
        self.thread.start()
        return self

    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def wait_acked(self, n: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        start = self.acked_count()
        while self.acked_count() < start + n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {self.acked_count() - start} of {n} records acknowledged in {timeout}s")
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(180)


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, list[tuple[int, int]]]:
    """Every record of every partition: partition -> [(offset, seq)] (up to the high watermark)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"checker-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": True})
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)
    try:
        ends = {}
        for p in range(partitions):
            _lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = hi
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        done = {p for p, hi in ends.items() if hi == 0}
        deadline = time.monotonic() + timeout
        while len(done) < partitions and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:      # _PARTITION_EOF
                    if m.offset() >= ends[m.partition()]:
                        done.add(m.partition())
                continue
            out[m.partition()].append((m.offset(), int(m.value())))
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
    finally:
        c.close()
    return out


def check_no_loss(acked: dict[int, list[tuple[int, int]]], log: dict[int, list[tuple[int, int]]]) -> dict:
    """Every acknowledged record is in the log at its acknowledged offset, exactly once, and the
    acknowledged records of a partition appear in the order they were sent."""
    problems = []
    for p, recs in acked.items():
        by_offset = dict(log.get(p, []))
        seqs_in_log = [s for _, s in log.get(p, [])]
        counts: dict[int, int] = defaultdict(int)
        for s in seqs_in_log:
            counts[s] += 1
        for off, seq in recs:
            if off >= 0 and by_offset.get(off) != seq:
                problems.append(f"partition {p}: acked seq {seq} at offset {off}, log has {by_offset.get(off)}")
            if counts[seq] != 1:
                problems.append(f"partition {p}: seq {seq} appears {counts[seq]} times")
        acked_sorted = sorted(r for r in recs if r[0] >= 0)
        if [s for _, s in acked_sorted] != sorted(s for _, s in acked_sorted):
            problems.append(f"partition {p}: acknowledged records out of order")
        if seqs_in_log != sorted(seqs_in_log):
            problems.append(f"partition {p}: log out of order")
    return {"problems": problems[:20], "n_problems": len(problems),
            "acked": sum(len(v) for v in acked.values()), "in_log": sum(len(v) for v in log.values())}


class GroupReader:
    """A consumer-group member (confluent-kafka) that reads continuously and commits."""

    def __init__(self, bootstrap: str, topic: str, group: str, protocol: str = "classic"):
        from confluent_kafka import Consumer
        self.topic = topic
        self.group = group
        self.bootstrap = bootstrap
        self.seen: dict[int, dict[int, int]] = defaultdict(dict)     # partition -> {offset: seq}
        self._stop = threading.Event()
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": True, "auto.commit.interval.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000}
        if protocol == "classic":
            conf["session.timeout.ms"] = 10000
        else:       # KIP-848: the broker sets the session timeout and heartbeat interval
            conf["group.protocol"] = protocol
        self.c = Consumer(conf)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        self.c.subscribe([self.topic])
        while not self._stop.is_set():
            m = self.c.poll(0.2)
            if m is None or m.error():
                continue
            self.seen[m.partition()][m.offset()] = int(m.value())
        try:
            self.c.commit(asynchronous=False)
        except Exception:
            pass
        self.c.close()

    def start(self) -> "GroupReader":
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(60)

    def committed(self, partitions: int) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group})
        try:
            got = c.committed([TopicPartition(self.topic, p) for p in range(partitions)], timeout=30)
            return {tp.partition: tp.offset for tp in got}
        finally:
            c.close()


def check_group(reader: GroupReader, log: dict[int, list[tuple[int, int]]], partitions: int) -> list[str]:
    """Everything below the group's committed offset was delivered to the group's consumers."""
    problems = []
    committed = reader.committed(partitions)
    for p in range(partitions):
        c = committed.get(p, -1001)
        if c < 0:
            continue
        for off, seq in log.get(p, []):
            if off < c and reader.seen[p].get(off) != seq:
                problems.append(f"partition {p}: committed {c} but offset {off} (seq {seq}) was not consumed")
                break
    return problems

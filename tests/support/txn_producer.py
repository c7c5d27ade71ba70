"""A confluent-kafka transactional producer for the transaction drills, run as a subprocess:

    python tests/support/txn_producer.py BOOTSTRAP TOPIC TRANSACTIONAL_ID DONE_FILE STOP_FILE
        [--partitions N] [--records R] [--txn-timeout-ms T] [--op-timeout-s S]
        [--message-timeout-ms M] [--metadata-refresh-ms F]

It runs transaction after transaction until STOP_FILE exists.  Transaction ``k`` writes the
values ``k:i`` (i < R, default partitioner) or, with ``--partitions N``, ``k:p:i`` to each
partition p < N explicitly.  Each transaction whose commit_transaction returned is appended to
DONE_FILE as a line ``k``.  An abortable error aborts the transaction and goes on; a retriable
one retries the commit; anything else replaces the producer, and every new producer prints
``new producer`` (the drills count them: a fatal error shows as a second producer).

The drills kill brokers under it, so every call has a timeout and nothing here may hang.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path


class TxnProducerProcess:
    """This script running in a subprocess, with its files in ``work_dir``; ``options`` are the
    command-line options without dashes (``partitions=3, op_timeout_s=15``)."""

    def __init__(self, work_dir: Path, bootstrap: str, topic: str, tid: str, **options):
        self.done_path, self.stop_path = work_dir / "done", work_dir / "stop"
        self.log_path = work_dir / "producer.log"
        args = [sys.executable, os.path.abspath(__file__), bootstrap, topic, tid,
                str(self.done_path), str(self.stop_path)]
        for k, v in options.items():
            args += ["--" + k.replace("_", "-"), str(v)]
        with open(self.log_path, "w") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=out)

    def count(self) -> int:
        """Transactions committed so far."""
        return self.done_path.read_text().count("\n") if self.done_path.exists() else 0

    def committed(self) -> set[int]:
        return {int(x) for x in self.done_path.read_text().split()} if self.done_path.exists() else set()

    def producers(self) -> int:
        """Producers created (more than one: a fatal error replaced the first)."""
        return self.log_path.read_text().count("new producer")

    def stop(self, timeout: float = 60) -> None:
        self.stop_path.write_text("stop")
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main() -> None:
    from confluent_kafka import KafkaException, Producer

    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "topic", "tid", "done_path", "stop_path"):
        ap.add_argument(name)
    ap.add_argument("--partitions", type=int, default=0, help="0: let the partitioner choose")
    ap.add_argument("--records", type=int, default=5, help="per transaction (per partition)")
    ap.add_argument("--txn-timeout-ms", type=int, default=3000)
    ap.add_argument("--op-timeout-s", type=float, default=10)
    ap.add_argument("--message-timeout-ms", type=int, default=2500)
    ap.add_argument("--metadata-refresh-ms", type=int, default=None)
    a = ap.parse_args()
    conf = {"bootstrap.servers": a.bootstrap, "transactional.id": a.tid,
            "transaction.timeout.ms": a.txn_timeout_ms, "linger.ms": 0,
            "message.timeout.ms": a.message_timeout_ms}
    if a.metadata_refresh_ms is not None:
        conf["topic.metadata.refresh.interval.ms"] = a.metadata_refresh_ms

    def stopped() -> bool:
        return os.path.exists(a.stop_path)

    def make():
        while not stopped():
            p = Producer(conf)
            print("new producer", flush=True)
            try:
                p.init_transactions(a.op_timeout_s)
                return p
            except KafkaException:
                time.sleep(0.2)
        return None

    def write(p, k: int) -> None:
        if a.partitions:
            for part in range(a.partitions):
                for i in range(a.records):
                    p.produce(a.topic, value=f"{k}:{part}:{i}".encode(), partition=part)
        else:
            for i in range(a.records):
                p.produce(a.topic, value=f"{k}:{i}".encode())

    p = make()
    k = 0
    with open(a.done_path, "a") as done:
        def committed(k: int) -> None:
            done.write(f"{k}\n")
            done.flush()

        while p is not None and not stopped():
            k += 1
            try:
                p.begin_transaction()
                write(p, k)
                p.commit_transaction(a.op_timeout_s)
                committed(k)
            except KafkaException as e:
                err = e.args[0]
                try:
                    if err.txn_requires_abort():
                        p.abort_transaction(a.op_timeout_s)
                        continue
                    if err.retriable():
                        p.commit_transaction(a.op_timeout_s)
                        committed(k)
                        continue
                except KafkaException:
                    pass
                p = make()


if __name__ == "__main__":
    main()

"""Drill (slow tier): a transactional producer runs transaction after transaction (5 records each,
tagged with the transaction's number) in a subprocess while the broker is killed -9 and restarted
several times.  Afterwards read_committed shows, per transaction, all 5 records or none, and every
transaction whose commit_transaction returned is there."""
from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest

from tests.integration.test_transactions import BROKER_PROPS, create_topic, describe_txn, read_all, unique, wait_for

PRODUCER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer, KafkaException
    bs, topic, tid, done_path, stop_path = sys.argv[1:6]
    import os
    def make():
        p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "transaction.timeout.ms": 3000,
                      "linger.ms": 0, "message.timeout.ms": 2500})
        while not os.path.exists(stop_path):
            try:
                p.init_transactions(10)
                return p
            except KafkaException:
                time.sleep(0.2)
        return None
    p = make()
    k = 0
    with open(done_path, "a") as done:
        while p is not None and not os.path.exists(stop_path):
            k += 1
            try:
                p.begin_transaction()
                for i in range(5):
                    p.produce(topic, value=f"{k}:{i}".encode())
                p.commit_transaction(10)
                done.write(f"{k}\\n"); done.flush()
            except KafkaException as e:
                err = e.args[0]
                try:
                    if err.txn_requires_abort():
                        p.abort_transaction(10)
                        continue
                except KafkaException:
                    pass
                p = make()
""")


@pytest.mark.slow
def test_kill_during_transactions_never_shows_partial(broker_factory, tmp_path):
    bk = broker_factory(props=BROKER_PROPS)
    bs = bk.bootstrap
    topic, tid = unique("drill"), unique("tid-drill")
    create_topic(bs, topic)
    done_path, stop_path = tmp_path / "done", tmp_path / "stop"
    script = tmp_path / "producer.py"
    script.write_text(PRODUCER)
    proc = subprocess.Popen([sys.executable, str(script), bs, topic, tid, str(done_path), str(stop_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rng = random.Random(7)
    try:
        wait_for(lambda: done_path.exists() and done_path.read_text().count("\n") >= 3, what="first commits")
        for _ in range(4):
            time.sleep(rng.uniform(0.3, 1.5))
            bk.restart(clean=False)
            time.sleep(rng.uniform(1.0, 2.0))
    finally:
        stop_path.write_text("stop")
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    wait_for(lambda: describe_txn(bs, tid).transaction_state in ("CompleteCommit", "CompleteAbort", "Empty"),
             what="the last transaction to finish")
    committed = {int(x) for x in done_path.read_text().split()}
    assert len(committed) >= 3
    values = read_all(bs, topic, "read_committed", idle=2.0)
    per_txn = Counter(v.split(":")[0] for v in values)
    assert all(n == 5 for n in per_txn.values()), {k: n for k, n in per_txn.items() if n != 5}
    assert len(values) == len(set(values))
    missing = committed - {int(k) for k in per_txn}
    assert not missing, f"committed transactions missing after kill -9: {sorted(missing)[:10]}"

"""Drill (slow tier): a transactional producer runs transaction after transaction (5 records each,
tagged with the transaction's number) in a subprocess while the broker is killed -9 and restarted
several times (tests/support/txn_producer.py).  Afterwards read_committed shows, per transaction, all 5 records or none, and every
transaction whose commit_transaction returned is there."""
from __future__ import annotations

import random
import time
from collections import Counter

import pytest

from tests.integration.test_transactions import BROKER_PROPS, create_topic, describe_txn, read_all, unique, wait_for
from tests.support.txn_producer import TxnProducerProcess


@pytest.mark.slow
def test_kill_during_transactions_never_shows_partial(broker_factory, tmp_path):
    bk = broker_factory(props=BROKER_PROPS)
    bs = bk.bootstrap
    topic, tid = unique("drill"), unique("tid-drill")
    create_topic(bs, topic)
    prod = TxnProducerProcess(tmp_path, bs, topic, tid)
    rng = random.Random(7)
    try:
        wait_for(lambda: prod.count() >= 3, what="first commits")
        for _ in range(4):
            time.sleep(rng.uniform(0.3, 1.5))
            bk.restart(clean=False)
            time.sleep(rng.uniform(1.0, 2.0))
    finally:
        prod.stop()
    wait_for(lambda: describe_txn(bs, tid).transaction_state in ("CompleteCommit", "CompleteAbort", "Empty"),
             what="the last transaction to finish")
    committed = prod.committed()
    assert len(committed) >= 3
    values = read_all(bs, topic, "read_committed", idle=2.0)
    per_txn = Counter(v.split(":")[0] for v in values)
    assert all(n == 5 for n in per_txn.values()), {k: n for k, n in per_txn.items() if n != 5}
    assert len(values) == len(set(values))
    missing = committed - {int(k) for k in per_txn}
    assert not missing, f"committed transactions missing after kill -9: {sorted(missing)[:10]}"

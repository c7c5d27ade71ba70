"""kafka-dump-log.sh --transaction-log-decoder over a real broker's __transaction_state, printed
as Kafka 3.9's TransactionLog.formatRecordKeyAndValue prints it."""
from __future__ import annotations

import glob
import re

import pytest

from tests.support import BrokerProcess
from tests.support.broker import running
from tests.tools.conftest import tool

pytestmark = pytest.mark.integration


def test_transaction_log_decoder(tmp_path):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    b = BrokerProcess(tmp_path / "b", props={"transaction.state.log.num.partitions": 1,
                                             "transaction.state.log.replication.factor": 1,
                                             "transaction.state.log.min.isr": 1})
    with running(b):
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("tx", 2, 1)])["tx"].result(15)
        p = ck.Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "dump-me"})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("tx", b"a", partition=0)
        p.produce("tx", b"b", partition=1)
        p.commit_transaction(30)
    lines = []
    for seg in sorted(glob.glob(str(b.log_dir / "__transaction_state-*" / "*.log"))):
        r = tool("kafka-dump-log", "--files", seg, "--transaction-log-decoder")
        assert r.rc == 0, r
        lines += [x for x in r.lines if x.startswith("| ")]
    pairs = [re.search(r" key: (.*?) payload: (.*)$", x).groups() for x in lines]
    assert {k for k, _ in pairs} == {"transaction_metadata::transactionalId=dump-me"}
    states = [re.fullmatch(r"producerId:(\d+),producerEpoch:(\d+),state=(\w+),partitions=\[(.*)\],"
                           r"txnLastUpdateTimestamp=(\d+),txnTimeoutMs=(\d+)", v).groups() for _, v in pairs]
    names = [s[2] for s in states]
    # (librdkafka may add the two partitions in one AddPartitionsToTxn or in two)
    assert [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n] == \
        ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"], names
    last_ongoing = [s for s in states if s[2] == "Ongoing"][-1]
    assert sorted(last_ongoing[3].split(",")) == ["tx-0", "tx-1"] and states[0][3] == "" and states[-1][3] == ""
    assert {s[0] for s in states} == {states[0][0]} and states[0][5] == "60000"

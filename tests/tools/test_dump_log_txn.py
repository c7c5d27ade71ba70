"""kafka-dump-log.sh --transaction-log-decoder over a real broker's __transaction_state, printed
as Kafka 3.9's TransactionLog.formatRecordKeyAndValue prints it."""
from __future__ import annotations

import glob
import json
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
        # kafka-console-consumer.sh's TransactionLogMessageFormatter: Kafka 3.9's JSON, one
        # object after another
        r = tool("kafka-console-consumer", "--bootstrap-server", b.bootstrap, "--topic", "__transaction_state",
                 "--from-beginning", "--timeout-ms", 2500,
                 "--formatter", "org.apache.kafka.tools.consumer.TransactionLogMessageFormatter")
        assert r.rc == 0, r
        objs, pos, dec = [], 0, json.JSONDecoder()
        while pos < len(r.out):
            obj, pos = dec.raw_decode(r.out, pos)
            objs.append(obj)
        assert {json.dumps(o["key"]) for o in objs} == {'{"version": 0, "data": {"transactionalId": "dump-me"}}'}
        data = [o["value"]["data"] for o in objs]
        assert [list(d) for d in data[:1]] == [["producerId", "producerEpoch", "transactionTimeoutMs",
                                               "transactionStatus", "transactionPartitions",
                                               "transactionLastUpdateTimestampMs", "transactionStartTimestampMs"]]
        codes = [d["transactionStatus"] for d in data]
        assert [c for i, c in enumerate(codes) if i == 0 or codes[i - 1] != c] == [0, 1, 2, 4], codes
        assert data[0]["transactionPartitions"] is None and data[-1]["transactionPartitions"] == []
        ongoing = [d for d in data if d["transactionStatus"] == 1][-1]["transactionPartitions"]
        assert sorted((t["topic"], p) for t in ongoing for p in t["partitionIds"]) == [("tx", 0), ("tx", 1)]
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

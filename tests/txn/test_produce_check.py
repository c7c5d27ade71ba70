"""``check_produce``, the partition leader's check of a transactional batch, on fakes: a marker of
the same producer landing while the coordinator is asked makes the batch retriable
(NOT_ENOUGH_REPLICAS); a marker of another producer on the same partition does not (it used to,
and a three-broker soak of two transactional producers retried one transaction in twenty)."""
from __future__ import annotations

from types import SimpleNamespace as NS

from broker.txn import markers as M
from protocol import records as rec
from protocol.errors import ErrorCode as E
from tests.txn.support import run

CONFIG = {"transaction.partition.verification.enable": True, "add.partitions.to.txn.retry.backoff.ms": 20,
          "add.partitions.to.txn.retry.backoff.max.ms": 100, "request.timeout.ms": 30000}


def setup(marker_of):
    """A broker whose coordinator, while adding or verifying, sees a marker of ``marker_of`` land."""
    async def add_partitions(tid, pid, epoch, parts, tv):
        M.note_marker("t", 0, marker_of)
        return E.NONE

    def verify_partitions(tid, pid, epoch, parts):
        M.note_marker("t", 0, marker_of)
        return {tp: E.NONE for tp in parts}

    broker = NS(config=NS(get=CONFIG.__getitem__), txns=NS(add_partitions=add_partitions,
                                                          verify_partitions=verify_partitions))
    part = NS(is_leader=True, log=NS(producer_state=NS(last_entry=lambda pid: None)))
    return broker, part


def batch(pid):
    return rec.build_batch([(None, b"v")], producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)


@run
async def test_a_marker_of_the_same_producer_makes_the_batch_retriable():
    for version in (11, 12):                    # verify (transaction version 1), add (version 2)
        broker, part = setup(marker_of=7)
        assert await M.check_produce(broker, "tid", "t", 0, part, batch(7), version) == E.NOT_ENOUGH_REPLICAS
    assert M._watches == {}                     # nothing left behind


@run
async def test_a_marker_of_another_producer_does_not():
    for version in (11, 12):
        broker, part = setup(marker_of=8)
        assert await M.check_produce(broker, "tid", "t", 0, part, batch(7), version) == E.NONE
    assert M._watches == {}

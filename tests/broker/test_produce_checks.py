"""broker/handlers/produce.py ``_cannot_append``: the leadership and min.insync.replicas checks a
produce makes before its append, and again after compressing in a worker thread, when the
partition may have changed hands or been replaced meanwhile."""
from types import SimpleNamespace as NS

from broker.handlers.produce import _cannot_append
from protocol.errors import ErrorCode as E


def _part(leader=True, isr=(1, 2), min_isr=2, offline=False, replicas=(1, 2, 3)):
    return NS(is_leader=leader, isr=list(isr), offline=offline, replicas=list(replicas),
              log=NS(config=NS(min_insync_replicas=min_isr)))


def test_before_the_append():
    assert _cannot_append(_part(), -1) == 0
    assert _cannot_append(None, 1) == E.NOT_LEADER_OR_FOLLOWER
    assert _cannot_append(_part(leader=False), 1) == E.NOT_LEADER_OR_FOLLOWER
    assert _cannot_append(_part(leader=False, offline=True), 1) == E.KAFKA_STORAGE_ERROR
    assert _cannot_append(_part(isr=(1,)), -1) == E.NOT_ENOUGH_REPLICAS
    assert _cannot_append(_part(isr=(1,)), 1) == 0                     # acks=1 does not care
    # Kafka's effectiveMinIsr: never more than the partition has replicas (KAFKA-15583), so a
    # single-replica partition under min.insync.replicas=2 takes acks=all
    assert _cannot_append(_part(isr=(1,), replicas=(1,)), -1) == 0
    assert _cannot_append(_part(isr=(1,), replicas=(1, 2), min_isr=3), -1) == E.NOT_ENOUGH_REPLICAS
    assert _cannot_append(_part(isr=(1, 2), replicas=(1, 2), min_isr=3), -1) == 0


def test_after_the_worker_thread():
    p = _part()
    assert _cannot_append(p, -1, p) == 0
    assert _cannot_append(p, -1, None) == E.NOT_LEADER_OR_FOLLOWER      # the replica went away
    assert _cannot_append(p, -1, _part()) == E.NOT_LEADER_OR_FOLLOWER   # replaced by another
    p.is_leader = False
    assert _cannot_append(p, 1, p) == E.NOT_LEADER_OR_FOLLOWER          # lost the leadership
    p.is_leader, p.isr = True, [1]
    assert _cannot_append(p, -1, p) == E.NOT_ENOUGH_REPLICAS            # the ISR shrank

"""KIP-951 leader discovery: a Produce (v10+) or Fetch (v16+) partition answered
NOT_LEADER_OR_FOLLOWER (Fetch: also FENCED_LEADER_EPOCH) carries the partition's current leader
and epoch, and the answer carries that leader's endpoint on the request's listener, so a client
can go there without a Metadata round trip.  As Kafka's ``getCurrentLeader``: the leader and
epoch of the replica hosted here, else of the metadata; the endpoint only of a live broker that
has the listener."""
from __future__ import annotations

from broker.endpoints import on_listener
from protocol.errors import ErrorCode as E

PRODUCE_HINTED = frozenset({E.NOT_LEADER_OR_FOLLOWER})
FETCH_HINTED = frozenset({E.NOT_LEADER_OR_FOLLOWER, E.FENCED_LEADER_EPOCH})


def current_leader(broker, topic: str, partition: int) -> tuple[int, int]:
    """(leader id, leader epoch) of a partition, or (-1, -1) when it is not known."""
    part = broker.replicas.get(topic, partition) if broker.replicas is not None else None
    if part is not None:
        return part.leader_id, part.leader_epoch
    info = broker.controller.topic(topic) if topic else None
    state = info.partitions.get(partition) if info is not None else None
    if state is None:
        return -1, -1
    return state.leader, state.leader_epoch


def add_hints(ctx, response, partitions, hinted) -> None:
    """Fill ``current_leader`` of every partition answer whose error is in ``hinted``, and the
    answer's ``node_endpoints`` with their leaders.  ``partitions``: (topic name, partition
    index, partition answer) for every partition of the answer."""
    R = type(response)
    broker = ctx.broker
    leaders: set[int] = set()
    for topic, index, p in partitions:
        if p.error_code in hinted:
            leader, epoch = current_leader(broker, topic, index)
            p.current_leader = R.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
            if leader >= 0:
                leaders.add(leader)
    if not leaders:
        return
    response.node_endpoints = sorted(
        (R.NodeEndpoint(node_id=b.id, host=host, port=port, rack=b.rack)
         for b, host, port in on_listener(broker, ctx.connection.listener_name) if b.id in leaders),
        key=lambda e: e.node_id)

"""``replica.selector.class``: which replica a consumer should fetch from (KIP-392).

Kafka's leader asks its ReplicaSelector plug-in, for each partition of a consumer's Fetch v11+,
which replica that consumer should read; when the answer is another replica, the partition is
answered with no records and that replica's id as ``preferred_read_replica``, and the consumer
(librdkafka, Java) goes on fetching from it (a follower serves consumers up to its high
watermark, ``broker/handlers/fetch.py``).  Unset, the default, the leader names no replica.

The setting takes Kafka's own class name, ``org.apache.kafka.common.replica.RackAwareReplicaSelector``
(the rack-aware choice below; ``broker.replica_selector.RackAwareReplicaSelector`` is the same
class), or a Python class (``package.module.Class``) with ``select(topic_partition, client_metadata, partition_view)``
returning one of ``partition_view.replicas`` or None, as Kafka's interface does; it gets
``configure(configs)`` with the broker's settings when it has one, and ``close()`` when the broker
stops.

What the leader offers (Kafka's ``ReplicaManager.findPreferredReadReplica``): itself, and each
follower in the ISR whose log end offset is at or past the fetch offset and whose log start
offset is at or below it (a follower outside the ISR may lag without end).  A choice of the
leader, or of a replica without a known endpoint, names no replica.
"""
from __future__ import annotations

import logging
from typing import NamedTuple

log = logging.getLogger("odradek.replica_selector")

KEY = "replica.selector.class"
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


class Endpoint(NamedTuple):
    id: int
    host: str
    port: int
    rack: str | None


class ReplicaView(NamedTuple):
    endpoint: Endpoint
    log_end_offset: int
    time_since_last_caught_up_ms: int


class PartitionView(NamedTuple):
    replicas: tuple            # ReplicaView, the leader among them
    leader: ReplicaView


class ClientMetadata(NamedTuple):
    rack_id: str
    client_id: str
    client_address: str
    principal: str
    listener_name: str


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def _most_caught_up(view: ReplicaView):
    """Kafka's ReplicaView.comparator: the largest log end offset, then the least time since
    it was last caught up, then the largest broker id."""
    return view.log_end_offset, -view.time_since_last_caught_up_ms, view.endpoint.id


class RackAwareReplicaSelector:
    """A replica in the client's rack: the leader if it is there, else the most caught-up of the
    others there; the leader when the client names no rack or no replica is in its rack."""

    def select(self, topic_partition, client_metadata, partition_view):
        rack = client_metadata.rack_id
        if not rack:
            return partition_view.leader
        same = [r for r in partition_view.replicas if r.endpoint.rack == rack]
        if not same or partition_view.leader in same:
            return partition_view.leader
        return max(same, key=_most_caught_up)


def load(cfg):
    """The configured selector, or None."""
    path = (cfg.get(KEY) or "").strip()
    if not path:
        return None
    if path in (RACK_AWARE, f"{__name__}.RackAwareReplicaSelector"):
        selector = RackAwareReplicaSelector()
    else:
        from broker.security.builder import broker_settings, instantiate
        selector = instantiate(path, KEY, broker_settings(cfg),
                               ("select(topic_partition, client_metadata, partition_view)",))
    log.info("%s: %s", KEY, path)
    return selector


def preferred_read_replica(broker, selector, part, client: ClientMetadata, fetch_offset: int,
                           now: int, endpoints) -> int:
    """The id of the replica ``selector`` names for a consumer of leader partition ``part``
    reading from ``fetch_offset``, or -1 (the leader itself, or no choice).  ``endpoints``:
    broker id -> Endpoint on the listener the consumer came in by."""
    me = broker.broker_id
    mine = endpoints.get(me)
    if mine is None:
        return -1
    leader = ReplicaView(mine, part.log.log_end_offset, 0)
    views = [leader]
    for rid, rr in part.remote.items():
        ep = endpoints.get(rid)
        if (ep is not None and rid in part.isr and rr.leo >= fetch_offset
                and rr.log_start_offset <= fetch_offset):
            views.append(ReplicaView(ep, rr.leo, max(now - rr.last_caught_up_ms, 0)))
    try:
        chosen = selector.select(TopicPartition(part.topic, part.partition), client,
                                 PartitionView(tuple(views), leader))
    except Exception:      # noqa: BLE001 - a plug-in's failure must not fail the fetch
        log.error("%s failed for %s-%d", type(selector).__name__, part.topic, part.partition, exc_info=True)
        return -1
    if chosen is None or chosen == leader or chosen.endpoint.id == me:
        return -1
    return chosen.endpoint.id if chosen.endpoint.id in endpoints else -1

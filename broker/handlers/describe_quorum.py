"""DescribeQuorum (key 55), v0-2: the KRaft metadata quorum, as a combined Kafka 3.9 node
(``process.roles=broker,controller``) that leads its quorum of one answers it.

* Served in KRaft mode only.  A Kafka 3.9 broker in ZooKeeper mode does not have the API: it
  is missing from its ApiVersions and a request for it closes the connection (the socket
  server refuses an API not enabled for the listener).  Odradek does the same outside KRaft
  mode: ApiVersions hides the key and the connection closes (``KRAFT_ONLY_APIS``,
  broker/dispatch.py, broker/connection.py).
* DESCRIBE on the cluster is needed (Kafka's controller checks it), otherwise the whole request
  is answered CLUSTER_AUTHORIZATION_FAILED at the top level (broker/security/enforce.py).
* Kafka's raft client answers only a request naming exactly one topic, ``__cluster_metadata``,
  with exactly its partition 0.  Anything else (more topics or partitions, another name or
  index, no topic at all) is answered with UNKNOWN_TOPIC_OR_PARTITION on every partition the
  request named, with the top-level error code NONE, as Kafka does.
* The answer describes this node as the leader and only voter:

  - ``leader_id``: the node id.
  - ``leader_epoch``: always 1.  A Kafka node elects itself at epoch 1 on the first start of a
    freshly formatted quorum, and every later election bumps the epoch; the embedded store
    holds no elections (this node has led it from its creation), so the epoch of that first
    election is reported and never moves.  A client watching the epoch for leader changes
    rightly sees none.
  - ``high_watermark``: the embedded store's count of durable metadata changes
    (``SingleNodeController.metadata_offset()``, kept across restarts), the counterpart of the
    metadata log's committed offset: it grows by one per change (Kafka's grows by the records
    of each batch, so the numbers are not comparable between the two).
  - ``current_voters``: this node, ``log_end_offset`` = the high watermark (the leader's log
    is the committed log here), ``last_fetch_timestamp`` and ``last_caught_up_timestamp``
    (v1+) the current time, as a Kafka leader reports itself, and (v2) ``replica_directory_id``
    = the ``directory.id`` of the metadata directory's meta.properties (zero when it has none,
    as a v0 file).
  - ``observers``: none (no other broker fetches the metadata).
  - ``nodes`` (v2): this node with its controller endpoint, taken from the configuration as
    Kafka takes its voters' endpoints: with ``controller.quorum.voters`` this node's entry
    there under the first of ``controller.listener.names``; otherwise (a dynamic quorum
    formatted ``--standalone``) the first controller listener of ``advertised.listeners`` or
    else ``listeners`` (an empty host as ``localhost``).  The listener itself is not opened
    (docs/config.md, "KRaft configuration files").  Empty when the configuration names none.
"""
from __future__ import annotations

import time
import uuid

from broker.config import parse_listeners
from broker.dispatch import handler
from controller.api import base64_to_uuid
from protocol.messages import DescribeQuorumResponse as R
from storage.meta_properties import metadata_log_dir, read_meta

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
LEADER_EPOCH = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_OR_PARTITION_MESSAGE = "This server does not host this topic-partition."
NO_DIRECTORY_ID = uuid.UUID(int=0)


def _names_the_metadata_partition(req) -> bool:
    topics = req.topics or []
    return (len(topics) == 1 and topics[0].topic_name == METADATA_TOPIC
            and len(topics[0].partitions or []) == 1
            and topics[0].partitions[0].partition_index == METADATA_PARTITION)


def _unknown_partitions(req) -> R:
    return R(error_code=0, topics=[
        R.TopicData(topic_name=t.topic_name, partitions=[
            R.PartitionData(partition_index=p.partition_index, error_code=UNKNOWN_TOPIC_OR_PARTITION,
                            error_message=UNKNOWN_TOPIC_OR_PARTITION_MESSAGE)
            for p in t.partitions or []])
        for t in req.topics or []])


def metadata_directory_id(cfg) -> uuid.UUID:
    """The ``directory.id`` of the metadata directory's meta.properties, zero when there is none."""
    try:
        props = read_meta(metadata_log_dir(cfg)) or {}
        raw = props.get("directory.id")
        return base64_to_uuid(raw) if raw else NO_DIRECTORY_ID
    except (OSError, ValueError):
        return NO_DIRECTORY_ID


def controller_endpoints(cfg) -> list[tuple[str, str, int]]:
    """[(listener name, host, port)] this node's controller is reached at, from the configuration."""
    names = cfg.controller_listener_names()
    if not names:
        return []
    mine = cfg.quorum_voters().get(cfg.broker_id)
    if mine is not None:
        host, port = mine
        return [(names[0], host.strip("[]") or "localhost", port)]
    proto = cfg.security_protocol_map()
    advertised = {e.listener_name: e for e in parse_listeners(cfg.get("advertised.listeners"), proto,
                                                               "advertised.listeners")}
    bound = {e.listener_name: e for e in parse_listeners(cfg.get("listeners"), proto)}
    for name in names:
        e = advertised.get(name) or bound.get(name)
        if e is not None:
            return [(name, e.host or "localhost", e.port)]
    return []


@handler(55, 0, 2)
async def describe_quorum(ctx, req):
    if not _names_the_metadata_partition(req):
        return _unknown_partitions(req)
    cfg = ctx.broker.config
    node = ctx.broker.broker_id
    offset = ctx.broker.controller.metadata_offset()
    now = int(time.time() * 1000)
    me = R.ReplicaState(replica_id=node, replica_directory_id=metadata_directory_id(cfg), log_end_offset=offset,
                        last_fetch_timestamp=now, last_caught_up_timestamp=now)
    resp = R(error_code=0, topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[
        R.PartitionData(partition_index=METADATA_PARTITION, error_code=0, leader_id=node,
                        leader_epoch=LEADER_EPOCH, high_watermark=offset, current_voters=[me], observers=[])])])
    endpoints = controller_endpoints(cfg)
    if endpoints:
        resp.nodes = [R.Node(node_id=node, listeners=[R.Listener(name=n, host=h, port=p)
                                                      for n, h, p in endpoints])]
    return resp

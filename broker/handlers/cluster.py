"""DescribeCluster (key 60) v0-1, DescribeLogDirs (key 35) v0-4, AlterReplicaLogDirs (key 34) v0-2.

DescribeCluster
    Always flexible.  Brokers are listed with their endpoint on the listener the request
    came in on.  v1 adds ``endpoint_type``: only 1 (brokers) is served here; 2 (controllers)
    is UNSUPPORTED_ENDPOINT_TYPE, as on a ZooKeeper-mode broker.  Cluster authorized
    operations are computed only when asked; with no authorizer every cluster operation is
    allowed (Kafka's answer without an authorizer), otherwise INT_MIN.

DescribeLogDirs
    Null ``topics`` describes every partition; otherwise only the partitions named (a topic
    without any of them is left out).  Every log dir is listed, an offline one with
    KAFKA_STORAGE_ERROR.  A replica moving to another dir is listed there a second time with
    ``is_future_key`` and, as offset lag, how far its copy is behind (Kafka's answer); current
    replicas have lag 0.  v2+ flexible; v3+ a top-level error code; v4+ total and usable bytes
    of the dir's file system.

AlterReplicaLogDirs
    Moves replicas between this broker's log dirs (broker/log_dir_mover.py).  Per partition:
    LOG_DIR_NOT_FOUND for a path that is not one of ``log.dirs`` (compared as given, like
    Kafka), KAFKA_STORAGE_ERROR for an offline dir, REPLICA_NOT_AVAILABLE for a replica not
    hosted here (its log will be created in that dir), INVALID_TOPIC_EXCEPTION for a name too
    long for a ``-future`` directory, otherwise NONE once the move has started (or when the
    replica is there already).  A partition named under two dirs goes to the last one, as in
    Kafka's map.  ALTER on the cluster is checked in broker/security/enforce.py.
"""
from __future__ import annotations

import os

from broker.dispatch import handler
from broker.endpoints import on_listener
from protocol.errors import ErrorCode as E
from protocol.messages import (AlterReplicaLogDirsResponse, DescribeClusterResponse,
                               DescribeLogDirsResponse)

INT_MIN = -2147483648
ENDPOINT_BROKERS = 1

# AclOperation codes a CLUSTER resource supports: CREATE(5) ALTER(7) DESCRIBE(8)
# CLUSTER_ACTION(9) DESCRIBE_CONFIGS(10) ALTER_CONFIGS(11) IDEMPOTENT_WRITE(12).
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
# a topic's (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS): what
# Kafka reports as a topic's authorized operations when no authorizer is configured
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


@handler(60, 0, 2)
async def describe_cluster(ctx, req):
    """v2 (KIP-1073) asks whether to include fenced brokers and marks each broker fenced or not:
    a broker here is registered and serving, or not listed at all, so none is ever fenced."""
    R = DescribeClusterResponse
    broker = ctx.broker
    ctrl = broker.controller
    v = ctx.api_version
    endpoint_type = req.endpoint_type if v >= 1 else ENDPOINT_BROKERS
    if endpoint_type != ENDPOINT_BROKERS:
        return R(throttle_time_ms=0, error_code=E.UNSUPPORTED_ENDPOINT_TYPE,
                 error_message="The request was sent to an endpoint of type BROKER, but we "
                               "wanted an endpoint of type CONTROLLER",
                 endpoint_type=endpoint_type, cluster_id=ctrl.cluster_id, controller_id=-1,
                 brokers=[], cluster_authorized_operations=INT_MIN)
    listener = ctx.connection.listener_name
    brokers = [R.DescribeClusterBroker(broker_id=b.id, host=host, port=port, rack=b.rack, is_fenced=False)
               for b, host, port in on_listener(ctx.broker, listener)]
    ops = CLUSTER_OPERATIONS if req.include_cluster_authorized_operations else INT_MIN
    return R(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=endpoint_type,
             cluster_id=ctrl.cluster_id, controller_id=ctrl.controller_id, brokers=brokers,
             cluster_authorized_operations=ops)


def _volume_bytes(path: str) -> tuple[int, int]:
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


@handler(35, 0, 4)
async def describe_log_dirs(ctx, req):
    R = DescribeLogDirsResponse
    lm = ctx.broker.log_manager
    wanted = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    sizes = lm.dir_sizes()
    futures = lm.future_dir_sizes()
    results = []
    for d in lm.log_dirs:
        path = os.path.abspath(d)
        total, usable = _volume_bytes(path)
        if d in lm.offline_dirs:
            results.append(R.DescribeLogDirsResult(error_code=E.KAFKA_STORAGE_ERROR, log_dir=path,
                                                   topics=[], total_bytes=-1, usable_bytes=-1))
            continue
        by_topic: dict[str, list] = {}
        entries = [(tp, size, 0, False) for tp, size in sizes.get(d, {}).items()]
        entries += [(tp, size, lag, True) for tp, (size, lag) in futures.get(d, {}).items()]
        for (topic, partition), size, lag, future in sorted(entries):
            if wanted is not None and (topic, partition) not in wanted:
                continue
            by_topic.setdefault(topic, []).append(R.DescribeLogDirsPartition(
                partition_index=partition, partition_size=size, offset_lag=lag,
                is_future_key=future))
        topics = [R.DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
        results.append(R.DescribeLogDirsResult(error_code=0, log_dir=path, topics=topics,
                                               total_bytes=total, usable_bytes=usable))
    return R(throttle_time_ms=0, error_code=0, results=results)


@handler(34, 0, 2)
async def alter_replica_log_dirs(ctx, req):
    R = AlterReplicaLogDirsResponse
    wanted: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted[(t.name, p)] = d.path        # a later dir wins, as in Kafka's map
    mover = ctx.broker.log_dir_mover
    by_topic: dict[str, list] = {}
    for (topic, p), path in wanted.items():
        code = mover.alter(topic, p, path)
        by_topic.setdefault(topic, []).append(R.AlterReplicaLogDirPartitionResult(
            partition_index=p, error_code=code))
    return R(throttle_time_ms=0, results=[
        R.AlterReplicaLogDirTopicResult(topic_name=t, partitions=ps) for t, ps in by_topic.items()])

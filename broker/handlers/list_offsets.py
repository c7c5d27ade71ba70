"""ListOffsets (key 2), v0-11.

v0: ``max_num_offsets`` and an ``old_style_offsets`` array.  v1+: one (timestamp, offset).
v2+ isolation level (latest = last stable offset for read_committed).  v4+ current leader epoch
checks and the leader epoch of the answer.  v6+ flexible.  v7+ max timestamp (-3).  v8+
earliest local (-4).  v9+ latest tiered (-5).  v10 (Kafka 4.0, KIP-1075) a timeout for reads from
remote storage, which there is none of here.  v11 (Kafka 4.2, KIP-1023) earliest pending upload
(-6).  Without tiered storage Kafka answers -5 and -6 with offset -1 and leader epoch -1.

Consumers (replica id -1) see up to the high watermark: "latest" is the high watermark, which on a
caught-up partition is the log end offset.  A timestamp past every record answers offset -1.
Other replica ids (a broker, or -2, the debugging replica) see up to the log end offset, as in
Kafka, and -2 is answered by any replica of the partition, not only its leader.
"""
from __future__ import annotations

from broker.dispatch import handler
from broker.handlers.duplicates import repeated_partitions
from broker.replica import not_leader_error
from protocol.errors import ErrorCode as E
from protocol.messages import ListOffsetsResponse

R = ListOffsetsResponse
EARLIEST, LATEST, MAX_TS, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -2, -1, -3, -4, -5, -6
CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID = -1, -2
# the special (negative) timestamps and the first version that has each
SPECIAL_SINCE = {EARLIEST: 1, LATEST: 1, MAX_TS: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                 EARLIEST_PENDING_UPLOAD: 11}



@handler(2, 0, 11)
async def list_offsets(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    topics = []
    dups = repeated_partitions(req.topics, "name", "partitions", "partition_index") if v >= 1 else ()
    for t in req.topics:
        out = []
        info = broker.controller.topic(t.name)
        for p in t.partitions:
            r = R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0,
                                               timestamp=-1, offset=-1, leader_epoch=-1)
            out.append(r)
            if dups and (t.name, p.partition_index) in dups:
                r.error_code = E.INVALID_REQUEST     # v1+: every entry of a partition named twice
                continue
            if v >= 1 and p.timestamp < 0 and SPECIAL_SINCE.get(p.timestamp, v + 1) > v:
                r.error_code = E.UNSUPPORTED_VERSION  # a special timestamp this version lacks
                continue
            part = broker.replicas.get(t.name, p.partition_index)
            if info is None or p.partition_index not in info.partitions:
                r.error_code = E.UNKNOWN_TOPIC_OR_PARTITION
                continue
            # the debugging replica id (-2) may ask any replica, as in Kafka; others only the leader
            if part is None or part.log is None or part.offline or \
                    not part.is_leader and req.replica_id != DEBUGGING_REPLICA_ID:
                r.error_code = not_leader_error(part)
                continue
            if v >= 4:
                r.error_code = part.check_leader_epoch(p.current_leader_epoch)
                if r.error_code:
                    continue
            lg = part.log
            ts = p.timestamp
            if req.replica_id != CONSUMER_REPLICA_ID:     # Kafka applies no isolation to replicas
                upper = lg.log_end_offset
            elif req.isolation_level == 1:
                upper = lg.last_stable_offset()
            else:
                upper = part.high_watermark
            if ts == LATEST:
                found = (-1, upper)
            elif ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):   # no tiered storage: -1, epoch -1
                found = None
            elif ts in (EARLIEST, EARLIEST_LOCAL):
                found = (-1, lg.log_start_offset)
            else:
                found = lg.offset_for_timestamp(ts)
                if found is not None and found[1] >= upper:
                    found = None
            if v == 0:
                offsets = [] if found is None else [found[1]]
                if ts == LATEST and lg.log_start_offset not in offsets and p.max_num_offsets > 1:
                    offsets.append(lg.log_start_offset)
                r.old_style_offsets = offsets[:max(p.max_num_offsets, 0)]
                continue
            if found is None:
                r.timestamp, r.offset = -1, -1
                continue
            r.timestamp, r.offset = found
            if v >= 4:
                if ts == LATEST:
                    r.leader_epoch = part.leader_epoch
                elif ts == MAX_TS:             # as Kafka: the epoch on the batch itself
                    r.leader_epoch = lg.batch_leader_epoch(r.offset)
                else:
                    r.leader_epoch = lg.epoch_cache.epoch_for_offset(r.offset)
        topics.append(R.ListOffsetsTopicResponse(name=t.name, partitions=out))
    return R(throttle_time_ms=0, topics=topics)

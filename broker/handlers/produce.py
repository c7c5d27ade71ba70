"""Produce (key 0), v0-13.

v0-2 carry legacy message sets (magic 0/1); they are up-converted to v2 batches on append, as a
3.x broker does.  v3+ add the transactional id and must carry exactly one v2 batch per partition.
v7+ may use zstd (older versions: UNSUPPORTED_COMPRESSION_TYPE).  v8+ record errors and an error
message.  v9+ flexible.  v10-11 add KIP-951 leader hints (a NOT_LEADER_OR_FOLLOWER partition
carries its current leader, the answer that leader's endpoint: ``leader_hints.py``) and
TRANSACTION_ABORTABLE.  v12 (Kafka 4.0) is v11's layout for a client that speaks transaction
version 2 (KIP-890 part 2, once ``transaction.version`` 2 is finalized): a transactional batch for
a partition not yet in its transaction has the coordinator add it (``txn/markers.check_produce``).
v13 (Kafka 4.1) names topics by id: an id of no topic is UNKNOWN_TOPIC_ID.

The records of each partition stay a memoryview into the received frame: offsets and the leader
epoch are patched into it in place and it is written to the log as is (storage/log.py).  A topic
whose ``compression.type`` names a codec has batches in other codecs rewritten in it first, in a
worker thread (``Log.recompress``).
acks=0 gets no response at all (when a partition fails, the connection is closed, as Kafka
does); acks=-1 waits for the ISR (on one broker: this broker).
"""
from __future__ import annotations

import asyncio
import logging

from broker.dispatch import handler
from broker.handlers.duplicates import by_partition
from broker.handlers.leader_hints import PRODUCE_HINTED, add_hints
from broker.handlers.topic_ids import name_topics
from broker.replica import effective_min_isr, not_leader_error
from broker.txn.markers import check_produce, is_transactional_batch
from protocol import records as rec
from protocol.errors import ErrorCode as E
from protocol.messages import ProduceResponse
from protocol.primitives import UUID0
from storage import errors as se

log = logging.getLogger("odradek.produce")
R = ProduceResponse

_ERRORS = (
    (rec.CorruptRecordError, E.CORRUPT_MESSAGE),
    (se.RecordTooLargeError, E.MESSAGE_TOO_LARGE),
    (se.InvalidTimestampError, E.INVALID_TIMESTAMP),
    (se.OutOfOrderSequenceError, E.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (se.InvalidProducerEpochError, E.INVALID_PRODUCER_EPOCH),
    (se.UnknownProducerIdError, E.UNKNOWN_PRODUCER_ID),
    (se.InvalidTxnStateError, E.INVALID_TXN_STATE),
    (rec.InvalidRecordError, E.INVALID_RECORD),
    (se.StorageError, E.KAFKA_STORAGE_ERROR),
    (OSError, E.KAFKA_STORAGE_ERROR),
)


def _error_code(exc) -> int:
    for cls, code in _ERRORS:
        if isinstance(exc, cls):
            return code
    return E.UNKNOWN_SERVER_ERROR


def _prepare(records, version):
    """Check the shape of a partition's records; up-convert legacy message sets (as CreateTime,
    with their own timestamps: on a LogAppendTime topic the append stamps the batch, as it
    does a v2 producer's).

    Returns the buffer to append (a writable memoryview or bytearray)."""
    if records is None or len(records) == 0:
        raise rec.InvalidRecordError("produce request without records")
    if len(records) <= rec.MAGIC_OFFSET:
        raise rec.CorruptRecordError("records shorter than a batch header")
    magic = records[rec.MAGIC_OFFSET]
    if magic < 2:
        if version >= 3:
            raise rec.InvalidRecordError("produce v3+ must carry v2 record batches")
        return rec.legacy_to_v2(records)
    if magic != 2:
        raise rec.tagged(rec.CorruptRecordError(f"unknown magic {magic}"), "invalid_magic_number")
    if version >= 3:
        h = rec.read_header(records, 0)
        if h.batch_length < rec.BATCH_OVERHEAD - rec.LOG_OVERHEAD:
            raise rec.CorruptRecordError(f"batch length {h.batch_length} is below the minimum")
        if h.size != len(records):
            raise rec.InvalidRecordError("produce v3+ must carry exactly one record batch")
        if h.compression == 4 and version < 7:
            raise _Unsupported()
    else:
        # v0-2 may carry a v2 batch (Kafka does not check the magic there), but only one: its
        # LogValidator refuses more ("Compressed outer record has more than one batch")
        headers = list(rec.iter_batches(records))
        if len(headers) > 1:
            raise rec.InvalidRecordError("a produce request may carry one v2 record batch per partition")
        if any(h.compression == 4 for h in headers):
            raise _Unsupported()
    return records


_SAME = object()


def _cannot_append(part, acks, current=_SAME) -> int:
    """The error that keeps a produce from appending to ``part`` now, or 0: this broker does not
    lead it (``current``: the replica hosted now, None if none, when it may have changed since
    ``part`` was looked up), or acks=all finds the ISR below ``min.insync.replicas``."""
    if current is not _SAME and current is not part:
        return not_leader_error(current)
    if part is None or not part.is_leader:
        return not_leader_error(part)
    if acks == -1 and len(part.isr) < effective_min_isr(part):
        return E.NOT_ENOUGH_REPLICAS
    return 0


class _Unsupported(Exception):
    pass


@handler(0, 0, 13)
async def produce(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    acks = req.acks
    replicas = broker.replicas
    metrics = broker.metrics
    ctrl = broker.controller
    responses = []
    waits = []
    if v >= 13:
        name_topics(ctrl, req.topic_data)
    for topic in _distinct_partitions(req.topic_data, v):
        out_parts = []
        info = ctrl.topic(topic.name) if topic.name else None
        missing = E.UNKNOWN_TOPIC_ID if v >= 13 and info is None else E.UNKNOWN_TOPIC_OR_PARTITION
        for pd in topic.partition_data:
            resp = R.PartitionProduceResponse(index=pd.index, error_code=0, base_offset=-1,
                                              log_append_time_ms=-1, log_start_offset=-1)
            out_parts.append(resp)
            if acks not in (-1, 0, 1):
                resp.error_code = E.INVALID_REQUIRED_ACKS
                continue
            if info is None or pd.index not in info.partitions:
                resp.error_code = missing
                continue
            if info.internal and topic.name in ("__consumer_offsets", "__transaction_state"):
                resp.error_code = E.INVALID_TOPIC_EXCEPTION
                continue
            part = replicas.get(topic.name, pd.index)
            resp.error_code = _cannot_append(part, acks)
            if resp.error_code:
                continue
            lg = part.log
            try:
                buf = _prepare(pd.records, v)
                converted = buf is not pd.records       # legacy messages made one v2 batch
                checked_under = None
                if lg.needs_recompression(buf):
                    converted = True
                    # compression.type: checking and compressing (gzip: tens of ms a MB) off the
                    # event loop.  This connection's next request waits; the partition may change
                    # hands, or its config change, meanwhile (append then checks again).
                    buf, checked_under = await asyncio.get_running_loop().run_in_executor(None, lg.recompress, buf)
                    resp.error_code = _cannot_append(part, acks, replicas.get(topic.name, pd.index))
                    if resp.error_code:
                        continue
                    lg = part.log
                if v >= 3 and is_transactional_batch(buf):
                    # KIP-890: is this partition in the producer's transaction? (broker/txn/markers.py)
                    # It guards against a marker landing while it waits; nothing else may be
                    # awaited between it and the append.
                    code = await check_produce(broker, req.transactional_id, topic.name, pd.index, part, buf, v)
                    if code:
                        resp.error_code = code
                        continue
                res = lg.append(buf, part.leader_epoch, transaction_version=2 if v >= 12 else 0,
                                checked_under=checked_under)
            except _Unsupported:
                resp.error_code = E.UNSUPPORTED_COMPRESSION_TYPE
                continue
            except Exception as exc:   # mapped to Kafka's error for the partition
                code = _error_code(exc)
                resp.error_code = code
                if metrics is not None:
                    metrics.invalid(exc)
                if v >= 8:
                    resp.error_message = str(exc)
                    resp.record_errors = [R.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                          for i, m in getattr(exc, "record_errors", ())]
                if code == E.UNKNOWN_SERVER_ERROR:
                    log.exception("append to %s-%d failed", topic.name, pd.index)
                elif code == E.KAFKA_STORAGE_ERROR:
                    log.error("append to %s-%d failed: %s", topic.name, pd.index, exc)
                    broker.log_manager.report_error((topic.name, pd.index), exc)
                continue
            resp.base_offset = res.first_offset
            resp.log_append_time_ms = res.log_append_time
            resp.log_start_offset = res.log_start_offset
            if metrics is not None:
                metrics.produced(topic.name, len(pd.records), res.last_offset - res.first_offset + 1)
                if converted and not res.duplicate:
                    metrics.produce_converted(topic.name, res.last_offset - res.first_offset + 1)
            if not res.duplicate:
                part.after_append()
            if acks == -1:
                waits.append((part, res.last_offset + 1, resp, part.leader_epoch))
        responses.append(R.TopicProduceResponse(name=topic.name, topic_id=topic.topic_id,
                                                partition_responses=out_parts))
    if metrics is not None:
        metrics.produce_request(req, responses)
    quota = broker.produce_quota
    throttle_ms = quota.on_produce(ctx, req) if quota is not None else 0    # broker/client_quota.py
    if acks == 0:
        failed = [(t.name, pr.index, pr.error_code) for t in responses
                  for pr in t.partition_responses if pr.error_code]
        if failed:
            # Kafka closes the connection when an acks=0 produce fails, so the producer
            # notices (it has no response to read) and refreshes its metadata.
            log.info("closing connection from %s after a failed acks=0 produce: %s",
                     ctx.client_host, ", ".join(f"{t}-{p}: {E(c).name}" for t, p, c in failed))
            ctx.connection.close()
        return None
    if waits:
        await _await_isr(waits, req.timeout_ms)
    resp = R(responses=responses, throttle_time_ms=throttle_ms)
    if v >= 10 and any(p.error_code == E.NOT_LEADER_OR_FOLLOWER for t in responses for p in t.partition_responses):
        add_hints(ctx, resp, ((t.name, p.index, p) for t in responses for p in t.partition_responses),
                  PRODUCE_HINTED)
    return resp


def _distinct_partitions(topic_data, version):
    """The request's topics with each partition once (broker/handlers/duplicates.py); a topic
    is its id from v13."""
    key = "topic_id" if version >= 13 else "name"
    merged = by_partition(topic_data, key, "partition_data", "index")
    if merged is None:
        return topic_data
    cls = type(topic_data[0])
    names = {getattr(t, key): t.name for t in topic_data}
    return [cls(name=names[k], topic_id=k if version >= 13 else UUID0, partition_data=pds)
            for k, pds in merged]


async def _await_isr(waits, timeout_ms):
    """acks=all: wait until each partition's high watermark covers its append."""
    deadline = asyncio.get_running_loop().time() + max(timeout_ms, 0) / 1000
    for part, needed, resp, epoch in waits:
        code = await part.wait_for_high_watermark(needed, epoch, deadline)
        if code:
            resp.error_code = code

"""Transaction APIs, served by the transaction coordinator (``ctx.broker.txns``) and, for
TxnOffsetCommit, the group coordinator.

Versions served (Kafka 3.9's ranges, and Kafka 4.x's transaction version 2, KIP-890 part 2):

* AddPartitionsToTxn (24) v0-5: v2 PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH);
  v3+ flexible; v4 several transactions per request, top-level error, ``verify_only`` (brokers
  checking a produce; answered per partition, TRANSACTION_ABORTABLE if not in the transaction);
  v5 (KIP-890 part 1) says the sender knows TRANSACTION_ABORTABLE, answered as v4.
  A partition of an unknown topic fails with UNKNOWN_TOPIC_OR_PARTITION and the rest of that
  transaction with OPERATION_NOT_ATTEMPTED; nothing is added.
* AddOffsetsToTxn (25) v0-4: adds the group's ``__consumer_offsets`` partition.
* EndTxn (26) v0-5.
  v4 of both (KIP-890 part 1) only says the client knows TRANSACTION_ABORTABLE; a Kafka 3.9
  coordinator never answers it to them, so v4 is answered as v3.  v5 (transaction version 2):
  the coordinator bumps the epoch and the answer carries the producer id and epoch to use next.
* WriteTxnMarkers (27) v0-2: from a transaction coordinator to a partition leader; v2 carries
  the transaction's version (2: the marker's epoch must be above the open transaction's).
* TxnOffsetCommit (28) v0-5: v2 leader epochs; v3 member id, generation, group instance id;
  v4 (KIP-890 part 1): the group's offsets partition found outside the transaction is answered
  TRANSACTION_ABORTABLE, as Produce v11 is (INVALID_TXN_STATE below v4); v5 (transaction
  version 2): the partition is added to the transaction here, as Produce v12 adds its own.
* DescribeTransactions (65) v0, ListTransactions (66) v0-1 (v1: duration filter).

PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH to AddPartitionsToTxn/AddOffsetsToTxn/EndTxn
below v2 and to InitProducerId below v4 (clients that predate it), as Kafka does.
"""
from __future__ import annotations

import logging
import re

from broker.dispatch import handler
from broker.group.group import OffsetAndMetadata
from broker.group.hashing import partition_for
from broker.txn.markers import GROUP_TOPIC, add_to_transaction, verify_in_transaction, write_markers
from protocol.errors import ErrorCode as E
from protocol.messages import (AddOffsetsToTxnResponse, AddPartitionsToTxnResponse,
                               DescribeTransactionsResponse, EndTxnResponse, ListTransactionsResponse,
                               TxnOffsetCommitResponse, WriteTxnMarkersResponse)

log = logging.getLogger("odradek.txn")


def _txns(ctx):
    return getattr(ctx.broker, "txns", None)


def _fenced(err: int, version: int, first_version: int = 2) -> int:
    return E.INVALID_PRODUCER_EPOCH if err == E.PRODUCER_FENCED and version < first_version else err


# ====================================================================== AddPartitionsToTxn
async def _add_one(ctx, tid, pid, epoch, topics, verify_only, version):
    """{(topic, partition): error} for one transaction of the request."""
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    coord = _txns(ctx)
    if coord is None:
        return {tp: E.COORDINATOR_NOT_AVAILABLE for tp in wanted}
    if verify_only:
        return coord.verify_partitions(tid, pid, epoch, wanted)
    # a broker that is not the coordinator says so before judging the topics: a restarted broker
    # without metadata yet would call every topic unknown (an abortable error for the producer)
    err = coord.coordinator_error(tid)
    if err:
        return {tp: _fenced(err, version) for tp in wanted}
    ctrl = ctx.broker.controller
    unknown = set()
    for t, p in wanted:
        info = ctrl.topic(t)
        if info is None or p not in info.partitions:
            unknown.add((t, p))
    if unknown:
        return {tp: (E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED)
                for tp in wanted}
    # v4+ comes from a partition leader adding a partition implicitly (transaction version 2)
    err = await coord.add_partitions(tid, pid, epoch, wanted, 2 if version >= 4 else 0)
    return {tp: _fenced(err, version) for tp in wanted}


def _topic_results(results: dict):
    R = AddPartitionsToTxnResponse
    by_topic: dict[str, list] = {}
    for (t, p), err in results.items():
        by_topic.setdefault(t, []).append(R.AddPartitionsToTxnPartitionResult(partition_index=p,
                                                                             partition_error_code=err))
    return [R.AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()]


@handler(24, 0, 5)
async def add_partitions_to_txn(ctx, req):
    v = ctx.api_version
    R = AddPartitionsToTxnResponse
    if v < 4:
        res = await _add_one(ctx, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                             req.v3_and_below_producer_epoch, req.v3_and_below_topics, False, v)
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(res))
    out = []
    for txn in req.transactions:
        res = await _add_one(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                             txn.verify_only, v)
        out.append(R.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                              topic_results=_topic_results(res)))
    return R(throttle_time_ms=0, error_code=0, results_by_transaction=out)


# ====================================================================== AddOffsetsToTxn
@handler(25, 0, 4)
async def add_offsets_to_txn(ctx, req):
    coord = _txns(ctx)
    if coord is None:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=E.COORDINATOR_NOT_AVAILABLE)
    groups = getattr(ctx.broker, "groups", None)
    num = groups.num_partitions if groups is not None else ctx.broker.config.get("offsets.topic.num.partitions")
    if groups is not None and hasattr(groups.log, "ensure_created"):
        try:
            await groups.log.ensure_created()
        except Exception as e:
            log.info("cannot create %s yet: %r", GROUP_TOPIC, e)
            return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=E.COORDINATOR_NOT_AVAILABLE)
    tp = (GROUP_TOPIC, partition_for(req.group_id, num))
    err = await coord.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch, [tp])
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_fenced(err, ctx.api_version))


# ====================================================================== EndTxn
@handler(26, 0, 5)
async def end_txn(ctx, req):
    coord = _txns(ctx)
    if coord is None:
        return EndTxnResponse(throttle_time_ms=0, error_code=E.COORDINATOR_NOT_AVAILABLE)
    err, pid, epoch = await coord.end_transaction(req.transactional_id, req.producer_id, req.producer_epoch,
                                                  req.committed, tv2=ctx.api_version >= 5)
    return EndTxnResponse(throttle_time_ms=0, error_code=_fenced(err, ctx.api_version), producer_id=pid,
                          producer_epoch=epoch)


# ====================================================================== WriteTxnMarkers
@handler(27, 0, 2)
async def write_txn_markers(ctx, req):
    R = WriteTxnMarkersResponse
    out = []
    for m in req.markers:
        tps = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        res = await write_markers(ctx.broker, m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                  m.transaction_result, tps, m.transaction_version if ctx.api_version >= 2 else 0)
        by_topic: dict[str, list] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(R.WritableTxnMarkerPartitionResult(
                partition_index=p, error_code=res.get((t, p), E.UNKNOWN_SERVER_ERROR)))
        out.append(R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            R.WritableTxnMarkerTopicResult(name=t, partitions=ps) for t, ps in by_topic.items()]))
    return R(markers=out)


# ====================================================================== TxnOffsetCommit
@handler(28, 0, 5)
async def txn_offset_commit(ctx, req):
    v = ctx.api_version
    R = TxnOffsetCommitResponse
    groups = getattr(ctx.broker, "groups", None)
    now = groups.timers.now_ms() if groups is not None else 0
    results: dict = {}
    order = []
    offsets = {}
    ctrl = ctx.broker.controller
    for t in req.topics:
        info = ctrl.topic(t.name)
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if info is None or p.partition_index not in info.partitions:
                results[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch if v >= 2 else -1,
                                            p.committed_metadata or "", now, -1)
    if offsets:
        if groups is None:
            results.update({tp: E.COORDINATOR_NOT_AVAILABLE for tp in offsets})
        else:
            err = await _verify_offsets_partition(ctx, req, groups)
            if err:
                results.update({tp: err for tp in offsets})
            else:
                results.update(await groups.commit_txn_offsets(
                    req.group_id, req.producer_id, req.producer_epoch, req.member_id if v >= 3 else "",
                    req.group_instance_id if v >= 3 else None, req.generation_id if v >= 3 else -1, offsets))
    topics: dict[str, list] = {}
    for tp in dict.fromkeys(order):
        topics.setdefault(tp[0], []).append(R.TxnOffsetCommitResponsePartition(
            partition_index=tp[1], error_code=results.get(tp, E.UNKNOWN_SERVER_ERROR)))
    return R(throttle_time_ms=0, topics=[R.TxnOffsetCommitResponseTopic(name=n, partitions=ps)
                                         for n, ps in topics.items()])


async def _verify_offsets_partition(ctx, req, groups) -> int:
    """Kafka 3.9 verifies that the group's offsets partition is in the transaction before writing;
    under transaction version 2 (v5) it adds it, whether verification is enabled or not."""
    add = ctx.api_version >= 5
    if not req.group_id or not (add or ctx.broker.config.get("transaction.partition.verification.enable")):
        return E.NONE
    tp = (GROUP_TOPIC, groups.partition_for(req.group_id))
    if not groups._owns(tp[1]):
        return E.NOT_COORDINATOR
    if add:
        err = await add_to_transaction(ctx.broker, req.transactional_id, req.producer_id, req.producer_epoch, tp)
        if err == E.PRODUCER_FENCED:
            return E.INVALID_PRODUCER_EPOCH
        if err == E.NETWORK_EXCEPTION:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if err in (E.NOT_ENOUGH_REPLICAS, E.UNKNOWN_TOPIC_OR_PARTITION, E.REQUEST_TIMED_OUT):
            return E.COORDINATOR_NOT_AVAILABLE
        return err          # CONCURRENT_TRANSACTIONS and the coordinator errors: the client retries
    err = await verify_in_transaction(ctx.broker, req.transactional_id, req.producer_id, req.producer_epoch, tp)
    if err == E.TRANSACTION_ABORTABLE and ctx.api_version < 4:
        return E.INVALID_TXN_STATE      # clients before KIP-890 do not know TRANSACTION_ABORTABLE
    if err == E.PRODUCER_FENCED:
        return E.INVALID_PRODUCER_EPOCH
    if err in (E.CONCURRENT_TRANSACTIONS, E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS,
               E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR):
        return E.COORDINATOR_LOAD_IN_PROGRESS      # retriable for every TxnOffsetCommit client
    return err


# ====================================================================== DescribeTransactions / ListTransactions
@handler(65, 0, 0)
async def describe_transactions(ctx, req):
    R = DescribeTransactionsResponse
    coord = _txns(ctx)
    out = []
    for tid in req.transactional_ids:
        if coord is None:
            err, meta = E.COORDINATOR_NOT_AVAILABLE, None
        else:
            err, meta = coord.describe(tid)
        if err:
            out.append(R.TransactionState(error_code=err, transactional_id=tid, transaction_state="",
                                          transaction_timeout_ms=0, transaction_start_time_ms=-1,
                                          producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        out.append(R.TransactionState(
            error_code=0, transactional_id=tid, transaction_state=meta.state.display,
            transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
            producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
            topics=[R.TopicData(topic=t, partitions=ps) for t, ps in meta.topics().items()]))
    return R(throttle_time_ms=0, transaction_states=out)


@handler(66, 0, 2)
async def list_transactions(ctx, req):
    """From v2 (KIP-1152) a TransactionalIdPattern keeps the ids that it matches whole (Java's
    ``Matcher.matches``; Python's ``re`` reads the patterns people write the same way); one that
    does not compile is INVALID_REGULAR_EXPRESSION, as Kafka answers."""
    R = ListTransactionsResponse
    coord = _txns(ctx)
    if coord is None:
        return R(throttle_time_ms=0, error_code=E.COORDINATOR_NOT_AVAILABLE)
    pattern = req.transactional_id_pattern if ctx.api_version >= 2 else None
    if pattern:
        try:
            pattern = re.compile(pattern)
        except re.error:
            return R(throttle_time_ms=0, error_code=E.INVALID_REGULAR_EXPRESSION)
    err, unknown, metas = coord.list_transactions(req.state_filters, req.producer_id_filters,
                                                  req.duration_filter if ctx.api_version >= 1 else -1)
    if pattern:
        metas = [m for m in metas if pattern.fullmatch(m.transactional_id)]
    return R(throttle_time_ms=0, error_code=err, unknown_state_filters=unknown, transaction_states=[
        R.TransactionState(transactional_id=m.transactional_id, producer_id=m.producer_id,
                           transaction_state=m.state.display) for m in metas])

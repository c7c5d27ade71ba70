"""kafka-transactions.sh: Kafka's TransactionsCommand (KIP-664) — list and describe transactions,
describe a partition's active producers, abort a hanging transaction, find hanging transactions.

Kafka's tool is built on argparse4j, not joptsimple: global options (``--bootstrap-server``,
``--command-config``) come before the sub-command, and usage errors print the usage line and
``kafka-transactions.sh: error: <reason>`` (status 1).  Runtime failures print Kafka's
``<context>: <cause>. Enable debug logging for additional detail.`` on stderr (status 1).
Tables are Kafka's ``prettyPrintTable``: every cell padded to its column and followed by a tab.
"""
from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time

from protocol.client import KafkaConnectionError
from protocol.errors import ErrorCode as E, KafkaError, error_message
from protocol.messages import (DescribeProducersRequest, DescribeTransactionsRequest,
                               ListTransactionsRequest, WriteTxnMarkersRequest)
from tools.common import VERSION, ToolError, cluster_from, run_parsed

PROG = "kafka-transactions.sh"
DEBUG_HINT = " Enable debug logging for additional detail."
MAX_BATCH_SIZE = 500
RETRY_BACKOFF = 0.1
# Kafka's UnknownTopicOrPartitionException text (protocol/errors.py words it "the topic-partition")
UNKNOWN_TP = "This server does not host this topic-partition."

LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions"]
PRODUCERS_HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                     "LastTimestamp", "CurrentTransactionStartOffset"]
HANGING_HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)"]


class Failure(Exception):
    """An admin-client exception: its message is what Kafka's ``getMessage()`` would give."""


def fail(context: str, cause) -> ToolError:
    """Kafka's printErrorAndExit(message, throwable)."""
    return ToolError(f"{context}: {cause}.{DEBUG_HINT}")


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    for row in [headers, *rows]:
        print("".join(cell.ljust(widths[i]) + "\t" for i, cell in enumerate(row)))


def tp_str(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def now_ms() -> int:
    return int(time.time() * 1000)


# ============================================================================ command line
class Parser(argparse.ArgumentParser):
    """argparse with argparse4j's error line and exit status 1."""

    def error(self, message):
        m = re.match(r"the following arguments are required: ([^,]+)", message)
        if m:
            message = f"argument {m.group(1)} is required"
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(1)


def build_parser() -> Parser:
    p = Parser(prog=PROG, description="Inspects the transactions and producer state kept by the brokers, "
               "and finds and aborts transactions that were left open (hanging).")
    p.add_argument("-v", "--version", action="version", version=VERSION,
                   help="show the version (the Kafka release these tools follow, and Odradek) and exit")
    p.add_argument("--command-config", metavar="FILE",
                   help="properties file with admin client settings (security, timeouts, ...)")
    p.add_argument("--bootstrap-server", metavar="host:port", required=True,
                   help="broker address(es) to contact first, host:port[,host:port...]")
    sub = p.add_subparsers(dest="command", title="commands", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    s = sub.add_parser("list", help="print every transactional id known to the coordinators, with its state")
    s.add_argument("--duration-filter", type=int, metavar="DURATION_FILTER",
                   help="show only transactions open for longer than this many milliseconds; a negative "
                        "value shows them all")

    s = sub.add_parser("describe", help="print the coordinator's view of one transactional id",
                       description="Print what the transaction coordinator holds for one transactional id: "
                                   "producer id and epoch, state, timeout and the partitions in the transaction.")
    s.add_argument("--transactional-id", required=True, metavar="TRANSACTIONAL_ID", help="the transactional id to look up")

    s = sub.add_parser("describe-producers", help="print the producers a partition's log has state for "
                       "(ids, epochs, sequences, open transactions)")
    s.add_argument("--broker-id", type=int, metavar="BROKER_ID",
                   help="ask this replica's broker instead of the partition leader")
    s.add_argument("--topic", required=True, metavar="TOPIC", help="the topic of the partition")
    s.add_argument("--partition", type=int, required=True, metavar="PARTITION", help="the partition's number")

    s = sub.add_parser("abort", help="write an abort marker for a transaction left open on a partition "
                       "(needs cluster-level permissions)")
    s.add_argument("--topic", required=True, metavar="TOPIC", help="the topic of the partition")
    s.add_argument("--partition", type=int, required=True, metavar="PARTITION", help="the partition's number")
    g = s.add_argument_group("Brokers 3.0 and newer",
                             "The transaction is found from its first offset alone")
    g.add_argument("--start-offset", type=int, metavar="START_OFFSET", help="offset of the first record of the open transaction")
    g = s.add_argument_group("Brokers before 3.0",
                             "All three values are needed to identify the transaction")
    g.add_argument("--producer-id", type=int, metavar="PRODUCER_ID", help="id of the producer that opened it")
    g.add_argument("--producer-epoch", type=int, metavar="PRODUCER_EPOCH", help="that producer's epoch")
    g.add_argument("--coordinator-epoch", type=int, metavar="COORDINATOR_EPOCH", help="the transaction coordinator's epoch")

    s = sub.add_parser("find-hanging", help="list transactions that stayed open longer than any timeout allows")
    s.add_argument("--broker-id", type=int, metavar="BROKER_ID", help="look at the partitions this broker holds (this or --topic is required)")
    s.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MAX_TRANSACTION_TIMEOUT",
                   help="a transaction counts as hanging once it has been open this many minutes "
                        "(default: 15)")
    s.add_argument("--topic", metavar="TOPIC", help="look only at this topic's partitions (needed by --partition)")
    s.add_argument("--partition", type=int, metavar="PARTITION", help="the partition's number")
    return p


# ============================================================================ admin calls
class Admin:
    """The few admin-client operations the command needs, over ``ClusterClient``."""

    def __init__(self, client):
        self.client = client
        self.deadline = time.monotonic() + client.timeout

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    # -- leaders --------------------------------------------------------------------------
    async def leader(self, topic: str, partition: int) -> int:
        """Leader of a partition, retried while there is none (as Kafka's lookup does)."""
        tp = tp_str(topic, partition)
        while True:
            resp = await self.client.refresh_metadata([topic])
            t = next((x for x in resp.topics if x.name == topic), None)
            err = t.error_code if t is not None else E.UNKNOWN_TOPIC_OR_PARTITION
            if err == E.INVALID_TOPIC_EXCEPTION:
                raise Failure(f"Failed to fetch metadata for partition {tp} due to invalid topic error: "
                              f"{error_message(err)}")
            if err == E.TOPIC_AUTHORIZATION_FAILED:
                raise Failure(f"Failed to fetch metadata for partition {tp} due to topic authorization failure")
            if err == E.UNKNOWN_TOPIC_OR_PARTITION or (
                    err == E.NONE and not any(p.partition_index == partition for p in t.partitions)):
                # Kafka's admin client retries until default.api.timeout.ms; we answer at once
                raise Failure(UNKNOWN_TP)
            if err == E.NONE:
                leader = next(p.leader_id for p in t.partitions if p.partition_index == partition)
                if leader >= 0:
                    return leader
            elif err not in (E.LEADER_NOT_AVAILABLE, E.BROKER_NOT_AVAILABLE):
                raise Failure(error_message(err))
            if self.expired():
                raise Failure(f"Timed out waiting for the leader of partition {tp}")
            await asyncio.sleep(RETRY_BACKOFF)

    def _node(self, broker_id: int) -> int:
        if broker_id not in self.client.nodes:
            raise Failure(f"Broker {broker_id} is not in the cluster metadata")
        return broker_id

    # -- DescribeProducers ----------------------------------------------------------------
    async def describe_producers(self, partitions: list[tuple[str, int]], broker_id: int | None = None) -> dict:
        """{(topic, partition): [ProducerState]}; a failed partition raises ``Failure``."""
        out: dict = {}
        pending = list(partitions)
        while pending:
            by_node: dict[int, list] = {}
            if broker_id is not None:
                by_node[self._node(broker_id)] = list(pending)
            else:
                await self.client.refresh_metadata(sorted({t for t, _ in pending}))
                for tp in pending:
                    node = self.client.leader_for(*tp)
                    if node < 0:            # unknown or leaderless: Kafka's errors, or wait for one
                        node = await self.leader(*tp)
                    by_node.setdefault(node, []).append(tp)
            retry = []
            for node, tps in sorted(by_node.items()):
                topics: dict[str, list[int]] = {}
                for t, p in tps:
                    topics.setdefault(t, []).append(p)
                req = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(
                    name=t, partition_indexes=ps) for t, ps in topics.items()])
                resp = await self.client.send_to(node, req)
                for t in resp.topics:
                    for p in t.partitions:
                        tp = (t.name, p.partition_index)
                        if tp not in tps:
                            continue
                        if p.error_code == E.NONE:
                            out[tp] = list(p.active_producers)
                        elif p.error_code == E.NOT_LEADER_OR_FOLLOWER and broker_id is None:
                            retry.append(tp)
                        else:
                            raise Failure(self._producers_error(tp, p, broker_id))
                missing = [tp for tp in tps if tp not in out and tp not in retry]
                if missing:
                    raise Failure("DescribeProducers response did not include partition " + tp_str(*missing[0]))
            if retry:
                if self.expired():
                    raise Failure("Timed out waiting for the leaders of " +
                                  ", ".join(tp_str(*tp) for tp in retry))
                await asyncio.sleep(RETRY_BACKOFF)
            pending = retry
        return out

    @staticmethod
    def _producers_error(tp, p, broker_id) -> str:
        name = tp_str(*tp)
        code = p.error_code
        if code == E.NOT_LEADER_OR_FOLLOWER:
            return f"Failed to describe active producers for partition {name} on brokerId {broker_id}"
        if code == E.UNKNOWN_TOPIC_OR_PARTITION:
            return UNKNOWN_TP     # Kafka retries until its timeout; we answer at once
        if code == E.INVALID_TOPIC_EXCEPTION:
            return (f"Failed to fetch metadata for partition {name} due to invalid topic error: "
                    f"{p.error_message or error_message(code)}")
        if code == E.TOPIC_AUTHORIZATION_FAILED:
            return (f"Failed to describe active producers for partition {name} due to authorization "
                    f"failure on topic `{tp[0]}`")
        return f"Failed to describe active producers for partition {name} due to unexpected error"

    # -- transactions ---------------------------------------------------------------------
    async def list_transactions(self, duration_filter: int | None = None,
                                producer_ids=()) -> dict[int, list]:
        """{broker id: [TransactionState]} from every broker."""
        req = ListTransactionsRequest(state_filters=[], producer_id_filters=list(producer_ids),
                                      duration_filter=-1 if duration_filter is None else duration_filter)
        out = {}
        for node in sorted(self.client.nodes):
            while True:
                version = None
                if duration_filter is not None and duration_filter >= 0:
                    conn = await self.client.connection(node)
                    if conn.api_versions.get(66, (0, 0))[1] < 1:
                        raise Failure("The broker does not support LIST_TRANSACTIONS with version in "
                                      "range [1,1]. The supported range is [0,0].")
                    version = 1
                resp = await self.client.send_to(node, req, version=version)
                if resp.error_code == E.COORDINATOR_LOAD_IN_PROGRESS and not self.expired():
                    await asyncio.sleep(RETRY_BACKOFF)
                    continue
                if resp.error_code:
                    raise Failure(f"ListTransactions request sent to broker {node} failed: "
                                  f"{error_message(resp.error_code)}")
                out[node] = list(resp.transaction_states)
                break
        return out

    async def describe_transaction(self, tid: str):
        """(coordinator id, TransactionState); ``NotFound`` for an unknown transactional id."""
        retriable = (E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS)
        while True:
            try:
                coord = await self.client.find_coordinator(tid, key_type=1)
            except KafkaError as e:
                if e.code in retriable and not self.expired():
                    await asyncio.sleep(RETRY_BACKOFF)
                    continue
                if e.code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                    raise Failure(f"FindCoordinator request for transactionalId `{tid}` failed due to "
                                  f"authorization failure") from None
                raise Failure(error_message(e.code)) from None
            resp = await self.client.send_to(coord, DescribeTransactionsRequest(transactional_ids=[tid]))
            st = next((s for s in resp.transaction_states if s.transactional_id == tid), None)
            if st is None:
                raise Failure(f"DescribeTransactions response did not include transactionalId `{tid}`")
            err = st.error_code
            if err in retriable and not self.expired():
                await asyncio.sleep(RETRY_BACKOFF)
                continue
            if err == E.NONE:
                return coord, st
            if err == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                raise Failure(f"DescribeTransactions request for transactionalId `{tid}` failed due to "
                              f"authorization failure")
            if err == E.TRANSACTIONAL_ID_NOT_FOUND:
                raise NotFound(f"DescribeTransactions request for transactionalId `{tid}` failed because "
                               f"the ID could not be found")
            raise Failure(f"DescribeTransactions request for transactionalId `{tid}` failed due to "
                          f"unexpected error")

    # -- WriteTxnMarkers --------------------------------------------------------------------
    async def abort_transaction(self, spec: "AbortSpec") -> None:
        topic, partition = spec.topic, spec.partition
        M = WriteTxnMarkersRequest
        req = M(markers=[M.WritableTxnMarker(
            producer_id=spec.producer_id, producer_epoch=spec.producer_epoch, transaction_result=False,
            coordinator_epoch=spec.coordinator_epoch,
            topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])])])
        while True:
            leader = await self.leader(topic, partition)
            resp = await self.client.send_to(leader, req)
            markers = list(resp.markers)
            if len(markers) != 1 or markers[0].producer_id != spec.producer_id:
                raise Failure(f"WriteTxnMarkers response included unexpected marker entries: {markers}"
                              f"(expected to find exactly one entry with producerId {spec.producer_id})")
            topics = list(markers[0].topics)
            if len(topics) != 1 or topics[0].name != topic:
                raise Failure(f"WriteTxnMarkers response included unexpected topic entries: {markers}"
                              f"(expected to find exactly one entry with topic partition {spec.tp})")
            parts = list(topics[0].partitions)
            if len(parts) != 1 or parts[0].partition_index != partition:
                raise Failure(f"WriteTxnMarkers response included unexpected partition entries for topic "
                              f"{topic}: {markers}(expected to find exactly one entry with partition {partition})")
            err = parts[0].error_code
            if err == E.NONE:
                return
            if err == E.CLUSTER_AUTHORIZATION_FAILED:
                raise Failure(f"WriteTxnMarkers request with {spec} failed due to cluster authorization error")
            if err == E.INVALID_PRODUCER_EPOCH:
                raise Failure(f"WriteTxnMarkers request with {spec} failed due an invalid producer epoch")
            if err == E.TRANSACTION_COORDINATOR_FENCED:
                raise Failure(f"WriteTxnMarkers request with {spec} failed since the provided coordinator "
                              f"epoch {spec.coordinator_epoch} has been fenced by the active coordinator")
            if err in (E.NOT_LEADER_OR_FOLLOWER, E.REPLICA_NOT_AVAILABLE, E.BROKER_NOT_AVAILABLE,
                       E.UNKNOWN_TOPIC_OR_PARTITION):
                if err == E.UNKNOWN_TOPIC_OR_PARTITION or self.expired():
                    raise Failure(UNKNOWN_TP if err == E.UNKNOWN_TOPIC_OR_PARTITION else error_message(err))
                await asyncio.sleep(RETRY_BACKOFF)
                continue
            raise Failure(f"WriteTxnMarkers request with {spec} failed due to unexpected error: "
                          f"{error_message(err)}")


class NotFound(Failure):
    """TransactionalIdNotFoundException."""


class AbortSpec:
    def __init__(self, topic, partition, producer_id, producer_epoch, coordinator_epoch):
        self.topic, self.partition = topic, partition
        self.producer_id, self.producer_epoch, self.coordinator_epoch = producer_id, producer_epoch, coordinator_epoch

    @property
    def tp(self) -> str:
        return tp_str(self.topic, self.partition)

    def __str__(self):
        return (f"AbortTransactionSpec(topicPartition={self.tp}, producerId={self.producer_id}, "
                f"producerEpoch={self.producer_epoch}, coordinatorEpoch={self.coordinator_epoch})")


async def guarded(context: str, coro):
    """Await ``coro``; an admin failure becomes Kafka's one-line error."""
    try:
        return await coro
    except Failure as e:
        raise fail(context, e) from None
    except (KafkaConnectionError, KafkaError) as e:
        raise fail(context, e) from None


# ============================================================================ commands
async def cmd_list(admin: Admin, a) -> None:
    result = await guarded("Failed to list transactions", admin.list_transactions(a.duration_filter))
    rows = [[s.transactional_id, str(broker), str(s.producer_id), s.transaction_state]
            for broker, listings in sorted(result.items()) for s in listings]
    print_table(LIST_HEADERS, rows)


async def cmd_describe(admin: Admin, a) -> None:
    tid = a.transactional_id
    coord, st = await guarded(f"Failed to describe transaction state of transactional-id `{tid}`",
                              admin.describe_transaction(tid))
    if st.transaction_start_time_ms >= 0:
        start, duration = str(st.transaction_start_time_ms), str(now_ms() - st.transaction_start_time_ms)
    else:
        start = duration = "None"
    parts = sorted((t.topic, p) for t in st.topics for p in t.partitions)
    print_table(DESCRIBE_HEADERS, [[str(coord), tid, str(st.producer_id), str(st.producer_epoch),
                                    st.transaction_state, str(st.transaction_timeout_ms), start, duration,
                                    ",".join(tp_str(t, p) for t, p in parts)]])


async def cmd_describe_producers(admin: Admin, a) -> None:
    tp = (a.topic, a.partition)
    where = f"broker {a.broker_id}" if a.broker_id is not None else "leader"
    result = await guarded(f"Failed to describe producers for partition {tp_str(*tp)} on {where}",
                           admin.describe_producers([tp], a.broker_id))
    rows = [[str(s.producer_id), str(s.producer_epoch), str(s.coordinator_epoch if s.coordinator_epoch >= 0 else -1),
             str(s.last_sequence), str(s.last_timestamp),
             str(s.current_txn_start_offset) if s.current_txn_start_offset >= 0 else "None"]
            for s in result[tp]]
    print_table(PRODUCERS_HEADERS, rows)


async def cmd_abort(admin: Admin, a) -> None:
    tp = (a.topic, a.partition)
    if a.start_offset is None and a.producer_id is None:
        raise ToolError("The transaction to abort must be identified either with --start-offset (for brokers "
                        "on 3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch "
                        "(for older brokers)")
    if a.start_offset is None:
        if a.producer_epoch is None:
            raise ToolError("Missing required argument --producer-epoch")
        if a.coordinator_epoch is None:
            raise ToolError("Missing required argument --coordinator-epoch")
        # a transaction that hung before its producer id saw any marker shows coordinator epoch -1;
        # 0 is at most any leader epoch (Kafka's reasoning)
        spec = AbortSpec(a.topic, a.partition, a.producer_id, a.producer_epoch, max(a.coordinator_epoch, 0))
    else:
        states = await guarded(f"Failed to validate producer state for partition {tp_str(*tp)}",
                               admin.describe_producers([tp]))
        found = next((s for s in states[tp] if s.current_txn_start_offset >= 0
                      and s.current_txn_start_offset == a.start_offset), None)
        if found is None:
            raise ToolError(f"Could not find any open transactions starting at offset {a.start_offset} on "
                            f"partition {tp_str(*tp)}")
        spec = AbortSpec(a.topic, a.partition, found.producer_id, found.producer_epoch,
                         found.coordinator_epoch if found.coordinator_epoch >= 0 else 0)
    await guarded(f"Failed to abort transaction {spec}", admin.abort_transaction(spec))


async def cmd_find_hanging(admin: Admin, a) -> None:
    if a.topic is None and a.broker_id is None:
        raise ToolError("The `find-hanging` command requires either --topic or --broker-id to limit the scope "
                        "of the search")
    if a.partition is not None and a.topic is None:
        raise ToolError("The --partition argument requires --topic to be provided")
    max_timeout_ms = a.max_transaction_timeout * 60_000
    client = admin.client

    # the partitions to search
    if a.topic is not None and a.partition is not None:
        partitions = [(a.topic, a.partition)]
    else:
        if a.topic is not None:
            topics = [a.topic]
        else:
            resp = await guarded("Failed to list topics", client.refresh_metadata(None))
            topics = [t.name for t in resp.topics if t.error_code == E.NONE]
        partitions = []
        for i in range(0, len(topics), MAX_BATCH_SIZE):
            batch = topics[i:i + MAX_BATCH_SIZE]
            resp = await guarded(f"Failed to describe {len(batch)} topics", client.refresh_metadata(batch))
            for t in resp.topics:
                if t.error_code:
                    raise fail(f"Failed to describe {len(batch)} topics", error_message(t.error_code))
                for p in sorted(t.partitions, key=lambda p: p.partition_index):
                    if a.broker_id is None or a.broker_id in p.replica_nodes:
                        partitions.append((t.name, p.partition_index))

    # open transactions older than the longest a transaction may run
    candidates = []
    broker = f"Optional[{a.broker_id}]" if a.broker_id is not None else "Optional.empty"
    for i in range(0, len(partitions), MAX_BATCH_SIZE):
        batch = partitions[i:i + MAX_BATCH_SIZE]
        states = await guarded(f"Failed to describe producers for {len(batch)} partitions on broker {broker}",
                               admin.describe_producers(batch, a.broker_id))
        now = now_ms()
        for tp in batch:
            for s in states.get(tp, []):
                if s.current_txn_start_offset >= 0 and now - s.last_timestamp > max_timeout_ms:
                    candidates.append((tp, s))

    hanging = []
    if candidates:
        pids = sorted({s.producer_id for _, s in candidates})
        listings = await guarded(f"Failed to list transactions for {len(pids)} producers",
                                 admin.list_transactions(producer_ids=pids))
        tids = {x.producer_id: x.transactional_id for ls in listings.values() for x in ls if x.producer_id in pids}
        descriptions = {}
        for tid in sorted(set(tids.values())):
            try:
                _, st = await admin.describe_transaction(tid)
                descriptions[tid] = {(t.topic, p) for t in st.topics for p in t.partitions}
            except NotFound:
                descriptions[tid] = None
            except (Failure, KafkaConnectionError, KafkaError) as e:
                raise fail(f"Failed to describe {len(set(tids.values()))} transactions", e) from None
        for tp, s in candidates:
            tid = tids.get(s.producer_id)
            parts = descriptions.get(tid) if tid is not None else None
            # the coordinator still expects to write a marker only to partitions it lists
            if parts is None or tp not in parts:
                hanging.append((tp, s))

    now = now_ms()
    rows = [[tp[0], str(tp[1]), str(s.producer_id), str(s.producer_epoch),
             str(s.coordinator_epoch if s.coordinator_epoch >= 0 else -1), str(s.current_txn_start_offset),
             str(s.last_timestamp), str((now - s.last_timestamp) // 60_000)]
            for tp, s in sorted(hanging, key=lambda x: (x[0], x[1].producer_id))]
    print_table(HANGING_HEADERS, rows)


COMMANDS = {"list": cmd_list, "describe": cmd_describe, "describe-producers": cmd_describe_producers,
            "abort": cmd_abort, "find-hanging": cmd_find_hanging}


async def execute(a) -> int:
    opts = {"bootstrap-server": a.bootstrap_server, "command-config": a.command_config}
    client = await cluster_from(opts)
    try:
        await COMMANDS[a.command](Admin(client), a)
    finally:
        await client.close()
    return 0


def main(argv=None) -> int:
    return run_parsed(build_parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())

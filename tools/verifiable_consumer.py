"""kafka-verifiable-consumer.sh: Kafka's VerifiableConsumer, which Kafka's system tests use to watch
a consumer group from the outside.  It subscribes to one topic as a member of a group and prints
one JSON object per line for each thing that happens to it:

    {"timestamp":..., "name":"startup_complete"}
    {"timestamp":..., "name":"partitions_assigned", "partitions":[{"topic":"t","partition":0}]}
    {"timestamp":..., "name":"records_consumed", "count":N,
     "partitions":[{"topic":"t","partition":0,"count":N,"minOffset":A,"maxOffset":B}]}
    {"timestamp":..., "name":"record_data", "key":..., "value":..., "topic":"t", "partition":0, "offset":A}
    {"timestamp":..., "name":"offsets_committed", "offsets":[{"topic":"t","partition":0,"offset":B+1}],
     "success":true}                        (with "error":"..." when the commit failed)
    {"timestamp":..., "name":"partitions_revoked", "partitions":[...]}
    {"timestamp":..., "name":"shutdown_complete"}

record_data lines come with --verbose only; offsets_committed lines only without
--enable-autocommit, when the tool commits synchronously after each batch it consumed, as
Kafka's does.  Lost partitions (a membership the coordinator dropped) are reported as revoked,
as Java's default ``onPartitionsLost`` does.

Flags as Kafka's: --topic, --group-id, --bootstrap-server (or the deprecated --broker-list),
--group-protocol (classic or consumer), --group-remote-assignor (consumer protocol only),
--group-instance-id, --max-messages (-1: until SIGINT/SIGTERM), --session-timeout (30000),
--verbose, --enable-autocommit, --reset-policy (earliest), --assignment-strategy (Java's
assignor class names or the protocol names: range, roundrobin, sticky, cooperative-sticky; classic
protocol only), --consumer.config.  The group membership is the project's own consumer
(``tools/kclient.py``).
"""
from __future__ import annotations

import asyncio
import signal
import sys

from protocol.client import KafkaConnectionError
from protocol.errors import KafkaError
from tools.common import ToolError, cluster_from, load_properties, run_parsed
from tools.common import json_event as event
from tools.kclient import Consumer, consumer_settings
from tools.transactions import Parser
from tools.verifiable_producer import connection_options

DESCRIPTION = ("Reads a topic as a member of a consumer group and prints one JSON line per thing that happens "
               "to it: assignments, revocations, records read, commits.")
RANGE = "org.apache.kafka.clients.consumer.RangeAssignor"


def build_parser() -> Parser:
    p = Parser(prog="verifiable-consumer", description=DESCRIPTION)
    connection_options(p)
    p.add_argument("--topic", required=True, metavar="TOPIC", help="The topic to read.")
    p.add_argument("--group-protocol", default="classic", metavar="GROUP_PROTOCOL",
                   help="classic (JoinGroup and SyncGroup) or consumer (KIP-848).")
    p.add_argument("--group-remote-assignor", metavar="GROUP_REMOTE_ASSIGNOR",
                   help="The coordinator's assignor (uniform or range); consumer protocol only.")
    p.add_argument("--group-id", required=True, metavar="GROUP_ID", help="The group to join.")
    p.add_argument("--group-instance-id", metavar="GROUP_INSTANCE_ID",
                   help="Makes the member static, under this id.")
    p.add_argument("--max-messages", type=int, default=-1, metavar="MAX-MESSAGES",
                   help="Stop after this many records; -1 reads until the process is stopped.")
    p.add_argument("--session-timeout", type=int, default=30000, metavar="TIMEOUT_MS",
                   help="The member's session timeout in ms.")
    p.add_argument("--verbose", action="store_true", help="Also print every record read.")
    p.add_argument("--enable-autocommit", action="store_true",
                   help="Let the consumer commit on its own instead of after each batch.")
    p.add_argument("--reset-policy", default="earliest",
                   help="Where to start without a committed offset: earliest, latest or none.")
    p.add_argument("--assignment-strategy", default=RANGE,
                   help="The classic protocol's assignors: Java class names or range, roundrobin, sticky, "
                        "cooperative-sticky.")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="CONFIG_FILE",
                   help="A properties file of consumer settings; the options above take precedence.")
    return p


def _partitions(tps) -> list[dict]:
    return [{"topic": t, "partition": p} for t, p in tps]


class Listener:
    """The rebalance listener: each callback is one JSON line."""

    @staticmethod
    def on_partitions_assigned(tps):
        event("partitions_assigned", partitions=_partitions(tps))

    @staticmethod
    def on_partitions_revoked(tps):
        event("partitions_revoked", partitions=_partitions(tps))


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", errors="replace")


def settings_of(a, props: dict[str, str]) -> dict:
    """The consumer's settings: --consumer.config, then the command line over it (Kafka's order)."""
    props = dict(props)
    props.update({"group.protocol": a.group_protocol, "group.id": a.group_id,
                  "enable.auto.commit": "true" if a.enable_autocommit else "false",
                  "auto.offset.reset": a.reset_policy, "session.timeout.ms": str(a.session_timeout)})
    props.setdefault("client.id", "verifiable-consumer")
    if a.group_instance_id:
        props["group.instance.id"] = a.group_instance_id
    if a.group_protocol.strip().lower() == "consumer":
        if a.group_remote_assignor:
            props["group.remote.assignor"] = a.group_remote_assignor
    else:
        props["partition.assignment.strategy"] = a.assignment_strategy
    try:
        return consumer_settings(props)
    except ValueError as e:
        raise ToolError(str(e)) from None


async def execute(a) -> int:
    servers = a.bootstrap_server or a.broker_list
    if not servers:
        build_parser().print_help()
        return 0
    props = load_properties(a.consumer_config) if a.consumer_config else {}
    settings = settings_of(a, props)
    client = await cluster_from({"bootstrap-server": servers}, props, client_id=settings["client_id"])
    consumer = Consumer(client, listener=Listener(), **settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    limit = a.max_messages if a.max_messages >= 0 else None
    consumed = 0
    try:
        event("startup_complete")
        await consumer.subscribe([a.topic])
        while (limit is None or consumed < limit) and not stop.is_set():
            poll = asyncio.ensure_future(consumer.poll(1.0))
            halt = asyncio.ensure_future(stop.wait())
            await asyncio.wait({poll, halt}, return_when=asyncio.FIRST_COMPLETED)
            halt.cancel()
            if not poll.done():                 # stopping: the batch in flight is not reported
                poll.cancel()
                break
            records = poll.result()
            if not records:
                continue
            by_tp: dict = {}
            for r in records:
                by_tp.setdefault((r.topic, r.partition), []).append(r)
            summaries = []
            offsets = {}
            for tp, rs in by_tp.items():
                if limit is not None and consumed + len(rs) > limit:
                    rs = rs[:limit - consumed]
                if not rs:
                    continue
                offsets[tp] = rs[-1].offset + 1
                summaries.append({"topic": tp[0], "partition": tp[1], "count": len(rs),
                                  "minOffset": rs[0].offset, "maxOffset": rs[-1].offset})
                if a.verbose:
                    for r in rs:
                        event("record_data", key=_text(r.key), value=_text(r.value), topic=r.topic,
                              partition=r.partition, offset=r.offset)
                consumed += len(rs)
                if limit is not None and consumed >= limit:
                    break
            event("records_consumed", count=len(records), partitions=summaries)
            if not a.enable_autocommit:
                await commit(consumer, offsets)
    except (KafkaError, KafkaConnectionError, OSError) as e:
        # as Kafka's tool: the error goes to the log (stderr), the consumer is closed all the same
        # and the exit status stays 0
        print(f"ERROR Error during processing, terminating consumer process: {e}", file=sys.stderr)
    finally:
        try:
            await consumer.close()
        finally:
            await client.close()
            event("shutdown_complete")
    return 0


async def commit(consumer: Consumer, offsets: dict) -> None:
    listed = [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()]
    try:
        ok = await consumer.commit(offsets)
    except (KafkaError, KafkaConnectionError) as e:
        event("offsets_committed", offsets=listed, error=str(e), success=False)
        return
    if ok is False:
        event("offsets_committed", offsets=listed,
              error="Commit cannot be completed since the group has already rebalanced and assigned "
                    "the partitions to another member.", success=False)
    else:
        event("offsets_committed", offsets=listed, success=True)


def main(argv=None) -> int:
    return run_parsed(build_parser(), execute, argv, help_when_empty=True)


if __name__ == "__main__":
    sys.exit(main())

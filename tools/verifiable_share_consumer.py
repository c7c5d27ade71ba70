"""kafka-verifiable-share-consumer.sh: Kafka 4.2's VerifiableShareConsumer, which Kafka's system
tests use to watch a share group member (KIP-932) from the outside.  It reads one topic as a
member of a share group and prints one JSON object per line for each thing that happens to it:

    {"timestamp":..., "name":"startup_complete"}
    {"timestamp":..., "name":"offset_reset_strategy_set", "offsetResetStrategy":"earliest"}
    {"timestamp":..., "name":"records_consumed", "count":N,
     "partitions":[{"topic":"t","partition":0,"count":N,"offsets":[...]}]}
    {"timestamp":..., "name":"record_data", "key":..., "value":..., "topic":"t", "partition":0, "offset":A}
    {"timestamp":..., "name":"offsets_acknowledged", "count":N,
     "partitions":[{"topic":"t","partition":0,"count":N,"offsets":[...]}], "success":true}
                                            (with "error":"..." and success false when it failed)
    {"timestamp":..., "name":"shutdown_complete"}

record_data lines come with --verbose only.  ``--offset-reset-strategy earliest|latest`` first
sets the group's ``share.auto.offset.reset`` (IncrementalAlterConfigs on the GROUP resource).
``--acknowledgement-mode``: ``auto`` (the records a poll returned are accepted by the next poll),
``sync`` (commit_sync after each batch) or ``async`` (commit_async after each batch); every
acknowledgement the broker answers is an offsets_acknowledged line.  The tool stops after
``--max-messages`` acknowledged records (-1: until SIGINT/SIGTERM).  The client is librdkafka's
share consumer (confluent-kafka).
"""
from __future__ import annotations

import signal
import sys

from tools.common import ToolError, librdkafka_client, load_properties, run_parsed
from tools.common import json_event as event
from tools.transactions import Parser

DESCRIPTION = ("This tool creates a share group and consumes messages from a specific topic and emits share "
               "consumer events (e.g. share consumer startup, received messages, and offsets acknowledged) as "
               "JSON objects to STDOUT.")
MODES = ("auto", "sync", "async")


def build_parser() -> Parser:
    p = Parser(prog="verifiable-share-consumer", description=DESCRIPTION)
    p.add_argument("--bootstrap-server", required=True, metavar="HOST1:PORT1[,HOST2:PORT2[...]]",
                   help="The server(s) to connect to.")
    p.add_argument("--topic", required=True, metavar="TOPIC", help="Consumes messages from this topic.")
    p.add_argument("--group-id", required=True, metavar="GROUP-ID", help="The group id of the share group.")
    p.add_argument("--max-messages", type=int, default=-1, metavar="MAX-MESSAGES",
                   help="Consume this many messages. If -1 (the default), the share consumer will consume until "
                        "the process is killed externally.")
    p.add_argument("--verbose", action="store_true", help="Enable to log individual consumed records.")
    p.add_argument("--acknowledgement-mode", default="auto", metavar="ACKNOWLEDGEMENT-MODE",
                   help="Acknowledgement mode for the share consumer (must be either 'auto', 'sync' or 'async').")
    p.add_argument("--offset-reset-strategy", default="", metavar="OFFSET-RESET-STRATEGY",
                   help="Share group offset reset strategy (must be either 'earliest' or 'latest').")
    p.add_argument("--command-config", metavar="CONFIG-FILE",
                   help="Config properties file (config options shared with command line parameters will be "
                        "overridden).")
    return p


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", errors="replace")


def _set_reset_strategy(conf: dict, group: str, strategy: str) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    admin = librdkafka_client(AdminClient, {k: v for k, v in conf.items() if k != "group.id"}, "admin client")
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", strategy, incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(60)


def execute(a) -> int:
    from confluent_kafka import KafkaException, ShareConsumer
    mode = a.acknowledgement_mode.strip().lower()
    if mode not in MODES:
        raise ToolError(f"No enum constant AcknowledgementMode.{a.acknowledgement_mode.upper()}")
    strategy = a.offset_reset_strategy.strip().lower()
    if strategy and strategy not in ("earliest", "latest"):
        raise ToolError(f"Unknown share group auto offset reset strategy: {strategy}")
    conf = load_properties(a.command_config) if a.command_config else {}
    conf.update({"group.id": a.group_id, "bootstrap.servers": a.bootstrap_server})
    conf["share.acknowledgement.mode"] = "implicit"
    stop: list = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(True))
    acknowledged = [0]

    def on_acknowledged(offsets, error):
        parts = [{"topic": tp.topic, "partition": tp.partition, "count": len(offs), "offsets": sorted(offs)}
                 for tp, offs in offsets.items()]
        count = sum(len(offs) for offs in offsets.values())
        if error is None:
            event("offsets_acknowledged", count=count, partitions=parts, success=True)
            acknowledged[0] += count
        else:
            event("offsets_acknowledged", count=count, partitions=parts, error=str(error), success=False)

    consumer = librdkafka_client(ShareConsumer, conf, "share consumer")
    try:
        event("startup_complete")
        if strategy:
            _set_reset_strategy(conf, a.group_id, strategy)
            event("offset_reset_strategy_set", offsetResetStrategy=strategy)
        consumer.subscribe([a.topic])
        consumer.set_acknowledgement_commit_callback(on_acknowledged)
        while not stop and not (a.max_messages >= 0 and acknowledged[0] >= a.max_messages):
            records = [m for m in consumer.poll(1.0) if m.error() is None]
            if not records:
                continue
            by_tp: dict = {}
            for m in records:
                by_tp.setdefault((m.topic(), m.partition()), []).append(m)
            summaries = []
            for (topic, partition), ms in by_tp.items():
                summaries.append({"topic": topic, "partition": partition, "count": len(ms),
                                  "offsets": sorted({m.offset() for m in ms})})
                if a.verbose:
                    for m in ms:
                        event("record_data", key=_text(m.key()), value=_text(m.value()), topic=topic,
                              partition=partition, offset=m.offset())
            event("records_consumed", count=len(records), partitions=summaries)
            if mode == "sync":
                for tp, err in consumer.commit_sync(30).items():
                    if err is not None:
                        print(f"ERROR Failed to commit offset synchronously for topic partition: "
                              f"{tp.topic}-{tp.partition}", file=sys.stderr)
            elif mode == "async":
                consumer.commit_async()
    except (KafkaException, OSError) as e:
        # as Kafka's tool: the error goes to the log (stderr), the consumer is closed all the same
        print(f"ERROR Error during processing, terminating share consumer process: {e}", file=sys.stderr)
    finally:
        try:
            consumer.close()
        finally:
            event("shutdown_complete")
    return 0


def main(argv=None) -> int:
    return run_parsed(build_parser(), execute, argv, help_when_empty=True)


if __name__ == "__main__":
    sys.exit(main())

"""kafka-verifiable-producer.sh: Kafka's VerifiableProducer, which Kafka's system tests use to
check what a cluster acknowledged.  It sends the values 0, 1, 2, ... (``<prefix>.<n>`` with
--value-prefix) as strings, with no retries, and prints one JSON object per line:

    {"timestamp":..., "name":"startup_complete"}
    {"timestamp":..., "name":"producer_send_success", "key":null, "value":"0", "topic":"t", "partition":0, "offset":0}
    {"timestamp":..., "name":"producer_send_error", "key":null, "value":"7", "topic":"t",
     "exception":"class org.apache.kafka.common.errors.XyzException", "message":"..."}
    {"timestamp":..., "name":"shutdown_complete"}
    {"timestamp":..., "name":"tool_data", "sent":N, "acked":M, "target_throughput":T, "avg_throughput":X}

Flags as Kafka's: --topic, --bootstrap-server (or the deprecated --broker-list), --max-messages
(-1: until SIGINT/SIGTERM, which still flushes and prints the summary), --throughput (messages
per second, -1: unthrottled), --acks (-1), --producer.config, --message-create-time (the first
record's timestamp; later ones move forward by the time passed), --value-prefix,
--repeating-keys (keys 0..n-1 in turn).  The records go through the project's own producer
(``tools/kclient.py``): Kafka's partitioner, batches, linger.ms/batch.size/compression.type from
--producer.config.
"""
from __future__ import annotations

import asyncio
import signal
import sys
import time

from protocol.errors import KafkaError
from tools.common import cluster_from, java_exception_class, load_properties, run_parsed
from tools.common import json_event as event
from tools.kclient import Producer
from tools.transactions import Parser

DESCRIPTION = "This tool produces increasing integers to the specified topic and prints JSON metadata to stdout on " \
              "each \"send\" request, making externally visible which messages have been acked and which have not."


def build_parser() -> Parser:
    p = Parser(prog="verifiable-producer", description=DESCRIPTION)
    p.add_argument("--topic", required=True, metavar="TOPIC", help="Produce messages to this topic.")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--bootstrap-server", metavar="HOST1:PORT1[,HOST2:PORT2[...]]",
                   help="REQUIRED: The server(s) to connect to. Comma-separated list of Kafka brokers in the form "
                        "HOST1:PORT1,HOST2:PORT2,...")
    g.add_argument("--broker-list", metavar="HOST1:PORT1[,HOST2:PORT2[...]]",
                   help="DEPRECATED, use --bootstrap-server instead; ignored if --bootstrap-server is specified.  "
                        "Comma-separated list of Kafka brokers in the form HOST1:PORT1,HOST2:PORT2,...")
    p.add_argument("--max-messages", type=int, default=-1, metavar="MAX-MESSAGES",
                   help="Produce this many messages. If -1, produce messages until the process is killed externally.")
    p.add_argument("--throughput", type=int, default=-1, metavar="THROUGHPUT",
                   help="If set >= 0, throttle maximum message throughput to *approximately* THROUGHPUT messages/sec.")
    p.add_argument("--acks", type=int, default=-1, metavar="ACKS",
                   help="Acks required on each produced message. See Kafka docs on acks for details.")
    p.add_argument("--producer.config", dest="producer_config", metavar="CONFIG_FILE",
                   help="Producer config properties file.")
    p.add_argument("--message-create-time", type=int, default=-1, metavar="CREATETIME",
                   help="Send messages with creation time starting at the arguments value, in milliseconds since "
                        "epoch")
    p.add_argument("--value-prefix", type=int, metavar="VALUE-PREFIX",
                   help="If specified, each produced value will have this prefix with a dot separator")
    p.add_argument("--repeating-keys", type=int, metavar="REPEATING-KEYS",
                   help="If specified, each produced record will have a key starting at 0 increment by 1 up to the "
                        "number specified (exclusive), then the key is set to 0 again")
    return p


def _failure(error) -> tuple[str, str]:
    if isinstance(error, KafkaError) and getattr(error, "code", None):
        return f"class org.apache.kafka.common.errors.{java_exception_class(error.code)}", str(error)
    return f"class {type(error).__name__}", str(error)


async def execute(a) -> int:
    servers = a.bootstrap_server or a.broker_list
    if not servers:
        build_parser().print_help()
        return 0
    props = load_properties(a.producer_config) if a.producer_config else {}
    client = await cluster_from({"bootstrap-server": servers}, props)
    producer = Producer(client, acks=a.acks, retries=0,
                        linger_ms=float(props.get("linger.ms", 5)), batch_size=int(props.get("batch.size", 16384)),
                        compression=props.get("compression.type", "none"),
                        request_timeout_ms=int(props.get("request.timeout.ms", 30000)))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    sent = acked = 0
    start = time.monotonic()
    start_ms = int(time.time() * 1000)
    create_time = None if a.message_create_time == -1 else a.message_create_time

    def report(fut, key, value):
        nonlocal acked
        r = fut.result()
        if r.error is None:
            acked += 1
            event("producer_send_success", key=key, value=value, topic=r.topic, partition=r.partition,
                  offset=r.offset)
        else:
            exc, msg = _failure(r.error)
            event("producer_send_error", key=key, value=value, topic=a.topic, exception=exc, message=msg)

    try:
        event("startup_complete")
        limit = a.max_messages if a.max_messages >= 0 else None
        i = 0
        while (limit is None or i < limit) and not stop.is_set():
            key = str(i % a.repeating_keys) if a.repeating_keys else None
            value = f"{a.value_prefix}.{i}" if a.value_prefix is not None else str(i)
            sent += 1
            try:
                fut = await producer.send(a.topic, value.encode(), key=key.encode() if key is not None else None,
                                          timestamp=create_time)
                fut.add_done_callback(lambda f, k=key, v=value: report(f, k, v))
            except (KafkaError, OSError) as e:
                exc, msg = _failure(e)
                event("producer_send_error", key=key, value=value, topic=a.topic, exception=exc, message=msg)
            if create_time is not None:
                create_time += int(time.time() * 1000) - start_ms
            i += 1
            if a.throughput > 0:                    # Kafka's ThroughputThrottler: sleep off any lead
                ahead = i / a.throughput - (time.monotonic() - start)
                if ahead > 0:
                    try:
                        await asyncio.wait_for(stop.wait(), ahead)
                    except asyncio.TimeoutError:
                        pass
            elif i % 1000 == 0:
                await asyncio.sleep(0)
        await producer.flush()
    finally:
        await client.close()
        event("shutdown_complete")
        elapsed_ms = max((time.monotonic() - start) * 1000, 1e-3)
        event("tool_data", sent=sent, acked=acked, target_throughput=a.throughput,
              avg_throughput=1000 * acked / elapsed_ms)
    return 0


def main(argv=None) -> int:
    return run_parsed(build_parser(), execute, argv, help_when_empty=True)


if __name__ == "__main__":
    sys.exit(main())

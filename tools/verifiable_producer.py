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

DESCRIPTION = ("Sends the numbers 0, 1, 2, ... to a topic and prints one JSON line per send, telling which "
               "records the cluster acknowledged and which it did not.")
SERVERS = "HOST1:PORT1[,HOST2:PORT2[...]]"


def connection_options(p: Parser) -> None:
    """--bootstrap-server, or the older --broker-list (Kafka's verifiable tools take either)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--bootstrap-server", metavar=SERVERS,
                   help="The brokers to contact first, host:port pairs separated by commas (this or --broker-list "
                        "is needed).")
    g.add_argument("--broker-list", metavar=SERVERS,
                   help="Deprecated name of --bootstrap-server, used only when that is absent.")


def build_parser() -> Parser:
    p = Parser(prog="verifiable-producer", description=DESCRIPTION)
    p.add_argument("--topic", required=True, metavar="TOPIC", help="The topic to write to.")
    connection_options(p)
    p.add_argument("--max-messages", type=int, default=-1, metavar="MAX-MESSAGES",
                   help="How many records to send; -1 sends until the process is stopped.")
    p.add_argument("--throughput", type=int, default=-1, metavar="THROUGHPUT",
                   help="At most about this many records a second when 0 or more; -1 is as fast as possible.")
    p.add_argument("--acks", type=int, default=-1, metavar="ACKS",
                   help="The acks setting of the producer (0, 1 or -1 for all).")
    p.add_argument("--producer.config", dest="producer_config", metavar="CONFIG_FILE",
                   help="A properties file of producer settings.")
    p.add_argument("--message-create-time", type=int, default=-1, metavar="CREATETIME",
                   help="The first record's timestamp (ms since the epoch); later ones move on with the clock.")
    p.add_argument("--value-prefix", type=int, metavar="VALUE-PREFIX",
                   help="Values become <prefix>.<n> instead of <n>.")
    p.add_argument("--repeating-keys", type=int, metavar="REPEATING-KEYS",
                   help="Keys 0, 1, ... up to this number (excluded), then from 0 again; no keys without it.")
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

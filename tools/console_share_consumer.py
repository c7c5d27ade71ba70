"""kafka-console-share-consumer.sh: Kafka 4.1's ConsoleShareConsumer, reading a topic as a member of
a share group (KIP-932) and printing its records.

    kafka-console-share-consumer.sh --bootstrap-server h:p --topic t [--group g]
        [--max-messages n] [--timeout-ms ms] [--reject | --release] [--reject-message-on-error]
        [--property print.key=true ...] [--formatter-config f] [--consumer-property k=v ...]
        [--consumer-config f]

Records are acknowledged as they are printed: accepted, or with ``--reject`` / ``--release``
rejected or released (to see them again in another member).  A record that cannot be printed
stops the tool, or with ``--reject-message-on-error`` is rejected and skipped.  The group is
``console-share-consumer`` unless ``--group`` names another.  The client is librdkafka's share
consumer (confluent-kafka).
"""
from __future__ import annotations

import signal
import sys
import time

from tools.common import (OptionParser, ToolError, UsageError, librdkafka_client, load_properties, parse_kv_list,
                          parse_or_exit, require, run)
from tools.console_consumer import Formatter, report_end

DESCRIPTION = "This tool helps to read data from Kafka topics using share groups and outputs it to standard output."


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Print usage information.")
    p.add("bootstrap-server", "REQUIRED: The server(s) to connect to.", "server to connect to")
    p.add("topic", "The topic to consume from.", "topic")
    p.add("group", "The share group id of the consumer.", "share group id")
    p.add("consumer-property", "A mechanism to pass user-defined properties in the form key=value to the "
                               "consumer.", "consumer_prop", multi=True)
    p.add("consumer-config", "Consumer config properties file. Note that [consumer-property] takes precedence "
                             "over this config.", "config file")
    p.add("command-config", "Same as --consumer-config.", "config file")
    p.add("formatter", "The name of a class to use for formatting Kafka messages for display; only the default "
                       "formatter is available.", "class",
          default="org.apache.kafka.tools.consumer.DefaultMessageFormatter")
    p.add("formatter-config", "Config properties file to initialize the message formatter. Note that "
                              "[property] takes precedence over this config.", "config file")
    p.add("property", "The properties to initialize the message formatter: print.timestamp, print.key, "
                      "print.offset, print.partition, print.delivery (the delivery count), print.headers, "
                      "print.value, key.separator, line.separator, headers.separator, null.literal.", "prop",
          multi=True)
    p.add("max-messages", "The maximum number of messages to consume before exiting. If not set, consumption "
                          "is continual.", "num_messages", type=int)
    p.add("timeout-ms", "If specified, exit if no message is available for consumption for the specified "
                        "interval.", "timeout_ms", type=int)
    p.add("reject", "If specified, messages are rejected as they are consumed.")
    p.add("release", "If specified, messages are released as they are consumed.")
    p.add("reject-message-on-error", "If there is an error when processing a message, reject it instead of "
                                     "halting.")
    p.add("key-deserializer", "Accepted and ignored: keys are printed as raw bytes.", "deserializer for key")
    p.add("value-deserializer", "Accepted and ignored: values are printed as raw bytes.",
          "deserializer for values")
    p.add("enable-systest-events", "Log lifecycle events of the share consumer in addition to logging consumed "
                                   "messages. (This is specific for system tests.)")
    return p


class _Record:
    """A confluent-kafka message as the console consumer's formatter reads records."""
    __slots__ = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers",
                 "leader_epoch", "delivery_count")

    def __init__(self, m):
        ts_type, ts = m.timestamp()
        self.topic, self.partition, self.offset = m.topic(), m.partition(), m.offset()
        self.timestamp, self.timestamp_type = ts, ts_type - 1     # librdkafka: 1 create, 2 log append
        self.key, self.value = m.key(), m.value()
        self.headers = [(k, v) for k, v in (m.headers() or [])]
        self.leader_epoch = m.leader_epoch()
        self.delivery_count = m.delivery_count()


class ShareFormatter(Formatter):
    def __init__(self, props):
        super().__init__(props)
        self.print_delivery = props.get("print.delivery", "false").strip().lower() == "true"

    def format(self, r) -> bytes:
        line = super().format(r)
        if not self.print_delivery:
            return line
        return b"DeliveryCount:" + str(r.delivery_count).encode() + self.key_sep + line


def check_args(p, o):
    require(p, o, "bootstrap-server")
    if not o.get("topic"):
        p.usage_exit("--topic is a required argument")
    if o.has("reject") and o.has("release"):
        p.usage_exit("Option reject and release cannot be set together.")


def consumer_conf(p, o) -> dict:
    props = {}
    for key in ("command-config", "consumer-config"):
        if o.get(key):
            props.update(load_properties(o[key]))
    try:
        props.update(parse_kv_list(o["consumer-property"], "consumer property"))
    except UsageError as e:
        p.usage_exit(str(e))
    if o.get("group"):
        props["group.id"] = o["group"]
    props.setdefault("group.id", "console-share-consumer")
    props["bootstrap.servers"] = o["bootstrap-server"]
    props["share.acknowledgement.mode"] = "explicit"
    return props


def consume(o, conf) -> int:
    from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer
    fmt_props = {}
    if o.get("formatter-config"):
        fmt_props.update(load_properties(o["formatter-config"]))
    fmt_props.update(parse_kv_list(o["property"]))
    formatter = ShareFormatter(fmt_props)
    ack = AcknowledgeType.REJECT if o.has("reject") else AcknowledgeType.RELEASE if o.has("release") \
        else AcknowledgeType.ACCEPT
    max_messages = o.get("max-messages")
    timeout = o.get("timeout-ms")
    timeout = None if timeout is None or timeout < 0 else timeout / 1000.0
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(True))
    consumer = librdkafka_client(ShareConsumer, conf, "share consumer")
    out = sys.stdout.buffer
    count = 0
    try:
        consumer.subscribe([o["topic"]])
        last = time.monotonic()
        while not stop and (max_messages is None or count < max_messages):
            if timeout is not None and time.monotonic() - last >= timeout:
                print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] ERROR Error processing message, terminating "
                      "consumer process: TimeoutException", file=sys.stderr)
                break
            try:
                msgs = consumer.poll(0.5)
            except KafkaException as e:
                raise ToolError(f"Error processing message: {e.args[0]}") from None
            if msgs:
                last = time.monotonic()
            for m in msgs:
                if m.error() is not None:
                    continue
                if max_messages is not None and count >= max_messages:
                    consumer.acknowledge(m, AcknowledgeType.RELEASE)
                    continue
                try:
                    out.write(formatter.format(_Record(m)))
                    consumer.acknowledge(m, ack)
                except BrokenPipeError:
                    raise
                except Exception as e:      # noqa: BLE001 - Kafka's tool reports any formatting failure
                    if not o.has("reject-message-on-error"):
                        consumer.acknowledge(m, AcknowledgeType.RELEASE)
                        raise ToolError(f"Error processing message: {e}") from None
                    print(f"ERROR Error processing message, rejecting this message: {e}", file=sys.stderr)
                    consumer.acknowledge(m, AcknowledgeType.REJECT)
                count += 1
            out.flush()
            if msgs:
                consumer.commit_sync(30)
    finally:
        try:
            consumer.close()
        finally:
            report_end(out, count, o)
    return 0


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args, DESCRIPTION)
        check_args(p, o)
        return consume(o, consumer_conf(p, o))

    return run(body, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())

"""kafka-console-consumer.sh: consume records and print them to stdout."""
from __future__ import annotations

import asyncio
import json
import logging
import random
import signal
import sys
import time

from tools.common import (OptionParser, ToolError, UsageError, cluster_from, load_properties,
                          parse_kv_list, parse_or_exit, require, run, topic_matcher)
from tools.kclient import EARLIEST, LATEST, Consumer, consumer_settings

DESCRIPTION = "Prints the messages of a topic (or of the topics matching --include) on standard output."


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("topic", "Topic to read from.", "topic")
    p.add("include", "A regular expression of the topics to consume (internal topics are left "
                     "out).", "Java regex (String)", alias=("whitelist",))
    p.add("partition", "Consume only this partition (without a group); starts at the end "
                       "unless --from-beginning or --offset says otherwise.", "partition",
          type=int)
    p.add("offset", "Where to start in --partition: a non-negative offset, 'earliest' or "
                    "'latest'.", "consume offset", default="latest")
    p.add("consumer-property", "A consumer setting, key=value (repeatable).", "consumer_prop",
          multi=True)
    p.add("consumer.config", "A properties file of consumer settings (--consumer-property "
                             "wins).", "config file")
    p.add("command-config", "Same as --consumer.config.", "config file")
    p.add("formatter", "The class that formats each record: DefaultMessageFormatter, "
                       "LoggingMessageFormatter, NoOpMessageFormatter, or for internal topics OffsetsMessageFormatter, "
                       "GroupMetadataMessageFormatter, ShareGroupMessageFormatter "
                       "(__consumer_offsets), TransactionLogMessageFormatter (__transaction_state) "
                       "and group.share.ShareGroupStateMessageFormatter (__share_group_state), all "
                       "in org.apache.kafka.tools.consumer.", "class",
          default="org.apache.kafka.tools.consumer.DefaultMessageFormatter")
    p.add("property", "A formatter setting, key=value (repeatable): print.timestamp, print.key, "
                      "print.offset, print.partition, print.headers, print.value, key.separator, "
                      "line.separator, headers.separator, null.literal.", "prop", multi=True)
    p.add("formatter-config", "A properties file of formatter settings (--property wins).",
          "config file")
    p.add("from-beginning", "Start at the earliest offset when there is no committed offset "
                            "(auto.offset.reset=earliest).")
    p.add("max-messages", "Exit after this many messages (default: consume forever).",
          "num_messages", type=int)
    p.add("timeout-ms", "Exit when no message arrives for this long, in ms.", "timeout_ms",
          type=int)
    p.add("skip-message-on-error", "Skip a message that cannot be printed instead of stopping.")
    p.add("bootstrap-server", "REQUIRED: broker address(es) to contact first, host:port[,host:port...].", "server to connect to")
    p.add("key-deserializer", "Accepted and ignored: keys are printed as raw bytes.",
          "deserializer for key")
    p.add("value-deserializer", "Accepted and ignored: values are printed as raw bytes.",
          "deserializer for values")
    p.add("enable-systest-events", "Print 'shutdown_complete' when the consumer stops.")
    p.add("isolation-level", "read_committed hides records of aborted transactions; "
                             "read_uncommitted shows everything.", "isolation level",
          default="read_uncommitted")
    p.add("group", "The consumer group to join (offsets are committed there).",
          "consumer group id")
    return p


class Formatter:
    def __init__(self, props):
        b = lambda k, d: props.get(k, d).strip().lower() == "true"  # noqa: E731
        self.print_timestamp = b("print.timestamp", "false")
        self.print_key = b("print.key", "false")
        self.print_offset = b("print.offset", "false")
        self.print_partition = b("print.partition", "false")
        self.print_headers = b("print.headers", "false")
        self.print_value = b("print.value", "true")
        self.print_epoch = b("print.epoch", "false")
        self.key_sep = _unescape(props.get("key.separator", "\t")).encode()
        self.line_sep = _unescape(props.get("line.separator", "\n")).encode()
        self.headers_sep = _unescape(props.get("headers.separator", ",")).encode()
        self.null = _unescape(props.get("null.literal", "null")).encode()

    def format(self, r) -> bytes:
        cols = []
        if self.print_timestamp:
            if r.timestamp_type < 0 or r.timestamp is None or r.timestamp < 0 and r.timestamp_type < 0:
                cols.append(b"NO_TIMESTAMP")
            else:
                kind = b"LogAppendTime" if r.timestamp_type == 1 else b"CreateTime"
                cols.append(kind + b":" + str(r.timestamp).encode())
        if self.print_partition:
            cols.append(b"Partition:" + str(r.partition).encode())
        if self.print_offset:
            cols.append(b"Offset:" + str(r.offset).encode())
        if self.print_epoch:
            ep = r.leader_epoch
            cols.append(b"Epoch:" + (str(ep).encode() if ep is not None and ep >= 0 else b"NOT_PRESENT"))
        if self.print_headers:
            if not r.headers:
                cols.append(b"NO_HEADERS")
            else:
                cols.append(self.headers_sep.join(
                    k.encode() + b":" + (self.null if v is None else v) for k, v in r.headers))
        if self.print_key:
            cols.append(self.null if r.key is None else r.key)
        if self.print_value:
            cols.append(self.null if r.value is None else r.value)
        return self.key_sep.join(cols) + self.line_sep


class LoggingFormatter(Formatter):
    """Kafka's LoggingMessageFormatter: the default output, and each record logged at INFO
    (``timestamp type:ms, key:..., value:...``), which the tools' default WARN level hides, as
    Kafka's tools-log4j.properties does."""
    log = logging.getLogger("org.apache.kafka.tools.consumer.LoggingMessageFormatter")

    def format(self, r) -> bytes:
        out = super().format(r)
        if self.log.isEnabledFor(logging.INFO):
            ts = "" if r.timestamp_type < 0 else \
                f"{'LogAppendTime' if r.timestamp_type == 1 else 'CreateTime'}:{r.timestamp}, "
            key = "key:null " if r.key is None else f"key:{r.key.decode('utf-8', 'replace')}, "
            value = "value:null" if r.value is None else f"value:{r.value.decode('utf-8', 'replace')}"
            self.log.info(ts + key + value)
        return out


class NoOpFormatter:
    def format(self, r) -> bytes:  # noqa: ARG002
        return b""


class CoordinatorFormatter:
    """Kafka's formatters for the records of its internal topics: each record of the kinds in
    ``kinds`` as one JSON object, ``{"key":{"<label>":K,"data":{...}},"value":{"version":V,
    "data":{...}}}`` (``"value":null`` for a tombstone), with no line separator, as Kafka writes
    them.  The formatters Kafka 3.9 has label the key's type "version"; the share group ones,
    which print Kafka 4.2's records, label it "type", as 4.2 does.  Records of other kinds, and
    records without a key, print nothing."""

    def __init__(self, key_of, value_of, kinds, label: str = "version"):
        self.key_of, self.value_of, self.kinds, self.label = key_of, value_of, kinds, label

    def format(self, r) -> bytes:
        if r.key is None:
            return b""
        kind, key_data = self.key_of(r.key)
        if key_data is None or (self.kinds is not None and kind not in self.kinds):
            return b""
        out = {"key": {self.label: kind, "data": key_data}, "value": None}
        if r.value is not None:
            version, data = self.value_of(kind, r.value)
            out["value"] = {"version": version, "data": data}
        return json.dumps(out, separators=(",", ":")).encode()


_PKG = "org.apache.kafka.tools.consumer."
_DEPRECATED = {"kafka.tools.DefaultMessageFormatter": _PKG + "DefaultMessageFormatter",
               "kafka.tools.NoOpMessageFormatter": _PKG + "NoOpMessageFormatter",
               "kafka.tools.LoggingMessageFormatter": _PKG + "LoggingMessageFormatter"}


def build_formatter(p, name: str, props: dict):
    """The formatter of class ``name`` (Kafka's class names); an unknown class exits with its
    name and the usage, as Kafka's ConsoleConsumer does."""
    from tools import record_json as RJ
    if name in _DEPRECATED:
        print(f"WARNING: {name} is deprecated and will be removed in the next major release. "
              f"Please use {_DEPRECATED[name]} instead", file=sys.stderr)
        name = _DEPRECATED[name]
    made = {
        _PKG + "DefaultMessageFormatter": lambda: Formatter(props),
        _PKG + "NoOpMessageFormatter": NoOpFormatter,
        _PKG + "LoggingMessageFormatter": lambda: LoggingFormatter(props),
        _PKG + "OffsetsMessageFormatter": lambda: CoordinatorFormatter(RJ.group_key, RJ.group_value, {0, 1}),
        _PKG + "GroupMetadataMessageFormatter": lambda: CoordinatorFormatter(RJ.group_key, RJ.group_value, {2}),
        _PKG + "TransactionLogMessageFormatter": lambda: CoordinatorFormatter(RJ.txn_key, RJ.txn_value, None),
        _PKG + "ShareGroupMessageFormatter": lambda: CoordinatorFormatter(
            RJ.group_key, RJ.group_value, set(range(10, 16)), "type"),
        _PKG + "group.share.ShareGroupStateMessageFormatter": lambda: CoordinatorFormatter(
            RJ.share_state_key, RJ.share_state_value, None, "type"),
    }.get(name)
    if made is None:
        p.usage_exit(name)
    return made()


def _unescape(s: str) -> str:
    return s.encode("latin-1", "backslashreplace").decode("unicode_escape") if "\\" in s else s


def check_args(p, o):
    given = [x for x in ("topic", "include") if o.get(x)]
    if len(given) != 1:
        p.usage_exit("Exactly one of --include/--topic is required. ")
    if o.has("partition"):
        if not o.has("topic"):
            p.usage_exit("The topic is required when partition is specified.")
        if o.has("from-beginning") and o.has("offset"):
            p.usage_exit("Options from-beginning and offset cannot be specified together.")
    elif o.has("offset"):
        p.usage_exit("The partition is required when offset is specified.")
    require(p, o, "bootstrap-server")
    if o.get("isolation-level") not in ("read_committed", "read_uncommitted"):
        p.usage_exit(f"Invalid value {o.get('isolation-level')} for configuration "
                     f"isolation.level: String must be one of: read_committed, read_uncommitted")
    if o.has("offset"):
        v = o["offset"].lower()
        if v not in ("earliest", "latest"):
            try:
                if int(v) < 0:
                    raise ValueError
            except ValueError:
                p.usage_exit(f"The provided offset value '{o['offset']}' is incorrect. Valid values "
                             f"are 'earliest', 'latest', or a non-negative long.")


def consumer_props(p, o):
    file_props = {}
    for key in ("command-config", "consumer.config"):
        if o.get(key):
            file_props.update(load_properties(o[key]))
    try:
        extra = parse_kv_list(o["consumer-property"], "consumer property")
    except UsageError as e:
        p.usage_exit(str(e))
    groups = []
    for src in (o.get("group"), file_props.get("group.id"), extra.get("group.id")):
        if src and src not in groups:
            groups.append(src)
    if len(groups) > 1:
        p.usage_exit("The group ids given with --group, --consumer-property and "
                     "--consumer.config differ: " + ", ".join(f"'{g}'" for g in groups))
    if groups and o.has("partition"):
        p.usage_exit("Options group and partition cannot be specified together.")
    props = dict(file_props)
    props.update(extra)
    if "auto.offset.reset" in props:
        if o.has("from-beginning") and props["auto.offset.reset"] != "earliest":
            raise ToolError(f"Can't simultaneously specify --from-beginning and "
                            f"'auto.offset.reset={props['auto.offset.reset']}', please remove one option")
    else:
        props["auto.offset.reset"] = "earliest" if o.has("from-beginning") else "latest"
    props.setdefault("client.id", "console-consumer")
    if o.has("isolation-level"):
        props["isolation.level"] = o["isolation-level"]
    if groups:
        props["group.id"] = groups[0]
    return props


def formatter_props(o) -> dict:
    fmt_props = {}
    if o.get("formatter-config"):
        fmt_props.update(load_properties(o["formatter-config"]))
    fmt_props.update(parse_kv_list(o["property"]))
    return fmt_props


async def consume(o, props, formatter) -> int:
    try:
        settings = consumer_settings(props)
    except ValueError as e:
        raise ToolError(str(e)) from None
    client = await cluster_from(o, props, client_id=props["client.id"])
    consumer = Consumer(client, **settings)
    count = 0
    max_messages = o.get("max-messages")
    if max_messages is not None and max_messages < 0:
        max_messages = None
    timeout = o.get("timeout-ms")
    timeout = None if timeout is None or timeout < 0 else timeout / 1000.0
    out = sys.stdout.buffer
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    status = 0
    try:
        topic = o.get("topic")
        if o.has("partition"):
            await client.refresh_metadata([topic])
            t = client.topics.get(topic)
            if t is None or o["partition"] not in {x.partition_index for x in t.partitions}:
                raise ToolError(f"The partition {topic}-{o['partition']} does not exist")
            start = None
            if o.has("offset"):
                v = o["offset"].lower()
                start = EARLIEST if v == "earliest" else LATEST if v == "latest" else int(v)
            elif o.has("from-beginning"):
                start = EARLIEST
            else:
                start = LATEST
            await consumer.assign([(topic, o["partition"])], start)
        elif topic:
            await client.refresh_metadata([topic])
            if topic not in client.topics:
                # Kafka's consumer waits for the topic to appear; so do we (bounded by --timeout-ms).
                deadline = time.monotonic() + (timeout if timeout is not None else 3600 * 24 * 365)
                while topic not in client.topics and time.monotonic() < deadline and not stop.is_set():
                    await asyncio.sleep(0.5)
                    await client.refresh_metadata([topic])
            if topic in client.topics:
                await consumer.subscribe([topic])
        else:
            try:
                rx = topic_matcher(o["include"])
            except ToolError as e:
                raise ToolError(str(e)) from None
            await consumer.subscribe(pattern=rx)
        last = time.monotonic()
        while not stop.is_set():
            if max_messages is not None and count >= max_messages:
                break
            wait = 1.0 if timeout is None else max(0.0, min(1.0, timeout - (time.monotonic() - last)))
            if timeout is not None and time.monotonic() - last >= timeout:
                print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] ERROR Error processing message, "
                      f"terminating consumer process: TimeoutException", file=sys.stderr)
                break
            poll = asyncio.ensure_future(consumer.poll(wait))
            stopper = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait({poll, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if poll not in done:
                poll.cancel()
                break
            records = poll.result()
            if records:
                last = time.monotonic()
            for r in records:
                if max_messages is not None and count >= max_messages:
                    break
                try:
                    out.write(formatter.format(r))
                except BrokenPipeError:
                    raise
                except Exception as e:
                    if not o.has("skip-message-on-error"):
                        raise ToolError(f"Error processing message: {e}") from None
                    print(f"ERROR Error processing message, skipping this message: {e}",
                          file=sys.stderr)
                count += 1
                if consumer.group_id is not None:
                    consumer.positions[(r.topic, r.partition)] = r.offset + 1
            out.flush()
        if max_messages is not None and count >= max_messages and consumer.group_id:
            # Only what was printed counts as consumed.
            pass
    finally:
        try:
            await consumer.close()
            await client.close()
        finally:
            report_end(out, count, o)
    return status


def report_end(out, count: int, o) -> None:
    """What Kafka's console consumers print as they stop: the count on stderr, and for system
    tests ``shutdown_complete``."""
    try:
        out.flush()
    except BrokenPipeError:
        pass
    print(f"Processed a total of {count} messages", file=sys.stderr)
    if o.has("enable-systest-events"):
        print("shutdown_complete")


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        check_args(p, o)
        props = consumer_props(p, o)
        if not o.get("group") and "group.id" not in props:
            props["group.id"] = None
            props.setdefault("enable.auto.commit", "false")
        o["_group_random"] = f"console-consumer-{random.randrange(100000)}"
        return consume(o, props, build_formatter(p, o["formatter"], formatter_props(o)))

    return run(body, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())

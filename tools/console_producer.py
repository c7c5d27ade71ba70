"""kafka-console-producer.sh: read lines from stdin and produce them to a topic."""
from __future__ import annotations

import asyncio
import os
import sys

from protocol.compression import CODEC_IDS
from tools.common import (OptionParser, ToolError, UsageError, cluster_from, load_properties,
                          parse_kv_list, parse_or_exit, require, run)
from tools.kclient import Producer

DESCRIPTION = "Sends each line read from standard input as a message to a topic."


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("topic", "REQUIRED: where the messages go.", "topic")
    p.add("bootstrap-server", "REQUIRED: broker address(es) to contact first, "
                              "host:port[,host:port...].", "server to connect to")
    p.add("sync", "Send each message on its own and wait for its acknowledgement before "
                  "reading the next line.")
    p.add("compression-codec", "Codec for the produced batches, one of none, gzip, snappy, lz4 "
                               "and zstd; the option alone (no value) selects gzip.", "compression-codec",
          optional=True)
    p.add("batch-size", "Bytes of messages gathered per partition before a batch is sent "
                        "(when not --sync).", "size", type=int, default=16384)
    p.add("message-send-max-retries", "How many times a failed send is retried.", "retries",
          type=int, default=3)
    p.add("retry-backoff-ms", "Wait before each retry, in ms.", "ms", type=int, default=100)
    p.add("timeout", "linger.ms: how long a batch may wait for more messages, in ms.",
          "timeout_ms", type=int, default=1000)
    p.add("request-required-acks", "acks of the produce requests: -1/all, 0 or 1.",
          "request required acks", default="-1")
    p.add("request-timeout-ms", "How long the broker may take to acknowledge, in ms.",
          "request timeout ms", type=int, default=1500)
    p.add("metadata-expiry-ms", "Accepted and ignored (metadata is refreshed after errors).",
          "metadata expiration interval", type=int, default=300000)
    p.add("max-block-ms", "How long to wait for the topic's metadata before giving up, in ms.",
          "max block on send", type=int, default=60000)
    p.add("max-memory-bytes", "Accepted and ignored.", "total memory in bytes",
          type=int, default=33554432)
    p.add("max-partition-memory-bytes", "Accepted and ignored (see --batch-size).",
          "memory in bytes per partition", type=int, default=16384)
    p.add("line-reader", "Only the built-in line reader is available.", "reader_class",
          default="org.apache.kafka.tools.LineMessageReader")
    p.add("socket-buffer-size", "Accepted and ignored.", "size", type=int, default=102400)
    p.add("property", "A line-reader setting, key=value (repeatable): parse.key, key.separator, "
                      "parse.headers, headers.delimiter, headers.separator, "
                      "headers.key.separator, null.marker, ignore.error.", "prop", multi=True)
    p.add("reader-config", "A properties file of line-reader settings (--property wins).",
          "config file")
    p.add("producer-property", "A producer setting, key=value (repeatable).", "producer_prop",
          multi=True)
    p.add("producer.config", "A properties file of producer settings (--producer-property "
                             "wins).", "config file")
    p.add("command-config", "Same as --producer.config.", "config file")
    return p


class LineReader:
    def __init__(self, props: dict[str, str]):
        t = lambda k: props.get(k, "false").strip().lower() == "true"  # noqa: E731
        self.parse_key = t("parse.key")
        self.parse_headers = t("parse.headers")
        self.ignore_error = t("ignore.error")
        self.key_sep = props.get("key.separator", "\t")
        self.headers_delim = props.get("headers.delimiter", "\t")
        self.headers_sep = props.get("headers.separator", ",")
        self.headers_key_sep = props.get("headers.key.separator", ":")
        self.null_marker = props.get("null.marker")
        pairs = [("headers.delimiter", self.headers_delim, "headers.separator", self.headers_sep),
                 ("headers.delimiter", self.headers_delim, "headers.key.separator", self.headers_key_sep),
                 ("headers.separator", self.headers_sep, "headers.key.separator", self.headers_key_sep)]
        if self.parse_headers:
            for a, av, b, bv in pairs:
                if av == bv:
                    raise ToolError(f"{a} and {b} may not be equal")
        if self.null_marker is not None:
            for name, v in (("key.separator", self.key_sep), ("headers.separator", self.headers_sep),
                            ("headers.delimiter", self.headers_delim),
                            ("headers.key.separator", self.headers_key_sep)):
                if self.null_marker == v:
                    raise ToolError(f"null.marker and {name} may not be equal")
        self.line_number = 0

    def _split(self, enabled, line, start, sep, what):
        if not enabled:
            return None
        i = line.find(sep, start)
        if i < 0:
            if self.ignore_error:
                return None
            raise ToolError(f"No {what} found on line number {self.line_number}: '{line}'")
        return line[start:i]

    def parse(self, line: str):
        self.line_number += 1
        headers_text = self._split(self.parse_headers, line, 0, self.headers_delim, "headers delimiter")
        off = 0 if headers_text is None else len(headers_text) + len(self.headers_delim)
        key = self._split(self.parse_key, line, off, self.key_sep, "key separator")
        off2 = off + (0 if key is None else len(key) + len(self.key_sep))
        value = line[off2:]
        headers = []
        if headers_text:
            for pair in headers_text.split(self.headers_sep):
                if not pair:
                    continue
                i = pair.find(self.headers_key_sep)
                if i < 0:
                    if self.ignore_error:
                        continue
                    raise ToolError(f"No header key separator found in pair '{pair}' on line "
                                    f"number {self.line_number}")
                hk, hv = pair[:i], pair[i + len(self.headers_key_sep):]
                if hk == self.null_marker:
                    raise ToolError(f"Header keys should not be equal to the null marker "
                                    f"'{self.null_marker}' as they can't be null")
                headers.append((hk, None if hv == self.null_marker else hv.encode()))
        k = None if key is None or key == self.null_marker else key.encode()
        v = None if value == self.null_marker else value.encode()
        return k, v, headers


async def stdin_lines():
    """Lines from stdin as they arrive (works for pipes and terminals)."""
    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno()
    pending = b""
    while True:
        chunk = await loop.run_in_executor(None, os.read, fd, 1 << 16)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line
    if pending:
        yield pending


def producer_settings(o) -> dict[str, str]:
    props = {}
    for key in ("command-config", "producer.config"):
        if o.get(key):
            props.update(load_properties(o[key]))
    try:
        props.update(parse_kv_list(o["producer-property"], "producer property"))
    except UsageError as e:
        raise ToolError(str(e)) from None
    if o.has("timeout"):
        props["linger.ms"] = str(o["timeout"])
    if o.has("request-required-acks"):
        props["acks"] = o["request-required-acks"]
    if o.has("request-timeout-ms"):
        props["request.timeout.ms"] = str(o["request-timeout-ms"])
    if o.has("message-send-max-retries"):
        props["retries"] = str(o["message-send-max-retries"])
    if o.has("retry-backoff-ms"):
        props["retry.backoff.ms"] = str(o["retry-backoff-ms"])
    if o.has("batch-size") or o.has("max-partition-memory-bytes"):
        props["batch.size"] = str(o["batch-size"] if o.has("batch-size")
                                  else o["max-partition-memory-bytes"])
    if o.has("max-block-ms"):
        props["max.block.ms"] = str(o["max-block-ms"])
    codec = "none"
    if o.has("compression-codec"):
        codec = o["compression-codec"] or "gzip"
    props["compression.type"] = props.get("compression.type", "none") \
        if not o.has("compression-codec") else codec
    props.setdefault("client.id", "console-producer")
    return props


def parse_acks(v: str) -> int:
    v = v.strip().lower()
    if v == "all":
        return -1
    try:
        a = int(v)
    except ValueError:
        a = 99
    if a not in (-1, 0, 1):
        raise ToolError(f'Invalid value {v} for configuration acks: String must be one of: '
                        f'all, -1, 0, 1')
    return a


async def produce(o, props) -> int:
    codec = props.get("compression.type", "none").lower()
    if codec not in CODEC_IDS:
        raise ToolError(f"Invalid value {codec} for configuration compression.type: String must "
                        f"be one of: none, gzip, snappy, lz4, zstd")
    acks = parse_acks(props.get("acks", "all"))
    reader_props = {}
    if o.get("reader-config"):
        reader_props.update(load_properties(o["reader-config"]))
    try:
        reader_props.update(parse_kv_list(o["property"]))
    except UsageError as e:
        raise ToolError(str(e)) from None
    reader = LineReader(reader_props)
    max_block = int(props.get("max.block.ms", 60000))
    client = await cluster_from(o, props, client_id=props["client.id"],
                                default_timeout_ms=max_block)
    producer = Producer(client, acks=acks, linger_ms=float(props.get("linger.ms", 1000 if not o.has("timeout") else o["timeout"])),
                        batch_size=int(props.get("batch.size", 16384)), compression=codec,
                        retries=int(props.get("retries", 3)),
                        retry_backoff_ms=int(props.get("retry.backoff.ms", 100)),
                        request_timeout_ms=max_block)
    topic = o["topic"]
    failures = 0
    prompt = sys.stdin.isatty()

    def report(fut):
        nonlocal failures
        r = fut.result()
        if r.error is not None:
            failures += 1
            print(f"ERROR Error when sending message to topic {topic} with error: {r.error}",
                  file=sys.stderr)

    try:
        await producer.partitions_of(topic)
        if prompt:
            print(">", end="", flush=True)
        async for raw in stdin_lines():
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            key, value, headers = reader.parse(line)
            fut = await producer.send(topic, value, key=key, headers=headers)
            fut.add_done_callback(report)
            if o.has("sync"):
                await producer.flush()
                await fut
            if prompt:
                print(">", end="", flush=True)
        await producer.flush()
    finally:
        await client.close()
    return 1 if failures else 0


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        require(p, o, "topic", "bootstrap-server")
        props = producer_settings(o)
        return produce(o, props)

    return run(body, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())

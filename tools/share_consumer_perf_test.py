"""kafka-share-consumer-perf-test.sh: Kafka 4.2's ShareConsumerPerformance, reading a topic as
``--threads`` members of a share group (KIP-932) and printing the throughput.

    kafka-share-consumer-perf-test.sh --bootstrap-server h:p --topic t --num-records n
        [--group perf-share-consumer] [--threads 1] [--timeout 10000] [--show-detailed-stats]
        [--reporting-interval 5000] [--show-consumer-stats] [--hide-header] [--date-format f]
        [--command-property k=v ...] [--command-config f] [--fetch-size b] [--socket-buffer-size b]

Each member is a librdkafka share consumer (confluent-kafka) in its own thread, in the implicit
acknowledgement mode: what a poll returned is accepted by the next poll.  The run ends when the
members together have read ``--num-records`` records, or when a member has seen none for
``--timeout`` ms.  The last line is the group's:
``start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg, fetch.time.ms``.
"""
from __future__ import annotations

import sys
import threading
import time

from tools.common import (OptionParser, UsageError, librdkafka_client, load_properties, parse_kv_list,
                          parse_or_exit, require, run)
from tools.consumer_perf_test import fmt_time

DESCRIPTION = "This tool is used to verify the share consumer performance."


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Print usage information.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("bootstrap-server", "REQUIRED. The server(s) to connect to.", "server to connect to")
    p.add("topic", "REQUIRED: The topic to consume from.", "topic")
    p.add("group", "The group id to consume on.", "gid", default="perf-share-consumer")
    p.add("fetch-size", "The amount of data to fetch in a single request.", "size", type=int, default=1024 * 1024)
    p.add("command-property", "Share consumer configuration properties like client.id; they take precedence "
                              "over those of --command-config.", "prop1=val1", multi=True)
    p.add("socket-buffer-size", "The size of the tcp RECV size.", "size", type=int, default=2 * 1024 * 1024)
    p.add("consumer.config", "(DEPRECATED) Share consumer config properties file. Use --command-config "
                             "instead.", "config file")
    p.add("command-config", "Config properties file.", "config file")
    p.add("print-metrics", "Print out the metrics (librdkafka's statistics of each member).")
    p.add("show-detailed-stats", "If set, stats are reported for each reporting interval as configured by "
                                 "reporting-interval.")
    p.add("timeout", "The maximum allowed time in milliseconds between returned records.", "milliseconds",
          type=int, default=10_000)
    p.add("messages", "(DEPRECATED) The number of records to consume. Use --num-records instead.", "count",
          type=int)
    p.add("num-records", "REQUIRED: The number of records to consume.", "count", type=int)
    p.add("reporting-interval", "Interval in milliseconds at which to print progress info.", "interval_ms",
          type=int, default=5_000)
    p.add("date-format", "The date format to use for formatting the time field (Java's "
                         "yyyy-MM-dd HH:mm:ss:SSS pattern letters).", "date format",
          default="yyyy-MM-dd HH:mm:ss:SSS")
    p.add("hide-header", "If set, skips printing the header for the stats.")
    p.add("threads", "The number of share consumers to use for sharing the load.", "count", type=int, default=1)
    p.add("show-consumer-stats", "If set, stats are reported for each share consumer depending on the no. of "
                                 "threads.")
    return p


def check_args(p, o) -> None:
    for name in ("topic", "bootstrap-server"):
        require(p, o, name)
    if o.has("messages") == o.has("num-records"):
        p.usage_exit("Exactly one of the following arguments is required: [messages], [num-records]")
    if o.has("consumer.config") and o.has("command-config"):
        p.usage_exit("Option \"[consumer.config]\" can't be used with option \"[command-config]\"")
    if o.has("messages"):
        print("Warning: --messages is deprecated. Use --num-records instead.")
    if o.has("consumer.config"):
        print("Warning: --consumer.config is deprecated. Use --command-config instead.")
    if o["threads"] < 1:
        p.usage_exit("--threads must be at least 1")


def share_consumer_conf(p, o) -> dict:
    conf = {}
    path = o.get("consumer.config") or o.get("command-config")
    if path:
        conf.update(load_properties(path))
    try:
        conf.update(parse_kv_list(o["command-property"], "command property"))
    except UsageError as e:
        p.usage_exit(str(e))
    conf["bootstrap.servers"] = o["bootstrap-server"]
    conf["group.id"] = o["group"]
    conf["socket.receive.buffer.bytes"] = o["socket-buffer-size"]
    conf["fetch.max.bytes"] = o["fetch-size"]
    conf.setdefault("client.id", "perf-share-consumer-client")
    if o.has("print-metrics"):
        conf.setdefault("statistics.interval.ms", 1000)
    return conf


class Totals:
    def __init__(self):
        self.lock = threading.Lock()
        self.records = 0
        self.bytes = 0


class Member(threading.Thread):
    def __init__(self, index: int, consumer, o, totals: Totals, want: int):
        super().__init__(name=f"share-perf-{index}", daemon=True)
        self.index, self.consumer, self.o, self.totals, self.want = index, consumer, o, totals, want
        self.records = self.bytes = 0
        self.stats: list = []           # librdkafka's statistics JSON, with --print-metrics
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._consume()
        except BaseException as e:      # noqa: BLE001 - reported by the main thread
            self.error = e

    def _consume(self) -> None:
        o, t = self.o, self.totals
        now = last_consumed = last_report = _now_ms()
        last_bytes = last_records = 0
        while t.records < self.want and now - last_consumed <= o["timeout"]:
            batch = self.consumer.poll(0.1)
            now = _now_ms()
            if batch:
                last_consumed = now
            n = size = 0
            for m in batch:
                if m.error() is not None:
                    continue
                n += 1
                k, v = m.key(), m.value()
                size += (len(k) if k is not None else 0) + (len(v) if v is not None else 0)
            if not n:
                continue
            self.records += n
            self.bytes += size
            with t.lock:
                t.records += n
                t.bytes += size
            if now - last_report >= o["reporting-interval"]:
                if o.has("show-detailed-stats"):
                    elapsed = now - last_report
                    print(f"{fmt_time(last_report, o['date-format'])}, {fmt_time(now, o['date-format'])}, "
                          f"{self.bytes / 1048576:.4f}, {1000.0 * (self.bytes - last_bytes) / 1048576 / elapsed:.4f}, "
                          f"{1000.0 * (self.records - last_records) / elapsed:.4f}, {self.records}, {elapsed} "
                          f"for share consumer {self.index}", flush=True)
                last_report, last_bytes, last_records = now, self.bytes, self.records


def execute(p, o) -> int:
    from confluent_kafka import ShareConsumer
    want = o["num-records"] if o.has("num-records") else o["messages"]
    base = share_consumer_conf(p, o)
    if not o.has("hide-header"):
        print("start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg, fetch.time.ms")
    n = o["threads"]
    client_ids = [base["client.id"] if n == 1 else f"{base['client.id']}-{i + 1}" for i in range(n)]
    totals = Totals()
    members = []
    for i, cid in enumerate(client_ids):
        conf = dict(base, **{"client.id": cid})
        if o.has("print-metrics"):
            conf["stats_cb"] = (lambda idx: lambda js: members[idx].stats.append(js))(i)
        members.append(Member(i + 1, librdkafka_client(ShareConsumer, conf, "share consumer"), o, totals, want))
    start = _now_ms()                   # as Kafka's: the members subscribe after the clock starts
    for m in members:
        m.consumer.subscribe([o["topic"]])
    for m in members:
        m.start()
    for m in members:
        m.join()
    end = _now_ms()
    if o.has("show-consumer-stats"):
        secs = (end - start) / 1000.0
        for m, cid in zip(members, client_ids):
            mb = m.bytes / 1048576
            print(f"Share consumer {m.index} having client id {cid} consumption metrics- "
                  f"{fmt_time(start, o['date-format'])}, {fmt_time(end, o['date-format'])}, {mb:.4f}, "
                  f"{mb / secs:.4f}, {m.records / secs:.4f}, {m.records}, {end - start}")
    if totals.records < want:
        print(f"WARNING: Exiting before consuming the expected number of records: timeout ({o['timeout']} ms) "
              "exceeded. You can use the --timeout option to increase the timeout.")
    for m in members:
        try:
            m.consumer.commit_sync(5)        # what the last polls returned is accepted
        except Exception as e:               # noqa: BLE001 - as Kafka, the figures stand
            print(f"WARNING: share consumer {m.index} could not commit: {e}", file=sys.stderr)
    secs = (end - start) / 1000.0 or 0.001
    mb = totals.bytes / 1048576
    print(f"{fmt_time(start, o['date-format'])}, {fmt_time(end, o['date-format'])}, {mb:.4f}, {mb / secs:.4f}, "
          f"{totals.records / secs:.4f}, {totals.records}, {end - start}")
    if o.has("print-metrics"):
        for m in members:
            if m.stats:
                print(f"\nMetrics of share consumer {m.index} (librdkafka statistics):\n{m.stats[-1]}")
    for m in members:
        m.consumer.close()
    errors = [m.error for m in members if m.error is not None]
    if errors:
        print(str(errors[0]), file=sys.stderr)
        return 1
    return 0


def _now_ms() -> int:
    return int(time.time() * 1000)


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        check_args(p, o)
        return execute(p, o)

    return run(body, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())

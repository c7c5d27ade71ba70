"""kafka-consumer-perf-test.sh: consume N messages and print Kafka's throughput summary.

The data path uses confluent-kafka (librdkafka) when installed, else Odradek's consumer; the
client used is named on stderr.  Partitions are assigned directly (every partition of the
topic, from the beginning, or the end with --from-latest), so no group coordinator is needed;
rebalance.time.ms is therefore 0.
"""
from __future__ import annotations

import random
import sys
import time

from tools.common import (OptionParser, ToolError, load_properties, parse_or_exit, require, run)

DESCRIPTION = ("Measures consumer throughput: reads a given number of messages from a topic and "
               "prints the data and message rates.")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("bootstrap-server", "REQUIRED: broker address(es) to contact first, host:port[,host:port...].", "server to connect to")
    p.add("topic", "REQUIRED: topic whose messages are read.", "topic")
    p.add("group", "group.id given to the consumer (partitions are assigned directly; no group is "
                   "joined).", "gid",
          default=f"perf-consumer-{random.randrange(100000)}")
    p.add("fetch-size", "Most bytes a fetch asks for per partition.", "size", type=int,
          default=1048576)
    p.add("from-latest", "Start at the end of each partition instead of the beginning.")
    p.add("socket-buffer-size", "Accepted and ignored.", "size", type=int,
          default=2097152)
    p.add("consumer.config", "A properties file of consumer settings.", "config file")
    p.add("command-config", "Same as --consumer.config.", "config file")
    p.add("print-metrics", "Accepted and ignored.")
    p.add("show-detailed-stats", "Print a line per reporting interval instead of one summary.")
    p.add("timeout", "Give up when no record arrives for this long, in ms.", "milliseconds",
          type=int, default=10000)
    p.add("messages", "REQUIRED: stop after reading this many messages.", "count", type=int)
    p.add("reporting-interval", "Interval of --show-detailed-stats lines, in ms.",
          "interval_ms", type=int, default=5000)
    p.add("date-format", "strftime-like format of the time columns (Java pattern "
                         "yyyy-MM-dd HH:mm:ss:SSS is understood).", "date format",
          default="yyyy-MM-dd HH:mm:ss:SSS")
    p.add("hide-header", "Do not print the header line.")
    p.add("client", "Data-path client: auto, confluent or odradek (Odradek extension).",
          "client", default="auto")
    return p


def fmt_time(ms: float, pattern: str) -> str:
    t = time.localtime(ms / 1000.0)
    out = pattern
    for java, py in (("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"),
                     ("ss", "%S")):
        out = out.replace(java, py)
    out = time.strftime(out.replace("SSS", "{ms}"), t)
    return out.replace("{ms}", f"{int(ms) % 1000:03d}")


class Report:
    def __init__(self, o):
        self.o = o
        self.detailed = o.has("show-detailed-stats")
        self.interval = o["reporting-interval"] / 1000.0
        self.last_t = None
        self.last_bytes = self.last_msgs = 0

    def header(self):
        if self.o.has("hide-header"):
            return
        extra = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
        if self.detailed:
            print(f"time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec{extra}")
        else:
            print(f"start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec{extra}")

    def progress(self, now_ms, nbytes, msgs, force=False):
        if not self.detailed:
            return
        if self.last_t is None:
            self.last_t = now_ms
            return
        if not force and now_ms - self.last_t < self.interval * 1000:
            return
        el = max(now_ms - self.last_t, 1e-9)
        mb = nbytes / 1048576
        imb = (nbytes - self.last_bytes) / 1048576
        imsg = msgs - self.last_msgs
        print(f"{fmt_time(now_ms, self.o['date-format'])}, 0, {mb:.4f}, {1000 * imb / el:.4f}, {msgs}, "
              f"{1000 * imsg / el:.4f}, 0, {int(el)}, {1000 * imb / el:.4f}, {1000 * imsg / el:.4f}",
              flush=True)
        self.last_t, self.last_bytes, self.last_msgs = now_ms, nbytes, msgs

    def total(self, start_ms, end_ms, nbytes, msgs):
        if self.detailed:
            return
        el = max((end_ms - start_ms) / 1000.0, 1e-9)
        mb = nbytes / 1048576
        print(f"{fmt_time(start_ms, self.o['date-format'])}, {fmt_time(end_ms, self.o['date-format'])}, "
              f"{mb:.4f}, {mb / el:.4f}, {msgs}, {msgs / el:.4f}, 0, {int(el * 1000)}, "
              f"{mb / el:.4f}, {msgs / el:.4f}")


def props_of(o):
    props = {}
    for k in ("command-config", "consumer.config"):
        if o.get(k):
            props.update(load_properties(o[k]))
    props["bootstrap.servers"] = o["bootstrap-server"]
    props.setdefault("group.id", o["group"])
    props.setdefault("client.id", "perf-consumer-client")
    return props


def run_confluent(o, props):
    import confluent_kafka as ck
    conf = {k: v for k, v in props.items() if k not in ("key.deserializer", "value.deserializer")}
    conf.update({"enable.auto.commit": False, "enable.partition.eof": False,
                 "fetch.queue.backoff.ms": 1, "queued.min.messages": 1000000,
                 "max.partition.fetch.bytes": o["fetch-size"], "log_level": 2})
    try:
        c = ck.Consumer(conf)
    except ck.KafkaException as e:
        raise ToolError(f"invalid consumer configuration: {e}") from None
    print(f"Using confluent-kafka {getattr(ck, '__version__', ck.version()[0])} (librdkafka {ck.libversion()[0]}) for the "
          f"data path", file=sys.stderr)
    try:
        md = c.list_topics(o["topic"], timeout=10)
    except ck.KafkaException as e:
        raise ToolError(f"could not reach {o['bootstrap-server']}: {e.args[0].str()}") from None
    t = md.topics.get(o["topic"])
    if t is None or t.error is not None or not t.partitions:
        raise ToolError(f"Topic {o['topic']} does not exist or has no partitions")
    start_at = ck.OFFSET_END if o.has("from-latest") else ck.OFFSET_BEGINNING
    c.assign([ck.TopicPartition(o["topic"], p, start_at) for p in sorted(t.partitions)])
    report = Report(o)
    report.header()
    want = o["messages"]
    msgs = nbytes = 0
    start = time.time() * 1000
    report.last_t = start
    last_rec = time.monotonic()
    timeout = o["timeout"] / 1000.0
    while msgs < want:
        batch = c.consume(min(10000, want - msgs), 0.5)
        now = time.monotonic()
        if not batch:
            if now - last_rec > timeout:
                break
            continue
        for m in batch:
            if m.error() is not None:
                continue
            v = m.value()
            msgs += 1
            nbytes += len(v) if v is not None else 0
        last_rec = now
        report.progress(time.time() * 1000, nbytes, msgs)
    end = time.time() * 1000
    c.close()
    report.progress(end, nbytes, msgs, force=True)
    if msgs < want:
        print(f"WARNING: Exiting before consuming the expected number of messages: timeout "
              f"({o['timeout']} ms) exceeded. You can use the --timeout option to increase the timeout.")
    report.total(start, end, nbytes, msgs)
    return 0


async def run_odradek(o, props):
    from protocol.client import ClusterClient
    from tools.kclient import EARLIEST, LATEST, Consumer
    print("Using Odradek's asyncio consumer for the data path", file=sys.stderr)
    client = ClusterClient(o["bootstrap-server"], client_id=props["client.id"], timeout=15)
    await client.start()
    try:
        await client.refresh_metadata([o["topic"]])
        t = client.topics.get(o["topic"])
        if t is None:
            raise ToolError(f"Topic {o['topic']} does not exist or has no partitions")
        c = Consumer(client, max_partition_fetch_bytes=o["fetch-size"])
        await c.assign([(o["topic"], p.partition_index) for p in t.partitions],
                       LATEST if o.has("from-latest") else EARLIEST)
        report = Report(o)
        report.header()
        want = o["messages"]
        msgs = nbytes = 0
        start = time.time() * 1000
        report.last_t = start
        last_rec = time.monotonic()
        while msgs < want:
            recs = await c.poll(0.5)
            now = time.monotonic()
            if not recs:
                if now - last_rec > o["timeout"] / 1000.0:
                    break
                continue
            for r in recs[:want - msgs]:
                msgs += 1
                nbytes += len(r.value) if r.value is not None else 0
            last_rec = now
            report.progress(time.time() * 1000, nbytes, msgs)
        end = time.time() * 1000
    finally:
        await client.close()
    report.progress(end, nbytes, msgs, force=True)
    if msgs < want:
        print(f"WARNING: Exiting before consuming the expected number of messages: timeout "
              f"({o['timeout']} ms) exceeded. You can use the --timeout option to increase the timeout.")
    report.total(start, end, nbytes, msgs)
    return 0


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        require(p, o, "bootstrap-server", "topic", "messages")
        props = props_of(o)
        use = o["client"]
        if use == "auto":
            try:
                import confluent_kafka  # noqa: F401
                use = "confluent"
            except ImportError:
                use = "odradek"
        if use == "confluent":
            return run_confluent(o, props)
        return run_odradek(o, props)

    return run(body, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())

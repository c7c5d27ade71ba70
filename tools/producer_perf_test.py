"""kafka-producer-perf-test.sh: produce N records as fast as allowed and print Kafka's
progress lines (every 5 s) and final summary.

The data path uses confluent-kafka (librdkafka) when it is installed, so the tool is not the
bottleneck; otherwise Odradek's own asyncio producer.  The client used is named on stderr.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time

from tools.common import ToolError, librdkafka_client, load_properties, parse_properties, run

JAVA_ONLY = {"key.serializer", "value.serializer", "buffer.memory", "max.block.ms",
             "send.buffer.bytes", "receive.buffer.bytes", "metadata.max.age.ms",
             "delivery.timeout.ms", "max.request.size", "partitioner.class",
             "interceptor.classes", "metric.reporters"}


def build_parser():
    ap = argparse.ArgumentParser(
        prog="kafka-producer-perf-test.sh",
        description="Measures producer throughput and latency: sends a given number of records, "
                    "optionally at a capped rate, and prints progress lines and a summary.")
    ap.add_argument("--topic", required=True, metavar="TOPIC", help="topic the records are sent to")
    ap.add_argument("--num-records", required=True, type=int, metavar="NUM-RECORDS",
                    help="how many records to send in total")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--record-size", type=int, metavar="RECORD-SIZE",
                   help="size of each generated record value, in bytes (this or --payload-file is required)")
    g.add_argument("--payload-file", metavar="PAYLOAD-FILE",
                   help="file of payloads, split by --payload-delimiter; records are picked "
                        "from it at random")
    ap.add_argument("--payload-delimiter", default="\\n", metavar="PAYLOAD-DELIMITER",
                    help="delimiter of the payloads in --payload-file (default: \\n)")
    ap.add_argument("--payload-monotonic", action="store_true",
                    help="payloads are the record numbers as text")
    ap.add_argument("--throughput", required=True, type=float, metavar="THROUGHPUT",
                    help="cap on records sent per second; -1 sends as fast as possible")
    ap.add_argument("--producer-props", nargs="+", metavar="PROP-NAME=PROP-VALUE",
                    help="producer settings, e.g. bootstrap.servers=host:port acks=1")
    ap.add_argument("--producer.config", dest="producer_config", metavar="CONFIG-FILE",
                    help="producer settings file")
    ap.add_argument("--bootstrap-server", metavar="BOOTSTRAP-SERVER",
                    help="the broker(s) to connect to (overrides bootstrap.servers)")
    ap.add_argument("--command-config", metavar="CONFIG-FILE", help="same as --producer.config")
    ap.add_argument("--print-metrics", action="store_true", help="print client statistics at the end")
    ap.add_argument("--transactional-id", metavar="TRANSACTIONAL-ID",
                    help="not supported: the tool exits with an error when it is given")
    ap.add_argument("--transaction-duration-ms", type=int, metavar="TRANSACTION-DURATION",
                    help="not supported: the tool exits with an error when it is given")
    ap.add_argument("--client", choices=["auto", "confluent", "odradek"], default="auto",
                    help="data-path client (Odradek extension; default: confluent-kafka when "
                         "installed)")
    return ap


class Stats:
    def __init__(self, num_records, interval_ms=5000):
        self.start = time.monotonic()
        self.window_start = self.start
        self.interval = interval_ms / 1000.0
        self.sampling = max(1, num_records // min(num_records, 500000))
        self.latencies = []
        self.count = self.bytes = 0
        self.max_latency = 0.0
        self.total_latency = 0.0
        self.iteration = 0
        self.w_count = self.w_bytes = 0
        self.w_max = self.w_total = 0.0

    def record(self, latency_ms, nbytes, now):
        self.count += 1
        self.bytes += nbytes
        self.total_latency += latency_ms
        if latency_ms > self.max_latency:
            self.max_latency = latency_ms
        self.w_count += 1
        self.w_bytes += nbytes
        self.w_total += latency_ms
        if latency_ms > self.w_max:
            self.w_max = latency_ms
        if self.iteration % self.sampling == 0:
            self.latencies.append(latency_ms)
        self.iteration += 1
        if now - self.window_start >= self.interval:
            self.print_window(now)

    def record_many(self, latencies_ms, nbytes, now, weight=1):
        """Account for a run of acknowledged records at once (sum/max/slicing in C).

        The confluent-kafka data path collects latencies in its delivery callback and hands them
        over every few thousand records: a per-record Python call would cap the tool well below
        what the client and broker can do."""
        n = len(latencies_ms)
        if not n:
            return
        total = sum(latencies_ms) * weight
        mx = max(latencies_ms)
        n_sampled, n = n, n * weight
        self.count += n
        self.bytes += nbytes
        self.total_latency += total
        if mx > self.max_latency:
            self.max_latency = mx
        self.w_count += n
        self.w_bytes += nbytes
        self.w_total += total
        if mx > self.w_max:
            self.w_max = mx
        step = max(1, self.sampling // weight)
        first = (-self.iteration) % step
        self.latencies.extend(latencies_ms[first::step])
        self.iteration += n_sampled
        if now - self.window_start >= self.interval:
            self.print_window(now)

    def print_window(self, now):
        elapsed = max(now - self.window_start, 1e-9)
        print(f"{self.w_count} records sent, {self.w_count / elapsed:.1f} records/sec "
              f"({self.w_bytes / elapsed / 1048576:.2f} MB/sec), "
              f"{self.w_total / max(self.w_count, 1):.1f} ms avg latency, "
              f"{self.w_max:.1f} ms max latency.", flush=True)
        self.window_start = now
        self.w_count = self.w_bytes = 0
        self.w_max = self.w_total = 0.0

    def print_total(self):
        elapsed = max(time.monotonic() - self.start, 1e-9)
        lat = sorted(self.latencies)

        def pct(p):
            return int(lat[min(len(lat) - 1, int(p * len(lat)))]) if lat else 0

        print(f"{self.count} records sent, {self.count / elapsed:.1f} records/sec "
              f"({self.bytes / elapsed / 1048576:.2f} MB/sec), "
              f"{self.total_latency / max(self.count, 1):.2f} ms avg latency, "
              f"{self.max_latency:.2f} ms max latency, {pct(0.5)} ms 50th, {pct(0.95)} ms 95th, "
              f"{pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th.", flush=True)


class Throttler:
    def __init__(self, target):
        self.target = target
        self.start = time.monotonic()

    def throttle(self, sent):
        if self.target <= 0:
            return
        ahead = sent / self.target - (time.monotonic() - self.start)
        if ahead > 0.002:
            time.sleep(ahead)


def payloads(a):
    if a.payload_file:
        print(f"Reading payloads from: {os.path.abspath(a.payload_file)}")
        try:
            raw = open(a.payload_file, "rb").read()
        except OSError:
            raw = b""
        if not raw:
            raise ToolError("File does not exist or empty file provided.")
        delim = a.payload_delimiter.replace("\\n", "\n").encode()
        items = [x for x in raw.split(delim)]
        print(f"Number of messages read: {len(items)}")
        return items
    rnd = random.Random(0)
    return [bytes(rnd.randrange(26) + 65 for _ in range(a.record_size))]


def settings(a):
    props = {}
    for f in (a.command_config, a.producer_config):
        if f:
            props.update(load_properties(f))
    if a.producer_props:
        props.update(parse_properties("\n".join(a.producer_props)))
    if a.bootstrap_server:
        props["bootstrap.servers"] = a.bootstrap_server
    if "bootstrap.servers" not in props:
        raise ToolError("Either --producer-props or --producer.config must be specified "
                        "(with bootstrap.servers), or --bootstrap-server.")
    props.setdefault("client.id", "perf-producer-client")
    return props


def run_confluent(a, props, items):
    import confluent_kafka as ck
    conf = {k: v for k, v in props.items() if k not in JAVA_ONLY and k != "default.api.timeout.ms"}
    conf.setdefault("queue.buffering.max.messages", 1000000)
    conf.setdefault("queue.buffering.max.kbytes", 1048576)
    conf.setdefault("linger.ms", 5)
    conf.setdefault("log_level", 2)            # keep librdkafka's connection chatter quiet
    conf.setdefault("batch.size", 1048576)
    conf.setdefault("message.max.bytes", max(1000000, int(conf["batch.size"]) + 4096))
    errors = []
    conf["error_cb"] = lambda e: errors.append(e) if e.fatal() or e.code() == ck.KafkaError._ALL_BROKERS_DOWN else None
    p = librdkafka_client(ck.Producer, conf, "producer")
    print(f"Using confluent-kafka {getattr(ck, '__version__', ck.version()[0])} (librdkafka {ck.libversion()[0]}) for the "
          f"data path", file=sys.stderr)
    try:
        md = p.list_topics(timeout=float(props.get("default.api.timeout.ms", 10000)) / 1000)
    except ck.KafkaException as e:
        raise ToolError(f"could not reach {props['bootstrap.servers']}: {e.args[0].str()}") from None
    if md is None or not md.brokers:
        raise ToolError(f"could not reach {props['bootstrap.servers']}")
    stats = Stats(a.num_records)
    failed = [0]
    now = time.monotonic

    acked_lat: list = []        # seconds, appended by the delivery callback
    acked_len: list = []
    lat_append, len_append = acked_lat.append, acked_len.append

    # Latency is measured on a sample of the records (one in `every`, at most ~50,000 delivery
    # callbacks in all); the others are produced without a callback, so Python does not pay a
    # call per acknowledgement and the tool keeps up with the client.  Counts and byte rates are
    # scaled from the sample; failures of unsampled records show up as records still queued or
    # as the error callback's fatal errors.
    every = max(1, a.num_records // 50000)

    def on_delivery(err, msg):
        if err is None:
            lat_append(msg.latency())
            len_append(len(msg))
            return
        failed[0] += every
        if failed[0] <= 5 * every:
            print(f"Error when sending message to topic {a.topic}: {err.str()}", file=sys.stderr)

    def drain_acks():
        if acked_lat:
            lats = [x * 1000.0 for x in acked_lat]
            nbytes = sum(acked_len) * every
            acked_lat.clear()
            acked_len.clear()
            stats.record_many(lats, nbytes, now(), every)

    produce = p.produce
    poll = p.poll
    topic = a.topic
    n_items = len(items)
    throttler = Throttler(a.throughput)
    mono = a.payload_monotonic
    rnd = random.Random(0)
    for i in range(a.num_records):
        value = str(i).encode() if mono else (items[0] if n_items == 1 else items[rnd.randrange(n_items)])
        while True:
            try:
                if i % every == 0:
                    produce(topic, value, on_delivery=on_delivery)
                else:
                    produce(topic, value)
                break
            except BufferError:
                poll(0.005)
        if i & 1023 == 0:
            poll(0)
            drain_acks()
            if errors:
                raise ToolError(f"producer failed: {errors[0].str()}")
            if a.throughput > 0:
                throttler.throttle(i)
        elif a.throughput > 0 and a.throughput < 1000:
            throttler.throttle(i)
    remaining = p.flush(60)
    drain_acks()
    stats.print_total()
    if a.print_metrics:
        print(f"failed records: {failed[0]}, still queued: {remaining}")
    return 1 if failed[0] or remaining else 0


async def run_odradek(a, props, items):
    from protocol.client import ClusterClient
    from tools.kclient import Producer
    print("Using Odradek's asyncio producer for the data path", file=sys.stderr)
    client = ClusterClient(props["bootstrap.servers"], client_id=props["client.id"], timeout=15)
    await client.start()
    acks = props.get("acks", "all")
    acks = -1 if acks == "all" else int(acks)
    producer = Producer(client, acks=acks, linger_ms=float(props.get("linger.ms", 5)),
                        batch_size=int(props.get("batch.size", 1048576)),
                        compression=props.get("compression.type", "none"),
                        max_in_flight=int(props.get("max.in.flight.requests.per.connection", 5)))
    stats = Stats(a.num_records)
    throttler = Throttler(a.throughput)
    failed = 0
    rnd = random.Random(0)
    try:
        await producer.partitions_of(a.topic)
        for i in range(a.num_records):
            value = str(i).encode() if a.payload_monotonic else items[rnd.randrange(len(items))]
            t0 = time.monotonic()
            fut = await producer.send(a.topic, value)

            def done(f, t0=t0, n=len(value)):
                nonlocal failed
                r = f.result()
                if r.error is not None:
                    failed += 1
                else:
                    stats.record((time.monotonic() - t0) * 1000.0, n, time.monotonic())
            fut.add_done_callback(done)
            if i % 256 == 0:
                await asyncio.sleep(0)
                if a.throughput > 0:
                    throttler.throttle(i)
        await producer.flush()
    finally:
        await client.close()
    stats.print_total()
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        ap.print_help()
        return 0

    def body(args):
        a = ap.parse_args(args)
        if a.num_records <= 0:
            ap.error("--num-records should be greater than zero")
        if a.record_size is not None and a.record_size <= 0:
            ap.error("--record-size should be greater than zero")
        if a.transactional_id or a.transaction_duration_ms:
            raise ToolError("transactional perf runs are not supported yet")
        props = settings(a)
        items = payloads(a)
        use = a.client
        if use == "auto":
            try:
                import confluent_kafka  # noqa: F401
                use = "confluent"
            except ImportError:
                use = "odradek"
        if use == "confluent":
            return run_confluent(a, props, items)
        return run_odradek(a, props, items)

    return run(body, argv)


if __name__ == "__main__":
    sys.exit(main())

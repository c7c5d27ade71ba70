"""kafka-mirror-maker.sh: Kafka's first MirrorMaker (deprecated since Kafka 3.0 in favour of the
Connect-based MirrorMaker 2), which copies the topics matching --include from one cluster to the
same-named topics of another.

Each of --num.streams consumers joins the group named by --consumer.config's group.id and
subscribes to the --include pattern (Kafka's include-list syntax: a Java-style regex in which
commas mean "or"; internal topics never match).  Every record is sent to the target cluster with
its key, value, headers and timestamp; the target's partitioner picks the partition.  The
consumers' offsets are committed only after the producer has flushed what they read: every
--offset.commit.interval.ms, before partitions are revoked in a rebalance, and at shutdown
(SIGINT/SIGTERM).  So a crash can copy a record twice, never lose one.

The producer gets MirrorMaker's safe defaults unless --producer.config says otherwise: acks=all,
one request in flight, retries without end.  With --abort.on.send.failure true (the default) the
first failed send stops the whole mirror maker without committing, exit status 255 (Kafka's -1);
with false the record is counted as dropped and copying goes on.

--message.handler and --consumer.rebalance.listener name Python classes (``package.module.Class``)
here, where Kafka takes Java ones; each is built with the matching --*.args string when given.
A handler's ``handle(record)`` gets a ``tools.kclient.ConsumerRecord`` and returns the records to
send, each a ``(topic, partition or None, timestamp or None, key, value, headers)`` tuple; a
listener's ``on_partitions_revoked(partitions)`` / ``on_partitions_assigned(partitions)`` get
lists of ``(topic, partition)``.
"""
from __future__ import annotations

import asyncio
import importlib
import signal
import sys
import time

from protocol.client import KafkaConnectionError
from protocol.errors import KafkaError
from tools.common import (OptionParser, ToolError, cluster_from, include_list, java_error,
                          load_properties, parse_or_exit, require, run)
from tools.kclient import Consumer, Producer, consumer_settings

DESCRIPTION = "Copies the records of the topics matching --include from one Kafka cluster to another, as a " \
              "consumer group on the source and a producer to the target (deprecated: MirrorMaker 2 replaces it)."

ABORTED = 255       # Kafka's sys.exit(-1)


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("consumer.config", "REQUIRED: properties of the consumers that read the source cluster "
                             "(bootstrap.servers, group.id, security settings, ...).", "config file")
    p.add("producer.config", "REQUIRED: properties of the producer that writes to the target cluster.",
          "config file")
    p.add("new.consumer", "Deprecated and without effect: the group consumer is the only one.")
    p.add("num.streams", "How many consumers copy in parallel (members of the same group).",
          "Number of threads", type=int, default=1)
    p.add("include", "The topics to copy: a regular expression; commas separate alternatives.",
          "Java regex (String)")
    p.add("whitelist", "Deprecated name of --include, used only when --include is absent.",
          "Java regex (String)")
    p.add("offset.commit.interval.ms", "How often the consumers' offsets are committed (after a flush of "
                                       "the producer).", "offset commit interval in millisecond",
          type=int, default=60000)
    p.add("consumer.rebalance.listener", "A Python class (package.module.Class) told of the consumers' "
                                         "revoked and assigned partitions.",
          "A custom rebalance listener of type ConsumerRebalanceListener")
    p.add("rebalance.listener.args", "The string the rebalance listener class is built with.",
          "Arguments passed to custom rebalance listener constructor as a string.")
    p.add("message.handler", "A Python class (package.module.Class) whose handle(record) turns each record "
                             "read into the records to send.", "A custom message handler of type "
                                                               "MirrorMakerMessageHandler")
    p.add("message.handler.args", "The string the message handler class is built with.",
          "Arguments passed to message handler constructor.")
    p.add("abort.on.send.failure", "Whether a failed send stops the mirror maker (true) or only drops the "
                                   "record (false).", "Stop the entire mirror maker when a send failure occurs",
          default="true")
    return p


def load_class(name: str, args: str | None, what: str):
    module, _, attr = name.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), attr) if module else None
    except (ImportError, AttributeError, ValueError):
        cls = None
    if cls is None:
        raise ToolError(f"Class {name} cannot be found: --{what} takes a Python class, package.module.Class")
    return cls(args) if args is not None else cls()


def producer_settings(props: dict[str, str]) -> dict:
    """MirrorMaker's producer: its safe defaults, each overridable by --producer.config."""
    acks = props.get("acks", "all")
    return dict(acks=-1 if acks in ("all", "-1") else int(acks),
                max_in_flight=int(props.get("max.in.flight.requests.per.connection", 1)),
                retries=int(props.get("retries", 2147483647)),
                retry_backoff_ms=int(props.get("retry.backoff.ms", 100)),
                linger_ms=float(props.get("linger.ms", 5)), batch_size=int(props.get("batch.size", 16384)),
                compression=props.get("compression.type", "none"),
                request_timeout_ms=int(props.get("request.timeout.ms", 30000)))


def warn(message: str) -> None:
    print(f"WARN {message}", file=sys.stderr, flush=True)


class MirrorMaker:
    def __init__(self, o, consumer_props: dict[str, str], producer_props: dict[str, str]):
        self.o = o
        self.consumer_props = consumer_props
        self.producer_props = producer_props
        self.interval = o["offset.commit.interval.ms"] / 1000.0
        self.abort_on_failure = str(o["abort.on.send.failure"]).strip().lower() == "true"
        self.pattern = include_list(o["include"] if o.has("include") else o["whitelist"])
        self.handler = None
        if o.get("message.handler"):
            self.handler = load_class(o["message.handler"], o.get("message.handler.args"), "message.handler")
        self.listener = None
        if o.get("consumer.rebalance.listener"):
            self.listener = load_class(o["consumer.rebalance.listener"], o.get("rebalance.listener.args"),
                                       "consumer.rebalance.listener")
        self.stop = asyncio.Event()
        self.failed = False
        self.dropped = 0
        self.told_no_commit = False
        self.producer: Producer | None = None

    def records_for(self, r):
        if self.handler is not None:
            return list(self.handler.handle(r))
        return [(r.topic, None, None if r.timestamp < 0 else r.timestamp, r.key, r.value, r.headers)]

    def _sent(self, fut, topic):
        result = fut.result()
        if result.error is None:
            return
        self.dropped += 1
        e = result.error
        why = java_error(e.code, str(e)) if isinstance(e, KafkaError) and getattr(e, "code", None) else str(e)
        print(f"ERROR A record for topic {topic} could not be sent: {why}", file=sys.stderr, flush=True)
        if self.abort_on_failure and not self.failed:
            print("INFO Stopping: a send failed and abort.on.send.failure is true.", file=sys.stderr, flush=True)
            self.failed = True
            self.stop.set()

    async def run(self) -> int:
        producer_client = await cluster_from({"bootstrap-server": self.producer_props.get("bootstrap.servers")},
                                             self.producer_props,
                                             client_id=self.producer_props.get("client.id", "mirror-maker-producer"))
        self.producer = Producer(producer_client, **producer_settings(self.producer_props))
        streams = []
        clients = [producer_client]
        try:
            for i in range(self.o["num.streams"]):
                props = dict(self.consumer_props)
                props["client.id"] = f"{props.get('group.id')}-{i}"
                client = await cluster_from({"bootstrap-server": props.get("bootstrap.servers")}, props,
                                            client_id=props["client.id"])
                clients.append(client)
                streams.append(asyncio.ensure_future(self.stream(client, props)))
            done = await asyncio.gather(*streams, return_exceptions=True)
            errors = [e for e in done if isinstance(e, BaseException)]
            for e in errors:
                print(f"FATAL A mirror maker stream failed: {e}", file=sys.stderr, flush=True)
            if errors:
                self.failed = True
        finally:
            for t in streams:
                t.cancel()
            for c in clients:
                await c.close()
        if self.failed:
            print("FATAL The mirror maker stops abnormally.", file=sys.stderr, flush=True)
            return ABORTED
        return 0

    async def stream(self, client, props):
        settings = consumer_settings(props)
        offsets: dict = {}
        mm = self

        async def flush_and_commit():
            await mm.producer.flush()
            if mm.failed:
                if not mm.told_no_commit:
                    mm.told_no_commit = True
                    print("INFO Not committing offsets: stopping after a failed send.", file=sys.stderr,
                          flush=True)
                return
            if not offsets:
                return
            try:
                ok = await consumer.commit(dict(offsets))
            except (KafkaError, KafkaConnectionError) as e:
                warn(f"Failed to commit offsets: {e}")
                return
            if ok is False:
                warn("Failed to commit offsets: the group has rebalanced and given the partitions to another "
                     "member. If this happens often, raise the consumer's session.timeout.ms or "
                     "max.poll.interval.ms.")
                for tp in [tp for tp in offsets if tp not in consumer.owned]:
                    del offsets[tp]
            else:
                offsets.clear()

        class Listener:
            @staticmethod
            async def on_partitions_revoked(tps):
                await flush_and_commit()
                if mm.listener is not None and hasattr(mm.listener, "on_partitions_revoked"):
                    mm.listener.on_partitions_revoked(tps)

            @staticmethod
            def on_partitions_lost(tps):
                pass                       # as Kafka's: nothing to commit for a lost membership

            @staticmethod
            def on_partitions_assigned(tps):
                if mm.listener is not None and hasattr(mm.listener, "on_partitions_assigned"):
                    mm.listener.on_partitions_assigned(tps)

        consumer = Consumer(client, listener=Listener(), **settings)
        try:
            await consumer.subscribe(pattern=self.pattern)
            last_commit = time.monotonic()
            while not self.stop.is_set():
                poll = asyncio.ensure_future(consumer.poll(1.0))
                halt = asyncio.ensure_future(self.stop.wait())
                await asyncio.wait({poll, halt}, return_when=asyncio.FIRST_COMPLETED)
                halt.cancel()
                if not poll.done():
                    poll.cancel()
                    break
                for r in poll.result():
                    for topic, partition, ts, key, value, headers in self.records_for(r):
                        fut = await self.producer.send(topic, value, key=key, headers=headers or (),
                                                       partition=partition, timestamp=ts)
                        fut.add_done_callback(lambda f, t=topic: self._sent(f, t))
                    offsets[(r.topic, r.partition)] = r.offset + 1
                    if self.failed:
                        break
                if time.monotonic() - last_commit > self.interval:
                    await flush_and_commit()
                    last_commit = time.monotonic()
        finally:
            try:
                await flush_and_commit()
            finally:
                await consumer.close(commit=False)


async def execute(o) -> int:
    require(build_parser(), o, "consumer.config", "producer.config")
    if not o.has("include") and not o.has("whitelist"):
        raise ToolError("include list must be specified")
    consumer_props = load_properties(o["consumer.config"])
    producer_props = load_properties(o["producer.config"])
    consumer_props.setdefault("enable.auto.commit", "false")
    if not consumer_props.get("group.id"):
        raise ToolError("To use the group management or offset commit APIs, you must provide a valid group.id "
                        "in the consumer configuration.")
    for name, props in (("consumer", consumer_props), ("producer", producer_props)):
        if not props.get("bootstrap.servers"):
            raise ToolError(f"Missing required configuration \"bootstrap.servers\" in --{name}.config")
    try:
        consumer_settings(consumer_props)
        producer_settings(producer_props)
    except ValueError as e:
        raise ToolError(str(e)) from None
    if "partition.assignment.strategy" not in consumer_props:
        print("WARNING: with no partition.assignment.strategy in --consumer.config the consumers use Kafka's "
              "default (range first); org.apache.kafka.clients.consumer.RoundRobinAssignor spreads the "
              "partitions of many topics more evenly.", file=sys.stderr, flush=True)
    mm = MirrorMaker(o, consumer_props, producer_props)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, mm.stop.set)
    return await mm.run()


def main(argv=None) -> int:
    parser = build_parser()

    def body(args):
        warn("kafka-mirror-maker.sh is deprecated: Kafka 3.0 replaced it with the Connect-based MirrorMaker 2.")
        o = parse_or_exit(parser, args)
        return execute(o)
    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="ERROR ")


if __name__ == "__main__":
    sys.exit(main())

"""kafka-e2e-latency.sh: Kafka's EndToEndLatency with confluent-kafka (librdkafka) as the client.

    kafka-e2e-latency.sh broker_list topic num_messages producer_acks message_size_bytes [properties_file]

Each message is produced synchronously (linger 0, the given acks: 1 or all) and then polled by
a consumer placed at the end of the topic (fetch wait 0); the time from send to receipt is one
sample. Every 1000th sample is printed as ``<i>\\t<ms>``, then ``Avg latency: <ms> ms`` and
``Percentiles: 50th = .., 99th = .., 99.9th = ..`` (whole milliseconds), as Kafka prints them.
A missing topic is created with one partition and replication factor 1. The optional properties
file holds client settings (security); keys librdkafka does not know are dropped with a warning.
"""
from __future__ import annotations

import random
import sys
import time

from tools.common import ToolError, librdkafka_client, load_properties, run

USAGE = ("USAGE: java org.apache.kafka.tools.EndToEndLatency broker_list topic num_messages producer_acks "
         "message_size_bytes [optional] properties_file")
POLL_TIMEOUT_S = 60.0
JAVA_ONLY = {"key.serializer", "value.serializer", "key.deserializer", "value.deserializer", "buffer.memory",
             "max.block.ms", "send.buffer.bytes", "receive.buffer.bytes", "metadata.max.age.ms",
             "delivery.timeout.ms", "max.request.size", "partitioner.class", "interceptor.classes",
             "metric.reporters", "default.api.timeout.ms", "request.timeout.ms"}


def execute(args: list[str]) -> int:
    if len(args) not in (5, 6):
        raise ToolError(USAGE)
    brokers, topic = args[0], args[1]
    try:
        num, size = int(args[2]), int(args[4])
    except ValueError as e:
        raise ToolError(f"For input string: {str(e).split(': ', 1)[-1]}") from None
    acks = args[3]
    if acks not in ("1", "all"):
        raise ToolError("Latency testing requires synchronous acknowledgement. Please use 1 or all")
    props = load_properties(args[5]) if len(args) > 5 and args[5].strip() else {}
    try:
        import confluent_kafka as ck
    except ImportError:
        raise ToolError("kafka-e2e-latency.sh needs confluent-kafka (pip install confluent-kafka)") from None
    base = {k: v for k, v in props.items() if k not in JAVA_ONLY and not k.startswith("sasl.jaas")}
    base["bootstrap.servers"] = brokers
    base.setdefault("log_level", 2)
    producer = librdkafka_client(ck.Producer, {**base, "linger.ms": 0, "acks": acks}, "producer")
    consumer = librdkafka_client(ck.Consumer, {**base, "group.id": f"test-group-{int(time.time() * 1000)}",
                                         "enable.auto.commit": False, "auto.offset.reset": "latest",
                                         "fetch.wait.max.ms": 0, "fetch.queue.backoff.ms": 0}, "consumer")
    try:
        md = consumer.list_topics(timeout=30)
        if topic not in md.topics or md.topics[topic].error is not None:
            print(f'Topic "{topic}" does not exist. Will create topic with 1 partition(s) and replication '
                  f'factor = 1')
            from confluent_kafka.admin import AdminClient, NewTopic
            admin = AdminClient(base)           # kept: the futures fail once it is collected
            fut = admin.create_topics([NewTopic(topic, 1, 1)])[topic]
            try:
                fut.result(30)
            except Exception as e:
                print(f"Creation of topic {topic} failed")
                raise ToolError(str(e)) from None
            for _ in range(100):
                md = consumer.list_topics(topic, timeout=10)
                if md.topics[topic].error is None and md.topics[topic].partitions:
                    break
                time.sleep(0.1)
        parts = [ck.TopicPartition(topic, p, ck.OFFSET_END) for p in md.topics[topic].partitions]
        consumer.assign(parts)
        consumer.poll(0.5)              # take the end positions before the first send
        rng = random.Random(0)
        total = 0.0
        latencies = []
        for i in range(num):
            message = bytes([rng.randrange(26) + 65]) * size
            begin = time.perf_counter_ns()
            errors = []
            producer.produce(topic, message, on_delivery=lambda e, m: errors.append(e))
            producer.flush(POLL_TIMEOUT_S)
            if errors and errors[0] is not None:
                raise ToolError(f"the send failed: {errors[0]}")
            msg = consumer.poll(POLL_TIMEOUT_S)
            while msg is not None and msg.error() is not None:
                msg = consumer.poll(POLL_TIMEOUT_S)
            elapsed = time.perf_counter_ns() - begin
            if msg is None:
                raise ToolError(f"poll() timed out before finding a result (timeout:[{int(POLL_TIMEOUT_S * 1000)}])")
            if msg.value() != message:
                raise ToolError(f"The message read [{msg.value().decode(errors='replace')}] did not match the "
                                f"message sent [{message.decode()}]")
            if i % 1000 == 0:
                print(f"{i}\t{elapsed / 1e6}")
            total += elapsed
            latencies.append(elapsed // 1_000_000)
        print(f"Avg latency: {total / num / 1e6:.4f} ms")
        latencies.sort()
        p = [latencies[int(len(latencies) * q)] for q in (0.5, 0.99, 0.999)]
        print(f"Percentiles: 50th = {p[0]}, 99th = {p[1]}, 99.9th = {p[2]}")
    finally:
        consumer.close()
    return 0


def main(argv=None) -> int:
    return run(execute, sys.argv[1:] if argv is None else argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())

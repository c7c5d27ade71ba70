"""Protocol micro-benchmarks (prints figures; never asserted by tests).

    python bench/micro_protocol.py

* decode a Produce v9 request carrying one 1 MiB batch (records stay a memoryview)
* validate (CRC-32C) + patch (base offset, leader epoch) that batch
* encode a Fetch v12 response for 100 partitions whose records are file regions (header bytes only)
* decode + encode a Metadata v12 response with 1,000 partitions
"""
from __future__ import annotations

import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from protocol import api, records as rec  # noqa: E402
from protocol.messages import FetchResponse, MetadataResponse, ProduceRequest  # noqa: E402


def bench(name, fn, n):
    fn()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    print(f"{name:60s} {best * 1e6:10.2f} µs")
    return best


def main():
    value = os.urandom(1000)
    batch = rec.build_batch([(b"k%d" % i, value, [], 1700000000000 + i) for i in range(1040)])
    print(f"batch: {len(batch)} bytes")
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name="bench", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=bytes(batch))])])
    frame = bytearray(api.encode_request(api.make_request_header(0, 9, 1, "bench"), req))

    def decode_produce():
        header, body = api.decode_request(memoryview(frame))
        return body.topic_data[0].partition_data[0].records

    bench("decode Produce v9 request, one 1 MiB batch", decode_produce, 2000)

    records = decode_produce()

    def validate_patch():
        h = rec.read_header(records, 0)
        rec.validate_batch(records, h)
        rec.set_base_offset(records, 0, 123456)
        rec.set_partition_leader_epoch(records, 0, 7)

    bench("validate (CRC-32C) + patch that batch", validate_patch, 500)

    class Region:
        __slots__ = ("length",)

        def __init__(self, n):
            self.length = n

        def read(self):
            raise AssertionError("regions are not read by the encoder")

    R = FetchResponse
    resp = R(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        R.FetchableTopicResponse(topic="bench", topic_id=uuid.uuid4(), partitions=[
            R.PartitionData(partition_index=p, error_code=0, high_watermark=1000, last_stable_offset=1000,
                            log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
                            records=Region(16384)) for p in range(100)])])

    def encode_fetch():
        out = bytearray(4)
        regions = []
        api.encode_response_into(out, 1, resp, 1, 12, regions)
        return out, regions

    bench("encode Fetch v12 response header, 100 partitions (regions)", encode_fetch, 2000)

    M = MetadataResponse
    meta = M(throttle_time_ms=0, brokers=[M.MetadataResponseBroker(node_id=i, host="broker%d" % i, port=9092)
                                          for i in range(3)],
             cluster_id="abc", controller_id=1, topics=[
                 M.MetadataResponseTopic(error_code=0, name="topic-%d" % t, topic_id=uuid.uuid4(), partitions=[
                     M.MetadataResponsePartition(error_code=0, partition_index=p, leader_id=p % 3, leader_epoch=5,
                                                 replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2], offline_replicas=[])
                     for p in range(100)]) for t in range(10)])
    enc = meta.encode(12)

    def meta_roundtrip():
        return M.decode(enc, 12).encode(12)

    bench("decode + encode Metadata v12 response, 1,000 partitions", meta_roundtrip, 50)
    bench("  of which encode", lambda: meta.encode(12), 50)


if __name__ == "__main__":
    main()

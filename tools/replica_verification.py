"""kafka-replica-verification.sh: Kafka's ReplicaVerificationTool (deprecated in Kafka, as here),
which checks that every replica of the chosen partitions holds the same batches.

From the start offsets (--time: -1 latest, -2 earliest, or a timestamp), it fetches from every
broker that hosts replicas, all brokers at once, as the debugging consumer (replica id -2, which
any replica answers), then walks each partition's batches in step across its replicas up to their
high watermarks: the same last offset and the same CRC everywhere moves the partition's position
on.  Output lines, as Kafka's (dates as ``yyyy-MM-dd HH:mm:ss,SSS``):

    <date>: verification process is started
    <date>: max lag is L for partition T-P at offset O among N partitions     (every --report-interval-ms)
    <date>: partition T-P has unmatched checksum at offset O; replica A's checksum X; replica B's checksum Y
    <date>: partition T-P: replica A's offset O1 doesn't match replica B's offset O2   (then exit 1)

The lag is the highest high watermark among a partition's replicas less its verified position.
A replica that cannot answer (its broker is down) holds back its partitions until it answers
again.  It runs until SIGINT/SIGTERM (exit 0).
"""
from __future__ import annotations

import asyncio
import datetime
import signal
import struct
import sys
import time
from collections import defaultdict

from protocol.client import KafkaConnectionError
from protocol.errors import KafkaError
from protocol.messages import FetchRequest
from tools.common import (OptionParser, ToolError, check_invalid, cluster_from, include_list,
                          parse_or_exit, require, run)
from tools.kclient import list_offsets

DESCRIPTION = "Checks that all the replicas of a set of topics hold the same data."
DEBUGGING_REPLICA_ID = -2


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("broker-list", "REQUIRED: the brokers to contact first, host:port[,host:port...].",
          "hostname:port,...,hostname:port")
    p.add("fetch-size", "The most bytes one fetch asks of each partition.", "bytes", type=int, default=1048576)
    p.add("max-wait-ms", "How long each fetch may wait for data.", "ms", type=int, default=1000)
    p.add("topic-white-list", "Deprecated name of --topics-include.", "Java regex (String)", default=".*")
    p.add("topics-include", "The topics to check: a regular expression; commas separate alternatives.",
          "Java regex (String)", default=".*")
    p.add("time", "Where to start in each partition: a timestamp, or -1 (latest), -2 (earliest).",
          "timestamp/-1(latest)/-2(earliest)", type=int, default=-1)
    p.add("report-interval-ms", "How often the largest lag is reported.", "ms", type=int, default=30000)
    return p


def stamp(ms: float | None = None) -> str:
    t = datetime.datetime.fromtimestamp(time.time() if ms is None else ms / 1000)
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"


def batches(records):
    """(last offset, next offset, checksum) of each whole batch (or legacy message) in ``records``."""
    data = bytes(records or b"")
    pos = 0
    while pos + 17 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if end > len(data) or length < 5:
            return
        magic = data[pos + 16]
        if magic >= 2:
            if length < 49:
                return
            crc, = struct.unpack_from(">I", data, pos + 17)
            delta, = struct.unpack_from(">i", data, pos + 23)
            last = base + delta
        else:                                  # a legacy message: offset, size, crc, magic, ...
            crc, = struct.unpack_from(">I", data, pos + 12)
            last = base
        yield last, last + 1, crc
        pos = end


class Verifier:
    def __init__(self, replicas: dict, offsets: dict, report_interval_ms: int):
        self.replicas = replicas             # (topic, partition) -> [broker ids]
        self.offsets = offsets               # (topic, partition) -> verified position
        self.report_interval = report_interval_ms / 1000.0
        self.last_report = time.monotonic()

    def verify(self, fetched: dict) -> None:
        """``fetched``: (topic, partition) -> {broker: (high watermark, records)}."""
        max_lag, lag_tp, lag_offset = -1, None, -1
        for tp in sorted(self.replicas):
            per_replica = fetched.get(tp, {})
            iters = {b: batches(per_replica[b][1]) if b in per_replica else iter(())
                     for b in self.replicas[tp]}
            hws = {b: per_replica[b][0] if b in per_replica else -1 for b in self.replicas[tp]}
            max_hw = max(hws.values(), default=-1)
            in_all = True
            while in_all:
                first = None
                for b, it in iters.items():
                    batch = next(it, None)
                    if batch is None or batch[0] >= hws[b]:
                        in_all = False
                        continue
                    if first is None:
                        first = (b, *batch)
                        continue
                    if first[1] != batch[0]:
                        print(f"{stamp()}: partition {tp[0]}-{tp[1]}: replica {first[0]}'s offset {first[1]} "
                              f"doesn't match replica {b}'s offset {batch[0]}", flush=True)
                        raise SystemExit(1)
                    if first[3] != batch[2]:
                        print(f"{stamp()}: partition {tp[0]}-{tp[1]} has unmatched checksum at offset "
                              f"{batch[0]}; replica {first[0]}'s checksum {first[3]}; replica {b}'s checksum "
                              f"{batch[2]}", flush=True)
                if in_all:
                    self.offsets[tp] = first[2] if first is not None else -1
            if max_hw - self.offsets[tp] > max_lag:
                lag_offset = self.offsets[tp]
                max_lag = max_hw - lag_offset
                lag_tp = tp
        now = time.monotonic()
        if now - self.last_report > self.report_interval:
            name = "null" if lag_tp is None else f"{lag_tp[0]}-{lag_tp[1]}"
            print(f"{stamp()}: max lag is {max_lag} for partition {name} at offset {lag_offset} among "
                  f"{len(self.replicas)} partitions", flush=True)
            self.last_report = now


async def fetch_from(client, broker: int, tps: list, offsets: dict, o) -> dict:
    """One fetch of ``tps`` from ``broker`` as the debugging consumer: {tp: (hw, records)}; an
    unreachable broker or a partition error answers nothing for those partitions."""
    F = FetchRequest
    by_topic = defaultdict(list)
    for t, p in tps:
        by_topic[t].append(F.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=offsets[(t, p)],
                                            last_fetched_epoch=-1, log_start_offset=-1,
                                            partition_max_bytes=o["fetch-size"]))
    req = F(cluster_id=None, replica_id=DEBUGGING_REPLICA_ID, max_wait_ms=o["max-wait-ms"], min_bytes=1,
            max_bytes=0x7FFFFFFF, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[F.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[], rack_id="")
    out = {}
    try:
        conn = await client.connection(broker)
        resp = await conn.send(req, max_version=12, timeout=o["max-wait-ms"] / 1000.0 + conn.request_timeout)
    except (KafkaConnectionError, KafkaError, OSError, asyncio.TimeoutError):
        await asyncio.sleep(min(1.0, o["max-wait-ms"] / 1000.0))
        return out
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code == 0:
                out[(t.topic, p.partition_index)] = (p.high_watermark, p.records)
    return out


async def execute(o) -> int:
    print("WARN kafka-replica-verification.sh is deprecated in Kafka and may go away in a later release.",
          file=sys.stderr, flush=True)
    pattern = include_list(o["topics-include"] if o.has("topics-include") else o["topic-white-list"],
                           "{} is an invalid regex")
    client = await cluster_from({"bootstrap-server": o["broker-list"]}, {})
    try:
        await client.refresh_metadata(None)
        replicas = {}
        for name, t in sorted(client.topics.items()):
            if not pattern(name):
                continue
            for p in t.partitions:
                replicas[(name, p.partition_index)] = list(p.replica_nodes)
        if not replicas:
            print("ERROR No topics found: --topics-include filters out every topic, or there are none.",
                  file=sys.stderr, flush=True)
            return 1
        start = await list_offsets(client, sorted(replicas), o["time"])
        offsets = {}
        for tp, v in start.items():
            if isinstance(v, BaseException):
                raise ToolError(f"Could not find the start offset of {tp[0]}-{tp[1]}: {v}")
            offsets[tp] = v[0]
        by_broker = defaultdict(list)
        for tp, brokers in replicas.items():
            for b in brokers:
                by_broker[b].append(tp)
        verifier = Verifier(replicas, offsets, o["report-interval-ms"])
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(f"{stamp()}: verification process is started", flush=True)
        while not stop.is_set():
            work = asyncio.ensure_future(asyncio.gather(
                *(fetch_from(client, b, tps, offsets, o) for b, tps in sorted(by_broker.items()))))
            halt = asyncio.ensure_future(stop.wait())
            await asyncio.wait({work, halt}, return_when=asyncio.FIRST_COMPLETED)
            halt.cancel()
            if not work.done():
                work.cancel()
                break
            fetched: dict = defaultdict(dict)
            for b, answer in zip(sorted(by_broker), work.result()):
                for tp, data in answer.items():
                    fetched[tp][b] = data
            verifier.verify(fetched)
        return 0
    finally:
        await client.close()


def main(argv=None) -> int:
    parser = build_parser()

    def body(args):
        o = parse_or_exit(parser, args, DESCRIPTION)
        require(parser, o, "broker-list")
        check_invalid(parser, o, "topics-include", ["topic-white-list"])
        return execute(o)
    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())

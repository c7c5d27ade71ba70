"""kafka-delete-records.sh: move partitions' log start offsets forward (DeleteRecords)."""
from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict

from protocol.messages import DeleteRecordsRequest
from tools.common import OptionParser, ToolError, cluster_from, parse_or_exit, require, run
from tools.kclient import _err

DESCRIPTION = ("Removes the records before the given offsets from partitions; the partitions and "
               "offsets come from a JSON file.")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("bootstrap-server", "REQUIRED: broker address(es) to contact first, host:port[,host:port...].", "server(s) to use for bootstrapping")
    p.add("offset-json-file", "REQUIRED: JSON file giving, for each partition, the offset before which records go, e.g. "
                              '{"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], '
                              '"version": 1}. Offset -1 stands for the high watermark.',
          "Offset json file path")
    p.add("command-config", "Properties file with admin client settings (security, timeouts, client.id, ...).",
          "command config property file path")
    return p


def parse_offsets(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError:
        raise ToolError("The input string is not a valid JSON") from None
    if not isinstance(doc, dict):
        raise ToolError("The input string is not a valid JSON")
    version = doc.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    parts = doc.get("partitions")
    if parts is None:
        raise ToolError("Missing partitions field")
    out = {}
    dups = []
    for item in parts:
        try:
            tp = (str(item["topic"]), int(item["partition"]))
            off = int(item["offset"])
        except (KeyError, TypeError, ValueError):
            raise ToolError(f"Invalid partition entry {json.dumps(item)}") from None
        if tp in out:
            dups.append(f"{tp[0]}-{tp[1]}")
        out[tp] = off
    if dups:
        raise ToolError(f"Offset json file contains duplicate topic partitions: {','.join(dups)}")
    return out


async def execute(o):
    offsets = parse_offsets(o["offset-json-file"])
    client = await cluster_from(o)
    results = {}
    try:
        print("Executing records delete operation")
        await client.refresh_metadata(sorted({t for t, _ in offsets}))
        by_leader = defaultdict(list)
        for tp in offsets:
            leader = client.leader_for(*tp)
            if tp[0] not in client.topics:
                results[tp] = _err(3)
            elif leader < 0:
                results[tp] = _err(5)
            else:
                by_leader[leader].append(tp)
        R = DeleteRecordsRequest

        async def ask(leader, tps):
            topics = defaultdict(list)
            for t, p in tps:
                topics[t].append(R.DeleteRecordsPartition(partition_index=p, offset=offsets[(t, p)]))
            req = R(topics=[R.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in topics.items()],
                    timeout_ms=30000)
            resp = await client.send_to(leader, req)
            for t in resp.topics:
                for p in t.partitions:
                    results[(t.name, p.partition_index)] = (
                        _err(p.error_code) if p.error_code else p.low_watermark)

        await asyncio.gather(*(ask(ld, tps) for ld, tps in by_leader.items()))
    finally:
        await client.close()
    print("Records delete operation completed:")
    failed = False
    for (t, p) in offsets:
        v = results.get((t, p))
        if isinstance(v, BaseException) or v is None:
            failed = True
            print(f"partition: {t}-{p}\terror: {v}")
        else:
            print(f"partition: {t}-{p}\tlow_watermark: {v}")
    return 1 if failed else 0


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        require(p, o, "bootstrap-server", "offset-json-file")
        return execute(o)

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())

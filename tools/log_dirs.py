"""kafka-log-dirs.sh --describe: log directories, partition sizes and lags per broker."""
from __future__ import annotations

import asyncio
import json
import sys

from protocol.errors import error_name
from protocol.messages import DescribeLogDirsRequest
from tools.common import OptionParser, ToolError, cluster_from, parse_or_exit, raise_error, require, run

DESCRIPTION = ("Shows the log directories of brokers: their replicas, sizes and offset lags.")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("bootstrap-server", "REQUIRED: broker address(es) to contact first, host:port[,host:port...].", "The server(s) to use for bootstrapping")
    p.add("command-config", "Properties file with admin client settings (security, timeouts, client.id, ...).", "Admin client property file")
    p.add("describe", "REQUIRED: print, as JSON, the log directories of the brokers in --broker-list "
                     "(all brokers by default).")
    p.add("topic-list", "Comma-separated topics to show (default: all).", "Topic list")
    p.add("broker-list", "Comma-separated broker ids to query (default: every broker).",
          "Broker list")
    return p


def ints(text, what):
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ToolError(f"Invalid {what}: {text}") from None


async def execute(o):
    topics = {t.strip() for t in (o.get("topic-list") or "").split(",") if t.strip()}
    wanted = ints(o["broker-list"], "broker list") if o.get("broker-list") else []
    client = await cluster_from(o)
    try:
        cluster = sorted(client.nodes)
        missing = sorted(set(wanted) - set(cluster))
        if missing:
            raise ToolError(f"ERROR: The given brokers do not exist from --broker-list: "
                            f"{','.join(map(str, missing))}. Current existent brokers: "
                            f"{','.join(map(str, cluster))}")
        brokers = sorted(set(wanted)) if wanted else cluster
        print("Querying brokers for log directories information")
        req = DescribeLogDirsRequest(topics=None)
        resps = await asyncio.gather(*(client.send_to(b, req) for b in brokers))
    finally:
        await client.close()
    out = []
    for b, resp in zip(brokers, resps):
        raise_error(getattr(resp, "error_code", 0))
        dirs = []
        for r in resp.results:
            parts = []
            for t in r.topics:
                if topics and t.name not in topics:
                    continue
                for p in t.partitions:
                    parts.append({"partition": f"{t.name}-{p.partition_index}",
                                  "size": p.partition_size, "offsetLag": p.offset_lag,
                                  "isFuture": p.is_future_key})
            dirs.append({"partitions": parts,
                         "error": error_name(r.error_code) if r.error_code else None,
                         "logDir": r.log_dir})
        out.append({"broker": b, "logDirs": dirs})
    print(f"Received log directory information from brokers {','.join(map(str, brokers))}")
    print(json.dumps({"brokers": out, "version": 1}, separators=(",", ":")))


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        require(p, o, "bootstrap-server")
        require(p, o, "describe")
        return execute(o)

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())

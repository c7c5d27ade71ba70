"""kafka-get-offsets.sh: print topic:partition:offset for the chosen time."""
from __future__ import annotations

import re
import sys

from tools.common import (OptionParser, ToolError, cluster_from, internal_topic, parse_or_exit,
                          require, run, topic_matcher)
from tools.kclient import list_offsets

DESCRIPTION = ("Prints topic:partition:offset for each matching partition, at the end, the start, "
               "or a point in time.")
TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4,
         "latest-tiered": -5}
RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("bootstrap-server", "REQUIRED: broker address(es) to contact first, "
                              "host:port[,host:port...].", "HOST1:PORT1,...,HOST3:PORT3",
          alias=("broker-list",))
    p.add("topic-partitions", "Comma-separated topic:partition rules, each "
                              "'topic_regex[:partition|:start-end]' (an open end is allowed). "
                              "Not with --topic or --partitions.",
          "topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3")
    p.add("topic", "The topic (a regular expression; default: every topic).", "topic")
    p.add("partitions", "Comma-separated partition ids (default: every partition).",
          "partition ids")
    p.add("time", "-1/latest, -2/earliest, -3/max-timestamp, -4/earliest-local, -5/latest-tiered, "
                  "or a timestamp in ms: the first offset whose record timestamp is at or after it.",
          "<timestamp> / -1 or latest / -2 or earliest / -3 or max-timestamp",
          default="latest")
    p.add("command-config", "Properties file with admin client settings (security, timeouts, client.id, ...).",
          "config file")
    p.add("exclude-internal-topics", "Leave internal topics out.")
    return p


def parse_time(text: str) -> int:
    if text in TIMES:
        return TIMES[text]
    try:
        return int(text)
    except ValueError:
        raise ToolError(f"Malformed time argument {text}. Please use -1 or latest / -2 or "
                        f"earliest / -3 or max-timestamp / -4 or earliest-local / -5 or "
                        f"latest-tiered, or a specified long format timestamp") from None


def build_filter(o):
    if o.get("topic-partitions"):
        rules = []
        for spec in o["topic-partitions"].split(","):
            m = RULE.fullmatch(spec)
            if not m:
                raise ToolError(f"Invalid rule specification: {spec}")
            g = [x if x else None for x in m.groups()]
            tmatch = topic_matcher(g[0] or ".*")
            if g[1] is not None:
                lo, hi = int(g[1]), int(g[1]) + 1
            elif g[2] is not None or g[3] is not None or (m.group(3) == "" and ":" in spec):
                lo = int(g[2]) if g[2] else 0
                hi = int(g[3]) if g[3] else 1 << 31
            else:
                lo, hi = 0, 1 << 31
            rules.append((tmatch, lo, hi))
        return (lambda t: any(r[0](t) for r in rules),
                lambda t, p: any(r[0](t) and r[1] <= p < r[2] for r in rules))
    tmatch = topic_matcher(o.get("topic") or ".*")
    parts = None
    if o.get("partitions"):
        try:
            parts = {int(x) for x in o["partitions"].split(",")}
        except ValueError:
            raise ToolError("--partitions expects a comma separated list of numeric partition "
                            f"ids, but received: {o['partitions']}") from None
    return tmatch, (lambda t, p: parts is None or p in parts)


async def execute(o):
    if o.has("topic-partitions") and (o.has("topic") or o.has("partitions")):
        raise ToolError("--topic-partitions cannot be used with --topic or --partitions")
    ts = parse_time(o["time"])
    if ts in (-4, -5):
        raise ToolError("earliest-local and latest-tiered need tiered storage, which this "
                        "broker does not have")
    tfilter, pfilter = build_filter(o)
    client = await cluster_from(o, client_id="GetOffsetShell")
    try:
        await client.refresh_metadata(None)
        tps = []
        for name, t in client.topics.items():
            if o.has("exclude-internal-topics") and (t.is_internal or internal_topic(name)):
                continue
            if not tfilter(name):
                continue
            tps += [(name, p.partition_index) for p in t.partitions if pfilter(name, p.partition_index)]
        if not tps:
            raise ToolError("Could not match any topic-partitions with the specified filters")
        res = await list_offsets(client, tps, ts)
    finally:
        await client.close()
    lines = []
    for (t, p) in sorted(tps, key=lambda tp: f"{tp[0]}-{tp[1]}"):
        v = res.get((t, p))
        if isinstance(v, BaseException):
            print(f"Skip getting offsets for topic-partition {t}-{p} due to error: {v}",
                  file=sys.stderr)
            continue
        if v is None or v[0] < 0:
            continue
        lines.append(f"{t}:{p}:{v[0]}")
    if lines:
        print("\n".join(lines))


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        require(p, o, "bootstrap-server")
        return execute(o)

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="Error occurred: ")


if __name__ == "__main__":
    sys.exit(main())

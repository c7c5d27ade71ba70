"""kafka-leader-election.sh: preferred or unclean leader election (ElectLeaders) for one
partition, the partitions of a JSON file, or every partition."""
from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict

from protocol.messages import ElectLeadersRequest
from tools.common import (OptionParser, ToolError, cluster_from, command_config, java_error,
                          parse_or_exit, raise_error, run)

DESCRIPTION = ("Asks the controller to choose new leaders for some or all partitions, either "
               "giving leadership back to the preferred replica or (unclean) to a replica outside the ISR.")
ELECTION_TYPES = {"preferred": 0, "unclean": 1}
ELECTION_NOT_NEEDED = 84
NOT_CONTROLLER = 41


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("bootstrap-server", "REQUIRED: broker address(es) to contact first, host:port[,host:port...].",
          "host:port")
    p.add("command-config", "Properties file with admin client settings (security, timeouts, client.id, ...).", "Config file")
    p.add("admin.config", "(DEPRECATED) The same as --command-config.", "config file")
    p.add("path-to-json-file", "JSON file naming the partitions to act on, e.g. "
          '{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foobar", "partition": '
          '2}]}. Excludes --all-topic-partitions and --topic.', "Path to JSON file")
    p.add("topic", "Act on one partition of this topic (named by --partition). Excludes "
                   "--path-to-json-file and --all-topic-partitions.", "topic name")
    p.add("partition", "Partition number of the --topic partition; --topic needs it.",
          "partition id", type=int)
    p.add("all-topic-partitions", "Act on every partition where the --election-type election "
          "would change something. Excludes --topic and --path-to-json-file.")
    p.add("election-type", 'REQUIRED: "preferred" (move leadership back to the first replica '
          'when it is in sync and the current leader is another one) or "unclean" (give a '
          "leaderless partition a leader outside the ISR).", "election type")
    return p


class CommandFailed(ToolError):
    pass


def validate(o):
    missing = [n for n in ("bootstrap-server", "election-type") if not o.has(n)]
    if missing:
        raise CommandFailed("Missing required option(s): " + ", ".join(missing))
    if o.has("admin.config") and o.has("command-config"):
        raise CommandFailed('Option "[admin.config]" can\'t be used with option '
                            '"[command-config]"')
    etype = (o["election-type"] or "").strip().lower()
    if etype not in ELECTION_TYPES:
        raise CommandFailed(f"Cannot parse argument '{o['election-type']}' of option "
                            "election-type: must be one of PREFERRED, UNCLEAN")
    scopes = ["topic", "all-topic-partitions", "path-to-json-file"]
    if sum(1 for s in scopes if o.has(s)) != 1:
        raise CommandFailed("One and only one of the following options is required: "
                            + ", ".join(scopes))
    if o.has("topic") and not o.has("partition"):
        raise CommandFailed("Missing required option(s): partition")
    if o.has("partition") and not o.has("topic"):
        raise CommandFailed("Option partition is only allowed if topic is used")
    return etype


def parse_election_file(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise CommandFailed(f"{path} ({e.strerror or e})") from None
    except ValueError:
        raise CommandFailed("Replica election data is empty") from None
    if not isinstance(doc, dict) or "partitions" not in doc:
        raise CommandFailed('Replica election data is missing "partitions" field')
    tps = []
    for item in doc["partitions"] or []:
        if not isinstance(item, dict) or not isinstance(item.get("topic"), str) \
                or not isinstance(item.get("partition"), int) or isinstance(item.get("partition"), bool):
            raise CommandFailed(f"Invalid partition entry {json.dumps(item)}: needs a string "
                                "\"topic\" and an integer \"partition\"")
        tps.append((item["topic"], item["partition"]))
    dups = sorted({tp for tp in tps if tps.count(tp) > 1})
    if dups:
        raise CommandFailed("Replica election data contains duplicate partitions: ["
                            + ", ".join(f"{t}-{p}" for t, p in dups) + "]")
    return sorted(set(tps))


async def elect(client, etype: str, tps):
    code = ELECTION_TYPES[etype]
    R = ElectLeadersRequest
    if tps is None:
        topic_partitions = None
    else:
        by_topic = defaultdict(list)
        for t, p in tps:
            by_topic[t].append(p)
        topic_partitions = [R.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]
    conn = await client.any_connection()
    version = conn.pick_version(R.API_KEY)
    if code != 0 and version < 1:
        raise CommandFailed("The broker supports only preferred leader election (ElectLeaders v0)")
    req = R(election_type=code, topic_partitions=topic_partitions, timeout_ms=30000)
    for attempt in range(8):
        resp = await client.send_to_controller(req)
        if resp.error_code != NOT_CONTROLLER:
            break
        await asyncio.sleep(min(0.2 * (attempt + 1), 1.0))
        client.controller_id = -1
        await client.refresh_metadata(topics=[])
    if resp.error_code == 31:
        print("Not authorized to perform leader election")
        raise CommandFailed("Not authorized to perform leader election")
    raise_error(resp.error_code, None)
    results = {}
    for r in resp.replica_election_results:
        for p in r.partition_result:
            results[(r.topic, p.partition_id)] = (p.error_code, p.error_message)
    return results


async def execute(o, etype):
    if o.has("path-to-json-file"):
        tps = parse_election_file(o["path-to-json-file"])
    elif o.has("topic"):
        tps = [(o["topic"], o["partition"])]
    else:
        tps = None
    props = command_config(o, "admin.config" if o.has("admin.config") else "command-config")
    if o.has("admin.config"):
        print("Option --admin.config has been deprecated and will be removed in a future "
              "version. Use --command-config instead.")
    props.setdefault("default.api.timeout.ms", "30000")
    props.setdefault("request.timeout.ms", "15000")
    client = await cluster_from(o, props, client_id="leader-election-tool")
    try:
        results = await elect(client, etype, tps)
    finally:
        await client.close()
    name = etype.upper()
    ok = sorted(tp for tp, (err, _) in results.items() if err == 0)
    noop = sorted(tp for tp, (err, _) in results.items() if err == ELECTION_NOT_NEEDED)
    failed = sorted((tp, err, msg) for tp, (err, msg) in results.items()
                    if err not in (0, ELECTION_NOT_NEEDED))
    if ok:
        print(f"Successfully completed leader election ({name}) for partitions "
              + ", ".join(f"{t}-{p}" for t, p in ok))
    if noop:
        print("Valid replica already elected for partitions "
              + ", ".join(f"{t}-{p}" for t, p in noop))
    if failed:
        for (t, p), err, msg in failed:
            print(f"Error completing leader election ({name}) for partition: {t}-{p}: "
                  f"{java_error(err, msg)}")
        raise CommandFailed(f"{len(failed)} replica(s) could not be elected")
    return 0


def main(argv=None) -> int:
    p = build_parser()
    argv = sys.argv[1:] if argv is None else argv

    def body(args):
        o = parse_or_exit(p, args, DESCRIPTION)
        etype = validate(o)
        return execute(o, etype)

    return run(body, argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())

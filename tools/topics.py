"""kafka-topics.sh: create, list, describe, alter (partitions) and delete topics.

Topics refused with THROTTLING_QUOTA_EXCEEDED (a ``controller_mutation_rate`` quota) are sent
again after the answer's throttle time until the API timeout, as Java's admin client does by
default (``retryOnQuotaViolation``), so the tool waits out the quota as Kafka's does.
"""
from __future__ import annotations

import asyncio
import sys
import time

from protocol.messages import (CreatePartitionsRequest, CreateTopicsRequest,
                               DeleteTopicsRequest, DescribeConfigsRequest,
                               ListPartitionReassignmentsRequest)
from tools.common import (OptionParser, ToolError, check_invalid, cluster_from, fmt_uuid,
                          internal_topic, parse_or_exit, raise_error, require, run,
                          standard_options, topic_matcher)

DESCRIPTION = "Creates, lists, describes, deletes topics, or adds partitions to them."
ACTIONS = ["list", "describe", "create", "alter", "delete"]
TOPIC_RESOURCE = 2
DEFAULT_CONFIG_SOURCE = 5
THROTTLING_QUOTA_EXCEEDED = 89


async def to_controller_retrying_quota(client, make, entries, name_of, version=None):
    """Send ``make(None)`` to the controller; while topics come back THROTTLING_QUOTA_EXCEEDED and
    the client's API timeout has not passed, wait the throttle time and send ``make(names)`` for
    just those.  The last result of each topic, in the first answer's order."""
    deadline = time.monotonic() + client.timeout
    final = {}
    names = None
    while True:
        resp = await client.send_to_controller(make(names), version=version)
        retry = []
        for r in entries(resp):
            final[name_of(r)] = r
            if r.error_code == THROTTLING_QUOTA_EXCEEDED and time.monotonic() < deadline:
                retry.append(name_of(r))
        if not retry:
            return list(final.values())
        wait = max(getattr(resp, "throttle_time_ms", 0) or 0, 100) / 1000
        await asyncio.sleep(min(wait, max(deadline - time.monotonic(), 0.0)))
        names = retry


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    standard_options(p, "Properties file with admin client settings (security, timeouts, client.id, ...).")
    p.add("list", "Print the names of the topics (or of those matching --topic).")
    p.add("create", "Make the topic named by --topic.")
    p.add("delete", "Remove every topic matching --topic.")
    p.add("alter", "Change the number of partitions (and their replica assignment). Topic "
                   "configurations are changed with kafka-configs.sh.")
    p.add("describe", "Print partitions, leaders, replicas, ISR and configuration overrides of the "
                      "matching topics.")
    p.add("topic", "Which topic(s) to act on. With --create it is the new topic's name; with the "
                   "other actions it is a regular expression that must match a whole topic name.",
          "topic")
    p.add("topic-id", "With --describe: select the topic by its id instead of its name.", "topic-id")
    p.add("config", "A topic configuration override, name=value (repeatable); only with "
                    "--create.", "name=value", multi=True)
    p.add("partitions", "Partition count for --create (default: the broker's num.partitions) "
                        "or the new, larger count for --alter.", "# of partitions", type=int)
    p.add("replication-factor", "Replication factor for --create (default: the broker's "
                                "default.replication.factor).", "replication factor", type=int)
    p.add("replica-assignment", "Explicit replica placement, partitions separated by ',' and "
                                "the brokers of one partition by ':'.",
          "broker_id_for_part1_replica1 : broker_id_for_part1_replica2 , "
          "broker_id_for_part2_replica1 : broker_id_for_part2_replica2 , ...")
    p.add("under-replicated-partitions", "With --describe, show only partitions whose ISR is "
                                         "smaller than their replica set.")
    p.add("unavailable-partitions", "With --describe, show only partitions without an "
                                    "available leader.")
    p.add("under-min-isr-partitions", "With --describe, show only partitions whose ISR is "
                                      "below min.insync.replicas.")
    p.add("at-min-isr-partitions", "With --describe, show only partitions whose ISR equals "
                                   "min.insync.replicas.")
    p.add("topics-with-overrides", "With --describe, show only topics with overridden "
                                   "configurations.")
    p.add("if-exists", "With --alter, --delete or --describe, do nothing (successfully) when "
                       "no topic matches.")
    p.add("if-not-exists", "With --create, do nothing (successfully) when the topic exists.")
    p.add("exclude-internal", "Leave internal topics out of --list and --describe.")
    p.add("partition-size-limit-per-response", "Accepted and ignored.",
          "maximum number of partitions per response", type=int)
    return p


def check_args(p: OptionParser, o):
    actions = [a for a in ACTIONS if o.has(a)]
    if len(actions) != 1:
        p.usage_exit("Command must include exactly one action: --list, --describe, --create, "
                     "--alter or --delete")
    require(p, o, "bootstrap-server")
    action = actions[0]
    if action not in ("list", "describe"):
        require(p, o, "topic")
    if action == "alter" and not o.has("partitions") and not o.has("replica-assignment"):
        p.usage_exit("--alter needs --partitions (to change topic configurations use "
                     "kafka-configs.sh)")
    report = ["under-replicated-partitions", "unavailable-partitions",
              "under-min-isr-partitions", "at-min-isr-partitions", "topics-with-overrides"]
    others = lambda keep: [a for a in ACTIONS if a not in keep]  # noqa: E731
    check_invalid(p, o, "config", others(["create"]))
    check_invalid(p, o, "partitions", others(["create", "alter"]))
    check_invalid(p, o, "replication-factor", others(["create"]) + ["replica-assignment"])
    check_invalid(p, o, "replica-assignment", others(["create", "alter"]))
    if o.has("create"):
        check_invalid(p, o, "replica-assignment", ["partitions", "replication-factor"])
    for r in report:
        check_invalid(p, o, r, others(["describe"]))
    check_invalid(p, o, "if-exists", others(["alter", "delete", "describe"]))
    check_invalid(p, o, "if-not-exists", others(["create"]))
    check_invalid(p, o, "exclude-internal", others(["list", "describe"]))
    return action


def parse_replica_assignment(text: str) -> list[list[int]]:
    out = []
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise ToolError(f"Invalid replica assignment '{text}'") from None
        dups = sorted({b for b in brokers if brokers.count(b) > 1})
        if dups:
            raise ToolError("Partition replica lists may not contain duplicate entries: "
                            + ",".join(map(str, dups)))
        if out and len(brokers) != len(out[0]):
            raise ToolError(f"Partition {i} has different replication factor: "
                            f"[{', '.join(map(str, brokers))}]")
        out.append(brokers)
    return out


def parse_configs(items) -> dict[str, str]:
    configs = {}
    for item in items:
        parts = [x.strip() for x in item.split("=")]
        if len(parts) != 2 or not parts[0]:
            raise ToolError('Invalid topic config: all configs to be added must be in the '
                            'format "key=val".')
        configs[parts[0]] = parts[1]
    return configs


async def matching_topics(client, pattern, exclude_internal):
    await client.refresh_metadata(topics=None)
    match = topic_matcher(pattern)
    names = sorted(client.topics)
    return [n for n in names if match(n)
            and not (exclude_internal and (client.topics[n].is_internal or internal_topic(n)))]


def ensure_found(found, pattern, required):
    if pattern and required and not found:
        raise ToolError(f"Topic '{pattern}' does not exist as expected")


async def create(client, o):
    name = o["topic"]
    if "." in name or "_" in name:
        print("WARNING: Topic names containing a period ('.') or an underscore ('_') may "
              "collide in metric names; use one or the other, not both.")
    rf = o.get("replication-factor")
    parts = o.get("partitions")
    if rf is not None and not 1 <= rf <= 32767:
        raise ToolError("The replication factor must be between 1 and 32767 inclusive")
    if parts is not None and parts < 1:
        raise ToolError("The partitions must be greater than 0")
    configs = parse_configs(o["config"])
    T = CreateTopicsRequest
    topic = T.CreatableTopic(name=name, num_partitions=-1 if parts is None else parts,
                             replication_factor=-1 if rf is None else rf)
    if o.get("replica-assignment"):
        assignment = parse_replica_assignment(o["replica-assignment"])
        topic.num_partitions = -1
        topic.replication_factor = -1
        topic.assignments = [T.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                             for i, b in enumerate(assignment)]
    topic.configs = [T.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()]
    conn = await client.any_connection()
    version = conn.pick_version(T.API_KEY)
    if version < 4 and (topic.num_partitions < 0 or topic.replication_factor < 0) \
            and not topic.assignments:
        raise ToolError("this broker needs explicit --partitions and --replication-factor")
    results = await to_controller_retrying_quota(
        client, lambda _: T(topics=[topic], timeout_ms=30000), lambda resp: resp.topics, lambda r: r.name)
    for r in results:
        if r.error_code == 36 and o.has("if-not-exists"):
            return
        raise_error(r.error_code, r.error_message)
    print(f"Created topic {name}.")


async def list_topics(client, o):
    topics = await matching_topics(client, o.get("topic"), o.has("exclude-internal"))
    print("\n".join(topics))


async def describe_configs(client, names):
    if not names:
        return {}
    R = DescribeConfigsRequest
    req = R(resources=[R.DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=n,
                                                 configuration_keys=None) for n in names],
            include_synonyms=False)
    try:
        resp = await client.send_any(req)
    except Exception as e:  # a broker without DescribeConfigs: describe without configs
        if "does not support" in str(e):
            return {n: [] for n in names}
        raise
    out = {}
    for r in resp.results:
        raise_error(r.error_code, r.error_message)
        out[r.resource_name] = r.configs
    return out


def non_default(configs):
    res = []
    for c in configs:
        source = getattr(c, "config_source", None)
        default = (c.is_default if source in (None, -1) and hasattr(c, "is_default")
                   else source == DEFAULT_CONFIG_SOURCE)
        if not default:
            res.append(c)
    return res


def config_int(configs, name, default):
    for c in configs:
        if c.name == name and c.value is not None:
            try:
                return int(c.value)
            except ValueError:
                return default
    return default


async def ongoing_reassignments(client, names):
    """{(topic, partition): (adding, removing)} from ListPartitionReassignments; empty when the
    broker does not offer it or refuses (as Kafka's tool does)."""
    if not names:
        return {}
    R = ListPartitionReassignmentsRequest
    req = R(timeout_ms=30000, topics=[
        R.ListPartitionReassignmentsTopics(
            name=n, partition_indexes=[p.partition_index for p in client.topics[n].partitions])
        for n in names])
    try:
        resp = await client.send_to_controller(req)
    except Exception:
        return {}
    if resp.error_code:
        return {}
    return {(t.name, p.partition_index): (list(p.adding_replicas), list(p.removing_replicas))
            for t in resp.topics or [] for p in t.partitions or []}


def replication_factor(p, moving) -> int:
    """Kafka's count: while a reassignment runs, the replicas being added do not count."""
    return len(p.replica_nodes) - (len(moving[0]) if moving else 0)


async def describe(client, o):
    pattern = o.get("topic")
    topic_id = o.get("topic-id")
    names = await matching_topics(client, pattern if not topic_id else None,
                                  o.has("exclude-internal"))
    if topic_id:
        names = [n for n in names if fmt_uuid(client.topics[n].topic_id) == topic_id]
        if not names and not o.has("if-exists"):
            raise ToolError(f"TopicId '{topic_id}' does not exist as expected")
    else:
        ensure_found(names, pattern, not o.has("if-exists"))
    configs = await describe_configs(client, names)
    live = set(client.nodes)
    reassignments = await ongoing_reassignments(client, names)
    report_flags = ["under-replicated-partitions", "unavailable-partitions",
                    "under-min-isr-partitions", "at-min-isr-partitions"]
    describe_topic_lines = not any(o.has(f) for f in report_flags)
    describe_partitions = not o.has("topics-with-overrides")
    out = []
    for name in names:
        t = client.topics[name]
        cfg = configs.get(name, [])
        overrides = non_default(cfg)
        parts = sorted(t.partitions, key=lambda p: p.partition_index)
        if describe_topic_lines and (not o.has("topics-with-overrides") or overrides):
            rf = replication_factor(parts[0], reassignments.get((name, parts[0].partition_index))) \
                if parts else 0
            line = f"Topic: {name}"
            tid = fmt_uuid(t.topic_id) if getattr(t, "topic_id", None) is not None else None
            if tid and t.topic_id.int != 0:
                line += f"\tTopicId: {tid}"
            line += f"\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}"
            line += "\tConfigs: " + ",".join(f"{c.name}={c.value}" for c in overrides)
            out.append(line)
        if not describe_partitions:
            continue
        min_isr = config_int(cfg, "min.insync.replicas", 1)
        for p in parts:
            has_leader = p.leader_id >= 0
            moving = reassignments.get((name, p.partition_index))
            show = describe_topic_lines
            if o.has("under-replicated-partitions") and \
                    len(p.isr_nodes) < replication_factor(p, moving):
                show = True
            if o.has("unavailable-partitions") and (not has_leader or p.leader_id not in live):
                show = True
            if o.has("under-min-isr-partitions") and (not has_leader or len(p.isr_nodes) < min_isr):
                show = True
            if o.has("at-min-isr-partitions") and len(p.isr_nodes) == min_isr:
                show = True
            if not show:
                continue
            line = (f"\tTopic: {name}\tPartition: {p.partition_index}"
                    f"\tLeader: {p.leader_id if has_leader else 'none'}"
                    f"\tReplicas: {','.join(map(str, p.replica_nodes))}"
                    f"\tIsr: {','.join(map(str, p.isr_nodes))}")
            if moving is not None:
                line += (f"\tAdding Replicas: {','.join(map(str, moving[0]))}"
                         f"\tRemoving Replicas: {','.join(map(str, moving[1]))}")
            out.append(line + "\tElr: N/A\tLastKnownElr: N/A")
    if out:
        print("\n".join(out))


async def alter(client, o):
    pattern = o["topic"]
    names = await matching_topics(client, pattern, o.has("exclude-internal"))
    ensure_found(names, pattern, not o.has("if-exists"))
    if not names:
        return
    count = o.get("partitions")
    R = CreatePartitionsRequest
    topics = []
    for name in names:
        current = len(client.topics[name].partitions)
        assignments = None
        if o.get("replica-assignment"):
            full = parse_replica_assignment(o["replica-assignment"])
            if count is None:
                count = len(full)
            assignments = [R.CreatePartitionsAssignment(broker_ids=b) for b in full[current:]]
        topics.append(R.CreatePartitionsTopic(name=name, count=count, assignments=assignments))
    results = await to_controller_retrying_quota(
        client, lambda retry: R(topics=[t for t in topics if retry is None or t.name in retry],
                                timeout_ms=30000, validate_only=False),
        lambda resp: resp.results, lambda r: r.name)
    for r in results:
        raise_error(r.error_code, r.error_message)


async def delete(client, o):
    pattern = o["topic"]
    names = await matching_topics(client, pattern, o.has("exclude-internal"))
    ensure_found(names, pattern, not o.has("if-exists"))
    if names:
        await delete_topics(client, names)


async def delete_topics(client, names: list[str]) -> None:
    """DeleteTopics on the controller (waiting out a mutation quota); the first error raised."""
    conn = await client.any_connection()
    version = conn.pick_version(DeleteTopicsRequest.API_KEY)

    def request(retry):
        todo = names if retry is None else [n for n in names if n in retry]
        if version >= 6:
            return DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=n)
                                               for n in todo], timeout_ms=30000)
        return DeleteTopicsRequest(topic_names=todo, timeout_ms=30000)
    results = await to_controller_retrying_quota(client, request, lambda resp: resp.responses,
                                                 lambda r: r.name, version=version)
    for r in results:
        raise_error(r.error_code, getattr(r, "error_message", None))


async def execute(o):
    action = o["_action"]
    client = await cluster_from(o)
    try:
        await {"create": create, "list": list_topics, "describe": describe,
               "alter": alter, "delete": delete}[action](client, o)
    finally:
        await client.close()


def main(argv=None) -> int:
    p = build_parser()
    argv = sys.argv[1:] if argv is None else argv

    def body(args):
        o = parse_or_exit(p, args, "Create, delete, describe, or change a topic.")
        o["_action"] = check_args(p, o)
        return execute(o)

    return run(body, argv, error_prefix="Error while executing topic command : ",
               error_stream=sys.stdout)


if __name__ == "__main__":
    sys.exit(main())

"""kafka-reassign-partitions.sh: generate, execute, verify, cancel and list partition
reassignments (KIP-455: AlterPartitionReassignments / ListPartitionReassignments).

Output and JSON follow Kafka's tool: ``{"version":1,"partitions":[{"topic":..,"partition":..,
"replicas":[..],"log_dirs":["any",..]}]}`` (compact, partitions sorted by topic then index).
Throttles are written as Kafka writes them (topic configs ``leader.|follower.replication.
throttled.replicas``, broker configs ``leader.|follower.replication.throttled.rate`` and, for
moves between log dirs, ``replica.alter.log.dirs.io.max.bytes.per.second``); Odradek brokers
enforce them (broker/quota.py, broker/log_dir_mover.py, docs/cluster.md).

A ``log_dirs`` entry other than ``any`` moves that replica to that log dir of its broker
(AlterReplicaLogDirs), retried every 100 ms until the replica exists there, for at most
``--timeout`` ms, as Kafka's tool does; ``--verify`` reports each such move's state with
Kafka's lines.
"""
from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict

from protocol.messages import (AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest,
                               DescribeLogDirsRequest, IncrementalAlterConfigsRequest,
                               ListPartitionReassignmentsRequest)
from tools.common import (OptionParser, ToolError, cluster_from, command_config, parse_or_exit,
                          raise_error, require, run)

DESCRIPTION = ("Moves partition replicas between brokers: proposes a plan, starts it, follows its "
               "progress, cancels it, or lists the moves under way.")
ACTIONS = ["generate", "execute", "verify", "cancel", "list"]
ANY_LOG_DIR = "any"
TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
BROKER_THROTTLES = [LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, ALTER_LOG_DIRS_RATE]
TOPIC_THROTTLES = [LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS]
NOT_CONTROLLER = 41
REPLICA_NOT_AVAILABLE = 9
EXISTING_REASSIGNMENT = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. The "
    "--additional flag can also be used to change the throttle by resubmitting the current "
    "reassignment.")
RUN_VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment "
                      "completes, to ensure the throttle is removed.")

# the options each action accepts besides itself and its required ones (Kafka's table)
PERMITTED = {
    "verify": ["bootstrap-server", "command-config", "preserve-throttles"],
    "generate": ["bootstrap-server", "broker-list", "command-config", "disable-rack-aware"],
    "execute": ["additional", "bootstrap-server", "command-config", "throttle",
                "replica-alter-log-dirs-throttle", "timeout", "disallow-replication-factor-change"],
    "cancel": ["bootstrap-server", "command-config", "preserve-throttles", "timeout"],
    "list": ["bootstrap-server", "command-config"],
}
REQUIRED = {
    "verify": ["reassignment-json-file"],
    "generate": ["topics-to-move-json-file", "broker-list"],
    "execute": ["reassignment-json-file"],
    "cancel": ["reassignment-json-file"],
    "list": [],
}


class Terse(ToolError):
    """Kafka's TerseException: printed as is (no "Error: " prefix), status 1."""


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("generate", "Propose a new assignment for the partitions of the topics in "
                      "--topics-to-move-json-file over the brokers of --broker-list. Nothing "
                      "is changed.")
    p.add("execute", "Submit the moves written in --reassignment-json-file.")
    p.add("verify", "Report whether the reassignment in --reassignment-json-file has "
                    "completed; once it has, remove the throttles it set.")
    p.add("cancel", "Cancel the active reassignments of the partitions in "
                    "--reassignment-json-file.")
    p.add("list", "Print the partitions whose replicas are being moved right now.")
    p.add("bootstrap-server", "REQUIRED: broker address(es) to contact first, host:port[,host:port...].",
          "Server(s) to use for bootstrapping")
    p.add("command-config", "Properties file with admin client settings (security, timeouts, client.id, ...).",
          "Admin client property file")
    p.add("reassignment-json-file", "The reassignment, as JSON:\n"
          '{"partitions": [{"topic": "foo", "partition": 1, "replicas": [1,2,3], '
          '"log_dirs": ["any","any","any"]}], "version": 1}\n"log_dirs" is optional; when '
          'given it has one entry per replica: "any", or the absolute path of the log '
          "directory of that broker the replica should move to.", "manual assignment json file path")
    p.add("topics-to-move-json-file", "The topics whose partitions --generate should move, "
          'as JSON: {"topics": [{"topic": "foo"}, {"topic": "foo1"}], "version": 1}',
          "topics to reassign json file path")
    p.add("broker-list", 'The brokers to move the partitions to, as "0,1,2" (with --generate).',
          "brokerlist")
    p.add("disable-rack-aware", "Place replicas without regard to broker.rack.")
    p.add("throttle", "With --execute: limit replication traffic of the moving partitions to "
                      "this many bytes/sec (written as the replication throttle configs; may "
                      "be changed by resubmitting with --additional).", "throttle", type=int,
          default=-1)
    p.add("replica-alter-log-dirs-throttle", "With --execute: limit moves between log "
          "directories of one broker to this many bytes/sec.", "replicaAlterLogDirsThrottle",
          type=int, default=-1)
    p.add("timeout", "With --execute: how long (ms) to keep asking brokers to start the log "
                     "directory moves of replicas they do not host yet.", "timeout", type=int,
          default=10000)
    p.add("additional", "With --execute: submit even while other moves are under way; "
                        "resubmitting the current plan this way updates its throttle.")
    p.add("preserve-throttles", "With --verify or --cancel: keep the throttle configs instead of "
                                "clearing them.")
    p.add("disallow-replication-factor-change", "With --execute: refuse any move that would change "
          "a partition's replication factor (Kafka 4.0, KIP-860).")
    return p


def validate(p: OptionParser, o) -> str:
    actions = [a for a in ACTIONS if o.has(a)]
    if len(actions) != 1:
        p.usage_exit("Command must include exactly one action: "
                     + ", ".join("--" + a for a in ACTIONS))
    action = actions[0]
    if not o.has("bootstrap-server"):
        p.usage_exit("Please specify either --bootstrap-server or --bootstrap-controller")
    require(p, o, *REQUIRED[action])
    allowed = {action, "help", "version"} | set(REQUIRED[action]) | set(PERMITTED[action])
    for name in p.specs:            # the parser's order, as joptsimple reports the first one
        if o.has(name) and name not in allowed:
            p.usage_exit(f'Option "[{name}]" can\'t be used with action "[{action}]"')
    return action


# =============================================================================================
# JSON
# =============================================================================================

def tp_str(tp) -> str:
    return f"{tp[0]}-{tp[1]}"


def tp_key(tp):
    return (tp[0], tp[1])


def read_json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ToolError(f"{path} ({e.strerror or e})") from None
    try:
        return json.loads(text)
    except ValueError as e:
        raise ToolError(f"The input string is not a valid JSON: {e}") from None


def _field(obj, name, kind, what):
    if not isinstance(obj, dict) or name not in obj:
        raise ToolError(f"Missing required field '{name}' in {what}")
    v = obj[name]
    ok = (isinstance(v, int) and not isinstance(v, bool)) if kind is int else isinstance(v, kind)
    if not ok:
        raise ToolError(f"Field '{name}' of {what} has the wrong type: {json.dumps(v)}")
    return v


def parse_reassignment(path: str):
    """[(tp, replicas)] in file order and {(topic, partition, broker): log_dir} for non-"any"."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise ToolError("The input string is not a valid JSON object")
    version = doc.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    parts = []
    log_dirs = {}
    for item in doc.get("partitions") or []:
        what = json.dumps(item)
        topic = _field(item, "topic", str, what)
        partition = _field(item, "partition", int, what)
        replicas = _field(item, "replicas", list, what)
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
            raise ToolError(f"Field 'replicas' of {what} must be a list of broker ids")
        dirs = item.get("log_dirs")
        if dirs is None:
            dirs = [ANY_LOG_DIR] * len(replicas)
        if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
            raise ToolError(f"Field 'log_dirs' of {what} must be a list of strings")
        if len(dirs) != len(replicas):
            raise ToolError(f"Size of replicas list {java_list(replicas)} is different from size "
                            f"of log dirs list {java_list(dirs)} for partition {topic}-{partition}")
        parts.append(((topic, partition), list(replicas)))
        for r, d in zip(replicas, dirs):
            if d != ANY_LOG_DIR:
                log_dirs[(topic, partition, r)] = d
    return parts, log_dirs


def java_list(items) -> str:
    return "[" + ", ".join(map(str, items)) + "]"


def check_execute_args(parts):
    if not parts:
        raise ToolError("Partition reassignment list cannot be empty")
    if any(not reps for _, reps in parts):
        raise ToolError("Partition replica list cannot be empty")
    seen, dups = set(), []
    for tp, _ in parts:
        if tp in seen and tp not in dups:
            dups.append(tp)
        seen.add(tp)
    if dups:
        raise ToolError("Partition reassignment contains duplicate topic partitions: "
                        + ",".join(tp_str(tp) for tp in dups))
    msgs = []
    for tp, reps in parts:
        d = sorted({r for r in reps if reps.count(r) > 1})
        if d:
            msgs.append(f"{tp_str(tp)} contains multiple entries for {','.join(map(str, d))}")
    if msgs:
        raise ToolError("Partition replica lists may not contain duplicate entries: "
                        + ". ".join(msgs))
    return dict(parts)


def format_reassignment_json(assignment: dict) -> str:
    """Kafka's compact JSON, partitions sorted by topic then partition."""
    parts = [{"topic": t, "partition": p, "replicas": list(reps),
              "log_dirs": [ANY_LOG_DIR] * len(reps)}
             for (t, p), reps in sorted(assignment.items(), key=lambda kv: tp_key(kv[0]))]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


def parse_topics_to_move(path: str) -> list[str]:
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise ToolError("The input string is not a valid JSON object")
    version = doc.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    return [_field(item, "topic", str, json.dumps(item)) for item in doc.get("topics") or []]


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b.strip()) for b in text.split(",")]
    except ValueError:
        raise ToolError(f'For input string: "{text}" (--broker-list takes broker ids like '
                        '"0,1,2")') from None
    return brokers


def duplicates(items) -> list:
    return sorted({x for x in items if items.count(x) > 1}, key=str)


# =============================================================================================
# Cluster helpers
# =============================================================================================

async def controller_call(client, request):
    """Send to the controller; on NOT_CONTROLLER refresh and retry (the controller moved)."""
    last = None
    for attempt in range(8):
        resp = await client.send_to_controller(request)
        if getattr(resp, "error_code", 0) != NOT_CONTROLLER:
            return resp
        last = resp
        await asyncio.sleep(min(0.2 * (attempt + 1), 1.0))
        client.controller_id = -1
        await client.refresh_metadata(topics=[])
    return last


def check_top_level(resp):
    if resp.error_code:
        raise_error(resp.error_code, resp.error_message or None)


async def list_reassignments(client, tps=None) -> dict:
    """{(topic, partition): (replicas, adding, removing)} of ongoing reassignments."""
    R = ListPartitionReassignmentsRequest
    if tps is None:
        topics = None
    else:
        by_topic = defaultdict(list)
        for t, p in sorted(set(tps)):
            by_topic[t].append(p)
        topics = [R.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
                  for t, ps in by_topic.items()]
    resp = await controller_call(client, R(timeout_ms=30000, topics=topics))
    check_top_level(resp)
    out = {}
    for t in resp.topics or []:
        for p in t.partitions or []:
            out[(t.name, p.partition_index)] = (list(p.replicas), list(p.adding_replicas),
                                                list(p.removing_replicas))
    return out


async def describe_assignment(client, topics) -> dict:
    """{(topic, partition): replicas} for every partition of ``topics`` (unknown: error)."""
    topics = sorted(set(topics))
    if topics:
        await client.refresh_metadata(topics)
    out = {}
    for name in topics:
        t = client.topics.get(name)
        if t is None:
            raise ToolError("org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
                            f"Topic {name} not found.")
        for p in t.partitions:
            out[(name, p.partition_index)] = list(p.replica_nodes)
    return out


async def alter_configs(client, resources):
    """resources: [(type, name, [(key, op, value)])]. Broker resources go to that broker."""
    R = IncrementalAlterConfigsRequest

    def req(items):
        return R(resources=[R.AlterConfigsResource(
            resource_type=rt, resource_name=name,
            configs=[R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])
            for rt, name, ops in items], validate_only=False)

    async def send(node, items):
        resp = await (client.send_to(node, req(items)) if node is not None
                      else controller_call(client, req(items)))
        for r in resp.responses:
            if r.error_code:
                raise_error(r.error_code, r.error_message,
                            context=f"{'Topic' if r.resource_type == TOPIC else 'Broker'} "
                                    f"{r.resource_name}: ")

    topics = [r for r in resources if r[0] == TOPIC]
    brokers = [r for r in resources if r[0] == BROKER]
    if topics:
        await send(None, topics)
    await asyncio.gather(*(send(int(r[1]), [r]) for r in brokers))


# =============================================================================================
# --generate
# =============================================================================================

async def generate(client, o):
    brokers = parse_broker_list(o["broker-list"])
    d = duplicates(brokers)
    if d:
        raise ToolError(f"Broker list contains duplicate entries: {java_list(d)}")
    topics = parse_topics_to_move(o["topics-to-move-json-file"])
    d = duplicates(topics)
    if d:
        raise ToolError(f"List of topics to reassign contains duplicate entries: {java_list(d)}")
    current = await describe_assignment(client, topics)
    await client.refresh_metadata(topics=[])
    rack_aware = not o.has("disable-rack-aware")
    wanted = set(brokers)
    found = {n.node_id: (n.rack if rack_aware else None)
             for n in client.nodes.values() if n.node_id in wanted}
    racked = [b for b, r in found.items() if r is not None]
    if rack_aware and racked and len(racked) != len(found):
        raise ToolError("Not all brokers have rack information. Add --disable-rack-aware in "
                        "command line to make replica assignment without rack information.")
    from controller.zookeeper.controller import assign_replicas_rack_aware
    by_topic = defaultdict(list)
    for (t, p), reps in current.items():
        by_topic[t].append((p, reps))
    proposed = {}
    for t, parts in by_topic.items():
        rf = len(min(parts)[1])
        if not found:
            raise ToolError(f"Replication factor: {rf} larger than available brokers: 0.")
        try:
            placed = assign_replicas_rack_aware(found, len(parts), rf)
        except ValueError as e:
            raise ToolError(str(e)) from None
        for p, reps in placed.items():
            proposed[(t, p)] = reps
    print("Current partition replica assignment")
    print(format_reassignment_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(format_reassignment_json(proposed))


# =============================================================================================
# --execute
# =============================================================================================

def move_map(current_reassignments: dict, proposed: dict, current: dict) -> dict:
    """{topic: {partition: (sources, destinations)}} as Kafka computes it for the throttles."""
    moves: dict[str, dict[int, tuple[set, set]]] = defaultdict(dict)
    for (t, p), (replicas, adding, _removing) in current_reassignments.items():
        moves[t][p] = (set(replicas) - set(adding), set(adding))
    for (t, p), replicas in proposed.items():
        if p in moves[t]:
            sources = set(moves[t][p][0])
        elif (t, p) in current:
            sources = set(current[(t, p)])
        else:
            raise ToolError(f"Trying to reassign a topic partition {t}-{p} with 0 replicas")
        moves[t][p] = (sources, set(replicas) - sources)
    return moves


def leader_throttles(moves) -> dict[str, str]:
    return {t: ",".join(sorted({f"{p}:{s}" for p, (src, _) in parts.items() for s in src}))
            for t, parts in moves.items()}


def follower_throttles(moves) -> dict[str, str]:
    return {t: ",".join(sorted({f"{p}:{d}" for p, (src, dst) in parts.items()
                                for d in dst if d not in src}))
            for t, parts in moves.items()}


async def execute(client, o):
    parts, log_dirs = parse_reassignment(o["reassignment-json-file"])
    proposed = check_execute_args(parts)
    ongoing = await list_reassignments(client)
    if ongoing and not o.has("additional"):
        raise Terse(EXISTING_REASSIGNMENT)
    await client.refresh_metadata(topics=[])
    live = set(client.nodes)
    unknown = sorted({b for reps in proposed.values() for b in reps} - live)
    if unknown:
        raise ToolError(f"Unknown broker id {unknown[0]}")
    described = await describe_assignment_tolerant(client, {t for t, _ in proposed})
    missing = [tp for tp in proposed if tp not in described]
    if missing:
        raise ToolError("org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Unable "
                        "to find partition: " + ", ".join(tp_str(tp) for tp in missing))
    current = {tp: described[tp] for tp in proposed}
    print("Current partition replica assignment")
    print()
    print(format_reassignment_json(current))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    throttle = o["throttle"]
    log_dir_throttle = o["replica-alter-log-dirs-throttle"]
    if throttle >= 0 or log_dir_throttle >= 0:
        print(RUN_VERIFY_WARNING)
        if throttle >= 0:
            moves = move_map(ongoing, proposed, current)
            lead, follow = leader_throttles(moves), follower_throttles(moves)
            resources = []
            for t in sorted(set(lead) | set(follow)):
                ops = []
                if t in lead:
                    ops.append((LEADER_THROTTLED_REPLICAS, SET, lead[t]))
                if t in follow:
                    ops.append((FOLLOWER_THROTTLED_REPLICAS, SET, follow[t]))
                resources.append((TOPIC, t, ops))
            involved = sorted({b for parts_ in moves.values() for src, dst in parts_.values()
                               for b in src | dst})
            for b in involved:
                if b in live:
                    resources.append((BROKER, str(b), [(LEADER_THROTTLED_RATE, SET, str(throttle)),
                                                       (FOLLOWER_THROTTLED_RATE, SET, str(throttle))]))
            await alter_configs(client, resources)
            print(f"The inter-broker throttle limit was set to {throttle} B/s")
        if log_dir_throttle >= 0:
            moving = sorted({b for (_, _, b) in log_dirs} & live)
            await alter_configs(client, [(BROKER, str(b), [(ALTER_LOG_DIRS_RATE, SET, str(log_dir_throttle))])
                                         for b in moving])
            print(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s")
    R = AlterPartitionReassignmentsRequest
    by_topic = defaultdict(list)
    for (t, p), reps in sorted(proposed.items(), key=lambda kv: tp_key(kv[0])):
        by_topic[t].append(R.ReassignablePartition(partition_index=p, replicas=list(reps)))
    resp = await controller_call(client, R(timeout_ms=60000,
                                           allow_replication_factor_change=not o.has("disallow-replication-factor-change"),
                                           topics=[R.ReassignableTopic(name=t, partitions=ps)
                                                   for t, ps in by_topic.items()]))
    check_top_level(resp)
    errors = partition_errors(resp)
    if errors:
        raise Terse("Error reassigning partition(s):\n" + "\n".join(
            f"{tp_str(tp)}: {msg}" for tp, msg in sorted(errors.items())))
    names = ",".join(tp_str(tp) for tp in sorted(proposed, key=tp_key))
    print(f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} "
          f"for {names}")
    if log_dirs:
        await execute_moves(client, log_dirs, o["timeout"])


def replica_str(r) -> str:
    """Kafka's TopicPartitionReplica: ``topic-partition-broker``."""
    return f"{r[0]}-{r[1]}-{r[2]}"


def replica_key(r):
    return r[2], r[0], r[1]         # Kafka's order: broker, then topic, then partition


def plural(n: int) -> str:
    return "" if n == 1 else "s"


async def execute_moves(client, log_dirs: dict, timeout_ms: int) -> None:
    """AlterReplicaLogDirs to each replica's broker until every move has started: a replica the
    broker does not host yet (REPLICA_NOT_AVAILABLE, its reassignment still running) is asked
    again every 100 ms, for ``timeout_ms`` at most; any other error ends the tool."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    pending = dict(log_dirs)
    while True:
        started = await alter_replica_log_dirs(client, pending)
        if started:
            print(f"Successfully started log directory move{plural(len(started))} for: "
                  + ",".join(replica_str(r) for r in sorted(started, key=replica_key)))
        for r in started:
            del pending[r]
        if not pending:
            return
        if loop.time() >= deadline:
            raise Terse(f"Timed out before log directory move{plural(len(pending))} could be "
                        "started for: " + ",".join(replica_str(r) for r in sorted(pending, key=replica_key)))
        await asyncio.sleep(0.1)


async def alter_replica_log_dirs(client, moves: dict) -> list:
    """The replicas whose move started (NONE); REPLICA_NOT_AVAILABLE ones are left out."""
    from protocol.errors import error_message
    R = AlterReplicaLogDirsRequest
    by_broker = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for (t, p, b), d in moves.items():
        by_broker[b][d][t].append(p)
    started = []

    async def send(b, dirs):
        resp = await client.send_to(b, R(dirs=[
            R.AlterReplicaLogDir(path=d, topics=[R.AlterReplicaLogDirTopic(name=t, partitions=ps)
                                                 for t, ps in topics.items()])
            for d, topics in dirs.items()]))
        for t in resp.results:
            for p in t.partitions:
                r = (t.topic_name, p.partition_index, b)
                if p.error_code == 0:
                    started.append(r)
                elif p.error_code != REPLICA_NOT_AVAILABLE:
                    raise ToolError(f"Failed to alter dir for {replica_str(r)}: "
                                    f"{error_message(p.error_code)}")

    await client.refresh_metadata(topics=[])
    for b in sorted(by_broker):
        if b in client.nodes:
            await send(b, by_broker[b])
    return started


async def describe_assignment_tolerant(client, topics) -> dict:
    await client.refresh_metadata(sorted(topics))
    out = {}
    for name in topics:
        t = client.topics.get(name)
        if t is not None:
            for p in t.partitions:
                out[(name, p.partition_index)] = list(p.replica_nodes)
    return out


def partition_errors(resp) -> dict:
    from protocol.errors import error_message
    out = {}
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code:
                out[(t.name, p.partition_index)] = p.error_message or error_message(p.error_code)
    return out


# =============================================================================================
# --verify / --cancel / --list
# =============================================================================================

async def clear_all_throttles(client, parts):
    await client.refresh_metadata(topics=[])
    brokers = set(client.nodes) | {b for _, reps in parts for b in reps}
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          + ",".join(map(str, sorted(brokers))))
    live = set(client.nodes)
    resources = [(BROKER, str(b), [(k, DELETE, None) for k in BROKER_THROTTLES])
                 for b in sorted(brokers) if b in live]
    topics = sorted({tp[0] for tp, _ in parts})
    await alter_configs(client, resources)
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} "
          + ",".join(topics))
    existing = await describe_assignment_tolerant(client, topics)
    present = sorted({t for t, _ in existing})
    await alter_configs(client, [(TOPIC, t, [(k, DELETE, None) for k in TOPIC_THROTTLES])
                                 for t in present])


async def verify(client, o):
    parts, log_dirs = parse_reassignment(o["reassignment-json-file"])
    ongoing = await list_reassignments(client)
    described = await describe_assignment_tolerant(client, {tp[0] for tp, _ in parts})
    lines = ["Status of partition reassignment:"]
    for tp, target in sorted(dict(parts).items(), key=lambda kv: tp_key(kv[0])):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {tp_str(tp)} is still in progress.")
            continue
        current = described.get(tp, [])
        if current == target:
            lines.append(f"Reassignment of partition {tp_str(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {tp_str(tp)}, but "
                         f"replica set is {','.join(map(str, current))} rather than "
                         f"{','.join(map(str, target))}.")
    print("\n".join(lines))
    states = await log_dir_move_states(client, log_dirs)
    print("\n".join(line for _, line in states))
    moving = any(active for active, _ in states)
    if not ongoing and not moving and not o.has("preserve-throttles"):
        await clear_all_throttles(client, parts)


async def log_dir_move_states(client, log_dirs: dict) -> list:
    """[(still moving, Kafka's line)] for every replica with a target log dir, in Kafka's order."""
    R = DescribeLogDirsRequest
    await client.refresh_metadata(topics=[])
    where: dict = {}                # (topic, partition, broker) -> [current dir, future dir]
    brokers = sorted({b for (_, _, b) in log_dirs} & set(client.nodes))
    for b in brokers:
        wanted = defaultdict(list)
        for t, p, bb in log_dirs:
            if bb == b:
                wanted[t].append(p)
        resp = await client.send_to(b, R(topics=[R.DescribableLogDirTopic(topic=t, partitions=ps)
                                                 for t, ps in wanted.items()]))
        for res in resp.results:
            if res.error_code:
                continue
            for t in res.topics:
                for p in t.partitions:
                    info = where.setdefault((t.name, p.partition_index, b), [None, None])
                    info[1 if p.is_future_key else 0] = res.log_dir
    out = []
    for r in sorted(log_dirs, key=replica_key):
        t, p, b = r
        target = log_dirs[r]
        if b not in brokers:
            out.append((False, f"Partition {t}-{p} cannot be found in any live log directory on broker {b}."))
            continue
        current, future = where.get(r, (None, None))
        if current is None:
            out.append((False, f"Partition {t}-{p} is not found in any live log dir on broker {b}. "
                               "There is likely an offline log directory on the broker."))
        elif future is not None:
            out.append((True, f"Reassignment of replica {replica_str(r)} is still in progress."
                        if future == target else
                        f"Partition {t}-{p} on broker {b} is being moved to log dir {future} "
                        f"instead of {target}."))
        elif current == target:
            out.append((False, f"Reassignment of replica {replica_str(r)} completed successfully."))
        else:
            out.append((False, f"Partition {t}-{p} on broker {b} is not being moved from log dir "
                               f"{current} to {target}."))
    return out


async def cancel(client, o):
    parts, _log_dirs = parse_reassignment(o["reassignment-json-file"])
    targets = {tp for tp, _ in parts}
    ongoing = await list_reassignments(client, targets)
    # Kafka's selection: reassignments that remove replicas or add none
    cancelling = sorted((tp for tp, (_, adding, removing) in ongoing.items()
                         if tp in targets and (not adding or removing)), key=tp_key)
    if cancelling:
        R = AlterPartitionReassignmentsRequest
        by_topic = defaultdict(list)
        for t, p in cancelling:
            by_topic[t].append(R.ReassignablePartition(partition_index=p, replicas=None))
        resp = await controller_call(client, R(timeout_ms=60000, topics=[
            R.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()]))
        check_top_level(resp)
        errors = partition_errors(resp)
        if errors:
            raise Terse(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'}"
                        " for:\n" + "\n".join(f"{tp_str(tp)}: {msg}"
                                              for tp, msg in sorted(errors.items())))
        print(f"Successfully cancelled partition reassignment{'' if len(cancelling) == 1 else 's'}"
              f" for: {','.join(tp_str(tp) for tp in cancelling)}")
    else:
        print("None of the specified partition reassignments are active.")
    print("None of the specified partition moves are active.")
    if not o.has("preserve-throttles"):
        await clear_all_throttles(client, parts)


async def list_action(client, o):
    ongoing = await list_reassignments(client)
    if not ongoing:
        print("No partition reassignments found.")
        return
    lines = ["Current partition reassignments:"]
    for tp, (replicas, adding, removing) in sorted(ongoing.items(), key=lambda kv: tp_key(kv[0])):
        line = f"{tp_str(tp)}: replicas: {','.join(map(str, replicas))}."
        if adding:
            line += f" adding: {','.join(map(str, adding))}."
        if removing:
            line += f" removing: {','.join(map(str, removing))}."
        lines.append(line)
    print("\n".join(lines))


# =============================================================================================

async def run_action(o, action):
    props = command_config(o)
    props.setdefault("client.id", "reassign-partitions-tool")
    client = await cluster_from(o, props)
    try:
        await {"generate": generate, "execute": execute, "verify": verify, "cancel": cancel,
               "list": list_action}[action](client, o)
    finally:
        await client.close()


def main(argv=None) -> int:
    p = build_parser()
    argv = sys.argv[1:] if argv is None else argv

    async def guarded(o, action):
        try:
            await run_action(o, action)
        except Terse as e:
            print(str(e))
            return 1
        return 0

    def body(args):
        o = parse_or_exit(p, args, DESCRIPTION)
        action = validate(p, o)
        return guarded(o, action)

    return run(body, argv, error_prefix="Error: ", error_stream=sys.stdout)


if __name__ == "__main__":
    sys.exit(main())

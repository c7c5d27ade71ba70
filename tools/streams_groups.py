"""kafka-streams-groups.sh: Kafka 4.2's StreamsGroupCommand, for streams groups (KIP-1071).

    kafka-streams-groups.sh --bootstrap-server h:p [--command-config f] [--timeout ms]
        --list [--state [states]]
        --describe (--group g ... | --all-groups) [--offsets | --members | --state] [--verbose]
        --delete (--group g ... | --all-groups) [--delete-all-internal-topics]
        --delete-offsets --group g (--input-topic t[:p,...] ... | --all-input-topics)
        --reset-offsets (--group g ... | --all-groups) (--input-topic t[:p,...] ... | --all-input-topics)
            (--to-earliest | --to-latest | --to-current | --to-offset n | --shift-by n | --from-file f
             | --to-datetime YYYY-MM-DDTHH:mm:SS.sss | --by-duration PnDTnHnMnS)
            (--dry-run | --execute [--delete-all-internal-topics | --delete-internal-topic t ...]) [--export]

A streams group's topology (StreamsGroupDescribe) says which topics belong to it: its input
topics are the subtopologies' source topics; its internal topics are the repartition topics
they read and the changelog topics of their stores, when their names start with
``<group>-`` and end like Kafka Streams' internal topics (``-repartition``, ``-changelog``,
the foreign-key join topics).

* ``--describe`` (``--offsets``, the default) lists the partitions of the members' active
  tasks, source and repartition topics alike, with the lag behind the log end (the committed
  offset, leader epoch and log end offset too with ``--verbose``).  ``--members`` prints each
  member's process, client id and tasks (``ACTIVE: 0:[0,1]; ``; with ``--verbose`` also the
  epochs and the target tasks), ``--state`` the coordinator, state and member count (with
  ``--verbose`` the group and target assignment epochs).  As Kafka's tool, the offsets and
  members views print nothing for a group without members.
* ``--delete`` removes empty groups (DeleteGroups); ``--delete-all-internal-topics`` then
  deletes their internal topics too.
* ``--delete-offsets`` deletes committed offsets (OffsetDelete); ``--all-input-topics`` means
  the committed offsets of the source topics.
* ``--reset-offsets`` plans (``--dry-run``) or commits (``--execute``) new offsets for groups
  without members, with the scenarios of kafka-consumer-groups.sh; ``--input-topic`` partitions
  must already have a committed offset in the group.  With ``--execute`` it can also delete the
  group's internal topics (``--delete-all-internal-topics``) so that the application rebuilds
  its state, or the topics named by ``--delete-internal-topic`` (not checked, as in Kafka).

Output follows Kafka's tool (its columns, widths and messages); as in the other Odradek tools,
rows are sorted, failures go to stderr and make the exit status 1.
"""
from __future__ import annotations

import re
import sys
import time

from protocol.client import KafkaConnectionError
from protocol.errors import KafkaError, error_message, error_name
from protocol.messages import (DeleteGroupsRequest, DeleteTopicsRequest, OffsetFetchRequest,
                               StreamsGroupDescribeRequest)
from tools.common import (OptionParser, ToolError, check_invalid, cluster_from, java_error, parse_or_exit, run,
                          standard_options)
from tools.consumer_groups import (KafkaErrorText, Resetter, ResetUsageError, Service, export_csv, list_all_groups,
                                   parse_datetime, parse_duration_ms, parse_topic_arg, print_reset, read_plan)
from tools.kclient import EARLIEST, LATEST
from tools.topics import to_controller_retrying_quota

DESCRIPTION = "Lists, describes and deletes streams groups, and deletes or resets their committed offsets."
MISSING = "-"
GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION = 69, 3
ACTIONS = ("list", "describe", "reset-offsets", "delete", "delete-offsets")
SCENARIOS = ("to-offset", "shift-by", "to-datetime", "by-duration", "to-earliest", "to-latest", "to-current",
             "from-file")
STATES = ("Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead")
_FK_TOPIC = re.compile(r".+-KTABLE-FK-JOIN-SUBSCRIPTION-(REGISTRATION|RESPONSE)-\d+-topic")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    standard_options(p, "A properties file of admin client settings (security, request.timeout.ms, "
                        "default.api.timeout.ms, client.id).")
    p.add("group", "A streams group to act on; repeat it for several (--describe, --delete, --reset-offsets).",
          "streams group", multi=True)
    p.add("all-groups", "Act on every streams group (--describe, --delete, --reset-offsets).")
    p.add("input-topic", "An input topic of the group (--delete-offsets, --reset-offsets); 'topic:0,2' names "
                         "some of its partitions. Repeatable.", "topic", multi=True)
    p.add("all-input-topics", "Every source topic of the group's topology that has a committed offset "
                              "(--delete-offsets, --reset-offsets).")
    p.add("list", "Print the streams groups.")
    p.add("describe", "Describe streams groups: by default the partitions of their active tasks with the lag.")
    p.add("delete", "Delete streams groups that have no members, with their committed offsets.")
    p.add("delete-offsets", "Delete the committed offsets of one streams group for the given input topics or "
                            "partitions.")
    p.add("reset-offsets", "Set new committed offsets for streams groups without members. Takes a scope "
                           "(--input-topic or --all-input-topics, not needed with --from-file), one scenario "
                           "(--to-earliest, --to-latest, --to-current, --to-offset, --shift-by, --to-datetime, "
                           "--by-duration, --from-file) and either --dry-run (show the plan) or --execute "
                           "(commit it).")
    p.add("timeout", "How long to keep asking a coordinator that is not available yet, in ms.", "timeout (ms)",
          type=int, default=30000)
    p.add("state", "With --list: add each group's state, or, given states separated by commas (Empty, NotReady, "
                   "Assigning, Reconciling, Stable, Dead), keep only groups in them. With --describe: show the "
                   "coordinator, state and number of members.", "", optional=True)
    p.add("members", "With --describe: one line per member with its process, client id and tasks.")
    p.add("offsets", "With --describe: the partitions of the active tasks with their lag (the default view).")
    p.add("verbose", "With --describe: more columns (committed offset, leader epoch and log end offset; the "
                     "members' epochs and target tasks; the group and target assignment epochs).")
    p.add("dry-run", "With --reset-offsets: print the new offsets and change nothing.")
    p.add("execute", "With --reset-offsets: commit the new offsets.")
    p.add("export", "With --reset-offsets: print the new offsets as CSV, as --from-file reads them.")
    p.add("to-offset", "Reset to this offset (kept between the log start and end).", "offset", type=int)
    p.add("from-file", "Reset to the offsets of a CSV file (topic,partition,offset for one group, or "
                       "group,topic,partition,offset).", "path to CSV file")
    p.add("to-datetime", "Reset to the first offset at or after this time, YYYY-MM-DDTHH:mm:SS.sss (UTC unless a "
                         "zone follows).", "datetime")
    p.add("by-duration", "Reset to the first offset at or after now minus this duration, PnDTnHnMnS.", "duration")
    p.add("to-earliest", "Reset to the log start offset.")
    p.add("to-latest", "Reset to the log end offset.")
    p.add("to-current", "Reset to the committed offset (the log end where there is none).")
    p.add("shift-by", "Move the committed offset by n (negative: back), within the log.", "number-of-offsets",
          type=int)
    p.add("delete-internal-topic", "With --reset-offsets --execute: also delete this topic (repeatable).", "",
          multi=True)
    p.add("delete-all-internal-topics", "With --delete, or --reset-offsets --execute: also delete the internal "
                                        "topics (repartition and changelog topics) of the groups.")
    return p


def _opts(*names: str) -> str:
    return ", ".join(f"[{n}]" for n in names)


def check_args(p: OptionParser, o) -> str:
    for name, allowed in (("state", ("list", "describe")), ("members", ("describe",)), ("offsets", ("describe",)),
                          ("verbose", ("describe",))):
        if o.has(name) and not any(o.has(a) for a in allowed):
            p.usage_exit(f"Option(s) [{name}] are unavailable given other options on the command line")
    if not o.has("bootstrap-server"):
        p.usage_exit('Missing required argument "[bootstrap-server]"')
    scope = _opts("all-groups", "group")
    if o.has("describe"):
        if not (o.has("group") or o.has("all-groups")):
            p.usage_exit(f"Option [describe] takes one of these options: {scope}")
        if sum(o.has(n) for n in ("members", "offsets", "state")) > 1:
            p.usage_exit("Option [describe] takes at most one of these options: "
                         + _opts("members", "offsets", "state"))
        if o.has("state") and o.get("state"):
            p.usage_exit("Option [describe] does not take a value for [state]")
    if o.has("delete"):
        if not (o.has("group") or o.has("all-groups")):
            p.usage_exit(f"Option [delete] takes one of these options: {scope}")
        if o.has("input-topic") or o.has("all-input-topics"):
            p.usage_exit("Kafka Streams does not support topic-specific offset deletion from a streams group.")
    if o.has("delete-offsets"):
        if not (o.has("input-topic") or o.has("all-input-topics")) or not o.has("group"):
            p.usage_exit("Option [delete-offsets] takes the [group] and one of these options: "
                         + _opts("all-input-topics", "input-topic"))
        if len(o.get("group")) > 1:
            p.usage_exit("Option [delete-offsets] supports only one [group] at a time, but found: ["
                         + ", ".join(o.get("group")) + "]")
    if o.has("reset-offsets"):
        if o.has("dry-run") and o.has("execute"):
            p.usage_exit("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not (o.has("dry-run") or o.has("execute")):
            p.usage_exit("Option [reset-offsets] takes the option: [execute] or [dry-run]")
        if not (o.has("group") or o.has("all-groups")):
            p.usage_exit(f"Option [reset-offsets] takes one of these options: {scope}")
        for s in SCENARIOS:
            check_invalid(p, o, s, [x for x in SCENARIOS if x != s])
    if o.has("delete-all-internal-topics"):
        if not (o.has("reset-offsets") or o.has("delete")):
            p.usage_exit("Option [delete-all-internal-topics] takes one of these options: "
                         + _opts("delete", "reset-offsets"))
        if o.has("reset-offsets") and not o.has("execute"):
            p.usage_exit("Option [delete-all-internal-topics] takes [execute] when [reset-offsets] is used.")
    elif o.has("delete-internal-topic") and not (o.has("reset-offsets") and o.has("execute")):
        p.usage_exit("Option [delete-internal-topic] takes [reset-offsets] when [execute] is used.")
    if (o.has("dry-run") or o.has("execute")) and not o.has("reset-offsets"):
        p.usage_exit("Only Option [reset-offsets] accepts [execute] or [dry-run]")
    check_invalid(p, o, "list", ["members", "offsets"])
    check_invalid(p, o, "group", ["all-groups"])
    check_invalid(p, o, "group", ["list"])
    check_invalid(p, o, "input-topic", ["list", "describe", "delete"])
    actions = [a for a in ACTIONS if o.has(a)]
    if len(actions) != 1:
        p.usage_exit("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, or "
                     "--delete-offsets.")
    action = actions[0]
    if action == "reset-offsets":
        if not any(o.has(s) for s in SCENARIOS):
            p.usage_exit("Option '[reset-offsets]' requires one of the following scenarios: ["
                         + ", ".join(f"[{s}]" for s in SCENARIOS) + "]")
        if not (o.has("input-topic") or o.has("all-input-topics") or o.has("from-file")):
            p.usage_exit("One of the reset scopes should be defined: --all-input-topics, --input-topic.")
    if action == "list" and o.get("state"):
        try:
            parse_states(o.get("state"))
        except ResetUsageError as e:
            p.usage_exit(str(e))
    return action


def parse_states(text: str) -> list[str]:
    by_lower = {s.lower(): s for s in STATES}
    out = []
    for s in text.split(","):
        s = s.strip()
        if s.lower() not in by_lower:
            raise ResetUsageError(f"Invalid state list '{text}'. Valid states are: " + ", ".join(STATES))
        out.append(by_lower[s.lower()])
    return out


# =============================================================================================
# The group's topology
# =============================================================================================

def source_topics(d) -> set[str]:
    return {t for s in d.topology.subtopologies for t in s.source_topics}


def task_topics(d) -> dict[str, list[str]]:
    """{subtopology id: the topics its tasks read (source topics, then repartition topics)}."""
    return {s.subtopology_id: list(s.source_topics) + [t.name for t in s.repartition_source_topics]
            for s in d.topology.subtopologies}


def matches_internal_topic_format(name: str) -> bool:
    return (name.endswith("-changelog") or name.endswith("-repartition")
            or name.endswith("-subscription-registration-topic")
            or name.endswith("-subscription-response-topic") or _FK_TOPIC.fullmatch(name) is not None)


def internal_topics(d) -> list[str]:
    """The repartition and changelog topics of the topology that are the group's own (Kafka
    Streams' naming); the others are named on stderr and kept."""
    sources = source_topics(d)
    out = []
    for s in d.topology.subtopologies:
        for t in [t.name for t in s.repartition_source_topics] + [t.name for t in s.state_changelog_topics]:
            if t in sources or t in out:
                continue
            if t.startswith(d.group_id + "-") and matches_internal_topic_format(t):
                out.append(t)
            else:
                print(f"\nError: The internal topic '{t}' is not inferred as internal and thus will not be deleted "
                      f"with the group '{d.group_id}'.", file=sys.stderr)
    return out


# =============================================================================================
# Talking to the cluster
# =============================================================================================

class StreamsService(Service):
    async def streams_groups(self, states=()) -> list:
        rows = await list_all_groups(self.client, self.timeout, [s.lower() for s in states], ["streams"])
        return [r for r in rows if r.type.lower() == "streams"]

    async def describe_streams(self, group: str):
        """The group's DescribedGroup (its error code unchecked)."""
        resp = await self.to_coordinator(
            group, StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
            lambda r: r.groups[0].error_code if r.groups else 0)
        return resp.groups[0]

    async def description(self, group: str):
        d = await self.describe_streams(group)
        if d.error_code:
            raise KafkaErrorText(d.error_code, d.error_message)
        if d.topology is None:
            raise ToolError("java.lang.IllegalStateException: Topology information is missing")
        return d

    async def committed_offsets(self, group: str) -> dict[tuple[str, int], tuple[int, int]]:
        """{tp: (offset, leader epoch or -1)} of every committed offset of the group."""
        resp = await self.to_coordinator(group, OffsetFetchRequest(group_id=group, topics=None, require_stable=False),
                                         lambda r: r.error_code, max_version=7)
        if resp.error_code:
            raise KafkaErrorText(resp.error_code)
        return {(t.name, p.partition_index): (p.committed_offset, getattr(p, "committed_leader_epoch", -1))
                for t in resp.topics for p in t.partitions if p.error_code == 0 and p.committed_offset >= 0}

    async def committed_in(self, group: str, topics: set[str]) -> dict[tuple[str, int], int]:
        return {tp: off for tp, (off, _) in (await self.committed_offsets(group)).items() if tp[0] in topics}

    async def delete_topics(self, names: list[str]) -> dict[str, int]:
        """DeleteTopics on the controller: {topic: error code}."""
        conn = await self.client.any_connection()
        version = conn.pick_version(DeleteTopicsRequest.API_KEY)

        def request(retry):
            todo = names if retry is None else [n for n in names if n in retry]
            if version >= 6:
                return DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in todo],
                                           timeout_ms=30000)
            return DeleteTopicsRequest(topic_names=todo, timeout_ms=30000)
        results = await to_controller_retrying_quota(self.client, request, lambda r: r.responses, lambda r: r.name,
                                                     version=version)
        return {r.name: r.error_code for r in results}


def _row(values, widths) -> str:
    return " ".join(f"{v:<{w}}" if w else str(v) for v, w in zip(values, widths))


# =============================================================================================
# --list
# =============================================================================================

async def list_groups(svc: StreamsService, o) -> int:
    if not o.has("state"):
        for r in await svc.streams_groups():
            print(r.group_id)
        return 0
    rows = await svc.streams_groups(parse_states(o.get("state")) if o.get("state") else ())
    width = max([15] + [len(r.group_id) for r in rows])
    print(_row(("GROUP", "STATE"), (width, 0)))
    for r in rows:
        print(_row((r.group_id, r.state or "Unknown"), (width, 0)))
    return 0


# =============================================================================================
# --describe
# =============================================================================================

def _empty_notice(d) -> None:
    if d.group_state == "Dead":
        print(f"\nError: Streams group '{d.group_id}' does not exist.", file=sys.stderr)
    elif d.group_state == "Empty":
        print(f"\nError: Streams group '{d.group_id}' has no active members.", file=sys.stderr)


def _tasks_text(assignment, prefix: str = "") -> str:
    out = ""
    for kind, tasks in (("ACTIVE", assignment.active_tasks), ("STANDBY", assignment.standby_tasks),
                        ("WARMUP", assignment.warmup_tasks)):
        if tasks:
            out += f"{prefix}{kind}: " + "".join(
                f"{t.subtopology_id}:[{','.join(str(p) for p in t.partitions)}]; " for t in tasks)
    return out


def print_members(d, verbose: bool) -> None:
    members = list(d.members)
    if d.group_state == "Dead" or not members:
        return
    _empty_notice(d)
    g = max(15, len(d.group_id))
    m = max([15] + [len(x.member_id) for x in members])
    h = max([15] + [len(x.process_id) for x in members])
    c = max([15] + [len(x.client_id) for x in members])
    if not verbose:
        widths = (g, m, h, c, 0)
        print(_row(("GROUP", "MEMBER", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"), widths))
        for x in members:
            print(_row((d.group_id, x.member_id, x.process_id, x.client_id, _tasks_text(x.assignment)), widths))
        return

    def line(values):
        # Kafka's layout has no blank between the topology epoch column and the member id
        group, target_epoch, topology_epoch, *rest = values
        return (f"{group:<{g}} {target_epoch!s:<25} {topology_epoch!s:<15}"
                + _row(rest, (m, 15, 15, h, c, 0)))
    print(line(("GROUP", "TARGET-ASSIGNMENT-EPOCH", "TOPOLOGY-EPOCH", "MEMBER", "MEMBER-PROTOCOL", "MEMBER-EPOCH",
                "PROCESS", "CLIENT-ID", "ASSIGNMENTS")))
    for x in members:
        print(line((d.group_id, d.assignment_epoch, d.topology.epoch, x.member_id,
                    "classic" if x.is_classic else "streams", x.member_epoch, x.process_id, x.client_id,
                    _tasks_text(x.assignment) + _tasks_text(x.target_assignment, "TARGET-"))))


def print_state(svc: StreamsService, d, verbose: bool) -> None:
    _empty_notice(d)
    node_id = svc.coordinators.get(d.group_id)
    node = svc.client.nodes.get(node_id)
    coordinator = f"{node.host}:{node.port} ({node_id})" if node is not None else f":-1 ({node_id})"
    g, c = max(15, len(d.group_id)), max(25, len(coordinator))
    if verbose:
        widths = (g, c, 25, 15, 25, 0)
        print(_row(("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"),
                   widths))
        print(_row((d.group_id, coordinator, d.group_state, d.group_epoch, d.assignment_epoch, len(d.members)),
                   widths))
    else:
        widths = (g, c, 25, 0)
        print(_row(("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"), widths))
        print(_row((d.group_id, coordinator, d.group_state, len(d.members)), widths))


async def offsets_info(svc: StreamsService, d) -> list[tuple]:
    """[(tp, committed or None, leader epoch or None, log end, lag)] for the partitions of the
    members' active tasks; the lag counts from the log start where nothing is committed."""
    topics_of = task_topics(d)
    tps = set()
    for m in d.members:
        for task in m.assignment.active_tasks:
            topics = topics_of.get(task.subtopology_id)
            if topics is None:
                raise ToolError(f"java.lang.IllegalArgumentException: Subtopology {task.subtopology_id} not found "
                                "in group description!")
            tps.update((t, p) for t in topics for p in task.partitions)
    if not tps:
        return []
    earliest = await svc.log_offsets(tps, EARLIEST)
    latest = await svc.log_offsets(tps, LATEST)
    wanted = {t for ts in topics_of.values() for t in ts}
    committed = {tp: v for tp, v in (await svc.committed_offsets(d.group_id)).items() if tp[0] in wanted}
    rows = []
    for tp in sorted(tps):
        if tp not in earliest or tp not in latest:
            continue
        off, epoch = committed.get(tp, (None, None))
        lag = latest[tp] - (earliest[tp] if off is None else off)
        rows.append((tp, off, None if epoch is None or epoch < 0 else epoch, latest[tp], lag))
    return rows


async def print_offsets(svc: StreamsService, d, verbose: bool) -> None:
    rows = await offsets_info(svc, d)
    if d.group_state == "Dead" or not d.members:
        return
    _empty_notice(d)
    g = max(15, len(d.group_id))
    t = max([15] + [len(tp[0]) for tp, *_ in rows])
    if not verbose:
        widths = (g, t, 10, 0)
        print(_row(("GROUP", "TOPIC", "PARTITION", "OFFSET-LAG"), widths))
        for tp, _, _, _, lag in rows:
            print(_row((d.group_id, tp[0], tp[1], lag), widths))
        return
    widths = (g, t, 10, 15, 15, 15, 15)
    print(_row(("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LEADER-EPOCH", "LOG-END-OFFSET", "OFFSET-LAG"),
               widths))
    for tp, off, epoch, end, lag in rows:
        print(_row((d.group_id, tp[0], tp[1], MISSING if off is None else off, MISSING if epoch is None else epoch,
                    end, lag), widths))


async def describe(svc: StreamsService, o) -> int:
    if o.has("all-groups"):
        groups = [r.group_id for r in await svc.streams_groups()]
    else:
        groups = list(dict.fromkeys(o.get("group")))
    verbose = o.has("verbose")
    for group in groups:
        d = await svc.description(group)
        if o.has("members"):
            print_members(d, verbose)
        elif o.has("state"):
            print_state(svc, d, verbose)
        else:
            await print_offsets(svc, d, verbose)
    return 0


# =============================================================================================
# --delete
# =============================================================================================

async def delete_groups(svc: StreamsService, o) -> int:
    listed = {r.group_id: r.state for r in await svc.streams_groups()}
    groups = list(listed) if o.has("all-groups") else list(dict.fromkeys(o.get("group")))
    failed: dict[str, str] = {}
    for g in groups:
        state = listed.get(g)
        if state is None:
            failed[g] = f"java.lang.IllegalArgumentException: Group '{g}' does not exist or is not a streams group."
        elif state == "Dead":
            failed[g] = f"java.lang.IllegalStateException: Streams group '{g}' group state is DEAD."
        elif state != "Empty":
            failed[g] = f"org.apache.kafka.common.errors.GroupNotEmptyException: Streams group '{g}' is not EMPTY."
    todo = [g for g in groups if g not in failed]
    internal: dict[str, list[str]] = {}
    if todo and o.has("delete-all-internal-topics"):
        for g in todo:
            try:
                topics = internal_topics(await svc.description(g))
            except (KafkaError, ToolError) as e:
                print(f"\nError: Retrieving internal topics failed due to {e}", file=sys.stderr)
                internal = {}
                break
            if topics:
                internal[g] = topics
    ok = []
    for g in todo:
        resp = await svc.to_coordinator(g, DeleteGroupsRequest(groups_names=[g]),
                                        lambda r: r.results[0].error_code if r.results else 0)
        code = resp.results[0].error_code if resp.results else 0
        if code:
            failed[g] = java_error(code)
        else:
            ok.append(g)
    topic_failures: dict[str, int] = {}
    for g in ok:
        if not internal.get(g):
            continue
        results = await svc.delete_topics(internal[g])
        bad = [t for t in internal[g] if results.get(t, UNKNOWN_TOPIC_OR_PARTITION)]
        for t in bad:
            print(f"Failed to delete internal topic: {t}")
        if bad:
            topic_failures[g] = results.get(bad[0], UNKNOWN_TOPIC_OR_PARTITION)
    rc = 0
    if not failed:
        print("Deletion of requested streams groups ('" + "', '".join(ok) + "') was successful.")
    else:
        rc = 1
        print("\nError: Deletion of some streams groups failed:")
        for g, why in failed.items():
            print(f"* Group '{g}' could not be deleted due to: {why}")
        if ok:
            print("\nThese streams groups were deleted successfully: '" + "', '".join(ok) + "'.")
    if internal and ok:
        if not topic_failures:
            print("Deletion of associated internal topics of the streams groups ('"
                  + "', '".join(g for g in ok if g in internal) + "') was successful.")
        else:
            print("Deletion of some associated internal topics failed:")
            for g, code in topic_failures.items():
                print(f"* Internal topics of the streams group '{g}' could not be deleted due to: {java_error(code)}")
                if code != UNKNOWN_TOPIC_OR_PARTITION:
                    rc = 1
    return rc


# =============================================================================================
# --delete-offsets
# =============================================================================================

def _input_topics(o) -> tuple[list, list]:
    """``--input-topic`` arguments: ([(topic, partition)] of those naming partitions, [topic] of
    the others)."""
    wanted, plain = [], []
    for arg in o.get("input-topic"):
        if ":" in arg:
            wanted.extend(parse_topic_arg(arg))
        else:
            plain.append(arg)
    return wanted, plain


async def delete_offsets(svc: StreamsService, o) -> int:
    group = o.get("group")[0]
    results: dict[tuple[str, int], str | None] = {}
    if o.has("all-input-topics"):
        d = await svc.description(group)
        wanted = sorted(await svc.committed_in(group, source_topics(d)))
    else:
        wanted, plain = _input_topics(o)
        for t, parts in (await svc.partitions_of(plain)).items():
            if parts is None:
                results[(t, -1)] = java_error(UNKNOWN_TOPIC_OR_PARTITION)
            else:
                wanted.extend((t, p) for p in parts)
        wanted = sorted(set(wanted))
    top = 0
    if wanted:
        top, per = await svc.delete_offsets(group, wanted)
        for tp in wanted:
            code = per.get(tp, top)
            results[tp] = java_error(code) if code else None
        if not top:
            top = next((per[tp] for tp in wanted if per.get(tp)), 0)
    rc = 0
    if top == 0:
        print(f"Request succeeded for deleting offsets from group {group}.")
    else:
        rc = 1
        if top in (24, 69, 30, 68):        # invalid group id, no such group, not authorized, not empty
            print(f"\nError: {error_message(top)}", file=sys.stderr)
        elif top in (86, 29, 3):           # subscribed to the topic, topic not authorized, unknown topic
            print("\nError: Encountered some partition-level error, see the follow-up details.", file=sys.stderr)
        else:
            print(f"\nError: Encountered some unknown error: {error_name(top)}", file=sys.stderr)
    tw = max([15] + [len(t) for t, _ in results])
    out = [f"\n{'TOPIC':<{tw}} {'PARTITION':<10} {'STATUS':<15}"]
    for (t, p), err in sorted(results.items()):
        out.append(f"\n{t:<{tw}} {str(p) if p >= 0 else MISSING:<10} {('Error: ' + err) if err else 'Successful':<15}")
    print("".join(out))
    return rc


# =============================================================================================
# --reset-offsets
# =============================================================================================

class StreamsResetter(Resetter):
    """Kafka's reset scenarios (the clamping and timestamp look-ups of kafka-consumer-groups.sh's
    Resetter) over a streams group's partitions."""

    def __init__(self, svc: StreamsService, o):
        super().__init__(svc, o)
        self.plans = read_plan(o.get("from-file"), self.groups()) if o.has("from-file") else {}
        self.rc = 0

    def groups(self) -> list[str]:
        return list(dict.fromkeys(self.o.get("group")))

    def error(self, text: str) -> None:
        print(f"\nError: {text}", file=sys.stderr)
        self.rc = 1

    async def scope(self, group: str, d) -> list[tuple[str, int]]:
        o, svc = self.o, self.svc
        if o.has("all-input-topics"):
            if d is None:
                d = await svc.description(group)       # fails: the group does not exist
            return sorted(await svc.committed_in(group, source_topics(d)))
        if not o.has("input-topic"):
            return []
        wanted, plain = _input_topics(o)
        known = await svc.partitions_of({t for t, _ in wanted} | set(plain))
        if any(known.get(t) is None for t in plain):
            raise KafkaErrorText(UNKNOWN_TOPIC_OR_PARTITION)
        for t in plain:
            wanted.extend((t, p) for p in known[t])
        missing = [tp for tp in wanted if known.get(tp[0]) is None or tp[1] not in known[tp[0]]]
        if missing:
            raise KafkaErrorText(UNKNOWN_TOPIC_OR_PARTITION,
                                 'The partitions "' + ",".join(f"{t}-{p}" for t, p in missing) + '" do not exist')
        leaderless = [tp for tp in wanted if svc.client.leader_for(*tp) < 0]
        if leaderless:
            raise KafkaErrorText(5, 'The partitions "' + ",".join(f"{t}-{p}" for t, p in leaderless)
                                 + '" have no leader')
        committed = await svc.committed_offsets(group)
        if not all(tp in committed for tp in wanted):
            self.error(f"One or more topics are not part of the group '{group}'.")
            return []
        return sorted(set(wanted))

    async def current(self, group: str, d) -> dict[tuple[str, int], int]:
        """The committed offsets of the topology's source and repartition topics."""
        if d is None:
            d = await self.svc.description(group)
        return await self.svc.committed_in(group, {t for ts in task_topics(d).values() for t in ts})

    async def new_offsets(self, group: str, d) -> dict[tuple[str, int], int]:
        o = self.o
        tps = await self.scope(group, d)
        if o.has("to-offset"):
            return await self.clamp({tp: o.get("to-offset") for tp in tps})
        if o.has("to-earliest"):
            return await self.at_log(tps, EARLIEST, "starting")
        if o.has("to-latest"):
            return await self.at_log(tps, LATEST, "ending")
        if o.has("shift-by"):
            committed = await self.current(group, d)
            wanted = {}
            for tp in tps:
                if tp not in committed:
                    raise ResetUsageError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no "
                                          "current committed offset")
                wanted[tp] = committed[tp] + o.get("shift-by")
            return await self.clamp(wanted)
        if o.has("to-datetime"):
            return await self.at_time(tps, parse_datetime(o.get("to-datetime")))
        if o.has("by-duration"):
            return await self.at_time(tps, int(time.time() * 1000) - parse_duration_ms(o.get("by-duration")))
        if o.has("from-file"):
            plan = self.plans.get(group)
            if plan is None:
                self.error(f"No reset plan for group {group} found")
                return {}
            return await self.clamp(dict(sorted(plan.items())))
        committed = await self.current(group, d)           # --to-current
        out = {tp: committed[tp] for tp in tps if tp in committed}
        out.update(await self.at_log([tp for tp in tps if tp not in committed], LATEST, "ending"))
        return dict(sorted(out.items()))

    async def delete_internal(self, group: str, d) -> None:
        o, svc = self.o, self.svc
        if o.has("delete-all-internal-topics"):
            topics = internal_topics(d)
        else:
            topics = list(dict.fromkeys(o.get("delete-internal-topic")))
        if not topics:
            return
        codes = await svc.delete_topics(topics)
        code = next((codes[t] for t in topics if codes.get(t)), 0)
        if code == UNKNOWN_TOPIC_OR_PARTITION:
            self.error(f"Deleting internal topics for group '{group}' failed because the topics do not exist.")
        elif code:
            self.error(f"Deleting internal topics for group '{group}' failed due to {java_error(code)}")

    async def reset(self) -> dict:
        o, svc = self.o, self.svc
        if o.has("to-datetime"):
            parse_datetime(o.get("to-datetime"))          # a bad date fails before anything is read
        if o.has("by-duration"):
            parse_duration_ms(o.get("by-duration"))
        groups = [r.group_id for r in await svc.streams_groups()] if o.has("all-groups") else self.groups()
        execute = o.has("execute")
        result = {}
        for group in groups:
            d = await svc.describe_streams(group)
            if d.error_code == GROUP_ID_NOT_FOUND:
                d = None
            elif d.error_code:
                raise KafkaErrorText(d.error_code, d.error_message)
            elif d.group_state not in ("Empty", "Dead"):
                self.error(f"Assignments can only be reset if the group '{group}' is inactive, but the current state "
                           f"is {d.group_state}.")
                result[group] = {}
                continue
            new = await self.new_offsets(group, d)
            if execute and new:
                await svc.commit(group, new)
            result[group] = new
            if execute and d is not None and d.topology is not None:
                await self.delete_internal(group, d)
        return result


async def reset_offsets(svc: StreamsService, o) -> int:
    r = StreamsResetter(svc, o)
    result = await r.reset()
    if o.has("export"):
        print(export_csv(result, len(o.get("group")) == 1))
    else:
        print_reset(result)
    return r.rc


# =============================================================================================

async def execute(p: OptionParser, o, action: str) -> int:
    client = None
    try:
        client = await cluster_from(o, client_id="streams-groups-tool")
        svc = StreamsService(client, o.get("timeout"))
        fn = {"list": list_groups, "describe": describe, "delete": delete_groups, "delete-offsets": delete_offsets,
              "reset-offsets": reset_offsets}[action]
        return await fn(svc, o)
    except ResetUsageError as e:
        sys.stdout.flush()
        p.usage_exit(str(e))
    except (ToolError, KafkaConnectionError, KafkaError) as e:
        raise ToolError(f"Error: Executing streams group command failed due to {e}") from None
    finally:
        if client is not None:
            await client.close()


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args, DESCRIPTION)
        return execute(p, o, check_args(p, o))

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())

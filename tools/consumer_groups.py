"""kafka-consumer-groups.sh: list, describe and delete consumer groups, delete their offsets and
reset them.

Actions (exactly one): --list [--state [S,...]] [--type [T,...]], --describe (--group G... |
--all-groups) [--offsets | --members [--verbose] | --state], --delete, --delete-offsets
--group G --topic T[:p,...], --reset-offsets with one scenario (--to-earliest, --to-latest,
--to-current, --to-offset N, --shift-by N, --to-datetime, --by-duration, --from-file) and a scope
(--topic T[:p,...]... | --all-topics), --dry-run (default) / --execute, --export.

The output follows Kafka's ConsumerGroupCommand: its column headers and widths, its messages. As
with the other Odradek tools, failures go to stderr as one line (``Error: ...``) and make the
exit status 1 (Kafka prints most of them on stdout and exits 0).
"""
from __future__ import annotations

import asyncio
import datetime as _dt
import re
import sys
import time
from collections import defaultdict
from typing import NamedTuple

from protocol.client import KafkaConnectionError
from protocol.errors import KafkaError, error_name
from protocol.messages import (ConsumerGroupDescribeRequest, DeleteGroupsRequest, DescribeGroupsRequest,
                               ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest)
from tools.common import (OptionParser, ToolError, UsageError, check_invalid, cluster_from, java_error,
                          parse_or_exit, run, standard_options)
from tools.kclient import EARLIEST, LATEST, decode_assignment, list_offsets

DESCRIPTION = ("Lists consumer groups, describes them (offsets and lag, members, state), "
               "deletes groups or their offsets, and resets their committed offsets.")
MISSING = "-"
ACTIONS = ["list", "describe", "delete", "reset-offsets", "delete-offsets"]
SCENARIOS = ["to-offset", "shift-by", "to-datetime", "by-duration", "to-earliest", "to-latest",
             "to-current", "from-file"]
STATES = ["PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning",
          "Reconciling"]
TYPES = ["Consumer", "Classic"]
RETRY_COORDINATOR = (14, 15, 16)   # load in progress, not available, not coordinator


class ResetUsageError(Exception):
    """Kafka's IllegalArgumentException during the run: message plus usage, status 1."""


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    standard_options(p, "A properties file of client settings (request.timeout.ms, "
                        "default.api.timeout.ms, client.id).")
    p.specs["bootstrap-server"].help = "REQUIRED: broker address(es) to contact first, host:port[,host:port...]."
    p.add("group", "The consumer group to act on (repeatable for --describe, --delete and "
                   "--reset-offsets).", "consumer group", multi=True)
    p.add("topic", "With --delete-offsets: a topic whose committed offsets are deleted; with "
                   "--reset-offsets: a topic to reset. Either may name partitions as "
                   "'topic:0,1,2' (repeatable).", "topic", multi=True)
    p.add("all-topics", "With --reset-offsets: every topic the group has committed offsets "
                        "for.")
    p.add("list", "List the consumer groups.")
    p.add("describe", "Describe groups: by default their partitions with committed offset, "
                      "log end offset, lag and owner.")
    p.add("all-groups", "Act on every consumer group (--describe, --delete, --reset-offsets).")
    p.add("delete", "Delete groups (their committed offsets and membership). Only groups "
                    "without active members can be deleted.")
    p.add("delete-offsets", "Delete the committed offsets of one group for the given topics "
                            "or partitions.")
    p.add("timeout", "How long to wait for a coordinator that is not available yet, in ms.",
          "timeout (ms)", type=int, default=5000)
    p.add("reset-offsets", "Reset the committed offsets of inactive groups. Needs one "
                           "scenario (--to-earliest, --to-latest, --to-current, --to-offset, "
                           "--shift-by, --to-datetime, --by-duration, --from-file) and, except "
                           "with --from-file, a scope (--topic or --all-topics). Shows the plan "
                           "(--dry-run, the default) or applies it (--execute).")
    p.add("dry-run", "Show the new offsets without changing anything (--reset-offsets).")
    p.add("execute", "Commit the new offsets (--reset-offsets).")
    p.add("export", "Print the new offsets as CSV (--reset-offsets), suitable for "
                    "--from-file.")
    p.add("to-offset", "Reset to this offset (kept within the log start and end).", "offset",
          type=int)
    p.add("from-file", "Reset to the offsets of a CSV file: topic,partition,offset lines (one "
                       "group) or group,topic,partition,offset lines.", "path to CSV file")
    p.add("to-datetime", "Reset to the first offset whose timestamp is at or after this time. "
                         "Format: YYYY-MM-DDTHH:mm:SS.sss, optionally with a zone (Z, +hh:mm); "
                         "UTC by default.", "datetime")
    p.add("by-duration", "Reset to the first offset whose timestamp is at or after now minus "
                         "this duration. Format: PnDTnHnMnS.", "duration")
    p.add("to-earliest", "Reset to the log start offset.")
    p.add("to-latest", "Reset to the log end offset.")
    p.add("to-current", "Reset to the committed offset (the log end where there is none).")
    p.add("shift-by", "Move the committed offset by n (negative: back), within the log.",
          "number-of-offsets", type=int)
    p.add("members", "With --describe: one line per member (consumer id, host, client id, "
                     "number of partitions).")
    p.add("verbose", "With --describe --members: also each member's assignment.")
    p.add("offsets", "With --describe: the partitions with their offsets and lag (the "
                     "default).")
    p.add("state", "With --describe: the group's coordinator, assignment strategy, state and "
                   "member count. With --list: show each group's state, or, given "
                   "comma-separated states (e.g. stable,empty), only groups in them.",
          "states", optional=True)
    p.add("type", "With --list: show each group's type, or, given comma-separated types "
                  "(classic, consumer), only groups of them.", "types", optional=True)
    return p


def opt_name(name: str) -> str:
    return f"[{name}]"


def check_args(p: OptionParser, o) -> str:
    actions = [a for a in ACTIONS if o.has(a)]
    if len(actions) != 1:
        p.usage_exit("Command must include exactly one action: --list, --describe, --delete, "
                     "--reset-offsets, --delete-offsets")
    action = actions[0]
    if not o.has("bootstrap-server"):
        p.usage_exit('Missing required argument "[bootstrap-server]"')
    for name, allowed in (("members", ["describe"]), ("verbose", ["describe"]),
                          ("offsets", ["describe"]), ("state", ["describe", "list"]),
                          ("type", ["list"])):
        if o.has(name) and action not in allowed:
            p.usage_exit(f"Option(s) [{name}] are unavailable given other options on the "
                         f"command line")
    scope = f"{opt_name('group')}, {opt_name('all-groups')}"
    if action == "describe":
        if not o.has("group") and not o.has("all-groups"):
            p.usage_exit(f"Option {opt_name('describe')} takes one of these options: {scope}")
        subs = [n for n in ("members", "offsets", "state") if o.has(n)]
        if len(subs) > 1:
            p.usage_exit(f"Option {opt_name('describe')} takes at most one of these options: "
                         f"{opt_name('members')}, {opt_name('offsets')}, {opt_name('state')}")
        if o.has("state") and o.get("state"):
            p.usage_exit(f"Option {opt_name('describe')} does not take a value for "
                         f"{opt_name('state')}")
    if action == "delete":
        if not o.has("group") and not o.has("all-groups"):
            p.usage_exit(f"Option {opt_name('delete')} takes one of these options: {scope}")
        if o.has("topic"):
            p.usage_exit("The consumer does not support topic-specific offset deletion from a "
                         "consumer group.")
    if action == "delete-offsets":
        if not o.has("group") or not o.has("topic"):
            p.usage_exit(f"Option {opt_name('delete-offsets')} takes the following options: "
                         f"{opt_name('group')}, {opt_name('topic')}")
        if len(o["group"]) > 1:
            p.usage_exit(f"Option {opt_name('delete-offsets')} supports one consumer group at "
                         f"a time")
    if action == "reset-offsets":
        if o.has("dry-run") and o.has("execute"):
            p.usage_exit(f"Option {opt_name('reset-offsets')} only accepts one of "
                         f"{opt_name('execute')} and {opt_name('dry-run')}")
        if not o.has("group") and not o.has("all-groups"):
            p.usage_exit(f"Option {opt_name('reset-offsets')} takes one of these options: "
                         f"{scope}")
        for s in ("to-offset", "to-datetime", "by-duration", "to-earliest", "to-latest",
                  "to-current", "shift-by", "from-file"):
            check_invalid(p, o, s, [x for x in SCENARIOS if x != s])
        if not any(o.has(s) for s in SCENARIOS):
            p.usage_exit(f"Option '{opt_name('reset-offsets')}' requires one of the following "
                         f"scenarios: [" + ", ".join(SCENARIOS) + "]")
        if not o.has("from-file") and not o.has("topic") and not o.has("all-topics"):
            p.usage_exit("One of the reset scopes should be defined: --all-topics, --topic.")
        if not o.has("dry-run") and not o.has("execute") and not o.has("export"):
            print("WARN: No action will be performed as the --execute option is missing. "
                  "In a future major release, the default behavior of this command will be to "
                  "prompt the user before executing the reset rather than doing a dry run. You "
                  "should add the --dry-run option explicitly if you are scripting this command "
                  "and want to keep the current default behavior without prompting.",
                  file=sys.stderr)
    else:
        for name in ("dry-run", "execute", "export", "all-topics", *SCENARIOS):
            check_invalid(p, o, name, [action])
    check_invalid(p, o, "group", ["all-groups"])
    check_invalid(p, o, "group", ["list"])
    check_invalid(p, o, "topic", ["list", "describe", "delete"])
    return action


# =============================================================================================
# Small helpers
# =============================================================================================

def tp_str(tp) -> str:
    return f"{tp[0]}-{tp[1]}"


def parse_states(text: str) -> list[str]:
    by_lower = {s.lower(): s for s in STATES}
    out = []
    for s in text.split(","):
        s = s.strip()
        if s.lower() not in by_lower:
            raise ResetUsageError(f"Invalid state list '{text}'. Valid states are: "
                                  + ", ".join(STATES))
        out.append(by_lower[s.lower()])
    return out


def parse_types(text: str) -> list[str]:
    by_lower = {t.lower(): t for t in TYPES}
    out = []
    for t in text.split(","):
        t = t.strip().lower()
        if t not in by_lower:
            raise ResetUsageError(f"Invalid types list '{text}'. Valid types are: "
                                  + ", ".join(TYPES))
        out.append(by_lower[t])
    return out


def parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: yyyy-MM-dd'T'HH:mm:ss.SSS[XXX]; no zone means UTC."""
    if "T" not in text:
        raise ToolError("Error parsing timestamp. It does not contain a 'T' according to "
                        "ISO8601 format")
    date, _, rest = text.partition("T")
    m = re.fullmatch(r"(\d{2}):(\d{2}):(\d{2})\.(\d{3})(Z|[+-]\d{2}(?::?\d{2})?)?", rest)
    d = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", date)
    if not m or not d:
        raise ToolError(f'Unparseable date: "{text}"')
    zone = m.group(5) or "Z"
    if zone == "Z":
        tz = _dt.timezone.utc
    else:
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:] or 0)
        tz = _dt.timezone(sign * _dt.timedelta(hours=hours, minutes=minutes))
    try:
        when = _dt.datetime(int(d.group(1)), int(d.group(2)), int(d.group(3)), int(m.group(1)),
                            int(m.group(2)), int(m.group(3)), int(m.group(4)) * 1000, tzinfo=tz)
    except ValueError:
        raise ToolError(f'Unparseable date: "{text}"') from None
    epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return (when - epoch) // _dt.timedelta(milliseconds=1)


_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                       r"(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """java.time.Duration.parse (PnDTnHnMn.nS) in milliseconds."""
    m = _DURATION.fullmatch(text)
    if not m or not any(m.group(i) for i in range(2, 6)) or text.upper().endswith("T"):
        raise ToolError("Text cannot be parsed to a Duration")
    days, hours, minutes, secs = (int(m.group(i) or 0) for i in range(2, 6))
    frac = m.group(6) or ""
    ms = ((days * 24 + hours) * 60 + minutes) * 60_000 + secs * 1000
    if frac:
        f = int((frac + "000")[:3])
        ms += -f if m.group(5).startswith("-") else f
    return -ms if m.group(1) == "-" else ms


def parse_topic_arg(arg: str):
    """'topic:0,1,2' -> [(topic, 0), ...] (Kafka's parseTopicsWithPartitions)."""
    parts = arg.split(":")
    if len(parts) != 2 or not parts[0]:
        raise ResetUsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    out = []
    for x in parts[1].split(","):
        try:
            out.append((parts[0], int(x)))
        except ValueError:
            raise ResetUsageError(f"Invalid partition '{x}' specified in topic arg "
                                  f"'{arg}''") from None
    return out


# =============================================================================================
# Talking to the cluster
# =============================================================================================

class Service:
    def __init__(self, client, timeout_ms: int):
        self.client = client
        self.timeout = max(timeout_ms, 0) / 1000.0
        self.coordinators: dict[str, int] = {}

    # -- coordinator ----------------------------------------------------------------------------
    async def coordinator(self, group: str, refresh: bool = False) -> int:
        if not refresh and group in self.coordinators:
            return self.coordinators[group]
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                node = await self.client.find_coordinator(group)
                self.coordinators[group] = node
                return node
            except KafkaError as e:
                if not e.retriable or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(0.1)

    async def to_coordinator(self, group: str, req, error_of, max_version=None):
        """Send ``req`` to the group's coordinator, retrying while it is not available."""
        deadline = time.monotonic() + self.timeout
        refresh = False
        while True:
            node = await self.coordinator(group, refresh)
            resp = await self.client.send_to(node, req, max_version=max_version)
            code = error_of(resp)
            if code not in RETRY_COORDINATOR or time.monotonic() >= deadline:
                return resp
            refresh = code != 14
            await asyncio.sleep(0.1)

    # -- groups ---------------------------------------------------------------------------------
    async def list_groups(self, states=(), types=()) -> list[tuple[str, str, str]]:
        """[(group_id, state, type)] of consumer groups on every broker, sorted by id."""
        rows = await list_all_groups(self.client, self.timeout, states, types)
        return [(g.group_id, g.state, g.type or "Classic") for g in rows if g.protocol_type in ("consumer", "")]

    async def describe(self, group: str) -> dict:
        """{state, protocol, members: [(id, instance, client, host, {topic: [p]})], coordinator}.
        A consumer-protocol group (KIP-848) is described with ConsumerGroupDescribe, any other
        with DescribeGroups (as Kafka's admin client does: the first answers GROUP_ID_NOT_FOUND or
        UNSUPPORTED_VERSION for a classic group or an older broker)."""
        d = await self.describe_consumer_protocol(group)
        return d if d is not None else await self.describe_classic(group)

    async def describe_consumer_protocol(self, group: str) -> dict | None:
        node = await self.coordinator(group)
        conn = await self.client.connection(node)
        if conn.version_range(ConsumerGroupDescribeRequest.API_KEY) is None:
            return None
        resp = await self.to_coordinator(
            group, ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
            lambda r: r.groups[0].error_code if r.groups else 0)
        g = resp.groups[0]
        if g.error_code in (69, 35):          # GROUP_ID_NOT_FOUND, UNSUPPORTED_VERSION
            return None
        if g.error_code:
            raise KafkaErrorText(g.error_code, g.error_message)
        members = [(m.member_id, m.instance_id or "", m.client_id, m.client_host,
                    {tp.topic_name: list(tp.partitions) for tp in m.assignment.topic_partitions})
                   for m in g.members]
        return {"state": g.group_state, "protocol": g.assignor_name, "members": members,
                "coordinator": self.coordinators[group]}

    async def describe_classic(self, group: str) -> dict:
        resp = await self.to_coordinator(
            group, DescribeGroupsRequest(groups=[group], include_authorized_operations=False),
            lambda r: r.groups[0].error_code if r.groups else 0)
        g = resp.groups[0]
        node = self.coordinators[group]
        if g.error_code == 69:
            return {"state": "Dead", "protocol": "", "members": [], "coordinator": node}
        if g.error_code:
            raise KafkaErrorText(g.error_code, getattr(g, "error_message", None))
        if g.protocol_type not in ("consumer", "") and g.group_state != "Dead":
            raise ToolError(f"java.lang.IllegalArgumentException: GroupId {group} is not a consumer group "
                            f"({g.protocol_type}).")       # Kafka's admin client's words
        members = []
        for m in g.members:
            try:
                assignment = decode_assignment(m.member_assignment) if m.member_assignment else {}
            except Exception:
                assignment = {}
            members.append((m.member_id, m.group_instance_id or "", m.client_id, m.client_host,
                            assignment))
        return {"state": g.group_state, "protocol": g.protocol_data or "", "members": members,
                "coordinator": node}

    async def committed(self, group: str) -> dict[tuple[str, int], int]:
        F = OffsetFetchRequest
        req = F(group_id=group, topics=None, require_stable=False)
        resp = await self.to_coordinator(group, req, lambda r: r.error_code, max_version=7)
        if resp.error_code:
            raise KafkaErrorText(resp.error_code)
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code == 0 and p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = p.committed_offset
        return out

    async def commit(self, group: str, offsets: dict[tuple[str, int], int]):
        C = OffsetCommitRequest
        by_topic = defaultdict(list)
        for (t, p), off in sorted(offsets.items()):
            by_topic[t].append(C.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=off, committed_leader_epoch=-1,
                committed_metadata="", commit_timestamp=-1))
        req = C(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, retention_time_ms=-1,
                topics=[C.OffsetCommitRequestTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()])

        def first_error(r):
            for t in r.topics:
                for p in t.partitions:
                    if p.error_code:
                        return p.error_code
            return 0
        resp = await self.to_coordinator(group, req, first_error, max_version=8)
        code = first_error(resp)
        if code:
            raise KafkaErrorText(code)

    async def delete_groups(self, groups: list[str]) -> dict[str, int]:
        out = {}
        for g in groups:
            resp = await self.to_coordinator(
                g, DeleteGroupsRequest(groups_names=[g]),
                lambda r: r.results[0].error_code if r.results else 0)
            out[g] = resp.results[0].error_code if resp.results else 0
        return out

    async def delete_offsets(self, group: str, tps):
        O = OffsetDeleteRequest
        by_topic = defaultdict(list)
        for t, p in sorted(tps):
            by_topic[t].append(O.OffsetDeleteRequestPartition(partition_index=p))
        req = O(group_id=group, topics=[O.OffsetDeleteRequestTopic(name=t, partitions=ps)
                                        for t, ps in by_topic.items()])
        resp = await self.to_coordinator(group, req, lambda r: r.error_code)
        per = {}
        for t in resp.topics:
            for p in t.partitions:
                per[(t.name, p.partition_index)] = p.error_code
        return resp.error_code, per

    # -- topics and offsets ---------------------------------------------------------------------
    async def partitions_of(self, topics) -> dict[str, list[int] | None]:
        """{topic: sorted partition ids, or None when the topic does not exist}."""
        topics = sorted(set(topics))
        if not topics:
            return {}
        await self.client.refresh_metadata(topics)
        return {t: sorted(p.partition_index for p in self.client.topics[t].partitions)
                if t in self.client.topics else None for t in topics}

    async def log_offsets(self, tps, spec: int) -> dict:
        """{tp: offset} (missing: unknown) at ``spec`` (EARLIEST, LATEST or a timestamp)."""
        tps = sorted(set(tps))
        if not tps:
            return {}
        await self.client.refresh_metadata(sorted({t for t, _ in tps}))
        known = [tp for tp in tps if self.client.leader_for(*tp) >= 0]
        res = await list_offsets(self.client, known, spec) if known else {}
        return {tp: v[0] for tp, v in res.items() if not isinstance(v, BaseException)}


class GroupRow(NamedTuple):
    group_id: str
    protocol_type: str
    state: str          # "" before ListGroups v4
    type: str           # "Classic", "Consumer", ... as Java's GroupType prints it; "" before v5


async def list_all_groups(client, timeout: float, states=(), types=()) -> list[GroupRow]:
    """Every group of every protocol type that some broker coordinates (ListGroups to each
    broker, retried while a coordinator is loading), sorted by id."""
    await client.refresh_metadata(topics=[])
    nodes = sorted(client.nodes)

    async def ask(node):
        deadline = time.monotonic() + timeout
        conn = await client.connection(node)
        version = conn.pick_version(ListGroupsRequest.API_KEY)
        if types and version < 5:
            raise ToolError("The broker does not support listing groups by type")
        while True:
            req = ListGroupsRequest(states_filter=list(states) if version >= 4 else [],
                                    types_filter=[t.lower() for t in types] if version >= 5 else [])
            resp = await conn.send(req, version=version)
            if resp.error_code in RETRY_COORDINATOR and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                continue
            if resp.error_code in RETRY_COORDINATOR:
                return []         # no coordinator yet: no groups there either
            if resp.error_code:
                raise KafkaErrorText(resp.error_code)
            out = []
            for g in resp.groups:
                state = getattr(g, "group_state", "") if version >= 4 else ""
                gtype = getattr(g, "group_type", "") if version >= 5 else ""
                if states and version < 4 and state not in states:
                    continue
                out.append(GroupRow(g.group_id, g.protocol_type or "", state, gtype.capitalize()))
            return out

    seen = {}
    for rows in await asyncio.gather(*(ask(n) for n in nodes)):
        for row in rows:
            seen[row.group_id] = row
    return [seen[g] for g in sorted(seen)]


class KafkaErrorText(ToolError):
    def __init__(self, code: int, message: str | None = None):
        super().__init__(java_error(code, message))
        self.code = code


# =============================================================================================
# --list
# =============================================================================================

async def do_list(svc: Service, o) -> int:
    show_state, show_type = o.has("state"), o.has("type")
    states = parse_states(o["state"]) if o.get("state") else []
    types = parse_types(o["type"]) if o.get("type") else []
    groups = await svc.list_groups(states, types)
    if types:
        groups = [g for g in groups if g[2] in types]
    if not (show_state or show_type):
        for gid, _, _ in groups:
            print(gid)
        return 0
    width = max([15] + [len(g[0]) for g in groups]) + 10
    header = ["GROUP"]
    if show_type:
        header.append("TYPE")
    if show_state:
        header.append("STATE")

    def line(cols):
        s = f"{cols[0]:<{width}}"
        for c in cols[1:]:
            s += f" {c:<20}"
        return s
    print(line(header))
    for gid, state, gtype in groups:
        cols = [gid]
        if show_type:
            cols.append(gtype)
        if show_state:
            cols.append(state or "Unknown")
        print(line(cols))
    return 0


# =============================================================================================
# --describe
# =============================================================================================

def state_notice(group: str, state: str, rows: int | None) -> tuple[bool, bool]:
    """Kafka's shouldPrintMemberState: (print the table?, was it an error?)."""
    if state == "Dead":
        print(f"Error: Consumer group '{group}' does not exist.", file=sys.stderr)
        return False, True
    if state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    return (rows or 0) > 0, False


async def describe_offsets(svc: Service, group: str, d: dict) -> list[tuple]:
    committed = await svc.committed(group)
    rows = []
    assigned = set()
    members = [m for m in d["members"] if any(m[4].values())]
    members.sort(key=lambda m: -sum(len(ps) for ps in m[4].values()))
    owner = []
    for mid, _iid, cid, host, assignment in members:
        tps = sorted((t, p) for t, ps in assignment.items() for p in ps)
        assigned.update(tps)
        owner.extend((tp, mid, host, cid) for tp in tps)
    owner.extend((tp, MISSING, MISSING, MISSING)
                 for tp in sorted(set(committed) - assigned))
    leo = await svc.log_offsets([tp for tp, *_ in owner], LATEST)
    for tp, mid, host, cid in owner:
        cur = committed.get(tp)
        end = leo.get(tp)
        lag = end - cur if cur is not None and end is not None else None
        rows.append((group, tp[0], str(tp[1]), MISSING if cur is None else str(cur),
                     MISSING if end is None else str(end), MISSING if lag is None else str(lag),
                     mid, host, cid))
    return rows


def print_offsets(rows):
    gw = max([15] + [len(r[0]) for r in rows])
    tw = max([15] + [len(r[1]) for r in rows])
    cw = max([15] + [len(r[6]) for r in rows])
    hw = max([15] + [len(r[7]) for r in rows])
    out = []
    for r in [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
               "CONSUMER-ID", "HOST", "CLIENT-ID")] + rows:
        out.append(f"\n{r[0]:<{gw}} {r[1]:<{tw}} {r[2]:<10} {r[3]:<15} {r[4]:<15} {r[5]:<15} "
                   f"{r[6]:<{cw}} {r[7]:<{hw}} {r[8]}")
    sys.stdout.write("".join(out) + "\n")


def assignment_text(assignment: dict) -> str:
    parts = [f"{t}({','.join(str(p) for p in sorted(ps))})"
             for t, ps in assignment.items() if ps]
    return ", ".join(sorted(parts)) if parts else MISSING


def print_members(group: str, d: dict, verbose: bool):
    ms = d["members"]
    with_iid = any(m[1] for m in ms)
    gw = max([15, len(group)])
    cw = max([15] + [len(m[0]) for m in ms])
    iw = max([17] + [len(m[1]) for m in ms])
    hw = max([15] + [len(m[3]) for m in ms])
    lw = max([15] + [len(m[2]) for m in ms])

    def cols(g, mid, iid, host, cid, n):
        s = f"{g:<{gw}} {mid:<{cw}} "
        if with_iid:
            s += f"{iid:<{iw}} "
        return s + f"{host:<{hw}} {cid:<{lw}} {n:<15} "
    lines = ["", cols("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                      "#PARTITIONS") + ("ASSIGNMENT" if verbose else "")]
    for mid, iid, cid, host, assignment in ms:
        n = sum(len(ps) for ps in assignment.values())
        lines.append(cols(group, mid, iid, host, cid, str(n))
                     + (assignment_text(assignment) if verbose else ""))
    sys.stdout.write("\n".join(lines) + "\n")


def print_state(svc: Service, group: str, d: dict):
    node = svc.client.nodes.get(d["coordinator"])
    coord = f"{node.host}:{node.port}  ({d['coordinator']})" if node else f"({d['coordinator']})"
    cw = max(25, len(coord))
    gw = max(15, len(group))
    strategy = d["protocol"] or MISSING
    fmt = lambda a, b, c, s, n: f"\n{a:<{gw}} {b:<{cw}} {c:<20} {s:<20} {n}"  # noqa: E731
    sys.stdout.write(fmt("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
                     + fmt(group, coord, strategy, d["state"], len(d["members"])) + "\n")


async def do_describe(svc: Service, o) -> int:
    if o.has("all-groups"):
        groups = [g for g, _, _ in await svc.list_groups()]
    else:
        groups = sorted(set(o["group"]))
    failed = False
    for group in groups:
        d = await svc.describe(group)
        if o.has("members"):
            show, err = state_notice(group, d["state"], len(d["members"]))
            failed |= err
            if not err:
                print_members(group, d, o.has("verbose"))
        elif o.has("state"):
            show, err = state_notice(group, d["state"], 1)
            failed |= err
            if show:
                print_state(svc, group, d)
        else:
            rows = [] if d["state"] == "Dead" else await describe_offsets(svc, group, d)
            show, err = state_notice(group, d["state"], len(rows))
            failed |= err
            if show:
                print_offsets(rows)
    return 1 if failed else 0


# =============================================================================================
# --delete and --delete-offsets
# =============================================================================================

async def do_delete(svc: Service, o) -> int:
    if o.has("all-groups"):
        groups = [g for g, _, _ in await svc.list_groups()]
    else:
        groups = list(dict.fromkeys(o["group"]))
    if not groups:
        print("Deletion of requested consumer groups () was successful.")
        return 0
    res = await svc.delete_groups(groups)
    ok = [g for g in groups if res[g] == 0]
    bad = [g for g in groups if res[g] != 0]
    if not bad:
        print("Deletion of requested consumer groups ("
              + ", ".join(f"'{g}'" for g in ok) + ") was successful.")
        return 0
    print("Error: Deletion of some consumer groups failed:", file=sys.stderr)
    for g in bad:
        print(f"* Group '{g}' could not be deleted due to: {java_error(res[g])}",
              file=sys.stderr)
    if ok:
        print("\nThese consumer groups were deleted successfully: "
              + ", ".join(f"'{g}'" for g in ok))
    return 1


async def do_delete_offsets(svc: Service, o) -> int:
    group = o["group"][0]
    results: dict[tuple[str, int], str | None] = {}
    wanted = []
    plain = []
    for arg in o["topic"]:
        if ":" in arg:
            wanted.extend(parse_topic_arg(arg))
        else:
            plain.append(arg)
    for t, parts in (await svc.partitions_of(plain)).items():
        if parts is None:
            results[(t, -1)] = java_error(3)
        else:
            wanted.extend((t, p) for p in parts)
    wanted = sorted(set(wanted))
    top = 0
    if wanted:
        top, per = await svc.delete_offsets(group, wanted)
        for tp in wanted:
            code = per.get(tp, top)
            results[tp] = java_error(code) if code else None
    elif results:
        top = 3
    messages = {
        24: f"'{group}' is not valid.",
        69: f"'{group}' does not exist.",
        30: f"Access to '{group}' is not authorized.",
        68: f"Deleting offsets of a consumer group '{group}' is forbidden if the group is not "
            f"empty.",
    }
    partition_level = any(v is not None for v in results.values())
    status = 0
    if top == 0 and not partition_level:
        print(f"Request succeeded for deleting offsets from group {group}.")
    elif top in messages:
        print(f"Error: {messages[top]}", file=sys.stderr)
        status = 1
    elif top in (0, 3, 29, 86):
        print("Error: Encountered some partition-level error, see the follow-up details.",
              file=sys.stderr)
        status = 1
    else:
        print(f"Error: Encountered some unknown error: {error_name(top)}", file=sys.stderr)
        status = 1
    if top in messages:
        return status
    tw = max([15] + [len(t) for t, _ in results])
    out = [f"\n{'TOPIC':<{tw}} {'PARTITION':<10} {'STATUS':<15}"]
    for (t, p), err in sorted(results.items()):
        out.append(f"\n{t:<{tw}} {str(p) if p >= 0 else MISSING:<10} "
                   f"{('Error: ' + err) if err else 'Successful':<15}")
    sys.stdout.write("".join(out) + "\n")
    return status


# =============================================================================================
# --reset-offsets
# =============================================================================================

def read_plan(path: str, groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ToolError(f"{path} ({e.strerror or e})") from None
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]

    def num(x):
        return int(x.strip())
    no_group = False
    if lines:
        first = lines[0].split(",")
        try:
            no_group = len(first) == 3 and num(first[1]) is not None and num(first[2]) is not None
        except ValueError:
            no_group = False
    plan: dict[str, dict] = {}
    for ln in lines:
        f = ln.split(",")
        try:
            if no_group and len(groups) == 1:
                if len(f) != 3:
                    raise ValueError
                plan.setdefault(groups[0], {})[(f[0].strip(), num(f[1]))] = num(f[2])
            else:
                if len(f) != 4:
                    raise ValueError
                plan.setdefault(f[0].strip(), {})[(f[1].strip(), num(f[2]))] = num(f[3])
        except ValueError:
            raise ToolError(f"Invalid line in the reset plan {path}: '{ln}'") from None
    return plan


class Resetter:
    def __init__(self, svc: Service, o):
        self.svc = svc
        self.o = o

    def warn(self, text: str):
        print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] WARN {text}", file=sys.stderr)

    async def clamp(self, requested: dict) -> dict:
        """Kafka's checkOffsetsRange: keep offsets within [log start, log end]."""
        tps = list(requested)
        start = await self.svc.log_offsets(tps, EARLIEST)
        end = await self.svc.log_offsets(tps, LATEST)
        out = {}
        for tp, off in requested.items():
            e, s = end.get(tp), start.get(tp)
            if e is not None and off > e:
                self.warn(f"New offset ({off}) is higher than latest offset for topic partition "
                          f"{tp_str(tp)}. Value will be set to {e}")
                off = e
            elif s is not None and off < s:
                self.warn(f"New offset ({off}) is lower than earliest offset for topic partition "
                          f"{tp_str(tp)}. Value will be set to {s}")
                off = s
            out[tp] = off
        return out

    async def at_log(self, tps, spec: int, what: str) -> dict:
        got = await self.svc.log_offsets(tps, spec)
        for tp in tps:
            if tp not in got:
                raise ToolError(f"Error getting {what} offset of topic partition: {tp_str(tp)}")
        return {tp: got[tp] for tp in tps}

    async def at_time(self, tps, ts: int) -> dict:
        got = await self.svc.log_offsets(tps, ts)
        out = {}
        empty = []
        for tp in tps:
            v = got.get(tp)
            if v is None or v < 0:
                empty.append(tp)
            else:
                out[tp] = v
        for tp in empty:
            print(f"\nWarn: Partition {tp[1]} from topic {tp[0]} is empty. Falling back to "
                  f"latest known offset.")
        if empty:
            out.update(await self.at_log(empty, LATEST, "offset by timestamp of"))
        return out

    async def partitions(self, group: str, committed) -> list:
        o = self.o
        if o.has("all-topics"):
            return sorted(committed)
        if not o.has("topic"):
            return []
        wanted, plain = [], []
        for arg in o["topic"]:
            if ":" in arg:
                wanted.extend(parse_topic_arg(arg))
            else:
                plain.append(arg)
        known = await self.svc.partitions_of({t for t, _ in wanted} | set(plain))
        missing_topics = [t for t in plain if known.get(t) is None]
        if missing_topics:
            raise KafkaErrorText(3, "This server does not host this topic-partition.")
        for t in plain:
            wanted.extend((t, p) for p in known[t])
        missing = [tp for tp in wanted if known.get(tp[0]) is None or tp[1] not in known[tp[0]]]
        if missing:
            raise KafkaErrorText(3, 'The partitions "' + ",".join(tp_str(tp) for tp in missing)
                                 + '" do not exist')
        return sorted(set(wanted))

    async def plan(self, group: str, plans) -> dict:
        o = self.o
        committed = await self.svc.committed(group)
        tps = await self.partitions(group, committed)
        if o.has("to-offset"):
            return await self.clamp({tp: o["to-offset"] for tp in tps})
        if o.has("to-earliest"):
            return await self.at_log(tps, EARLIEST, "starting")
        if o.has("to-latest"):
            return await self.at_log(tps, LATEST, "ending")
        if o.has("shift-by"):
            req = {}
            for tp in tps:
                if tp not in committed:
                    raise ResetUsageError(f"Cannot shift offset for partition {tp_str(tp)} since "
                                          f"there is no current committed offset")
                req[tp] = committed[tp] + o["shift-by"]
            return await self.clamp(req)
        if o.has("to-datetime"):
            return await self.at_time(tps, parse_datetime(o["to-datetime"]))
        if o.has("by-duration"):
            ts = int(time.time() * 1000) - parse_duration_ms(o["by-duration"])
            return await self.at_time(tps, ts)
        if o.has("from-file"):
            mine = plans.get(group)
            if mine is None:
                print(f"Error: No reset plan for group {group} found", file=sys.stderr)
                self.failed = True
                return {}
            known = await self.svc.partitions_of({t for t, _ in mine})
            missing = [tp for tp in mine if known.get(tp[0]) is None or tp[1] not in known[tp[0]]]
            if missing:
                raise KafkaErrorText(3, 'The partitions "' + ",".join(tp_str(tp) for tp in missing)
                                     + '" do not exist')
            return await self.clamp(dict(sorted(mine.items())))
        # --to-current
        out = {tp: committed[tp] for tp in tps if tp in committed}
        rest = [tp for tp in tps if tp not in committed]
        if rest:
            out.update(await self.at_log(rest, LATEST, "ending"))
        return dict(sorted(out.items()))

    async def run(self) -> tuple[dict, bool]:
        o = self.o
        self.failed = False
        if o.has("all-groups"):
            groups = [g for g, _, _ in await self.svc.list_groups()]
        else:
            groups = list(dict.fromkeys(o["group"]))
        if o.has("to-datetime"):
            parse_datetime(o["to-datetime"])          # fail before touching anything
        if o.has("by-duration"):
            parse_duration_ms(o["by-duration"])
        plans = read_plan(o["from-file"], groups) if o.has("from-file") else {}
        execute = o.has("execute") and not o.has("dry-run")
        result = {}
        for group in groups:
            d = await self.svc.describe(group)
            if d["state"] not in ("Empty", "Dead"):
                print(f"Error: Assignments can only be reset if the group '{group}' is "
                      f"inactive, but the current state is {d['state']}.", file=sys.stderr)
                self.failed = True
                result[group] = {}
                continue
            new = await self.plan(group, plans)
            if execute and new:
                await self.svc.commit(group, new)
            result[group] = new
        return result, self.failed


def print_reset(result: dict):
    if not result:
        return
    fmt = "\n{:<30} {:<30} {:<10} {:<15}"
    out = [fmt.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    for group in sorted(result):
        for (t, p), off in sorted(result[group].items()):
            out.append(fmt.format(group, t, p, off))
    sys.stdout.write("".join(out) + "\n")


def export_csv(result: dict, single_group: bool) -> str:
    lines = []
    for group in sorted(result):
        for (t, p), off in sorted(result[group].items()):
            lines.append(f"{t},{p},{off}" if single_group else f"{group},{t},{p},{off}")
    return "".join(x + "\n" for x in lines)


async def do_reset(svc: Service, o) -> int:
    result, failed = await Resetter(svc, o).run()
    if o.has("export"):
        print(export_csv(result, len(o["group"]) == 1))
    else:
        print_reset(result)
    return 1 if failed else 0


# =============================================================================================

async def execute(p: OptionParser, o, action: str) -> int:
    client = None
    try:
        client = await cluster_from(o, client_id="consumer-groups-tool")
        svc = Service(client, o["timeout"])
        if action == "list":
            return await do_list(svc, o)
        if action == "describe":
            return await do_describe(svc, o)
        if action == "delete":
            return await do_delete(svc, o)
        if action == "delete-offsets":
            return await do_delete_offsets(svc, o)
        return await do_reset(svc, o)
    except ResetUsageError as e:
        sys.stdout.flush()
        p.usage_exit(str(e))
    except (ToolError, KafkaConnectionError, KafkaError) as e:
        raise ToolError(f"Executing consumer group command failed due to {e}") from None
    finally:
        if client is not None:
            await client.close()


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        action = check_args(p, o)
        if action == "list" and o.get("state"):
            try:
                parse_states(o["state"])
            except ResetUsageError as e:
                p.usage_exit(str(e))
        if action == "list" and o.get("type"):
            try:
                parse_types(o["type"])
            except ResetUsageError as e:
                p.usage_exit(str(e))
        return execute(p, o, action)

    try:
        return run(body, sys.argv[1:] if argv is None else argv)
    except UsageError as e:            # pragma: no cover - parse_or_exit handles these
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

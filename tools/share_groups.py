"""kafka-share-groups.sh: Kafka 4.1/4.2's ShareGroupCommand for share groups (KIP-932).

    kafka-share-groups.sh --bootstrap-server h:p [--command-config f] [--timeout ms]
        --list [--state [states]]
        --describe (--group g ... | --all-groups) [--offsets | --members | --state] [--verbose]
        --delete (--group g ... | --all-groups)
        --reset-offsets --group g (--topic t[:p,...] ... | --all-topics)
            (--to-earliest | --to-latest | --to-datetime YYYY-MM-DDTHH:mm:SS.sss) [--dry-run | --execute]
        --delete-offsets --group g --topic t ...

What it prints follows Kafka's tool: ``--describe`` shows each partition's start offset (the
share-partition start offset) and lag (DescribeShareGroupOffsets), ``--members`` each member's
partitions, ``--state`` the coordinator, state and member count (ShareGroupDescribe).  Offsets
can be reset or deleted only while the group has no members.
"""
from __future__ import annotations

import sys

from protocol.client import KafkaConnectionError
from protocol.errors import KafkaError
from protocol.messages import (AlterShareGroupOffsetsRequest, DeleteGroupsRequest, DeleteShareGroupOffsetsRequest,
                               DescribeShareGroupOffsetsRequest, ShareGroupDescribeRequest)
from tools.common import (OptionParser, ToolError, check_invalid, cluster_from, java_error, parse_or_exit, run,
                          standard_options)
from tools.consumer_groups import Service, list_all_groups, parse_datetime, parse_topic_arg, print_reset
from tools.kclient import EARLIEST, LATEST

GROUP_ID_NOT_FOUND = 69
DESCRIPTION = "This tool helps to list, describe, reset and delete share groups."
MISSING = "-"
ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    standard_options(p, "Property file containing configs to be passed to Admin Client.")
    p.add("group", "The share group we wish to act on.", "share group", multi=True)
    p.add("topic", "The topic whose offset information should be deleted or included in the reset offset "
                   "process. In 'reset-offsets' case, partitions can be specified using this format: "
                   "'topic1:0,1,2', where 0,1,2 are the partitions to be included.", "topic", multi=True)
    p.add("all-topics", "Consider all topics assigned to a share group in the 'reset-offsets' process.")
    p.add("list", "List all share groups.")
    p.add("describe", "Describe share group, members and offset information.")
    p.add("all-groups", "Apply to all share groups.")
    p.add("delete", "Delete share group.")
    p.add("timeout", "The timeout that can be set for some use cases, in ms.", "timeout (ms)", type=int,
          default=5000)
    p.add("reset-offsets", "Reset offsets of share group. Supports one share group at the time, and instances "
                           "must be inactive. Has 2 execution options: --dry-run (the default) to plan which "
                           "offsets to reset, and --execute to reset the offsets.")
    p.add("delete-offsets", "Delete offsets of share group. Supports one share group at the time, and multiple "
                            "topics.")
    p.add("dry-run", "Only show results without executing changes on share groups. Supported operations: "
                     "reset-offsets.")
    p.add("execute", "Execute operation. Supported operations: reset-offsets.")
    p.add("to-datetime", "Reset offsets to offset from datetime. Format: 'YYYY-MM-DDThh:mm:ss.sss'", "datetime")
    p.add("to-earliest", "Reset offsets to earliest offset.")
    p.add("to-latest", "Reset offsets to latest offset.")
    p.add("members", "Describe members of the group. This option may be used with the '--describe' option only.")
    p.add("offsets", "Describe the group and list all topic partitions in the group along with their offset "
                     "information. This is the default sub-action and may be used with the '--describe' option "
                     "only.")
    p.add("state", "When specified with '--describe', includes the state of the group. When specified with "
                   "'--list', it displays the state of all groups. It can also be used to list groups with "
                   "specific states. The valid values are 'Empty', 'Stable' and 'Dead'.", "String", optional=True)
    p.add("verbose", "Provide additional information, if any, when describing the group. This option may be "
                     "used with the '--describe --state' and '--describe --members' options only.")
    return p


def check_args(p: OptionParser, o) -> str:
    actions = [a for a in ACTIONS if o.has(a)]
    if len(actions) != 1:
        p.usage_exit("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                     "--delete-offsets.")
    action = actions[0]
    if action == "describe" and not (o.has("group") or o.has("all-groups")):
        p.usage_exit("Option [describe] takes one of these options: [all-groups], [group]")
    if action == "delete":
        if not (o.has("group") or o.has("all-groups")):
            p.usage_exit("Option [delete] takes the options [group] or [all-groups]")
        if o.has("group") and o.has("all-groups"):
            p.usage_exit("Option [delete] takes either [group] or [all-groups], not both.")
    if action in ("reset-offsets", "delete-offsets"):
        if not o.has("group") or len(o.get("group")) != 1:
            p.usage_exit(f"Option [{action}] takes the option [group] with exactly one share group.")
    if action == "reset-offsets":
        if o.has("dry-run") and o.has("execute"):
            p.usage_exit("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not (o.has("topic") or o.has("all-topics")):
            p.usage_exit("Option [reset-offsets] takes one of these options: [all-topics], [topic]")
        if sum(o.has(s) for s in ("to-earliest", "to-latest", "to-datetime")) != 1:
            p.usage_exit("Option [reset-offsets] requires one of the following scenarios: "
                         "[to-datetime], [to-earliest], [to-latest]")
    if action == "delete-offsets" and not o.has("topic"):
        p.usage_exit("Option [delete-offsets] takes the option [topic]")
    check_invalid(p, o, "members", ["offsets", "state", "list", "delete", "reset-offsets", "delete-offsets"])
    return action


class ShareService(Service):
    async def share_groups(self, states=()) -> list:
        rows = await list_all_groups(self.client, self.timeout, states, ["share"])
        return [r for r in rows if r.type.lower() == "share"]

    async def describe_share(self, group: str):
        resp = await self.to_coordinator(
            group, ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
            lambda r: r.groups[0].error_code)
        return resp.groups[0], self.coordinators.get(group)

    async def offsets(self, group: str):
        resp = await self.to_coordinator(group, DescribeShareGroupOffsetsRequest(groups=[
            DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]),
            lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        if g.error_code:
            raise ToolError(java_error(g.error_code, g.error_message))
        return [(t.topic_name, p.partition_index, p.start_offset, p.leader_epoch, getattr(p, "lag", -1))
                for t in g.topics for p in t.partitions if not p.error_code]


def _node_text(svc, node_id) -> str:
    n = svc.client.nodes.get(node_id) if node_id is not None else None
    return f"{n.host}:{n.port}  ({node_id})" if n is not None else f"-  ({node_id})"


async def describe(svc: ShareService, o) -> int:
    groups = [r.group_id for r in await svc.share_groups()] if o.has("all-groups") else list(o.get("group"))
    rc = 0
    for group in sorted(set(groups)):
        d, node = await svc.describe_share(group)
        if d.error_code:
            if d.error_code == GROUP_ID_NOT_FOUND:
                print(f"\nError: Share group '{group}' does not exist.", file=sys.stderr)
            else:
                print(f"\nError: {java_error(d.error_code, d.error_message)}", file=sys.stderr)
            rc = 1
            continue
        glen = max(15, len(group))
        if o.has("members"):
            members = sorted(d.members, key=lambda m: m.member_id)
            if d.group_state == "Empty":
                print(f"\nShare group '{group}' has no active members.", file=sys.stderr)
            if not members:
                continue
            ml = max([15] + [len(m.member_id) for m in members])
            hl = max([15] + [len(m.client_host) for m in members])
            cl = max([15] + [len(m.client_id) for m in members])
            head = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"] + \
                (["MEMBER-EPOCH"] if o.has("verbose") else []) + ["ASSIGNMENT"]
            widths = [glen, ml, hl, cl, 12] + ([13] if o.has("verbose") else []) + [0]
            lines = [head]
            for m in members:
                tps = m.assignment.topic_partitions
                text = ";".join(sorted(f"{t.topic_name}:" + ",".join(str(p) for p in sorted(t.partitions))
                                       for t in tps))
                lines.append([group, m.member_id, m.client_host, m.client_id, str(sum(len(t.partitions) for t in tps))]
                             + ([str(m.member_epoch)] if o.has("verbose") else []) + [text])
            print("".join("\n" + " ".join(f"{v:<{w}}" if w else v for v, w in zip(row, widths)) for row in lines))
        elif o.has("state"):
            if d.group_state == "Empty":
                print(f"\nShare group '{group}' has no active members.", file=sys.stderr)
            coord = _node_text(svc, node)
            clen = max(25, len(coord))
            if o.has("verbose"):
                rows = [("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"),
                        (group, coord, d.group_state, str(d.group_epoch), str(d.assignment_epoch), str(len(d.members)))]
                widths = (glen, clen, 15, 12, 17, 0)
            else:
                rows = [("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"),
                        (group, coord, d.group_state, str(len(d.members)))]
                widths = (glen, clen, 15, 0)
            print("".join("\n" + " ".join(f"{v:<{w}}" if w else v for v, w in zip(row, widths)) for row in rows))
        else:
            rows = sorted(await svc.offsets(group))
            if not rows:
                print(f"\nShare group '{group}' has no offset information.")
                continue
            tlen = max([15] + [len(t) for t, *_ in rows])
            verbose = o.has("verbose")
            head = ("GROUP", "TOPIC", "PARTITION") + (("LEADER-EPOCH",) if verbose else ()) + ("START-OFFSET", "LAG")
            widths = (glen, tlen, 10) + ((13,) if verbose else ()) + (13, 0)
            out = [head]
            for t, p, start, epoch, lag in rows:
                def shown(v):
                    return MISSING if v is None or v < 0 else str(v)
                if start < 0:       # not started yet: Java's admin lists the partition with no offset info
                    epoch = lag = None
                out.append((group, t, str(p)) + ((shown(epoch),) if verbose else ()) + (shown(start), shown(lag)))
            print("".join("\n" + " ".join(f"{v:<{w}}" if w else v for v, w in zip(row, widths)) for row in out))
    return rc


async def delete(svc: ShareService, o) -> int:
    listed = {r.group_id: r.state for r in await svc.share_groups()}
    groups = sorted(listed) if o.has("all-groups") else list(dict.fromkeys(o.get("group")))
    failed, ok = {}, []
    for g in groups:
        if g not in listed:
            failed[g] = f"java.lang.IllegalArgumentException: Group '{g}' is not a share group."
        elif listed[g] != "Empty":
            failed[g] = f"org.apache.kafka.common.errors.GroupNotEmptyException: Share group '{g}' is not EMPTY."
    for g in groups:
        if g in failed:
            continue
        resp = await svc.to_coordinator(g, DeleteGroupsRequest(groups_names=[g]), lambda r: r.results[0].error_code)
        code = resp.results[0].error_code
        if code:
            failed[g] = java_error(code)
        else:
            ok.append(g)
    if not failed:
        print("Deletion of requested share groups (" + ", ".join(f"'{g}'" for g in ok) + ") was successful.")
        return 0
    print("\nError: Deletion of some share groups failed:")
    for g, why in failed.items():
        print(f"* Group '{g}' could not be deleted due to: {why}")
    if ok:
        print("\nThese share groups were deleted successfully: " + ", ".join(f"'{g}'" for g in ok))
    return 1


async def reset_offsets(svc: ShareService, o) -> int:
    group = o.get("group")[0]
    d, _ = await svc.describe_share(group)
    if not d.error_code and d.group_state not in ("Empty", "Dead"):
        print(f"Error: Share group '{group}' is not empty.", file=sys.stderr)
        return 1
    if o.has("topic"):
        tps = []
        names = sorted({a.split(":", 1)[0] for a in o.get("topic")})
        await svc.client.refresh_metadata(names)
        for arg in o.get("topic"):
            if ":" in arg:
                tps.extend(parse_topic_arg(arg))
                continue
            t = svc.client.topics.get(arg)
            if t is None:
                raise ToolError(f"topic {arg} does not exist")
            tps.extend((arg, p.partition_index) for p in t.partitions)
    else:
        tps = [(t, p) for t, p, *_ in await svc.offsets(group)]
    if o.has("to-earliest"):
        new = await svc.log_offsets(tps, EARLIEST)
    elif o.has("to-latest"):
        new = await svc.log_offsets(tps, LATEST)
    else:
        ts = parse_datetime(o.get("to-datetime"))
        new = await svc.log_offsets(tps, ts)
        missing = [tp for tp in tps if new.get(tp) is None or new[tp] < 0]
        if missing:
            new.update(await svc.log_offsets(missing, LATEST))
    for tp in tps:
        if tp not in new:
            raise ToolError(f"Error: Executing share group command failed due to topic partition {tp[0]}-{tp[1]} "
                            "does not exist")
    if o.has("execute"):
        A = AlterShareGroupOffsetsRequest
        by_topic: dict = {}
        for (t, p) in tps:
            by_topic.setdefault(t, []).append(A.AlterShareGroupOffsetsRequestPartition(partition_index=p,
                                                                                    start_offset=new[(t, p)]))
        resp = await svc.to_coordinator(group, A(group_id=group, topics=[
            A.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in by_topic.items()]),
            lambda r: r.error_code)
        if resp.error_code:
            raise ToolError(java_error(resp.error_code, resp.error_message))
        for t in resp.responses:
            for p in t.partitions:
                if p.error_code:
                    raise ToolError(java_error(p.error_code, p.error_message))
    print_reset({group: {tp: new[tp] for tp in tps}})
    return 0


async def delete_offsets(svc: ShareService, o) -> int:
    group = o.get("group")[0]
    topics = list(dict.fromkeys(o.get("topic")))
    R = DeleteShareGroupOffsetsRequest
    resp = await svc.to_coordinator(group, R(group_id=group, topics=[R.DeleteShareGroupOffsetsRequestTopic(
        topic_name=t) for t in topics]), lambda r: r.error_code)
    if resp.error_code:
        print(f"\nError: {java_error(resp.error_code, resp.error_message).split(': ', 1)[-1]}")
        return 1
    results = {t.topic_name: t for t in resp.responses}
    tlen = max([15] + [len(t) for t in topics])
    out = [f"\n{'TOPIC':<{tlen}} STATUS"]
    rc = 0
    for t in sorted(topics):
        r = results.get(t)
        if r is None or r.error_code:
            rc = 1
            out.append(f"\n{t:<{tlen}} Error: " + java_error(r.error_code if r else 3).split(": ", 1)[-1])
        else:
            out.append(f"\n{t:<{tlen}} Successful")
    print("".join(out))
    return rc


async def list_groups(svc: ShareService, o) -> int:
    if o.has("state"):
        states = [s.strip() for s in (o.get("state") or "").split(",") if s.strip()]
        rows = await svc.share_groups([s.lower() for s in states])
        glen = max([15] + [len(r.group_id) for r in rows])
        print(f"{'GROUP':<{glen}} STATE")
        for r in rows:
            print(f"{r.group_id:<{glen}} {r.state}")
    else:
        for r in await svc.share_groups():
            print(r.group_id)
    return 0


async def execute(o, action: str) -> int:
    try:
        client = await cluster_from(o)
        try:
            svc = ShareService(client, o.get("timeout"))
            fn = {"list": list_groups, "describe": describe, "delete": delete, "reset-offsets": reset_offsets,
                  "delete-offsets": delete_offsets}[action]
            return await fn(svc, o)
        finally:
            await client.close()
    except (KafkaError, KafkaConnectionError, ToolError) as e:
        print(f"Error: Executing share group command failed due to {e}", file=sys.stderr)
        return 1


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args, DESCRIPTION)
        return execute(o, check_args(p, o))

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())

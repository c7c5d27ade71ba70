"""kafka-groups.sh: Kafka 4.0's GroupsCommand (KIP-1043), which lists the groups of every type.

    kafka-groups.sh --bootstrap-server h:p [--command-config f] --list
        [--group-type classic|consumer|share|streams [--protocol P] | --protocol P | --consumer | --share | --streams]

It prints three columns, GROUP, TYPE and PROTOCOL. The type is spelled as Java's GroupType
prints it (``Classic``, ``Consumer``), and the protocol is the group's protocol type
(``consumer``, ``connect``, ``share``, ``streams``, or empty for a group that only holds offsets). Each column
is as wide as its longest value, and at least 20 characters. As in Kafka:

* ``--group-type`` keeps the groups of that type; with ``--protocol``, they must also have that
  protocol type.
* ``--protocol`` on its own keeps the groups with that protocol type.
* ``--consumer`` keeps every kind of consumer group: the consumer type, and classic groups whose
  protocol type is ``consumer`` or empty.
* ``--share`` and ``--streams`` keep groups of those types (share groups: KIP-932; streams
  groups: KIP-1071, which kafka-streams-groups.sh describes).

Groups come from ListGroups sent to every broker. A group type that is not one of the four
fails, with ``--group-type must be a valid group type.``
"""
from __future__ import annotations

import sys

from protocol.client import KafkaConnectionError
from protocol.errors import KafkaError
from tools.common import OptionParser, ToolError, check_invalid, cluster_from, parse_or_exit, run, standard_options
from tools.consumer_groups import list_all_groups

DESCRIPTION = "This tool helps to list groups of all types."
TYPES = ("classic", "consumer", "share", "streams")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    standard_options(p, "Property file containing configs to be passed to Admin Client.")
    p.add("list", "List the groups.")
    p.add("group-type", "Filter the groups based on group type. Valid types are: 'classic', 'consumer', "
                        "'share' and 'streams'.", "type")
    p.add("protocol", "Filter the groups based on protocol type.", "protocol")
    p.add("consumer", "Filter the groups to show all kinds of consumer groups, including classic and simple "
                      "consumer groups. This matches group type 'consumer', and group type 'classic' where the "
                      "protocol type is 'consumer' or empty.")
    p.add("share", "Filter the groups to show share groups.")
    p.add("streams", "Filter the groups to show streams groups.")
    return p


def check_args(p: OptionParser, o) -> None:
    """GroupsCommandOptions.checkArgs."""
    if not o.has("list"):
        p.usage_exit("Command must include exactly one action: --list.")
    if o.has("group-type") and str(o.get("group-type")).lower() not in TYPES:
        raise ToolError("--group-type must be a valid group type.")
    check_invalid(p, o, "consumer", ["group-type", "protocol", "share", "streams"])
    check_invalid(p, o, "share", ["consumer", "group-type", "protocol", "streams"])
    check_invalid(p, o, "streams", ["consumer", "group-type", "protocol", "share"])


def keep(row, o) -> bool:
    """GroupsService.combinedFilter."""
    gtype = row.type.lower()
    if o.has("group-type"):
        return gtype == str(o.get("group-type")).lower() and \
            (not o.has("protocol") or row.protocol_type == o.get("protocol"))
    if o.has("protocol"):
        return row.protocol_type == o.get("protocol")
    if o.has("consumer"):
        return row.protocol_type in ("consumer", "") or gtype == "consumer"
    if o.has("share"):
        return gtype == "share"
    if o.has("streams"):
        return gtype == "streams"
    return True


def table(rows) -> str:
    width = max([20] + [len(v) for r in rows for v in (r.group_id, r.type, r.protocol_type)])
    fmt = f"%-{width}s"
    lines = [" ".join(fmt % h for h in ("GROUP", "TYPE", "PROTOCOL"))]
    lines += ["".join(fmt % v + " " for v in (r.group_id, r.type, r.protocol_type)) for r in rows]
    return "\n".join(lines)


async def execute(o) -> int:
    try:
        client = await cluster_from(o)
        try:
            rows = await list_all_groups(client, client.timeout)
        finally:
            await client.close()
    except (KafkaError, KafkaConnectionError, ToolError) as e:
        print(f"Error while executing groups command : {e}")
        return 1
    print(table([r for r in rows if keep(r, o)]))
    return 0


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args, DESCRIPTION)
        check_args(p, o)
        return execute(o)

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())

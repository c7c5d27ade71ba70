"""kafka-streams-application-reset.sh: Kafka's StreamsResetter, for a Kafka Streams application
(its consumer group is the ``application.id``) that is to reprocess its input from scratch.

    kafka-streams-application-reset.sh --bootstrap-server h:p --application-id app
        [--input-topics a,b] [--intermediate-topics c] [--internal-topics app-x-changelog]
        [--to-earliest | --to-latest | --to-offset n | --shift-by n | --to-datetime t |
         --by-duration PnDTnHnMnS | --from-file plan.csv] [--config-file f] [--force] [--dry-run]

As Kafka's tool, in this order:
* the group must have no members (``Consumer group 'app' is still active ...``, status 1);
  ``--force`` removes them first (LeaveGroup with their identities);
* the input topics' committed offsets are set (earliest by default; the other options as
  ``kafka-consumer-groups.sh --reset-offsets``, an offset outside the log moved to its nearest
  end with Kafka's ``New offset (n) is lower than earliest offset. Value will be set to m``) and
  the intermediate topics' to their ends; topics that do not exist are listed and make the
  status 1;
* the application's internal topics (``<application.id>-...-changelog``, ``-repartition`` and
  the foreign-key join topics) are deleted, or the ``--internal-topics`` subset of them;
* ``--dry-run`` prints the same lines under Kafka's banner and changes nothing.
Output lines are Kafka's.  Local state stores are the application's to clean
(``KafkaStreams#cleanUp()``), as with Kafka's tool.
"""
from __future__ import annotations

import re
import sys
import time

from protocol.messages import LeaveGroupRequest
from tools.common import (OptionParser, ToolError, check_invalid, cluster_from, parse_or_exit, require, run)
from tools.consumer_groups import KafkaErrorText, Service, parse_datetime, parse_duration_ms
from tools.kclient import EARLIEST, LATEST
from tools.topics import delete_topics

DESCRIPTION = (
    "The Streams Reset Tool allows you to quickly reset an application in order to reprocess its "
    "data from scratch.\n"
    "* This tool resets offsets of input topics to the earliest available offset (by default), or to "
    "a specific defined position, and it skips to the end of intermediate topics (topics that are "
    "input and output topics, e.g., used by deprecated through() method).\n"
    "* This tool deletes the internal topics that were created by Kafka Streams (topics starting with "
    "\"<application.id>-\").\n"
    "* This tool will not delete output topics (if you want to delete them, you need to do it yourself "
    "with the bin/kafka-topics.sh command).\n"
    "* This tool will not clean up the local state on the stream application instances.")
RESETS = ["to-offset", "to-datetime", "by-duration", "to-earliest", "to-latest", "from-file", "shift-by"]
_FK_TOPIC = re.compile(r".+-KTABLE-FK-JOIN-SUBSCRIPTION-(REGISTRATION|RESPONSE)-\d+-topic")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Print usage information.")
    p.add("version", "Display Kafka version.")
    p.add("application-id", "The Kafka Streams application ID (application.id).", "id")
    p.add("bootstrap-server", "REQUIRED unless --bootstrap-servers(deprecated) is specified. The server(s) to "
          "connect to. The broker list string in the form HOST1:PORT1,HOST2:PORT2. (default: localhost:9092)",
          "server to connect to")
    p.add("bootstrap-servers", "DEPRECATED: Comma-separated list of broker urls with format: HOST1:PORT1,HOST2:PORT2",
          "urls")
    p.add("input-topics", "Comma-separated list of user input topics. For these topics, the tool by default will "
          "reset the offset to the earliest available offset. Reset to other offset position by appending other "
          "reset offset option, ex: --input-topics foo --shift-by 5", "list", multi=True)
    p.add("intermediate-topics", "Comma-separated list of intermediate user topics (topics that are input and "
          "output topics, e.g., used in the deprecated through() method). For these topics, the tool will skip "
          "to the end.", "list", multi=True)
    p.add("internal-topics", "Comma-separated list of internal topics to delete. Must be a subset of the internal "
          "topics marked for deletion by the default behaviour (do a dry-run without this option to view these "
          "topics).", "list", multi=True)
    p.add("to-offset", "Reset offsets to a specific offset.", "", type=int)
    p.add("to-datetime", "Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'", "")
    p.add("by-duration", "Reset offsets to offset by duration from current timestamp. Format: 'PnDTnHnMnS'", "")
    p.add("to-earliest", "Reset offsets to earliest offset.")
    p.add("to-latest", "Reset offsets to latest offset.")
    p.add("from-file", "Reset offsets to values defined in CSV file.", "")
    p.add("shift-by", "Reset offsets shifting current offset by 'n', where 'n' can be positive or negative",
          "number-of-offsets", type=int)
    p.add("config-file", "Property file containing configs to be passed to admin clients and embedded consumer.",
          "file name")
    p.add("force", "Force the removal of members of the consumer group (intended to remove stopped members if a "
          "long session timeout was used). Make sure to shut down all stream applications when this option is "
          "specified to avoid unexpected rebalances.")
    p.add("dry-run", "Display the actions that would be performed without executing the reset commands.")
    return p


def split_list(values: list[str]) -> list[str]:
    """joptsimple's withValuesSeparatedBy(','): every occurrence, split on commas."""
    out = []
    for v in values:
        out += [x for x in v.split(",")]
    return out


def matches_internal_topic_format(name: str) -> bool:
    return (name.endswith("-changelog") or name.endswith("-repartition")
            or name.endswith("-subscription-registration-topic")
            or name.endswith("-subscription-response-topic") or _FK_TOPIC.fullmatch(name) is not None)


def read_reset_plan(path: str) -> dict[tuple[str, int], int]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ToolError(f"ERROR: java.io.IOException: {path}: {e.strerror or e}") from None
    if not text:
        raise ToolError("ERROR: java.text.ParseException: Error parsing reset plan CSV file. It is empty,")
    plan = {}
    for line in text.split("\n"):
        parts = line.split(",")
        if len(parts) != 3:
            raise ToolError("ERROR: java.text.ParseException: Reset plan CSV file is not following the format "
                            "`TOPIC,PARTITION,OFFSET`.")
        try:
            plan[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError as e:
            raise ToolError(f"ERROR: java.lang.NumberFormatException: {e}") from None
    return plan


class Resetter:
    def __init__(self, svc: Service, o):
        self.svc, self.o = svc, o
        self.app = o["application-id"]
        self.inputs = split_list(o["input-topics"])
        self.intermediates = split_list(o["intermediate-topics"])
        self.dry_run = o.has("dry-run")

    async def run(self) -> int:
        await self.remove_active_members()
        await self.svc.client.refresh_metadata(None)
        self.all_topics = set(self.svc.client.topics)
        if self.dry_run:
            print("----Dry run displays the actions which will be performed when running Streams Reset Tool----")
        code = await self.reset_offsets()
        code |= await self.delete_internal_topics()
        return code

    async def remove_active_members(self) -> None:
        d = await self.svc.describe(self.app)
        members = d["members"]
        if not members:
            return
        if not self.o.has("force"):
            shown = ", ".join(f"(memberId={m[0]}, groupInstanceId={m[1] or None}, clientId={m[2]}, host={m[3]})"
                              for m in members)
            raise ToolError(f"ERROR: java.lang.IllegalStateException: Consumer group '{self.app}' is still active "
                            f"and has following members: [{shown}]. Make sure to stop all running application "
                            "instances before running the reset tool. You can use option '--force' to remove active "
                            "members from the group.")
        print(f"Force deleting all active members in the group: {self.app}")
        L = LeaveGroupRequest
        req = L(group_id=self.app, member_id="", members=[
            L.MemberIdentity(member_id=m[0], group_instance_id=m[1] or None, reason="removed by the streams reset tool")
            for m in members])
        resp = await self.svc.to_coordinator(self.app, req, lambda r: r.error_code)
        code = resp.error_code or next((m.error_code for m in resp.members if m.error_code), 0)
        if code:
            raise KafkaErrorText(code)

    # -- offsets --------------------------------------------------------------------------------
    async def reset_offsets(self) -> int:
        if not self.inputs and not self.intermediates:
            print("No input or intermediate topics specified. Skipping seek.")
            return 0
        if self.inputs:
            print(f"Reset-offsets for input topics [{', '.join(self.inputs)}]")
        if self.intermediates:
            print(f"Seek-to-end for intermediate topics [{', '.join(self.intermediates)}]")
        code = 0
        missing_in = [t for t in self.inputs if t not in self.all_topics]
        missing_mid = [t for t in self.intermediates if t not in self.all_topics]
        if missing_in:
            print("Following input topics are not found, skipping them")
            for t in missing_in:
                print(f"Topic: {t}")
            code = 1
        if missing_mid:
            print("Following intermediate topics are not found, skipping them")
            for t in missing_mid:
                print(f"Topic:{t}")
            code = 1
        found_in = sorted({t for t in self.inputs if t in self.all_topics})
        found_mid = sorted({t for t in self.intermediates if t in self.all_topics and t not in found_in})
        if not found_in and not found_mid:
            return code
        parts = await self.svc.partitions_of(found_in + found_mid)
        input_tps = [(t, p) for t in found_in for p in parts[t] or []]
        mid_tps = [(t, p) for t in found_mid for p in parts[t] or []]
        targets = {}
        if input_tps:
            print(f"Following input topics offsets will be reset to (for consumer group {self.app})")
            targets.update(await self.input_targets(input_tps))
            for tp in input_tps:
                print(f"Topic: {tp[0]} Partition: {tp[1]} Offset: {targets[tp]}")
        if mid_tps:
            print(f"Following intermediate topics offsets will be reset to end (for consumer group {self.app})")
            for tp in mid_tps:
                print(f"Topic: {tp[0]}")
            ends = await self.svc.log_offsets(mid_tps, LATEST)
            targets.update({tp: ends[tp] for tp in mid_tps if tp in ends})
        if not self.dry_run and targets:
            await self.svc.commit(self.app, targets)
        print("Done.")
        return code

    async def input_targets(self, tps) -> dict[tuple[str, int], int]:
        o, svc = self.o, self.svc
        begin = await svc.log_offsets(tps, EARLIEST)
        end = await svc.log_offsets(tps, LATEST)

        def clamp(wanted):
            out = {}
            for tp, off in wanted.items():
                if off >= end[tp]:
                    print(f"New offset ({off}) is higher than latest offset. Value will be set to {end[tp]}")
                    out[tp] = end[tp]
                elif off > begin[tp]:
                    out[tp] = off
                else:
                    print(f"New offset ({off}) is lower than earliest offset. Value will be set to {begin[tp]}")
                    out[tp] = begin[tp]
            return out

        if o.has("to-offset"):
            return clamp({tp: o["to-offset"] for tp in tps})
        if o.has("to-latest"):
            return {tp: end[tp] for tp in tps}
        if o.has("shift-by"):
            committed = await svc.committed(self.app)
            # the position of a consumer without a committed offset: auto.offset.reset, latest
            return clamp({tp: committed.get(tp, end[tp]) + o["shift-by"] for tp in tps})
        if o.has("to-datetime") or o.has("by-duration"):
            ts = parse_datetime(o["to-datetime"]) if o.has("to-datetime") else \
                int(time.time() * 1000) - parse_duration_ms(o["by-duration"])
            found = await svc.log_offsets(tps, ts)
            out = {}
            for tp in tps:
                off = found.get(tp, -1)
                if off is None or off < 0:
                    print(f"Partition {tp[1]} from topic {tp[0]} is empty, without a committed record. "
                          "Falling back to latest known offset.")
                    off = end[tp]
                out[tp] = off
            return out
        if o.has("from-file"):
            plan = read_reset_plan(o["from-file"])
            missing = [tp for tp in tps if tp not in plan]
            if missing:
                raise ToolError(f"ERROR: java.lang.NullPointerException: no offset in {o['from-file']} for "
                                f"{missing[0][0]}-{missing[0][1]}")
            return clamp({tp: plan[tp] for tp in tps})
        return {tp: begin[tp] for tp in tps}        # --to-earliest, the default

    # -- internal topics --------------------------------------------------------------------------
    async def delete_internal_topics(self) -> int:
        given = set(self.inputs) | set(self.intermediates)
        inferred = sorted(t for t in self.all_topics if t not in given and t.startswith(self.app + "-")
                          and matches_internal_topic_format(t))
        specified = split_list(self.o["internal-topics"])
        if specified:
            if not set(specified) <= set(inferred):
                raise ToolError("ERROR: java.lang.IllegalArgumentException: Invalid topic specified in the "
                                "--internal-topics option. Ensure that the topics specified are all internal "
                                "topics. Do a dry run without the --internal-topics option to see the list of all "
                                "internal topics that can be deleted.")
            todo = specified
            print(f"Deleting specified internal topics [{', '.join(todo)}]")
        else:
            todo = inferred
            print(f"Deleting inferred internal topics [{', '.join(todo)}]")
        if todo and not self.dry_run:
            await delete_topics(self.svc.client, todo)
        print("Done.")
        return 0


async def execute(o) -> int:
    props_o = {"bootstrap-server": o["bootstrap-server"] or o["bootstrap-servers"] or "localhost:9092",
               "command-config": o["config-file"]}
    client = await cluster_from(props_o)
    try:
        return await Resetter(Service(client, 30000), o).run()
    finally:
        await client.close()


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        require(p, o, "application-id")
        for name in RESETS:
            check_invalid(p, o, name, [n for n in RESETS if n != name])
        return execute(o)

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())

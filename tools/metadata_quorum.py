"""kafka-metadata-quorum.sh: Kafka 3.9's MetadataQuorumCommand (argparse4j style) over
DescribeQuorum (KIP-595, KIP-836, KIP-853).

    kafka-metadata-quorum.sh --bootstrap-server h:p [--command-config f] describe --status
    kafka-metadata-quorum.sh --bootstrap-server h:p [--command-config f] describe --replication [--human-readable]

``describe --status`` prints Kafka's summary (ClusterId, LeaderId, LeaderEpoch, HighWatermark,
MaxFollowerLag, MaxFollowerLagTimeMs, then CurrentVoters and CurrentObservers as lists of
``{"id": N, "directoryId": "..."|null, "endpoints": ["NAME://host:port"]}``; ``endpoints`` is
left out for a node the answer gives none).  ``describe --replication`` prints Kafka's table
(NodeId, DirectoryId, LogEndOffset, Lag, LastFetchTimestamp, LastCaughtUpTimestamp, Status:
the leader, then the other voters as Follower, then the observers), padded as Kafka's
prettyPrintTable pads it; ``--human-readable`` shows the timestamps as ``N ms ago``.

Odradek serves DescribeQuorum on a broker run from a KRaft configuration file (its quorum is that
node alone, broker/handlers/describe_quorum.py).  Against a broker that does not advertise the
API (ZooKeeper mode, or the embedded store without ``process.roles``) the tool fails as Kafka's
does against a ZooKeeper-mode broker: ``org.apache.kafka.common.errors.UnsupportedVersionException:
The node does not support DESCRIBE_QUORUM`` on stderr, status 1 (Kafka prints a stack trace
after that line; this tool prints the line alone).

``add-controller`` and ``remove-controller`` (KIP-853) change the controller quorum; Odradek's
quorum is one node on the embedded store and cannot take or lose controllers, so both are
refused with a reason (after Kafka's own argument checks), and nothing is sent.
``--bootstrap-controller`` is refused as by the other tools: no controller listener is opened.
"""
from __future__ import annotations

import json
import os
import sys
import time
import uuid

from protocol.client import uuid_to_str
from protocol.messages import DescribeQuorumRequest
from tools.common import ToolError, cluster_from, java_error, refuse_bootstrap_controller, run_parsed
from tools.storage import StorageParser as Parser      # argparse4j's "too few arguments" for no command
from tools.transactions import print_table

PROG = "kafka-metadata-quorum"
DESCRIBE_QUORUM = 55
METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
ZERO_UUID = uuid.UUID(int=0)
TABLE_HEADERS = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
                 "Status"]
SINGLE_NODE_QUORUM = ("Odradek's metadata quorum is this broker alone (the embedded metadata store of a KRaft "
                      "configuration run as one combined node); it cannot {}.")


def build_parser() -> Parser:
    p = Parser(prog=PROG, description="Describes the KRaft metadata quorum: its leader, voters and observers, "
               "and how far each replica of the metadata log has got.")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--bootstrap-server", help="A comma-separated list of host:port pairs of the brokers to "
                   "connect to first.")
    g.add_argument("--bootstrap-controller", help="A comma-separated list of host:port pairs of the KRaft "
                   "controllers to connect to first.")
    p.add_argument("--command-config", help="A properties file of admin client settings (security, timeouts).")
    sub = p.add_subparsers(dest="command", metavar="{describe,add-controller,remove-controller}",
                           parser_class=Parser)
    sub.required = True
    d = sub.add_parser("describe", help="Describe the metadata quorum.")
    status = d.add_argument_group("Status")
    status.add_argument("--status", action="store_true", help="A summary of the quorum: leader, epoch, high "
                        "watermark, follower lag, voters and observers.")
    repl = d.add_argument_group("Replication")
    repl.add_argument("--replication", action="store_true", help="One row per replica of the metadata log: its "
                      "end offset, lag and last fetch.")
    repl.add_argument("--human-readable", action="store_true", help="Show the timestamps of --replication as "
                      "times ago.")
    add = sub.add_parser("add-controller", help="Add a controller to the KRaft controller quorum.")
    add.add_argument("--dry-run", action="store_true", help="Only show what would be done.")
    rm = sub.add_parser("remove-controller", help="Remove a controller from the KRaft controller quorum.")
    rm.add_argument("--controller-id", "-i", type=int, required=True, help="The id of the controller to remove.")
    rm.add_argument("--controller-directory-id", "-d", required=True,
                    help="The directory id of the controller to remove.")
    rm.add_argument("--dry-run", action="store_true", help="Only show what would be done.")
    return p


def check_arguments(a) -> None:
    """Kafka's checks of the command line that come before any request (TerseException lines)."""
    if a.command_config is not None and not os.path.exists(a.command_config):
        raise ToolError(f"Properties file {a.command_config} does not exists!")
    if a.command == "describe":
        if a.status and a.replication:
            raise ToolError("Only one of --status or --replication should be specified with describe sub-command")
        if a.status and a.human_readable:
            raise ToolError("The option --human-readable is only supported along with --replication")
        if not a.status and not a.replication:
            raise ToolError("One of --status or --replication must be specified with describe sub-command")
    elif a.command == "add-controller":
        if a.command_config is None:
            raise ToolError("You must supply the configuration file of the controller you are adding when using "
                            "add-controller.")
        raise ToolError(SINGLE_NODE_QUORUM.format("take another controller"))
    elif a.command == "remove-controller":
        if a.controller_id < 0:
            raise ToolError(f"Invalid negative --controller-id: {a.controller_id}")
        raise ToolError(SINGLE_NODE_QUORUM.format("lose a controller"))


class Replica:
    """One voter or observer of the answer (Kafka's QuorumInfo.ReplicaState)."""

    def __init__(self, r):
        self.id = r.replica_id
        self.directory_id = r.replica_directory_id or ZERO_UUID
        self.log_end_offset = r.log_end_offset
        self.last_fetch = None if r.last_fetch_timestamp == -1 else r.last_fetch_timestamp
        self.last_caught_up = None if r.last_caught_up_timestamp == -1 else r.last_caught_up_timestamp


class Quorum:
    def __init__(self, partition, nodes):
        self.leader_id = partition.leader_id
        self.leader_epoch = partition.leader_epoch
        self.high_watermark = partition.high_watermark
        self.voters = [Replica(r) for r in partition.current_voters or []]
        self.observers = [Replica(r) for r in partition.observers or []]
        self.endpoints = {n.node_id: [endpoint_text(li.name, li.host, li.port) for li in n.listeners or []]
                          for n in nodes or []}

    def leader(self) -> Replica:
        for v in self.voters:
            if v.id == self.leader_id:
                return v
        raise ToolError("No value present")     # Java's Optional.get() on a missing leader


def endpoint_text(name: str, host: str, port: int) -> str:
    """Kafka's RaftVoterEndpoint text: ``NAME://host:port`` (an IPv6 host in brackets)."""
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


def unknown_server_error(message: str) -> ToolError:
    return ToolError(f"org.apache.kafka.common.errors.UnknownServerException: {message}")


async def describe_quorum(client) -> Quorum:
    """DescribeQuorum for __cluster_metadata-0, checked as Kafka's admin client checks the answer."""
    conn = await client.any_connection()
    rng = conn.version_range(DESCRIBE_QUORUM)
    if rng is None:
        theirs = (conn.api_versions or {}).get(DESCRIBE_QUORUM)
        if theirs is None:
            raise ToolError(java_error(35, "The node does not support DESCRIBE_QUORUM"))
        lo, hi = DescribeQuorumRequest.DEF.valid_versions
        raise ToolError(java_error(35, f"The node does not support DESCRIBE_QUORUM with version in range [{lo},{hi}]."
                                       f" The supported range is [{theirs[0]},{theirs[1]}]."))
    R = DescribeQuorumRequest
    resp = await conn.send(R(topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[
        R.PartitionData(partition_index=METADATA_PARTITION)])]))
    if resp.error_code:
        raise ToolError(java_error(resp.error_code, resp.error_message or None))
    topics = resp.topics or []
    if len(topics) != 1:
        raise unknown_server_error(f"DescribeMetadataQuorum received {len(topics)} topics when 1 was expected")
    topic = topics[0]
    if topic.topic_name != METADATA_TOPIC:
        raise unknown_server_error(f"DescribeMetadataQuorum received a topic with name {topic.topic_name} when "
                                   f"{METADATA_TOPIC} was expected")
    parts = topic.partitions or []
    if len(parts) != 1:
        raise unknown_server_error(f"DescribeMetadataQuorum received a topic {topic.topic_name} with {len(parts)} "
                                   "partitions when 1 was expected")
    part = parts[0]
    if part.partition_index != METADATA_PARTITION:
        raise unknown_server_error(f"DescribeMetadataQuorum received a single partition with index "
                                   f"{part.partition_index} when {METADATA_PARTITION} was expected")
    if part.error_code:
        raise ToolError(java_error(part.error_code, part.error_message or None))
    return Quorum(part, resp.nodes)


def node_json(q: Quorum, r: Replica) -> str:
    """One entry of CurrentVoters/CurrentObservers in Kafka's layout (keys in Kafka's order)."""
    text = f'{{"id": {r.id}, "directoryId": '
    text += "null" if r.directory_id == ZERO_UUID else json.dumps(uuid_to_str(r.directory_id))
    endpoints = q.endpoints.get(r.id) or []
    if endpoints:
        text += ', "endpoints": [' + ", ".join(json.dumps(e) for e in endpoints) + "]"
    return text + "}"


def print_status(cluster_id: str, q: Quorum) -> None:
    leader = q.leader()
    lagging = min(q.voters, key=lambda v: v.log_end_offset)
    max_lag = leader.log_end_offset - lagging.log_end_offset
    if lagging is leader:
        lag_ms = 0
    elif leader.last_caught_up is not None and lagging.last_caught_up is not None:
        lag_ms = leader.last_caught_up - lagging.last_caught_up
    else:
        lag_ms = -1
    rows = [("ClusterId", cluster_id), ("LeaderId", q.leader_id), ("LeaderEpoch", q.leader_epoch),
            ("HighWatermark", q.high_watermark), ("MaxFollowerLag", max_lag), ("MaxFollowerLagTimeMs", lag_ms),
            ("CurrentVoters", "[" + ", ".join(node_json(q, v) for v in q.voters) + "]"),
            ("CurrentObservers", "[" + ", ".join(node_json(q, o) for o in q.observers) + "]")]
    for name, value in rows:
        print(f"{name + ':':<24}{value}")


def relative_ms(timestamp: int, what: str) -> int:
    now = int(time.time() * 1000)
    if not 0 < timestamp <= now:
        raise ToolError("Error while computing relative time, possible drift in system clock.\n"
                        f"Current timestamp is {now}, {what} timestamp is {timestamp}")
    return now - timestamp


def print_replication(q: Quorum, human: bool) -> None:
    leader = q.leader()

    def stamp(value, what):
        if value is None:
            return "-1"
        return f"{relative_ms(value, what)} ms ago" if human else str(value)

    def row(r: Replica, status: str) -> list[str]:
        return [str(r.id), uuid_to_str(r.directory_id), str(r.log_end_offset),
                str(leader.log_end_offset - r.log_end_offset), stamp(r.last_fetch, "last fetch"),
                stamp(r.last_caught_up, "last caught up"), status]
    rows = [row(leader, "Leader")]
    rows += [row(v, "Follower") for v in q.voters if v.id != q.leader_id]
    rows += [row(o, "Observer") for o in q.observers]
    print_table(TABLE_HEADERS, rows)


async def execute(a) -> int:
    refuse_bootstrap_controller(a.bootstrap_controller)
    check_arguments(a)
    client = await cluster_from({"bootstrap-server": a.bootstrap_server, "command-config": a.command_config})
    try:
        q = await describe_quorum(client)
        if a.status:
            print_status(client.cluster_id if client.cluster_id is not None else "null", q)
        else:
            print_replication(q, a.human_readable)
        return 0
    finally:
        await client.close()


def main(argv=None) -> int:
    return run_parsed(build_parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())

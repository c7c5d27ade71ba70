"""kafka-cluster.sh: Kafka's ClusterTool (argparse4j style, like kafka-transactions.sh).

    kafka-cluster.sh cluster-id --bootstrap-server host:port [--config file]
    kafka-cluster.sh unregister --bootstrap-server host:port --id N [--config file]

``cluster-id`` prints ``Cluster ID: <id>``. ``unregister`` is the KRaft controllers' API
(UnregisterBroker); Odradek's brokers run ZooKeeper mode or the embedded store and do not offer
it, so the tool answers as Kafka's does for such a cluster: ``The target cluster does not
support the broker unregistration API.``  ``--bootstrap-controller`` (KRaft) is refused.
"""
from __future__ import annotations

import sys

from protocol.client import UnsupportedVersionError
from tools.common import ToolError, cluster_from, refuse_bootstrap_controller, run_parsed
from tools.transactions import Parser

PROG = "kafka-cluster.sh"
UNREGISTER_BROKER = 64


def build_parser() -> Parser:
    p = Parser(prog=PROG, description="The Kafka cluster tool.")
    sub = p.add_subparsers(dest="command", metavar="{cluster-id,unregister}", parser_class=Parser)
    sub.required = True
    cid = sub.add_parser("cluster-id", help="Get information about the ID of a cluster.")
    unreg = sub.add_parser("unregister", help="Unregister a broker.")
    for sp in (cid, unreg):
        g = sp.add_mutually_exclusive_group(required=True)
        g.add_argument("--bootstrap-server", "-b", help="A list of host/port pairs to use for establishing the "
                       "connection to the Kafka cluster.")
        g.add_argument("--bootstrap-controller", "-C", help="A list of host/port pairs to use for establishing "
                       "the connection to the KRaft controllers.")
        sp.add_argument("--config", "-c", help="A property file containing configurations for the Admin client.")
    unreg.add_argument("--id", "-i", type=int, required=True, help="The ID of the broker to unregister.")
    return p


async def execute(a) -> int:
    refuse_bootstrap_controller(a.bootstrap_controller)
    client = await cluster_from({"bootstrap-server": a.bootstrap_server, "command-config": a.config})
    try:
        if a.command == "cluster-id":
            if client.cluster_id:
                print(f"Cluster ID: {client.cluster_id}")
            else:
                print("No cluster ID found. The Kafka version is probably too old.")
            return 0
        conn = await client.any_connection()
        if UNREGISTER_BROKER not in (conn.api_versions or {}):
            print("The target cluster does not support the broker unregistration API.")
            return 0
        # a KRaft cluster of Apache Kafka (Odradek's brokers never advertise the API)
        from protocol.errors import error_message
        from protocol.messages import UnregisterBrokerRequest
        try:
            resp = await client.send_any(UnregisterBrokerRequest(broker_id=a.id))
        except UnsupportedVersionError:
            print("The target cluster does not support the broker unregistration API.")
            return 0
        if resp.error_code:
            raise ToolError(resp.error_message or error_message(resp.error_code))
        print(f"Broker {a.id} is no longer registered.")
        return 0
    finally:
        await client.close()


def main(argv=None) -> int:
    return run_parsed(build_parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())

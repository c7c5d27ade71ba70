"""kafka-broker-api-versions.sh: the API versions each broker supports."""
from __future__ import annotations

import sys

from protocol.client import KafkaConnectionError
from protocol.messages import REQUESTS
from tools.common import OptionParser, cluster_from, parse_or_exit, require, run

DESCRIPTION = "Lists, for every broker of the cluster, the request types and versions it accepts."


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("bootstrap-server", "REQUIRED: broker address(es) to contact first, host:port[,host:port...].", "server(s) to use for bootstrapping")
    p.add("command-config", "Properties file with admin client settings (security, timeouts, client.id, ...).",
          "command config property file")
    return p


def client_apis():
    """API keys a client may send to a broker (Kafka's ApiKeys.clientApis)."""
    keys = []
    for k, cls in sorted(REQUESTS.items()):
        listeners = getattr(cls.DEF, "listeners", None) or []
        if "broker" in listeners or "zkBroker" in listeners:
            keys.append(k)
    return keys


def render(versions: dict[int, tuple[int, int]]) -> str:
    texts = {}
    for key, (lo, hi) in versions.items():
        cls = REQUESTS.get(key)
        if cls is None:
            texts[key] = f"UNKNOWN({key}): " + (f"{lo}" if lo == hi else f"{lo} to {hi}")
            continue
        name = cls.__name__[:-len("Request")]
        text = f"{name}({key}): " + (f"{lo}" if lo == hi else f"{lo} to {hi}")
        ours_lo, ours_hi = cls.DEF.valid_versions
        if ours_hi < lo:
            text += " [unusable: node too new]"
        elif hi < ours_lo:
            text += " [unusable: node too old]"
        else:
            text += f" [usable: {min(ours_hi, hi)}]"
        texts[key] = text
    for key in client_apis():
        if key not in texts:
            texts[key] = f"{REQUESTS[key].__name__[:-len('Request')]}({key}): UNSUPPORTED"
    return "(\n\t" + ",\n\t".join(texts[k] for k in sorted(texts)) + "\n)"


async def execute(o):
    client = await cluster_from(o)
    try:
        for node_id in sorted(client.nodes):
            node = client.nodes[node_id]
            name = f"{node.host}:{node.port} (id: {node_id} rack: {node.rack or 'null'})"
            try:
                conn = await client.connection(node_id)
                print(f"{name} -> {render(conn.api_versions)}")
            except KafkaConnectionError as e:
                print(f"{name} -> ERROR: {e}")
    finally:
        await client.close()


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args)
        require(p, o, "bootstrap-server")
        return execute(o)

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())

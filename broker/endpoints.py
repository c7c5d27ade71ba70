"""Where a broker can be reached: the node a coordinator lookup or a client is pointed at."""
from __future__ import annotations

from typing import Iterator, NamedTuple


class Node(NamedTuple):
    node_id: int
    host: str
    port: int


def broker_node(broker, broker_id: int, listener: str | None = None) -> Node | None:
    """The endpoint of live broker ``broker_id`` on ``listener`` (default: the inter-broker one;
    a broker with a single listener answers with it)."""
    name = listener or broker.config.inter_broker_listener_name()
    for b in broker.controller.brokers():
        if b.id == broker_id:
            for ep in b.endpoints:
                if ep[0] == name or len(b.endpoints) == 1:
                    return Node(b.id, ep[1], ep[2])
            ep = b.endpoints[0]
            return Node(b.id, ep[1], ep[2])
    return None


def on_listener(broker, listener: str) -> Iterator[tuple]:
    """(broker info, host, port) of every live broker that has ``listener``, in the
    controller's order: the brokers a client on that listener is told about."""
    for b in broker.controller.brokers():
        for name, host, port, _proto in b.endpoints:
            if name == listener:
                yield b, host, port
                break

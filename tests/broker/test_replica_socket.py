"""``replica.socket.receive.buffer.bytes``: the replica fetcher's connection gets it as SO_RCVBUF
(Kafka's fetchers set it too); -1 leaves the OS default."""
from __future__ import annotations

import asyncio
import socket

from broker.replication import _set_receive_buffer
from protocol.client import KafkaClientConnection


def test_fetcher_socket_receive_buffer():
    async def scenario():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        got = []
        for value in (65536, -1, 200_000):
            conn = await KafkaClientConnection.connect("127.0.0.1", port, negotiate=False, timeout=5)
            before = conn.socket.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            _set_receive_buffer(conn, value)
            got.append((before, conn.socket.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)))
            await conn.close()
        server.close()
        await server.wait_closed()
        return got

    (b1, a1), (b2, a2), (b3, a3) = asyncio.run(scenario())
    assert a1 in (65536, 2 * 65536)          # Linux reports twice what was asked (its overhead)
    assert a2 == b2                           # -1: untouched
    assert a3 in (200_000, 400_000) and a3 != a1

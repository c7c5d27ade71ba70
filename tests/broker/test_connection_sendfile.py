"""The connection's direct write of a response with file regions (send with MSG_MORE, sendfile,
the closing send) over a real socket pair, and what a request quota is charged for it."""
from __future__ import annotations

import asyncio
import os
import socket
import types

from broker.config import BrokerConfig
from broker.connection import KafkaConnection
from storage.segment import FileRegion


class _Transport:
    def get_write_buffer_size(self):
        return 0

    def write(self, data):
        raise AssertionError("a response with regions must not go through the transport")


def _connection(sock):
    broker = types.SimpleNamespace(config=BrokerConfig.from_dict({"listeners": "PLAINTEXT://:9092"}))
    conn = KafkaConnection(broker, "PLAINTEXT")
    conn.transport = _Transport()
    conn.sockfd = sock.fileno()
    return conn


class _Setup:
    """A segment-like file of ``size`` random bytes and a connected socket pair (the broker's end
    non-blocking); closed on exit."""

    def __init__(self, tmp_path, size):
        self.data = os.urandom(size)
        path = tmp_path / "seg.log"
        path.write_bytes(self.data)
        self.fd = os.open(path, os.O_RDONLY)
        self.a, self.b = socket.socketpair()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.close(self.fd)
        self.a.close()
        self.b.close()


def _drain(sock, n):
    got = bytearray()
    while len(got) < n:
        chunk = sock.recv(1 << 20)
        assert chunk, "peer closed early"
        got += chunk
    return bytes(got)


def test_regions_reach_the_peer_whole_and_the_write_time_is_counted(tmp_path):
    """3 MiB of file data through a 64 KiB send buffer: many short sendfile calls with waits for
    writability between them; the bytes arrive in order and only the time in the calls is summed."""
    with _Setup(tmp_path, 3 << 20) as t:
        data, fd, a, b = t.data, t.fd, t.a, t.b
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        a.setblocking(False)
        conn = _connection(a)
        head, tail = b"HEAD" * 10, b"TAIL"
        out = head + tail

        async def run():
            loop = asyncio.get_running_loop()
            reader = loop.run_in_executor(None, _drain, b, len(out) + len(data) - 1000)
            conn._write_time = 0.0
            await conn._write_with_regions(out, [(len(head), FileRegion(fd, 1000, len(data) - 1000))])
            return await reader, conn._write_time

        received, spent = asyncio.run(run())
        assert received == head + data[1000:] + tail
        assert spent > 0
        # the reader thread pacing the transfer is not counted: only the calls' own time
        assert spent < 5.0


def test_send_response_charges_encoding_and_writing(tmp_path, monkeypatch):
    """With a request quota (``connection.charge`` set), a fetch-style response is charged twice:
    the encoding, then the time in the calls that wrote its regions."""
    from broker import connection as C
    with _Setup(tmp_path, 1 << 20) as t:
        data, fd, a, b = t.data, t.fd, t.a, t.b
        a.setblocking(False)
        conn = _connection(a)

        def encode(out, correlation_id, body, api_key, version, regions):
            out += b"\0\0\0\1"
            regions.append((len(out), FileRegion(fd, 0, len(data))))

        monkeypatch.setattr(C.api, "encode_response_into", encode)
        charges = []
        conn.charge = charges.append

        async def run():
            loop = asyncio.get_running_loop()
            reader = loop.run_in_executor(None, _drain, b, 4 + 4 + len(data))
            await conn.send_response(1, None, 1, 16)
            return await reader

        received = asyncio.run(run())
        assert received[8:] == data
        assert len(charges) == 2 and all(c >= 0 for c in charges) and charges[1] > 0
        assert conn._write_time is None and conn.charge is None


def test_small_regions_are_read_into_one_write(tmp_path, monkeypatch):
    """A response whose regions add up to at most INLINE_REGION_BYTES goes out as one transport
    write with the file bytes in place (no sendfile); one byte more and it takes the sendfile path."""
    from broker import connection as C
    with _Setup(tmp_path, 2 * C.INLINE_REGION_BYTES + 10) as t:
        data, fd, a, b = t.data, t.fd, t.a, t.b
        a.setblocking(False)
        conn = _connection(a)
        writes = []
        conn.transport.write = writes.append
        half = C.INLINE_REGION_BYTES // 2

        def encode(out, correlation_id, body, api_key, version, regions):
            out += b"HEAD"
            regions.append((len(out), FileRegion(fd, 3, half)))
            regions.append((len(out), FileRegion(fd, 3 + half, C.INLINE_REGION_BYTES - half)))
            out += b"MID"
            regions.append((len(out), FileRegion(fd, 0, 0)))
            out += b"TAIL"

        monkeypatch.setattr(C.api, "encode_response_into", encode)
        asyncio.run(conn.send_response(1, None, 1, 16))
        body = b"HEAD" + data[3:3 + C.INLINE_REGION_BYTES] + b"MIDTAIL"
        assert len(writes) == 1
        assert bytes(writes[0]) == len(body).to_bytes(4, "big") + body

        def encode_big(out, correlation_id, body, api_key, version, regions):
            out += b"HEAD"
            regions.append((len(out), FileRegion(fd, 0, C.INLINE_REGION_BYTES + 1)))

        monkeypatch.setattr(C.api, "encode_response_into", encode_big)
        writes.clear()

        async def run():
            loop = asyncio.get_running_loop()
            reader = loop.run_in_executor(None, _drain, b, 8 + C.INLINE_REGION_BYTES + 1)
            await conn.send_response(2, None, 1, 16)
            return await reader

        received = asyncio.run(run())
        assert writes == []
        assert received[8:] == data[:C.INLINE_REGION_BYTES + 1]


def test_a_write_waiting_for_a_full_socket_ends_when_the_connection_is_lost(tmp_path):
    """The peer stops reading in the middle of a large region and the connection is lost (the
    transport calls ``connection_lost``): the pending write returns False at once instead of
    waiting for ever on a socket nobody watches any more, so the request's task ends."""
    with _Setup(tmp_path, 4 << 20) as t:
        fd, a, b = t.fd, t.a, t.b
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        a.setblocking(False)
        conn = _connection(a)
        conn.broker.connections = {conn}

        async def run():
            loop = asyncio.get_running_loop()
            write = loop.create_task(conn._sendfile(FileRegion(fd, 0, 4 << 20)))
            await asyncio.sleep(0.2)
            assert not write.done(), "4 MiB cannot fit a 64 KiB socket pair nobody reads"
            conn.connection_lost(ConnectionResetError())
            return await asyncio.wait_for(write, 5)

        assert asyncio.run(run()) is False
        assert conn.broker.connections == set()

"""Tests of the test helpers themselves (no Odradek code involved)."""
from __future__ import annotations

import socket
import struct
import sys
import threading
import time

import pytest

from tests.support import BrokerProcess, ProcessStartError, api_versions_v0, free_port, kafka_ready
from tests.support.tansu import TansuProcess, tansu_binary


def test_free_port_is_bindable_and_fresh():
    ports = {free_port() for _ in range(20)}
    assert len(ports) == 20
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports.pop()))


def _fake_kafka_server(port: int, stop: threading.Event):
    """Answers ApiVersions v0 with two api keys."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen()
    srv.settimeout(0.2)
    while not stop.is_set():
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            continue
        with conn:
            size = struct.unpack(">i", conn.recv(4))[0]
            frame = b""
            while len(frame) < size:
                frame += conn.recv(size - len(frame))
            key, ver, corr = struct.unpack_from(">hhi", frame)
            body = struct.pack(">ihi", corr, 0, 2) + struct.pack(">hhh", 18, 0, 3) + struct.pack(">hhh", 0, 3, 9)
            conn.sendall(struct.pack(">i", len(body)) + body)
    srv.close()


def test_raw_api_versions_probe():
    port = free_port()
    stop = threading.Event()
    t = threading.Thread(target=_fake_kafka_server, args=(port, stop), daemon=True)
    t.start()
    try:
        reply = None
        for _ in range(50):
            reply = kafka_ready("127.0.0.1", port)
            if reply:
                break
            time.sleep(0.05)
        assert reply is not None
        assert reply.error_code == 0
        assert reply.api_keys == {18: (0, 3), 0: (3, 9)}
    finally:
        stop.set()
        t.join()


def test_broker_process_reports_early_exit(tmp_path):
    b = BrokerProcess(tmp_path, cmd=[sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])
    with pytest.raises(ProcessStartError) as e:
        b.start()
    assert "boom" in str(e.value) and "code 3" in str(e.value)
    # the props file and overrides were passed
    text = b.log_text()
    assert str(b.props_path) in text and f"listeners=PLAINTEXT://127.0.0.1:{b.port}" in text


def test_broker_process_lifecycle_against_tansu(tmp_path):
    """BrokerProcess driven by a callable command, with Tansu standing in for a broker."""
    binary = tansu_binary(download=False)
    if binary is None:
        pytest.skip("tansu not cached (scripts/get-tansu.sh)")
    tansu = TansuProcess(tmp_path / "unused", binary=binary)
    b = BrokerProcess(tmp_path / "b", cmd=lambda bp: tansu.__class__(
        tmp_path / "x", port=bp.port, binary=binary).command())
    b.start()
    try:
        assert api_versions_v0(b.host, b.port).error_code == 0
        assert 18 in b.last_api_versions.api_keys
        b.pause()
        assert kafka_ready(b.host, b.port, timeout=0.5) is None
        b.resume()
        assert kafka_ready(b.host, b.port) is not None
        first_pid = b.pid
        b.restart(clean=False)
        assert b.pid != first_pid and b.alive
        b.kill()
        assert not b.alive and b.returncode == -9
    finally:
        b.kill()

"""Socket helpers for integration tests: free ports, readiness probes and a raw
Kafka ApiVersions v0 exchange that does not depend on the project's codec."""
from __future__ import annotations

import socket
import struct
import time
from typing import Callable, TypeVar

LOOPBACK = "127.0.0.1"

T = TypeVar("T")

# Ports handed out by free_port() in this process; never hand one out twice, so two
# fixtures asking back to back do not both get the port the kernel just freed.
_handed_out: set[int] = set()


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on `host` that nobody listens on right now.

    The kernel picks an ephemeral port; the socket is closed before returning, so
    there is a small race with other processes, which tests accept.
    """
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise RuntimeError("free_port: no fresh port after 100 tries")


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """True if a TCP connection to host:port is accepted."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for(predicate: Callable[[], T], timeout: float, interval: float = 0.1,
             what: str = "condition") -> T:
    """Poll `predicate` until it returns something truthy; return that value.

    Raises TimeoutError naming `what` after `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("connection closed by peer")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class ApiVersionsReply:
    """The parts of an ApiVersions v0 response the probe reads."""

    def __init__(self, correlation_id: int, error_code: int,
                 api_keys: dict[int, tuple[int, int]]):
        self.correlation_id = correlation_id
        self.error_code = error_code
        self.api_keys = api_keys  # api key -> (min version, max version)

    def __repr__(self) -> str:
        return (f"ApiVersionsReply(error_code={self.error_code}, "
                f"{len(self.api_keys)} api keys)")


def api_versions_v0(host: str, port: int, timeout: float = 2.0,
                    correlation_id: int = 0x0DADEC, client_id: str = "odradek-probe"
                    ) -> ApiVersionsReply:
    """Send a raw ApiVersions v0 request and parse the reply by hand.

    Request header v1: int16 api_key=18, int16 api_version=0, int32 correlation id,
    int16-length client id; the v0 body is empty.  Response header v0 (int32
    correlation id), body: int16 error code, int32 count, count x (int16 key,
    int16 min, int16 max).
    """
    cid = client_id.encode()
    payload = struct.pack(">hhih", 18, 0, correlation_id, len(cid)) + cid
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        if not 10 <= size <= 1 << 20:
            raise ValueError(f"ApiVersions reply has implausible size {size}")
        frame = _recv_exact(sock, size)
    corr, error_code, count = struct.unpack_from(">ihi", frame, 0)
    if corr != correlation_id:
        raise ValueError(f"ApiVersions reply correlation id {corr} != {correlation_id}")
    if count < 0 or 10 + 6 * count > len(frame):
        raise ValueError(f"ApiVersions reply has bad api key count {count}")
    keys = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", frame, 10 + 6 * i)
        keys[key] = (lo, hi)
    return ApiVersionsReply(corr, error_code, keys)


def kafka_ready(host: str, port: int, timeout: float = 2.0) -> ApiVersionsReply | None:
    """The ApiVersions reply if host:port speaks Kafka right now, else None."""
    try:
        return api_versions_v0(host, port, timeout=timeout)
    except (OSError, ValueError, struct.error):
        return None


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command (ruok, stat, mntr, ...) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(word.encode())
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")

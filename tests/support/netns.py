"""NetnsLan: network namespaces joined by veth pairs to one bridge, on loopback-range addresses,
so a test can cut one broker off the network (and heal it) without touching anything else.

Topology: a Linux bridge in the root namespace with 127.A.B.1/24; each member gets its own
namespace with 127.A.B.(10+i)/24 on the namespace end of a veth pair whose root end is a bridge
port.  ``route_localnet`` lets 127/8 addresses travel over these interfaces, and a /24 route in
each local routing table sends the subnet to the bridge (everything else in 127/8 stays on lo).
``cut(i)`` takes the root end of member i's veth down: no packet to or from it (ZooKeeper, other
brokers, clients) until ``heal(i)``.  Needs root (CAP_NET_ADMIN) and ``ip``; ``available()`` says
whether this machine can do it.  ``close()`` removes every namespace, link and route it made.
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """``ip <args>`` (or, with ``ns``, ``ip netns exec <ns> <args>`` where args name a command)."""
    cmd = ["ip", "netns", "exec", ns] + list(args) if ns else ["ip"] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def available() -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, "network namespaces need root"
    if not shutil.which("ip"):
        return False, "iproute2 (ip) not installed"
    name = f"odrchk{random.randrange(1 << 16):04x}"
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if r.returncode != 0:
        return False, f"ip netns add failed: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return True, ""


class NetnsLan:
    def __init__(self):
        self.tag = f"{random.randrange(1 << 16):04x}"
        self.net = f"127.{random.randrange(200, 250)}.{random.randrange(1, 255)}"
        self.bridge = f"odb{self.tag}"
        self.members: dict[int, str] = {}
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.net}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        subprocess.run(["sysctl", "-qw", f"net.ipv4.conf.{self.bridge}.route_localnet=1"], check=True)
        _ip("route", "replace", f"{self.net}.0/24", "dev", self.bridge, "table", "local", "src", f"{self.net}.1")

    @property
    def root_address(self) -> str:
        return f"{self.net}.1"

    def address(self, i: int) -> str:
        return f"{self.net}.{10 + i}"

    def namespace(self, i: int) -> str:
        return f"odr{self.tag}m{i}"

    def _veth_root(self, i: int) -> str:
        return f"odv{self.tag}r{i}"

    def add(self, i: int) -> str:
        ns = self.namespace(i)
        r, n = self._veth_root(i), f"odv{self.tag}n{i}"
        _ip("netns", "add", ns)
        self.members[i] = ns
        _ip("link", "add", r, "type", "veth", "peer", "name", n)
        _ip("link", "set", n, "netns", ns)
        _ip("link", "set", r, "master", self.bridge)
        _ip("link", "set", r, "up")
        _ip("ip", "link", "set", "lo", "up", ns=ns)
        _ip("ip", "addr", "add", f"{self.address(i)}/24", "dev", n, ns=ns)
        _ip("ip", "link", "set", n, "up", ns=ns)
        for key in ("all", n):
            _ip("sysctl", "-qw", f"net.ipv4.conf.{key}.route_localnet=1", ns=ns)
        _ip("ip", "route", "replace", f"{self.net}.0/24", "dev", n, "table", "local", "src", self.address(i), ns=ns)
        return ns

    def exec_prefix(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.namespace(i)]

    def cut(self, i: int) -> None:
        _ip("link", "set", self._veth_root(i), "down")

    def heal(self, i: int) -> None:
        _ip("link", "set", self._veth_root(i), "up")

    def close(self) -> None:
        for i, ns in list(self.members.items()):
            _ip("link", "del", self._veth_root(i), check=False)
            _ip("netns", "del", ns, check=False)
        self.members.clear()
        _ip("route", "del", f"{self.net}.0/24", "dev", self.bridge, "table", "local", check=False)
        _ip("link", "del", self.bridge, check=False)

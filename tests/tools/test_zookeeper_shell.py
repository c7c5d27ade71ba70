"""zookeeper-shell.sh against the real ZooKeeper: create, ls (-R, -s), get, stat, set, delete,
deleteall, errors and their exit status, commands piped on standard input, a chroot in the
connect string, and a ZooKeeper-mode broker's own znodes (``ls /brokers/ids``). Where Debian's
ZooKeeper jar is installed, the output of each command is compared with ZooKeeperMain's."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.support.broker import BrokerProcess, running
from tests.tools.test_zk_tools import new_chroot, run_tool

ZK_CP = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
# ZooKeeperMain prints the session's WATCHER block from its event thread in two printlns, a blank
# line and a text each; the main thread's lines may land before, between or after them.  Ours
# prints the block whole, right after the connect line.
WATCHER_PRINTS = ("\nWATCHER::\n", "\nWatchedEvent state:SyncConnected type:None path:null\n")
WATCHER = "".join(WATCHER_PRINTS)
HEAD = "Connecting to {}\n" + WATCHER


def chroot(zookeeper) -> str:
    """A fresh chroot, created (the shell, like ZooKeeperMain, does not create it)."""
    from kazoo.client import KazooClient
    connect = new_chroot(zookeeper)
    zk = KazooClient(hosts=zookeeper.connect, timeout=10)
    zk.start(timeout=15)
    try:
        zk.ensure_path(connect[len(zookeeper.connect):])
    finally:
        zk.stop()
        zk.close()
    return connect


def shell(connect, *args, stdin=None):
    return run_tool("zookeeper-shell.sh", connect, *args, stdin=stdin)


def java_shell(connect, *args):
    r = subprocess.run(["java", "-cp", ZK_CP, "org.apache.zookeeper.ZooKeeperMain", "-server", connect, *args],
                       capture_output=True, text=True, timeout=60)
    err = "\n".join(line for line in r.stderr.splitlines()
                    if " INFO " not in line and "Exiting JVM" not in line and not line.startswith("["))
    return r.returncode, r.stdout, err.strip()


def test_commands_and_their_output(zookeeper):
    connect = chroot(zookeeper)
    r = shell(connect, "create", "/a", "hello")
    assert r.returncode == 0 and r.stdout == HEAD.format(connect) and r.stderr.strip() == "Created /a"
    assert shell(connect, "create", "/a/b").returncode == 0
    assert shell(connect, "create", "/a/c", "x y").returncode == 0
    r = shell(connect, "ls", "/a")
    assert r.returncode == 0 and r.stdout == HEAD.format(connect) + "[b, c]\n"
    assert shell(connect, "get", "/a").stdout.endswith("\nhello\n")
    assert shell(connect, "get", "/a/c").stdout.endswith("\nx y\n")
    assert shell(connect, "ls", "-R", "/a").stdout.endswith("\n/a\n/a/b\n/a/c\n")
    stat = shell(connect, "stat", "/a").stdout.splitlines()
    assert stat[-11].startswith("cZxid = 0x") and stat[-2] == "dataLength = 5" and stat[-1] == "numChildren = 2"
    assert shell(connect, "get", "-s", "/a").stdout.splitlines()[-12:-11] == ["hello"]
    assert shell(connect, "set", "/a", "bye").returncode == 0
    assert shell(connect, "get", "/a").stdout.endswith("\nbye\n")
    # errors: message on stderr, exit status 1
    r = shell(connect, "get", "/nope")
    assert r.returncode == 1 and r.stderr.strip() == "Node does not exist: /nope"
    r = shell(connect, "create", "/a")
    assert r.returncode == 1 and r.stderr.strip() == "Node already exists: /a"
    r = shell(connect, "delete", "/a")
    assert r.returncode == 1 and r.stderr.strip() == "Node not empty: /a"
    assert shell(connect, "deleteall", "/a").returncode == 0
    assert shell(connect, "ls", "/").stdout.endswith("\n[]\n")
    r = shell(connect, "bogus")
    assert r.returncode == 1 and "ls [-s] [-R] path" in r.stderr


def test_commands_from_standard_input(zookeeper):
    connect = chroot(zookeeper)
    r = shell(connect, stdin="create /p 1\ncreate /p/q 2\nls /p\nget /p/q\nquit\nls /\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"Connecting to {connect}\nWelcome to ZooKeeper!\nJLine support is disabled\n")
    assert r.stdout.endswith("[q]\n2\n")          # nothing after quit


@pytest.mark.skipif(not (shutil.which("java") and os.path.exists("/usr/share/java/zookeeper.jar")),
                    reason="Debian's ZooKeeper jar is not installed")
def test_output_matches_zookeepermain(zookeeper):
    connect = chroot(zookeeper)
    assert shell(connect, "create", "/m", "data").returncode == 0
    assert shell(connect, "create", "/m/k").returncode == 0
    for args in (["ls", "/m"], ["ls", "-R", "/m"], ["get", "/m"], ["stat", "/m"], ["get", "-s", "/m"],
                 ["ls", "-s", "/m"], ["get", "/missing"], ["create", "/m"], ["delete", "/m"]):
        ours = shell(connect, *args)
        code, out, err = java_shell(connect, *args)
        # compare without the WATCHER block, which both print once (WATCHER_PRINTS)
        assert ours.stdout.count(WATCHER) == 1, args
        assert (ours.returncode, _without_watcher(ours.stdout), ours.stderr.strip()) == \
            (code, _without_watcher(out), err), args


def _without_watcher(out: str) -> str:
    """``out`` without the two printlns of the WATCHER block, each required exactly once."""
    for text in WATCHER_PRINTS:
        assert out.count(text) == 1, (text, out)
        out = out.replace(text, "", 1)
    return out


def test_a_brokers_znodes(zookeeper, tmp_path):
    connect = new_chroot(zookeeper)
    b = BrokerProcess(tmp_path / "b", props={"zookeeper.connect": connect, "broker.id": 7,
                                             "zookeeper.session.timeout.ms": "6000"}, startup_timeout=60)
    with running(b):
        assert shell(connect, "ls", "/brokers/ids").stdout.endswith("\n[7]\n")
        reg = json.loads(shell(connect, "get", "/brokers/ids/7").stdout.splitlines()[-1])
        assert reg["port"] == b.port
        assert shell(connect, "get", "/controller").returncode == 0

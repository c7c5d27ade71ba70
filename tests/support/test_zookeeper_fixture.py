"""The session ZooKeeper fixture starts a real Debian ZooKeeper that kazoo can use."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.cluster


def test_zookeeper_fixture_roundtrip(zookeeper, zk_connect):
    from kazoo.client import KazooClient

    assert zookeeper.four_letter("ruok").strip() == "imok"
    assert "Mode: standalone" in zookeeper.four_letter("srvr")

    zk = KazooClient(hosts=zk_connect, timeout=10)
    zk.start(timeout=15)
    try:
        zk.create("/brokers/ids/0", b'{"host":"127.0.0.1"}', ephemeral=True, makepath=True)
        data, stat = zk.get("/brokers/ids/0")
        assert data == b'{"host":"127.0.0.1"}'
        assert stat.ephemeralOwner == zk.client_id[0]
        assert zk.get_children("/brokers/ids") == ["0"]
    finally:
        zk.stop()
        zk.close()

    # the chroot isolates tests: the node is under it, not at the root
    root = KazooClient(hosts=zookeeper.connect, timeout=10)
    root.start(timeout=15)
    try:
        chroot = zk_connect.split("/", 1)[1]
        assert root.exists("/brokers") is None
        assert root.exists(f"/{chroot}/brokers/ids") is not None
    finally:
        root.stop()
        root.close()


def test_zookeeper_survives_pause(zookeeper, zk_connect):
    from kazoo.client import KazooClient

    zookeeper.pause()
    try:
        # the kernel still accepts connections, but nobody answers
        try:
            answer = zookeeper.four_letter("ruok")
        except OSError:
            answer = ""
        assert answer.strip() != "imok"
    finally:
        zookeeper.resume()
    zk = KazooClient(hosts=zk_connect, timeout=10)
    zk.start(timeout=15)
    try:
        zk.create("/x", b"1")
        assert zk.get("/x")[0] == b"1"
    finally:
        zk.stop()
        zk.close()

"""Fixtures for the ZooKeeper-cluster tests: ``cluster_factory(n=3, props=..., racks=...)``
returns a started ``tests.support.cluster.Cluster`` on the session's ZooKeeper (own chroot);
everything it started is killed after the test, and broker logs are shown for failures."""
from __future__ import annotations

import pytest

from tests.conftest import _track
from tests.support.cluster import Cluster


@pytest.fixture
def cluster_factory(request, tmp_path, zookeeper):
    made: list[Cluster] = []

    def make(n: int = 3, *, start: bool = True, **kwargs) -> Cluster:
        c = Cluster(tmp_path / f"cluster{len(made)}", zookeeper, n, **kwargs)
        made.append(c)
        for b in c.brokers.values():
            _track(request, b)
        c._track = lambda b: _track(request, b)
        if start:
            c.start()
        return c

    yield make
    for c in made:
        c.shutdown()


@pytest.fixture
def cluster(cluster_factory) -> Cluster:
    return cluster_factory(3)


@pytest.fixture
def netns_cluster(request, tmp_path):
    """Three brokers, each in its own network namespace on a bridge (loopback-range addresses),
    with their own ZooKeeper on the bridge address; ``cluster.cut(i)`` / ``cluster.heal(i)``."""
    from tests.support import ZooKeeperProcess
    from tests.support.netns import NetnsLan, available
    from tests.support.zookeeper import zookeeper_available
    ok, why = available()
    if not ok:
        pytest.skip(why)
    ok, why = zookeeper_available()
    if not ok:
        pytest.skip(why)
    lan = NetnsLan()
    zk = None
    c = None
    try:
        zk = ZooKeeperProcess(tmp_path / "zk-netns", config={"clientPortAddress": lan.root_address})
        zk.host = lan.root_address
        _track(request, zk)
        zk.start()
        c = Cluster(tmp_path / "netns-cluster", zk, 3, lan=lan)
        for b in c.brokers.values():
            _track(request, b)
        c.start()
        yield c
    finally:
        if c is not None:
            c.shutdown()
        else:
            lan.close()
        if zk is not None:
            zk.kill()

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

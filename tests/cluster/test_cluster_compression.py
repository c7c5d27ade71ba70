"""compression.type on a cluster: the leader rewrites batches in the topic's codec and the
followers copy what it stored, byte for byte; after the leader dies the new one serves the
same records."""
from __future__ import annotations

import glob
import os
import time

import pytest

from protocol.records import iter_batches
from tests.integration.test_compression_type import _expected, _produce, _read_kp, _records

pytestmark = pytest.mark.cluster


def _segments(broker, topic):
    out = {}
    for path in sorted(glob.glob(os.path.join(broker.log_dir, f"{topic}-0", "*.log"))):
        with open(path, "rb") as f:
            out[os.path.basename(path)] = f.read()
    return out


def test_followers_store_the_leaders_recompressed_batches(cluster):
    cluster.create_topic("cc", partitions=1, rf=3, configs={"compression.type": "zstd"})
    records = _records(3_000)
    _produce(cluster.bootstrap, "cc", records, **{"compression.type": "lz4", "acks": "all"})
    cluster.wait_for_isr("cc", 0, [1, 2, 3])
    leader = cluster.leader("cc", 0)
    copies = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        copies = {i: _segments(b, "cc") for i, b in cluster.brokers.items()}
        if all(c == copies[leader] for c in copies.values()):
            break
        time.sleep(0.2)
    assert all(c == copies[leader] for c in copies.values()), {i: {n: len(d) for n, d in c.items()}
                                                                for i, c in copies.items()}
    batches = [h for data in copies[leader].values() for h in iter_batches(data)]
    assert batches and {h.compression for h in batches} == {4}
    assert sum(h.records_count for h in batches) == len(records)

    cluster.kill(leader)
    cluster.wait_for_leader("cc", 0, not_in=[leader])
    assert _read_kp(cluster.bootstrap, "cc", len(records)) == _expected(records)

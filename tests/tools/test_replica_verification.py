"""kafka-replica-verification.sh's checking on its own (the cluster test in
tests/cluster/test_cluster_tools.py drives it against real replicas): the batch walk, a
diverging offset ending the run with status 1, a different CRC reported and passed, lag
reports, and the command-line checks."""
from __future__ import annotations

import pytest

from protocol.records import build_batch
from tests.tools.conftest import tool
from tools.replica_verification import Verifier, batches


def batch(base, n, value=b"v"):
    return bytes(build_batch([(None, value + bytes([i]), [], 1000 + i) for i in range(n)], base_offset=base))


def test_batches_walks_whole_batches_only():
    data = batch(0, 3) + batch(3, 2)
    assert [b[:2] for b in batches(data)] == [(2, 3), (4, 5)]
    assert [b[:2] for b in batches(data[:-5])] == [(2, 3)]     # a torn last batch is left out
    assert list(batches(b"")) == []


def test_equal_replicas_move_the_position_up_to_the_high_watermark(capsys):
    v = Verifier({("t", 0): [1, 2]}, {("t", 0): 0}, report_interval_ms=0)
    data = batch(0, 3) + batch(3, 2)
    v.verify({("t", 0): {1: (5, data), 2: (3, data)}})       # replica 2's high watermark is 3
    assert v.offsets[("t", 0)] == 3
    out = capsys.readouterr().out
    assert out.endswith(": max lag is 2 for partition t-0 at offset 3 among 1 partitions\n"), out


def test_a_different_crc_is_reported_and_passed(capsys):
    v = Verifier({("t", 0): [1, 2]}, {("t", 0): 0}, report_interval_ms=60000)
    a, b = batch(0, 2, b"a"), batch(0, 2, b"b")
    v.verify({("t", 0): {1: (2, a), 2: (2, b)}})
    out = capsys.readouterr().out
    assert ": partition t-0 has unmatched checksum at offset 1; replica 1's checksum " in out, out
    assert "; replica 2's checksum " in out
    assert v.offsets[("t", 0)] == 2


def test_diverging_offsets_end_the_run(capsys):
    v = Verifier({("t", 0): [1, 2]}, {("t", 0): 0}, report_interval_ms=60000)
    with pytest.raises(SystemExit) as e:
        v.verify({("t", 0): {1: (5, batch(0, 3)), 2: (5, batch(0, 2))}})
    assert e.value.code == 1
    assert ": partition t-0: replica 1's offset 2 doesn't match replica 2's offset 1" in capsys.readouterr().out


def test_a_silent_replica_holds_its_partition_back():
    v = Verifier({("t", 0): [1, 2]}, {("t", 0): 0}, report_interval_ms=60000)
    v.verify({("t", 0): {1: (3, batch(0, 3))}})
    assert v.offsets[("t", 0)] == 0


def test_command_line_checks():
    r = tool("kafka-replica-verification", "--time", "-2")
    assert r.rc == 1 and 'Missing required argument "[broker-list]"' in r.err, r
    r = tool("kafka-replica-verification", "--broker-list", "127.0.0.1:1", "--topics-include", "a",
             "--topic-white-list", "b")
    assert r.rc == 1 and '"[topics-include]" can\'t be used with option "[topic-white-list]"' in r.err, r
    r = tool("kafka-replica-verification", "--broker-list", "127.0.0.1:1", "--topics-include", "a[")
    assert r.rc == 1 and "a[ is an invalid regex" in r.err, r

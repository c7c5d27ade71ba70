"""``__transaction_state`` key/value formats."""
from __future__ import annotations

import struct

import pytest

from broker.txn import records as TR


def test_key_layout():
    b = TR.key_bytes("tx-1")
    assert b == struct.pack(">hh", 0, 4) + b"tx-1"
    assert TR.parse_key(b) == "tx-1"
    assert TR.parse_key(struct.pack(">hh", 7, 0)) is None          # unknown version


def test_value_v0_layout_and_round_trip():
    v = TR.TxnLogValue(1234, 5, 60000, 1, {"a": [0, 2], "b": [1]}, 1700, 1600)
    b = TR.value_bytes(v)
    want = (struct.pack(">hqhib", 0, 1234, 5, 60000, 1) + struct.pack(">i", 2)
            + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2)
            + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1)
            + struct.pack(">qq", 1700, 1600))
    assert b == want
    got = TR.parse_value(b)
    assert (got.producer_id, got.producer_epoch, got.timeout_ms, got.state, got.partitions,
            got.last_update_ms, got.start_ms) == (1234, 5, 60000, 1, {"a": [0, 2], "b": [1]}, 1700, 1600)


def test_empty_state_has_null_partitions():
    b = TR.value_bytes(TR.TxnLogValue(1, 0, 1000, 0, None, 5, -1))
    assert b[2 + 8 + 2 + 4 + 1:][:4] == struct.pack(">i", -1)
    assert TR.parse_value(b).partitions is None
    assert TR.parse_value(None) is None


def test_value_v1_is_readable():
    v = TR.TxnLogValue(9, 3, 2000, 4, {"t": [7]}, 11, 10, previous_producer_id=8, next_producer_id=10,
                       client_transaction_version=2)
    got = TR.parse_value(TR.v1_value_bytes(v))
    assert (got.producer_id, got.producer_epoch, got.state, got.partitions, got.last_update_ms, got.start_ms,
            got.previous_producer_id, got.next_producer_id, got.client_transaction_version) == \
        (9, 3, 4, {"t": [7]}, 11, 10, 8, 10, 2)


@pytest.mark.parametrize("data", [b"\x00", b"\x00\x00\x00", b"\x00\x09" + b"\x00" * 40,
                                  TR.value_bytes(TR.TxnLogValue(1, 0, 1, 1, {"t": [1]}, 1, 1))[:-3]])
def test_bad_values(data):
    with pytest.raises(TR.RecordFormatError):
        TR.parse_value(data)

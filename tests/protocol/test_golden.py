"""Golden frames captured from kafka-python, aiokafka, confluent-kafka and kcat
(tests/protocol/golden/, recorded by tests/capture/record_golden.py) decode with the
project's codec without error and re-encode byte-exact.

Coverage of the data itself (every API and compression per client) is checked
separately, without the codec, in tests/capture/test_golden_coverage.py.
"""
from __future__ import annotations

import pytest

api = pytest.importorskip("protocol.api")

from tests.capture.frames import load_golden  # noqa: E402

FRAMES = load_golden()


def _id(f: dict) -> str:
    return f"{f['client']}-{f['dir']}-{f['api_name']}-v{f['api_version']}-c{f['correlation_id']}"


REQUESTS = [f for f in FRAMES if f["dir"] == "request"]
RESPONSES = [f for f in FRAMES if f["dir"] == "response"]


def test_golden_frames_present():
    assert REQUESTS and RESPONSES


@pytest.mark.parametrize("entry", REQUESTS, ids=_id)
def test_request_roundtrip(entry):
    frame = entry["frame"]
    header, body = api.decode_request(frame)
    again = api.encode_request(header, body)
    assert bytes(again) == frame, (
        f"{entry['source']}: re-encoded request differs "
        f"(first difference at byte {_first_difference(bytes(again), frame)})")


@pytest.mark.parametrize("entry", RESPONSES, ids=_id)
def test_response_roundtrip(entry):
    frame = entry["frame"]
    header, body = api.decode_response(frame, entry["api_key"], entry["api_version"])
    again = api.encode_response(header, body, entry["api_key"], entry["api_version"])
    assert bytes(again) == frame, (
        f"{entry['source']}: re-encoded response differs "
        f"(first difference at byte {_first_difference(bytes(again), frame)})")


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))

"""The committed golden captures (tests/protocol/golden/) hold what the protocol bar
asks for, for every client.  Independent of the project's codec: only the hand-written
parsing in tests/capture/frames.py is used."""
from __future__ import annotations

import collections

import pytest

from tests.capture.frames import (API_NAMES, GOLDEN_CLIENTS, load_golden, produce_request_codecs,
                                  request_header, response_correlation_id)

REQUIRED_APIS = {
    18: "ApiVersions", 3: "Metadata", 0: "Produce", 1: "Fetch", 2: "ListOffsets",
    10: "FindCoordinator", 11: "JoinGroup", 14: "SyncGroup", 12: "Heartbeat",
    8: "OffsetCommit", 9: "OffsetFetch", 13: "LeaveGroup", 22: "InitProducerId",
}
REQUIRED_CODECS = {"none", "gzip", "snappy", "lz4", "zstd"}

FRAMES = load_golden()
BY_CLIENT = collections.defaultdict(list)
for _f in FRAMES:
    BY_CLIENT[_f["client"]].append(_f)


def test_every_client_was_captured():
    assert set(GOLDEN_CLIENTS) <= set(BY_CLIENT), sorted(BY_CLIENT)


@pytest.mark.parametrize("client", GOLDEN_CLIENTS)
@pytest.mark.parametrize("direction", ["request", "response"])
def test_client_covers_required_apis(client, direction):
    seen = {f["api_key"] for f in BY_CLIENT[client] if f["dir"] == direction}
    missing = {k: n for k, n in REQUIRED_APIS.items() if k not in seen}
    assert not missing, f"{client} has no {direction} for {sorted(missing.values())}"


@pytest.mark.parametrize("client", GOLDEN_CLIENTS)
def test_client_covers_every_compression(client):
    codecs = set()
    for f in BY_CLIENT[client]:
        if f["dir"] == "request" and f["api_key"] == 0:
            found = produce_request_codecs(f["frame"])
            assert found == f.get("codecs"), f["source"]
            codecs.update(found)
    assert REQUIRED_CODECS <= codecs, f"{client}: missing {sorted(REQUIRED_CODECS - codecs)}"


def test_entries_agree_with_their_frames():
    for f in FRAMES:
        assert f["dir"] in ("request", "response"), f["source"]
        assert f["api_name"] == API_NAMES.get(f["api_key"], f"Api{f['api_key']}"), f["source"]
        if f["dir"] == "request":
            key, ver, corr, _ = request_header(f["frame"])
            assert (key, ver, corr) == (f["api_key"], f["api_version"], f["correlation_id"]), f["source"]
        else:
            assert response_correlation_id(f["frame"]) == f["correlation_id"], f["source"]


def test_golden_data_stays_small():
    from tests.capture.frames import GOLDEN_DIR
    total = sum(p.stat().st_size for p in GOLDEN_DIR.iterdir() if p.is_file())
    assert total < 400_000, f"golden data is {total} bytes; keep it to a few hundred KB"

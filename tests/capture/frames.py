"""Just enough hand-written Kafka wire parsing for the golden-capture tooling: request
and response headers, and the compression codecs of the record batches inside a
Produce request.  Deliberately independent of the project's codec (protocol/), so the
capture and its coverage checks cannot share a bug with the code under test."""
from __future__ import annotations

import struct

API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
    13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
    18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics", 22: "InitProducerId",
    23: "OffsetForLeaderEpoch", 32: "DescribeConfigs", 60: "DescribeCluster",
    71: "GetTelemetrySubscriptions",
}

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

# First flexible version of the request/response bodies we need to walk.
PRODUCE_FLEXIBLE_FROM = 9


class Reader:
    def __init__(self, data: bytes, pos: int = 0):
        self.data = data
        self.pos = pos

    def take(self, fmt: str):
        vals = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return vals[0] if len(vals) == 1 else vals

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise ValueError("uvarint too long")

    def skip(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("length runs past the end of the frame")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def string(self, flexible: bool) -> str | None:
        n = self.uvarint() - 1 if flexible else self.take(">h")
        return None if n < 0 else self.skip(n).decode()

    def bytes_(self, flexible: bool) -> bytes | None:
        n = self.uvarint() - 1 if flexible else self.take(">i")
        return None if n < 0 else self.skip(n)

    def array_len(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.take(">i")

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.skip(self.uvarint())


def request_header(frame: bytes) -> tuple[int, int, int, str | None]:
    """(api_key, api_version, correlation_id, client_id) of a request frame
    (the 4-byte size prefix already removed)."""
    key, ver, corr, n = struct.unpack_from(">hhih", frame, 0)
    client_id = None if n < 0 else frame[10:10 + n].decode(errors="replace")
    return key, ver, corr, client_id


def response_correlation_id(frame: bytes) -> int:
    return struct.unpack_from(">i", frame, 0)[0]


def batch_codecs(records: bytes) -> list[str]:
    """Compression codec of every batch / message set entry in a records blob."""
    out = []
    pos = 0
    while pos + 17 <= len(records):
        length = struct.unpack_from(">i", records, pos + 8)[0]
        magic = records[pos + 16]
        if magic == 2:
            attributes = struct.unpack_from(">h", records, pos + 21)[0]
        elif magic in (0, 1):
            attributes = records[pos + 17]
        else:
            raise ValueError(f"unknown record magic {magic}")
        out.append(CODECS.get(attributes & 0x07, f"codec{attributes & 0x07}"))
        pos += 12 + length
    return out


def produce_request_codecs(frame: bytes) -> list[str]:
    """Codecs of all batches in a Produce request frame (any version 0-11)."""
    key, ver, _, _ = request_header(frame)
    if key != 0:
        raise ValueError("not a Produce request")
    flexible = ver >= PRODUCE_FLEXIBLE_FROM
    r = Reader(frame, 8)
    n = r.take(">h")  # client id: always the int16 form
    r.skip(max(n, 0))
    if flexible:
        r.tagged_fields()  # request header v2
    if ver >= 3:
        r.string(flexible)  # transactional id
    r.take(">hi")  # acks, timeout
    codecs: list[str] = []
    for _ in range(r.array_len(flexible)):
        r.string(flexible)
        for _ in range(r.array_len(flexible)):
            r.take(">i")
            records = r.bytes_(flexible)
            if records:
                codecs += batch_codecs(records)
            if flexible:
                r.tagged_fields()
        if flexible:
            r.tagged_fields()
    if flexible:
        r.tagged_fields()
    if r.pos != len(frame):
        raise ValueError(f"Produce v{ver}: {len(frame) - r.pos} bytes left over")
    return codecs


# -- the committed golden data ----------------------------------------------------------

GOLDEN_DIR = __import__("pathlib").Path(__file__).resolve().parents[1] / "protocol" / "golden"
GOLDEN_CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka", "kcat")


def load_golden(directory=GOLDEN_DIR) -> list[dict]:
    """Every captured frame of every <client>.jsonl file, with `frame` (bytes) added."""
    import json
    from pathlib import Path
    out = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                entry = json.loads(line)
                entry["frame"] = bytes.fromhex(entry["hex"])
                entry["source"] = f"{path.name}:{lineno}"
                out.append(entry)
    return out

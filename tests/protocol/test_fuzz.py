"""Random and mutated frames only ever raise the codec's own DecodeError, quickly."""
from __future__ import annotations

import random
import resource
import struct
import time

from hypothesis import HealthCheck, given, settings, strategies as st

from protocol import api
from protocol.messages import REQUESTS, RequestHeader
from protocol.primitives import DecodeError

N_FRAMES = 100_000


def _corpus(seed=1):
    """Valid request frames for every API key at every version (defaults + one random draw)."""
    rnd = random.Random(seed)
    frames = []
    for key, cls in sorted(REQUESTS.items()):
        lo, hi = cls.DEF.valid_versions
        for v in range(lo, hi + 1):
            header = api.make_request_header(key, v, rnd.randrange(2**31), "fuzz")
            frames.append(api.encode_request(header, cls()))
    return frames


def _mutate(rnd, frame):
    b = bytearray(frame)
    op = rnd.randrange(6)
    if op == 0 and len(b) > 1:                      # truncate
        del b[rnd.randrange(1, len(b)):]
    elif op == 1:                                   # flip bits
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(b))
            b[i] ^= 1 << rnd.randrange(8)
    elif op == 2 and len(b) > 8:                    # huge int32 length/count
        i = rnd.randrange(4, len(b) - 3)
        b[i:i + 4] = struct.pack(">i", rnd.choice([0x7FFFFFFF, 0x10000000, 65535]))
    elif op == 3 and len(b) > 8:                    # negative length/count
        i = rnd.randrange(4, len(b) - 3)
        b[i:i + 4] = struct.pack(">i", rnd.choice([-2, -1000, -2**31]))
    elif op == 4:                                   # random tail
        b += rnd.randbytes(rnd.randrange(1, 32))
    else:                                           # huge varint
        i = rnd.randrange(4, len(b)) if len(b) > 4 else len(b)
        b[i:i] = b"\xff\xff\xff\xff\x7f"
    return bytes(b)


def test_mutated_and_random_frames_raise_only_decode_error():
    rnd = random.Random(20261121)
    corpus = _corpus()
    start = time.monotonic()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcomes = {"ok": 0, "error": 0}
    for i in range(N_FRAMES):
        if i % 10 == 0:
            frame = rnd.randbytes(rnd.randrange(0, 64))
        else:
            frame = _mutate(rnd, rnd.choice(corpus))
        try:
            api.decode_request(frame)
            outcomes["ok"] += 1
        except DecodeError:
            outcomes["error"] += 1
    elapsed = time.monotonic() - start
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    assert outcomes["ok"] + outcomes["error"] == N_FRAMES
    assert outcomes["error"] > N_FRAMES // 2, outcomes   # the mutations do break most frames
    assert grown_mb < 200, f"peak memory grew by {grown_mb:.0f} MB"
    assert elapsed < 120, f"{N_FRAMES} frames took {elapsed:.0f}s"


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=200))
def test_arbitrary_bytes(data):
    try:
        api.decode_request(data)
    except DecodeError:
        pass


def test_request_header_keeps_classic_client_id_in_v2():
    # ClientId is never a compact string, even in the flexible header v2.
    h = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=1, client_id="ab")
    assert h.encode(2)[8:12] == b"\x00\x02ab"

"""Random requests against a live broker: schema-valid messages of every API at every version
the broker serves (string fields often naming a topic, group or transactional id it knows), some
of them with bytes flipped, cut or appended after encoding.  Each gets an answer, no answer (a
parked request, acks=0) or a closed connection; never an exception out of a handler, and the
broker keeps serving other connections and keeps the data it had.

15 examples per API by default, the same every run; ``ODRADEK_FUZZ_EXAMPLES`` sets the count and
``ODRADEK_FUZZ_RANDOM=1`` draws fresh ones.  Its first finding: Metadata v10-11 with a null name
failed in encoding the answer (tests/integration/test_bad_input.py now pins Kafka's answer).

The APIs a broker serves only in KRaft mode (``dispatch.KRAFT_ONLY_APIS``: DescribeQuorum) are
hidden from the ordinary broker's ApiVersions and close its connections, so they are fuzzed
against a second broker, run from a KRaft configuration, which advertises every served API.
(tests/cluster/test_cluster_request_fuzz.py sends them to its ZooKeeper cluster too: there they
exercise the closing path only.)"""
from __future__ import annotations

import os
import re
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from broker.dispatch import KRAFT_ONLY_APIS
from protocol import api
from protocol.messages import REQUESTS, ApiVersionsRequest
from protocol.records import build_batch, iter_batches, iter_records
from tests.protocol.strategies import _text, message_strategy
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.kraft import kraft_broker_process
from tests.support.rawkafka import Closed, RawConnection

TOPIC = "fuzzed"
GROUP = "fuzz-group"
RECORDS = 20
EXAMPLES = int(os.environ.get("ODRADEK_FUZZ_EXAMPLES", "15"))     # per API key

NAMES = st.one_of(_text, st.sampled_from([TOPIC, GROUP, "__consumer_offsets", "txn-1", ""]))


# a telemetry receiver, so GetTelemetrySubscriptions / PushTelemetry are advertised too
BROKER_PROPS = {"num.partitions": 2, "auto.create.topics.enable": "true",
                "log.retention.ms": -1,     # the records carry a fixed 2023 timestamp (see retention)
                "metric.reporters": "tests.integration.telemetry_receivers.RecordingTelemetry"}


def _with_records(b) -> None:
    with RawConnection(b.host, b.port) as c:
        assert c.metadata([TOPIC]).topics[0].error_code == 0
        for i in range(RECORDS):
            r = c.produce(TOPIC, 0, build_batch([(b"k%d" % i, b"v%d" % i, (), 1_700_000_000_000)]))
            assert r.error_code == 0


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("fuzz"), name="broker", props=BROKER_PROPS)) as b:
        _with_records(b)
        yield b


@pytest.fixture(scope="module")
def kraft_kafka(tmp_path_factory):
    """A broker on a KRaft configuration: the one that serves KRAFT_ONLY_APIS."""
    with running(kraft_broker_process(tmp_path_factory.mktemp("fuzz-kraft") / "b", props=BROKER_PROPS)) as b:
        _with_records(b)
        yield b


def _target(request, key: int):
    """The broker API ``key`` is fuzzed against: the KRaft one for a KRaft-only API."""
    return request.getfixturevalue("kraft_kafka" if key in KRAFT_ONLY_APIS else "kafka")


def _served() -> list[tuple[int, int, int]]:
    """(api key, min, max) of every API the broker serves (its handler table, which its
    ApiVersions answer is made from; the first test checks the two agree)."""
    from broker import dispatch
    dispatch.load_handlers()
    return dispatch.supported_versions()


SERVED = _served()

#: the fuzz tests' decorators (also used by tests/cluster/test_cluster_request_fuzz.py): one
#: case per served API, EXAMPLES requests each, the same every run unless ODRADEK_FUZZ_RANDOM
EVERY_API = pytest.mark.parametrize("key,lo,hi", SERVED,
                                    ids=[REQUESTS[k].__name__[:-7] for k, _, _ in SERVED])
FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                         derandomize=not os.environ.get("ODRADEK_FUZZ_RANDOM"),
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                HealthCheck.data_too_large])


def _advertised(b) -> list[tuple[int, int, int]]:
    with RawConnection(b.host, b.port) as c:
        resp = c.request(18, 0, ApiVersionsRequest())
    assert resp.error_code == 0
    return [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]


def test_the_broker_advertises_what_is_fuzzed(kafka):
    """Everything served but the KRaft-only APIs (fuzzed on the KRaft broker, below)."""
    assert KRAFT_ONLY_APIS <= {k for k, _, _ in SERVED}
    assert _advertised(kafka) == [s for s in SERVED if s[0] not in KRAFT_ONLY_APIS]


def test_the_kraft_broker_advertises_every_served_api(kraft_kafka):
    assert _advertised(kraft_kafka) == SERVED


def _exchange(kafka, frame: bytes, wait: float = 0.15) -> None:
    """Send one frame on a new connection; read the answer if one comes within ``wait`` s."""
    with RawConnection(kafka.host, kafka.port) as c:
        c.send_raw(frame)
        c.sock.settimeout(wait)
        try:
            c.recv_frame()
        except (socket.timeout, Closed, ConnectionError, struct.error):
            pass


def _mutate(frame: bytes, data) -> bytes:
    how = data.draw(st.sampled_from(["flip", "cut", "append", "int"]), label="mutation")
    b = bytearray(frame)
    if how == "flip":
        for pos in data.draw(st.lists(st.integers(0, len(b) - 1), min_size=1, max_size=4)):
            b[pos] ^= data.draw(st.integers(1, 255))
    elif how == "cut":
        del b[data.draw(st.integers(0, len(b) - 1)):]
    elif how == "append":
        b += data.draw(st.binary(min_size=1, max_size=16))
    elif len(b) >= 12:      # an int32 somewhere in the body set to an extreme
        pos = data.draw(st.integers(8, len(b) - 4))
        b[pos:pos + 4] = struct.pack(">i", data.draw(st.sampled_from([-1, 0, 2**31 - 1, -2**31, 1 << 20])))
    return bytes(b)


def draw_frame(data, key: int, lo: int, hi: int) -> bytes:
    """A request frame of API ``key`` at a version in [lo, hi]: a random schema-valid message,
    one time in three with its bytes mangled afterwards."""
    version = data.draw(st.integers(lo, hi), label="version")
    body = data.draw(message_strategy(REQUESTS[key], version, text=NAMES), label="body")
    header = api.make_request_header(key, version, data.draw(st.integers(0, 2**31 - 1)), "fuzz")
    frame = api.encode_request(header, body)
    if data.draw(st.integers(0, 2), label="mutate") == 0:
        frame = _mutate(frame, data)
    return frame


def _handler_errors(kafka, since: int = 0) -> list[str]:
    """Unhandled exceptions in the broker's log (from character ``since`` on)."""
    return re.findall(r"error handling a request.*|Traceback \(most recent call last\)",
                      kafka.log_text()[since:])


@EVERY_API
@FUZZ_SETTINGS
@given(data=st.data())
def test_random_requests_get_answers_not_exceptions(request, key, lo, hi, data):
    kafka = _target(request, key)
    frame = draw_frame(data, key, lo, hi)
    seen = len(kafka.log_text())
    _exchange(kafka, frame)
    assert kafka.alive, kafka.log_tail(40)
    assert _handler_errors(kafka, seen) == [], kafka.log_tail(80)


def test_the_broker_still_serves_and_kept_its_data(kafka):
    """Runs after the random requests (module order): a new connection gets Metadata, and the
    records written before are there in order (a random DeleteRecords may have moved the log
    start, a random DeleteTopics may have deleted the topic: both are answers, not damage)."""
    with RawConnection(kafka.host, kafka.port) as c:
        md = c.metadata([TOPIC], auto_create=False)
        assert md.topics[0].error_code in (0, 3)      # 3: UNKNOWN_TOPIC_OR_PARTITION
        if md.topics[0].error_code == 0:
            pd = c.fetch(TOPIC, 0, 0)
            if pd.error_code == 1:                    # OFFSET_OUT_OF_RANGE: log start moved
                pd = c.fetch(TOPIC, 0, c.list_offsets(TOPIC, 0, -2).offset)
            assert pd.error_code == 0
            data = bytes(pd.records)
            ours = [r.value for h in iter_batches(data) for r in iter_records(data, h)
                    if re.fullmatch(rb"v\d+", r.value or b"")]
            first = int(ours[0][1:]) if ours else RECORDS
            assert ours == [b"v%d" % i for i in range(first, RECORDS)]
    assert _handler_errors(kafka) == []


def test_the_kraft_broker_still_serves(kraft_kafka):
    """After the KRaft-only APIs' random requests: DescribeQuorum still answers, nothing raised."""
    from protocol.messages import DescribeQuorumRequest as Q
    with RawConnection(kraft_kafka.host, kraft_kafka.port) as c:
        resp = c.request(55, 2, Q(topics=[Q.TopicData(topic_name="__cluster_metadata",
                                                      partitions=[Q.PartitionData(partition_index=0)])]))
    assert resp.error_code == 0 and resp.topics[0].partitions[0].error_code == 0
    assert kraft_kafka.alive and _handler_errors(kraft_kafka) == []

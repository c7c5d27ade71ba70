"""Bad input gets a clear answer and loses nothing (issue 3).

Raw frames over sockets (tests/support/rawkafka.py) and real clients against one broker process
started with small limits (message.max.bytes=100000, socket.request.max.bytes=1 MiB):

* corrupt CRC → CORRUPT_MESSAGE; a batch over max.message.bytes → MESSAGE_TOO_LARGE;
* a request over socket.request.max.bytes → that connection is closed, others unaffected;
* invalid topic names → INVALID_TOPIC_EXCEPTION; unknown topics/partitions →
  UNKNOWN_TOPIC_OR_PARTITION (produce, fetch, list offsets, metadata without auto-creation);
  Produce v13 to a topic id no topic has → UNKNOWN_TOPIC_ID;
* magic 0/1 message sets (Produce v2) are accepted and stored as v2 batches;
* unknown API keys / versions close the connection, except ApiVersions (UNSUPPORTED_VERSION in
  the v0 layout); a malformed body closes that connection only;
* a full disk (a 2 MiB tmpfs, needs root) → KAFKA_STORAGE_ERROR on produce, everything
  acknowledged stays readable, and once space returns the log takes writes and survives a
  restart.
After each bad request the broker still serves the data written before it.
"""
from __future__ import annotations

import os
import struct
import subprocess
import time

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import MetadataRequest
from protocol.records import build_batch, build_legacy, iter_batches, iter_records
from tests.support import BrokerProcess
from tests.support.rawkafka import Closed, RawConnection
from tests.support.broker import running

MAX_MESSAGE = 100_000
MAX_REQUEST = 1 << 20


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("bad-input"), name="broker", props={
                 "num.partitions": 2, "message.max.bytes": MAX_MESSAGE,
                 "socket.request.max.bytes": MAX_REQUEST})) as b:
        yield b


def conn(kafka) -> RawConnection:
    return RawConnection(kafka.host, kafka.port)


def now_ms() -> int:
    return int(time.time() * 1000)


def batch(n=3, tag=b"v", size=10, compression=0):
    ts = now_ms()
    return build_batch([(b"k%d" % i, tag + b"%d-" % i + b"x" * size, [("h", b"%d" % i)], ts + i)
                        for i in range(n)], compression=compression)


def read_all(c: RawConnection, topic, partition, version=11):
    """Every record of the partition as (offset, key, value, headers, timestamp), and the
    magic of every stored batch."""
    out, magics, offset = [], [], 0
    while True:
        pd = c.fetch(topic, partition, offset, version=version)
        assert pd.error_code == 0, pd.error_code
        data = bytes(pd.records)
        hs = list(iter_batches(data))
        if not hs:
            return out, magics
        for h in hs:
            magics.append(h.magic)
            for r in iter_records(data, h):
                out.append((r.offset, r.key, r.value, [tuple(x) for x in r.headers], r.timestamp))
        offset = hs[-1].last_offset + 1


@pytest.fixture
def topic(kafka, request):
    """A fresh 2-partition topic with one known batch in partition 0."""
    name = "bad-" + request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:100]
    with conn(kafka) as c:
        assert c.metadata([name]).topics[0].error_code == 0
        r = c.produce(name, 0, batch(tag=b"before"))
        assert r.error_code == 0
    return name


def assert_intact(kafka, topic, n_before=3):
    with conn(kafka) as c:
        recs, _ = read_all(c, topic, 0)
    assert [r[2][:6] for r in recs[:n_before]] == [b"before"] * n_before
    return recs


# -- record errors --------------------------------------------------------------------------

def test_corrupt_crc_is_corrupt_message(kafka, topic):
    with conn(kafka) as c:
        for flip in (70, -1):                      # a record byte; the last byte
            b = batch(tag=b"bad")
            b[flip] ^= 0xFF
            for version in (3, 8, 9):
                r = c.produce(topic, 0, b, version=version)
                assert r.error_code == E.CORRUPT_MESSAGE
                assert r.base_offset == -1
        # a batch length below the v2 header size cannot be right: CORRUPT_MESSAGE
        b = batch(tag=b"bad")
        struct.pack_into(">i", b, 8, 10)
        assert c.produce(topic, 0, b).error_code == E.CORRUPT_MESSAGE
        # a length pointing past the data leaves no whole batch: Kafka's
        # ProduceRequest.validateRecords answers INVALID_RECORD for that
        b = batch(tag=b"bad")
        struct.pack_into(">i", b, 8, len(b) + 100)
        assert c.produce(topic, 0, b).error_code == E.INVALID_RECORD
        # two v2 batches for one partition: INVALID_RECORD at every version (v3+: Kafka's
        # ProduceRequest.validateRecords; v0-2: its LogValidator's one-batch rule)
        for version in (2, 3, 8):
            r = c.produce(topic, 0, batch(tag=b"two") + batch(tag=b"two"), version=version)
            assert r.error_code == E.INVALID_RECORD, version
        # a batch reporting no records, and a producer id without a sequence: INVALID_RECORD
        # (Kafka's LogValidator.validateBatch)
        assert c.produce(topic, 0, build_batch([])).error_code == E.INVALID_RECORD
        no_seq = build_batch([(b"k", b"v")], producer_id=4242, producer_epoch=0, base_sequence=-1)
        assert c.produce(topic, 0, no_seq).error_code == E.INVALID_RECORD
        # and the connection still works
        assert c.produce(topic, 0, batch(tag=b"after")).error_code == 0
    recs = assert_intact(kafka, topic)
    assert len(recs) == 6


def test_batch_over_max_message_bytes_is_message_too_large(kafka, topic):
    big = batch(n=1, size=MAX_MESSAGE + 1000)
    assert len(big) > MAX_MESSAGE
    with conn(kafka) as c:
        r = c.produce(topic, 0, big)
        assert r.error_code == E.MESSAGE_TOO_LARGE
        ok = batch(n=1, size=MAX_MESSAGE - 500)
        assert len(ok) <= MAX_MESSAGE
        assert c.produce(topic, 0, ok).error_code == 0
    assert_intact(kafka, topic)


def test_message_too_large_reaches_kafka_python(kafka, topic):
    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap, max_request_size=4 * MAX_MESSAGE,
                      retries=0)
    try:
        fut = p.send(topic, value=b"x" * (2 * MAX_MESSAGE), partition=0)
        with pytest.raises(MessageSizeTooLargeError):
            fut.get(timeout=30)
    finally:
        p.close(5)


# -- frames ---------------------------------------------------------------------------------

def test_request_over_socket_limit_closes_only_that_connection(kafka, topic):
    with conn(kafka) as other, conn(kafka) as bad:
        assert other.metadata([topic]).topics[0].error_code == 0
        # a size prefix above the limit: closed without reading the body
        bad.sock.sendall(struct.pack(">i", MAX_REQUEST + 1) + b"\0" * 1024)
        assert bad.is_closed()
        # the other connection and new ones are fine
        assert other.produce(topic, 1, batch()).error_code == 0
    with conn(kafka) as bad:
        # a real, complete request just over the limit
        big = batch(n=1, size=MAX_REQUEST)
        try:
            bad.produce(topic, 1, big)
            pytest.fail("the broker answered a request over socket.request.max.bytes")
        except (Closed, ConnectionResetError, BrokenPipeError):
            pass
    with conn(kafka) as c:
        assert c.metadata([topic]).topics[0].error_code == 0
    assert_intact(kafka, topic)


def test_negative_frame_size_closes_the_connection(kafka, topic):
    with conn(kafka) as bad:
        bad.sock.sendall(struct.pack(">i", -5))
        assert bad.is_closed()
    assert_intact(kafka, topic)


def test_unknown_api_key_or_version_closes_the_connection(kafka, topic):
    with conn(kafka) as other:
        for key, version in ((9999, 0), (0, 99), (3, 77), (1, 999)):
            with conn(kafka) as bad:
                bad.send_raw(struct.pack(">hhih", key, version, 1, 4) + b"test" + b"\0" * 16)
                assert bad.is_closed(), (key, version)
        assert other.metadata([topic]).topics[0].error_code == 0
    assert_intact(kafka, topic)


@pytest.mark.parametrize("version", [5, 99, 32767])
def test_unsupported_api_versions_version_gets_a_v0_reply(kafka, version):
    with conn(kafka) as c:
        # ApiVersions v3+ use request header v2 (client id, then tagged fields), as a newer
        # client sends them; the body of an unknown version is not read at all
        c.send_raw(struct.pack(">hhih", 18, version, 4242, 4) + b"test" + b"\x00"
                   + b"\x07future\x041.0\x00")
        frame = c.recv_frame()
        corr, err, n = struct.unpack_from(">ihi", frame)
        assert (corr, err) == (4242, E.UNSUPPORTED_VERSION)
        keys = {struct.unpack_from(">h", frame, 10 + 6 * i)[0]:
                struct.unpack_from(">hh", frame, 12 + 6 * i) for i in range(n)}
        assert 18 in keys and keys[18][0] == 0
        assert len(frame) == 10 + 6 * n          # the v0 layout, nothing after the array
        # the connection stays usable with a supported version
        c.send_raw(struct.pack(">hhih", 18, 0, 4243, 4) + b"test")
        corr, err, _ = struct.unpack_from(">ihi", c.recv_frame())
        assert (corr, err) == (4243, 0)


def test_malformed_body_closes_that_connection_only(kafka, topic):
    with conn(kafka) as other:
        good = other.request_bytes(3, 9, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False))
        header_len = 2 + 2 + 4 + 2 + len("raw-test") + 1     # v2 header: tagged fields byte
        bodies = [
            good[:header_len + 1],                           # truncated body
            good[:header_len] + b"\x05" + b"\xff" * 3,        # array claims 4 topics
            good[:header_len] + b"\x02" + b"\x7f" * 40,       # string length past the end
        ]
        for body in bodies:
            with conn(kafka) as bad:
                bad.send_raw(body)
                assert bad.is_closed()
        # a produce whose records length runs past the frame
        with conn(kafka) as bad:
            raw = bad.request_bytes(0, 8, _produce_body(topic, batch()))
            bad.send_raw(raw[:-10])
            assert bad.is_closed()
        assert other.metadata([topic]).topics[0].error_code == 0
    assert_intact(kafka, topic)


@pytest.mark.parametrize("version", [10, 11, 12])
def test_metadata_null_name_or_topic_id_before_v12_is_invalid_request(kafka, topic, version):
    """Metadata v10-11 carry a topic id field but cannot look topics up by it: a null name or a
    set id is Kafka's InvalidRequestException, every requested topic answered INVALID_REQUEST
    (null name as ""); it used to fail in encoding the answer and close the connection.  v12
    looks the id up and, as Kafka, once any id is given answers by the ids alone (the Java
    client sends name "" beside each id)."""
    import uuid
    T = MetadataRequest.MetadataRequestTopic
    with conn(kafka) as c:
        tid = c.metadata([topic], version=12).topics[0].topic_id
        unknown = uuid.UUID(int=12345)
        for entries in ([T(name=None, topic_id=tid), T(name=topic)],
                        [T(name=topic, topic_id=tid)],
                        [T(name="", topic_id=tid), T(name="", topic_id=unknown), T(name="", topic_id=tid)],
                        [T(name=None, topic_id=uuid.UUID(int=0))]):
            resp = c.request(3, version, MetadataRequest(
                topics=entries, allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False, include_topic_authorized_operations=False))
            got = [(t.error_code, t.name, t.topic_id) for t in resp.topics]
            if version < 12:
                assert got == [(E.INVALID_REQUEST, e.name or "", e.topic_id) for e in entries]
                assert resp.brokers == []
            elif len(entries) == 3:
                assert got == [(0, topic, tid), (E.UNKNOWN_TOPIC_ID, None, unknown)]
            elif entries[0].topic_id == tid:
                assert got == [(0, topic, tid)]       # the name beside it is not looked up
        assert c.metadata([topic], version=version).topics[0].error_code == 0      # still served


def _produce_body(topic, records):
    from protocol.messages import ProduceRequest
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=records)])])


# -- topics ---------------------------------------------------------------------------------

BAD_NAMES = ["bad name", "slash/topic", "", ".", "..", "a" * 250, "ümlaut", "star*"]


def test_invalid_topic_name_is_invalid_topic_exception(kafka):
    with conn(kafka) as c:
        for auto in (True, False):
            for version in (1, 4, 9, 12):
                resp = c.metadata(BAD_NAMES, version=version, auto_create=auto)
                got = {t.name: t.error_code for t in resp.topics}
                assert got == {n: E.INVALID_TOPIC_EXCEPTION for n in BAD_NAMES}, got
        # nothing was created
        names = {t.name for t in c.metadata(None).topics}
        assert not names & set(BAD_NAMES)
        # produce to an invalid name: the partition does not exist (Kafka answers the same)
        r = c.produce("bad name", 0, batch())
        assert r.error_code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.INVALID_TOPIC_EXCEPTION)


def test_invalid_topic_name_reaches_confluent_kafka(kafka):
    from confluent_kafka import KafkaError, Producer
    errors = []
    p = Producer({"bootstrap.servers": kafka.bootstrap, "message.timeout.ms": 5000})
    p.produce("bad name!", value=b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() in (KafkaError.TOPIC_EXCEPTION, KafkaError._UNKNOWN_TOPIC,
                                KafkaError.UNKNOWN_TOPIC_OR_PART), errors[0]


def test_unknown_topic_or_partition(kafka, topic):
    with conn(kafka) as c:
        assert c.produce(topic, 7, batch()).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert c.produce(topic, -1, batch()).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert c.produce("no-such-topic-p", 0, batch()).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert c.fetch(topic, 7, 0).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert c.fetch("no-such-topic-f", 0, 0).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert c.list_offsets(topic, 7, -1).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert c.list_offsets("no-such-topic-l", 0, -1).error_code == \
            E.UNKNOWN_TOPIC_OR_PARTITION
        resp = c.metadata(["no-such-topic-m"], version=9, auto_create=False)
        assert resp.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        # produce never auto-creates
        names = {t.name for t in c.metadata(None).topics}
        assert not {"no-such-topic-p", "no-such-topic-f", "no-such-topic-l",
                    "no-such-topic-m"} & names
    assert_intact(kafka, topic)


def test_produce_v13_names_topics_by_id(kafka, topic):
    """Produce v13 (Kafka 4.1) names a topic by its id: an id no topic has is UNKNOWN_TOPIC_ID,
    a partition the topic lacks UNKNOWN_TOPIC_OR_PARTITION; the answer names topics by id."""
    import uuid
    from protocol.messages import ProduceRequest as PR
    with conn(kafka) as c:
        tid = c.metadata([topic], version=12).topics[0].topic_id
        ghost = uuid.uuid4()

        def produce(version, parts, **named):
            r = c.request(0, version, PR(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
                PR.TopicProduceData(**named, partition_data=[
                    PR.PartitionProduceData(index=p, records=batch(1, tag=b"id%d" % p)) for p in parts])]))
            return [(t.name, t.topic_id, [(p.index, p.error_code) for p in t.partition_responses])
                    for t in r.responses]

        assert produce(13, [0, 7], topic_id=tid) == \
            [("", tid, [(0, E.NONE), (7, E.UNKNOWN_TOPIC_OR_PARTITION)])]
        assert produce(13, [0], topic_id=ghost) == [("", ghost, [(0, E.UNKNOWN_TOPIC_ID)])]
        # a name is not read from v13 on: the topic is the zero id, which no topic has
        assert produce(13, [0], name=topic) == [("", uuid.UUID(int=0), [(0, E.UNKNOWN_TOPIC_ID)])]
        assert produce(12, [0], name=topic) == [(topic, uuid.UUID(int=0), [(0, E.NONE)])]
        out, _ = read_all(c, topic, 0)
        assert [v[:5] for _, _, v, _, _ in out[-2:]] == [b"id00-", b"id00-"], out
    assert_intact(kafka, topic)


# -- legacy message sets --------------------------------------------------------------------

@pytest.mark.parametrize("magic,compression", [(0, 0), (1, 0), (1, "gzip"), (0, "gzip"),
                                               (1, "snappy"), (1, "lz4")])
def test_legacy_message_sets_are_stored_as_v2(kafka, topic, magic, compression):
    ts = now_ms() - 5000
    recs = [(b"lk%d" % i, b"legacy-%d" % i, (), ts + i) for i in range(5)] + \
        [(None, b"no-key", (), ts + 9), (b"null-value", None, (), ts + 10)]
    data = build_legacy(recs, magic, compression=compression)
    with conn(kafka) as c:
        before = c.list_offsets(topic, 0, -1).offset
        r = c.produce(topic, 0, data, version=2)
        assert r.error_code == 0
        assert r.base_offset == before
        got, magics = read_all(c, topic, 0)
        new = got[before:]
        assert set(magics) == {2}                 # fetch v11 returns v2 batches only
        assert [(o, k, v) for o, k, v, _h, _t in new] == \
            [(before + i, k, v) for i, (k, v, _, _) in enumerate(recs)]
        if magic == 1:
            assert [t for *_, t in new] == [t for *_, t in recs]
        else:
            assert all(t == -1 for *_, t in new)
        # magic 0/1 are also accepted by Produce v0 and v1
        for v in (0, 1):
            assert c.produce(topic, 0, build_legacy(recs[:2], magic, compression=compression),
                             version=v).error_code == 0
        # and Produce v3+ refuses legacy message sets
        assert c.produce(topic, 0, data, version=3).error_code != 0
        # old consumers get them down-converted (Fetch v2: magic 1)
        pd = c.fetch(topic, 0, before, version=2)
        assert pd.error_code == 0
        assert bytes(pd.records)[16] == 1
    # stored on disk as v2
    part_dir = os.path.join(str(kafka.log_dir), f"{topic}-0")
    for name in os.listdir(part_dir):
        if name.endswith(".log"):
            with open(os.path.join(part_dir, name), "rb") as f:
                data = f.read()
            assert all(h.magic == 2 for h in iter_batches(data))
            assert sum(1 for _ in iter_batches(data)) >= 4


def test_compressed_legacy_set_must_be_alone(kafka, topic):
    """Kafka's LogValidator takes a compressed legacy message set as one outer entry: two gzip
    wrappers, or a wrapper beside a plain message, are INVALID_RECORD and nothing is stored;
    several plain messages are one set, as before."""
    one = build_legacy([(b"a", b"1"), (b"b", b"2")], 1, compression="gzip")
    two = build_legacy([(b"c", b"3")], 1, compression="gzip", base_offset=2)
    plain = build_legacy([(b"d", b"4")], 1)
    with conn(kafka) as c:
        before = c.list_offsets(topic, 0, -1).offset
        for data in (one + two, one + plain, plain + one):
            for v in (0, 2):
                r = c.produce(topic, 0, data, version=v)
                assert r.error_code == 87, (v, r)              # INVALID_RECORD
        assert c.list_offsets(topic, 0, -1).offset == before
        assert c.produce(topic, 0, plain + build_legacy([(b"e", b"5")], 1), version=2).error_code == 0
        assert c.produce(topic, 0, one, version=2).error_code == 0
        assert c.list_offsets(topic, 0, -1).offset == before + 4


def test_kafka_python_old_api_version_legacy_produce(kafka, topic):
    """kafka-python pinned to broker version 0.10.0 sends magic 1 message sets."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap, api_version=(0, 10, 0),
                      enable_idempotence=False, acks=1)
    try:
        md = [p.send(topic, key=b"old%d" % i, value=b"client-%d" % i, partition=1,
                     timestamp_ms=now_ms() - 1000 + i) for i in range(20)]
        p.flush(30)
        offsets = [m.get(10).offset for m in md]
    finally:
        p.close(5)
    assert offsets == list(range(offsets[0], offsets[0] + 20))
    c = KafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 1)
        c.assign([tp])
        c.seek(tp, offsets[0])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 20 and time.monotonic() < deadline:
            for recs in c.poll(500).values():
                got += [(r.key, r.value) for r in recs]
        assert got == [(b"old%d" % i, b"client-%d" % i) for i in range(20)]
    finally:
        c.close()


# -- full disk ------------------------------------------------------------------------------

def _mount_tmpfs(path, size):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.decode().strip()}")


def test_full_disk_is_kafka_storage_error_and_log_stays_readable(tmp_path):
    mnt = tmp_path / "small-disk"
    _mount_tmpfs(mnt, "3m")
    b = None
    try:
        b = BrokerProcess(tmp_path / "broker", name="broker", props={"num.partitions": 1})
        b.log_dir = mnt / "logs"
        b.log_dir.mkdir()
        b.start()
        filler = mnt / "filler"
        with conn(b) as c:
            assert c.metadata(["disk"]).topics[0].error_code == 0
            # leave little room: whatever is left minus ~600 KB goes to a filler file
            st = os.statvfs(mnt)
            free = st.f_bavail * st.f_frsize
            filler.write_bytes(b"\0" * max(free - 600_000, 0))
            acked = []                       # (offset, payload tag)
            errors = []
            for i in range(200):
                payload = build_batch([(b"k", b"%06d" % i + os.urandom(20_000), (), now_ms())])
                r = c.produce("disk", 0, payload)
                if r.error_code == 0:
                    acked.append((r.base_offset, b"%06d" % i))
                else:
                    errors.append(r.error_code)
                    if len(errors) >= 3:
                        break
            assert acked, "nothing fitted on the disk"
            assert errors and set(errors) == {E.KAFKA_STORAGE_ERROR}, errors

            def check(c, extra=()):
                got, _ = read_all(c, "disk", 0)
                want = acked + list(extra)
                assert [(o, v[:6]) for o, _k, v, _h, _t in got] == want
            check(c)                         # readable while the disk is full
            assert c.list_offsets("disk", 0, -1).offset == acked[-1][0] + 1
        # space returns
        filler.unlink()
        with conn(b) as c:
            more = []
            for i in range(1000, 1005):
                r = c.produce("disk", 0, build_batch([(b"k", b"%06d" % i, (), now_ms())]))
                assert r.error_code == 0
                more.append((r.base_offset, b"%06d" % i))
            assert more[0][0] == acked[-1][0] + 1      # no hole, nothing half-written
            check(c, more)
        b.stop()
        b.start()
        with conn(b) as c:
            check(c, more)
    finally:
        if b is not None:
            b.kill()
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_failed_acks_0_produce_closes_the_connection(kafka, topic):
    """Kafka closes the connection after an acks=0 produce that failed (no response to carry
    the error); a successful acks=0 produce keeps it open."""
    with conn(kafka) as c:
        assert c.produce(topic, 1, batch(tag=b"zero"), acks=0) is None
        assert c.metadata([topic]).topics[0].error_code == 0       # still open
        bad = batch(tag=b"bad")
        bad[-1] ^= 0xFF
        assert c.produce(topic, 1, bad, acks=0) is None
        assert c.is_closed()
    with conn(kafka) as c:
        assert c.produce(topic, 9, batch(), acks=0) is None
        assert c.is_closed()
    assert_intact(kafka, topic)

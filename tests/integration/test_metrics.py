"""The Prometheus endpoint of one broker process (broker/metrics.py, docs/metrics.md).

A broker started with ``odradek.metrics.prometheus.port`` on a free port; clients produce and
consume; the endpoint is scraped with urllib and parsed with ``prometheus_client.parser``.
Every check compares the *difference* between two scrapes, so the tests do not depend on each
other's traffic (they share one broker).

* confluent-kafka: records in = records produced; bytes in = bytes out to a consumer that read
  everything once = the size of the topic's segment files (batches are stored as received);
  Produce/FetchConsumer request counters and latency histograms grow together.
* a raw connection: exact request counts per API, exact byte counts per request.
* Kafka's failure semantics: a too-large batch is "bytes rejected", not a failed produce; a
  timestamp outside ``message.timestamp.before.max.ms`` is a failed produce.
* gauges: partition and leader counts follow CreateTopics, no under-replicated or offline
  partitions, active controller 1, broker state 3, connections per listener.
* HTTP: 404, 405, HEAD, OpenMetrics negotiation.
"""
from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from protocol.records import build_batch, now_ms
from tests.support import BrokerProcess
from tests.support.net import free_port
from tests.support.rawkafka import RawConnection
from tests.support.broker import running
from tests.support.metrics import scrape, val

PARTITIONS = 3


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    port = free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("metrics-broker"), name="broker",
                      props={"num.partitions": PARTITIONS,
                             "odradek.metrics.prometheus.port": port,
                             "odradek.metrics.prometheus.host": "127.0.0.1"})
    b.metrics_url = f"http://127.0.0.1:{port}/metrics"
    with running(b):
        yield b


def delta(before, after, name, **labels) -> float:
    return val(after, name, **labels) - val(before, name, **labels)


def topic_log_bytes(kafka, topic: str) -> int:
    """Bytes in the topic's .log segment files, every partition."""
    total = 0
    for d in Path(kafka.log_dir).iterdir():
        if d.is_dir() and d.name.rsplit("-", 1)[0] == topic:
            total += sum(f.stat().st_size for f in d.glob("*.log"))
    return total


def _name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


BT = "kafka_server_brokertopicmetrics_"
RM = "kafka_network_requestmetrics_"


# -- confluent-kafka ------------------------------------------------------------------------

def test_produce_and_consume_counts_confluent(kafka):
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic = _name("metrics-ck")
    n = 3000
    before = scrape(kafka.metrics_url)
    p = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all", "linger.ms": 5,
                  "compression.type": "lz4"})
    errors = []
    for i in range(n):
        p.produce(topic, key=b"k%d" % (i % 50), value=b"v%05d" % i + b"x" * 100,
                  on_delivery=lambda err, msg: err and errors.append(err))
        p.poll(0)
    assert p.flush(30) == 0 and not errors
    mid = scrape(kafka.metrics_url)

    assert delta(before, mid, BT + "messagesin_total", topic=topic) == n
    on_disk = topic_log_bytes(kafka, topic)
    assert on_disk > 0
    assert delta(before, mid, BT + "bytesin_total", topic=topic) == on_disk
    produces = delta(before, mid, RM + "requests_total", request="Produce")
    assert produces >= 1
    assert delta(before, mid, RM + "totaltime_seconds_count", request="Produce") == produces
    assert delta(before, mid, RM + "totaltime_seconds_bucket", request="Produce", le="+Inf") == produces
    assert delta(before, mid, RM + "totaltime_seconds_sum", request="Produce") > 0
    # one per partition in each request: at least one request per partition written to
    assert delta(before, mid, BT + "totalproducerequests_total", topic=topic) >= PARTITIONS
    assert delta(before, mid, BT + "failedproducerequests_total", topic=topic) == 0
    assert delta(before, mid, RM + "requests_total", request="Metadata") >= 1

    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": _name("g"),
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < n and time.monotonic() < deadline:
        for m in c.consume(500, timeout=1.0):
            assert m.error() is None, m.error()
            seen += 1
    c.close()
    assert seen == n
    after = scrape(kafka.metrics_url)
    # the consumer read every batch exactly once, so bytes out = bytes in = the log
    assert delta(mid, after, BT + "bytesout_total", topic=topic) == on_disk
    fetches = delta(mid, after, RM + "requests_total", request="FetchConsumer")
    assert fetches >= 1
    assert delta(mid, after, RM + "totaltime_seconds_count", request="FetchConsumer") == fetches
    assert val(after, RM + "requests_total", request="Fetch") == 0          # named as Kafka does
    assert val(after, RM + "requests_total", request="FetchFollower") == 0  # no followers here
    assert delta(mid, after, BT + "totalfetchrequests_total", topic=topic) >= fetches
    assert delta(mid, after, BT + "failedfetchrequests_total", topic=topic) == 0
    assert delta(mid, after, BT + "messagesin_total", topic=topic) == 0
    assert val(after, BT + "replicationbytesout_total") == 0


# -- raw connection: exact counts -----------------------------------------------------------

def test_exact_request_and_byte_counts(kafka):
    topic = _name("metrics-raw")
    with RawConnection(kafka.host, kafka.port) as c:
        md = c.metadata([topic])                   # auto-creates the topic
        assert md.topics[0].error_code == 0
        before = scrape(kafka.metrics_url)
        for _ in range(3):
            c.metadata([topic])
        batches = [build_batch([(b"k%d" % j, b"value-%d-%d" % (i, j)) for j in range(i + 1)])
                   for i in range(4)]
        for b in batches:
            r = c.produce(topic, 0, b, acks=1)
            assert r.error_code == 0
        fetched = c.fetch(topic, 0, 0)
        assert fetched.error_code == 0
        after = scrape(kafka.metrics_url)
    sent = sum(len(b) for b in batches)
    assert len(fetched.records) == sent
    assert delta(before, after, RM + "requests_total", request="Metadata") == 3
    assert delta(before, after, RM + "requests_total", request="Produce") == 4
    assert delta(before, after, RM + "requests_total", request="FetchConsumer") == 1
    assert delta(before, after, BT + "messagesin_total", topic=topic) == 1 + 2 + 3 + 4
    assert delta(before, after, BT + "bytesin_total", topic=topic) == sent
    assert delta(before, after, BT + "bytesout_total", topic=topic) == sent
    assert delta(before, after, BT + "totalproducerequests_total", topic=topic) == 4
    assert delta(before, after, BT + "totalfetchrequests_total", topic=topic) == 1


def test_failed_produce_follows_kafka(kafka):
    """A batch over max.message.bytes is counted as rejected bytes, not as a failed produce
    (Kafka counts only unexpected append failures there); a timestamp too far in the past is."""
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = _name("metrics-fail")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    futs = admin.create_topics([NewTopic(topic, 1, 1, config={
        "max.message.bytes": "2000", "message.timestamp.before.max.ms": "60000"})])
    futs[topic].result(30)
    with RawConnection(kafka.host, kafka.port) as c:
        c.metadata([topic], auto_create=False)
        before = scrape(kafka.metrics_url)
        big = build_batch([(b"k", b"x" * 5000)])
        assert c.produce(topic, 0, big, acks=1).error_code == 10            # MESSAGE_TOO_LARGE
        old = build_batch([(b"k", b"old", (), now_ms() - 3_600_000)])
        assert c.produce(topic, 0, old, acks=1).error_code == 32            # INVALID_TIMESTAMP
        assert c.produce(topic, 0, build_batch([(b"k", b"fine")]), acks=1).error_code == 0
        assert c.produce(topic, 7, build_batch([(b"k", b"no such partition")]), acks=1).error_code == 3
        after = scrape(kafka.metrics_url)
    assert delta(before, after, BT + "bytesrejected_total", topic=topic) == len(big)
    assert delta(before, after, BT + "failedproducerequests_total", topic=topic) == 1
    assert delta(before, after, BT + "totalproducerequests_total", topic=topic) == 4
    assert delta(before, after, BT + "messagesin_total", topic=topic) == 1
    assert delta(before, after, RM + "requests_total", request="Produce") == 4


def test_invalid_records_and_conversions_follow_kafka(kafka):
    """Kafka's all-topics meters of refused records (a CRC that does not match, a magic it does
    not know, a record count that does not hold, keyless records on a compacted topic: one per
    record), and the per-topic message conversions (legacy messages made v2, batches stored in
    the topic's compression.type, records down-converted for Fetch v0-3)."""
    import struct
    import zlib

    from confluent_kafka.admin import AdminClient, NewTopic

    from protocol.records import build_legacy, crc32c
    plain, compacted, zstd = _name("metrics-inv"), _name("metrics-cmp"), _name("metrics-zstd")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    futs = admin.create_topics([NewTopic(plain, 1, 1), NewTopic(compacted, 1, 1, config={"cleanup.policy": "compact"}),
                                NewTopic(zstd, 1, 1, config={"compression.type": "zstd"})])
    for f in futs.values():
        f.result(30)
    with RawConnection(kafka.host, kafka.port) as c:
        c.metadata([plain, compacted, zstd], auto_create=False)
        before = scrape(kafka.metrics_url)
        bad_crc = build_batch([(b"k", b"v")])
        bad_crc[-1] ^= 1
        assert c.produce(plain, 0, bad_crc, acks=1).error_code == 2              # CORRUPT_MESSAGE
        bad_magic = build_batch([(b"k", b"v")])
        bad_magic[16] = 3
        assert c.produce(plain, 0, bad_magic, acks=1).error_code == 2
        bad_count = build_batch([(b"k", b"v"), (b"k", b"w")])
        struct.pack_into(">i", bad_count, 57, 3)                                # 3 records, lastOffsetDelta 1
        struct.pack_into(">I", bad_count, 17, crc32c(bytes(bad_count[21:])))     # and a CRC that matches
        assert c.produce(plain, 0, bad_count, acks=1).error_code == 87          # INVALID_RECORD
        keyless = build_batch([(None, b"1"), (b"k", b"2"), (None, b"3")])
        assert c.produce(compacted, 0, keyless, acks=1).error_code == 87         # INVALID_RECORD
        assert c.produce(zstd, 0, build_batch([(b"k", b"%d" % i) for i in range(5)]), acks=1).error_code == 0
        assert c.produce(zstd, 0, build_batch([(b"k", b"z")], compression=4), acks=1).error_code == 0
        legacy = build_legacy([(b"k", b"old-%d" % i) for i in range(3)], magic=1)
        assert c.produce(plain, 0, legacy, version=2, acks=1).error_code == 0
        bad_legacy = bytearray(build_legacy([(b"k", b"old")], magic=1))
        bad_legacy[-1] ^= 1                                                      # its CRC fails
        assert c.produce(plain, 0, bad_legacy, version=2, acks=1).error_code == 2
        inner_bad = bytearray(build_legacy([(b"k", b"in")], magic=1, compression="gzip"))
        import gzip
        from protocol.records import iter_legacy
        (wrapper,) = iter_legacy(inner_bad, deep=False)
        msgs = bytearray(gzip.decompress(wrapper.value))
        msgs[-1] ^= 1                          # a deep entry's CRC fails (Kafka: record.ensureValid)
        body = gzip.compress(bytes(msgs))
        rebuilt = bytearray(struct.pack(">qiIbbq", 0, 0, 0, 1, 1, wrapper.timestamp)      # gzip, v1
                            + struct.pack(">i", -1) + struct.pack(">i", len(body)) + body)
        struct.pack_into(">i", rebuilt, 8, len(rebuilt) - 12)
        struct.pack_into(">I", rebuilt, 12, zlib.crc32(bytes(rebuilt[16:])))
        assert c.produce(plain, 0, rebuilt, version=2, acks=1).error_code == 2
        assert c.produce(plain, 0, build_batch([(b"k", b"new")]), acks=1).error_code == 0
        got = c.fetch(plain, 0, 0, version=3)
        assert got.error_code == 0 and got.records
        after = scrape(kafka.metrics_url)
    assert delta(before, after, BT + "invalidmessagecrcrecords_total") == 3     # v2, legacy, deep
    assert delta(before, after, BT + "invalidmagicnumberrecords_total") == 1
    assert delta(before, after, BT + "invalidoffsetorsequencerecords_total") == 1
    assert delta(before, after, BT + "nokeycompactedtopicrecords_total") == 2
    assert delta(before, after, BT + "producemessageconversions_total", topic=zstd) == 5    # not the zstd one
    assert delta(before, after, BT + "producemessageconversions_total", topic=plain) == 3   # the legacy set
    assert delta(before, after, BT + "fetchmessageconversions_total", topic=plain) == 4    # 3 + 1 read as v1


# -- gauges ---------------------------------------------------------------------------------

def test_partition_leader_and_controller_gauges(kafka):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    # make sure every background topic exists before the first scrape
    admin.list_topics(timeout=10)
    before = scrape(kafka.metrics_url)
    t1, t2 = _name("metrics-g1"), _name("metrics-g2")
    futs = admin.create_topics([NewTopic(t1, 4, 1), NewTopic(t2, 2, 1)])
    for f in futs.values():
        f.result(30)
    deadline = time.monotonic() + 10
    while True:
        after = scrape(kafka.metrics_url)
        if delta(before, after, "kafka_server_replicamanager_partitioncount") == 6 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    rm = "kafka_server_replicamanager_"
    kc = "kafka_controller_kafkacontroller_"
    assert delta(before, after, rm + "partitioncount") == 6
    assert delta(before, after, rm + "leadercount") == 6
    assert val(after, rm + "leadercount") == val(after, rm + "partitioncount") > 0
    assert val(after, rm + "underreplicatedpartitions") == 0
    assert val(after, rm + "underminisrpartitioncount") == 0
    assert val(after, rm + "atminisrpartitioncount") == val(after, rm + "leadercount")   # ISR 1 = min ISR 1
    assert val(after, rm + "isrshrinks_total") == 0 and val(after, rm + "isrexpands_total") == 0
    assert val(after, kc + "activecontrollercount") == 1
    assert val(after, kc + "offlinepartitionscount") == 0
    assert delta(before, after, kc + "globaltopiccount") == 2
    assert delta(before, after, kc + "globalpartitioncount") == 6
    assert val(after, kc + "globalpartitioncount") == val(after, rm + "partitioncount")
    assert val(after, "kafka_server_kafkaserver_brokerstate") == 3
    with RawConnection(kafka.host, kafka.port), RawConnection(kafka.host, kafka.port):
        deadline = time.monotonic() + 5
        while True:
            now = scrape(kafka.metrics_url)
            conns = val(now, "kafka_server_socketservermetrics_connection_count", listener="PLAINTEXT")
            if conns >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert conns >= 2
        # the connections of this test (and the clients' before it) were accepted within the windows
        assert val(now, "kafka_server_socketservermetrics_connection_accept_rate", listener="PLAINTEXT") > 0
    # process metrics of the broker's own registry
    assert val(now, "process_resident_memory_bytes") > 0


def test_per_partition_log_and_partition_gauges(kafka):
    """kafka.log:type=Log (Size, NumLogSegments, LogStartOffset, LogEndOffset) and
    kafka.cluster:type=Partition (UnderReplicated, InSyncReplicasCount, ReplicasCount, UnderMinIsr,
    AtMinIsr, LastStableOffsetLag) per topic and partition: the log's figures after produce, a
    roll and DeleteRecords, and a transaction left open holding the last stable offset back."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    t = _name("metrics-log")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(t, 2, 1, config={"segment.bytes": "2000"})])[t].result(30)
    p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    for i in range(20):
        p.produce(t, b"v" * 300, partition=0)
        p.flush(10)
    admin.delete_records([TopicPartition(t, 0, 7)])[TopicPartition(t, 0, 7)].result(30)
    m = scrape(kafka.metrics_url)
    L = "kafka_log_log_"
    size = sum(f.stat().st_size for f in (Path(kafka.log_dir) / f"{t}-0").glob("*.log"))
    assert val(m, L + "size", topic=t, partition="0") == size > 6000
    assert val(m, L + "numlogsegments", topic=t, partition="0") == len(list((Path(kafka.log_dir) / f"{t}-0").glob("*.log"))) > 2
    assert val(m, L + "logstartoffset", topic=t, partition="0") == 7
    assert val(m, L + "logendoffset", topic=t, partition="0") == 20
    assert val(m, L + "logendoffset", topic=t, partition="1") == 0
    P = "kafka_cluster_partition_"
    for part in ("0", "1"):
        assert val(m, P + "insyncreplicascount", topic=t, partition=part) == 1
        assert val(m, P + "replicascount", topic=t, partition=part) == 1
        assert val(m, P + "underreplicated", topic=t, partition=part) == 0
        assert val(m, P + "underminisr", topic=t, partition=part) == 0
        assert val(m, P + "atminisr", topic=t, partition=part) == 1          # ISR 1 = min.insync.replicas 1
        assert (P + "laststableoffsetlag", (("partition", part), ("topic", t))) in m

    txp = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": _name("metrics-txn")})
    txp.init_transactions(30)
    txp.begin_transaction()
    for i in range(5):
        txp.produce(t, b"in-txn", partition=1)
    txp.flush(10)
    assert val(scrape(kafka.metrics_url), P + "laststableoffsetlag", topic=t, partition="1") == 5
    txp.commit_transaction(30)
    deadline = time.monotonic() + 10            # the markers are written after EndTxn answers
    while True:
        m = scrape(kafka.metrics_url)
        done = (val(m, P + "laststableoffsetlag", topic=t, partition="1"),
                val(m, L + "logendoffset", topic=t, partition="1"))
        if done == (0, 6) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert done == (0, 6)                       # 5 records and the marker


def test_deleted_topic_series_disappear(kafka):
    from confluent_kafka.admin import AdminClient
    topic = _name("metrics-del")
    with RawConnection(kafka.host, kafka.port) as c:
        c.metadata([topic])
        assert c.produce(topic, 0, build_batch([(b"k", b"v")]), acks=1).error_code == 0
    m = scrape(kafka.metrics_url)
    assert val(m, BT + "messagesin_total", topic=topic) == 1
    assert val(m, "kafka_log_log_logendoffset", topic=topic, partition="0") == 1
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 10
    gone = [(BT + "messagesin_total", (("topic", topic),)),
            ("kafka_log_log_size", (("partition", "0"), ("topic", topic))),
            ("kafka_cluster_partition_replicascount", (("partition", "0"), ("topic", topic)))]
    while any(k in scrape(kafka.metrics_url) for k in gone):
        assert time.monotonic() < deadline, "series of a deleted topic still exported"
        time.sleep(0.1)


# -- HTTP -----------------------------------------------------------------------------------

def test_http_behaviour(kafka):
    base = kafka.metrics_url.rsplit("/", 1)[0]
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(base + "/nope", timeout=5)
    assert e.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(kafka.metrics_url, data=b"x", method="POST"), timeout=5)
    assert e.value.code == 405
    with urllib.request.urlopen(urllib.request.Request(kafka.metrics_url, method="HEAD"), timeout=5) as r:
        assert r.status == 200 and int(r.headers["Content-Length"]) > 0 and r.read() == b""
    req = urllib.request.Request(kafka.metrics_url, headers={
        "Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"})
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        body = r.read().decode()
    assert body.rstrip().endswith("# EOF")
    assert "kafka_server_replicamanager_leadercount" in body
    with urllib.request.urlopen(base + "/?x=1", timeout=5) as r:
        assert b"/metrics" in r.read()


def test_group_coordinator_gauges(kafka):
    """group-count by protocol, consumer-group-count by state, the consumer protocol's rebalance
    counter: a raw ConsumerGroupHeartbeat joins a group, then leaves it."""
    from protocol.messages import ConsumerGroupHeartbeatRequest, CreateTopicsRequest, FindCoordinatorRequest
    topic, group = _name("gcm"), _name("g")
    host, port = kafka.bootstrap.split(":")
    gc = "kafka_server_group_coordinator_metrics_"

    def hb(member, epoch):
        join = epoch == 0
        return ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30000 if join else -1, subscribed_topic_names=[topic] if join else None,
            subscribed_topic_regex=None, server_assignor=None, topic_partitions=[] if join else None)

    with RawConnection(host, int(port)) as conn:
        conn.request(19, 4, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=10000, validate_only=False))
        deadline = time.monotonic() + 30
        while conn.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])) \
                .coordinators[0].error_code and time.monotonic() < deadline:
            time.sleep(0.2)
        before = scrape(kafka.metrics_url)
        r = conn.request(68, 1, hb("m" * 22, 0))
        assert r.error_code == 0 and r.member_epoch == 1
        mid = scrape(kafka.metrics_url)
        assert delta(before, mid, gc + "group_count", protocol="consumer") == 1
        assert delta(before, mid, gc + "consumer_group_count", state="stable") == 1
        assert delta(before, mid, gc + "consumer_group_rebalance_total") == 1
        assert conn.request(68, 1, hb("m" * 22, -1)).error_code == 0
        after = scrape(kafka.metrics_url)
        assert delta(mid, after, gc + "consumer_group_count", state="stable") == -1
        assert delta(mid, after, gc + "consumer_group_count", state="empty") == 1
        assert delta(mid, after, gc + "consumer_group_rebalance_total") == 1


def test_streams_group_metrics(kafka):
    """group-count{protocol=streams}, streams-group-count by state (not_ready while the topology's
    source topic is missing) and the streams protocol's rebalance counter: raw
    StreamsGroupHeartbeats join a group, then leave it."""
    from protocol.messages import CreateTopicsRequest as C, FindCoordinatorRequest, StreamsGroupHeartbeatRequest as H
    from tests.support.rawkafka import SyncClient
    group, source = _name("sgm"), _name("src")
    gc = "kafka_server_group_coordinator_metrics_"
    topo = H.Topology(epoch=0, subtopologies=[H.Subtopology(
        subtopology_id="0", source_topics=[source], source_topic_regex=[], state_changelog_topics=[],
        repartition_sink_topics=[], repartition_source_topics=[], copartition_groups=[])])

    def hb(epoch):
        return H(group_id=group, member_id="m", member_epoch=epoch, endpoint_information_epoch=0,
                 rebalance_timeout_ms=30000 if epoch == 0 else -1, topology=topo if epoch == 0 else None,
                 process_id="p" if epoch == 0 else None)
    c = SyncClient(kafka.bootstrap)
    try:
        deadline = time.monotonic() + 30
        while c(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), version=4) \
                .coordinators[0].error_code and time.monotonic() < deadline:
            time.sleep(0.2)
        before = scrape(kafka.metrics_url)
        r = c(hb(0))
        assert r.error_code == 0 and [s.status_code for s in r.status if s.status_code != 5] == [1]
        mid = scrape(kafka.metrics_url)
        assert delta(before, mid, gc + "group_count", protocol="streams") == 1
        assert delta(before, mid, gc + "streams_group_count", state="not_ready") == 1
        assert delta(before, mid, gc + "streams_group_rebalance_total") == 1
        assert c(C(topics=[C.CreatableTopic(name=source, num_partitions=1, replication_factor=1, assignments=[],
                                            configs=[])], timeout_ms=10000, validate_only=False)).topics[0].error_code == 0
        assert c(hb(r.member_epoch)).error_code == 0          # the source topic now exists: ready
        assert c(hb(-1)).error_code == 0
        after = scrape(kafka.metrics_url)
        assert delta(mid, after, gc + "streams_group_count", state="not_ready") == -1
        assert delta(mid, after, gc + "streams_group_count", state="empty") == 1
        assert delta(mid, after, gc + "streams_group_rebalance_total") == 2
    finally:
        c.close()


def test_share_group_and_share_session_metrics(kafka):
    """group-count{protocol=share}, share-group-count by state and the share session cache: a raw
    ShareGroupHeartbeat joins a share group and a ShareFetch opens a session, then both end."""
    from protocol.messages import (CreateTopicsRequest, FindCoordinatorRequest, ShareFetchRequest,
                                   ShareGroupHeartbeatRequest)
    topic, group = _name("sgm"), _name("sg")
    host, port = kafka.bootstrap.split(":")
    gc = "kafka_server_group_coordinator_metrics_"
    sc = "kafka_server_sharesessioncache_"
    with RawConnection(host, int(port)) as conn:
        conn.request(19, 4, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=2, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=10000, validate_only=False))
        tid = conn.metadata([topic], version=12).topics[0].topic_id
        deadline = time.monotonic() + 30
        while conn.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])) \
                .coordinators[0].error_code and time.monotonic() < deadline:
            time.sleep(0.2)
        before = scrape(kafka.metrics_url)
        r = conn.request(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id="m" * 22, member_epoch=0,
                                                           rack_id=None, subscribed_topic_names=[topic]))
        assert r.error_code == 0
        F = ShareFetchRequest
        fetch = F(group_id=group, member_id="m" * 22, share_session_epoch=0, max_wait_ms=0, min_bytes=1,
                  max_bytes=1 << 20, max_records=500, batch_size=500, forgotten_topics_data=[],
                  topics=[F.FetchTopic(topic_id=tid, partitions=[
                      F.FetchPartition(partition_index=p, partition_max_bytes=0, acknowledgement_batches=[])
                      for p in (0, 1)])])
        assert conn.request(78, 1, fetch).error_code == 0
        mid = scrape(kafka.metrics_url)
        assert delta(before, mid, gc + "group_count", protocol="share") == 1
        assert delta(before, mid, gc + "share_group_count", state="stable") == 1
        assert delta(before, mid, sc + "sharesessioncount") == 1
        assert delta(before, mid, sc + "sharepartitionscount") == 2
        r = conn.request(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id="m" * 22, member_epoch=-1,
                                                           rack_id=None, subscribed_topic_names=None))
        assert r.error_code == 0
    time.sleep(0.5)                       # the closed connection ends the session
    after = scrape(kafka.metrics_url)
    assert delta(mid, after, gc + "share_group_count", state="stable") == -1
    assert delta(mid, after, gc + "share_group_count", state="empty") == 1
    assert delta(mid, after, sc + "sharesessioncount") == -1

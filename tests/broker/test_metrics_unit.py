"""broker/metrics.py without a broker process: counting rules, histogram buckets, gauges computed
from (fake) broker state, the exposition through the broker's own registry."""
from __future__ import annotations

import asyncio
import types

from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from broker.config import BrokerConfig
from broker.metrics import LATENCY_BUCKETS, BrokerMetrics, start_metrics
from controller.api import PartitionState, TopicInfo
from protocol.errors import ErrorCode as E
from protocol.messages import FetchResponse, ProduceRequest, ProduceResponse
from storage.segment import FileRegion


def fake_broker(topics=None, partitions=(), active=True, live=(0,)):
    topics = topics or {}
    ctrl = types.SimpleNamespace(
        topic=lambda n: topics.get(n), topics=lambda: dict(topics), controller_id=0 if active else 1,
        live_broker_ids=lambda: set(live))
    rm = types.SimpleNamespace(partitions={(p.topic, p.partition): p for p in partitions})
    return types.SimpleNamespace(controller=ctrl, connections=set(), replicas=rm, broker_id=0,
                                 servers=[object()], _stopping=False,
                                 log_manager=types.SimpleNamespace(offline_dirs={"/failed"}, logs={}),
                                 produce_quota=None, fetch_quota=None, request_quota=None, mutation_quota=None,
                                 config=BrokerConfig.from_dict({"listeners": "PLAINTEXT://:9092"}))


def topic(name, n=1, leader=0, replicas=(0,), isr=(0,)):
    return TopicInfo(name, None, {p: PartitionState(p, list(replicas), leader, 0, list(isr)) for p in range(n)}, {})


def part(name, p, leader, replicas, isr, min_isr=1, hw=10, lso=10):
    log = types.SimpleNamespace(config=types.SimpleNamespace(min_insync_replicas=min_isr), closed=False,
                                high_watermark=hw, last_stable_offset=lambda: lso)
    return types.SimpleNamespace(topic=name, partition=p, is_leader=leader == 0, replicas=list(replicas),
                                 isr=list(isr), log=log)


def samples(m: BrokerMetrics) -> dict:
    body, _ = m.exposition()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(body.decode()) for s in f.samples}


def produce_req(name, sizes):
    return ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name=name, partition_data=[
            ProduceRequest.PartitionProduceData(index=i, records=bytes(n)) for i, n in enumerate(sizes)])])


def produce_resp(name, codes):
    return [ProduceResponse.TopicProduceResponse(name=name, partition_responses=[
        ProduceResponse.PartitionProduceResponse(index=i, error_code=c, base_offset=-1, log_append_time_ms=-1,
                                                 log_start_offset=-1) for i, c in enumerate(codes)])]


def fetch_resp(name, records, codes=None):
    codes = codes or [0] * len(records)
    return [FetchResponse.FetchableTopicResponse(topic=name, topic_id=None, partitions=[
        FetchResponse.PartitionData(partition_index=i, error_code=c, high_watermark=0, last_stable_offset=0,
                                    log_start_offset=0, aborted_transactions=[], preferred_read_replica=-1,
                                    records=r) for i, (r, c) in enumerate(zip(records, codes))])]


def test_produce_counting_and_failure_rules():
    m = BrokerMetrics(fake_broker({"t": topic("t", 6)}))
    m.produced("t", 100, 3)
    codes = [0, E.MESSAGE_TOO_LARGE, E.INVALID_TIMESTAMP, E.NOT_LEADER_OR_FOLLOWER, E.OUT_OF_ORDER_SEQUENCE_NUMBER,
             E.NOT_ENOUGH_REPLICAS_AFTER_APPEND]
    m.produce_request(produce_req("t", [100, 5000, 10, 10, 10, 10]), produce_resp("t", codes))
    m.produce_request(produce_req("nope", [10]), produce_resp("nope", [E.UNKNOWN_TOPIC_OR_PARTITION]))
    s = samples(m)
    t = (("topic", "t"),)
    assert s[("kafka_server_brokertopicmetrics_messagesin_total", t)] == 3
    assert s[("kafka_server_brokertopicmetrics_bytesin_total", t)] == 100
    assert s[("kafka_server_brokertopicmetrics_bytesrejected_total", t)] == 5000
    assert s[("kafka_server_brokertopicmetrics_totalproducerequests_total", t)] == 6
    assert s[("kafka_server_brokertopicmetrics_failedproducerequests_total", t)] == 2
    assert not any(labels == (("topic", "nope"),) for _, labels in s)     # no series for unknown topics


def test_fetch_consumer_and_follower():
    m = BrokerMetrics(fake_broker({"t": topic("t", 3)}))
    m.fetched(fetch_resp("t", [FileRegion(3, 0, 700), b"", b"abc"]), from_follower=False)
    m.observe_request("Fetch", 0.002)
    m.fetched(fetch_resp("t", [FileRegion(3, 0, 50)], [0]), from_follower=True)
    m.observe_request("Fetch", 0.3)
    m.fetched(fetch_resp("t", [b"", b""], [E.OFFSET_OUT_OF_RANGE, E.UNKNOWN_SERVER_ERROR]), from_follower=False)
    m.observe_request("Fetch", 0.0001)
    s = samples(m)
    t = (("topic", "t"),)
    assert s[("kafka_server_brokertopicmetrics_bytesout_total", t)] == 703     # a region counts its length
    assert s[("kafka_server_brokertopicmetrics_replicationbytesout_total", ())] == 50
    assert s[("kafka_server_brokertopicmetrics_totalfetchrequests_total", t)] == 6
    assert s[("kafka_server_brokertopicmetrics_failedfetchrequests_total", t)] == 1
    assert s[("kafka_network_requestmetrics_requests_total", (("request", "FetchConsumer"),))] == 2
    assert s[("kafka_network_requestmetrics_requests_total", (("request", "FetchFollower"),))] == 1
    assert ("kafka_network_requestmetrics_requests_total", (("request", "Fetch"),)) not in s


def test_latency_histogram_buckets():
    m = BrokerMetrics(fake_broker())
    for sec in (0.0001, 0.0005, 0.0006, 0.2, 100.0):
        m.observe_request("Produce", sec)
    s = samples(m)

    def bucket(le):
        return s[("kafka_network_requestmetrics_totaltime_seconds_bucket", (("le", le), ("request", "Produce")))]
    assert bucket("0.0005") == 2           # le is inclusive
    assert bucket("0.001") == 3
    assert bucket("0.25") == 4
    assert bucket(repr(LATENCY_BUCKETS[-1])) == 4
    assert bucket("+Inf") == 5
    assert s[("kafka_network_requestmetrics_totaltime_seconds_count", (("request", "Produce"),))] == 5
    assert abs(s[("kafka_network_requestmetrics_totaltime_seconds_sum", (("request", "Produce"),))] - 100.2012) < 1e-9


def test_replica_and_controller_gauges():
    moving = PartitionState(0, [0, 1, 2, 3], 0, 0, [0, 1, 2], adding_replicas=[3])
    topics = {"e": TopicInfo("e", None, {0: moving}, {}),           # a reassignment adding broker 3
              "a": topic("a", 2, leader=0, replicas=(0, 1, 2), isr=(0, 1, 2)),
              "b": TopicInfo("b", None, {0: PartitionState(0, [0, 1], 1, 0, [1]),       # led by 1: imbalance
                                         1: PartitionState(1, [2, 0], 2, 0, [2]),       # leader 2 is dead
                                         2: PartitionState(2, [0], -1, 0, [0])}, {})}   # no leader
    parts = [part("a", 0, 0, (0, 1, 2), (0, 1, 2), min_isr=2),
             part("a", 1, 0, (0, 1, 2), (0, 1), min_isr=2),        # under-replicated, at min ISR
             part("c", 0, 0, (0, 1), (0,), min_isr=2),             # under min ISR
             part("d", 0, 0, (0,), (0,), min_isr=2),               # at min ISR: 1 replica (effective)
             part("e", 0, 0, (0, 1, 2, 3), (0, 1, 2)),             # not under-replicated: 3 is being added
             part("b", 0, 1, (1, 0), (1,), hw=20, lso=15)]         # follower here, a transaction open
    m = BrokerMetrics(fake_broker(topics, parts, live=(0, 1)))
    m.isr_changed([0, 1, 2], [0, 1])
    m.isr_changed([0, 1], [0, 1, 2])
    m.isr_changed([0, 1], [0, 2])           # one out, one in
    m.replicated_in(123)
    s = samples(m)

    def g(name):
        return s[(name, ())]
    rm, kc = "kafka_server_replicamanager_", "kafka_controller_kafkacontroller_"
    assert g(rm + "partitioncount") == 6
    assert g(rm + "leadercount") == 5
    assert g(rm + "underreplicatedpartitions") == 2
    assert g(rm + "underminisrpartitioncount") == 1
    assert g(rm + "atminisrpartitioncount") == 2
    assert g(rm + "isrshrinks_total") == 2 and g(rm + "isrexpands_total") == 2
    assert g("kafka_server_brokertopicmetrics_replicationbytesin_total") == 123
    assert g(kc + "activecontrollercount") == 1
    assert g(kc + "offlinepartitionscount") == 2
    assert g(kc + "preferredreplicaimbalancecount") == 1
    assert g(kc + "globaltopiccount") == 3 and g(kc + "globalpartitioncount") == 6   # "e" too
    assert g("kafka_server_kafkaserver_brokerstate") == 3
    # kafka.cluster:type=Partition, per partition: (under-replicated, ISR, replicas, under min ISR,
    # at min ISR, last stable offset lag); a follower reports 0 but for the lag
    P = "kafka_cluster_partition_"
    names = ("underreplicated", "insyncreplicascount", "replicascount", "underminisr", "atminisr",
             "laststableoffsetlag")
    per = {(t, p): tuple(s[(P + n, (("partition", p), ("topic", t)))] for n in names)
           for t, p in (("a", "0"), ("a", "1"), ("c", "0"), ("d", "0"), ("e", "0"), ("b", "0"))}
    assert per == {("a", "0"): (0, 3, 3, 0, 0, 0), ("a", "1"): (1, 2, 3, 0, 1, 0),
                   ("c", "0"): (1, 1, 2, 1, 0, 0), ("d", "0"): (0, 1, 1, 0, 1, 0),
                   ("e", "0"): (0, 3, 3, 0, 0, 0),
                   ("b", "0"): (0, 0, 0, 0, 0, 5)}
    assert g("kafka_log_logmanager_offlinelogdirectorycount") == 1
    assert s[("kafka_server_socketservermetrics_connection_count", (("listener", "PLAINTEXT"),))] == 0
    # a broker that is not the controller reports the controller gauges as 0
    s2 = samples(BrokerMetrics(fake_broker(topics, parts, active=False, live=(0, 1))))
    assert s2[(kc + "activecontrollercount", ())] == 0 and s2[(kc + "offlinepartitionscount", ())] == 0


def test_own_registry_and_deleted_topics():
    topics = {"t": topic("t")}
    m = BrokerMetrics(fake_broker(topics))
    m.produced("t", 1, 1)
    assert ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "t"),)) in samples(m)
    assert REGISTRY.get_sample_value("kafka_server_brokertopicmetrics_messagesin_total", {"topic": "t"}) is None
    del topics["t"]
    assert ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "t"),)) not in samples(m)
    assert "t" not in m.topics


def test_disabled_by_default_and_scrape_off_loop():
    async def run():
        assert await start_metrics(fake_broker()) is None       # default port -1
        b = fake_broker({"t": topic("t")})
        b.config = BrokerConfig.from_dict({"odradek.metrics.prometheus.port": "0",
                                           "odradek.metrics.prometheus.host": "127.0.0.1"})
        m = await start_metrics(b)
        try:
            assert m.port > 0
            m.produced("t", 10, 2)
            body, ctype = await m.scrape()
            assert ctype.startswith("text/plain")
            assert b'kafka_server_brokertopicmetrics_messagesin_total{topic="t"} 2.0' in body
            r, w = await asyncio.open_connection("127.0.0.1", m.port)
            w.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = await r.read()
            w.close()
            assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and b"Connection: close" in reply
            assert b'messagesin_total{topic="t"} 2.0' in reply
        finally:
            m.close()
    asyncio.run(run())


def test_client_quota_series():
    """Kafka's per-client quota metrics: byte-rate / request-time / mutation-rate over the quota
    windows, throttle-time the mean of the recorded throttles (NaN when none), tokens; only the
    types that have a quota somewhere."""
    import math
    from broker.client_quota import ClientQuotaManager, MutationQuotaManager, RequestQuotaManager, throttle
    from controller.api import (CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, QUOTA_CLIENT_ID,
                                REQUEST_PERCENTAGE)
    now = [100.0]
    clock = lambda: now[0]      # noqa: E731
    b = fake_broker()
    prod = ClientQuotaManager(PRODUCER_BYTE_RATE, samples=11, window_s=1.0, clock=clock)
    req = RequestQuotaManager(samples=11, window_s=1.0, clock=clock)
    mut = MutationQuotaManager(samples=11, window_s=1.0, clock=clock)
    assert prod.update({((QUOTA_CLIENT_ID, "slow"),): {PRODUCER_BYTE_RATE: 100.0}})
    assert req.update({((QUOTA_CLIENT_ID, "busy"),): {REQUEST_PERCENTAGE: 1.0}})
    assert mut.update({((QUOTA_CLIENT_ID, "adm"),): {CONTROLLER_MUTATION_RATE: 2.0}})
    b.produce_quota, b.request_quota, b.mutation_quota = prod, req, mut
    m = BrokerMetrics(b)

    assert prod.record("ANONYMOUS", "slow", 3000) > 0       # 3000 B over >= 10 s: 300 B/s > 100
    assert prod.record("ANONYMOUS", "fast", 5000) == 0      # no quota: measured, never throttled
    conn = types.SimpleNamespace(throttle_ms=0, throttled_by=None)
    throttle(conn, 400, prod, ("", "slow"))
    throttle(conn, 200, req, ("", "slow"))                  # shorter: the produce quota keeps it
    assert conn.throttle_ms == 400 and conn.throttled_by == (prod, ("", "slow"))
    prod.record_throttle(("", "slow"), 400)
    prod.record_throttle(("", "slow"), 200)
    req.record("ANONYMOUS", "busy", 50)                      # 0.5 s of loop time, in percent
    q = mut.quota_for(types.SimpleNamespace(principal="User:ANONYMOUS", client_id="adm"), strict=False)
    q.admit(30)                                             # burst 22: 8 in debt

    s = samples(m)
    lab = (("client_id", "slow"), ("user", ""))
    assert s[("kafka_server_produce_byte_rate", lab)] == 3000 / 10
    assert s[("kafka_server_produce_throttle_time", lab)] == 300
    assert s[("kafka_server_produce_byte_rate", (("client_id", "fast"), ("user", "")))] == 500
    assert math.isnan(s[("kafka_server_produce_throttle_time", (("client_id", "fast"), ("user", "")))])
    assert s[("kafka_server_request_request_time", (("client_id", "busy"), ("user", "")))] == 5
    adm = (("client_id", "adm"), ("user", ""))
    assert s[("kafka_server_controllermutation_mutation_rate", adm)] == 3
    assert s[("kafka_server_controllermutation_tokens", adm)] == -8
    assert not any(k[0].startswith("kafka_server_fetch_") for k in s)     # no consumer quota anywhere

    now[0] += 30                                            # every window has passed
    s = samples(m)
    assert s[("kafka_server_produce_byte_rate", lab)] == 0
    assert math.isnan(s[("kafka_server_produce_throttle_time", lab)])
    assert s[("kafka_server_controllermutation_tokens", adm)] == 22           # refilled to the burst


def test_fetch_session_cache_gauges():
    from collections import OrderedDict

    from broker.fetch_session import FetchSessionCache
    cache = FetchSessionCache(max_entries=1)
    cache.maybe_create(0, False, OrderedDict(((("t", p), None) for p in range(3))), False)
    cache.maybe_create(200_000, False, OrderedDict([(("t", 0), None)]), False)     # evicts the stale one
    b = fake_broker()
    b.fetch_sessions = cache
    s = samples(BrokerMetrics(b))
    fc = "kafka_server_fetchsessioncache_"
    assert s[(fc + "numincrementalfetchsessions", ())] == 1
    assert s[(fc + "numincrementalfetchpartitionscached", ())] == 1
    assert s[(fc + "incrementalfetchsessionevictions_total", ())] == 1

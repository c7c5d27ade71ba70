"""Client quotas on a real broker: kafka-configs.sh sets producer_byte_rate / consumer_byte_rate,
confluent-kafka clients are throttled (throttle_time_ms reported through ``throttle_cb``, measured
rate near the quota), other client ids are not, removing the quota lifts it, user/client-id
precedence, raw DescribeClientQuotas/AlterClientQuotas answers, and quotas survive a restart.
controller_mutation_rate: confluent-kafka's admin (CreateTopics v4, permissive) gets everything
created but throttled, kafka-python's (v7, strict) gets THROTTLING_QUOTA_EXCEEDED for the topics
past the point the bucket ran dry, the raw API versions split strict/permissive as Kafka does.
request_percentage: a confluent producer held to 1 % of the event loop is throttled while another
client id on the same broker is not.

The broker runs with ``quota.window.num=2`` (one full window of one second), so a client is held
to its quota within about a second instead of after Kafka's default ten-second burst allowance,
and ``controller.quota.window.num=2``: a mutation bucket holds two seconds' worth.
Neither confluent-kafka nor kafka-python has a client-quota admin API, so the API checks use the
project's raw client.  Rates are checked against generous bands only.
"""
from __future__ import annotations

import asyncio
import math
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.metrics import scrape
from tests.support.net import free_port

BIN = Path(__file__).resolve().parents[2] / "bin"
QUOTA = 20_000          # bytes/s
RUN_S = 3.0
VALUE = b"x" * 1000

confluent_kafka = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    port = free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("quota-broker"), name="quota-broker",
                      props={"quota.window.num": 2, "quota.window.size.seconds": 1,
                             "controller.quota.window.num": 2,
                             "odradek.metrics.prometheus.port": port,
                             "odradek.metrics.prometheus.host": "127.0.0.1"})
    b.metrics_url = f"http://127.0.0.1:{port}/metrics"
    with running(b):
        yield b


def client_metric(kafka, name, client_id, user=""):
    """A per-client quota series of one scrape; None when the series is absent."""
    return scrape(kafka.metrics_url).get((name, (("client_id", client_id), ("user", user))))


def configs(kafka, *args):
    cp = subprocess.run([str(BIN / "kafka-configs.sh"), "--bootstrap-server", kafka.bootstrap, *args],
                        capture_output=True, text=True, timeout=60)
    return cp


def ok(cp):
    assert cp.returncode == 0, cp.stdout + cp.stderr
    return cp.stdout.splitlines()


def create_topic(kafka, name):
    cp = subprocess.run([str(BIN / "kafka-topics.sh"), "--bootstrap-server", kafka.bootstrap, "--create",
                         "--topic", name, "--partitions", "1"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr


def produce_for(kafka, topic, client_id, seconds=RUN_S):
    """Produce as fast as the broker lets us for ``seconds``; (acked bytes/s, throttle events)."""
    throttles = []
    p = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "client.id": client_id,
                                  "linger.ms": 5, "acks": 1, "batch.size": 16384,
                                  "queue.buffering.max.kbytes": 64,
                                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    acked = [0]

    def done(err, msg):
        if err is None:
            acked[0] += len(msg.value())
    p.produce(topic, VALUE, callback=done)      # connect and learn metadata before timing
    p.flush(10)
    acked[0] = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            p.produce(topic, VALUE, callback=done)
        except BufferError:
            p.poll(0.01)
            continue
        p.poll(0)
    elapsed = time.monotonic() - start
    got = acked[0]                              # what was acknowledged within the run
    p.purge(in_queue=True)                      # do not wait for the throttled rest
    p.flush(30)
    return got / elapsed, throttles


def consume_for(kafka, topic, client_id, seconds=RUN_S):
    throttles = []
    c = confluent_kafka.Consumer({"bootstrap.servers": kafka.bootstrap, "client.id": client_id,
                                  "group.id": f"g-{client_id}-{time.monotonic_ns()}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    c.subscribe([topic])
    got = 0
    start = None
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is None or m.error():
                continue
            if start is None:
                start = time.monotonic()
            got += len(m.value())
            if time.monotonic() - start >= seconds:
                break
    finally:
        c.close()
    assert start is not None, "nothing consumed"
    return got / max(time.monotonic() - start, 1e-3), got, throttles


def test_producer_byte_rate_throttles_only_its_client_id_and_removal_lifts_it(kafka):
    topic = "quota-produce"
    create_topic(kafka, topic)
    ok(configs(kafka, "--alter", "--entity-type", "clients", "--entity-name", "slow-producer",
               "--add-config", f"producer_byte_rate={QUOTA}"))
    assert ok(configs(kafka, "--describe", "--entity-type", "clients", "--entity-name", "slow-producer")) == [
        f"Quota configs for client-id 'slow-producer' are producer_byte_rate={float(QUOTA)}"]
    rate, throttles = produce_for(kafka, topic, "slow-producer")
    assert throttles and max(throttles) > 0, "no throttle_time_ms reported"
    assert QUOTA * 0.3 < rate < QUOTA * 2.5, rate
    # Kafka's kafka.server:type=Produce,user=,client-id=slow-producer byte-rate and throttle-time
    # (the quota windows are 2 x 1 s here, so the figures are of the run that just ended)
    assert 0 < client_metric(kafka, "kafka_server_produce_byte_rate", "slow-producer") < QUOTA * 3
    assert client_metric(kafka, "kafka_server_produce_throttle_time", "slow-producer") > 0
    fast, fast_throttles = produce_for(kafka, topic, "fast-producer", seconds=1.5)
    assert fast > QUOTA * 5 and not any(fast_throttles), (fast, fast_throttles)
    # a client without a quota is measured too, and was never throttled: NaN, as Kafka's Avg
    assert client_metric(kafka, "kafka_server_produce_byte_rate", "fast-producer") > QUOTA * 3
    assert math.isnan(client_metric(kafka, "kafka_server_produce_throttle_time", "fast-producer"))
    ok(configs(kafka, "--alter", "--entity-type", "clients", "--entity-name", "slow-producer",
               "--delete-config", "producer_byte_rate"))
    assert ok(configs(kafka, "--describe", "--entity-type", "clients", "--entity-name", "slow-producer")) == []
    lifted, _ = produce_for(kafka, topic, "slow-producer", seconds=1.5)
    assert lifted > QUOTA * 5, lifted


@pytest.mark.slow     # ~30 s: the slow tier, to keep .ci/run's default tier well inside its limit
def test_consumer_byte_rate_throttles_fetches(kafka):
    topic = "quota-consume"
    create_topic(kafka, topic)
    # small batches: a fetch always returns at least one whole batch, and a batch above what the
    # quota allows in its window would be throttled (and taken back) every time, as in Kafka
    p = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5, "batch.size": 4096})
    for _ in range(300):                      # 300 KB
        p.produce(topic, VALUE)
    assert p.flush(30) == 0
    ok(configs(kafka, "--alter", "--client", "slow-consumer", "--add-config", f"consumer_byte_rate={QUOTA}"))
    rate, got, throttles = consume_for(kafka, topic, "slow-consumer")
    assert throttles and max(throttles) > 0
    assert got < 150_000 and rate < QUOTA * 3, (got, rate)
    fast_rate, fast_got, fast_throttles = consume_for(kafka, topic, "fast-consumer", seconds=1.0)
    assert fast_got >= 200_000 or fast_rate > QUOTA * 5, (fast_got, fast_rate)
    assert not any(fast_throttles)
    ok(configs(kafka, "--alter", "--client", "slow-consumer", "--delete-config", "consumer_byte_rate"))


def test_user_client_precedence(kafka):
    """A default client-id quota for everybody, but the anonymous user's own quota for client
    'vip' (users/ANONYMOUS/clients/vip) comes first."""
    topic = "quota-precedence"
    create_topic(kafka, topic)
    ok(configs(kafka, "--alter", "--client-defaults", "--add-config", f"producer_byte_rate={QUOTA}"))
    ok(configs(kafka, "--alter", "--user", "ANONYMOUS", "--client", "vip",
               "--add-config", "producer_byte_rate=1000000000"))
    try:
        lines = ok(configs(kafka, "--describe", "--entity-type", "users", "--entity-type", "clients"))
        assert lines == ["Quota configs for user-principal 'ANONYMOUS', client-id 'vip' are "
                         "producer_byte_rate=1.0E9"]
        assert ok(configs(kafka, "--describe", "--entity-type", "clients")) == [
            f"Quota configs for the default client-id are producer_byte_rate={float(QUOTA)}"]
        vip, vip_throttles = produce_for(kafka, topic, "vip", seconds=1.5)
        anyone, throttles = produce_for(kafka, topic, "anyone", seconds=2.0)
        assert not any(vip_throttles) and vip > QUOTA * 3, (vip, vip_throttles)
        assert throttles and anyone < QUOTA * 3, (anyone, throttles)
    finally:
        ok(configs(kafka, "--alter", "--client-defaults", "--delete-config", "producer_byte_rate"))
        ok(configs(kafka, "--alter", "--user", "ANONYMOUS", "--client", "vip",
                   "--delete-config", "producer_byte_rate"))


def test_configs_tool_errors_and_users(kafka):
    r = configs(kafka, "--alter", "--client", "c1", "--add-config", "bogus=1")
    assert r.returncode == 1 and r.stderr.strip() == (
        "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: Set(bogus)")
    r = configs(kafka, "--alter", "--client", "c1", "--add-config", "producer_byte_rate=abc")
    assert r.returncode == 1 and r.stderr.strip() == "Cannot parse quota configuration value for producer_byte_rate: abc"
    r = configs(kafka, "--alter", "--client", "c1", "--delete-config", "producer_byte_rate")
    assert r.returncode == 1 and r.stderr.strip() == "Invalid config(s): producer_byte_rate"
    r = configs(kafka, "--alter", "--entity-type", "users", "--entity-type", "clients", "--entity-name", "u",
                "--add-config", "producer_byte_rate=5")
    assert r.returncode == 1 and "must be specified with each --entity-type" in r.stderr
    r = configs(kafka, "--alter", "--user-defaults", "--add-config", "SCRAM-SHA-256=[password=x]")
    assert r.returncode == 1 and "--entity-default or --user-defaults is not allowed" in r.stderr
    # quotas and SCRAM credentials of one user live side by side
    assert ok(configs(kafka, "--alter", "--user", "bob", "--add-config", "consumer_byte_rate=4096,request_percentage=12.5")) == [
        "Completed updating config for user bob."]
    ok(configs(kafka, "--alter", "--user", "bob", "--add-config", "SCRAM-SHA-256=[password=pw]"))
    assert ok(configs(kafka, "--describe", "--user", "bob")) == [
        "Quota configs for user-principal 'bob' are consumer_byte_rate=4096.0, request_percentage=12.5",
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096"]
    assert ok(configs(kafka, "--alter", "--entity-type", "users", "--entity-default",
                      "--add-config", "producer_byte_rate=1000000")) == [
        "Completed updating default config for users in the cluster."]
    assert "Quota configs for the default user-principal are producer_byte_rate=1000000.0" in ok(
        configs(kafka, "--describe", "--entity-type", "users"))
    ok(configs(kafka, "--alter", "--user-defaults", "--delete-config", "producer_byte_rate"))


def _raw(kafka, req, version):
    from protocol.client import KafkaClientConnection
    host, port = kafka.bootstrap.rsplit(":", 1)

    async def go():
        c = await KafkaClientConnection.connect(host, int(port), timeout=10)
        try:
            return await c.send(req, version=version)
        finally:
            await c.close()
    return asyncio.run(go())


@pytest.mark.parametrize("version", [0, 1])
def test_raw_api_answers(kafka, version):
    from protocol.messages import AlterClientQuotasRequest as A, DescribeClientQuotasRequest as D
    ent = [A.EntityData(entity_type="client-id", entity_name=f"raw-{version}")]
    resp = _raw(kafka, A(entries=[
        A.EntryData(entity=ent, ops=[A.OpData(key="producer_byte_rate", value=5000.0, remove=False)]),
        A.EntryData(entity=ent, ops=[A.OpData(key="nope", value=1.0, remove=False)]),
        A.EntryData(entity=[A.EntityData(entity_type="client-id", entity_name="vo")],
                    ops=[A.OpData(key="consumer_byte_rate", value=1.0, remove=False)]),
    ], validate_only=False), version)
    # the first two entries name the same entity: both are applied in turn (the first sets
    # producer_byte_rate, the second fails) and the entity is answered once, with the last result
    assert [(e.error_code, e.error_message) for e in resp.entries] == [
        (42, "Invalid configuration key nope"), (0, None)]
    resp = _raw(kafka, A(entries=[A.EntryData(entity=[A.EntityData(entity_type="client-id", entity_name="vonly")],
                                              ops=[A.OpData(key="producer_byte_rate", value=9.0, remove=False)])],
                         validate_only=True), version)
    assert resp.entries[0].error_code == 0
    resp = _raw(kafka, D(components=[D.ComponentData(entity_type="client-id", match_type=0, match=f"raw-{version}")],
                         strict=True), version)
    assert resp.error_code == 0
    assert [([(x.entity_type, x.entity_name) for x in e.entity], [(v.key, v.value) for v in e.values])
            for e in resp.entries] == [([("client-id", f"raw-{version}")], [("producer_byte_rate", 5000.0)])]
    resp = _raw(kafka, D(components=[D.ComponentData(entity_type="client-id", match_type=0, match="vonly")],
                         strict=True), version)
    assert resp.entries == []                    # validate_only changed nothing
    resp = _raw(kafka, D(components=[D.ComponentData(entity_type="topic", match_type=2, match=None)],
                         strict=False), version)
    assert resp.error_code == 35 and resp.error_message == "Custom entity type 'topic' not supported"
    for name in (f"raw-{version}", "vo"):
        _raw(kafka, A(entries=[A.EntryData(entity=[A.EntityData(entity_type="client-id", entity_name=name)],
                                           ops=[A.OpData(key=k, value=0.0, remove=True)
                                                for k in ("producer_byte_rate", "consumer_byte_rate")])],
                      validate_only=False), version)


def test_quotas_survive_restart(broker_factory):
    b = broker_factory()
    ok(configs(b, "--alter", "--user", "carol", "--client", "app", "--add-config", "producer_byte_rate=2048"))
    ok(configs(b, "--alter", "--client-defaults", "--add-config", "consumer_byte_rate=4096"))
    b.stop()
    b.start()
    assert ok(configs(b, "--describe", "--entity-type", "users", "--entity-type", "clients")) == [
        "Quota configs for user-principal 'carol', client-id 'app' are producer_byte_rate=2048.0"]
    assert ok(configs(b, "--describe", "--client-defaults")) == [
        "Quota configs for the default client-id are consumer_byte_rate=4096.0"]


# ----------------------------------------------------------------------- controller_mutation_rate
THROTTLED = 89          # THROTTLING_QUOTA_EXCEEDED


def _topic_names(kafka):
    from confluent_kafka.admin import AdminClient
    return set(AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10).topics)


def test_mutation_quota_confluent_admin_creates_everything_but_is_throttled(kafka):
    """librdkafka speaks CreateTopics v4: below v6 the quota is permissive, as in Kafka — every
    topic is created, the answer carries the throttle time (librdkafka's throttle_cb) and the
    connection is muted, so the admin's next request waits.  Another client id is not held."""
    from confluent_kafka.admin import AdminClient, NewTopic
    ok(configs(kafka, "--alter", "--client", "conf-admin", "--add-config", "controller_mutation_rate=5"))
    throttles = []
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap, "client.id": "conf-admin",
                         "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    names = [f"conf-mut-{i}" for i in range(20)]         # 20 partitions, the bucket holds 2 s x 5 = 10
    for name, f in admin.create_topics([NewTopic(n, 1, 1) for n in names], operation_timeout=30).items():
        f.result()                                        # raises on any error
    admin.poll(1.0)
    assert throttles and max(throttles) > 0.5, throttles  # seconds; about 2 (10 below zero at 5/s)
    # kafka.server:type=ControllerMutation: mutation-rate, tokens (the bucket is in debt), throttle-time
    assert client_metric(kafka, "kafka_server_controllermutation_mutation_rate", "conf-admin") > 0
    assert client_metric(kafka, "kafka_server_controllermutation_tokens", "conf-admin") < 10
    assert client_metric(kafka, "kafka_server_controllermutation_throttle_time", "conf-admin") > 0
    assert set(names) <= _topic_names(kafka)
    start = time.monotonic()
    for f in admin.create_topics([NewTopic("conf-mut-late", 1, 1)], operation_timeout=30).values():
        f.result()
    assert time.monotonic() - start > 0.5                 # held back while the connection was muted

    free_throttles = []
    free = AdminClient({"bootstrap.servers": kafka.bootstrap, "client.id": "conf-free-admin",
                        "throttle_cb": lambda ev: free_throttles.append(ev.throttle_time)})
    for f in free.create_topics([NewTopic(f"conf-free-{i}", 1, 1) for i in range(20)],
                                operation_timeout=30).values():
        f.result()
    free.poll(0.5)
    assert not any(free_throttles), free_throttles
    ok(configs(kafka, "--alter", "--client", "conf-admin", "--delete-config", "controller_mutation_rate"))


def test_mutation_quota_kafka_python_admin_gets_throttling_quota_exceeded(kafka):
    """kafka-python speaks CreateTopics v7: strict.  Topics are admitted in order while the
    bucket is not below zero (the one that empties it is still admitted whole); the rest get
    THROTTLING_QUOTA_EXCEEDED and are not created.  After the throttle time they can be."""
    from kafka import KafkaAdminClient
    from kafka.errors import ThrottlingQuotaExceededError
    ok(configs(kafka, "--alter", "--client", "kp-admin", "--add-config", "controller_mutation_rate=5"))
    ok(configs(kafka, "--alter", "--client", "kp-raise", "--add-config", "controller_mutation_rate=5"))
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap, client_id="kp-admin")
    try:
        names = [f"kp-mut-{i}" for i in range(10)]
        spec = {n: {"num_partitions": 3, "replication_factor": 1} for n in names}
        result = admin.create_topics(spec, raise_errors=False)
        codes = {t["name"]: t["error_code"] for t in result["topics"]}
        # bucket 10: 10 -> 7 -> 4 -> 1 -> -2, then refused (refill during the request is negligible)
        admitted = [n for n in names if codes[n] == 0]
        refused = [n for n in names if codes[n] == THROTTLED]
        assert admitted + refused == names, codes          # admitted first, refused after
        assert 4 <= len(admitted) <= 5, codes
        existing = _topic_names(kafka)
        assert set(admitted) <= existing and not set(refused) & existing
        time.sleep(1.0)                                     # the throttle time: ~0.4 s
        again = admin.create_topics({n: spec[n] for n in refused[:1]}, raise_errors=False)
        assert [t["error_code"] for t in again["topics"]] == [0]
    finally:
        admin.close()
    raising = KafkaAdminClient(bootstrap_servers=kafka.bootstrap, client_id="kp-raise")
    try:
        with pytest.raises(ThrottlingQuotaExceededError):
            raising.create_topics({f"kp-raise-{i}": {"num_partitions": 4, "replication_factor": 1}
                                   for i in range(5)})
    finally:
        raising.close()
    for c in ("kp-admin", "kp-raise"):
        ok(configs(kafka, "--alter", "--client", c, "--delete-config", "controller_mutation_rate"))


def test_mutation_quota_versions_validate_only_partitions_and_deletes(kafka):
    """Raw requests on fresh connections of one client id (they share its bucket; a connection
    that was throttled is muted, so each step uses a new one).  Rate 1/s, bucket 2: a debt of
    tens of mutations lasts tens of seconds, far longer than the steps take."""
    from protocol.messages import (CreatePartitionsRequest as CP, CreateTopicsRequest as CT,
                                   DeleteTopicsRequest as DT)
    from protocol.primitives import UUID0
    from tests.support.rawkafka import RawConnection
    host, port = kafka.bootstrap.rsplit(":", 1)

    def send(api_key, version, body):
        with RawConnection(host, int(port), client_id="raw-mut") as c:
            return c.request(api_key, version, body)

    def create(names, version, validate_only=False, partitions=1):
        return send(19, version, CT(topics=[CT.CreatableTopic(name=n, num_partitions=partitions,
                                                             replication_factor=1, assignments=[], configs=[])
                                            for n in names], timeout_ms=10000, validate_only=validate_only))

    create(["raw-mut-a", "raw-mut-b", "raw-mut-c"], 7)      # before the quota exists
    ok(configs(kafka, "--alter", "--client", "raw-mut", "--add-config", "controller_mutation_rate=1"))
    # validate_only counts nothing: 50 partitions validated, the bucket stays full
    r = create([f"raw-mut-v{i}" for i in range(50)], 7, validate_only=True)
    assert {t.error_code for t in r.topics} == {0} and r.throttle_time_ms == 0
    # CreatePartitions v3, strict: admitted while not below zero (2 -> -18), no throttle for it
    r = send(37, 3, CP(topics=[CP.CreatePartitionsTopic(name="raw-mut-a", count=21, assignments=None)],
                       timeout_ms=10000, validate_only=False))
    assert [t.error_code for t in r.results] == [0] and r.throttle_time_ms == 0
    r = send(37, 3, CP(topics=[CP.CreatePartitionsTopic(name="raw-mut-b", count=2, assignments=None)],
                       timeout_ms=10000, validate_only=False))
    assert [(t.error_code, t.error_message) for t in r.results] == [
        (THROTTLED, "The throttling quota has been exceeded.")]
    assert r.throttle_time_ms > 5000                         # ~18 s of debt at 1/s
    # a check failing comes before the quota: the topic's own error, not 89
    r = send(37, 3, CP(topics=[CP.CreatePartitionsTopic(name="raw-mut-nope", count=2, assignments=None)],
                       timeout_ms=10000, validate_only=False))
    assert r.results[0].error_code == 3                      # UNKNOWN_TOPIC_OR_PARTITION
    # CreateTopics v6 strict: refused; v5 permissive: created, throttled
    r = create(["raw-mut-s6"], 6)
    assert [t.error_code for t in r.topics] == [THROTTLED] and r.throttle_time_ms > 5000
    r = create(["raw-mut-p5"], 5)
    assert [t.error_code for t in r.topics] == [0] and r.throttle_time_ms > 5000
    # DeleteTopics v6 strict: refused (topic stays); v4 permissive: deleted, throttled
    r = send(20, 6, DT(topics=[DT.DeleteTopicState(name="raw-mut-b", topic_id=UUID0)], timeout_ms=10000))
    assert [t.error_code for t in r.responses] == [THROTTLED] and r.throttle_time_ms > 5000
    r = send(20, 4, DT(topic_names=["raw-mut-c"], timeout_ms=10000))
    assert [t.error_code for t in r.responses] == [0] and r.throttle_time_ms > 5000
    names = _topic_names(kafka)
    assert "raw-mut-b" in names and "raw-mut-c" not in names
    assert "raw-mut-p5" in names and "raw-mut-s6" not in names and "raw-mut-v0" not in names
    # removing the quota lifts it at once
    ok(configs(kafka, "--alter", "--client", "raw-mut", "--delete-config", "controller_mutation_rate"))
    r = create(["raw-mut-s6"], 7)
    assert [t.error_code for t in r.topics] == [0] and r.throttle_time_ms == 0


# ----------------------------------------------------------------------- request_percentage
def test_request_percentage_throttles_only_its_client(kafka):
    """1 % of the event loop is 10 ms of request handling per second: a producer sending a request
    per record (linger.ms=0) uses more, gets throttle times through throttle_cb and is muted; a
    producer with another client id on the same broker is never throttled."""
    topic = "quota-request-time"
    create_topic(kafka, topic)
    ok(configs(kafka, "--alter", "--client", "busy-producer", "--add-config", "request_percentage=1"))
    assert ok(configs(kafka, "--describe", "--client", "busy-producer")) == [
        "Quota configs for client-id 'busy-producer' are request_percentage=1.0"]

    def run(client_id):
        throttles = []
        p = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "client.id": client_id,
                                      "linger.ms": 0, "acks": 1,
                                      "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
        acked = [0]

        def done(err, msg):
            if err is None:
                acked[0] += 1
        start = time.monotonic()
        while time.monotonic() - start < RUN_S:
            try:
                p.produce(topic, b"r" * 100, callback=done)
            except BufferError:
                p.poll(0.01)
                continue
            p.poll(0.001)
        p.purge(in_queue=True)
        p.flush(30)
        return acked[0], throttles

    # acks=0 produce requests are exempt: their time goes to the broker-wide exempt-request-time
    p0 = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "client.id": "busy-producer",
                                   "linger.ms": 0, "acks": 0})
    for _ in range(200):
        p0.produce(topic, b"e" * 100)
        p0.poll(0)
    p0.flush(30)
    assert scrape(kafka.metrics_url).get(("kafka_server_request_exempt_request_time", ())) > 0

    busy_acked, busy_throttles = run("busy-producer")
    # kafka.server:type=Request request-time (percent of a second per second) and throttle-time
    assert client_metric(kafka, "kafka_server_request_request_time", "busy-producer") > 0
    assert client_metric(kafka, "kafka_server_request_throttle_time", "busy-producer") > 0
    free_acked, free_throttles = run("free-producer")
    assert busy_throttles and max(busy_throttles) > 0, busy_throttles
    assert not any(free_throttles), free_throttles
    assert busy_acked < free_acked, (busy_acked, free_acked)
    ok(configs(kafka, "--alter", "--client", "busy-producer", "--delete-config", "request_percentage"))
    _, lifted = run("busy-producer")
    assert not any(lifted), lifted


def test_exempt_request_time_only_while_a_request_quota_exists(tmp_path):
    """A broker of its own (the module's keeps other tests' request quotas): no series before any
    request quota, acks=0 produces timed while one exists, the series gone once it is removed."""
    port = free_port()
    b = BrokerProcess(tmp_path, name="exempt-broker", props={"odradek.metrics.prometheus.port": port,
                                                               "odradek.metrics.prometheus.host": "127.0.0.1"})
    b.metrics_url = f"http://127.0.0.1:{port}/metrics"
    series = ("kafka_server_request_exempt_request_time", ())
    with running(b):
        assert series not in scrape(b.metrics_url)
        ok(configs(b, "--alter", "--client", "someone", "--add-config", "request_percentage=50"))
        p0 = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "acks": 0})
        for _ in range(200):
            p0.produce("exempt-topic", b"e" * 100)
            p0.poll(0)
        p0.flush(30)
        deadline = time.monotonic() + 10
        while not scrape(b.metrics_url).get(series):
            assert time.monotonic() < deadline, "no exempt request time recorded"
            time.sleep(0.2)
        ok(configs(b, "--alter", "--client", "someone", "--delete-config", "request_percentage"))
        assert series not in scrape(b.metrics_url)


def test_kafka_topics_tool_waits_out_the_mutation_quota(kafka, tmp_path):
    """kafka-topics.sh retries topics refused with THROTTLING_QUOTA_EXCEEDED after the throttle
    time, as Java's admin client does: the second create succeeds, after waiting."""
    props = tmp_path / "tool.properties"
    props.write_text("client.id=topics-tool\n")
    ok(configs(kafka, "--alter", "--client", "topics-tool", "--add-config", "controller_mutation_rate=5"))

    def topics(*args):
        return subprocess.run([str(BIN / "kafka-topics.sh"), "--bootstrap-server", kafka.bootstrap,
                               "--command-config", str(props), *args], capture_output=True, text=True,
                              timeout=120)
    assert ok(topics("--create", "--topic", "tool-big", "--partitions", "30")) == ["Created topic tool-big."]
    start = time.monotonic()                 # the bucket (10) is now 20 below zero: 4 s at 5/s
    assert ok(topics("--create", "--topic", "tool-next", "--partitions", "1")) == ["Created topic tool-next."]
    assert time.monotonic() - start > 1.5
    assert {"tool-big", "tool-next"} <= _topic_names(kafka)
    ok(configs(kafka, "--alter", "--client", "topics-tool", "--delete-config", "controller_mutation_rate"))

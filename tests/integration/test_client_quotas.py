"""Client quotas on a real broker: kafka-configs.sh sets producer_byte_rate / consumer_byte_rate,
confluent-kafka clients are throttled (throttle_time_ms reported through ``throttle_cb``, measured
rate near the quota), other client ids are not, removing the quota lifts it, user/client-id
precedence, raw DescribeClientQuotas/AlterClientQuotas answers, and quotas survive a restart.

The broker runs with ``quota.window.num=2`` (one full window of one second), so a client is held
to its quota within about a second instead of after Kafka's default ten-second burst allowance.
Neither confluent-kafka nor kafka-python has a client-quota admin API, so the API checks use the
project's raw client.  Rates are checked against generous bands only.
"""
from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import BrokerProcess
from tests.support.broker import running

BIN = Path(__file__).resolve().parents[2] / "bin"
QUOTA = 20_000          # bytes/s
RUN_S = 3.0
VALUE = b"x" * 1000

confluent_kafka = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("quota-broker"), name="quota-broker",
                      props={"quota.window.num": 2, "quota.window.size.seconds": 1})
    with running(b):
        yield b


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
    fast, fast_throttles = produce_for(kafka, topic, "fast-producer", seconds=1.5)
    assert fast > QUOTA * 5 and not any(fast_throttles), (fast, fast_throttles)
    ok(configs(kafka, "--alter", "--entity-type", "clients", "--entity-name", "slow-producer",
               "--delete-config", "producer_byte_rate"))
    assert ok(configs(kafka, "--describe", "--entity-type", "clients", "--entity-name", "slow-producer")) == []
    lifted, _ = produce_for(kafka, topic, "slow-producer", seconds=1.5)
    assert lifted > QUOTA * 5, lifted


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
               "--add-config", "producer_byte_rate=100000000"))
    try:
        lines = ok(configs(kafka, "--describe", "--entity-type", "users", "--entity-type", "clients"))
        assert lines == ["Quota configs for user-principal 'ANONYMOUS', client-id 'vip' are "
                         "producer_byte_rate=1.0E8"]
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
    assert [(e.error_code, e.error_message) for e in resp.entries] == [
        (0, None), (42, "Invalid configuration key nope"), (0, None)]
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

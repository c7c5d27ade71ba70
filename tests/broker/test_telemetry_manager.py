"""KIP-714 client metrics manager units (broker/client_metrics.py): subscriptions matched per
client, subscription ids, the throttle and validation order of GetTelemetrySubscriptions and
PushTelemetry, re-evaluation after a subscription change, expiry, receivers (no broker process;
the real clients' pushes are in tests/integration/test_client_telemetry.py)."""
from __future__ import annotations

import types
import uuid

import pytest

from broker.client_metrics import (CACHE_EXPIRY_MS, ClientMetricsManager, TelemetryPayload, java_uuid_hash,
                                   subscription_id)
from protocol import compression
from protocol.errors import ErrorCode as E


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t

    def advance_ms(self, ms):
        self.t += ms / 1000


class Config(dict):
    def get(self, key, default=None):
        return super().get(key, default)

    def security_protocol_map(self):
        return {"PLAINTEXT": "PLAINTEXT"}


class Receiver:
    def __init__(self, fail=False):
        self.got = []
        self.fail = fail

    def export_metrics(self, context, payload):
        if self.fail:
            raise RuntimeError("no")
        self.got.append((context, payload.client_instance_id, payload.is_terminating, payload.data()))


def ctx(client_id="app-1", software=("apache-kafka-java", "3.8.0"), peer=("10.0.0.7", 50123)):
    conn = types.SimpleNamespace(client_software=software, peer=peer, peer_host=peer[0],
                                 listener_name="PLAINTEXT")
    broker = types.SimpleNamespace(config=Config({"telemetry.max.bytes": 100}))
    return types.SimpleNamespace(connection=conn, client_id=client_id, principal="User:ANONYMOUS",
                                 api_version=0, header=types.SimpleNamespace(correlation_id=7), broker=broker)


def manager(subs=None, receivers=(), clock=None):
    broker = types.SimpleNamespace(config=Config({"telemetry.max.bytes": 100, "metric.reporters": ""}))
    m = ClientMetricsManager(broker, (), list(receivers), clock=clock or Clock())
    m.subscriptions_changed(subs or {})
    return m


def push(m, iid, sub_id, metrics=b"x", terminating=False, compression_type=0, c=None):
    req = types.SimpleNamespace(client_instance_id=iid, subscription_id=sub_id, terminating=terminating,
                                compression_type=compression_type, metrics=metrics)
    return m.push(c or ctx(), req)[0]


def test_a_new_client_gets_an_id_and_the_matching_subscriptions():
    m = manager({"all": {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"},
                 "java": {"metrics": "org.apache.kafka.consumer.", "interval.ms": "500",
                          "match": "client_software_name=apache-kafka-java"},
                 "other": {"metrics": "nope.", "match": "client_id=other-.*"}})
    code, inst, _ = m.get_subscriptions(ctx(), uuid.UUID(int=0))
    assert code == E.NONE
    assert inst.instance_id.int != 0
    assert inst.metrics == ("org.apache.kafka.consumer.", "org.apache.kafka.producer.")
    assert inst.interval_ms == 500
    assert inst.subscription_id == subscription_id(inst.metrics, 500, inst.instance_id)
    # the librdkafka client matches only the first subscription
    code, inst2, _ = m.get_subscriptions(ctx(software=("librdkafka", "2.16.0")), uuid.UUID(int=0))
    assert inst2.metrics == ("org.apache.kafka.producer.",) and inst2.interval_ms == 1000
    assert inst2.instance_id != inst.instance_id


def test_match_is_a_whole_string_match_of_every_selector():
    m = manager({"s": {"metrics": "a", "match": "client_id=app,client_source_address=10\\.0\\..*"}})
    assert m.get_subscriptions(ctx(client_id="app-1"), None)[1].metrics == ()
    assert m.get_subscriptions(ctx(client_id="app"), None)[1].metrics == ("a",)
    assert m.get_subscriptions(ctx(client_id="app", peer=("192.168.1.1", 1)), None)[1].metrics == ()
    assert m.get_subscriptions(ctx(client_id=None), None)[1].metrics == ()


def test_no_subscription_gives_nothing_at_the_default_interval_and_star_wins():
    m = manager()
    inst = m.get_subscriptions(ctx(), None)[1]
    assert inst.metrics == () and inst.interval_ms == 300_000
    m = manager({"a": {"metrics": "x.,y."}, "b": {"metrics": "*", "interval.ms": "2000"}})
    inst = m.get_subscriptions(ctx(), None)[1]
    assert inst.metrics == ("*",) and inst.interval_ms == 2000


def test_subscription_id_is_the_same_on_every_broker_and_follows_its_inputs():
    iid = uuid.uuid4()
    a = subscription_id({"b", "a"}, 1000, iid)
    assert a == subscription_id(["a", "b"], 1000, iid)
    assert a != subscription_id(["a", "b"], 1001, iid)
    assert a != subscription_id(["a"], 1000, iid)
    assert -2**31 <= a < 2**31
    u = uuid.UUID(int=(1 << 64) | 3)          # Kafka: (int)(h >> 32) ^ (int) h of 1 ^ 3
    assert java_uuid_hash(u) == 2


def test_get_sooner_than_the_interval_is_throttled():
    clock = Clock()
    m = manager({"s": {"metrics": "*", "interval.ms": "1000"}}, clock=clock)
    code, inst, _ = m.get_subscriptions(ctx(), None)
    assert code == E.NONE
    clock.advance_ms(999)
    assert m.get_subscriptions(ctx(), inst.instance_id)[0] == E.THROTTLING_QUOTA_EXCEEDED
    clock.advance_ms(1)
    assert m.get_subscriptions(ctx(), inst.instance_id)[0] == E.NONE
    assert m.throttled == 1


def test_push_order_of_checks_and_the_receivers_get_the_payload():
    clock = Clock()
    rec = Receiver()
    m = manager({"s": {"metrics": "*", "interval.ms": "1000"}}, [rec], clock)
    _, inst, _ = m.get_subscriptions(ctx(), None)
    iid, sid = inst.instance_id, inst.subscription_id
    assert push(m, uuid.UUID(int=0), sid) == E.INVALID_REQUEST
    assert push(m, uuid.UUID(int=1), sid) == E.INVALID_REQUEST
    assert push(m, iid, sid, metrics=b"abc") == E.NONE      # right after the get: accepted
    assert rec.got[-1][1:] == (iid, False, b"abc")
    assert rec.got[-1][0].client_software_name == "apache-kafka-java"
    clock.advance_ms(500)
    assert push(m, iid, sid) == E.THROTTLING_QUOTA_EXCEEDED
    clock.advance_ms(500)
    assert push(m, iid, sid + 1) == E.UNKNOWN_SUBSCRIPTION_ID
    clock.advance_ms(1000)
    assert push(m, iid, sid, compression_type=5) == E.UNSUPPORTED_COMPRESSION_TYPE
    clock.advance_ms(1000)
    assert push(m, iid, sid, metrics=b"y" * 101) == E.TELEMETRY_TOO_LARGE
    clock.advance_ms(1000)
    packed = compression.compress(compression.ZSTD, b"otlp bytes")
    assert push(m, iid, sid, metrics=packed, compression_type=compression.ZSTD) == E.NONE
    assert rec.got[-1][3] == b"otlp bytes"
    # a terminating push is taken at any time; nothing after it
    assert push(m, iid, sid, terminating=True) == E.NONE
    assert rec.got[-1][2] is True
    clock.advance_ms(5000)
    assert push(m, iid, sid) == E.INVALID_REQUEST
    assert m.unknown_subscription_requests == 1 and m.plugin_exports == 3


def test_an_empty_push_reaches_no_receiver_and_a_failing_receiver_means_invalid_record():
    rec = Receiver()
    m = manager({"s": {"metrics": "*", "interval.ms": "100"}}, [rec])
    _, inst, _ = m.get_subscriptions(ctx(), None)
    assert push(m, inst.instance_id, inst.subscription_id, metrics=b"") == E.NONE
    assert rec.got == []
    bad = manager({"s": {"metrics": "*", "interval.ms": "100"}}, [Receiver(fail=True)])
    _, inst, _ = bad.get_subscriptions(ctx(), None)
    assert push(bad, inst.instance_id, inst.subscription_id) == E.INVALID_RECORD
    # metrics that do not decompress fail the same way, when the receiver reads them
    m2 = manager({"s": {"metrics": "*", "interval.ms": "100"}}, [Receiver()])
    _, inst, _ = m2.get_subscriptions(ctx(), None)
    assert push(m2, inst.instance_id, inst.subscription_id, metrics=b"not zstd",
                compression_type=compression.ZSTD) == E.INVALID_RECORD
    assert bad.plugin_errors == 1


def test_a_subscription_change_makes_the_old_id_unknown_and_the_client_may_ask_at_once():
    clock = Clock()
    m = manager({"s": {"metrics": "a.", "interval.ms": "1000"}}, [Receiver()], clock)
    _, inst, _ = m.get_subscriptions(ctx(), None)
    iid, old = inst.instance_id, inst.subscription_id
    m.subscriptions_changed({"s": {"metrics": "a.,b.", "interval.ms": "1000"}})
    clock.advance_ms(1000)
    assert push(m, iid, old) == E.UNKNOWN_SUBSCRIPTION_ID
    code, inst, _ = m.get_subscriptions(ctx(), iid)      # not throttled after that error
    assert code == E.NONE and inst.metrics == ("a.", "b.") and inst.subscription_id != old
    assert inst.instance_id == iid
    # the client's attributes are kept from its first request
    assert inst.attributes["client_software_name"] == "apache-kafka-java"


def test_a_new_instance_may_ask_and_push_whatever_the_clock_reads():
    clock = Clock()
    clock.t = 0.001             # a monotonic clock just after boot
    m = manager({"s": {"metrics": "*", "interval.ms": "300000"}}, [Receiver()], clock)
    code, inst, _ = m.get_subscriptions(ctx(), None)
    assert code == E.NONE
    other = manager({"s": {"metrics": "*", "interval.ms": "300000"}}, [Receiver()], clock)
    assert push(other, inst.instance_id, inst.subscription_id) == E.NONE


def test_another_broker_knows_the_subscription_id_of_a_client_it_never_saw():
    subs = {"s": {"metrics": "*", "interval.ms": "1000"}}
    a, b = manager(subs, [Receiver()]), manager(subs, [Receiver()])
    _, inst, _ = a.get_subscriptions(ctx(), None)
    assert push(b, inst.instance_id, inst.subscription_id) == E.NONE


def test_instances_expire_after_a_minute_or_three_intervals():
    clock = Clock()
    m = manager({"s": {"metrics": "*", "interval.ms": "30000"}}, clock=clock)
    _, inst, _ = m.get_subscriptions(ctx(), None)
    clock.advance_ms(max(CACHE_EXPIRY_MS, 90_000) - 1)
    m.get_subscriptions(ctx(), None)          # another client: a sweep
    assert inst.instance_id in m.instances
    clock.advance_ms(10_000)
    m.get_subscriptions(ctx(), None)
    assert inst.instance_id not in m.instances
    # a scrape expires them without waiting for a request
    clock.advance_ms(95_000)
    assert len(m.instances) == 2
    m.expire()
    assert len(m.instances) == 0


def test_payload_data_is_decompressed_lazily():
    raw = compression.compress(compression.GZIP, b"hello")
    p = TelemetryPayload(uuid.uuid4(), False, compression.GZIP, raw)
    assert p.data() == b"hello" and p.content_type == "application/x-protobuf"
    with pytest.raises(compression.CompressionError):
        TelemetryPayload(uuid.uuid4(), False, compression.LZ4, b"junk").data()

"""ConnectionQuotas' decisions without sockets: slots per listener and broker, the protected
inter-broker listener and the connection it evicts, per-IP limits with overrides, and the
creation-rate delay (Kafka's Rate over quota.window.num windows)."""
from __future__ import annotations

import types

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.client_quota import ClientRate
from broker.connection_quotas import ConnectionQuotas, parse_ip_overrides

LISTENERS = {"listeners": "EXTERNAL://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
             "advertised.listeners": "EXTERNAL://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
             "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
             "inter.broker.listener.name": "INTERNAL"}


class _Conn:
    def __init__(self, listener, last_active):
        self.listener_name, self.last_active = listener, last_active
        self.peer = ("127.0.0.1", 5000)
        self.closed = False

    def close(self):
        self.closed = True


def quotas(clock=None, **props):
    cfg = BrokerConfig.from_dict({**LISTENERS, **props})
    broker = types.SimpleNamespace(config=cfg, connections=set())
    q = ConnectionQuotas(broker, clock=clock or (lambda: 0.0))
    for name in ("EXTERNAL", "INTERNAL"):       # what Listener registers
        q.listeners[name] = types.SimpleNamespace(name=name, rate=ClientRate(11, 1.0), configure=lambda *a: None,
                                                  maybe_resume=lambda: None)
        q.listener_counts[name] = 0
    return q


def test_broker_limit_spares_the_inter_broker_listener_and_evicts_the_oldest_client():
    q = quotas(**{"max.connections": 2})
    old, new = _Conn("EXTERNAL", 1.0), _Conn("EXTERNAL", 2.0)
    q.broker.connections.update({old, new})
    assert q.inc("EXTERNAL", "10.0.0.1") and q.inc("EXTERNAL", "10.0.0.2")
    assert not q.slot_available("EXTERNAL")
    assert q.slot_available("INTERNAL")             # protected: only its own limit counts
    assert q.inc("INTERNAL", "10.0.0.3")
    assert old.closed and not new.closed            # the least recently active one made room
    q.dec("EXTERNAL", "10.0.0.1")                   # the evicted connection's close
    assert q.total == 2 and not q.slot_available("EXTERNAL")
    q.dec("INTERNAL", "10.0.0.3")
    assert q.total == 1 and q.slot_available("EXTERNAL")


def test_listener_limit_defaults_to_the_broker_one_and_can_be_set_apart():
    q = quotas(**{"max.connections": 5, "listener.name.external.max.connections": 1})
    assert q.listener_max("EXTERNAL") == 1 and q.listener_max("INTERNAL") == 5
    assert q.inc("EXTERNAL", "10.0.0.1")
    assert not q.slot_available("EXTERNAL") and q.slot_available("INTERNAL")


def test_per_ip_limit_and_overrides():
    q = quotas(**{"max.connections.per.ip": 2, "max.connections.per.ip.overrides": "127.0.0.1:1,10.0.0.9:3"})
    assert q.ip_limit("127.0.0.1") == 1 and q.ip_limit("10.0.0.9") == 3 and q.ip_limit("10.0.0.1") == 2
    assert q.inc("EXTERNAL", "127.0.0.1")
    assert not q.inc("EXTERNAL", "127.0.0.1")       # rejected, and not counted
    assert q.total == 1 and q.counts == {"127.0.0.1": 1} and q.rejected == 1
    q.dec("EXTERNAL", "127.0.0.1")
    assert q.counts == {} and q.total == 0


def test_overrides_parse_and_validation():
    assert parse_ip_overrides("a.example:5, 10.0.0.1:7,,") == {"a.example": 5, "10.0.0.1": 7}
    assert parse_ip_overrides("") == {}
    with pytest.raises(ConfigError):
        parse_ip_overrides("10.0.0.1")
    with pytest.raises(ConfigError):
        parse_ip_overrides("10.0.0.1:many")
    with pytest.raises(ConfigError, match="can be set to zero only if"):
        BrokerConfig.from_dict({**LISTENERS, "max.connections.per.ip": 0}).validate()
    BrokerConfig.from_dict({**LISTENERS, "max.connections.per.ip": 0,
                            "max.connections.per.ip.overrides": "127.0.0.1:3"}).validate()


def test_creation_rate_delay_follows_kafkas_rate():
    now = [100.0]
    q = quotas(clock=lambda: now[0], **{"max.connection.creation.rate": 5, "quota.window.num": 2,
                                        "quota.window.size.seconds": 1})
    ext = q.listeners["EXTERNAL"]
    ext.rate = ClientRate(2, 1.0)
    # the rate is counted over at least one whole window: five connections at once are within it
    assert [q.record_and_throttle_ms(ext) for _ in range(5)] == [0] * 5
    # the sixth: 6/s against 5/s -> (6 - 5) / 5 of a one-second window
    assert q.record_and_throttle_ms(ext) == 200
    # far over: never more than one window
    assert max(q.record_and_throttle_ms(ext) for _ in range(50)) == 1000
    # the protected listener is held only to its own (unlimited) rate
    assert q.record_and_throttle_ms(q.listeners["INTERNAL"]) == 0


def test_a_lowered_broker_limit_closes_the_least_recently_used_connections():
    q = quotas()
    conns = [_Conn("EXTERNAL", t) for t in (3.0, 1.0, 2.0)]
    q.broker.connections.update(conns)
    for i in range(3):
        assert q.inc("EXTERNAL", f"10.0.0.{i}")
    q.broker.config.set_dynamic(cluster_default={"max.connections": "1"})
    q.configure()
    assert [c.closed for c in conns] == [False, True, True]
    q.configure()                       # the two are closing: nothing more is closed
    assert not conns[0].closed


def test_host_names_are_looked_up_off_the_event_loop(monkeypatch):
    """With the loop running, an override (or IP quota entity) named by a host is resolved in a
    worker thread: configure() returns at once, addresses apply at once, the name once looked up;
    a newer configuration wins over a lookup still in flight."""
    import asyncio
    import socket
    import threading
    import time as _time

    release = threading.Event()
    looked_up_on = []

    def slow_getaddrinfo(host, *a, **kw):
        looked_up_on.append(threading.current_thread() is threading.main_thread())
        release.wait(5)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.9.9.9", 0))]
    monkeypatch.setattr(socket, "getaddrinfo", slow_getaddrinfo)

    async def main():
        q = quotas(**{"max.connections.per.ip.overrides": "127.0.0.1:1"})
        # a dynamic change of the overrides, as kafka-configs.sh makes it
        q.broker.config = BrokerConfig.from_dict({**LISTENERS,
                                                  "max.connections.per.ip.overrides": "127.0.0.1:4,db.example:2"})
        t0 = _time.monotonic()
        q.configure()
        assert _time.monotonic() - t0 < 0.5            # did not wait for the lookup
        assert q.ip_max == {"127.0.0.1": 4}             # the address applies at once
        q.update_ip_quotas({(("ip", "cache.example"),): {"connection_creation_rate": 7.0}})
        release.set()
        for _ in range(100):
            await asyncio.sleep(0.02)
            if "10.9.9.9" in q.ip_max and "10.9.9.9" in q.ip_rate_max:
                break
        assert q.ip_max == {"127.0.0.1": 4, "10.9.9.9": 2}
        assert q.ip_rate_max == {"10.9.9.9": 7}
        assert looked_up_on and not any(looked_up_on)   # never on the loop's thread
        # a lookup superseded by a newer configuration is dropped
        release.clear()
        q.update_ip_quotas({(("ip", "old.example"),): {"connection_creation_rate": 1.0}})
        q.update_ip_quotas({(("ip", "10.1.1.1"),): {"connection_creation_rate": 3.0}})
        release.set()
        await asyncio.sleep(0.2)
        assert q.ip_rate_max == {"10.1.1.1": 3}
    asyncio.run(main())

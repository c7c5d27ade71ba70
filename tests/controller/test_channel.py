"""The controller's channel to a broker (controller/zookeeper/channel.py): a broker that cannot
be reached yet gets one WARNING (Kafka's "connection ... was unsuccessful"), the retries that
follow are debug, and the request goes through once the broker listens, with an INFO line
saying how many attempts failed."""
from __future__ import annotations

import asyncio
import logging

import pytest

from controller.zookeeper.channel import BrokerChannel
from protocol.messages import ApiVersionsRequest

pytestmark = pytest.mark.integration


def test_unreachable_broker_is_warned_once_then_reached(broker_factory, caplog):
    b = broker_factory(start=False)          # its port is chosen, nothing listens on it yet
    caplog.set_level(logging.DEBUG, logger="odradek.controller.channel")

    async def scenario():
        answered = asyncio.get_running_loop().create_future()
        ch = BrokerChannel(7, 1, b.host, b.port, request_timeout=10.0)
        ch.send(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                lambda resp: answered.set_result(resp))
        try:
            while sum(r.name == "odradek.controller.channel" and r.levelno == logging.DEBUG
                      for r in caplog.records) < 3:                                  # several retries
                await asyncio.sleep(0.05)
            await asyncio.get_running_loop().run_in_executor(None, b.start)
            resp = await asyncio.wait_for(answered, 30)
        finally:
            await ch.close()
        return resp

    resp = asyncio.run(scenario())
    assert resp.error_code == 0 and resp.api_keys
    mine = [r for r in caplog.records if r.name == "odradek.controller.channel"]
    warnings = [r.getMessage() for r in mine if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert f"controller 7's connection to broker 1 at {b.host}:{b.port} was unsuccessful" in warnings[0]
    infos = [r.getMessage() for r in mine if r.levelno == logging.INFO]
    assert any("controller 7 reached broker 1" in m and "failed attempts" in m for m in infos), infos


class _Cfg:
    """The two keys the channel reads and the listener it connects to (a BrokerConfig
    stand-in)."""

    def __init__(self, **kv):
        self.kv = kv

    def get(self, key):
        return self.kv[key]

    def controller_to_broker_listener_name(self):
        return "PLAINTEXT"


def test_timeouts_come_from_the_config(broker_factory, caplog, monkeypatch):
    b = broker_factory()
    caplog.set_level(logging.DEBUG, logger="odradek.controller.channel")
    cfg = _Cfg(**{"request.timeout.ms": 800, "controller.socket.timeout.ms": 700})

    import controller.zookeeper.channel as channel
    seen = []

    async def connect(config, host, port, listener=None, **kw):   # the plain listener, with the timeouts
        assert listener == "PLAINTEXT"
        seen.append((kw["timeout"], kw["request_timeout"]))
        return await channel.KafkaClientConnection.connect(host, port, **kw)
    monkeypatch.setattr(channel, "connect_to_broker", connect)

    async def scenario():
        loop = asyncio.get_running_loop()
        ch_defaults = BrokerChannel(7, 1, b.host, b.port, config=None)
        assert (ch_defaults.request_timeout, ch_defaults.connect_timeout) == (30.0, 30.0)
        ch = BrokerChannel(7, 1, b.host, b.port, config=cfg)
        first = loop.create_future()
        ch.send(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                lambda resp: first.set_result(resp))
        await asyncio.wait_for(first, 10)
        await loop.run_in_executor(None, b.pause)      # the broker stops answering
        second = loop.create_future()
        ch.send(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                lambda resp: second.set_result(resp))
        await asyncio.sleep(2.5)                       # well past request.timeout.ms
        assert not second.done()
        await loop.run_in_executor(None, b.resume)
        try:
            return await asyncio.wait_for(second, 20)
        finally:
            await ch.close()
            await ch_defaults.close()

    resp = asyncio.run(scenario())
    assert resp.error_code == 0
    assert seen and set(seen) == {(0.7, 0.8)}
    warnings = [r.getMessage() for r in caplog.records
                if r.name == "odradek.controller.channel" and r.levelno == logging.WARNING]
    assert any("TimeoutError" in w for w in warnings), warnings    # the 0.8 s request timeout
    assert len(seen) >= 2                              # and the request went again on a new connection

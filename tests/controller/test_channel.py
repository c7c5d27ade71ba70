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

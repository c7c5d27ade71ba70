"""Controller -> broker request channels (Kafka's ControllerChannelManager).

One ``BrokerChannel`` per live broker: a FIFO of requests and one task that sends them in order
over a connection to the broker's inter-broker listener, reconnecting and retrying each request
until it is answered or the channel is closed (the broker died or the controller resigned).
A response callback, when given, runs on the loop with the response.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any, Callable

from broker.security.interbroker import connect_to_broker
from protocol.client import KafkaClientConnection, KafkaConnectionError

log = logging.getLogger("odradek.controller.channel")


class BrokerChannel:
    """Timeouts as Kafka's ControllerChannelManager takes them from the config: a connection
    must be ready within ``controller.socket.timeout.ms``, and a request answered within
    ``request.timeout.ms`` (both 30 s by default); either failure closes the connection and the
    request is sent again on a new one."""

    def __init__(self, controller_id: int, broker_id: int, host: str, port: int,
                 request_timeout: float | None = None, config=None,
                 connect_timeout: float | None = None):
        self.config = config             # BrokerConfig: inter-broker TLS/SASL (None: plain connections)
        self.controller_id = controller_id
        self.broker_id = broker_id
        self.host = host
        self.port = port
        def ms(key: str, given: float | None) -> float:
            if given is not None:
                return given
            return (config.get(key) if config is not None else 30000) / 1000
        self.request_timeout = ms("request.timeout.ms", request_timeout)
        self.connect_timeout = ms("controller.socket.timeout.ms", connect_timeout)
        self.queue: asyncio.Queue = asyncio.Queue()
        self.conn: KafkaClientConnection | None = None
        self.closed = False
        self._last_tls_error: str | None = None
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-channel-{broker_id}")

    def send(self, request, callback: Callable[[Any], None] | None = None) -> None:
        self.queue.put_nowait((request, callback))

    async def close(self) -> None:
        self.closed = True
        while not self.task.done():        # wait_for can swallow a racing cancellation (3.11)
            self.task.cancel()
            await asyncio.wait([self.task], timeout=0.5)
        if self.conn is not None:
            await self.conn.close()
            self.conn = None

    async def _run(self) -> None:
        backoff = 0.05
        failures = 0
        while not self.closed:
            request, callback = await self.queue.get()
            resp = None
            while not self.closed:
                try:
                    if self.conn is None or self.conn.closed:
                        kw = dict(client_id=f"controller-{self.controller_id}",
                                  timeout=self.connect_timeout, request_timeout=self.request_timeout)
                        if self.config is not None:
                            self.conn = await connect_to_broker(
                                self.config, self.host, self.port,
                                listener=self.config.controller_to_broker_listener_name(), **kw)
                        else:
                            self.conn = await KafkaClientConnection.connect(self.host, self.port, **kw)
                    resp = await self.conn.send(request)
                    if failures:
                        log.info("controller %d reached broker %d at %s:%d after %d failed attempts",
                                 self.controller_id, self.broker_id, self.host, self.port, failures)
                        failures = 0
                    backoff = 0.05
                    break
                except (KafkaConnectionError, OSError, asyncio.TimeoutError) as e:
                    tls = e if isinstance(e, ssl.SSLError) else e.__context__
                    if isinstance(tls, ssl.SSLError) and str(e) != self._last_tls_error:
                        # an untrusted certificate or a host name mismatch does not heal by retrying
                        self._last_tls_error = str(e)
                        log.warning("controller channel to broker %d at %s:%d: TLS handshake failed: %s",
                                    self.broker_id, self.host, self.port, e)
                    if failures == 0:      # Kafka warns too; the retries that follow are debug
                        log.warning("controller %d's connection to broker %d at %s:%d was unsuccessful "
                                    "(%s: %s); retrying %s", self.controller_id, self.broker_id, self.host,
                                    self.port, type(e).__name__, e, type(request).__name__)
                    else:
                        log.debug("request %s to broker %d failed (%s); retrying", type(request).__name__,
                                  self.broker_id, e)
                    failures += 1
                    if self.conn is not None:
                        await self.conn.close()
                        self.conn = None
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
            if callback is not None and resp is not None:
                try:
                    callback(resp)
                except Exception:
                    log.exception("response callback for broker %d failed", self.broker_id)

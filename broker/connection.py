"""One client connection: frames in, responses out, strictly in request order.

How this works
--------------
``KafkaConnection`` is an ``asyncio.BufferedProtocol``: the event loop writes received bytes
straight into the ``FrameReader``'s buffers (one copy, kernel to final frame).  Whole frames are
queued; a single task per connection decodes and handles them one at a time and writes each
response before taking the next request — Kafka's ordering guarantee — while other connections
proceed concurrently.

* A frame above ``socket.request.max.bytes`` closes this connection only (Kafka does the same).
* An unknown API key, or a version outside the registered range, closes the connection — except
  ApiVersions, which is answered with UNSUPPORTED_VERSION in the v0 layout (KIP-511).  So does a
  KRaft-only API (``dispatch.KRAFT_ONLY_APIS``) on a broker not in KRaft mode, as Kafka's socket
  server refuses an API its listener does not enable.
* A handler returning ``None`` sends nothing (acks=0 Produce).
* Responses whose records are file regions are written header-first, then the region bytes.
* Reading pauses while too many requests are queued; writing waits for the transport to drain.
* Client quotas (broker/client_quota.py): a handler over a quota sets ``throttle_ms`` and the
  connection is muted for it; while a ``request_percentage`` quota exists the handler runs through
  ``broker.request_quota.handle``, which times it.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import struct
import time

from protocol import api
from protocol.framing import FrameReader, InvalidFrame
from protocol.messages import ApiVersionsResponse
from protocol.primitives import DecodeError

from broker.dispatch import HANDLERS, KRAFT_ONLY_APIS, NOT_IN_ZOOKEEPER_APIS
from broker.security.builder import PrincipalBuilderError
from broker.security.principal import NoMatchingRule

log = logging.getLogger("odradek.network")

_SIZE = struct.Struct(">i")
MAX_QUEUED = 64
# responses whose file regions add up to at most this many bytes are read and written in one
# send; larger ones go out with sendfile (measured in docs/broker.md, "Small fetch answers")
INLINE_REGION_BYTES = 16384
UNSUPPORTED_VERSION = 35
_PRE_AUTH_APIS = (api.API_VERSIONS, 17, 36)     # ApiVersions, SaslHandshake, SaslAuthenticate
# served while the broker is still starting: the above and the controller's requests (LeaderAndIsr,
# StopReplica, UpdateMetadata, ControlledShutdown, AlterPartition); the rest waits for it
_SERVED_WHILE_STARTING = frozenset(_PRE_AUTH_APIS + (4, 5, 6, 7, 56))


class RequestContext:
    """What a handler knows about the request it serves."""
    __slots__ = ("broker", "header", "api_version", "connection", "received_at")

    def __init__(self, broker, header, connection, received_at):
        self.broker = broker
        self.header = header
        self.api_version = header.request_api_version
        self.connection = connection
        self.received_at = received_at

    @property
    def client_id(self):
        return self.header.client_id

    @property
    def client_host(self):
        return self.connection.peer_host

    # -- security (broker/security) ------------------------------------------------------------
    @property
    def principal(self) -> str:
        sec = self.connection.security
        return sec.principal if sec is not None else "User:ANONYMOUS"

    @property
    def authorizer(self):
        sm = getattr(self.broker, "security", None)
        return sm.authorizer if sm is not None else None

    def authorize(self, operation: int, resource_type: int, name: str) -> bool:
        """May this request's principal perform ``operation`` (broker.security.acl codes) on the
        resource?  Always True without an authorizer."""
        authz = self.authorizer
        if authz is None:
            return True
        return authz.authorize(self.principal, self.client_host, operation, resource_type, name)


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker, listener_name: str):
        self.broker = broker
        self.listener_name = listener_name
        self.reader = FrameReader(broker.config.get("socket.request.max.bytes"),
                                  getattr(broker, "frame_pool", None))
        self.transport = None
        self.peer = ("?", 0)
        self.queue: collections.deque = collections.deque()
        self.worker: asyncio.Task | None = None
        self.closed = False
        self.paused_reading = False
        self._can_write = asyncio.Event()
        self._can_write.set()
        self.last_active = time.monotonic()
        self.in_flight = False
        self.sockfd = None      # set when responses may use sendfile
        self.quota_slot = None  # the connection counted by broker/connection_quotas.py
        self._wsock = None      # socket on a dup of the fd: direct sends and writability waits
        self._waiter = None     # future of a pending writability wait (resolved if the connection is lost)
        self._region = None     # [fd, position, bytes left] of the region being sent with sendfile
        self.security = None    # SecuritySession: principal and SASL state (broker/security)
        self.client_software = None     # (name, version) from ApiVersions v3+ (KIP-511)
        self.throttle_ms = 0    # set by a handler when the client is over a quota (broker/client_quota.py)
        self.throttled_by = None    # (quota manager, metric tags) of that throttle
        self.charge = None      # request quota: gets the time spent encoding the next response
        self._write_time = None     # while a quota'd response's regions are written: seconds in the syscalls

    @property
    def peer_host(self):
        return self.peer[0]

    # -- protocol callbacks -------------------------------------------------------------------
    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = peer[:2]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            cfg = self.broker.config
            opts = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),
                    (socket.SOL_SOCKET, socket.SO_SNDBUF, cfg.get("socket.send.buffer.bytes")),
                    (socket.SOL_SOCKET, socket.SO_RCVBUF, cfg.get("socket.receive.buffer.bytes"))]
            for level, opt, value in opts:
                if value != -1:     # -1: the OS default (and its auto-tuning), as in Kafka
                    try:
                        sock.setsockopt(level, opt, value)
                    except OSError:
                        pass
            if transport.get_extra_info("sslcontext") is None and hasattr(os, "sendfile"):
                self.sockfd = sock.fileno()
        if transport.get_extra_info("sslcontext") is None:
            transport.set_write_buffer_limits(high=0, low=0)
        else:
            # TLS: the SSL protocol checks ``size >= high`` after every write, so high=0 would pause
            # writing even when everything has been sent, and resume only on the connection's next
            # I/O event: a second request already read (pipelined) would wait for it for ever.
            # high=1 pauses only while encrypted bytes are really held back.
            transport.set_write_buffer_limits(high=1, low=0)
        sm = getattr(self.broker, "security", None)
        if sm is not None:
            try:
                self.security = sm.new_session(self.listener_name, transport)
            except (NoMatchingRule, PrincipalBuilderError) as e:
                # Kafka fails the authentication of a client whose certificate no rule maps, or
                # whose principal the configured builder cannot build
                from broker.security.sasl import SecuritySession
                what = "ssl.principal.mapping.rules" if isinstance(e, NoMatchingRule) else "principal.builder.class"
                log.warning("closing connection from %s:%s: %s: %s", *self.peer[:2], what, e)
                self.security = SecuritySession(self.listener_name, "SSL")
                self.security.state = "failed"      # nothing but ApiVersions is answered
                transport.close()
                return
            if self.security is not None and not self.security.authenticated:
                # until SASL authentication completes a frame may be at most
                # sasl.server.max.receive.size, as in Kafka (lift_pre_auth_limit ends it)
                limit = self.broker.config.get("sasl.server.max.receive.size")
                if limit < self.reader.max_size:
                    self.reader.max_size = limit
        self.broker.connections.add(self)

    def get_buffer(self, sizehint):
        return self.reader.get_buffer(sizehint)

    def lift_pre_auth_limit(self) -> None:
        """SASL authentication completed: frames up to socket.request.max.bytes again (called
        before the last authentication answer is written)."""
        self.reader.max_size = self.broker.config.get("socket.request.max.bytes")

    def buffer_updated(self, nbytes):
        self.last_active = time.monotonic()
        try:
            frames = self.reader.buffer_updated(nbytes)
        except InvalidFrame as e:
            log.warning("closing connection from %s:%s: %s", *self.peer, e)
            self.close()
            return
        if frames:
            self.queue.extend(frames)
            if self.worker is None or self.worker.done():
                self.worker = asyncio.get_running_loop().create_task(self._work())
            if len(self.queue) >= MAX_QUEUED and not self.paused_reading:
                self.paused_reading = True
                self.transport.pause_reading()

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        self.closed = True
        if self.quota_slot is not None:
            self.quota_slot.release()       # broker/connection_quotas.py
        if self._wsock is not None:
            try:
                asyncio.get_running_loop().remove_writer(self._wsock.fileno())
            except Exception:
                pass
            self._wsock.close()
            self._wsock = None
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(False)
        self._can_write.set()
        self.broker.connections.discard(self)
        share = getattr(self.broker, "share", None)
        if share is not None and share.sessions:
            share.connection_closed(self)       # its share sessions end, their records are released
        if self.worker is not None and not self.worker.done() and not self.in_flight:
            self.worker.cancel()

    def pause_writing(self):
        self._can_write.clear()

    def resume_writing(self):
        self._can_write.set()

    # Write buffer limits are high=low=0 (high=1, low=0 with TLS; set in connection_made):
    # pause_writing runs as soon as bytes are left unsent, resume_writing when the buffer is
    # empty.  Responses wait for that before the next request is handled, and sendfile relies on it.

    def close(self):
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    def close_after_auth_failure(self):
        """Close after ``connection.failed.authentication.delay.ms`` (Kafka's delayed close of a
        connection whose authentication failed): nothing more is read or handled meanwhile, what
        was already written (the failure's answer) still goes out."""
        if self.closed:
            return
        delay = self.broker.config.get("connection.failed.authentication.delay.ms")
        if delay <= 0:
            self.close()
            return
        self.closed = True          # no further request is handled
        self.queue.clear()
        if self.transport is not None:
            if not self.paused_reading:
                self.paused_reading = True
                self.transport.pause_reading()
            asyncio.get_running_loop().call_later(delay / 1000, self.transport.close)

    # -- request processing -------------------------------------------------------------------
    async def _work(self):
        while self.queue and not self.closed:
            frame = self.queue.popleft()
            if self.paused_reading and len(self.queue) < MAX_QUEUED // 2:
                self.paused_reading = False
                self.transport.resume_reading()
            self.in_flight = True
            try:
                await self._handle(frame)
            except Exception:   # a bug in a handler must not take the broker down
                log.exception("error handling a request from %s:%s; closing the connection", *self.peer)
                self.close()
            finally:
                self.in_flight = False
            self.last_active = time.monotonic()

    async def _handle(self, frame):
        received = time.monotonic()
        sec = self.security
        if sec is not None and sec.state == "raw":      # SASL tokens after SaslHandshake v0
            self.broker.security.raw_token(self, frame)
            return
        try:
            header, pos = api.decode_request_header(frame)
        except api.UnknownApiError as e:
            if e.api_key == api.API_VERSIONS and hasattr(e, "header"):
                self._unsupported_api_versions(e.header.correlation_id)
                return
            log.info("closing connection from %s:%s: %s", *self.peer, e)
            self.close()
            return
        except DecodeError as e:
            log.info("closing connection from %s:%s: bad request header: %s", *self.peer, e)
            self.close()
            return
        key, version = header.request_api_key, header.request_api_version
        h = HANDLERS.get(key)
        if h is None or not h.min_version <= version <= h.max_version or (
                key in KRAFT_ONLY_APIS and not self.broker.config.kraft_mode) or (
                key in NOT_IN_ZOOKEEPER_APIS and self.broker.config.zookeeper_connect):
            if key == api.API_VERSIONS:
                self._unsupported_api_versions(header.correlation_id)
                return
            log.info("closing connection from %s:%s: %s v%d is not served", *self.peer,
                     api.REQUESTS[key].__name__, version)
            self.close()
            return
        if sec is not None and sec.state == "done" and sec.expires_at is not None:
            now = time.monotonic()
            if key == 17 and sec.begin_reauthentication(now):
                pass                # re-authentication (KIP-368): the handshake is handled below
            elif sec.expired(now):
                log.info("closing connection from %s:%s: its SASL session expired (%s)", *self.peer,
                         api.REQUESTS[key].__name__)
                self.close()
                return
        if sec is not None and sec.state != "done" and key not in _PRE_AUTH_APIS:
            log.info("closing connection from %s:%s: unexpected %s during SASL authentication", *self.peer,
                     api.REQUESTS[key].__name__)
            self.close_after_auth_failure()
            return
        try:
            body, end = api.REQUESTS[key].decode_from(frame, pos, version)
        except DecodeError as e:
            log.info("closing connection from %s:%s: malformed %s v%d: %s", *self.peer,
                     api.REQUESTS[key].__name__, version, e)
            self.close()
            return
        started = received
        if not self.broker.serving and key not in _SERVED_WHILE_STARTING:
            await self.broker.until_serving()
            if self.closed:
                return
            started = time.monotonic()
        ctx = RequestContext(self.broker, header, self, received)
        metrics = self.broker.metrics
        enforcer = self.broker.security.enforcer if self.security is not None else None
        if enforcer is None:
            call = h.fn(ctx, body)
        else:           # authorizer configured: per-API ACL rules (broker/security/enforce.py)
            call = enforcer.handle(ctx, key, body, h.fn)
        rq = self.broker.request_quota
        if rq is None:
            response = await call
        else:           # some request_percentage quota exists: time the handler (broker/client_quota.py)
            response = await rq.handle(ctx, key, body, call, started)
        if metrics is not None:
            metrics.observe_request(h.name, time.monotonic() - received)
        if self.throttle_ms:    # over a client quota: mute the connection (broker/client_quota.py)
            await self._throttle(header.correlation_id, response, key, version)
            return
        if response is None or self.closed:
            return
        await self.send_response(header.correlation_id, response, key, version)
        if sec is not None and sec.close_after_response:
            self.close_after_auth_failure()

    async def _throttle(self, correlation_id, response, key, version):
        """Stop reading and handling this connection's requests for ``throttle_ms``; the response
        goes out first when the client throttles itself (KIP-219), else after the wait."""
        from broker.client_quota import shall_client_throttle
        ms, self.throttle_ms = self.throttle_ms, 0
        by, self.throttled_by = self.throttled_by, None
        if by is not None and by[0] is not None:
            by[0].record_throttle(by[1], ms)
        if self.closed:
            return
        muted = not self.paused_reading
        if muted:
            self.paused_reading = True
            self.transport.pause_reading()
        try:
            early = response is not None and shall_client_throttle(key, version)
            if early and not self.closed:
                await self.send_response(correlation_id, response, key, version)
            await asyncio.sleep(ms / 1000)
            if response is not None and not early and not self.closed:
                await self.send_response(correlation_id, response, key, version)
        finally:
            if muted and self.paused_reading and not self.closed and len(self.queue) < MAX_QUEUED:
                self.paused_reading = False
                self.transport.resume_reading()

    def _unsupported_api_versions(self, correlation_id):
        from broker.dispatch import HANDLERS as H
        h = H[api.API_VERSIONS]
        body = ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=api.API_VERSIONS, min_version=h.min_version,
                                           max_version=h.max_version)])
        out = bytearray(4)
        api.encode_response_into(out, correlation_id, body, api.API_VERSIONS, 0)
        _SIZE.pack_into(out, 0, len(out) - 4)
        self.transport.write(out)

    async def send_response(self, correlation_id, body, api_key, version):
        charge = self.charge
        if charge is not None:
            self.charge = None
            t0 = time.monotonic()
        out = bytearray(4)
        regions = []
        api.encode_response_into(out, correlation_id, body, api_key, version, regions)
        region_bytes = sum(r.length for _, r in regions)
        _SIZE.pack_into(out, 0, len(out) - 4 + region_bytes)
        if regions and region_bytes <= INLINE_REGION_BYTES:
            # a small answer (a caught-up consumer, a follower): read the records and write the
            # whole response at once — one pread and one send instead of send, sendfile, send
            out = self._inline_regions(out, regions)
            regions = ()
        if not regions:
            self.transport.write(out)
        if charge is not None:
            charge(time.monotonic() - t0)
        if regions:
            if charge is None:
                await self._write_with_regions(out, regions)
            else:
                # Kafka's request time includes the network thread's sending; here that is the
                # time in send/sendfile (and the pread of a TLS region), not the waits between
                self._write_time = 0.0
                try:
                    await self._write_with_regions(out, regions)
                finally:
                    spent, self._write_time = self._write_time, None
                charge(spent)
        if not self._can_write.is_set():
            await self._can_write.wait()

    @staticmethod
    def _inline_regions(out, regions) -> bytes:
        """The response with its file regions read in place."""
        parts = []
        prev = 0
        for pos, region in regions:
            if pos > prev:
                parts.append(out[prev:pos])
            prev = pos
            for r in getattr(region, "regions", (region,)):
                parts.append(r.read())
        if prev < len(out):
            parts.append(out[prev:])
        return b"".join(parts)

    async def _write_with_regions(self, out, regions):
        """Bytes, then each file region, in order.

        Without TLS the whole response goes straight to the socket once the transport's buffer
        has drained (uvloop has no ``loop.sendfile``; the socket is ours while the buffer is
        empty because this task is the connection's only writer): the bytes before a region with
        ``send(MSG_MORE)``, so the kernel holds them back and they leave in the region's first
        segment, each region with ``os.sendfile`` from the page cache, the bytes after the last
        region with a plain ``send`` that pushes.  One small packet less per response, and one
        wake-up less for the client.  With TLS (no socket) a region is read with one ``pread``
        and written through the transport.
        """
        mv = memoryview(out)
        if self.sockfd is None:
            t0 = time.monotonic()
            write = self.transport.write
            prev = 0
            for pos, region in regions:
                if pos > prev:
                    write(mv[prev:pos])
                prev = pos
                for r in getattr(region, "regions", (region,)):
                    write(r.read())
            if prev < len(out):
                write(mv[prev:])
            if self._write_time is not None:
                self._write_time += time.monotonic() - t0
            return
        transport = self.transport
        while transport.get_write_buffer_size() > 0:
            # high=low=0: pause_writing has run, resume_writing runs when the buffer is empty
            if self.closed:
                return
            await self._can_write.wait()
        prev = 0
        for pos, region in regions:
            if pos > prev and not await self._send(mv[prev:pos], True):
                return
            prev = pos
            for r in getattr(region, "regions", (region,)):
                ok = await (self._sendfile(r) if hasattr(r, "fd") else self._send(r.read(), True))
                if not ok:
                    return
        if prev < len(out):
            await self._send(mv[prev:], False)

    async def _send(self, data, more: bool) -> bool:
        """Write ``data`` to the socket directly (the transport's buffer is empty)."""
        self._dup_fileno()
        flags = socket.MSG_MORE if more else 0
        mv = memoryview(data)
        while mv:
            if self.closed:
                return False
            t0 = time.monotonic() if self._write_time is not None else None
            try:
                n = self._wsock.send(mv, flags)
            except BlockingIOError:
                if t0 is not None:
                    self._write_time += time.monotonic() - t0
                await self._writable()
                continue
            except OSError as e:
                log.info("closing connection from %s:%s: send failed: %s", *self.peer, e)
                self.close()
                return False
            if t0 is not None:
                self._write_time += time.monotonic() - t0
            mv = mv[n:]
            if mv:      # a short write: the send buffer is full, wait instead of a failing send
                await self._writable()
        return True

    async def _sendfile(self, region) -> bool:
        """``os.sendfile`` of the region; once the send buffer is full the rest is sent from the
        socket's writability callback, so each refill costs one callback and one syscall (no
        future, no task wake-up, no epoll registration per wait) and the coroutine resumes once,
        when the region is out."""
        self._region = [region.fd, region.position, region.length]
        if not self._sendfile_some() or not self._region[2]:
            return self._region[2] == 0 and not self.closed
        loop = asyncio.get_running_loop()
        fut = self._waiter = loop.create_future()
        wfd = self._dup_fileno()
        loop.add_writer(wfd, self._on_writable_sendfile)
        try:
            return await fut
        finally:
            self._waiter = None
            if self._wsock is not None:
                loop.remove_writer(wfd)

    def _on_writable_sendfile(self):
        fut = self._waiter
        if fut is None or fut.done():
            return
        if not self._sendfile_some():
            fut.set_result(False)
        elif not self._region[2]:
            fut.set_result(True)

    def _sendfile_some(self) -> bool:
        """One ``os.sendfile`` of what is left of ``self._region``; False when the connection is
        done for (closed, or the file ended inside the region: framing cannot be kept)."""
        if self.closed:
            return False
        fd, offset, remaining = self._region
        t0 = time.monotonic() if self._write_time is not None else None
        try:
            n = os.sendfile(self.sockfd, fd, offset, remaining)
        except BlockingIOError:
            n = -1
        except OSError as e:
            log.info("closing connection from %s:%s: sendfile failed: %s", *self.peer, e)
            self.close()
            return False
        if t0 is not None:
            self._write_time += time.monotonic() - t0
        if n == 0:      # the file is shorter than the region: cannot keep framing intact
            log.error("segment file ended inside a fetch region; closing %s:%s", *self.peer)
            self.close()
            return False
        if n > 0:
            self._region[1] = offset + n
            self._region[2] = remaining - n
        return True

    def _dup_fileno(self) -> int:
        if self._wsock is None:
            self._wsock = socket.socket(fileno=os.dup(self.sockfd))
        return self._wsock.fileno()

    async def _writable(self):
        """Wait until the socket can take more bytes (a dup'd fd, since the transport owns it);
        returns early when the connection is lost."""
        loop = asyncio.get_running_loop()
        wfd = self._dup_fileno()
        fut = self._waiter = loop.create_future()
        loop.add_writer(wfd, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            self._waiter = None
            if self._wsock is not None:
                loop.remove_writer(wfd)

"""A small asyncio Kafka client: one connection (``KafkaClientConnection``) and a cluster view
(``ClusterClient``) for tools, replica fetchers and the controller channel.

This is the one module of ``protocol/`` that does I/O; the codec stays sans-io.

>>> conn = await KafkaClientConnection.connect("127.0.0.1", 9092, client_id="me", timeout=5)
>>> resp = await conn.send(MetadataRequest(topics=None))      # version negotiated
>>> await conn.close()

* ``connect`` opens TCP and negotiates versions with ApiVersions (newest version we know; if
  the broker answers UNSUPPORTED_VERSION it retries at the version the broker advertises for
  ApiVersions, or v0).
* ``send(req, version=None, timeout=None)`` picks the highest version both sides support
  unless ``version`` is given, assigns a correlation id, writes the frame and waits for the
  response with that id.  Several ``send`` calls may be in flight at once (pipelining).
* Produce with ``acks == 0`` expects no response: ``send`` returns ``None`` once written.
* Failures are ``KafkaConnectionError`` (a ``ConnectionError``): ``BrokerUnavailableError``
  (cannot connect), ``RequestTimeoutError`` (no response in time; also an
  ``asyncio.TimeoutError``), ``ConnectionClosedError`` (the peer went away mid-request),
  ``UnsupportedVersionError`` (no common version).
"""
from __future__ import annotations

import asyncio
import os
import base64
import itertools
import random
import struct
import time
import uuid as _uuid
from typing import Any, Iterable

from protocol.api import decode_response, encode_request, make_request_header
from protocol.messages import (REQUESTS, ApiVersionsRequest,
                               FindCoordinatorRequest, MetadataRequest, ProduceRequest)
from protocol.primitives import DecodeError

API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35
DEFAULT_MAX_FRAME = 512 * 1024 * 1024
CLIENT_SOFTWARE_NAME = "odradek-python"
CLIENT_SOFTWARE_VERSION = "0.1.0"
_SIZE = struct.Struct(">i")


class KafkaConnectionError(ConnectionError):
    """Base of every failure of a client connection."""


class BrokerUnavailableError(KafkaConnectionError):
    """Could not open (or negotiate) a connection to a broker."""


class ConnectionClosedError(KafkaConnectionError):
    """The connection closed while requests were outstanding (or before sending)."""


class RequestTimeoutError(KafkaConnectionError, asyncio.TimeoutError):
    """No response within the request timeout."""


class AuthenticationError(KafkaConnectionError):
    """SASL authentication failed (or the broker refused the mechanism)."""


class UnsupportedVersionError(KafkaConnectionError):
    """The broker and this client share no version of an API."""


def uuid_to_str(u) -> str:
    """Kafka's textual form of a Uuid (URL-safe base64 without padding)."""
    if u is None:
        return "AAAAAAAAAAAAAAAAAAAAAA"
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def uuid_from_str(s: str) -> _uuid.UUID:
    return _uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


def api_name(api_key: int) -> str:
    cls = REQUESTS.get(api_key)
    return cls.__name__[:-len("Request")] if cls else f"api{api_key}"


class KafkaClientConnection:
    """One TCP connection to a Kafka-wire broker, with pipelined requests."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 host: str, port: int, client_id: str = "odradek",
                 request_timeout: float | None = 30.0, max_frame: int = DEFAULT_MAX_FRAME):
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.max_frame = max_frame
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.api_versions_version: int | None = None
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(random.randrange(1 << 20))
        self._pending: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._closed = False
        self._close_reason: BaseException | None = None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    # -- opening --------------------------------------------------------------------------------

    @property
    def socket(self):
        """The connection's socket (for options such as SO_RCVBUF), or None."""
        return self._writer.get_extra_info("socket")

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str = "odradek",
                      timeout: float | None = 30.0, request_timeout: float | None = None,
                      negotiate: bool = True, max_frame: int = DEFAULT_MAX_FRAME,
                      ssl=None, sasl: "SaslSettings | None" = None) -> "KafkaClientConnection":
        """Open a connection and (unless ``negotiate=False``) learn the broker's versions.

        ``timeout`` bounds connecting plus negotiating; ``request_timeout`` (default: ``timeout``)
        is the default per-request timeout afterwards.
        """
        where = f"{host}:{port}"
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=ssl, limit=1 << 20), timeout)
        except asyncio.TimeoutError:
            raise BrokerUnavailableError(
                f"connection to {where} timed out after {_fmt_s(timeout)}") from None
        except OSError as e:
            raise BrokerUnavailableError(
                f"connection to {where} failed: {e.strerror or e}") from None
        conn = cls(reader, writer, host=host, port=port, client_id=client_id,
                   request_timeout=request_timeout if request_timeout is not None else timeout,
                   max_frame=max_frame)
        if negotiate or sasl is not None:
            try:
                await conn.negotiate(timeout=timeout)
                if sasl is not None:
                    await conn.authenticate(sasl, timeout=timeout)
            except BaseException as e:
                await conn.close()
                if isinstance(e, KafkaConnectionError) and not isinstance(
                        e, (BrokerUnavailableError, AuthenticationError)):
                    raise BrokerUnavailableError(f"{where}: {e}") from None
                raise
        return conn

    async def negotiate(self, timeout: float | None = None) -> dict[int, tuple[int, int]]:
        """ApiVersions exchange; fills ``api_versions`` ({api_key: (min, max)})."""
        ours = ApiVersionsRequest.DEF.valid_versions[1]
        version = ours
        for _ in range(3):
            req = ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE_NAME,
                                     client_software_version=CLIENT_SOFTWARE_VERSION)
            resp = await self.send(req, version=version, timeout=timeout)
            if resp.error_code == UNSUPPORTED_VERSION:
                theirs = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
                lo_hi = theirs.get(API_VERSIONS_KEY)
                nxt = min(ours, lo_hi[1]) if lo_hi else 0
                if version == 0:
                    break
                version = nxt if nxt < version else 0
                continue
            if resp.error_code:
                raise BrokerUnavailableError(
                    f"ApiVersions failed with error code {resp.error_code}")
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            self.api_versions_version = version
            return self.api_versions
        raise UnsupportedVersionError("the broker refused every ApiVersions version")

    async def authenticate(self, sasl: "SaslSettings", timeout: float | None = None) -> None:
        """SaslHandshake v1 + SaslAuthenticate: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER or GSSAPI."""
        from protocol import scram
        from protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest
        mech = sasl.mechanism.upper()
        hs = await self.send(SaslHandshakeRequest(mechanism=mech), version=1, timeout=timeout)
        if hs.error_code:
            raise AuthenticationError(f"{self.host}:{self.port}: SASL mechanism {mech} refused (error "
                                      f"{hs.error_code}; enabled: {', '.join(hs.mechanisms)})")

        async def step(token: bytes) -> bytes:
            r = await self.send(SaslAuthenticateRequest(auth_bytes=token), timeout=timeout)
            if r.error_code:
                raise AuthenticationError(f"{self.host}:{self.port}: {r.error_message or 'SASL authentication failed'}")
            return bytes(r.auth_bytes)

        if mech == "PLAIN":
            await step(b"\0" + sasl.username.encode() + b"\0" + sasl.password.encode())
        elif mech in scram.MECHANISMS:
            c = scram.ScramClient(mech, sasl.username, sasl.password, sasl.extensions)
            server_first = await step(c.first())
            try:
                final = c.final(server_first)
                c.verify(await step(final))
            except scram.ScramError as e:
                raise AuthenticationError(f"{self.host}:{self.port}: {e}") from None
        elif mech == "GSSAPI" and sasl.kerberos is not None:
            import gssapi
            from broker.security.kerberos import GssapiClient
            from broker.security.sasl import SaslFailure
            creds, service = sasl.kerberos
            try:
                client = GssapiClient(creds, service, self.host)
                # the first step asks the KDC for a ticket: off the loop, like every step
                token = await asyncio.to_thread(client.step, None)
                while True:
                    reply = await step(token)
                    if client.complete:
                        break
                    token = await asyncio.to_thread(client.step, reply)
            except (gssapi.exceptions.GSSError, SaslFailure) as e:
                raise AuthenticationError(f"{self.host}:{self.port}: GSSAPI: {e}") from None
        elif mech == "OAUTHBEARER" and sasl.token is not None:
            # a token endpoint is asked over HTTP with retries (broker/security/oauth_login.py):
            # off the loop, which in a broker also serves clients and replication
            from broker.security.oauth_login import TokenError
            try:
                token = await asyncio.to_thread(sasl.token)
            except TokenError as e:
                raise AuthenticationError(f"{self.host}:{self.port}: no OAUTHBEARER token: {e}") from None
            challenge = await step(b"n,,\x01auth=Bearer " + token.encode("ascii") + b"\x01\x01")
            if challenge:            # the server's JSON error: acknowledge it; the server then fails us
                await step(b"\x01")
                raise AuthenticationError(f"{self.host}:{self.port}: {challenge.decode('utf-8', 'replace')}")
        else:
            raise AuthenticationError(f"SASL mechanism {mech} is not supported by this client")

    # -- versions -------------------------------------------------------------------------------
    def supports(self, api_key: int) -> bool:
        return self.version_range(api_key) is not None

    def version_range(self, api_key: int) -> tuple[int, int] | None:
        """The versions of ``api_key`` both sides support, or None."""
        cls = REQUESTS.get(api_key)
        if cls is None:
            return None
        lo, hi = cls.DEF.valid_versions
        if self.api_versions:
            theirs = self.api_versions.get(api_key)
            if theirs is None:
                return None
            lo, hi = max(lo, theirs[0]), min(hi, theirs[1])
            if lo > hi:
                return None
        return lo, hi

    def pick_version(self, api_key: int, max_version: int | None = None,
                     min_version: int | None = None) -> int:
        rng = self.version_range(api_key)
        if rng is None:
            raise UnsupportedVersionError(
                f"broker {self.host}:{self.port} does not support {api_name(api_key)}"
                + (f" (it supports {self.api_versions.get(api_key)})" if api_key in self.api_versions else ""))
        lo, hi = rng
        if max_version is not None:
            hi = min(hi, max_version)
        if min_version is not None:
            lo = max(lo, min_version)
        if lo > hi:
            raise UnsupportedVersionError(
                f"no common version of {api_name(api_key)} with broker {self.host}:{self.port}")
        return hi

    # -- requests -------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def send(self, request, version: int | None = None, timeout: float | None = None,
                   *, max_version: int | None = None, expect_response: bool | None = None):
        """Send ``request`` and return the decoded response body (None for acks=0 produce)."""
        api_key = request.API_KEY
        if version is None:
            version = self.pick_version(api_key, max_version)
        if expect_response is None:
            expect_response = not (isinstance(request, ProduceRequest) and request.acks == 0)
        if self._closed:
            raise ConnectionClosedError(self._closed_message())
        cid = next(self._ids) & 0x7FFFFFFF
        header = make_request_header(api_key, version, cid, self.client_id)
        try:
            payload = encode_request(header, request)
        except Exception as e:
            raise ValueError(f"cannot encode {type(request).__name__} v{version}: {e}") from None
        fut = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
            self._pending[cid] = (fut, api_key, version)
        try:
            self._writer.write(_SIZE.pack(len(payload)))
            self._writer.write(payload)
            await self._writer.drain()
        except (OSError, RuntimeError) as e:
            self._pending.pop(cid, None)
            self._shutdown(ConnectionClosedError(f"write to {self.host}:{self.port} failed: {e}"))
            raise ConnectionClosedError(self._closed_message()) from None
        if fut is None:
            return None
        t = self.request_timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(asyncio.shield(fut), t)
        except asyncio.TimeoutError:
            if fut.done() and not fut.cancelled():
                return fut.result()
            self._pending.pop(cid, None)
            fut.cancel()
            raise RequestTimeoutError(
                f"{api_name(api_key)} request to {self.host}:{self.port} timed out after "
                f"{_fmt_s(t)}") from None
        except asyncio.CancelledError:
            self._pending.pop(cid, None)
            raise

    async def _read_loop(self):
        reader = self._reader
        try:
            while True:
                head = await reader.readexactly(4)
                size = _SIZE.unpack(head)[0]
                if size < 4 or size > self.max_frame:
                    raise KafkaConnectionError(f"invalid response frame size {size}")
                frame = await reader.readexactly(size)
                cid = _SIZE.unpack_from(frame, 0)[0]
                entry = self._pending.pop(cid, None)
                if entry is None:
                    continue           # a response to a request that timed out
                fut, api_key, version = entry
                if fut.done():
                    continue
                try:
                    _, body = decode_response(frame, api_key, version, strict=False)
                except DecodeError as e:
                    if api_key == API_VERSIONS_KEY and version != 0:
                        # UNSUPPORTED_VERSION answers come back as v0 bodies.
                        try:
                            _, body = decode_response(frame, api_key, 0, strict=False)
                        except DecodeError:
                            fut.set_exception(KafkaConnectionError(
                                f"undecodable ApiVersions response: {e}"))
                            continue
                    else:
                        fut.set_exception(KafkaConnectionError(
                            f"undecodable {api_name(api_key)} v{version} response: {e}"))
                        continue
                fut.set_result(body)
        except asyncio.IncompleteReadError:
            self._shutdown(ConnectionClosedError(
                f"connection to {self.host}:{self.port} was closed by the broker"))
        except (OSError, KafkaConnectionError) as e:
            self._shutdown(e if isinstance(e, KafkaConnectionError) else ConnectionClosedError(
                f"connection to {self.host}:{self.port} failed: {e}"))
        except asyncio.CancelledError:
            self._shutdown(ConnectionClosedError(f"connection to {self.host}:{self.port} closed"))
            raise

    def _closed_message(self) -> str:
        if self._close_reason is not None:
            return str(self._close_reason)
        return f"connection to {self.host}:{self.port} is closed"

    def _shutdown(self, reason: BaseException):
        if self._close_reason is None:
            self._close_reason = reason
        self._closed = True
        pending, self._pending = self._pending, {}
        for fut, api_key, version in pending.values():
            if not fut.done():
                fut.set_exception(ConnectionClosedError(
                    f"{api_name(api_key)} request to {self.host}:{self.port} failed: {reason}"))
        try:
            self._writer.close()
        except Exception:
            pass

    async def close(self):
        if not self._closed:
            self._shutdown(ConnectionClosedError(f"connection to {self.host}:{self.port} closed"))
        if self._read_task is not asyncio.current_task() and not self._read_task.done():
            self._read_task.cancel()
            try:
                await self._read_task
            except BaseException:
                pass
        try:
            await asyncio.wait_for(self._writer.wait_closed(), 1.0)
        except BaseException:
            pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()


def _fmt_s(t) -> str:
    if t is None:
        return "forever"
    return f"{int(t * 1000)} ms"


# =============================================================================================
# Cluster view for tools
# =============================================================================================

def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """"host:port,host:port" -> [(host, port)]; IPv6 as [::1]:9092."""
    out = []
    for item in (servers or "").split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest.lstrip(":")
        else:
            host, sep, port = item.rpartition(":")
            if not sep:
                raise ValueError(f"invalid bootstrap server {item!r} (expected host:port)")
        try:
            p = int(port)
        except ValueError:
            raise ValueError(f"invalid port in bootstrap server {item!r}") from None
        if not host or not 0 < p < 65536:
            raise ValueError(f"invalid bootstrap server {item!r}")
        out.append((host, p))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


class Node:
    __slots__ = ("node_id", "host", "port", "rack")

    def __init__(self, node_id, host, port, rack=None):
        self.node_id, self.host, self.port, self.rack = node_id, host, port, rack

    def __repr__(self):
        return f"{self.host}:{self.port} (id: {self.node_id} rack: {self.rack})"


class ClusterClient:
    """Bootstrap, metadata, and one connection per broker node.

    ``timeout`` bounds bootstrap (retrying unreachable servers until it runs out);
    ``request_timeout`` is each request's timeout.
    """

    BOOTSTRAP = -1

    def __init__(self, bootstrap_servers: str, *, client_id: str = "odradek-tools",
                 timeout: float = 30.0, request_timeout: float = 30.0, ssl=None,
                 sasl: "SaslSettings | None" = None):
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.timeout = timeout
        self.request_timeout = request_timeout
        self.ssl = ssl
        self.sasl = sasl
        self.nodes: dict[int, Node] = {}
        self.controller_id: int = -1
        self.cluster_id: str | None = None
        self.topics: dict[str, Any] = {}          # name -> MetadataResponseTopic
        self.metadata = None
        self._conns: dict[int, KafkaClientConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._bootstrap_conn: KafkaClientConnection | None = None

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def start(self):
        await self._bootstrap_connection()
        await self.refresh_metadata(topics=[])
        return self

    async def _bootstrap_connection(self) -> KafkaClientConnection:
        if self._bootstrap_conn is not None and not self._bootstrap_conn.closed:
            return self._bootstrap_conn
        deadline = time.monotonic() + self.timeout
        last: Exception | None = None
        delay = 0.05
        while True:
            for host, port in self.bootstrap:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    conn = await KafkaClientConnection.connect(
                        host, port, client_id=self.client_id, timeout=min(left, self.request_timeout),
                        request_timeout=self.request_timeout, ssl=self.ssl, sasl=self.sasl)
                    self._bootstrap_conn = conn
                    return conn
                except AuthenticationError:
                    raise
                except KafkaConnectionError as e:
                    last = e
            left = deadline - time.monotonic()
            if left <= 0:
                servers = ",".join(f"{h}:{p}" for h, p in self.bootstrap)
                raise BrokerUnavailableError(
                    f"could not connect to any bootstrap server ({servers}) within "
                    f"{_fmt_s(self.timeout)}: {last}")
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, 1.0)

    async def any_connection(self) -> KafkaClientConnection:
        for conn in self._conns.values():
            if not conn.closed:
                return conn
        return await self._bootstrap_connection()

    async def refresh_metadata(self, topics: Iterable[str] | None = None,
                               allow_auto_topic_creation: bool = False):
        """Metadata for ``topics`` (None: every topic; []: brokers only)."""
        conn = await self.any_connection()
        version = conn.pick_version(MetadataRequest.API_KEY)
        if topics is None:
            req_topics = None if version >= 1 else []
        else:
            req_topics = [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
            if not req_topics and version == 0:
                req_topics = None
        req = MetadataRequest(topics=req_topics, allow_auto_topic_creation=allow_auto_topic_creation)
        resp = await conn.send(req, version=version)
        self.metadata = resp
        self.nodes = {b.node_id: Node(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
        self.controller_id = resp.controller_id
        self.cluster_id = resp.cluster_id
        for t in resp.topics:
            if t.error_code == 0:
                self.topics[t.name] = t
            else:
                self.topics.pop(t.name, None)
        if topics is None:
            self.topics = {t.name: t for t in resp.topics if t.error_code == 0}
        return resp

    async def connection(self, node_id: int) -> KafkaClientConnection:
        if node_id == self.BOOTSTRAP:
            return await self._bootstrap_connection()
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        lock = self._locks.setdefault(node_id, asyncio.Lock())
        async with lock:
            conn = self._conns.get(node_id)
            if conn is not None and not conn.closed:
                return conn
            node = self.nodes.get(node_id)
            if node is None:
                await self.refresh_metadata(topics=[])
                node = self.nodes.get(node_id)
                if node is None:
                    raise BrokerUnavailableError(f"broker {node_id} is not in the cluster metadata")
            b = self._bootstrap_conn
            if b is not None and not b.closed and (b.host, b.port) == (node.host, node.port) \
                    and b not in self._conns.values():
                conn = b
            else:
                conn = await KafkaClientConnection.connect(
                    node.host, node.port, client_id=self.client_id, timeout=self.request_timeout,
                    request_timeout=self.request_timeout, ssl=self.ssl, sasl=self.sasl)
            self._conns[node_id] = conn
            return conn

    async def send_to(self, node_id: int, request, version: int | None = None,
                      timeout: float | None = None, **kw):
        conn = await self.connection(node_id)
        return await conn.send(request, version=version, timeout=timeout, **kw)

    async def send_any(self, request, version: int | None = None, timeout: float | None = None,
                       **kw):
        conn = await self.any_connection()
        return await conn.send(request, version=version, timeout=timeout, **kw)

    def leader_for(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        if t is None:
            return -1
        for p in t.partitions:
            if p.partition_index == partition:
                return p.leader_id
        return -1

    async def leader(self, topic: str, partition: int, refresh: bool = False) -> int:
        leader = -1 if refresh else self.leader_for(topic, partition)
        if leader < 0:
            await self.refresh_metadata([topic])
            leader = self.leader_for(topic, partition)
        return leader

    async def send_to_leader(self, topic: str, partition: int, request,
                             version: int | None = None, timeout: float | None = None, **kw):
        leader = await self.leader(topic, partition)
        if leader < 0:
            raise BrokerUnavailableError(f"no leader for {topic}-{partition}")
        return await self.send_to(leader, request, version=version, timeout=timeout, **kw)

    async def send_to_controller(self, request, version: int | None = None,
                                 timeout: float | None = None, **kw):
        if self.controller_id < 0:
            await self.refresh_metadata(topics=[])
        node = self.controller_id if self.controller_id >= 0 else self.BOOTSTRAP
        return await self.send_to(node, request, version=version, timeout=timeout, **kw)

    async def find_coordinator(self, key: str, key_type: int = 0) -> int:
        """Node id of the coordinator of group ``key`` (``key_type`` 1: transactional id)."""
        conn = await self.any_connection()
        version = conn.pick_version(FindCoordinatorRequest.API_KEY)
        if version >= 4:
            req = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        else:
            req = FindCoordinatorRequest(key=key, key_type=key_type)
        resp = await conn.send(req, version=version)
        if version >= 4:
            c = resp.coordinators[0]
            err, msg, node_id, host, port = c.error_code, c.error_message, c.node_id, c.host, c.port
        else:
            err, msg, node_id, host, port = (resp.error_code, getattr(resp, "error_message", None),
                                             resp.node_id, resp.host, resp.port)
        if err:
            from protocol.errors import raise_for
            raise_for(err, msg or None)
        if node_id not in self.nodes or (self.nodes[node_id].host, self.nodes[node_id].port) != (host, port):
            self.nodes[node_id] = Node(node_id, host, port)
        return node_id

    async def close(self):
        conns = set(self._conns.values())
        if self._bootstrap_conn is not None:
            conns.add(self._bootstrap_conn)
        self._conns.clear()
        self._bootstrap_conn = None
        for c in conns:
            await c.close()


# ------------------------------------------------------------------------------------- security
class SaslSettings:
    """``token``: for OAUTHBEARER, a callable returning the bearer token to present (called at
    each login, so a fresh one can be minted); ``username`` is then only for log messages.
    ``extensions``: SCRAM extensions for the client-first message, e.g. ``{"tokenauth": "true"}``
    to log in with a delegation token (user name: the token id, password: base64 of its HMAC)."""

    def __init__(self, mechanism: str, username: str, password: str | None, token=None,
                 extensions: dict | None = None, kerberos=None):
        self.mechanism, self.username, self.password = mechanism, username, password
        self.token = token
        self.extensions = dict(extensions or {})
        self.kerberos = kerberos        # GSSAPI: (gssapi credentials, service name)


def security_from_properties(props: dict[str, str]):
    """(ssl context or None, SaslSettings or None) from Kafka client properties:
    ``security.protocol``, ``ssl.truststore.*`` (PEM, PKCS12 or JKS) or ``ssl.ca.location`` (PEM),
    ``ssl.keystore.*`` (PEM with key and certificate, PKCS12 or JKS) or ``ssl.certificate.location`` +
    ``ssl.key.location``, ``ssl.key.password``, ``ssl.endpoint.identification.algorithm``
    (empty disables host name checks), ``sasl.mechanism`` and ``sasl.jaas.config``
    (``username="..." password="..."``) or ``sasl.username``/``sasl.password``."""
    import re
    import ssl as _ssl
    proto = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if proto not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ValueError(f"Invalid value {proto} for configuration security.protocol")
    ctx = None
    if proto in ("SSL", "SASL_SSL"):
        # the broker's loaders read Kafka's store keys: PEM, PKCS12 and JKS files (by
        # ssl.*store.type, a JKS file also by its magic), inline PEM, the store passwords
        from broker.security.tls import _load_key_store, _load_trust_store
        ctx = _ssl.create_default_context()
        temp: list[str] = []
        get = props.get
        try:
            if props.get("ssl.ca.location"):            # librdkafka's names
                ctx.load_verify_locations(cafile=props["ssl.ca.location"])
            else:
                _load_trust_store(ctx, get, "client", temp, system_default=True)
            if props.get("ssl.certificate.location"):
                ctx.load_cert_chain(props["ssl.certificate.location"], props.get("ssl.key.location") or None,
                                    password=props.get("ssl.key.password") or None)
            else:
                _load_key_store(ctx, get, "client", temp, required=False)
        finally:
            for path in temp:
                try:
                    os.unlink(path)
                except OSError:
                    pass
        if props.get("ssl.endpoint.identification.algorithm", "https").strip() == "":
            ctx.check_hostname = False
    sasl = None
    if proto.startswith("SASL_"):
        mech = props.get("sasl.mechanism", "GSSAPI").strip().upper()
        user, pw = props.get("sasl.username"), props.get("sasl.password")
        jaas = props.get("sasl.jaas.config", "")
        if mech == "GSSAPI":
            from broker.security import jaas as J
            from broker.security.kerberos import initiator_credentials
            service = props.get("sasl.kerberos.service.name")
            if not service:
                raise ValueError("SASL GSSAPI needs sasl.kerberos.service.name")
            opts = J.parse_jaas(jaas)[1] if jaas else {"useTicketCache": "true"}
            return ctx, SaslSettings(mech, opts.get("principal", ""), None,
                                     kerberos=(initiator_credentials(opts), service))
        if mech == "OAUTHBEARER":
            # Kafka's OAUTHBEARER logins: a token from sasl.oauthbearer.token.endpoint.url with
            # the OAuthBearerLoginCallbackHandler, else the unsecured one (unsecuredLoginStringClaim_sub)
            from broker.security import jaas as J
            from broker.security.oauth_login import login_for
            opts = J.parse_jaas(jaas)[1] if jaas else {}
            name, token = login_for(lambda key, default: props.get(key) or default, opts, "sasl.jaas.config")
            return ctx, SaslSettings(mech, name, None, token=token)
        for key in ("username", "password"):
            m = re.search(key + r'\s*=\s*"((?:[^"\\]|\\.)*)"', jaas) or re.search(key + r"\s*=\s*([^\s;\"]+)", jaas)
            if m:
                value = re.sub(r"\\(.)", r"\1", m.group(1))
                if key == "username":
                    user = value
                else:
                    pw = value
        if user is None or pw is None:
            raise ValueError("sasl.jaas.config must give username and password")
        # ScramLoginModule's tokenauth="true": log in with a delegation token
        m = re.search(r'tokenauth\s*=\s*"?(true|false)"?', jaas, re.IGNORECASE)
        sasl = SaslSettings(mech, user, pw, extensions={"tokenauth": "true"}
                            if m and m.group(1).lower() == "true" else None)
    return ctx, sasl

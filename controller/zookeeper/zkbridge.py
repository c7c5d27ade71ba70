"""kazoo behind asyncio.

How this works
--------------
* ``ZkBridge`` owns one ``KazooClient``.  Blocking kazoo calls run in worker threads through
  ``await bridge.call(fn, *args)`` (``asyncio.to_thread``); nothing on the event loop blocks on
  ZooKeeper.
* kazoo delivers watches and session-state changes on its own threads.  Those callbacks do
  nothing but ``loop.call_soon_threadsafe(...)``: ``bridge.watcher(fn, *args)`` wraps a loop
  function as a one-shot kazoo watch; ``on_state`` receives "CONNECTED", "SUSPENDED", "LOST"
  (session expired or closed) and "RECONNECTED_NEW_SESSION" on the loop.
* kazoo keeps reconnecting after a session expires and opens a new session; the first
  CONNECTED after a LOST is reported as "RECONNECTED_NEW_SESSION" so the owner re-registers
  its ephemeral nodes and watches.
* A chroot in the connect string is created if missing (as Kafka does).
"""
from __future__ import annotations

import asyncio
import functools
import logging
import os
from typing import Any, Callable

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry

log = logging.getLogger("odradek.zk")


NOTIFICATION_MAX_AGE_MS = 15 * 60 * 1000     # Kafka purges change notifications older than this


async def new_notifications(bridge: "ZkBridge", path: str, children, prefix: str, after: int,
                            max_age_ms: int = NOTIFICATION_MAX_AGE_MS):
    """The sequential change notifications under ``path`` (Kafka's ``<prefix><10 digits>``
    children, listed by the caller with its watch set) that come after sequence number ``after``,
    oldest first, as ``(seq, node, data)``; ``data`` is None when the node is already gone.  A
    notification older than ``max_age_ms`` is deleted once read, as Kafka's brokers do."""
    import time

    from kazoo.exceptions import NoNodeError

    from controller.zookeeper.znodes import sequence_number
    now = int(time.time() * 1000)
    for child in sorted((c for c in children if c.startswith(prefix)), key=sequence_number):
        seq = sequence_number(child)
        if seq <= after:
            continue
        node = f"{path}/{child}"
        try:
            data, stat = await bridge.get(node)
        except NoNodeError:
            yield seq, node, None
            continue
        if now - stat.ctime > max_age_ms:
            try:
                await bridge.delete(node)
            except NoNodeError:
                pass
        yield seq, node, data


def split_chroot(connect: str) -> tuple[str, str | None]:
    i = connect.find("/")
    if i < 0:
        return connect, None
    chroot = connect[i:].rstrip("/")
    return connect[:i], (chroot or None)


class ZkBridge:
    def __init__(self, connect: str, session_timeout_ms: int = 18000, connection_timeout_ms: int = 18000,
                 on_state: Callable[[str], None] | None = None, security=None):
        self.connect = connect
        self.security = security        # controller/zookeeper/zkauth.ZkSecurity: SASL login, znode ACLs
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self.on_state = on_state
        self.loop: asyncio.AbstractEventLoop | None = None
        self.client: KazooClient | None = None
        self._lost = False
        self._closing = False

    def _new_client(self, hosts: str) -> KazooClient:
        retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0, ignore_expire=False)
        sec = self.security
        return KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000,
                           connection_retry=retry,
                           command_retry=KazooRetry(max_tries=3, delay=0.1, backoff=2, max_delay=1.0),
                           **(sec.client_args() if sec is not None else {}))

    def _acl(self, path: str, kw: dict) -> dict:
        """``kw`` with the ACL ``path`` needs (zookeeper.set.acl), unless one is given."""
        if self.security is not None and kw.get("acl") is None:
            acl = self.security.acl_for(path)
            if acl is not None:
                kw = {**kw, "acl": acl}
        return kw

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        servers, chroot = split_chroot(self.connect)
        timeout = self.connection_timeout_ms / 1000
        if chroot:
            def make_chroot():
                c = self._new_client(servers)
                c.start(timeout=timeout)
                try:
                    c.ensure_path(chroot)
                finally:
                    c.stop()
                    c.close()
            await asyncio.to_thread(make_chroot)
        self.client = self._new_client(self.connect)
        self.client.add_listener(self._listener)
        await asyncio.to_thread(self.client.start, timeout)
        self._note_session()
        log.info("connected to ZooKeeper at %s (session 0x%x)", self.connect, self.session_id)

    async def stop(self) -> None:
        self._closing = True
        if self.client is not None:
            c = self.client
            await asyncio.to_thread(lambda: (c.stop(), c.close()))

    # -- session ----------------------------------------------------------------------------
    @property
    def session_id(self) -> int:
        cid = self.client.client_id if self.client else None
        return cid[0] if cid else 0

    @property
    def session_password(self) -> bytes:
        cid = self.client.client_id if self.client else None
        return cid[1] if cid else b""

    @property
    def connected(self) -> bool:
        return self.client is not None and self.client.connected

    def _listener(self, state) -> None:        # kazoo thread
        if state == KazooState.LOST:
            self._lost = True
            name = "LOST"
        elif state == KazooState.SUSPENDED:
            name = "SUSPENDED"
        else:
            name = "CONNECTED"
            if self._lost:
                self._lost = False
                name = "RECONNECTED_NEW_SESSION"
        if name in ("CONNECTED", "RECONNECTED_NEW_SESSION"):
            self._note_session()
        if self._closing or self.loop is None or self.on_state is None:
            return
        try:
            self.loop.call_soon_threadsafe(self.on_state, name)
        except RuntimeError:
            pass                                 # loop closed

    def _note_session(self) -> None:
        """Test hook: with ODRADEK_ZK_SESSION_FILE set, write "<session id hex> <password hex>"
        there so a test harness can expire this session (tests/support/cluster.py)."""
        path = os.environ.get("ODRADEK_ZK_SESSION_FILE")
        cid = self.client.client_id if self.client else None
        if not path or not cid:
            return
        try:
            with open(path + ".tmp", "w") as f:
                f.write(f"{cid[0]:x} {cid[1].hex()}\n")
            os.replace(path + ".tmp", path)
        except OSError:
            pass

    # -- calls and watches ------------------------------------------------------------------
    async def call(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """Run a blocking kazoo call in a thread."""
        return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))

    def watcher(self, fn: Callable[..., None], *args) -> Callable[[Any], None]:
        """A one-shot kazoo watch that calls ``fn(*args)`` on the loop."""
        loop = self.loop

        def fire(event) -> None:                 # kazoo thread
            try:
                loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:
                pass
        return fire

    # conveniences (each one ZooKeeper round trip, in a thread)
    async def get(self, path: str, watch=None):
        return await self.call(self.client.get, path, watch=watch)

    async def get_children(self, path: str, watch=None) -> list[str]:
        return await self.call(self.client.get_children, path, watch=watch)

    async def exists(self, path: str, watch=None):
        return await self.call(self.client.exists, path, watch=watch)

    async def create(self, path: str, value: bytes = b"", **kw):
        return await self.call(self.client.create, path, value, **self._acl(path, kw))

    async def set(self, path: str, value: bytes, version: int = -1):
        return await self.call(self.client.set, path, value, version)

    async def delete(self, path: str, version: int = -1, recursive: bool = False):
        return await self.call(self.client.delete, path, version, recursive)

    async def ensure_path(self, path: str):
        return await self.call(self.client.ensure_path, path)

    async def transaction(self, build: Callable[[Any], None]) -> list:
        """Build and commit a multi in a thread; returns kazoo's result list (exceptions
        appear as instances in it)."""
        def run():
            t = self.client.transaction()
            create = t.create
            t.create = lambda path, value=b"", **kw: create(path, value, **self._acl(path, kw))
            build(t)
            return t.commit()
        return await self.call(run)

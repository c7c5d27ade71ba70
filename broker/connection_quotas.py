"""Connection limits, Kafka's ``ConnectionQuotas``: how many connections the broker, a listener
and a client IP may hold, and how fast new ones are accepted.

What is enforced
----------------
* ``max.connections.per.ip`` and ``max.connections.per.ip.overrides`` (``host:count,...``, each
  host resolved to its addresses when the config is read): a connection beyond the limit of its
  address is accepted and closed at once, logged as Kafka logs it (``Rejected connection from
  <ip>, address already has the configured maximum of <n> connections.``).
* ``max.connections`` (all listeners together) and ``listener.name.<l>.max.connections`` (one
  listener; without it the broker-wide value): when a listener is at its limit it stops
  accepting — the next connection waits in the kernel's backlog until one closes, as Kafka's
  acceptor blocks.  The inter-broker listener (when there is more than one listener) is only
  held to its own listener limit, never to the broker-wide one; when its connections push the
  total over ``max.connections``, the least recently active connection of another listener is
  closed to make room.
* ``max.connection.creation.rate`` (broker-wide, not applied to the protected inter-broker
  listener) and ``listener.name.<l>.max.connection.creation.rate``: accepted connections are
  counted over ``quota.window.num`` windows of ``quota.window.size.seconds``; one over the rate
  makes the listener wait ``(rate - limit) / limit`` windows (at most one window) before it
  hands the connection on and accepts the next.

* ``connection_creation_rate`` of an IP entity (``kafka-configs.sh --entity-type ips
  --entity-name <ip>`` or ``--entity-default``; AlterClientQuotas): connections of that address
  over the rate are not served — each is held open, uncounted, and closed after its throttle
  time (the same arithmetic), as Kafka does; it is taken back from the broker and listener
  rates too.

All of them are dynamic (``kafka-configs.sh --entity-type brokers``, or ``ips``): a changed limit
applies to the next connection, and a raised one lets a waiting listener go on at once.

The listeners are our own non-blocking sockets read by the event loop (``Listener``); each
accepted socket is handed to ``loop.connect_accepted_socket`` (TLS handshakes included), which
is what lets a listener stop and resume accepting.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time

from broker.config import ConfigError
from broker.client_quota import ClientAvg, ClientRate
from broker.security.tls import listener_value
from controller.api import CONNECTION_CREATION_RATE, QUOTA_IP

log = logging.getLogger("odradek.network")

INT_MAX = 2**31 - 1


def parse_ip_overrides(value: str | None) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count,host:count`` (hosts unresolved)."""
    out: dict[str, int] = {}
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip()
        try:
            n = int(count.strip())
        except ValueError:
            n = None
        if not sep or not host or n is None:
            raise ConfigError(f"Error parsing configuration property 'max.connections.per.ip.overrides': "
                              f"'{item}' is not host:count", "max.connections.per.ip.overrides")
        out[host] = n
    return out


def _as_address(host: str) -> str | None:
    import ipaddress
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def _resolve(host: str, what: str = "max.connections.per.ip.overrides") -> list[str]:
    """The addresses of ``host`` (an address is itself; a name is looked up, blocking)."""
    addr = _as_address(host)
    if addr is not None:
        return [addr]
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as e:
        log.warning("%s: cannot resolve %s (%s); its limit is not applied", what, host, e)
        return []
    return sorted({info[4][0] for info in infos})


class ConnectionQuotas:
    def __init__(self, broker, clock=time.monotonic):
        self.broker = broker
        self.clock = clock
        self.counts: dict[str, int] = {}        # client ip -> open connections
        self.listener_counts: dict[str, int] = {}
        self.total = 0
        self.listeners: dict[str, "Listener"] = {}
        self.ip_max: dict[str, int] = {}        # resolved override address -> limit
        self._overrides_raw = None
        self._lookup_gen: dict[str, int] = {}
        self.rejected = 0                       # connections closed for the per-IP limit
        self.ip_rate_max: dict[str, int] = {}   # address -> connection_creation_rate (IP quotas)
        self.default_ip_rate_max = INT_MAX      # the <default> IP entity's, if any
        self.ip_rates: dict[str, ClientRate] = {}
        self.configure()
        ctrl = getattr(broker, "controller", None)
        if ctrl is not None and hasattr(ctrl, "client_quotas"):
            self.update_ip_quotas(ctrl.client_quotas())

    # -- configuration ------------------------------------------------------------------------
    def configure(self) -> None:
        """(Re)read the limits; called at start and after a dynamic broker config change."""
        cfg = self.broker.config
        self.default_ip_max = cfg.get("max.connections.per.ip")
        raw = cfg.get("max.connections.per.ip.overrides")
        if raw != self._overrides_raw:
            self._overrides_raw = raw
            overrides = parse_ip_overrides(raw)

            def apply(addresses: dict[str, list[str]]) -> None:
                self.ip_max = {a: overrides[h] for h, addrs in addresses.items() for a in addrs}
            self._lookup("overrides", list(overrides), "max.connections.per.ip.overrides", apply)
        self.broker_max = cfg.get("max.connections")
        samples = cfg.get("quota.window.num")
        window = cfg.get("quota.window.size.seconds")
        self.window_s = float(window)
        self.broker_rate_max = cfg.get("max.connection.creation.rate")
        if getattr(self, "broker_rate", None) is None or self.broker_rate.samples != samples \
                or self.broker_rate.window != window:
            self.broker_rate = ClientRate(samples, window)
        for lst in self.listeners.values():
            lst.configure(samples, window)
        self.inter_broker = cfg.inter_broker_listener_name() if hasattr(cfg, "inter_broker_listener_name") else None
        self._close_excess()            # a lowered max.connections
        for lst in list(self.listeners.values()):
            lst.maybe_resume()

    def update_ip_quotas(self, quotas: dict) -> None:
        """IP entities of the client quotas (``connection_creation_rate``); an entity named by a
        host name applies to the addresses it resolves to, as Kafka resolves it."""
        rates: dict[str, int] = {}
        default = INT_MAX
        for entity, values in quotas.items():
            d = dict(entity)
            if set(d) != {QUOTA_IP} or CONNECTION_CREATION_RATE not in values:
                continue
            rate = int(values[CONNECTION_CREATION_RATE])
            name = d[QUOTA_IP]
            if name is None:
                default = rate
            else:
                rates[name] = rate

        def apply(addresses: dict[str, list[str]]) -> None:
            per_ip = {a: rates[h] for h, addrs in addresses.items() for a in addrs}
            if per_ip != self.ip_rate_max or default != self.default_ip_rate_max:
                log.info("IP connection rate quotas: %s, default %s", per_ip or "none",
                         default if default < INT_MAX else "none")
            self.ip_rate_max, self.default_ip_rate_max = per_ip, default
        self._lookup("ip quotas", list(rates), "the IP quota entity", apply)

    def _lookup(self, kind: str, hosts: list[str], what: str, apply) -> None:
        """``apply({host: [address]})`` for ``hosts``.  Addresses apply at once; host names are
        looked up in a worker thread when the event loop runs (a slow DNS must not stall every
        client), and until the answer is in they have no limit.  A newer call for the same
        ``kind`` supersedes a lookup still in flight."""
        gen = self._lookup_gen[kind] = self._lookup_gen.get(kind, 0) + 1
        names = [h for h in hosts if _as_address(h) is None]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if not names or loop is None:        # nothing to look up, or start-up before serving
            apply({h: _resolve(h, what) for h in hosts})
            return
        apply({h: [_as_address(h)] for h in hosts if h not in names})

        def done(fut) -> None:
            if self._lookup_gen.get(kind) == gen and not fut.cancelled() and fut.exception() is None:
                apply(fut.result())
        fut = loop.run_in_executor(None, lambda: {h: _resolve(h, what) for h in hosts})
        fut.add_done_callback(done)

    def ip_rate_limit(self, ip: str) -> int:
        return self.ip_rate_max.get(ip, self.default_ip_rate_max)

    def ip_throttle_ms(self, lst: "Listener", ip: str) -> int:
        """Count a connection of ``ip`` against its IP quota; over it, the connection is taken
        back from every rate it was counted in and the wait before closing it is returned (Kafka
        closes such a connection after the throttle time instead of serving it)."""
        limit = self.ip_rate_limit(ip)
        if limit >= INT_MAX:
            return 0
        rate = self.ip_rates.get(ip)
        if rate is None:
            if len(self.ip_rates) >= 10_000:        # forget addresses with nothing in their windows
                now = self.clock()
                for k in [k for k, r in self.ip_rates.items() if r.rate(now) == 0]:
                    del self.ip_rates[k]
            rate = self.ip_rates[ip] = ClientRate(self.broker_rate.samples, self.broker_rate.window)
        now = self.clock()
        ms = self._record(rate, limit, now)
        if ms <= 0:
            return 0
        rate.record(-1.0, now)
        if not self.protected(lst.name):
            self.broker_rate.record(-1.0, now)
        lst.rate.record(-1.0, now)
        return ms

    def listener_max(self, name: str) -> int:
        return int(listener_value(self.broker.config, name, "max.connections", INT_MAX))

    def listener_rate_max(self, name: str) -> int:
        return int(listener_value(self.broker.config, name, "max.connection.creation.rate", INT_MAX))

    def ip_limit(self, ip: str) -> int:
        return self.ip_max.get(ip, self.default_ip_max)

    # -- the acceptor's questions -------------------------------------------------------------
    def protected(self, name: str) -> bool:
        return name == self.inter_broker and len(self.listeners) > 1

    def slot_available(self, name: str) -> bool:
        if self.listener_counts.get(name, 0) >= self.listener_max(name):
            return False
        return self.protected(name) or self.total < self.broker_max

    def record_and_throttle_ms(self, lst: "Listener") -> int:
        """Count one accepted connection against the broker and listener rates; the wait before
        the next may be accepted (0 when within both)."""
        now = self.clock()
        ms = 0
        if not self.protected(lst.name):
            ms = self._record(self.broker_rate, self.broker_rate_max, now)
        return max(ms, self._record(lst.rate, self.listener_rate_max(lst.name), now))

    def _record(self, rate: ClientRate, limit: int, now: float) -> int:
        rate.record(1.0, now)
        if limit >= INT_MAX:
            return 0
        value = rate.rate(now)
        if value <= limit:
            return 0
        ms = (value - limit) / max(limit, 1e-9) * self.window_s * 1000
        return int(min(ms, self.window_s * 1000))

    def inc(self, name: str, ip: str) -> bool:
        """Count a new connection; False (and nothing counted) if its address is at its limit."""
        count = self.counts.get(ip, 0)
        limit = self.ip_limit(ip)
        if count >= limit:
            self.rejected += 1
            log.info("Rejected connection from %s, address already has the configured maximum of %d "
                     "connections.", ip, limit)
            return False
        self.counts[ip] = count + 1
        self.listener_counts[name] = self.listener_counts.get(name, 0) + 1
        self.total += 1
        if self.total > self.broker_max and self.protected(name):
            self._close_excess()
        return True

    def dec(self, name: str, ip: str) -> None:
        count = self.counts.get(ip, 0)
        if count <= 1:
            self.counts.pop(ip, None)
        else:
            self.counts[ip] = count - 1
        self.listener_counts[name] = max(0, self.listener_counts.get(name, 0) - 1)
        self.total = max(0, self.total - 1)
        for lst in self.listeners.values():
            lst.maybe_resume()

    def _close_excess(self) -> None:
        """Over ``max.connections`` (the protected listener's connections pushed it over, or the
        limit was lowered): close the least recently active connections of the other listeners
        until the count is back at the limit (Kafka's processors close one per poll, to the
        same end).  Connections already closing count as gone."""
        live = getattr(self.broker, "connections", ())
        closing = sum(1 for c in live if c.closed)
        excess = self.total - closing - self.broker_max
        if excess <= 0:
            return
        conns = sorted((c for c in live
                        if not self.protected(c.listener_name) and not c.closed), key=lambda c: c.last_active)
        for victim in conns[:excess]:
            log.info("closing the least recently used connection from %s:%s (listener %s): the "
                     "broker is over max.connections=%d", *victim.peer[:2], victim.listener_name,
                     self.broker_max)
            victim.close()


class Slot:
    """One counted connection; released exactly once, whichever way the connection ends."""

    __slots__ = ("quotas", "listener", "ip", "released")

    def __init__(self, quotas: ConnectionQuotas, listener: str, ip: str):
        self.quotas, self.listener, self.ip, self.released = quotas, listener, ip, False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.quotas.dec(self.listener, self.ip)


class Listener:
    """A listening socket (or one per address family of a wildcard host) read by the event loop."""

    def __init__(self, quotas: ConnectionQuotas, name: str, host: str | None, port: int, backlog: int,
                 factory, ssl_context):
        self.quotas, self.name, self.factory, self.ssl = quotas, name, factory, ssl_context
        self.loop = asyncio.get_running_loop()
        self.socks = _bind(host, port, backlog)
        self.rate = ClientRate(quotas.broker.config.get("quota.window.num"),
                          quotas.broker.config.get("quota.window.size.seconds"))
        self.held: tuple[socket.socket, tuple] | None = None    # accepted, waiting for a slot or a rate delay
        self.paused = False
        self.delay: asyncio.TimerHandle | None = None
        self.closed = False
        self.handshakes: set[asyncio.Task] = set()
        self.throttled: dict[socket.socket, asyncio.TimerHandle] = {}  # over an IP quota: closed later
        # metrics: time not accepting (AcceptorBlockedPercent) and the mean non-zero delays
        self.blocked_s = 0.0
        self._blocked_since: float | None = None
        cfg = quotas.broker.config
        self.rate_throttle = ClientAvg(cfg.get("quota.window.num"), cfg.get("quota.window.size.seconds"))
        self.ip_throttle = ClientAvg(cfg.get("quota.window.num"), cfg.get("quota.window.size.seconds"))
        quotas.listeners[name] = self
        quotas.listener_counts.setdefault(name, 0)
        for s in self.socks:
            self.loop.add_reader(s.fileno(), self._on_readable, s)

    def configure(self, samples, window) -> None:
        if self.rate.samples != samples or self.rate.window != window:
            self.rate = ClientRate(samples, window)
            self.rate_throttle = ClientAvg(samples, window)
            self.ip_throttle = ClientAvg(samples, window)

    # -- accepting --------------------------------------------------------------------------------
    def _pause(self) -> None:
        if not self.paused:
            self.paused = True
            self._blocked_since = time.monotonic()
            for s in self.socks:
                self.loop.remove_reader(s.fileno())

    def _resume(self) -> None:
        if self.paused and not self.closed:
            self.paused = False
            self._end_blocked()
            for s in self.socks:
                self.loop.add_reader(s.fileno(), self._on_readable, s)

    def _end_blocked(self) -> None:
        if self._blocked_since is not None:
            self.blocked_s += time.monotonic() - self._blocked_since
            self._blocked_since = None

    def blocked_seconds(self) -> float:
        """Seconds this listener has not accepted because of a limit, so far."""
        now = time.monotonic()
        return self.blocked_s + (now - self._blocked_since if self._blocked_since is not None else 0.0)

    def maybe_resume(self) -> None:
        """A slot may have freed (a connection closed, a limit was raised)."""
        if self.closed or self.delay is not None or not self.paused:
            return
        if self.held is not None:
            self._admit_held()
        if self.held is None:
            self._resume()

    def _on_readable(self, lsock: socket.socket) -> None:
        for _ in range(64):         # what one wake-up accepts at most, then other work runs
            if self.closed or self.paused:
                return
            try:
                sock, addr = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # out of descriptors: stop accepting for a second, as asyncio's servers do
                    log.error("listener %s cannot accept a connection: %s; retrying in 1 s", self.name, e)
                    self._pause()
                    self.delay = self.loop.call_later(1.0, self._delay_over)
                else:
                    log.warning("listener %s: accept failed: %s", self.name, e)
                return
            self.held = (sock, addr)
            self._admit_held()
            if self.held is not None or self.delay is not None:
                return

    def _admit_held(self) -> None:
        """The held connection goes on if a slot is free; it may leave a rate delay behind."""
        sock, addr = self.held
        q = self.quotas
        if not q.slot_available(self.name):
            self._pause()
            return
        self.held = None
        throttle_ms = q.record_and_throttle_ms(self)
        if throttle_ms > 0:
            self.rate_throttle.record(throttle_ms, q.clock())
            # Kafka's acceptor waits out the delay with this connection in hand, then goes on
            self._pause()
            self.held = (sock, addr)
            self.delay = self.loop.call_later(throttle_ms / 1000, self._delay_over, True)
            return
        self._hand_on(sock, addr)

    def _delay_over(self, rate_delay: bool = False) -> None:
        self.delay = None
        if self.closed:
            return
        if rate_delay and self.held is not None:
            sock, addr = self.held
            if not self.quotas.slot_available(self.name):
                return          # still paused; a closing connection resumes it
            self.held = None
            self._hand_on(sock, addr)
        if self.held is None:
            self._resume()

    def _hand_on(self, sock: socket.socket, addr) -> None:
        ip = addr[0] if isinstance(addr, tuple) and addr else "?"
        throttle_ms = self.quotas.ip_throttle_ms(self, ip)
        if throttle_ms > 0:
            self.ip_throttle.record(throttle_ms, self.quotas.clock())
            log.debug("Delaying closing of connection from %s for %d ms", ip, throttle_ms)
            handle = self.loop.call_later(throttle_ms / 1000, self._close_throttled, sock)
            self.throttled[sock] = handle
            return
        if not self.quotas.inc(self.name, ip):
            _close(sock)
            return
        slot = Slot(self.quotas, self.name, ip)
        sock.setblocking(False)
        task = self.loop.create_task(self._connect(sock, slot))
        self.handshakes.add(task)
        task.add_done_callback(self.handshakes.discard)

    def _close_throttled(self, sock: socket.socket) -> None:
        self.throttled.pop(sock, None)
        _close(sock)

    async def _connect(self, sock: socket.socket, slot: Slot) -> None:
        def factory():
            proto = self.factory()
            proto.quota_slot = slot
            return proto
        try:
            await self.loop.connect_accepted_socket(factory, sock, ssl=self.ssl)
        except asyncio.CancelledError:
            slot.release()
            _close(sock)
            raise
        except Exception as e:      # a failed TLS handshake, a reset before it was done
            slot.release()
            _close(sock)
            log.info("connection from %s on listener %s failed before it was set up: %s", slot.ip, self.name,
                     e or type(e).__name__)

    # -- stop ---------------------------------------------------------------------------------
    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if not self.paused:
            for s in self.socks:
                self.loop.remove_reader(s.fileno())
        if self.delay is not None:
            self.delay.cancel()
            self.delay = None
        if self.held is not None:
            _close(self.held[0])
            self.held = None
        for s in self.socks:
            s.close()
        for t in list(self.handshakes):
            t.cancel()
        for sock, handle in list(self.throttled.items()):
            handle.cancel()
            _close(sock)
        self.throttled.clear()
        self.quotas.listeners.pop(self.name, None)


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


def _bind(host: str | None, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets for ``host`` (all of its addresses; every interface, IPv4 and IPv6, for
    no host), bound with SO_REUSEADDR as asyncio's ``create_server`` binds them."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    socks: list[socket.socket] = []
    seen = set()
    try:
        for family, type_, proto, _, sa in infos:
            if (family, sa) in seen:
                continue
            seen.add((family, sa))
            try:
                s = socket.socket(family, type_, proto)
            except OSError:
                continue        # e.g. no IPv6 on this host
            socks.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                s.bind(sa)
            except OSError as e:
                raise OSError(e.errno, f"error while attempting to bind on address {sa!r}: "
                                       f"{(e.strerror or str(e)).lower()}") from None
            s.listen(backlog)
            s.setblocking(False)
    except BaseException:
        for s in socks:
            s.close()
        raise
    if not socks:
        raise OSError(f"no address to listen on for {host!r}:{port}")
    return socks

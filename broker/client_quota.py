"""Client quotas: produce and fetch byte rates per (user principal, client id), Kafka's
ClientQuotaManager with its default quota callback.

Where quotas come from
----------------------
The controller keeps quota entities (``controller.api.quota_entity``): a user, a client id, or a
user with a client id, each name possibly the default entity.  For a request of user ``u`` with
client id ``c`` the quota is the first entity that has one, in Kafka's order::

    /config/users/<u>/clients/<c>        /config/users/<default>/clients/<c>
    /config/users/<u>/clients/<default>  /config/users/<default>/clients/<default>
    /config/users/<u>                    /config/users/<default>
                                         /config/clients/<c>, /config/clients/<default>

(precisely: users/<u>/clients/<c>, users/<u>/clients/<default>, users/<u>,
users/<default>/clients/<c>, users/<default>/clients/<default>, users/<default>, clients/<c>,
clients/<default>).  The level that matches also decides who shares one rate: a user-level
quota is shared by every client id of that user, a client-id-level one by every user of that
client id, a user+client one belongs to the pair.  The user of an unauthenticated connection is
``ANONYMOUS``.  Each quota type (``producer_byte_rate``, ``consumer_byte_rate``) is resolved on
its own.

How a rate is measured and a throttle computed
----------------------------------------------
Bytes are recorded into ``quota.window.num`` windows of ``quota.window.size.seconds`` (11 x 1 s).
The rate is the sum over the live windows divided by the time since the oldest began, but never by
less than ``quota.window.num - 1`` whole windows (Kafka's ``Rate.windowSize``), so a fresh client
may send a burst of up to ten seconds' worth before it is throttled.  After a request's bytes are
recorded, a rate ``O`` above the quota ``T`` gives the throttle time ``(O - T) / T * W`` (W: that
window size), the time after which the average is back at the quota if nothing more is sent.

What a throttle does
--------------------
* Produce: the request's record bytes are counted (Kafka counts the whole request; the framing is
  a few dozen bytes more), the response carries ``throttle_time_ms``.
* Fetch (consumers only; follower fetches are under the replication quotas, ``broker/quota.py``):
  ``max_bytes`` is capped at what the quota allows in one window span; the answer's record bytes
  are counted, and when that puts the client over its quota the bytes are taken back and the
  answer is empty (no partitions), with ``throttle_time_ms`` — as Kafka does.
* The connection is muted: no further request of it is read or handled for the throttle time
  (``KafkaConnection._throttle``).  Clients that throttle themselves (KIP-219: Produce v6+, Fetch
  v8+) get the response at once; older versions get it when the throttle time has passed.

When no quota of a type is configured anywhere, ``broker.produce_quota`` / ``broker.fetch_quota``
is None and the hot paths do nothing but that check.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from broker.quota import SampledRate
from controller.api import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, QUOTA_CLIENT_ID, QUOTA_USER

log = logging.getLogger("odradek.quota")

_ABSENT = object()
MAX_SENSORS = 100_000           # forget idle sensors beyond this many (Kafka expires them after an hour)


class ClientRate(SampledRate):
    """Kafka's ``Rate`` over a ``SampledStat``: the elapsed time counts at least ``samples - 1``
    whole windows."""

    __slots__ = ()

    def window_size(self, now: float) -> float:
        self._expire(now)
        w = self._windows
        elapsed = now - w[0][0] if w else 0.0
        full = int(elapsed // self.window)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window
        return max(elapsed, 1e-3)

    def rate(self, now: float) -> float:
        size = self.window_size(now)
        return sum(s[1] for s in self._windows) / size


def user_of(principal: str) -> str:
    """The quota user of a principal ("User:alice" -> "alice")."""
    return principal.split(":", 1)[1] if ":" in principal else principal


class ClientQuotaManager:
    """One quota type (``producer_byte_rate`` or ``consumer_byte_rate``)."""

    def __init__(self, key: str, samples: int = 11, window_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        self.key = key
        self.samples = max(1, int(samples))
        self.window = float(window_s)
        self.clock = clock
        self.overrides: dict[tuple, float] = {}          # (user, client) with _ABSENT / None=default
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float | None]] = {}
        self.sensors: dict[tuple[str, str], ClientRate] = {}

    # -- configuration ---------------------------------------------------------------------------
    def update(self, quotas: dict[tuple, dict[str, float]]) -> bool:
        """Take this type's quotas from the controller's entity map; True if any is set."""
        overrides = {}
        for entity, values in quotas.items():
            v = values.get(self.key)
            if v is None:
                continue
            d = dict(entity)
            overrides[(d.get(QUOTA_USER, _ABSENT), d.get(QUOTA_CLIENT_ID, _ABSENT))] = float(v)
        if overrides != self.overrides:
            log.info("%s quotas: %s", self.key, {_text(k): v for k, v in overrides.items()} or "none")
        self.overrides = overrides
        self._resolved = {}
        return bool(overrides)

    def metric_tags(self, user: str, client: str) -> tuple[str, str]:
        """Who shares the rate of (user, client): Kafka's DefaultQuotaCallback.quotaMetricTags."""
        o = self.overrides
        if (user, client) in o or (user, None) in o:
            return user, client
        if (user, _ABSENT) in o:
            return user, ""
        if (None, client) in o or (None, None) in o:
            return user, client
        if (None, _ABSENT) in o:
            return user, ""
        return "", client

    def quota_limit(self, tags: tuple[str, str]) -> float | None:
        """The quota of a sensor (DefaultQuotaCallback.quotaLimit); None: unbounded."""
        user, client = tags
        o = self.overrides
        if user and client:
            for k in ((user, client), (user, None), (None, client), (None, None)):
                if k in o:
                    return o[k]
        elif user:
            for k in ((user, _ABSENT), (None, _ABSENT)):
                if k in o:
                    return o[k]
        elif client:
            for k in ((_ABSENT, client), (_ABSENT, None)):
                if k in o:
                    return o[k]
        return None

    def resolve(self, user: str, client: str) -> tuple[tuple[str, str], float | None]:
        key = (user, client)
        r = self._resolved.get(key)
        if r is None:
            tags = self.metric_tags(user, client or "")
            r = self._resolved[key] = (tags, self.quota_limit(tags))
        return r

    def quota(self, user: str, client: str) -> float | None:
        return self.resolve(user, client)[1]

    # -- recording -------------------------------------------------------------------------------
    def _sensor(self, tags) -> ClientRate:
        s = self.sensors.get(tags)
        if s is None:
            if len(self.sensors) >= MAX_SENSORS:
                self._forget_idle()
            s = self.sensors[tags] = ClientRate(self.samples, self.window)
        return s

    def _forget_idle(self) -> None:
        now = self.clock()
        for tags in [t for t, s in self.sensors.items() if s.rate(now) == 0.0]:
            del self.sensors[tags]

    def record(self, user: str, client: str, amount: float) -> int:
        """Record ``amount`` bytes; the throttle time in ms (0 when within the quota)."""
        tags, bound = self.resolve(user, client)
        now = self.clock()
        sensor = self._sensor(tags)
        sensor.record(amount, now)
        if bound is None:
            return 0
        size = sensor.window_size(now)
        rate = sum(s[1] for s in sensor._windows) / size
        if rate <= bound:
            return 0
        return int(round((rate - bound) / bound * size * 1000))

    def unrecord(self, user: str, client: str, amount: float) -> None:
        tags, _ = self.resolve(user, client)
        self._sensor(tags).record(-amount, self.clock())

    def max_value_in_window(self, user: str, client: str) -> float | None:
        """The most one request may be given without certainly being throttled (Kafka's
        getMaxValueInQuotaWindow); None: no quota."""
        bound = self.quota(user, client)
        if bound is None:
            return None
        return bound * (self.samples - 1) * self.window

    # -- the hooks of the produce and fetch handlers --------------------------------------------
    def on_produce(self, ctx, req) -> int:
        size = 0
        for t in req.topic_data:
            for pd in t.partition_data:
                if pd.records is not None:
                    size += len(pd.records)
        ms = self.record(user_of(ctx.principal), ctx.client_id or "", size)
        if ms > 0:
            ctx.connection.throttle_ms = ms
        return ms

    def cap_fetch(self, ctx, req) -> None:
        """Cap the fetch's max_bytes at what the quota allows in one window span."""
        cap = self.max_value_in_window(user_of(ctx.principal), ctx.client_id or "")
        if cap is not None and req.max_bytes > cap:
            req.max_bytes = max(int(cap), 1)
            if req.min_bytes > req.max_bytes:
                req.min_bytes = req.max_bytes

    def on_fetch(self, ctx, size: int) -> int:
        """Record an answer of ``size`` bytes; when that throttles, take them back (the caller
        answers without partitions)."""
        user, client = user_of(ctx.principal), ctx.client_id or ""
        ms = self.record(user, client, size)
        if ms > 0:
            self.unrecord(user, client, size)
            ctx.connection.throttle_ms = ms
        return ms


def _text(k) -> str:
    user, client = k
    parts = []
    if user is not _ABSENT:
        parts.append(f"user={'<default>' if user is None else user}")
    if client is not _ABSENT:
        parts.append(f"client-id={'<default>' if client is None else client}")
    return ",".join(parts)


class ClientQuotas:
    """The broker's produce and fetch quota managers, fed from the controller."""

    def __init__(self, broker):
        self.broker = broker
        cfg = broker.config
        samples, window = cfg.get("quota.window.num"), cfg.get("quota.window.size.seconds")
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window)

    def refresh(self) -> None:
        """Re-read the quotas; the broker's hooks are set only for types with a quota."""
        quotas = self.broker.controller.client_quotas()
        b = self.broker
        b.produce_quota = self.produce if self.produce.update(quotas) else None
        b.fetch_quota = self.fetch if self.fetch.update(quotas) else None


def shall_client_throttle(api_key: int, version: int) -> bool:
    """KIP-219: does the client throttle itself after this response (so the broker sends it at
    once and only mutes the connection)?  Produce v6+, Fetch v8+ (AbstractResponse
    .shouldClientThrottle)."""
    if api_key == 0:
        return version >= 6
    if api_key == 1:
        return version >= 8
    return True

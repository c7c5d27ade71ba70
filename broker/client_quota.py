"""Client quotas per (user principal, client id), Kafka's ClientQuotaManager with its default
quota callback: produce and fetch byte rates, request time (``request_percentage``) and
controller mutations (``controller_mutation_rate``).

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
``ANONYMOUS``.  Each quota type is resolved on its own.

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
* Request time (``RequestQuotaManager``): the event-loop time of each request of a quota'd
  client — its decoding, every step of its handler coroutine (not the time it awaits), the
  encoding of its answer — in percent of a second, over the same windows; throttle at most one
  window.  Cluster-internal requests, follower fetches, acks=0 produces and SASL are exempt.
* Controller mutations (``MutationQuotaManager``): partitions created or deleted, against a token
  bucket; strict for CreateTopics v6+ / CreatePartitions v3+ / DeleteTopics v5+ (topics refused
  with THROTTLING_QUOTA_EXCEEDED once the bucket is below zero), permissive before.
* The connection is muted: no further request of it is read or handled for the throttle time
  (``KafkaConnection._throttle``).  Clients that throttle themselves (KIP-219: Produce v6+, Fetch
  v8+, ... ``CLIENT_THROTTLES_FROM``) get the response at once; older versions get it when the
  throttle time has passed.

When no quota of a type is configured anywhere, ``broker.produce_quota`` / ``fetch_quota`` /
``request_quota`` / ``mutation_quota`` is None and the hot paths do nothing but that check.
docs/quotas.md explains the measures and why.
"""
from __future__ import annotations

import functools
import logging
import time
from typing import Callable

from broker.quota import SampledRate
from broker.quota_callback import KafkaPrincipal, entity_of, is_user_client, tags_key
from controller.api import (CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, QUOTA_CLIENT_ID,
                            QUOTA_USER, REQUEST_PERCENTAGE)

log = logging.getLogger("odradek.quota")

_ABSENT = object()
#: the ClientQuotaType a quota key is, for a client.quota.callback.class (broker/quota_callback.py)
CALLBACK_TYPES = {PRODUCER_BYTE_RATE: "PRODUCE", CONSUMER_BYTE_RATE: "FETCH", REQUEST_PERCENTAGE: "REQUEST",
                  CONTROLLER_MUTATION_RATE: "CONTROLLER_MUTATION"}
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


class ClientAvg(SampledRate):
    """Kafka's ``Avg`` over a ``SampledStat``: the mean of the values recorded in the live
    windows, NaN when none was (the ``throttle-time`` metrics)."""

    __slots__ = ("_counts",)

    def __init__(self, samples: int, window: float):
        super().__init__(samples, window)
        self._counts: dict[float, int] = {}     # window start -> values recorded in it

    def record(self, amount: float, now: float) -> None:
        super().record(amount, now)
        start = self._windows[-1][0]
        self._counts[start] = self._counts.get(start, 0) + 1
        if len(self._counts) > len(self._windows):
            self._prune()

    def _prune(self) -> None:
        live = {w[0] for w in self._windows}
        for start in [t for t in self._counts if t not in live]:
            del self._counts[start]

    def value(self, now: float) -> float:
        self._expire(now)
        self._prune()
        n = sum(self._counts.values())
        return sum(w[1] for w in self._windows) / n if n else float("nan")


def throttle(conn, ms: int, manager: "ClientQuotaManager", tags: tuple[str, str]) -> None:
    """Mute ``conn`` for ``ms`` unless a longer throttle is already set.  The quota whose
    throttle is the longest gets it recorded in its ``throttle-time`` when the connection is muted
    (Kafka records the throttle in the one manager that throttles the channel)."""
    if ms > conn.throttle_ms:
        conn.throttle_ms = ms
        conn.throttled_by = (manager, tags)


def user_of(principal: str) -> str:
    """The quota user of a principal ("User:alice" -> "alice")."""
    return principal.split(":", 1)[1] if ":" in principal else principal


class ClientQuotaManager:
    """One quota type (``producer_byte_rate`` or ``consumer_byte_rate``).

    With a ``callback`` (client.quota.callback.class, ``broker/quota_callback.py``) the plug-in
    decides the tags (who shares a rate) and the limits; the rates, throttles and muting are the
    same.  The "user" a request is resolved with is then its whole principal ("User:alice"), which
    the callback gets as a KafkaPrincipal (``ident``)."""

    def __init__(self, key: str, samples: int = 11, window_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        self.key = key
        self.samples = max(1, int(samples))
        self.window = float(window_s)
        self.clock = clock
        self.overrides: dict[tuple, float] = {}          # (user, client) with _ABSENT / None=default
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float | None]] = {}
        self.sensors: dict[tuple[str, str], ClientRate] = {}
        self.throttle_times: dict[tuple[str, str], ClientAvg] = {}
        self.callback = None
        self.quota_type = CALLBACK_TYPES.get(key, key)
        self._limits: dict[tuple, float | None] = {}        # callback: tags key -> its limit
        self._tag_maps: dict[tuple, dict[str, str]] = {}    # callback: tags key -> the tags it returned

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
        if self.callback is not None:
            self._tell_callback(self.overrides, overrides)
        self.overrides = overrides
        self._resolved = {}
        self._limits = {}
        return bool(overrides) or self.callback is not None

    def _tell_callback(self, old: dict, new: dict) -> None:
        """update_quota / remove_quota for each quota of this type that changed."""
        cb = self.callback
        update, remove = getattr(cb, "update_quota", None), getattr(cb, "remove_quota", None)
        try:
            for k, v in new.items():
                if update is not None and old.get(k) != v:
                    update(self.quota_type, entity_of(k), v)
            for k in old:
                if remove is not None and k not in new:
                    remove(self.quota_type, entity_of(k))
        except Exception:   # noqa: BLE001 - the limits are asked again anyway
            log.warning("quota callback %s failed to take a %s quota change", type(cb).__name__,
                        self.quota_type, exc_info=True)

    def reset_limits(self) -> None:
        """Ask the callback for every limit again (after update_cluster_metadata said so)."""
        self._limits = {}

    def ident(self, ctx) -> tuple[str, str]:
        """What a request's quota is resolved with: (user, client id), or with a callback
        (principal, client id)."""
        principal = str(ctx.principal)
        return (principal if self.callback is not None else user_of(principal)), ctx.client_id or ""

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
        if self.callback is not None:
            return self._callback_limit(tags)
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

    def _callback_limit(self, key: tuple) -> float | None:
        limit = self._limits.get(key, _ABSENT)
        if limit is _ABSENT:
            tags = self._tag_maps.get(key)
            if tags is None:
                tags = {"user": key[0], "client-id": key[1]} if is_user_client(key) else dict(key)
            raw = self.callback.quota_limit(self.quota_type, dict(tags))
            limit = self._limits[key] = None if raw is None else float(raw)
        return limit

    def _resolve_callback(self, principal: str, client: str) -> tuple[tuple, float | None]:
        """Kafka asks quotaResetRequired and quotaMetricTags for every request."""
        cb = self.callback
        reset = getattr(cb, "quota_reset_required", None)
        if reset is not None and reset(self.quota_type):
            self._limits = {}
        tags = cb.quota_metric_tags(self.quota_type, KafkaPrincipal.parse(principal), client)
        key = tags_key(tags)
        if key not in self._tag_maps:
            if len(self._tag_maps) >= MAX_SENSORS:
                self._tag_maps = {k: v for k, v in self._tag_maps.items() if k in self.sensors}
                self._limits = {}
            self._tag_maps[key] = dict(tags)
        return key, self._callback_limit(key)

    def resolve(self, user: str, client: str) -> tuple[tuple[str, str], float | None]:
        if self.callback is not None:
            return self._resolve_callback(user, client)
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
            self.throttle_times.pop(tags, None)

    def record_throttle(self, tags: tuple[str, str], ms: int) -> None:
        """A connection of ``tags`` was muted for ``ms`` because of this quota."""
        t = self.throttle_times.get(tags)
        if t is None:
            t = self.throttle_times[tags] = ClientAvg(self.samples, self.window)
        t.record(ms, self.clock())

    def metric_values(self) -> list[tuple[tuple[str, str], float, float]]:
        """(user, client id), rate, average throttle ms (NaN: none) of every sensor."""
        now = self.clock()
        nan = float("nan")
        return [(tags, s.rate(now), self.throttle_times[tags].value(now) if tags in self.throttle_times else nan)
                for tags, s in self.sensors.items()]

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

    def record_no_throttle(self, user: str, client: str, amount: float) -> None:
        """Count ``amount`` without asking whether that throttles (it weighs on later requests)."""
        tags, _ = self.resolve(user, client)
        self._sensor(tags).record(amount, self.clock())

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
        user, client = self.ident(ctx)
        ms = self.record(user, client, size)
        if ms > 0:
            throttle(ctx.connection, ms, self, self.resolve(user, client)[0])
        return ms

    def cap_fetch(self, ctx, req) -> None:
        """Cap the fetch's max_bytes at what the quota allows in one window span."""
        cap = self.max_value_in_window(*self.ident(ctx))
        if cap is not None and req.max_bytes > cap:
            req.max_bytes = max(int(cap), 1)
            if req.min_bytes > req.max_bytes:
                req.min_bytes = req.max_bytes

    def on_fetch(self, ctx, size: int) -> int:
        """Record an answer of ``size`` bytes; when that throttles, take them back (the caller
        answers without partitions)."""
        user, client = self.ident(ctx)
        ms = self.record(user, client, size)
        if ms > 0:
            self.unrecord(user, client, size)
            throttle(ctx.connection, ms, self, self.resolve(user, client)[0])
        return ms


def _text(k) -> str:
    user, client = k
    parts = []
    if user is not _ABSENT:
        parts.append(f"user={'<default>' if user is None else user}")
    if client is not _ABSENT:
        parts.append(f"client-id={'<default>' if client is None else client}")
    return ",".join(parts)


# -------------------------------------------------------------------------- request_percentage
#: Requests never charged to the request quota: the controller's and other brokers' requests
#: (Kafka answers them "exempt from throttling"), and SASL, which Kafka handles in its network
#: layer before a request reaches the handlers.  A follower's Fetch and an acks=0 Produce are
#: exempt too (``RequestQuotaManager.exempt``).
REQUEST_QUOTA_EXEMPT = frozenset((
    4,      # LeaderAndIsr
    5,      # StopReplica
    6,      # UpdateMetadata
    7,      # ControlledShutdown
    17,     # SaslHandshake
    27,     # WriteTxnMarkers
    36,     # SaslAuthenticate
    56,     # AlterPartition
))


class _Timed:
    """Await a coroutine and add up the time the event loop spends inside it.

    Each step of the coroutine (from resuming it to its next suspension) runs on the loop's
    thread and nothing else runs meanwhile, so the sum of the steps is what this request cost the
    broker, while the time it sits waiting (a long-polling fetch, acks=all replication, the
    controller) costs nothing: Kafka's request-handler time, without its purgatory time.
    """

    __slots__ = ("coro", "busy", "first")

    def __init__(self, coro):
        self.coro = coro
        self.busy = 0.0
        self.first = None           # when the first step began

    def __await__(self):
        coro = self.coro
        clock = time.monotonic
        value = None
        error = None
        while True:
            t = clock()
            if self.first is None:
                self.first = t
            try:
                step = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                self.busy += clock() - t
                return done.value
            except BaseException:
                self.busy += clock() - t
                raise
            self.busy += clock() - t
            value = error = None
            try:
                value = yield step
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:      # cancellation and the like go on into the handler
                error = e


class RequestQuotaManager(ClientQuotaManager):
    """``request_percentage`` (KIP-124): the share of one request thread a client may use.

    The time the event loop spends on a request (decoding it, every step of its handler,
    encoding the answer) is recorded as a percentage of a second: 10 ms is 1.  The rate of that
    over the quota windows is the client's share of the loop; above its quota the throttle time
    is computed as for the byte quotas but never more than one window (Kafka's
    ``ClientRequestQuotaManager``).  The answer carries the throttle time (when its version has
    the field) and the connection is muted for it.
    """

    def __init__(self, samples: int = 11, window_s: float = 1.0, clock: Callable[[], float] = time.monotonic):
        super().__init__(REQUEST_PERCENTAGE, samples, window_s, clock)
        self.max_throttle_ms = int(self.window * 1000)
        # Kafka's broker-wide exempt-request-time: the time of the exempt requests, same units
        self.exempt_time = ClientRate(self.samples, self.window)

    def record(self, user: str, client: str, amount: float) -> int:
        ms = super().record(user, client, amount)
        return ms if ms <= self.max_throttle_ms else self.max_throttle_ms

    @staticmethod
    def exempt(key: int, body, version: int) -> bool:
        if key in REQUEST_QUOTA_EXEMPT:
            return True
        if key == 0:
            return body.acks == 0
        if key == 1:
            return (body.replica_state.replica_id if version >= 15 else body.replica_id) >= 0
        return False

    async def handle(self, ctx, key: int, body, coro, started: float):
        """Run a request's handler coroutine, charging its time to the client's quota; called by
        the connection for every request while some request quota exists."""
        if self.exempt(key, body, ctx.api_version):
            timed = _Timed(coro)
            response = await timed
            self.exempt_time.record((timed.busy + max(timed.first - started, 0.0)) * 100, self.clock())
            return response
        user, client = self.ident(ctx)
        if self.quota(user, client) is None:
            return await coro
        timed = _Timed(coro)
        response = await timed
        busy = timed.busy + max(timed.first - started, 0.0)       # + decoding the request
        ms = self.record(user, client, busy * 100)
        conn = ctx.connection
        if ms > 0:
            if response is not None:
                if key == 1 and response.responses:
                    _drop_fetch_answer(ctx, response)
                if hasattr(response, "throttle_time_ms") and (response.throttle_time_ms or 0) < ms:
                    response.throttle_time_ms = ms
            throttle(conn, ms, self, self.resolve(user, client)[0])
        if response is not None:            # encoding the answer is charged too, when it is done
            conn.charge = functools.partial(self._charge, user, client)
        return response

    def _charge(self, user: str, client: str, seconds: float) -> None:
        self.record_no_throttle(user, client, seconds * 100)


def _drop_fetch_answer(ctx, response) -> None:
    """A consumer's Fetch over its request quota gets an empty answer, as in Kafka; bytes the
    fetch quota has counted for it are taken back."""
    fq = ctx.broker.fetch_quota
    if fq is not None and not response.throttle_time_ms:
        size = 0
        for t in response.responses:
            for p in t.partitions:
                r = p.records
                if r is not None:
                    size += r.length if hasattr(r, "length") else len(r)
        if size:
            fq.unrecord(*fq.ident(ctx), size)
    response.responses = []


# -------------------------------------------------------------------------- controller_mutation_rate
class TokenBucket:
    """Kafka's ``TokenBucket`` stat: credits refill at the quota per second up to a burst of
    ``samples x window x quota``; a new bucket starts full.  Recording takes credits away and
    may leave the bucket below zero (debt the refill pays off)."""

    __slots__ = ("tokens", "last")

    def __init__(self):
        self.tokens: float | None = None
        self.last = 0.0

    def measure(self, quota: float, burst: float, now: float) -> float:
        if self.tokens is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + quota * max(now - self.last, 0.0))
        self.last = now
        return self.tokens

    def record(self, amount: float, quota: float, burst: float, now: float) -> float:
        self.tokens = min(burst, self.measure(quota, burst, now) - amount)
        return self.tokens


class MutationQuota:
    """One request's view of its client's mutation bucket (Kafka's Strict- and
    PermissiveControllerMutationQuota).

    Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic is admitted while
    the bucket is not below zero — then all its partitions are taken, even if that goes below —
    and refused once it is; a refusal sets the throttle time to what refills the bucket to zero.
    Permissive (older versions): everything is admitted and recorded; a bucket left below zero
    sets the throttle time.
    """

    __slots__ = ("bucket", "bound", "burst", "strict", "clock", "_throttle_ms", "_at", "manager", "tags")

    def __init__(self, bucket: TokenBucket, bound: float, burst: float, strict: bool, clock,
                 manager: "MutationQuotaManager | None" = None, tags: tuple[str, str] = ("", "")):
        self.manager, self.tags = manager, tags
        self.bucket = bucket
        self.bound = bound
        self.burst = burst
        self.strict = strict
        self.clock = clock
        self._throttle_ms = 0
        self._at = 0.0

    def admit(self, partitions: int) -> bool:
        """Take ``partitions`` mutations; False: refused (THROTTLING_QUOTA_EXCEEDED)."""
        now = self.clock()
        b = self.bucket
        if self.strict:
            tokens = b.measure(self.bound, self.burst, now)
            if tokens < 0:
                self._violated(tokens, now)
                return False
            b.record(partitions, self.bound, self.burst, now)
            self._count(partitions, now)
            return True
        tokens = b.record(partitions, self.bound, self.burst, now)
        self._count(partitions, now)
        if tokens < 0:
            self._violated(tokens, now)
        return True

    def _count(self, partitions: int, now: float) -> None:
        if self.manager is not None:        # the mutation-rate metric
            self.manager._sensor(self.tags).record(partitions, now)

    def _violated(self, tokens: float, now: float) -> None:
        self._throttle_ms = int(round(-tokens / self.bound * 1000))
        self._at = now

    @property
    def exceeded(self) -> bool:
        return self.strict and self._throttle_ms > 0

    def throttle_ms(self) -> int:
        """The throttle time of the last violation, less the time since (Kafka's throttleTime)."""
        if not self._throttle_ms:
            return 0
        return max(0, self._throttle_ms - int((self.clock() - self._at) * 1000))


class MutationQuotaManager(ClientQuotaManager):
    """``controller_mutation_rate`` (KIP-599): partitions created or deleted per second, measured
    with a token bucket per user / client id (same precedence and sharing as the other types) over
    ``controller.quota.window.num`` windows of ``controller.quota.window.size.seconds``."""

    def __init__(self, samples: int = 11, window_s: float = 1.0, clock: Callable[[], float] = time.monotonic):
        super().__init__(CONTROLLER_MUTATION_RATE, samples, window_s, clock)
        self.buckets: dict[tuple[str, str], TokenBucket] = {}

    def quota_for(self, ctx, strict: bool) -> MutationQuota | None:
        """The request's quota; None when its client has none (nothing is counted then)."""
        tags, bound = self.resolve(*self.ident(ctx))
        if bound is None:
            return None
        b = self.buckets.get(tags)
        if b is None:
            if len(self.buckets) >= MAX_SENSORS:
                self._forget_full()
            b = self.buckets[tags] = TokenBucket()
        return MutationQuota(b, bound, self.samples * self.window * bound, strict, self.clock, self, tags)

    def tokens(self, tags: tuple[str, str]) -> float:
        """The credits left in a client's bucket (the ``tokens`` metric); NaN without a quota."""
        bound, b = self.quota_limit(tags), self.buckets.get(tags)
        if bound is None:
            return float("nan")
        burst = self.samples * self.window * bound
        return burst if b is None else b.measure(bound, burst, self.clock())

    def _forget_full(self) -> None:
        """Drop the buckets that are full again (or lost their quota): a new one starts full."""
        now = self.clock()
        for tags, b in list(self.buckets.items()):
            bound = self.quota_limit(tags)
            if bound is None:
                del self.buckets[tags]
                continue
            burst = self.samples * self.window * bound
            if b.measure(bound, burst, now) >= burst:
                del self.buckets[tags]


def apply_mutation_throttle(ctx, quota: MutationQuota | None) -> int:
    """After a CreateTopics / CreatePartitions / DeleteTopics: the throttle time its answer
    carries, and the connection is muted for it."""
    if quota is None:
        return 0
    ms = quota.throttle_ms()
    if ms > 0:
        throttle(ctx.connection, ms, quota.manager, quota.tags)
    return ms


class ClientQuotas:
    """The broker's quota managers, fed from the controller."""

    def __init__(self, broker, callback=None):
        self.broker = broker
        cfg = broker.config
        samples, window = cfg.get("quota.window.num"), cfg.get("quota.window.size.seconds")
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window)
        self.request = RequestQuotaManager(samples, window)
        self.mutation = MutationQuotaManager(cfg.get("controller.quota.window.num"),
                                             cfg.get("controller.quota.window.size.seconds"))
        self.callback = callback
        for m in self.managers():
            m.callback = callback

    def managers(self) -> tuple:
        return self.produce, self.fetch, self.request, self.mutation

    def cluster_changed(self) -> None:
        """A callback's update_cluster_metadata, after topics, partitions or brokers changed;
        True from it: every limit is asked again."""
        fn = getattr(self.callback, "update_cluster_metadata", None)
        if fn is None:
            return
        from broker.quota_callback import ClusterMetadata
        ctrl = self.broker.controller
        meta = ClusterMetadata(ctrl.cluster_id, ctrl.controller_id, self.broker.broker_id,
                               list(ctrl.brokers()), dict(ctrl.topics()))
        try:
            changed = fn(meta)
        except Exception:   # noqa: BLE001 - keep the limits it gave so far
            log.warning("quota callback %s failed on a metadata change", type(self.callback).__name__,
                        exc_info=True)
            return
        if changed:
            for m in self.managers():
                m.reset_limits()

    def refresh(self) -> None:
        """Re-read the quotas; the broker's hooks are set only for types with a quota."""
        quotas = self.broker.controller.client_quotas()
        b = self.broker
        b.produce_quota = self.produce if self.produce.update(quotas) else None
        b.fetch_quota = self.fetch if self.fetch.update(quotas) else None
        b.request_quota = self.request if self.request.update(quotas) else None
        b.mutation_quota = self.mutation if self.mutation.update(quotas) else None


# KIP-219: from which version a client throttles itself after a response with a throttle time
# (Kafka's ``shouldClientThrottle`` of each response); other APIs and older versions rely on the
# broker, which then holds the response back for the throttle time.
CLIENT_THROTTLES_FROM = {
    0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2, 18: 2,
    19: 3, 20: 2, 21: 1, 22: 1, 24: 1, 25: 1, 26: 1, 28: 1, 29: 1, 30: 1, 31: 1, 32: 2, 33: 1,
    34: 1, 35: 1, 37: 1, 38: 1, 39: 1, 40: 1, 41: 1, 42: 1, 43: 0, 44: 0, 45: 0, 46: 0, 47: 0,
    50: 0, 51: 0, 62: 0, 63: 0, 64: 0, 75: 0,
}


def shall_client_throttle(api_key: int, version: int) -> bool:
    """KIP-219: does the client throttle itself after this response (so the broker sends it at
    once and only mutes the connection)?  E.g. Produce v6+, Fetch v8+, CreateTopics v3+."""
    since = CLIENT_THROTTLES_FROM.get(api_key)
    return since is not None and version >= since

"""Replication throttles: the two quotas Kafka keeps per broker (its ReplicationQuotaManager).

Which replicas are throttled comes from the topic configs
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``: a list of
``partition:brokerId`` entries, or ``*`` for every replica of the topic.  A broker keeps only
the entries naming itself, so ``0:4`` in the follower list throttles partition 0 on broker 4
when it fetches, and ``0:1`` in the leader list throttles partition 0 on broker 1 when it
answers followers.  How fast comes from the per-broker dynamic configs
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` (bytes/s, the
default Long.MAX means no cap).

Each quota measures the bytes moved for throttled partitions as a rate over a sliding window of
``samples`` windows of ``window`` seconds (Kafka's replication.quota.window.num = 11 and
replication.quota.window.size.seconds = 1).  The rate is the sum over the live windows divided
by the time since the oldest one began, but never by less than one window, so a first burst
does not read as an enormous rate.  While the rate is above the cap the quota is *exceeded*:
the leader leaves throttled partitions of followers outside the ISR out of its fetch answers,
the follower leaves throttled partitions that are not in sync out of its fetch requests.  The
bytes of a fetch that was allowed are counted whole, so one fetch may overshoot; the next ones
wait until the average is back under the cap.  Unthrottled partitions are never held back.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Callable, Mapping

from broker.configdefs import LONG_MAX

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"

DEFAULT_SAMPLES = 11
DEFAULT_WINDOW_S = 1.0

ALL = "*"


class SampledRate:
    """Bytes per second over the last ``samples`` windows of ``window`` seconds."""

    __slots__ = ("samples", "window", "_windows")

    def __init__(self, samples: int = DEFAULT_SAMPLES, window: float = DEFAULT_WINDOW_S):
        self.samples = max(1, int(samples))
        self.window = float(window)
        self._windows: deque[list[float]] = deque()     # [start, amount], oldest first

    def _expire(self, now: float) -> None:
        age = self.samples * self.window
        w = self._windows
        while w and now - w[0][0] >= age:
            w.popleft()

    def record(self, amount: float, now: float) -> None:
        self._expire(now)
        w = self._windows
        if not w or now >= w[-1][0] + self.window:
            w.append([now, 0.0])
            if len(w) > self.samples:
                w.popleft()
        w[-1][1] += amount

    def rate(self, now: float) -> float:
        self._expire(now)
        w = self._windows
        if not w:
            return 0.0
        total = sum(s[1] for s in w)
        return total / max(now - w[0][0], self.window)


def parse_throttled(value, broker_id: int):
    """The partitions a throttled-replicas config value names for ``broker_id``: ``ALL`` for
    ``*``, else a frozenset of partition ids.  Malformed entries are skipped."""
    if value is None:
        return frozenset()
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    out = set()
    for item in items:
        item = str(item).strip()
        if not item:
            continue
        if item == ALL:
            return ALL
        p, sep, b = item.partition(":")
        if not sep:
            continue
        try:
            if int(b.strip()) == broker_id:
                out.add(int(p.strip()))
        except ValueError:
            continue
    return frozenset(out)


class ReplicationQuota:
    """One side (leader or follower) of a broker's replication throttle."""

    def __init__(self, rate_key: str, replicas_key: str, broker_id: int, config,
                 topic_configs: Callable[[str], Mapping[str, str] | None],
                 clock: Callable[[], float] = time.monotonic,
                 samples: int = DEFAULT_SAMPLES, window: float = DEFAULT_WINDOW_S):
        self.rate_key = rate_key
        self.replicas_key = replicas_key
        self.broker_id = broker_id
        self.config = config                    # anything with .get(key) (BrokerConfig, dict)
        self.topic_configs = topic_configs      # topic -> its raw overrides, or None
        self.clock = clock
        self.rate = SampledRate(samples, window)
        self._parsed: dict[str, tuple[object, object]] = {}    # topic -> (raw value, parsed)

    @property
    def bound(self) -> int:
        v = self.config.get(self.rate_key)
        return LONG_MAX if v is None else int(v)

    def is_throttled(self, topic: str, partition: int) -> bool:
        cfg = self.topic_configs(topic)
        raw = cfg.get(self.replicas_key) if cfg else None
        if not raw:
            if topic in self._parsed:
                del self._parsed[topic]
            return False
        cached = self._parsed.get(topic)
        if cached is None or cached[0] != raw:
            cached = self._parsed[topic] = (raw, parse_throttled(raw, self.broker_id))
        parts = cached[1]
        return parts is ALL or partition in parts

    def is_exceeded(self) -> bool:
        bound = self.bound
        if bound >= LONG_MAX:
            return False
        return self.rate.rate(self.clock()) > bound

    def should_throttle(self, topic: str, partition: int, in_sync: bool) -> bool:
        """Leave this partition out for now: a throttled replica, not in sync, quota exceeded."""
        return not in_sync and self.is_throttled(topic, partition) and self.is_exceeded()

    def record(self, nbytes: int) -> None:
        if nbytes > 0:
            self.rate.record(nbytes, self.clock())

    def current_rate(self) -> float:
        return self.rate.rate(self.clock())


def _windows(config, prefix: str) -> tuple[int, float]:
    """(samples, seconds per sample) from ``<prefix>.window.num`` / ``.window.size.seconds``."""
    def get(key, default):
        try:
            v = config.get(key)
        except KeyError:
            v = None
        return default if v is None else v
    return int(get(prefix + ".window.num", DEFAULT_SAMPLES)), float(get(prefix + ".window.size.seconds",
                                                                        DEFAULT_WINDOW_S))


def replication_quotas(broker_id: int, config, topic_configs, clock: Callable[[], float] = time.monotonic):
    """(leader quota, follower quota) of a broker, sampled as replication.quota.window.num and
    replication.quota.window.size.seconds say."""
    samples, window = _windows(config, "replication.quota")
    return (ReplicationQuota(LEADER_RATE, LEADER_REPLICAS, broker_id, config, topic_configs, clock,
                             samples, window),
            ReplicationQuota(FOLLOWER_RATE, FOLLOWER_REPLICAS, broker_id, config, topic_configs, clock,
                             samples, window))

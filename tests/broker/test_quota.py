"""broker/quota.py: the sampled rate and the replication quotas, on a fake clock."""
from broker.config import BrokerConfig
from broker.configdefs import LONG_MAX
from broker.quota import (ALL, FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, ReplicationQuota,
                          SampledRate, parse_throttled, replication_quotas)


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t

    def advance(self, s):
        self.t += s


# ----------------------------------------------------------------- SampledRate

def test_rate_of_nothing_is_zero():
    assert SampledRate().rate(5.0) == 0.0


def test_a_first_burst_counts_over_one_whole_window():
    r = SampledRate(samples=11, window=1.0)
    r.record(1000, 10.0)
    assert r.rate(10.0) == 1000.0          # not 1000 / 0
    assert r.rate(10.5) == 1000.0
    assert r.rate(12.0) == 500.0           # 1000 bytes over 2 s


def test_rate_spreads_over_the_windows_seen():
    r = SampledRate(samples=11, window=1.0)
    for i in range(5):
        r.record(100, 10.0 + i)
    assert r.rate(15.0) == 500 / 5


def test_old_windows_expire():
    r = SampledRate(samples=3, window=1.0)
    r.record(900, 0.0)
    assert r.rate(2.5) == 900 / 2.5
    assert r.rate(3.0) == 0.0              # 3 windows later the sample is gone
    r.record(100, 3.0)
    r.record(100, 4.0)
    assert r.rate(5.0) == 200 / 2


def test_record_in_the_same_window_adds_up():
    r = SampledRate(samples=2, window=1.0)
    r.record(10, 0.0)
    r.record(20, 0.4)
    r.record(30, 0.9)
    assert r.rate(0.9) == 60.0
    assert len(r._windows) == 1


def test_windows_never_exceed_the_sample_count():
    r = SampledRate(samples=4, window=1.0)
    for i in range(20):
        r.record(1, i * 1.0)
    assert len(r._windows) <= 4


# ----------------------------------------------------------------- throttled replica lists

def test_parse_throttled_keeps_this_brokers_entries():
    assert parse_throttled("0:1,0:2,1:1,2:3", 1) == frozenset({0, 1})
    assert parse_throttled("0:1,0:2,1:1,2:3", 3) == frozenset({2})
    assert parse_throttled("0:1", 9) == frozenset()
    assert parse_throttled(" 0 : 4 , 1:4 ", 4) == frozenset({0, 1})
    assert parse_throttled("*", 7) is ALL
    assert parse_throttled(["0:4", "3:4"], 4) == frozenset({0, 3})
    assert parse_throttled("", 1) == frozenset()
    assert parse_throttled(None, 1) == frozenset()
    assert parse_throttled("junk,0:x,2:5", 5) == frozenset({2})


def _quota(rate, replicas, broker_id=4, clock=None):
    topics = {"t": {FOLLOWER_REPLICAS: replicas}} if replicas is not None else {}
    cfg = {FOLLOWER_RATE: rate}
    return ReplicationQuota(FOLLOWER_RATE, FOLLOWER_REPLICAS, broker_id, cfg, topics.get,
                            clock or Clock()), topics, cfg


def test_is_throttled_follows_topic_config_changes():
    q, topics, _ = _quota(100, "0:4,1:4")
    assert q.is_throttled("t", 0) and q.is_throttled("t", 1)
    assert not q.is_throttled("t", 2)
    assert not q.is_throttled("other", 0)
    topics["t"] = {FOLLOWER_REPLICAS: "2:4"}
    assert not q.is_throttled("t", 0) and q.is_throttled("t", 2)
    topics["t"] = {FOLLOWER_REPLICAS: "*"}
    assert q.is_throttled("t", 99)
    topics["t"] = {}
    assert not q.is_throttled("t", 2)
    assert "t" not in q._parsed


def test_quota_exceeded_until_the_rate_is_back_under():
    clock = Clock()
    q, _, _ = _quota(1000, "0:4", clock=clock)
    assert not q.is_exceeded()
    assert not q.should_throttle("t", 0, in_sync=False)
    q.record(5000)                         # one fetch may overshoot
    assert q.is_exceeded()
    assert q.should_throttle("t", 0, in_sync=False)
    assert not q.should_throttle("t", 1, in_sync=False)    # unthrottled partition
    assert not q.should_throttle("t", 0, in_sync=True)     # in-sync replicas are never held back
    clock.advance(4.9)
    assert q.is_exceeded()                 # 5000 B over 4.9 s > 1000 B/s
    clock.advance(0.2)
    assert not q.is_exceeded()             # 5000 B over 5.1 s


def test_the_rate_cap_can_change_and_be_removed():
    clock = Clock()
    q, _, cfg = _quota(1000, "0:4", clock=clock)
    q.record(5000)
    assert q.is_exceeded()
    cfg[FOLLOWER_RATE] = 10_000
    assert not q.is_exceeded()
    cfg[FOLLOWER_RATE] = 1000
    assert q.is_exceeded()
    del cfg[FOLLOWER_RATE]                 # unset: no cap
    assert q.bound == LONG_MAX and not q.is_exceeded()


def test_throttled_transfer_averages_to_the_rate():
    """A fetcher that fetches a chunk whenever the quota allows moves about rate bytes/s."""
    clock = Clock()
    q, _, _ = _quota(100_000, "0:4", clock=clock)
    moved = 0
    chunk = 64 * 1024
    while moved < 3_000_000:
        if not q.should_throttle("t", 0, in_sync=False):
            q.record(chunk)
            moved += chunk
        clock.advance(0.01)
    elapsed = clock.t - 1000.0
    assert 0.9 * (moved - chunk) / 100_000 <= elapsed <= 1.1 * moved / 100_000


def test_replication_quotas_read_a_broker_config_dynamically():
    cfg = BrokerConfig({"broker.id": "1", "log.dirs": "/tmp/x"}, validate=False)
    topics = {"t": {LEADER_REPLICAS: "0:1,0:2", FOLLOWER_REPLICAS: "0:3"}}
    clock = Clock()
    leader, follower = replication_quotas(1, cfg, topics.get, clock)
    assert leader.is_throttled("t", 0) and not follower.is_throttled("t", 0)
    assert leader.bound == LONG_MAX
    leader.record(10_000_000)
    assert not leader.is_exceeded()        # no rate set: never exceeded
    cfg.set_dynamic(per_broker={LEADER_RATE: "1000", FOLLOWER_RATE: "2000"})
    assert leader.bound == 1000 and follower.bound == 2000
    assert leader.is_exceeded() and not follower.is_exceeded()
    cfg.set_dynamic(per_broker={})
    assert not leader.is_exceeded()


def test_replication_quota_windows_come_from_the_config():
    """replication.quota.window.num / .window.size.seconds shape both sides' sampled rates: two
    windows of 5 s here, so 1,000 bytes recorded 8 s ago still count, and 11 s ago no longer."""
    cfg = BrokerConfig({"replication.quota.window.num": "2", "replication.quota.window.size.seconds": "5"})
    leader, follower = replication_quotas(0, cfg, lambda t: None)
    for q in (leader, follower):
        assert (q.rate.samples, q.rate.window) == (2, 5.0)
    assert [(q.rate.samples, q.rate.window) for q in replication_quotas(0, BrokerConfig({}), lambda t: None)] == \
        [(11, 1.0), (11, 1.0)]
    leader.rate.record(1000, 100.0)
    assert leader.rate.rate(108.0) > 0
    assert leader.rate.rate(111.0) == 0

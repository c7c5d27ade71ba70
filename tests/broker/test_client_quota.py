"""Client quota units: Kafka's 8-level precedence, the rate window, throttle times, request checks
and the Describe filter (no broker process)."""
from __future__ import annotations

import pytest

import asyncio
import time

from broker.client_quota import (ClientQuotaManager, ClientRate, MutationQuotaManager, RequestQuotaManager,
                                 TokenBucket, _Timed, shall_client_throttle, user_of)
from broker.handlers.quotas import _FilterError, describe
from controller.api import (apply_client_quota_changes, check_client_quota_entry, quota_entity,
                            quota_entity_from_path, quota_entity_path)
from protocol.messages import DescribeClientQuotasRequest as DR

P = "producer_byte_rate"


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def manager(quotas, samples=11, window=1.0, clock=None):
    m = ClientQuotaManager(P, samples, window, clock or Clock())
    m.update({e: {P: v} for e, v in quotas.items()})
    return m


LEVELS = [
    (quota_entity(user="u", client_id="c"), 1),
    (quota_entity(user="u", client_id=None), 2),
    (quota_entity(user="u"), 3),
    (quota_entity(user=None, client_id="c"), 4),
    (quota_entity(user=None, client_id=None), 5),
    (quota_entity(user=None), 6),
    (quota_entity(client_id="c"), 7),
    (quota_entity(client_id=None), 8),
]


def test_precedence_eight_levels():
    """Removing the most specific level each time falls through to the next, in Kafka's order."""
    for i in range(len(LEVELS)):
        m = manager({e: float(v) for e, v in LEVELS[i:]})
        assert m.quota("u", "c") == LEVELS[i][1], i
    assert manager({}).quota("u", "c") is None


def test_sharing_follows_the_matching_level():
    m = manager({quota_entity(user="u"): 100.0})
    assert m.resolve("u", "a")[0] == m.resolve("u", "b")[0] == ("u", "")    # one rate per user
    assert m.quota("v", "a") is None
    m = manager({quota_entity(client_id=None): 100.0})
    assert m.resolve("u", "a")[0] == m.resolve("v", "a")[0] == ("", "a")    # one rate per client id
    assert m.resolve("u", "a")[0] != m.resolve("u", "b")[0]
    m = manager({quota_entity(user=None, client_id=None): 100.0})
    assert m.resolve("u", "a")[0] == ("u", "a")


def test_other_types_do_not_count():
    m = ClientQuotaManager(P)
    assert not m.update({quota_entity(client_id="c"): {"consumer_byte_rate": 5.0}})
    assert m.quota("u", "c") is None


def test_rate_window_and_throttle_time():
    clock = Clock()
    r = ClientRate(11, 1.0)
    r.record(1000, clock.t)
    assert r.window_size(clock.t) == pytest.approx(10.0)       # at least samples - 1 windows
    assert r.rate(clock.t) == pytest.approx(100.0)
    m = manager({quota_entity(client_id="c"): 100.0}, clock=clock)
    assert m.record("u", "c", 1000) == 0                         # exactly at the quota
    # 2000 bytes over a 10 s window: rate 200 = 2x the quota -> (200-100)/100 * 10 s
    assert m.record("u", "c", 1000) == 10000
    clock.t += 30                                                # all windows expired
    assert m.record("u", "c", 500) == 0


def test_small_window_config_and_unrecord():
    clock = Clock()
    m = manager({quota_entity(client_id="c"): 1000.0}, samples=2, window=1.0, clock=clock)
    assert m.max_value_in_window("u", "c") == 1000.0
    assert m.record("u", "c", 1000) == 0
    assert m.record("u", "c", 1000) == 1000          # (2000 - 1000) / 1000 * 1 s
    m.unrecord("u", "c", 1000)
    assert m.record("u", "c", 0) == 0


def test_user_of_and_kip219_versions():
    assert user_of("User:alice") == "alice" and user_of("User:ANONYMOUS") == "ANONYMOUS"
    assert shall_client_throttle(0, 6) and not shall_client_throttle(0, 5)
    assert shall_client_throttle(1, 8) and not shall_client_throttle(1, 7)
    assert shall_client_throttle(19, 3) and not shall_client_throttle(19, 2)     # CreateTopics
    assert shall_client_throttle(20, 2) and not shall_client_throttle(20, 1)     # DeleteTopics
    assert shall_client_throttle(37, 1) and not shall_client_throttle(37, 0)     # CreatePartitions
    assert shall_client_throttle(44, 0)                                           # IncrementalAlterConfigs
    assert not shall_client_throttle(48, 1) and not shall_client_throttle(60, 0)  # Kafka: broker delays


def test_entity_paths_round_trip():
    for e, path in [(quota_entity(user="a b"), "users/a%20b"),
                    (quota_entity(user=None, client_id="c*"), "users/<default>/clients/c%2A"),
                    (quota_entity(client_id=None), "clients/<default>"),
                    (quota_entity(user="u", client_id=None), "users/u/clients/<default>")]:
        assert quota_entity_path(e) == path
        assert quota_entity_from_path(path) == e
    assert quota_entity_from_path("topics/x") is None


def test_alteration_checks():
    ok = check_client_quota_entry([("client-id", "c")], [(P, 1024.0, False)])
    assert ok[0] is None and ok[1] == quota_entity(client_id="c") and ok[2] == {P: 1024.0}
    cases = [
        ([], [], "Invalid empty client quota entity"),
        ([("client-id", "c")], [("bogus", 1.0, False)], "Invalid configuration key bogus"),
        ([("client-id", "c")], [(P, 0.0, False)], "Quota producer_byte_rate must be greater than 0"),
        ([("client-id", "c")], [(P, 1.5, False)], "Configuration producer_byte_rate must be a LONG value"),
        ([("client-id", "")], [(P, 1.0, False)], "Empty client-id not supported"),
        ([("group", "g")], [(P, 1.0, False)], "Unhandled client quota entity type: group"),
        ([("user", "u"), ("user", "v")], [], "Invalid client quota entity, duplicate entity entry user"),
        ([("ip", "1.2.3.4"), ("user", "u")], [], "Invalid quota entity combination, IP entity should not be "
                                                 "used with user/client ID entity."),
    ]
    for entity, ops, msg in cases:
        bad, _, _ = check_client_quota_entry(entity, ops)
        assert bad is not None and bad.error_code == 42 and bad.error_message == msg, (entity, ops)
    bad, _, _ = check_client_quota_entry([("user", "u")], [(P, 1.0, False), (P, 2.0, False)])
    assert bad.error_message.startswith("Duplicate quota key producer_byte_rate")
    assert check_client_quota_entry([("user", "u")], [("request_percentage", 12.5, False)])[0] is None
    assert check_client_quota_entry([("user", "u")], [("nothing_known", 0, True)])[0] is None   # removal


def test_ip_entity_checks():
    C = "connection_creation_rate"
    ok = check_client_quota_entry([("ip", "10.1.2.3")], [(C, 25.0, False)])
    assert ok[0] is None and ok[1] == quota_entity(ip="10.1.2.3") and ok[2] == {C: 25.0}
    assert check_client_quota_entry([("ip", None)], [(C, 5.0, False)])[1] == quota_entity(ip=None)
    assert check_client_quota_entry([("ip", "localhost")], [(C, 5.0, False)])[0] is None   # resolvable
    cases = [
        ([("ip", "no-such-host.invalid")], [(C, 1.0, False)],
         "no-such-host.invalid is not a valid IP or resolvable host."),
        ([("ip", "10.1.2.3")], [(P, 1.0, False)], "Invalid configuration key producer_byte_rate"),
        ([("user", "u")], [(C, 1.0, False)], "Invalid configuration key connection_creation_rate"),
        ([("ip", "10.1.2.3")], [(C, 1.5, False)], "Configuration connection_creation_rate must be a INT value"),
        ([("ip", "10.1.2.3")], [(C, 2.0 ** 31, False)],
         "Proposed value for connection_creation_rate is too large for an INT."),
    ]
    for entity, ops, msg in cases:
        bad, _, _ = check_client_quota_entry(entity, ops)
        assert bad is not None and bad.error_code == 42 and bad.error_message == msg, (entity, ops)
    for e, path in [(quota_entity(ip="10.1.2.3"), "ips/10.1.2.3"), (quota_entity(ip=None), "ips/<default>")]:
        assert quota_entity_path(e) == path and quota_entity_from_path(path) == e


def test_apply_changes_drops_empty_entities():
    e = quota_entity(user="u")
    q = apply_client_quota_changes({}, [(e, {P: 5.0, "consumer_byte_rate": 6.0})])
    q = apply_client_quota_changes(q, [(e, {P: None})])
    assert q == {e: {"consumer_byte_rate": 6.0}}
    assert apply_client_quota_changes(q, [(e, {"consumer_byte_rate": None})]) == {}


def comp(t, mt, m=None):
    return DR.ComponentData(entity_type=t, match_type=mt, match=m)


def test_describe_filters():
    q = {quota_entity(user="u"): {P: 1.0}, quota_entity(user=None): {P: 2.0},
         quota_entity(user="u", client_id="c"): {P: 3.0}, quota_entity(client_id="c"): {P: 4.0},
         quota_entity(client_id=None): {P: 5.0}}

    def vals(components, strict):
        return sorted(v[P] for _, v in describe(q, components, strict))
    assert vals([], False) == [1, 2, 3, 4, 5]
    assert vals([], True) == []
    assert vals([comp("user", 0, "u")], False) == [1, 3]
    assert vals([comp("user", 0, "u")], True) == [1]
    assert vals([comp("user", 1)], True) == [2]
    assert vals([comp("user", 2)], True) == [1, 2]
    assert vals([comp("client-id", 0, "c")], False) == [3, 4]
    assert vals([comp("user", 2), comp("client-id", 2)], True) == [3]
    assert vals([comp("client-id", 1)], True) == [5]
    assert vals([comp("ip", 2)], False) == []
    q[quota_entity(ip="10.0.0.1")] = {P: 6.0}       # (an IP entity's key is connection_creation_rate;
    q[quota_entity(ip=None)] = {P: 7.0}             #  the filters do not look at keys)
    assert vals([comp("ip", 2)], False) == [6, 7]
    assert vals([comp("ip", 1)], True) == [7]
    assert vals([comp("ip", 0, "10.0.0.1")], True) == [6]
    assert vals([comp("user", 2)], False) == [1, 2, 3]
    assert vals([], False) == [1, 2, 3, 4, 5, 6, 7]
    for components, code, msg in [
            ([comp("user", 2), comp("user", 1)], 42, "Duplicate user filter component entity type"),
            ([comp("", 2)], 42, "Unexpected empty filter component entity type"),
            ([comp("group", 2)], 35, "Custom entity type 'group' not supported"),
            ([comp("ip", 2), comp("user", 2)], 42, None)]:
        with pytest.raises(_FilterError) as ei:
            describe(q, components, False)
        assert ei.value.code == code
        if msg:
            assert str(ei.value) == msg


# ----------------------------------------------------------------------- controller_mutation_rate
M = "controller_mutation_rate"


class _Ctx:
    """What the quota managers read of a request context."""

    def __init__(self, client="c", principal="User:u"):
        self.client_id = client
        self.principal = principal


def mutation_manager(quotas, samples=11, window=1.0, clock=None):
    m = MutationQuotaManager(samples, window, clock or Clock())
    m.update({e: {M: v} for e, v in quotas.items()})
    return m


def test_token_bucket_starts_full_refills_and_caps_at_the_burst():
    b = TokenBucket()
    assert b.measure(2.0, 22.0, 100.0) == 22.0             # new bucket: full
    assert b.record(30, 2.0, 22.0, 100.0) == -8.0           # may go below zero
    assert b.measure(2.0, 22.0, 102.0) == pytest.approx(-4.0)   # refills at the quota
    assert b.measure(2.0, 22.0, 200.0) == 22.0              # never above the burst


def test_strict_quota_admits_while_not_below_zero_then_refuses():
    clock = Clock()
    m = mutation_manager({quota_entity(client_id="c"): 2.0}, clock=clock)    # burst 11 x 1 s x 2 = 22
    q = m.quota_for(_Ctx(), strict=True)
    assert [q.admit(10), q.admit(10), q.admit(5)] == [True, True, True]     # 22 -> 12 -> 2 -> -3
    assert q.throttle_ms() == 0 and not q.exceeded         # admitted: no throttle yet (Kafka's strict quota)
    assert q.admit(1) is False and q.exceeded
    assert q.throttle_ms() == 1500                         # 3 tokens short at 2/s
    clock.t += 1.0
    assert q.throttle_ms() == 500                          # less the time since the refusal
    q2 = m.quota_for(_Ctx(), strict=True)                  # a later request shares the bucket
    assert q2.admit(1) is False
    clock.t += 1.0                                          # refilled to +1: admitted again
    assert q2.admit(4) is True
    assert m.quota_for(_Ctx(client="other"), strict=True) is None    # no quota, nothing counted


def test_permissive_quota_admits_everything_and_throttles_the_debt():
    clock = Clock()
    m = mutation_manager({quota_entity(user="u"): 1.0}, samples=2, clock=clock)    # burst 2
    q = m.quota_for(_Ctx(client="a"), strict=False)
    assert q.admit(2) and q.throttle_ms() == 0
    assert q.admit(3) and q.throttle_ms() == 3000          # 3 below zero at 1/s
    # user-level quota: every client id of the user draws on one bucket
    assert m.quota_for(_Ctx(client="b"), strict=True).admit(1) is False


# ----------------------------------------------------------------------- request_percentage
def test_request_quota_throttle_is_capped_at_one_window():
    clock = Clock()
    m = RequestQuotaManager(2, 1.0, clock)
    m.update({quota_entity(client_id="c"): {"request_percentage": 10.0}})
    assert m.record("u", "c", 10.0) == 0                   # 100 ms in a 1 s window: 10 %
    assert m.record("u", "c", 10.0) == 1000                # 20 %: (20-10)/10 x 1 s
    assert m.record("u", "c", 100.0) == 1000               # far over: still one window at most


def test_request_quota_exemptions():
    class Body:
        acks = 0
        replica_id = 1
    assert RequestQuotaManager.exempt(4, None, 0) and RequestQuotaManager.exempt(36, None, 2)
    assert RequestQuotaManager.exempt(0, Body, 9)          # acks=0 produce
    assert RequestQuotaManager.exempt(1, Body, 12)         # follower fetch
    Body.acks, Body.replica_id = 1, -1
    assert not RequestQuotaManager.exempt(0, Body, 9) and not RequestQuotaManager.exempt(1, Body, 12)
    assert not RequestQuotaManager.exempt(3, None, 12) and not RequestQuotaManager.exempt(18, None, 3)


def _spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_timed_counts_the_steps_not_the_waits():
    async def handler():
        _spin(0.02)
        await asyncio.sleep(0.3)            # waiting (a long poll, replication) costs nothing
        _spin(0.02)
        return "answer"

    async def main():
        t = _Timed(handler())
        assert await t == "answer"
        return t.busy
    busy = asyncio.run(main())
    assert 0.035 < busy < 0.2, busy


def test_timed_passes_exceptions_and_cancellation_through():
    async def failing():
        await asyncio.sleep(0)
        raise KeyError("x")

    caught = []

    async def cancelled():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            caught.append(True)
            raise

    async def main():
        with pytest.raises(KeyError):
            await _Timed(failing())
        task = asyncio.ensure_future(_wrap(cancelled()))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def _wrap(coro):
        return await _Timed(coro)
    asyncio.run(main())
    assert caught == [True]


class _Conn:
    def __init__(self):
        self.throttle_ms = 0
        self.charge = None


class _Broker:
    fetch_quota = None


class _ReqCtx(_Ctx):
    def __init__(self, client="c", version=12):
        super().__init__(client)
        self.api_version = version
        self.connection = _Conn()
        self.broker = _Broker()


def test_request_quota_handle_times_throttles_and_charges_the_encoding():
    from protocol.messages import MetadataResponse
    m = RequestQuotaManager(2, 1.0)
    m.update({quota_entity(client_id="c"): {"request_percentage": 1.0}})     # 10 ms per second

    async def handler():
        _spin(0.05)                          # 5 % of a 1 s window: over the quota
        return MetadataResponse(throttle_time_ms=0, brokers=[], topics=[])

    ctx = _ReqCtx()
    resp = asyncio.run(m.handle(ctx, 3, None, handler(), time.monotonic()))
    assert 0 < resp.throttle_time_ms <= 1000 and ctx.connection.throttle_ms == resp.throttle_time_ms
    assert ctx.connection.charge is not None
    before = m.sensors[("", "c")].rate(time.monotonic())
    ctx.connection.charge(0.5)                # the encoding's half second weighs on what follows
    assert m.sensors[("", "c")].rate(time.monotonic()) > before
    # another client id: no quota, not timed, untouched
    other = _ReqCtx(client="d")
    resp = asyncio.run(m.handle(other, 3, None, handler(), time.monotonic()))
    assert resp.throttle_time_ms == 0 and other.connection.throttle_ms == 0 and other.connection.charge is None
    # exempt: the controller's UpdateMetadata
    exempt = _ReqCtx()
    asyncio.run(m.handle(exempt, 6, None, handler(), time.monotonic()))
    assert exempt.connection.throttle_ms == 0 and exempt.connection.charge is None


def test_request_quota_empties_a_throttled_fetch_and_returns_its_bytes():
    from protocol.messages import FetchResponse as F
    m = RequestQuotaManager(2, 1.0)
    m.update({quota_entity(client_id="c"): {"request_percentage": 1.0}})
    fq = ClientQuotaManager("consumer_byte_rate", 2, 1.0)
    fq.update({quota_entity(client_id="c"): {"consumer_byte_rate": 1e9}})
    fq.record("u", "c", 300)                  # what the fetch handler counted for this answer

    async def handler():
        _spin(0.05)
        return F(throttle_time_ms=0, error_code=0, session_id=0, responses=[F.FetchableTopicResponse(
            topic="t", partitions=[F.PartitionData(partition_index=0, records=b"x" * 300)])])

    class Body:
        replica_id = -1
    ctx = _ReqCtx(version=12)
    ctx.broker.fetch_quota = fq
    resp = asyncio.run(m.handle(ctx, 1, Body, handler(), time.monotonic()))
    assert resp.responses == [] and resp.throttle_time_ms > 0
    assert fq.sensors[("", "c")].rate(time.monotonic()) == 0     # the 300 bytes were taken back


def test_full_buckets_are_forgotten_when_too_many(monkeypatch):
    import broker.client_quota as cq
    monkeypatch.setattr(cq, "MAX_SENSORS", 2)
    clock = Clock()
    m = mutation_manager({quota_entity(client_id=None): 1.0}, samples=2, clock=clock)
    m.quota_for(_Ctx(client="a"), strict=True).admit(5)          # in debt: kept
    m.quota_for(_Ctx(client="b"), strict=True).admit(0)          # full: may go
    m.quota_for(_Ctx(client="c"), strict=True)
    assert set(m.buckets) == {("", "a"), ("", "c")}


# ----------------------------------------------------------------------------- client.quota.callback.class
class _Callback:
    """A quota callback: one rate per team (client id up to '-'), limits from a dict."""

    def __init__(self, limits=None):
        self.limits = dict(limits or {})
        self.asked = []                 # quota_limit calls
        self.events = []
        self.reset = False

    def quota_metric_tags(self, quota_type, principal, client_id):
        self.events.append(("tags", quota_type, principal.principal_type, principal.name, client_id))
        team = client_id.split("-", 1)[0]
        return {} if team == "all" else {"team": team}

    def quota_limit(self, quota_type, tags):
        self.asked.append((quota_type, dict(tags)))
        return self.limits.get((quota_type, tags.get("team")))

    def update_quota(self, quota_type, entity, value):
        self.events.append(("update", quota_type, [(e.entity_type, e.name) for e in entity.config_entities], value))

    def remove_quota(self, quota_type, entity):
        self.events.append(("remove", quota_type, [(e.entity_type, e.name) for e in entity.config_entities]))

    def quota_reset_required(self, quota_type):
        r, self.reset = self.reset, False
        return r


def _with_callback(m, cb):
    m.callback = cb
    return m


def test_callback_tags_share_a_rate_and_limits_are_cached_until_a_reset():
    from broker.quota_callback import tags_key
    clock = Clock()
    cb = _Callback({("PRODUCE", "red"): 100.0})
    m = _with_callback(ClientQuotaManager(P, 2, 1.0, clock), cb)
    assert m.update({}) is True                    # with a callback the manager is always active
    a, b = _Ctx("red-1", "User:alice"), _Ctx("red-2", "Group:ops")
    key_a, lim_a = m.resolve(*m.ident(a))
    key_b, lim_b = m.resolve(*m.ident(b))
    assert key_a == key_b == tags_key({"team": "red"}) == (("team", "red"),) and lim_a == lim_b == 100.0
    assert ("tags", "PRODUCE", "Group", "ops", "red-2") in cb.events      # the whole principal
    assert cb.asked == [("PRODUCE", {"team": "red"})]                      # asked once, then kept
    assert m.record(*m.ident(a), 80) == 0                                  # 80 B over at least 1 s
    assert m.record(*m.ident(b), 80) > 0                                   # the second client shares it
    assert m.resolve(*m.ident(_Ctx("blue-1")))[1] is None                  # no limit: unbounded
    cb.limits[("PRODUCE", "red")] = 1000.0
    assert m.resolve(*m.ident(a))[1] == 100.0                              # not asked again ...
    cb.reset = True
    assert m.resolve(*m.ident(a))[1] == 1000.0                             # ... until a reset is required
    assert m.resolve(*m.ident(_Ctx("all-1")))[0] == ("", "")               # {}: one rate for everyone
    assert tags_key({"user": "u"}) == ("u", "") and tags_key({"client-id": "c", "user": "u"}) == ("u", "c")
    with pytest.raises(TypeError):
        tags_key(["team"])


def test_callback_hears_quota_changes_as_entities():
    cb = _Callback()
    m = _with_callback(ClientQuotaManager(P), cb)
    m.update({quota_entity(client_id="c"): {P: 10.0}, quota_entity(user=None, client_id="x"): {P: 5.0},
              quota_entity(user="u"): {"consumer_byte_rate": 7.0}})
    assert sorted(e for e in cb.events if e[0] == "update") == [
        ("update", "PRODUCE", [("CLIENT_ID", "c")], 10.0),
        ("update", "PRODUCE", [("DEFAULT_USER", ""), ("CLIENT_ID", "x")], 5.0)]
    cb.events.clear()
    m.update({quota_entity(client_id="c"): {P: 10.0}})          # unchanged: not told again
    assert cb.events == [("remove", "PRODUCE", [("DEFAULT_USER", ""), ("CLIENT_ID", "x")])]


def test_callback_drives_the_mutation_and_request_quotas():
    cb = _Callback({("CONTROLLER_MUTATION", "ops"): 1.0, ("REQUEST", "ops"): 1.0})
    m = _with_callback(MutationQuotaManager(2, 1.0, Clock()), cb)
    m.update({})
    q = m.quota_for(_Ctx("ops-1"), strict=True)
    assert q is not None and q.bound == 1.0 and q.admit(5) and not q.admit(1)    # burst 2
    assert m.quota_for(_Ctx("ops-2"), strict=True).admit(1) is False              # the team's bucket
    assert m.quota_for(_Ctx("dev-1"), strict=True) is None
    assert m.tokens((("team", "ops"),)) < 0
    r = _with_callback(RequestQuotaManager(2, 1.0), cb)
    r.update({})

    async def handler():
        _spin(0.05)
        from protocol.messages import MetadataResponse
        return MetadataResponse(throttle_time_ms=0, brokers=[], topics=[])
    ctx = _ReqCtx(client="ops-3")
    resp = asyncio.run(r.handle(ctx, 3, None, handler(), time.monotonic()))
    assert resp.throttle_time_ms > 0 and ctx.connection.throttle_ms > 0


def test_callback_tags_label_the_metric_series():
    from prometheus_client.core import GaugeMetricFamily

    from broker.metrics import _quota_sample
    fam = GaugeMetricFamily("kafka_server_produce_byte_rate", "x", labels=["user", "client_id"])
    _quota_sample(fam, ("u", "c"), 1.0)
    _quota_sample(fam, (("quota.type", "all"), ("team-name", "red")), 2.0)
    _quota_sample(fam, (), 3.0)
    assert [(s.labels, s.value) for s in fam.samples] == [
        ({"user": "u", "client_id": "c"}, 1.0), ({"quota_type": "all", "team_name": "red"}, 2.0), ({}, 3.0)]


def test_callback_cluster_change_asks_the_limits_again_only_when_it_says_so():
    from types import SimpleNamespace

    from broker.client_quota import ClientQuotas
    from controller.api import BrokerInfo

    class Cluster(_Callback):
        def __init__(self):
            super().__init__({("PRODUCE", "red"): 100.0})
            self.seen, self.answer = [], False

        def update_cluster_metadata(self, cluster):
            self.seen.append((cluster.cluster_id, cluster.controller_id, cluster.broker_id,
                              [b.id for b in cluster.brokers], sorted(cluster.topics)))
            return self.answer

    ctrl = SimpleNamespace(cluster_id="c-1", controller_id=7, brokers=lambda: [BrokerInfo(7, [])],
                           topics=lambda: {"t": None}, client_quotas=lambda: {})
    broker = SimpleNamespace(config={"quota.window.num": 2, "quota.window.size.seconds": 1,
                                     "controller.quota.window.num": 2, "controller.quota.window.size.seconds": 1},
                             controller=ctrl, broker_id=7)
    cb = Cluster()
    q = ClientQuotas(broker, cb)
    q.refresh()
    assert broker.produce_quota is q.produce and broker.mutation_quota is q.mutation   # all active
    assert q.produce.resolve(*q.produce.ident(_Ctx("red-1")))[1] == 100.0
    cb.limits[("PRODUCE", "red")] = 5.0
    q.cluster_changed()                                  # False: the kept limit stays
    assert cb.seen == [("c-1", 7, 7, [7], ["t"])]
    assert q.produce.resolve(*q.produce.ident(_Ctx("red-1")))[1] == 100.0
    cb.answer = True
    q.cluster_changed()
    assert q.produce.resolve(*q.produce.ident(_Ctx("red-1")))[1] == 5.0

"""broker/replica_selector.py: which replicas the leader offers, Kafka's rack-aware choice among
them, and a Python selector plug-in."""
from types import SimpleNamespace as NS

import pytest

from broker import replica_selector as RS
from broker.config import ConfigError

EP = {i: RS.Endpoint(i, "h", 9000 + i, rack) for i, rack in ((1, "a"), (2, "b"), (3, "b"), (4, "c"))}


def _part(isr=(1, 2, 3, 4), leo=100, remote=None):
    remote = remote if remote is not None else {
        2: NS(leo=100, log_start_offset=0, last_caught_up_ms=990),
        3: NS(leo=100, log_start_offset=0, last_caught_up_ms=900),
        4: NS(leo=100, log_start_offset=0, last_caught_up_ms=1000)}
    return NS(topic="t", partition=0, isr=list(isr), log=NS(log_end_offset=leo), remote=remote)


def _client(rack):
    return RS.ClientMetadata(rack, "cid", "127.0.0.1", "User:ANONYMOUS", "PLAINTEXT")


def choose(part, rack, fetch_offset=50, selector=None, endpoints=EP):
    return RS.preferred_read_replica(NS(broker_id=1), selector or RS.RackAwareReplicaSelector(), part,
                                     _client(rack), fetch_offset, 1000, endpoints)


def test_rack_aware_choices():
    assert choose(_part(), "a") == -1                 # the leader's rack: no other replica named
    assert choose(_part(), "") == -1                  # no rack
    assert choose(_part(), "z") == -1                 # no replica there
    assert choose(_part(), "c") == 4
    assert choose(_part(), "b") == 2                  # equal offsets: caught up more recently
    part = _part()
    part.remote[3].leo = 120                          # the most caught-up wins first
    assert choose(part, "b") == 3


def test_only_in_sync_replicas_that_hold_the_offset_are_offered():
    assert choose(_part(isr=(1, 2, 3)), "c") == -1    # 4 is out of the ISR
    part = _part()
    part.remote[4].leo = 40                           # 4 has not got offset 50 yet
    assert choose(part, "c") == -1
    assert choose(part, "c", fetch_offset=40) == 4
    part = _part()
    part.remote[4].log_start_offset = 60              # 4 no longer has offset 50
    assert choose(part, "c") == -1
    assert choose(part, "c", endpoints={i: e for i, e in EP.items() if i != 4}) == -1   # no endpoint


def test_a_python_selector_and_its_failures(caplog):
    class Last:
        def select(self, tp, client, view):
            assert tp == ("t", 0) and client.rack_id == "q" and view.leader.endpoint.id == 1
            return max(view.replicas, key=lambda r: r.endpoint.id)

    class Broken:
        def select(self, tp, client, view):
            raise RuntimeError("boom")

    class Nothing:
        def select(self, tp, client, view):
            return None

    assert choose(_part(), "q", selector=Last()) == 4
    assert choose(_part(), "q", selector=Nothing()) == -1
    assert choose(_part(), "q", selector=Broken()) == -1
    assert "Broken failed for t-0" in caplog.text


class Plugin:
    configured = None

    def configure(self, configs):
        Plugin.configured = dict(configs)

    def select(self, tp, client, view):
        return view.leader


def _cfg(value):
    return NS(get=lambda k: value if k == RS.KEY else None, static_configs={RS.KEY: value or ""},
              dynamic_default_configs={}, dynamic_broker_configs={})


def test_load():
    assert RS.load(_cfg(None)) is None and RS.load(_cfg("")) is None
    assert isinstance(RS.load(_cfg(RS.RACK_AWARE)), RS.RackAwareReplicaSelector)
    assert isinstance(RS.load(_cfg("broker.replica_selector.RackAwareReplicaSelector")), RS.RackAwareReplicaSelector)
    assert isinstance(RS.load(_cfg(f"{__name__}.Plugin")), Plugin)
    assert Plugin.configured[RS.KEY] == f"{__name__}.Plugin"
    with pytest.raises(ConfigError):
        RS.load(_cfg("no.such.Selector"))
    with pytest.raises(ConfigError, match="select"):
        RS.load(_cfg("collections.OrderedDict"))

"""``client.quota.callback.class`` (broker/quota_callback.py) with unmodified clients: a Python
callback (tests/integration/quota_callbacks.py) makes confluent-kafka producers of one team
share one rate, leaves another team alone, follows quotas set with kafka-configs.sh through
update_quota / remove_quota, sees the cluster's topics and leaders, and gets the principal and
client id of each client; its own tags label the Prometheus series; a class without the needed
methods stops start-up."""
from __future__ import annotations

import json
import threading
import time

import pytest

from tests.integration.test_client_quotas import configs, create_topic, ok, produce_for
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.metrics import scrape
from tests.support.net import free_port

pytest.importorskip("confluent_kafka")

CALLBACKS = "tests.integration.quota_callbacks"
QUOTA = 20_000          # bytes/s, the "slow" team's produce limit


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    return tmp_path_factory.mktemp("quota-callback") / "calls.jsonl"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory, record):
    port = free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("quota-callback-broker"), name="quota-callback-broker",
                      props={"client.quota.callback.class": f"{CALLBACKS}.TeamQuotas",
                             "odradek.test.quota.record": str(record),
                             "odradek.test.quota.limit.PRODUCE.slow": QUOTA,
                             "quota.window.num": 2, "quota.window.size.seconds": 1,
                             "odradek.metrics.prometheus.port": port,
                             "odradek.metrics.prometheus.host": "127.0.0.1"})
    b.metrics_url = f"http://127.0.0.1:{port}/metrics"
    with running(b):
        yield b


def calls(record, kind):
    out = []
    for line in record.read_text().splitlines() if record.exists() else []:
        r = json.loads(line)
        r.pop("broker")
        if r.pop("kind") == kind:
            out.append(r)
    return out


def produce_together(kafka, topic, client_ids, seconds=3.0):
    """Run one producer per client id at once; {client id: (acked bytes/s, throttle times)}."""
    out = {}

    def run(cid):
        out[cid] = produce_for(kafka, topic, cid, seconds)
    threads = [threading.Thread(target=run, args=(cid,)) for cid in client_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def test_a_team_shares_one_rate_and_another_is_not_limited(kafka, record):
    topic = "cb-shared"
    create_topic(kafka, topic)
    res = produce_together(kafka, topic, ["slow-1", "slow-2", "fast-1"])
    (r1, t1), (r2, t2), (fast, tf) = res["slow-1"], res["slow-2"], res["fast-1"]
    # the two share the team's 20 KB/s: together about that, each throttled
    assert t1 and max(t1) > 0 and t2 and max(t2) > 0, (t1, t2)
    assert QUOTA * 0.3 < r1 + r2 < QUOTA * 2.5, (r1, r2)
    assert fast > QUOTA * 5 and not any(tf), (fast, tf)
    # the callback was asked the team's limit with its own tags, and got each client's identity
    limits = [c for c in calls(record, "limit") if c["quota_type"] == "PRODUCE"]
    assert {"tags": {"team": "slow"}, "limit": float(QUOTA)} in [
        {"tags": c["tags"], "limit": c["limit"]} for c in limits]
    tagged = {(c["quota_type"], c["client_id"]): (c["principal_type"], c["principal"])
              for c in calls(record, "tags")}
    assert tagged[("PRODUCE", "slow-2")] == ("User", "ANONYMOUS")
    assert ("FETCH", "slow-1") not in tagged          # the producers fetched nothing
    # Prometheus: the team's rate is one series labelled with the callback's tag
    series = scrape(kafka.metrics_url)
    team = series.get(("kafka_server_produce_byte_rate", (("team", "slow"),)))
    assert team is not None and team > 0, sorted(k for k in series if "produce_byte" in k[0])
    assert ("kafka_server_produce_byte_rate", (("team", "fast"),)) in series


def test_quotas_set_with_the_tools_reach_the_callback(kafka, record):
    topic = "cb-tools"
    create_topic(kafka, topic)
    ok(configs(kafka, "--alter", "--entity-type", "clients", "--entity-name", "quick",
               "--add-config", f"producer_byte_rate={QUOTA}"))
    deadline = time.monotonic() + 10
    while not any(c["entity"] == [["CLIENT_ID", "quick"]] for c in calls(record, "update")):
        assert time.monotonic() < deadline, calls(record, "update")
        time.sleep(0.1)
    assert {"quota_type": "PRODUCE", "entity": [["CLIENT_ID", "quick"]], "value": float(QUOTA)} in \
        calls(record, "update")
    rate, throttles = produce_for(kafka, topic, "quick-1")
    assert throttles and max(throttles) > 0 and rate < QUOTA * 2.5, (rate, throttles)
    ok(configs(kafka, "--alter", "--entity-type", "clients", "--entity-name", "quick",
               "--delete-config", "producer_byte_rate"))
    deadline = time.monotonic() + 10
    while {"quota_type": "PRODUCE", "entity": [["CLIENT_ID", "quick"]]} not in calls(record, "remove"):
        assert time.monotonic() < deadline, calls(record, "remove")
        time.sleep(0.1)
    time.sleep(2.5)                                 # the quota windows (2 x 1 s) forget the run
    lifted, _ = produce_for(kafka, topic, "quick-2", seconds=1.5)
    assert lifted > QUOTA * 5, lifted
    # a user default reaches it too, as an entity of its own type
    ok(configs(kafka, "--alter", "--entity-type", "users", "--entity-default",
               "--add-config", "consumer_byte_rate=1000000"))
    deadline = time.monotonic() + 10
    while not any(c["entity"] == [["DEFAULT_USER", ""]] for c in calls(record, "update")):
        assert time.monotonic() < deadline, calls(record, "update")
        time.sleep(0.1)
    assert calls(record, "update")[-1]["quota_type"] == "FETCH"


def test_the_callback_sees_the_cluster(kafka, record):
    topic = "cb-meta"
    create_topic(kafka, topic)
    deadline = time.monotonic() + 10
    while not any(f"{topic}-0" in c["leaders"] for c in calls(record, "cluster")):
        assert time.monotonic() < deadline, calls(record, "cluster")[-1:]
        time.sleep(0.1)
    last = [c for c in calls(record, "cluster") if f"{topic}-0" in c["leaders"]][-1]
    assert last["leaders"][f"{topic}-0"] == last["broker_id"] and last["brokers"] == [last["broker_id"]]
    assert last["cluster_id"]


@pytest.mark.parametrize("cls,message", [
    ("NoLimit", "the class has no quota_limit method"),
    ("Missing", "Class tests.integration.quota_callbacks.Missing cannot be found"),
])
def test_a_callback_that_cannot_serve_stops_start_up(tmp_path, cls, message):
    b = BrokerProcess(tmp_path / "b", name="bad-callback",
                      props={"client.quota.callback.class": f"{CALLBACKS}.{cls}"})
    with pytest.raises(Exception):
        b.start()
    b.stop()
    assert message in b.log_text()


def test_close_is_called_at_shutdown(tmp_path):
    rec = tmp_path / "calls.jsonl"
    b = BrokerProcess(tmp_path / "b", name="closing-callback",
                      props={"client.quota.callback.class": f"{CALLBACKS}.TeamQuotas",
                             "odradek.test.quota.record": str(rec)})
    with running(b):
        assert calls(rec, "configure") == [{"limits": {}}]
    assert calls(rec, "close") == [{}]

"""Feature flags (KIP-584) in ZooKeeper mode: the controller creates ``/feature`` (Kafka's JSON,
version 2, enabled, no features) and every broker reports its zkVersion as the finalized
features' epoch; a change written to the node reaches every broker through its watch; a
disabled node leaves the epoch out and is turned on by the next controller; UpdateFeatures is
answered NOT_CONTROLLER away from the controller, and by the controller with a conditional
write of the node (``kafka-features.sh disable`` of a feature this broker does not support)."""
from __future__ import annotations

import json

import pytest

from protocol.messages import ApiVersionsRequest, ShareGroupHeartbeatRequest, UpdateFeaturesRequest
from tests.support.cluster import Cluster
from tests.support.rawkafka import send_once
from tests.tools.conftest import tool

pytestmark = pytest.mark.cluster

NOT_CONTROLLER = 41


def _send(b, req, version):
    return send_once(b.bootstrap, req, version)


def finalized(b):
    r = _send(b, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    return r.finalized_features_epoch, {f.name: f.max_version_level for f in r.finalized_features}


def test_feature_node_epoch_watch_and_update(cluster_factory):
    c: Cluster = cluster_factory(2)
    zk = c.zk()
    data, stat = zk.get("/feature")
    assert json.loads(data) == {"features": {}, "version": 2, "status": 1}
    for b in c.brokers.values():
        assert finalized(b) == (stat.version, {})
    # a broker in ZooKeeper mode has no share groups (KIP-932): not advertised, not served
    keys = {k.api_key for k in _send(c.brokers[1], ApiVersionsRequest(client_software_name="t",
                                                                      client_software_version="1"), 3).api_keys}
    assert {68, 69} <= keys and not keys & {76, 77, 78, 79, 90, 91, 92}, sorted(keys)
    with pytest.raises((ConnectionError, OSError, EOFError)):
        _send(c.brokers[1], ShareGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0, rack_id=None,
                                                       subscribed_topic_names=["t"]), 1)

    # a feature written by hand reaches both brokers (epoch = the new zkVersion)
    stat = zk.set("/feature", json.dumps({"features": {"foo.version": {"max_version_level": 3}},
                                          "version": 2, "status": 1}).encode())
    for i, b in c.brokers.items():
        Cluster.wait_for(lambda b=b: finalized(b) == (stat.version, {"foo.version": 3}),
                         what=f"broker {i} sees foo.version")
    assert "are not supported by this broker" in c.brokers[1].log_text()

    ctrl = c.controller_id()
    other = next(i for i in c.brokers if i != ctrl)
    K = UpdateFeaturesRequest.FeatureUpdateKey
    req = UpdateFeaturesRequest(timeout_ms=10000, validate_only=False, feature_updates=[
        K(feature="foo.version", max_version_level=0, allow_downgrade=True, upgrade_type=2)])
    r = _send(c.brokers[other], req, 1)
    assert r.error_code == NOT_CONTROLLER and list(r.results) == []

    r = tool("kafka-features", "--bootstrap-server", c.bootstrap, "disable", "--feature", "foo.version")
    assert r.rc == 0 and r.lines == ["foo.version was disabled."], r
    data, stat2 = zk.get("/feature")
    assert json.loads(data) == {"features": {}, "version": 2, "status": 1}
    assert stat2.version == stat.version + 1
    for i, b in c.brokers.items():
        Cluster.wait_for(lambda b=b: finalized(b) == (stat2.version, {}), what=f"broker {i} epoch")

    # disabled: no epoch reported; the next controller turns the node on again
    zk.set("/feature", json.dumps({"features": {}, "version": 2, "status": 0}).encode())
    for i, b in c.brokers.items():
        Cluster.wait_for(lambda b=b: finalized(b) == (-1, {}), what=f"broker {i} sees it disabled")
    c.stop(ctrl)
    Cluster.wait_for(lambda: c.controller_id() == other, timeout=60, what="failover")
    Cluster.wait_for(lambda: json.loads(zk.get("/feature")[0])["status"] == 1, what="/feature enabled")
    epoch = zk.get("/feature")[1].version
    Cluster.wait_for(lambda: finalized(c.brokers[other]) == (epoch, {}), what="the new controller's epoch")

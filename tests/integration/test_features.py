"""Feature flags (KIP-584) on one broker with the embedded store: ApiVersions v3+ carrying the
finalized features and their epoch, UpdateFeatures (57) v0-2 with Kafka's rules, driven by
kafka-python's admin client, raw requests, kcat and ``bin/kafka-features.sh``; a finalized
feature the broker does not support (written into the store while it is stopped) is shown,
refused for upgrades and downgrades, and removed by ``disable``, which survives a restart."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from kafka.admin import KafkaAdminClient

from protocol.messages import ApiVersionsRequest, UpdateFeaturesRequest
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.rawkafka import send_once
from tests.tools.conftest import tool

pytestmark = pytest.mark.integration

INVALID_REQUEST = 42
NOT_SUPPORTED = "Could not apply finalized feature update because the provided feature is not supported."


def raw(b, req, version):
    return send_once(b.bootstrap, req, version)


def api_versions(b, version=3):
    return raw(b, ApiVersionsRequest(client_software_name="odradek-test", client_software_version="1"), version)


def update(b, version, *items, validate_only=False):
    K = UpdateFeaturesRequest.FeatureUpdateKey
    keys = [K(feature=n, max_version_level=lvl, allow_downgrade=kind != 1, upgrade_type=kind)
            for n, lvl, kind in items]
    resp = raw(b, UpdateFeaturesRequest(timeout_ms=10000, feature_updates=keys, validate_only=validate_only),
               version)
    return resp.error_code, [(r.feature, r.error_code, r.error_message) for r in resp.results]


def finalized(b):
    r = api_versions(b)
    return r.finalized_features_epoch, {f.name: (f.min_version_level, f.max_version_level)
                                        for f in r.finalized_features}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("features-broker"), name="broker")) as b:
        yield b


def test_api_versions_carries_the_features(kafka):
    """A new store: epoch 0, nothing finalized; transaction.version 0-2 supported, left out of v3
    answers (its minimum is 0, which older clients cannot read, as Kafka does); v0-2 have no such
    fields; UpdateFeatures advertised at Kafka 4.x's range."""
    r = api_versions(kafka)
    assert r.error_code == 0
    assert r.finalized_features_epoch == 0
    assert list(r.supported_features) == [] and list(r.finalized_features) == []
    assert {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}[57] == (0, 2)
    r4 = api_versions(kafka, 4)
    assert r4.finalized_features_epoch == 0 and list(r4.finalized_features) == []
    assert [(f.name, f.min_version, f.max_version) for f in r4.supported_features] == [("transaction.version", 0, 2)]
    assert api_versions(kafka, 2).error_code == 0


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_reads_the_tagged_fields(kafka):
    r = subprocess.run(["kcat", "-b", kafka.bootstrap, "-L", "-m", "10"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and "1 brokers:" in r.stdout, r.stderr


def test_kafka_python_admin(kafka):
    """kafka-python's admin client sends UpdateFeatures v2 (all or nothing): a refused update is
    the request's top-level error, which it raises; a dry run of a valid one passes."""
    from kafka.errors import InvalidRequestError
    a = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        assert a.describe_features() == {"transaction.version": {"supported": (0, 2)}}
        with pytest.raises(InvalidRequestError, match="provided feature is not supported"):
            a.update_features({"transaction.version": 2, "group.version": ("UPGRADE", 1)})
        with pytest.raises(InvalidRequestError, match="Can not delete non-existing finalized feature"):
            a.update_features({"metadata.version": ("SAFE_DOWNGRADE", 0)}, validate_only=True)
        a.update_features({"transaction.version": 2}, validate_only=True)
    finally:
        a.close()
    assert finalized(kafka) == (0, {})       # nothing written: the first request was all or nothing


@pytest.mark.parametrize("version", [0, 1])
def test_raw_update_rules(kafka, version):
    """Kafka's per-feature checks and messages; a feature named twice is answered once."""
    top, res = update(kafka, version, ("", 1, 1), ("a.version", 0, 1), ("b.version", 0, 2),
                      ("c.version", 3, 1), ("c.version", 0, 2))
    assert top == 0
    assert res == [
        ("", INVALID_REQUEST, "Feature name can not be empty."),
        ("a.version", INVALID_REQUEST, "Can not provide versionLevel: 0 less than 1 without setting the SAFE "
                                       "downgradeType in the request."),
        ("b.version", INVALID_REQUEST, "Can not delete non-existing finalized feature."),
        ("c.version", INVALID_REQUEST, NOT_SUPPORTED),
    ]
    if version == 1:
        top, res = update(kafka, 1, ("d.version", 2, 7))
        assert (top, res) == (0, [("d.version", INVALID_REQUEST, "Received unknown upgrade type.")])


def test_raw_update_v2_is_all_or_nothing(kafka):
    """v2: no per-feature results; the first refused update is the top-level error and the valid
    ones are not written either."""
    K = UpdateFeaturesRequest.FeatureUpdateKey
    resp = raw(kafka, UpdateFeaturesRequest(timeout_ms=10000, validate_only=False, feature_updates=[
        K(feature="transaction.version", max_version_level=2, upgrade_type=1),
        K(feature="c.version", max_version_level=3, upgrade_type=1)]), 2)
    assert (resp.error_code, resp.error_message, list(resp.results)) == (INVALID_REQUEST, NOT_SUPPORTED, [])
    assert finalized(kafka) == (0, {})


TV_LINE = "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: {}\tEpoch: {}"


def test_tool_on_a_new_cluster(kafka):
    r = tool("kafka-features", "--bootstrap-server", kafka.bootstrap, "describe")
    assert r.rc == 0 and r.lines == [TV_LINE.format(0, 0)], r
    r = tool("kafka-features", "--bootstrap-server", kafka.bootstrap, "upgrade", "--metadata", "3.9-IV0",
             "--feature", "group.version=1")
    assert r.rc == 1, r
    assert r.lines == [f"Could not upgrade group.version to 1. {NOT_SUPPORTED}",
                       f"Could not upgrade metadata.version to 21. {NOT_SUPPORTED}"], r
    assert r.err.strip() == "2 out of 2 operation(s) failed.", r
    r = tool("kafka-features", "--bootstrap-server", kafka.bootstrap, "upgrade", "--metadata", "2.8")
    assert r.rc == 1 and r.err.startswith("Unsupported metadata.version 2.8. Supported metadata.version are "
                                          "3.3-IV0, 3.3-IV1,"), r
    r = tool("kafka-features", "--bootstrap-server", kafka.bootstrap, "upgrade", "--feature", "x=a")
    assert r.rc == 1 and r.err.strip() == "Can't parse feature=level string x=a: unable to parse a as a short.", r
    r = tool("kafka-features", "--bootstrap-server", kafka.bootstrap, "disable")
    assert r.rc == 1 and r.err.strip() == "You must specify at least one feature to disable", r
    r = tool("kafka-features", "describe")
    assert r.rc == 1 and "one of the arguments --bootstrap-server --bootstrap-controller is required" in r.err, r


def test_transaction_version_is_upgraded_downgraded_and_disabled(tmp_path):
    """transaction.version, the one feature Odradek supports (0-2, as Kafka 4.x), through
    kafka-features.sh; each change is a new epoch and survives a restart."""
    b = BrokerProcess(tmp_path, name="broker")
    with running(b):
        base = ["kafka-features", "--bootstrap-server", b.bootstrap]
        r = tool(*base, "upgrade", "--feature", "transaction.version=2", "--dry-run")
        assert r.rc == 0 and r.lines == ["transaction.version can be upgraded to 2."], r
        assert finalized(b) == (0, {})
        r = tool(*base, "upgrade", "--feature", "transaction.version=3")
        assert r.rc == 1 and r.lines == [
            "Could not upgrade transaction.version to 3. Could not apply finalized feature update because the "
            "provided versionLevel:3 is higher than the supported maxVersion:2."], r
        r = tool(*base, "upgrade", "--feature", "transaction.version=2")
        assert r.rc == 0 and r.lines == ["transaction.version was upgraded to 2."], r
        assert finalized(b) == (1, {"transaction.version": (2, 2)})
        assert tool(*base, "describe").lines == [TV_LINE.format(2, 1)]
    with running(b):
        assert finalized(b) == (1, {"transaction.version": (2, 2)})
        r = tool("kafka-features", "--bootstrap-server", b.bootstrap, "downgrade", "--feature", "transaction.version=1")
        assert r.rc == 0 and r.lines == ["transaction.version was downgraded to 1."], r
        assert finalized(b) == (2, {"transaction.version": (1, 1)})
        r = tool("kafka-features", "--bootstrap-server", b.bootstrap, "disable", "--feature", "transaction.version")
        assert r.rc == 0 and r.lines == ["transaction.version was disabled."], r
        assert finalized(b) == (3, {})


def test_unsupported_finalized_feature_can_be_removed(tmp_path):
    b = BrokerProcess(tmp_path, name="broker")
    with running(b):
        assert finalized(b) == (0, {})
    store = next(b.log_dir.rglob("__cluster_metadata.json"))
    doc = json.loads(store.read_text())
    assert doc["finalized_features"] == {"epoch": 0, "features": {}}
    doc["finalized_features"] = {"epoch": 5, "features": {"foo.version": 2, "zero.version": 0}}
    store.write_text(json.dumps(doc))
    with running(b):
        assert "Finalized features {'foo.version': 2, 'zero.version': 0}" in b.log_text()
        assert finalized(b) == (5, {"foo.version": (2, 2)})          # level 0 is not shown
        r = tool("kafka-features", "--bootstrap-server", b.bootstrap, "describe")
        assert r.rc == 0 and r.lines == ["Feature: foo.version\tSupportedMinVersion: -\tSupportedMaxVersion: -\t"
                                         "FinalizedVersionLevel: 2\tEpoch: 5", TV_LINE.format(0, 5)], r
        # Kafka's rules against an existing level, before "not supported"
        assert update(b, 1, ("foo.version", 1, 1)) == (0, [(
            "foo.version", INVALID_REQUEST, "Can not downgrade finalized feature from existing versionLevel:2 to "
            "provided versionLevel:1 without setting the downgradeType to SAFE in the request.")])
        assert update(b, 1, ("foo.version", 2, 2)) == (0, [(
            "foo.version", INVALID_REQUEST, "Can not downgrade a finalized feature from existing versionLevel:2 to "
            "the same value.")])
        assert update(b, 1, ("foo.version", 3, 2)) == (0, [(
            "foo.version", INVALID_REQUEST, "When the downgradeType is set to SAFE in the request, the provided "
            "versionLevel:3 can not be greater than existing versionLevel:2.")])
        assert update(b, 1, ("foo.version", 1, 2)) == (0, [("foo.version", INVALID_REQUEST, NOT_SUPPORTED)])
        # a dry run changes nothing; then the deletion is written with a new epoch
        r = tool("kafka-features", "--bootstrap-server", b.bootstrap, "disable", "--feature", "foo.version",
                 "--dry-run")
        assert r.rc == 0 and r.lines == ["foo.version can be disabled."], r
        assert finalized(b) == (5, {"foo.version": (2, 2)})
        r = tool("kafka-features", "--bootstrap-server", b.bootstrap, "disable", "--feature", "foo.version")
        assert r.rc == 0 and r.lines == ["foo.version was disabled."], r
        assert finalized(b) == (6, {})
        # v0's AllowDowngrade deletes too
        assert update(b, 0, ("zero.version", 0, 2)) == (0, [("zero.version", 0, None)])
        assert finalized(b) == (7, {})
    assert json.loads(store.read_text())["finalized_features"] == {"epoch": 7, "features": {}}
    with running(b):
        assert finalized(b) == (7, {})

"""KIP-714 client metrics subscriptions in the controller layer: the shared checks
(``check_client_metrics_configs``, ``parse_client_metrics_match``, with the error codes and messages
of a Kafka 3.9 controller) and the embedded store (replace, delete, validate_only, the
ConfigsChanged event, a restart).  The ZooKeeper store is covered by
tests/cluster/test_cluster_client_metrics.py, the wire by
tests/integration/test_client_metrics_resource.py."""
from __future__ import annotations

import asyncio
import json
import re

import pytest

from controller.api import (INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_SERVER_ERROR, ApiResult, ConfigsChanged,
                            check_client_metrics_configs, java_hash_order, parse_client_metrics_match)
from controller.single_node import METADATA_FILE
from tests.controller.test_single_node import run, started


# -- parse_client_metrics_match ------------------------------------------------------------------

def test_match_patterns_parse_into_compiled_regexes():
    got = parse_client_metrics_match(["client_id = app-.*", " client_software_name=kafka-python",
                                      "client_source_port=90[0-9]{2}"])
    assert set(got) == {"client_id", "client_software_name", "client_source_port"}
    assert all(isinstance(p, re.Pattern) for p in got.values())
    assert got["client_id"].pattern == "app-.*"          # both sides trimmed
    assert got["client_software_name"].pattern == "kafka-python"
    assert got["client_source_port"].fullmatch("9042")
    assert parse_client_metrics_match([]) == {} and parse_client_metrics_match(None) == {}
    # a later entry for the same selector wins (a map put)
    assert parse_client_metrics_match(["client_id=a", "client_id=b"])["client_id"].pattern == "b"


def test_every_selector_is_accepted():
    names = ["client_instance_id", "client_id", "client_software_name", "client_software_version",
             "client_source_address", "client_source_port"]
    assert set(parse_client_metrics_match([f"{n}=x" for n in names])) == set(names)


@pytest.mark.parametrize("entry", [
    "client_id",                    # no '='
    "client_id=",                   # Java's split drops the empty value: one part
    "client_id=a=b",                # three parts
    "=abc",                         # no selector
    "version=1.*",                  # unknown selector
    "CLIENT_ID=x",                  # selectors are case sensitive
    "client_id=(",                  # does not compile
    "client_id=[a-",
    "",
])
def test_bad_match_entries_raise_value_error_with_kafkas_message(entry):
    with pytest.raises(ValueError) as e:
        parse_client_metrics_match(["client_id=ok", entry])
    assert str(e.value) == f"Illegal client matching pattern: {entry}"


def test_trailing_separators_are_dropped_as_java_splits():
    # "a=b=" splits into two parts in Java ("a", "b"): legal
    assert parse_client_metrics_match(["client_id=b="])["client_id"].pattern == "b"
    # an empty regex (after trimming) is legal and matches everything
    assert parse_client_metrics_match(["client_id= "])["client_id"].fullmatch("")


# -- check_client_metrics_configs ---------------------------------------------------------------

def test_good_subscriptions_pass():
    for configs in ({}, {"metrics": ""}, {"metrics": "*"}, {"interval.ms": "100"}, {"interval.ms": "3600000"},
                    {"interval.ms": "+500"}, {"match": "client_id=a.*,client_software_version=1\\.2\\..*"},
                    {"metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.", "interval.ms": "60000",
                     "match": "client_software_name=java"}):
        assert check_client_metrics_configs("sub", configs) is None, configs


@pytest.mark.parametrize("name", ["", None])
def test_an_empty_name_is_invalid_request(name):
    assert check_client_metrics_configs(name, {"metrics": "*"}) == \
        ApiResult(INVALID_REQUEST, "Subscription name can't be empty")


def test_unknown_keys_are_invalid_request():
    assert check_client_metrics_configs("s", {"metrics": "*", "push.interval": "1"}) == \
        ApiResult(INVALID_REQUEST, "Unknown client metrics configuration: push.interval")


@pytest.mark.parametrize("value", ["99", "0", "-1", "3600001", "2147483647"])
def test_an_interval_out_of_range_is_invalid_request(value):
    assert check_client_metrics_configs("s", {"interval.ms": value}) == ApiResult(
        INVALID_REQUEST, f"Invalid value {int(value)} for interval.ms, interval must be between 100 and "
                         "3600000 (1 hour)")


@pytest.mark.parametrize("value", ["abc", "", "1.5", " 100", "1_000", "2147483648", "+"])
def test_an_interval_that_is_no_java_int_is_an_unknown_server_error(value):
    # Kafka's controller meets a NumberFormatException, which ApiError turns into
    # UNKNOWN_SERVER_ERROR without a message
    assert check_client_metrics_configs("s", {"interval.ms": value}) == ApiResult(UNKNOWN_SERVER_ERROR, None)


def test_a_bad_match_is_invalid_config():
    assert check_client_metrics_configs("s", {"match": "client_id=a,client_id=("}) == \
        ApiResult(INVALID_CONFIG, "Illegal client matching pattern: client_id=(")
    # the value is split at every comma, so a regex cannot hold one
    assert check_client_metrics_configs("s", {"match": "client_id=a|b,c"}) == \
        ApiResult(INVALID_CONFIG, "Illegal client matching pattern: c")
    # an empty match value is one empty entry
    assert check_client_metrics_configs("s", {"match": ""}) == \
        ApiResult(INVALID_CONFIG, "Illegal client matching pattern: ")


def test_checks_run_in_kafkas_order():
    # name, then unknown keys, then the interval, then the match patterns
    assert check_client_metrics_configs("", {"bogus": "1"}).error_message == "Subscription name can't be empty"
    assert check_client_metrics_configs("s", {"interval.ms": "1", "bogus": "1"}).error_code == INVALID_REQUEST
    assert "bogus" in check_client_metrics_configs("s", {"interval.ms": "1", "bogus": "1"}).error_message
    assert check_client_metrics_configs("s", {"match": "x", "interval.ms": "1"}).error_message.startswith(
        "Invalid value 1")


def test_java_hash_order_is_the_order_of_a_java_hashmap():
    # checked against java.util.HashMap / Properties with these keys
    assert java_hash_order(["metrics", "interval.ms", "match"]) == ["interval.ms", "match", "metrics"]
    assert java_hash_order(["match", "metrics"]) == ["match", "metrics"]


# -- the embedded store ---------------------------------------------------------------------------

def test_embedded_store_replaces_deletes_and_keeps_subscriptions(tmp_path):
    async def go():
        c = await started(tmp_path)
        events = []
        c.subscribe(events.append)
        assert c.client_metrics_configs() == {}
        r = await c.alter_client_metrics("sub1", {"metrics": "*", "interval.ms": "1000"})
        assert r == ApiResult()
        r = await c.alter_client_metrics("sub2", {"match": "client_id=x"}, validate_only=True)
        assert r == ApiResult() and "sub2" not in c.client_metrics_configs()
        r = await c.alter_client_metrics("sub2", {"interval.ms": "5"})
        assert r.error_code == INVALID_REQUEST and "sub2" not in c.client_metrics_configs()
        await c.alter_client_metrics("sub2", {"match": "client_id=x"})
        await asyncio.sleep(0)
        assert events == [ConfigsChanged("client-metrics", "sub1"), ConfigsChanged("client-metrics", "sub2")]
        got = c.client_metrics_configs()
        assert got == {"sub1": {"metrics": "*", "interval.ms": "1000"}, "sub2": {"match": "client_id=x"}}
        got["sub1"]["metrics"] = "changed"                # a private copy
        assert c.client_metrics_configs()["sub1"]["metrics"] == "*"
        # replacing drops the keys not given; an empty set deletes the subscription
        await c.alter_client_metrics("sub1", {"interval.ms": "2000"})
        await c.alter_client_metrics("sub2", {})
        await asyncio.sleep(0)
        assert events[-1] == ConfigsChanged("client-metrics", "sub2")
        assert c.client_metrics_configs() == {"sub1": {"interval.ms": "2000"}}
        await c.stop()
        doc = json.loads((tmp_path / METADATA_FILE).read_text())
        assert doc["client_metrics"] == {"sub1": {"interval.ms": "2000"}}
        c2 = await started(tmp_path)
        assert c2.client_metrics_configs() == {"sub1": {"interval.ms": "2000"}}
        await c2.stop()
    run(go())

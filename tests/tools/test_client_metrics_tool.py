"""kafka-client-metrics.sh (Kafka 3.9's ClientMetricsCommand) and kafka-configs.sh
--entity-type client-metrics against a real broker: create with --generate-name, list, describe,
alter, delete; the broker's refusals (interval, match pattern, unknown config) and the tool's own
argument checks."""
from __future__ import annotations

import re
import uuid

from tests.tools.conftest import tool

LIST_CM = 74


def cm(kafka, *args):
    return tool("kafka-client-metrics", "--bootstrap-server", kafka.bootstrap, *args)


def configs(kafka, *args):
    return tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--entity-type", "client-metrics", *args)


def unique() -> str:
    return "cm-" + uuid.uuid4().hex[:8]


def test_create_list_describe_alter_delete(kafka, needs):
    needs(LIST_CM)
    r = cm(kafka, "--alter", "--generate-name", "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
           "--interval", "5000", "--match", "client_software_name=kafka-python,client_id=app-.*")
    assert r.rc == 0, r
    m = re.fullmatch(r"Altered client metrics config for ([A-Za-z0-9_-]{22})\.\n", r.out)
    assert m, r
    gen = m.group(1)
    assert not gen.startswith("-")           # a Kafka Uuid string

    other = unique()
    r = cm(kafka, "--alter", "--name", other, "--metrics", "*")
    assert r.rc == 0 and r.out == f"Altered client metrics config for {other}.\n", r

    r = cm(kafka, "--list")
    assert r.rc == 0 and {gen, other} <= set(r.lines), r

    r = cm(kafka, "--describe", "--name", gen)
    assert r.rc == 0, r
    assert r.lines == [f"Client metrics configs for {gen} are:",
                       "  interval.ms=5000",
                       "  match=client_software_name=kafka-python,client_id=app-.*",
                       "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer."], r
    r = cm(kafka, "--describe")              # every subscription
    assert r.rc == 0 and f"Client metrics configs for {other} are:" in r.lines and "  metrics=*" in r.lines, r

    # --alter changes only the keys it is given; an empty value deletes a key
    r = cm(kafka, "--alter", "--name", gen, "--interval", "60000", "--metrics", "")
    assert r.rc == 0, r
    r = cm(kafka, "--describe", "--name", gen)
    assert r.lines[1:] == ["  interval.ms=60000", "  match=client_software_name=kafka-python,client_id=app-.*"], r
    # repeated --match / --metrics accumulate
    r = cm(kafka, "--alter", "--name", gen, "--match", "client_id=a", "--match", "client_source_port=1.*")
    assert r.rc == 0, r
    assert cm(kafka, "--describe", "--name", gen).lines[1] == "  interval.ms=60000"
    assert "  match=client_id=a,client_source_port=1.*" in cm(kafka, "--describe", "--name", gen).lines

    for name in (gen, other):
        r = cm(kafka, "--delete", "--name", name)
        assert r.rc == 0 and r.out == f"Deleted client metrics config for {name}.\n", r
    r = cm(kafka, "--list")
    assert r.rc == 0 and gen not in r.lines and other not in r.lines, r
    r = cm(kafka, "--describe", "--name", gen)
    assert r.rc == 0 and r.lines == [f"Client metrics configs for {gen} are:"], r


def test_the_brokers_refusals(kafka, needs):
    needs(LIST_CM)
    name = unique()
    for args, message in (
            (["--interval", "50"], "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
            (["--interval", "3600001"],
             "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
            (["--match", "client_id=("], "Illegal client matching pattern: client_id=("),
            (["--match", "client_version=1.*"], "Illegal client matching pattern: client_version=1.*"),
            (["--match", "client_id"], "Illegal client matching pattern: client_id")):
        r = cm(kafka, "--alter", "--name", name, *args)
        assert r.rc == 1, r
        assert r.out == f"Error while executing client metrics command : {message}\n", r
    assert name not in cm(kafka, "--list").lines

    # kafka-configs.sh has no check of its own: the broker names the unknown key
    r = configs(kafka, "--entity-name", name, "--alter", "--add-config", "push.interval.ms=1000")
    assert r.rc == 1 and r.err.strip() == "Unknown client metrics configuration: push.interval.ms", r
    r = configs(kafka, "--entity-name", name, "--alter", "--add-config", "interval.ms=10")
    assert r.rc == 1 and "interval must be between 100 and 3600000" in r.err, r


def test_argument_checks():
    down = ["--bootstrap-server", "127.0.0.1:1"]
    r = tool("kafka-client-metrics")
    assert r.rc == 1 and r.err.startswith("This tool helps to manipulate and describe client metrics "
                                          "configurations.\n"), r
    r = tool("kafka-client-metrics", "--help")
    assert r.rc == 0 and "--generate-name" in r.out and "client_source_port" in r.out, r
    r = tool("kafka-client-metrics", "--version")
    assert r.rc == 0 and "Odradek" in r.out
    for args in ([], ["--list", "--describe"], ["--alter", "--delete", "--name", "x"]):
        r = tool("kafka-client-metrics", *down, *args)
        assert r.rc == 1 and r.err.splitlines()[0] == ("Command must include exactly one action: --alter, --delete, "
                                                       "--describe or --list."), r
    r = tool("kafka-client-metrics", "--list")
    assert r.rc == 1 and r.err.strip() == "--bootstrap-server must be specified.", r
    for action, extra, bad in (("list", ["--name", "x"], "name"), ("describe", ["--interval", "100"], "interval"),
                               ("delete", ["--name", "x", "--generate-name"], "generate-name"),
                               ("describe", ["--metrics", "a"], "metrics"), ("list", ["--match", "client_id=a"], "match")):
        r = tool("kafka-client-metrics", *down, "--" + action, *extra)
        assert r.rc == 1 and r.err.splitlines()[0] == f'Option "[{action}]" can\'t be used with option "[{bad}]"', r
    for args in (["--alter", "--metrics", "a"], ["--alter", "--name", "x", "--generate-name"]):
        r = tool("kafka-client-metrics", *down, *args)
        assert r.rc == 1 and r.err.strip() == "One of --name or --generate-name must be specified with --alter.", r
    r = tool("kafka-client-metrics", *down, "--delete")
    assert r.rc == 1 and r.err.strip() == "A client metrics resource name must be specified with --delete.", r
    r = tool("kafka-client-metrics", *down, "--alter", "--name", "x", "--interval", "soon")
    assert r.rc == 1 and r.err.splitlines()[0] == "Cannot parse argument 'soon' of option interval", r


def test_broker_down_is_one_line(down_port, fast_fail):
    r = tool("kafka-client-metrics", "--bootstrap-server", f"127.0.0.1:{down_port}", "--command-config", fast_fail,
             "--list", timeout=30)
    assert r.rc == 1 and "Traceback" not in r.out + r.err, r
    assert r.out.startswith("Error while executing client metrics command : ") and "could not connect" in r.out, r


def test_kafka_configs_entity_type_client_metrics(kafka, needs):
    needs(LIST_CM)
    name = unique()
    r = configs(kafka, "--entity-name", name, "--alter", "--add-config", "interval.ms=2000,metrics=[a.,b.]")
    assert r.rc == 0 and r.out == f"Completed updating config for client-metric {name}.\n", r
    r = configs(kafka, "--entity-name", name, "--describe")
    assert r.rc == 0, r
    assert r.lines == [f"Dynamic configs for client-metric {name} are:",
                       "  interval.ms=2000 sensitive=false synonyms={}",
                       "  metrics=a.,b. sensitive=false synonyms={}"], r
    r = configs(kafka, "--describe")         # every subscription
    assert r.rc == 0 and f"Dynamic configs for client-metric {name} are:" in r.lines, r
    r = configs(kafka, "--entity-name", name, "--alter", "--delete-config", "match")
    assert r.rc == 1 and r.err.strip() == "Invalid config(s): match", r
    r = configs(kafka, "--entity-name", name, "--alter", "--delete-config", "interval.ms,metrics")
    assert r.rc == 0, r
    assert name not in cm(kafka, "--list").lines
    r = configs(kafka, "--alter", "--add-config", "interval.ms=2000")
    assert r.rc == 1 and r.err.strip() == "An entity name must be specified with --alter of client-metrics", r
    r = configs(kafka, "--entity-default", "--describe")
    assert r.rc == 1 and r.err.strip() == "--entity-default is not allowed for client-metrics", r

"""Every tool run as a subprocess (bin/kafka-*.sh) against a real broker.

Parts that need broker APIs still being written (CreateTopics, configs, DeleteRecords,
DescribeLogDirs, the group coordinator) skip with the missing API named."""
from __future__ import annotations

import json
import re
import time
import uuid

import pytest

from tests.support.net import wait_for
from tests.tools.conftest import tool

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
DESCRIBE_CONFIGS, INCREMENTAL_ALTER, DELETE_RECORDS, DESCRIBE_LOG_DIRS = 32, 44, 21, 35
FIND_COORDINATOR, JOIN_GROUP = 10, 11


def name(prefix="t"):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(kafka, topic, lines, *extra):
    r = tool("kafka-console-producer", "--bootstrap-server", kafka.bootstrap, "--topic", topic,
             *extra, input="".join(x + "\n" for x in lines))
    assert r.rc == 0, r
    return r


def consume(kafka, topic, *extra, n=None, timeout_ms=3000):
    args = ["--bootstrap-server", kafka.bootstrap, "--topic", topic, "--timeout-ms", timeout_ms]
    if n is not None:
        args += ["--max-messages", n]
    return tool("kafka-console-consumer", *args, *extra)


def make_topic(kafka, needs, partitions=1, *extra):
    t = name()
    if partitions > 1 or extra:
        needs(CREATE_TOPICS)
    if CREATE_TOPICS in kafka.apis:
        r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--create", "--topic", t,
                 "--partitions", partitions, *extra)
        assert r.rc == 0, r
    else:
        produce(kafka, t, [])       # metadata request auto-creates it
    return t


# -- generic behaviour --------------------------------------------------------------------------

ALL_TOOLS = ["kafka-topics", "kafka-console-producer", "kafka-console-consumer", "kafka-configs",
             "kafka-get-offsets", "kafka-delete-records", "kafka-log-dirs",
             "kafka-broker-api-versions", "kafka-dump-log", "kafka-consumer-perf-test"]


@pytest.mark.parametrize("t", ALL_TOOLS)
def test_help_and_unknown_flag(t):
    r = tool(t, "--help")
    assert r.rc == 0, r
    assert "Option" in r.out and "Description" in r.out and "--help" in r.out
    r = tool(t, "--no-such-flag")
    assert r.rc != 0
    assert r.err.splitlines()[0] == "no-such-flag is not a recognized option"
    assert "Traceback" not in r.err


def test_version_flag():
    r = tool("kafka-topics", "--version")
    assert r.rc == 0 and "Odradek" in r.out


def test_kafka_run_class(kafka, needs, tmp_path):
    """kafka-run-class.sh runs the tool of a Kafka main class (old and new package names), in the
    background with -daemon; an unknown class is Java's error."""
    t = make_topic(kafka, needs)
    produce(kafka, t, ["a", "b", "c"])
    for cls in ("kafka.tools.GetOffsetShell", "org.apache.kafka.tools.GetOffsetShell"):
        r = tool("kafka-run-class", cls, "--bootstrap-server", kafka.bootstrap, "--topic", t)
        assert r.rc == 0 and r.lines == [f"{t}:0:3"], r
    r = tool("kafka-run-class", "-name", "x", "-loggc", "kafka.tools.DumpLogSegments", "--help")
    assert r.rc == 0 and "--offsets-decoder" in r.out, r
    r = tool("kafka-run-class", "-daemon", "-name", "offsets", "kafka.tools.GetOffsetShell", "--bootstrap-server",
             kafka.bootstrap, "--topic", t, env={"LOG_DIR": str(tmp_path)})
    assert r.rc == 0 and r.out == "", r
    out = tmp_path / "offsets.out"
    wait_for(lambda: out.exists() and out.read_text().endswith("\n"), 30, what="the background tool's output")
    assert out.read_text().splitlines() == [f"{t}:0:3"]
    r = tool("kafka-run-class", "kafka.Kafka")
    assert r.rc == 1 and r.err.startswith("USAGE: ") and "server.properties" in r.err, r
    r = tool("kafka-run-class", "com.example.Nope", "--x")
    assert r.rc == 1 and r.err.splitlines() == ["Error: Could not find or load main class com.example.Nope",
                                                "Caused by: java.lang.ClassNotFoundException: com.example.Nope"]


@pytest.mark.parametrize("t,args", [
    ("kafka-topics", ["--list"]),
    ("kafka-get-offsets", ["--topic", "x"]),
    ("kafka-broker-api-versions", []),
    ("kafka-log-dirs", ["--describe"]),
    ("kafka-configs", ["--describe", "--entity-type", "topics", "--entity-name", "x"]),
    ("kafka-console-consumer", ["--topic", "x"]),
])
def test_broker_down_is_one_clear_line(t, args, down_port, fast_fail):
    start = time.monotonic()
    r = tool(t, "--bootstrap-server", f"127.0.0.1:{down_port}", "--command-config", fast_fail,
             *args, timeout=30)
    assert r.rc == 1, r
    assert time.monotonic() - start < 15
    text = r.out + r.err
    assert "Traceback" not in text
    assert f"127.0.0.1:{down_port}" in text and "could not connect" in text


def test_broker_down_producer_and_perf(down_port, tmp_path):
    r = tool("kafka-console-producer", "--bootstrap-server", f"127.0.0.1:{down_port}", "--topic",
             "x", "--max-block-ms", "1500", input="a\n", timeout=30)
    assert r.rc == 1 and "could not connect" in r.err and "Traceback" not in r.err, r
    r = tool("kafka-producer-perf-test", "--topic", "x", "--num-records", 10, "--record-size",
             10, "--throughput", -1, "--producer-props", f"bootstrap.servers=127.0.0.1:{down_port}",
             "default.api.timeout.ms=1500", timeout=30)
    assert r.rc == 1 and "Traceback" not in r.err, r


# -- kafka-topics ---------------------------------------------------------------------------------

def test_topics_bad_combinations():
    r = tool("kafka-topics", "--bootstrap-server", "127.0.0.1:1", "--list", "--create")
    assert r.rc == 1
    assert r.err.splitlines()[0].startswith("Command must include exactly one action")
    r = tool("kafka-topics", "--bootstrap-server", "127.0.0.1:1", "--list", "--partitions", "3")
    assert r.err.splitlines()[0] == 'Option "[partitions]" can\'t be used with option "[list]"'
    r = tool("kafka-topics", "--bootstrap-server", "127.0.0.1:1", "--create")
    assert r.err.splitlines()[0] == 'Missing required argument "[topic]"'
    r = tool("kafka-topics", "--list")
    assert r.rc == 1 and "bootstrap-server" in r.err.splitlines()[0]
    r = tool("kafka-topics", "--bootstrap-server", "127.0.0.1:1", "--describe",
             "--if-not-exists")
    assert r.err.splitlines()[0] == 'Option "[if-not-exists]" can\'t be used with option "[describe]"'
    r = tool("kafka-topics", "--bootstrap-server", "127.0.0.1:1", "--create", "--topic", "x",
             "--replica-assignment", "0:1", "--partitions", "2")
    assert "can't be used with" in r.err.splitlines()[0]
    r = tool("kafka-topics")
    assert r.rc == 1 and "topic" in r.err


def test_topics_list_and_describe(kafka, needs):
    t = make_topic(kafka, needs)
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--list")
    assert r.rc == 0 and t in r.lines
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--list", "--topic",
             t[:4] + ".*", "--exclude-internal")
    assert r.rc == 0 and t in r.lines and "__consumer_offsets" not in r.lines
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--describe", "--topic", t)
    assert r.rc == 0, r
    head, *parts = r.lines
    assert re.fullmatch(rf"Topic: {t}\tTopicId: [A-Za-z0-9_-]{{22}}\tPartitionCount: 1\t"
                        r"ReplicationFactor: 1\tConfigs: .*", head), head
    assert parts == [f"\tTopic: {t}\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\t"
                     f"Elr: N/A\tLastKnownElr: N/A"]
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--describe", "--topic", t,
             "--under-replicated-partitions")
    assert r.rc == 0 and r.out == ""
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--describe", "--topic", t,
             "--unavailable-partitions")
    assert r.rc == 0 and r.out == ""


def test_topics_unknown_topic(kafka):
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--describe", "--topic",
             "no-such-topic")
    assert r.rc == 1
    assert r.out.strip() == ("Error while executing topic command : Topic 'no-such-topic' does "
                             "not exist as expected")
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--describe", "--topic",
             "no-such-topic", "--if-exists")
    assert r.rc == 0 and r.out == ""
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--delete", "--topic",
             "no-such-topic", "--if-exists")
    assert r.rc == 0


def test_topics_create_alter_delete(kafka, needs):
    needs(CREATE_TOPICS)
    t = name("c_x")
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--create", "--topic", t,
             "--partitions", 3, "--replication-factor", 1, "--config", "retention.ms=60000")
    assert r.rc == 0, r
    assert r.lines[-1] == f"Created topic {t}."
    assert r.lines[0].startswith("WARNING")            # '_' in the name
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--create", "--topic", t)
    assert r.rc == 1 and "already exists" in r.out
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--create", "--topic", t,
             "--if-not-exists")
    assert r.rc == 0
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--describe", "--topic", t)
    assert "PartitionCount: 3" in r.lines[0] and len(r.lines) == 4
    if DESCRIBE_CONFIGS in kafka.apis:
        assert "retention.ms=60000" in r.lines[0]
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--create", "--topic",
             name(), "--replica-assignment", "0,0")
    assert r.rc == 0, r
    r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--create", "--topic",
             name(), "--partitions", 0)
    assert r.rc == 1 and "partitions must be greater than 0" in r.out
    if CREATE_PARTITIONS in kafka.apis:
        r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--alter", "--topic", t,
                 "--partitions", 5)
        assert r.rc == 0, r
        r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--describe", "--topic", t)
        assert "PartitionCount: 5" in r.lines[0]
        r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--alter", "--topic", t,
                 "--partitions", 2)
        assert r.rc == 1 and r.out.startswith("Error while executing topic command : ")
    if DELETE_TOPICS in kafka.apis:
        r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--delete", "--topic", t)
        assert r.rc == 0, r
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            r = tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--list")
            if t not in r.lines:
                break
            time.sleep(0.3)
        assert t not in r.lines


# -- console producer / consumer ------------------------------------------------------------

def test_produce_consume_roundtrip(kafka, needs):
    t = make_topic(kafka, needs)
    produce(kafka, t, ["one", "two", "three"], "--producer-property", "acks=all")
    r = consume(kafka, t, "--from-beginning", n=3)
    assert r.rc == 0, r
    assert r.lines == ["one", "two", "three"]
    assert r.err.strip().splitlines()[-1] == "Processed a total of 3 messages"
    r = consume(kafka, t, "--from-beginning", timeout_ms=1500)
    assert r.rc == 0 and r.lines == ["one", "two", "three"]
    assert "Processed a total of 3 messages" in r.err
    r = consume(kafka, t, timeout_ms=1000)            # default: from the end
    assert r.rc == 0 and r.lines == []


def test_keys_headers_and_print_properties(kafka, needs):
    t = make_topic(kafka, needs)
    produce(kafka, t, ["h1:x,h2:y\tk1:v1", "\tk2:v2"], "--property", "parse.key=true",
            "--property", "key.separator=:", "--property", "parse.headers=true", "--sync")
    r = consume(kafka, t, "--from-beginning", "--property", "print.key=true", "--property",
                "print.partition=true", "--property", "print.offset=true", "--property",
                "print.timestamp=true", "--property", "print.headers=true", "--property",
                "key.separator= | ", n=2)
    assert r.rc == 0, r
    a, b = r.lines
    assert re.fullmatch(r"CreateTime:\d+ \| Partition:0 \| Offset:0 \| h1:x,h2:y \| k1 \| v1", a), a
    assert re.fullmatch(r"CreateTime:\d+ \| Partition:0 \| Offset:1 \| NO_HEADERS \| k2 \| v2", b), b
    r = tool("kafka-console-producer", "--bootstrap-server", kafka.bootstrap, "--topic", t,
             "--property", "parse.key=true", input="no separator\n")
    assert r.rc == 1
    assert r.err.strip() == "Error: No key separator found on line number 1: 'no separator'"


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", ""])
def test_compression_codecs(kafka, needs, codec):
    t = make_topic(kafka, needs)
    args = ["--compression-codec"] + ([codec] if codec else [])
    produce(kafka, t, [f"m{i}" for i in range(20)], *args, "--request-required-acks", "1")
    r = consume(kafka, t, "--from-beginning", n=20)
    assert r.rc == 0 and r.lines == [f"m{i}" for i in range(20)], r


def test_acks_zero_and_config_files(kafka, needs, tmp_path):
    t = make_topic(kafka, needs)
    cfg = tmp_path / "producer.properties"
    cfg.write_text("# producer\nacks=0\nlinger.ms=5\n")
    produce(kafka, t, ["zero"], "--producer.config", str(cfg))
    ccfg = tmp_path / "consumer.properties"
    ccfg.write_text("auto.offset.reset=earliest\n")
    deadline = time.monotonic() + 5
    while True:
        r = consume(kafka, t, "--consumer.config", str(ccfg), n=1, timeout_ms=1500)
        if r.lines == ["zero"] or time.monotonic() > deadline:
            break
    assert r.lines == ["zero"], r
    r = tool("kafka-console-producer", "--bootstrap-server", kafka.bootstrap, "--topic", t,
             "--request-required-acks", "7", input="x\n")
    assert r.rc == 1 and "acks" in r.err


def test_consumer_partition_offset_flags(kafka, needs):
    t = make_topic(kafka, needs)
    produce(kafka, t, ["a", "b", "c", "d"])
    r = consume(kafka, t, "--partition", 0, "--offset", 2, n=2)
    assert r.rc == 0 and r.lines == ["c", "d"], r
    r = consume(kafka, t, "--partition", 0, "--offset", "earliest", n=1)
    assert r.lines == ["a"]
    r = consume(kafka, t, "--partition", 0, "--from-beginning", n=4)
    assert r.lines == ["a", "b", "c", "d"]
    r = consume(kafka, t, "--partition", 0, "--offset", "latest", timeout_ms=800)
    assert r.rc == 0 and r.lines == []
    r = consume(kafka, t, "--partition", 7, timeout_ms=800)
    assert r.rc == 1 and "does not exist" in r.err


def test_consumer_bad_flag_combinations(kafka):
    cases = [
        (["--topic", "a", "--include", "b"], "Exactly one of --include/--topic is required."),
        (["--include", "a", "--partition", "0"], "The topic is required when partition is specified."),
        (["--topic", "a", "--offset", "3"], "The partition is required when offset is specified."),
        (["--topic", "a", "--partition", "0", "--offset", "1", "--from-beginning"],
         "Options from-beginning and offset cannot be specified together."),
        (["--topic", "a", "--partition", "0", "--group", "g"],
         "Options group and partition cannot be specified together."),
        (["--topic", "a", "--partition", "0", "--offset", "-4"],
         "The provided offset value '-4' is incorrect. Valid values are 'earliest', 'latest', or a non-negative long."),
        (["--topic", "a", "--isolation-level", "bogus"], "Invalid value bogus for configuration isolation.level"),
    ]
    for args, msg in cases:
        r = tool("kafka-console-consumer", "--bootstrap-server", kafka.bootstrap, *args)
        assert r.rc == 1, (args, r)
        assert r.err.splitlines()[0].startswith(msg.strip()), (args, r.err)


def test_consumer_include_and_isolation(kafka, needs):
    t = make_topic(kafka, needs)
    produce(kafka, t, ["inc"])
    r = tool("kafka-console-consumer", "--bootstrap-server", kafka.bootstrap, "--include",
             re.escape(t), "--from-beginning", "--max-messages", 1, "--timeout-ms", 3000,
             "--isolation-level", "read_committed", "--consumer-property", "client.id=inc-test")
    assert r.rc == 0 and r.lines == ["inc"], r


def test_unknown_topic_producer_without_autocreate(kafka, needs, tmp_path):
    r = tool("kafka-console-consumer", "--bootstrap-server", kafka.bootstrap, "--topic",
             name("missing"), "--timeout-ms", 800)
    assert r.rc == 0 and "Processed a total of 0 messages" in r.err


# -- offsets / records / dirs / versions --------------------------------------------------

def test_get_offsets(kafka, needs):
    t = make_topic(kafka, needs)
    produce(kafka, t, ["a", "b", "c"])
    r = tool("kafka-get-offsets", "--bootstrap-server", kafka.bootstrap, "--topic", t)
    assert r.rc == 0 and r.lines == [f"{t}:0:3"], r
    for spec in ("-2", "earliest"):
        r = tool("kafka-get-offsets", "--bootstrap-server", kafka.bootstrap, "--topic", t,
                 "--time", spec)
        assert r.lines == [f"{t}:0:0"], r
    r = tool("kafka-get-offsets", "--bootstrap-server", kafka.bootstrap, "--topic", t,
             "--time", "-3")
    if r.rc == 0:
        # the three records share one timestamp: any of their offsets carries the maximum
        assert r.lines in ([f"{t}:0:0"], [f"{t}:0:1"], [f"{t}:0:2"]), r
    r = tool("kafka-get-offsets", "--bootstrap-server", kafka.bootstrap, "--topic", t,
             "--time", "0")
    assert r.rc == 0 and r.lines == [f"{t}:0:0"], r
    r = tool("kafka-get-offsets", "--bootstrap-server", kafka.bootstrap, "--topic-partitions",
             f"{t}:0", "--time", "latest")
    assert r.lines == [f"{t}:0:3"], r
    r = tool("kafka-get-offsets", "--bootstrap-server", kafka.bootstrap, "--topic", t,
             "--partitions", "0,1")
    assert r.lines == [f"{t}:0:3"], r
    r = tool("kafka-get-offsets", "--bootstrap-server", kafka.bootstrap, "--topic", "nope-nope")
    assert r.rc == 1
    assert r.err.strip() == "Error occurred: Could not match any topic-partitions with the specified filters"
    r = tool("kafka-get-offsets", "--bootstrap-server", kafka.bootstrap, "--topic", t,
             "--time", "yesterday")
    assert r.rc == 1 and r.err.startswith("Error occurred: Malformed time argument yesterday.")
    r = tool("kafka-get-offsets", "--bootstrap-server", kafka.bootstrap, "--topic", t,
             "--topic-partitions", "x:0")
    assert r.rc == 1 and "--topic-partitions cannot be used with --topic or --partitions" in r.err


def test_delete_records(kafka, needs, tmp_path):
    t = make_topic(kafka, needs)
    produce(kafka, t, ["a", "b", "c"])
    f = tmp_path / "offsets.json"
    f.write_text(json.dumps({"partitions": [{"topic": t, "partition": 0, "offset": 2}],
                             "version": 1}))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = tool("kafka-delete-records", "--bootstrap-server", kafka.bootstrap, "--offset-json-file", bad)
    assert r.rc == 1 and r.err.strip() == "The input string is not a valid JSON"
    r = tool("kafka-delete-records", "--bootstrap-server", kafka.bootstrap)
    assert r.rc == 1 and 'Missing required argument "[offset-json-file]"' in r.err
    needs(DELETE_RECORDS)
    r = tool("kafka-delete-records", "--bootstrap-server", kafka.bootstrap, "--offset-json-file", f)
    assert r.rc == 0, r
    assert r.lines == ["Executing records delete operation", "Records delete operation completed:",
                       f"partition: {t}-0\tlow_watermark: 2"]
    r = tool("kafka-get-offsets", "--bootstrap-server", kafka.bootstrap, "--topic", t, "--time", "-2")
    assert r.lines == [f"{t}:0:2"]


def test_log_dirs(kafka, needs):
    t = make_topic(kafka, needs)
    r = tool("kafka-log-dirs", "--bootstrap-server", kafka.bootstrap)
    assert r.rc == 1 and 'Missing required argument "[describe]"' in r.err
    r = tool("kafka-log-dirs", "--bootstrap-server", kafka.bootstrap, "--describe",
             "--broker-list", "5")
    assert r.rc == 1 and "ERROR: The given brokers do not exist from --broker-list: 5" in r.err
    needs(DESCRIBE_LOG_DIRS)
    r = tool("kafka-log-dirs", "--bootstrap-server", kafka.bootstrap, "--describe",
             "--topic-list", t)
    assert r.rc == 0, r
    assert r.lines[0] == "Querying brokers for log directories information"
    assert r.lines[1] == "Received log directory information from brokers 0"
    doc = json.loads(r.lines[2])
    assert doc["version"] == 1 and doc["brokers"][0]["broker"] == 0
    parts = [p["partition"] for d in doc["brokers"][0]["logDirs"] for p in d["partitions"]]
    assert parts == [f"{t}-0"]


def test_broker_api_versions(kafka):
    r = tool("kafka-broker-api-versions", "--bootstrap-server", kafka.bootstrap)
    assert r.rc == 0, r
    assert r.lines[0] == f"{kafka.bootstrap} (id: 0 rack: null) -> ("
    assert re.fullmatch(r"\tProduce\(0\): \d+ to \d+ \[usable: \d+\],", r.lines[1])
    assert any(re.fullmatch(r"\tApiVersions\(18\): 0 to \d \[usable: \d\],?", x) for x in r.lines)
    assert r.lines[-1] == ")"


# -- configs --------------------------------------------------------------------------------

def test_configs_arguments():
    r = tool("kafka-configs", "--bootstrap-server", "127.0.0.1:1", "--entity-type", "topics")
    assert r.rc == 1 and "exactly one action" in r.err
    r = tool("kafka-configs", "--bootstrap-server", "127.0.0.1:1", "--alter", "--entity-type",
             "topics", "--entity-name", "x")
    assert r.rc == 1 and r.err.strip() == ("At least one of --add-config, --add-config-file, or "
                                           "--delete-config must be specified with --alter")
    r = tool("kafka-configs", "--bootstrap-server", "127.0.0.1:1", "--describe", "--entity-type",
             "brokers", "--entity-name", "abc")
    assert r.rc == 1 and "must be a valid integer broker id" in r.err
    r = tool("kafka-configs", "--bootstrap-server", "127.0.0.1:1", "--describe", "--entity-type",
             "bogus", "--entity-name", "x")
    assert r.rc == 1 and r.err.startswith("Invalid entity type bogus")


def test_configs_topic_and_broker(kafka, needs):
    needs(DESCRIBE_CONFIGS)
    t = make_topic(kafka, needs)
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--describe",
             "--entity-type", "topics", "--entity-name", t)
    assert r.rc == 0 and r.lines[0] == f"Dynamic configs for topic {t} are:", r
    needs(INCREMENTAL_ALTER)
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--alter", "--entity-type",
             "topics", "--entity-name", t, "--add-config", "retention.ms=1234,cleanup.policy=[delete]")
    assert r.rc == 0 and r.lines == [f"Completed updating config for topic {t}."], r
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--describe", "--topic", t)
    assert any(re.match(r"  retention.ms=1234 sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG:retention.ms=1234", x)
               for x in r.lines), r
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--alter", "--entity-type",
             "topics", "--entity-name", t, "--delete-config", "retention.ms")
    assert r.rc == 0, r
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--alter", "--entity-type",
             "topics", "--entity-name", t, "--delete-config", "retention.ms")
    assert r.rc == 1 and r.err.strip() == "Invalid config(s): retention.ms"
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--describe", "--all",
             "--entity-type", "topics", "--entity-name", t)
    assert r.lines[0] == f"All configs for topic {t} are:" and any("segment.bytes=" in x for x in r.lines)
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--describe",
             "--entity-type", "brokers", "--entity-name", "0")
    assert r.rc == 0 and r.lines[0] == "Dynamic configs for broker 0 are:", r
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--describe",
             "--entity-type", "brokers", "--entity-default")
    assert r.rc == 0 and r.lines[0] == "Default configs for brokers in the cluster are:", r
    r = tool("kafka-configs", "--bootstrap-server", kafka.bootstrap, "--describe",
             "--entity-type", "topics", "--entity-name", "no-such-topic")
    assert r.rc == 1


# -- dump-log -------------------------------------------------------------------------------

def test_dump_log(kafka, needs):
    t = make_topic(kafka, needs)
    produce(kafka, t, ["k1:hello", "k2:world"], "--property", "parse.key=true",
            "--property", "key.separator=:", "--sync")
    seg = kafka.log_dir / f"{t}-0" / "00000000000000000000.log"
    deadline = time.monotonic() + 5
    while (not seg.exists() or seg.stat().st_size == 0) and time.monotonic() < deadline:
        time.sleep(0.1)
    r = tool("kafka-dump-log", "--files", seg)
    assert r.rc == 0, r
    assert r.lines[0] == f"Dumping {seg}"
    assert r.lines[1] == "Log starting offset: 0"
    batch = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) count: 1 baseSequence: -?\d+ "
                       r"lastSequence: -?\d+ producerId: -?\d+ producerEpoch: -?\d+ "
                       r"partitionLeaderEpoch: \d+ isTransactional: false isControl: false "
                       r"deleteHorizonMs: OptionalLong.empty position: (\d+) CreateTime: \d+ "
                       r"size: \d+ magic: 2 compresscodec: none crc: \d+ isvalid: true")
    assert [bool(batch.fullmatch(x)) for x in r.lines[2:]] == [True, True], r.lines
    r = tool("kafka-dump-log", "--files", seg, "--print-data-log")
    recs = [x for x in r.lines if x.startswith("| ")]
    assert len(recs) == 2
    assert re.fullmatch(r"\| offset: 0 CreateTime: \d+ keySize: 2 valueSize: 5 sequence: -?\d+ "
                        r"headerKeys: \[\] key: k1 payload: hello", recs[0]), recs[0]
    r = tool("kafka-dump-log", "--files", seg, "--deep-iteration")
    assert [x.endswith("headerKeys: []") for x in r.lines if x.startswith("| ")] == [True, True]
    idx = seg.with_suffix(".index")
    if idx.exists():
        r = tool("kafka-dump-log", "--files", f"{seg},{idx}")
        assert f"Dumping {idx}" in r.lines
    r = tool("kafka-dump-log", "--files", "/nonexistent/00000000000000000000.log")
    assert r.rc == 1 and "No such file" in r.err and "Traceback" not in r.err
    r = tool("kafka-dump-log")
    assert r.rc == 1


def test_dump_log_offsets_decoder(tmp_path):
    import struct
    from protocol.records import build_batch
    key = struct.pack(">h", 1) + struct.pack(">h", 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    value = struct.pack(">hqih", 3, 17, -1, 0) + struct.pack(">q", 1000)
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(bytes(build_batch([(key, value)])) + b"\x00\x01")
    r = tool("kafka-dump-log", "--files", seg, "--offsets-decoder")
    assert r.rc == 0, r
    line = [x for x in r.lines if x.startswith("| ")][0]
    assert ('key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: '
            '{"version":"3","data":{"offset":17,"leaderEpoch":-1,"metadata":"","commitTimestamp":1000}}') in line
    assert r.lines[-1] == "Found 2 invalid bytes at the end of 00000000000000000000.log"


# -- perf tests -------------------------------------------------------------------------------

@pytest.mark.parametrize("client", ["confluent", "odradek"])
def test_perf_tools(kafka, needs, client):
    if client == "confluent":
        pytest.importorskip("confluent_kafka")
    t = make_topic(kafka, needs)
    r = tool("kafka-producer-perf-test", "--topic", t, "--num-records", 3000, "--record-size",
             100, "--throughput", -1, "--producer-props", f"bootstrap.servers={kafka.bootstrap}",
             "acks=1", "--client", client)
    assert r.rc == 0, r
    assert re.fullmatch(r"3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg "
                        r"latency, [\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, "
                        r"\d+ ms 99.9th\.", r.lines[-1]), r
    assert ("confluent-kafka" if client == "confluent" else "Odradek") in r.err
    r = tool("kafka-consumer-perf-test", "--bootstrap-server", kafka.bootstrap, "--topic", t,
             "--messages", 3000, "--client", client, "--timeout", 5000)
    assert r.rc == 0, r
    assert r.lines[0] == ("start.time, end.time, data.consumed.in.MB, MB.sec, "
                          "data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, "
                          "fetch.MB.sec, fetch.nMsg.sec")
    cols = r.lines[1].split(", ")
    assert len(cols) == 10 and cols[4] == "3000" and cols[2] == "0.2861", r
    r = tool("kafka-consumer-perf-test", "--bootstrap-server", kafka.bootstrap, "--topic", t,
             "--messages", 3001, "--client", client, "--timeout", 1000, "--hide-header",
             "--show-detailed-stats")
    assert r.rc == 0 and "WARNING: Exiting before consuming the expected number of messages" in r.out


def test_perf_tool_arguments(tmp_path):
    r = tool("kafka-producer-perf-test", "--topic", "x", "--num-records", 10, "--throughput", -1,
             "--producer-props", "bootstrap.servers=127.0.0.1:1")
    assert r.rc != 0 and "--record-size" in r.err and "Traceback" not in r.err
    r = tool("kafka-producer-perf-test", "--topic", "x", "--num-records", 0, "--record-size", 5,
             "--throughput", -1, "--producer-props", "bootstrap.servers=127.0.0.1:1")
    assert r.rc != 0 and "--num-records should be greater than zero" in r.err
    empty = tmp_path / "empty"
    empty.write_text("")
    r = tool("kafka-producer-perf-test", "--topic", "x", "--num-records", 1, "--payload-file",
             empty, "--throughput", -1, "--producer-props", "bootstrap.servers=127.0.0.1:1")
    assert r.rc == 1 and "File does not exist or empty file provided." in r.err
    r = tool("kafka-consumer-perf-test", "--bootstrap-server", "127.0.0.1:1", "--topic", "x")
    assert r.rc == 1 and 'Missing required argument "[messages]"' in r.err


# -- consumer groups (need the group coordinator) ----------------------------------------

@pytest.mark.parametrize("group_props", [
    [],
    ["--consumer-property", "partition.assignment.strategy=org.apache.kafka.clients.consumer.CooperativeStickyAssignor"],
    ["--consumer-property", "group.protocol=consumer"],
], ids=["classic-range", "classic-cooperative", "consumer-protocol"])
def test_console_consumer_group_commits(kafka, needs, group_props):
    needs(FIND_COORDINATOR, JOIN_GROUP)
    t = make_topic(kafka, needs)
    produce(kafka, t, [f"g{i}" for i in range(6)])
    g = name("grp")
    r = consume(kafka, t, "--group", g, "--from-beginning", *group_props, n=4, timeout_ms=15000)
    assert r.rc == 0 and r.lines == ["g0", "g1", "g2", "g3"], r
    r = consume(kafka, t, "--group", g, "--from-beginning", *group_props, n=2, timeout_ms=15000)
    assert r.rc == 0 and r.lines == ["g4", "g5"], r
    r = tool("kafka-consumer-groups", "--bootstrap-server", kafka.bootstrap, "--describe", "--group", g)
    assert r.rc == 0 and re.search(rf"\b{t}\s+0\s+6\s+6\s+0\b", r.out), r


def test_console_consumer_group_settings_refused(kafka):
    r = consume(kafka, "any", "--group", "g", "--consumer-property", "group.protocol=streams")
    assert r.rc == 1 and "Invalid value streams for configuration group.protocol" in r.err, r
    r = consume(kafka, "any", "--group", "g", "--consumer-property", "partition.assignment.strategy=x.Y")
    assert r.rc == 1 and "Class x.Y cannot be found" in r.err, r


def test_cluster_tool(kafka):
    """kafka-cluster.sh: the cluster id from the broker's meta.properties; unregister answered as
    Kafka answers a cluster without the KRaft API; usage errors in argparse4j's form."""
    meta = next(kafka.log_dir.rglob("meta.properties")).read_text()
    cluster_id = re.search(r"^cluster\.id=(.+)$", meta, re.M).group(1).strip()
    r = tool("kafka-cluster", "cluster-id", "--bootstrap-server", kafka.bootstrap)
    assert r.rc == 0 and r.lines == [f"Cluster ID: {cluster_id}"], r
    r = tool("kafka-cluster", "unregister", "-b", kafka.bootstrap, "--id", "3")
    assert r.rc == 0 and r.lines == ["The target cluster does not support the broker unregistration API."], r
    r = tool("kafka-cluster", "unregister", "--bootstrap-server", kafka.bootstrap)
    assert r.rc == 1 and "kafka-cluster.sh unregister: error: argument --id/-i is required" in r.err, r
    r = tool("kafka-cluster", "cluster-id")
    assert r.rc == 1 and "error:" in r.err, r


def test_e2e_latency_tool(kafka):
    """kafka-e2e-latency.sh: creates the missing topic, one progress line per 1000 messages, then
    Kafka's average and percentile lines; acks=0 and a short command line are refused."""
    pytest.importorskip("confluent_kafka")
    topic = "e2e-" + uuid.uuid4().hex[:6]
    r = tool("kafka-e2e-latency", kafka.bootstrap, topic, 1001, "all", 200, timeout=120)
    assert r.rc == 0, r
    assert r.lines[0] == f'Topic "{topic}" does not exist. Will create topic with 1 partition(s) and ' \
                         'replication factor = 1'
    assert [line.split("\t")[0] for line in r.lines[1:3]] == ["0", "1000"]
    assert re.fullmatch(r"Avg latency: \d+\.\d{4} ms", r.lines[3]), r
    assert re.fullmatch(r"Percentiles: 50th = \d+, 99th = \d+, 99\.9th = \d+", r.lines[4]), r
    r = tool("kafka-e2e-latency", kafka.bootstrap, topic, 10, "0", 200)
    assert r.rc == 1 and r.err.strip() == "Latency testing requires synchronous acknowledgement. Please use 1 or all"
    r = tool("kafka-e2e-latency", kafka.bootstrap, topic)
    assert r.rc == 1 and r.err.startswith("USAGE: java org.apache.kafka.tools.EndToEndLatency broker_list")

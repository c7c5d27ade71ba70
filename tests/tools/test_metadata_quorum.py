"""bin/kafka-metadata-quorum.sh (Kafka 3.9's MetadataQuorumCommand) against a broker on a KRaft
configuration: describe --status and --replication [--human-readable] in Kafka's layouts,
Kafka's usage errors; --bootstrap-controller, add-controller and remove-controller refused;
against an ordinary broker Kafka's failure for a broker without DescribeQuorum."""
from __future__ import annotations

import re
import time

import pytest

from tests.support import broker_command_available
from tests.support.broker import running
from tests.support.kraft import kraft_broker_process
from tests.tools.conftest import tool

UUID = r"[A-Za-z0-9_-]{22}"


@pytest.fixture(scope="module")
def kraft(tmp_path_factory):
    ok, why = broker_command_available()
    if not ok:
        pytest.skip(why)
    with running(kraft_broker_process(tmp_path_factory.mktemp("quorum-tool") / "b")) as b:
        yield b


def quorum(b, *args, **kw):
    return tool("kafka-metadata-quorum", "--bootstrap-server", b.bootstrap, *args, **kw)


def test_describe_status(kraft):
    r = quorum(kraft, "describe", "--status")
    assert r.rc == 0 and r.err == "", r
    lines = r.lines
    assert [line[:24] for line in lines] == [f"{k + ':':<24}" for k in (
        "ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs",
        "CurrentVoters", "CurrentObservers")], r
    values = [line[24:] for line in lines]
    assert values[0] == kraft.cluster_id
    assert values[1:3] == ["1", "1"] and int(values[3]) >= 1 and values[4:6] == ["0", "0"]
    assert values[6] == (f'[{{"id": 1, "directoryId": "{kraft.directory_id}", '
                         f'"endpoints": ["CONTROLLER://127.0.0.1:{kraft.controller_port}"]}}]')
    assert values[7] == "[]"


def test_describe_replication(kraft):
    before = int(time.time() * 1000)
    r = quorum(kraft, "describe", "--replication")
    after = int(time.time() * 1000)
    assert r.rc == 0 and r.err == "", r
    header, row = r.lines
    # Kafka's prettyPrintTable: each cell padded to its column's width, then a tab
    assert header.split("\t") == ["NodeId", "DirectoryId           ", "LogEndOffset", "Lag", "LastFetchTimestamp",
                                  "LastCaughtUpTimestamp", "Status", ""], r
    cells = [c.rstrip() for c in row.split("\t")]
    widths = [len(c) for c in header.split("\t")]
    assert [len(c) for c in row.split("\t")] == widths
    assert cells[0] == "1" and cells[1] == kraft.directory_id and int(cells[2]) >= 1 and cells[3] == "0"
    assert before - 60_000 <= int(cells[4]) == int(cells[5]) <= after and cells[6:] == ["Leader", ""]


def test_describe_replication_human_readable(kraft):
    r = quorum(kraft, "describe", "--replication", "--human-readable")
    assert r.rc == 0, r
    cells = [c.rstrip() for c in r.lines[1].split("\t")]
    assert re.fullmatch(r"\d+ ms ago", cells[4]) and re.fullmatch(r"\d+ ms ago", cells[5]), r
    assert cells[6] == "Leader"


def test_the_high_watermark_follows_metadata_changes(kraft):
    def hw():
        r = quorum(kraft, "describe", "--status")
        assert r.rc == 0, r
        return int(r.lines[3][24:])
    before = hw()
    r = tool("kafka-topics", "--bootstrap-server", kraft.bootstrap, "--create", "--topic", "quorum-tool-topic")
    assert r.rc == 0, r
    assert hw() == before + 1


@pytest.mark.parametrize("args,message", [
    (["describe"], "One of --status or --replication must be specified with describe sub-command"),
    (["describe", "--status", "--replication"],
     "Only one of --status or --replication should be specified with describe sub-command"),
    (["describe", "--status", "--human-readable"],
     "The option --human-readable is only supported along with --replication"),
    (["--command-config", "/nonexistent.properties", "describe", "--status"],
     "Properties file /nonexistent.properties does not exists!"),
    (["add-controller"], "You must supply the configuration file of the controller you are adding when using "
                         "add-controller."),
    (["remove-controller", "--controller-id", "-1", "--controller-directory-id", "x"],
     "Invalid negative --controller-id: -1"),
])
def test_kafkas_argument_errors(args, message):
    """Checked before anything is sent: no broker is needed (nothing listens on port 1)."""
    r = tool("kafka-metadata-quorum", "--bootstrap-server", "127.0.0.1:1", *args)
    assert (r.rc, r.out, r.err.strip()) == (1, "", message), r


def test_usage_errors():
    r = tool("kafka-metadata-quorum", "describe", "--status")
    assert r.rc == 1 and ("error: one of the arguments --bootstrap-server --bootstrap-controller is required"
                          in r.err), r
    r = tool("kafka-metadata-quorum", "--bootstrap-server", "127.0.0.1:1")
    assert r.rc == 1 and "kafka-metadata-quorum: error: too few arguments" in r.err, r
    r = tool("kafka-metadata-quorum", "--bootstrap-server", "127.0.0.1:1", "remove-controller", "-i", "1")
    assert r.rc == 1 and "argument --controller-directory-id/-d is required" in r.err, r
    r = tool("kafka-metadata-quorum", "--help")
    assert r.rc == 0 and "--bootstrap-server" in r.out and "describe" in r.out, r


def test_refusals(kraft, tmp_path):
    r = tool("kafka-metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{kraft.controller_port}",
             "describe", "--status")
    assert r.rc == 1 and "--bootstrap-controller is not supported" in r.err, r
    cfg = tmp_path / "controller.properties"
    cfg.write_text("process.roles=controller\nnode.id=2\n")
    for args in (["--command-config", cfg, "add-controller"], ["--command-config", cfg, "add-controller", "--dry-run"],
                 ["remove-controller", "-i", "1", "-d", kraft.directory_id]):
        r = quorum(kraft, *args)
        assert r.rc == 1 and r.out == "" and "Odradek's metadata quorum is this broker alone" in r.err, r
    r = quorum(kraft, "describe", "--status")
    assert r.rc == 0 and '"id": 1,' in r.out, r          # nothing changed


def test_a_broker_without_describe_quorum(kafka):
    """tests/tools/conftest.py's broker has no process.roles: the tool fails as Kafka's fails
    against a ZooKeeper-mode broker (Kafka adds a stack trace)."""
    for args in (["describe", "--status"], ["describe", "--replication"]):
        r = tool("kafka-metadata-quorum", "--bootstrap-server", kafka.bootstrap, *args)
        assert (r.rc, r.out) == (1, ""), r
        assert r.err.strip() == ("org.apache.kafka.common.errors.UnsupportedVersionException: "
                                 "The node does not support DESCRIBE_QUORUM"), r

"""KIP-848's group configs on a real broker: ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms`` of one group, set with ``kafka-configs.sh --entity-type groups``
(IncrementalAlterConfigs on the GROUP resource, 32) and read back with DescribeConfigs.  The
group's members get that heartbeat interval in their ConsumerGroupHeartbeat answers and are
fenced after that session timeout, while another group keeps the broker's; the values are
checked against the broker's bounds, survive a restart and can be deleted again.  A
confluent-kafka consumer with ``group.protocol=consumer`` reads in the configured group."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from protocol.errors import ErrorCode as E
from tests.integration.test_consumer_protocol import _coordinator_ready, heartbeat
from tests.integration.test_groups import PARTITIONS, WAIT, create_topic, produce, unique
from tests.support import BrokerProcess
from tests.support.net import wait_for
from tests.support.rawkafka import RawConnection

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PROPS = {
    "num.partitions": PARTITIONS,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 200,
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.session.timeout.ms": 1000,
}


def configs_tool(b, *args):
    return subprocess.run([str(REPO / "bin" / "kafka-configs.sh"), "--bootstrap-server", b.bootstrap, *args],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_a_groups_own_heartbeat_interval_and_session_timeout(tmp_path):
    b = BrokerProcess(tmp_path, name="broker", props=PROPS)
    b.start()
    try:
        topic, group, other = unique("gc"), unique("g"), unique("g")
        create_topic(b.bootstrap, topic)
        host, port = b.bootstrap.split(":")
        wait_for(lambda: _coordinator_ready(host, int(port), group), WAIT, what="the coordinator")

        r = configs_tool(b, "--entity-type", "groups", "--entity-name", group, "--alter", "--add-config",
                         "consumer.heartbeat.interval.ms=300,consumer.session.timeout.ms=1500")
        assert r.returncode == 0 and f"Completed updating config for group {group}." in r.stdout, r.stdout + r.stderr
        r = configs_tool(b, "--entity-type", "groups", "--entity-name", group, "--describe")
        assert r.returncode == 0, r.stderr
        assert f"Dynamic configs for group {group} are:" in r.stdout
        # as Kafka 4.x: the one synonym is the key itself
        assert ("consumer.heartbeat.interval.ms=300 sensitive=false synonyms={GROUP_CONFIG:"
                "consumer.heartbeat.interval.ms=300}" in r.stdout), r.stdout

        with RawConnection(host, int(port)) as conn:
            mine = conn.request(68, 1, heartbeat(group, "m" * 22, 0, [topic]))
            theirs = conn.request(68, 1, heartbeat(other, "n" * 22, 0, [topic]))
            assert (mine.error_code, mine.heartbeat_interval_ms) == (E.NONE, 300)
            assert (theirs.error_code, theirs.heartbeat_interval_ms) == (E.NONE, 500)
            # no more heartbeats: 1.5 s later the member of the configured group is fenced, the
            # other group's member (6 s) is not
            time.sleep(2.5)
            r = conn.request(68, 1, heartbeat(group, "m" * 22, mine.member_epoch))
            assert r.error_code == E.UNKNOWN_MEMBER_ID, r
            r = conn.request(68, 1, heartbeat(other, "n" * 22, theirs.member_epoch))
            assert r.error_code == E.NONE, r

        # the broker's bounds and Kafka's rules
        for bad, why in (("consumer.heartbeat.interval.ms=100",
                          "consumer.heartbeat.interval.ms must be greater than or equal to "
                          "group.consumer.min.heartbeat.interval.ms"),
                         ("consumer.session.timeout.ms=600000",
                          "consumer.session.timeout.ms must be less than or equal to "
                          "group.consumer.max.session.timeout.ms"),
                         ("consumer.heartbeat.interval.ms=1500", "consumer.heartbeat.interval.ms must be less "
                                                                 "than consumer.session.timeout.ms"),
                         ("session.timeout.ms=1000", "Unknown group config name: session.timeout.ms")):
            r = configs_tool(b, "--entity-type", "groups", "--entity-name", group, "--alter", "--add-config", bad)
            assert r.returncode != 0 and why in r.stdout + r.stderr, (bad, r.stdout, r.stderr)

        # a restart keeps them
        b.stop()
        b.start()
        wait_for(lambda: _coordinator_ready(host, int(port), group), WAIT, what="the coordinator")
        with RawConnection(host, int(port)) as conn:
            r = conn.request(68, 1, heartbeat(group, "p" * 22, 0, [topic]))
            assert (r.error_code, r.heartbeat_interval_ms) == (E.NONE, 300)

        # a real consumer reads in the configured group
        from confluent_kafka import Consumer
        produce(b.bootstrap, topic, ["v%d" % i for i in range(20)])
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "group.protocol": "consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        got, deadline = 0, time.monotonic() + 30
        while got < 20 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        c.close()
        assert got == 20

        # deleted: the broker's values again
        r = configs_tool(b, "--entity-type", "groups", "--entity-name", group, "--alter", "--delete-config",
                         "consumer.heartbeat.interval.ms,consumer.session.timeout.ms")
        assert r.returncode == 0, r.stdout + r.stderr
        r = configs_tool(b, "--entity-type", "groups", "--entity-name", group, "--describe", "--all")
        assert "consumer.heartbeat.interval.ms=500 sensitive=false" in r.stdout, r.stdout
        with RawConnection(host, int(port)) as conn:
            r = conn.request(68, 1, heartbeat(group, "q" * 22, 0, [topic]))
            assert (r.error_code, r.heartbeat_interval_ms) == (E.NONE, 500)
    finally:
        b.kill()


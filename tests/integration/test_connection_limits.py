"""Connection limits on a real broker (broker/connection_quotas.py), the way Kafka applies them:

* ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``): a connection beyond its
  address's limit is closed at once, with Kafka's log line; closing one makes room again;
* ``max.connections``: at the limit the listener stops accepting — the next connection is
  taken by the kernel but not answered until another one closes;
* ``max.connection.creation.rate``: connections over the rate are accepted late, not refused;
* all three change on a running broker through kafka-configs.sh;
* confluent-kafka produces and consumes within a per-IP limit it fits in.
"""
from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from protocol.messages import ApiVersionsRequest
from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.metrics import scrape, val
from tests.support.net import free_port
from tests.support.rawkafka import RawConnection

BIN = Path(__file__).resolve().parents[2] / "bin"
REJECTED = "Rejected connection from 127.0.0.1, address already has the configured maximum of {} connections."


def _broker(tmp_path, name, **props):
    return BrokerProcess(tmp_path / name, name=name, props=props)


def api_versions(conn: RawConnection):
    return conn.request(18, 3, ApiVersionsRequest(client_software_name="limits-test",
                                                  client_software_version="1"))


def served(b, timeout=3.0) -> RawConnection | None:
    """A new connection that got its ApiVersions answer (left open), or None if the broker closed
    it or did not answer within ``timeout``."""
    c = RawConnection(b.host, b.port, timeout=timeout)
    try:
        assert api_versions(c).error_code == 0
        return c
    except (OSError, ConnectionError):
        c.close()
        return None


def served_eventually(b, deadline_s=10.0) -> RawConnection:
    deadline = time.monotonic() + deadline_s
    while True:
        c = served(b, timeout=1.0)
        if c is not None:
            return c
        assert time.monotonic() < deadline, "no connection was served again"
        time.sleep(0.1)


def configs(b, *args):
    cp = subprocess.run([str(BIN / "kafka-configs.sh"), "--bootstrap-server", b.bootstrap, *args],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    return cp.stdout


def test_max_connections_per_ip_closes_the_extra_connection(tmp_path):
    b = _broker(tmp_path, "per-ip", **{"max.connections.per.ip": 2})
    with running(b):
        # (retried: the readiness probe's connection may not have been seen closing yet)
        c1, c2 = served_eventually(b), served_eventually(b)
        c3 = RawConnection(b.host, b.port)
        assert c3.is_closed(5.0), "a third connection from 127.0.0.1 was kept"
        c3.close()
        assert REJECTED.format(2) in b.log_text()
        # the two that were in keep working
        assert api_versions(c1).error_code == 0 and api_versions(c2).error_code == 0
        c1.close()
        c4 = served_eventually(b)
        c4.close()
        c2.close()


def test_overrides_replace_the_default_for_their_hosts(tmp_path):
    # 0 for everyone else (allowed only with overrides); localhost resolves to 127.0.0.1 (and ::1).
    # Two, not one: the readiness probe connects twice in a row, and the broker may take the
    # second connection before it has seen the first one close (Kafka would reject it the same way)
    b = _broker(tmp_path, "per-ip-overrides", **{"max.connections.per.ip": 0,
                                                  "max.connections.per.ip.overrides": "localhost:2,10.9.9.9:7"})
    with running(b):
        c1, c2 = served_eventually(b), served_eventually(b)
        c3 = RawConnection(b.host, b.port)
        assert c3.is_closed(5.0)
        c3.close()
        assert REJECTED.format(2) in b.log_text()
        c1.close()
        served_eventually(b).close()
        c2.close()


def test_per_ip_zero_without_overrides_is_refused_at_start(tmp_path):
    b = _broker(tmp_path, "per-ip-zero", **{"max.connections.per.ip": 0})
    with pytest.raises(Exception):
        b.start()
    b.stop()
    assert "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides" in b.log_text()


def test_max_connections_holds_the_next_connection_until_one_closes(tmp_path):
    b = _broker(tmp_path, "max-conns", **{"max.connections": 2})
    with running(b):
        c1, c2 = served_eventually(b), served_eventually(b)
        # the kernel completes the handshake (backlog) but the broker does not take it yet
        c3 = RawConnection(b.host, b.port, timeout=1.5)
        c3.send_raw(c3.request_bytes(18, 3, ApiVersionsRequest(client_software_name="x",
                                                                client_software_version="1")))
        with pytest.raises(socket.timeout):
            c3.recv_frame()
        c1.close()
        c3.sock.settimeout(10)
        frame = c3.recv_frame()         # answered once a slot freed
        assert len(frame) > 8
        c3.close()
        c2.close()


def test_creation_rate_delays_but_does_not_refuse(tmp_path):
    # one-second windows, two of them: the rate is connections over at least one second
    mport = free_port()
    b = _broker(tmp_path, "conn-rate", **{"max.connection.creation.rate": 5, "quota.window.num": 2,
                                          "quota.window.size.seconds": 1,
                                          "odradek.metrics.prometheus.port": mport,
                                          "odradek.metrics.prometheus.host": "127.0.0.1"})
    with running(b):
        time.sleep(2.5)         # the readiness probes' connections leave the window
        t0 = time.monotonic()
        conns = [served(b, timeout=10.0) for _ in range(15)]
        elapsed = time.monotonic() - t0
        assert all(c is not None for c in conns), "a connection over the rate was refused"
        for c in conns:
            c.close()
        # 15 connections at 5/s: at least two seconds' worth of delays after the first five
        assert elapsed >= 1.0, f"15 connections accepted in {elapsed:.2f} s at max 5/s"
        m = scrape(f"http://127.0.0.1:{mport}/metrics")
        assert val(m, "kafka_network_acceptor_blocked_seconds_total", listener="PLAINTEXT") >= 0.5
        assert val(m, "kafka_server_socketservermetrics_connection_accept_throttle_time",
                   listener="PLAINTEXT") > 0


def test_limits_change_on_a_running_broker(tmp_path):
    b = _broker(tmp_path, "dynamic-limits")
    with running(b):
        configs(b, "--alter", "--entity-type", "brokers", "--entity-default",
                "--add-config", "max.connections.per.ip=1")
        held = served_eventually(b)
        deadline = time.monotonic() + 10
        while True:         # the broker applies the change from its config notification
            extra = RawConnection(b.host, b.port)
            closed = extra.is_closed(1.0)
            extra.close()
            if closed:
                break
            assert time.monotonic() < deadline, "max.connections.per.ip=1 was not applied"
            time.sleep(0.2)
        assert REJECTED.format(1) in b.log_text()
        held.close()
        time.sleep(0.3)
        configs(b, "--alter", "--entity-type", "brokers", "--entity-default",
                "--delete-config", "max.connections.per.ip")
        deadline = time.monotonic() + 10
        while True:
            pair = [served(b, timeout=1.0), served(b, timeout=1.0)]
            ok = all(c is not None for c in pair)
            for c in pair:
                if c is not None:
                    c.close()
            if ok:
                break
            assert time.monotonic() < deadline, "removing max.connections.per.ip did not lift it"
            time.sleep(0.2)
        out = configs(b, "--describe", "--entity-type", "brokers", "--entity-default")
        assert "max.connections.per.ip" not in out


def test_confluent_client_within_a_per_ip_limit(tmp_path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    b = _broker(tmp_path, "per-ip-client", **{"max.connections.per.ip": 4})
    with running(b):
        p = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap})
        for i in range(100):
            p.produce("limits", value=b"v%d" % i)
        assert p.flush(30) == 0
        c = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "limits",
                                      "auto.offset.reset": "earliest"})
        c.subscribe(["limits"])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        assert got == [b"v%d" % i for i in range(100)]


def burst(b, n):
    """Open ``n`` connections at once, then see which are served: (served, closed unanswered)."""
    conns = [RawConnection(b.host, b.port, timeout=3.0) for _ in range(n)]
    served_n = closed_n = 0
    for c in conns:
        try:
            assert api_versions(c).error_code == 0
            served_n += 1
        except (OSError, ConnectionError):
            closed_n += 1
        finally:
            c.close()
    return served_n, closed_n


def test_ip_connection_rate_quota(tmp_path):
    """connection_creation_rate for an IP entity (kafka-configs.sh --entity-type ips): connections of
    that address over the rate are closed unanswered after their throttle time; removing the quota
    lifts it; the default IP entity applies to addresses without their own."""
    mport = free_port()
    b = _broker(tmp_path, "ip-rate", **{"quota.window.num": 2, "quota.window.size.seconds": 1,
                                        "odradek.metrics.prometheus.port": mport,
                                        "odradek.metrics.prometheus.host": "127.0.0.1"})
    with running(b):
        out = configs(b, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.1",
                      "--add-config", "connection_creation_rate=3")
        assert "Completed updating config for ip 127.0.0.1." in out
        time.sleep(2.5)         # the tool's own connections leave the rate windows
        served_n, closed_n = burst(b, 10)
        # three fit in the (at least one second long) window; the rest are closed unanswered
        assert closed_n >= 5 and served_n >= 1, (served_n, closed_n)
        m = scrape(f"http://127.0.0.1:{mport}/metrics")
        assert val(m, "kafka_server_socketservermetrics_ip_connection_accept_throttle_time",
                   listener="PLAINTEXT") > 0
        time.sleep(2.5)
        out = configs(b, "--describe", "--entity-type", "ips", "--entity-name", "127.0.0.1")
        assert "Quota configs for ip '127.0.0.1' are connection_creation_rate=3.0" in out
        time.sleep(2.5)
        configs(b, "--alter", "--ip", "127.0.0.1", "--delete-config", "connection_creation_rate")
        time.sleep(0.5)
        assert burst(b, 10) == (10, 0)
        # the default entity: every address without its own quota
        out = configs(b, "--alter", "--ip-defaults", "--add-config", "connection_creation_rate=2")
        assert "Completed updating default config for ips in the cluster." in out
        time.sleep(2.5)
        served_n, closed_n = burst(b, 10)
        assert closed_n >= 5, (served_n, closed_n)
        time.sleep(2.5)
        out = configs(b, "--describe", "--entity-type", "ips", "--entity-default")
        assert "Quota configs for the default ip are connection_creation_rate=2.0" in out


def test_ip_quota_entity_checks(tmp_path):
    b = _broker(tmp_path, "ip-checks")
    with running(b):
        cp = subprocess.run([str(BIN / "kafka-configs.sh"), "--bootstrap-server", b.bootstrap, "--alter",
                             "--entity-type", "ips", "--entity-name", "no-such-host.invalid",
                             "--add-config", "connection_creation_rate=3"], capture_output=True, text=True,
                            timeout=60)
        assert cp.returncode != 0
        assert "The entity name for ips must be a valid IP or resolvable host, but it is: " \
               "no-such-host.invalid" in cp.stdout + cp.stderr
        cp = subprocess.run([str(BIN / "kafka-configs.sh"), "--bootstrap-server", b.bootstrap, "--alter",
                             "--ip", "10.0.0.1", "--add-config", "producer_byte_rate=3"],
                            capture_output=True, text=True, timeout=60)
        assert cp.returncode != 0
        assert "Only connection quota configs can be added for 'ips' using --bootstrap-server. Unexpected " \
               "config names: producer_byte_rate" in cp.stdout + cp.stderr

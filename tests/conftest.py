"""Shared pytest configuration for Odradek's tests.

Fixtures (see tests/support/ for the classes behind them):

    broker            function-scoped: one started BrokerProcess (python -m broker) on a
                      free loopback port with a fresh log dir; stopped after the test
    broker_factory    function-scoped: broker_factory(**kwargs) -> started BrokerProcess;
                      kwargs go to BrokerProcess (props=, overrides=, cmd=, port=, name=,
                      start=False to get it unstarted); all are stopped after the test
    zookeeper         session-scoped: a running ZooKeeperProcess (Debian ZooKeeper 3.8)
    zk_connect        function-scoped: "127.0.0.1:<port>/<fresh chroot>" on that server

Marking: a test that uses broker/broker_factory (or lives in tests/integration/) is
marked `integration`; one that uses zookeeper/zk_connect is marked `cluster`.
Skipping: broker tests are skipped while broker/__main__.py does not exist (unless
--broker-cmd / ODRADEK_BROKER_CMD names another command); ZooKeeper tests are skipped
when java or the ZooKeeper jar is missing, except with ODRADEK_STRICT_DEPS=1 (set by
scripts/test.sh and CI), where that is an error.
When a test fails, the tail of every broker/ZooKeeper log it started is added to the
report, and the ids of the failed tests are printed once more after pytest's last line: with
CI set pytest does not shorten the summary's assertion messages, and one long message can push
the other failures out of a CI log's tail.
"""
from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from tests.support import (BrokerProcess, ManagedProcess, ZooKeeperProcess,
                           broker_command_available, zookeeper_available)
from tests.support.deps import strict_deps
from tests.support.process import kill_all_live

BROKER_FIXTURES = {"broker", "broker_factory"}
ZK_FIXTURES = {"zookeeper", "zk_connect"}

_procs_key = pytest.StashKey[list]()


def _strict() -> bool:
    return strict_deps()


def pytest_addoption(parser):
    group = parser.getgroup("odradek")
    group.addoption("--broker-cmd", default=None,
                    help="command prefix that starts a broker (default: python -m broker); "
                         "the props file and --override k=v arguments are appended")
    group.addoption("--keep-logs-lines", type=int, default=60,
                    help="log lines of each started process shown for a failed test")


def _on_sigterm(signum, frame):
    # Brokers and ZooKeeper run in their own sessions, so a CI timeout's SIGTERM
    # does not reach them: kill them, then die of the signal as usual.
    kill_all_live()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def pytest_configure(config):
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    atexit.register(kill_all_live)
    cmd = config.getoption("--broker-cmd")
    if cmd:
        os.environ["ODRADEK_BROKER_CMD"] = cmd


def pytest_collection_modifyitems(config, items):
    broker_ok, broker_why = broker_command_available()
    zk_ok, zk_why = zookeeper_available()
    integration_dir = Path(__file__).parent / "integration"
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        uses_broker = bool(fixtures & BROKER_FIXTURES)
        uses_zk = bool(fixtures & ZK_FIXTURES)
        if uses_broker or integration_dir in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
        if uses_zk:
            item.add_marker(pytest.mark.cluster)
        if uses_broker and not broker_ok:
            item.add_marker(pytest.mark.skip(reason=broker_why))
        if uses_zk and not zk_ok and not _strict():
            item.add_marker(pytest.mark.skip(reason=zk_why))


def _track(request, proc: ManagedProcess) -> None:
    procs = request.node.stash.setdefault(_procs_key, [])
    procs.append(proc)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        lines = item.config.getoption("--keep-logs-lines")
        for proc in item.stash.get(_procs_key, []):
            report.sections.append((f"{proc.name} log ({proc.log_path})", proc.log_tail(lines)))
    return report


def pytest_sessionfinish(session, exitstatus):
    kill_all_live()


_failed: list[str] = []


def pytest_runtest_logreport(report):
    if report.failed:
        _failed.append(report.nodeid if report.when == "call" else f"{report.nodeid} (in {report.when})")


def pytest_unconfigure(config):
    """After pytest's last line: the failed tests' ids alone (their reports are above)."""
    if _failed:
        out = sys.__stdout__
        out.write(f"\n{len(_failed)} failed (reports above):\n")
        for nodeid in _failed:
            out.write(f"FAILED {nodeid}\n")
        out.flush()


# -- brokers ---------------------------------------------------------------------------

@pytest.fixture
def broker_factory(request, tmp_path):
    started: list[BrokerProcess] = []

    def make(*, start: bool = True, name: str | None = None, **kwargs) -> BrokerProcess:
        n = len(started)
        name = name or ("broker" if n == 0 else f"broker{n}")
        b = BrokerProcess(tmp_path / name, name=name, **kwargs)
        started.append(b)
        _track(request, b)
        if start:
            b.start()
        return b

    yield make
    for b in reversed(started):
        try:
            b.kill() if b.paused else b.stop()
        except Exception:
            b.kill()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()


# -- ZooKeeper ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    ok, why = zookeeper_available()
    if not ok:
        if _strict():
            pytest.fail(f"ZooKeeper unavailable: {why}")
        pytest.skip(why)
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"))
    zk.start()
    yield zk
    zk.kill() if zk.paused else zk.stop()


@pytest.fixture
def zk_connect(request, zookeeper) -> str:
    """A connect string with a fresh chroot (created), so tests sharing the
    session's ZooKeeper never see each other's znodes."""
    _track(request, zookeeper)
    if zookeeper.paused or not zookeeper.alive:
        zookeeper.kill()
        zookeeper.start()
    from kazoo.client import KazooClient
    chroot = zookeeper.new_chroot()
    zk = KazooClient(hosts=zookeeper.connect, timeout=10)
    zk.start(timeout=15)
    try:
        zk.ensure_path(chroot)
    finally:
        zk.stop()
        zk.close()
    return zookeeper.connect_string(chroot)

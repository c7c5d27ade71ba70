"""Fixtures for the command-line tool tests: one broker per module (tools are read-mostly and
starting a broker per test would dominate the run), and helpers to run bin/kafka-*.sh."""
from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from tests.support import BrokerProcess, broker_command_available, free_port
from tests.support.broker import running

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / "bin"


class Result:
    def __init__(self, cp):
        self.rc = cp.returncode
        self.out = cp.stdout
        self.err = cp.stderr

    @property
    def lines(self):
        return self.out.splitlines()

    def __repr__(self):
        return f"rc={self.rc}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def tool(name: str, *args, input: str | None = None, timeout: float = 60, env=None) -> Result:
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)              # the launcher must find the checkout by itself
    e.update(env or {})
    cp = subprocess.run([str(BIN / f"{name}.sh"), *map(str, args)], input=input,
                        capture_output=True, text=True, timeout=timeout, env=e, cwd="/")
    return Result(cp)


def broker_apis(bootstrap: str) -> dict[int, tuple[int, int]]:
    from protocol.client import KafkaClientConnection
    host, port = bootstrap.rsplit(":", 1)

    async def go():
        c = await KafkaClientConnection.connect(host, int(port), timeout=10)
        await c.close()
        return c.api_versions
    return asyncio.run(go())


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    ok, why = broker_command_available()
    if not ok:
        pytest.skip(why)
    # some tools' records carry fixed old timestamps: keep them from time retention (its first
    # pass runs 30 s after start, as Kafka's)
    b = BrokerProcess(tmp_path_factory.mktemp("tools-broker"), name="tools-broker", props={"log.retention.ms": -1})
    with running(b):
        b.apis = broker_apis(b.bootstrap)
        yield b


@pytest.fixture
def needs(kafka):
    from protocol.messages import REQUESTS

    def check(*api_keys):
        for k in api_keys:
            if k not in kafka.apis:
                pytest.skip(f"the broker does not implement {REQUESTS[k].__name__[:-7]} yet")
    return check


@pytest.fixture
def down_port():
    return free_port()


@pytest.fixture
def fast_fail(tmp_path):
    """A --command-config that gives up on an unreachable broker after 1.5 s."""
    p = tmp_path / "client.properties"
    p.write_text("default.api.timeout.ms=1500\nrequest.timeout.ms=1500\n")
    return str(p)

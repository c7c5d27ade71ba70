"""BrokerProcess: one Odradek broker (or any Kafka-wire broker command) on a free
loopback port with its own temporary log directory."""
from __future__ import annotations

import contextlib

import os
import shlex
import sys
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .net import LOOPBACK, ApiVersionsReply, free_port, kafka_ready, port_open
from .process import ManagedProcess

REPO_ROOT = Path(__file__).resolve().parents[2]

# Settings every test broker gets unless the test overrides them: single-broker
# friendly replication factors and no initial rebalance delay (tests would wait 3 s).
DEFAULT_PROPS: dict[str, str] = {
    "broker.id": "0",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "true",
}

CommandSpec = Sequence[str] | str | Callable[["BrokerProcess"], list[str]]


def default_command_prefix() -> list[str]:
    """`python -m broker`, or ODRADEK_BROKER_CMD (split like a shell) when set,
    e.g. ODRADEK_BROKER_CMD='bin/kafka-server-start.sh'."""
    env = os.environ.get("ODRADEK_BROKER_CMD")
    if env:
        return shlex.split(env)
    return [sys.executable, "-m", "broker"]


def broker_command_available() -> tuple[bool, str]:
    """Whether the default broker command can run at all (for skip decisions)."""
    if os.environ.get("ODRADEK_BROKER_CMD"):
        return True, ""
    if (REPO_ROOT / "broker" / "__main__.py").exists():
        return True, ""
    return False, "broker/__main__.py does not exist yet (set ODRADEK_BROKER_CMD to use another command)"


def write_properties(path: Path, props: Mapping[str, object]) -> None:
    lines = ["# written by tests/support/broker.py"]
    for k, v in props.items():
        lines.append(f"{k}={v}")
    path.write_text("\n".join(lines) + "\n")


class BrokerProcess(ManagedProcess):
    """A broker process.

    argv = <command prefix> <props file> --override k=v ... where the props file holds
    DEFAULT_PROPS + `props`, and the overrides are listeners, log.dirs and `overrides`.

    cmd: a list/str prefix (default `python -m broker`), or a list containing the
    placeholder "{props}" (then nothing is appended but the overrides), or a callable
    taking this BrokerProcess and returning the complete argv.
    """

    name = "broker"

    def __init__(self, workdir: str | os.PathLike, *, props: Mapping[str, object] | None = None,
                 overrides: Mapping[str, object] | None = None, port: int | None = None,
                 host: str = LOOPBACK, cmd: CommandSpec | None = None, name: str | None = None,
                 env: Mapping[str, str] | None = None, startup_timeout: float = 30.0,
                 use_defaults: bool = True):
        super().__init__(workdir, name=name)
        self.host = host
        self.port = port or free_port(host)
        self.log_dir = self.workdir / "logs"
        self.log_dir.mkdir(exist_ok=True)
        self.props_path = self.workdir / "server.properties"
        self.props: dict[str, str] = dict(DEFAULT_PROPS) if use_defaults else {}
        self.props.update({k: str(v) for k, v in (props or {}).items()})
        self.overrides: dict[str, str] = {k: str(v) for k, v in (overrides or {}).items()}
        self.cmd = cmd
        self.extra_env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.last_api_versions: ApiVersionsReply | None = None

    # -- addresses --------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """host:port for bootstrap.servers."""
        return f"{self.host}:{self.port}"

    @property
    def listener(self) -> str:
        return f"PLAINTEXT://{self.host}:{self.port}"

    # -- command line -------------------------------------------------------------
    def all_overrides(self) -> dict[str, str]:
        o = {"listeners": self.listener, "advertised.listeners": self.listener,
             "log.dirs": str(self.log_dir)}
        o.update(self.overrides)
        return o

    def override_args(self) -> list[str]:
        args = []
        for k, v in self.all_overrides().items():
            args += ["--override", f"{k}={v}"]
        return args

    def command(self) -> list[str]:
        write_properties(self.props_path, self.props)
        cmd = self.cmd if self.cmd is not None else default_command_prefix()
        if callable(cmd):
            return list(cmd(self))
        prefix = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        if any("{props}" in a for a in prefix):
            argv = [a.replace("{props}", str(self.props_path)) for a in prefix]
        else:
            argv = prefix + [str(self.props_path)]
        return argv + self.override_args()

    def cwd(self) -> str:
        return str(REPO_ROOT)

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        # `python -m broker` must find the checkout even when it is not installed.
        pp = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + pp if pp else "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(self.extra_env)
        return env

    # -- readiness ----------------------------------------------------------------
    def is_ready(self) -> bool:
        if not port_open(self.host, self.port, timeout=0.5):
            return False
        reply = kafka_ready(self.host, self.port, timeout=2.0)
        if reply is None:
            return False
        self.last_api_versions = reply
        return True

    def api_versions(self) -> ApiVersionsReply:
        """A fresh raw ApiVersions v0 exchange with the running broker."""
        from .net import api_versions_v0
        return api_versions_v0(self.host, self.port)

    def start(self, wait: bool = True, overrides: Mapping[str, object] | None = None):
        """Start (again).  `overrides` are merged into this broker's overrides first."""
        if overrides:
            self.overrides.update({k: str(v) for k, v in overrides.items()})
        return super().start(wait=wait)

    def restart(self, clean: bool = True, wait: bool = True,
                overrides: Mapping[str, object] | None = None):
        if clean:
            self.stop()
        else:
            self.kill()
        return self.start(wait=wait, overrides=overrides)


@contextlib.contextmanager
def running(b: "BrokerProcess"):
    """Start ``b`` and stop it afterwards (SIGTERM, or SIGKILL if that fails): a module fixture's
    ``with running(BrokerProcess(...)) as b: yield b``."""
    b.start()
    try:
        yield b
    finally:
        try:
            b.stop()
        except Exception:
            b.kill()

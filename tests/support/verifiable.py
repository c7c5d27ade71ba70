"""kafka-verifiable-consumer.sh run in the background as a group member whose JSON events are
read as they come (tests/tools/test_verifiable_consumer.py, and the Java tier's mixed groups)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

BIN = Path(__file__).resolve().parents[2] / "bin"


class Member:
    """A verifiable consumer running in the background; its events are read as they come."""

    def __init__(self, kafka, topic, group, *args):
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen(
            [str(BIN / "kafka-verifiable-consumer.sh"), "--bootstrap-server", kafka.bootstrap,
             "--topic", topic, "--group-id", group, *map(str, args)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd="/")
        self.events: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    def history(self) -> list[set[int]]:
        """The partitions it held after each assignment or revocation event, in order."""
        held: set[int] = set()
        out = []
        for e in list(self.events):
            if e["name"] == "partitions_assigned":
                held = held | {p["partition"] for p in e["partitions"]}
            elif e["name"] == "partitions_revoked":
                held = held - {p["partition"] for p in e["partitions"]}
            else:
                continue
            out.append(held)
        return out

    def owned(self) -> set[int]:
        """The partitions the listener events say it holds now."""
        h = self.history()
        return h[-1] if h else set()

    def named(self, name):
        return [e for e in list(self.events) if e["name"] == name]

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(timeout=5)
        return self.proc.stderr.read()


def wait_until(cond, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")



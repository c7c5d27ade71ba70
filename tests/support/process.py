"""A child process under test control: started in its own session (so signals reach
wrapper scripts and their children alike), output captured to a log file, and the
usual fault-injection verbs: stop (SIGTERM), kill (SIGKILL), pause (SIGSTOP),
resume (SIGCONT)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Sequence

# Every ManagedProcess still running; conftest kills leftovers at session end.
_live: "set[ManagedProcess]" = set()


class ProcessStartError(RuntimeError):
    """The process exited or did not become ready in time; the message has its log tail."""


class ManagedProcess:
    name = "process"

    def __init__(self, workdir: str | os.PathLike, name: str | None = None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        if name:
            self.name = name
        self.log_path = self.workdir / f"{self.name}.log"
        self.proc: subprocess.Popen | None = None
        self.paused = False
        self.starts = 0

    # -- subclasses fill these in -------------------------------------------------
    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def cwd(self) -> str | None:
        return None

    def is_ready(self) -> bool:
        raise NotImplementedError

    startup_timeout = 30.0

    # -- lifecycle --------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def start(self, wait: bool = True) -> "ManagedProcess":
        if self.alive:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        argv = self.command()
        self.starts += 1
        log = open(self.log_path, "ab", buffering=0)
        try:
            log.write(f"\n===== start #{self.starts} at {time.strftime('%H:%M:%S')}: "
                      f"{' '.join(argv)}\n".encode())
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.cwd(), env=self.environment(), start_new_session=True)
        finally:
            log.close()
        self.paused = False
        _live.add(self)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float | None = None) -> None:
        timeout = self.startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive:
                raise ProcessStartError(
                    f"{self.name} exited with code {self.returncode} before it was ready\n"
                    f"command: {' '.join(self.command())}\n{self.describe_log()}")
            if self.is_ready():
                return
            if time.monotonic() >= deadline:
                self.kill()
                raise ProcessStartError(
                    f"{self.name} was not ready after {timeout:.0f}s (killed)\n"
                    f"command: {' '.join(self.command())}\n{self.describe_log()}")
            time.sleep(0.1)

    def signal(self, sig: int) -> None:
        """Send `sig` to the whole process group (wrapper scripts included)."""
        if not self.alive:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it is still running after `timeout` seconds.

        Returns the exit code (negative = killed by that signal)."""
        if not self.alive:
            self._reap_group()
            return self.returncode
        if self.paused:
            self.resume()
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._note(f"did not exit {timeout:.0f}s after SIGTERM; sending SIGKILL")
            self.kill()
        self._reap_group()
        _live.discard(self)
        return self.returncode

    def kill(self) -> int | None:
        """SIGKILL (an unclean crash) and wait."""
        if self.alive:
            self.signal(signal.SIGKILL)
            self.proc.wait(10)
        self._reap_group()
        self.paused = False
        _live.discard(self)
        return self.returncode

    def pause(self, timeout: float = 10.0) -> None:
        """SIGSTOP: the process keeps its sockets but stops answering.

        Returns once every thread of the group is stopped. kill() only queues the
        signal: on a busy machine a thread woken by new work (an incoming
        connection, say) can run and answer before the group stop reaches it."""
        self.signal(signal.SIGSTOP)
        self.paused = True
        deadline = time.monotonic() + timeout
        while not self._group_stopped():
            if time.monotonic() > deadline:
                self._note(f"not every thread had stopped {timeout:.0f}s after SIGSTOP")
                return
            time.sleep(0.005)

    def _group_stopped(self) -> bool:
        """True when every thread of every process in the group is in state T."""
        if self.proc is None:
            return True
        pgid = self.proc.pid
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
                # the command name may hold spaces: the fields start after ')'
                fields = stat[stat.rindex(")") + 2:].split()
                if int(fields[2]) != pgid:
                    continue
                for task in os.listdir(f"/proc/{entry}/task"):
                    with open(f"/proc/{entry}/task/{task}/stat") as f:
                        tstat = f.read()
                    state = tstat[tstat.rindex(")") + 2:].split()[0]
                    if state not in ("T", "t", "Z", "X"):
                        return False
            except (FileNotFoundError, ProcessLookupError, ValueError):
                continue
        return True

    def resume(self) -> None:
        """SIGCONT after pause()."""
        self.signal(signal.SIGCONT)
        self.paused = False

    def restart(self, clean: bool = True, wait: bool = True) -> "ManagedProcess":
        """Stop (SIGTERM if clean, else SIGKILL) and start again with the same
        port and data directory."""
        if clean:
            self.stop()
        else:
            self.kill()
        return self.start(wait=wait)

    def _reap_group(self) -> None:
        # Leftover children of a wrapper script that ignored the signal.
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    # -- diagnostics ------------------------------------------------------------
    def _note(self, text: str) -> None:
        with open(self.log_path, "ab") as f:
            f.write(f"----- [test harness] {text}\n".encode())

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 80) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def describe_log(self, lines: int = 80) -> str:
        return f"--- last {lines} lines of {self.log_path} ---\n{self.log_tail(lines)}"

    # -- context manager --------------------------------------------------------
    def __enter__(self):
        if not self.alive:
            self.start()
        return self

    def __exit__(self, *exc):
        self.kill() if self.paused else self.stop()

    def __repr__(self) -> str:
        state = "paused" if self.paused else ("running" if self.alive else "stopped")
        return f"<{type(self).__name__} {self.name} pid={self.pid} {state}>"


def kill_all_live() -> None:
    for p in list(_live):
        try:
            p.kill()
        except Exception:
            pass


def resolve_command(cmd: str | Sequence[str]) -> list[str]:
    import shlex
    return shlex.split(cmd) if isinstance(cmd, str) else list(cmd)

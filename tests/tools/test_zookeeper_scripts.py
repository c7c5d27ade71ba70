"""bin/zookeeper-server-start.sh -daemon and bin/zookeeper-server-stop.sh: the pid goes to the run
directory, the stop script ends that ZooKeeper (and only a process that is ZooKeeper), and with
nothing left to stop it says so as Kafka's script does."""
from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.net import free_port
from tests.support.zookeeper import zookeeper_available

BIN = Path(__file__).resolve().parents[2] / "bin"


def test_start_daemon_then_stop(tmp_path):
    ok, why = zookeeper_available()
    if not ok:
        pytest.skip(why)
    port = free_port("127.0.0.1")
    conf = tmp_path / "zookeeper.properties"
    conf.write_text(f"dataDir={tmp_path / 'data'}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
                    "maxClientCnxns=0\nadmin.enableServer=false\n")
    env = {**os.environ, "ODRADEK_RUN_DIR": str(tmp_path / "run"), "LOG_DIR": str(tmp_path / "logs")}
    r = subprocess.run([str(BIN / "zookeeper-server-start.sh"), "-daemon", str(conf)], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    pid_files = list((tmp_path / "run").glob("zookeeper-*.pid"))
    assert len(pid_files) == 1
    pid = int(pid_files[0].read_text())
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"srvr")
                    if b"Zookeeper version" in s.recv(4096):
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "logs" / "zookeeper.out").read_text()[-2000:]
            time.sleep(0.3)
        # a pid file naming a process that is not ZooKeeper is stale: left alone, removed
        (tmp_path / "run" / "zookeeper-7.pid").write_text(str(os.getpid()))
        r = subprocess.run([str(BIN / "zookeeper-server-stop.sh")], env=env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert list((tmp_path / "run").glob("zookeeper-*.pid")) == []
        r = subprocess.run([str(BIN / "zookeeper-server-stop.sh")], env=env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 1 and r.stdout.strip() == "No zookeeper server to stop", r
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass

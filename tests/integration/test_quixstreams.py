"""Quix Streams, a Python stream-processing library on confluent-kafka, unchanged against a real
broker: tests/quix/app.py keeps a per-key count in State (a compacted changelog topic) and a
per-user count after group_by (a repartition topic), with processing_guarantee="exactly-once"
(transactions, read_committed).  It is killed with SIGKILL in the middle of the input, restarted
(its fixed transactional id fences the dead run's open transaction), stopped with SIGTERM,
restarted again and run to the end: read_committed, every input record has exactly one result in
each output, and each key's and each user's counts run 1, 2, ... n with no gap and no repeat
(state restored from the changelog, nothing counted twice).

Quix Streams lives in tests/quix/.venv (scripts/install-test-deps.sh) because it pins an older
confluent-kafka than the rest of the suite uses.
"""
from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support import BrokerProcess
from tests.support.broker import running
from tests.support.deps import missing_dependency

pytestmark = pytest.mark.integration

QUIX = Path(__file__).resolve().parents[1] / "quix"
PYTHON = QUIX / ".venv" / "bin" / "python"
N = 3000


def _missing() -> str | None:
    if not PYTHON.exists():
        return "Quix Streams is not installed (scripts/install-test-deps.sh makes tests/quix/.venv)"
    r = subprocess.run([str(PYTHON), "-c", "import quixstreams"], capture_output=True, text=True, timeout=60)
    return None if r.returncode == 0 else f"quixstreams does not import: {r.stderr[-500:]}"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    why = _missing()
    if why:
        missing_dependency(why)
    with running(BrokerProcess(tmp_path_factory.mktemp("quix-broker"), name="broker",
                               props={"num.partitions": 3, "group.initial.rebalance.delay.ms": 0})) as b:
        yield b


def produce(boot: str, topic: str, ids: range) -> None:
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "linger.ms": 5})
    errors = []
    for i in ids:
        p.produce(topic, key=f"k{i % 10}", value=json.dumps({"id": i, "user": f"u{i % 7}"}),
                  on_delivery=lambda err, _msg: errors.append(err) if err else None)
        p.poll(0)
    assert p.flush(30) == 0 and errors == []


def read_committed(boot: str, topic: str) -> list[dict]:
    """Everything a read_committed consumer sees in ``topic`` up to its last stable offset."""
    c = Consumer({"bootstrap.servers": boot, "group.id": "check-" + uuid.uuid4().hex, "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        md = c.list_topics(topic, timeout=10).topics[topic]
        if md.error is not None:
            return []
        c.assign([TopicPartition(topic, p, 0) for p in md.partitions])
        out, idle = [], 0
        while idle < 3:
            batch = c.consume(1000, timeout=0.5)
            idle = 0 if batch else idle + 1
            for m in batch:
                assert m.error() is None, m.error()
                out.append(json.loads(m.value()))
        return out
    finally:
        c.close()


class App:
    def __init__(self, boot: str, workdir: Path, tag: str):
        self.cmd = [str(PYTHON), str(QUIX / "app.py"), boot, f"{tag}-in", tag, f"{tag}-g",
                    str(workdir / "state"), "instance-1"]
        self.log = workdir / "app.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self, sig: int) -> None:
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        self.proc.send_signal(sig)
        self.proc.wait(60)


def test_exactly_once_state_survives_kill_and_restarts(kafka, tmp_path):
    boot, tag = kafka.bootstrap, "quix"
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic(f"{tag}-in", 3, 1)])[f"{tag}-in"].result(15)
    produce(boot, f"{tag}-in", range(0, N // 2))
    app = App(boot, tmp_path, tag)
    try:
        app.start()
        deadline = time.monotonic() + 90
        while len(read_committed(boot, f"{tag}-counts")) < N // 6:      # part of the input done
            assert time.monotonic() < deadline, app.log.read_text()[-3000:]
            time.sleep(1)
        app.stop(signal.SIGKILL)
        produce(boot, f"{tag}-in", range(N // 2, N))
        app.start()
        time.sleep(8)
        app.stop(signal.SIGTERM)
        app.start()
        deadline = time.monotonic() + 180
        while True:
            counts, users = read_committed(boot, f"{tag}-counts"), read_committed(boot, f"{tag}-users")
            if len(counts) >= N and len(users) >= N:
                break
            assert time.monotonic() < deadline, (len(counts), len(users), app.log.read_text()[-3000:])
            time.sleep(2)
        app.stop(signal.SIGTERM)
    finally:
        if app.proc is not None and app.proc.poll() is None:
            app.proc.kill()
    log = app.log.read_text()
    assert "Traceback" not in log, log[-3000:]
    for records, field in ((counts, "key"), (users, "user")):
        assert sorted(Counter(r["id"] for r in records).items()) == [(i, 1) for i in range(N)]
        by = defaultdict(list)
        for r in records:
            by[r[field]].append(r["count"])
        assert all(sorted(c) == list(range(1, len(c) + 1)) for c in by.values()), \
            {k: sorted(c)[:20] for k, c in by.items()}
    assert {k: len(c) for k, c in by.items()} == {f"u{u}": len(range(u, N, 7)) for u in range(7)}

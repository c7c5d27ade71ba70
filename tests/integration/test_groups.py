"""Consumer groups against a real broker process, with kafka-python, aiokafka, confluent-kafka and kcat.

* a group of two on a 4-partition topic splits the partitions disjointly and completely; when one
  member closes the other owns all four within a session timeout; when one is killed -9 (a
  consumer subprocess), likewise once the session timeout has passed;
* commit, close, produce more, and a new member resumes exactly at the committed offsets (every
  record of the second batch once, nothing of the first) -- per client;
* confluent-kafka with ``partition.assignment.strategy=cooperative-sticky``: incremental
  assignment, the first member keeps the partitions it is not asked to give up;
* static members (``group.instance.id``): a restarted member gets its partitions back without
  a rebalance of the others;
* three groups rebalancing at the same time do not disturb each other;
* committed offsets survive a broker restart, clean and kill -9.

Every consumer runs in its own thread (kafka-python and confluent-kafka block in poll while a
rebalance is in progress, so members of one group must be polled concurrently).
"""
from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

from tests.support import BrokerProcess
from tests.support.broker import running

PARTITIONS = 4
SESSION_MS = 6000          # the broker's group.min.session.timeout.ms default
WAIT = 60


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running(BrokerProcess(tmp_path_factory.mktemp("groups-broker"), name="broker",
                               props={"num.partitions": PARTITIONS})) as b:
        yield b


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap, name, partitions=PARTITIONS):
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap, topic, values, partitions=PARTITIONS):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i, v in enumerate(values):
            p.send(topic, v.encode(), partition=i % partitions)
        p.flush()
    finally:
        p.close()


# ---------------------------------------------------------------------------------------- consumers
class ThreadedConsumer:
    """A consumer driven by its own thread: polls continuously, records assignment and values;
    ``call(fn)`` runs ``fn(consumer)`` on that thread."""

    def __init__(self, factory, poll, assignment, close):
        self._factory, self._poll, self._assignment, self._close = factory, poll, assignment, close
        self._ops: queue.Queue = queue.Queue()
        self.lock = threading.Lock()
        self.assigned: set[int] = set()
        self.values: list[str] = []
        self.error: BaseException | None = None
        self.closed = threading.Event()
        self.stop_flag = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            c = self._factory()
            while not self.stop_flag:
                try:
                    fn, done = self._ops.get_nowait()
                    try:
                        done.put((True, fn(c)))
                    except BaseException as e:   # noqa: BLE001 - handed to the caller
                        done.put((False, e))
                    continue
                except queue.Empty:
                    pass
                vals = self._poll(c)
                parts = self._assignment(c)
                with self.lock:
                    self.values.extend(vals)
                    self.assigned = parts
            self._close(c)
        except BaseException as e:   # noqa: BLE001
            self.error = e
        finally:
            self.closed.set()

    def call(self, fn, timeout=30):
        done: queue.Queue = queue.Queue()
        self._ops.put((fn, done))
        ok, v = done.get(timeout=timeout)
        if not ok:
            raise v
        return v

    def close(self, timeout=30):
        self.stop_flag = True
        assert self.closed.wait(timeout), "consumer did not close"
        if self.error:
            raise self.error

    def snapshot(self):
        with self.lock:
            return set(self.assigned), list(self.values)


def kafka_python_consumer(bootstrap, topic, group, **kw):
    from kafka import KafkaConsumer
    kw.setdefault("session_timeout_ms", SESSION_MS)

    def factory():
        c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                          enable_auto_commit=False, heartbeat_interval_ms=500, **kw)
        # Know the topic's partitions before the first join.  kafka-python 3.0.12 loses a join that
        # a leader starts because its metadata changed if poll() times out while it is in flight
        # (need_rejoin() is False again by the next poll, so the finished join is never applied, the
        # member never heartbeats and every commit fails with RebalanceInProgressError).  The leader
        # compares the metadata snapshot its coordinator took at assignment with the current one,
        # and that snapshot is only refreshed by a metadata response that arrives *after*
        # subscribe(): topics() always fetches one, so the first assignment already sees every
        # partition and no metadata-driven rejoin follows.
        c.subscribe([topic])
        deadline = time.monotonic() + 10
        while not (topic in c.topics() and c.partitions_for_topic(topic)) and time.monotonic() < deadline:
            time.sleep(0.1)
        return c

    def poll(c):
        out = []
        for recs in c.poll(timeout_ms=500).values():
            out.extend(r.value.decode() for r in recs)
        return out

    return ThreadedConsumer(factory, poll, lambda c: {tp.partition for tp in c.assignment()}, lambda c: c.close())


def confluent_consumer(bootstrap, topic, group, events=None, **conf):
    from confluent_kafka import Consumer

    def factory():
        cfg = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
               "enable.auto.commit": False, "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500}
        cfg.update(conf)
        c = Consumer(cfg)
        kw = {}
        if events is not None:
            kw["on_assign"] = lambda _c, parts: events.append(("assign", sorted(p.partition for p in parts)))
            kw["on_revoke"] = lambda _c, parts: events.append(("revoke", sorted(p.partition for p in parts)))
        c.subscribe([topic], **kw)
        return c

    def poll(c):
        m = c.poll(0.1)
        if m is None or m.error():
            return []
        return [m.value().decode()]

    return ThreadedConsumer(factory, poll, lambda c: {tp.partition for tp in c.assignment()}, lambda c: c.close())


def wait_split(consumers, n_parts=PARTITIONS, timeout=WAIT):
    """Wait until every consumer owns something, the assignments are disjoint and cover all."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sets = [c.snapshot()[0] for c in consumers]
        union = set().union(*sets)
        if all(sets) and sum(len(s) for s in sets) == len(union) == n_parts:
            return sets
        for c in consumers:
            if c.error:
                raise c.error
        time.sleep(0.1)
    raise AssertionError(f"no complete disjoint split: {[c.snapshot()[0] for c in consumers]}")


def wait_owns_all(consumer, n_parts=PARTITIONS, timeout=WAIT):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if consumer.snapshot()[0] == set(range(n_parts)):
            return time.monotonic() - t0
        if consumer.error:
            raise consumer.error
        time.sleep(0.05)
    raise AssertionError(f"survivor owns {consumer.snapshot()[0]} only")


def wait_values(consumers, n, timeout=WAIT):
    """Every value the consumers saw, once ``n`` distinct ones have arrived.  A member that
    leaves hands its partitions over from the last committed offsets, so the survivor may see
    some records again (at-least-once): count distinct values, not deliveries."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        vals = [v for c in consumers for v in c.snapshot()[1]]
        if len(set(vals)) >= n:
            return vals
        time.sleep(0.05)
    seen = {v for c in consumers for v in c.snapshot()[1]}
    raise AssertionError(f"only {len(seen)} of {n} distinct records consumed")


# ---------------------------------------------------------------------------------------- split, close
@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_two_members_split_then_survivor_takes_all_on_close(kafka, client):
    topic, group = unique("split"), unique("g")
    create_topic(kafka.bootstrap, topic)
    produce(kafka.bootstrap, topic, [str(i) for i in range(100)])
    make = kafka_python_consumer if client == "kafka-python" else confluent_consumer
    a = make(kafka.bootstrap, topic, group)
    b = make(kafka.bootstrap, topic, group)
    try:
        wait_split([a, b])
        b.close()
        took = wait_owns_all(a)
        assert took < SESSION_MS / 1000
        vals = wait_values([a, b], 100)
        assert set(vals) == {str(i) for i in range(100)}
    finally:
        a.close()


def test_aiokafka_group_of_two_and_resume_at_committed_offsets(kafka):
    from aiokafka import AIOKafkaConsumer
    topic, group = unique("aio"), unique("g")
    create_topic(kafka.bootstrap, topic)
    produce(kafka.bootstrap, topic, [f"a{i}" for i in range(40)])

    async def main():
        def make():
            return AIOKafkaConsumer(topic, bootstrap_servers=kafka.bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
        a, b = make(), make()
        await a.start()
        await b.start()
        seen = []
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            for c in (a, b):
                for recs in (await c.getmany(timeout_ms=100)).values():
                    seen.extend(r.value.decode() for r in recs)
            pa, pb = {tp.partition for tp in a.assignment()}, {tp.partition for tp in b.assignment()}
            if pa and pb and not pa & pb and pa | pb == set(range(PARTITIONS)) and len(seen) >= 40:
                break
        assert pa and pb and not pa & pb and pa | pb == set(range(PARTITIONS)), (pa, pb)
        assert sorted(seen) == sorted(f"a{i}" for i in range(40))
        await a.commit()
        await b.commit()
        await a.stop()
        await b.stop()
        produce(kafka.bootstrap, topic, [f"b{i}" for i in range(40)])
        c = make()
        await c.start()
        got = []
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and len(got) < 40:
            for recs in (await c.getmany(timeout_ms=200)).values():
                got.extend(r.value.decode() for r in recs)
        for recs in (await c.getmany(timeout_ms=500)).values():
            got.extend(r.value.decode() for r in recs)
        await c.stop()
        assert sorted(got) == sorted(f"b{i}" for i in range(40))

    asyncio.run(main())


# ---------------------------------------------------------------------------------------- kill -9
CHILD = textwrap.dedent("""
    import sys
    import time
    from kafka import KafkaConsumer
    bootstrap, topic, group, session = sys.argv[1:5]
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=int(session), heartbeat_interval_ms=500)
    c.subscribe([topic])
    while not (topic in c.topics() and c.partitions_for_topic(topic)):   # see kafka_python_consumer
        time.sleep(0.1)
    last = None
    while True:
        c.poll(timeout_ms=500)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            print("ASSIGNED", ",".join(map(str, now)), flush=True)
            last = now
""")


def test_killed_member_is_removed_after_session_timeout(kafka, tmp_path):
    topic, group = unique("kill"), unique("g")
    create_topic(kafka.bootstrap, topic)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen([sys.executable, str(script), kafka.bootstrap, topic, group, str(SESSION_MS)],
                             stdout=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in child.stdout], daemon=True).start()
    survivor = kafka_python_consumer(kafka.bootstrap, topic, group)
    try:
        deadline = time.monotonic() + WAIT
        child_parts = set()
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.2)
                if line.startswith("ASSIGNED"):
                    parts = line.split()[1:]
                    child_parts = {int(x) for x in parts[0].split(",")} if parts else set()
            except queue.Empty:
                pass
            mine = survivor.snapshot()[0]
            if child_parts and mine and not child_parts & mine and child_parts | mine == set(range(PARTITIONS)):
                break
        else:
            raise AssertionError(f"no split: child {child_parts}, survivor {survivor.snapshot()[0]}")
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        took = wait_owns_all(survivor, timeout=WAIT)
        # the member is removed once its session expires; the survivor then rejoins
        assert took >= (SESSION_MS / 1000) * 0.5
        assert took < SESSION_MS / 1000 + 10
    finally:
        if child.poll() is None:
            child.kill()
        survivor.close()


# ---------------------------------------------------------------------------------------- resume
def commit_with_retry(c, attempts=20):
    """Commit the consumer's positions; a client may be in the middle of a rejoin (kafka-python
    rejoins when its metadata changes, e.g. after a broker restart) and refuse with a retriable
    rebalance error -- its thread keeps polling meanwhile, so try again."""
    for i in range(attempts):
        try:
            return c.call(lambda k: k.commit())
        except Exception as e:       # noqa: BLE001 - RebalanceInProgress / CommitFailed, client-specific
            if i == attempts - 1 or "ebalanc" not in f"{type(e).__name__} {e}":
                raise
            time.sleep(0.5)


def _consume_all(make, n, extra_wait=1.0):
    c = make()
    try:
        vals = wait_values([c], n)
        time.sleep(extra_wait)          # anything beyond n would be a duplicate
        vals = c.snapshot()[1]
        commit_with_retry(c)
        return vals
    finally:
        c.close()


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_commit_close_produce_resume_exactly(kafka, client):
    topic, group = unique("resume"), unique("g")
    create_topic(kafka.bootstrap, topic)
    first = [f"first-{i}" for i in range(200)]
    second = [f"second-{i}" for i in range(200)]
    produce(kafka.bootstrap, topic, first)
    if client == "kafka-python":
        make = lambda: kafka_python_consumer(kafka.bootstrap, topic, group)        # noqa: E731
    else:
        def make():
            return confluent_consumer(kafka.bootstrap, topic, group)
    got1 = _consume_all(make, len(first))
    assert sorted(got1) == sorted(first)
    produce(kafka.bootstrap, topic, second)
    got2 = _consume_all(make, len(second))
    assert sorted(got2) == sorted(second)


# ---------------------------------------------------------------------------------------- cooperative
def test_cooperative_sticky_incremental_rebalance(kafka):
    topic, group = unique("coop"), unique("g")
    create_topic(kafka.bootstrap, topic)
    produce(kafka.bootstrap, topic, [str(i) for i in range(100)])
    ev_a, ev_b = [], []
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    a = confluent_consumer(kafka.bootstrap, topic, group, events=ev_a, **conf)
    b = None
    try:
        wait_owns_all(a)
        b = confluent_consumer(kafka.bootstrap, topic, group, events=ev_b, **conf)
        sa, sb = wait_split([a, b])
        # incremental: a only ever gave up what b now owns, it never revoked everything
        revoked = [set(p) for kind, p in ev_a if kind == "revoke" and p]
        assert revoked and all(r <= sb for r in revoked), (ev_a, sb)
        assert all(kind == "assign" for kind, _ in ev_b)
        wait_values([a, b], 100)
        b.close()
        b = None
        wait_owns_all(a)
        time.sleep(1)
        # the partitions a kept were never revoked, so their positions were never reset: a read each
        # of their records once (b's partitions are read again, from the start, as nothing was committed)
        kept = [v for v in a.snapshot()[1] if int(v) % PARTITIONS in sa]
        assert len(kept) == len(set(kept)) == 25 * len(sa)
    finally:
        if b is not None:
            b.close()
        a.close()


# ---------------------------------------------------------------------------------------- static members
def test_static_member_restart_does_not_rebalance_others(kafka):
    topic, group = unique("static"), unique("g")
    create_topic(kafka.bootstrap, topic)
    ev_a = []
    a = confluent_consumer(kafka.bootstrap, topic, group, events=ev_a, **{"group.instance.id": "static-a",
                                                                         "session.timeout.ms": 30000})
    b = confluent_consumer(kafka.bootstrap, topic, group, **{"group.instance.id": "static-b",
                                                             "session.timeout.ms": 30000})
    try:
        sa, sb = wait_split([a, b])
        time.sleep(1)
        before = list(ev_a)
        b.close()            # a static member leaves without LeaveGroup
        time.sleep(1)
        b = confluent_consumer(kafka.bootstrap, topic, group, **{"group.instance.id": "static-b",
                                                                 "session.timeout.ms": 30000})
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and b.snapshot()[0] != sb:
            time.sleep(0.1)
        assert b.snapshot()[0] == sb
        time.sleep(2)
        assert ev_a == before, f"member a saw a rebalance: {ev_a[len(before):]}"
        assert a.snapshot()[0] == sa
    finally:
        b.close()
        a.close()


# ---------------------------------------------------------------------------------------- many groups
def test_three_groups_rebalance_concurrently(kafka):
    topic = unique("multi")
    create_topic(kafka.bootstrap, topic)
    produce(kafka.bootstrap, topic, [str(i) for i in range(60)])
    groups = [unique("g") for _ in range(3)]
    members = {g: [kafka_python_consumer(kafka.bootstrap, topic, g) for _ in range(2)] for g in groups}
    try:
        for g in groups:
            wait_split(members[g])
        for g in groups:     # each group reads the whole topic on its own
            vals = wait_values(members[g], 60)
            assert sorted(set(vals)) == sorted(str(i) for i in range(60))
        # one group loses a member; the others stay as they are
        before = {g: [c.snapshot()[0] for c in members[g]] for g in groups[1:]}
        members[groups[0]][1].close()
        wait_owns_all(members[groups[0]][0])
        time.sleep(1)
        for g in groups[1:]:
            assert [c.snapshot()[0] for c in members[g]] == before[g]
    finally:
        for g in groups:
            for c in members[g]:
                if not c.closed.is_set():
                    c.close()


# ---------------------------------------------------------------------------------------- kcat
def test_kcat_balanced_consumer_commits(kafka):
    topic, group = unique("kcat"), unique("g")
    create_topic(kafka.bootstrap, topic)
    produce(kafka.bootstrap, topic, [f"k{i}" for i in range(50)])
    out = subprocess.run(["kcat", "-b", kafka.bootstrap, "-G", group, "-o", "beginning", "-e",
                          "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100", topic],
                         capture_output=True, text=True, timeout=WAIT)
    assert sorted(out.stdout.split()) == sorted(f"k{i}" for i in range(50)), out.stderr
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
        assert sum(o.offset for o in offsets.values()) == 50, offsets
    finally:
        admin.close()


# ---------------------------------------------------------------------------------------- restart
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "kill9"])
def test_committed_offsets_survive_broker_restart(broker_factory, clean):
    b = broker_factory(props={"num.partitions": PARTITIONS})
    topic, group = unique("restart"), unique("g")
    create_topic(b.bootstrap, topic)
    first = [f"first-{i}" for i in range(100)]
    second = [f"second-{i}" for i in range(100)]
    produce(b.bootstrap, topic, first)
    # Nothing here tests session expiry: a long session keeps a client that stalls for seconds on
    # a loaded machine (seen once: no heartbeat for 6 s) in its group, so its commit stays its own.
    make = lambda: kafka_python_consumer(b.bootstrap, topic, group, session_timeout_ms=30000)  # noqa: E731
    assert sorted(_consume_all(make, 100)) == sorted(first)
    b.restart(clean=clean)
    produce(b.bootstrap, topic, second)
    assert sorted(_consume_all(make, 100)) == sorted(second)

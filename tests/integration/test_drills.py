"""Crash and restart drills against a real broker process.

Crash drill: while two confluent-kafka producers (acks=1 and acks=all, no retries, so a record
is never written twice by the client) produce into a 2-partition topic with small segments, the
broker is killed with SIGKILL at a random moment and restarted on the same log dir.  After each
restart every acknowledged record is at the offset it was acknowledged with, exactly once
(no value appears twice anywhere), in send order, offsets are contiguous, and the .index /
.timeindex files on disk are valid and cover the whole .log (they were rebuilt by recovery; the
broker keeps index entries in memory between flushes, so a crash loses the tail of the files).
Fetches from random offsets land on the right batch.  Default tier: 3 rounds; ``-m slow``: 20.

Restart drill: topics, topic ids, partitions, configs (when CreateTopics/DescribeConfigs are
served), log offsets and producer state survive a clean restart — an idempotent producer keeps
producing through the restart, and raw sequence numbers continue where they stopped (duplicates
are answered with the original offset, gaps are OUT_OF_ORDER_SEQUENCE_NUMBER).  The same
producer-state checks run after a kill -9 (state rebuilt from snapshot + log).
"""
from __future__ import annotations

import os
import random
import struct
import threading
import time

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import InitProducerIdRequest
from protocol.records import build_batch, iter_batches, iter_records, read_header
from tests.support import BrokerProcess
from tests.support.rawkafka import RawConnection

TOPIC = "drill"
PARTITIONS = 2
INDEX_INTERVAL = 4096
SEGMENT_BYTES = 256 * 1024
DRILL_PROPS = {"num.partitions": PARTITIONS, "log.segment.bytes": SEGMENT_BYTES,
               "log.index.interval.bytes": INDEX_INTERVAL}


def read_partition(c: RawConnection, topic: str, partition: int):
    """[(offset, value)] of every record, via Fetch v11."""
    out, offset = [], 0
    while True:
        pd = c.fetch(topic, partition, offset, max_bytes=8 << 20)
        assert pd.error_code == 0, pd.error_code
        data = bytes(pd.records)
        hs = list(iter_batches(data))
        if not hs:
            assert offset == pd.high_watermark, (offset, pd.high_watermark)
            return out
        for h in hs:
            out += [(r.offset, r.value) for r in iter_records(data, h)]
        offset = hs[-1].last_offset + 1


# -- producers ----------------------------------------------------------------------------

class ProducerThread(threading.Thread):
    """Produces ``<name>-<seq>`` values as fast as the throttle allows until stopped;
    ``acked`` collects (seq, partition, offset) of successful deliveries."""

    def __init__(self, bootstrap, name, acks, rate=6000, **conf):
        super().__init__(daemon=True, name=f"producer-{name}")
        from confluent_kafka import Producer
        cfg = {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 2,
               "enable.idempotence": False, "message.send.max.retries": 0,
               "retry.backoff.ms": 50, "message.timeout.ms": 10000,
               "socket.timeout.ms": 5000, "reconnect.backoff.max.ms": 200}
        cfg.update(conf)
        self.producer = Producer(cfg)
        self.tag = name
        self.rate = rate
        self.acked: list[tuple[int, int, int]] = []
        self.failed = 0
        self.sent = 0
        self.stop_event = threading.Event()
        self.purge_on_stop = not conf.get("enable.idempotence", False)

    def _cb(self, seq):
        def cb(err, msg):
            if err is None:
                self.acked.append((seq, msg.partition(), msg.offset()))
            else:
                self.failed += 1
        return cb

    def run(self):
        p = self.producer
        t0 = time.monotonic()
        rnd = random.Random(self.tag)
        while not self.stop_event.is_set():
            value = f"{self.tag}-{self.sent}".encode() + b"." * rnd.randrange(0, 120)
            try:
                p.produce(TOPIC, key=b"%d" % (self.sent % 50), value=value,
                          on_delivery=self._cb(self.sent))
                self.sent += 1
            except BufferError:
                p.poll(0.01)
                continue
            p.poll(0)
            ahead = self.sent / self.rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
        if self.purge_on_stop:
            p.purge()
        p.flush(15)

    def finish(self):
        self.stop_event.set()
        self.join(30)
        assert not self.is_alive()


def seq_of(value: bytes) -> tuple[str, int]:
    name, _, rest = value.partition(b"-")
    return name.decode(), int(rest.split(b".")[0])


def check_log(c, producers):
    """Every acked record is at its acked offset, once, in order; no value twice; no gaps."""
    positions: dict[tuple[str, int], tuple[int, int]] = {}
    total = 0
    for p in range(PARTITIONS):
        recs = read_partition(c, TOPIC, p)
        assert [o for o, _ in recs] == list(range(len(recs))), f"partition {p}: offset gap"
        total += len(recs)
        for off, value in recs:
            name_seq = seq_of(value)
            assert name_seq not in positions, f"{name_seq} stored twice"
            positions[name_seq] = (p, off)
    for prod in producers:
        last = {}
        for seq, part, off in sorted(prod.acked):
            where = positions.get((prod.tag, seq))
            assert where == (part, off), f"{prod.tag}-{seq} acked at {(part, off)}, found {where}"
            assert last.get(part, -1) < off, f"{prod.tag}-{seq} out of order"
            last[part] = off
    return total


# -- on-disk index checks -------------------------------------------------------------------

def check_indexes(log_dir, topic, partitions, max_batch):
    """Every segment's .index/.timeindex is a valid sparse index covering its .log."""
    checked = 0
    for p in range(partitions):
        d = os.path.join(log_dir, f"{topic}-{p}")
        logs = sorted(n for n in os.listdir(d) if n.endswith(".log"))
        for name in logs:
            base = int(name[:-4])
            with open(os.path.join(d, name), "rb") as f:
                data = f.read()
            batches = {h.pos: h for h in iter_batches(data)}
            assert sum(h.size for h in batches.values()) == len(data), f"{name}: torn tail"
            entries = _entries(os.path.join(d, f"{base:020d}.index"), ">ii")
            prev_off, prev_pos = -1, 0
            for rel, pos in entries:
                h = batches.get(pos)
                assert h is not None, f"{topic}-{p}/{base}.index: {pos} is not a batch start"
                assert h.base_offset <= base + rel <= h.last_offset
                assert rel > prev_off and pos > prev_pos
                assert pos - prev_pos <= INDEX_INTERVAL + 2 * max_batch, \
                    f"{topic}-{p}/{base}.index: gap {prev_pos}..{pos} without an entry"
                prev_off, prev_pos = rel, pos
            assert len(data) - prev_pos <= INDEX_INTERVAL + 2 * max_batch, \
                f"{topic}-{p}/{base}.index ends at {prev_pos} of {len(data)}: not rebuilt"
            ts_entries = _entries(os.path.join(d, f"{base:020d}.timeindex"), ">qi")
            last_ts = -1
            offsets = {h.last_offset for h in batches.values()}
            for ts, rel in ts_entries:
                assert ts >= last_ts and base + rel in offsets
                last_ts = ts
            checked += 1
    return checked


def _entries(path, fmt):
    size = struct.calcsize(fmt)
    with open(path, "rb") as f:
        raw = f.read()
    out = []
    for i in range(0, len(raw) - size + 1, size):
        e = struct.unpack_from(fmt, raw, i)
        if not any(e):
            break                     # preallocated tail of an active index
        out.append(e)
    return out


def check_random_fetches(c, rnd, n=20):
    for _ in range(n):
        p = rnd.randrange(PARTITIONS)
        hw = c.list_offsets(TOPIC, p, -1).offset
        if hw == 0:
            continue
        off = rnd.randrange(hw)
        pd = c.fetch(TOPIC, p, off, max_bytes=1)           # one batch (KIP-74)
        h = read_header(bytes(pd.records))
        assert h.base_offset <= off <= h.last_offset, (p, off, h)


# -- crash drill ------------------------------------------------------------------------------

def crash_drill(tmp_path, rounds, props=None):
    b = BrokerProcess(tmp_path / "crash", name="broker", props={**DRILL_PROPS, **(props or {})})
    b.start()
    rnd = random.Random(1234)
    restart_times = []
    try:
        with RawConnection(b.host, b.port) as c:
            assert c.metadata([TOPIC]).topics[0].error_code == 0
        for r in range(rounds):
            producers = [ProducerThread(b.bootstrap, f"a1r{r}", "1"),
                         ProducerThread(b.bootstrap, f"aallr{r}", "all")]
            for prod in producers:
                prod.start()
            deadline = time.monotonic() + 10
            while min(len(p.acked) for p in producers) < 200 and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(rnd.uniform(0.0, 0.6))
            b.kill()                                    # SIGKILL mid-stream
            for prod in producers:
                prod.finish()
            assert all(p.acked for p in producers), "nothing was acknowledged before the kill"
            if (props or {}).get("log.preallocate") == "true" and r == 0:
                # the first kill always finds the active segments preallocated (a recovered
                # segment is cut to its data; later rounds have such files only after a roll)
                assert _preallocated_tails(str(b.log_dir)), "no preallocated segment to recover"
            t0 = time.monotonic()
            b.start()
            restart_times.append(time.monotonic() - t0)
            # indexes straight after recovery, before anything new is appended
            assert check_indexes(str(b.log_dir), TOPIC, PARTITIONS, max_batch=64 * 1024) > 0
            with RawConnection(b.host, b.port) as c:
                check_log(c, producers)
                check_random_fetches(c, rnd)
        print(f"crash drill: {rounds} rounds, restart times "
              f"{', '.join(f'{t:.2f}' for t in restart_times)} s")
    finally:
        b.kill()


def _preallocated_tails(log_dir) -> int:
    """.log files of the drill's topic that are segment.bytes long and end in zeros."""
    n = 0
    for p in range(PARTITIONS):
        d = os.path.join(log_dir, f"{TOPIC}-{p}")
        for name in os.listdir(d):
            path = os.path.join(d, name)
            if name.endswith(".log") and os.path.getsize(path) == SEGMENT_BYTES:
                with open(path, "rb") as f:
                    f.seek(-1024, os.SEEK_END)
                    n += f.read() == bytes(1024)
    return n


def test_crash_drill_kill_9_three_rounds(tmp_path):
    crash_drill(tmp_path, 3)


@pytest.mark.slow
def test_crash_drill_kill_9_twenty_rounds(tmp_path):
    crash_drill(tmp_path, 20)


def test_crash_drill_kill_9_preallocated_segments(tmp_path):
    """log.preallocate=true: every new segment is segment.bytes long on disk at once, so each
    kill leaves zeros after the data of the active ones; recovery must cut them off (the
    drill checks each file holds whole batches only) and lose nothing acknowledged."""
    crash_drill(tmp_path, 3, {"log.preallocate": "true"})


def test_idempotent_producer_through_kill_9(tmp_path):
    """An idempotent producer keeps its session across an unclean restart: its in-flight
    batches are retried and deduplicated (producer state rebuilt from the log), no fatal error,
    every delivered record exactly once."""
    b = BrokerProcess(tmp_path / "idem", name="broker", props=DRILL_PROPS)
    b.start()
    try:
        with RawConnection(b.host, b.port) as c:
            assert c.metadata([TOPIC]).topics[0].error_code == 0
        prod = ProducerThread(b.bootstrap, "idem", "all", rate=4000,
                              **{"enable.idempotence": True, "message.send.max.retries": 1000,
                                 "message.timeout.ms": 30000})
        errors = []
        prod.producer_errors = errors
        prod.start()
        for _ in range(2):
            time.sleep(0.5)
            b.kill()
            time.sleep(0.2)
            b.start()
        time.sleep(0.5)
        prod.finish()
        assert prod.failed == 0, f"{prod.failed} records failed"
        assert len(prod.acked) == prod.sent
        with RawConnection(b.host, b.port) as c:
            total = check_log(c, [prod])
        assert total == prod.sent
    finally:
        b.kill()


# -- restart drill --------------------------------------------------------------------------

def init_pid(c):
    r = c.request(22, 1, InitProducerIdRequest(transactional_id=None,
                                               transaction_timeout_ms=60000,
                                               producer_id=-1, producer_epoch=-1))
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


def idem_batch(pid, epoch, seq, n, tag):
    ts = int(time.time() * 1000)
    return build_batch([(b"k", b"%s-%d" % (tag, seq + i), (), ts) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "kill-9"])
def test_producer_state_survives_restart(tmp_path, clean):
    b = BrokerProcess(tmp_path / "pstate", name="broker", props=DRILL_PROPS)
    b.start()
    try:
        with RawConnection(b.host, b.port) as c:
            assert c.metadata(["pstate"]).topics[0].error_code == 0
            pid, epoch = init_pid(c)
            offsets = []
            for seq in range(0, 50, 5):
                r = c.produce("pstate", 0, idem_batch(pid, epoch, seq, 5, b"a"))
                assert r.error_code == 0
                offsets.append(r.base_offset)
        b.restart(clean=clean)
        with RawConnection(b.host, b.port) as c:
            # the last batch again: a duplicate, answered with its original offset
            r = c.produce("pstate", 0, idem_batch(pid, epoch, 45, 5, b"a"))
            assert (r.error_code, r.base_offset) == (0, offsets[-1])
            # a gap in the sequence
            r = c.produce("pstate", 0, idem_batch(pid, epoch, 55, 5, b"a"))
            assert r.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
            # the next sequence continues
            r = c.produce("pstate", 0, idem_batch(pid, epoch, 50, 5, b"a"))
            assert (r.error_code, r.base_offset) == (0, 50)
            # an older epoch is fenced
            if epoch > 0:
                r = c.produce("pstate", 0, idem_batch(pid, epoch - 1, 55, 1, b"a"))
                assert r.error_code == E.INVALID_PRODUCER_EPOCH
            # a fresh id is not one handed out before the restart
            assert init_pid(c)[0] != pid
            values = [v for _, v in read_partition(c, "pstate", 0)]
            assert values == [b"a-%d" % i for i in range(55)]
    finally:
        b.kill()


def _config_values(res, name):
    """{key: value} from kafka-python's describe_configs answer (a nested dict in 3.x)."""
    if isinstance(res, dict):
        by_name = next(iter(res.values())) if res else {}
        entries = by_name.get(name, {})
        return {k: (v.get("value", v.get("config_value")) if isinstance(v, dict) else v)
                for k, v in entries.items()}
    got = {}
    for r in res:
        for entry in r.to_object()["resources"][0]["configs"]:
            got[entry["config_name"]] = entry["config_value"]
    return got


def _served(b, api_key):
    return api_key in b.api_versions().api_keys


def test_clean_restart_keeps_topics_configs_offsets_and_producers(tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    b = BrokerProcess(tmp_path / "restart", name="broker", props={"num.partitions": 3})
    b.start()
    try:
        have_admin = _served(b, 19) and _served(b, 32)     # CreateTopics, DescribeConfigs
        configs = {"retention.ms": "3600000", "max.message.bytes": "200000",
                   "cleanup.policy": "delete"}
        if have_admin:
            from kafka.admin import KafkaAdminClient, NewTopic
            admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
            admin.create_topics([NewTopic("configured", 2, 1, topic_configs=configs)])
            admin.close()
        with RawConnection(b.host, b.port) as c:
            md = c.metadata(["auto-a", "auto-b"])
            before_topics = {t.name: (t.topic_id, len(t.partitions)) for t in md.topics}
        # kafka-python's default producer is idempotent; it stays up across the restart
        producer = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=1,
                                 reconnect_backoff_max_ms=200)
        sent = []
        for i in range(300):
            sent.append(producer.send("auto-a", key=b"%d" % (i % 7), value=b"v%d" % i))
        producer.flush(30)
        before = [(m.partition, m.offset) for m in (f.get(10) for f in sent)]
        with RawConnection(b.host, b.port) as c:
            ends = {p: c.list_offsets("auto-a", p, -1).offset for p in range(3)}

        assert b.stop() == 0                       # SIGTERM: a clean stop
        assert os.path.exists(os.path.join(str(b.log_dir), ".kafka_cleanshutdown"))
        b.start()

        with RawConnection(b.host, b.port) as c:
            md = c.metadata(None)
            after_topics = {t.name: (t.topic_id, len(t.partitions)) for t in md.topics}
            for name, v in before_topics.items():
                assert after_topics[name] == v
            assert {p: c.list_offsets("auto-a", p, -1).offset for p in range(3)} == ends
            assert {p: c.list_offsets("auto-a", p, -2).offset for p in range(3)} == \
                {p: 0 for p in range(3)}
        if have_admin:
            from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
            admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
            res = admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, "configured")], config_filter="all")
            got = _config_values(res, "configured")
            admin.close()
            for k, v in configs.items():
                assert got.get(k) == v, (k, got.get(k))
            assert "configured" in after_topics
        # the same idempotent producer continues: not rejected, no duplicates
        more = [producer.send("auto-a", key=b"%d" % (i % 7), value=b"w%d" % i)
                for i in range(300)]
        producer.flush(30)
        after = [(m.partition, m.offset) for m in (f.get(30) for f in more)]
        producer.close(5)
        for (p, off) in after:
            assert off >= ends[p]
        c2 = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False)
        tps = [TopicPartition("auto-a", p) for p in range(3)]
        c2.assign(tps)
        c2.seek_to_beginning()
        values = {}
        deadline = time.monotonic() + 20
        while len(values) < 600 and time.monotonic() < deadline:
            for tp, recs in c2.poll(500).items():
                for r in recs:
                    assert r.value not in values, f"{r.value} twice"
                    values[r.value] = (tp.partition, r.offset)
        c2.close()
        for i, where in enumerate(before):
            assert values[b"v%d" % i] == where
        for i, where in enumerate(after):
            assert values[b"w%d" % i] == where
        assert len(values) == 600
    finally:
        b.kill()


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "kill9"])
def test_new_partition_files_appear_with_data_and_survive_restart(tmp_path, clean):
    """A created topic's partition directories stay empty until data arrives (docs/storage.md);
    written and never-written partitions both come back after a restart, readable and
    writable, with the topic id kept."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    b = BrokerProcess(tmp_path / "lazy", name="broker", props={"num.partitions": 2})
    b.start()
    try:
        with RawConnection(b.host, b.port) as c:
            assert len({t.name: t for t in c.metadata(["lazy-t"]).topics}["lazy-t"].partitions) == 2
        dirs = [os.path.join(str(b.log_dir), f"lazy-t-{p}") for p in range(2)]
        deadline = time.monotonic() + 10     # the logs open when the metadata event lands
        while not all(os.path.isdir(d) for d in dirs) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [os.listdir(d) for d in dirs] == [[], []]
        producer = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=1)
        for i in range(50):
            producer.send("lazy-t", value=b"v%d" % i, partition=0)
        producer.flush(30)
        producer.close(5)
        assert {"00000000000000000000.log", "partition.metadata",
                "leader-epoch-checkpoint"} <= set(os.listdir(dirs[0]))
        assert os.listdir(dirs[1]) == []
        with open(os.path.join(dirs[0], "partition.metadata")) as f:
            topic_id = f.read().split()[-1]
        assert len(topic_id) == 22 and topic_id != "A" * 22
        if clean:
            assert b.stop() == 0
        else:
            b.kill()
        b.start()
        with RawConnection(b.host, b.port) as c:
            md = {t.name: t for t in c.metadata(["lazy-t"]).topics}["lazy-t"]
            assert len(md.partitions) == 2
            assert [c.list_offsets("lazy-t", p, -1).offset for p in range(2)] == [50, 0]
        producer = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=1)
        for i in range(10):
            producer.send("lazy-t", value=b"w%d" % i, partition=1)
        producer.flush(30)
        producer.close(5)
        consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False)
        consumer.assign([TopicPartition("lazy-t", 0), TopicPartition("lazy-t", 1)])
        consumer.seek_to_beginning()
        got = {0: [], 1: []}
        deadline = time.monotonic() + 20
        while len(got[0]) + len(got[1]) < 60 and time.monotonic() < deadline:
            for tp, recs in consumer.poll(500).items():
                got[tp.partition] += [r.value for r in recs]
        consumer.close()
        assert got[0] == [b"v%d" % i for i in range(50)]
        assert got[1] == [b"w%d" % i for i in range(10)]
        for d in dirs:      # the same id in both, the never-written one included
            with open(os.path.join(d, "partition.metadata")) as f:
                assert f.read().split()[-1] == topic_id
    finally:
        b.stop()

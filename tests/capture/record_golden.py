"""Record golden Kafka frames from real clients.

    python -m tests.capture.record_golden [--out tests/protocol/golden] [--clients a,b,...]

Starts Tansu (scripts/get-tansu.sh; memory storage) on a loopback port, advertising the
address of a recording TCP proxy that sits in front of it, so every connection a client
makes (bootstrap and the ones to the advertised broker/coordinator) goes through the
proxy.  Then drives kafka-python, aiokafka, confluent-kafka and kcat in turn through
the proxy: producers with every compression codec (keys and headers on the records),
an idempotent producer (InitProducerId), a plain consumer, and a group consumer that
commits offsets, heartbeats and leaves.

Output: <out>/<client>.jsonl, one JSON object per line:
    {"client", "dir": "request"|"response", "api_key", "api_name", "api_version",
     "correlation_id", "client_id" (requests), "codecs" (Produce requests), "hex"}
`hex` is the frame without its 4-byte size prefix.  A response's api key and version
come from the request with the same correlation id on the same connection.  Frames
that differ only in correlation id are kept once, and at most MAX_PER_KIND distinct
frames are kept per (direction, api key, version, codecs) so the data stays small.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.capture.frames import (API_NAMES, produce_request_codecs, request_header,
                                  response_correlation_id)
from tests.support.net import free_port
from tests.support.tansu import TansuProcess

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "tests" / "protocol" / "golden"
CLIENTS = ["kafka-python", "aiokafka", "confluent-kafka", "kcat"]
COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]
MAX_PER_KIND = 3
RECORDS_PER_BATCH = 3


def log(*a):
    print("[record_golden]", *a, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# Recording proxy
# --------------------------------------------------------------------------------------

class Recorder:
    def __init__(self):
        self.label: str | None = None  # client whose connections are being recorded
        self.frames: dict[str, list[dict]] = {}
        self._seen: set = set()
        self._kinds: dict = {}
        self.total = 0
        self.lock = threading.Lock()

    def add(self, label: str, direction: str, api_key: int | None, api_version: int | None,
            frame: bytes) -> None:
        if api_key is None:
            log(f"{label}: {direction} frame without a matching request, skipped")
            return
        entry = {"client": label, "dir": direction, "api_key": api_key,
                 "api_name": API_NAMES.get(api_key, f"Api{api_key}"), "api_version": api_version}
        if direction == "request":
            _, _, corr, client_id = request_header(frame)
            masked = frame[:4] + b"\0\0\0\0" + frame[8:]
            entry["correlation_id"] = corr
            entry["client_id"] = client_id
            codecs = ()
            if api_key == 0:
                codecs = tuple(produce_request_codecs(frame))
                entry["codecs"] = list(codecs)
        else:
            corr = response_correlation_id(frame)
            masked = b"\0\0\0\0" + frame[4:]
            entry["correlation_id"] = corr
            codecs = ()
        entry["hex"] = frame.hex()
        with self.lock:
            self.total += 1
            key = (label, direction, api_key, api_version, masked)
            if key in self._seen:
                return
            kind = (label, direction, api_key, api_version, codecs)
            if self._kinds.get(kind, 0) >= MAX_PER_KIND:
                return
            self._seen.add(key)
            self._kinds[kind] = self._kinds.get(kind, 0) + 1
            self.frames.setdefault(label, []).append(entry)


def drop_default_tags_api_versions(frame: bytes) -> bytes:
    """Rewrite an ApiVersions v3+ response so that top-level tagged fields holding
    their default value are left out, as Apache Kafka's serializer does.

    Tansu 0.6 writes FinalizedFeaturesEpoch=-1 and friends explicitly, and the
    librdkafka 2.0.2 inside Debian's kcat 1.7.1 fails to parse that ("Read underflow"),
    so kcat could not talk to Tansu at all without this.
    """
    from tests.capture.frames import Reader
    r = Reader(frame, 6)  # correlation id, error code
    for _ in range(r.uvarint() - 1):
        r.take(">hhh")
        r.tagged_fields()
    r.take(">i")  # throttle time
    start = r.pos
    defaults = {0: b"\x01", 1: b"\xff" * 8, 2: b"\x01", 3: b"\x00"}
    kept = []
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        value = r.skip(r.uvarint())
        if defaults.get(tag) != value:
            kept.append((tag, value))
    if r.pos != len(frame):
        raise ValueError("ApiVersions response has trailing bytes")

    def uv(n: int) -> bytes:
        out = bytearray()
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out)

    section = uv(len(kept)) + b"".join(uv(t) + uv(len(v)) + v for t, v in kept)
    return frame[:start] + section


# Per client: response rewrites applied (and recorded as delivered) by the proxy.
RESPONSE_REWRITES = {"kcat": {18: (3, drop_default_tags_api_versions)}}


class RecordingProxy:
    """asyncio TCP proxy on its own thread: client <-> proxy <-> upstream broker."""

    def __init__(self, recorder: Recorder, listen_port: int, upstream: tuple[str, int]):
        self.recorder = recorder
        self.port = listen_port
        self.upstream = upstream
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="proxy")
        self.connections = 0

    def start(self):
        self.thread.start()
        if not self.ready.wait(10):
            raise RuntimeError("proxy did not start")

    def _run(self):
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.port))
        self.server = server
        self.ready.set()
        self.loop.run_forever()

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    async def _handle(self, creader, cwriter):
        label = self.recorder.label
        self.connections += 1
        try:
            ureader, uwriter = await asyncio.open_connection(*self.upstream)
        except OSError as e:
            log("proxy: upstream connect failed:", e)
            cwriter.close()
            return
        pending: dict[int, tuple[int, int]] = {}

        async def pump(reader, writer, direction):
            try:
                while True:
                    size_b = await reader.readexactly(4)
                    size = int.from_bytes(size_b, "big", signed=True)
                    frame = await reader.readexactly(size)
                    if label is not None:
                        try:
                            if direction == "request":
                                key, ver, corr, _ = request_header(frame)
                                pending[corr] = (key, ver)
                            else:
                                key, ver = pending.pop(response_correlation_id(frame), (None, None))
                                rw = RESPONSE_REWRITES.get(label, {}).get(key)
                                if rw and ver >= rw[0]:
                                    frame = rw[1](frame)
                                    size_b = len(frame).to_bytes(4, "big")
                            self.recorder.add(label, direction, key, ver, frame)
                        except Exception as e:  # keep proxying whatever happens
                            log(f"proxy: could not record a {direction}: {e!r}")
                    writer.write(size_b + frame)
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                pass
            finally:
                try:
                    writer.close()
                except Exception:
                    pass

        await asyncio.gather(pump(creader, uwriter, "request"),
                             pump(ureader, cwriter, "response"))


# --------------------------------------------------------------------------------------
# Client drivers
# --------------------------------------------------------------------------------------

def records(client: str, codec: str):
    for i in range(RECORDS_PER_BATCH):
        yield (f"{codec}-k{i}".encode(),
               f"{client} {codec} value {i} ".encode() * 3,
               [("h1", f"{codec}".encode()), ("seq", str(i).encode())])


def expected_count() -> int:
    return RECORDS_PER_BATCH * (len(COMPRESSIONS) + 1)  # + the idempotent producer


def create_topic(bootstrap: str, topic: str):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    for f in fs.values():
        try:
            f.result(15)
        except Exception as e:
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise


def drive_kafka_python(bootstrap: str, topic: str, group: str):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    for codec in COMPRESSIONS:
        p = KafkaProducer(bootstrap_servers=bootstrap, client_id="golden-kafka-python",
                          compression_type=None if codec == "none" else codec,
                          acks=1, linger_ms=20)
        for k, v, h in records("kafka-python", codec):
            p.send(topic, key=k, value=v, headers=h)
        p.flush(15)
        p.close(5)
    p = KafkaProducer(bootstrap_servers=bootstrap, client_id="golden-kafka-python-idem",
                      enable_idempotence=True, acks="all", linger_ms=20)
    for k, v, h in records("kafka-python", "idempotent"):
        p.send(topic, key=k, value=v, headers=h)
    p.flush(15)
    p.close(5)

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                      client_id="golden-kafka-python-consumer", auto_offset_reset="earliest",
                      enable_auto_commit=False, heartbeat_interval_ms=250,
                      session_timeout_ms=10000, fetch_max_wait_ms=100)
    got = 0
    deadline = time.monotonic() + 30
    while got < expected_count() and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=200).values():
            got += len(recs)
    c.commit()
    end = time.monotonic() + 1.5
    while time.monotonic() < end:  # heartbeats
        c.poll(timeout_ms=100)
    tp = TopicPartition(topic, 0)
    c.end_offsets([tp])
    c.beginning_offsets([tp])
    c.close()
    log(f"kafka-python consumed {got}/{expected_count()}")
    return got


def drive_aiokafka(bootstrap: str, topic: str, group: str):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def main():
        for codec in COMPRESSIONS:
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="golden-aiokafka",
                                 compression_type=None if codec == "none" else codec,
                                 acks=1, linger_ms=20)
            await p.start()
            try:
                futs = [await p.send(topic, key=k, value=v, headers=h)
                        for k, v, h in records("aiokafka", codec)]
                await asyncio.gather(*futs)
            finally:
                await p.stop()
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="golden-aiokafka-idem",
                             enable_idempotence=True, acks="all", linger_ms=20)
        expected = expected_count()
        try:
            await asyncio.wait_for(p.start(), 20)
            futs = [await p.send(topic, key=k, value=v, headers=h)
                    for k, v, h in records("aiokafka", "idempotent")]
            await asyncio.wait_for(asyncio.gather(*futs), 20)
        except Exception as e:
            # Tansu 0.6 answers aiokafka's InitProducerId v0 (transaction timeout
            # 2^31-1) with UNKNOWN_SERVER_ERROR; both frames are still recorded.
            log(f"aiokafka idempotent producer failed (recorded anyway): {e!r}")
            expected -= RECORDS_PER_BATCH
        finally:
            await p.stop()

        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             client_id="golden-aiokafka-consumer", auto_offset_reset="earliest",
                             enable_auto_commit=False, heartbeat_interval_ms=250,
                             session_timeout_ms=10000, fetch_max_wait_ms=100)
        await c.start()
        got = 0
        try:
            deadline = time.monotonic() + 30
            while got < expected and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=200)).values():
                    got += len(recs)
            await c.commit()
            await asyncio.sleep(1.5)  # heartbeats
            tp = TopicPartition(topic, 0)
            await c.end_offsets([tp])
            await c.beginning_offsets([tp])
            # Tansu's first generation is 0, and aiokafka only sends LeaveGroup from a
            # generation > 0: a second member forces a rebalance into generation 1.
            c2 = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                  client_id="golden-aiokafka-consumer2",
                                  enable_auto_commit=False, heartbeat_interval_ms=250,
                                  session_timeout_ms=10000, fetch_max_wait_ms=100)
            await c2.start()
            try:
                end = time.monotonic() + 4
                while time.monotonic() < end:
                    await c2.getmany(timeout_ms=200)
                    await c.getmany(timeout_ms=50)
            finally:
                await c2.stop()
        finally:
            await c.stop()
        log(f"aiokafka consumed {got}/{expected}")
        return got

    return asyncio.run(main())


def drive_confluent(bootstrap: str, topic: str, group: str):
    from confluent_kafka import Consumer, Producer, TopicPartition
    for codec in COMPRESSIONS:
        p = Producer({"bootstrap.servers": bootstrap, "client.id": "golden-confluent",
                      "compression.type": codec, "linger.ms": 20, "acks": 1})
        for k, v, h in records("confluent-kafka", codec):
            p.produce(topic, key=k, value=v, headers=h)
        assert p.flush(15) == 0
    p = Producer({"bootstrap.servers": bootstrap, "client.id": "golden-confluent-idem",
                  "enable.idempotence": True, "linger.ms": 20})
    for k, v, h in records("confluent-kafka", "idempotent"):
        p.produce(topic, key=k, value=v, headers=h)
    assert p.flush(15) == 0
    del p

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "client.id": "golden-confluent-consumer", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "heartbeat.interval.ms": 250,
                  "session.timeout.ms": 10000, "fetch.wait.max.ms": 100})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    while got < expected_count() and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got += 1
    c.commit(asynchronous=False)
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        c.poll(0.1)
    c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    c.close()
    log(f"confluent-kafka consumed {got}/{expected_count()}")
    return got


def drive_kcat(bootstrap: str, topic: str, group: str):
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if not kcat:
        raise RuntimeError("kcat not installed")
    base = [kcat, "-b", bootstrap, "-X", "client.id=golden-kcat"]
    for codec in COMPRESSIONS + ["idempotent"]:
        extra = (["-X", "enable.idempotence=true"] if codec == "idempotent"
                 else ["-z", codec] if codec != "none" else ["-X", "compression.codec=none"])
        data = "".join(f"{k.decode()}:{v.decode()}\n" for k, v, _ in records("kcat", codec))
        subprocess.run(base + ["-P", "-t", topic, "-K:", "-H", f"h1={codec}",
                               "-X", "linger.ms=20"] + extra,
                       input=data.encode(), check=True, timeout=30)
    out = subprocess.run(base + ["-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                         capture_output=True, check=True, timeout=30)
    plain = len(out.stdout.splitlines())
    subprocess.run(base + ["-Q", "-t", f"{topic}:0:-1"], capture_output=True, timeout=30)
    # balanced consumer: join, sync, fetch, heartbeat, commit, then SIGINT -> leave
    # (no -o: with an explicit offset kcat skips OffsetFetch for committed offsets)
    proc = subprocess.Popen(base + ["-G", group, "-q", "-X", "auto.offset.reset=earliest",
                                    "-X", "heartbeat.interval.ms=250",
                                    "-X", "auto.commit.interval.ms=200", topic],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, b"")),
                              daemon=True)
    reader.start()
    deadline = time.monotonic() + 45
    while len(lines) < expected_count() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(1.5)  # heartbeats and an auto commit
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader.join(5)
    stderr = proc.stderr.read()
    if len(lines) < expected_count():
        log(f"kcat -G stderr: {stderr.decode(errors='replace')[-2000:]}")
    stdout = b"".join(lines)
    log(f"kcat consumed {plain} (plain) and {len(stdout.splitlines())} (group)/{expected_count()}")
    return plain


DRIVERS = {"kafka-python": drive_kafka_python, "aiokafka": drive_aiokafka,
           "confluent-kafka": drive_confluent, "kcat": drive_kcat}


def client_versions() -> dict[str, str]:
    import aiokafka
    import confluent_kafka
    import kafka
    kcat = shutil.which("kcat")
    kv = ""
    if kcat:
        first = subprocess.run([kcat, "-V"], capture_output=True, text=True).stdout.splitlines()
        kv = next((ln for ln in first if ln.startswith("Version")), "")
    return {"kafka-python": kafka.__version__, "aiokafka": aiokafka.__version__,
            "confluent-kafka": f"{confluent_kafka.version()[0]} (librdkafka "
                               f"{confluent_kafka.libversion()[0]})",
            "kcat": kv}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--tansu", default=None, help="tansu binary (default: scripts/get-tansu.sh)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    recorder = Recorder()
    proxy_port, tansu_port = free_port(), free_port()
    workdir = Path(tempfile.mkdtemp(prefix="golden-"))
    tansu = TansuProcess(workdir, port=tansu_port, advertised=f"127.0.0.1:{proxy_port}",
                         binary=args.tansu)
    proxy = RecordingProxy(recorder, proxy_port, ("127.0.0.1", tansu_port))
    bootstrap = f"127.0.0.1:{proxy_port}"
    failures = []
    try:
        tansu.start()
        proxy.start()
        log(f"tansu pid {tansu.pid} on {tansu_port}, proxy on {proxy_port}")
        for client in args.clients.split(","):
            topic, group = f"golden-{client}", f"golden-group-{client}"
            recorder.label = None  # topic creation is setup, not recorded
            create_topic(bootstrap, topic)
            time.sleep(0.5)
            recorder.label = client
            log(f"--- {client}")
            try:
                DRIVERS[client](bootstrap, topic, group)
            except Exception as e:
                log(f"{client} FAILED: {e!r}")
                failures.append(client)
            recorder.label = None
            time.sleep(1.0)  # let late responses on this client's connections arrive
    finally:
        proxy.stop()
        tansu.kill()

    tansu_version = subprocess.run([tansu.binary, "--version"], capture_output=True,
                                   text=True).stdout.strip()
    summary = {"broker": tansu_version, "clients": client_versions(),
               "recorded_at": time.strftime("%Y-%m-%d"), "files": {}}
    for client, frames in recorder.frames.items():
        path = out / f"{client}.jsonl"
        with open(path, "w") as f:
            for fr in frames:
                f.write(json.dumps(fr, separators=(",", ":")) + "\n")
        kinds = sorted({(fr["api_name"], fr["api_key"], fr["api_version"]) for fr in frames},
                       key=lambda x: (x[1], x[2]))
        summary["files"][path.name] = {
            "frames": len(frames),
            "apis": [f"{n}({k}) v{v}" for n, k, v in kinds],
            "produce_codecs": sorted({c for fr in frames for c in fr.get("codecs", [])}),
        }
        log(f"{path}: {len(frames)} frames, {path.stat().st_size} bytes")
    (out / "MANIFEST.json").write_text(json.dumps(summary, indent=1) + "\n")
    log(f"{recorder.total} frames seen, {sum(len(v) for v in recorder.frames.values())} kept")
    if failures:
        log("FAILED clients:", failures, f"(tansu log: {tansu.log_path})")
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

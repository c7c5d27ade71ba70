"""``__share_group_state``: where share partitions keep what they have delivered.

Each share partition (group, topic id, partition) is one key of this compacted topic; its value
is a snapshot of the partition's state: the start offset and the state batches of its window
(``SharePartition.state_batches``).  A snapshot is written after every change that a restart
must not forget (acknowledgements, releases, locks running out, a moved start offset) and before
the request that made it is answered.  The key's partition is Kafka's share coordinator
partition: ``abs(hash("group:topic id:partition")) % share.coordinator.state.topic.num.partitions``
with Java's string hash, the topic id in its base64 form.

The records follow the layout of Kafka's share coordinator snapshot records (key version 0,
ShareSnapshotKey; value version 0, ShareSnapshotValue, flexible):

====== ======================================================================================
key    int16 version 0, group id (string), topic id (uuid), partition (int32)
value  int16 version 0, then flexible: snapshot epoch, state epoch, leader epoch (int32),
       start offset (int64), create and write timestamps (int64), state batches[]: first
       offset, last offset (int64), delivery state (int8), delivery count (int16); a tag
       section after each struct
====== ======================================================================================

A group's deletion writes a tombstone for each of its keys; so does a topic's deletion for the
keys of its partitions, in every group (as Kafka's share coordinator does).
"""
from __future__ import annotations

import asyncio
import base64
import logging
import struct
import time
import uuid

from broker.group.hashing import partition_for
from broker.group.records import RecordFormatError, _Reader, _Writer
from broker.internal_topics import InternalTopic
from protocol import records as rec
from protocol.errors import ErrorCode as E, error_for

log = logging.getLogger("odradek.share")

TOPIC = "__share_group_state"
READ_CHUNK = 1 << 20
_I8, _I16 = struct.Struct(">b"), struct.Struct(">h")


def topic_id_text(tid: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(tid.bytes).decode().rstrip("=")


def encode_key(group: str, tid: uuid.UUID, partition: int) -> bytes:
    w = _Writer(0)
    w.string(group)
    w.out += tid.bytes
    w.i32(partition)
    return bytes(w.out)


def decode_key(key) -> tuple[str, uuid.UUID, int] | None:
    r = _Reader(key)
    if r.i16() != 0:
        return None
    group = r.string()
    tid = uuid.UUID(bytes=bytes(r._take(16)))
    return group, tid, r.i32()


def encode_value(snapshot_epoch: int, state_epoch: int, leader_epoch: int, start: int, batches,
                 created_ms: int, written_ms: int) -> bytes:
    w = _Writer(0, flexible=True)
    w.i32(snapshot_epoch)
    w.i32(state_epoch)
    w.i32(leader_epoch)
    w.i64(start)
    w.i64(created_ms)
    w.i64(written_ms)
    w.array_len(len(batches))
    for first, last, state, count in batches:
        w.i64(first)
        w.i64(last)
        w.out += _I8.pack(state)
        w.out += _I16.pack(count)
        w.tags()
    w.tags()
    return bytes(w.out)


def decode_value(value) -> dict:
    r = _Reader(value, flexible=False)
    if r.i16() != 0:
        raise RecordFormatError("unknown share snapshot value version")
    r.flexible = True
    out = {"snapshot_epoch": r.i32(), "state_epoch": r.i32(), "leader_epoch": r.i32(),
           "start": r.i64(), "created_ms": r.i64(), "written_ms": r.i64()}
    batches = []
    for _ in range(r.array_len()):
        first, last = r.i64(), r.i64()
        state = _I8.unpack(r._take(1))[0]
        count = _I16.unpack(r._take(2))[0]
        r.skip_tags()
        batches.append((first, last, state, count))
    r.skip_tags()
    out["batches"] = batches
    return out


class ShareStateLog:
    """The topic as the share coordinator uses it, on this broker's replicas."""

    def __init__(self, broker):
        self.broker = broker
        self._topic = InternalTopic(
            broker, TOPIC, "share.coordinator.state.topic.num.partitions",
            "share.coordinator.state.topic.replication.factor",
            lambda cfg, rf: {"cleanup.policy": "compact", "compression.type": "producer",
                             "segment.bytes": str(cfg.get("share.coordinator.state.topic.segment.bytes")),
                             "min.insync.replicas": str(min(rf, cfg.get("share.coordinator.state.topic.min.isr")))})
        self.num_partitions = self._topic.partition_count()     # an existing topic keeps its count
        self._loaded: dict[int, dict] = {}       # state partition -> {key: decoded value}
        self._epochs: dict = {}                  # key -> (snapshot epoch, created ms)
        self._live: dict[str, set] = {}          # group -> its keys with a snapshot (loaded partitions)
        self._all_loaded = False

    def partition_of(self, group: str, tid: uuid.UUID, partition: int) -> int:
        return partition_for(f"{group}:{topic_id_text(tid)}:{partition}", self.num_partitions)

    async def ensure_created(self) -> None:
        await self._topic.ensure_created()
        self.num_partitions = self._topic.partition_count()

    def _part(self, sp: int):
        part = self.broker.replicas.get(TOPIC, sp)
        if part is None or not part.is_leader or part.log is None:
            raise error_for(E.COORDINATOR_NOT_AVAILABLE)(f"{TOPIC}-{sp} is not led here")
        return part

    def _load(self, sp: int) -> dict:
        got = self._loaded.get(sp)
        if got is not None:
            return got
        part = self._part(sp)
        got = {}
        lg = part.log
        for data, h in lg.stored_batches(lg.log_start_offset, chunk=READ_CHUNK):
            if h.is_control:
                continue
            for r in rec.iter_records(data, h):
                if r.key is None:
                    continue
                try:
                    k = decode_key(r.key)
                    if k is None:
                        continue
                    got[k] = None if r.value is None else decode_value(r.value)
                except RecordFormatError as e:
                    log.warning("skipping an unreadable record at %s-%d offset %d: %s", TOPIC, sp, r.offset, e)
        self._loaded[sp] = got
        for k, v in got.items():
            if v is not None:
                self._live.setdefault(k[0], set()).add(k)
        return got

    def _note(self, key, live: bool) -> None:
        keys = self._live.setdefault(key[0], set())
        if live:
            keys.add(key)
        else:
            keys.discard(key)
            if not keys:
                del self._live[key[0]]

    def _load_all(self) -> None:
        if self._all_loaded:
            return
        for sp in range(self.num_partitions):
            try:
                self._load(sp)
            except Exception:      # noqa: BLE001 - a partition not led here has nothing to list
                return
        self._all_loaded = True

    def read(self, group: str, tid: uuid.UUID, partition: int) -> dict | None:
        """The last snapshot of a share partition, or None when it has none."""
        return self._load(self.partition_of(group, tid, partition)).get((group, tid, partition))

    def keys_of(self, group: str) -> list:
        """Every share partition of ``group`` with a snapshot here."""
        self._load_all()
        return sorted(self._live.get(group, ()), key=lambda k: (str(k[1]), k[2]))

    def keys_of_topics(self, tids) -> list:
        """Every share partition, of any group, of the topics ``tids`` with a snapshot here."""
        self._load_all()
        return sorted((k for keys in self._live.values() for k in keys if k[1] in tids),
                      key=lambda k: (k[0], str(k[1]), k[2]))

    def has_group(self, group: str) -> bool:
        self._load_all()
        return group in self._live

    def groups(self) -> set:
        """The groups with a snapshot here."""
        self._load_all()
        return set(self._live)

    async def write(self, group: str, tid: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int,
                    start: int | None, batches=()) -> None:
        """Write a snapshot (``start`` None: a tombstone) and wait until it is replicated."""
        sp = self.partition_of(group, tid, partition)
        loaded = self._load(sp)
        key = (group, tid, partition)
        now = int(time.time() * 1000)
        epoch, created = self._epochs.get(key, (-1, now))
        prev = loaded.get(key)
        if prev is not None and epoch < 0:
            epoch, created = prev["snapshot_epoch"], prev["created_ms"]
        value = None if start is None else encode_value(epoch + 1, state_epoch, leader_epoch, start,
                                                        list(batches), created, now)
        part = self._part(sp)
        batch = rec.build_batch([(encode_key(group, tid, partition), value, [], now)])
        res = part.log.append(batch, part.leader_epoch, origin="coordinator")
        part.after_append()
        if start is None:
            loaded[key] = None
            self._epochs.pop(key, None)
        else:
            loaded[key] = decode_value(value)
            self._epochs[key] = (epoch + 1, created)
        self._note(key, start is not None)
        deadline = asyncio.get_running_loop().time() + self.broker.config.get("offsets.commit.timeout.ms") / 1000
        code = await part.wait_for_high_watermark(res.last_offset + 1, part.leader_epoch, deadline)
        if code:
            raise error_for(code)(f"share state write to {TOPIC}-{sp} not replicated: {E(code).name}")

"""A small producer and consumer (with consumer-group membership) over ``protocol.client``,
enough for the console tools: no third-party Kafka client needed.

* ``Producer``: Kafka's default partitioner (murmur2 of the key; sticky partition for null
  keys), per-partition batches (``batch.size`` / ``linger.ms``), acks 0/1/-1, compression,
  retries of retriable errors after a metadata refresh.
* ``Consumer``: manual assignment (``assign``) or group membership (``subscribe``), either with
  the classic protocol (JoinGroup/SyncGroup/Heartbeat/OffsetCommit/LeaveGroup; the range,
  roundrobin, sticky and cooperative-sticky assignors; ConsumerProtocol subscriptions v2 with
  owned partitions and generation) or with the consumer group protocol of KIP-848
  (ConsumerGroupHeartbeat, revoke-then-assign reconciliation); an optional rebalance listener
  (``on_partitions_revoked`` / ``_assigned`` / ``_lost``, as Java's); offsets from committed
  positions or ``auto.offset.reset``; read_committed filtering of aborted transactions;
  control batches skipped.
"""
from __future__ import annotations

import asyncio
import random
import struct
import time
from collections import defaultdict, deque

from broker.group.assignors import contiguous_ranges, uniform
from protocol import records as rec
from protocol.client import KafkaConnectionError
from protocol.errors import KafkaError, error_for, is_retriable
from protocol.messages import (ConsumerGroupHeartbeatRequest, FetchRequest, HeartbeatRequest,
                               JoinGroupRequest,
                               LeaveGroupRequest, ListOffsetsRequest, OffsetCommitRequest,
                               OffsetFetchRequest, ProduceRequest, SyncGroupRequest)

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (as used by the default partitioner), as a signed 32-bit int."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = (data[i4] & 0xFF) + ((data[i4 + 1] & 0xFF) << 8) + ((data[i4 + 2] & 0xFF) << 16) \
            + ((data[i4 + 3] & 0xFF) << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    extra = length % 4
    idx = length & ~3
    if extra == 3:
        h ^= (data[idx + 2] & 0xFF) << 16
    if extra >= 2:
        h ^= (data[idx + 1] & 0xFF) << 8
    if extra >= 1:
        h ^= data[idx] & 0xFF
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def _err(code, message=None, context=""):
    cls = error_for(code)
    text = message or cls().message
    return cls(f"{context}{text}") if cls.code == code else cls(f"{context}{text}", code=code)


# =============================================================================================
# Producer
# =============================================================================================

class ProduceResult:
    __slots__ = ("topic", "partition", "offset", "error")

    def __init__(self, topic, partition, offset=-1, error=None):
        self.topic, self.partition, self.offset, self.error = topic, partition, offset, error


class _Batch:
    __slots__ = ("records", "size", "futures", "created")

    def __init__(self):
        self.records = []
        self.size = 0
        self.futures = []
        self.created = time.monotonic()


class Producer:
    def __init__(self, client, *, acks: int = -1, linger_ms: float = 5, batch_size: int = 16384,
                 compression: str | int = "none", retries: int = 3, retry_backoff_ms: int = 100,
                 request_timeout_ms: int = 30000, max_in_flight: int = 5):
        self.client = client
        self.acks = acks
        self.linger = linger_ms / 1000.0
        self.batch_size = batch_size
        self.compression = rec._compression.codec_id(compression)
        self.retries = retries
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.request_timeout_ms = request_timeout_ms
        self._batches: dict[tuple[str, int], _Batch] = {}
        self._sticky: dict[str, int] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._inflight: set[asyncio.Task] = set()
        self._sem = asyncio.Semaphore(max_in_flight)
        self.errors: list[BaseException] = []

    async def partitions_of(self, topic: str) -> int:
        t = self.client.topics.get(topic)
        if t is None or not t.partitions:
            await self.client.refresh_metadata([topic], allow_auto_topic_creation=True)
            t = self.client.topics.get(topic)
            deadline = time.monotonic() + self.request_timeout_ms / 1000.0
            while (t is None or not t.partitions) and time.monotonic() < deadline:
                md = self.client.metadata
                code = next((x.error_code for x in md.topics if x.name == topic), 0) if md else 0
                if code and not is_retriable(code):     # an invalid or forbidden topic: no waiting
                    break
                await asyncio.sleep(0.2)
                await self.client.refresh_metadata([topic], allow_auto_topic_creation=True)
                t = self.client.topics.get(topic)
            if t is None or not t.partitions:
                md = self.client.metadata
                code = next((x.error_code for x in md.topics if x.name == topic), 3) if md else 3
                raise _err(code or 3, None, f"Topic {topic} not present in metadata: ")
        return len(t.partitions)

    async def send(self, topic: str, value, key=None, headers=(), partition: int | None = None,
                   timestamp: int | None = None) -> asyncio.Future:
        """Queue a record; the returned future resolves to a ``ProduceResult``."""
        n = await self.partitions_of(topic)
        if partition is None:
            if key is not None:
                partition = partition_for_key(bytes(key), n)
            else:
                partition = self._sticky.get(topic)
                if partition is None or partition >= n:
                    partition = self._sticky[topic] = random.randrange(n)
        elif not 0 <= partition < n:
            raise ValueError(f"partition {partition} is not in 0..{n - 1} for topic {topic}")
        tp = (topic, partition)
        b = self._batches.get(tp)
        if b is None:
            b = self._batches[tp] = _Batch()
        fut = asyncio.get_running_loop().create_future()
        b.records.append((key, value, list(headers), timestamp))
        b.size += (len(value) if value is not None else 0) + (len(key) if key is not None else 0) + 20
        b.futures.append(fut)
        if b.size >= self.batch_size:
            self._drain(tp)
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.linger, self._linger_expired)
        return fut

    def _linger_expired(self):
        self._timer = None
        now = time.monotonic()
        for tp, b in list(self._batches.items()):
            if now - b.created >= self.linger * 0.9:
                self._drain(tp)
        if self._batches and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.linger, self._linger_expired)

    def _drain(self, tp):
        b = self._batches.pop(tp, None)
        if b is None:
            return
        if tp[1] == self._sticky.get(tp[0]):
            self._sticky.pop(tp[0], None)      # switch sticky partition after a batch
        task = asyncio.get_running_loop().create_task(self._send_batch(tp, b))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def flush(self):
        for tp in list(self._batches):
            self._drain(tp)
        while self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)

    async def _send_batch(self, tp, b: _Batch):
        topic, partition = tp
        data = bytes(rec.build_batch(b.records, compression=self.compression))
        attempt = 0
        async with self._sem:
            while True:
                try:
                    P = ProduceRequest
                    req = P(transactional_id=None, acks=self.acks, timeout_ms=self.request_timeout_ms,
                            topic_data=[P.TopicProduceData(name=topic, partition_data=[
                                P.PartitionProduceData(index=partition, records=data)])])
                    # topics by name: Produce v13 would want their ids
                    resp = await self.client.send_to_leader(topic, partition, req, max_version=12)
                    if resp is None:       # acks=0
                        self._complete(b, topic, partition, -1, None)
                        return
                    pr = resp.responses[0].partition_responses[0]
                    if pr.error_code == 0:
                        self._complete(b, topic, partition, pr.base_offset, None)
                        return
                    exc = _err(pr.error_code, getattr(pr, "error_message", None))
                    if not is_retriable(pr.error_code) or attempt >= self.retries:
                        raise exc
                except KafkaConnectionError as e:
                    if attempt >= self.retries:
                        self._complete(b, topic, partition, -1, e)
                        return
                except KafkaError as e:
                    self._complete(b, topic, partition, -1, e)
                    return
                attempt += 1
                await asyncio.sleep(self.retry_backoff)
                try:
                    await self.client.refresh_metadata([topic])
                except KafkaConnectionError:
                    pass

    def _complete(self, b, topic, partition, base_offset, error):
        if error is not None:
            self.errors.append(error)
        for i, fut in enumerate(b.futures):
            if not fut.done():
                fut.set_result(ProduceResult(topic, partition,
                                             base_offset + i if base_offset >= 0 else -1, error))


# =============================================================================================
# Offsets
# =============================================================================================

async def list_offsets(client, tps, timestamp: int, isolation_level: int = 0):
    """{(topic, partition): (offset, timestamp)} for ``tps`` at ``timestamp`` (-1/-2/-3/ms).

    Partitions whose leader answers with an error map to the KafkaError instance.
    """
    by_leader = defaultdict(list)
    for topic, partition in tps:
        by_leader[await client.leader(topic, partition)].append((topic, partition))
    out = {}
    L = ListOffsetsRequest

    async def ask(leader, items):
        if leader < 0:
            for tp in items:
                out[tp] = _err(5)
            return
        topics = defaultdict(list)
        for t, p in items:
            topics[t].append(L.ListOffsetsPartition(partition_index=p, timestamp=timestamp,
                                                    current_leader_epoch=-1, max_num_offsets=1))
        req = L(replica_id=-1, isolation_level=isolation_level,
                topics=[L.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()])
        conn = await client.connection(leader)
        min_v = 7 if timestamp == MAX_TIMESTAMP else (2 if isolation_level else None)
        version = conn.pick_version(L.API_KEY, min_version=min_v)
        if version == 0:
            version = conn.pick_version(L.API_KEY, min_version=1)
        resp = await conn.send(req, version=version)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    out[(t.name, p.partition_index)] = _err(p.error_code)
                else:
                    out[(t.name, p.partition_index)] = (p.offset, p.timestamp)

    await asyncio.gather(*(ask(ld, items) for ld, items in by_leader.items()))
    return out


# =============================================================================================
# ConsumerProtocol v0 (subscription / assignment) and the range assignor
# =============================================================================================

def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def encode_subscription(topics, user_data: bytes | None = None,
                        owned: dict[str, list[int]] | None = None, generation: int = -1) -> bytes:
    """ConsumerProtocolSubscription: v0 with neither owned partitions nor a generation, else v2
    (v1 added the owned partitions, v2 the generation)."""
    version = 0 if owned is None else 2
    out = bytearray(struct.pack(">hi", version, len(topics)))
    for t in topics:
        out += _str(t)
    out += struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data
    if version:
        out += _topic_partitions(owned) + struct.pack(">i", generation)
    return bytes(out)


def _topic_partitions(tps: dict[str, list[int]]) -> bytes:
    out = bytearray(struct.pack(">i", len(tps)))
    for t, parts in sorted(tps.items()):
        out += _str(t) + struct.pack(">i", len(parts))
        for p in sorted(parts):
            out += struct.pack(">i", p)
    return bytes(out)


class _Reader:
    def __init__(self, data):
        self.d = bytes(data)
        self.p = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return v[0]

    def string(self):
        n = self.take(">h")
        s = self.d[self.p:self.p + n].decode()
        self.p += n
        return s


def decode_subscription(data) -> list[str]:
    return decode_subscription_full(data)[0]


def decode_subscription_full(data) -> tuple[list[str], dict[str, list[int]], int]:
    """Topics, owned partitions (v1+) and generation (v2+) of a ConsumerProtocolSubscription;
    later versions' fields (the rack) are not needed here."""
    r = _Reader(data)
    version = r.take(">h")
    topics = [r.string() for _ in range(r.take(">i"))]
    n = r.take(">i")
    if n > 0:
        r.p += n
    owned: dict[str, list[int]] = {}
    generation = -1
    if version >= 1 and r.p < len(r.d):
        for _ in range(r.take(">i")):
            t = r.string()
            owned[t] = [r.take(">i") for _ in range(r.take(">i"))]
        if version >= 2 and r.p < len(r.d):
            generation = r.take(">i")
    return topics, owned, generation


def encode_assignment(assignment: dict[str, list[int]]) -> bytes:
    out = bytearray(struct.pack(">hi", 0, len(assignment)))
    for t, parts in sorted(assignment.items()):
        out += _str(t) + struct.pack(">i", len(parts))
        for p in parts:
            out += struct.pack(">i", p)
    out += struct.pack(">i", -1)
    return bytes(out)


def decode_assignment(data) -> dict[str, list[int]]:
    if not data:
        return {}
    r = _Reader(data)
    r.take(">h")
    out = {}
    for _ in range(r.take(">i")):
        t = r.string()
        out[t] = [r.take(">i") for _ in range(r.take(">i"))]
    return out


def range_assign(subscriptions: dict[str, list[str]], partitions: dict[str, int]):
    """Kafka's RangeAssignor: per topic, consecutive ranges to members sorted by id."""
    result = {m: {} for m in subscriptions}
    by_topic = defaultdict(list)
    for m, topics in subscriptions.items():
        for t in topics:
            by_topic[t].append(m)
    for t, members in by_topic.items():
        members = sorted(members)
        for m, r in zip(members, contiguous_ranges(partitions.get(t, 0), len(members))):
            if r:
                result[m][t] = list(r)
    return result


def roundrobin_assign(subscriptions: dict[str, list[str]], partitions: dict[str, int]):
    """Kafka's RoundRobinAssignor: every subscribed partition, in (topic, partition) order, goes
    to the next member in member-id order that subscribes to its topic."""
    members = sorted(subscriptions)
    result: dict = {m: {} for m in members}
    topics = sorted({t for ts in subscriptions.values() for t in ts})
    i = 0
    for t in topics:
        for p in range(partitions.get(t, 0)):
            for _ in range(len(members)):
                m = members[i % len(members)]
                i += 1
                if t in subscriptions[m]:
                    result[m].setdefault(t, []).append(p)
                    break
    return result


def sticky_assign(members: dict[str, tuple[list[str], dict[str, list[int]], int]],
                  partitions: dict[str, int], cooperative: bool = False):
    """The sticky assignors (``sticky``, ``cooperative-sticky``): balanced like round robin, but
    each member keeps what it owned as far as the balance allows.  ``members`` maps a member to
    its (topics, owned partitions, generation); a partition two members claim stays with the one
    of the later generation.  With ``cooperative``, a partition moving away from its owner is held
    back from its new member for this round: the owner revokes it and rejoins, and the next
    round hands it over (KIP-429)."""
    claims: dict = {}
    for m, (topics, owned, gen) in sorted(members.items()):
        for t, ps in owned.items():
            for p in ps:
                prev = claims.get((t, p))
                if prev is None or gen > prev[1]:
                    claims[(t, p)] = (m, gen)
    current: dict = {m: {} for m in members}
    for (t, p), (m, _) in claims.items():
        current[m].setdefault(t, set()).add(p)
    subs = {m: set(v[0]) & set(partitions) for m, v in members.items()}
    wanted = set().union(*subs.values()) if subs else set()
    target = uniform(subs, {t: partitions[t] for t in wanted}, current)
    result = {}
    for m, tps in target.items():
        out = {}
        for t, ps in tps.items():
            keep = sorted(p for p in ps if not cooperative or claims.get((t, p), (m,))[0] == m)
            if keep:
                out[t] = keep
        result[m] = out
    return result


#: The classic protocol's client-side assignors by protocol name, and the Java class names
#: ``partition.assignment.strategy`` may give for them.
ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
JAVA_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def assignor_names(strategy: str) -> list[str]:
    """``partition.assignment.strategy`` (Java class names or protocol names, comma-separated)
    as protocol names; an unknown one raises ``ValueError`` with Kafka's message."""
    names = []
    for item in (x.strip() for x in strategy.split(",")):
        if not item:
            continue
        name = JAVA_ASSIGNORS.get(item, item if item in ASSIGNORS else None)
        if name is None:
            raise ValueError(f"Invalid value {item} for configuration partition.assignment.strategy: "
                             f"Class {item} cannot be found")
        if name not in names:
            names.append(name)
    if not names:
        raise ValueError("Invalid value for configuration partition.assignment.strategy: "
                         "no assignor given")
    return names


def plan_assignment(protocol: str, metadata: dict[str, bytes], partitions: dict[str, int]):
    """The group leader's assignment under ``protocol`` from the members' subscriptions."""
    full = {m: decode_subscription_full(md) for m, md in metadata.items()}
    subs = {m: v[0] for m, v in full.items()}
    if protocol == "range":
        return range_assign(subs, partitions)
    if protocol == "roundrobin":
        return roundrobin_assign(subs, partitions)
    return sticky_assign(full, partitions, cooperative=protocol == "cooperative-sticky")


def consumer_settings(props: dict[str, str]) -> dict:
    """``Consumer`` keyword arguments from a Java consumer's properties (Kafka's names and
    defaults); a bad group.protocol, partition.assignment.strategy or auto.offset.reset raises
    ``ValueError`` with Kafka's message."""
    def num(key, default):
        return int(props.get(key, default))
    protocol = props.get("group.protocol", "classic").strip().lower()
    if protocol not in ("classic", "consumer"):
        raise ValueError(f"Invalid value {props['group.protocol']} for configuration group.protocol: "
                         f"String must be one of (case insensitive): CLASSIC, CONSUMER")
    reset = props.get("auto.offset.reset", "latest")
    if reset not in ("earliest", "latest", "none"):
        raise ValueError(f"Invalid value {reset} for configuration auto.offset.reset: "
                         f"String must be one of: latest, earliest, none")
    return dict(
        group_id=props.get("group.id"),
        group_instance_id=props.get("group.instance.id"),
        group_protocol=protocol,
        group_remote_assignor=props.get("group.remote.assignor"),
        assignors=assignor_names(props.get(
            "partition.assignment.strategy",
            "org.apache.kafka.clients.consumer.RangeAssignor,"
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor")),
        auto_offset_reset=reset,
        enable_auto_commit=props.get("enable.auto.commit", "true").strip().lower() == "true",
        auto_commit_interval_ms=num("auto.commit.interval.ms", 5000),
        session_timeout_ms=num("session.timeout.ms", 45000),
        heartbeat_interval_ms=num("heartbeat.interval.ms", 3000),
        rebalance_timeout_ms=num("max.poll.interval.ms", 300000),
        fetch_max_wait_ms=num("fetch.max.wait.ms", 500),
        fetch_min_bytes=num("fetch.min.bytes", 1),
        fetch_max_bytes=num("fetch.max.bytes", 52428800),
        max_partition_fetch_bytes=num("max.partition.fetch.bytes", 1048576),
        metadata_max_age_ms=num("metadata.max.age.ms", 300000),
        isolation_level=1 if props.get("isolation.level", "read_uncommitted") == "read_committed" else 0,
        client_id=props.get("client.id", "consumer"),
    )


# =============================================================================================
# Consumer
# =============================================================================================

class ConsumerRecord:
    __slots__ = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
                 "headers", "leader_epoch")

    def __init__(self, topic, partition, offset, timestamp, timestamp_type, key, value, headers,
                 leader_epoch=-1):
        self.topic, self.partition, self.offset = topic, partition, offset
        self.timestamp, self.timestamp_type = timestamp, timestamp_type
        self.key, self.value, self.headers, self.leader_epoch = key, value, headers, leader_epoch


class Consumer:
    def __init__(self, client, *, group_id: str | None = None, auto_offset_reset: str = "latest",
                 isolation_level: int = 0, enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000, session_timeout_ms: int = 45000,
                 rebalance_timeout_ms: int = 300000, heartbeat_interval_ms: int = 3000,
                 fetch_max_wait_ms: int = 500, fetch_min_bytes: int = 1,
                 fetch_max_bytes: int = 52428800, max_partition_fetch_bytes: int = 1048576,
                 group_instance_id: str | None = None, client_id: str = "console-consumer",
                 assignors: list[str] | tuple[str, ...] = ("range",), group_protocol: str = "classic",
                 group_remote_assignor: str | None = None, listener=None,
                 metadata_max_age_ms: int = 300000):
        self.client = client
        self.metadata_max_age = metadata_max_age_ms / 1000.0
        self._metadata_checked = time.monotonic()
        self._joined_topics: list[str] = []
        self.assignors = list(assignors)
        self.group_protocol = group_protocol.lower()
        self.remote_assignor = group_remote_assignor
        self.listener = listener
        self.owned: set[tuple[str, int]] = set()
        self._joining = False
        self.member_epoch = 0
        self._cg_wake: asyncio.Event | None = None
        self._cg_target: set | None = None
        self._cg_lost = False
        self._cg_error: BaseException | None = None
        self._cg_reconciled = False
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.isolation_level = isolation_level
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval = auto_commit_interval_ms / 1000.0
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000.0
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.group_instance_id = group_instance_id
        self.positions: dict[tuple[str, int], int] = {}
        self.committed_positions: dict[tuple[str, int], int] = {}
        self._buffer: deque = deque()
        self._subscription: list[str] | None = None
        self._pattern = None
        self.member_id = ""
        self.generation = -1
        self.coordinator = None
        self._hb_task = None
        self._rejoin = False
        self._last_commit = time.monotonic()
        self._reset_overrides: dict[tuple[str, int], int] = {}

    # -- assignment -----------------------------------------------------------------------------
    async def assign(self, tps, start: int | None = None):
        """Manual assignment; ``start``: an offset, EARLIEST, LATEST (default: reset policy)."""
        for tp in tps:
            if start is not None:
                self._reset_overrides[tp] = start
        await self._init_positions(list(tps))

    async def subscribe(self, topics: list[str] | None = None, pattern=None):
        self._subscription = topics
        self._pattern = pattern
        if self.group_id is None:
            await self.client.refresh_metadata(topics if pattern is None else None)
            tps = [(t, p.partition_index) for t in self._topics_now()
                   for p in self.client.topics[t].partitions]
            await self.assign(tps)
        elif self.group_protocol == "consumer":
            await self.client.refresh_metadata(topics if pattern is None else None)
            await self._cg_start()
        else:
            await self._join()

    def _topics_now(self):
        if self._pattern is not None:
            return sorted(t for t in self.client.topics if self._pattern(t)
                          and not self.client.topics[t].is_internal)
        return [t for t in self._subscription if t in self.client.topics]

    async def _init_positions(self, tps):
        need_reset = []
        for tp in tps:
            o = self._reset_overrides.get(tp)
            if o is not None and o >= 0:
                self.positions[tp] = o
            elif tp in self.committed_positions:
                self.positions[tp] = self.committed_positions[tp]
            else:
                need_reset.append(tp)
        if need_reset:
            await self._reset(need_reset)

    async def _reset(self, tps):
        groups = defaultdict(list)
        for tp in tps:
            o = self._reset_overrides.get(tp)
            if o is None:
                if self.auto_offset_reset == "earliest":
                    o = EARLIEST
                elif self.auto_offset_reset == "latest":
                    o = LATEST
                else:
                    raise KafkaError(f"Undefined offset with no reset policy for partition: "
                                     f"{tp[0]}-{tp[1]}", code=1)
            groups[o].append(tp)
        for ts, items in groups.items():
            res = await list_offsets(self.client, items, ts, self.isolation_level)
            for tp, v in res.items():
                if isinstance(v, BaseException):
                    raise v
                self.positions[tp] = v[0]

    # -- group ----------------------------------------------------------------------------------
    async def _coordinator_conn(self):
        if self.coordinator is None:
            deadline = time.monotonic() + 30
            while True:
                try:
                    self.coordinator = await self.client.find_coordinator(self.group_id)
                    break
                except KafkaError as e:
                    if not e.retriable or time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
        return await self.client.connection(self.coordinator)

    async def _group_send(self, req, max_version=None):
        for attempt in range(20):
            conn = await self._coordinator_conn()
            resp = await conn.send(req, max_version=max_version)
            code = getattr(resp, "error_code", 0)
            if code in (14, 15, 16):        # load in progress / not available / not coordinator
                if code != 14:
                    self.coordinator = None
                await asyncio.sleep(0.1 * (attempt + 1))
                continue
            return resp
        return resp

    # The rebalance listener: Java's ConsumerRebalanceListener as optional methods of
    # ``listener`` (plain functions or coroutines); lost partitions go to on_partitions_revoked
    # when on_partitions_lost is absent.
    async def _notify(self, what: str, tps):
        fn = getattr(self.listener, "on_partitions_" + what, None)
        if fn is None and what == "lost":
            fn = getattr(self.listener, "on_partitions_revoked", None)
        if fn is not None:
            result = fn(sorted(tps))
            if asyncio.iscoroutine(result):
                await result

    async def _give_up(self, tps, what: str):
        """Drop ``tps`` from the assignment after telling the listener (revoked or lost)."""
        await self._notify(what, tps)
        for tp in tps:
            self.owned.discard(tp)
            self.positions.pop(tp, None)
        if self._buffer:
            keep = [r for r in self._buffer if (r.topic, r.partition) in self.owned]
            self._buffer.clear()
            self._buffer.extend(keep)

    async def _commit_before_revoking(self, tps):
        if not self.enable_auto_commit:
            return
        offsets = {tp: self.positions[tp] for tp in tps if tp in self.positions}
        try:
            await self.commit(offsets)
        except (KafkaConnectionError, KafkaError):
            pass

    async def _take(self, added):
        """Own ``added`` and tell the listener, then find where to fetch them from: committed
        offsets first, else the reset policy (whose failure, as in Java's poll, comes after the
        listener heard of the assignment)."""
        self.owned |= set(added)
        await self._notify("assigned", added)
        if not added:
            return
        await self.client.refresh_metadata(sorted({t for t, _ in self.owned}))
        for tp in added:
            self.committed_positions.pop(tp, None)
        await self._fetch_committed(sorted(added))
        await self._init_positions(sorted(added))

    def _snapshot(self):
        """The subscribed topics that exist and their partition counts: a change (a new topic
        matching the pattern, a created topic, added partitions) calls for a rebalance."""
        return sorted((t, len(self.client.topics[t].partitions)) for t in self._topics_now()
                      if t in self.client.topics)

    async def _check_metadata(self):
        if time.monotonic() - self._metadata_checked < self.metadata_max_age:
            return
        self._metadata_checked = time.monotonic()
        try:
            await self.client.refresh_metadata(None if self._pattern is not None else self._subscription)
        except (KafkaConnectionError, KafkaError):
            return
        if self._snapshot() != self._joined_topics:
            self._rejoin = True

    def _subscribed_topics(self):
        return self._topics_now() if self._pattern is not None else list(self._subscription or [])

    async def _join(self):
        if self.group_protocol == "consumer":
            await self._cg_reconcile()
            return
        self._joining = True
        try:
            await self._classic_join()
        finally:
            self._joining = False

    async def _classic_join(self):
        cooperative = all(a == "cooperative-sticky" for a in self.assignors)
        if self._pattern is not None:
            await self.client.refresh_metadata(None)
        subs = self._subscribed_topics()
        self._joined_topics = self._snapshot()
        # before joining, as Java's onJoinPrepare: an old membership's partitions are lost; an
        # eager member revokes all it has, a cooperative one those of topics it left
        if self.generation < 0 or not self.member_id:
            if self.owned:
                await self._give_up(set(self.owned), "lost")
        elif not cooperative:
            await self._commit_before_revoking(self.owned)
            await self._give_up(set(self.owned), "revoked")
        else:
            gone = {tp for tp in self.owned if tp[0] not in subs}
            if gone:
                await self._commit_before_revoking(gone)
                await self._give_up(gone, "revoked")
        while True:
            J = JoinGroupRequest
            owned: dict = defaultdict(list)
            for t, p in self.owned:
                owned[t].append(p)
            metadata = encode_subscription(subs, None, dict(owned), self.generation)
            req = J(group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                    rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                    group_instance_id=self.group_instance_id, protocol_type="consumer",
                    protocols=[J.JoinGroupRequestProtocol(name=n, metadata=metadata)
                               for n in self.assignors],
                    reason=None)
            resp = await self._group_send(req, max_version=7)
            if resp.error_code == 79:               # MEMBER_ID_REQUIRED
                self.member_id = resp.member_id
                continue
            if resp.error_code in (25, 22):          # unknown member / illegal generation
                self.member_id = ""
                self.generation = -1
                continue
            if resp.error_code == 27:
                continue
            if resp.error_code:
                raise _err(resp.error_code, None, f"JoinGroup of group {self.group_id} failed: ")
            self.member_id = resp.member_id
            self.generation = resp.generation_id
            protocol = resp.protocol_name or self.assignors[0]
            assignments = []
            S = SyncGroupRequest
            if resp.leader == resp.member_id:
                members = {m.member_id: m.metadata for m in resp.members}
                all_topics = sorted({t for md in members.values() for t in decode_subscription(md)})
                await self.client.refresh_metadata(all_topics)
                counts = {t: len(self.client.topics[t].partitions) for t in all_topics
                          if t in self.client.topics}
                plan = plan_assignment(protocol, members, counts)
                assignments = [S.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(a))
                               for m, a in plan.items()]
            sreq = S(group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
                     group_instance_id=self.group_instance_id, protocol_type="consumer",
                     protocol_name=protocol, assignments=assignments)
            sresp = await self._group_send(sreq)
            if sresp.error_code == 27:
                continue
            if sresp.error_code in (25, 22):
                self.member_id = ""
                self.generation = -1
                continue
            if sresp.error_code:
                raise _err(sresp.error_code, None, f"SyncGroup of group {self.group_id} failed: ")
            assignment = decode_assignment(sresp.assignment)
            break
        assigned = {(t, p) for t, ps in assignment.items() for p in ps}
        self._rejoin = False
        if protocol == "cooperative-sticky":
            revoked = self.owned - assigned
            if revoked:
                # KIP-429: give them up now and join again, so the leader can hand them over
                await self._commit_before_revoking(revoked)
                await self._give_up(revoked, "revoked")
                self._rejoin = True
        elif self.owned - assigned:
            await self._give_up(self.owned - assigned, "revoked")
        await self._take(assigned - self.owned)
        if self._hb_task is None:
            self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def _fetch_committed(self, tps):
        if not tps:
            return
        F = OffsetFetchRequest
        by_topic = defaultdict(list)
        for t, p in tps:
            by_topic[t].append(p)
        req = F(group_id=self.group_id, require_stable=True,
                topics=[F.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()])
        resp = await self._group_send(req, max_version=7)
        if resp.error_code:
            raise _err(resp.error_code, None, "OffsetFetch failed: ")
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code == 0 and p.committed_offset >= 0:
                    self.committed_positions[(t.name, p.partition_index)] = p.committed_offset

    async def _heartbeat_loop(self):
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            if self._joining or self._rejoin:
                continue
            generation = self.generation
            try:
                req = HeartbeatRequest(group_id=self.group_id, generation_id=self.generation,
                                       member_id=self.member_id,
                                       group_instance_id=self.group_instance_id)
                resp = await self._group_send(req)
                if resp.error_code in (27, 25, 22) and generation == self.generation \
                        and not self._joining:
                    if resp.error_code != 27:      # the membership is gone: its partitions are lost
                        self.generation = -1
                        if resp.error_code == 25:
                            self.member_id = ""
                    self._rejoin = True
            except (KafkaConnectionError, KafkaError):
                self.coordinator = None

    # -- the consumer group protocol (KIP-848) ----------------------------------------------------
    async def _cg_start(self):
        self.member_epoch = 0
        self._cg_wake = asyncio.Event()
        await self._cg_heartbeat()
        await self._cg_reconcile()
        self._hb_task = asyncio.get_running_loop().create_task(self._cg_loop())

    def _topic_id(self, name):
        t = self.client.topics.get(name)
        return None if t is None else t.topic_id

    async def _cg_heartbeat(self, leave: bool = False):
        H = ConsumerGroupHeartbeatRequest
        if self._pattern is not None:
            await self.client.refresh_metadata(None)
        owned: dict = defaultdict(list)
        for t, p in self.owned:
            owned[t].append(p)
        tps = []
        for t, ps in sorted(owned.items()):
            tid = self._topic_id(t)
            if tid is not None:
                tps.append(H.TopicPartitions(topic_id=tid, partitions=sorted(ps)))
        if leave:
            epoch = -2 if self.group_instance_id else -1
        else:
            epoch = self.member_epoch
        req = H(group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
                instance_id=self.group_instance_id, rack_id=None,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                subscribed_topic_names=self._subscribed_topics(), subscribed_topic_regex=None,
                server_assignor=self.remote_assignor, topic_partitions=tps)
        resp = await self._group_send(req, max_version=0)
        if leave:
            return
        code = resp.error_code
        if code in (25, 110):              # UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: join again
            self.member_epoch = 0
            self._cg_lost = True
            self._cg_target = None
            return
        if code:
            self._cg_error = _err(code, resp.error_message,
                                  f"ConsumerGroupHeartbeat of group {self.group_id} failed: ")
            return
        if resp.member_id:
            self.member_id = resp.member_id
        self.member_epoch = resp.member_epoch
        self.generation = resp.member_epoch
        if resp.heartbeat_interval_ms > 0:
            self.heartbeat_interval = resp.heartbeat_interval_ms / 1000.0
        if resp.assignment is not None:
            names = {t.topic_id: n for n, t in self.client.topics.items()}
            ids = [tp.topic_id for tp in resp.assignment.topic_partitions]
            if any(i not in names for i in ids):
                await self.client.refresh_metadata(None)
                names = {t.topic_id: n for n, t in self.client.topics.items()}
            self._cg_target = {(names[tp.topic_id], p) for tp in resp.assignment.topic_partitions
                               if tp.topic_id in names for p in tp.partitions}

    async def _cg_loop(self):
        while True:
            try:
                await asyncio.wait_for(self._cg_wake.wait(), self.heartbeat_interval)
            except asyncio.TimeoutError:
                pass
            self._cg_wake.clear()
            try:
                await self._cg_heartbeat()
            except (KafkaConnectionError, KafkaError):
                self.coordinator = None
                await asyncio.sleep(0.1)

    async def _cg_reconcile(self):
        """Bring the owned partitions to the coordinator's target, as Java's new consumer does in
        poll: revoke first, then take the new ones, and report at once."""
        if self._cg_error is not None:
            e, self._cg_error = self._cg_error, None
            raise e
        changed = False
        if self._cg_lost:
            self._cg_lost = False
            if self.owned:
                await self._give_up(set(self.owned), "lost")
            changed = True
        target, self._cg_target = self._cg_target, None
        if target is not None and (target != self.owned or not self._cg_reconciled):
            revoked = self.owned - target
            if revoked:
                await self._commit_before_revoking(revoked)
                await self._give_up(revoked, "revoked")
            self._cg_reconciled = True
            await self._take(target - self.owned)
            changed = True
        if changed and self._cg_wake is not None:
            self._cg_wake.set()

    async def commit(self, offsets: dict[tuple[str, int], int] | None = None):
        if self.group_id is None:
            return True
        offsets = dict(self.positions) if offsets is None else offsets
        if not offsets:
            return True
        C = OffsetCommitRequest
        by_topic = defaultdict(list)
        for (t, p), o in offsets.items():
            by_topic[t].append(C.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                committed_metadata=""))
        req = C(group_id=self.group_id, generation_id_or_member_epoch=self.generation,
                member_id=self.member_id, group_instance_id=self.group_instance_id,
                retention_time_ms=-1,
                topics=[C.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        # a consumer-protocol member commits with its member epoch (v9 names the field so)
        resp = await self._group_send(req, max_version=9 if self.group_protocol == "consumer" else 8)
        rebalancing = False
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code in (27, 25, 22, 110, 113):  # the membership moved on: not committed
                    rebalancing = True
                    if self.group_protocol != "consumer":
                        self._rejoin = True
                elif p.error_code:
                    raise _err(p.error_code, None, "OffsetCommit failed: ")
        if rebalancing:
            return False
        self.committed_positions.update(offsets)
        self._last_commit = time.monotonic()
        return True

    async def close(self, commit: bool = True):
        if self._hb_task is not None:
            self._hb_task.cancel()
            self._hb_task = None
        if self.group_id is None or not self.member_id:
            return
        try:
            if commit and self.enable_auto_commit:
                await self.commit()
        except (KafkaConnectionError, KafkaError):
            pass
        if self.owned:                      # Java's onLeavePrepare
            await self._give_up(set(self.owned), "revoked" if self.generation >= 0 else "lost")
        try:
            if self.group_protocol == "consumer":
                await self._cg_heartbeat(leave=True)
                return
            conn = await self._coordinator_conn()
            version = conn.pick_version(LeaveGroupRequest.API_KEY)
            L = LeaveGroupRequest
            if version >= 3:
                req = L(group_id=self.group_id, members=[L.MemberIdentity(
                    member_id=self.member_id, group_instance_id=self.group_instance_id,
                    reason="the consumer is being closed")])
            else:
                req = L(group_id=self.group_id, member_id=self.member_id)
            await conn.send(req, version=version, timeout=5)
        except (KafkaConnectionError, KafkaError):
            pass

    # -- fetching -------------------------------------------------------------------------------
    async def poll(self, timeout: float) -> list[ConsumerRecord]:
        """Records fetched within ``timeout`` seconds (possibly none)."""
        if self._buffer:
            out = list(self._buffer)
            self._buffer.clear()
            return out
        if self.group_id is not None and self.group_protocol == "classic" and \
                (self._subscription is not None or self._pattern is not None):
            await self._check_metadata()
        if self._rejoin or self.group_protocol == "consumer" and self.group_id is not None:
            await self._join()
        if self.enable_auto_commit and time.monotonic() - self._last_commit > self.auto_commit_interval:
            await self.commit()
        if not self.positions:
            await asyncio.sleep(min(timeout, 0.2))
            return []
        wait_ms = max(0, min(int(timeout * 1000), self.fetch_max_wait_ms))
        by_leader = defaultdict(list)
        for tp, off in self.positions.items():
            by_leader[await self.client.leader(*tp)].append((tp, off))
        results = await asyncio.gather(*(self._fetch(ld, items, wait_ms)
                                         for ld, items in by_leader.items()),
                                       return_exceptions=True)
        out = []
        for r in results:
            if isinstance(r, BaseException):
                if isinstance(r, (KafkaConnectionError, KafkaError)):
                    await asyncio.sleep(0.1)
                    try:
                        await self.client.refresh_metadata(sorted({t for t, _ in self.positions}))
                    except KafkaConnectionError:
                        pass
                    continue
                raise r
            out.extend(r)
        return out

    async def _fetch(self, leader, items, wait_ms):
        if leader < 0:
            raise _err(5)
        F = FetchRequest
        topics = defaultdict(list)
        for (t, p), off in items:
            topics[t].append(F.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=off,
                                              last_fetched_epoch=-1, log_start_offset=-1,
                                              partition_max_bytes=self.max_partition_fetch_bytes))
        req = F(cluster_id=None, replica_id=-1, max_wait_ms=wait_ms, min_bytes=self.fetch_min_bytes,
                max_bytes=self.fetch_max_bytes, isolation_level=self.isolation_level,
                session_id=0, session_epoch=-1,
                topics=[F.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
                forgotten_topics_data=[], rack_id="")
        conn = await self.client.connection(leader)
        resp = await conn.send(req, max_version=12, timeout=wait_ms / 1000.0 + conn.request_timeout)
        if getattr(resp, "error_code", 0):
            raise _err(resp.error_code)
        out = []
        reset = []
        for t in resp.responses:
            for p in t.partitions:
                tp = (t.topic, p.partition_index)
                if tp not in self.positions:
                    continue
                if p.error_code == 1:          # OFFSET_OUT_OF_RANGE
                    self._reset_overrides.pop(tp, None)
                    reset.append(tp)
                    continue
                if p.error_code:
                    if is_retriable(p.error_code):
                        await self.client.refresh_metadata([t.topic])
                        continue
                    raise _err(p.error_code, None, f"Fetch of {tp[0]}-{tp[1]} failed: ")
                if p.records:
                    out.extend(self._decode(tp, p))
        if reset:
            await self._reset(reset)
        return out

    def _decode(self, tp, p):
        aborted = None
        if self.isolation_level == 1 and p.aborted_transactions:
            aborted = [(a.first_offset, a.producer_id) for a in p.aborted_transactions]
        recs, self.positions[tp] = rec.consumer_records(memoryview(p.records), self.positions[tp], aborted)
        return [ConsumerRecord(tp[0], tp[1], r.offset, r.timestamp, r.timestamp_type,
                               None if r.key is None else bytes(r.key),
                               None if r.value is None else bytes(r.value),
                               [(k, None if v is None else bytes(v)) for k, v in r.headers],
                               r.leader_epoch)
                for r in recs]

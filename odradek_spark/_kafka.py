"""Kafka I/O for the Spark connector, on the project's own asyncio client (``protocol.client``).

Nothing here imports pyspark, so the pieces can be used (and tested) without Spark:

* ``ConnectorOptions`` -- the options a Spark query passes, parsed and checked once.
* ``SyncKafka`` -- a blocking facade (its own event loop and ``ClusterClient``) for the driver:
  partition discovery and offset look-ups.
* ``read_range`` -- a blocking generator of the records of one topic-partition in
  ``[start, end)``, for an executor task.
* ``RangeProducer`` -- batches rows into v2 record batches per partition and writes them with
  acks=all, as an idempotent producer (InitProducerId + sequence numbers) when the broker allows.

Every object that Spark pickles (options, partitions) holds plain data only; connections are
opened where they are used and closed when the work is done.
"""
from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from typing import Iterable, Iterator, Mapping

from protocol import records as rec
from protocol.client import ClusterClient, KafkaConnectionError, UnsupportedVersionError, security_from_properties
from protocol.errors import ErrorCode as E, KafkaError, error_for, is_retriable
from protocol.messages import (FetchRequest, InitProducerIdRequest, ListOffsetsRequest,
                               ProduceRequest)
from tools.kclient import partition_for_key

log = logging.getLogger("odradek.spark")

EARLIEST = -2
LATEST = -1
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class ConnectorError(RuntimeError):
    """A failure the user should see as is (bad option, lost data, broker refusal)."""


class DataLossError(ConnectorError):
    """Offsets the query planned to read are gone (retention, DeleteRecords, truncation)."""


def kafka_error(code: int, context: str = "") -> KafkaError:
    cls = error_for(code)
    text = f"{context}{cls(code=code).message}"
    return cls(text) if cls.code == code else cls(text, code=code)


# =============================================================================================
# Options
# =============================================================================================

def _bool(v, name) -> bool:
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ConnectorError(f"option {name} must be true or false, not {v!r}")


def _int(v, name, minimum=None) -> int:
    try:
        n = int(str(v).strip())
    except ValueError:
        raise ConnectorError(f"option {name} must be an integer, not {v!r}") from None
    if minimum is not None and n < minimum:
        raise ConnectorError(f"option {name} must be at least {minimum}, not {n}")
    return n


def parse_offsets_option(value: str | None, name: str, default: str):
    """``earliest`` / ``latest`` / ``{"topic": {"0": 23, "1": -2}}`` -> str or {(t, p): off}.

    In the JSON form -2 means earliest and -1 latest, as in Spark's Kafka source.
    """
    v = (value if value is not None else default).strip()
    if v.lower() in ("earliest", "latest"):
        return v.lower()
    try:
        doc = json.loads(v)
    except ValueError:
        raise ConnectorError(
            f"option {name} must be earliest, latest or a JSON object like "
            f'{{"topic":{{"0":23,"1":-2}}}}, not {value!r}') from None
    if not isinstance(doc, dict):
        raise ConnectorError(f"option {name}: the JSON must be an object of topics")
    out = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise ConnectorError(f"option {name}: topic {topic!r} must map to an object of "
                                 f"partition -> offset")
        for p, off in parts.items():
            try:
                out[(topic, int(p))] = int(off)
            except (TypeError, ValueError):
                raise ConnectorError(
                    f"option {name}: bad partition/offset {p!r}: {off!r} for topic {topic!r}") from None
    return out


_DURATION_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def duration_seconds(value, name: str) -> float:
    """Spark's time strings (``timeStringAsMs``): a number with ``us``, ``ms``, ``s``, ``m`` /
    ``min``, ``h`` or ``d``; a bare number is milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", str(value).lower())
    if not m or m.group(2) not in ("",) + tuple(_DURATION_UNITS):
        raise ConnectorError(f"option {name}: {value!r} is not a duration like 15m, 30s or 500ms")
    return int(m.group(1)) * _DURATION_UNITS.get(m.group(2) or "ms")


def parse_timestamps_option(o: Mapping[str, str], which: str):
    """``<which>Timestamp`` (one timestamp for every partition: an int) or
    ``<which>OffsetsByTimestamp`` (JSON ``{"topic": {"0": ms}}``: {(topic, partition): ms}), or
    None when neither is given."""
    single, name = o.get(f"{which}timestamp"), f"{which}Timestamp"
    if single not in (None, ""):
        return _int(single, name, 0)
    by, name = o.get(f"{which}offsetsbytimestamp"), f"{which}OffsetsByTimestamp"
    if by in (None, ""):
        return None
    try:
        doc = json.loads(by)
        out = {(str(t), int(p)): int(ts) for t, parts in doc.items() for p, ts in parts.items()}
    except (ValueError, TypeError, AttributeError):
        raise ConnectorError(f'option {name} must be JSON like {{"topic":{{"0":1700000000000}}}}, '
                             f"not {by!r}") from None
    bad = sorted(tp for tp, ts in out.items() if ts < 0)
    if bad:
        raise ConnectorError(f"option {name}: negative timestamps for {bad}")
    return out


class ConnectorOptions:
    """The data source options, parsed.  Plain data: safe to pickle."""

    def __init__(self, options: Mapping[str, str]):
        o = {str(k).lower(): v for k, v in dict(options).items()}
        self.raw = o
        servers = o.get("kafka.bootstrap.servers") or o.get("bootstrap.servers")
        if not servers:
            raise ConnectorError("option kafka.bootstrap.servers (or bootstrap.servers) is required")
        self.bootstrap = servers
        self.client_id = o.get("kafka.client.id") or o.get("client.id") or "odradek-spark"
        self.request_timeout = _int(o.get("kafka.request.timeout.ms", 30000),
                                    "kafka.request.timeout.ms", 1) / 1000.0
        # TLS and SASL, as Spark's connector passes them to its clients: kafka.security.protocol,
        # kafka.ssl.*, kafka.sasl.* (read where a client is made: an SSL context does not pickle)
        self.security = {k[len("kafka."):]: str(v) for k, v in o.items()
                         if k.startswith(("kafka.security.", "kafka.ssl.", "kafka.sasl."))}
        proto = self.security.get("security.protocol", "PLAINTEXT").strip().upper()
        if proto not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ConnectorError(f"kafka.security.protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, "
                                 f"not {self.security['security.protocol']!r}")
        # -- source
        subscribe = o.get("subscribe") or ""
        self.topics = [t.strip() for t in subscribe.split(",") if t.strip()]
        self.pattern = o.get("subscribepattern") or None
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as e:
                raise ConnectorError(f"subscribePattern {self.pattern!r} is not a valid "
                                     f"regular expression: {e}") from None
        self.assign = None
        if o.get("assign"):
            try:
                doc = json.loads(o["assign"])
                self.assign = sorted({(str(t), int(p)) for t, ps in doc.items() for p in ps})
            except (ValueError, TypeError, AttributeError):
                raise ConnectorError(f'option assign must be JSON like {{"topic":[0,1]}}, '
                                     f'not {o["assign"]!r}') from None
        self.starting = parse_offsets_option(o.get("startingoffsets"), "startingOffsets", "latest")
        self.ending = parse_offsets_option(o.get("endingoffsets"), "endingOffsets", "latest")
        # by timestamp: one for every partition (…Timestamp) or per partition (…OffsetsByTimestamp);
        # they take precedence over the offsets options, the single timestamp first (as in Spark)
        self.starting_ts = parse_timestamps_option(o, "starting")
        self.ending_ts = parse_timestamps_option(o, "ending")
        strategy = str(o.get("startingoffsetsbytimestampstrategy", "error")).lower()
        if strategy not in ("error", "latest"):
            raise ConnectorError(f"startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
        self.ts_strategy = strategy
        mopt = o.get("maxoffsetspertrigger")
        self.max_offsets_per_trigger = None if mopt in (None, "") else _int(
            mopt, "maxOffsetsPerTrigger", 1)
        mopt = o.get("minoffsetspertrigger")
        self.min_offsets_per_trigger = None if mopt in (None, "") else _int(
            mopt, "minOffsetsPerTrigger", 1)
        self.max_trigger_delay = duration_seconds(o.get("maxtriggerdelay", "15m"), "maxTriggerDelay")
        if (self.min_offsets_per_trigger and self.max_offsets_per_trigger
                and self.min_offsets_per_trigger > self.max_offsets_per_trigger):
            raise ConnectorError(f"minOffsetsPerTrigger ({self.min_offsets_per_trigger}) is more than "
                                 f"maxOffsetsPerTrigger ({self.max_offsets_per_trigger})")
        self.fail_on_data_loss = _bool(o.get("failondataloss", "true"), "failOnDataLoss")
        self.include_headers = _bool(o.get("includeheaders", "false"), "includeHeaders")
        iso = str(o.get("kafka.isolation.level", "read_uncommitted")).lower()
        if iso not in ("read_uncommitted", "read_committed"):
            raise ConnectorError(f"kafka.isolation.level must be read_uncommitted or "
                                 f"read_committed, not {iso!r}")
        self.isolation_level = 1 if iso == "read_committed" else 0
        self.poll_timeout = _int(o.get("kafkaconsumer.polltimeoutms", 120000),
                                 "kafkaConsumer.pollTimeoutMs", 1) / 1000.0
        self.fetch_max_bytes = _int(o.get("kafka.max.partition.fetch.bytes", 4 << 20),
                                    "kafka.max.partition.fetch.bytes", 1)
        self.min_partitions = _int(o.get("minpartitions", 0), "minPartitions", 0)
        self.use_arrow = _bool(o.get("usearrow", "true"), "useArrow")
        # -- sink
        self.sink_topic = o.get("topic") or None
        acks = str(o.get("kafka.acks", "all")).lower()
        self.acks = -1 if acks in ("all", "-1") else _int(acks, "kafka.acks")
        if self.acks not in (-1, 0, 1):
            raise ConnectorError(f"kafka.acks must be all, -1, 0 or 1, not {acks!r}")
        self.idempotence = _bool(o.get("kafka.enable.idempotence", "true"),
                                 "kafka.enable.idempotence") and self.acks == -1
        self.batch_size = _int(o.get("kafka.batch.size", 256 * 1024), "kafka.batch.size", 1)
        self.buffer_memory = _int(o.get("kafka.buffer.memory", 8 << 20), "kafka.buffer.memory", 1)
        self.compression = o.get("kafka.compression.type", "none")
        try:
            rec._compression.codec_id(self.compression)
        except Exception:
            raise ConnectorError(f"unknown kafka.compression.type {self.compression!r}") from None
        self.retries = _int(o.get("kafka.retries", 10), "kafka.retries", 0)
        self.retry_backoff = _int(o.get("kafka.retry.backoff.ms", 100),
                                  "kafka.retry.backoff.ms", 0) / 1000.0

    def require_subscription(self):
        given = [n for n, v in (("subscribe", self.topics), ("subscribePattern", self.pattern),
                                ("assign", self.assign)) if v]
        if len(given) != 1:
            raise ConnectorError(
                "give exactly one of the options subscribe (a comma list of topics), "
                "subscribePattern (a regular expression) or assign "
                '(JSON like {"topic":[0,1]})' + (f"; got {', '.join(given)}" if given else ""))

    def client(self) -> ClusterClient:
        ssl = sasl = None
        if self.security:
            try:
                ssl, sasl = security_from_properties(self.security)
            except (ValueError, OSError) as e:
                raise ConnectorError(f"kafka.security.protocol / kafka.ssl.* / kafka.sasl.* options: {e}") from None
        return ClusterClient(self.bootstrap, client_id=self.client_id, timeout=self.request_timeout,
                             request_timeout=self.request_timeout, ssl=ssl, sasl=sasl)


# =============================================================================================
# Offsets as Spark stores them: {"topic": {"0": 12, "1": 7}} with sorted keys
# =============================================================================================

def to_offset_dict(offsets: Mapping[tuple[str, int], int]) -> dict:
    out: dict = {}
    for (t, p) in sorted(offsets):
        out.setdefault(t, {})[str(p)] = int(offsets[(t, p)])
    return out


def from_offset_dict(d: Mapping | None) -> dict[tuple[str, int], int]:
    out = {}
    for t, parts in (d or {}).items():
        for p, off in parts.items():
            out[(t, int(p))] = int(off)
    return out


def limit_ranges(start: Mapping[tuple[str, int], int], end: Mapping[tuple[str, int], int],
                 max_records: int) -> dict[tuple[str, int], int]:
    """Cut ``end`` so that at most ``max_records`` offsets lie between ``start`` and it.

    Every partition gets a share proportional to its backlog (largest remainders first, ties
    by topic-partition order), so a busy partition cannot starve a quiet one.
    """
    sizes = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(sizes.values())
    if total <= max_records:
        return dict(end)
    shares = {}
    rests = []
    for tp in sorted(sizes):
        exact = sizes[tp] * max_records / total
        shares[tp] = int(exact)
        rests.append((-(exact - int(exact)), tp))
    left = max_records - sum(shares.values())
    for _, tp in sorted(rests):
        if left <= 0:
            break
        if shares[tp] < sizes[tp]:
            shares[tp] += 1
            left -= 1
    return {tp: (start[tp] + shares[tp] if tp in start else end[tp]) for tp in end}


def timestamp_of(ms: int) -> datetime:
    """Milliseconds since the epoch as an aware UTC datetime (exact, no float rounding)."""
    return _EPOCH + timedelta(milliseconds=ms)


# =============================================================================================
# Metadata and offsets
# =============================================================================================

async def topic_partitions(client: ClusterClient, topics: Iterable[str], *,
                           must_exist: bool = False) -> dict[str, int]:
    """{topic: partition count} for the topics that exist (all of them if ``must_exist``)."""
    topics = list(topics)
    await client.refresh_metadata(topics)
    out = {}
    missing = []
    for t in topics:
        md = client.topics.get(t)
        if md is None or not md.partitions:
            missing.append(t)
        else:
            out[t] = len(md.partitions)
    if missing and must_exist:
        raise ConnectorError(f"topic(s) {', '.join(missing)} do not exist")
    return out


async def list_offsets(client: ClusterClient, tps: Iterable[tuple[str, int]], which: int, *,
                       isolation_level: int = 0, timeout: float = 30.0) -> dict[tuple[str, int], int]:
    """{tp: offset} at ``which`` (EARLIEST: log start; LATEST: high watermark, or the last
    stable offset with ``isolation_level=1``).  Retries leader moves until ``timeout``."""
    pending = set(tps)
    out: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + timeout
    last_err: BaseException | None = None
    L = ListOffsetsRequest
    while pending:
        by_leader = defaultdict(list)
        for t, p in sorted(pending):
            by_leader[await client.leader(t, p)].append((t, p))

        async def ask(leader, items):
            nonlocal last_err
            if leader < 0:
                last_err = kafka_error(E.LEADER_NOT_AVAILABLE, f"{items[0][0]}-{items[0][1]}: ")
                return
            topics = defaultdict(list)
            for t, p in items:
                topics[t].append(L.ListOffsetsPartition(partition_index=p, timestamp=which,
                                                        current_leader_epoch=-1, max_num_offsets=1))
            req = L(replica_id=-1, isolation_level=isolation_level,
                    topics=[L.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()])
            try:
                conn = await client.connection(leader)
                version = conn.pick_version(L.API_KEY, min_version=2 if isolation_level else 1)
                resp = await conn.send(req, version=version)
            except KafkaConnectionError as e:
                last_err = e
                return
            for rt in resp.topics:
                for rp in rt.partitions:
                    tp = (rt.name, rp.partition_index)
                    if rp.error_code == 0:
                        out[tp] = rp.offset
                        pending.discard(tp)
                    elif is_retriable(rp.error_code):
                        last_err = kafka_error(rp.error_code, f"ListOffsets {tp[0]}-{tp[1]}: ")
                    else:
                        raise kafka_error(rp.error_code, f"ListOffsets {tp[0]}-{tp[1]}: ")

        await asyncio.gather(*(ask(ld, items) for ld, items in by_leader.items()))
        if pending:
            if time.monotonic() > deadline:
                raise ConnectorError(f"could not list offsets of {sorted(pending)}: {last_err}")
            await asyncio.sleep(0.1)
            try:
                await client.refresh_metadata(sorted({t for t, _ in pending}))
            except KafkaConnectionError as e:
                last_err = e
    return out


class SyncKafka:
    """Blocking access for the driver-side reader: one event loop and one ClusterClient, kept
    between calls and reopened after a failure.  Not picklable on purpose (see ``close``)."""

    def __init__(self, opts: ConnectorOptions):
        self.opts = opts
        self._loop = asyncio.new_event_loop()
        self._client: ClusterClient | None = None

    def run(self, fn):
        """Run ``fn(client)`` (a coroutine function) to completion on this object's loop."""
        async def go():
            if self._client is None:
                self._client = self.opts.client()
                await self._client.start()
            return await fn(self._client)
        try:
            return self._loop.run_until_complete(go())
        except (KafkaConnectionError, KafkaError, OSError):
            self._drop_client()
            raise

    def _drop_client(self):
        if self._client is not None:
            c, self._client = self._client, None
            try:
                self._loop.run_until_complete(c.close())
            except Exception:
                pass

    def partitions(self, topics, must_exist=False) -> dict[str, int]:
        return self.run(lambda c: topic_partitions(c, topics, must_exist=must_exist))

    def matching_topics(self, pattern: str) -> dict[str, int]:
        """{topic: partition count} for the non-internal topics that ``pattern`` matches whole."""
        rx = re.compile(pattern)

        async def go(c):
            await c.refresh_metadata(None)
            return {name: len(t.partitions) for name, t in c.topics.items()
                    if rx.fullmatch(name) and not getattr(t, "is_internal", False)
                    and t.partitions}
        return self.run(go)

    def offsets(self, tps, which: int) -> dict[tuple[str, int], int]:
        tps = list(tps)
        if not tps:
            return {}
        iso = self.opts.isolation_level if which == LATEST else 0
        return self.run(lambda c: list_offsets(c, tps, which, isolation_level=iso,
                                               timeout=self.opts.request_timeout))

    def close(self):
        self._drop_client()
        if not self._loop.is_closed():
            self._loop.close()


# =============================================================================================
# Reading one offset range
# =============================================================================================

class Chunk:
    """Records of one fetch, column by column (what Arrow wants), timestamps in ms."""
    __slots__ = ("keys", "values", "offsets", "timestamps", "ts_types", "headers")

    def __init__(self, with_headers: bool):
        self.keys: list = []
        self.values: list = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.ts_types: list[int] = []
        self.headers: list | None = [] if with_headers else None

    def __len__(self):
        return len(self.offsets)

    def rows(self, topic: str, partition: int) -> Iterator[tuple]:
        cols = [self.keys, self.values, self.offsets, self.timestamps, self.ts_types]
        if self.headers is None:
            for k, v, o, ts, tt in zip(*cols):
                yield (k, v, topic, partition, o, timestamp_of(ts), tt)
        else:
            for k, v, o, ts, tt, hs in zip(*cols, self.headers):
                yield (k, v, topic, partition, o, timestamp_of(ts), tt, hs)


def read_chunks(opts: ConnectorOptions, topic: str, partition: int, start: int, end: int,
                *, new_partition: bool = False) -> Iterator[Chunk]:
    """Yield the records of ``topic``-``partition`` for offsets in ``[start, end)``, one
    ``Chunk`` per fetch response (so memory stays bounded by the fetch size).

    Offsets with no record (control records, aborted transactions under read_committed,
    compacted-away records) are skipped.  ``new_partition`` marks a range whose start is only a
    guess (a partition discovered after the previous batch): records already deleted there are
    no data loss.
    """
    if end <= start:
        return
    loop = asyncio.new_event_loop()
    client = opts.client()
    try:
        loop.run_until_complete(client.start())
        reader = _RangeReader(opts, client, topic, partition, start, end, new_partition)
        while not reader.done:
            chunk = loop.run_until_complete(reader.next_chunk())
            if len(chunk):
                yield chunk
    finally:
        try:
            loop.run_until_complete(client.close())
        finally:
            loop.close()


def read_range(opts: ConnectorOptions, topic: str, partition: int, start: int, end: int,
               *, new_partition: bool = False) -> Iterator[tuple]:
    """Rows ``(key, value, topic, partition, offset, timestamp, timestampType[, headers])``
    of ``[start, end)``; ``timestamp`` is an aware UTC datetime."""
    for chunk in read_chunks(opts, topic, partition, start, end, new_partition=new_partition):
        yield from chunk.rows(topic, partition)


def read_range_arrow(opts: ConnectorOptions, topic: str, partition: int, start: int, end: int,
                     arrow_schema, *, new_partition: bool = False):
    """The same records as pyarrow RecordBatches with ``arrow_schema`` (built column-wise:
    several times faster through Spark than rows of Python objects)."""
    import pyarrow as pa
    ts_type = arrow_schema.field("timestamp").type
    hdr_type = arrow_schema.field("headers").type if opts.include_headers else None
    for c in read_chunks(opts, topic, partition, start, end, new_partition=new_partition):
        n = len(c)
        arrays = [pa.array(c.keys, pa.binary()), pa.array(c.values, pa.binary()),
                  pa.array([topic] * n, pa.string()), pa.array([partition] * n, pa.int32()),
                  pa.array(c.offsets, pa.int64()),
                  pa.array([t * 1000 for t in c.timestamps], pa.int64()).cast(ts_type),
                  pa.array(c.ts_types, pa.int32())]
        if hdr_type is not None:
            arrays.append(pa.array([[{"key": k, "value": v} for k, v in hs] for hs in c.headers],
                                   hdr_type))
        yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


class _RangeReader:
    def __init__(self, opts, client, topic, partition, start, end, new_partition):
        self.opts = opts
        self.client = client
        self.topic = topic
        self.partition = partition
        self.pos = start
        self.end = end
        self.new_partition = new_partition
        self.done = False
        self.deadline = time.monotonic() + opts.poll_timeout
        self.what = f"{topic}-{partition}"

    def _progress(self):
        self.deadline = time.monotonic() + self.opts.poll_timeout

    def _lost(self, message: str, resume_at: int | None):
        """Offsets ``pos..resume_at`` cannot be read: fail, or skip them."""
        if self.opts.fail_on_data_loss and not self.new_partition:
            raise DataLossError(
                f"{self.what}: {message}. Some data may have been lost because it is no longer "
                f"available in the broker (retention, DeleteRecords or an unclean leader "
                f"election). Set failOnDataLoss=false to skip it and go on.")
        log.warning("%s: %s; skipping to %s", self.what, message, resume_at)
        if resume_at is None or resume_at >= self.end:
            self.done = True
        else:
            self.pos = resume_at

    async def _bounds(self) -> tuple[int, int]:
        tp = (self.topic, self.partition)
        early = await list_offsets(self.client, [tp], EARLIEST, timeout=self.opts.request_timeout)
        late = await list_offsets(self.client, [tp], LATEST, timeout=self.opts.request_timeout)
        return early[tp], late[tp]

    async def next_chunk(self) -> Chunk:
        while True:
            if time.monotonic() > self.deadline:
                raise ConnectorError(
                    f"{self.what}: no progress reading offset {self.pos} (planned up to "
                    f"{self.end}) within kafkaConsumer.pollTimeoutMs="
                    f"{int(self.opts.poll_timeout * 1000)}")
            try:
                resp_part = await self._fetch()
            except (KafkaConnectionError, asyncio.TimeoutError) as e:
                log.info("%s: fetch failed (%s); retrying", self.what, e)
                await self._backoff()
                continue
            if resp_part is None:
                await self._backoff()
                continue
            code = resp_part.error_code
            if code == E.OFFSET_OUT_OF_RANGE:
                early, late = await self._bounds()
                if self.pos < early:
                    self._lost(f"offsets {self.pos}..{early - 1} were deleted (log start offset "
                               f"is now {early})", early)
                elif self.pos >= late:
                    self._lost(f"the log ends at {late}, before the planned end {self.end}", None)
                if self.done:
                    return Chunk(False)
                continue
            if code:
                if is_retriable(code) or code == E.NOT_LEADER_OR_FOLLOWER:
                    await self._backoff()
                    continue
                raise kafka_error(code, f"Fetch of {self.what} failed: ")
            chunk = self._decode(resp_part)
            if len(chunk) or self.done:
                self._progress()
                return chunk
            # Nothing usable: are the planned offsets still in the log?
            hw = resp_part.high_watermark
            stable = resp_part.last_stable_offset if self.opts.isolation_level == 1 else hw
            if stable is not None and 0 <= stable <= self.pos and hw < self.end \
                    and self.opts.isolation_level == 0:
                # The high watermark moved back below the range we planned (truncation).
                early, late = await self._bounds()
                if late <= self.pos:
                    self._lost(f"the log ends at {late}, before the planned end {self.end}", None)
                    if self.done:
                        return Chunk(False)
            await asyncio.sleep(0.05)

    async def _backoff(self):
        await asyncio.sleep(0.1)
        try:
            await self.client.refresh_metadata([self.topic])
        except KafkaConnectionError:
            pass

    async def _fetch(self):
        leader = await self.client.leader(self.topic, self.partition)
        if leader < 0:
            return None
        F = FetchRequest
        part = F.FetchPartition(partition=self.partition, current_leader_epoch=-1,
                                fetch_offset=self.pos, last_fetched_epoch=-1, log_start_offset=-1,
                                partition_max_bytes=self.opts.fetch_max_bytes)
        req = F(cluster_id=None, replica_id=-1, max_wait_ms=500, min_bytes=1,
                max_bytes=max(self.opts.fetch_max_bytes, 1 << 20),
                isolation_level=self.opts.isolation_level, session_id=0, session_epoch=-1,
                topics=[F.FetchTopic(topic=self.topic, partitions=[part])],
                forgotten_topics_data=[], rack_id="")
        conn = await self.client.connection(leader)
        resp = await conn.send(req, max_version=12, timeout=0.5 + conn.request_timeout)
        if getattr(resp, "error_code", 0):
            raise kafka_error(resp.error_code, f"Fetch of {self.what} failed: ")
        for t in resp.responses:
            for p in t.partitions:
                if t.topic == self.topic and p.partition_index == self.partition:
                    return p
        return None

    def _decode(self, p) -> Chunk:
        """The fetched records in ``[pos, end)``; advances ``pos``."""
        headers_on = self.opts.include_headers
        chunk = Chunk(headers_on)
        if not p.records:
            return chunk
        buf = memoryview(p.records)
        pos, end = self.pos, self.end
        aborted = None
        if self.opts.isolation_level == 1 and p.aborted_transactions:
            aborted = [(a.first_offset, a.producer_id) for a in p.aborted_transactions]
        recs, next_pos = rec.consumer_records(buf, pos, aborted, end)
        keys, values, offsets = chunk.keys, chunk.values, chunk.offsets
        stamps, types, headers = chunk.timestamps, chunk.ts_types, chunk.headers
        for r in recs:
            keys.append(None if r.key is None else bytes(r.key))
            values.append(None if r.value is None else bytes(r.value))
            offsets.append(r.offset)
            stamps.append(r.timestamp)
            types.append(r.timestamp_type)
            if headers_on:
                headers.append([(k, None if v is None else bytes(v)) for k, v in r.headers])
        self.pos = min(max(next_pos, pos), end)
        if self.pos >= end:
            self.done = True
        return chunk


# =============================================================================================
# Writing
# =============================================================================================

class _PendingBatch:
    __slots__ = ("records", "size")

    def __init__(self):
        self.records: list[tuple] = []
        self.size = 0


class RangeProducer:
    """Per write task: batches per partition, acks=all, idempotent when the broker allows.

    One produce request per leader at a time and one batch per partition per request, so the
    sequence numbers of a partition reach the broker in order; a retried batch keeps its
    sequence, so the broker drops a duplicate instead of appending it twice.
    """

    def __init__(self, opts: ConnectorOptions):
        self.opts = opts
        self.loop = asyncio.new_event_loop()
        self.client = opts.client()
        self.codec = rec._compression.codec_id(opts.compression)
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequences: dict[tuple[str, int], int] = defaultdict(int)
        self.partition_counts: dict[str, int] = {}
        self.sticky: dict[str, int] = {}
        self.pending: dict[tuple[str, int], _PendingBatch] = {}
        self.buffered = 0
        self.records_written = 0
        self.offsets: dict[tuple[str, int], tuple[int, int]] = {}   # tp -> (first, last)
        self.loop.run_until_complete(self._start())

    async def _start(self):
        await self.client.start()
        if self.opts.idempotence:
            await self._init_producer_id()

    async def _init_producer_id(self):
        conn = await self.client.any_connection()
        try:
            version = conn.pick_version(InitProducerIdRequest.API_KEY)
        except UnsupportedVersionError:
            log.warning("broker has no InitProducerId: writing without idempotence")
            return
        deadline = time.monotonic() + self.opts.request_timeout
        while True:
            resp = await conn.send(InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=60000,
                producer_id=-1, producer_epoch=-1), version=version)
            if resp.error_code == 0:
                self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
                return
            if not is_retriable(resp.error_code) or time.monotonic() > deadline:
                raise kafka_error(resp.error_code, "InitProducerId failed: ")
            await asyncio.sleep(0.1)

    # -- adding records -------------------------------------------------------------------------
    def _partitions_of(self, topic: str) -> int:
        n = self.partition_counts.get(topic)
        if n is None:
            n = self.loop.run_until_complete(self._discover(topic))
            self.partition_counts[topic] = n
        return n

    async def _discover(self, topic: str) -> int:
        deadline = time.monotonic() + self.opts.request_timeout
        while True:
            await self.client.refresh_metadata([topic], allow_auto_topic_creation=True)
            t = self.client.topics.get(topic)
            if t is not None and t.partitions:
                return len(t.partitions)
            if time.monotonic() > deadline:
                md = self.client.metadata
                code = next((x.error_code for x in md.topics if x.name == topic), 3) if md else 3
                raise kafka_error(code or 3, f"topic {topic!r} is not available for writing: ")
            await asyncio.sleep(0.2)

    def add(self, topic: str, key, value, headers=(), partition: int | None = None):
        n = self._partitions_of(topic)
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, n)
            else:
                partition = self.sticky.get(topic)
                if partition is None:
                    partition = self.sticky[topic] = random.randrange(n)
        elif not 0 <= partition < n:
            raise ConnectorError(f"partition {partition} is not in 0..{n - 1} for topic {topic}")
        tp = (topic, partition)
        b = self.pending.get(tp)
        if b is None:
            b = self.pending[tp] = _PendingBatch()
        size = 24 + (len(key) if key is not None else 0) + (len(value) if value is not None else 0) \
            + sum(len(k) + (len(v) if v is not None else 0) + 4 for k, v in headers)
        b.records.append((key, value, list(headers)))
        b.size += size
        self.buffered += size
        if b.size >= self.opts.batch_size:
            if key is None and self.sticky.get(topic) == partition:
                self.sticky.pop(topic, None)           # move the sticky partition on
            self.loop.run_until_complete(self._send(full_only=True))
        elif self.buffered >= self.opts.buffer_memory:
            self.loop.run_until_complete(self._send(full_only=False))

    def flush(self):
        while self.pending:
            self.loop.run_until_complete(self._send(full_only=False))

    def close(self):
        try:
            self.loop.run_until_complete(self.client.close())
        finally:
            self.loop.close()

    # -- sending --------------------------------------------------------------------------------
    async def _send(self, full_only: bool):
        ready = [tp for tp, b in self.pending.items()
                 if not full_only or b.size >= self.opts.batch_size]
        if not ready:
            return
        batches = {}
        for tp in ready:
            b = self.pending.pop(tp)
            self.buffered -= b.size
            seq = -1
            if self.producer_id >= 0:
                seq = self.sequences[tp]
                self.sequences[tp] = (seq + len(b.records)) & 0x7FFFFFFF
            data = bytes(rec.build_batch(b.records, compression=self.codec,
                                         producer_id=self.producer_id,
                                         producer_epoch=self.producer_epoch, base_sequence=seq))
            batches[tp] = (data, len(b.records))
        await self._deliver(batches)

    async def _deliver(self, batches: dict[tuple[str, int], tuple[bytes, int]]):
        attempt = 0
        todo = dict(batches)
        while todo:
            by_leader = defaultdict(dict)
            for tp, item in todo.items():
                by_leader[await self.client.leader(*tp)][tp] = item
            results = await asyncio.gather(*(self._produce(ld, items)
                                             for ld, items in by_leader.items()))
            failed = {}
            last_error = None
            for done, errors in results:
                for tp, (base, count) in done.items():
                    todo.pop(tp, None)
                    self.records_written += count
                    if base >= 0:
                        first = self.offsets.get(tp, (base, 0))[0]
                        self.offsets[tp] = (first, base + count - 1)
                for tp, err in errors.items():
                    failed[tp] = err
                    last_error = err
            if not failed:
                return
            attempt += 1
            if attempt > self.opts.retries:
                raise ConnectorError(f"could not write to {sorted(failed)} after "
                                     f"{self.opts.retries} retries: {last_error}")
            await asyncio.sleep(self.opts.retry_backoff)
            try:
                await self.client.refresh_metadata(sorted({t for t, _ in failed}))
            except KafkaConnectionError:
                pass

    async def _produce(self, leader, items):
        """-> ({tp: (base_offset, count)} delivered, {tp: error} to retry); raises if fatal."""
        if leader < 0:
            return {}, {tp: kafka_error(E.LEADER_NOT_AVAILABLE) for tp in items}
        P = ProduceRequest
        topics = defaultdict(list)
        for (t, p), (data, _) in items.items():
            topics[t].append(P.PartitionProduceData(index=p, records=data))
        req = P(transactional_id=None, acks=self.opts.acks,
                timeout_ms=int(self.opts.request_timeout * 1000),
                topic_data=[P.TopicProduceData(name=t, partition_data=ps) for t, ps in topics.items()])
        try:
            conn = await self.client.connection(leader)
            version = conn.pick_version(P.API_KEY, min_version=3, max_version=12)
            resp = await conn.send(req, version=version)
        except KafkaConnectionError as e:
            return {}, {tp: e for tp in items}
        if resp is None:                               # acks=0
            return {tp: (-1, n) for tp, (_, n) in items.items()}, {}
        done, retry = {}, {}
        for rt in resp.responses:
            for rp in rt.partition_responses:
                tp = (rt.name, rp.index)
                if tp not in items:
                    continue
                code = rp.error_code
                if code == 0 or code == E.DUPLICATE_SEQUENCE_NUMBER:
                    done[tp] = (rp.base_offset, items[tp][1])
                elif is_retriable(code):
                    retry[tp] = kafka_error(code, f"produce to {tp[0]}-{tp[1]}: ")
                else:
                    msg = getattr(rp, "error_message", None)
                    raise kafka_error(code, f"produce to {tp[0]}-{tp[1]} failed"
                                            f"{': ' + msg if msg else ''}: ")
        for tp in items:
            if tp not in done and tp not in retry:
                retry[tp] = ConnectorError(f"no answer for {tp[0]}-{tp[1]}")
        return done, retry

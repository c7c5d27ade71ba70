"""The broker and topic configuration table: Kafka 3.9 names, types, defaults.

Facts only (names, types, defaults, validators, update modes, synonyms), taken from
``kafka-facts/defaults.md``; the one-line docs are our own words.  ``broker/config.py``
holds the behaviour (parsing, layering, describe output).

Update modes (Kafka's "Update Mode" column):

* ``read-only``   - only from server.properties / ``--override``; needs a restart.
* ``per-broker``  - may be changed dynamically, but only for one broker id.
* ``cluster-wide``- may be changed dynamically per broker or as the cluster default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
DOUBLE_MAX = 1.7976931348623157e308

# DescribeConfigs config type ids.
CONFIG_TYPE_IDS = {
    "boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5,
    "double": 6, "list": 7, "class": 8, "password": 9,
}

READ_ONLY = "read-only"
PER_BROKER = "per-broker"
CLUSTER_WIDE = "cluster-wide"


class Validator:
    """A check on a parsed value; ``check`` returns an error phrase or None."""

    def __init__(self, fn: Callable[[Any], str | None], text: str):
        self._fn = fn
        self.text = text

    def check(self, value: Any) -> str | None:
        if value is None:
            return None
        return self._fn(value)

    def __repr__(self) -> str:
        return self.text


def at_least(lo: float) -> Validator:
    return Validator(lambda v: None if v >= lo else f"Value must be at least {lo}", f"[{lo},...]")


def between(lo: float, hi: float) -> Validator:
    def f(v):
        if v < lo:
            return f"Value must be at least {lo}"
        if v > hi:
            return f"Value must be no more than {hi}"
        return None
    return Validator(f, f"[{lo},...,{hi}]")


def one_of(*allowed: str, case_insensitive: bool = False) -> Validator:
    norm = {a.lower() for a in allowed} if case_insensitive else set(allowed)

    def f(v):
        key = v.lower() if case_insensitive else v
        return None if key in norm else "String must be one of: " + ", ".join(allowed)
    return Validator(f, "[" + ", ".join(allowed) + "]")


def list_of(*allowed: str) -> Validator:
    def f(v):
        for item in v:
            if item not in allowed:
                return "Invalid value " + item + " for configuration: String must be one of: " + ", ".join(allowed)
        return None
    return Validator(f, "[" + ", ".join(allowed) + "]")


def gzip_level() -> Validator:
    return Validator(
        lambda v: None if v == -1 or 1 <= v <= 9 else "Value must be between 1 and 9, or -1 for the default",
        "[1,...,9] or -1",
    )


_THROTTLED = re.compile(r"^(\*|\s*\d+\s*:\s*\d+\s*)$")


def throttled_replicas() -> Validator:
    def f(v):
        if v == ["*"] or not v:
            return None
        for item in v:
            if item == "*" or not _THROTTLED.match(item):
                return ("must be the literal '*' or a list of replicas in the following format: "
                        "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
        return None
    return Validator(f, "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str
    default: Any            # already-parsed default; None = no default (null)
    doc: str
    importance: str = "medium"
    mode: str = READ_ONLY
    validator: Validator | None = None
    internal: bool = False

    @property
    def type_id(self) -> int:
        return CONFIG_TYPE_IDS[self.type]

    @property
    def sensitive(self) -> bool:
        return self.type == "password"


def _k(name, type_, default, doc, importance="medium", mode=READ_ONLY, validator=None, internal=False):
    return ConfigKey(name, type_, default, doc, importance, mode, validator, internal)


_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP = ("compact", "delete")
CW, PB, H, L = CLUSTER_WIDE, PER_BROKER, "high", "low"

BROKER_KEYS: list[ConfigKey] = [
    # Identity, ZooKeeper, storage paths
    _k("broker.id", "int", -1, "This broker's id; -1 takes it from meta.properties or generates one.", H),
    _k("broker.id.generation.enable", "boolean", True, "Allow generating a broker id when none is configured."),
    _k("reserved.broker.max.id", "int", 1000, "Generated broker ids start above this number.", validator=at_least(0)),
    _k("broker.rack", "string", None, "Rack label used for rack-aware replica placement."),
    # KRaft's keys: a combined node (process.roles=broker,controller) runs on the embedded metadata
    # store, after kafka-storage.sh format (docs/config.md, "KRaft configuration files")
    _k("process.roles", "list", [], "KRaft roles of this node; broker,controller (a combined node on the embedded "
       "metadata store) is the one Odradek runs; empty: ZooKeeper, or the embedded store without formatting.", H),
    _k("node.id", "int", -1, "The node id when process.roles is set (the same as broker.id).", H),
    _k("controller.quorum.voters", "list", [], "KRaft voters, id@host:port; only this node here.", H),
    _k("controller.quorum.bootstrap.servers", "list", [], "KRaft controllers to bootstrap from, host:port.", H),
    _k("controller.listener.names", "list", None, "Listeners of the KRaft controller; not opened here (the embedded "
       "store needs no controller connections).", H),
    _k("metadata.log.dir", "string", None, "Directory of the cluster metadata (KRaft mode); unset: the first of "
       "log.dirs.", H),
    _k("controller.quorum.election.timeout.ms", "int", 1000, "KRaft election timeout (not used here).", H),
    _k("controller.quorum.fetch.timeout.ms", "int", 2000, "KRaft fetch timeout (not used here).", H),
    _k("controller.quorum.election.backoff.max.ms", "int", 1000, "KRaft election back-off (not used here).", H),
    _k("controller.quorum.append.linger.ms", "int", 25, "KRaft append linger (not used here).", L),
    _k("controller.quorum.request.timeout.ms", "int", 2000, "KRaft request timeout (not used here).", L),
    _k("controller.quorum.retry.backoff.ms", "int", 20, "KRaft retry back-off (not used here).", L),
    _k("zookeeper.connect", "string", None, "ZooKeeper connect string host:port[,host:port][/chroot]; unset = embedded store.", H),
    _k("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout.", H),
    _k("zookeeper.connection.timeout.ms", "int", None, "Wait this long to connect to ZooKeeper; unset = session timeout.", H),
    _k("zookeeper.max.in.flight.requests", "int", 10, "Pipelined ZooKeeper requests per client.", H, validator=at_least(1)),
    # ZooKeeper over TLS (KIP-515); the client certificate can own the znodes (zookeeper.set.acl)
    _k("zookeeper.ssl.client.enable", "boolean", False, "Connect to ZooKeeper over TLS.", L),
    _k("zookeeper.clientCnxnSocket", "string", None, "ZooKeeper client socket; org.apache.zookeeper.ClientCnxnSocketNetty for TLS.", L),
    _k("zookeeper.ssl.keystore.location", "string", None, "Client certificate and key for ZooKeeper's TLS.", L),
    _k("zookeeper.ssl.keystore.password", "password", None, "Password of the ZooKeeper TLS key store.", L),
    _k("zookeeper.ssl.keystore.type", "string", None, "PEM, PKCS12, JKS or JCEKS (by default from the file).", L),
    _k("zookeeper.ssl.truststore.location", "string", None, "CAs that sign ZooKeeper's certificate.", L),
    _k("zookeeper.ssl.truststore.password", "password", None, "Password of the ZooKeeper TLS trust store.", L),
    _k("zookeeper.ssl.truststore.type", "string", None, "PEM, PKCS12, JKS or JCEKS (by default from the file).", L),
    _k("zookeeper.ssl.protocol", "string", "TLSv1.2", "The TLS version for ZooKeeper when zookeeper.ssl.enabled.protocols is unset.", L),
    _k("zookeeper.ssl.enabled.protocols", "list", None, "TLS versions allowed with ZooKeeper (unset: zookeeper.ssl.protocol alone).", L),
    _k("zookeeper.ssl.cipher.suites", "list", None, "Cipher suites allowed with ZooKeeper (OpenSSL names; unset: OpenSSL's defaults).", L),
    _k("zookeeper.ssl.endpoint.identification.algorithm", "string", "HTTPS", "HTTPS: check ZooKeeper's host name; empty: do not.", L),
    _k("zookeeper.ssl.crl.enable", "boolean", False, "Certificate revocation lists for ZooKeeper's TLS (true is refused).", L),
    _k("zookeeper.ssl.ocsp.enable", "boolean", False, "OCSP for ZooKeeper's TLS (true is refused).", L),
    _k("zookeeper.set.acl", "boolean", False, "Create znodes with secure ACLs (owner all, others read; "
       "credentials owner only); needs a SASL login to ZooKeeper (KAFKA_OPTS' JAAS file, Client section)."),
    _k("log.dir", "string", "/tmp/kafka-logs", "Single log directory, used when log.dirs is unset.", H),
    _k("log.dirs", "string", None, "Comma-separated log directories.", H),
    _k("num.recovery.threads.per.data.dir", "int", 1, "Threads per log dir for recovery and shutdown flush.", H, CW, at_least(1)),
    _k("inter.broker.protocol.version", "string", "3.9-IV0", "Protocol/metadata version spoken between brokers."),
    _k("delete.topic.enable", "boolean", True, "Whether DeleteTopics actually deletes topics.", H),
    # Network
    _k("listeners", "string", "PLAINTEXT://:9092", "Comma-separated NAME://host:port listeners to bind; empty host = all interfaces.", H, PB),
    _k("advertised.listeners", "string", None, "Listeners published to clients; unset = listeners.", H, PB),
    _k("listener.security.protocol.map", "string",
       "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
       "Listener name to security protocol mapping.", L, PB),
    _k("inter.broker.listener.name", "string", None, "Listener used between brokers."),
    _k("security.inter.broker.protocol", "string", "PLAINTEXT", "Security protocol between brokers when no listener name is set.",
       validator=one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    _k("control.plane.listener.name", "string", None, "Dedicated listener for controller requests."),
    _k("num.network.threads", "int", 3, "Network threads (kept for compatibility; one event loop here).", H, CW, at_least(1)),
    _k("num.io.threads", "int", 8, "Request handler threads (kept for compatibility).", H, CW, at_least(1)),
    _k("background.threads", "int", 10, "Background task threads.", H, CW, at_least(1)),
    _k("queued.max.requests", "int", 500, "Requests queued before network reads pause.", H, validator=at_least(1)),
    _k("queued.max.request.bytes", "long", -1, "Bytes of queued requests before reads pause; -1 = unbounded."),
    _k("socket.send.buffer.bytes", "int", 102400, "SO_SNDBUF for broker sockets; -1 = OS default.", H),
    _k("socket.receive.buffer.bytes", "int", 102400, "SO_RCVBUF for broker sockets; -1 = OS default.", H),
    _k("socket.request.max.bytes", "int", 104857600, "Largest request frame accepted.", H, validator=at_least(1)),
    _k("max.request.partition.size.limit", "int", 2000,
       "Most partitions one DescribeTopicPartitions answer carries (the request may ask for fewer).",
       validator=at_least(1)),
    _k("socket.listen.backlog.size", "int", 50, "listen() backlog.", validator=at_least(1)),
    _k("connections.max.idle.ms", "long", 600000, "Close connections idle for this long."),
    _k("connections.max.reauth.ms", "long", 0,
       "Longest SASL session before the client must re-authenticate (KIP-368); 0 = no limit."),
    _k("max.connections", "int", INT_MAX, "Connection limit for the broker.", mode=CW, validator=at_least(0)),
    _k("max.connections.per.ip", "int", INT_MAX, "Connection limit per client IP.", mode=CW, validator=at_least(0)),
    _k("max.connections.per.ip.overrides", "string", "", "Per-IP or per-host connection limits, host:count,...", mode=CW),
    _k("max.connection.creation.rate", "int", INT_MAX, "Accepted new connections per second.", mode=CW, validator=at_least(0)),
    _k("connection.failed.authentication.delay.ms", "int", 100, "Delay before closing a connection that failed auth.", L, validator=at_least(0)),
    _k("request.timeout.ms", "int", 30000, "Client-facing request timeout.", validator=at_least(0)),
    _k("fetch.max.bytes", "int", 57671680, "Broker-side cap on a Fetch response size.", validator=at_least(1024)),
    _k("max.incremental.fetch.session.cache.slots", "int", 1000, "Incremental fetch sessions kept.", validator=at_least(0)),
    _k("authorizer.class.name", "string", "", "Authorizer implementation; empty = no authorization.", L),
    # Topic creation and replication
    _k("num.partitions", "int", 1, "Partitions of auto-created topics and CreateTopics with -1.", validator=at_least(1)),
    _k("default.replication.factor", "int", 1, "Replication factor of auto-created topics and CreateTopics with -1."),
    _k("auto.create.topics.enable", "boolean", True, "Create unknown topics on Metadata requests.", H),
    _k("min.insync.replicas", "int", 1, "Minimum ISR size for acks=all produce.", H, CW, at_least(1)),
    _k("unclean.leader.election.enable", "boolean", False, "Allow out-of-sync replicas to become leader.", H, CW),
    _k("replica.lag.time.max.ms", "long", 30000, "Followers not caught up within this time leave the ISR.", H),
    _k("replica.socket.timeout.ms", "int", 30000, "Socket timeout of replica fetchers.", H),
    _k("replica.socket.receive.buffer.bytes", "int", 65536, "SO_RCVBUF of replica fetchers.", H),
    _k("replica.fetch.max.bytes", "int", 1048576, "Replica fetch bytes per partition.", H, validator=at_least(0)),
    _k("replica.fetch.response.max.bytes", "int", 10485760, "Replica fetch bytes per response.", validator=at_least(0)),
    _k("replica.fetch.wait.max.ms", "int", 500, "Replica fetch long-poll wait.", H),
    _k("replica.fetch.min.bytes", "int", 1, "Replica fetch minimum bytes.", H),
    _k("replica.fetch.backoff.ms", "int", 1000, "Sleep after a replica fetch error.", validator=at_least(0)),
    _k("num.replica.fetchers", "int", 1, "Replica fetcher tasks per source broker.", H, CW),
    _k("num.replica.alter.log.dirs.threads", "int", None,
       "Kafka's threads for moves between log dirs (default: one per dir); accepted, each move is a task here.",
       H, validator=at_least(1)),
    # Dynamic-only broker keys (Kafka's DynamicConfig.Broker): set by kafka-reassign-partitions.sh
    # --throttle; enforced by broker/quota.py (leader answers, replica fetchers).
    _k("leader.replication.throttled.rate", "long", LONG_MAX,
       "Bytes/s cap on leader-side replication of throttled replicas.", mode=PB,
       validator=at_least(0)),
    _k("follower.replication.throttled.rate", "long", LONG_MAX,
       "Bytes/s cap on follower-side replication of throttled replicas.", mode=PB,
       validator=at_least(0)),
    _k("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX,
       "Bytes/s cap on copying replicas between this broker's log dirs (broker/log_dir_mover.py).",
       mode=PB, validator=at_least(0)),
    # Client quotas (broker/client_quota.py): the sampled rate window of Kafka's ClientQuotaManager.
    _k("replication.quota.window.num", "int", 11, "Samples kept for replication throttle rates.", L,
       validator=at_least(1)),
    _k("replication.quota.window.size.seconds", "int", 1, "Time span of each replication throttle sample.", L,
       validator=at_least(1)),
    _k("alter.log.dirs.replication.quota.window.num", "int", 11,
       "Kafka's samples of the log-dir move throttle; accepted, the mover here paces each copy "
       "directly (broker/log_dir_mover.py).", L, validator=at_least(1)),
    _k("alter.log.dirs.replication.quota.window.size.seconds", "int", 1,
       "Kafka's sample span of the log-dir move throttle; accepted, not used (as above).", L,
       validator=at_least(1)),
    _k("quota.window.num", "int", 11, "Samples kept for client quota rates.", L, validator=at_least(1)),
    _k("quota.window.size.seconds", "int", 1, "Time span of each client quota sample.", L, validator=at_least(1)),
    # controller_mutation_rate quotas (broker/client_quota.py): the token bucket holds up to
    # num x size x quota mutations
    _k("controller.quota.window.num", "int", 11, "Samples of controller mutation quotas (the bucket's burst).", L,
       validator=at_least(1)),
    _k("controller.quota.window.size.seconds", "int", 1, "Time span of each controller mutation quota sample.", L,
       validator=at_least(1)),
    _k("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "How often high watermarks are checkpointed.", H),
    _k("replica.selector.class", "string", None, "Replica selector for follower fetching; unset = leader only."),
    _k("fetch.purgatory.purge.interval.requests", "int", 1000, "Fetch purgatory purge interval.", validator=None),
    _k("producer.purgatory.purge.interval.requests", "int", 1000, "Produce purgatory purge interval."),
    _k("delete.records.purgatory.purge.interval.requests", "int", 1, "DeleteRecords purgatory purge interval."),
    _k("controller.socket.timeout.ms", "int", 30000, "Controller-to-broker socket timeout."),
    _k("controlled.shutdown.enable", "boolean", True, "Move leadership away before shutting down."),
    _k("controlled.shutdown.max.retries", "int", 3, "Controlled shutdown attempts."),
    _k("controlled.shutdown.retry.backoff.ms", "long", 5000, "Sleep between controlled shutdown attempts."),
    _k("auto.leader.rebalance.enable", "boolean", True, "Periodically move leadership back to preferred replicas.", H),
    _k("leader.imbalance.per.broker.percentage", "int", 10, "Imbalance percent that triggers a rebalance.", H),
    _k("leader.imbalance.check.interval.seconds", "long", 300, "How often leader imbalance is checked.", H, validator=at_least(1)),
    # Log segments, retention, flushing
    _k("message.max.bytes", "int", 1048588, "Largest record batch accepted, after compression.", H, CW, at_least(0)),
    _k("log.segment.bytes", "int", 1073741824, "Segment file size that triggers a roll.", H, CW, at_least(14)),
    _k("log.roll.ms", "long", None, "Segment age that triggers a roll; unset = log.roll.hours.", H, CW),
    _k("log.roll.hours", "int", 168, "Segment age in hours that triggers a roll.", H, validator=at_least(1)),
    _k("log.roll.jitter.ms", "long", None, "Random jitter subtracted from the roll time; unset = log.roll.jitter.hours.", H, CW),
    _k("log.roll.jitter.hours", "int", 0, "Roll jitter in hours.", H, validator=at_least(0)),
    _k("log.retention.ms", "long", None, "Keep data this long; unset = minutes/hours; negative = forever.", H, CW),
    _k("log.retention.minutes", "int", None, "Retention in minutes; unset = log.retention.hours.", H),
    _k("log.retention.hours", "int", 168, "Retention in hours.", H),
    _k("log.retention.bytes", "long", -1, "Size per partition before old segments are deleted; -1 = unlimited.", H, CW),
    _k("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", validator=at_least(1)),
    _k("log.initial.task.delay.ms", "long", 30000, "How long after start-up the first retention pass runs.",
       validator=at_least(0), internal=True),
    _k("log.cleanup.policy", "list", ["delete"], "delete and/or compact.", mode=CW, validator=list_of(*_CLEANUP)),
    _k("log.index.size.max.bytes", "int", 10485760, "Pre-allocated size of each index file.", mode=CW, validator=at_least(4)),
    _k("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.", mode=CW, validator=at_least(0)),
    _k("log.segment.delete.delay.ms", "long", 60000, "Delay before deleted segment files are removed.", H, CW, at_least(0)),
    _k("log.preallocate", "boolean", False, "Pre-allocate segment files.", mode=CW),
    _k("log.flush.interval.messages", "long", LONG_MAX, "fsync after this many messages.", H, CW, at_least(1)),
    _k("log.flush.interval.ms", "long", None, "fsync after this long; unset = log.flush.scheduler.interval.ms.", H, CW),
    _k("log.flush.scheduler.interval.ms", "long", LONG_MAX, "How often the flusher checks logs.", H),
    _k("log.flush.offset.checkpoint.interval.ms", "int", 60000, "How often recovery points are checkpointed.", H, validator=at_least(0)),
    _k("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "How often log start offsets are checkpointed.", H, validator=at_least(0)),
    _k("log.message.format.version", "string", "3.0-IV1", "Deprecated; ignored with inter.broker.protocol.version >= 3.0."),
    _k("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime.", mode=CW, validator=one_of(*_TIMESTAMP_TYPES)),
    _k("log.message.timestamp.difference.max.ms", "long", LONG_MAX, "Deprecated; max timestamp skew.", mode=CW, validator=at_least(0)),
    _k("log.message.timestamp.before.max.ms", "long", LONG_MAX, "How far in the past a CreateTime may be.", mode=CW, validator=at_least(0)),
    _k("log.message.timestamp.after.max.ms", "long", LONG_MAX, "How far in the future a CreateTime may be.", mode=CW, validator=at_least(0)),
    _k("log.message.downconversion.enable", "boolean", True, "Down-convert batches for old consumers.", L, CW),
    _k("compression.type", "string", "producer", "Codec of stored batches; producer keeps the producer's.", H, CW, one_of(*_COMPRESSION)),
    _k("compression.gzip.level", "int", -1, "gzip level when the broker compresses.", mode=CW, validator=gzip_level()),
    _k("compression.lz4.level", "int", 9, "lz4 level when the broker compresses.", mode=CW, validator=between(1, 17)),
    _k("compression.zstd.level", "int", 3, "zstd level when the broker compresses.", mode=CW, validator=between(-131072, 22)),
    _k("log.local.retention.ms", "long", -2, "Local retention with tiered storage; -2 = log.retention.ms.", mode=CW, validator=at_least(-2)),
    _k("log.local.retention.bytes", "long", -2, "Local size limit with tiered storage; -2 = log.retention.bytes.", mode=CW, validator=at_least(-2)),
    # Log cleaner
    _k("log.cleaner.enable", "boolean", True, "Run the log cleaner (needed for compacted topics)."),
    _k("log.cleaner.threads", "int", 1, "Cleaner threads.", mode=CW, validator=at_least(0)),
    _k("log.cleaner.dedupe.buffer.size", "long", 134217728, "Memory for cleaner deduplication, all threads.", mode=CW),
    _k("log.cleaner.io.buffer.size", "int", 524288, "Cleaner I/O buffer memory, all threads.", mode=CW, validator=at_least(0)),
    _k("log.cleaner.io.buffer.load.factor", "double", 0.9, "Cleaner dedupe buffer load factor.", mode=CW),
    _k("log.cleaner.io.max.bytes.per.second", "double", DOUBLE_MAX, "Cleaner I/O throttle.", mode=CW),
    _k("log.cleaner.backoff.ms", "long", 15000, "Cleaner sleep when nothing is cleanable.", mode=CW, validator=at_least(0)),
    _k("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty ratio that makes a log eligible for cleaning.", mode=CW, validator=between(0, 1)),
    _k("log.cleaner.delete.retention.ms", "long", 86400000, "How long tombstones survive cleaning.", mode=CW, validator=at_least(0)),
    _k("log.cleaner.min.compaction.lag.ms", "long", 0, "Minimum age before a record may be compacted.", mode=CW, validator=at_least(0)),
    _k("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Maximum time a record stays uncompacted.", mode=CW, validator=at_least(1)),
    # Groups and offsets
    _k("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a member may ask for."),
    _k("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout a member may ask for."),
    _k("group.initial.rebalance.delay.ms", "int", 3000, "Wait before the first rebalance of an empty group."),
    _k("group.max.size", "int", INT_MAX, "Members per consumer group.", validator=at_least(1)),
    _k("group.coordinator.threads", "int", 1,
       "Kafka's group coordinator threads; accepted, the coordinator runs on the event loop here.",
       validator=at_least(1)),
    _k("group.coordinator.append.linger.ms", "int", 10,
       "Kafka's batching of coordinator writes; accepted, each write is appended at once here.", L,
       validator=at_least(0)),
    _k("group.coordinator.rebalance.protocols", "list", ["classic", "consumer", "streams"],
       "Enabled rebalance protocols: classic (JoinGroup/SyncGroup), consumer (ConsumerGroupHeartbeat, KIP-848) "
       "and streams (StreamsGroupHeartbeat, KIP-1071; Kafka 4.2's default list).",
       validator=list_of("classic", "consumer", "share", "streams")),
    _k("group.consumer.session.timeout.ms", "int", 45000, "Session timeout of consumer-protocol members.", validator=at_least(1)),
    _k("group.consumer.min.session.timeout.ms", "int", 45000, "Smallest consumer-protocol session timeout.", validator=at_least(1)),
    _k("group.consumer.max.session.timeout.ms", "int", 60000, "Largest consumer-protocol session timeout.", validator=at_least(1)),
    _k("group.consumer.heartbeat.interval.ms", "int", 5000, "Heartbeat interval given to consumer-protocol members.", validator=at_least(1)),
    _k("group.consumer.min.heartbeat.interval.ms", "int", 5000, "Smallest consumer-protocol heartbeat interval.", validator=at_least(1)),
    _k("group.consumer.max.heartbeat.interval.ms", "int", 15000, "Largest consumer-protocol heartbeat interval.", validator=at_least(1)),
    _k("group.consumer.max.size", "int", INT_MAX, "Members per consumer-protocol group.", validator=at_least(1)),
    _k("group.consumer.migration.policy", "string", "bidirectional",
       "Online conversion of non-empty groups between the classic and the consumer protocol: bidirectional, "
       "upgrade (classic to consumer only), downgrade (consumer to classic only) or disabled (Kafka 4.0's "
       "default is bidirectional; empty groups always convert).",
       validator=one_of("disabled", "upgrade", "downgrade", "bidirectional", case_insensitive=True)),
    _k("group.consumer.assignors", "list",
       ["org.apache.kafka.coordinator.group.assignor.UniformAssignor",
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor"],
       "Server-side assignors (class or short name: uniform, range); the first is the default."),
    # Streams groups (KIP-1071), Kafka 4.2's names and defaults
    _k("group.streams.session.timeout.ms", "int", 45000, "Session timeout of streams group members.",
       validator=at_least(1)),
    _k("group.streams.min.session.timeout.ms", "int", 45000, "Smallest streams group session timeout.",
       validator=at_least(1)),
    _k("group.streams.max.session.timeout.ms", "int", 60000, "Largest streams group session timeout.",
       validator=at_least(1)),
    _k("group.streams.heartbeat.interval.ms", "int", 5000, "Heartbeat interval given to streams group members.",
       validator=at_least(1)),
    _k("group.streams.min.heartbeat.interval.ms", "int", 5000, "Smallest streams group heartbeat interval.",
       validator=at_least(1)),
    _k("group.streams.max.heartbeat.interval.ms", "int", 15000, "Largest streams group heartbeat interval.",
       validator=at_least(1)),
    _k("group.streams.max.size", "int", INT_MAX, "Members per streams group.", validator=at_least(1)),
    _k("group.streams.num.standby.replicas", "int", 0, "Standby replicas of each stateful task.",
       validator=at_least(0)),
    _k("group.streams.max.standby.replicas", "int", 2, "Largest streams.num.standby.replicas a group may set.",
       validator=at_least(0)),
    _k("group.streams.initial.rebalance.delay.ms", "int", 3000,
       "How long a new streams group waits for more members before its first task assignment.",
       validator=at_least(0)),
    # Share groups (KIP-932)
    _k("group.share.enable", "boolean", True,
       "Serve share groups (Kafka's internal switch beside the share.version feature; Kafka 4.2 enables "
       "them by default). Not yet served in a ZooKeeper cluster."),
    _k("group.share.session.timeout.ms", "int", 45000, "Session timeout of share group members.", validator=at_least(1)),
    _k("group.share.min.session.timeout.ms", "int", 45000, "Smallest share group session timeout.", validator=at_least(1)),
    _k("group.share.max.session.timeout.ms", "int", 60000, "Largest share group session timeout.", validator=at_least(1)),
    _k("group.share.heartbeat.interval.ms", "int", 5000, "Heartbeat interval given to share group members.", validator=at_least(1)),
    _k("group.share.min.heartbeat.interval.ms", "int", 5000, "Smallest share group heartbeat interval.", validator=at_least(1)),
    _k("group.share.max.heartbeat.interval.ms", "int", 15000, "Largest share group heartbeat interval.", validator=at_least(1)),
    _k("group.share.max.size", "int", 200, "Members per share group.", validator=between(1, 1000)),
    _k("group.share.record.lock.duration.ms", "int", 30000,
       "How long a share group member holds the records it acquired.", validator=at_least(1000)),
    _k("group.share.min.record.lock.duration.ms", "int", 15000, "Smallest share group record lock duration.",
       validator=at_least(1000)),
    _k("group.share.max.record.lock.duration.ms", "int", 60000, "Largest share group record lock duration.",
       validator=at_least(1000)),
    _k("group.share.delivery.count.limit", "int", 5,
       "Deliveries of a record to share group members before it is archived.", validator=between(2, 10)),
    _k("group.share.partition.max.record.locks", "int", 2000,
       "Records of a share partition that may be in flight at once.", validator=at_least(100)),
    _k("group.share.max.share.sessions", "int", 2000, "Share sessions a broker keeps.", validator=at_least(1)),
    _k("share.coordinator.state.topic.num.partitions", "int", 50, "Partitions of __share_group_state.", H,
       validator=at_least(1)),
    _k("share.coordinator.state.topic.replication.factor", "short", 3, "Replication factor of __share_group_state.", H,
       validator=at_least(1)),
    _k("share.coordinator.state.topic.segment.bytes", "int", 104857600, "Segment size of __share_group_state.", H,
       validator=at_least(1)),
    _k("share.coordinator.state.topic.min.isr", "short", 2, "min.insync.replicas of __share_group_state.", H,
       validator=at_least(1)),
    _k("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", H, validator=at_least(1)),
    _k("offsets.topic.replication.factor", "short", 3, "Replication factor of __consumer_offsets.", H, validator=at_least(1)),
    _k("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets.", H, validator=at_least(1)),
    _k("offsets.topic.compression.codec", "int", 0, "Codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd) of the "
       "batches the group coordinator writes to __consumer_offsets.", H, validator=between(0, 4)),
    _k("offsets.retention.minutes", "int", 10080, "Committed offsets of empty groups expire after this.", H, validator=at_least(1)),
    _k("offsets.retention.check.interval.ms", "long", 600000, "How often expired offsets are removed.", H, validator=at_least(1)),
    _k("offsets.commit.timeout.ms", "int", 5000, "Offset commit wait for replication.", H, validator=at_least(1)),
    _k("offsets.commit.required.acks", "short", -1, "Deprecated; acks for offset commits.", H),
    _k("offsets.load.buffer.size", "int", 5242880, "Read size when loading offsets.", H, validator=at_least(1)),
    _k("offset.metadata.max.bytes", "int", 4096, "Largest commit metadata string.", H),
    # Transactions and idempotence
    _k("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", H, validator=at_least(1)),
    _k("transaction.state.log.replication.factor", "short", 3, "Replication factor of __transaction_state.", H, validator=at_least(1)),
    _k("transaction.state.log.min.isr", "int", 2, "min.insync.replicas of __transaction_state.", H, validator=at_least(1)),
    _k("transaction.state.log.segment.bytes", "int", 104857600, "Segment size of __transaction_state.", H, validator=at_least(1)),
    _k("transaction.state.log.load.buffer.size", "int", 5242880, "Read size when loading transaction state.", H, validator=at_least(1)),
    _k("transaction.max.timeout.ms", "int", 900000, "Largest transaction timeout a producer may ask for.", H, validator=at_least(1)),
    _k("transactional.id.expiration.ms", "int", 604800000, "Idle transactional ids expire after this.", H, validator=at_least(1)),
    _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, "How often timed-out transactions are aborted.", L, validator=at_least(1)),
    _k("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, "How often expired transactional ids are removed.", L, validator=at_least(1)),
    _k("transaction.partition.verification.enable", "boolean", True, "Verify partitions are in the transaction before appending.", L, CW),
    # Kafka 4.x (transaction version 2): a partition leader adding a partition to a transaction
    # retries CONCURRENT_TRANSACTIONS this often, for this long
    _k("add.partitions.to.txn.retry.backoff.ms", "int", 20, "Backoff between a leader's retries of adding a partition to a transaction.", H, validator=at_least(1)),
    _k("add.partitions.to.txn.retry.backoff.max.ms", "int", 100, "How long a leader retries adding a partition to a transaction.", H, validator=at_least(0)),
    _k("producer.id.expiration.ms", "int", 86400000, "Idle producer-id state is dropped after this.", L, CW, at_least(1)),
    _k("producer.id.expiration.check.interval.ms", "int", 600000, "How often idle producer ids are checked.", L, validator=at_least(1), internal=True),
    # Security and metrics keys the broker will need (not in defaults.md's tables).
    _k("sasl.enabled.mechanisms", "list", ["GSSAPI"], "SASL mechanisms offered by SASL listeners.", mode=PB),
    _k("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "SASL mechanism between brokers."),
    _k("sasl.kerberos.service.name", "string", None, "Kerberos service name of the broker (the first part of its principal).", mode=PB),
    _k("sasl.kerberos.principal.to.local.rules", "list", ["DEFAULT"], "Rules mapping Kerberos names to principal names.", mode=PB),
    _k("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit", "kinit command (Kerberos logins of clients; the broker reads its keytab).", mode=PB),
    _k("sasl.kerberos.min.time.before.relogin", "long", 60000, "Least time between Kerberos logins (clients).", mode=PB),
    _k("sasl.kerberos.ticket.renew.jitter", "double", 0.05, "Jitter of Kerberos ticket renewals (clients).", mode=PB),
    _k("sasl.kerberos.ticket.renew.window.factor", "double", 0.8, "When Kerberos tickets are renewed (clients).", mode=PB),
    _k("ssl.keystore.location", "string", None, "Key store file.", H, PB),
    _k("ssl.keystore.password", "password", None, "Key store password.", H, PB),
    _k("ssl.key.password", "password", None, "Private key password.", H, PB),
    _k("ssl.truststore.location", "string", None, "Trust store file.", H, PB),
    _k("ssl.truststore.password", "password", None, "Trust store password.", H, PB),
    _k("ssl.client.auth", "string", "none", "Client certificate requirement.", mode=PB, validator=one_of("required", "requested", "none")),
    _k("ssl.keystore.type", "string", "PEM", "Key store format: PEM, PKCS12, JKS or JCEKS (a JKS or JCEKS file is recognised under PEM too).", mode=PB),
    _k("ssl.keystore.key", "password", None, "Private key as inline PEM (with ssl.keystore.certificate.chain).", mode=PB),
    _k("ssl.keystore.certificate.chain", "password", None, "Certificate chain as inline PEM.", mode=PB),
    _k("ssl.truststore.type", "string", "PEM", "Trust store format: PEM, PKCS12, JKS or JCEKS (a JKS or JCEKS file is recognised under PEM too).", mode=PB),
    _k("ssl.truststore.certificates", "password", None, "Trusted certificates as inline PEM.", mode=PB),
    _k("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions offered.", mode=PB),
    _k("ssl.cipher.suites", "list", [], "Cipher suites (OpenSSL names); empty = the defaults.", L, PB),
    _k("ssl.endpoint.identification.algorithm", "string", "https",
       "Host name check of the certificates of other brokers (https) or none (empty).", L, PB),
    _k("ssl.allow.dn.changes", "boolean", False,
       "Let a dynamic key store update change the certificate's subject.", L, PB),
    _k("ssl.allow.san.changes", "boolean", False,
       "Let a dynamic key store update change the certificate's subject alternative names.", L, PB),
    # Java's JSSE knobs, accepted with Kafka's defaults so Kafka's property files load as they are:
    # Python's ssl module (OpenSSL) builds the contexts, the version range comes from
    # ssl.enabled.protocols as in Kafka's engines (capped by ssl.protocol on the broker's own
    # client connections), and a custom engine factory stops start-up
    # (broker/security/tls.py, check_jsse_settings).
    _k("ssl.protocol", "string", "TLSv1.3",
       "The SSLContext protocol (Java): the highest TLS version of the broker's own connections to other brokers.", mode=PB),
    _k("ssl.provider", "string", None, "A Java security provider (not used here).", mode=PB),
    _k("ssl.keymanager.algorithm", "string", "SunX509", "Java's key manager algorithm (not used here).", mode=PB),
    _k("ssl.trustmanager.algorithm", "string", "PKIX", "Java's trust manager algorithm (not used here).", mode=PB),
    _k("ssl.secure.random.implementation", "string", None, "Java's SecureRandom (not used here).", L, PB),
    _k("ssl.engine.factory.class", "class", None,
       "A Python class (package.module.Class) making the listener's ssl.SSLContext objects in place of "
       "the ssl.* key and trust store settings (create_server_context(), create_client_context()).", L, PB),
    _k("ssl.principal.mapping.rules", "string", "DEFAULT",
       "RULE:pattern/replacement/[LU] rules (then DEFAULT) mapping certificate subjects to principal names.", L),
    # Delegation tokens (KIP-48); docs/security.md.  Without a secret key every token API answers
    # DELEGATION_TOKEN_AUTH_DISABLED.
    _k("delegation.token.secret.key", "password", None,
       "Key that signs delegation tokens (HMAC-SHA512 of the token id); the same on every broker. "
       "Unset: delegation tokens are off."),
    _k("delegation.token.master.key", "password", None,
       "Deprecated name of delegation.token.secret.key, read when that one is unset."),
    _k("delegation.token.max.lifetime.ms", "long", 604800000,
       "Longest a token may live, however often it is renewed.", validator=at_least(1)),
    _k("delegation.token.expiry.time.ms", "long", 86400000,
       "How long a token stays valid after creation or renewal unless a renewal says otherwise.",
       validator=at_least(1)),
    _k("delegation.token.expiry.check.interval.ms", "long", 3600000,
       "How often expired tokens are removed.", L, validator=at_least(1)),
    _k("sasl.server.max.receive.size", "int", 524288,
       "The largest frame a client may send until its SASL authentication completes."),
    _k("sasl.jaas.config", "password", None, "JAAS login entry (PLAIN users as user_<name>=\"<password>\").", mode=PB),
    _k("create.topic.policy.class.name", "class", None,
       "A Python class (package.module.Class) whose validate(request) may refuse topic creations "
       "with broker.policy.PolicyViolation (docs/admin.md).", L),
    _k("alter.config.policy.class.name", "class", None,
       "A Python class (package.module.Class) whose validate(request) may refuse topic and broker "
       "config changes with broker.policy.PolicyViolation (docs/admin.md).", L),
    _k("principal.builder.class", "class",
       "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
       "Builds the principal of each connection: Kafka's default, or a Python class "
       "(package.module.ClassName) with build(context) (broker/security/builder.py)."),
    # SASL/OAUTHBEARER token validation (KIP-768); docs/security.md.  Also read with the
    # listener.name.<l>. prefix.
    _k("sasl.server.callback.handler.class", "class", None,
       "Server SASL callback handler; only OAuthBearerValidatorCallbackHandler is recognised, under "
       "listener.name.<l>.oauthbearer.", L),
    _k("sasl.oauthbearer.jwks.endpoint.url", "string", None,
       "file:, http: or https: URL of the JWKS whose keys verify OAUTHBEARER tokens.", L),
    _k("sasl.oauthbearer.jwks.endpoint.refresh.ms", "long", 3600000,
       "How often the JWKS is reloaded.", L, validator=at_least(1)),
    _k("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "long", 100,
       "Kafka's JWKS retry back-off (accepted; Odradek retries at the next refresh).", L),
    _k("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "long", 10000,
       "Kafka's largest JWKS retry back-off (accepted; not used).", L),
    _k("sasl.oauthbearer.expected.audience", "list", None,
       "Audiences of which a token's aud claim must name one.", L),
    _k("sasl.oauthbearer.expected.issuer", "string", None, "Issuer a token's iss claim must name.", L),
    _k("sasl.oauthbearer.sub.claim.name", "string", "sub", "Claim holding the principal name.", L),
    _k("sasl.oauthbearer.scope.claim.name", "string", "scope", "Claim holding the token's scope.", L),
    _k("sasl.oauthbearer.token.endpoint.url", "string", None, "Where the broker's own OAUTHBEARER logins get tokens (client credentials).", L),
    _k("sasl.login.callback.handler.class", "class", None, "OAuthBearerLoginCallbackHandler: the broker's own logins use the token endpoint.", L),
    _k("sasl.login.connect.timeout.ms", "int", None, "Connect timeout of the token endpoint.", L),
    _k("sasl.login.read.timeout.ms", "int", None, "Read timeout of the token endpoint.", L),
    _k("sasl.login.retry.backoff.ms", "long", 100, "First wait before asking the token endpoint again.", L),
    _k("sasl.login.retry.backoff.max.ms", "long", 10000, "Longest wait before asking the token endpoint again.", L),
    _k("sasl.login.refresh.window.factor", "double", 0.8, "Part of a token's life after which a new one is fetched.", L),
    _k("sasl.oauthbearer.clock.skew.seconds", "int", 30,
       "Clock difference tolerated when checking exp, iat and nbf.", L),
    _k("super.users", "string", None, "Principals allowed everything, separated by ';'."),
    _k("allow.everyone.if.no.acl.found", "boolean", False, "Allow access to resources that have no ACLs at all."),
    # Dynamic password configs in ZooKeeper are stored encrypted, in Kafka's format
    # (broker/password_encoder.py); the embedded store keeps them as KRaft does, unencoded.
    _k("password.encoder.secret", "password", None, "Secret that encrypts dynamically stored passwords."),
    _k("password.encoder.old.secret", "password", None,
       "The previous secret: passwords stored with it are re-encoded with the new one at start-up."),
    _k("password.encoder.keyfactory.algorithm", "string", None,
       "PBKDF2 variant deriving the key (default PBKDF2WithHmacSHA512).", L),
    _k("password.encoder.cipher.algorithm", "string", "AES/CBC/PKCS5Padding",
       "Cipher of stored passwords (AES/CBC/PKCS5Padding or AES/GCM/NoPadding).", L),
    _k("password.encoder.key.length", "int", 128, "Key length in bits.", L, validator=at_least(8)),
    _k("password.encoder.iterations", "int", 4096, "PBKDF2 iterations.", L, validator=at_least(1024)),
    _k("metric.reporters", "list", [],
       "Python classes (package.module.Class) given the broker's settings; one with client_receiver() "
       "receives the metrics clients push (KIP-714, broker/client_metrics.py).", L, CW),
    _k("telemetry.max.bytes", "int", 1048576,
       "Largest metrics payload a client may push (as sent, compressed or not); also told to clients.", L,
       validator=at_least(1)),
    _k("kafka.metrics.reporters", "list", [],
       "Yammer metrics reporter classes (Java); accepted, metrics go to the Prometheus endpoint here.", L),
    _k("kafka.metrics.polling.interval.secs", "int", 10, "Polling interval of the Yammer reporters (not used).", L,
       validator=at_least(1)),
    _k("client.quota.callback.class", "class", None,
       "A Python class (package.module.Class) deciding every client quota in place of the default "
       "user / client-id quotas (broker/quota_callback.py); empty: the defaults.", L),
    # Odradek's own keys (not Kafka's): the Prometheus endpoint (broker/metrics.py, docs/metrics.md).
    _k("odradek.metrics.prometheus.port", "int", -1,
       "Port of the Prometheus endpoint (GET /metrics); -1 = no endpoint, 0 = any free port.", L,
       validator=between(-1, 65535)),
    _k("odradek.metrics.prometheus.host", "string", "",
       "Address the Prometheus endpoint binds; empty = all interfaces.", L),
    _k("odradek.telemetry.prometheus.expiry.ms", "long", 900000,
       "How long the Prometheus telemetry receiver (broker/telemetry_prometheus.py) serves a client "
       "instance's pushed metrics after its last push.", L, validator=at_least(1)),
]

# Topic keys: (topic key, broker synonym chain (highest precedence first) or None, ConfigKey).
# The topic default is the broker's effective value for the chain (see config.py).
_TOPIC_DEFS = [
    ("cleanup.policy", ["log.cleanup.policy"], "list", ["delete"], list_of(*_CLEANUP), "delete and/or compact."),
    ("compression.type", ["compression.type"], "string", "producer", one_of(*_COMPRESSION), "Codec of stored batches."),
    ("compression.gzip.level", ["compression.gzip.level"], "int", -1, gzip_level(), "gzip level when the broker compresses."),
    ("compression.lz4.level", ["compression.lz4.level"], "int", 9, between(1, 17), "lz4 level when the broker compresses."),
    ("compression.zstd.level", ["compression.zstd.level"], "int", 3, between(-131072, 22), "zstd level when the broker compresses."),
    ("delete.retention.ms", ["log.cleaner.delete.retention.ms"], "long", 86400000, at_least(0), "How long tombstones survive cleaning."),
    ("file.delete.delay.ms", ["log.segment.delete.delay.ms"], "long", 60000, at_least(0), "Delay before deleted files are removed."),
    ("flush.messages", ["log.flush.interval.messages"], "long", LONG_MAX, at_least(1), "fsync after this many messages."),
    ("flush.ms", ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"], "long", LONG_MAX, at_least(0), "fsync after this long."),
    ("follower.replication.throttled.replicas", None, "list", [], throttled_replicas(), "Throttled follower replicas, partition:broker list or *."),
    ("index.interval.bytes", ["log.index.interval.bytes"], "int", 4096, at_least(0), "Bytes between offset index entries."),
    ("leader.replication.throttled.replicas", None, "list", [], throttled_replicas(), "Throttled leader replicas, partition:broker list or *."),
    ("local.retention.bytes", ["log.local.retention.bytes"], "long", -2, at_least(-2), "Local size limit with tiered storage."),
    ("local.retention.ms", ["log.local.retention.ms"], "long", -2, at_least(-2), "Local retention with tiered storage."),
    ("max.compaction.lag.ms", ["log.cleaner.max.compaction.lag.ms"], "long", LONG_MAX, at_least(1), "Maximum time a record stays uncompacted."),
    ("max.message.bytes", ["message.max.bytes"], "int", 1048588, at_least(0), "Largest record batch accepted."),
    ("message.downconversion.enable", ["log.message.downconversion.enable"], "boolean", True, None, "Down-convert for old consumers."),
    ("message.format.version", ["log.message.format.version"], "string", "3.0-IV1", None, "Deprecated; ignored."),
    ("message.timestamp.after.max.ms", ["log.message.timestamp.after.max.ms"], "long", LONG_MAX, at_least(0), "How far in the future a CreateTime may be."),
    ("message.timestamp.before.max.ms", ["log.message.timestamp.before.max.ms"], "long", LONG_MAX, at_least(0), "How far in the past a CreateTime may be."),
    ("message.timestamp.difference.max.ms", ["log.message.timestamp.difference.max.ms"], "long", LONG_MAX, at_least(0), "Deprecated; max timestamp skew."),
    ("message.timestamp.type", ["log.message.timestamp.type"], "string", "CreateTime", one_of(*_TIMESTAMP_TYPES), "CreateTime or LogAppendTime."),
    ("min.cleanable.dirty.ratio", ["log.cleaner.min.cleanable.ratio"], "double", 0.5, between(0, 1), "Dirty ratio that makes the log cleanable."),
    ("min.compaction.lag.ms", ["log.cleaner.min.compaction.lag.ms"], "long", 0, at_least(0), "Minimum age before compaction."),
    ("min.insync.replicas", ["min.insync.replicas"], "int", 1, at_least(1), "Minimum ISR size for acks=all."),
    ("preallocate", ["log.preallocate"], "boolean", False, None, "Pre-allocate segment files."),
    ("remote.log.copy.disable", None, "boolean", False, None, "Stop copying segments to tiered storage."),
    ("remote.log.delete.on.disable", None, "boolean", False, None, "Delete tiered data when tiering is turned off."),
    ("remote.storage.enable", None, "boolean", False, None, "Enable tiered storage for the topic."),
    ("retention.bytes", ["log.retention.bytes"], "long", -1, None, "Size per partition before old segments go; -1 = unlimited."),
    ("retention.ms", ["log.retention.ms", "log.retention.minutes", "log.retention.hours"], "long", 604800000, at_least(-1), "Keep data this long; -1 = forever."),
    ("segment.bytes", ["log.segment.bytes"], "int", 1073741824, at_least(14), "Segment size that triggers a roll."),
    ("segment.index.bytes", ["log.index.size.max.bytes"], "int", 10485760, at_least(4), "Pre-allocated index file size."),
    ("segment.jitter.ms", ["log.roll.jitter.ms", "log.roll.jitter.hours"], "long", 0, at_least(0), "Random jitter subtracted from segment.ms."),
    ("segment.ms", ["log.roll.ms", "log.roll.hours"], "long", 604800000, at_least(1), "Segment age that triggers a roll."),
    ("unclean.leader.election.enable", ["unclean.leader.election.enable"], "boolean", False, None, "Allow out-of-sync leaders."),
]

TOPIC_KEYS: dict[str, ConfigKey] = {
    name: ConfigKey(name, typ, default, doc, "medium", CLUSTER_WIDE, val)
    for name, _syn, typ, default, val, doc in _TOPIC_DEFS
}
# topic key -> broker synonym chain, highest precedence first (Kafka's fallback order).
TOPIC_SYNONYMS: dict[str, list[str]] = {name: syn for name, syn, *_ in _TOPIC_DEFS if syn}

BROKER_KEYS_BY_NAME: dict[str, ConfigKey] = {k.name: k for k in BROKER_KEYS}

# Broker synonym groups used by DescribeConfigs (Kafka's brokerConfigSynonyms).
_BROKER_SYNONYM_GROUPS = [
    ["log.roll.ms", "log.roll.hours"],
    ["log.roll.jitter.ms", "log.roll.jitter.hours"],
    ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
]


def broker_synonyms(name: str) -> list[str]:
    """Names describing the same broker setting, highest precedence first."""
    if name == "log.flush.interval.ms":
        return ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group:
            return list(group)
    return [name]


def _check_table() -> None:
    for chain in TOPIC_SYNONYMS.values():
        for b in chain:
            assert b in BROKER_KEYS_BY_NAME, b


_check_table()

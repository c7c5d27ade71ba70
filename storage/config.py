"""Per-log configuration with Kafka's topic keys and defaults (Kafka 3.9).

``LogConfig`` is a plain dataclass; the broker builds it from broker defaults plus topic
overrides with ``LogConfig.from_properties({"segment.bytes": "1048576", ...})``.  Field names are
the Kafka topic keys with dots replaced by underscores.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

LONG_MAX = 9223372036854775807
_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_difference_max_ms: int = LONG_MAX     # deprecated (3.6), gone in 4.0
    cleanup_policy: str = "delete"
    min_insync_replicas: int = 1
    file_delete_delay_ms: int = 60000
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    preallocate: bool = False
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    unclean_leader_election_enable: bool = False
    message_downconversion_enable: bool = True
    extra: dict = field(default_factory=dict)   # keys we do not interpret, kept verbatim

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self._policies()

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self._policies()

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def timestamp_before_max_ms(self) -> int:
        """``message.timestamp.before.max.ms``, or, left at its default, the deprecated
        ``message.timestamp.difference.max.ms`` (Kafka 3.6-3.9 read it so in the transition)."""
        v = self.message_timestamp_before_max_ms
        return v if v != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """``message.timestamp.after.max.ms``, with the same fallback."""
        v = self.message_timestamp_after_max_ms
        return v if v != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def target_codec(self) -> int | None:
        """The codec id ``compression.type`` stores batches in; None for ``producer``."""
        return _CODECS.get(self.compression_type)

    def compression_level(self, codec: int) -> int | None:
        """The level the broker compresses ``codec`` with (``compression.<codec>.level``);
        None where the codec's library default is Kafka's default: gzip -1 (zlib's 6), lz4 9
        (Kafka's fast compressor, not the high one) and snappy, which has no level."""
        if codec == 1:
            return None if self.compression_gzip_level == -1 else self.compression_gzip_level
        if codec == 3:
            return None if self.compression_lz4_level == 9 else self.compression_lz4_level
        if codec == 4:
            return self.compression_zstd_level
        return None

    def _policies(self):
        return {p.strip() for p in self.cleanup_policy.split(",")}

    @classmethod
    def from_properties(cls, props: dict, base: "LogConfig | None" = None) -> "LogConfig":
        """Build from Kafka topic keys (``"retention.ms"``); unknown keys go to ``extra``."""
        cfg = dataclasses.replace(base) if base is not None else cls()
        cfg.extra = dict(cfg.extra)
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for key, value in props.items():
            name = key.replace(".", "_")
            if name not in types or name == "extra":
                cfg.extra[key] = value
                continue
            t = types[name]
            if t == "int":
                value = int(value)
            elif t == "float":
                value = float(value)
            elif t == "bool":
                value = value if isinstance(value, bool) else str(value).lower() == "true"
            else:
                value = str(value)
            setattr(cfg, name, value)
        return cfg

    def to_properties(self) -> dict:
        out = {f.name.replace("_", "."): getattr(self, f.name)
               for f in dataclasses.fields(self) if f.name != "extra"}
        out.update(self.extra)
        return out

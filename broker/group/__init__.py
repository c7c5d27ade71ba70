"""Group coordinator: classic consumer groups and committed offsets (see ``coordinator.py``).

Modules: ``hashing`` (group -> ``__consumer_offsets`` partition), ``records`` (the topic's
key/value formats), ``member`` / ``group`` (state), ``membership`` (join/sync/heartbeat/leave and
rebalance timers), ``offsets`` (commit/fetch/delete/expiry), ``timers`` (loop or manual timers),
``coordinator`` (lifecycle, loading, persistence, list/describe).
"""
from broker.group.coordinator import GROUP_METADATA_TOPIC, GroupCoordinator, GroupLog, Node
from broker.group.group import OffsetAndMetadata
from broker.group.hashing import java_string_hash, partition_for
from broker.group.member import JoinResult, SyncResult
from broker.group.timers import LoopTimers, ManualTimers

__all__ = ["GroupCoordinator", "GroupLog", "Node", "GROUP_METADATA_TOPIC", "OffsetAndMetadata",
           "JoinResult", "SyncResult", "java_string_hash", "partition_for", "LoopTimers", "ManualTimers"]

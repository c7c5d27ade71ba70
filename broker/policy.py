"""``create.topic.policy.class.name`` and ``alter.config.policy.class.name``: Kafka's
CreateTopicPolicy and AlterConfigPolicy plugins, written in Python here.

Each setting names a class (``package.module.Class``) that the broker builds once at start-up
(a name that cannot be imported stops the start-up, as an unloadable Java class stops Kafka's).
If it has ``configure(configs)``, that gets the broker's settings as a dict of strings first; a
``close()`` is called when the broker stops.  Its ``validate(request)`` raises ``PolicyViolation``
(this module's, or any exception class named ``PolicyViolationException``) to refuse; the
client gets POLICY_VIOLATION with the exception's message.  Any other exception answers
UNKNOWN_SERVER_ERROR and is logged.

Where they are asked, as in a Kafka 3.9 broker in ZooKeeper mode (``ZkAdminManager``):

* the create-topic policy, for each topic of CreateTopics (also ``validate_only``) that passed
  the broker's own checks, and for topics that Metadata creates automatically (their Metadata
  entry then carries POLICY_VIOLATION).  ``CreateTopicRequest``: ``topic``; ``num_partitions``
  and ``replication_factor`` as resolved (the broker's defaults for -1), or None when the request
  gave explicit ``replica_assignments`` ({partition: [broker ids]}); ``configs`` as requested;
* the alter-config policy, for topic, broker and client metrics resources of AlterConfigs and
  IncrementalAlterConfigs (also ``validate_only``) that passed the broker's own checks.
  ``AlterConfigRequest``: ``resource_type`` ("TOPIC", "BROKER" or "CLIENT_METRICS"),
  ``resource_name`` ("" for the cluster-wide broker default), ``configs``: the request's entries,
  name to value (None for an incremental DELETE), not the resulting set.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from protocol.errors import ErrorCode as E

log = logging.getLogger("odradek.policy")

CREATE_TOPIC_KEY = "create.topic.policy.class.name"
ALTER_CONFIG_KEY = "alter.config.policy.class.name"


class PolicyViolation(Exception):
    """Raised by a policy's ``validate`` to refuse a request (Kafka's PolicyViolationException)."""


@dataclass(frozen=True)
class CreateTopicRequest:
    topic: str
    num_partitions: int | None
    replication_factor: int | None
    replica_assignments: dict[int, list[int]] | None
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AlterConfigRequest:
    resource_type: str
    resource_name: str
    configs: dict[str, str | None] = field(default_factory=dict)


def _load(cfg, key: str):
    path = cfg.get(key)
    if not path:
        return None
    from broker.security.builder import broker_settings, instantiate
    policy = instantiate(path, key, broker_settings(cfg), ("validate(request)",))
    log.info("%s: %s", key, path)
    return policy


def _verdict(policy, request) -> tuple[int, str] | None:
    try:
        policy.validate(request)
    except Exception as e:      # noqa: BLE001 - a plugin's failure must not take the broker down
        if isinstance(e, PolicyViolation) or type(e).__name__ == "PolicyViolationException":
            return E.POLICY_VIOLATION, str(e) or None
        log.error("policy %s failed on %s", type(policy).__name__, request, exc_info=True)
        return E.UNKNOWN_SERVER_ERROR, None
    return None


class Policies:
    """The broker's two policies (either may be absent)."""

    def __init__(self, cfg):
        self.create_topic = _load(cfg, CREATE_TOPIC_KEY)
        self.alter_config = _load(cfg, ALTER_CONFIG_KEY)

    def check_create(self, spec, num_partitions: int, replication_factor: int) -> tuple[int, str] | None:
        """The create-topic policy's verdict on ``spec`` (a controller CreatableTopic that passed
        the broker's checks, with its resolved partition count and replication factor)."""
        if self.create_topic is None:
            return None
        explicit = bool(spec.assignments)
        request = CreateTopicRequest(
            topic=spec.name,
            num_partitions=None if explicit else num_partitions,
            replication_factor=None if explicit else replication_factor,
            replica_assignments={p: list(b) for p, b in spec.assignments.items()} if explicit else None,
            configs=dict(spec.configs or {}))
        return _verdict(self.create_topic, request)

    def check_alter(self, resource_type: str, resource_name: str, entries: dict) -> tuple[int, str] | None:
        if self.alter_config is None:
            return None
        return _verdict(self.alter_config, AlterConfigRequest(resource_type, resource_name, dict(entries)))

    def close(self) -> None:
        for p in (self.create_topic, self.alter_config):
            close = getattr(p, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:   # noqa: BLE001
                    log.warning("closing policy %s failed", type(p).__name__, exc_info=True)

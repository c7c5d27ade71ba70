"""``client.quota.callback.class``: Kafka's ClientQuotaCallback plug-in, written in Python here.

Without it the broker's quotas are Kafka's default ones (``broker/client_quota.py``): limits
set per user and client id with ``kafka-configs.sh`` / AlterClientQuotas, shared by the clients
of the level that matched.  A callback takes over both decisions for every quota type: which
clients share one measured rate, and what that rate may be.

The setting names a class (``package.module.Class`` or ``package.module:Class``) that the
broker builds once at start-up; a name that cannot be imported, or a class that lacks one of
the two methods the broker needs, stops the start-up.  The broker calls:

* ``configure(configs)`` (optional), once, with the broker's settings as a dict of strings;
* ``quota_metric_tags(quota_type, principal, client_id) -> dict[str, str]`` for every request a
  quota applies to.  ``quota_type`` is ``"PRODUCE"``, ``"FETCH"``, ``"REQUEST"`` or
  ``"CONTROLLER_MUTATION"``; ``principal`` has ``principal_type`` and ``name`` (``User`` /
  ``alice``; ``User`` / ``ANONYMOUS`` without authentication).  Clients whose calls return equal
  tags share one rate.  Kafka's default callback answers ``{"user": ..., "client-id": ...}``;
  any other keys are allowed too (``{}`` makes one rate for every client of the broker);
* ``quota_limit(quota_type, metric_tags) -> float | None``: the limit of those tags (bytes per
  second, percent of a second per second, or partitions per second, as for Kafka's quota keys);
  None for no limit.  It is asked when a set of tags is first seen and again after a change
  (below); the answer is kept until then;
* ``update_quota(quota_type, entity, value)`` / ``remove_quota(quota_type, entity)`` (optional)
  when a quota set with the usual tools changes, at start-up for every quota already set.
  ``entity.config_entities`` lists its parts, each with ``entity_type`` (``"USER"``,
  ``"CLIENT_ID"``, ``"DEFAULT_USER"``, ``"DEFAULT_CLIENT_ID"``) and ``name`` (``""`` for a
  default);
* ``quota_reset_required(quota_type) -> bool`` (optional), before every request's tags: True
  makes the broker ask ``quota_limit`` again for every set of tags (for a callback whose limits
  change outside the broker's tools);
* ``update_cluster_metadata(cluster) -> bool`` (optional), at start-up and whenever topics,
  partitions or brokers change; ``cluster`` has ``cluster_id``, ``controller_id``, ``broker_id``
  (this broker), ``brokers`` (``controller.api.BrokerInfo``) and ``topics`` (name ->
  ``controller.api.TopicInfo``, with each partition's replicas, leader and ISR).  True: limits
  are asked again, as after ``quota_reset_required``;
* ``close()`` (optional) when the broker stops.

An exception from ``quota_metric_tags`` or ``quota_limit`` fails that request (Kafka's handler
answers it with an unexpected error); the broker logs it.  Metrics: a rate whose tags are
``user`` / ``client-id`` is exported as for the default quotas; other tags become the labels of
the same series (dots and dashes turned into underscores).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

log = logging.getLogger("odradek.quota")

CALLBACK_KEY = "client.quota.callback.class"
QUOTA_TYPES = ("PRODUCE", "FETCH", "REQUEST", "CONTROLLER_MUTATION")
NEEDED = ("quota_metric_tags", "quota_limit")


@dataclass(frozen=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        kind, sep, name = text.partition(":")
        return cls(kind, name) if sep else cls("User", text)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


@dataclass(frozen=True)
class ConfigEntity:
    entity_type: str        # USER, CLIENT_ID, DEFAULT_USER, DEFAULT_CLIENT_ID
    name: str               # "" for a default entity


@dataclass(frozen=True)
class ClientQuotaEntity:
    config_entities: tuple[ConfigEntity, ...]


@dataclass(frozen=True)
class ClusterMetadata:
    cluster_id: str
    controller_id: int
    broker_id: int
    brokers: list = field(default_factory=list)
    topics: dict = field(default_factory=dict)


def load(cfg):
    """The configured callback instance, or None."""
    path = cfg.get(CALLBACK_KEY)
    if not path:
        return None
    from broker.security.builder import broker_settings, instantiate
    callback = instantiate(path, CALLBACK_KEY, broker_settings(cfg), NEEDED)
    log.info("%s: %s (it decides every client quota)", CALLBACK_KEY, path)
    return callback


def tags_key(tags) -> tuple:
    """The key of a rate: (user, client id) for Kafka's own tags, else the sorted (name, value)
    pairs (a tuple of pairs is never mistaken for the two strings)."""
    if not isinstance(tags, dict):
        raise TypeError(f"quota_metric_tags must return a dict, not {type(tags).__name__}")
    if set(tags) <= {"user", "client-id"}:
        return str(tags.get("user", "")), str(tags.get("client-id", ""))
    return tuple(sorted((str(k), str(v)) for k, v in tags.items()))


def is_user_client(key: tuple) -> bool:
    return len(key) == 2 and isinstance(key[0], str)


_LABEL = re.compile(r"[^a-zA-Z0-9_]")


def metric_labels(key: tuple) -> dict[str, str]:
    """Prometheus labels of a rate's key."""
    if is_user_client(key):
        return {"user": key[0], "client_id": key[1]}
    out = {}
    for name, value in key:
        label = _LABEL.sub("_", name)
        if not label or label[0].isdigit():
            label = "_" + label
        out[label] = value
    return out


def entity_of(key: tuple) -> ClientQuotaEntity:
    """``client_quota``'s override key (user, client) with ``absent`` / None for a default, as the
    callback's ClientQuotaEntity."""
    from broker.client_quota import _ABSENT
    user, client = key
    parts = []
    if user is not _ABSENT:
        parts.append(ConfigEntity("DEFAULT_USER", "") if user is None else ConfigEntity("USER", user))
    if client is not _ABSENT:
        parts.append(ConfigEntity("DEFAULT_CLIENT_ID", "") if client is None else ConfigEntity("CLIENT_ID", client))
    return ClientQuotaEntity(tuple(parts))


def close(callback) -> None:
    fn = getattr(callback, "close", None)
    if fn is not None:
        try:
            fn()
        except Exception:   # noqa: BLE001 - a plug-in's failure must not stop the shutdown
            log.warning("closing quota callback %s failed", type(callback).__name__, exc_info=True)

"""User, client-id and IP quotas of a ZooKeeper cluster, where Kafka 3.x keeps them.

How this works
--------------
* Entities: ``/config/clients/<c>``, ``/config/users/<u>``, ``/config/users/<u>/clients/<c>``,
  ``/config/ips/<ip>`` (names sanitized, ``<default>`` for default entities), each ``{"version":1,"config":{...}}``.
  ``/config/users/<u>`` also holds the user's SCRAM credentials (``security_store.py``): a write
  changes only the quota keys of the node and keeps every other key.
* A write is a read-modify-write of the entity node conditional on its data version, committed in
  one multi with the notification ``/config/changes/config_change_<seq>``
  ``{"version":2,"entity_path":"clients/<c>"}`` (``users/<u>``, ``users/<u>/clients/<c>``), and
  retried when another writer got in between.  Parents of a ``users/<u>/clients/<c>`` node are
  created empty when missing, as Kafka's ``createOrSet`` does.
* Every broker reads all entities at start and after a new ZooKeeper session; afterwards the
  owner's ``/config/changes`` processing calls ``entity_changed`` with the notification's
  entity path, and the entity is re-read.  ``quotas`` is a dict replaced, never mutated.
"""
from __future__ import annotations

import asyncio
import logging
import random

from kazoo.exceptions import NoNodeError

from controller.api import (ALL_QUOTA_KEY_TYPES, UNKNOWN_SERVER_ERROR, ApiResult, quota_entity_from_path,
                            quota_entity_path, quota_value_to_config, quota_values_from_config)
from controller.zookeeper import znodes as Z

log = logging.getLogger("odradek.zkcontroller.quotas")

MAX_WRITE_ATTEMPTS = 50


class ZkQuotaStore:
    """Owned by a ``ZkController``; used from its event loop only."""

    def __init__(self, bridge, on_change=None):
        self.bridge = bridge
        self.on_change = on_change          # called with the entity path after a change
        self.quotas: dict[tuple, dict[str, float]] = {}

    async def _read(self, path: str, with_version: bool = False):
        node = f"{Z.CONFIG}/{path}"
        try:
            data, stat = await self.bridge.get(node)
            cfg = Z.decode_config(data, node)
        except NoNodeError:
            return ({}, None) if with_version else {}
        except Z.ZnodeFormatError as e:
            log.error("%s", e)
            return ({}, -2) if with_version else {}
        return (cfg, stat.version) if with_version else cfg

    async def _children(self, path: str) -> list[str]:
        try:
            return await self.bridge.get_children(f"{Z.CONFIG}/{path}")
        except NoNodeError:
            return []

    async def load(self) -> None:
        self.quotas = await self._read_all()
        if self.quotas:
            log.info("Loaded client quotas of %d entities from ZooKeeper", len(self.quotas))

    async def refresh(self) -> None:
        """Re-read every entity; each one that changed is set (and applied) as its change
        notification would."""
        fresh = await self._read_all()
        for entity in set(fresh) | set(self.quotas):
            if fresh.get(entity, {}) != self.quotas.get(entity, {}):
                self._set(entity, fresh.get(entity, {}))

    async def _read_all(self) -> dict[tuple, dict[str, float]]:
        quotas: dict[tuple, dict[str, float]] = {}
        paths = [f"clients/{c}" for c in await self._children("clients")]
        paths += [f"ips/{i}" for i in await self._children("ips")]
        for u in await self._children("users"):
            paths.append(f"users/{u}")
            paths += [f"users/{u}/clients/{c}" for c in await self._children(f"users/{u}/clients")]
        for path in paths:
            entity = quota_entity_from_path(path)
            if entity is None:
                continue
            values = quota_values_from_config(await self._read(path))
            if values:
                quotas[entity] = values
        return quotas

    async def entity_changed(self, path: str) -> None:
        """A /config/changes notification for ``clients/...``, ``users/...`` or ``ips/...``."""
        entity = quota_entity_from_path(path)
        if entity is None:
            return
        values = quota_values_from_config(await self._read(path))
        if values == self.quotas.get(entity, {}):
            return
        self._set(entity, values)
        log.info("Client quotas of %s changed: %s", path, values or "none left")

    def _set(self, entity: tuple, values: dict[str, float]) -> None:
        new = dict(self.quotas)
        if values:
            new[entity] = dict(values)
        else:
            new.pop(entity, None)
        self.quotas = new
        if self.on_change is not None:
            self.on_change(quota_entity_path(entity))

    async def alter(self, entries, validate_only: bool = False) -> list[ApiResult]:
        results = []
        for entity, changes in entries:
            if validate_only:
                results.append(ApiResult())
                continue
            results.append(await self._alter_one(entity, changes))
        return results

    async def _alter_one(self, entity: tuple, changes: dict[str, float | None]) -> ApiResult:
        path = quota_entity_path(entity)
        node = f"{Z.CONFIG}/{path}"
        for attempt in range(MAX_WRITE_ATTEMPTS):
            cfg, version = await self._read(path, with_version=True)
            if version == -2:
                return ApiResult(UNKNOWN_SERVER_ERROR, f"The config of {path} in ZooKeeper is unreadable.")
            cfg = dict(cfg)
            for k, v in changes.items():
                if v is None:
                    cfg.pop(k, None)
                else:
                    cfg[k] = quota_value_to_config(k, v)
            if version is None:
                parts = path.split("/")
                for i in range(2, len(parts)):
                    await self.bridge.ensure_path(f"{Z.CONFIG}/{'/'.join(parts[:i])}")
            data = Z.encode_config(cfg)

            def build(t, data=data, version=version):
                if version is None:
                    t.create(node, data)
                else:
                    t.set_data(node, data, version)
                t.create(f"{Z.CONFIG_CHANGES}/{Z.CONFIG_CHANGE_PREFIX}", Z.encode_config_change(path),
                         sequence=True)
            res = await self.bridge.transaction(build)
            if not any(isinstance(r, Exception) for r in res):
                self._set(entity, quota_values_from_config({k: v for k, v in cfg.items() if k in ALL_QUOTA_KEY_TYPES}))
                log.info("Updated client quotas of %s: %s", path, changes)
                return ApiResult()
            log.debug("client quota update of %s raced with another writer (%s); retrying", path, res)
            await asyncio.sleep(random.random() * 0.02 * (attempt + 1))
        return ApiResult(UNKNOWN_SERVER_ERROR, "Too many concurrent client quota updates; try again.")

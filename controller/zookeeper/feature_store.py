"""Finalized features (KIP-584) of a ZooKeeper cluster: the ``/feature`` node.

* Every broker reads ``/feature`` with a data watch (an existence watch while it is missing) and
  keeps (epoch, features): the node's zkVersion and its finalized feature -> level map when its
  status is enabled; (-1, {}) when it is missing, disabled or unreadable.  ApiVersions v3+
  reports them.
* The controller, when it takes over, creates the node (enabled, no features) or turns a
  disabled one on with no features, as Kafka's controller does for IBP >= 2.7.
* Writes (UpdateFeatures, on the controller only) are a setData conditional on the zkVersion
  this broker last read; a concurrent change fails the update rather than being overwritten.
* Features this broker does not support are logged as an error and still shown: a Kafka broker
  would exit on them, which loses a broker to a bad znode write; here an operator can see them
  and remove them with ``kafka-features.sh disable``.
"""
from __future__ import annotations

import asyncio
import logging
import types
from typing import Mapping

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from controller.api import FEATURE_UPDATE_FAILED, SUPPORTED_FEATURES, ApiResult, unsupported_features
from controller.zookeeper import znodes as Z

log = logging.getLogger("odradek.zkcontroller.features")

_EMPTY: Mapping[str, int] = types.MappingProxyType({})


class ZkFeatureStore:
    def __init__(self, bridge):
        self.bridge = bridge
        self.epoch = -1
        self.features: Mapping[str, int] = _EMPTY     # replaced, never mutated
        self._lock = asyncio.Lock()
        self._stopped = False
        self._watcher = None        # one callable, so kazoo keeps one watch however often we read

    def _watch(self):
        if self._watcher is None:
            self._watcher = self.bridge.watcher(self._fired)
        return self._watcher

    def stop(self) -> None:
        self._stopped = True

    def _fired(self) -> None:
        if not self._stopped:
            asyncio.ensure_future(self.load())

    async def load(self) -> None:
        """Read /feature and re-arm the watch."""
        b = self.bridge
        async with self._lock:
            try:
                while True:         # until read, or seen missing with an existence watch set
                    try:
                        data, stat = await b.get(Z.FEATURE, watch=self._watch())
                        break
                    except NoNodeError:
                        if await b.exists(Z.FEATURE, watch=self._watch()) is None:
                            self._set(-1, {}, "does not exist")
                            return
            except Exception as e:
                log.warning("reading %s failed: %s", Z.FEATURE, e)
                return
            try:
                status, features = Z.decode_feature(data)
            except Z.ZnodeFormatError as e:
                log.error("Unable to read the feature ZK node: %s", e)
                self._set(-1, {}, "unreadable")
                return
            if status != Z.FEATURE_ENABLED:
                self._set(-1, {}, "is in disabled status")
                return
            self._set(stat.version, features, None)

    def _set(self, epoch: int, features: dict[str, int], why: str | None) -> None:
        changed = (epoch, dict(features)) != (self.epoch, dict(self.features))
        self.epoch, self.features = epoch, types.MappingProxyType(dict(features))
        if not changed:
            return
        if why is not None:
            log.info("Feature ZK node at path: %s %s", Z.FEATURE, why)
            return
        log.info("Finalized features now %s (epoch %d)", dict(features) or "{}", epoch)
        unsupported = unsupported_features(features)
        if unsupported:
            log.error("Finalized features %s in %s are not supported by this broker (supported: %s); "
                      "remove them with kafka-features.sh disable", unsupported, Z.FEATURE,
                      dict(SUPPORTED_FEATURES) or "none")

    async def ensure_enabled(self) -> None:
        """The controller's step at failover: create /feature enabled with no finalized
        features, or turn a disabled node on (clearing what it held)."""
        b = self.bridge
        try:
            await b.create(Z.FEATURE, Z.encode_feature())
            log.info("Created %s with no finalized features", Z.FEATURE)
        except NodeExistsError:
            data, stat = await b.get(Z.FEATURE)
            try:
                status, features = Z.decode_feature(data)
            except Z.ZnodeFormatError as e:
                log.error("Unable to read the feature ZK node, left as it is: %s", e)
                return
            if status != Z.FEATURE_ENABLED:
                if features:
                    log.warning("%s in disabled status holds features %s; they are cleared", Z.FEATURE, features)
                try:
                    await b.set(Z.FEATURE, Z.encode_feature(), version=stat.version)
                    log.info("Enabled %s with no finalized features", Z.FEATURE)
                except (BadVersionError, NoNodeError):
                    log.warning("%s changed while being enabled; the next controller takes it up", Z.FEATURE)
        await self.load()

    async def write(self, features: dict[str, int]) -> ApiResult:
        """Replace the finalized features, conditional on the version last read."""
        version = self.epoch
        if version < 0:
            return ApiResult(FEATURE_UPDATE_FAILED, f"{Z.FEATURE} is missing or disabled.")
        try:
            stat = await self.bridge.set(Z.FEATURE, Z.encode_feature(features), version=version)
        except (BadVersionError, NoNodeError):
            await self.load()
            return ApiResult(FEATURE_UPDATE_FAILED, f"{Z.FEATURE} was changed concurrently; retry.")
        except Exception as e:
            log.warning("Updating %s failed: %s", Z.FEATURE, e)
            return ApiResult(FEATURE_UPDATE_FAILED, f"Updating {Z.FEATURE} failed: {e}")
        async with self._lock:
            if stat.version > self.epoch:
                self._set(stat.version, features, None)
        return ApiResult()


"""Delegation tokens of a ZooKeeper cluster, where Kafka 3.x's DelegationTokenManagerZk keeps them.

* ``/delegation_token/tokens/<tokenId>``: the token's JSON (version 3: owner, tokenRequester,
  renewers -- principals sanitized --, issueTimestamp, maxTimestamp, expiryTimestamp, tokenId).
* every create, renew, expire and removal also writes a sequential
  ``/delegation_token/token_changes/token_change_<seq>`` whose text is the token id; each broker
  follows these with a child watch and re-reads (or forgets) the token named.
* Only used when ``delegation.token.secret.key`` (or the old ``master.key``) is set, as in Kafka:
  then the paths are created and every token is read at start and after a new session.
* ``tokens`` is a dict replaced, never mutated.  Notifications older than 15 minutes are deleted
  while processing.
"""
from __future__ import annotations

import asyncio
import json
import logging

from kazoo.exceptions import NoNodeError, NodeExistsError

from controller.api import UNKNOWN_SERVER_ERROR, ApiResult
from controller.zookeeper.zkbridge import new_notifications
from controller.zookeeper.znodes import sequence_number

log = logging.getLogger("odradek.zkcontroller.tokens")

ROOT = "/delegation_token"
TOKENS = f"{ROOT}/tokens"
CHANGES = f"{ROOT}/token_changes"
CHANGE_PREFIX = "token_change_"


class ZkTokenStore:
    def __init__(self, bridge, enabled: bool):
        self.bridge = bridge
        self.enabled = enabled
        self.tokens: dict[str, dict] = {}
        self._last_change = -1
        self._lock = asyncio.Lock()
        self._stopped = False

    async def start(self) -> None:
        if self.enabled:
            for p in (TOKENS, CHANGES):
                await self.bridge.ensure_path(p)
            await self.load()

    def stop(self) -> None:
        self._stopped = True

    async def load(self) -> None:
        if not self.enabled:
            return
        b = self.bridge
        async with self._lock:
            children = await b.get_children(CHANGES, watch=b.watcher(self._fired, CHANGES))
            self._last_change = max((sequence_number(c) for c in children if c.startswith(CHANGE_PREFIX)), default=-1)
            tokens = {}
            for tid in await b.get_children(TOKENS):
                doc = await self._read(tid)
                if doc is not None:
                    tokens[tid] = doc
            self.tokens = tokens
        log.info("Loaded %d delegation tokens from ZooKeeper", len(self.tokens))

    async def _read(self, token_id: str):
        path = f"{TOKENS}/{token_id}"
        try:
            data, _stat = await self.bridge.get(path)
        except NoNodeError:
            return None
        try:
            doc = json.loads(data)
            if not isinstance(doc, dict):
                raise ValueError("not an object")
            return doc
        except ValueError as e:
            log.error("cannot read %s: %s", path, e)
            return None

    def _fired(self, path: str) -> None:
        if not self._stopped:
            asyncio.ensure_future(self._process_changes())

    async def _process_changes(self) -> None:
        b = self.bridge
        async with self._lock:
            try:
                children = await b.get_children(CHANGES, watch=b.watcher(self._fired, CHANGES))
            except Exception as e:
                log.warning("reading %s failed: %s", CHANGES, e)
                return
            async for seq, _node, data in new_notifications(b, CHANGES, children, CHANGE_PREFIX, self._last_change):
                self._last_change = seq
                if data is None:
                    continue
                tid = data.decode("utf-8", "replace")
                doc = await self._read(tid)
                new = dict(self.tokens)
                if doc is None:
                    new.pop(tid, None)
                else:
                    new[tid] = doc
                self.tokens = new
                log.debug("delegation token %s %s", tid, "removed" if doc is None else "reloaded")

    # ------------------------------------------------------------------ writes
    async def put(self, token_id: str, doc: dict) -> ApiResult:
        if not self.enabled:
            return ApiResult(UNKNOWN_SERVER_ERROR, "Delegation tokens are not enabled on this broker.")
        path = f"{TOKENS}/{token_id}"
        data = json.dumps(doc, separators=(",", ":")).encode("utf-8")
        for _attempt in range(5):
            exists = await self.bridge.exists(path)

            def build(t, exists=exists):
                if exists:
                    t.set_data(path, data)
                else:
                    t.create(path, data)
                t.create(f"{CHANGES}/{CHANGE_PREFIX}", token_id.encode("utf-8"), sequence=True)
            res = await self.bridge.transaction(build)
            if not any(isinstance(r, Exception) for r in res):
                new = dict(self.tokens)
                new[token_id] = dict(doc)
                self.tokens = new
                return ApiResult()
            if not any(isinstance(r, (NoNodeError, NodeExistsError)) for r in res):
                return ApiResult(UNKNOWN_SERVER_ERROR, f"Writing {path} failed: {res}")
        return ApiResult(UNKNOWN_SERVER_ERROR, f"Writing {path} kept racing with another writer.")

    async def delete(self, token_id: str) -> ApiResult:
        if not self.enabled:
            return ApiResult(UNKNOWN_SERVER_ERROR, "Delegation tokens are not enabled on this broker.")
        path = f"{TOKENS}/{token_id}"
        try:
            await self.bridge.delete(path)
        except NoNodeError:
            pass
        await self.bridge.create(f"{CHANGES}/{CHANGE_PREFIX}", token_id.encode("utf-8"), sequence=True)
        new = dict(self.tokens)
        new.pop(token_id, None)
        self.tokens = new
        return ApiResult()

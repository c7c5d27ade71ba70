"""ACLs and SCRAM credentials of a ZooKeeper cluster, as Kafka 3.x keeps them there.

How this works
--------------
* ACLs (only when ``authorizer.class.name`` is set, as Kafka's AclAuthorizer does it): LITERAL
  bindings in ``/kafka-acl/<ResourceType>/<name>``, PREFIXED ones in
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``, one znode per resource pattern holding
  ``{"version":1,"acls":[{"principal":..,"permissionType":"Allow","operation":"Read","host":"*"}]}``.
  At start every broker reads them all; afterwards it follows the change notifications
  ``/kafka-acl-changes/acl_changes_<seq>`` (text ``Topic:name``) and
  ``/kafka-acl-extended-changes/acl_changes_<seq>`` (JSON) with a kazoo child watch and re-reads
  the resource each names.  A write is a read-modify-write of the resource znodes conditional on
  their data version, committed with the notifications in one multi and retried when another
  broker changed a node in between, so concurrent creates through two brokers both survive.  An
  emptied resource node is deleted (conditionally too).
* SCRAM credentials: config keys ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` of ``/config/users/<user>``
  (user name sanitized as Kafka does), next to whatever else the node holds (quotas), with a
  ``/config/changes/config_change_<seq>`` notification ``{"version":2,"entity_path":"users/<user>"}``.
  All users are read at start; the owner's config-change processing calls ``user_changed``.
* Readers get snapshots: ``acls`` is an immutable tuple replaced on every change (the authorizer
  re-indexes when the identity changes); ``scram`` is a dict replaced, never mutated.
* Notifications older than 15 minutes are deleted while processing, as Kafka's brokers do.
"""
from __future__ import annotations

import asyncio
import logging
import random

from kazoo.exceptions import NoNodeError

from broker.security import acl as A
from controller.api import UNKNOWN_SERVER_ERROR, ApiResult
from controller.zookeeper import znodes as Z
from controller.zookeeper.zkbridge import new_notifications

log = logging.getLogger("odradek.zkcontroller.security")

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MAX_WRITE_ATTEMPTS = 50


def binding_to_entry(b: A.AclBinding) -> tuple[str, str, str, str]:
    return (b.principal, Z.camel(A.PERMISSION_TYPE_NAMES[b.permission]), Z.camel(A.OPERATION_NAMES[b.operation]),
            b.host)


def entry_to_binding(resource_type: int, name: str, pattern_type: int, entry) -> A.AclBinding:
    principal, perm, op, host = entry
    return A.AclBinding(resource_type, name, pattern_type, principal, host,
                        Z.uncamel(op, A.OPERATIONS, "operation"),
                        Z.uncamel(perm, A.PERMISSION_TYPES, "permission type"))


class ZkSecurityStore:
    """Owned by a ``ZkController``; used from its event loop only."""

    def __init__(self, bridge, acls_enabled: bool):
        self.bridge = bridge
        self.acls_enabled = acls_enabled
        self.acls: tuple = ()
        self._by_pattern: dict[tuple[int, str, int], tuple] = {}
        self.scram: dict[str, dict[str, str]] = {}
        self._last_change = {Z.ACL_CHANGES: -1, Z.ACL_EXTENDED_CHANGES: -1}
        self._acl_lock = asyncio.Lock()
        self._stopped = False

    # ------------------------------------------------------------------ start
    async def start(self) -> None:
        await self.load_users()
        if self.acls_enabled:
            for p in Z.ACL_PATHS:
                await self.bridge.ensure_path(p)
            await self.load_acls()

    def stop(self) -> None:
        self._stopped = True

    async def load_acls(self) -> None:
        """Arm the change watches, then read every ACL (start and new ZooKeeper session)."""
        b = self.bridge
        async with self._acl_lock:
            for path in (Z.ACL_CHANGES, Z.ACL_EXTENDED_CHANGES):
                children = await b.get_children(path, watch=b.watcher(self._changes_fired, path))
                seqs = [Z.sequence_number(c) for c in children if c.startswith(Z.ACL_CHANGE_PREFIX)]
                self._last_change[path] = max(seqs, default=-1)
            by_pattern: dict[tuple[int, str, int], tuple] = {}
            for pattern_type, (store, _changes) in Z.ACL_STORES.items():
                try:
                    rtypes = await b.get_children(store)
                except NoNodeError:
                    continue
                for rtype in rtypes:
                    try:
                        names = await b.get_children(f"{store}/{rtype}")
                    except NoNodeError:
                        continue
                    for name in names:
                        acls = await self._read_resource(rtype, name, pattern_type)
                        if acls:
                            by_pattern[acls[0].pattern] = acls
            self._by_pattern = by_pattern
            self._publish()
        log.info("Loaded %d ACL bindings for %d resources from ZooKeeper", len(self.acls), len(self._by_pattern))

    async def _read_resource(self, rtype: str, name: str, pattern_type: int, with_version: bool = False):
        path = Z.acl_resource_path(rtype, name, pattern_type)
        try:
            code = Z.uncamel(rtype, A.RESOURCE_TYPES, "resource type")
        except Z.ZnodeFormatError as e:
            log.warning("ignoring %s: %s", path, e)
            return (None, -1) if with_version else ()
        try:
            data, stat = await self.bridge.get(path)
        except NoNodeError:
            return ((), None) if with_version else ()
        try:
            acls = tuple(entry_to_binding(code, name, pattern_type, e) for e in Z.decode_acls(data, path))
        except Z.ZnodeFormatError as e:
            log.error("cannot read %s: %s", path, e)
            acls = ()
        return (acls, stat.version) if with_version else acls

    def _publish(self) -> None:
        self.acls = tuple(b for acls in self._by_pattern.values() for b in acls)

    def _set_resource(self, pattern: tuple[int, str, int], acls: tuple) -> None:
        if acls:
            self._by_pattern[pattern] = tuple(acls)
        else:
            self._by_pattern.pop(pattern, None)
        self._publish()

    # ------------------------------------------------------------------ ACL change notifications
    def _changes_fired(self, path: str) -> None:
        if not self._stopped:
            asyncio.ensure_future(self._process_changes(path))

    async def _process_changes(self, path: str) -> None:
        b = self.bridge
        async with self._acl_lock:
            try:
                children = await b.get_children(path, watch=b.watcher(self._changes_fired, path))
            except Exception as e:
                log.warning("reading %s failed: %s", path, e)
                return
            extended = path == Z.ACL_EXTENDED_CHANGES
            async for seq, node, data in new_notifications(b, path, children, Z.ACL_CHANGE_PREFIX,
                                                           self._last_change[path]):
                self._last_change[path] = seq
                try:
                    if data is None:
                        raise NoNodeError(node)
                    rtype, name, pattern_type = Z.decode_acl_change(data, extended)
                except (NoNodeError, Z.ZnodeFormatError, KeyError) as e:
                    log.debug("skipping ACL change %s: %s", node, e)
                    continue
                try:
                    code = Z.uncamel(rtype, A.RESOURCE_TYPES, "resource type")
                    acls = await self._read_resource(rtype, name, pattern_type)
                except Exception:
                    log.exception("applying ACL change %s failed", node)
                    continue
                self._set_resource((code, name, pattern_type), acls)
                log.debug("ACLs of %s %s (%s) reloaded: %d bindings", rtype, name,
                          A.PATTERN_TYPE_NAMES.get(pattern_type), len(acls))

    # ------------------------------------------------------------------ ACL writes
    async def create_acls(self, bindings: list) -> ApiResult:
        return await self._update_acls(bindings, add=True)

    async def delete_acls(self, bindings: list) -> ApiResult:
        return await self._update_acls(bindings, add=False)

    async def _update_acls(self, bindings: list, add: bool) -> ApiResult:
        if not self.acls_enabled:
            return ApiResult(UNKNOWN_SERVER_ERROR, "No authorizer is configured on this broker.")
        by_pattern: dict[tuple[int, str, int], list] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, []).append(b)
        last = None
        for attempt in range(MAX_WRITE_ATTEMPTS):
            ops = []          # (kind, path, data, version) for the multi
            results: dict[tuple[int, str, int], tuple] = {}
            for pattern, items in by_pattern.items():
                rt, name, pt = pattern
                rtype = Z.camel(A.RESOURCE_TYPE_NAMES[rt])
                cur, version = await self._read_resource(rtype, name, pt, with_version=True)
                if cur is None:
                    continue
                if add:
                    new = list(cur) + [b for b in dict.fromkeys(items) if b not in cur]
                else:
                    gone = set(items)
                    new = [b for b in cur if b not in gone]
                if new == list(cur):
                    results[pattern] = cur
                    continue
                path = Z.acl_resource_path(rtype, name, pt)
                if not new:
                    ops.append(("delete", path, None, version))
                elif version is None:
                    ops.append(("create", path, Z.encode_acls([binding_to_entry(b) for b in new]), None))
                else:
                    ops.append(("set", path, Z.encode_acls([binding_to_entry(b) for b in new]), version))
                change_path = Z.ACL_STORES[pt][1] + "/" + Z.ACL_CHANGE_PREFIX
                ops.append(("notify", change_path, Z.encode_acl_change(rtype, name, pt), None))
                results[pattern] = tuple(new)
            if not ops:
                return ApiResult()

            def build(t, ops=ops):
                for kind, path, data, version in ops:
                    if kind == "delete":
                        t.delete(path, version)
                    elif kind == "create":
                        t.create(path, data)
                    elif kind == "set":
                        t.set_data(path, data, version)
                    else:
                        t.create(path, data, sequence=True)
            res = await self.bridge.transaction(build)
            if not any(isinstance(r, Exception) for r in res):
                for pattern, acls in results.items():
                    self._set_resource(pattern, acls)
                n = len(bindings)
                log.info("%s %d ACL bindings on %d resources", "Added" if add else "Removed", n, len(results))
                return ApiResult()
            log.debug("ACL update raced with another writer (%s); retrying", res)
            last = res
            await asyncio.sleep(random.random() * 0.02 * (attempt + 1))
        log.warning("ACL update gave up after repeated failed ZooKeeper transactions: %s", last)
        return ApiResult(UNKNOWN_SERVER_ERROR, "Too many concurrent ACL updates; try again.")

    # ------------------------------------------------------------------ SCRAM credentials
    async def load_users(self, quiet: bool = False) -> None:
        scram: dict[str, dict[str, str]] = {}
        for child in await self.bridge.get_children(f"{Z.CONFIG}/users"):
            creds = await self._read_user(child)
            if creds:
                scram[Z.desanitize(child)] = creds
        self.scram = scram
        if scram and not quiet:
            log.info("Loaded SCRAM credentials of %d users from ZooKeeper", len(scram))

    async def _read_user(self, sanitized: str, with_version: bool = False):
        path = Z.config_path("users", sanitized)
        try:
            data, stat = await self.bridge.get(path)
            cfg = Z.decode_config(data, path)
        except NoNodeError:
            return ({}, None) if with_version else {}
        except Z.ZnodeFormatError as e:
            log.error("%s", e)
            return ({}, -2) if with_version else {}
        return (cfg, stat.version) if with_version else {k: v for k, v in cfg.items() if k in SCRAM_MECHANISMS}

    async def refresh_users(self, users) -> None:
        """Re-read the credentials of ``users`` (all users for None) from ZooKeeper."""
        if users is None:
            await self.load_users(quiet=True)
            return
        for user in dict.fromkeys(users):
            await self.user_changed(Z.sanitize(user))

    async def user_changed(self, entity: str) -> None:
        """A /config/changes notification for ``users/<entity>`` (quota entities nested under a user,
        ``alice/clients/app``, carry no credentials)."""
        if "/" in entity:
            return
        creds = await self._read_user(entity)
        user = Z.desanitize(entity)
        if creds == self.scram.get(user, {}):
            return
        new = dict(self.scram)
        if creds:
            new[user] = creds
        else:
            new.pop(user, None)
        self.scram = new
        log.info("SCRAM credentials of user %s changed (%s)", user, ", ".join(sorted(creds)) or "none left")

    async def alter_scram_credentials(self, upsertions, deletions) -> ApiResult:
        users = list(dict.fromkeys([u for u, _m, _t in upsertions] + [u for u, _m in deletions]))
        for attempt in range(MAX_WRITE_ATTEMPTS):
            ops = []
            after: dict[str, dict[str, str]] = {}
            for user in users:
                entity = Z.sanitize(user)
                cfg, version = await self._read_user(entity, with_version=True)
                if version == -2:
                    return ApiResult(UNKNOWN_SERVER_ERROR, f"The config of user {user} in ZooKeeper is unreadable.")
                cfg = dict(cfg)
                for u, mech in deletions:
                    if u == user:
                        cfg.pop(mech, None)
                for u, mech, text in upsertions:
                    if u == user:
                        cfg[mech] = text
                path = Z.config_path("users", entity)
                data = Z.encode_config(cfg)
                ops.append(("create", path, data) if version is None else ("set", path, data, version))
                ops.append(("notify", f"{Z.CONFIG_CHANGES}/{Z.CONFIG_CHANGE_PREFIX}",
                            Z.encode_config_change(f"users/{entity}")))
                after[user] = {k: v for k, v in cfg.items() if k in SCRAM_MECHANISMS}

            def build(t, ops=ops):
                for op in ops:
                    if op[0] == "create":
                        t.create(op[1], op[2])
                    elif op[0] == "set":
                        t.set_data(op[1], op[2], op[3])
                    else:
                        t.create(op[1], op[2], sequence=True)
            res = await self.bridge.transaction(build)
            if not any(isinstance(r, Exception) for r in res):
                new = dict(self.scram)
                for user, creds in after.items():
                    if creds:
                        new[user] = creds
                    else:
                        new.pop(user, None)
                self.scram = new
                log.info("Updated SCRAM credentials: %d upserted, %d deleted", len(upsertions), len(deletions))
                return ApiResult()
            log.debug("SCRAM credential update raced with another writer (%s); retrying", res)
            await asyncio.sleep(random.random() * 0.02 * (attempt + 1))
        return ApiResult(UNKNOWN_SERVER_ERROR, "Too many concurrent credential updates; try again.")

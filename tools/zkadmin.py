"""Direct ZooKeeper access for the tools' deprecated ZooKeeper modes (Kafka 3.x still offers them):
``kafka-acls.sh --authorizer-properties zookeeper.connect=...`` and ``kafka-configs.sh --zookeeper``.

The znodes are the ones a ZooKeeper-mode broker reads and writes (``controller/zookeeper/znodes.py``,
``controller/zookeeper/security_store.py``), with the same payloads and the same change
notifications, so running brokers pick the changes up:

* an ACL change rewrites ``/kafka-acl/<Type>/<name>`` (LITERAL) or
  ``/kafka-acl-extended/prefixed/<Type>/<name>`` (PREFIXED) conditionally on the znode's version,
  in one multi with an ``acl_changes_<seq>`` node under ``/kafka-acl-changes`` or
  ``/kafka-acl-extended-changes``, retried when a broker changed the node in between; a resource
  left without ACLs loses its znode;
* a config change rewrites ``/config/<type>/<entity>`` and adds a
  ``/config/changes/config_change_<seq>`` node (``{"version":2,"entity_path":"users/alice"}``);
  a user or client node left with no settings and no children is deleted, as Kafka's
  AdminZkClient does.

Synchronous (kazoo's threading handler): the tools are one-shot commands.
"""
from __future__ import annotations

import logging
import random
import time

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from broker.security import acl as A
from controller.zookeeper import znodes as Z
from controller.zookeeper.security_store import binding_to_entry, entry_to_binding

MAX_ATTEMPTS = 10
# kazoo reports every failed connection attempt as a warning; a tool reports the outcome itself.
logging.getLogger("kazoo").addHandler(logging.NullHandler())
DEFAULT_ENTITY = "<default>"


class ZkAdminError(Exception):
    """A failure to report to the operator (connection, unreadable znode, too many races)."""


def split_connect(connect: str) -> tuple[str, str]:
    """``h1:2181,h2:2181/kafka`` -> (``h1:2181,h2:2181``, ``/kafka``); no chroot -> ``""``."""
    hosts, sep, chroot = connect.strip().partition("/")
    chroot = ("/" + chroot.strip("/")) if sep and chroot.strip("/") else ""
    return hosts, chroot


# the ZooKeeper TLS keys a tool takes (Kafka's ZkClientConfig names, as in server.properties)
TLS_KEYS = ("zookeeper.ssl.client.enable", "zookeeper.clientCnxnSocket", "zookeeper.ssl.keystore.location",
            "zookeeper.ssl.keystore.password", "zookeeper.ssl.keystore.type", "zookeeper.ssl.truststore.location",
            "zookeeper.ssl.truststore.password", "zookeeper.ssl.truststore.type",
            "zookeeper.ssl.endpoint.identification.algorithm", "zookeeper.ssl.crl.enable",
            "zookeeper.ssl.ocsp.enable", "zookeeper.ssl.protocol", "zookeeper.ssl.enabled.protocols",
            "zookeeper.ssl.cipher.suites")


def zk_tls_file(path: str) -> dict[str, str]:
    """The ZooKeeper TLS settings of a ``--zk-tls-config-file`` (other keys are ignored, as Kafka's
    tools ignore them)."""
    from tools.common import ToolError, load_properties
    try:
        props = load_properties(path)
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e}") from None
    return {k: v for k, v in props.items() if k in TLS_KEYS}


class ZkAdmin:
    """One ZooKeeper session for a tool run.  ``create_chroot``: create a missing chroot first (Kafka's
    authorizer does; without it nothing could be written under the chroot)."""

    def __init__(self, connect: str, session_timeout_ms: int = 30000, connection_timeout_ms: int = 30000,
                 create_chroot: bool = True, set_acl: bool = False, tls_props: dict | None = None):
        # The ZooKeeper login of Kafka's tools: the JAAS file of KAFKA_OPTS (Client section); with
        # one, the tools create secure znodes as Kafka's do (JaasUtils.isZkSaslEnabled), and
        # zookeeper.set.acl=true without one is refused (controller/zookeeper/zkauth.py).
        from broker.config import ConfigError
        from controller.zookeeper.zkauth import zk_security
        tls = dict(tls_props or {})
        tls.setdefault("zookeeper.ssl.endpoint.identification.algorithm", "HTTPS")
        try:
            self.security = zk_security(set_acl, get=tls.get)
        except ConfigError as e:
            raise ZkAdminError(str(e)) from None
        self.security.set_acl = self.security.set_acl or self.security.identity is not None
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self.create_chroot = create_chroot
        self.zk: KazooClient | None = None

    # ------------------------------------------------------------------ session
    def _client(self, hosts: str) -> KazooClient:
        zk = KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000.0,
                         connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 1.0},
                         **self.security.client_args())
        try:
            zk.start(timeout=self.connection_timeout_ms / 1000.0)
        except Exception:
            try:
                zk.stop()
                zk.close()
            except Exception:
                pass
            raise ZkAdminError("Timed out waiting for connection while in state: CONNECTING") from None
        return zk

    def start(self) -> "ZkAdmin":
        hosts, chroot = split_connect(self.connect)
        if not hosts:
            raise ZkAdminError(f"Invalid ZooKeeper connect string {self.connect!r}")
        if chroot and self.create_chroot:
            root = self._client(hosts)
            try:
                root.ensure_path(chroot)
            finally:
                root.stop()
                root.close()
        self.zk = self._client(hosts + chroot)
        return self

    def close(self) -> None:
        if self.zk is not None:
            try:
                self.zk.stop()
                self.zk.close()
            finally:
                self.zk = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ ACLs
    def ensure_acl_paths(self) -> None:
        """The empty store and notification nodes a starting AclAuthorizer creates."""
        for p in Z.ACL_PATHS:
            self.zk.ensure_path(p)

    def _read_resource(self, pattern: tuple[int, str, int]) -> tuple[tuple, int | None]:
        """(bindings, data version) of one resource pattern; version None when the znode is absent."""
        rt, name, pt = pattern
        path = Z.acl_resource_path(Z.camel(A.RESOURCE_TYPE_NAMES[rt]), name, pt)
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return (), None
        try:
            entries = Z.decode_acls(data, path)
        except Z.ZnodeFormatError as e:
            raise ZkAdminError(f"Cannot read {path}: {e}") from None
        return tuple(dict.fromkeys(entry_to_binding(rt, name, pt, e) for e in entries)), stat.version

    def acls(self) -> list[A.AclBinding]:
        """Every ACL binding stored in ZooKeeper (resources in ZooKeeper's child order)."""
        out: list[A.AclBinding] = []
        for pt, (store, _changes) in Z.ACL_STORES.items():
            try:
                rtypes = sorted(self.zk.get_children(store))
            except NoNodeError:
                continue
            for rtype in rtypes:
                try:
                    code = Z.uncamel(rtype, A.RESOURCE_TYPES, "resource type")
                except Z.ZnodeFormatError:
                    continue
                try:
                    names = sorted(self.zk.get_children(f"{store}/{rtype}"))
                except NoNodeError:
                    continue
                for name in names:
                    out.extend(self._read_resource((code, name, pt))[0])
        return out

    def update_resource(self, pattern: tuple[int, str, int], change) -> bool:
        """Apply ``change(current bindings) -> new bindings`` to one resource, conditionally on the
        znode's version (retried after a concurrent writer), with the change notification in the same
        multi.  Returns whether anything changed."""
        rt, name, pt = pattern
        rtype = Z.camel(A.RESOURCE_TYPE_NAMES[rt])
        path = Z.acl_resource_path(rtype, name, pt)
        notify = Z.ACL_STORES[pt][1] + "/" + Z.ACL_CHANGE_PREFIX
        for attempt in range(MAX_ATTEMPTS):
            cur, version = self._read_resource(pattern)
            new = tuple(dict.fromkeys(change(cur)))
            if set(new) == set(cur):
                return False
            t = self.zk.transaction()
            if not new:
                t.delete(path, version)
            elif version is None:
                t.create(path, Z.encode_acls([binding_to_entry(b) for b in new]))
            else:
                t.set_data(path, Z.encode_acls([binding_to_entry(b) for b in new]), version)
            t.create(notify, Z.encode_acl_change(rtype, name, pt), sequence=True)
            results = t.commit()
            if not any(isinstance(r, Exception) for r in results):
                return True
            time.sleep(0.1 + random.random() * 0.05)
        raise ZkAdminError(f"Failed to update ACLs for {A.pattern_text(*pattern)} after trying a maximum "
                           f"of {MAX_ATTEMPTS} times")

    def create_acls(self, bindings: list[A.AclBinding]) -> None:
        by_pattern: dict[tuple, list] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, []).append(b)
        for pattern, items in by_pattern.items():
            self.update_resource(pattern, lambda cur, items=items: list(cur) + items)

    def delete_acls(self, filters: list[A.AclFilter]) -> list[A.AclBinding]:
        """Remove every stored binding some filter matches; returns the removed bindings."""
        patterns = list(dict.fromkeys(b.pattern for b in self.acls() if any(f.matches(b) for f in filters)))
        removed: list[A.AclBinding] = []
        for pattern in patterns:
            gone: list[A.AclBinding] = []

            def change(cur, gone=gone):
                gone[:] = [b for b in cur if any(f.matches(b) for f in filters)]
                return [b for b in cur if b not in gone]
            if self.update_resource(pattern, change):
                removed.extend(gone)
        return removed

    # ------------------------------------------------------------------ entity configs
    def entity_config(self, entity_type: str, entity: str) -> dict[str, str]:
        """The settings of ``/config/<entity_type>/<entity>`` (``entity`` sanitized; may be
        ``alice/clients/app``); {} when absent."""
        path = Z.config_path(entity_type, entity)
        try:
            data, _stat = self.zk.get(path)
        except NoNodeError:
            return {}
        try:
            return Z.decode_config(data, path)
        except Z.ZnodeFormatError as e:
            raise ZkAdminError(str(e)) from None

    def entities(self, entity_type: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(f"{Z.CONFIG}/{entity_type}"))
        except NoNodeError:
            return []

    def change_entity_config(self, entity_type: str, entity: str, configs: dict[str, str]) -> None:
        """Replace the settings of one entity and announce it in ``/config/changes``."""
        path = Z.config_path(entity_type, entity)
        deleted = False
        if entity_type in ("users", "clients", "ips") and not configs:
            try:
                if not self.zk.get_children(path):
                    self.zk.delete(path)
                    deleted = True
            except NoNodeError:
                deleted = True
            except NotEmptyError:
                pass
        if not deleted:
            data = Z.encode_config(configs)
            for _ in range(MAX_ATTEMPTS):
                try:
                    self.zk.set(path, data)
                    break
                except NoNodeError:
                    try:
                        self.zk.create(path, data, makepath=True, acl=self.security.acl_for(path))
                        break
                    except NodeExistsError:
                        continue
                except BadVersionError:
                    continue
        self.zk.ensure_path(Z.CONFIG_CHANGES)
        self.zk.create(f"{Z.CONFIG_CHANGES}/{Z.CONFIG_CHANGE_PREFIX}",
                       Z.encode_config_change(f"{entity_type}/{entity}"), sequence=True)

    def registered_brokers(self) -> list[int]:
        try:
            return sorted(int(c) for c in self.zk.get_children(Z.BROKER_IDS) if c.isdigit())
        except NoNodeError:
            return []

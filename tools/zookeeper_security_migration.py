"""zookeeper-security-migration.sh: set the ACLs of a cluster's existing znodes, the step that
follows turning ``zookeeper.set.acl`` on (``secure``) or precedes turning it off (``unsecure``).

* The tool logs in to ZooKeeper as the brokers do: the JAAS file named in ``KAFKA_OPTS``
  (``-Djava.security.auth.login.config=...``, its ``Client`` section) or a client certificate from
  ``--zk-tls-config-file``.  Without either it stops, as Kafka's does: nobody could own the znodes.
* ``secure``: every znode under Kafka's roots gets everything for the tool's identity and read
  for anyone, and nothing for anyone else under the credential roots (``/config/users``,
  ``/config/brokers``, ``/delegation_token``); these are the ACLs a broker with
  ``zookeeper.set.acl=true`` gives the znodes it creates (``controller/zookeeper/zkauth.py``).
  ``unsecure``: everything for anyone.
* The roots are Kafka's (its ``ZkData.SecureRootPaths``); a missing one is created with the new ACL,
  except ``/controller``, which only exists while a controller is elected.  The chroot itself
  (``/`` of the connect string) gets the ACL too, without its children: anything else stored in
  the same ZooKeeper is left alone, ``/consumers`` (the old consumers' open directory) included.
* ``--enable.path.check`` stops before changing anything when a root is missing (a wrong chroot,
  most likely); without it the missing roots are only listed.

The tree is walked breadth first with kazoo's asynchronous calls, one level at a time: a cluster
with thousands of partitions has tens of thousands of znodes.  A znode deleted in between is
skipped with a warning; any other failure (a znode the tool's identity may not change, a lost
session) stops the tool with status 1.
"""
from __future__ import annotations

import sys

import os

from broker.security.jaas import java_system_properties
from tools.common import OptionParser, ToolError, parse_or_exit

DESCRIPTION = ("ZooKeeper Migration Tool Help. This tool updates the ACLs of znodes as part of the "
               "process of setting up ZooKeeper authentication.")

# Kafka's ZkData.SecureRootPaths, in its order (the ACL stores' paths last)
SECURE_ROOT_PATHS = (
    "/admin", "/brokers", "/cluster", "/config", "/controller", "/controller_epoch",
    "/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification",
    "/delegation_token", "/kafka-acl-extended", "/migration", "/feature",
    "/kafka-acl", "/kafka-acl-changes", "/kafka-acl-extended/prefixed", "/kafka-acl-extended-changes",
)
CONTROLLER_PATH = "/controller"
NO_LOGIN = ("No JAAS configuration file has been specified and no TLS client certificate has been specified. "
            "Please make sure that you set the system property java.security.auth.login.config or provide a "
            "ZooKeeper client TLS configuration via --zk-tls-config-file <filename> identifying at least "
            "zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and zookeeper.ssl.keystore.location")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Print usage information.")
    p.add("version", "Display Kafka version.")
    p.add("zookeeper.acl", "Indicates whether to make the Kafka znodes in ZooKeeper secure or unsecure. The "
                           "options are 'secure' and 'unsecure'", "")
    p.add("zookeeper.connect", "Sets the ZooKeeper connect string (ensemble). This parameter takes a "
                               "comma-separated list of host:port pairs.", "", default="localhost:2181")
    p.add("zookeeper.session.timeout", "Sets the ZooKeeper session timeout.", "", default=30000, type=int)
    p.add("zookeeper.connection.timeout", "Sets the ZooKeeper connection timeout.", "", default=30000,
          type=int)
    p.add("enable.path.check", "Checks if all the root paths exist in ZooKeeper before migration. If not, exit "
                               "the command.")
    p.add("zk-tls-config-file", "Identifies the file where ZooKeeper client TLS connectivity properties are "
                                "defined.  Any properties other than zookeeper.ssl.* and "
                                "zookeeper.clientCnxnSocket are ignored.", "ZooKeeper TLS configuration")
    return p


def target_acl(secure: bool, path: str) -> list:
    """The ACL ``path`` gets: the one a broker with ``zookeeper.set.acl=true`` gives a new znode
    there (``controller/zookeeper/zkauth.py``), or everything for anyone."""
    from kazoo.security import OPEN_ACL_UNSAFE

    from controller.zookeeper.zkauth import ZkSecurity
    if not secure:
        return list(OPEN_ACL_UNSAFE)
    policy = ZkSecurity(set_acl=True)
    return policy.acl_for(path) or policy.default_acl()


def _child(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


class Migrator:
    def __init__(self, zk, secure: bool, out=sys.stdout):
        self.zk = zk
        self.secure = secure
        self.out = out
        self.changed = 0

    def set_acl(self, paths: list[str], recurse: bool) -> None:
        """Set the ACL of ``paths`` (and, with ``recurse``, of everything below them), one tree
        level per round of asynchronous calls."""
        from kazoo.exceptions import NoNodeError
        level = list(paths)
        while level:
            pending = [(p, self.zk.set_acls_async(p, target_acl(self.secure, p)),
                        self.zk.get_children_async(p) if recurse else None) for p in level]
            level = []
            for path, set_result, children in pending:
                try:
                    set_result.get()
                    self.changed += 1
                except NoNodeError:
                    print(f"Warning: znode {path} is gone; it may have been deleted meanwhile", file=self.out)
                    continue
                except Exception as e:
                    raise ToolError(f"Cannot set the ACL of {path}: {_describe(e)}") from None
                if children is None:
                    continue
                try:
                    names = children.get()
                except NoNodeError:
                    continue
                except Exception as e:
                    raise ToolError(f"Cannot list the children of {path}: {_describe(e)}") from None
                level.extend(_child(path, n) for n in sorted(names))

    def run(self, enable_path_check: bool) -> int:
        zk = self.zk
        self.set_acl(["/"], recurse=False)
        missing = [p for p in SECURE_ROOT_PATHS if zk.exists(p) is None]
        if missing:
            print(f"Warning: The following secure root paths do not exist in ZooKeeper: {','.join(missing)}",
                  file=self.out)
            print("That might be due to an incorrect chroot is specified when executing the command.", file=self.out)
            if enable_path_check:
                print("Exit the command.", file=self.out)
                return 1
        roots = []
        for path in SECURE_ROOT_PATHS:
            if path == CONTROLLER_PATH and path in missing:
                continue        # only while a controller is elected; creating it would be wrong
            if path in missing:
                try:
                    zk.ensure_path(path, acl=target_acl(self.secure, path))
                except Exception as e:
                    raise ToolError(f"Cannot create {path}: {_describe(e)}") from None
            roots.append(path)
        covered = [r for r in roots if not any(r.startswith(o + "/") for o in roots)]
        self.set_acl(covered, recurse=True)
        return 0


def _describe(e: Exception) -> str:
    name = type(e).__name__
    return {"NoAuthError": "not authorized (NoAuth): the tool's ZooKeeper identity may not change it",
            "InvalidACLError": "invalid ACL (the tool's ZooKeeper identity is not authenticated)",
            "SessionExpiredError": "ZooKeeper session expired while changing ACLs",
            "ConnectionLoss": "the connection to ZooKeeper was lost"}.get(name, f"{name} {e}".strip())


def execute(o) -> int:
    from broker.config import ConfigError
    from controller.zookeeper.zkauth import zk_security
    from tools.zkadmin import ZkAdmin, ZkAdminError, zk_tls_file

    tls = zk_tls_file(o["zk-tls-config-file"]) if o.has("zk-tls-config-file") else {}
    tls.setdefault("zookeeper.ssl.endpoint.identification.algorithm", "HTTPS")
    try:
        security = zk_security(False, get=tls.get)
    except ConfigError as e:
        raise ToolError(str(e)) from None
    jaas = java_system_properties(os.environ.get("KAFKA_OPTS")).get("java.security.auth.login.config")
    if not jaas and security.tls is None:
        print(f"ERROR: {NO_LOGIN}", file=sys.stderr)
        return 1
    if security.identity is None:
        if jaas:
            print(f"ERROR: Security isn't enabled, most likely the file isn't set properly: {jaas}")
        else:
            print("ERROR: the ZooKeeper TLS settings give no client certificate (zookeeper.ssl.keystore.location)",
                  file=sys.stderr)
        return 1
    mode = o["zookeeper.acl"] if o.has("zookeeper.acl") else None
    if mode not in ("secure", "unsecure"):
        build_parser().usage_exit(DESCRIPTION)
    secure = mode == "secure"
    try:
        admin = ZkAdmin(o["zookeeper.connect"], o["zookeeper.session.timeout"], o["zookeeper.connection.timeout"],
                        create_chroot=False, set_acl=secure, tls_props=tls).start()
    except ZkAdminError as e:
        raise ToolError(str(e)) from None
    try:
        migrator = Migrator(admin.zk, secure)
        status = migrator.run(o.has("enable.path.check"))
    finally:
        admin.close()
    if status == 0:
        print(f"Set the ACLs of {migrator.changed} znodes ({mode}) as {admin.security.identity}.")
    return status


def main(argv=None) -> int:
    from tools.common import run
    p = build_parser()

    def body(args):
        return execute(parse_or_exit(p, args))

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="ERROR: ")


if __name__ == "__main__":
    sys.exit(main())

"""The broker's ZooKeeper identity and znode ACLs (``zookeeper.set.acl``), as Kafka sets them up.

How this works
--------------
* **Identity.** Kafka's ZooKeeper client logs in with SASL when the JVM's JAAS file
  (``-Djava.security.auth.login.config=...``, given to the broker's scripts in ``KAFKA_OPTS``)
  has a ``Client`` section (another name with ``-Dzookeeper.sasl.clientconfig``;
  ``-Dzookeeper.sasl.client=false`` turns it off).  Odradek reads the same: ``KAFKA_OPTS`` from
  the environment, then the section.  ZooKeeper's DigestLoginModule (``username``,
  ``password``) becomes a DIGEST-MD5 login of kazoo (through the ``pure-sasl`` package), for the
  service ``-Dzookeeper.sasl.client.username`` (default ``zookeeper``).  A Kerberos
  (Krb5LoginModule) section is refused: kazoo's Kerberos path needs a package Odradek does not
  carry.
* **ACLs.** With ``zookeeper.set.acl=true`` every znode the broker creates gets Kafka's ACLs:
  everything for its creator (the SASL identity) and read for anyone, except under the sensitive
  roots (``/config/users``, ``/config/brokers``, ``/delegation_token``: credentials and secrets),
  which only the creator may read.  Without a SASL identity the setting is refused at start-up,
  as Kafka refuses it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from broker.config import ConfigError

DIGEST_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token")


@dataclass
class ZkSecurity:
    sasl_options: dict | None = None
    set_acl: bool = False
    identity: str | None = None          # for log lines: "sasl:<user>"

    def default_acl(self):
        """The ACL of a znode kazoo creates without one (None: kazoo's open one)."""
        if not self.set_acl:
            return None
        from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE
        return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)

    def acl_for(self, path: str):
        """The ACL for a new znode at ``path`` (relative to the chroot), or None for the default."""
        if not self.set_acl:
            return None
        if any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS):
            from kazoo.security import CREATOR_ALL_ACL
            return list(CREATOR_ALL_ACL)
        return None


def zk_security(set_acl: bool, environ=None) -> ZkSecurity:
    """The broker's ZooKeeper login (from ``KAFKA_OPTS``'s JAAS file) and ACL policy; ConfigError
    for a JAAS file that cannot be used, or ``zookeeper.set.acl`` without a SASL identity."""
    from broker.security.jaas import java_system_properties, parse_jaas_file
    env = os.environ if environ is None else environ
    props = java_system_properties(env.get("KAFKA_OPTS"))
    sasl = None
    identity = None
    path = props.get("java.security.auth.login.config")
    enabled = props.get("zookeeper.sasl.client", "true").strip().lower() != "false"
    section = props.get("zookeeper.sasl.clientconfig", "Client")
    why = "no JAAS file is given (KAFKA_OPTS=-Djava.security.auth.login.config=...)"
    if path and enabled:
        try:
            with open(path, encoding="utf-8") as f:
                sections = parse_jaas_file(f.read())
        except OSError as e:
            raise ConfigError(f"cannot read the JAAS file {path}: {e}", "java.security.auth.login.config") from None
        entry = sections.get(section)
        if entry is None:
            why = f"the JAAS file {path} has no {section} section"
        else:
            module, opts = entry
            if module == KRB5_MODULE:
                raise ConfigError(f"the {section} section of {path} logs in to ZooKeeper with Kerberos, which "
                                  "Odradek's ZooKeeper client does not support; use ZooKeeper's DigestLoginModule",
                                  "java.security.auth.login.config")
            if module != DIGEST_MODULE:
                raise ConfigError(f"the {section} section of {path} names {module}; expected {DIGEST_MODULE}",
                                  "java.security.auth.login.config")
            if not opts.get("username") or opts.get("password") is None:
                raise ConfigError(f"the {section} section of {path} needs username and password",
                                  "java.security.auth.login.config")
            try:
                import puresasl  # noqa: F401  (kazoo's SASL needs it)
            except ImportError:
                raise ConfigError("a SASL login to ZooKeeper needs the pure-sasl package",
                                  "java.security.auth.login.config") from None
            sasl = {"mechanism": "DIGEST-MD5", "username": opts["username"], "password": opts["password"],
                    "service": props.get("zookeeper.sasl.client.username", "zookeeper")}
            identity = f"sasl:{opts['username']}"
    elif path:
        why = "zookeeper.sasl.client is false"
    if set_acl and sasl is None:
        raise ConfigError("zookeeper.set.acl is true, but there is no authenticated ZooKeeper identity to own the "
                          f"znodes: {why}. Give a JAAS file with a {section} section ({DIGEST_MODULE}) or set "
                          "zookeeper.set.acl to false", "zookeeper.set.acl")
    return ZkSecurity(sasl, set_acl, identity)

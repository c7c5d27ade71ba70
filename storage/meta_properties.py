"""``meta.properties``: what a log directory says about the node and cluster it belongs to.

Two versions, as in Kafka:

* **v0** (ZooKeeper mode, and the embedded store without ``process.roles``): ``version=0``,
  ``broker.id``, ``cluster.id``; written by the log manager when it first opens a directory.
* **v1** (KRaft mode): ``version=1``, ``node.id``, ``cluster.id``, ``directory.id`` (a random
  Kafka UUID per directory); written only by ``kafka-storage.sh format``.  A broker whose
  configuration has ``process.roles`` refuses to start while any of its log directories (or
  ``metadata.log.dir``) lacks one, as Kafka's KRaft server does (``check_formatted``); a v0
  file is taken too (its ``broker.id`` as the node id), as Kafka takes it.
"""
from __future__ import annotations

import os

from storage.checkpoint import write_atomic
from storage.errors import StorageError

META_PROPERTIES = "meta.properties"


def read_properties(path: str) -> dict:
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            k, sep, v = line.partition("=")
            if sep:
                out[k.strip()] = v.strip()
    return out


def read_meta(directory: str) -> dict | None:
    """The directory's meta.properties as a dict, None when it has none."""
    path = os.path.join(directory, META_PROPERTIES)
    if not os.path.exists(path):
        return None
    return read_properties(path)


def write_kraft_meta(directory: str, node_id: int, cluster_id: str, directory_id: str) -> None:
    """Write a v1 meta.properties (KRaft) into ``directory`` (created when missing)."""
    os.makedirs(directory, exist_ok=True)
    text = (f"#\n#Written by Odradek's kafka-storage.sh\nnode.id={node_id}\ndirectory.id={directory_id}\n"
            f"version=1\ncluster.id={cluster_id}\n")
    write_atomic(os.path.join(directory, META_PROPERTIES), text.encode())


def metadata_log_dir(cfg) -> str:
    """``metadata.log.dir``, else the first of ``log.dirs``: where the embedded store lives."""
    return cfg.get("metadata.log.dir") or cfg.log_dirs()[0]


def kraft_directories(cfg) -> list[str]:
    """Every directory a KRaft node keeps meta.properties in: the log dirs and the metadata dir."""
    dirs = list(cfg.log_dirs())
    meta = metadata_log_dir(cfg)
    if meta not in dirs:
        dirs.append(meta)
    return dirs


class NotFormatted(StorageError):
    """A KRaft node's directory lacks its meta.properties, or they disagree."""


def check_formatted(cfg) -> str:
    """The cluster id of a KRaft node's formatted directories; NotFormatted (Kafka's messages)
    when one has no meta.properties, or names another node or cluster than the others."""
    node_id = cfg.broker_id             # node.id (broker.id is its synonym)
    cluster = None
    for d in kraft_directories(cfg):
        props = read_meta(d)
        if props is None:
            raise NotFormatted(f"No `meta.properties` found in {d} (have you run `kafka-storage.sh` "
                               "to format the directory?)")
        path = os.path.join(d, META_PROPERTIES)
        version = props.get("version", "0")
        if version not in ("0", "1"):
            raise NotFormatted(f"Unknown meta.properties version {version} in {path}")
        cid = props.get("cluster.id")
        if not cid:
            raise NotFormatted(f"Error: cluster ID not found in {d}")
        # a v0 file (a directory of a broker run without process.roles) names the node broker.id;
        # Kafka's KRaft server takes it as well
        stored = props.get("node.id", props.get("broker.id")) if version == "1" else props.get("broker.id")
        if stored is None:
            raise NotFormatted(f"Error: node ID not found in {d}")
        if int(stored) != node_id:
            raise NotFormatted(f"Stored node id {stored} doesn't match previous node id {node_id} in "
                               f"{path}. If you moved your data, make sure your configured node id matches. If you "
                               "intend to create a new node, you should remove all data in your data directories.")
        if cluster is not None and cid != cluster:
            raise NotFormatted(f"Invalid cluster.id in: {path}. Expected {cluster}, but read {cid}")
        cluster = cid
    return cluster

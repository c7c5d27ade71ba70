"""A broker process on a KRaft configuration (``process.roles=broker,controller``, one combined
node on the embedded store), formatted the way ``kafka-storage.sh format`` formats it: a v1
meta.properties with a new cluster id and directory id in its log dir."""
from __future__ import annotations

from controller.api import random_kafka_uuid, uuid_to_base64
from storage.meta_properties import write_kraft_meta

from .broker import BrokerProcess
from .net import free_port


def kraft_broker_process(workdir, *, node_id: int = 1, props: dict | None = None, standalone: bool = False,
                         controller_host: str = "127.0.0.1", formatted: bool = True,
                         name: str = "kraft-broker") -> BrokerProcess:
    """The broker (not started).  ``standalone``: ``controller.quorum.bootstrap.servers`` (a
    dynamic quorum formatted ``--standalone``) instead of ``controller.quorum.voters``;
    ``controller_host``: the host of the CONTROLLER listener in ``advertised.listeners``.
    Sets ``controller_port``, and with ``formatted`` ``cluster_id`` and ``directory_id``."""
    port, ctl = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{ctl}"
    advertised = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://{controller_host}:{ctl}"
    quorum = ({"controller.quorum.bootstrap.servers": f"{controller_host}:{ctl}"} if standalone
              else {"controller.quorum.voters": f"{node_id}@{controller_host}:{ctl}"})
    b = BrokerProcess(workdir, port=port, use_defaults=False, name=name, props={
        "process.roles": "broker,controller", "node.id": node_id, **quorum,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT", "num.partitions": 1, "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 4, "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1, "transaction.state.log.num.partitions": 4,
        "group.initial.rebalance.delay.ms": 0, **(props or {})},
        overrides={"listeners": listeners, "advertised.listeners": advertised})
    b.controller_port = ctl
    b.node_id = node_id
    if formatted:
        b.cluster_id = uuid_to_base64(random_kafka_uuid())
        b.directory_id = uuid_to_base64(random_kafka_uuid())
        write_kraft_meta(str(b.log_dir), node_id, b.cluster_id, b.directory_id)
    return b

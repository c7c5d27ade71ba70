"""``control.plane.listener.name`` (KIP-291) on a ZooKeeper cluster: the controller's requests to
the brokers (LeaderAndIsr, UpdateMetadata, StopReplica) and the brokers' requests to the
controller (AlterPartition, ControlledShutdown) go through a listener of their own, here one
with SASL/PLAIN, while clients and replica fetchers use PLAINTEXT.  Which listener the
controller's connections reached is read from each broker's connection-count gauge."""
from __future__ import annotations

import pytest

from tests.support.metrics import expose, scrape, val
from tests.support.sasl import jaas_config

pytestmark = pytest.mark.cluster

CTL = ("ctl", "ctl-secret")


def _connections(port: int, listener: str) -> float:
    return val(scrape(f"http://127.0.0.1:{port}/metrics"),
               "kafka_server_socketservermetrics_connection_count", listener=listener)


def test_controller_requests_use_the_control_plane_listener(cluster_factory):
    c = cluster_factory(3, start=False, props={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL:SASL_PLAINTEXT",
        "control.plane.listener.name": "CONTROL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.control.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.control.plain.sasl.jaas.config": jaas_config(login=CTL, users=(CTL,)),
        "controlled.shutdown.enable": "true",
    })
    c.add_listener("CONTROL")
    metrics = expose(c.brokers)
    c.start()
    for b in c.brokers.values():
        assert "controller requests go through listener CONTROL (SASL_PLAINTEXT, SASL/PLAIN as ctl)" in b.log_tail(200)

    # the controller reaches every broker on CONTROL, the only listener no client uses
    c.create_topic("cp", partitions=3, rf=3)
    for p in range(3):
        c.wait_for_isr("cp", p, [1, 2, 3])
    c.wait_for(lambda: all(_connections(metrics[i], "CONTROL") >= 1 for i in c.brokers), 30,
               "a CONTROL connection on every broker")

    from confluent_kafka import Consumer, Producer, TopicPartition
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(30):
        p.produce("cp", b"before-%d" % i, partition=i % 3)
    assert p.flush(30) == 0

    # a controlled shutdown (the broker asks the controller over CONTROL) and a broker lost:
    # the controller moves the leaders with requests on CONTROL, the producer goes on
    ctrl = c.controller_id()
    other = next(i for i in c.brokers if i != ctrl)
    assert c.stop(other) == 0
    assert "controlled shutdown succeeded" in c.brokers[other].log_tail(300).lower()
    for part in range(3):
        assert c.wait_for_leader("cp", part, not_in=[other]) != other
    c.kill(ctrl)
    c.wait_for(lambda: c.controller_id() not in (-1, ctrl), 60, "a new controller")
    for part in range(3):
        c.wait_for_leader("cp", part, not_in=[other, ctrl])
    survivor = next(i for i in c.brokers if i not in (ctrl, other))
    p = Producer({"bootstrap.servers": c.brokers[survivor].bootstrap, "acks": "1"})
    for i in range(30):
        p.produce("cp", b"after-%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    assert _connections(metrics[survivor], "CONTROL") >= 1

    cons = Consumer({"bootstrap.servers": c.brokers[survivor].bootstrap, "group.id": "cp",
                     "enable.auto.commit": False})
    cons.assign([TopicPartition("cp", part, 0) for part in range(3)])
    got = []
    for _ in range(60):
        got += [m.value() for m in cons.consume(100, timeout=0.5) if m.error() is None]
        if len(got) >= 60:
            break
    cons.close()
    assert sorted(got) == sorted([b"before-%d" % i for i in range(30)] + [b"after-%d" % i for i in range(30)])

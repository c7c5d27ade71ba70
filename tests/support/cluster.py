"""Cluster: a ZooKeeper-coordinated Odradek cluster for tests (real ZooKeeper + N broker
processes on loopback ports, each with its own log dir), with fault-injection helpers.

    cluster = Cluster(tmp_path, zookeeper, n=3)
    cluster.start()
    cluster.create_topic("t", partitions=3, rf=3)
    leader = cluster.leader("t", 0)
    cluster.kill(leader); cluster.wait_for_leader("t", 0, not_in={leader})
    cluster.start_broker(leader)

Fault helpers: ``kill`` (SIGKILL), ``stop`` (SIGTERM: controlled shutdown), ``pause``/``resume``
(SIGSTOP/SIGCONT), ``cut``/``heal`` (with ``lan=NetnsLan()``: each broker runs in its own network
namespace and ``cut`` takes its link down, see tests/support/netns.py), ``expire_session`` (closes the broker's ZooKeeper session from a second
client that attaches to it with the broker's session id and password, which the broker writes
to ``<workdir>/zk-session`` when ODRADEK_ZK_SESSION_FILE is set, as it is here).
ZooKeeper state is read with kazoo (``zk()``, ``partition_state``, ``controller_id``).
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Iterable, Mapping

from .broker import BrokerProcess
from .net import LOOPBACK, free_port
from .zookeeper import ZooKeeperProcess

CLUSTER_PROPS: dict[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "4000",
    "replica.fetch.wait.max.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "500",
    "auto.leader.rebalance.enable": "false",
    "auto.create.topics.enable": "true",
}


class Cluster:
    def __init__(self, workdir, zookeeper: ZooKeeperProcess, n: int = 3, *,
                 props: Mapping[str, object] | None = None, racks: Mapping[int, str] | None = None,
                 chroot: str | None = None, lan=None):
        self.lan = lan              # tests.support.netns.NetnsLan: each broker in its own namespace
        self.workdir = Path(workdir)
        self.zookeeper = zookeeper
        self.chroot = chroot or zookeeper.new_chroot()
        self.connect = zookeeper.connect_string(self.chroot)
        self.props = dict(CLUSTER_PROPS)
        self.props.update({k: str(v) for k, v in (props or {}).items()})
        self.racks = dict(racks or {})
        self.brokers: dict[int, BrokerProcess] = {}
        self._zk = None
        for i in range(1, n + 1):
            self.add_broker(i)

    # -- brokers ---------------------------------------------------------------------------
    def add_broker(self, broker_id: int, props: Mapping[str, object] | None = None) -> BrokerProcess:
        p = dict(self.props)
        p.update({"broker.id": str(broker_id), "zookeeper.connect": self.connect})
        if broker_id in self.racks:
            p["broker.rack"] = self.racks[broker_id]
        p.update({k: str(v) for k, v in (props or {}).items()})
        wd = self.workdir / f"broker{broker_id}"
        if self.lan is not None:
            import sys
            self.lan.add(broker_id)
            b = BrokerProcess(wd, name=f"broker{broker_id}", props=p, host=self.lan.address(broker_id), port=9092,
                              cmd=self.lan.exec_prefix(broker_id) + [sys.executable, "-m", "broker"],
                              env={"ODRADEK_ZK_SESSION_FILE": str(wd / "zk-session")}, startup_timeout=60)
        else:
            b = BrokerProcess(wd, name=f"broker{broker_id}", props=p, port=free_port(LOOPBACK),
                              env={"ODRADEK_ZK_SESSION_FILE": str(wd / "zk-session")}, startup_timeout=60)
        self.brokers[broker_id] = b
        return b

    def add_listener(self, listener: str) -> dict[int, int]:
        """Give every broker (not started yet) a second listener ``listener`` on a free port beside
        the PLAINTEXT one the harness probes; returns {broker id: port}."""
        ports = {}
        for i, b in self.brokers.items():
            ports[i] = free_port(LOOPBACK)
            eps = f"PLAINTEXT://{b.host}:{b.port},{listener}://{b.host}:{ports[i]}"
            b.overrides.update({"listeners": eps, "advertised.listeners": eps})
        return ports

    def start(self, ids: Iterable[int] | None = None) -> None:
        ids = list(self.brokers) if ids is None else list(ids)
        for i in ids:
            self.brokers[i].start(wait=False)
        for i in ids:
            self.brokers[i].wait_ready()
        self.wait_for(lambda: set(ids) <= self.registered(), 60, f"brokers {ids} registered")

    def start_broker(self, broker_id: int, wait_registered: bool = True) -> None:
        self.brokers[broker_id].start()
        if wait_registered:
            self.wait_for(lambda: broker_id in self.registered(), 60, f"broker {broker_id} registered")

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def stop(self, broker_id: int, timeout: float = 60.0) -> int | None:
        """SIGTERM (controlled shutdown); a broker still running after ``timeout`` gets SIGUSR1
        (stack dump into its log) and then SIGKILL."""
        import signal
        import subprocess
        b = self.brokers[broker_id]
        if b.alive and not b.paused:
            b.signal(signal.SIGTERM)
            try:
                b.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                b.signal(signal.SIGUSR1)
                time.sleep(1)
        return b.stop(5)

    def cut(self, broker_id: int) -> None:
        """Cut the broker off the network (its namespace's link to the bridge goes down)."""
        self.lan.cut(broker_id)

    def heal(self, broker_id: int) -> None:
        self.lan.heal(broker_id)

    def pause(self, broker_id: int) -> None:
        self.brokers[broker_id].pause()

    def resume(self, broker_id: int) -> None:
        self.brokers[broker_id].resume()

    def shutdown(self) -> None:
        for b in self.brokers.values():
            try:
                b.kill()
            except Exception:
                pass
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:
                pass
            self._zk = None
        if self.lan is not None:
            self.lan.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.alive)

    def bootstrap_of(self, ids: Iterable[int]) -> str:
        return ",".join(self.brokers[i].bootstrap for i in ids)

    # -- ZooKeeper --------------------------------------------------------------------------
    def zk(self):
        if self._zk is None:
            from kazoo.client import KazooClient
            self._zk = KazooClient(hosts=self.connect, timeout=10)
            self._zk.start(timeout=15)
        return self._zk

    def get_json(self, path: str):
        data, _ = self.zk().get(path)
        return json.loads(data.decode()) if data else None

    def registered(self) -> set[int]:
        try:
            return {int(c) for c in self.zk().get_children("/brokers/ids")}
        except Exception:
            return set()

    def controller_id(self) -> int:
        try:
            return self.get_json("/controller")["brokerid"]
        except Exception:
            return -1

    def partition_state(self, topic: str, partition: int) -> dict | None:
        try:
            return self.get_json(f"/brokers/topics/{topic}/partitions/{partition}/state")
        except Exception:
            return None

    def leader(self, topic: str, partition: int) -> int:
        s = self.partition_state(topic, partition)
        return -1 if s is None else s["leader"]

    def isr(self, topic: str, partition: int) -> list[int]:
        s = self.partition_state(topic, partition)
        return [] if s is None else s["isr"]

    def expire_session(self, broker_id: int) -> None:
        """Close broker ``broker_id``'s ZooKeeper session from outside (its ephemeral nodes go)."""
        from kazoo.client import KazooClient
        path = self.brokers[broker_id].workdir / "zk-session"
        sid_hex, pw_hex = path.read_text().split()
        c = KazooClient(hosts=self.connect, client_id=(int(sid_hex, 16), bytes.fromhex(pw_hex)), timeout=10)
        c.start(timeout=15)
        c.stop()
        c.close()

    # -- waiting ----------------------------------------------------------------------------
    @staticmethod
    def wait_for(cond, timeout: float = 30.0, what: str = "condition", interval: float = 0.1):
        deadline = time.monotonic() + timeout
        while True:
            try:
                v = cond()
            except Exception:
                v = None
            if v:
                return v
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(interval)

    def wait_for_leader(self, topic: str, partition: int, not_in: Iterable[int] = (), timeout: float = 60.0) -> int:
        bad = set(not_in)
        return self.wait_for(lambda: (lambda l: l if l >= 0 and l not in bad else None)(self.leader(topic, partition)),
                             timeout, f"a leader for {topic}-{partition} outside {sorted(bad)}")

    def wait_for_isr(self, topic: str, partition: int, members: Iterable[int], timeout: float = 60.0) -> list[int]:
        want = set(members)
        return self.wait_for(lambda: (lambda i: i if want <= set(i) else None)(self.isr(topic, partition)),
                             timeout, f"ISR of {topic}-{partition} to contain {sorted(want)}")

    # -- admin via the project's client ------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, rf: int = 3, configs: Mapping[str, str] | None = None,
                     assignment: Mapping[int, list[int]] | None = None, timeout: float = 60.0) -> None:
        import asyncio

        from protocol.client import ClusterClient
        from protocol.messages import CreateTopicsRequest as C

        async def run():
            async with ClusterClient(self.bootstrap) as cc:
                t = C.CreatableTopic(name=name, num_partitions=-1 if assignment else partitions,
                                     replication_factor=-1 if assignment else rf,
                                     assignments=[C.CreatableReplicaAssignment(partition_index=p, broker_ids=list(r))
                                                  for p, r in (assignment or {}).items()],
                                     configs=[C.CreatableTopicConfig(name=k, value=v)
                                              for k, v in (configs or {}).items()])
                resp = await cc.send_to_controller(C(topics=[t], timeout_ms=30000, validate_only=False))
                err = resp.topics[0].error_code
                if err and err != 36:          # TOPIC_ALREADY_EXISTS: an earlier attempt got through
                    raise RuntimeError(f"CreateTopics {name}: error {err} {resp.topics[0].error_message}")
        deadline = time.monotonic() + timeout
        while True:            # right after start-up a broker may not know the controller yet
            try:
                asyncio.run(run())
                break
            except RuntimeError:
                raise
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        n = len(assignment) if assignment else partitions
        for p in range(n):
            self.wait_for_leader(name, p, timeout=timeout)

    def describe(self) -> str:
        lines = [f"controller: {self.controller_id()}  registered: {sorted(self.registered())}"]
        try:
            for t in sorted(self.zk().get_children("/brokers/topics")):
                for p in sorted(self.zk().get_children(f"/brokers/topics/{t}/partitions"), key=int):
                    lines.append(f"  {t}-{p}: {self.partition_state(t, int(p))}")
        except Exception as e:
            lines.append(f"  ({e})")
        return "\n".join(lines)

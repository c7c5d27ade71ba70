"""ZooKeeperProcess: a standalone Debian ZooKeeper 3.8 server on a free loopback port
with its data in a temporary directory."""
from __future__ import annotations

import os
import shutil
import uuid
from typing import Mapping

from .net import LOOPBACK, four_letter_word, free_port
from .process import ManagedProcess

ZK_CONF_DIR = os.environ.get("ODRADEK_ZK_CONF_DIR", "/etc/zookeeper/conf")
ZK_JAR = os.environ.get("ODRADEK_ZK_JAR", "/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE = "/usr/share/java/slf4j-simple.jar"
ZK_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def zookeeper_available() -> tuple[bool, str]:
    java = shutil.which(os.environ.get("JAVA", "java"))
    if not java:
        return False, "java not found (run scripts/install-test-deps.sh)"
    if not os.path.exists(ZK_JAR):
        return False, f"{ZK_JAR} not found (apt-get install zookeeper)"
    return True, ""


class ZooKeeperProcess(ManagedProcess):
    """Standalone ZooKeeper.  `config` entries are added to / replace zoo.cfg lines; `jvm_args`
    go to its JVM (a server JAAS file for SASL, say)."""

    name = "zookeeper"

    def __init__(self, workdir: str | os.PathLike, *, port: int | None = None,
                 tick_time_ms: int = 2000, config: Mapping[str, object] | None = None,
                 heap: str = "256m", startup_timeout: float = 60.0, name: str | None = None,
                 jvm_args=(), classpath=()):
        super().__init__(workdir, name=name)
        self.jvm_args = list(jvm_args)
        self.extra_classpath = list(classpath)
        self.host = LOOPBACK
        self.port = port or free_port()
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.cfg_path = self.workdir / "zoo.cfg"
        self.config: dict[str, str] = {
            "tickTime": str(tick_time_ms),
            "initLimit": "10",
            "syncLimit": "5",
            "dataDir": str(self.data_dir),
            "clientPort": str(self.port),
            "clientPortAddress": LOOPBACK,
            "maxClientCnxns": "0",
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "*",
            "autopurge.purgeInterval": "0",
        }
        self.config.update({k: str(v) for k, v in (config or {}).items()})
        self.heap = heap
        self.startup_timeout = startup_timeout

    @property
    def connect(self) -> str:
        """host:port for zookeeper.connect / KazooClient(hosts=...)."""
        return f"{self.host}:{self.port}"

    def connect_string(self, chroot: str | None = None) -> str:
        return self.connect + (("/" + chroot.strip("/")) if chroot else "")

    def new_chroot(self, prefix: str = "odradek") -> str:
        """A fresh, unused chroot path (not created) so tests can share one server."""
        return f"/{prefix}-{uuid.uuid4().hex[:12]}"

    def write_config(self) -> None:
        self.cfg_path.write_text("".join(f"{k}={v}\n" for k, v in self.config.items()))

    def command(self) -> list[str]:
        self.write_config()
        java = shutil.which(os.environ.get("JAVA", "java")) or "java"
        classpath = f"{ZK_CONF_DIR}:{ZK_JAR}"
        # Debian's jar has no slf4j binding (ZooKeeper then logs nothing); add the
        # simple one when it is installed so failures come with a server log.
        if os.path.exists(SLF4J_SIMPLE):
            classpath += ":" + SLF4J_SIMPLE
        for extra in self.extra_classpath:
            classpath += ":" + str(extra)
        return [java, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true",
                f"-Dzookeeper.log.dir={self.workdir}", "-Dzookeeper.root.logger=INFO,CONSOLE",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS", *self.jvm_args,
                "-cp", classpath, ZK_MAIN, str(self.cfg_path)]

    def four_letter(self, word: str) -> str:
        return four_letter_word(self.host, self.port, word)

    def is_ready(self) -> bool:
        try:
            return self.four_letter("ruok").strip() == "imok"
        except OSError:
            return False

#!/usr/bin/env python3
"""Container entrypoint: build server.properties from the environment, then run the broker.

    odradek-entrypoint [--print-config | --write-config | --healthcheck] [broker arguments...]

Properties come from, lowest precedence first:

1. the container defaults below (data in the /var/lib/kafka/data volume, metrics on 9404, the
   socket buffers of the shipped config/server.properties);
2. the file named by ODRADEK_BASE_CONFIG, if set (a mounted server.properties);
3. KAFKA_* variables, named as in the confluentinc images: KAFKA_ZOOKEEPER_CONNECT ->
   zookeeper.connect.  A single ``_`` becomes ``.``, ``__`` becomes ``_`` and ``___`` becomes
   ``-`` (``broker.config.properties_from_env``).  Variables that configure a JVM launcher
   (KAFKA_HEAP_OPTS, KAFKA_OPTS, KAFKA_JMX_*, KAFKA_LOG4J_*, ...) are not properties and are
   left out.  KAFKA_LOG4J_ROOT_LOGLEVEL sets the broker's log level, unless ODRADEK_LOG_LEVEL is
   set.

Like the Confluent image, when only KAFKA_ADVERTISED_LISTENERS is given, the broker binds the
same listeners on every interface (each host is replaced by 0.0.0.0).

KRaft variables (KAFKA_PROCESS_ROLES=broker,controller, KAFKA_NODE_ID,
KAFKA_CONTROLLER_QUORUM_VOTERS, KAFKA_CONTROLLER_LISTENER_NAMES; docs/config.md, "KRaft
configuration files") need CLUSTER_ID, as in the Confluent and Apache images: before the broker
starts, every directory not yet formatted gets a v1 meta.properties with that cluster id (what
``kafka-storage.sh format --ignore-formatted`` does); one formatted for another cluster or node
stops the broker with Kafka's message.

The properties are checked as the broker checks them; an invalid value exits with status 1 and
Kafka's one-line message.  Then the file is written to ODRADEK_CONFIG_FILE (default
/etc/kafka/server.properties) and the broker replaces this process (``python -m broker FILE
ARGS``), so it receives docker's SIGTERM directly.

Modes that do not start a broker:
  --print-config   print the properties to stdout (nothing is written)
  --write-config   write the file and exit
  --healthcheck    exit 0 if the broker answers ApiVersions on its first listener, else 1
                   (used by HEALTHCHECK; reads the written file)
"""
from __future__ import annotations

import os
import re
import socket
import struct
import sys

from broker.config import BrokerConfig, ConfigError, load_properties, properties_from_env

CONFIG_FILE = "/etc/kafka/server.properties"

CONTAINER_DEFAULTS = {
    "log.dirs": "/var/lib/kafka/data",
    "odradek.metrics.prometheus.port": "9404",
    # the socket buffers of the shipped config/server.properties (measured: docs/broker.md)
    "socket.send.buffer.bytes": "2097152",
    "socket.receive.buffer.bytes": "-1",
}

# KAFKA_* variables that belong to Kafka's launch scripts or log4j, not to server.properties
# (in addition to those properties_from_env already skips).
LAUNCHER_VARIABLES = {
    "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL",
    "KAFKA_JMX_PORT", "KAFKA_JMX_HOSTNAME", "KAFKA_CLUSTER_ID",
}

_LOG_LEVELS = {"TRACE": "DEBUG", "DEBUG": "DEBUG", "INFO": "INFO", "WARN": "WARNING",
               "WARNING": "WARNING", "ERROR": "ERROR", "FATAL": "CRITICAL", "OFF": "CRITICAL"}

_ENDPOINT = re.compile(r"^\s*([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/]*):(\d+)\s*$")


def bind_all(advertised: str) -> str:
    """``NAME://host:port,...`` with every host replaced by 0.0.0.0."""
    out = []
    for item in advertised.split(","):
        if not item.strip():
            continue
        m = _ENDPOINT.match(item)
        if m is None:
            raise ConfigError(f"Invalid value {advertised} for configuration advertised.listeners: "
                              f"cannot parse {item.strip()!r} as NAME://host:port", "advertised.listeners")
        out.append(f"{m.group(1)}://0.0.0.0:{m.group(3)}")
    return ",".join(out)


def build_properties(environ) -> dict[str, str]:
    props = dict(CONTAINER_DEFAULTS)
    base_path = environ.get("ODRADEK_BASE_CONFIG")
    base = load_properties(base_path) if base_path else {}
    props.update(base)
    from_env = properties_from_env({k: v for k, v in environ.items() if k not in LAUNCHER_VARIABLES})
    props.update(from_env)
    if "listeners" not in from_env and "listeners" not in base and props.get("advertised.listeners"):
        props["listeners"] = bind_all(props["advertised.listeners"])
    return props


def check(props: dict[str, str]) -> BrokerConfig:
    cfg = BrokerConfig.from_dict(props)
    cfg.validate()
    return cfg


def format_kraft_directories(cfg: BrokerConfig, environ) -> list[str]:
    """Give every unformatted directory of a KRaft configuration a v1 meta.properties with the
    CLUSTER_ID of the environment; the directories formatted now.  ConfigError without a usable
    CLUSTER_ID."""
    from controller.api import base64_to_uuid, random_kafka_uuid, uuid_to_base64
    from storage.meta_properties import kraft_directories, read_meta, write_kraft_meta
    cluster = (environ.get("CLUSTER_ID") or environ.get("KAFKA_CLUSTER_ID") or "").strip()
    if not cluster:
        raise ConfigError("CLUSTER_ID is required when KAFKA_PROCESS_ROLES is set: a KRaft configuration's "
                          "directories are formatted with it before the first start (make one with "
                          "kafka-storage.sh random-uuid)", "process.roles")
    try:
        base64_to_uuid(cluster)     # 16 bytes of URL-safe base64, as Kafka's Uuid.fromString wants
    except ValueError:
        raise ConfigError(f"CLUSTER_ID {cluster} is not a Kafka cluster id (22 characters of URL-safe base64, "
                          "as kafka-storage.sh random-uuid prints)", "process.roles") from None
    done = []
    for d in kraft_directories(cfg):
        if read_meta(d) is None:
            write_kraft_meta(d, cfg.broker_id, cluster, uuid_to_base64(random_kafka_uuid()))
            done.append(d)
    return done


# -- .properties output (Java escaping rules) -------------------------------------------------

def _escape(s: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(s):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif ch in "=:#!" and is_key:
            out.append("\\" + ch)
        elif ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def render(props: dict[str, str]) -> str:
    lines = ["# Written by odradek-entrypoint from the container's environment."]
    for k in sorted(props):
        lines.append(f"{_escape(k, True)}={_escape(props[k], False)}")
    return "\n".join(lines) + "\n"


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:     # the broker reads UTF-8 first
        f.write(text)
    os.replace(tmp, path)


# -- healthcheck ------------------------------------------------------------------------------

def healthcheck(path: str, timeout: float = 5.0) -> bool:
    """ApiVersions v0 to the first listener (loopback when it binds every interface)."""
    try:
        cfg = BrokerConfig.from_dict(load_properties(path))
        ep = cfg.listeners()[0]
    except (OSError, ConfigError, IndexError) as e:
        print(f"healthcheck: no usable config in {path}: {e}", file=sys.stderr)
        return False
    host = ep.host if ep.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    client_id = b"odradek-healthcheck"
    body = struct.pack(">hhih", 18, 0, 0x0DA, len(client_id)) + client_id
    try:
        with socket.create_connection((host, ep.port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(body)) + body)
            head = b""
            while len(head) < 10:
                chunk = s.recv(10 - len(head))
                if not chunk:
                    break
                head += chunk
    except OSError as e:
        print(f"healthcheck: {host}:{ep.port}: {e}", file=sys.stderr)
        return False
    if len(head) < 10:
        print(f"healthcheck: {host}:{ep.port} closed the connection", file=sys.stderr)
        return False
    _size, correlation_id, error_code = struct.unpack(">iih", head)
    return correlation_id == 0x0DA and error_code == 0


# -- main -------------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    environ = os.environ
    path = environ.get("ODRADEK_CONFIG_FILE", CONFIG_FILE)
    mode = argv[0] if argv and argv[0] in ("--print-config", "--write-config", "--healthcheck") else None
    if mode == "--healthcheck":
        return 0 if healthcheck(path) else 1
    try:
        props = build_properties(environ)
        cfg = check(props)
        if cfg.kraft_mode and mode is None:
            for d in format_kraft_directories(cfg, environ):
                print(f"odradek-entrypoint: formatted {d} for KRaft mode", file=sys.stderr, flush=True)
    except (ConfigError, OSError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    text = render(props)
    if mode == "--print-config":
        sys.stdout.write(text)
        return 0
    write(path, text)
    if mode == "--write-config":
        return 0
    env = dict(environ)
    level = environ.get("KAFKA_LOG4J_ROOT_LOGLEVEL", "").upper()
    if "ODRADEK_LOG_LEVEL" not in env and level in _LOG_LEVELS:
        env["ODRADEK_LOG_LEVEL"] = _LOG_LEVELS[level]
    print(f"odradek-entrypoint: wrote {path} ({len(props)} properties); starting the broker",
          file=sys.stderr, flush=True)
    os.execvpe(sys.executable, [sys.executable, "-m", "broker", path, *argv], env)
    return 127      # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

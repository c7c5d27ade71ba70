"""zookeeper-shell.sh: Kafka's ZooKeeper shell (ZooKeeper's ``ZooKeeperMain``), through kazoo.

    zookeeper-shell.sh host:port[/chroot] [-zk-tls-config-file <file>] [command [args...]]

With a command it runs that command and exits; without one it reads commands from standard
input, one per line (``echo "ls /brokers/ids" | zookeeper-shell.sh localhost:2181``), as the
Java shell does without a terminal. The output is ZooKeeperMain's: the connection lines on
standard output, ``ls`` as ``[a, b]``, ``get`` the data as text, ``stat`` fields
(``cZxid = 0x..``), ``Created /path`` and the errors (``Node does not exist: /path``) on
standard error; a failed command exits 1.

Commands: ``ls [-s] [-R] path``, ``get [-s] path``, ``stat path``, ``create [-s] [-e] path
[data]``, ``set path data``, ``delete [-v version] path``, ``deleteall path``,
``getEphemerals [path]``, ``quit``/``close``. ``-zk-tls-config-file`` is refused: Odradek's
ZooKeeper client has no TLS.
"""
from __future__ import annotations

import shlex
import sys
import time

USAGE = ("USAGE: zookeeper-shell.sh zookeeper_host:port[/path] [-zk-tls-config-file file] [args...]")

COMMANDS = """ZooKeeper -server host:port cmd args
\tcreate [-s] [-e] path [data]
\tdelete [-v version] path
\tdeleteall path
\tget [-s] path
\tgetEphemerals [path]
\tls [-s] [-R] path
\tquit 
\tset path data
\tstat path"""


class CommandError(Exception):
    pass


def _java_date(ms: int) -> str:
    """java.util.Date.toString(): ``Sat Nov 21 23:06:02 UTC 2026`` (local time)."""
    t = time.localtime(ms / 1000)
    return time.strftime("%a %b %d %H:%M:%S ", t) + (time.strftime("%Z", t) or "UTC") + time.strftime(" %Y", t)


def format_stat(st) -> str:
    return "\n".join([
        f"cZxid = {hex(st.czxid)}", f"ctime = {_java_date(st.ctime)}", f"mZxid = {hex(st.mzxid)}",
        f"mtime = {_java_date(st.mtime)}", f"pZxid = {hex(st.pzxid)}", f"cversion = {st.cversion}",
        f"dataVersion = {st.version}", f"aclVersion = {st.aversion}",
        f"ephemeralOwner = {hex(st.ephemeralOwner)}", f"dataLength = {st.dataLength}",
        f"numChildren = {st.numChildren}"])


def _flags(args: list[str], allowed: str) -> tuple[set[str], list[str]]:
    flags, rest = set(), []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) == 2 and a[1] in allowed:
            flags.add(a[1])
        else:
            rest.append(a)
        i += 1
    return flags, rest


def run_command(zk, line: str, out=sys.stdout, err=sys.stderr) -> bool:
    """Run one shell line; False when it failed."""
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
    try:
        words = shlex.split(line)
    except ValueError as e:
        print(str(e), file=err)
        return False
    if not words:
        return True
    cmd, args = words[0], words[1:]
    path = None
    try:
        if cmd in ("quit", "close"):
            return True
        if cmd == "ls":
            flags, rest = _flags(args, "swR")
            path = _path(rest)
            if "R" in flags:
                for p in _walk(zk, path):
                    print(p, file=out)
            else:
                children, st = zk.get_children(path, include_data=True)
                print("[" + ", ".join(sorted(children)) + "]", file=out)
                if "s" in flags:
                    print(format_stat(st), file=out)
        elif cmd == "get":
            flags, rest = _flags(args, "sw")
            path = _path(rest)
            data, st = zk.get(path)
            print("null" if data is None else data.decode("utf-8", errors="replace"), file=out)
            if "s" in flags:
                print(format_stat(st), file=out)
        elif cmd == "stat":
            _, rest = _flags(args, "w")
            path = _path(rest)
            st = zk.exists(path)
            if st is None:
                raise NoNodeError()
            print(format_stat(st), file=out)
        elif cmd == "create":
            flags, rest = _flags(args, "sec")
            path = _path(rest)
            data = rest[1].encode() if len(rest) > 1 else b""
            created = zk.create(path, data, ephemeral="e" in flags, sequence="s" in flags)
            print(f"Created {created}", file=err)
        elif cmd == "set":
            _, rest = _flags(args, "s")
            path = _path(rest)
            if len(rest) < 2:
                raise CommandError(COMMANDS)
            zk.set(path, rest[1].encode())
        elif cmd == "delete":
            version = -1
            if len(args) >= 2 and args[0] == "-v":
                version, args = int(args[1]), args[2:]
            path = _path(args)
            zk.delete(path, version=version)
        elif cmd in ("deleteall", "rmr"):
            path = _path(args)
            if zk.exists(path) is None:
                raise NoNodeError()
            zk.delete(path, recursive=True)
        elif cmd == "getEphemerals":
            base = args[0] if args else "/"
            session = zk.client_id[0]
            found = [p for p in _walk(zk, base) if (zk.exists(p) or _NoStat).ephemeralOwner == session]
            print("[" + ", ".join(found) + "]", file=out)
        else:
            raise CommandError(COMMANDS)
    except (NoNodeError, NodeExistsError, NotEmptyError, BadVersionError) as e:
        words = {NoNodeError: "Node does not exist: ", NodeExistsError: "Node already exists: ",
                 NotEmptyError: "Node not empty: ", BadVersionError: "version No is not valid : "}
        print(words[type(e)] + str(path), file=err)
        return False
    except (CommandError, ValueError) as e:
        print(str(e) or COMMANDS, file=err)
        return False
    return True


class _NoStat:
    ephemeralOwner = None


def _path(rest: list[str]) -> str:
    if not rest:
        raise CommandError(COMMANDS)
    p = rest[0]
    if not p.startswith("/"):
        raise CommandError("Path must start with / character")
    return p


def _walk(zk, path: str):
    """``path`` and every znode below it, breadth first (``ls -R``)."""
    from kazoo.exceptions import NoNodeError
    if zk.exists(path) is None:
        raise NoNodeError()
    queue = [path]
    while queue:
        p = queue.pop(0)
        yield p
        try:
            children = sorted(zk.get_children(p))
        except NoNodeError:
            continue
        queue += [(p.rstrip("/") + "/" + c) for c in children]


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 1
    connect, rest = argv[0], argv[1:]
    if rest[:1] == ["-zk-tls-config-file"]:
        print("-zk-tls-config-file is not supported: Odradek's ZooKeeper client (kazoo) has no TLS",
              file=sys.stderr)
        return 1
    import logging
    import warnings
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", module="kazoo")      # "No chroot path exists": commands say so
    from kazoo.client import KazooClient
    print(f"Connecting to {connect}")
    zk = KazooClient(hosts=connect, timeout=30)
    try:
        zk.start(timeout=30)
    except Exception as e:
        print(f"Unable to connect to {connect}: {e}", file=sys.stderr)
        return 1
    try:
        if not rest:
            print("Welcome to ZooKeeper!")
            print("JLine support is disabled")
        print("\nWATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null")
        sys.stdout.flush()
        if rest:
            return 0 if run_command(zk, shlex.join(rest)) else 1
        ok = True
        for line in sys.stdin:
            line = line.strip()
            if line in ("quit", "close"):
                break
            ok = run_command(zk, line) and ok
            sys.stdout.flush()
        return 0 if ok else 1
    finally:
        zk.stop()
        zk.close()


if __name__ == "__main__":
    sys.exit(main())

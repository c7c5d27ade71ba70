"""Shared pieces of the command-line tools: a joptsimple-like option parser (Kafka's flag
syntax and help layout), Java-style properties files, error reporting and the async runner.

Every tool module has ``main(argv=None) -> int`` and is started by ``bin/kafka-*.sh`` as
``python3 -m tools.<module>``.
"""
from __future__ import annotations

import asyncio
import os
import re
import sys
import textwrap
import time
from typing import Any, Callable

VERSION = "3.9.0 (Odradek)"


class UsageError(Exception):
    """Bad command line: printed with the usage, exit status 1."""


class ToolError(Exception):
    """A failure to report as one line (exit status 1)."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


# =============================================================================================
# Option parsing (joptsimple's behaviour: --name value, --name=value, unique prefixes)
# =============================================================================================

class Opt:
    def __init__(self, name, help, arg=None, *, default=None, type=str, multi=False,
                 required=False, alias=(), optional=False):
        self.name = name
        self.help = help
        self.arg = arg                 # None: a flag; else the "describedAs" text ("" for none)
        self.default = default
        self.type = type
        self.multi = multi
        self.required = required
        self.alias = tuple(alias)
        self.optional = optional       # the argument may be left out (joptsimple's optional arg)

    @property
    def dest(self):
        return self.name.replace("-", "_").replace(".", "_")

    def type_name(self):
        return {int: "Integer", float: "Double"}.get(self.type, "String")


class Options(dict):
    """Parsed options: ``opts.has("name")``, ``opts["name"]`` / ``opts.get``, and attributes."""

    def __init__(self, specs):
        super().__init__()
        self._given: set[str] = set()
        self._specs = specs

    def has(self, name) -> bool:
        return name in self._given

    def __getattr__(self, item):
        for s in self._specs.values():
            if s.dest == item:
                return self.get(s.name)
        raise AttributeError(item)


class OptionParser:
    def __init__(self, description: str):
        self.description = description
        self.specs: dict[str, Opt] = {}

    def add(self, name, help, arg=None, **kw) -> Opt:
        o = Opt(name, help, arg, **kw)
        self.specs[name] = o
        return o

    def _lookup(self, name: str) -> Opt:
        if name in self.specs:
            return self.specs[name]
        for s in self.specs.values():
            if name in s.alias:
                return s
        matches = [s for n, s in self.specs.items() if n.startswith(name)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise UsageError(f"Option '{name}' is ambiguous: "
                             + ", ".join(sorted("--" + m.name for m in matches)))
        raise UsageError(f"{name} is not a recognized option")

    def parse(self, argv: list[str]) -> Options:
        opts = Options(self.specs)
        positional = []
        i = 0
        while i < len(argv):
            a = argv[i]
            i += 1
            if a == "--":
                positional.extend(argv[i:])
                break
            if not a.startswith("-") or a == "-":
                positional.append(a)
                continue
            name = a.lstrip("-")
            value = None
            if "=" in name:
                name, value = name.split("=", 1)
            spec = self._lookup(name)
            if spec.arg is None:
                if value is not None:
                    raise UsageError(f"Option {spec.name} does not take an argument")
                opts[spec.name] = True
            else:
                if value is None and spec.optional and (i >= len(argv) or argv[i].startswith("--")):
                    value = ""
                if value is None:
                    if i >= len(argv):
                        raise UsageError(f"Option {spec.name} requires an argument")
                    value = argv[i]
                    i += 1
                try:
                    v = spec.type(value) if value != "" or spec.type is str else None
                except ValueError:
                    raise UsageError(f"Cannot parse argument '{value}' of option {spec.name}") from None
                if spec.multi:
                    opts.setdefault(spec.name, []).append(v)
                else:
                    opts[spec.name] = v
            opts._given.add(spec.name)
        for s in self.specs.values():
            if s.name not in opts:
                opts[s.name] = ([] if s.multi else None) if s.default is None else s.default
        opts["_positional"] = positional
        return opts

    # -- help -----------------------------------------------------------------------------------
    def help_text(self) -> str:
        left_w, right_w = 41, 39
        lines = [self.description, f"{'Option':<{left_w}}{'Description':<{right_w}}",
                 f"{'------':<{left_w}}{'-----------':<{right_w}}"]
        for s in sorted(self.specs.values(), key=lambda s: s.name):
            left = f"--{s.name}"
            if s.arg is not None:
                shown = f"{s.type_name()}: {s.arg}" if s.arg else s.type_name()   # "": no describedAs
                left += f" [{shown}]" if s.optional else f" <{shown}>"
            desc = s.help
            if s.default is not None and s.arg is not None:
                desc += f" (default: {s.default})"
            lefts = textwrap.wrap(left, left_w - 1, subsequent_indent="  ",
                                  break_on_hyphens=False) or [""]
            rights = []
            for para in desc.split("\n"):
                rights += textwrap.wrap(para, right_w, subsequent_indent="  ") or [""]
            for j in range(max(len(lefts), len(rights))):
                l = lefts[j] if j < len(lefts) else ""
                r = rights[j] if j < len(rights) else ""
                lines.append(f"{l:<{left_w}}{r}".rstrip())
        return "\n".join(lines)

    def usage_exit(self, message: str | None = None, status: int = 1):
        if message:
            print(message, file=sys.stderr)
        print(self.help_text(), file=sys.stderr)
        raise SystemExit(status)


def standard_options(parser: OptionParser, command_config_help: str | None = None,
                     bootstrap_required: bool = True):
    parser.add("help", "Show this help and exit.")
    parser.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    parser.add("bootstrap-server",
               ("REQUIRED: " if bootstrap_required else "")
               + "Broker address(es) to contact first, as host:port[,host:port...].",
               "server to connect to")
    parser.add("command-config",
               command_config_help or "Properties file with client settings (security, "
               "request.timeout.ms, default.api.timeout.ms, client.id, ...).",
               "command config property file")


def parse_or_exit(parser: OptionParser, argv: list[str], tool_help: str | None = None) -> Options:
    """Parse; handle --help/--version/no arguments like Kafka's CommandLineUtils."""
    if not argv:
        parser.usage_exit(tool_help or parser.description)
    try:
        opts = parser.parse(argv)
    except UsageError as e:
        parser.usage_exit(str(e))
    if opts.get("help"):
        print(parser.help_text())
        raise SystemExit(0)
    if opts.get("version"):
        print(VERSION)
        raise SystemExit(0)
    return opts


def check_invalid(parser: OptionParser, opts: Options, used: str, invalid: list[str]):
    """Kafka's checkInvalidArgs: ``used`` may not be combined with any of ``invalid``."""
    if not opts.has(used):
        return
    for name in invalid:
        if opts.has(name):
            parser.usage_exit(f'Option "[{used}]" can\'t be used with option "[{name}]"')


def require(parser: OptionParser, opts: Options, *names: str):
    for n in names:
        if not opts.has(n):
            parser.usage_exit(f"Missing required argument \"[{n}]\"")


# =============================================================================================
# Properties
# =============================================================================================

def load_properties(path: str) -> dict[str, str]:
    """A Java .properties file (``k=v``, ``k: v``, ``k v``; ``#``/``!`` comments; ``\\`` joins)."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = f.read()
    except OSError as e:
        raise ToolError(f"cannot read properties file {path}: {e.strerror or e}") from None
    return parse_properties(raw)


def parse_properties(raw: str) -> dict[str, str]:
    props: dict[str, str] = {}
    logical = []
    buf = ""
    for line in raw.splitlines():
        s = line.lstrip() if not buf else line.lstrip()
        if not buf and (not s or s[0] in "#!"):
            continue
        if s.endswith("\\") and not s.endswith("\\\\"):
            buf += s[:-1]
            continue
        logical.append(buf + s)
        buf = ""
    if buf:
        logical.append(buf)
    for entry in logical:
        m = re.match(r"((?:[^=:\s\\]|\\.)+)\s*[=:\s]\s*(.*)$", entry)
        if m:
            key, value = m.group(1), m.group(2)
        else:
            key, value = entry.strip(), ""
        props[key.replace("\\", "")] = value.strip()
    return props


def parse_kv_list(items: list[str], what: str = "property") -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"Invalid {what} '{item}': expected key=value")
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


# =============================================================================================
# Client settings
# =============================================================================================

def client_settings(props: dict[str, str], *, default_timeout_ms: int = 15000):
    """(request_timeout_s, bootstrap_timeout_s, client_id) from client properties."""
    def ms(key, default):
        try:
            return int(props.get(key, default)) / 1000.0
        except ValueError:
            raise ToolError(f"Invalid value {props.get(key)!r} for {key}") from None
    request_timeout = ms("request.timeout.ms", 30000)
    api_timeout = ms("default.api.timeout.ms", default_timeout_ms)
    return request_timeout, api_timeout, props.get("client.id")


async def cluster_from(opts: Options, props: dict[str, str] | None = None,
                       client_id: str = "odradek-tools", default_timeout_ms: int = 15000):
    from protocol.client import ClusterClient
    props = props if props is not None else command_config(opts)
    req_t, api_t, cid = client_settings(props, default_timeout_ms=default_timeout_ms)
    servers = opts.get("bootstrap-server") or props.get("bootstrap.servers")
    if not servers:
        raise ToolError("--bootstrap-server must be specified")
    from protocol.client import security_from_properties
    try:
        ssl_ctx, sasl = security_from_properties(props)
        client = ClusterClient(servers, client_id=cid or client_id, timeout=api_t,
                               request_timeout=min(req_t, max(api_t, 1.0)), ssl=ssl_ctx, sasl=sasl)
    except (ValueError, OSError) as e:
        raise ToolError(str(e)) from None
    await client.start()
    return client


def command_config(opts: Options, key: str = "command-config") -> dict[str, str]:
    path = opts.get(key)
    return load_properties(path) if path else {}


# =============================================================================================
# Running
# =============================================================================================

def librdkafka_client(kind, conf: dict, what: str = "client"):
    """``kind(conf)`` (a confluent-kafka Producer, Consumer, ...), dropping with a warning each
    setting librdkafka does not know (Java-only keys of a shared properties file)."""
    import confluent_kafka as ck
    while True:
        try:
            return kind(conf)
        except ck.KafkaException as e:
            msg = e.args[0].str() if e.args and hasattr(e.args[0], "str") else str(e)
            m = re.search(r'configuration property: "([^"]+)"', msg)
            bad = m.group(1) if m else None
            if bad and bad in conf:
                print(f"WARNING: dropping {bad}, which librdkafka does not know", file=sys.stderr)
                conf.pop(bad)
                continue
            raise ToolError(f"invalid {what} configuration: {msg}") from None


def run_parsed(parser, execute, argv: list[str] | None = None, help_when_empty: bool = False) -> int:
    """``run`` for an argparse-style tool: parse ``argv`` with ``parser`` and hand the namespace
    to ``execute`` (errors as bare lines); ``help_when_empty``: no arguments print the help and
    exit 0, as Kafka's argparse4j tools do."""
    argv = sys.argv[1:] if argv is None else argv
    if help_when_empty and not argv:
        parser.print_help()
        return 0
    return run(lambda args: execute(parser.parse_args(args)), argv, error_prefix="")


def json_event(name: str, **fields) -> None:
    """One JSON line ``{"timestamp": ms, "name": name, ...}`` on stdout, flushed: the event
    format of Kafka's verifiable producer and consumer."""
    import json
    print(json.dumps({"timestamp": int(time.time() * 1000), "name": name, **fields}, separators=(",", ":")),
          flush=True)


def run(main: Callable[[list[str]], Any], argv: list[str] | None = None,
        error_prefix: str = "Error: ", error_stream=None) -> int:
    """Run a tool body (sync or async) and turn failures into one line + exit status."""
    from protocol.client import KafkaConnectionError
    from protocol.errors import KafkaError
    argv = sys.argv[1:] if argv is None else argv
    stream = error_stream or sys.stderr
    try:
        result = main(argv)
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
        return int(result or 0)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except ToolError as e:
        print(f"{error_prefix}{e}", file=stream)
        return e.status
    except KafkaConnectionError as e:
        print(f"{error_prefix}{e}", file=stream)
        return 1
    except KafkaError as e:
        print(f"{error_prefix}{e}", file=stream)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 1
    finally:
        try:
            sys.stdout.flush()
        except Exception:
            pass


def refuse_bootstrap_controller(value) -> None:
    """``--bootstrap-controller`` (KRaft's controllers) has nothing to reach here."""
    if value:
        raise ToolError("--bootstrap-controller is not supported: Odradek has no KRaft controllers; "
                        "use --bootstrap-server")


# Kafka's Java exception class for the error codes the tools meet where the name is not the error's
# own (capitalised words + "Exception" is the rule for the rest).
JAVA_EXCEPTIONS = {
    3: "UnknownTopicOrPartitionException", 5: "LeaderNotAvailableException", 7: "TimeoutException",
    10: "RecordTooLargeException",
    15: "CoordinatorNotAvailableException", 16: "NotCoordinatorException", 24: "InvalidGroupIdException",
    25: "UnknownMemberIdException", 27: "RebalanceInProgressException", 29: "TopicAuthorizationException",
    30: "GroupAuthorizationException", 31: "ClusterAuthorizationException", 68: "GroupNotEmptyException",
    69: "GroupIdNotFoundException", 80: "PreferredLeaderNotAvailableException",
    83: "EligibleLeadersNotAvailableException", 86: "GroupSubscribedToTopicException",
}


def java_exception_class(code: int) -> str:
    """``XyzException``, the class Kafka's Java client raises for an error code."""
    from protocol.errors import error_name
    name = "".join(w.capitalize() for w in error_name(code).split("_")).removesuffix("Exception")
    return JAVA_EXCEPTIONS.get(code) or name + "Exception"


def java_error(code: int, message: str | None = None) -> str:
    """``org.apache.kafka.common.errors.XyzException: message`` as Kafka would show it."""
    from protocol.errors import error_message
    return f"org.apache.kafka.common.errors.{java_exception_class(code)}: {message or error_message(code)}"


def kafka_error(code: int, message: str | None = None) -> str:
    """The Java exception text a Kafka tool would show for an error code."""
    from protocol.errors import error_message, error_name
    if message:
        return message
    return error_message(code) or error_name(code)


def raise_error(code: int, message: str | None = None, context: str = ""):
    if code:
        from protocol.errors import error_for
        cls = error_for(code)
        text = message or cls().message
        exc = cls(f"{context}{text}") if cls.code == code else cls(f"{context}{text}", code=code)
        raise exc


def fmt_uuid(u) -> str:
    from protocol.client import uuid_to_str
    return uuid_to_str(u)


def internal_topic(name: str) -> bool:
    return name in ("__consumer_offsets", "__transaction_state")


def topic_matcher(pattern: str | None):
    """Kafka's IncludeList: a Java-style regex matched against the whole topic name."""
    if pattern is None:
        return lambda name: True
    p = pattern.strip()
    if p.startswith('"') and p.endswith('"') and len(p) > 1:
        p = p[1:-1]
    p = p.replace(",", "|")
    try:
        rx = re.compile(p)
    except re.error as e:
        raise ToolError(f"Invalid topic regular expression {pattern!r}: {e}") from None
    return lambda name: rx.fullmatch(name) is not None


def include_list(raw: str, error: str = "{} is an invalid regex."):
    """Kafka's include list (``TopicFilter.IncludeList``): trimmed, commas as alternatives, spaces
    and surrounding quotes dropped; returns a predicate on topic names (whole-name match).  A bad
    expression raises ToolError(``error`` with the raw text)."""
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", raw.strip().replace(",", "|").replace(" ", "")))
    try:
        compiled = re.compile(regex)
    except re.error:
        raise ToolError(error.format(raw)) from None
    return lambda topic: compiled.fullmatch(topic) is not None

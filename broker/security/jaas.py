"""A JAAS configuration entry as Kafka reads ``sasl.jaas.config``:

``<LoginModule class> <flag> key1="value1" key2=value2 ... ;``

Only the options matter here.  PlainLoginModule's ``user_<name>="<password>"`` options are
the PLAIN users a broker accepts; ``username``/``password`` are the broker's own (client side)
credentials.
"""
from __future__ import annotations

from broker.config import ConfigError

FLAGS = ("required", "requisite", "sufficient", "optional")


def _tokens(text: str):
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c in "=;{}":
            yield c
            i += 1
            continue
        if c == '"':
            j = i + 1
            buf = []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                buf.append(text[j])
                j += 1
            if j >= n:
                raise ConfigError("JAAS config: unterminated quoted value", "sasl.jaas.config")
            yield ("q", "".join(buf))
            i = j + 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] not in '=;"{}':
            j += 1
        yield ("w", text[i:j])
        i = j


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """-> (login module class, options).  ConfigError on malformed text.  Only the first
    entry is read (Kafka allows exactly one in ``sasl.jaas.config``)."""
    toks = list(_tokens(text or ""))
    if len(toks) < 2 or not isinstance(toks[0], tuple) or not isinstance(toks[1], tuple):
        raise ConfigError("JAAS config entry must start with a login module class and a control flag",
                          "sasl.jaas.config")
    module, flag = toks[0][1], toks[1][1]
    if flag.lower() not in FLAGS:
        raise ConfigError(f"JAAS config: invalid control flag {flag!r}", "sasl.jaas.config")
    opts: dict[str, str] = {}
    i = 2
    while i < len(toks):
        t = toks[i]
        if t == ";":
            break
        if not isinstance(t, tuple) or i + 2 >= len(toks) or toks[i + 1] != "=" or not isinstance(toks[i + 2], tuple):
            raise ConfigError("JAAS config: expected key=value options ending with ';'", "sasl.jaas.config")
        opts[t[1]] = toks[i + 2][1]
        i += 3
    else:
        raise ConfigError("JAAS config entry must end with ';'", "sasl.jaas.config")
    return module, opts


def parse_jaas_file(text: str) -> dict[str, tuple[str, dict[str, str]]]:
    """A JAAS login configuration file (``java.security.auth.login.config``): sections
    ``Name { <module> <flag> options... ; };``.  Returns {section: (first module, its options)}.
    ``//`` and ``/* */`` comments are skipped."""
    import re
    text = _strip_comments(text)
    out: dict[str, tuple[str, dict[str, str]]] = {}
    pos = 0
    for m in re.finditer(r"([A-Za-z0-9_.\-]+)\s*\{(.*?)\}\s*;", text, flags=re.S):
        if text[pos:m.start()].strip():
            raise ConfigError(f"JAAS file: unexpected text {text[pos:m.start()].strip()[:40]!r}",
                              "java.security.auth.login.config")
        body = m.group(2).strip()
        if body:            # the section's first entry (parse_jaas stops at its ';')
            out.setdefault(m.group(1), parse_jaas(body))
        pos = m.end()
    if text[pos:].strip():
        raise ConfigError(f"JAAS file: unexpected text {text[pos:].strip()[:40]!r}", "java.security.auth.login.config")
    return out


def _strip_comments(text: str) -> str:
    """``text`` without ``//`` and ``/* */`` comments; quoted values are kept whole."""
    out, i, n, quoted = [], 0, len(text), False
    while i < n:
        c = text[i]
        if quoted:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            quoted = c != '"'
            i += 1
        elif c == '"':
            quoted = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def java_system_properties(opts: str | None) -> dict[str, str]:
    """``-Dkey=value`` options of a JVM command line (``KAFKA_OPTS``), as Kafka's scripts hand
    them to the JVM: where Kafka reads ``java.security.auth.login.config`` and the
    ``zookeeper.sasl.*`` properties."""
    import shlex
    out = {}
    for word in shlex.split(opts or ""):
        if word.startswith("-D") and "=" in word:
            k, _, v = word[2:].partition("=")
            out[k] = v
    return out


def plain_users(options: dict[str, str]) -> dict[str, str]:
    return {k[5:]: v for k, v in options.items() if k.startswith("user_") and len(k) > 5}


def jaas_text(cfg, listener: str, mechanism: str) -> str | None:
    """The JAAS configuration for ``mechanism`` on ``listener``, looked up as Kafka does:
    ``listener.name.<l>.<mech>.sasl.jaas.config``, ``listener.name.<l>.sasl.jaas.config``,
    ``sasl.jaas.config``."""
    for key in (f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config",
                f"listener.name.{listener.lower()}.sasl.jaas.config", "sasl.jaas.config"):
        try:
            text = cfg.get(key)
        except KeyError:
            continue
        if text:
            return str(text)
    return None

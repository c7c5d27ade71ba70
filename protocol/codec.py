"""Table-driven codec: message classes and per-version encode/decode functions.

How this works
--------------
``schema/tables.py`` (generated from Kafka's JSON specs) describes every message as nested field
tuples.  For each message this module builds one Python class per struct (the root message and
every nested struct), with Kafka's field names in snake_case and ``__slots__``.  The version is an
argument, never a class: ``ProduceRequest.decode(buf, version)`` and ``msg.encode(version)``.

For a given (message, version) the compiler emits straight-line Python source — fixed-width runs
of fields read with one precompiled ``struct.Struct``, variable-size fields through the helpers in
``primitives`` — and ``exec``s it once, on first use.  The hot messages' functions are generated
ahead of time into ``schema/hot.py`` by ``python -m protocol.generate`` and loaded from there.

Records fields decode to a zero-copy ``memoryview`` of the frame.  On encode a records value may
be bytes-like or a *file region* (an object with ``length`` and ``read()``); regions are
collected in a list so the connection can ``sendfile`` them between the surrounding bytes.

Unknown tagged fields are kept (``_unknown_tags``) so a frame re-encodes byte-exact.
"""
from __future__ import annotations

import struct
import uuid as _uuid

from protocol import primitives as P
from protocol.primitives import DecodeError, EncodeError

__all__ = ["DecodeError", "EncodeError", "MessageDef", "Struct", "build_messages",
           "render_hot_source", "HOT_PRELUDE"]

_FIXED = {"bool": ("?", 1), "int8": ("b", 1), "int16": ("h", 2), "uint16": ("H", 2),
          "int32": ("i", 4), "uint32": ("I", 4), "int64": ("q", 8), "float64": ("d", 8)}

_MISSING = object()


def _in(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


class Struct:
    """Base of every generated message/struct class."""
    __slots__ = ()
    _fields: tuple = ()
    _defaults: tuple = ()

    def __eq__(self, other):
        if not isinstance(other, Struct) or other._base is not self._base:
            return NotImplemented
        for name in self.__slots__:
            if getattr(self, name) != getattr(other, name):
                return False
        return True

    __hash__ = None

    def __repr__(self):
        parts = []
        for name in self._fields:
            v = getattr(self, name)
            if isinstance(v, memoryview):
                v = f"<{len(v)} bytes>"
            parts.append(f"{name}={v!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def to_dict(self):
        out = {}
        for name in self._fields:
            v = getattr(self, name)
            if isinstance(v, Struct):
                v = v.to_dict()
            elif isinstance(v, list):
                v = [x.to_dict() if isinstance(x, Struct) else x for x in v]
            out[name] = v
        return out


def _default_value(ftype, default, nullable, struct_cls):
    """Python default for a field (fresh object for mutable kinds)."""
    if ftype.startswith("[]"):
        if default == "null":
            return None
        return []
    if ftype == "struct":
        if default == "null":
            return None
        return struct_cls()
    if default == "null":
        return None
    if ftype in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        if default is None or default == "":
            return 0
        d = str(default).strip().lower()
        return int(d, 16) if d.startswith(("0x", "-0x")) else int(d)
    if ftype == "float64":
        return float(default) if default not in (None, "") else 0.0
    if ftype == "bool":
        return str(default).lower() == "true" if default is not None else False
    if ftype == "string":
        return str(default) if default is not None else ""
    if ftype == "bytes":
        return b""
    if ftype == "records":
        return None
    if ftype == "uuid":
        return P.UUID0
    raise ValueError(ftype)


def _default_expr(ftype, default, struct_cls_name):
    """Source expression creating the default (used inside generated code)."""
    if ftype.startswith("[]"):
        return "None" if default == "null" else "[]"
    if ftype == "struct":
        return "None" if default == "null" else f"DF_{struct_cls_name}"
    v = _default_value(ftype, default, False, None)
    if ftype == "uuid":
        return "UUID0"
    return repr(v)


class _Field:
    __slots__ = ("name", "type", "versions", "nullable", "tag", "tagged", "default", "flex",
                 "struct", "elem")

    def __init__(self, t, struct_def):
        (self.name, self.type, self.versions, self.nullable, self.tag, self.tagged,
         self.default, self.flex, _sname, _sub) = t
        self.struct = struct_def
        self.elem = self.type[2:] if self.type.startswith("[]") else None


class _StructDef:
    def __init__(self, cls_name, fields):
        self.cls_name = cls_name
        self.fields = fields
        self.cls = None


class MessageDef:
    """A request, response, header or data message from the specs."""

    def __init__(self, entry):
        self.name = entry["name"]
        self.api_key = entry["api_key"]
        self.kind = entry["kind"]
        self.valid_versions = entry["valid_versions"]
        self.flexible_versions = entry["flexible_versions"]
        self.deprecated_versions = entry["deprecated_versions"]
        self.latest_version_unstable = entry["latest_version_unstable"]
        self.listeners = entry["listeners"]
        self.raw_fields = entry["fields"]
        self.structs: list[_StructDef] = []
        self.root = self._build(self.name, entry["fields"], {}, top=True)

    def is_flexible(self, version):
        return _in(self.flexible_versions, version)

    def _build(self, cls_name, fields, seen, top=False):
        # Structs with the same name and fields share one class within a message.
        sdef = _StructDef(cls_name, [])
        self.structs.append(sdef)
        for t in fields:
            sub = None
            if t[8] is not None:
                key = (t[8], t[9])
                sub = seen.get(key)
                if sub is None:
                    used = {s.cls_name for s in self.structs}
                    base = f"{self.name}_{t[8]}"
                    nm, i = base, 2
                    while nm in used:
                        nm, i = f"{base}{i}", i + 1
                    sub = self._build(nm, t[9], seen)
                    seen[key] = sub
            sdef.fields.append(_Field(t, sub))
        return sdef


# --- class construction -----------------------------------------------------------------------

def _make_class(sdef: _StructDef, pretty_name: str, namespace: dict):
    names = [f.name for f in sdef.fields]
    args = []
    body = []
    for i, f in enumerate(sdef.fields):
        expr = _default_expr(f.type, f.default, f.struct.cls_name if f.struct else None)
        if expr in ("[]",) or expr.endswith("()"):
            args.append(f"{f.name}=_MISSING")
            body.append(f"    self.{f.name} = {expr} if {f.name} is _MISSING else {f.name}")
        else:
            args.append(f"{f.name}={expr}")
            body.append(f"    self.{f.name} = {f.name}")
    body.append("    self._unknown_tags = _unknown_tags")
    src = (f"def __init__(self, {', '.join(args + ['_unknown_tags=None'])}):\n" + "\n".join(body) + "\n")
    namespace["_MISSING"] = _MISSING
    exec(compile(src, f"<init {sdef.cls_name}>", "exec"), namespace)
    cls = type(pretty_name, (Struct,), {
        "__slots__": tuple(names) + ("_unknown_tags",),
        "__init__": namespace.pop("__init__"),
        "_fields": tuple(names),
        "__qualname__": pretty_name,
        "__module__": "protocol.messages",
    })
    cls._base = cls
    # The shared default instance of a struct-typed field: frozen, so that a default can be
    # shared by every message (cheap to build, compared by identity on encode) and never
    # mutated by accident — assign a new struct instead.
    frozen = type(pretty_name, (cls,), {"__slots__": (), "__setattr__": _frozen_setattr,
                                        "__qualname__": pretty_name,
                                        "__module__": "protocol.messages"})
    proto = cls()
    inst = object.__new__(frozen)
    for name in cls.__slots__:
        object.__setattr__(inst, name, getattr(proto, name))
    namespace[f"DF_{sdef.cls_name}"] = inst
    cls.DEFAULT = inst
    return cls


def _frozen_setattr(self, name, value):
    raise AttributeError(f"{type(self).__name__} is a shared default; assign a new instance "
                         f"to the field instead of changing this one")


# --- source generation ------------------------------------------------------------------------

class _Gen:
    """Emits decode/encode functions for one message at one version."""

    def __init__(self, mdef: MessageDef, version: int):
        self.m = mdef
        self.v = version
        self.flex = mdef.is_flexible(version)
        self.funcs: list[str] = []
        self.structs: dict[str, str] = {}   # var name -> format
        self.done: set = set()
        self.isdefs: dict[str, str | None] = {}

    def sname(self, fmt):
        var = "S_" + fmt.replace("?", "o")
        self.structs[var] = ">" + fmt
        return var

    def fn(self, kind, sdef):
        return f"{kind}_{sdef.cls_name}_v{self.v}"

    def compact(self, f):
        if not self.flex:
            return False
        if f.flex == "inherit":
            return True
        return _in(f.flex, self.v)

    def gen(self, sdef):
        if sdef.cls_name in self.done:
            return
        self.done.add(sdef.cls_name)
        self.gen_decode(sdef)
        self.gen_encode(sdef)

    # decode ---------------------------------------------------------------------------------
    def read_value(self, f, ftype, target, lines, ind, nullable):
        """Lines that read one value of ``ftype`` at ``pos`` into ``target``."""
        c = self.compact(f)
        if ftype in _FIXED:
            code, size = _FIXED[ftype]
            s = self.sname(code)
            lines.append(f"{ind}{target} = {s}.unpack_from(buf, pos)[0]; pos += {size}")
        elif ftype == "string":
            r = ("r_ncstr" if nullable else "r_cstr") if c else ("r_nstr" if nullable else "r_str")
            lines.append(f"{ind}{target}, pos = {r}(buf, pos, end)")
        elif ftype == "bytes":
            r = ("r_ncbytes" if nullable else "r_cbytes") if c else ("r_nbytes" if nullable else "r_bytes")
            lines.append(f"{ind}{target}, pos = {r}(buf, pos, end)")
        elif ftype == "records":
            lines.append(f"{ind}{target}, pos = {'r_crecords' if c else 'r_records'}(buf, pos, end)")
        elif ftype == "uuid":
            lines.append(f"{ind}{target}, pos = r_uuid(buf, pos, end)")
        elif ftype == "struct":
            self.gen(f.struct)
            d = self.fn("d", f.struct)
            if nullable:
                lines.append(f"{ind}if buf[pos] == 255:")
                lines.append(f"{ind}    {target} = None; pos += 1")
                lines.append(f"{ind}else:")
                lines.append(f"{ind}    if buf[pos] != 1: raise DecodeError('bad struct presence marker')")
                lines.append(f"{ind}    {target}, pos = {d}(buf, pos + 1, end)")
            else:
                lines.append(f"{ind}{target}, pos = {d}(buf, pos, end)")
        elif ftype.startswith("[]"):
            elem = ftype[2:]
            lines.append(f"{ind}n, pos = {'r_ccount' if c else 'r_count'}(buf, pos, end)")
            lines.append(f"{ind}if n is None:")
            if nullable:
                lines.append(f"{ind}    {target} = None")
            else:
                lines.append(f"{ind}    raise DecodeError('null array in non-nullable field {f.name}')")
            lines.append(f"{ind}else:")
            if elem in _FIXED:
                code, size = _FIXED[elem]
                lines.append(f"{ind}    {target}, pos = r_fixed_array(buf, pos, end, n, {code!r}, {size})")
            else:
                lines.append(f"{ind}    {target} = []")
                lines.append(f"{ind}    app = {target}.append")
                lines.append(f"{ind}    for _ in range(n):")
                self.read_value(f, elem if elem != "struct" else "struct", "x", lines, ind + "        ", False)
                lines.append(f"{ind}        app(x)")
        else:
            raise ValueError(ftype)

    def gen_decode(self, sdef):
        v = self.v
        lines = [f"def {self.fn('d', sdef)}(buf, pos, end):"]
        regular = [f for f in sdef.fields if f.tagged is None and _in(f.versions, v)]
        tagged = [f for f in sdef.fields if f.tagged is not None and self.flex
                  and _in(f.tagged, v) and _in(f.versions, v)]
        i = 0
        while i < len(regular):
            f = regular[i]
            if f.type in _FIXED:
                run = [f]
                while i + len(run) < len(regular) and regular[i + len(run)].type in _FIXED:
                    run.append(regular[i + len(run)])
                if len(run) > 1:
                    fmt = "".join(_FIXED[r.type][0] for r in run)
                    size = sum(_FIXED[r.type][1] for r in run)
                    s = self.sname(fmt)
                    lines.append(f"    {', '.join('v_' + r.name for r in run)} = {s}.unpack_from(buf, pos)")
                    lines.append(f"    pos += {size}")
                    i += len(run)
                    continue
            self.read_value(f, f.type, "v_" + f.name, lines, "    ", _in(f.nullable, v))
            i += 1
        if self.flex:
            for f in tagged:
                lines.append(f"    v_{f.name} = {_default_expr(f.type, f.default, f.struct.cls_name if f.struct else None)}")
            lines.append("    unknown = None")
            lines.append("    ntags, pos = r_uvarint(buf, pos, end)")
            lines.append("    if ntags > end - pos: raise DecodeError('too many tagged fields')")
            lines.append("    last = -1")
            lines.append("    for _ in range(ntags):")
            lines.append("        tag, size, pos = r_tag_header(buf, pos, end, last)")
            lines.append("        last = tag")
            kw = "if"
            for f in tagged:
                lines.append(f"        {kw} tag == {f.tag}:")
                lines.append("            sub = buf[:pos + size]; p0 = pos")
                tl = []
                self.read_value(f, f.type, "v_" + f.name, tl, "            ", _in(f.nullable, v))
                lines.extend(l.replace("buf, pos, end", "sub, pos, p0 + size")
                              .replace("unpack_from(buf, pos)", "unpack_from(sub, pos)")
                              .replace("buf[pos]", "sub[pos]") for l in tl)
                lines.append("            if pos != p0 + size: raise DecodeError('tagged field size mismatch')")
                # A peer may write a tagged field whose value is the default; keep its bytes so
                # the message re-encodes exactly (the current value wins if it is changed).
                lines.append(f"            if {self.is_default('v_' + f.name, f.type, f.default, f.struct)}:")
                lines.append("                if unknown is None: unknown = []")
                lines.append("                unknown.append((tag, bytes(buf[p0:pos])))")
                kw = "elif"
            if tagged:
                lines.append("        else:")
                ind = "            "
            else:
                ind = "        "
            lines.append(f"{ind}if unknown is None: unknown = []")
            lines.append(f"{ind}unknown.append((tag, bytes(buf[pos:pos + size])))")
            lines.append(f"{ind}pos += size")
        args = []
        for f in sdef.fields:
            if (f.tagged is None and _in(f.versions, v)) or f in tagged:
                args.append("v_" + f.name)
            else:
                args.append(_default_expr(f.type, f.default, f.struct.cls_name if f.struct else None))
        if self.flex:
            args.append("unknown")
        lines.append(f"    return {sdef.cls_name}({', '.join(args)}), pos")
        self.funcs.append("\n".join(lines) + "\n")

    # encode ---------------------------------------------------------------------------------
    def write_value(self, f, ftype, expr, lines, ind, nullable, out="out"):
        c = self.compact(f)
        if ftype in _FIXED:
            s = self.sname(_FIXED[ftype][0])
            lines.append(f"{ind}{out} += {s}.pack({expr})")
        elif ftype == "string":
            w = ("w_ncstr" if nullable else "w_cstr") if c else ("w_nstr" if nullable else "w_str")
            lines.append(f"{ind}{w}({out}, {expr})")
        elif ftype == "bytes":
            w = ("w_ncbytes" if nullable else "w_cbytes") if c else ("w_nbytes" if nullable else "w_bytes")
            lines.append(f"{ind}{w}({out}, {expr})")
        elif ftype == "records":
            lines.append(f"{ind}{'w_crecords' if c else 'w_records'}({out}, {expr}, regions)")
        elif ftype == "uuid":
            lines.append(f"{ind}w_uuid({out}, {expr})")
        elif ftype == "struct":
            self.gen(f.struct)
            e = self.fn("e", f.struct)
            if nullable:
                lines.append(f"{ind}if {expr} is None:")
                lines.append(f"{ind}    {out}.append(255)")
                lines.append(f"{ind}else:")
                lines.append(f"{ind}    {out}.append(1)")
                lines.append(f"{ind}    {e}({expr}, {out}, regions)")
            else:
                lines.append(f"{ind}{e}({expr}, {out}, regions)")
        elif ftype.startswith("[]"):
            elem = ftype[2:]
            lines.append(f"{ind}a = {expr}")
            lines.append(f"{ind}if a is None:")
            if nullable:
                null = "b'\\x00'" if c else "b'\\xff\\xff\\xff\\xff'"
                lines.append(f"{ind}    {out} += {null}")
            else:
                lines.append(f"{ind}    raise EncodeError('null array in non-nullable field {f.name}')")
            lines.append(f"{ind}else:")
            if c:
                lines.append(f"{ind}    w_uvarint({out}, len(a) + 1)")
            else:
                lines.append(f"{ind}    {out} += S_i.pack(len(a))")
            if elem in _FIXED:
                lines.append(f"{ind}    w_fixed_array({out}, a, {_FIXED[elem][0]!r})")
            else:
                lines.append(f"{ind}    for x in a:")
                self.write_value(f, elem, "x", lines, ind + "        ", False, out)
        else:
            raise ValueError(ftype)

    def gen_encode(self, sdef):
        v = self.v
        lines = [f"def {self.fn('e', sdef)}(o, out, regions):"]
        regular = [f for f in sdef.fields if f.tagged is None and _in(f.versions, v)]
        tagged = [f for f in sdef.fields if f.tagged is not None and self.flex
                  and _in(f.tagged, v) and _in(f.versions, v)]
        i = 0
        while i < len(regular):
            f = regular[i]
            if f.type in _FIXED:
                run = [f]
                while i + len(run) < len(regular) and regular[i + len(run)].type in _FIXED:
                    run.append(regular[i + len(run)])
                if len(run) > 1:
                    s = self.sname("".join(_FIXED[r.type][0] for r in run))
                    lines.append(f"    out += {s}.pack({', '.join('o.' + r.name for r in run)})")
                    i += len(run)
                    continue
            self.write_value(f, f.type, "o." + f.name, lines, "    ", _in(f.nullable, v))
            i += 1
        if self.flex:
            if not tagged:
                lines.append("    if o._unknown_tags: w_unknown_tags(out, o._unknown_tags)")
                lines.append("    else: out.append(0)")
            else:
                fast = " and ".join(["not o._unknown_tags"] + [
                    self.is_default("o." + f.name, f.type, f.default, f.struct) for f in tagged])
                lines.append(f"    if {fast}:")
                lines.append("        out.append(0)")
                lines.append("        return")
                lines.append("    tags = []")
                for f in tagged:
                    lines.append(f"    if not ({self.is_default('o.' + f.name, f.type, f.default, f.struct)}):")
                    lines.append("        t = bytearray()")
                    self.write_value(f, f.type, "o." + f.name, lines, "        ", _in(f.nullable, v), "t")
                    lines.append(f"        tags.append(({f.tag}, t))")
                lines.append("    if o._unknown_tags:")
                lines.append("        written = {t[0] for t in tags}")
                lines.append("        tags.extend(t for t in o._unknown_tags if t[0] not in written)")
                lines.append("    if tags:")
                lines.append("        tags.sort(key=lambda t: t[0])")
                lines.append("        w_unknown_tags(out, tags)")
                lines.append("    else:")
                lines.append("        out.append(0)")
        if len(lines) == 1:
            lines.append("    pass")
        self.funcs.append("\n".join(lines) + "\n")

    def is_default(self, expr, ftype, default, sdef):
        """A cheap expression that is true when ``expr`` equals the field's default."""
        dflt = _default_expr(ftype, default, sdef.cls_name if sdef else None)
        if dflt == "None":
            return f"{expr} is None"
        if ftype == "struct" and all(f.type in _FIXED for f in sdef.fields):
            conds = [f"{expr}.{f.name} == {_default_expr(f.type, f.default, None)}" for f in sdef.fields]
            return (f"({expr} is {dflt} or ({expr} is not None and " + " and ".join(conds)
                    + f" and not {expr}._unknown_tags))")
        if ftype == "struct":
            name = f"isdef_{sdef.cls_name}"
            if name not in self.isdefs:
                self.isdefs[name] = None      # placeholder against recursion
                conds = [self.is_default(f"o.{f.name}", f.type, f.default, f.struct)
                         for f in sdef.fields] + ["not o._unknown_tags"]
                self.isdefs[name] = (f"def {name}(o):\n    return (o is not None and "
                                     + "\n            and ".join(conds) + ")\n")
            return f"({expr} is {dflt} or {name}({expr}))"
        return f"{expr} == {dflt}"

    def source(self):
        self.gen(self.m.root)
        return self.funcs + [src for src in self.isdefs.values() if src]


# Names a generated function may reference besides classes and struct objects.
_HELPERS = {name: getattr(P, name) for name in P.__all__}
HOT_PRELUDE = ("\nimport struct\n\nfrom protocol.primitives import *  # noqa: F401,F403\n"
               "from protocol.primitives import DecodeError, EncodeError, UUID0\n\n")


def render_hot_source(messages: dict, names) -> str:
    """Source for every version of the named messages (written to schema/hot.py)."""
    structs: dict[str, str] = {}
    bodies = []
    seen = set()
    for name in names:
        mdef = MessageDef(messages[name])
        lo, hi = mdef.valid_versions
        for v in range(lo, hi + 1):
            g = _Gen(mdef, v)
            for src in g.source():
                head = src.split("(", 1)[0]
                if head.startswith("def isdef_"):
                    if head in seen:
                        continue
                    seen.add(head)
                bodies.append(src)
            structs.update(g.structs)
    head = "".join(f"{k} = struct.Struct({fmt!r})\n" for k, fmt in sorted(structs.items()))
    return head + "\n\n" + "\n\n".join(bodies)


def compile_version(mdef: MessageDef, version: int, namespace: dict, hot_module=None):
    """Return (decode_fn, encode_fn) for the root struct of ``mdef`` at ``version``."""
    dname = f"d_{mdef.root.cls_name}_v{version}"
    ename = f"e_{mdef.root.cls_name}_v{version}"
    if hot_module is not None and hasattr(hot_module, dname):
        return getattr(hot_module, dname), getattr(hot_module, ename)
    g = _Gen(mdef, version)
    funcs = g.source()
    ns = namespace
    for var, fmt in g.structs.items():
        if var not in ns:
            ns[var] = struct.Struct(fmt)
    src = "\n\n".join(funcs)
    exec(compile(src, f"<codec {mdef.name} v{version}>", "exec"), ns)
    return ns[dname], ns[ename]


def build_messages(messages: dict, hot_module=None):
    """Create classes for every message; returns {name: (MessageDef, class)}.

    The shared namespace holds helpers, struct objects and every class, so generated functions
    (exec'd here, or imported from ``hot_module``) resolve their globals in it.
    """
    namespace = dict(_HELPERS)
    namespace["struct"] = struct
    namespace["UUID0"] = P.UUID0
    namespace["_uuid"] = _uuid
    out = {}
    for name, entry in messages.items():
        mdef = MessageDef(entry)
        for sdef in reversed(mdef.structs):
            pretty = name if sdef is mdef.root else sdef.cls_name.split("_", 1)[1]
            sdef.cls = _make_class(sdef, pretty, namespace)
            namespace[sdef.cls_name] = sdef.cls
        root = mdef.root.cls
        for sdef in mdef.structs:
            if sdef is not mdef.root:
                setattr(root, sdef.cls_name.split("_", 1)[1], sdef.cls)
        out[name] = (mdef, root)
    if hot_module is not None:
        for k, val in namespace.items():
            hot_module.__dict__.setdefault(k, val)
    return out, namespace

"""Hypothesis strategies generated from the schema tables: a valid message at a version."""
from __future__ import annotations

import uuid

from hypothesis import strategies as st

from protocol.codec import _in

_INT_RANGES = {"int8": (-128, 127), "int16": (-2**15, 2**15 - 1), "uint16": (0, 2**16 - 1),
               "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1)}

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_bytes = st.binary(max_size=24)


def _primitive(ftype, text=None):
    if ftype in _INT_RANGES:
        lo, hi = _INT_RANGES[ftype]
        return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]))
    if ftype == "bool":
        return st.booleans()
    if ftype == "float64":
        return st.floats(allow_nan=False)
    if ftype == "string":
        return _text if text is None else text
    if ftype in ("bytes", "records"):
        return _bytes
    if ftype == "uuid":
        return st.builds(lambda b: uuid.UUID(bytes=b), st.binary(min_size=16, max_size=16))
    raise ValueError(ftype)


def struct_strategy(sdef, version, flexible, depth=0, text=None):
    fields = {}
    for f in sdef.fields:
        if not _in(f.versions, version):
            continue
        if f.tagged is not None and not (flexible and _in(f.tagged, version)):
            continue
        fields[f.name] = field_strategy(f, version, flexible, depth, text)
    return st.fixed_dictionaries(fields).map(lambda kw: sdef.cls(**kw))


def field_strategy(f, version, flexible, depth, text=None):
    nullable = _in(f.nullable, version)
    if f.type.startswith("[]"):
        elem = f.type[2:]
        if elem == "struct":
            inner = struct_strategy(f.struct, version, flexible, depth + 1, text)
        else:
            inner = _primitive(elem, text)
        # sometimes with its first element again at the end: a duplicate entry (the same topic,
        # partition, member or resource twice) is a request a broker must answer too
        s = st.lists(inner, max_size=3 if depth < 2 else 1).flatmap(
            lambda xs: st.sampled_from([xs, xs + xs[:1]]) if xs else st.just(xs))
    elif f.type == "struct":
        s = struct_strategy(f.struct, version, flexible, depth + 1, text)
    else:
        s = _primitive(f.type, text)
    if nullable:
        s = st.one_of(st.none(), s)
    return s


def message_strategy(cls, version, text=None):
    """A valid ``cls`` message at ``version``; ``text``: the strategy for string fields
    (default: short random text), e.g. one that often picks names a broker knows."""
    mdef = cls.DEF
    return struct_strategy(mdef.root, version, mdef.is_flexible(version), text=text)

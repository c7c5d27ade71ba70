"""Principals of TLS clients: the certificate subject as Kafka names it, and
``ssl.principal.mapping.rules``.

Kafka's default principal builder takes the peer certificate's subject as Java's
``X500Principal.getName()`` renders it (RFC 2253): the RDNs most specific first (the reverse of
their order in the certificate), separated by ``,``; the attributes of a multi-valued RDN joined
by ``+`` in their encoded order.  Only CN, C, L, ST, O, OU, STREET, DC and UID are written as
keywords; any other attribute is written as its dotted OID followed by ``#`` and the hex of its
DER encoding (``1.2.840.113549.1.9.1=#1611...`` for an e-mail address), as is a value that is not
a string type.  In string values the characters ``, = + < > # ; " \\`` are escaped with a
backslash, as are leading and trailing spaces; a NUL becomes ``\\00``.

``subject_from_der`` reads the subject from the DER certificate itself (no third-party package),
so the raw string types and attribute order are the certificate's own.

Mapping rules (``ssl.principal.mapping.rules``, default ``DEFAULT``) are Kafka's: a comma-separated
list of ``RULE:<pattern>/<replacement>/[L|U]`` and ``DEFAULT``, tried in order.  A RULE applies
when its regular expression matches the whole subject; the result is the subject with every match
replaced (``$1`` style group references), lower-cased with ``/L`` or upper-cased with ``/U``.
``DEFAULT`` keeps the subject as it is.  When no rule applies the client is not authenticated
(its connection is closed).
"""
from __future__ import annotations

import re

# ---------------------------------------------------------------------------------- DER reading

_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
# string types shown as text: UTF8String, PrintableString, T61String, IA5String, GeneralString, BMPString
_STRING_TAGS = {0x0C: "utf-8", 0x13: "latin-1", 0x14: "latin-1", 0x16: "latin-1", 0x1B: "latin-1",
                0x1E: "utf-16-be"}
_ESCAPED = ',=+<>#;"\\'


class DerError(ValueError):
    pass


def _tlv(buf: bytes, pos: int) -> tuple[int, int, int, int]:
    """(tag, content start, content end, end of the element) of the element at ``pos``."""
    if pos + 2 > len(buf):
        raise DerError("truncated DER")
    tag, n = buf[pos], buf[pos + 1]
    pos += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4 or pos + k > len(buf):
            raise DerError("bad DER length")
        n = int.from_bytes(buf[pos:pos + k], "big")
        pos += k
    if pos + n > len(buf):
        raise DerError("truncated DER")
    return tag, pos, pos + n, pos + n


def _elements(buf: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """The elements inside a constructed value: (tag, element start, content start, content end)."""
    out, pos = [], start
    while pos < end:
        tag, cs, ce, nxt = _tlv(buf, pos)
        out.append((tag, pos, cs, ce))
        pos = nxt
    return out


def _oid(b: bytes) -> str:
    if not b:
        raise DerError("empty OID")
    first = b[0]
    parts = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    v = 0
    for c in b[1:]:
        v = (v << 7) | (c & 0x7F)
        if not c & 0x80:
            parts.append(v)
            v = 0
    return ".".join(str(p) for p in parts)


def _escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPED:
            out.append("\\" + ch)
        elif ch == "\0":
            out.append("\\00")
        else:
            out.append(ch)
    s = "".join(out)
    lead = len(s) - len(s.lstrip(" \r"))
    trail = len(s) - len(s.rstrip(" \r"))
    if lead == len(s):
        return "".join("\\" + c for c in s)
    return ("".join("\\" + c for c in s[:lead]) + s[lead:len(s) - trail]
            + "".join("\\" + c for c in s[len(s) - trail:]))


def _ava(buf: bytes, cs: int, ce: int) -> str:
    (otag, _os, ocs, oce), (vtag, vs, vcs, vce) = _elements(buf, cs, ce)[:2]
    if otag != 0x06:
        raise DerError("attribute type is not an OID")
    oid = _oid(buf[ocs:oce])
    keyword = _KEYWORDS.get(oid)
    enc = _STRING_TAGS.get(vtag)
    if keyword is None or enc is None:
        return f"{keyword or oid}=#{buf[vs:vce].hex()}"
    return f"{keyword}={_escape(buf[vcs:vce].decode(enc, errors='replace'))}"


def name_from_der(buf: bytes, start: int = 0, end: int | None = None) -> str:
    """An X.501 Name (DER, ``buf[start:end]`` being the SEQUENCE) in RFC 2253 form."""
    tag, cs, ce, _ = _tlv(buf, start)
    if tag != 0x30:
        raise DerError("Name is not a SEQUENCE")
    rdns = []
    for stag, _s, scs, sce in _elements(buf, cs, ce):
        if stag != 0x31:
            raise DerError("RDN is not a SET")
        rdns.append("+".join(_ava(buf, acs, ace) for _t, _a, acs, ace in _elements(buf, scs, sce)))
    return ",".join(reversed(rdns))


def subject_from_der(cert: bytes) -> str:
    """The subject of a DER X.509 certificate, RFC 2253 form as Java prints it."""
    _t, cs, ce, _ = _tlv(cert, 0)                    # Certificate
    _t, tcs, tce, _ = _tlv(cert, cs)                 # tbsCertificate
    fields = _elements(cert, tcs, tce)
    if fields and fields[0][0] == 0xA0:              # [0] version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < 5:
        raise DerError("short tbsCertificate")
    return name_from_der(cert, fields[4][1])


# ---------------------------------------------------------------------------------- mapping rules

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)


class NoMatchingRule(Exception):
    pass


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str | None = None, case: str = ""):
        self.default = pattern is None
        self.text = "DEFAULT" if self.default else f"RULE:{pattern}/{replacement}" + (f"/{case}" if case else "")
        if not self.default:
            try:
                self.regex = re.compile(pattern)
            except re.error as e:
                raise ValueError(f"Invalid rule: {self.text}: {e}") from None
            self.replacement = replacement
            self.case = case

    def __repr__(self) -> str:
        return self.text

    def apply(self, dn: str) -> str | None:
        if self.default:
            return dn
        if self.regex.fullmatch(dn) is None:
            return None
        groups = self.regex.groups
        out = self.regex.sub(lambda m: _expand(self.replacement, m, groups), dn)
        if self.case == "L":
            out = out.lower()
        elif self.case == "U":
            out = out.upper()
        return out


def _expand(replacement: str, m: re.Match, groups: int) -> str:
    """A Java ``replaceAll`` replacement: ``$n`` (the longest group number that exists),
    ``${name}``, ``\\x`` for a literal x.  A ``$n`` naming no group (when the pattern has
    groups) stays literal text, as Kafka's rule mapper arranges it."""
    out, i, n = [], 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\" and i + 1 < n:
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and replacement[i + 1] == "{":
            j = replacement.index("}", i)
            out.append(m.group(replacement[i + 2:j]) or "")
            i = j + 1
        elif c == "$" and i + 1 < n and replacement[i + 1].isdigit():
            j = i + 1
            ref = int(replacement[j])
            j += 1
            while j < n and replacement[j].isdigit() and ref * 10 + int(replacement[j]) <= groups:
                ref = ref * 10 + int(replacement[j])
                j += 1
            if ref > groups:
                if groups == 0:
                    raise NoMatchingRule(f"No group {ref} in the rule's pattern")
                out.append(replacement[i:j])          # not a group: literal, as Kafka's mapper escapes it
            else:
                out.append(m.group(ref) or "")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class PrincipalMapper:
    """``ssl.principal.mapping.rules`` parsed; ``name(dn)`` maps a subject or raises NoMatchingRule.
    ValueError for rules that do not parse (Kafka refuses to start with them)."""

    def __init__(self, rules: str | None):
        text = "DEFAULT" if rules is None else str(rules)
        self.rules: list[_Rule] = []
        for m in _SPLITTER.finditer(text.strip()):
            rule = m.group(1)
            p = _PARSER.match(rule)
            if p is None or p.end() != len(rule):
                raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[p.end() if p else 0:]}`")
            if p.group(1) is not None:
                self.rules.append(_Rule())
            elif p.group(2) is not None:
                self.rules.append(_Rule(p.group(2), p.group(4), p.group(6) or ""))
        self.is_default = [r.text for r in self.rules] == ["DEFAULT"]

    def name(self, dn: str) -> str:
        for r in self.rules:
            out = r.apply(dn)
            if out is not None:
                return out
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self.rules}")

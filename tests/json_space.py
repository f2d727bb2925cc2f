"""Hypothesis strategies over the space docs/validation.md defines: declared schemas and the
records they judge, written by hand from the docs, never by onceflow's own generator.

- `schemas()`: a declared schema with every type and rule, nested paths, optional fields.
- `records(schema)`: record values (bytes or None) from every corner: valid events built
  to keep every rule; fields holding any JSON value; numbers written every way JSON allows
  (`1.0`, `-0`, `1e400`, 500 digits); strings with long runs of escapes, backslashes,
  quotes, surrogate pairs and lone surrogates, up to `max_bytes`; records of exactly
  `max_bytes`; deep nesting; thousands of keys; whitespace anywhere; and byte-level damage
  (truncation, stray bytes, invalid UTF-8, single quotes, trailing content).
- `valid_records(schema)`: only events the docs call valid, to check that both judges accept them.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from onceflow.schema.model import Schema
from onceflow.schema.reasons import MAX_DEPTH, MAX_NUMBER_CHARS

WS = " \t\n\r"
# patterns in the syntax Java and Python share, with the anchors, classes and escapes users write;
# each with a Python regex that generates values matching it (`$` is the very end: `\\Z`)
PATTERNS = {
    "^[A-Z]{3}$": r"^[A-Z]{3}\Z",
    r"^v[0-9]+\.[0-9]+$": r"^v[0-9]+\.[0-9]+\Z",
    "[a-z]": "[a-z]",
    "^.{2,5}$": r"^[^\n]{2,5}\Z",
    r"\d": "[0-9]",
    r"^\w+$": r"^[A-Za-z0-9_]+\Z",
    r"\s": r"[ \t\n\r\f\v]",
    "(?i)^abc": "^[aA][bB][cC]",
    "x$": r"x\Z",
    "^[^$]*$": r"^[^$]*\Z",
    r"^(?:ab|c)*+$": r"^(?:ab|c)*\Z",
    r"^[]a-]+$": r"^[\]a-]+\Z",
    "^$": r"^\Z",
}


@dataclass(frozen=True)
class Raw:
    """JSON text written as it is (a number literal, or any fragment): the serializer's escape hatch."""

    text: str


def dumps(value: Any, draw, *, ws: bool = True) -> str:
    """JSON text of a value, with every escape JSON allows for each character and whitespace in
    every gap. The choices come from one drawn seed, not one draw each, so a long string does
    not exhaust Hypothesis's buffer."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    spacing = draw(st.sampled_from([0.0, 0.2, 0.7])) if ws else 0.0  # how often a gap holds whitespace

    def gap() -> str:
        return "".join(rnd.choice(WS) for _ in range(rnd.randint(1, 3))) if rnd.random() < spacing else ""

    def string_(s: str) -> str:
        out = []
        for ch in s:
            code = ord(ch)
            if ch in '"\\' or code < 0x20 or 0xD800 <= code <= 0xDFFF:
                short = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}
                out.append(short[ch] if ch in short and rnd.random() < 0.5 else f"\\u{code:04x}")
            elif ch == "/" and rnd.random() < 0.5:
                out.append("\\/")
            elif code > 0x7F and rnd.random() < 0.25:
                if code > 0xFFFF:
                    hi, lo = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
                    out.append(f"\\u{hi:04X}\\u{lo:04x}")
                else:
                    out.append(f"\\u{code:04x}")
            else:
                out.append(ch)
        return '"' + "".join(out) + '"'

    def walk(v: Any) -> str:
        if isinstance(v, Raw):
            return v.text
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return repr(v)
        if isinstance(v, Decimal):
            return str(v)
        if isinstance(v, str):
            return string_(v)
        if isinstance(v, list):
            return "[" + ",".join(gap() + walk(x) + gap() for x in v) + "]"
        items = [gap() + string_(k) + gap() + ":" + gap() + walk(x) + gap() for k, x in v.items()]
        return "{" + ",".join(items) + "}"

    return gap() + walk(value) + gap()


# -- values --------------------------------------------------------------------------------
@functools.cache
def number_literals(short: bool = False) -> st.SearchStrategy[Raw]:
    """Every way JSON writes a number, near every edge Spark's and Python's readers have
    (`short`: none past MAX_NUMBER_CHARS)."""
    digits = st.text(alphabet="0123456789", min_size=1, max_size=45)
    integer = st.one_of(
        st.integers(-(2**70), 2**70).map(str),
        st.sampled_from(["0", "-0", "9223372036854775807", "-9223372036854775808", "9223372036854775808"]),
        st.sampled_from(["2147483647", "2147483648", "-2147483648", "-2147483649"]),
        digits.map(lambda d: d.lstrip("0") or "0"),
        st.integers(MAX_NUMBER_CHARS - 2, MAX_NUMBER_CHARS if short else MAX_NUMBER_CHARS + 2).map(lambda n: "9" * n),
    )
    fraction = st.builds(lambda i, f: f"{i}.{f}", integer, digits)
    exponent = st.builds(
        lambda m, e, s: f"{m}{e}{s}",
        st.one_of(integer, fraction),
        st.sampled_from("eE"),
        st.one_of(st.integers(-400, 400).map(str), st.integers(0, 400).map(lambda n: f"+{n}")),
    )
    floats = st.floats(allow_nan=False, allow_infinity=False).map(repr)
    return st.one_of(integer, fraction, exponent, floats).map(Raw)


@functools.cache
def hard_strings(max_size: int = 64, surrogates: bool = True) -> st.SearchStrategy[str]:
    """Strings of every code point (lone surrogates too, unless not `surrogates`), escapes,
    quotes and backslashes in runs."""
    specials = ['"', "\\", "\n", "\u2028", "\U0001f600", "é", "/", "\x00"] + (["\ud800"] if surrogates else [])
    runs = st.builds(lambda c, n: c * n, st.sampled_from(specials), st.integers(1, 40))
    chars = st.characters() if surrogates else st.characters(codec="utf-8")
    return st.one_of(
        st.text(alphabet=chars, max_size=max_size),
        st.lists(st.one_of(st.text(alphabet=chars, max_size=4), runs), max_size=6).map("".join),
    )


@functools.cache
def any_json(max_leaves: int = 12, valid: bool = False) -> st.SearchStrategy[Any]:
    """Any JSON value; `valid`: none that validation refuses anywhere in a record (no lone
    surrogate, no number past MAX_NUMBER_CHARS)."""
    numbers = (
        number_literals(short=True).filter(lambda r: len(r.text) <= MAX_NUMBER_CHARS) if valid else number_literals()
    )
    leaves = st.one_of(st.none(), st.booleans(), numbers, hard_strings(24, surrogates=not valid))
    keys = hard_strings(6, surrogates=not valid).filter(lambda k: not k.startswith("_pad_"))
    return st.recursive(
        leaves,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
        max_leaves=max_leaves,
    )


def _timestamp_text(dt: datetime, fraction_digits: int, offset_minutes: int) -> str:
    local = dt + timedelta(minutes=offset_minutes)
    frac = f".{local.microsecond:06d}"[: fraction_digits + 1] if fraction_digits else ""
    if offset_minutes == 0 and fraction_digits % 2 == 0:
        zone = "Z"
    else:
        sign = "-" if offset_minutes < 0 else "+"
        zone = f"{sign}{abs(offset_minutes) // 60:02d}:{abs(offset_minutes) % 60:02d}"
    return local.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0") + frac + zone


@functools.cache
def timestamp_texts(valid_only: bool = False) -> st.SearchStrategy[str]:
    offsets = st.integers(-18 * 60, 18 * 60)
    instants = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30))
    valid = st.builds(_timestamp_text, instants, st.integers(0, 6), offsets)
    if valid_only:
        return valid
    edges = st.sampled_from(
        [
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-01:00",
            "2026-01-01T00:00:00+18:00",
            "2026-01-01T00:00:00+18:01",
            "2026-01-01T00:00:00+05:60",
            "2026-01-01T23:59:60Z",
            "2026-02-29T00:00:00Z",
            "2026-01-01T00:00:00.1234567Z",
            "2026-01-01T00:00:00",
            "2026-01-01 00:00:00Z",
            "2026-01-01t00:00:00z",
            "2026-01-01T00:00:00Z\n",
            "2026-01-01T00:00:00Z\r",
            "2026-01-01T00:00:00Z\u2028",
            " 2026-01-01T00:00:00Z",
            "0000-01-01T00:00:00Z",
            "+2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-1-01T00:00:00Z",
        ]
    )
    return st.one_of(valid, edges, valid.map(lambda t: t + "\n"), st.text(alphabet="0123456789-:T.Z+ ", max_size=30))


@functools.cache
def date_texts(valid_only: bool = False) -> st.SearchStrategy[str]:
    valid = st.dates(min_value=date(1, 1, 1)).map(lambda d: f"{d.year:04d}-{d.month:02d}-{d.day:02d}")
    if valid_only:
        return valid
    edges = st.sampled_from(
        [
            "0000-01-01",
            "2026-02-29",
            "2024-02-29",
            "10000-01-01",
            "+2026-01-01",
            "2026-1-1",
            "2026-01-01\n",
            "2026-01-01 ",
            "2026-01-01\u2028",
        ]
    )
    return st.one_of(valid, edges, st.text(alphabet="0123456789-", max_size=12))


@functools.cache
def decimal_texts(
    precision: int, scale: int, valid_only: bool = False, lo: Decimal | None = None, hi: Decimal | None = None
) -> st.SearchStrategy[str]:
    """Decimal text a decimal(p,s) field reads exactly (within [lo, hi] when given), written with
    leading and trailing zeros too; and, unless valid_only, text it must refuse."""
    whole = precision - scale
    step = Decimal(1).scaleb(-scale)
    most = Decimal(10) ** whole - step
    least = max(-most, lo) if lo is not None else -most
    greatest = min(most, hi) if hi is not None else most
    first, last = (
        int((least / step).to_integral_value("ROUND_CEILING")),
        int((greatest / step).to_integral_value("ROUND_FLOOR")),
    )

    def build(units: int, lead: int, trail: int) -> str:
        text = format(Decimal(units).scaleb(-scale), "f")
        sign, body = ("-", text[1:]) if text.startswith("-") else ("", text)
        return sign + "0" * lead + body + ("" if not trail else ("0" * trail if "." in body else "." + "0" * trail))

    valid = st.builds(build, st.integers(first, last), st.integers(0, 3), st.integers(0, 4))
    if valid_only:
        return valid
    bad = st.one_of(
        st.text(alphabet="0123456789.-+eE ", max_size=precision + 4),
        valid.map(lambda t: t + "\n"),
        valid.map(lambda t: " " + t),
        st.sampled_from(["12.", ".5", "1e2", "NaN", "١٢", "1_000", "--1", "0x10"]),
        st.builds(lambda n: "9" * n, st.integers(whole + 1, whole + 3)),
    )
    return st.one_of(valid, bad)


@functools.cache
def uuid_texts(valid_only: bool = False) -> st.SearchStrategy[str]:
    valid = st.uuids().map(str)
    if valid_only:
        return st.one_of(valid, valid.map(str.upper))
    return st.one_of(
        valid,
        valid.map(lambda u: u + "\n"),
        valid.map(lambda u: u.replace("-", "")),
        st.text(alphabet="0123456789abcdefABCDEF-g", min_size=30, max_size=40),
    )


# -- schemas -------------------------------------------------------------------------------
@st.composite
def _field(draw, i: int, base: str) -> dict:
    f: dict[str, Any] = {"name": f"f{i}", "required": draw(st.booleans())}
    if base == "decimal":
        p = draw(st.integers(1, 38))
        base = f"decimal({p},{draw(st.integers(0, p))})"
    f["type"] = base
    if draw(st.booleans()):
        f["path"] = f"$.g{draw(st.integers(0, 1))}.f{i}"
    kind = base.split("(")[0]
    if kind == "string":
        rule = draw(st.sampled_from(["allowed", "pattern", "max_length", "uuid", None]))
        if rule == "allowed":
            f["allowed"] = draw(st.lists(hard_strings(8, surrogates=False), min_size=1, max_size=3, unique=True))
        elif rule == "pattern":
            f["pattern"] = draw(st.sampled_from(sorted(PATTERNS)))
        elif rule == "max_length":
            f["max_length"] = draw(st.integers(1, 3000))
        elif rule == "uuid":
            f["uuid"] = True
    elif kind in ("int", "long"):
        if draw(st.booleans()):  # allowed values or bounds: both could leave no valid value
            f["allowed"] = draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=3, unique=True))
        else:
            if draw(st.booleans()):
                f["min"] = draw(st.integers(-(2**40), 0))
            if draw(st.booleans()):
                f["max"] = draw(st.integers(0, 2**40))
    elif kind in ("double", "decimal"):
        if draw(st.booleans()):
            f["min"] = draw(st.sampled_from([0, -1.5, "-0.01", -1000]))
        if draw(st.booleans()):
            f["max"] = draw(st.sampled_from([1, 1e20, "99.99", 1000]))
    return f


@st.composite
def schemas(draw) -> Schema:
    """A schema with 1-5 fields of any type and rules, nested or not, plus its event time."""
    bases = draw(
        st.lists(
            st.sampled_from(["string", "int", "long", "double", "decimal", "boolean", "timestamp", "date"]),
            min_size=1,
            max_size=5,
        )
    )
    fields = [draw(_field(i, b)) for i, b in enumerate(bases)]
    ts_path = draw(st.sampled_from([None, "$.meta.ts"]))
    fields.append({"name": "ts", "type": "timestamp", **({"path": ts_path} if ts_path else {})})
    return Schema.model_validate(
        {
            "max_bytes": draw(st.sampled_from([300, 2000, 16384])),
            "event_time": "ts",
            "fields": fields,
        }
    )


# -- records -------------------------------------------------------------------------------
@functools.cache  # strategies are built once: building one is what costs, drawing is cheap
def field_values(f, valid_only: bool = False, loose_first: bool = False) -> st.SearchStrategy[Any]:
    """Values for one declared field: those the docs accept (keeping every rule when
    valid_only), and, unless valid_only, every other JSON value too (drawn first with
    loose_first: Hypothesis favours the first of a choice)."""
    t = f.ftype
    valid: st.SearchStrategy[Any]
    loose: st.SearchStrategy[Any]
    if t.base == "string":
        if f.allowed:
            valid = st.sampled_from(list(f.allowed))
        elif f.uuid:
            valid = uuid_texts(True)
        elif f.pattern:
            valid = st.from_regex(PATTERNS[f.pattern], alphabet=st.characters(codec="utf-8"))
        else:
            valid = hard_strings(64, surrogates=False)
        loose = st.one_of(
            hard_strings(64), uuid_texts(), st.builds(lambda c, n: c * n, st.characters(), st.integers(0, 3100))
        )
        if f.max_length:
            valid = st.one_of(valid, st.just("y" * f.max_length)).filter(lambda s: len(s) <= f.max_length)
            loose = st.one_of(st.just("\u2028" * (f.max_length + 1)), loose)
    elif t.base in ("int", "long"):
        lo, hi = (-(2**31), 2**31 - 1) if t.base == "int" else (-(2**63), 2**63 - 1)
        lo = max(lo, int(Decimal(str(f.min)))) if f.min is not None else lo
        hi = min(hi, int(Decimal(str(f.max)))) if f.max is not None else hi
        ints = st.sampled_from([v for v in f.allowed if lo <= v <= hi]) if f.allowed else st.integers(lo, hi)
        valid = st.one_of(ints, ints.map(lambda v: Raw(f"{v}.0")), ints.map(lambda v: Raw(f"{v}.000")))
        loose = number_literals()
    elif t.base == "double":
        flo = float(Decimal(str(f.min))) if f.min is not None else None
        fhi = float(Decimal(str(f.max))) if f.max is not None else None
        valid = st.floats(min_value=flo, max_value=fhi, allow_nan=False, allow_infinity=False)
        loose = number_literals()
    elif t.base == "decimal":
        dlo = Decimal(str(f.min)) if f.min is not None else None
        dhi = Decimal(str(f.max)) if f.max is not None else None
        valid = decimal_texts(t.precision, t.scale, True, dlo, dhi)
        # as a JSON number too: no leading zeros, and at most 38 digits (more is read as a double)
        numbers = valid.map(lambda s: format(Decimal(s), "f")).filter(lambda s: len(s.strip("-.")) <= 38)
        valid = st.one_of(valid, numbers.map(Raw))
        loose = st.one_of(decimal_texts(t.precision, t.scale), number_literals())
    elif t.base == "timestamp":
        valid, loose = timestamp_texts(True), timestamp_texts()
    elif t.base == "date":
        valid, loose = date_texts(True), date_texts()
    else:
        valid, loose = st.booleans(), st.sampled_from(["true", 0, 1])
    if valid_only:
        return valid
    if loose_first:
        return st.one_of(loose, any_json(6), valid)
    return st.one_of(valid, loose, any_json(6))


_ABSENT = object()


@st.composite
def events(draw, schema: Schema, valid_only: bool = False, off: int | None = None) -> dict:
    """A JSON object with the schema's fields at their paths and undeclared members beside them:
    every field valid (valid_only), every field of any shape, present, absent or null (the
    default), or every field valid but the one at index `off`, of any shape (to reach each
    field's own reasons and rules, which an event wrong everywhere hides)."""
    obj: dict[str, Any] = {}
    for i, f in enumerate(schema.fields):
        if valid_only or (off is not None and i != off):
            value = _ABSENT if not f.required and draw(st.booleans()) else draw(field_values(f, True))
        elif off is not None:
            value = draw(st.one_of(field_values(f, loose_first=True), st.just(_ABSENT), st.none()))
        else:
            value = draw(st.one_of(field_values(f), st.just(_ABSENT), st.none()))
        if value is _ABSENT:
            continue
        node = obj
        for key in f.keys[:-1]:
            node = node.setdefault(key, {})
        node[f.keys[-1]] = value
    extras = st.dictionaries(
        st.text(max_size=6).filter(lambda k: not k.startswith("_pad_")), any_json(valid=valid_only), max_size=3
    )
    for key, value in draw(extras).items():
        obj.setdefault(key, value)
    keys = list(obj)
    order = draw(st.permutations(keys))
    return {k: obj[k] for k in order}


def _pad(text: str, size: int) -> str:
    """The object with an undeclared string member that brings it to exactly `size` bytes."""
    room = size - len(text.encode()) - len(', "_pad_": ""')
    return text[:-1] + ', "_pad_": "' + "p" * room + '"}' if room >= 0 and text != "{}" else text


@st.composite
def valid_records(draw, schema: Schema) -> bytes:
    """A record docs/validation.md calls valid: every field keeps its type and rules, undeclared
    members of any shape, any whitespace and escaping, up to exactly max_bytes."""
    text = dumps(draw(events(schema, valid_only=True)), draw)
    if draw(st.integers(0, 4)) == 0 and text.rstrip(WS).endswith("}"):
        text = _pad(text.rstrip(WS), schema.max_bytes)
    return text.encode()


def _damage(draw, data: bytes) -> bytes:
    how = draw(st.integers(0, 9))
    if how == 0 and data:
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == 1:
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=3)) + data[at:]
    if how == 2:
        return data + draw(st.sampled_from([b" x", b"}", b" null", b",{}", b"{}", b"\x0c", b"\x00", b"\xe2\x80\xa8"]))
    if how == 3:
        return data.replace(b'"', b"'")
    if how == 4:
        return b"[" + data + b"]"
    if how == 5:
        return b"\xef\xbb\xbf" + data
    if how == 6 and data.endswith(b"}"):
        return data[:-1] + b', "k": 1, "k": 2}'
    if how == 7:
        return draw(st.binary(max_size=40))
    if how == 8 and data:
        at = draw(st.integers(0, len(data) - 1))
        return data[:at] + draw(st.sampled_from([b"\\", b'"', b"\\u", b"\\ud800", b"\t", b"\x01"])) + data[at + 1 :]
    return data


def _edge(draw, schema: Schema) -> bytes:
    """The issue's records: long strings and escape runs, deep nesting, wide objects, long numbers."""
    n = schema.max_bytes
    depth = st.integers(MAX_DEPTH - 3, MAX_DEPTH + 3)
    members = [
        lambda: '"' + "p" * draw(st.integers(n // 2, n)) + '"',
        lambda: '"' + "\\n" * draw(st.integers(n // 8, n // 2)) + '"',
        lambda: '"' + "\\\\" * draw(st.integers(n // 8, n // 2)) + '"',
        lambda: '"' + "\\ud83d\\ude00" * draw(st.integers(n // 24, n // 12)) + '"',
        lambda: "[" * (d := draw(depth)) + "]" * d,
        lambda: '{"a":' * (d := draw(depth)) + "1" + "}" * d,
        lambda: "{" + ",".join(f'"k{i}":{i}' for i in range(draw(st.integers(1, n // 10)))) + "}",
        lambda: "9" * draw(st.integers(MAX_NUMBER_CHARS - 3, MAX_NUMBER_CHARS + 3)),
        lambda: "0." + "0" * draw(st.integers(30, 45)) + "1",
        lambda: '"' + "[" * draw(st.integers(MAX_DEPTH, max(MAX_DEPTH, n // 2))) + '"',
    ]
    member = members[draw(st.integers(0, len(members) - 1))]()
    base = dumps(draw(events(schema)), draw, ws=False)
    if not base.endswith("}"):
        return base.encode()
    inner = base[:-1].rstrip()
    return (inner + ("," if inner != "{" else "") + '"_pad_":' + member + "}").encode("utf-8", "surrogatepass")


@st.composite
def records(draw, schema: Schema) -> bytes | None:
    """Any record value: valid ones, one field off, fields of every shape, the edges, damaged
    bytes, any JSON at all, a tombstone."""
    kind = draw(st.integers(0, 19))  # Hypothesis favours small draws: the simplest kinds come last
    if kind <= 5:
        off = draw(st.integers(0, len(schema.fields) - 1))
        return dumps(draw(events(schema, off=off)), draw).encode("utf-8", "surrogatepass")
    if kind <= 9:
        return draw(valid_records(schema))
    if kind <= 11:
        return dumps(draw(events(schema)), draw).encode("utf-8", "surrogatepass")
    if kind <= 13:
        return _edge(draw, schema)
    if kind <= 17:
        return _damage(draw, draw(valid_records(schema)))
    if kind == 18:
        return dumps(draw(any_json()), draw).encode("utf-8", "surrogatepass")
    return None

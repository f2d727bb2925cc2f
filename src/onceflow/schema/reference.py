"""The audit's own judge: the declared rules implemented again, in plain Python.

The streaming job validates records with Spark SQL compiled from the schema
(spark/parse.py). An audit that reused that code would agree with its bugs, so
the audit classifies the committed source records with this second, independent
implementation of docs/validation.md: Python's strict UTF-8 decoder and `json`
parser instead of Spark's cast and VARIANT parser, a character scanner instead of
regular expressions for the whole-text limits, and hand-written readers of
decimals, timestamps, dates and UUIDs instead of patterns. Nothing here is shared
with the job but the documented order of checks (schema/reasons.py); where the two
disagree on a record, the audit's accounting and content checks fail and name the
offsets. The readers of a record and of a field (`read_record`, `lookup`, `read_field`)
also judge a Debezium change event's envelope and row (cdc/envelope.py).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from onceflow.schema import reasons as R
from onceflow.schema.model import INT_RANGE, Encoding, FieldSpec, Schema
from onceflow.schema.reasons import Reason

_WS = " \t\n\r"
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
_NUMBER_CHARS = frozenset("0123456789+-.eE")
_EXACT_DIGITS = 38  # a number with more digits (or fraction digits) than this is read as a double
_MAX_OFFSET_MINUTES = 18 * 60  # the widest UTC offset a timestamp may carry (docs/validation.md)
_LONG_MIN, _LONG_MAX = INT_RANGE["long"]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FIRST = datetime(1, 1, 1, tzinfo=UTC)  # the instants a timestamp may stand for: years 0001-9999
_LAST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
_MAX_UNSCALED_BYTES = 16  # two's complement of 128 bits holds every decimal(38) unscaled value
_MAX_SCALE = 38
# How a value is written: the encoding and, for `precise`, the scale of its unscaled integer.
# None: the field's declared encoding and scale (FieldSpec.read_as).
How = tuple[Encoding | None, int] | None


def _digits(text: str) -> bool:
    return bool(text) and all(c in _DIGITS for c in text)


@dataclass(frozen=True)
class _Num:
    """A JSON number as its literal, and the kind docs/validation.md gives it."""

    literal: str

    @property
    def kind(self) -> str:
        """BIGINT (an integer literal within 64 bits), DECIMAL / DECIMAL0 (exact, with / without
        a fraction once its trailing zeros are dropped) or DOUBLE (an exponent, or more than 38
        digits or fraction digits: read as an approximate double)."""
        lit = self.literal
        if "e" in lit or "E" in lit:
            return "DOUBLE"
        whole, _, frac = lit.lstrip("-").partition(".")
        if not frac and _LONG_MIN <= int(lit) <= _LONG_MAX:
            return "BIGINT"
        significant = (whole + frac).lstrip("0") or "0"
        if len(significant) > _EXACT_DIGITS or len(frac) > _EXACT_DIGITS:
            return "DOUBLE"
        return "DECIMAL" if frac.rstrip("0") else "DECIMAL0"

    @property
    def text(self) -> str:
        """The exact number without a fraction of zeros ('1.50' -> '1.5', '2.00' -> '2', '-0' -> '0')."""
        whole, _, frac = self.literal.partition(".")
        frac = frac.rstrip("0")
        out = f"{whole}.{frac}" if frac else whole
        return "0" if out == "-0" else out


class _DuplicateKey(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _DuplicateKey(sorted({k for k in keys if keys.count(k) > 1})[0])
    return dict(pairs)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_float=_Num, parse_int=_Num, parse_constant=_refuse_constant)


# A JSON string as outside_strings reads it: a quote, then (possessively: no backtracking) any run
# of characters but a quote or a backslash, a backslash with the character after it, or a backslash
# at the very end; then its closing quote (group 1), or the end of the text when none closes it.
_STRING = re.compile(r'"(?:[^"\\]++|\\.|\\\Z)*+(?:(")|\Z)', re.DOTALL)


def _masked(match: re.Match) -> str:
    return '""' if match.group(1) is not None else match.group()


def outside_strings(text: str) -> str:
    """The text with each JSON string replaced by `""`: a `"` opens a string that runs to the
    next `"` not taken by a backslash (a backslash takes the character after it, whatever it
    is). A `"` that no later quote closes opens nothing, and then no quote after it can close
    either, so the rest of the text stays as it is. (One regex pass, linear in the text.)"""
    return _STRING.sub(_masked, text)


def _too_deep(masked: str) -> bool:
    if masked.count("[") + masked.count("{") <= R.MAX_DEPTH:  # fewer brackets than the limit: no depth can pass it
        return False
    depth = 0
    for c in masked:
        if c in "[{":
            depth += 1
            if depth > R.MAX_DEPTH:
                return True
        elif c in "]}":
            depth -= 1
    return False


_LONG_NUMBER = re.compile(f"[{re.escape(''.join(sorted(_NUMBER_CHARS)))}]{{{R.MAX_NUMBER_CHARS + 1}}}")


def _number_too_long(masked: str) -> bool:
    """More than MAX_NUMBER_CHARS number characters in a row."""
    return _LONG_NUMBER.search(masked) is not None


# The escapes of a text read left to right, a backslash taking the character after it, as long as no
# half of a surrogate pair stands alone: any run of other characters; a high half escaped and at once
# a low half; any other `\uXXXX` unit; a `\u` without four hex digits, a backslash and any other
# character, a backslash at the very end (each taking two characters, or what is left). Possessive:
# one pass, linear in the text; a text it does not match whole has a lone surrogate.
_HIGH = r"\\u[dD][89abAB][0-9a-fA-F]{2}"
_LOW = r"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_ESCAPES_PAIRED = re.compile(
    rf"(?:[^\\]++|{_HIGH}{_LOW}|\\u(?![dD][89a-fA-F][0-9a-fA-F]{{2}})[0-9a-fA-F]{{4}}|\\u(?![0-9a-fA-F]{{4}})|\\[^u]|\\\Z)*+",
    re.DOTALL,
)


def _lone_surrogate(text: str) -> bool:
    """A `\\u` escape of half a surrogate pair anywhere in the text. Escapes are read left to
    right, a backslash taking the character after it; a high half must be followed at once by a
    low one, and a low half must follow a high one."""
    return "\\" in text and _ESCAPES_PAIRED.fullmatch(text) is None


class _AbsentType:
    """A field whose path is not in the object (distinct from JSON null)."""

    def __repr__(self) -> str:
        return "ABSENT"


_Absent = _AbsentType()
ABSENT: Any = _Absent  # what `lookup` gives for a path that is not in the object


def _kind(value: Any) -> str:
    if value is _Absent:
        return "ABSENT"
    if value is None:
        return "VOID"
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, _Num):
        return value.kind
    return "OBJECT" if isinstance(value, dict) else "ARRAY"


# -- the values of the declared types, read by hand from docs/validation.md ------------------
def read_decimal(text: str, precision: int, scale: int) -> Decimal | None:
    """`-?digits[.digits]` with at most precision-scale integer digits once leading zeros are
    dropped and at most `scale` fraction digits once trailing zeros are; else None (never rounded)."""
    body = text[1:] if text.startswith("-") else text
    whole, dot, frac = body.partition(".")
    if not _digits(whole) or (dot and not _digits(frac)):
        return None
    if len(whole.lstrip("0")) > precision - scale or len(frac.rstrip("0")) > scale:
        return None
    return Decimal(text)


def read_date(text: str) -> date | None:
    """YYYY-MM-DD, a real date in years 0001-9999."""
    if len(text) != 10 or text[4] != "-" or text[7] != "-":
        return None
    y, m, d = text[:4], text[5:7], text[8:]
    if not (_digits(y) and _digits(m) and _digits(d)):
        return None
    try:
        return date(int(y), int(m), int(d))
    except ValueError:
        return None


def read_timestamp(text: str) -> datetime | None:
    """YYYY-MM-DDTHH:MM:SS[.1-6 digits](Z|±HH:MM), a real date and time of day, an offset of at
    most 18 hours, and a UTC instant in years 0001-9999; the instant, in UTC."""
    day = read_date(text[:10])
    if day is None or len(text) < 20 or text[10] != "T" or text[13] != ":" or text[16] != ":":
        return None
    hh, mm, ss = text[11:13], text[14:16], text[17:19]
    if not (_digits(hh) and _digits(mm) and _digits(ss)):
        return None
    rest, micros = text[19:], 0
    if rest.startswith("."):
        n = 1
        while n < len(rest) and rest[n] in _DIGITS:
            n += 1
        fraction, rest = rest[1:n], rest[n:]
        if not 1 <= len(fraction) <= 6:
            return None
        micros = int(fraction.ljust(6, "0"))
    if rest == "Z":
        offset = 0
    elif len(rest) == 6 and rest[0] in "+-" and rest[3] == ":" and _digits(rest[1:3]) and _digits(rest[4:]):
        if int(rest[4:]) > 59:
            return None
        offset = int(rest[1:3]) * 60 + int(rest[4:])
        if offset > _MAX_OFFSET_MINUTES:
            return None
        offset = -offset if rest[0] == "-" else offset
    else:
        return None
    try:
        local = datetime(day.year, day.month, day.day, int(hh), int(mm), int(ss), micros, tzinfo=UTC)
        return local - timedelta(minutes=offset)
    except (ValueError, OverflowError):
        return None


def read_uuid(text: str) -> bool:
    """8-4-4-4-12 hexadecimal digits."""
    parts = text.split("-")
    return [len(p) for p in parts] == [8, 4, 4, 4, 12] and all(c in _HEX for p in parts for c in p)


def read_unscaled(text: str) -> int | None:
    """Debezium's `precise` decimal: standard base64 (padded, its unused bits zero) of 1 to 16
    bytes, a big-endian two's-complement integer; else None."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        return None
    if not 1 <= len(raw) <= _MAX_UNSCALED_BYTES or base64.b64encode(raw).decode("ascii") != text:
        return None
    return int.from_bytes(raw, "big", signed=True)


def scaled_text(unscaled: int, scale: int) -> str:
    """The decimal text of unscaled * 10**-scale: (-2662984, 2) -> '-26629.84', (5, 3) -> '0.005'."""
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    whole, frac = (digits[:-scale], digits[-scale:]) if scale else (digits, "")
    return ("-" if unscaled < 0 else "") + whole + (f".{frac}" if frac else "")


def read_precise(v: Any, scale: int, precision: int, declared_scale: int) -> Decimal | None:
    """A `precise` decimal: base64 of the unscaled value at `scale`, or Debezium's variable-scale
    struct {"scale": n, "value": base64} (io.debezium.data.VariableScaleDecimal), read exactly
    into decimal(precision, declared_scale) or None."""
    if isinstance(v, dict):
        n, b64 = v.get("scale"), v.get("value")
        if not (isinstance(n, _Num) and n.kind == "BIGINT" and 0 <= int(n.literal) <= _MAX_SCALE):
            return None
        if not isinstance(b64, str):
            return None
        v, scale = b64, int(n.literal)
    if not isinstance(v, str):
        return None
    unscaled = read_unscaled(v)
    if unscaled is None:
        return None
    return read_decimal(scaled_text(unscaled, scale), precision, declared_scale)


_PER_UNIT = {  # microseconds per unit of an epoch encoding of a timestamp
    Encoding.EPOCH_MILLIS: 1000,
    Encoding.EPOCH_MICROS: 1,
}


def read_epoch(n: int, enc: Encoding) -> date | datetime | None:
    """An integer of an epoch encoding as the date or UTC instant it counts to, within years
    0001-9999; a nanosecond count must be whole microseconds (never rounded)."""
    if enc == Encoding.EPOCH_DAYS:
        first, last = (date(1, 1, 1) - date(1970, 1, 1)).days, (date(9999, 12, 31) - date(1970, 1, 1)).days
        return date(1970, 1, 1) + timedelta(days=n) if first <= n <= last else None
    if enc == Encoding.EPOCH_NANOS:
        if n % 1000:
            return None
        micros = n // 1000
    else:
        micros = n * _PER_UNIT[enc]
    lo = (_FIRST - _EPOCH) // timedelta(microseconds=1)
    hi = (_LAST - _EPOCH) // timedelta(microseconds=1)
    return _EPOCH + timedelta(microseconds=micros) if lo <= micros <= hi else None


def python_pattern(pattern: str) -> re.Pattern:
    """A declared `pattern` as docs/validation.md reads it: `$` outside a character class is the
    very end of the value (Python's own `$` also matches before a final newline), and `\\d`,
    `\\w`, `\\s` and case folding are ASCII."""
    out: list[str] = []
    i, in_class, class_len = 0, False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            class_len += 1
            continue
        if in_class:
            if c == "]" and class_len > 0:
                in_class = False
            elif not (c == "^" and class_len == 0):
                class_len += 1
        elif c == "[":
            in_class, class_len = True, 0
        elif c == "$":
            c = r"\Z"
        out.append(c)
        i += 1
    return re.compile("".join(out), re.ASCII)


def read_record(value: bytes | None, max_bytes: int) -> tuple[str | None, Any]:
    """The whole-record checks of docs/validation.md, in their order: (the reason, None), or
    (None, the JSON object) with numbers kept as their literals for the field checks."""
    if value is not None and len(value) > max_bytes:
        return Reason.OVERSIZED, None
    if value is None:
        return Reason.INVALID_JSON, None
    try:
        text = value.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        return Reason.INVALID_UTF8, None
    # only a text with that many brackets, or that long a run of number characters, can break the two
    # limits outside its strings (masking a string removes characters, never joins a run)
    if text.count("[") + text.count("{") > R.MAX_DEPTH or _number_too_long(text):
        masked = outside_strings(text)
        if _too_deep(masked):
            return Reason.TOO_DEEP, None
        if _number_too_long(masked):
            return Reason.NUMBER_TOO_LONG, None
    if _lone_surrogate(text):
        return Reason.LONE_SURROGATE, None
    start = len(text) - len(text.lstrip(_WS))
    try:
        obj, end = _DECODER.raw_decode(text, start)
    except _DuplicateKey:
        return (Reason.DUPLICATE_KEY if _one_value_ignoring_duplicates(text, start) else Reason.INVALID_JSON), None
    except ValueError:
        return Reason.INVALID_JSON, None
    if _scalar_runs_on(obj, text, end):
        return Reason.INVALID_JSON, None
    if not isinstance(obj, dict):
        return Reason.NOT_AN_OBJECT, None
    if text[end:].strip(_WS):
        return Reason.TRAILING_CONTENT, None
    return None, obj


# what Java calls an identifier's part (Character.isJavaIdentifierPart): letters, digits, `_`, `$`,
# marks, and the ignorable controls
_IDENTIFIER_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nd", "Nl", "Sc", "Pc", "Mn", "Mc", "Cf"})


def _java_identifier_part(c: str) -> bool:
    n = ord(c)
    if n <= 0x08 or 0x0E <= n <= 0x1B or 0x7F <= n <= 0x9F:
        return True
    return unicodedata.category(c) in _IDENTIFIER_CATEGORIES


def _scalar_runs_on(value: Any, text: str, end: int) -> bool:
    """Whether a top-level number or literal runs into what follows it, which Spark's JSON reader
    (Jackson) refuses as no JSON value at all: after a number only whitespace may follow (`8K`,
    `8,` and `8\x1a` are not JSON values); after `true`, `false` or `null`, no character from
    `0` up (but `]` and `}`) that Java counts as part of an identifier (`trueK`, `null_`)."""
    if end >= len(text) or isinstance(value, dict | list | str):
        return False
    c = text[end]
    if isinstance(value, _Num):
        return c not in _WS
    return c >= "0" and c not in "]}" and ord(c) <= 0xFFFF and _java_identifier_part(c)


def _one_value_ignoring_duplicates(text: str, start: int) -> bool:
    decoder = json.JSONDecoder(parse_constant=_refuse_constant)
    try:
        value, end = decoder.raw_decode(text, start)
    except ValueError:
        return False
    return isinstance(value, (dict, list)) and not text[end:].strip(_WS)


def lookup(obj: Any, keys: tuple[str, ...]) -> Any:
    """The value at a path of object keys in what `read_record` parsed; ABSENT if it is not there
    (JSON null is None)."""
    node: Any = obj
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return _Absent
        node = node[key]
    return node


def read_field(f: FieldSpec, raw: Any, how: How = None) -> tuple[str | None, Any]:
    """One declared field's value as `lookup` found it, checked as a record's fields are (its
    rules aside): (MISSING_FIELD, None) when absent or null, (WRONG_TYPE, None), (INVALID_VALUE,
    None), or (None, the typed value). `how`: as Judge.value."""
    if _kind(raw) in ("VOID", "ABSENT"):
        return Reason.MISSING_FIELD, None
    if not Judge.type_ok(f, raw, how):
        return Reason.WRONG_TYPE, None
    typed = Judge.value(f, raw, how)
    return (Reason.INVALID_VALUE, None) if typed is None else (None, typed)


def plain(value: Any) -> Any:
    """A value `read_record` parsed, as plain Python: a number as an int when it is a whole
    number of at most 38 digits written without an exponent, else as the Decimal it writes;
    objects and arrays element by element."""
    if isinstance(value, _Num):
        return int(value.text) if value.kind in ("BIGINT", "DECIMAL0") else Decimal(value.literal)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


@dataclass
class Verdict:
    """One record judged: `reason` None when valid; `values` the typed declared fields."""

    reason: str | None
    values: dict[str, Any]


class Judge:
    """Classifies raw record values by a pipeline's schema, independently of Spark."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.fields = list(schema.fields)
        self._patterns = {f.name: python_pattern(f.pattern) for f in self.fields if f.pattern}
        self._empty = {f.name: None for f in self.fields}
        # what each record asks of every field, worked out once (the audit judges millions)
        self._keys = {f.name: f.keys for f in self.fields}
        self._rules = {f.name: f.rules() for f in self.fields}

    def judge(self, value: bytes | None) -> Verdict:
        reason, obj = read_record(value, self.schema.max_bytes)
        if reason:
            return Verdict(reason, dict(self._empty))
        return self.judge_object(obj)

    def judge_object(
        self, obj: dict, hows: dict[str, How] | None = None, found: dict[str, Any] | None = None
    ) -> Verdict:
        """The declared fields of a JSON object that `read_record` accepted (or an object inside
        one, such as a Debezium envelope's `after`): presence, types, values, then the rules.
        `hows`: per field, how its value is written when a schema wrapper says so (Judge.value);
        `found`: the fields' raw values when the caller read them (else looked up in `obj`)."""
        hows = hows or {}
        if found is None:
            found = {f.name: lookup(obj, self._keys[f.name]) for f in self.fields}
        for f in self.fields:
            if f.required and _kind(found[f.name]) in ("VOID", "ABSENT"):
                return Verdict(Reason.MISSING_FIELD, dict(self._empty))
        present = {n: v for n, v in found.items() if _kind(v) not in ("VOID", "ABSENT")}
        for f in self.fields:
            if f.name in present and not self.type_ok(f, present[f.name], hows.get(f.name)):
                return Verdict(Reason.WRONG_TYPE, dict(self._empty))
        values = dict(self._empty)
        for f in self.fields:
            if f.name in present:
                typed = self.value(f, present[f.name], hows.get(f.name))
                if typed is None:
                    return Verdict(Reason.INVALID_VALUE, dict(self._empty))
                values[f.name] = typed
        for f in self.fields:
            if f.name in present:
                broken = self._rule(f, present[f.name], values[f.name])
                if broken:
                    return Verdict(broken, dict(self._empty))
        return Verdict(None, values)

    # -- fields --------------------------------------------------------------------------
    @staticmethod
    def type_ok(f: FieldSpec, v: Any, how: How = None) -> bool:
        """Whether a parsed JSON value's kind fits the field's declared type (written as `how`
        says: Judge.value)."""
        k, base = _kind(v), f.ftype.base
        enc = how[0] if how is not None else f.read_as
        if enc == Encoding.PRECISE:
            return k in ("STRING", "OBJECT")
        if enc in (Encoding.STRING, Encoding.ISO):
            return k == "STRING"
        if enc == Encoding.DOUBLE:
            return k in ("BIGINT", "DECIMAL0", "DECIMAL")
        if enc == Encoding.UNSUPPORTED:
            return False
        if enc is not None:  # an epoch count: an integer, as a long field's
            return k in ("BIGINT", "DECIMAL0")
        if base in ("string", "timestamp", "date"):
            return k == "STRING"
        if base in ("int", "long"):
            return k in ("BIGINT", "DECIMAL0")
        if base == "double":
            return k in ("BIGINT", "DECIMAL0", "DECIMAL", "DOUBLE")
        if base == "decimal":
            return k in ("BIGINT", "DECIMAL0", "DECIMAL", "STRING")
        return k == "BOOLEAN"

    @staticmethod
    def value(f: FieldSpec, v: Any, how: How = None) -> Any:
        """The typed value of a parsed JSON value whose kind fits the field's type; None if unusable.
        `how`: the encoding and the scale of a `precise` value's unscaled integer, when a
        Debezium schema wrapper states them for this record; else the field's own (read_as, its scale)."""
        base = f.ftype.base
        enc, scale = how if how is not None else (f.read_as, f.ftype.scale)
        if enc == Encoding.PRECISE:
            return read_precise(v, scale, f.ftype.precision, f.ftype.scale)
        if enc is not None and enc not in (Encoding.ISO, Encoding.STRING, Encoding.DOUBLE):
            n = int(v.text)
            return read_epoch(n, enc) if _LONG_MIN <= n <= _LONG_MAX else None
        if base in ("string", "boolean"):
            return v
        if base in ("int", "long"):
            n = int(v.text)
            lo, hi = INT_RANGE[base]
            return n if lo <= n <= hi else None
        if base == "double":
            x = float(v.literal)
            return x if abs(x) != float("inf") else None
        if base == "decimal":
            return read_decimal(v if isinstance(v, str) else v.text, f.ftype.precision, f.ftype.scale)
        if base == "timestamp":
            return read_timestamp(v)
        return read_date(v)

    def _rule(self, f: FieldSpec, raw: Any, value: Any) -> str | None:
        text = raw if isinstance(raw, str) else getattr(raw, "text", raw)
        for rule in self._rules[f.name]:
            if rule == "allowed":
                broken = value not in (f.allowed or ())  # declared: a rule of f.rules()
            elif rule == "min":
                broken = _compare(value, f.min) < 0
            elif rule == "max":
                broken = _compare(value, f.max) > 0
            elif rule == "pattern":
                broken = not self._patterns[f.name].search(text)
            elif rule == "max_length":
                broken = len(text) > (f.max_length or 0)  # declared: a rule of f.rules()
            else:
                broken = not read_uuid(text)
            if broken:
                return R.RULE_REASONS[rule]
        return None


def _compare(value: Any, bound: Any) -> int:
    """-1, 0, 1: a typed value against a declared bound (doubles as doubles, as Spark compares them)."""
    if isinstance(value, float):
        b = float(Decimal(str(bound)))
        return (value > b) - (value < b)
    d, e = Decimal(value), Decimal(str(bound))
    return (d > e) - (d < e)

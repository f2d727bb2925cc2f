"""The audit's own judge: the declared rules implemented again, in plain Python.

The streaming job validates records with Spark SQL compiled from the schema
(spark/parse.py). An audit that reused that code would agree with its bugs, so
the audit classifies the committed source records with this second, independent
implementation: Python's strict UTF-8 decoder and `json` parser instead of
Spark's cast and VARIANT parser, Python `re` and `decimal` instead of Spark
expressions. It follows the same documented order of checks
(schema/reasons.py); where the two disagree on a record, the audit's
accounting and content checks fail and name the offsets.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from onceflow.schema import reasons as R
from onceflow.schema.model import INT_RANGE, FieldSpec, Schema

UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
TIMESTAMP = re.compile(
    r"^(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})$"
)
DATE = re.compile(r"^(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_WS = " \t\n\r"
_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_DECIMAL_DIGITS = 38


@dataclass(frozen=True)
class _Num:
    """A JSON number as its literal: kind as Spark's VARIANT would type it, and its text."""

    literal: str

    @property
    def kind(self) -> str:
        lit = self.literal
        if "e" in lit or "E" in lit:
            return "DOUBLE"
        digits, _, frac = lit.lstrip("-").partition(".")
        frac = frac.rstrip("0")
        if len(digits.lstrip("0") + frac) > _MAX_DECIMAL_DIGITS:
            return "DOUBLE"
        if frac:
            return "DECIMAL"
        return "BIGINT" if -(2**63) <= int(digits or "0") < 2**63 else "DECIMAL0"

    @property
    def text(self) -> str:
        """The number's text without a fraction of zeros ('1.50' -> '1.5', '2.00' -> '2')."""
        lit = self.literal
        if "." in lit and "e" not in lit.lower():
            whole, frac = lit.split(".")
            frac = frac.rstrip("0")
            lit = f"{whole}.{frac}" if frac else whole
            if lit in ("-0",):
                lit = "0"
        return lit


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


class _AbsentType:
    """A field whose path is not in the object (distinct from JSON null)."""

    def __repr__(self) -> str:
        return "ABSENT"


_Absent = _AbsentType()


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


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return bool(_SURROGATE.search(value))
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    return False


def decimal_pattern(precision: int, scale: int) -> re.Pattern:
    whole = precision - scale
    head = f"-?[0-9]{{1,{max(whole, 1)}}}" if whole > 0 else "-?0"
    return re.compile(f"^{head}(\\.[0-9]{{1,{scale}}})?$" if scale else f"^{head}$")


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
        self._dec = {
            f.name: decimal_pattern(f.ftype.precision, f.ftype.scale) for f in self.fields if f.ftype.base == "decimal"
        }
        self._patterns = {f.name: re.compile(f.pattern) for f in self.fields if f.pattern}
        self._empty = {f.name: None for f in self.fields}

    def judge(self, value: bytes | None) -> Verdict:
        reason, obj = self._record(value)
        if reason:
            return Verdict(reason, dict(self._empty))
        found = {f.name: self._lookup(obj, f) for f in self.fields}
        for f in self.fields:
            if f.required and _kind(found[f.name]) in ("VOID", "ABSENT"):
                return Verdict(R.MISSING_FIELD, dict(self._empty))
        present = {n: v for n, v in found.items() if _kind(v) not in ("VOID", "ABSENT")}
        for f in self.fields:
            if f.name in present and not self._type_ok(f, present[f.name]):
                return Verdict(R.WRONG_TYPE, dict(self._empty))
        values = dict(self._empty)
        for f in self.fields:
            if f.name in present:
                typed = self._value(f, present[f.name])
                if typed is None:
                    return Verdict(R.INVALID_VALUE, dict(self._empty))
                values[f.name] = typed
        for f in self.fields:
            if f.name in present:
                broken = self._rule(f, present[f.name], values[f.name])
                if broken:
                    return Verdict(broken, dict(self._empty))
        return Verdict(None, values)

    # -- the record ----------------------------------------------------------------------
    def _record(self, value: bytes | None) -> tuple[str | None, Any]:
        if value is not None and len(value) > self.schema.max_bytes:
            return R.OVERSIZED, None
        if value is None:
            return R.INVALID_JSON, None
        try:
            text = value.decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            return R.INVALID_UTF8, None
        start = len(text) - len(text.lstrip(_WS))
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except _DuplicateKey:
            return (R.DUPLICATE_KEY if self._one_value_ignoring_duplicates(text, start) else R.INVALID_JSON), None
        except (ValueError, RecursionError):
            return R.INVALID_JSON, None
        if not isinstance(obj, dict):
            return R.NOT_AN_OBJECT, None
        if text[end:].strip(_WS):
            return R.TRAILING_CONTENT, None
        if _has_surrogate(obj):
            return R.LONE_SURROGATE, None
        return None, obj

    @staticmethod
    def _one_value_ignoring_duplicates(text: str, start: int) -> bool:
        decoder = json.JSONDecoder(parse_constant=_refuse_constant)
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            return False
        return isinstance(value, (dict, list)) and not text[end:].strip(_WS)

    @staticmethod
    def _lookup(obj: dict, f: FieldSpec) -> Any:
        node: Any = obj
        for key in f.keys:
            if not isinstance(node, dict) or key not in node:
                return _Absent
            node = node[key]
        return node

    # -- fields --------------------------------------------------------------------------
    @staticmethod
    def _type_ok(f: FieldSpec, v: Any) -> bool:
        k, base = _kind(v), f.ftype.base
        if base in ("string", "timestamp", "date"):
            return k == "STRING"
        if base in ("int", "long"):
            return k in ("BIGINT", "DECIMAL0")
        if base == "double":
            return k in ("BIGINT", "DECIMAL0", "DECIMAL", "DOUBLE")
        if base == "decimal":
            return k in ("BIGINT", "DECIMAL0", "DECIMAL", "STRING")
        return k == "BOOLEAN"

    def _value(self, f: FieldSpec, v: Any) -> Any:
        base = f.ftype.base
        if base == "string":
            return v
        if base == "boolean":
            return v
        if base in ("int", "long"):
            n = int(v.text)
            lo, hi = INT_RANGE[base]
            return n if lo <= n <= hi else None
        if base == "double":
            return float(v.literal)
        if base == "decimal":
            text = v if isinstance(v, str) else v.text
            return Decimal(text) if self._dec[f.name].match(text) else None
        if base == "timestamp":
            if not TIMESTAMP.match(v):
                return None
            try:
                return datetime.fromisoformat(v).astimezone(UTC)
            except ValueError:
                return None
        if not DATE.match(v):
            return None
        try:
            return date.fromisoformat(v)
        except ValueError:
            return None

    def _rule(self, f: FieldSpec, raw: Any, value: Any) -> str | None:
        text = raw if isinstance(raw, str) else getattr(raw, "text", raw)
        for rule in f.rules():
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
                broken = not UUID.match(text)
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

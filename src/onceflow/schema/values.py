"""Per declared field, the values a generator writes: valid ones that keep every rule,
wrong-typed ones, unusable ones, and ones that break exactly one rule.

Values are JSON-ready (str, int, float, bool): decimals, timestamps and dates are
written as strings, as a producer would. Each rule breaker is checked here, by this
module's own reading of the rules, to be usable and to keep the field's rules before
the one it breaks (schema/reasons.py), so it lands with exactly that rule's reason.
"""

from __future__ import annotations

import math
import random
import re
import uuid
from datetime import datetime, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

from onceflow.errors import ConfigError
from onceflow.schema.model import INT_RANGE, Encoding, FieldSpec

UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
SPAN = 1000  # the width of a numeric range that lacks a bound
_SAMPLE_UUID = "0b7f3c1e-1d2a-4c3b-9e8f-123456789abc"


def timestamp_text(t: datetime) -> str:
    """RFC 3339 in UTC with microseconds and Z: 2026-01-01T00:00:00.010000Z."""
    return t.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _bound(f: FieldSpec, rule: str) -> Decimal | None:
    value = getattr(f, rule)
    return None if value is None else Decimal(str(value))


def _decimal_text(units: int, scale: int) -> str:
    """Integer units of 10**-scale as decimal text with exactly `scale` digits: (-5, 2) -> '-0.05'."""
    whole, frac = divmod(abs(units), 10**scale)
    sign = "-" if units < 0 else ""
    return f"{sign}{whole}.{frac:0{scale}d}" if scale else f"{sign}{whole}"


def keeps(f: FieldSpec, rule: str, v: Any) -> bool:
    """Whether the JSON value `v` (already usable for the type) keeps one declared rule."""
    # each rule is one of f.rules(): the field declares it, so its setting is not None
    if rule == "allowed":
        assert f.allowed is not None
        return v in f.allowed
    if rule in ("min", "max"):
        bound = _bound(f, rule)
        assert bound is not None
        a: float | Decimal
        b: float | Decimal
        if f.ftype.base == "double":
            a, b = float(v), float(bound)
        else:
            a, b = Decimal(str(v)), bound
        return a >= b if rule == "min" else a <= b
    if rule == "pattern":
        assert f.pattern is not None
        return re.search(f.pattern, v) is not None
    if rule == "max_length":
        assert f.max_length is not None
        return len(v) <= f.max_length
    return UUID.match(v) is not None


class FieldValues:
    """The values of one field. `pool` (group_by fields) keeps the valid values few, so
    aggregates see each group many times. Refuses at construction, with the fix, a field
    the generator cannot make valid values for."""

    def __init__(self, f: FieldSpec, rng: random.Random, pool_size: int | None = None, room: int = 10**9):
        self.f, self.t, self.room = f, f.ftype, room
        self.choices = self._choices()
        if f.uuid and self.choices is None and f.max_length and f.max_length < 36:
            raise self._refuse(
                f"uuid: true with max_length {f.max_length} rejects every UUID (36 characters)",
                "remove one of the two rules",
            )
        self.range = self._range()
        self.pool: list | None = None
        if pool_size:
            if self.t.base == "string" and self.choices is None and not f.uuid:
                self.pool = [self._fit(f"{f.name}-{i:04d}") for i in range(pool_size)]
            else:
                drawn = [self.valid(rng, datetime(2026, 1, 1)) for _ in range(pool_size)]
                self.pool = list(dict.fromkeys(drawn))

    # -- valid values --------------------------------------------------------------------
    def _refuse(self, why: str, fix: str) -> ConfigError:
        return ConfigError(f"schema field {self.f.name!r}: {why}; the generator cannot make valid events. Fix: {fix}")

    def _choices(self) -> list | None:
        f = self.f
        if f.pattern and not f.examples and not f.allowed:
            raise self._refuse(
                f"it has a pattern ({f.pattern}) and no examples",
                "add `examples: [...]` to the field, values that match the pattern",
            )
        # examples are strings: the values to use for a string field (needed with a pattern)
        examples = f.examples if self.t.base == "string" else None
        given, what = (f.allowed, "allowed values") if f.allowed else (examples, "examples")
        if not given:
            return None
        kept = [v for v in given if self.usable(v) and all(keeps(f, r, v) for r in f.rules())]
        if not kept:
            raise self._refuse(
                f"none of its {what} {list(given)} keeps its rules ({', '.join(f.rules())})",
                f"change the {what} or the rules",
            )
        return kept

    def _range(self) -> tuple[Any, Any] | None:
        """(low, high) of drawn numbers: integers, decimal units, or floats; None if not numeric."""
        base, lo, hi = self.t.base, _bound(self.f, "min"), _bound(self.f, "max")
        if base not in ("int", "long", "decimal", "double") or self.choices is not None:
            return None
        if base == "double":
            a, b = _span(None if lo is None else float(lo), None if hi is None else float(hi))
            return a, b
        unit = Decimal(1).scaleb(-self.t.scale) if base == "decimal" else Decimal(1)
        limit = 10**self.t.precision - 1 if base == "decimal" else None
        a = None if lo is None else int((lo / unit).to_integral_value(ROUND_CEILING))
        b = None if hi is None else int((hi / unit).to_integral_value(ROUND_FLOOR))
        a, b = _span(a, b, SPAN * int(1 / unit))
        type_lo, type_hi = (-limit, limit) if limit is not None else INT_RANGE[base]
        a, b = max(a, type_lo), min(b, type_hi)
        if a > b:
            raise self._refuse(
                f"no {self.f.type} value lies within min {self.f.min} / max {self.f.max}",
                "widen the bounds or the type",
            )
        return a, b

    def _fit(self, text: str) -> str:
        return text[-self.f.max_length :] if self.f.max_length else text

    def unique(self, rng: random.Random, n: int) -> Any:
        """A valid value that no other event's (the n-th) has: for the schema's event_id. A UUID
        field draws 128 random bits; otherwise the value carries the event's sequence number
        (an example or allowed value with the number appended, if that still keeps the rules)."""
        f, base = self.f, self.t.base
        if base in ("int", "long") and self.range is not None:
            return self.range[0] + n % (self.range[1] - self.range[0] + 1)
        if base != "string" or f.uuid:
            return self.valid(rng, datetime(2026, 1, 1))
        for head in self.choices or [f"{f.name}-"]:
            candidate = self._fit(f"{head}{n:09d}")
            if all(keeps(f, r, candidate) for r in f.rules()):
                return candidate
        return self.valid(rng, datetime(2026, 1, 1))  # the rules allow no numbering: as drawn

    def valid(self, rng: random.Random, now: datetime) -> Any:
        """A value that keeps every rule of the field (from the pool, if it has one)."""
        if self.pool is not None:
            return rng.choice(self.pool)
        if self.choices is not None:
            return rng.choice(self.choices)
        base, f = self.t.base, self.f
        if base == "string":
            if f.uuid:
                return str(uuid.UUID(int=rng.getrandbits(128), version=4))
            return self._fit(f"{f.name}-{rng.randrange(10**6):06d}")
        span: tuple[Any, Any] = self.range or (None, None)  # numeric, no choices: set by _range()
        if base in ("int", "long"):
            return rng.randint(*span)
        if base == "decimal":
            return _decimal_text(rng.randint(*span), self.t.scale)
        if base == "double":
            lo, hi = span
            return min(max(round(rng.uniform(lo, hi), 3), lo), hi)
        if base == "boolean":
            return rng.random() < 0.5
        if base == "timestamp":
            return timestamp_text(
                now + timedelta(seconds=rng.randrange(-3600, 3600), microseconds=rng.randrange(10**6))
            )
        return (now.date() + timedelta(days=rng.randrange(-30, 30))).isoformat()

    def usable(self, v: Any) -> bool:
        """Of the right JSON type for the field and usable as its declared type."""
        base = self.t.base
        if base in ("int", "long"):
            lo, hi = INT_RANGE[base]
            return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi
        if base == "double":
            return isinstance(v, float) and math.isfinite(v)
        if base == "decimal":
            if not isinstance(v, str) or not re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", v):
                return False
            whole, _, frac = v.lstrip("-").partition(".")
            return len(frac) <= self.t.scale and len(whole.lstrip("0")) <= self.t.precision - self.t.scale
        if base == "boolean":
            return isinstance(v, bool)
        return isinstance(v, str)  # string; timestamps and dates are only ever drawn valid here

    # -- malformed values ----------------------------------------------------------------
    def wrong_types(self) -> list:
        """JSON values whose type does not fit the field's declared type (as its encoding writes it)."""
        enc = self.f.read_as
        if enc in (Encoding.PRECISE, Encoding.STRING):
            return [True, [1], 12.5]
        if enc == Encoding.DOUBLE:
            return [True, [1], "1.00"]
        if enc not in (None, Encoding.ISO):  # an epoch count
            return ["2026-01-01", True, 1.5, ["x"]]
        return {
            "string": [42, True, ["x"], {"v": 1}],
            "timestamp": [1767225600, True, ["x"]],
            "date": [20260101, False, ["x"]],
            "int": ["7", 7.5, True, [7]],
            "long": ["7", 7.5, True, [7]],
            "double": ["7.5", True, [7.5]],
            "decimal": [True, [1], {"v": "1.00"}],
            "boolean": ["true", 1, [True]],
        }[self.t.base]

    def invalid_values(self, current: Any) -> list:
        """Values of the right JSON type that cannot be used: a timestamp 'soon', a decimal
        with too many digits, an int beyond 32 bits. `current`: a valid value to vary."""
        base, enc = self.t.base, self.f.read_as
        if enc == Encoding.PRECISE:  # not base64 of 1 to 16 bytes, unused bits set, too many digits
            return ["abc", "AB==", "AAAAAAAAAAAAAAAAAAAAAAA=", "1.5"]
        if enc == Encoding.EPOCH_DAYS:
            return [2_932_897, -719_163]
        if enc == Encoding.EPOCH_MILLIS:
            return [253_402_300_800_000, -62_135_596_800_001]
        if enc == Encoding.EPOCH_MICROS:
            return [253_402_300_800_000_000, -62_135_596_800_000_001]
        if enc == Encoding.EPOCH_NANOS:
            return [1_767_225_600_000_000_001, 1001]
        if base == "timestamp":
            day = current[:10]
            return ["soon", current[:-1], current.replace("T", " "), current[:-1] + "0Z", f"{day}T24:00:00Z"]
        if base == "date":
            return [current[:8] + "32", "tomorrow", current.replace("-", "/")]
        if base == "decimal":
            p, s = self.t.precision, self.t.scale
            return ["abc", "1." + "5" * (s + 1), "9" * (p - s + 1) + ("." + "5" * s if s else "")]
        if base in ("int", "long"):
            lo, hi = INT_RANGE[base]
            return [hi + 1, lo - 1] if base == "int" else [2**64, -(2**64)]
        return []

    def breakers(self, rule: str) -> list:
        """Usable values that keep the field's rules before `rule` and break `rule`
        (no longer than `room` JSON characters); empty when there are none."""
        f = self.f
        rules = f.rules()
        before = rules[: rules.index(rule)]
        out = []
        for v in self._breaker_candidates(rule):
            if (
                self.usable(v)
                and len(repr(v)) <= self.room
                and all(keeps(f, r, v) for r in before)
                and not keeps(f, rule, v)
                and v not in out
            ):
                out.append(v)
        return out

    def _breaker_candidates(self, rule: str) -> list:
        f, base = self.f, self.t.base
        if f.allowed and rule != "allowed":
            return list(f.allowed)
        examples = list(f.examples or ()) or ["x"]
        # the rule is one of f.rules(): the field declares it, so its setting is not None
        if rule == "allowed":
            allowed: tuple[Any, ...] = f.allowed or ()  # strings for a string field, else ints
            if base == "string":
                return [f"{a}_x" for a in allowed[:3]] + ["?", "unknown", ""]
            return [max(allowed) + 1, min(allowed) - 1, max(allowed) + 1000]
        if rule in ("min", "max"):
            sign = -1 if rule == "min" else 1
            bound = _bound(f, rule)
            assert bound is not None
            if base == "double":
                b = float(bound)
                return [b + sign * d for d in (0.5, 1.0, 1000.0, abs(b) * 0.5 + 1)]
            unit = Decimal(1).scaleb(-self.t.scale) if base == "decimal" else Decimal(1)
            edge = int((bound / unit).to_integral_value(ROUND_CEILING if rule == "min" else ROUND_FLOOR)) + sign
            units = [edge + sign * d for d in (0, 9, 1000 * int(1 / unit))]
            return [_decimal_text(u, self.t.scale) for u in units] if base == "decimal" else units
        if rule == "pattern":
            return ["", "?", " ", "0", "zz", "!" + examples[0], examples[0] + "!", examples[0][::-1]]
        if rule == "max_length":
            n = f.max_length
            assert n is not None
            return [e + c * max(n + 1 - len(e), 1) for e in examples for c in "0a9xA-_."] + ["x" * (n + 1)]
        return [*examples, "not-a-uuid", _SAMPLE_UUID[:-1], _SAMPLE_UUID.replace("-", ""), "g" + _SAMPLE_UUID[1:]]


def _span(lo, hi, width=SPAN):
    """A range from optional bounds: [0, width] without any, `width` beside a lone one."""
    if lo is None and hi is None:
        return 0, width
    if lo is None:
        return hi - width, hi
    if hi is None:
        return lo, lo + width
    return lo, hi

"""Events for any declared schema: valid ones that keep every rule, malformed ones that
break exactly one check.

Deterministic for a seed (one `random.Random`). Each malformed kind is a reason code of
schema/reasons.py: the record fails that check and passes every check before it in the
fixed order, so the job's validation and the audit's judge both give it exactly that
reason. `kinds()` lists the kinds a schema can produce (no `below_min` without a `min`).
The values of one field come from schema/values.py; this module assembles records.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from onceflow.errors import ConfigError
from onceflow.generate import large
from onceflow.schema import reasons as R
from onceflow.schema.model import Schema
from onceflow.schema.reasons import Reason
from onceflow.schema.values import FieldValues, timestamp_text

VALID = "valid"
# event_time advances this much per record: 10 ms and 1 µs, so every timestamp has microseconds
# and a reader or writer that cuts them to milliseconds shows (docs/kafka-sink.md)
TICK = timedelta(microseconds=10_001)
SEEDED_START = datetime(2026, 1, 1, tzinfo=UTC)
KAFKA_RECORD_LIMIT = 1_000_000  # the producer's message.max.bytes: an `oversized` record must fit under it
ABSENT = object()  # a field left out of an event
_MARGIN = 64  # bytes a malformed variant may add to an event (a duplicated key, a bad byte)


@dataclass(frozen=True)
class Made:
    """One generated record: its Kafka key and value, its kind (VALID or a reason code),
    the event_id of a valid record, and the values of the event it was made from."""

    key: bytes | None
    value: bytes
    kind: str
    event_id: Any
    values: dict[str, Any]
    large: str | None = None  # a valid record made large on purpose: its kind (generate/large.py)


def encode(obj: Any) -> bytes:
    """JSON as the producer writes it: ASCII (non-ASCII as \\u escapes), so truncating
    the text never splits a UTF-8 sequence."""
    return json.dumps(obj).encode()


class Generator:
    """Valid and malformed records for a schema.

    group_by: the aggregates' fields; their values come from a pool of `pool_size`, so
    each group gets many events per window. key_field: the field whose value is the Kafka
    key; default the schema's event_id, else the first group_by field, else no key.
    Optional fields are present in `optional_ratio` of the valid events, and `large_ratio`
    of the valid events are made large on purpose (generate/large.py), drawn from a random
    stream of their own so the other records of a seed stay the same.
    """

    def __init__(
        self,
        schema: Schema,
        seed: int | None = None,
        *,
        group_by: Sequence[str] = (),
        key_field: str | None = None,
        start: datetime | None = None,
        pool_size: int = 100,
        optional_ratio: float = 0.9,
        large_ratio: float = large.RATIO,
    ):
        self.schema = schema
        self.rng = random.Random(seed)
        self.start = (start or (SEEDED_START if seed is not None else datetime.now(UTC))).astimezone(UTC)
        self.optional_ratio = optional_ratio
        self.n = 0
        for name in [*group_by, *([key_field] if key_field else [])]:
            if schema.field(name) is None:
                raise ConfigError(
                    f"{name!r} is not a field of the schema ({', '.join(schema.names)}); name a declared field"
                )
        _check_paths(schema)
        self._layout = [(f.name, f.keys[:-1], f.keys[-1]) for f in schema.fields]
        self.key_field = key_field or schema.event_id or (group_by[0] if group_by else None)
        self.spare_key = next(
            k for k in ("note", "_note", "__note", "_onceflow_note") if k not in {f.keys[0] for f in schema.fields}
        )
        probe = [FieldValues(f, random.Random(0)) for f in schema.fields]
        room = schema.max_bytes - len(encode(self._build(self._draw(random.Random(0), probe, required_only=True))))
        self._room = room
        if room < _MARGIN:
            raise ConfigError(
                f"schema.max_bytes {schema.max_bytes} leaves {room} bytes beside an event of only its "
                f"required fields; raise max_bytes so that events and their malformed variants fit"
            )
        self.fields = {
            f.name: FieldValues(f, self.rng, pool_size if f.name in group_by else None, room - _MARGIN)
            for f in schema.fields
        }
        self._breakers = {
            (f.name, rule): self.fields[f.name].breakers(rule) for f in schema.fields for rule in f.rules()
        }
        self._breakers = {k: v for k, v in self._breakers.items() if v}
        self._invalid_names = [n for n, fv in self.fields.items() if fv.invalid_values(self._sample(fv))]
        self._kinds = self._possible_kinds()
        self.large_ratio = large_ratio
        self._large_rng = random.Random(None if seed is None else seed + 1)
        self._large = large.Large(
            schema, self._large_rng, self._build, lambda text, value: _splice(text, self.spare_key, value, raw=True)
        )

    # -- what it can make ----------------------------------------------------------------
    def kinds(self) -> tuple[str, ...]:
        """The malformed kinds this schema can produce, in the order they are checked."""
        return self._kinds

    def _possible_kinds(self) -> tuple[str, ...]:
        can = set(R.RECORD_REASONS) | {Reason.MISSING_FIELD, Reason.WRONG_TYPE}
        if self.schema.max_bytes + 1024 > KAFKA_RECORD_LIMIT:
            can.discard(Reason.OVERSIZED)
        if self._room < len(_deep_value()) + _MARGIN:
            can.discard(Reason.TOO_DEEP)
        if self._room < len(_long_number()) + _MARGIN:
            can.discard(Reason.NUMBER_TOO_LONG)
        if self._invalid_names:
            can.add(Reason.INVALID_VALUE)
        can |= {R.RULE_REASONS[rule] for _, rule in self._breakers}
        return tuple(k for k in R.REASONS if k in can)

    # -- records -------------------------------------------------------------------------
    def valid(self) -> dict:
        """The next valid event as a JSON object (nested where paths are)."""
        event = self._build(self._next())
        self._check_size(encode(event), VALID)
        return event

    def malformed(self, kind: str) -> bytes:
        """The next record, broken so that its reason is exactly `kind`."""
        return self._malformed(kind, self._next())

    def record(self, malformed_ratio: float = 0.0) -> Made:
        """The next record: malformed with probability `malformed_ratio`, its kind drawn
        uniformly from kinds(); else valid."""
        malformed = self.rng.random() < malformed_ratio
        kinds = self.kinds() if malformed else ()
        kind = kinds[self.rng.randrange(len(kinds))] if malformed else VALID
        values = self._next()
        key = self._key(values)
        present = {k: v for k, v in values.items() if v is not ABSENT}
        if kind == VALID:
            eid = values.get(self.schema.event_id) if self.schema.event_id else None
            made = self._large.make(values) if self._large_rng.random() < self.large_ratio else None
            if made:
                kind_of, value, values = made
                return Made(key, value, VALID, eid, {k: v for k, v in values.items() if v is not ABSENT}, kind_of)
            value = encode(self._build(values))
            self._check_size(value, VALID)
            return Made(key, value, VALID, eid, present)
        return Made(key, self._malformed(kind, values), kind, None, present)

    def draw(self) -> tuple[bytes | None, dict[str, Any]]:
        """The next valid event's Kafka key and values by field name (ABSENT marks an optional
        field left out), for a writer other than JSON text (generate/avro_events.py)."""
        values = self._next()
        return self._key(values), values

    # -- assembling ----------------------------------------------------------------------
    def _next(self) -> dict[str, Any]:
        values = self._draw(self.rng, list(self.fields.values()))
        self.n += 1
        return values

    def _draw(self, rng: random.Random, fields: list[FieldValues], required_only: bool = False) -> dict[str, Any]:
        now = self.start + TICK * self.n
        out: dict[str, Any] = {}
        event_time = self.schema.event_time
        for fv in fields:
            f = fv.f
            if f.name == event_time:
                out[f.name] = timestamp_text(now)
            elif not f.required and (required_only or rng.random() >= self.optional_ratio):
                out[f.name] = ABSENT
            elif f.name == self.schema.event_id:  # unique per event: the audit checks it
                out[f.name] = fv.unique(rng, self.n)
            else:
                out[f.name] = fv.valid(rng, now)
        return out

    def _build(self, values: dict[str, Any]) -> dict:
        obj: dict = {}
        for name, parents, leaf in self._layout:
            v = values.get(name, ABSENT)
            if v is ABSENT:
                continue
            node = obj
            for key in parents:
                node = node.setdefault(key, {})
            node[leaf] = v
        return obj

    def _key(self, values: dict[str, Any]) -> bytes | None:
        v = values.get(self.key_field, ABSENT) if self.key_field else ABSENT
        if v is ABSENT:
            return None
        return (v if isinstance(v, str) else json.dumps(v)).encode()

    def _sample(self, fv: FieldValues) -> Any:
        return fv.valid(random.Random(0), self.start)

    def _check_size(self, value: bytes, kind: str) -> None:
        if len(value) > self.schema.max_bytes:
            raise ConfigError(
                f"a generated {kind} record is {len(value)} bytes, more than schema.max_bytes "
                f"{self.schema.max_bytes}; raise max_bytes or shorten the fields' examples"
            )

    def _malformed(self, kind: str, values: dict[str, Any]) -> bytes:
        if kind not in self.kinds():
            raise ValueError(f"this schema cannot produce malformed kind {kind!r}; it can: {', '.join(self.kinds())}")
        if kind == Reason.OVERSIZED:
            text = encode(self._build(values))
            pad = self.schema.max_bytes - len(text) + self.rng.randrange(1, 256)
            return _splice(text, self.spare_key, b"x" * max(pad, 1))
        value = self._break(kind, dict(values))
        if len(value) > self.schema.max_bytes:  # an event near the limit: break one with only required fields
            required = {f.name for f in self.schema.fields if f.required}
            slim = {k: (v if k in required else ABSENT) for k, v in values.items()}
            value = self._break(kind, slim)
        self._check_size(value, kind)
        return value

    def _break(self, kind: str, values: dict[str, Any]) -> bytes:
        rng = self.rng
        if kind in (Reason.MISSING_FIELD, Reason.WRONG_TYPE, Reason.INVALID_VALUE) or kind in R.RULE_REASONS.values():
            return encode(self._break_field(kind, values))
        text = encode(self._build(values))
        if kind == Reason.INVALID_UTF8:
            return _splice(text, self.spare_key, b"caf" + b"\xff" + b"s" * rng.randrange(4))
        if kind == Reason.INVALID_JSON:
            return text[: rng.randrange(1, len(text))]
        if kind == Reason.DUPLICATE_KEY:
            obj = self._build(values)
            key = rng.choice(list(obj))
            return _splice(text, key, encode(obj[key]), raw=True)
        if kind == Reason.NOT_AN_OBJECT:
            return self._fitting(
                [b"[" + text + b"]", encode(text.decode()), str(rng.randrange(10**6)).encode(), b'"event"']
            )
        if kind == Reason.TRAILING_CONTENT:
            return self._fitting([text + suffix for suffix in (b" xyz", b"}", b" null", b',{"a":1}', b"\n" + text)])
        if kind == Reason.TOO_DEEP:
            return _splice(text, self.spare_key, _deep_value(), raw=True)
        if kind == Reason.NUMBER_TOO_LONG:
            return _splice(text, self.spare_key, _long_number(), raw=True)
        if kind == Reason.LONE_SURROGATE:
            return _splice(text, self.spare_key, encode(rng.choice(["\ud800", "x\udc00", "\udbff!"])), raw=True)
        raise ValueError(f"unknown malformed kind {kind!r}; kinds are {', '.join(R.REASONS)}")

    def _fitting(self, options: list[bytes]) -> bytes:
        """One of the options, drawn among those within max_bytes (a short one always is)."""
        fit = [o for o in options if len(o) <= self.schema.max_bytes]
        return self.rng.choice(fit or options)

    def _break_field(self, kind: str, values: dict[str, Any]) -> dict:
        return self._build(self.broken_values(kind, values))  # a None is written as JSON null at the field's path

    def broken_values(self, kind: str, values: dict[str, Any]) -> dict[str, Any]:
        """`values` with one field broken so that the event's reason is `kind` (missing_field,
        wrong_type, invalid_value or a rule's reason), by field name; ABSENT marks a field left out."""
        rng = self.rng
        if kind == Reason.MISSING_FIELD:
            name = rng.choice([f.name for f in self.schema.fields if f.required])
            values[name] = rng.choice([ABSENT, None])
        elif kind == Reason.WRONG_TYPE:
            name = rng.choice(self.schema.names)
            values[name] = rng.choice(self.fields[name].wrong_types())
        elif kind == Reason.INVALID_VALUE:
            name = rng.choice(self._invalid_names)
            fv = self.fields[name]
            current = values[name] if values[name] is not ABSENT else self._sample(fv)
            values[name] = rng.choice(fv.invalid_values(current))
        else:
            pairs = sorted(k for k in self._breakers if R.RULE_REASONS[k[1]] == kind)
            name, rule = rng.choice(pairs)
            values[name] = rng.choice(self._breakers[(name, rule)])
        return values


def _deep_value() -> bytes:
    """Valid JSON nested one level deeper than validation reads (schema/reasons.MAX_DEPTH)."""
    return b"[" * R.MAX_DEPTH + b"[]" + b"]" * R.MAX_DEPTH


def _long_number() -> bytes:
    """A valid JSON number one character longer than validation reads (MAX_NUMBER_CHARS)."""
    return b"1" + b"0" * R.MAX_NUMBER_CHARS


def _splice(text: bytes, key: str, raw_value: bytes, raw: bool = False) -> bytes:
    """The object's text with one more member at its end: `"key": value` (the value as
    given bytes, or, unless raw, as a JSON string around them). The result need not be
    valid UTF-8 or valid JSON, which is the point."""
    value = raw_value if raw else b'"' + raw_value + b'"'
    return text[:-1] + b", " + encode(key) + b": " + value + b"}"


def _check_paths(schema: Schema) -> None:
    """A field's path may not run through another field's value ($.meta and $.meta.ts)."""
    keys = {f.keys: f.name for f in schema.fields}
    for f in schema.fields:
        for i in range(1, len(f.keys)):
            if f.keys[:i] in keys:
                raise ConfigError(
                    f"schema field {f.name!r} ({f.json_path}) lies inside field "
                    f"{keys[f.keys[:i]]!r}; a value cannot be both a field and an object of fields"
                )

"""Avro records in the Confluent wire format for an `avro` pipeline: what `onceflow produce` writes
(docs/registry.md#trying-it), as a team's upgraded producer would.

The writer schemas are the declared fields' (schema/avro_declared.py), registered under the
pipeline's subject in two versions: the first without the last optional field, the second with it
(a field added with its default null, a BACKWARD-compatible change). The first half of the records
is written with the first version and the rest with the second, so every stream holds two schema
ids, as a topic does after evolution. Values are generate/records.py's, written as Avro's types.

Malformed kinds, each one reason: `oversized`; each reason of schema/reasons.AVRO_REASONS (plain
JSON, an id the registry does not know, an id of another subject (a schema registered under
`<subject>-onceflow-other`), an id under the subject whose schema onceflow does not read (a third
version with a time-of-day field), a payload cut short or with a byte left over); and every rule
the declaration has (a value below `min`, not `allowed`, …). A record's type is the writer schema's,
so a missing field, a wrong type or an unusable value cannot be written in Avro; no such kind.

RegistryEvents writes the records of any format with writer schemas from its RecordWriters: the
Protobuf ones are generate/protobuf_events.py's, with the same kinds by Protobuf's reasons.
"""

from __future__ import annotations

import copy
import functools
import io
import json
import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Generic, Protocol, TypeVar

import fastavro

from onceflow.errors import ConfigError, ProducerError
from onceflow.generate.records import ABSENT, VALID, Generator, Made
from onceflow.registry import Registry, frame
from onceflow.schema import reasons as R
from onceflow.schema.avro import install_minimal_decimals
from onceflow.schema.avro_declared import declared_avro_schema
from onceflow.schema.model import Schema
from onceflow.schema.reasons import Reason
from onceflow.schema.reference import read_date, read_timestamp

install_minimal_decimals()  # decimals as Java's Avro writes them, which the job's round trip requires
OTHER_SUBJECT_SUFFIX = "-onceflow-other"
UNKNOWN_ID = 2**31 - 1  # an id no registry hands out before two billion schemas
TIME_OF_DAY = "_onceflow_time_of_day"  # the unsupported version's extra field


@dataclass(frozen=True)
class Writer:
    """One registered writer schema: its id, and the declared fields it leaves out."""

    schema_id: int
    schema: dict[str, Any]
    leaves_out: tuple[str, ...] = ()

    @functools.cached_property
    def _parsed(self) -> Any:
        """fastavro's parsed schema, once per writer (parse_schema changes what it is given: a copy)."""
        return fastavro.parse_schema(copy.deepcopy(self.schema))

    def encode(self, record: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, self._parsed, record)
        return out.getvalue()

    def undecodable(self, payload: bytes, rng: random.Random) -> bytes:
        if rng.random() < 0.5:
            return payload + b"\x00"  # a byte left over
        return payload[: -rng.randrange(1, min(4, len(payload)) + 1)]  # cut short


class RecordWriter(Protocol):
    """A registered writer schema of a format (Writer here, generate/protobuf_events.ProtoWriter)."""

    @property
    def schema_id(self) -> int: ...

    @property
    def leaves_out(self) -> tuple[str, ...]: ...

    def encode(self, record: dict[str, Any]) -> bytes:
        """The payload after the header of a record of typed values (_typed), nested at its paths."""
        ...

    def undecodable(self, payload: bytes, rng: random.Random) -> bytes:
        """A payload of this writer damaged so that it is not one record of its schema."""
        ...


W = TypeVar("W", bound=RecordWriter)


@dataclass(frozen=True)
class RegistryWriters(Generic[W]):
    """The writer schemas a stream is written with, registered (register_writers), and the reasons
    of their format, in schema/reasons.AVRO_REASONS' order (not framed, unknown id, other subject,
    unsupported schema, undecodable)."""

    first: W
    evolved: W
    other_subject: W | None = None
    unsupported: W | None = None
    reasons: tuple[Reason, ...] = R.AVRO_REASONS


def register_writers(
    registry: Registry, subject: str, schema: Schema, name: str, malformed: bool
) -> RegistryWriters[Writer]:
    """Register the declared fields' two versions under `subject` (an id already there is reused),
    and, for malformed records, one of another subject and an unsupported third version."""
    optional = [f.name for f in schema.fields if not f.required and len(f.keys) == 1]
    added = tuple(optional[-1:])
    first_schema = declared_avro_schema(schema, name, leave_out=added)
    evolved_schema = declared_avro_schema(schema, name)
    first = Writer(registry.register(subject, json.dumps(first_schema)), first_schema, added)
    evolved = Writer(registry.register(subject, json.dumps(evolved_schema)), evolved_schema)
    if not malformed:
        return RegistryWriters(first, evolved)
    other_schema = {**first_schema, "name": f"{first_schema['name']}_other"}
    other = Writer(registry.register(subject + OTHER_SUBJECT_SUFFIX, json.dumps(other_schema)), other_schema, added)
    time_field = {"name": TIME_OF_DAY, "type": ["null", {"type": "int", "logicalType": "time-millis"}], "default": None}
    third_schema = {**evolved_schema, "fields": [*evolved_schema["fields"], time_field]}
    third = Writer(registry.register(subject, json.dumps(third_schema)), third_schema)
    if registry.schema(UNKNOWN_ID) is not None:
        raise ProducerError(
            f"the registry knows schema id {UNKNOWN_ID}; an avro_unknown_schema record needs one it does not"
        )
    return RegistryWriters(first, evolved, other, third)


def framed_kinds(
    gen: Generator, registered: bool = True, reasons: tuple[Reason, ...] = R.AVRO_REASONS
) -> tuple[str, ...]:
    """The malformed kinds a stream of the generator's events in a registry format (its `reasons`)
    can hold, in the order they are checked; `registered`: with the schemas of another subject and
    the unsupported version."""
    not_framed, unknown, other, unsupported, undecodable = reasons
    framing = [not_framed, unknown, undecodable]
    if registered:
        framing[2:2] = [other, unsupported]
    oversized = [Reason.OVERSIZED] if Reason.OVERSIZED in gen.kinds() else []
    return tuple(oversized + framing + [k for k in gen.kinds() if k in R.RULE_REASONS.values()])


def _typed(base: str, v: Any) -> Any:
    """A generated JSON value as Avro's type for the declared base type."""
    if base == "decimal":
        return Decimal(v)
    if base == "timestamp":
        return read_timestamp(v)
    if base == "date":
        return read_date(v)
    if base == "double":
        return float(v)
    return v


class RegistryEvents:
    """Records of a Generator's events written in Avro: `record()` as Generator.record, the first
    `evolve_at` records with the first version, the rest with the evolved one."""

    def __init__(self, gen: Generator, writers: RegistryWriters, evolve_at: int):
        self.gen, self.writers, self.evolve_at = gen, writers, evolve_at
        self.rng = gen.rng
        self.n = 0
        registered = writers.other_subject is not None and writers.unsupported is not None
        self._kinds = framed_kinds(gen, registered, writers.reasons)
        self._fields = [(f.name, f.keys, f.ftype.base) for f in gen.schema.fields]

    def kinds(self) -> tuple[str, ...]:
        """The malformed kinds this stream can hold, in the order they are checked."""
        return self._kinds

    def _record(self, values: dict[str, Any], writer: RecordWriter) -> dict[str, Any]:
        """The Avro record of an event's values (nested where paths are; a field left out as null)."""
        out: dict[str, Any] = {}
        for name, keys, base in self._fields:
            if name in writer.leaves_out:
                continue
            v = values.get(name, ABSENT)
            node = out
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = None if v is ABSENT or v is None else _typed(base, v)
        return out

    def record(self, malformed_ratio: float = 0.0) -> Made:
        """The next record: malformed with probability `malformed_ratio` (its kind drawn uniformly
        from kinds()), else valid."""
        malformed = self.rng.random() < malformed_ratio
        kind = self._kinds[self.rng.randrange(len(self._kinds))] if malformed else VALID
        writer = self.writers.first if self.n < self.evolve_at else self.writers.evolved
        self.n += 1
        key, values = self.gen.draw()
        present = {k: v for k, v in values.items() if v is not ABSENT}
        event_id = values.get(self.gen.schema.event_id) if self.gen.schema.event_id else None
        if kind == VALID:
            return Made(key, self._framed(writer, values, VALID), VALID, event_id, present)
        if kind in R.RULE_REASONS.values():
            broken = self.gen.broken_values(kind, dict(values))
            if any(name in writer.leaves_out for name in broken if broken[name] is not values[name]):
                writer = self.writers.evolved  # the broken field is the one the first version lacks
            return Made(key, self._framed(writer, broken, kind), kind, None, present)
        return Made(key, self._malformed(kind, writer, values), kind, None, present)

    def _framed(self, writer: RecordWriter, values: dict[str, Any], kind: str) -> bytes:
        value = frame(writer.schema_id, writer.encode(self._record(values, writer)))
        if len(value) > self.gen.schema.max_bytes:
            raise ConfigError(
                f"a generated {kind} Avro record is {len(value)} bytes, more than schema.max_bytes "
                f"{self.gen.schema.max_bytes}; raise max_bytes or shorten the fields' examples"
            )
        return value

    def _malformed(self, kind: str, writer: RecordWriter, values: dict[str, Any]) -> bytes:
        rng, w = self.rng, self.writers
        not_framed, unknown, other, unsupported, undecodable = w.reasons
        payload = writer.encode(self._record(values, writer))
        if kind == Reason.OVERSIZED:
            pad = self.gen.schema.max_bytes - len(payload) + rng.randrange(1, 256)
            return frame(writer.schema_id, payload + b"\x00" * max(pad, 1))
        if kind == not_framed:
            return json.dumps({k: v for k, v in values.items() if v is not ABSENT}).encode()
        if kind == unknown:
            return frame(UNKNOWN_ID, payload)
        if kind == other and w.other_subject is not None:
            return frame(w.other_subject.schema_id, w.other_subject.encode(self._record(values, w.other_subject)))
        if kind == unsupported and w.unsupported is not None:
            return frame(w.unsupported.schema_id, w.unsupported.encode(self._record(values, w.unsupported)))
        if kind == undecodable:
            return frame(writer.schema_id, writer.undecodable(payload, rng))
        raise ValueError(f"this stream cannot hold malformed kind {kind!r}; it can: {', '.join(self._kinds)}")

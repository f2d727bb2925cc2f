"""Debezium change events as its AvroConverter writes them, for a `format: debezium` pipeline with
`converter: avro`: what `onceflow produce` writes (docs/cdc.md#envelopes-in-avro).

The envelope's Avro schema is the one Debezium's PostgreSQL connector registers, its row (`Value`)
made of the declared fields: a decimal as an Avro decimal (decimal.handling.mode=precise), a
timestamp or date by its `encoding` (io.debezium.time.MicroTimestamp a long, ZonedTimestamp a
string, Date an int, …). It is registered under the pipeline's subject.

The records are generate/changes.ChangeStream's, each written in Avro: the valid changes always (the
expected table is the stream's fold, unchanged), a malformed one when Avro can hold what broke it
(an unknown op, a row that breaks a rule, …). One Avro cannot hold (a wrong type, a missing op)
stays the stream's JSON, which an Avro topic quarantines as `avro_not_framed`; some malformed ones
become an unknown schema id or an undecodable payload instead. Each record's kind is then what
the audit's own reading says of it (fastavro, cdc/envelope.py), checked as it is made.
"""

from __future__ import annotations

import io
import json
import random
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import fastavro

from onceflow.cdc.envelope import Envelope, Malformed
from onceflow.cdc.spec import KeyedSpec
from onceflow.errors import ProducerError
from onceflow.generate.avro_events import UNKNOWN_ID
from onceflow.generate.changes import ChangeRecord, ChangeStream
from onceflow.generate.records import VALID
from onceflow.registry import Registry, frame
from onceflow.schema.avro import EVERY_DECIMAL, install_minimal_decimals
from onceflow.schema.avro_reference import VIEW_BYTES, AvroReader
from onceflow.schema.model import Encoding, FieldSpec, Schema
from onceflow.schema.reasons import Reason

install_minimal_decimals()  # decimals as Java's Avro writes them, which the job's round trip requires
_LONG = ["null", "long"]
_STRING = ["null", "string"]
# Debezium's PostgreSQL `Source` block, as its AvroConverter registers it
SOURCE_FIELDS: list[tuple[str, Any]] = [
    ("version", "string"),
    ("connector", "string"),
    ("name", "string"),
    ("ts_ms", "long"),
    ("snapshot", _STRING),
    ("db", "string"),
    ("sequence", _STRING),
    ("ts_us", _LONG),
    ("ts_ns", _LONG),
    ("schema", "string"),
    ("table", "string"),
    ("txId", _LONG),
    ("lsn", _LONG),
    ("xmin", _LONG),
]
_BY_ENCODING: dict[str, dict[str, str]] = {
    Encoding.ISO: {"type": "string", "connect.name": "io.debezium.time.ZonedTimestamp"},
    Encoding.EPOCH_MILLIS: {"type": "long", "connect.name": "io.debezium.time.Timestamp"},
    Encoding.EPOCH_MICROS: {"type": "long", "connect.name": "io.debezium.time.MicroTimestamp"},
    Encoding.EPOCH_NANOS: {"type": "long", "connect.name": "io.debezium.time.NanoTimestamp"},
    Encoding.EPOCH_DAYS: {"type": "int", "connect.name": "io.debezium.time.Date"},
}
_PLAIN = {"string": "string", "int": "int", "long": "long", "double": "double", "boolean": "boolean"}
_DECIMAL_TEXT = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")


def _column(f: FieldSpec) -> Any:
    base = f.ftype.base
    if base == "decimal":
        if f.encoding == Encoding.DOUBLE:
            return "double"
        precision, scale = f.ftype.precision, f.ftype.scale
        return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
    if base in ("timestamp", "date"):
        return dict(_BY_ENCODING[f.read_as or Encoding.ISO])
    return _PLAIN[base]


def envelope_schema(schema: Schema, table: str) -> dict[str, Any]:
    """The envelope's Avro schema: every column nullable (a delete's `before` may hold only its key)."""
    value = {
        "type": "record",
        "name": "Value",
        "fields": [{"name": f.name, "type": ["null", _column(f)], "default": None} for f in schema.fields],
    }
    source = {
        "type": "record",
        "name": "Source",
        "namespace": "io.debezium.connector.postgresql",
        "fields": [
            {"name": n, "type": t, **({"default": None} if isinstance(t, list) else {})} for n, t in SOURCE_FIELDS
        ],
    }
    transaction = {
        "type": "record",
        "name": "block",
        "namespace": "event",
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "total_order", "type": "long"},
            {"name": "data_collection_order", "type": "long"},
        ],
    }
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": f"onceflow.public.{table}",
        "fields": [
            {"name": "before", "type": ["null", value], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "source", "type": source},
            {"name": "transaction", "type": ["null", transaction], "default": None},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": _LONG, "default": None},
            {"name": "ts_us", "type": _LONG, "default": None},
            {"name": "ts_ns", "type": _LONG, "default": None},
        ],
    }


def avro_change_kinds(stream: ChangeStream) -> tuple[str, ...]:
    """The malformed kinds a change stream written in Avro can hold (at most: a kind Avro cannot
    hold comes out as `avro_not_framed`)."""
    return (Reason.AVRO_NOT_FRAMED, Reason.AVRO_UNKNOWN_SCHEMA, Reason.AVRO_UNDECODABLE, *stream.kinds())


class _Unfit(Exception):
    """A JSON envelope's value that the Avro type cannot hold as it is."""


def _fit(v: Any, t: Any, named: dict[str, Any]) -> Any:
    """`v` (a JSON value) as Avro type `t` holds it, without any conversion that changes what it says
    (no float as a long, no number as a string); raises _Unfit otherwise. `named`: the records the
    schema defines, by name."""
    if isinstance(t, str) and t in named:
        t = named[t]
    if isinstance(t, list):
        if v is None and "null" in t:
            return None
        return _fit(v, next(x for x in t if x != "null"), named)
    if isinstance(t, dict) and t.get("logicalType") == "decimal":
        if not (isinstance(v, str) and _DECIMAL_TEXT.match(v)):
            raise _Unfit(v)
        if "." in v and len(v.split(".")[1]) > t["scale"]:
            raise _Unfit(v)  # more digits than the scale: Avro would round it
        return Decimal(v)
    kind = t["type"] if isinstance(t, dict) else t
    if kind in ("long", "int"):
        if type(v) is not int or not -(2 ** (63 if kind == "long" else 31)) <= v < 2 ** (63 if kind == "long" else 31):
            raise _Unfit(v)
        return v
    if kind == "double" and type(v) in (int, float):
        return float(v)
    if kind == "boolean" and type(v) is bool:
        return v
    if kind == "string" and isinstance(v, str):
        return v
    if kind == "record" and isinstance(v, dict):
        return {f["name"]: _fit(v.get(f["name"]), f["type"], named) for f in t["fields"]}
    raise _Unfit(v)


class AvroChanges:
    """A ChangeStream's records written in Avro with the envelope schema registered as `schema_id`
    (iterate once, as the stream). `kinds()` is what they can hold."""

    def __init__(self, stream: ChangeStream, envelope: dict[str, Any], schema_id: int, keyed: KeyedSpec):
        self.stream, self.envelope, self.schema_id = stream, envelope, schema_id
        self.parsed = fastavro.parse_schema(json.loads(json.dumps(envelope)))
        self.avro = AvroReader(json.dumps(envelope), plain=EVERY_DECIMAL)
        self.named = {"Value": envelope["fields"][0]["type"][1]}  # `after` names `before`'s record
        self.reader = Envelope(stream.schema, [f.name for f in keyed.keys], [p.name for p in keyed.sequence])
        self.rng = random.Random(stream.rng.random())

    def kinds(self) -> tuple[str, ...]:
        return avro_change_kinds(self.stream)

    def _avro(self, value: bytes) -> bytes:
        record = _fit(json.loads(value), self.envelope, self.named)
        out = io.BytesIO()
        fastavro.schemaless_writer(out, self.parsed, record)
        return out.getvalue()

    def _read(self, key: bytes | None, payload: bytes) -> str:
        """What the audit's reading says of a payload: its reason, or `valid`."""
        view = self.avro.view(payload)
        if view is None:
            return Reason.AVRO_UNDECODABLE
        parsed = self.reader.parse(key, view, max_bytes=VIEW_BYTES)
        return parsed.reason if isinstance(parsed, Malformed) else VALID

    def __iter__(self) -> Iterator[ChangeRecord]:
        for rec in self.stream:
            if rec.value is None:  # a tombstone stays a null value
                yield rec
                continue
            if rec.kind == VALID:
                payload = self._avro(rec.value)
                if self._read(rec.key, payload) != VALID:
                    raise ProducerError(f"a valid change does not read back as one from Avro: {rec.value[:200]!r}")
                yield ChangeRecord(rec.key, frame(self.schema_id, payload), rec.kind, rec.op, rec.duplicate, rec.late)
                continue
            yield self._malformed(rec)

    def _malformed(self, rec: ChangeRecord) -> ChangeRecord:
        draw = self.rng.random()
        try:
            payload = self._avro(rec.value)  # type: ignore[arg-type]
        except (_Unfit, ValueError, TypeError, StopIteration):
            return self._as(rec, rec.value, Reason.AVRO_NOT_FRAMED)  # JSON on an Avro topic
        if draw < 0.1:
            return self._as(rec, frame(UNKNOWN_ID, payload), Reason.AVRO_UNKNOWN_SCHEMA)
        if draw < 0.2:
            return self._as(rec, frame(self.schema_id, payload + b"\x00"), Reason.AVRO_UNDECODABLE)
        return self._as(rec, frame(self.schema_id, payload), self._read(rec.key, payload))

    def _as(self, rec: ChangeRecord, value: bytes | None, kind: str) -> ChangeRecord:
        counts = self.stream.counts
        if kind != rec.kind:
            counts[f"malformed:{rec.kind}"] -= 1
            counts[f"malformed:{kind}"] += 1
        return ChangeRecord(rec.key, value, kind, rec.op, rec.duplicate, rec.late)


def table_of(topic: str) -> str:
    """The table a Debezium topic (`<server>.<schema>.<table>`) is of, as the change stream names it."""
    return topic.rsplit(".", 1)[-1]


def register_envelope(registry: Registry, subject: str, schema: Schema, table: str) -> tuple[dict[str, Any], int]:
    """The envelope's Avro schema and its id under `subject` (an id already there is reused)."""
    envelope = envelope_schema(schema, table)
    schema_id = registry.register(subject, json.dumps(envelope))
    if registry.schema(UNKNOWN_ID) is not None:
        raise ProducerError(
            f"the registry knows schema id {UNKNOWN_ID}; an avro_unknown_schema record needs one it does not"
        )
    return envelope, schema_id

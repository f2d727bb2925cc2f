"""One Kafka record of a Debezium topic, judged and parsed: a `Change`, the `TOMBSTONE` no-op, or
`Malformed` with its reason.

Debezium writes each change of a row as an envelope (docs/cdc.md):

    {"op": "u", "before": {...}, "after": {"id": 7, ...}, "ts_ms": 1767225600123,
     "source": {"lsn": 24023128, "ts_ms": 1767225600120, ...}}

`op` is "c" (create), "u" (update), "d" (delete) or "r" (a read of the initial snapshot);
`after` is the row after the change (null for a delete), `before` the row before it (a delete's
only row: with PostgreSQL's default replica identity it holds the key columns alone); `ts_ms`
when the connector processed it; `source` where the change is in the database's log. With the
JSON converter's schemas enabled the envelope is the `payload` of `{"schema": ..., "payload":
...}`: both forms are read. After a delete Debezium writes a record with the same key and a null
value, for Kafka's log compaction: it changes no row, and is `TOMBSTONE` here, a no-op, never
a malformed record (a schemas-enabled record whose payload is null is one too).

A record is judged in a fixed order, the first failing check giving its one reason
(schema/reasons.py): the whole-record checks on the value (oversized ... trailing_content, as
for a JSON event), then the envelope (CDC_REASONS in order: `op` missing, unknown; the row the
op needs missing; a key field missing, invalid; a sequence part missing, invalid), then, for
c/u/r, the row's declared fields as an event's are (missing_field ... the rules). A delete is
judged on its key and sequence alone. Nothing raises on a record's contents.

A change's key is taken from `after` for c/u/r and from `before` for d; its sequence from the
envelope for a position (`source.lsn`, `ts_ms`) and from the same row for a declared field (so a
delete's is the deleted row's last value: it ties with the change it follows, and the later record
in the log wins: fold.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from onceflow.cdc.spec import (
    DEBEZIUM,
    DECIMAL_LOGICAL,
    DIGITS,
    LOGICAL_TYPES,
    LONG,
    PLACEHOLDER,
    PLAIN_TYPES,
    KeyedSpec,
    SequencePart,
    resolve,
)
from onceflow.registry import Registry
from onceflow.schema.avro import EVERY_DECIMAL
from onceflow.schema.avro_reference import VIEW_BYTES, AvroJudge
from onceflow.schema.framed import FramedJsonJudge
from onceflow.schema.model import AVRO, INT_RANGE, Encoding, Schema
from onceflow.schema.reasons import Reason
from onceflow.schema.reference import (
    ABSENT,
    How,
    Judge,
    Verdict,
    lookup,
    plain,
    read_epoch,
    read_field,
    read_record,
)

OPS = ("c", "u", "d", "r")
MAX_DIGITS = 38  # a DIGITS position's length: what a DECIMAL(38,0) holds
MAX_SCALE = 38  # the largest scale a schema wrapper's Decimal may give
_SHOWN = 60  # characters of a value a detail shows


@dataclass(frozen=True)
class Change:
    """One change of one row. `key`: the key fields' typed values, in the declared order; `row`:
    the declared fields' typed values after the change (None for a delete); `sequence`: the
    `sequence_by` values, always a tuple (one element per name); `ts_ms` and `source`: the
    envelope's, as plain values (`ts_ms` None when it is not an integer); `event_time`: the
    change's event time when it is an envelope position (schema.event_time_position), in UTC."""

    op: str
    key: tuple
    row: dict[str, Any] | None
    sequence: tuple
    ts_ms: int | None = None
    source: dict[str, Any] = field(default_factory=dict)
    event_time: datetime | None = None

    @property
    def deleted(self) -> bool:
        return self.op == "d"


class Tombstone:
    """The null-value record Debezium writes after a delete, for log compaction: a no-op."""

    def __repr__(self) -> str:
        return "TOMBSTONE"


TOMBSTONE = Tombstone()


@dataclass(frozen=True)
class Malformed:
    """A record that is no change event: its reason code (schema/reasons.py) and what was wrong."""

    reason: str
    detail: str


Parsed = Change | Tombstone | Malformed


def _show(raw: Any) -> str:
    if raw is ABSENT:
        return "absent"
    text = repr(plain(raw))
    return text if len(text) <= _SHOWN else text[: _SHOWN - 4] + " ..."


def read_position(kind: str, raw: Any) -> tuple[str | None, Any]:
    """An envelope position's value as `lookup` found it: (MISSING_FIELD, None) when absent or
    null, (INVALID_VALUE, None) when not written as its kind says, else (None, the value): an int
    for LONG (a JSON integer in a long's range) and DIGITS (a string of 1 to 38 decimal digits),
    a str for TEXT."""
    if raw is ABSENT or raw is None:
        return Reason.MISSING_FIELD, None
    value = plain(raw)
    if kind == LONG:  # stored as a BIGINT: a JSON integer past 64 bits is not a usable position
        lo, hi = INT_RANGE["long"]
        ok = isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
    elif kind == DIGITS:  # stored as a DECIMAL(38,0)
        ok = isinstance(value, str) and 0 < len(value) <= MAX_DIGITS and value.isascii() and value.isdigit()
        value = int(value) if ok else None
    else:
        ok = isinstance(value, str)
    return (None, value) if ok else (Reason.INVALID_VALUE, None)


class Envelope:
    """Parses the records of one Debezium topic for a pipeline's schema (`format: debezium`: the
    fields are the row's columns) and its keyed table's `keys` and `sequence_by`."""

    def __init__(self, schema: Schema, keys: Sequence[str], sequence_by: str | Sequence[str]):
        if schema.format != DEBEZIUM:
            raise ValueError(f"schema.format is {schema.format!r}: Debezium's envelope is read for 'debezium'")
        self.schema = schema
        self.spec: KeyedSpec = resolve(schema, keys, sequence_by)
        self._judge = Judge(schema)

    def parse(self, key: bytes | None, value: bytes | None, max_bytes: int | None = None) -> Parsed:
        """One record (its Kafka key and value) -> Change, TOMBSTONE or Malformed. The Kafka key
        is not read: the declared keys need not be the topic's key, and the row holds them.
        `max_bytes`: the value's limit when it is not the record's own bytes (an Avro envelope's
        view, whose record was checked against schema.max_bytes)."""
        if value is None:
            return TOMBSTONE
        reason, obj = read_record(value, self.schema.max_bytes if max_bytes is None else max_bytes)
        if reason:
            return Malformed(reason, "the value is not one JSON object of at most schema.max_bytes")
        wrapper: Any = None
        if set(obj) == {"schema", "payload"}:  # the JSON converter with schemas enabled
            wrapper, obj = obj["schema"], obj["payload"]
            if obj is None:
                return TOMBSTONE
            if not isinstance(obj, dict):
                return Malformed(Reason.NOT_AN_OBJECT, f"the payload is {_show(obj)}, not an object")
        op = obj.get("op")
        if op is None:
            return Malformed(Reason.CDC_MISSING_OP, "the envelope has no op")
        if not isinstance(op, str) or op not in OPS:
            return Malformed(Reason.CDC_UNKNOWN_OP, f"op is {_show(op)}, not one of {', '.join(OPS)}")
        side = "before" if op == "d" else "after"
        image = obj.get(side, ABSENT)
        if not isinstance(image, dict):
            why = Reason.CDC_MISSING_BEFORE if op == "d" else Reason.CDC_MISSING_AFTER
            return Malformed(why, f"op {op!r} needs `{side}`, an object; it is {_show(image)}")
        hows = self._hows(wrapper, side)
        raws, unavailable = self._raws(image, obj.get("before", ABSENT), op)
        found = self._key(raws, hows, side)
        if isinstance(found, Malformed):
            return found
        sequence = self._sequence(obj, raws, hows, side)
        if isinstance(sequence, Malformed):
            return sequence
        event_time = None
        position = self.schema.event_time_position
        if position is not None:
            raw = lookup(obj, tuple(position.split(".")))
            _, ms = read_position(LONG, raw)
            at = read_epoch(ms, Encoding.EPOCH_MILLIS) if ms is not None else None
            event_time = at if isinstance(at, datetime) else None
            if event_time is None:
                text = f"the event time {position} is {_show(raw)}, not epoch milliseconds of years 0001-9999"
                return Malformed(Reason.CDC_INVALID_EVENT_TIME, text)
        if unavailable:
            return Malformed(
                Reason.CDC_UNAVAILABLE_VALUE,
                f"{', '.join(unavailable)}: Debezium's {PLACEHOLDER} (an unchanged TOASTed column) and no "
                "value in `before`. Fix: ALTER TABLE ... REPLICA IDENTITY FULL, or leave the column out "
                "with the connector's column.exclude.list",
            )
        row = None
        if op != "d":
            verdict = self._judge.judge_object(image, hows, raws)
            if verdict.reason:
                return Malformed(verdict.reason, "the row (`after`) breaks the declared schema")
            row = verdict.values
        _, ts_ms = read_position(LONG, obj.get("ts_ms", ABSENT))
        source = obj.get("source")
        return Change(op, found, row, sequence, ts_ms, plain(source) if isinstance(source, dict) else {}, event_time)

    def _raws(self, image: dict, before: Any, op: str) -> tuple[dict[str, Any], list[str]]:
        """Each declared field's raw value in the row, and the fields that hold Debezium's
        placeholder for an unchanged TOASTed value without a real one in `before` (a create,
        update or read's; a delete's row is `before` itself). A placeholder is replaced by
        `before`'s value of the column when `before` has one (REPLICA IDENTITY FULL): the column
        did not change."""
        raws, unavailable = {}, []
        for f in self.schema.fields:
            raw = lookup(image, f.keys)
            if op != "d" and raw == PLACEHOLDER:
                old = lookup(before, f.keys)
                if old is ABSENT or old == PLACEHOLDER:
                    unavailable.append(f.name)
                else:
                    raw = old
            raws[f.name] = raw
        return raws, unavailable

    def _hows(self, wrapper: Any, side: str) -> dict[str, How]:
        """How the schema wrapper says each decimal, date and timestamp field of the row is
        written (cdc/spec.py LOGICAL_TYPES); a field it does not describe is read as declared."""
        hows: dict[str, How] = {}
        image = _entry(wrapper, side)
        for f in self.schema.fields:
            base = f.ftype.base
            if base not in LOGICAL_TYPES:
                continue
            node = image
            for key in f.keys:
                node = _entry(node, key)
            if node is None:
                continue
            name, kind = node.get("name"), node.get("type")
            if isinstance(name, str):
                enc = LOGICAL_TYPES[base].get(name, Encoding.UNSUPPORTED)
            else:
                enc = PLAIN_TYPES[base].get(kind if isinstance(kind, str) else "", Encoding.UNSUPPORTED)
            scale = f.ftype.scale
            if name == DECIMAL_LOGICAL:
                given = lookup(node, ("parameters", "scale"))
                ok = isinstance(given, str) and 0 < len(given) <= 2 and given.isascii() and given.isdigit()
                if ok and int(given) <= MAX_SCALE:
                    scale = int(given)
                else:
                    enc = Encoding.UNSUPPORTED
            hows[f.name] = (enc, scale)
        return hows

    def _key(self, raws: dict[str, Any], hows: dict[str, How], side: str) -> tuple | Malformed:
        read = [(f, raws[f.name]) for f in self.spec.keys]
        checked = [(f, raw, *read_field(f, raw, hows.get(f.name))) for f, raw in read]
        for f, raw, reason, _ in checked:
            if reason == Reason.MISSING_FIELD:
                return Malformed(Reason.CDC_MISSING_KEY, f"key field {f.name!r} is {_show(raw)} in `{side}`")
        for f, raw, reason, _ in checked:
            if reason:
                return Malformed(Reason.CDC_INVALID_KEY, f"key field {f.name!r} is {_show(raw)}, not a {f.type}")
        return tuple(value for *_, value in checked)

    def _sequence(self, envelope: dict, raws: dict[str, Any], hows: dict[str, How], side: str) -> tuple | Malformed:
        checked = [(part, *self._part(part, envelope, raws, hows)) for part in self.spec.sequence]
        for part, raw, reason, _ in checked:
            if reason == Reason.MISSING_FIELD:
                where = f"in `{side}`" if part.field is not None else "in the envelope"
                return Malformed(Reason.CDC_MISSING_SEQUENCE, f"sequence {part.name} is {_show(raw)} {where}")
        for part, raw, reason, _ in checked:
            if reason:
                kind = part.field.type if part.field is not None else part.position
                return Malformed(Reason.CDC_INVALID_SEQUENCE, f"sequence {part.name} is {_show(raw)}, not a {kind}")
        return tuple(value for *_, value in checked)

    @staticmethod
    def _part(
        part: SequencePart, envelope: dict, raws: dict[str, Any], hows: dict[str, How]
    ) -> tuple[Any, str | None, Any]:
        if part.field is not None:
            raw = raws[part.field.name]
            return (raw, *read_field(part.field, raw, hows.get(part.field.name)))
        raw = lookup(envelope, part.path)
        return (raw, *read_position(part.position or LONG, raw))


def _entry(node: Any, key: str) -> dict | None:
    """The schema of `key` among a Connect struct schema's `fields` (the first entry whose
    `field` is `key`), or None when `node` is no such schema or has no such entry."""
    fields = node.get("fields") if isinstance(node, dict) else None
    if not isinstance(fields, list):
        return None
    return next((x for x in fields if isinstance(x, dict) and x.get("field") == key), None)


class FramedEnvelope:
    """Debezium's envelopes in the Confluent wire format (schema.converter avro or json_schema):
    each record's header checked by the audit's own reader of the format, its payload made JSON (an
    Avro envelope decoded by fastavro, every decimal as its text: schema/avro_reference.AvroJudge; a
    JSON Schema converter's payload as it is: schema/framed.FramedJsonJudge), then parsed as a JSON
    envelope (Envelope). The job does the same in Spark (spark/registry_parse.py)."""

    def __init__(self, envelope: Envelope, registry: Registry, subject: str):
        self.envelope = envelope
        self.spec = envelope.spec
        schema = envelope.schema
        if schema.converter == AVRO:
            self.reader: AvroJudge | FramedJsonJudge = AvroJudge(schema, registry, subject, plain=EVERY_DECIMAL)
        else:
            self.reader = FramedJsonJudge(schema, registry, subject)

    def parse(self, key: bytes | None, value: bytes | None) -> Parsed:
        if value is None:
            return TOMBSTONE
        view = self.reader.viewed(value)
        if isinstance(view, Verdict):
            return Malformed(str(view.reason), "the record's header or payload (docs/registry.md#bad-input-named)")
        return self.envelope.parse(key, view, max_bytes=VIEW_BYTES)

"""What a keyed table (`sinks.current`) declares, resolved against the pipeline's schema.

- `keys`: declared fields, each required (a key is never null) and not a double (two writings
  of one number can differ in their last digit); the key of a change is the tuple of their
  typed values.
- `sequence_by`: one name or a list of names; a change's sequence is the tuple of their values,
  compared element by element, each as its type says (numbers as numbers: lsn 9 < lsn 10). A
  name is a declared field of the row (required, not a boolean) or, with `schema.format:
  debezium`, a position of Debezium's envelope from POSITIONS (`source.lsn`, `ts_ms`, ...).
  A declared field named like an envelope position (`ts_ms`) is refused there: rename it and
  keep its `path`.
- `delete_when`: `name = 'text'`, `name = 12`, `name = true|false`, or a bare `name` (a boolean
  field that is true). With Debezium only `op = 'd'`, Debezium's delete event (the default); a
  soft-delete column in the row is not supported yet. With `format: json` it must name a
  declared field, with a value of that field's type: deletes in a keyed upsert table of plain
  events are marked by a field of the event.

A contradiction is a DeclarationError naming the field (`sinks.current.keys`) and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from onceflow.errors import DeclarationError
from onceflow.schema.model import DEBEZIUM, Encoding, FieldSpec, Schema

DEFAULT_DELETE_WHEN = "op = 'd'"
# what Debezium writes for a column it does not have: an unchanged TOASTed column of an update
# whose `before` is not the full row (PostgreSQL's default replica identity)
PLACEHOLDER = "__debezium_unavailable_value"
# A schema wrapper's (`{"schema": ..., "payload": ...}`) word on how a column is written: its
# Connect logical type (`name`), else its plain type (`type`), per declared type; a name or type not
# listed is UNSUPPORTED for the field (a wrong type). A `Decimal`'s scale is its `parameters.scale`.
DECIMAL_LOGICAL = "org.apache.kafka.connect.data.Decimal"
LOGICAL_TYPES = {
    "decimal": {DECIMAL_LOGICAL: Encoding.PRECISE, "io.debezium.data.VariableScaleDecimal": Encoding.PRECISE},
    "date": {"io.debezium.time.Date": Encoding.EPOCH_DAYS, "org.apache.kafka.connect.data.Date": Encoding.EPOCH_DAYS},
    "timestamp": {
        "io.debezium.time.Timestamp": Encoding.EPOCH_MILLIS,
        "org.apache.kafka.connect.data.Timestamp": Encoding.EPOCH_MILLIS,
        "io.debezium.time.MicroTimestamp": Encoding.EPOCH_MICROS,
        "io.debezium.time.NanoTimestamp": Encoding.EPOCH_NANOS,
        "io.debezium.time.ZonedTimestamp": Encoding.ISO,
    },
}
_NUMBERS = ("int8", "int16", "int32", "int64", "float", "double")
PLAIN_TYPES = {
    "decimal": {"string": Encoding.STRING, **dict.fromkeys(_NUMBERS, Encoding.DOUBLE)},
    "date": {"string": Encoding.ISO},
    "timestamp": {"string": Encoding.ISO},
}
# how a position's value is written and compared
LONG = "long"  # a JSON integer, compared as a number
DIGITS = "digits"  # a JSON string of decimal digits, compared as the number it writes (Oracle's SCN)
TEXT = "text"  # a JSON string of fixed width, compared as text (a binlog file name, SQL Server's LSN)
# The positions of Debezium's envelope a sequence may name. Fields of `source` differ by connector;
# the ones here order changes. A position not listed is refused at load, so that no value is ever
# compared as a string by accident.
POSITIONS = {
    # when the connector processed the change (Debezium 2.x adds microseconds and nanoseconds)
    "ts_ms": LONG,
    "ts_us": LONG,
    "ts_ns": LONG,
    # when the database committed it
    "source.ts_ms": LONG,
    "source.ts_us": LONG,
    "source.ts_ns": LONG,
    # PostgreSQL: the change's position in the WAL; in commit order for the changes of one row
    # (its lock orders them), not across rows of concurrent transactions
    "source.lsn": LONG,
    # MySQL: the binlog file (`mysql-bin.000003`), the event's position in it, the row in the event
    "source.file": TEXT,
    "source.pos": LONG,
    "source.row": LONG,
    # SQL Server: the commit's and the change's LSN (`00000027:00000758:0003`), the event's number
    "source.commit_lsn": TEXT,
    "source.change_lsn": TEXT,
    "source.event_serial_no": LONG,
    # Oracle: the system change number of the change and of its commit, written as digits
    "source.scn": DIGITS,
    "source.commit_scn": DIGITS,
    # MongoDB: the event's order within its second (source.ts_ms)
    "source.ord": LONG,
}
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_DELETE_WHEN = re.compile(rf"^\s*({_NAME})\s*(?:=\s*(.*?))?\s*$", re.DOTALL)
_TEXT_LITERAL = re.compile(r"^'((?:[^']|'')*)'$", re.DOTALL)
_INT_LITERAL = re.compile(r"^-?[0-9]+$")
_DELETE_FORMS = "`field = 'text'`, `field = 12`, `field = true` or `field` (a boolean field that is true)"


@dataclass(frozen=True)
class SequencePart:
    """One name of `sequence_by`: a declared field of the row (`field`), or a position of
    Debezium's envelope and how its value is written (`position`: LONG, DIGITS or TEXT)."""

    name: str
    field: FieldSpec | None = None
    position: str | None = None

    @property
    def column(self) -> str:
        """Its name as a field of the `_sequence` struct of bronze and the keyed table
        (`source.lsn` -> `source_lsn`)."""
        return self.name.replace(".", "_")

    @property
    def sql(self) -> str:
        """Its SQL type: a field's; a position's by how it is written (tables.py)."""
        if self.field is not None:
            return self.field.ftype.sql
        return {LONG: "BIGINT", DIGITS: "DECIMAL(38,0)", TEXT: "STRING"}[self.position or LONG]

    @property
    def path(self) -> tuple[str, ...]:
        """Where the value is: in the envelope for a position (`source.lsn` -> ('source', 'lsn')),
        in the row for a field."""
        return self.field.keys if self.field is not None else tuple(self.name.split("."))


@dataclass(frozen=True)
class DeleteWhen:
    """`delete_when` parsed: a change is a delete when `name` holds `value`."""

    name: str
    value: str | int | bool

    def matches(self, value: object) -> bool:
        """Whether a typed value is this one (true is not 1: a boolean matches only a boolean)."""
        return isinstance(value, bool) == isinstance(self.value, bool) and value == self.value


def parse_delete_when(text: str) -> DeleteWhen:
    """ "op = 'd'" -> DeleteWhen('op', 'd'); a bare name is `name = true`; ValueError with the forms."""
    m = _DELETE_WHEN.match(str(text))
    if not m:
        raise ValueError(f"delete_when {text!r} is not one of {_DELETE_FORMS}")
    name, literal = m.group(1), m.group(2)
    if literal is None:
        return DeleteWhen(name, True)
    quoted = _TEXT_LITERAL.match(literal)
    if quoted:
        return DeleteWhen(name, quoted.group(1).replace("''", "'"))
    if _INT_LITERAL.match(literal):
        return DeleteWhen(name, int(literal))
    if literal.lower() in ("true", "false"):
        return DeleteWhen(name, literal.lower() == "true")
    raise ValueError(f"delete_when {text!r}: {literal!r} is not a quoted text, an integer, true or false")


@dataclass(frozen=True)
class KeyedSpec:
    """A keyed table's declaration, resolved: the key fields, the sequence's parts, the delete
    marker, and whether the records are Debezium change events."""

    keys: tuple[FieldSpec, ...]
    sequence: tuple[SequencePart, ...]
    delete_when: DeleteWhen
    debezium: bool

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.keys)

    @property
    def sequence_ddl(self) -> str:
        """The `_sequence` struct's type: one field per part, compared in order (Spark orders
        structs field by field, as fold.py compares the tuples)."""
        return "STRUCT<" + ", ".join(f"`{p.column}`: {p.sql}" for p in self.sequence) + ">"


def resolve(
    schema: Schema,
    keys: Sequence[str],
    sequence_by: str | Sequence[str],
    delete_when: str = DEFAULT_DELETE_WHEN,
    *,
    where: str = "sinks.current",
) -> KeyedSpec:
    """The declaration checked against the schema; DeclarationError at `where.<field>` otherwise."""
    debezium = schema.format == DEBEZIUM
    return KeyedSpec(
        keys=_keys(schema, keys, f"{where}.keys"),
        sequence=_sequence(schema, sequence_by, debezium, f"{where}.sequence_by"),
        delete_when=_delete_when(schema, delete_when, debezium, f"{where}.delete_when"),
        debezium=debezium,
    )


def _declared(schema: Schema) -> str:
    return f"schema.fields ({', '.join(schema.names)})"


def _twice(names: Sequence[str], where: str) -> None:
    twice = sorted({n for n in names if list(names).count(n) > 1})
    if twice:
        raise DeclarationError(where, f"{', '.join(map(repr, twice))} listed twice", "list each name once")


def _keys(schema: Schema, keys: Sequence[str], where: str) -> tuple[FieldSpec, ...]:
    if isinstance(keys, str) or not keys:
        raise DeclarationError(where, "no key fields", "list the fields that identify a row, e.g. keys: [id]")
    _twice(keys, where)
    out = []
    for name in keys:
        f = schema.field(name)
        if f is None:
            raise DeclarationError(where, f"{name!r} is not a declared field", f"name fields of {_declared(schema)}")
        if not f.required:
            raise DeclarationError(
                where, f"{name!r} is an optional field, and a key is never null", "declare it `required: true`"
            )
        if f.ftype.base == "double":
            raise DeclarationError(
                where,
                f"{name!r} is a double: two writings of one number can differ in their last digit",
                "key on a string, integer, decimal, date or timestamp field",
            )
        out.append(f)
    return tuple(out)


def _sequence(schema: Schema, sequence_by: str | Sequence[str], debezium: bool, where: str) -> tuple[SequencePart, ...]:
    names = [sequence_by] if isinstance(sequence_by, str) else list(sequence_by)
    if not names:
        raise DeclarationError(where, "no name", "name a declared field or, with Debezium, a position like source.lsn")
    _twice(names, where)
    known = ", ".join(POSITIONS)
    parts = []
    for name in names:
        f = schema.field(name)
        if debezium and name in POSITIONS:
            if f is not None:
                raise DeclarationError(
                    where,
                    f"{name!r} is both Debezium's envelope field and a declared field of the row",
                    f"rename the field (keep `path: $.{name}`) and name the one you mean",
                )
            parts.append(SequencePart(name, position=POSITIONS[name]))
            continue
        if f is None:
            if name.startswith("source.") or name in POSITIONS:
                fix = (
                    f"name one of {known}, or a declared field"
                    if debezium
                    else "set schema.format: debezium, or name a declared field of " + _declared(schema)
                )
                what = "a position onceflow orders by" if debezium else "a declared field: positions are Debezium's"
                raise DeclarationError(where, f"{name!r} is not {what}", fix)
            fix = f"name a field of {_declared(schema)}" + (f" or a position ({known})" if debezium else "")
            raise DeclarationError(where, f"{name!r} is not a declared field", fix)
        if not f.required:
            raise DeclarationError(
                where,
                f"{name!r} is an optional field, and a change without a sequence has no place in the order",
                "declare it `required: true`",
            )
        if f.ftype.base == "boolean":
            raise DeclarationError(where, f"{name!r} is a boolean, which orders nothing", "name an increasing field")
        parts.append(SequencePart(name, field=f))
    columns = [p.column for p in parts]
    _twice(columns, where + " (as columns, `.` read as `_`)")
    return tuple(parts)


def _delete_when(schema: Schema, text: str, debezium: bool, where: str) -> DeleteWhen:
    try:
        parsed = parse_delete_when(text)
    except ValueError as exc:
        raise DeclarationError(where, str(exc), f"write one of {_DELETE_FORMS}") from None
    if debezium:
        if parsed != DeleteWhen("op", "d"):
            raise DeclarationError(
                where,
                f"{text!r}: with schema.format: debezium a delete is Debezium's delete event, op = 'd' "
                "(a soft-delete column is not supported yet)",
                "leave delete_when out",
            )
        return parsed
    f = schema.field(parsed.name)
    if f is None:
        raise DeclarationError(
            where,
            f"{text!r} names {parsed.name!r}, which is not a declared field",
            f"declare the field that marks a delete and name it (fields: {', '.join(schema.names)}), "
            "or set schema.format: debezium for Debezium's change events",
        )
    base = f.ftype.base
    fits = (
        (base == "boolean" and isinstance(parsed.value, bool))
        or (base == "string" and isinstance(parsed.value, str))
        or (base in ("int", "long") and isinstance(parsed.value, int) and not isinstance(parsed.value, bool))
    )
    if not fits:
        raise DeclarationError(
            where,
            f"{text!r} compares {parsed.name!r}, a {f.type} field, with {parsed.value!r}",
            "mark deletes with a boolean (`deleted`), a string (`op = 'd'`) or an integer field "
            "and a value of its type",
        )
    return parsed

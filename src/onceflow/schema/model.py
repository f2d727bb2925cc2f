"""The `schema:` section of a pipeline file, validated at load.

Each field has a type and rules that fit the type; a rule that does not fit
(`pattern` on a double, `min` on a boolean), an unknown type or an `event_time`
that is not a timestamp is refused when the file is loaded, with the fix.
"""

from __future__ import annotations

import functools
import re
import warnings
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

FORMATS = ("json", "debezium", "avro", "json_schema", "protobuf")
DEBEZIUM = "debezium"
AVRO = "avro"
JSON_SCHEMA = "json_schema"
PROTOBUF = "protobuf"
# the formats whose records are framed with a registry's schema id (the Confluent wire format)
REGISTRY_FORMATS = (AVRO, JSON_SCHEMA, PROTOBUF)
CONVERTERS = ("json", AVRO, JSON_SCHEMA)  # how a Debezium topic's envelopes are written (Schema.converter)
TYPES = ("string", "int", "long", "double", "boolean", "timestamp", "date")  # and decimal(p,s)
NUMERIC = ("int", "long", "double", "decimal")
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_PATH = re.compile(r"^\$(\.[A-Za-z_][A-Za-z0-9_]*)+$")
MAX_RECORD_BYTES = 1024 * 1024
INT_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
# which rules fit which base type
RULES_FOR = {
    "allowed": ("string", "int", "long"),
    "min": NUMERIC,
    "max": NUMERIC,
    "pattern": ("string",),
    "max_length": ("string",),
    "uuid": ("string",),
}
SQL_TYPES = {
    "string": "STRING",
    "int": "INT",
    "long": "BIGINT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "timestamp": "TIMESTAMP",
    "date": "DATE",
}


class Encoding(StrEnum):
    """How a Debezium connector writes a column's value into the JSON (a field's `encoding`,
    docs/pipeline-config.md), each named after the connector setting that chooses it."""

    PRECISE = "precise"  # decimal.handling.mode=precise (the default): base64 of the unscaled integer
    STRING = "string"  # decimal.handling.mode=string: the decimal as text, "1234.50"
    DOUBLE = "double"  # decimal.handling.mode=double: a JSON number
    ISO = "iso"  # ISO-8601 text: a date's YYYY-MM-DD; a timestamp with its offset (io.debezium.time.ZonedTimestamp)
    EPOCH_DAYS = "epoch_days"  # io.debezium.time.Date, Connect's Date: days since 1970-01-01
    EPOCH_MILLIS = "epoch_millis"  # io.debezium.time.Timestamp, Connect's Timestamp: milliseconds since 1970
    EPOCH_MICROS = "epoch_micros"  # io.debezium.time.MicroTimestamp: microseconds since 1970
    EPOCH_NANOS = "epoch_nanos"  # io.debezium.time.NanoTimestamp: nanoseconds since 1970
    # never declared: a wrapper's logical type that is not one of the field's type (a wrong type)
    UNSUPPORTED = "unsupported"


# the encodings a declared type may name; the first is a date's and a timestamp's default
ENCODINGS_FOR = {
    "decimal": (Encoding.PRECISE, Encoding.STRING, Encoding.DOUBLE),
    "timestamp": (Encoding.ISO, Encoding.EPOCH_MILLIS, Encoding.EPOCH_MICROS, Encoding.EPOCH_NANOS),
    "date": (Encoding.ISO, Encoding.EPOCH_DAYS),
}
# what each encoding is, and the connector setting that writes it: for load errors and quarantine details
ENCODING_SETTING = {
    Encoding.PRECISE: "base64 of the unscaled value (decimal.handling.mode=precise)",
    Encoding.STRING: "decimal text (decimal.handling.mode=string)",
    Encoding.DOUBLE: "a JSON number without exponent (decimal.handling.mode=double)",
    Encoding.ISO: "ISO-8601 text (io.debezium.time.ZonedTimestamp, a text column, time.precision.mode=isostring)",
    Encoding.EPOCH_DAYS: "days since 1970 (io.debezium.time.Date; time.precision.mode=adaptive or connect)",
    Encoding.EPOCH_MILLIS: "milliseconds since 1970 (io.debezium.time.Timestamp; time.precision.mode=connect)",
    Encoding.EPOCH_MICROS: "microseconds since 1970 (io.debezium.time.MicroTimestamp; time.precision.mode=adaptive)",
    Encoding.EPOCH_NANOS: "nanoseconds since 1970 (io.debezium.time.NanoTimestamp)",
    Encoding.UNSUPPORTED: "a logical type the schema wrapper gives that is no encoding of this type",
}
# the event time of a Debezium change when no declared field is named (docs/cdc.md): when the
# database committed it (`source.ts_ms`) or when the connector processed it (`ts_ms`), epoch ms,
# kept in bronze's EVENT_TIME_COLUMN
EVENT_TIME_POSITIONS = ("source.ts_ms", "ts_ms")
DEFAULT_DEBEZIUM_EVENT_TIME = "source.ts_ms"
EVENT_TIME_COLUMN = "_event_time"


@dataclass(frozen=True)
class FieldType:
    """A declared type: its base name and, for decimals, precision and scale."""

    base: str
    precision: int = 0
    scale: int = 0

    @property
    def sql(self) -> str:
        return f"DECIMAL({self.precision},{self.scale})" if self.base == "decimal" else SQL_TYPES[self.base]

    @property
    def numeric(self) -> bool:
        return self.base in NUMERIC


@functools.lru_cache(maxsize=1024)
def parse_type(text: str) -> FieldType:
    """'long' / 'decimal(18,2)' -> FieldType; ValueError naming the accepted types. Cached: the
    audit's judge asks a field's type several times per record (FieldType is frozen)."""
    t = str(text).strip().lower()
    if t in TYPES:
        return FieldType(t)
    m = _DECIMAL.match(t)
    if m:
        p, s = int(m.group(1)), int(m.group(2))
        if not 1 <= p <= 38 or s > p:
            raise ValueError(f"decimal({p},{s}) is out of range: precision 1..38, scale 0..precision")
        return FieldType("decimal", p, s)
    raise ValueError(f"unknown type {text!r}; use one of {', '.join(TYPES)} or decimal(p,s)")


MAX_GROUP_REPEAT = 1000  # a group may repeat at most this often unless the repeat is possessive


def pattern_problem(pattern: str) -> str | None:
    """Why a `pattern` cannot run on every record, or None. Java's engine, which runs it in the
    job, recurses once per repetition of a group (`(ab|c)*`), so an unbounded repeat of a group
    overflows the task's stack on a long value and the job dies on a valid record; a possessive
    repeat (`*+`, `++`, `{n,}+`) or a bounded one does not recurse. `(?m)` and `\\Z` mean other
    things in Java than in Python, which judges the records in the audit."""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern[i + 1 : i + 2] == "Z":
                return "`\\Z` means different things in Java and Python; write `$` (the very end of the value here)"
            i += 2
            continue
        if c == "[":  # skip the class: a `]` right after `[` or `[^` is a member
            j = i + 1
            j += 1 if pattern[j : j + 1] == "^" else 0
            j += 1 if pattern[j : j + 1] == "]" else 0
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(" and pattern[i + 1 : i + 2] == "?":
            flags = re.match(r"\(\?([a-zA-Z]*)[:)-]", pattern[i:])
            if flags and "m" in flags.group(1):
                return "multiline mode (?m) is not supported: a value is one line of text to the pattern; remove it"
        if c == ")":
            bound = _repeat_bound(pattern, i + 1)
            if bound is not None and bound[0] > MAX_GROUP_REPEAT and pattern[bound[1] : bound[1] + 1] != "+":
                return (
                    f"a group repeats more than {MAX_GROUP_REPEAT} times ({pattern[: bound[1]][-20:]!r}): "
                    f"Java's regex engine "
                    f"recurses once per repetition and overflows its stack on a long value. Make the repeat "
                    f"possessive (`)*+`, `)++`, `){{n,}}+`), bound it (at most {MAX_GROUP_REPEAT}), or repeat "
                    f"a character class instead of a group"
                )
        i += 1
    return None


def _repeat_bound(pattern: str, at: int) -> tuple[float, int] | None:
    """The most repetitions the quantifier at `at` allows and where it ends, or None without one."""
    c = pattern[at : at + 1]
    if c in ("*", "+"):
        return float("inf"), at + 1
    m = re.match(r"\{(\d*)(,?)(\d*)\}", pattern[at:])
    if not m:
        return None
    most = float(m.group(3)) if m.group(3) else (float("inf") if m.group(2) else float(m.group(1) or 0))
    return most, at + m.end()


def _declared(rule_value) -> bool:
    """A rule is declared unless left at its default (None, or False for `uuid`); 0 is a bound."""
    return rule_value is not None and rule_value is not False


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FieldSpec(_Model):
    """One event field: where it is in the JSON, its type, and the rules its value obeys."""

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    type: str
    required: bool = True
    path: str | None = None  # JSON path such as $.meta.ts; default $.<name>
    allowed: tuple[str | int, ...] | None = None
    min: float | int | str | None = None
    max: float | int | str | None = None
    pattern: str | None = None
    max_length: int | None = Field(default=None, gt=0)
    uuid: bool = False
    examples: tuple[str, ...] | None = None  # values the generator may use (needed with `pattern`)
    # with format debezium, how the connector writes a decimal, date or timestamp (Encoding);
    # a schema wrapper's logical type, when it gives one, overrides it record by record
    encoding: str | None = None

    @field_validator("type")
    @classmethod
    def _type(cls, v: str) -> str:
        parse_type(v)
        return v.strip().lower()

    @field_validator("path")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        if v is not None and not _PATH.match(v):
            raise ValueError(f"path {v!r} is not a JSON path of object keys; write e.g. '$.meta.ts'")
        return v

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, v: str | None) -> str | None:
        if v is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("error", FutureWarning)  # nested sets, set operations: Java reads them otherwise
                try:
                    re.compile(v)
                except (re.error, FutureWarning) as exc:
                    raise ValueError(
                        f"pattern {v!r} is not a regular expression both engines read alike: {exc}"
                    ) from None
            problem = pattern_problem(v)
            if problem:
                raise ValueError(f"pattern {v!r}: {problem}")
        return v

    @model_validator(mode="after")
    def _rules_fit(self) -> FieldSpec:
        base = self.ftype.base
        for rule, bases in RULES_FOR.items():
            value = getattr(self, rule)
            if _declared(value) and base not in bases:
                raise ValueError(
                    f"field {self.name!r}: rule `{rule}` does not fit type {self.type} "
                    f"(it fits {', '.join(bases)}); remove it or change the type"
                )
        for bound in ("min", "max"):
            value = getattr(self, bound)
            if value is not None:
                try:
                    Decimal(str(value))
                except InvalidOperation:
                    raise ValueError(f"field {self.name!r}: `{bound}` {value!r} is not a number") from None
        if self.min is not None and self.max is not None and Decimal(str(self.min)) > Decimal(str(self.max)):
            raise ValueError(f"field {self.name!r}: min {self.min} is above max {self.max}")
        if self.allowed is not None:
            if not self.allowed:
                raise ValueError(f"field {self.name!r}: `allowed` is empty; list the values or remove it")
            want = str if base == "string" else int
            wrong = [a for a in self.allowed if not isinstance(a, want) or isinstance(a, bool)]
            if wrong:
                raise ValueError(
                    f"field {self.name!r}: allowed values {wrong!r} are not {self.type}s; "
                    f"quote strings, write integers bare"
                )
        if self.pattern is not None and self.examples:
            bad = [e for e in self.examples if not re.search(self.pattern, e)]
            if bad:
                raise ValueError(f"field {self.name!r}: examples {bad!r} do not match pattern {self.pattern!r}")
        return self

    @field_validator("encoding")
    @classmethod
    def _encoding(cls, v: str | None) -> str | None:
        if v is not None and v not in [e.value for e in Encoding if e is not Encoding.UNSUPPORTED]:
            named = ", ".join(e.value for e in Encoding if e is not Encoding.UNSUPPORTED)
            raise ValueError(f"encoding {v!r} is not one of {named}")
        return v

    @property
    def ftype(self) -> FieldType:
        return parse_type(self.type)

    @property
    def read_as(self) -> Encoding | None:
        """How the value is written: the declared encoding, ISO text for a date or timestamp
        without one, None for the other types (and for a JSON event's decimal: a number or text)."""
        if self.encoding is not None:
            return Encoding(self.encoding)
        return Encoding.ISO if self.ftype.base in ("date", "timestamp") else None

    @property
    def json_path(self) -> str:
        return self.path or f"$.{self.name}"

    @property
    def keys(self) -> tuple[str, ...]:
        """The object keys leading to the value: '$.meta.ts' -> ('meta', 'ts')."""
        return tuple(self.json_path[2:].split("."))

    def rules(self) -> list[str]:
        """The rules this field declares, in the order they are checked."""
        return [r for r in RULES_FOR if _declared(getattr(self, r))]


class RegistrySpec(_Model):
    """Where a topic's writer schemas are (Avro, JSON Schema): a schema registry's Confluent-compatible API
    (Confluent Schema Registry, Apicurio's /apis/ccompat/v7, Karapace). docs/registry.md"""

    url: str = Field(min_length=1)  # e.g. ${ONCEFLOW_REGISTRY_URL}
    # the subject whose versions the topic's records may be written with; default `<topic>-value`
    # (the serializers' TopicNameStrategy)
    subject: str | None = None
    username: str | None = None  # HTTP basic auth, with password; both as ${VAR}
    # or the login in an Airflow connection (type http: login, password, extra.ca_location), read where
    # the job runs (onceflow.connections); instead of username and password
    connection: str | None = None
    # never in a dump: a declaration is written into the bronze ledger with each batch
    password: str | None = Field(default=None, exclude=True, repr=False)
    timeout_seconds: float = Field(default=10.0, gt=0)
    # https with a CA of your own: its certificate(s), PEM (as the Kafka client's ssl.ca.location);
    # unset, the system's CAs
    ca_location: str | None = None
    # how long a registry that does not answer (a restart, a network cut) is asked again before the batch
    # fails; the batch waits meanwhile, uncommitted, and no record is judged without its schema
    wait_seconds: float = Field(default=300.0, ge=0)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not an http(s) URL; name the registry's API, e.g. ${{ONCEFLOW_REGISTRY_URL}}")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _both(self) -> RegistrySpec:
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password go together (HTTP basic auth); set both or neither")
        if self.connection and self.username is not None:
            raise ValueError("connection and username/password both name a login; keep one (the connection holds both)")
        if self.ca_location and not self.url.startswith("https://"):
            raise ValueError(
                f"ca_location is for an https registry; {self.url} is plain http. Fix: use https or drop it"
            )
        return self


class Schema(_Model):
    """The event: JSON fields with types and rules, the event time, the optional unique id."""

    # json: each record is an event, the fields its values; debezium: each record is a Debezium
    # change event, the fields the columns of its row (`after`), for a keyed table (docs/cdc.md);
    # avro: each record is Avro in the Confluent wire format, its writer schema in `registry`, read
    # as the JSON view of the decoded record; json_schema: each record is JSON in the Confluent wire
    # format (a JSON Schema serializer's), the payload after the header judged as a json event;
    # protobuf: each record is Protobuf in the Confluent wire format, read as the JSON view of the
    # decoded message (docs/registry.md)
    format: str = "json"
    # with format debezium: how the connector's envelopes are written, its `value.converter`: json
    # (JsonConverter, with or without schemas), avro (AvroConverter: Avro in the Confluent wire
    # format, its schemas in `registry`, read as the JSON view; docs/cdc.md#envelopes-in-avro) or
    # json_schema (JsonSchemaConverter: the JSON envelope after the wire format's header)
    converter: str = "json"
    registry: RegistrySpec | None = None
    # at most Kafka's default message size: Spark's VARIANT holds at most 16 MiB, and a record's
    # variant can be a few times its text
    max_bytes: int = Field(default=16 * 1024, gt=0, le=MAX_RECORD_BYTES)
    fields: tuple[FieldSpec, ...] = Field(min_length=1)
    # a required timestamp field; with format debezium also an envelope position
    # (EVENT_TIME_POSITIONS), by default `source.ts_ms`
    event_time: str | None = None
    event_id: str | None = None

    @field_validator("fields", mode="before")
    @classmethod
    def _listed(cls, v):
        if v == "registry":  # config.load reads them (schema/registry_fields.py) once `registry` is valid
            raise ValueError("`registry` reads the fields from schema.registry, which is not valid (above)")
        return v

    @field_validator("format")
    @classmethod
    def _format(cls, v: str) -> str:
        if v not in FORMATS:
            raise ValueError(f"format {v!r} is not supported; one of {', '.join(FORMATS)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Schema:
        names = [f.name for f in self.fields]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ValueError(f"fields {dups} are declared twice; each field name once")
        lowered = [n.lower() for n in names]
        if len(set(lowered)) != len(lowered):
            raise ValueError("field names differ only in case; Delta column names are case-insensitive")
        paths = [f.json_path for f in self.fields]
        clash = sorted({p for p in paths if paths.count(p) > 1})
        if clash:
            raise ValueError(f"paths {clash} are read by more than one field")
        self._encodings_fit()
        debezium = self.format == DEBEZIUM
        if self.converter not in CONVERTERS:
            raise ValueError(f"converter {self.converter!r} is not supported; one of {', '.join(CONVERTERS)}")
        if self.converter != "json" and not debezium:
            raise ValueError(
                f"converter {self.converter} says how a Debezium connector writes its envelopes: it is read with "
                f"format: debezium only (a topic of plain Avro records is format: avro). Remove it"
            )
        if self.framing is not None and self.registry is None:
            what = f"format debezium with converter {self.converter}" if debezium else f"format {self.format}"
            raise ValueError(
                f"{what} needs `registry`: the schema registry that holds the writer schemas, "
                "e.g. registry: {url: ${ONCEFLOW_REGISTRY_URL}} (docs/registry.md)"
            )
        if self.registry is not None and self.framing is None:
            raise ValueError(
                f"`registry` is read with format: {', '.join(REGISTRY_FORMATS[:-1])} or {REGISTRY_FORMATS[-1]}, "
                f"or debezium with converter: avro or json_schema, only (this schema is {self.format}); remove it"
            )
        if self.event_time is None and not debezium:
            raise ValueError(f"event_time is missing; name the required timestamp field of the event ({names})")
        et = self.field(self.event_time) if self.event_time is not None else None
        if et is None and not (debezium and self.event_time in (None, *EVENT_TIME_POSITIONS)):
            where = f"one of {names}" + (f", or {' or '.join(EVENT_TIME_POSITIONS)}" if debezium else "")
            raise ValueError(f"event_time {self.event_time!r} is not a declared field; name {where}")
        if et is not None and (et.ftype.base != "timestamp" or not et.required):
            raise ValueError(
                f"event_time {self.event_time!r} must be a required timestamp field "
                f"(it is {'an optional ' if not et.required else ''}{et.type})"
            )
        if self.event_id is not None and self.format == "debezium":
            raise ValueError(
                f"event_id {self.event_id!r} with format 'debezium': every change of a row repeats its "
                "key, so no field is unique across the changes; leave event_id out (the keyed table's "
                "keys are sinks.current.keys)"
            )
        if self.event_id is not None:
            eid = self.field(self.event_id)
            if eid is None:
                raise ValueError(f"event_id {self.event_id!r} is not a declared field; name one of {names}")
            if eid.ftype.base not in ("string", "int", "long") or not eid.required:
                raise ValueError(f"event_id {self.event_id!r} must be a required string, int or long field")
        return self

    def _encodings_fit(self) -> None:
        for f in self.fields:
            base = f.ftype.base
            if f.encoding is not None and self.format != DEBEZIUM:
                raise ValueError(
                    f"field {f.name!r}: `encoding` says how a Debezium connector writes a column; "
                    "it is read with format: debezium only. Remove it"
                )
            if f.encoding is not None and Encoding(f.encoding) not in ENCODINGS_FOR.get(base, ()):
                fits = ", ".join(ENCODINGS_FOR.get(base, ()))
                raise ValueError(
                    f"field {f.name!r}: encoding {f.encoding} does not fit type {f.type}"
                    + (f" (it takes {fits})" if fits else " (only decimal, date and timestamp fields take one)")
                )
            if self.converter == AVRO and f.encoding == Encoding.PRECISE:
                raise ValueError(
                    f"field {f.name!r}: with converter avro a decimal.handling.mode=precise column is an Avro "
                    "decimal, which reaches the JSON view as its decimal text: declare `encoding: string` "
                    "(docs/cdc.md#envelopes-in-avro)"
                )
            if self.format == DEBEZIUM and base == "decimal" and f.encoding is None:
                raise ValueError(
                    f"field {f.name!r}: a Debezium decimal must say how the connector writes it; add "
                    "`encoding: precise` (decimal.handling.mode=precise, the default: base64 of the unscaled "
                    "value at the field's scale), `encoding: string` (decimal.handling.mode=string) or "
                    "`encoding: double` (decimal.handling.mode=double)"
                )

    def field(self, name: str | None) -> FieldSpec | None:
        return next((f for f in self.fields if f.name == name), None)

    @property
    def framing(self) -> str | None:
        """The format of a registry's framed records this schema's topic holds (a key of
        schema/reasons.FRAMED_REASONS: avro, json_schema, protobuf), None for plain JSON: a Debezium
        topic's envelopes are Avro under converter avro, framed JSON under converter json_schema."""
        if self.format in REGISTRY_FORMATS:
            return self.format
        return self.converter if self.format == DEBEZIUM and self.converter != "json" else None

    @property
    def event_time_position(self) -> str | None:
        """The envelope position that holds the event time (`source.ts_ms`), or None when the
        event time is a declared field."""
        if self.format != DEBEZIUM or self.field(self.event_time) is not None:
            return None
        return self.event_time or DEFAULT_DEBEZIUM_EVENT_TIME

    @property
    def event_time_column(self) -> str:
        """Bronze's column of the event time: the declared field, or EVENT_TIME_COLUMN for a position."""
        return EVENT_TIME_COLUMN if self.event_time_position is not None else str(self.event_time)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]


_METRIC = re.compile(r"^\s*(count|sum|min|max|avg|mean)\s*(?:\(\s*([A-Za-z][A-Za-z0-9_]*)?\s*\))?\s*$")
MERGEABLE = ("count", "sum", "min", "max")
# a sum column has this many more digits than its field: it holds the sum of 10^10 of the largest
# values (long: 10^19 in decimal(38,0); int: 4*10^9 in bigint), so a merge never overflows on valid data
SUM_HEADROOM_DIGITS = 10
RESERVED_AGGREGATE_COLUMNS = ("window_start", "window_end", "first_batch_id", "last_batch_id")


@dataclass(frozen=True)
class Metric:
    """One aggregate column: `count`, or `sum|min|max(field)`."""

    name: str
    func: str
    field: str | None = None

    def sql_type(self, schema: Schema) -> str:
        if self.func == "count":
            return "BIGINT"
        spec = schema.field(self.field or "")
        assert spec is not None  # a metric's field is checked against the schema when the pipeline loads
        ftype = spec.ftype
        if self.func == "sum":  # SUM_HEADROOM_DIGITS more digits than the field
            if ftype.base == "decimal":
                return f"DECIMAL({min(38, ftype.precision + 10)},{ftype.scale})"
            return {"double": "DOUBLE", "int": "BIGINT", "long": "DECIMAL(38,0)"}[ftype.base]
        return ftype.sql


def parse_metric(name: str, text: str) -> Metric:
    """'sum(reading)' -> Metric; only metrics that merge exactly across batches are accepted."""
    m = _METRIC.match(str(text))
    if not m:
        raise ValueError(f"metric {name}: {text!r} is not count, sum(field), min(field) or max(field)")
    func, field = m.group(1), m.group(2)
    if func in ("avg", "mean"):
        raise ValueError(
            f"metric {name}: {func} does not merge exactly across batches; declare sum and count "
            f"(e.g. {name}_sum: sum({field or 'x'}) and {name}_count: count) and divide when reading"
        )
    if func == "count":
        if field:
            raise ValueError(f"metric {name}: write `count` (rows per group and window), not count({field})")
        return Metric(name, "count")
    if not field:
        raise ValueError(f"metric {name}: {func} needs a field, e.g. {func}(reading)")
    return Metric(name, func, field)


class AggregatesSpec(_Model):
    """What the aggregates table holds: per group and event-time window, mergeable metrics."""

    group_by: tuple[str, ...] = Field(min_length=1)
    metrics: dict[str, str] = Field(min_length=1)

    def parsed_metrics(self) -> list[Metric]:
        return [parse_metric(n, t) for n, t in self.metrics.items()]

    def check_against(self, schema: Schema) -> None:
        """Group-by fields exist; metric fields exist and are numeric (min/max: or time)."""
        names = schema.names
        for g in self.group_by:
            f = schema.field(g)
            if f is None:
                raise ValueError(f"group_by field {g!r} is not declared in schema.fields ({', '.join(names)})")
            if f.ftype.base in ("double",):
                raise ValueError(f"group_by field {g!r} is a double: group by a string, integer, date or boolean")
        for m in self.parsed_metrics():
            if m.name in self.group_by or m.name in RESERVED_AGGREGATE_COLUMNS or m.name.startswith("_"):
                raise ValueError(
                    f"metric name {m.name!r} clashes with a group_by field or a reserved column "
                    f"({', '.join(RESERVED_AGGREGATE_COLUMNS)})"
                )
            if m.field is None:
                continue
            f = schema.field(m.field)
            if f is None:
                raise ValueError(f"metric {m.name}: field {m.field!r} is not declared in schema.fields")
            ok = f.ftype.numeric or (m.func in ("min", "max") and f.ftype.base in ("timestamp", "date"))
            if not ok:
                raise ValueError(f"metric {m.name}: {m.func}({m.field}) needs a numeric field, {m.field} is {f.type}")
            if m.func == "sum" and f.ftype.base == "decimal" and f.ftype.precision > 38 - SUM_HEADROOM_DIGITS:
                raise ValueError(
                    f"metric {m.name}: sum({m.field}) of {f.type} can outgrow decimal(38,{f.ftype.scale}), the "
                    f"widest Delta holds, after 10^{38 - f.ftype.precision} values, and a merge that overflows "
                    f"stops the aggregates; declare {m.field} with a precision of at most "
                    f"{38 - SUM_HEADROOM_DIGITS}, e.g. decimal({38 - SUM_HEADROOM_DIGITS},{f.ftype.scale})"
                )

"""Validation of raw Kafka records into bronze rows or quarantine rows, compiled
from the pipeline's declared schema.

Pure Spark SQL (Spark 4's VARIANT functions), no Python UDF: the JSON is parsed
once per record. Each record gets exactly one reason, the first check it fails
in the fixed order of schema/reasons.py, with a `detail` naming the field, the
rule and the value. Input is strict: one JSON object, optionally surrounded by
JSON whitespace, in valid UTF-8 (RFC 8259). `try_parse_json` alone reads the
first value and ignores what follows, so the whole text is also checked: with
string contents masked, the brackets must close exactly at the end.

The audit does not reuse this module: it judges source records with its own
implementation of the same rules (schema/reference.py), so a bug here shows as
a disagreement instead of being agreed with.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from onceflow import faults, tables
from onceflow.cdc.spec import (
    DECIMAL_LOGICAL,
    DIGITS,
    LOGICAL_TYPES,
    LONG,
    PLACEHOLDER,
    PLAIN_TYPES,
    KeyedSpec,
    SequencePart,
)
from onceflow.schema import reasons as R
from onceflow.schema.model import (
    ENCODING_SETTING,
    ENCODINGS_FOR,
    EVENT_TIME_COLUMN,
    INT_RANGE,
    Encoding,
    FieldSpec,
    Schema,
)
from onceflow.schema.reasons import Reason
from onceflow.spark.framed import FRAME_REASON, WIRE
from onceflow.state.unprocessable import Unprocessable

_NOT_FRAMED = "not in the Confluent wire format (a magic byte 0 and a 4-byte schema id)"
_UNKNOWN_SCHEMA = "the registry knows no schema with the record's schema id"
_OTHER_SUBJECT = "the record's schema is registered, but not under the pipeline's subject"
FRAME_DETAILS = {
    Reason.AVRO_NOT_FRAMED: _NOT_FRAMED,
    Reason.AVRO_UNKNOWN_SCHEMA: _UNKNOWN_SCHEMA,
    Reason.AVRO_OTHER_SUBJECT: _OTHER_SUBJECT,
    Reason.AVRO_UNSUPPORTED_SCHEMA: "the record's writer schema is not one onceflow reads (docs/registry.md)",
    Reason.AVRO_UNDECODABLE: "the payload is not exactly one record of its writer schema",
    Reason.JSON_SCHEMA_NOT_FRAMED: _NOT_FRAMED,
    Reason.JSON_SCHEMA_UNKNOWN_SCHEMA: _UNKNOWN_SCHEMA,
    Reason.JSON_SCHEMA_OTHER_SUBJECT: _OTHER_SUBJECT,
    Reason.JSON_SCHEMA_UNSUPPORTED_SCHEMA: "the record's schema is registered as Avro or Protobuf, not JSON Schema",
    Reason.PROTOBUF_NOT_FRAMED: _NOT_FRAMED,
    Reason.PROTOBUF_UNKNOWN_SCHEMA: _UNKNOWN_SCHEMA,
    Reason.PROTOBUF_OTHER_SUBJECT: _OTHER_SUBJECT,
    Reason.PROTOBUF_UNSUPPORTED_SCHEMA: "the record's schema is no Protobuf schema onceflow reads (docs/registry.md)",
    Reason.PROTOBUF_UNDECODABLE: "the payload is not one message of its schema (its indexes, then its bytes)",
}

# Anchored with \z, the very end: Java's `$` also matches before a final line terminator, so
# "…Z\n" would pass. No group is repeated without being possessive: Java's regex engine recurses
# once per repetition of a group, and a long value would overflow the task thread's stack.
UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\z"
# RFC 3339 with a mandatory offset, at most microseconds; years 0001-9999
TIMESTAMP = (
    r"^(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?(?:Z|[+-][0-9]{2}:[0-9]{2})\z"
)
DATE = r"^(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}\z"
# the UTC instants a timestamp may stand for (an offset can carry 0001-01-01 into year 0)
TIMESTAMP_RANGE = ("0001-01-01 00:00:00", "9999-12-31 23:59:59.999999")
# the same range as counts since 1970-01-01 (Debezium's epoch encodings): days, milliseconds, microseconds
EPOCH_DAYS_RANGE = (-719_162, 2_932_896)
EPOCH_MILLIS_RANGE = (-62_135_596_800_000, 253_402_300_799_999)
EPOCH_MICROS_RANGE = (-62_135_596_800_000_000, 253_402_300_799_999_999)
# standard base64, padded and with its unused bits zero (one writing per value), of at most 16 bytes
# (five groups and a last of one or two bytes; the length is checked after decoding)
BASE64 = r"^(?:[A-Za-z0-9+/]{4}){0,5}+(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?\z"
MAX_UNSCALED_BYTES = 16
# a JSON string, unrolled: runs of plain characters in one tight loop, a group only per escape;
# the possessive `*+` repeats without recursion and never backtracks into it
_STRING = r'(?s)"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_WS = "[ \\t\\n\\r]*"
_NUMBER_RUN = f"[-+.0-9eE]{{{R.MAX_NUMBER_CHARS + 1}}}"
# a \uD800-\uDBFF escape not followed by a \uDC00-\uDFFF one, or a low one not preceded by a high
# one; read after each escaped backslash (`\\\\`) is blanked, so `\\\\uD800` is no escape at all
_ESCAPED_BACKSLASH = r"\\\\"
_HIGH, _LOW = r"\\u[dD][89abAB][0-9a-fA-F]{2}", r"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_LONE_SURROGATE = f"{_HIGH}(?!{_LOW})|(?<!{_HIGH}){_LOW}"
# the JSON reader that tells a repeated key from broken JSON: strict, as RFC 8259 (Spark's
# other JSON functions accept single quotes and raw control characters, for Hive)
_STRICT_JSON = {"allowSingleQuotes": "false", "allowNonNumericNumbers": "false", "mode": "PERMISSIVE"}


def decimal_pattern(precision: int, scale: int) -> str:
    """The decimal text a decimal(p,s) field accepts without rounding: at most p-s integer
    digits after leading zeros and s fraction digits before trailing zeros."""
    whole = precision - scale
    head = f"-?0*[0-9]{{1,{whole}}}" if whole > 0 else "-?0+"
    tail = f"(?:\\.[0-9]{{1,{scale}}}0*)?" if scale else "(?:\\.0+)?"
    return f"^{head}{tail}\\z"


def java_pattern(pattern: str) -> str:
    """A declared `pattern` for Java's engine, meaning what it means in Python's (docs/validation.md):
    `.` excludes only \\n (UNIX_LINES), and `$` outside a character class is the very end (\\z)."""
    out, i, class_start = ["(?d)"], 0, -1  # class_start: where the open [...] began, -1 outside one
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if class_start >= 0:
            first = i == class_start + 1 or (i == class_start + 2 and pattern[class_start + 1] == "^")
            if c == "]" and not first:  # a `]` first in a class is a member, in Java as in Python
                class_start = -1
        elif c == "[":
            class_start = i
        elif c == "$":
            c = "\\z"
        out.append(c)
        i += 1
    return "".join(out)


def _lexical(text: Column, fits: Column) -> Column:
    """What the whole text is made of, read without parsing it (NULL for a record past max_bytes,
    which is not read at all): valid UTF-8; with string contents masked, the nesting depth of its
    brackets and its longest run of number characters; a lone surrogate escape; and whether it is
    one bracketed value and nothing else (try_parse_json reads the first value only). Spark's JSON
    reader refuses what is too deep or too long, and a lone surrogate in a key makes a VARIANT
    that Spark cannot read back: such a record is never parsed."""
    masked = F.regexp_replace(text, _STRING, '""')
    brackets = F.regexp_replace(masked, r"[^\[\]{}]", "")

    def step(acc: Column, c: Column) -> Column:
        d = acc["d"] + F.when(c.isin("{", "["), 1).otherwise(-1)
        return F.struct(
            d.alias("d"),
            (acc["z"] + F.when(d == 0, 1).otherwise(0)).alias("z"),
            F.greatest(acc["m"], d).alias("m"),
        )

    zero = F.lit(0)
    scan = F.aggregate(F.split(brackets, ""), F.struct(zero.alias("d"), zero.alias("z"), zero.alias("m")), step)
    unescaped = F.regexp_replace(text, _ESCAPED_BACKSLASH, "__")
    lexed = F.struct(
        F.expr("is_valid_utf8(_text)").alias("utf8"),
        (scan["m"] > R.MAX_DEPTH).alias("too_deep"),
        # only a text longer than the limit can hold such a run: most records skip the regex
        F.when(F.length(masked) > R.MAX_NUMBER_CHARS, masked.rlike(_NUMBER_RUN))
        .otherwise(F.lit(False))
        .alias("number_too_long"),
        F.when(text.contains("\\u"), unescaped.rlike(_LONE_SURROGATE)).otherwise(F.lit(False)).alias("lone"),
        (masked.rlike(f"^{_WS}[\\[{{]") & masked.rlike(f"[\\]}}]{_WS}\\z") & (scan["z"] == 1) & (scan["d"] == 0)).alias(
            "single"
        ),
    )
    return F.when(fits, lexed)


def _once(method: Callable[[_Field], Column]) -> Callable[[_Field], Column]:
    """A _Field's expression built once: each is used by several checks, and every Column built
    from the driver is a round trip to the JVM (a plan is the same whether or not it is shared)."""

    @functools.wraps(method)
    def built(self: _Field) -> Column:
        if method.__name__ not in self._built:
            self._built[method.__name__] = method(self)
        return self._built[method.__name__]

    return built


class _Field:
    """The Spark expressions of one declared field: presence, type, value, rules; read from the
    VARIANT column `source` (the record, `_json`; or a Debezium change's row, `_row`)."""

    def __init__(
        self,
        spec: FieldSpec,
        source: str = "_json",
        path: str | None = None,
        how: tuple[Column, Column] | None = None,
        precise: Column | None = None,
    ):
        self.spec = spec
        self.t = spec.ftype
        self.source = source
        self.path = path = path or spec.json_path
        self.kind = F.expr(f"schema_of_variant(variant_get({source}, '{path}'))")
        self.text = F.expr(f"variant_get({source}, '{path}', 'string')")
        self.present = self.kind.isNotNull() & (self.kind != "VOID")
        # how the value is written: per record from a Debezium schema wrapper (`how`: the Encoding and
        # a `precise` value's scale, columns), else the field's own encoding, known here (or None: the
        # types without one, a JSON event's decimal); `encs` the encodings a record can have
        read_as = spec.read_as
        self.enc: Column | None = how[0] if how is not None else None
        self.scale: Column | None = how[1] if how is not None else F.lit(self.t.scale)
        if how is not None:
            self.encs = [*ENCODINGS_FOR[self.t.base], Encoding.UNSUPPORTED]
        else:
            self.encs = [read_as] if read_as is not None else []
        # a `precise` value as decimal text, computed once per record by the caller (_Debezium)
        self.precise = precise
        self._built: dict[str, Column] = {}

    def _by_encoding(self, make: Callable[[Encoding], Column]) -> Column:
        """`make(e)` for the record's encoding e: one expression when it is known here, else a CASE."""
        if self.enc is None:
            return make(self.encs[0])
        out = None
        for e in self.encs:
            out = F.when(self.enc == e.value, make(e)) if out is None else out.when(self.enc == e.value, make(e))
        assert out is not None
        return out

    def _type_for(self, e: Encoding) -> Column:
        k = self.kind
        if e == Encoding.PRECISE:
            return (k == "STRING") | k.startswith("OBJECT")
        if e in (Encoding.STRING, Encoding.ISO):
            return k == "STRING"
        if e == Encoding.DOUBLE:
            return (k == "BIGINT") | k.startswith("DECIMAL")
        if e == Encoding.UNSUPPORTED:
            return F.lit(False)
        return (k == "BIGINT") | k.rlike(r"^DECIMAL\(\d+,0\)$")  # an epoch count: as a long's

    @_once
    def type_ok(self) -> Column:
        k, base = self.kind, self.t.base
        if self.encs:
            return self._by_encoding(self._type_for)
        if base in ("string", "timestamp", "date"):
            return k == "STRING"
        if base in ("int", "long"):
            return (k == "BIGINT") | k.rlike(r"^DECIMAL\(\d+,0\)$")
        if base == "double":
            return (k == "BIGINT") | k.startswith("DECIMAL") | (k == "DOUBLE") | (k == "FLOAT")
        if base == "decimal":
            return (k == "BIGINT") | k.startswith("DECIMAL") | (k == "STRING")
        return k == "BOOLEAN"

    @_once
    def value(self) -> Column:
        """The typed value (NULL when absent or unusable)."""
        base, text = self.t.base, self.text
        if base == "string":
            return text
        if base == "long":
            return text.try_cast("bigint")
        if base == "int":
            return self._int()
        if base == "double":  # a number past ±1.8e308 reads as ±Infinity: not a double's value
            double = text.try_cast("double")
            return F.when(F.abs(double) < F.lit(float("inf")), double)
        if base == "decimal":
            if self.encs:  # Debezium's: base64 of the unscaled value, text or a number
                text = self._by_encoding(self._decimal_text_for)
            return F.when(text.rlike(decimal_pattern(self.t.precision, self.t.scale)), text.try_cast(self.t.sql))
        if base in ("timestamp", "date"):
            return self._by_encoding(self._time_for)
        return F.expr(f"try_variant_get({self.source}, '{self.path}', 'boolean')")

    def _decimal_text_for(self, e: Encoding) -> Column:
        if e == Encoding.PRECISE:
            return self.precise if self.precise is not None else self.precise_text()
        return self.text if e in (Encoding.STRING, Encoding.DOUBLE) else F.lit(None).cast("string")

    def _time_for(self, e: Encoding) -> Column:
        """A date's or timestamp's value written as `e`: ISO text, or a count since 1970 within years 0001-9999."""
        text = self.text
        if e == Encoding.ISO and self.t.base == "date":
            return F.when(text.rlike(DATE), text.try_cast("date"))
        if e == Encoding.ISO:
            ts = F.when(text.rlike(TIMESTAMP), text.try_cast("timestamp"))
            lo, hi = TIMESTAMP_RANGE
            return F.when(ts.between(F.lit(lo).cast("timestamp"), F.lit(hi).cast("timestamp")), ts)
        n = text.try_cast("bigint")
        if e == Encoding.EPOCH_DAYS:
            return _between(n, EPOCH_DAYS_RANGE, lambda c: F.date_from_unix_date(c.cast("int")))
        if e == Encoding.EPOCH_MILLIS:
            return _between(n, EPOCH_MILLIS_RANGE, F.timestamp_millis)
        if e == Encoding.EPOCH_MICROS:
            return _between(n, EPOCH_MICROS_RANGE, F.timestamp_micros)
        if e == Encoding.EPOCH_NANOS:  # whole microseconds only: never rounded
            micros = F.when((n % 1000) == 0, (n.cast("decimal(20,0)") / 1000).cast("bigint"))
            return _between(micros, EPOCH_MICROS_RANGE, F.timestamp_micros)
        return F.lit(None).cast(self.t.sql)  # UNSUPPORTED, or an encoding of another type

    def precise_parts(self) -> tuple[Column, Column]:
        """A `precise` decimal's base64 text and the scale of its unscaled value: the value itself
        at the record's scale, or Debezium's variable-scale struct {"scale": n, "value": base64}."""
        at = self.path[1:]  # '$.balance' -> '.balance'; '$' -> ''
        n = F.expr(f"try_variant_get({self.source}, '${at}.scale', 'bigint')")
        n_kind = F.expr(f"schema_of_variant(variant_get({self.source}, '${at}.scale'))")
        value_kind = F.expr(f"schema_of_variant(variant_get({self.source}, '${at}.value'))")
        value_text = F.expr(f"try_variant_get({self.source}, '${at}.value', 'string')")
        struct_ok = self.kind.startswith("OBJECT") & (n_kind == "BIGINT") & n.between(0, 38) & (value_kind == "STRING")
        b64 = F.when(self.kind == "STRING", self.text).when(struct_ok, value_text)
        assert self.scale is not None
        scale = F.when(self.kind == "STRING", self.scale).when(struct_ok, n.cast("int"))
        return b64, scale

    def precise_text(self) -> Column:
        """The `precise` value as decimal text, in one expression (the job materializes the parts)."""
        b64, scale = self.precise_parts()
        digits, negative = _unscaled_digits(b64)
        return _decimal_text(digits, negative, scale)

    def _int(self) -> Column:
        lo, hi = INT_RANGE["int"]
        big = self.text.try_cast("bigint")
        return F.when(big.between(lo, hi), big.cast("int"))

    @_once
    def value_ok(self) -> Column:
        return self.value().isNotNull()

    @_once
    def written(self) -> Column:
        """How the value should have been written, naming the connector's setting (for `detail`)."""
        return self._by_encoding(lambda e: F.lit(f" written as {ENCODING_SETTING[e]}"))

    @_once
    def unusable(self) -> Column:
        """Why a present, well-typed value cannot be used (for `detail`)."""
        base = self.t.base
        if self.encs and not (self.enc is None and self.encs == [Encoding.ISO]):
            fix = "; set the field's `encoding` (or the connector's setting) to what the connector writes"
            return F.concat(
                F.lit(f"{self.spec.name} "),
                _quoted(self.text),
                F.lit(f" is not a {self.spec.type}"),
                self.written(),
                F.lit(fix),
            )
        what = {
            "int": "not an int (32-bit)",
            "long": "not a long (64-bit)",
            "double": "not a finite double",
            "decimal": f"not a decimal({self.t.precision},{self.t.scale}) without rounding",
            "timestamp": "not an RFC 3339 timestamp with offset (e.g. 2026-01-01T12:00:00.123456Z) "
            "in years 0001-9999 UTC",
            "date": "not a date (YYYY-MM-DD)",
            "boolean": "not a boolean",
            "string": "not a string",
        }[base]
        return F.concat(F.lit(f"{self.spec.name} "), _quoted(self.text), F.lit(f" is {what}"))

    def rule_checks(self) -> list[tuple[str, Column, Column]]:
        """(reason, failed, detail) per declared rule, in the order they are checked."""
        s, v, text, name = self.spec, self.value(), self.text, self.spec.name
        out: list[tuple[str, Column, Column]] = []
        for rule in s.rules():
            # each rule is one of s.rules(): the field declares it, so its setting is not None
            if rule == "allowed":
                assert s.allowed is not None
                allowed = list(s.allowed)
                failed = ~(text if self.t.base == "string" else v).isin(*allowed)
                shown = ", ".join(str(a) for a in allowed)
                detail = F.concat(F.lit(f"{name} "), _quoted(text), F.lit(f" is not one of {shown}"))
            elif rule in ("min", "max"):
                bound = F.lit(Decimal(str(getattr(s, rule))))
                failed = (v < bound) if rule == "min" else (v > bound)
                word = "below min" if rule == "min" else "above max"
                detail = F.concat(F.lit(f"{name} "), _quoted(text), F.lit(f" is {word} {getattr(s, rule)}"))
            elif rule == "pattern":
                assert s.pattern is not None
                failed = ~text.rlike(java_pattern(s.pattern))
                detail = F.concat(F.lit(f"{name} "), _quoted(text), F.lit(f" does not match pattern {s.pattern}"))
            elif rule == "max_length":
                assert s.max_length is not None
                failed = F.length(text) > s.max_length
                detail = F.concat(
                    F.lit(f"{name} is "),
                    F.length(text).cast("string"),
                    F.lit(f" characters, more than max_length {s.max_length}"),
                )
            else:  # uuid
                failed = ~text.rlike(UUID)
                detail = F.concat(F.lit(f"{name} "), _quoted(text), F.lit(" is not a UUID"))
            out.append((R.RULE_REASONS[rule], failed, detail))
        return out


def _between(n: Column, bounds: tuple[int, int], make: Callable[[Column], Column]) -> Column:
    """`make(n)` where n lies within bounds (so nothing overflows in ANSI mode), else NULL."""
    return F.when(n.between(*bounds), make(n))


def _unscaled_digits(b64: Column) -> tuple[Column, Column]:
    """Debezium's `precise` decimal (base64 of a big-endian two's-complement integer) as the
    digits of its magnitude and its sign, e.g. '/1247OA==' -> ('1428', true); NULL digits when the
    text is not canonical base64 of 1 to 16 bytes or the magnitude has more than 38 digits. In SQL:
    the bytes accumulated as a DECIMAL(38,0) with try_ arithmetic (NULL on overflow, never an ANSI
    error), a negative number's through its complement (-x = ~x + 1), so no step exceeds the final
    magnitude."""
    ok = b64.rlike(BASE64) & (F.length(b64) > 0)
    raw = F.unbase64(F.when(ok, b64))  # Java's decoder throws on what the pattern refuses: never given it
    size = F.octet_length(raw)
    hexed = F.hex(raw)
    ints = F.transform(
        F.sequence(F.lit(0), size - 1), lambda i: F.conv(F.substr(hexed, i * 2 + 1, F.lit(2)), 16, 10).cast("int")
    )
    negative = F.element_at(ints, 1) >= 128
    zero = F.lit(0).cast("decimal(38,0)")
    magnitude = F.aggregate(
        ints,
        zero,
        lambda acc, b: F.try_add(F.try_multiply(acc, F.lit(256)), F.when(negative, 255 - b).otherwise(b)).cast(
            "decimal(38,0)"
        ),
    )
    digits = F.when(negative, F.try_add(magnitude, F.lit(1))).otherwise(magnitude).cast("string")
    return F.when(size.between(1, MAX_UNSCALED_BYTES), digits), F.coalesce(negative, F.lit(False))


def _decimal_text(digits: Column, negative: Column, scale: Column) -> Column:
    """'-' if negative, then the digits with a point before the last `scale` of them ('1428', 2 -> '14.28')."""
    padded = F.concat(F.call_function("repeat", F.lit("0"), F.greatest(scale + 1 - F.length(digits), F.lit(0))), digits)
    whole = F.call_function("substr", padded, F.lit(1), F.length(padded) - scale)
    frac = F.call_function("substr", padded, F.length(padded) - scale + 1, scale)
    return F.concat(
        F.when(negative, F.lit("-")).otherwise(F.lit("")),
        whole,
        F.when(scale > 0, F.concat(F.lit("."), frac)).otherwise(F.lit("")),
    )


def _quoted(text: Column) -> Column:
    return F.concat(F.lit("'"), F.substring(F.coalesce(text, F.lit("null")), 1, 200), F.lit("'"))


def _first(conditions: list[tuple[Column, Column]]) -> Column:
    """The value of the first true condition, else NULL."""
    expr = None
    for cond, value in conditions:
        expr = F.when(cond, value) if expr is None else expr.when(cond, value)
    return expr if expr is not None else F.lit(None).cast("string")


def _names(items: list[tuple[str, Column]]) -> Column:
    return F.concat_ws(", ", *[F.when(c, F.lit(n)) for n, c in items])


def _declared(unprocessable: Unprocessable | None) -> Column:
    """True for a record an operator moved to quarantine by hand (onceflow.state.unprocessable)."""
    cond = F.lit(False)
    for d in unprocessable.declared if unprocessable else []:
        for p, (a, b) in d.ranges.items():
            cond = cond | ((F.col("topic") == d.topic) & (F.col("partition") == p) & F.col("offset").between(a, b - 1))
    return cond


def _field_checks(fields: list[_Field]) -> list[tuple[Column, str, Column]]:
    """(failed, reason, detail) of the declared fields, in their order: missing, wrong type,
    unusable value, then each field's rules."""
    missing = [(f.spec.name, ~f.present) for f in fields if f.spec.required]
    wrong = [(f.spec.name, f.present & ~f.type_ok()) for f in fields]
    bad = [(f, f.present & f.type_ok() & ~f.value_ok()) for f in fields]
    field_checks = []
    if missing:
        any_missing = _names(missing)
        field_checks.append(
            (any_missing != "", Reason.MISSING_FIELD, F.concat(F.lit("missing or null: "), any_missing))
        )
    wrong_list = F.concat_ws(
        ", ",
        *[
            F.when(
                c,
                F.concat(
                    F.lit(f"{n} is "),
                    F.substring(f.kind, 1, 40),
                    F.lit(f", expected {f.spec.type}"),
                    *([f.written()] if f.encs and f.encs != [Encoding.ISO] else []),
                ),
            )
            for (n, c), f in zip(wrong, fields, strict=True)
        ],
    )
    field_checks.append((wrong_list != "", Reason.WRONG_TYPE, wrong_list))
    field_checks.append(
        (
            _first([(c, f.unusable()) for f, c in bad]).isNotNull(),
            Reason.INVALID_VALUE,
            _first([(c, f.unusable()) for f, c in bad]),
        )
    )
    rules = [(f.present & failed, reason, detail) for f in fields for reason, failed, detail in f.rule_checks()]
    return field_checks + rules


_OPS = ("c", "u", "d", "r")  # create, update, delete, a read of the initial snapshot (docs/cdc.md)
_DIGITS = r"^[0-9]{1,38}\z"  # a DIGITS position: what a DECIMAL(38,0) holds


@dataclass(frozen=True)
class _Part:
    """One part of `sequence_by` read from a record: whether it is there, whether it is usable, its
    value, and what it should be (for `detail`)."""

    part: SequencePart
    f: _Field
    present: Column
    ok: Column
    value: Column
    expected: str


def _invalid(items: list[tuple[str, _Field, Column, str]]) -> Column:
    """`name is 'value' (KIND), not a type` for each (name, field, failed, type) that failed."""
    return F.concat_ws(
        ", ",
        *[
            F.when(
                failed,
                F.concat(
                    F.lit(f"{name} is "),
                    _quoted(f.text),
                    F.lit(" ("),
                    F.substring(f.kind, 1, 40),
                    F.lit(f"), not a {expected}"),
                ),
            )
            for name, f, failed, expected in items
        ],
    )


def _is_object(column: str) -> Column:
    """Whether a VARIANT column holds a JSON object (NULL, JSON null or another kind: false); a cast
    to the empty struct reads no member."""
    return F.expr(f"try_variant_get({column}, '$', 'struct<>')").isNotNull()


def _shown_kind(column: str) -> Column:
    kind = F.expr(f"schema_of_variant({column})")
    shown = F.when(F.col(column).isNull(), F.lit("absent")).when(kind == "VOID", F.lit("null"))
    return shown.otherwise(F.substring(kind, 1, 40))


class _Debezium:
    """The Spark expressions of Debezium's envelope (docs/cdc.md, "Debezium's envelope"): the
    reading of a schemas-enabled record's `payload`, the tombstones, `op`, the row the op needs,
    the key's and the sequence's checks, and a change's bronze values. The audit's reference is
    cdc/envelope.py; nothing is shared with it but the documented order of checks.

    Columns it adds, each computed once per record: `_wrapped` (the record is `{"schema": ...,
    "payload": ...}`), `_env` (the envelope: the payload, or the record), `_op_kind` and `_op_text`
    (`op`'s JSON kind and text), `_row` (the row the op needs: `before` for d, else `after`).
    `_env` and `_row` come out of one-element explodes, like `_json`, so that no filter above
    inlines their navigation into each of its references."""

    def __init__(self, schema: Schema, keyed: KeyedSpec):
        self.schema = schema
        self.keyed = keyed
        # the fields that a schema wrapper may say how they are written (cdc/spec.py LOGICAL_TYPES)
        self.described = [i for i, f in enumerate(schema.fields) if f.ftype.base in LOGICAL_TYPES]
        # decimals: their `precise` text from materialized parts (_precise_columns), built once per record
        self.decimals = [i for i, f in enumerate(schema.fields) if f.ftype.base == "decimal"]
        self.fields = [
            _Field(
                f,
                f"_d.v{i}",
                "$",
                (F.col(f"_h.e{i}"), F.col(f"_h.s{i}")) if i in self.described else None,
                _decimal_text(F.col(f"_q.d{i}"), F.col(f"_q.g{i}"), F.col(f"_p.k{i}")) if i in self.decimals else None,
            )
            for i, f in enumerate(schema.fields)
        ]
        self.by_name = {f.spec.name: f for f in self.fields}
        self.op_kind, self.op_text = F.col("_op_kind"), F.col("_op_text")
        self.delete = F.coalesce(self.op_text == "d", F.lit(False))
        self.side = F.when(self.delete, F.lit("before")).otherwise(F.lit("after"))
        self.parts = [self._part(p) for p in keyed.sequence]
        self.event_time = self._event_time()

    def unwrap(self, raw: DataFrame, judged: Column) -> DataFrame:
        """The envelope and the row of each record, tombstones left out. `judged`: the record is
        read at all (not one an operator moved to quarantine, not the poison record), and, for a
        parsed record, it passed the whole-record checks that follow the parse (trailing content).

        A tombstone (a null value, or a schemas-enabled record whose payload is null) is what
        Debezium writes after a delete for Kafka's log compaction: it changes no row, so it is no
        change for bronze and nothing wrong for quarantine. It gets no row here, and the audit's
        reference reads it as TOMBSTONE (cdc/envelope.py): every other record is in one sink."""
        both = F.expr("variant_get(_json, '$.schema') IS NOT NULL AND variant_get(_json, '$.payload') IS NOT NULL")
        # exactly these two keys: sized only when both are there, so a plain envelope skips the cast
        two = F.expr("size(try_variant_get(_json, '$', 'map<string,variant>')) = 2")
        raw = raw.withColumn("_wrapped", F.coalesce(F.when(both, two), F.lit(False)))
        env = F.when(F.col("_wrapped"), F.expr("variant_get(_json, '$.payload')")).otherwise(F.col("_json"))
        raw = raw.withColumn("_env", F.explode(F.array(env)))
        null_payload = F.col("_wrapped") & F.expr("is_variant_null(_env)") & F.col("_judged")
        tombstone = judged & (F.col("_value").isNull() | null_payload)
        raw = raw.where(~F.coalesce(tombstone, F.lit(False)))
        raw = raw.select(
            "*",
            F.expr("schema_of_variant(variant_get(_env, '$.op'))").alias("_op_kind"),
            F.expr("variant_get(_env, '$.op', 'string')").alias("_op_text"),
        )
        row = F.when(self.delete, F.expr("variant_get(_env, '$.before')")).otherwise(
            F.expr("variant_get(_env, '$.after')")
        )
        raw = raw.withColumn("_row", F.explode(F.array(row)))
        return self._precise_columns(self._values_and_hows(raw))

    def _precise_columns(self, raw: DataFrame) -> DataFrame:
        """Per decimal field i: `_p.b{i}` and `_p.k{i}` (a `precise` value's base64 and scale), then
        `_q.d{i}` and `_q.g{i}` (its magnitude's digits and sign), each its own column out of a
        one-element explode: the decoding is one aggregate per value, and the text built from it
        refers to its digits several times, which would otherwise copy the aggregate each time."""
        if not self.decimals:
            return raw
        parts = []
        for i in self.decimals:
            b64, scale = self.fields[i].precise_parts()
            parts += [b64.alias(f"b{i}"), scale.alias(f"k{i}")]
        raw = raw.withColumn("_p", F.explode(F.array(F.struct(*parts))))
        digits = []
        for i in self.decimals:
            d, g = _unscaled_digits(F.col(f"_p.b{i}"))
            digits += [d.alias(f"d{i}"), g.alias(f"g{i}")]
        return raw.withColumn("_q", F.explode(F.array(F.struct(*digits))))

    def _values_and_hows(self, raw: DataFrame) -> DataFrame:
        """Per declared field i: `_d.v{i}`, its raw value (a create's, update's or read's
        placeholder for an unchanged TOASTed column replaced by `before`'s value when `before` has
        a real one), `_d.u{i}` (the placeholder without one: cdc_unavailable_value); for a field the
        wrapper may describe, `_d.n{i}` (its schema in the wrapper) and `_h.e{i}`, `_h.s{i}` (how it
        is written: Encoding, a `precise` value's scale; the declared ones when not described)."""
        delete = "coalesce(_op_text = 'd', false)"
        side = f"CASE WHEN {delete} THEN 'before' ELSE 'after' END"

        def placeholder(x: str) -> str:
            return f"(schema_of_variant({x}) = 'STRING' AND try_variant_get({x}, '$', 'string') = '{PLACEHOLDER}')"

        def entry(node: str, key: str) -> str:
            named = (
                f"schema_of_variant(variant_get(x, '$.field')) = 'STRING' "
                f"AND try_variant_get(x, '$.field', 'string') = {key}"
            )
            return f"try_element_at(filter(try_variant_get({node}, '$.fields', 'array<variant>'), x -> {named}), 1)"

        wrapper = "variant_get(_json, '$.schema')"
        image = f"CASE WHEN _wrapped THEN {entry(wrapper, side)} END"
        members = []
        for i, f in enumerate(self.schema.fields):
            path = f.json_path
            now, old = f"variant_get(_row, '{path}')", f"variant_get(_env, '$.before{path[1:]}')"
            swap = f"(NOT {delete} AND coalesce({placeholder(now)}, false))"
            real = f"({old} IS NOT NULL AND NOT coalesce({placeholder(old)}, false))"
            members += [
                F.expr(f"CASE WHEN {swap} AND {real} THEN {old} ELSE {now} END").alias(f"v{i}"),
                F.expr(f"{swap} AND NOT {real}").alias(f"u{i}"),
            ]
            if i in self.described:
                node = image
                for key in f.keys:
                    node = entry(node, f"'{key}'")
                members.append(F.expr(node).alias(f"n{i}"))
        raw = raw.withColumn("_d", F.explode(F.array(F.struct(*members))))
        if not self.described:
            return raw
        hows = []
        for i in self.described:
            f = self.schema.fields[i]
            base = f.ftype.base

            def member(path: str, i: int = i) -> tuple[Column, Column]:
                got = f"variant_get(_d.n{i}, '{path}')"
                return F.expr(f"schema_of_variant({got})"), F.expr(f"try_variant_get(_d.n{i}, '{path}', 'string')")

            (name_kind, name), (type_kind, kind) = member("$.name"), member("$.type")
            name = F.when(name_kind == "STRING", name)
            kind = F.when(type_kind == "STRING", kind)
            unsupported = F.lit(Encoding.UNSUPPORTED.value)
            by_name, by_type = unsupported, unsupported
            for logical, said in LOGICAL_TYPES[base].items():
                by_name = F.when(name == logical, F.lit(said.value)).otherwise(by_name)
            for plain, said in PLAIN_TYPES[base].items():
                by_type = F.when(kind == plain, F.lit(said.value)).otherwise(by_type)
            declared = f.read_as
            enc = (
                F.when(F.col(f"_d.n{i}").isNull(), F.lit(declared.value if declared else None))
                .when(name.isNotNull(), by_name)
                .otherwise(by_type)
            )
            scale_kind, given = member("$.parameters.scale")
            given_ok = (scale_kind == "STRING") & given.rlike(r"^[0-9]{1,2}\z")
            given_ok = given_ok & (given.cast("int") <= 38)
            is_decimal = F.coalesce(name == DECIMAL_LOGICAL, F.lit(False))
            enc = F.when(is_decimal & ~F.coalesce(given_ok, F.lit(False)), unsupported).otherwise(enc)
            scale = F.when(is_decimal & F.coalesce(given_ok, F.lit(False)), given.cast("int")).otherwise(
                F.lit(f.ftype.scale)
            )
            hows += [enc.alias(f"e{i}"), scale.alias(f"s{i}")]
        return raw.withColumn("_h", F.explode(F.array(F.struct(*hows))))

    def _event_time(self) -> _Field | None:
        """The event time when it is an envelope position (schema.event_time_position, epoch ms)."""
        position = self.schema.event_time_position
        if position is None:
            return None
        return _Field(FieldSpec(name="event_time", type="long", path="$." + position), "_env")

    def event_time_value(self) -> Column:
        assert self.event_time is not None
        n = F.when(self.event_time.type_ok(), self.event_time.value())
        return _between(n, EPOCH_MILLIS_RANGE, F.timestamp_millis)

    def checks(self) -> list[tuple[Column, str, Column]]:
        """(failed, reason, detail) after the whole-record checks: the payload, the envelope in
        CDC_REASONS' order, then for c/u/r the row's declared fields as an event's."""
        op_missing = self.op_kind.isNull() | (self.op_kind == "VOID")
        op_unknown = F.coalesce((self.op_kind != "STRING") | ~self.op_text.isin(*_OPS), F.lit(True))
        row_missing = ~_is_object("_row")
        keys = [self.by_name[f.name] for f in self.keyed.keys]
        key_missing = _names([(f.spec.name, ~f.present) for f in keys])
        key_invalid = _invalid([(f.spec.name, f, ~f.type_ok() | ~f.value_ok(), f.spec.type) for f in keys])
        seq_missing = _names([(p.part.name, ~p.present) for p in self.parts])
        seq_invalid = _invalid([(p.part.name, p.f, ~p.ok, p.expected) for p in self.parts])
        where = F.concat(F.lit(" in `"), self.side, F.lit("`"))
        envelope = [
            (
                F.col("_wrapped") & ~_is_object("_env"),
                Reason.NOT_AN_OBJECT,
                F.concat(F.lit("the payload is "), _shown_kind("_env"), F.lit(", not an object")),
            ),
            (op_missing, Reason.CDC_MISSING_OP, F.lit("the envelope has no op (absent or null)")),
            (
                op_unknown,
                Reason.CDC_UNKNOWN_OP,
                F.concat(F.lit("op "), _quoted(self.op_text), F.lit(f" is not one of {', '.join(_OPS)}")),
            ),
            (
                self.delete & row_missing,
                Reason.CDC_MISSING_BEFORE,
                F.concat(F.lit("op 'd' needs `before`, an object; it is "), _shown_kind("_row")),
            ),
            (
                row_missing,
                Reason.CDC_MISSING_AFTER,
                F.concat(F.lit("op '"), self.op_text, F.lit("' needs `after`, an object; it is "), _shown_kind("_row")),
            ),
            (
                key_missing != "",
                Reason.CDC_MISSING_KEY,
                F.concat(F.lit("key missing or null"), where, F.lit(": "), key_missing),
            ),
            (
                key_invalid != "",
                Reason.CDC_INVALID_KEY,
                F.concat(F.lit("key"), where, F.lit(": "), key_invalid),
            ),
            (
                seq_missing != "",
                Reason.CDC_MISSING_SEQUENCE,
                F.concat(F.lit("sequence missing or null: "), seq_missing),
            ),
            (
                seq_invalid != "",
                Reason.CDC_INVALID_SEQUENCE,
                F.concat(F.lit("sequence: "), seq_invalid),
            ),
        ]
        if self.event_time is not None:
            position = self.schema.event_time_position
            envelope.append(
                (
                    self.event_time_value().isNull(),
                    Reason.CDC_INVALID_EVENT_TIME,
                    F.concat(
                        F.lit(f"the event time {position} is "),
                        _quoted(self.event_time.text),
                        F.lit(" ("),
                        F.coalesce(F.substring(self.event_time.kind, 1, 40), F.lit("absent")),
                        F.lit("), not epoch milliseconds of years 0001-9999"),
                    ),
                )
            )
        unavailable = _names([(f.spec.name, F.col(f"_d.u{i}")) for i, f in enumerate(self.fields)])
        envelope.append(
            (
                unavailable != "",
                Reason.CDC_UNAVAILABLE_VALUE,
                F.concat(
                    unavailable,
                    F.lit(
                        f": Debezium's {PLACEHOLDER} (an unchanged TOASTed column) and no value in `before`. "
                        "Fix: ALTER TABLE ... REPLICA IDENTITY FULL, or leave the column out with the "
                        "connector's column.exclude.list"
                    ),
                ),
            )
        )
        # a delete is judged on its key and sequence only: its `before` may hold the key alone
        row = [(~self.delete & failed, reason, detail) for failed, reason, detail in _field_checks(self.fields)]
        return envelope + row

    def _part(self, part: SequencePart) -> _Part:
        """One part of `sequence_by`: a declared field read from the row as the row's field is (its
        rules aside), or a position of the envelope: LONG as a `long` field at its path, DIGITS a
        JSON string of 1 to 38 ASCII digits, TEXT a JSON string."""
        if part.field is not None:
            f = self.by_name[part.field.name]
            return _Part(part, f, f.present, f.type_ok() & f.value_ok(), f.value(), part.field.type)
        kind = part.position or LONG
        spec = FieldSpec(name=part.column, type="long" if kind == LONG else "string", path="$." + part.name)
        f = _Field(spec, "_env")
        if kind == LONG:
            return _Part(part, f, f.present, f.type_ok() & f.value_ok(), f.value(), "long")
        ok = f.kind == "STRING"
        if kind == DIGITS:
            ok = ok & f.text.rlike(_DIGITS)
            return _Part(part, f, f.present, ok, F.when(ok, f.text.cast("decimal(38,0)")), "string of 1 to 38 digits")
        return _Part(part, f, f.present, ok, F.when(ok, f.text), "string")

    def values(self) -> list[Column]:
        """A change's bronze values: the declared fields of its row (a delete's: its key fields and
        the sequence's field parts, from `before`; the others NULL), `_op` and `_sequence`."""
        keep = set(self.keyed.key_names) | {p.field.name for p in self.keyed.sequence if p.field is not None}
        row = [
            (f.value() if f.spec.name in keep else F.when(~self.delete, f.value())).alias(f.spec.name)
            for f in self.fields
        ]
        sequence = F.struct(*[p.value.cast(p.part.sql).alias(p.part.column) for p in self.parts])
        out = [*row, self.op_text.alias("_op"), sequence.alias("_sequence")]
        if self.event_time is not None:
            out.append(self.event_time_value().alias(EVENT_TIME_COLUMN))
        return out


def parse_events(
    kafka_df: DataFrame,
    schema: Schema,
    whole_text: bool = True,
    unprocessable: Unprocessable | None = None,
    keyed: KeyedSpec | None = None,
) -> DataFrame:
    """Kafka rows (key, value, topic, partition, offset, timestamp) → one row per record
    with the declared fields (typed), the provenance, `reason` (NULL when valid) and `detail`.
    Records in `unprocessable`'s ranges go to quarantine as `unprocessable`, and nothing is
    evaluated on them: not even read, the record that stopped the job cannot stop it again.
    `whole_text=False` reads the first JSON value only, as before strict input: the baseline
    of benchmarks/strict_parse_cost.py, never the job's.

    `keyed` (Pipeline.keyed): for Debezium's change events (schema.format: debezium) each record
    is an envelope (docs/cdc.md): after the whole-record checks come the envelope's (CDC_REASONS),
    then for c/u/r the row's (`after`) fields as an event's; a valid record's row holds the
    declared fields of its row (a delete's: its key and sequence fields, from `before`), `_op`
    and `_sequence`. A tombstone has no row at all (_Debezium.unwrap)."""
    debezium = keyed is not None and keyed.debezium
    # `_json` comes out of a one-element explode, a generator the optimizer cannot push a filter
    # through: bronze's and quarantine's `reason IS [NOT] NULL` filters are otherwise pushed below the
    # projection that parses, with the parse inlined into every reference to `_json`: each record's
    # JSON would be parsed once per reference (what that cost: docs/benchmarks.md, "the levers measured").
    # explode(array(NULL)) still yields its one row, so an unparsable record keeps its row.
    poison = faults.poison_record()  # a deliberate failure of one record's batch (tests and drills)
    # a registry's framed records (spark/framed.readable): `value` is the record's JSON (an Avro
    # record's view, a JSON Schema record's payload), its own bytes are `_wire`
    framed = WIRE in kafka_df.columns
    wire = F.col(WIRE) if framed else F.col("value")
    lexed = kafka_df.select(
        F.col("key").alias("_key"),
        wire.alias("_value"),
        F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"),
        F.col("timestamp").alias("_kafka_ts"),
        F.length(wire).alias("_size"),
        F.col("value").cast("string").alias("_text"),
        _declared(unprocessable).alias("_unprocessable"),
        (F.col(FRAME_REASON) if framed else F.lit(None).cast("string")).alias(FRAME_REASON),
    )
    fits = ~F.col("_unprocessable") & F.col("_value").isNotNull() & (F.length("_value") <= schema.max_bytes)
    if whole_text:
        lexed = lexed.withColumn("_lex", _lexical(F.col("_text"), fits))
        lex = {k: F.col(f"_lex.{k}") for k in ("utf8", "too_deep", "number_too_long", "lone", "single")}
        readable = fits & lex["utf8"] & ~lex["too_deep"] & ~lex["number_too_long"] & ~lex["lone"]
    else:
        readable = fits
    raw = lexed.withColumn("_json", F.explode(F.array(F.when(readable, F.expr("try_parse_json(_text)")))))

    text, js = F.col("_text"), F.col("_json")
    top = F.expr("schema_of_variant(_json)")
    record = [
        (
            F.col("_unprocessable"),
            Reason.UNPROCESSABLE,
            F.lit("an operator moved these offsets to quarantine by hand (onceflow quarantine; unprocessable.json)"),
        ),
        (
            F.col("_size") > schema.max_bytes,
            Reason.OVERSIZED,
            F.format_string(f"record is %d bytes, more than the {schema.max_bytes} allowed", F.col("_size")),
        ),
    ]
    if not debezium:  # for Debezium a null value is a tombstone, no record (_Debezium.unwrap)
        record.append((F.col("_value").isNull(), Reason.INVALID_JSON, F.lit("the record has no value (a tombstone)")))
    if framed:  # nothing to parse: why (the header's checks come before the JSON's)
        record += [
            (F.col(FRAME_REASON) == F.lit(r.value), r, F.lit(FRAME_DETAILS[r]))
            for r in R.FRAMED_REASONS[str(schema.framing)]
        ]
    poisoned = F.lit(False)
    if poison is not None:  # evaluated on that record: its batch fails in a Spark task, every run
        at = (F.col("_partition") == poison[0]) & (F.col("_offset") == poison[1]) & ~F.col("_unprocessable")
        boom = F.raise_error(
            F.lit(f"onceflow: injected fault: poison record at partition {poison[0]} offset {poison[1]}")
        )
        record.insert(1, (at & boom.cast("boolean"), Reason.UNPROCESSABLE, F.lit("")))
        poisoned = at
    if whole_text:
        wrapped = F.from_json(F.concat(F.lit("["), text, F.lit("]")), "array<string>", _STRICT_JSON)
        record += [
            (~lex["utf8"], Reason.INVALID_UTF8, F.lit("the value is not valid UTF-8")),
            (lex["too_deep"], Reason.TOO_DEEP, F.lit(f"brackets nest more than {R.MAX_DEPTH} deep")),
            (
                lex["number_too_long"],
                Reason.NUMBER_TOO_LONG,
                F.lit(f"a number is longer than {R.MAX_NUMBER_CHARS} characters"),
            ),
            (lex["lone"], Reason.LONE_SURROGATE, F.lit("a \\u escape is half of a surrogate pair")),
            (
                js.isNull() & (F.size(wrapped) == 1) & lex["single"],
                Reason.DUPLICATE_KEY,
                F.lit("an object repeats a key"),
            ),
        ]
    record += [
        (js.isNull(), Reason.INVALID_JSON, F.lit("the value does not start with a JSON value")),
        (
            ~top.startswith("OBJECT"),
            Reason.NOT_AN_OBJECT,
            F.concat(F.lit("top level is "), F.substring(top, 1, 40), F.lit(", not an object")),
        ),
    ]
    if whole_text:
        record.append(
            (~lex["single"], Reason.TRAILING_CONTENT, F.lit("the JSON object is followed by more than whitespace"))
        )
    if debezium:
        assert keyed is not None
        cdc = _Debezium(schema, keyed)
        # a parsed record passed every whole-record check but trailing content (`_json` is NULL otherwise)
        raw = raw.withColumn("_judged", lex["single"] if whole_text else F.lit(True))
        raw = cdc.unwrap(raw, ~F.col("_unprocessable") & ~poisoned)
        checks = record + cdc.checks()
        values = cdc.values()
    else:
        fields = [_Field(f) for f in schema.fields]
        checks = record + _field_checks(fields)
        values = [f.value().alias(f.spec.name) for f in fields]
    reason = _first([(c, F.lit(r)) for c, r, _ in checks])
    detail = _first([(c, d) for c, _, d in checks])
    return raw.select(
        *values,
        "_key",
        "_value",
        "_topic",
        "_partition",
        "_offset",
        "_kafka_ts",
        reason.alias("reason"),
        detail.alias("detail"),
    )


_SOURCE = ("_topic", "_partition", "_offset", "_kafka_ts")  # where a record came from (tables.PROVENANCE)


def bronze_rows(
    parsed: DataFrame, schema: Schema, batch_id: int, generation: int, keyed: KeyedSpec | None = None
) -> DataFrame:
    """The valid records, in the bronze schema (tables.bronze_ddl; Debezium's with `_op` and
    `_sequence`: pass the pipeline's `keyed`, as to parse_events)."""
    return parsed.where(F.col("reason").isNull()).select(
        *[F.col(n) for n in tables.bronze_columns(schema, keyed)], *_SOURCE, *_batch_columns(batch_id, generation)
    )


def quarantine_rows(parsed: DataFrame, batch_id: int, generation: int) -> DataFrame:
    """The invalid records with their raw bytes and reason (tables.QUARANTINE_DDL)."""
    return parsed.where(F.col("reason").isNotNull()).select(
        "_key", "_value", "reason", "detail", *_SOURCE, *_batch_columns(batch_id, generation)
    )


def sink_rows(
    parsed: DataFrame,
    schema: Schema,
    batch_id: int,
    generation: int,
    bronze_kept: Column,
    quarantine_kept: Column,
    keyed: KeyedSpec | None = None,
) -> DataFrame:
    """Both sinks' rows of a batch in one frame, so one Spark job brings a small batch to the
    driver: `_to_bronze` says where a row goes, each table takes its own columns
    (bronze_rows, quarantine_rows); rows below a sink's floor are left out."""
    valid = F.col("reason").isNull()
    to_bronze = valid & bronze_kept
    return parsed.where(to_bronze | (~valid & quarantine_kept)).select(
        to_bronze.alias("_to_bronze"),
        *[F.col(n) for n in tables.bronze_columns(schema, keyed)],
        # the raw bytes only where the quarantine keeps them: half the transfer
        *[F.when(~valid, F.col(c)).alias(c) for c in ("_key", "_value")],
        "reason",
        "detail",
        *_SOURCE,
        *_batch_columns(batch_id, generation),
    )


def _batch_columns(batch_id: int, generation: int) -> list[Column]:
    return [
        F.lit(batch_id).cast("bigint").alias("_batch_id"),
        F.lit(generation).cast("int").alias("_generation"),
        F.current_timestamp().alias("_ingested_at"),
    ]

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

from decimal import Decimal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from onceflow import faults, tables
from onceflow.schema import reasons as R
from onceflow.schema.model import INT_RANGE, FieldSpec, Schema
from onceflow.unprocessable import Unprocessable

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


class _Field:
    """The Spark expressions of one declared field: presence, type, value, rules."""

    def __init__(self, spec: FieldSpec):
        self.spec = spec
        self.t = spec.ftype
        path = spec.json_path
        self.kind = F.expr(f"schema_of_variant(variant_get(_json, '{path}'))")
        self.text = F.expr(f"variant_get(_json, '{path}', 'string')")
        self.present = self.kind.isNotNull() & (self.kind != "VOID")

    def type_ok(self) -> Column:
        k, base = self.kind, self.t.base
        if base in ("string", "timestamp", "date"):
            return k == "STRING"
        if base in ("int", "long"):
            return (k == "BIGINT") | k.rlike(r"^DECIMAL\(\d+,0\)$")
        if base == "double":
            return (k == "BIGINT") | k.startswith("DECIMAL") | (k == "DOUBLE") | (k == "FLOAT")
        if base == "decimal":
            return (k == "BIGINT") | k.startswith("DECIMAL") | (k == "STRING")
        return k == "BOOLEAN"

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
            return F.when(text.rlike(decimal_pattern(self.t.precision, self.t.scale)), text.try_cast(self.t.sql))
        if base == "timestamp":
            ts = F.when(text.rlike(TIMESTAMP), text.try_cast("timestamp"))
            lo, hi = TIMESTAMP_RANGE
            return F.when(ts.between(F.lit(lo).cast("timestamp"), F.lit(hi).cast("timestamp")), ts)
        if base == "date":
            return F.when(text.rlike(DATE), text.try_cast("date"))
        return F.expr(f"try_variant_get(_json, '{self.spec.json_path}', 'boolean')")

    def _int(self) -> Column:
        lo, hi = INT_RANGE["int"]
        big = self.text.try_cast("bigint")
        return F.when(big.between(lo, hi), big.cast("int"))

    def value_ok(self) -> Column:
        return self.value().isNotNull()

    def unusable(self) -> Column:
        """Why a present, well-typed value cannot be used (for `detail`)."""
        base = self.t.base
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
    """True for a record an operator moved to quarantine by hand (onceflow.unprocessable)."""
    cond = F.lit(False)
    for d in unprocessable.declared if unprocessable else []:
        for p, (a, b) in d.ranges.items():
            cond = cond | ((F.col("topic") == d.topic) & (F.col("partition") == p) & F.col("offset").between(a, b - 1))
    return cond


def parse_events(
    kafka_df: DataFrame, schema: Schema, whole_text: bool = True, unprocessable: Unprocessable | None = None
) -> DataFrame:
    """Kafka rows (key, value, topic, partition, offset, timestamp) → one row per record
    with the declared fields (typed), the provenance, `reason` (NULL when valid) and `detail`.
    Records in `unprocessable`'s ranges go to quarantine as `unprocessable`, and nothing is
    evaluated on them: not even read, the record that stopped the job cannot stop it again.
    `whole_text=False` reads the first JSON value only, as before strict input: the baseline
    of benchmarks/strict_parse_cost.py, never the job's."""
    # `_json` comes out of a one-element explode, a generator the optimizer cannot push a filter
    # through: bronze's and quarantine's `reason IS [NOT] NULL` filters are otherwise pushed below the
    # projection that parses, with the parse inlined into every reference to `_json`: each record's
    # JSON would be parsed once per reference (what that cost: docs/benchmarks.md, "the levers measured").
    # explode(array(NULL)) still yields its one row, so an unparsable record keeps its row.
    poison = faults.poison_record()  # a deliberate failure of one record's batch (tests and drills)
    lexed = kafka_df.select(
        F.col("key").alias("_key"),
        F.col("value").alias("_value"),
        F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"),
        F.col("timestamp").alias("_kafka_ts"),
        F.length("value").alias("_size"),
        F.col("value").cast("string").alias("_text"),
        _declared(unprocessable).alias("_unprocessable"),
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
            R.UNPROCESSABLE,
            F.lit("an operator moved these offsets to quarantine by hand (onceflow quarantine; unprocessable.json)"),
        ),
        (
            F.col("_size") > schema.max_bytes,
            R.OVERSIZED,
            F.format_string(f"record is %d bytes, more than the {schema.max_bytes} allowed", F.col("_size")),
        ),
        (F.col("_value").isNull(), R.INVALID_JSON, F.lit("the record has no value (a tombstone)")),
    ]
    if poison is not None:  # evaluated on that record: its batch fails in a Spark task, every run
        at = (F.col("_partition") == poison[0]) & (F.col("_offset") == poison[1]) & ~F.col("_unprocessable")
        boom = F.raise_error(
            F.lit(f"onceflow: injected fault: poison record at partition {poison[0]} offset {poison[1]}")
        )
        record.insert(1, (at & boom.cast("boolean"), R.UNPROCESSABLE, F.lit("")))
    if whole_text:
        wrapped = F.from_json(F.concat(F.lit("["), text, F.lit("]")), "array<string>", _STRICT_JSON)
        record += [
            (~lex["utf8"], R.INVALID_UTF8, F.lit("the value is not valid UTF-8")),
            (lex["too_deep"], R.TOO_DEEP, F.lit(f"brackets nest more than {R.MAX_DEPTH} deep")),
            (
                lex["number_too_long"],
                R.NUMBER_TOO_LONG,
                F.lit(f"a number is longer than {R.MAX_NUMBER_CHARS} characters"),
            ),
            (lex["lone"], R.LONE_SURROGATE, F.lit("a \\u escape is half of a surrogate pair")),
            (js.isNull() & (F.size(wrapped) == 1) & lex["single"], R.DUPLICATE_KEY, F.lit("an object repeats a key")),
        ]
    record += [
        (js.isNull(), R.INVALID_JSON, F.lit("the value does not start with a JSON value")),
        (
            ~top.startswith("OBJECT"),
            R.NOT_AN_OBJECT,
            F.concat(F.lit("top level is "), F.substring(top, 1, 40), F.lit(", not an object")),
        ),
    ]
    if whole_text:
        record.append(
            (~lex["single"], R.TRAILING_CONTENT, F.lit("the JSON object is followed by more than whitespace"))
        )
    fields = [_Field(f) for f in schema.fields]
    missing = [(f.spec.name, ~f.present) for f in fields if f.spec.required]
    wrong = [(f.spec.name, f.present & ~f.type_ok()) for f in fields]
    bad = [(f, f.present & f.type_ok() & ~f.value_ok()) for f in fields]
    field_checks = []
    if missing:
        any_missing = _names(missing)
        field_checks.append((any_missing != "", R.MISSING_FIELD, F.concat(F.lit("missing or null: "), any_missing)))
    wrong_list = F.concat_ws(
        ", ",
        *[
            F.when(c, F.concat(F.lit(f"{n} is "), F.substring(f.kind, 1, 40), F.lit(f", expected {f.spec.type}")))
            for (n, c), f in zip(wrong, fields, strict=True)
        ],
    )
    field_checks.append((wrong_list != "", R.WRONG_TYPE, wrong_list))
    field_checks.append(
        (
            _first([(c, f.unusable()) for f, c in bad]).isNotNull(),
            R.INVALID_VALUE,
            _first([(c, f.unusable()) for f, c in bad]),
        )
    )
    rules = [(f.present & failed, reason, detail) for f in fields for reason, failed, detail in f.rule_checks()]
    checks = record + field_checks + rules
    reason = _first([(c, F.lit(r)) for c, r, _ in checks])
    detail = _first([(c, d) for c, _, d in checks])
    return raw.select(
        *[f.value().alias(f.spec.name) for f in fields],
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


def bronze_rows(parsed: DataFrame, schema: Schema, batch_id: int, generation: int) -> DataFrame:
    """The valid records, in the bronze schema (tables.bronze_ddl)."""
    return parsed.where(F.col("reason").isNull()).select(
        *[F.col(n) for n in tables.bronze_columns(schema)], *_SOURCE, *_batch_columns(batch_id, generation)
    )


def quarantine_rows(parsed: DataFrame, batch_id: int, generation: int) -> DataFrame:
    """The invalid records with their raw bytes and reason (tables.QUARANTINE_DDL)."""
    return parsed.where(F.col("reason").isNotNull()).select(
        "_key", "_value", "reason", "detail", *_SOURCE, *_batch_columns(batch_id, generation)
    )


def sink_rows(
    parsed: DataFrame, schema: Schema, batch_id: int, generation: int, bronze_kept: Column, quarantine_kept: Column
) -> DataFrame:
    """Both sinks' rows of a batch in one frame, so one Spark job brings a small batch to the
    driver: `_to_bronze` says where a row goes, each table takes its own columns
    (bronze_rows, quarantine_rows); rows below a sink's floor are left out."""
    valid = F.col("reason").isNull()
    to_bronze = valid & bronze_kept
    return parsed.where(to_bronze | (~valid & quarantine_kept)).select(
        to_bronze.alias("_to_bronze"),
        *[F.col(n) for n in tables.bronze_columns(schema)],
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

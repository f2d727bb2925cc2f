"""The audit's judge again, columnar: one DuckDB query over a batch of raw values, sure only of the
plain valid records.

The reference judge (schema/reference.py) reads one record per Python call, about 25,000 a second a
core: most of a large audit's time. This judge reads a whole batch at once, but only records of one
plain shape: a flat JSON object (UTF-8, no nesting, no duplicate key, no number longer than the
limits allow; escapes only in string values, never a lone surrogate or a NUL) whose declared fields
are all present or optional, of their types, with values that read exactly and obey the rules. Of
such a record it is *sure*, and gives the typed values; of every other record (malformed, nested,
an exponent, an escaped key, a rule it does not know) it
is not sure, and the reference judge reads that record instead (audit/source.py).

It is a third implementation of docs/validation.md (after Spark's, which it audits, and the
reference's): RE2's grammar and DuckDB's casts, not Python's `json`. It is trusted only where it is
sure, and checked three ways: the Hypothesis differential test holds it to the reference on records
from the whole space (tests/unit/audit/test_columnar_judge.py); every record the reconciliation finds
in dispute is judged again by the reference (audit/rows.py); and a sample of its sure records is
judged by the reference in every audit (`judges_agree`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from onceflow.schema import reasons as R
from onceflow.schema.model import INT_RANGE, FieldSpec, Schema

if TYPE_CHECKING:
    import pyarrow as pa

_WS = r"[ \t\n\r]*"
_STRING = r'"[^"\\\x00-\x1f]*"'  # a JSON string without an escape (and so without a quote inside)
_ESCAPE = r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})'
_TEXT = rf'"(?:[^"\\\x00-\x1f]|{_ESCAPE})*"'  # a JSON string, escapes allowed
# what an escape-aware scan removes before it looks for what it is not sure of: each escaped backslash
# (so that `\\ud800` is text, not an escape) and each well-formed surrogate pair, left to right
_PAIRS_AND_BACKSLASHES = r"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
# then left: a lone surrogate (the reference's lone_surrogate) or a NUL (left to the reference)
_LONE_OR_NUL = r"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)"
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_VALUE = rf"(?:{_TEXT}|{_NUMBER}|true|false|null)"
_MEMBER = rf"{_STRING}{_WS}:{_WS}{_VALUE}"
# a flat JSON object: members whose keys have no escape and whose values are strings, numbers or literals
FLAT_OBJECT = rf"{_WS}\{{{_WS}(?:{_MEMBER}{_WS}(?:,{_WS}{_MEMBER}{_WS})*)?\}}{_WS}"
# an integer of at most 18 digits (within a long) and, as the reference reads `5.0`, a fraction of zeros
_INTEGER = r"-?(?:0|[1-9][0-9]{0,17})(?:\.0{1,20})?"
# no exponent, at most 38 digits: the reference reads it as an exact number (never as a double)
_PLAIN_NUMBER = r"-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,20})?"
_DECIMAL_TEXT = r"-?([0-9]+)(?:\.([0-9]+))?"  # read_decimal's text (a JSON string may hold it)
_TIMESTAMP = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?(?:Z|[+-][0-9]{2}:[0-9]{2})"
_DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_MAX_OFFSET_MINUTES = 18 * 60
_LONG_RUN = f"[0-9+.eE-]{{{R.MAX_NUMBER_CHARS + 1}}}"  # anywhere (in a string too: then not sure)
_BASES = ("string", "int", "long", "double", "decimal", "boolean", "timestamp", "date")


def _q(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def why_not(schema: Schema) -> str | None:
    """Why this judge cannot read a schema's records (then the reference reads them all), or None."""
    if schema.format != "json" or schema.registry is not None:
        return f"format {schema.format}"
    for f in schema.fields:
        if len(f.keys) != 1:
            return f"field {f.name} is nested ({f.json_path})"
        if f.encoding is not None:
            return f"field {f.name} has an encoding"
        if f.ftype.base not in _BASES:
            return f"field {f.name} is a {f.type}"
        if f.pattern is not None:
            return f"field {f.name} declares a pattern"  # python_pattern's reading is the reference's alone
    return None


_NUMERIC = ("int", "long", "double", "decimal")


def _literal(f: FieldSpec, at: int) -> str:
    """The field's raw JSON text in the record ('' when absent). A number's literal is read from the
    text itself (in a flat object whose keys have no escape, `"name"` followed by `:` is the key: inside
    a string a quote is escaped; its value is a string or runs to the next separator): its form
    decides its kind, and a string with an escape is never read as a number. Any other value is
    yyjson's writing of it (`m`, the declared fields' values in order, element `at`): a string in
    quotes, `true`, `false` and `null`."""
    if f.ftype.base not in _NUMERIC:
        return f"coalesce(m[{at}], '')"
    key = f.keys[0]  # [A-Za-z_][A-Za-z0-9_]*: nothing to escape in a pattern
    pattern = '"' + key + '"' + _WS + ":" + _WS + "(" + _TEXT + r"|[^ \t\n\r,}]+)"
    return f"regexp_extract(t, {_q(pattern)}, 1)"


def _digits(lit: str, text: str) -> str:
    """A decimal's text as read_decimal reads it: a plain JSON number's literal, or a string's content."""
    number = f"regexp_full_match({lit}, {_q(_PLAIN_NUMBER)})"
    return f"CASE WHEN {number} THEN {lit} WHEN starts_with({lit}, '\"') THEN {text} END"


def _typed(f: FieldSpec, lit: str, text: str, digits: str) -> tuple[str, str]:
    """(the typed value's SQL, the SQL condition that it read exactly) from the columns of the
    field's literal, its string content and (a decimal's) its digits."""
    base, t = f.ftype.base, f.ftype
    is_text = f"starts_with({lit}, '\"')"
    if base == "string":
        return text, is_text
    if base == "boolean":
        return f"({lit} = 'true')", f"{lit} IN ('true', 'false')"
    if base in ("int", "long"):
        lo, hi = INT_RANGE[base]
        value = f"TRY_CAST(regexp_replace({lit}, '\\.0+$', '') AS BIGINT)"
        sql = "INTEGER" if base == "int" else "BIGINT"
        return (
            f"TRY_CAST({value} AS {sql})",
            f"regexp_full_match({lit}, {_q(_INTEGER)}) AND {value} BETWEEN {lo} AND {hi}",
        )
    if base == "double":
        return f"TRY_CAST({lit} AS DOUBLE)", f"regexp_full_match({lit}, {_q(_PLAIN_NUMBER)})"
    if base == "decimal":
        p, s = t.precision, t.scale
        whole = f"regexp_extract({digits}, {_q(_DECIMAL_TEXT)}, 1)"
        frac = f"regexp_extract({digits}, {_q(_DECIMAL_TEXT)}, 2)"
        fits = (
            f"regexp_full_match({digits}, {_q(_DECIMAL_TEXT)}) "
            f"AND length(ltrim({whole}, '0')) <= {p - s} AND length(rtrim({frac}, '0')) <= {s}"
        )
        return f"TRY_CAST({digits} AS DECIMAL({p}, {s}))", fits
    if base == "date":
        day = f"TRY_CAST({text} AS DATE)"
        year = f"TRY_CAST(substr({text}, 1, 4) AS INTEGER)"
        return day, f"{is_text} AND regexp_full_match({text}, {_q(_DATE)}) AND {year} >= 1"
    # timestamp: read_timestamp's grammar (its parts at fixed places); the instant in UTC, within years 0001-9999
    n = lambda at, size: f"TRY_CAST(substr({text}, {at}, {size}) AS BIGINT)"  # noqa: E731
    day = f"TRY_CAST(substr({text}, 1, 10) AS DATE)"
    zulu = f"ends_with({text}, 'Z')"
    zone = f"({n(-5, 2)} * 60 + {n(-2, 2)})"
    offset = f"(CASE WHEN {zulu} THEN 0 WHEN substr({text}, -6, 1) = '-' THEN -{zone} ELSE {zone} END)"
    fraction = f"regexp_extract({text}, '^.{{19}}[.]([0-9]+)', 1)"
    micros = f"coalesce(TRY_CAST(rpad({fraction}, 6, '0') AS BIGINT), 0)"
    instant = (
        f"(CAST({day} AS TIMESTAMP) + to_microseconds(({n(12, 2)} * 3600 + {n(15, 2)} * 60 + {n(18, 2)}) "
        f"* 1000000 + {micros} - {offset} * 60000000))"
    )
    ok = (
        f"{is_text} AND regexp_full_match({text}, {_q(_TIMESTAMP)}) AND {n(1, 4)} >= 1 AND {day} IS NOT NULL "
        f"AND {n(12, 2)} <= 23 AND {n(15, 2)} <= 59 AND {n(18, 2)} <= 59 "
        f"AND ({zulu} OR ({n(-2, 2)} <= 59 AND {zone} <= {_MAX_OFFSET_MINUTES})) "
        f"AND year({instant}) BETWEEN 1 AND 9999"
    )
    return f"CAST({instant} AS TIMESTAMPTZ)", ok


def _within(f: FieldSpec, value: str, bound: object, op: str) -> str:
    """SQL that the typed value keeps a declared min (`op` >=) or max (`op` <=), compared exactly as
    the reference compares (doubles as doubles, the rest as decimals); NULL (not sure) where DuckDB
    could not compare exactly."""
    d = Decimal(str(bound))
    if f.ftype.base == "double":
        b = float(d)
        return f"{value} {op} CAST({_q(repr(b))} AS DOUBLE)" if abs(b) != float("inf") else "NULL"
    if not d.is_finite():
        return "NULL"
    if f.ftype.base == "decimal":
        whole, scale = f.ftype.precision - f.ftype.scale, f.ftype.scale
    else:  # int, long: a BIGINT is a DECIMAL(19,0) to DuckDB
        whole, scale = 19, 0
    if abs(d) >= Decimal(10) ** whole:  # beyond every value of the type: kept by all or by none
        above = d > 0
        return "true" if (op == "<=") == above else "false"
    exp = d.as_tuple().exponent
    common = max(scale, -exp if isinstance(exp, int) and exp < 0 else 0)
    if whole + common > 38:
        return "NULL"
    return f"{value} {op} CAST({_q(format(d, 'f'))} AS DECIMAL({whole + common}, {common}))"


def _rules(f: FieldSpec, value: str, text: str) -> list[str]:
    """The field's rules as SQL conditions on its typed value (and its string's text)."""
    out = []
    if f.allowed is not None:
        listed = ", ".join(_q(a) if isinstance(a, str) else str(int(a)) for a in f.allowed)
        out.append(f"{value} IN ({listed})")
    if f.min is not None:
        out.append(_within(f, value, f.min, ">="))
    if f.max is not None:
        out.append(_within(f, value, f.max, "<="))
    if f.max_length is not None:
        out.append(f"length({text}) <= {f.max_length}")
    if f.uuid:
        out.append(f"regexp_full_match({text}, {_q(_UUID)})")
    return out


class ColumnarJudge:
    """Judges a batch of raw values by a schema in one DuckDB query: the typed declared fields of
    each record it is sure is valid, and whether it is sure."""

    engine = "duckdb"

    def __init__(self, schema: Schema):
        problem = why_not(schema)
        if problem:
            raise ValueError(f"the columnar judge cannot read this schema: {problem}")
        self.schema = schema
        paths = "[" + ", ".join(_q(f"$.{f.keys[0]}") for f in schema.fields) + "]"
        # the keys and the declared fields' values as JSON, by yyjson (valid JSON by now)
        members = (
            f"CASE WHEN flat THEN json_keys(t) END AS k, "
            f"CASE WHEN flat THEN CAST(json_extract(t, {paths}) AS VARCHAR[]) END AS m"
        )
        # a flat object whose escapes decode as the reference decodes them
        flat = " AND ".join(
            [
                "t IS NOT NULL",
                f"(NOT contains(t, chr(92)) OR NOT regexp_matches(regexp_replace(t, {_q(_PAIRS_AND_BACKSLASHES)}, "
                f"'', 'g'), {_q(_LONE_OR_NUL)}))",
                f"regexp_full_match(t, {_q(FLAT_OBJECT)})",
                f"(strlen(t) <= {R.MAX_NUMBER_CHARS} OR NOT regexp_matches(t, {_q(_LONG_RUN)}))",
            ]
        )
        # one layer a step, so that each field's literal, content and value is worked out once a record
        lits = [f"CASE WHEN plain THEN {_literal(f, i)} END AS l_{f.name}" for i, f in enumerate(schema.fields, 1)]

        # a string's content: a number's literal as written (an escape in it fails the number's grammar),
        # any other field's as yyjson decodes its value (only when it holds an escape: else the text itself)
        def content(f: FieldSpec) -> str:
            inner = f"substr(l_{f.name}, 2, length(l_{f.name}) - 2)"
            if f.ftype.base in _NUMERIC:
                return inner
            return f"CASE WHEN contains(l_{f.name}, chr(92)) THEN json_extract_string(l_{f.name}, '$') ELSE {inner} END"

        texts = [
            f"CASE WHEN starts_with(l_{f.name}, '\"') THEN {content(f)} END AS t_{f.name}, "
            f"l_{f.name} NOT IN ('', 'null') AS p_{f.name}"
            for f in schema.fields
        ]
        digits = [
            f"{_digits(f'l_{f.name}', f't_{f.name}')} AS d_{f.name}" for f in schema.fields if f.ftype.base == "decimal"
        ]
        values, sure, out = [], [], []
        for f in schema.fields:
            value, ok = _typed(f, f"l_{f.name}", f"t_{f.name}", f"d_{f.name}")
            values.append(f"{value} AS v_{f.name}, coalesce({ok}, false) AS ok_{f.name}")
            checks = " AND ".join([f"ok_{f.name}", f"v_{f.name} IS NOT NULL", *_rules(f, f"v_{f.name}", f"t_{f.name}")])
            out.append(f"CASE WHEN _sure AND p_{f.name} THEN v_{f.name} END AS {f.name}")
            if f.required:
                sure.append(f"p_{f.name} AND coalesce({checks}, false)")
            else:
                sure.append(f"(NOT p_{f.name} OR coalesce({checks}, false))")
        self.sql = f"""
            WITH s0 AS (
              SELECT _i, CASE WHEN octet_length(value) <= {schema.max_bytes} THEN try(decode(value)) END AS t FROM raw
            ),
            f0 AS (SELECT _i, t, coalesce({flat}, false) AS flat FROM s0),
            k0 AS (SELECT _i, t, flat, {members} FROM f0),
            p0 AS (SELECT _i, t, k, m, flat AND coalesce(len(list_distinct(k)) = len(k), false) AS plain FROM k0),
            s1 AS (SELECT _i, plain, {", ".join(lits)} FROM p0),
            s2 AS (SELECT *, {", ".join(texts)} FROM s1),
            s3 AS (SELECT *{"".join(", " + d for d in digits)} FROM s2),
            s4 AS (SELECT *, {", ".join(values)} FROM s3),
            s5 AS (SELECT *, plain AND {" AND ".join(f"({c})" for c in sure)} AS _sure FROM s4)
            SELECT {", ".join(out)}, _sure FROM s5 ORDER BY _i
        """

    def judge(self, values: pa.Array | pa.ChunkedArray) -> pa.Table:
        """The declared fields (NULL where not sure) and `_sure`, one row per value, in order."""
        import pyarrow as pa

        from onceflow.audit.duck import connect

        with connect() as db:
            # the rows come back in the values' order: DuckDB's threads may scan the chunks in any order
            db.register("raw", pa.table({"value": values, "_i": pa.array(range(len(values)), pa.int64())}))
            return db.sql(self.sql).to_arrow_table()

"""The audit's own reading of Avro records in the Confluent wire format: fastavro in plain Python,
not Spark's spark-avro, so a bug in the job's decoding (spark/avro.py) shows as a disagreement.

A record passes the checks of schema/reasons.AVRO_REASONS in their order (the header's in
schema/framed.FramedJudge, shared with JSON Schema), then its JSON view
(docs/registry.md#the-json-view), written here from the decoded values, is judged by the JSON
rules (reference.Judge) like any event. The view of each value:
- a record or a map: an object, every field present (null as null); an array: an array;
- a float: the exact value as a double; a NaN or an infinity: the text "NaN", "Infinity", "-Infinity";
- bytes and fixed: standard base64 text; a decimal: its number at its scale, and one of a scale
  over 6 its plain text in a JSON string ("0.00000001", never the exponent notation Java and
  Python write for a value under 10^-6, which JSON reads as an approximate number);
- a date: `YYYY-MM-DD`; a timestamp: RFC 3339 in UTC with six fraction digits and `Z`; a local
  timestamp: the same without an offset (so a timestamp field refuses it, as it refuses such JSON).
"""

from __future__ import annotations

import base64
import io
import json
import math
from decimal import Decimal
from typing import Any

import fastavro

from onceflow.registry import Registry
from onceflow.schema.avro import PLAIN_SCALE, install_minimal_decimals, unsupported
from onceflow.schema.framed import FramedJudge
from onceflow.schema.model import Schema
from onceflow.schema.reasons import Reason
from onceflow.schema.reference import Verdict, read_record

install_minimal_decimals()
# the view can be longer than the record's bytes (base64, a double's digits): it is judged whole, and
# `oversized` is decided on the record's own bytes
VIEW_BYTES = 1 << 30


class AvroJudge(FramedJudge):
    """Judges Avro records by a pipeline's schema, its writer schemas asked of the registry."""

    NOT_FRAMED = Reason.AVRO_NOT_FRAMED
    UNKNOWN_SCHEMA = Reason.AVRO_UNKNOWN_SCHEMA
    OTHER_SUBJECT = Reason.AVRO_OTHER_SUBJECT

    def __init__(self, schema: Schema, registry: Registry, subject: str, plain: int = PLAIN_SCALE):
        super().__init__(schema, registry, subject)
        self.plain = plain  # the scale past which a decimal is viewed as its text (EVERY_DECIMAL: every one)
        self._readers: dict[int, AvroReader] = {}

    def viewed(self, value: bytes | None) -> Verdict | bytes:
        """A record's JSON view, or the verdict of a record that has none (its header's, or
        `avro_unsupported_schema`, `avro_undecodable`)."""
        found = self.header(value)
        if isinstance(found, Verdict):
            return found
        schema_id, payload = found
        text = str(self.registry.schema(schema_id))
        if unsupported(text):
            return self._empty(Reason.AVRO_UNSUPPORTED_SCHEMA)
        view = self.view(schema_id, text, payload)
        return self._empty(Reason.AVRO_UNDECODABLE) if view is None else view

    def judge(self, value: bytes | None) -> Verdict:
        view = self.viewed(value)
        if isinstance(view, Verdict):
            return view
        reason, obj = read_record(view, VIEW_BYTES)
        if reason:
            return self._empty(reason)
        return self.json.judge_object(obj)

    def view(self, schema_id: int, text: str, payload: bytes) -> bytes | None:
        """The JSON view of the payload by the writer schema `text` (schema_id's), or None."""
        if schema_id not in self._readers:
            self._readers[schema_id] = AvroReader(text, self.plain)
        return self._readers[schema_id].view(payload)


def _canonical_nans(v: Any) -> Any:
    """`v` with every NaN Java's (0x7ff8000000000000, 0x7fc00000 as a float): the job's view writes a
    NaN as the text "NaN", which reads back as Java's own, so a payload with any other NaN (a sign, a
    payload in its mantissa) is not written again byte for byte by the job, nor then by the judge."""
    if isinstance(v, float) and math.isnan(v):
        return math.nan
    if isinstance(v, dict):
        return {k: _canonical_nans(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_canonical_nans(x) for x in v]
    return v


class AvroReader:
    """One writer schema's records read by fastavro and written as their views, decimals of a
    scale over `plain` as their text (EVERY_DECIMAL: every one)."""

    def __init__(self, text: str, plain: int = PLAIN_SCALE):
        self.writer = json.loads(text)
        self.reader = fastavro.parse_schema(_viewed(self.writer))
        self.named = _named(self.writer, {})
        self.plain = plain

    def view(self, payload: bytes) -> bytes | None:
        """The JSON view of the payload, None unless it is exactly one record of the schema: decoded,
        no byte left over, and written again it is the same bytes (shortest integers, UTF-8 strings)."""
        try:
            record = fastavro.schemaless_reader(io.BytesIO(payload), self.reader, None)
            again = io.BytesIO()
            fastavro.schemaless_writer(again, self.reader, _canonical_nans(record))
        except Exception:  # whatever fastavro raises on bytes it cannot read is the verdict
            return None
        if again.getvalue() != payload:
            return None
        try:
            return _json(record, self.writer, self.named, self.plain).encode("utf-8")
        except OverflowError:  # milliseconds past what microseconds hold: Spark cannot read it either
            return None


def _viewed(t: Any) -> Any:
    """The schema fastavro reads with: its decimals only as logical types (Spark reads a `uuid` as its
    string; a date or a timestamp is read as its count, which _json writes in any year)."""
    if isinstance(t, list):
        return [_viewed(b) for b in t]
    if not isinstance(t, dict):
        return t
    out = {k: _viewed(v) if k in ("type", "items", "values") else v for k, v in t.items()}
    if "fields" in t:
        out["fields"] = [{**f, "type": _viewed(f["type"])} for f in t["fields"]]
    if out.get("logicalType") not in (None, "decimal"):
        # a date or timestamp is read as its int and written by _json: any year, as Spark holds it
        out.pop("logicalType")
    return out


_DAY_MICROS = 86_400_000_000
_INT64 = (-(2**63), 2**63 - 1)


def _named(t: Any, names: dict[str, Any]) -> dict[str, Any]:
    """Every named type of a schema by name and full name: a field may name one declared earlier."""
    if isinstance(t, list):
        for b in t:
            _named(b, names)
    elif isinstance(t, dict):
        if "name" in t and t.get("type") in ("record", "error", "enum", "fixed"):
            names[t["name"]] = t
            if t.get("namespace"):
                names[f"{t['namespace']}.{t['name']}"] = t
        for f in t.get("fields", ()):
            _named(f.get("type"), names)
        for k in ("items", "values"):
            if k in t:
                _named(t[k], names)
        if isinstance(t.get("type"), dict | list):
            _named(t["type"], names)
    return names


def _year(y: int) -> str:
    """A year as Java's formatters write `yyyy`: four digits, a sign past them or before zero."""
    if 0 <= y <= 9999:
        return f"{y:04d}"
    return f"+{y}" if y > 0 else f"-{-y:04d}"


def _civil(days: int) -> str:
    """`YYYY-MM-DD` of a day count since 1970-01-01, in the proleptic Gregorian calendar, any year
    (H. Hinnant's days_from_civil, inverted)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return f"{_year(yoe + era * 400 + (month <= 2))}-{month:02d}-{day:02d}"


def _instant(micros: int, utc: bool) -> str:
    days, rest = divmod(micros, _DAY_MICROS)
    seconds, us = divmod(rest, 1_000_000)
    text = f"{_civil(days)}T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{us:06d}"
    return f'"{text}Z"' if utc else f'"{text}"'


def _json(v: Any, t: Any, named: dict[str, Any], plain: int = PLAIN_SCALE) -> str:
    """The view of value `v` of writer type `t`, its decimals of a scale over `plain` as text."""
    if v is None:
        return "null"
    if isinstance(t, list):  # a union of null and one type (schema/avro.unsupported refuses others)
        return _json(v, next(b for b in t if b != "null"), named, plain)
    if isinstance(t, str) and t in named:
        t = named[t]
    if isinstance(t, dict):
        logical = t.get("logicalType")
        if logical == "date" and t.get("type") == "int":
            return '"' + _civil(v) + '"'
        if logical in ("timestamp-millis", "local-timestamp-millis") and t.get("type") == "long":
            micros = v * 1000
            if not _INT64[0] <= micros <= _INT64[1]:
                raise OverflowError(micros)
            return _instant(micros, logical == "timestamp-millis")
        if logical in ("timestamp-micros", "local-timestamp-micros") and t.get("type") == "long":
            return _instant(v, logical == "timestamp-micros")
        kind = t.get("type")
        if kind in ("record", "error"):
            return (
                "{"
                + ",".join(
                    f"{json.dumps(f['name'], ensure_ascii=False)}:{_json(v.get(f['name']), f['type'], named, plain)}"
                    for f in t["fields"]
                )
                + "}"
            )
        if kind == "array":
            return "[" + ",".join(_json(x, t["items"], named, plain) for x in v) + "]"
        if kind == "map":
            return (
                "{"
                + ",".join(
                    f"{json.dumps(str(k), ensure_ascii=False)}:{_json(x, t['values'], named, plain)}"
                    for k, x in v.items()
                )
                + "}"
            )
        if isinstance(kind, dict | list):
            return _json(v, kind, named, plain)
    return _scalar(v, plain)


def _scalar(v: Any, plain: int = PLAIN_SCALE) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return '"NaN"'
        if math.isinf(v):
            return '"Infinity"' if v > 0 else '"-Infinity"'
        return repr(v)
    if isinstance(v, Decimal):  # fastavro's exponent is minus the schema's scale
        return f'"{v:f}"' if -int(v.as_tuple().exponent) > plain else str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, bytes):
        return '"' + base64.b64encode(v).decode("ascii") + '"'
    raise TypeError(f"no JSON view for a {type(v).__name__}")

"""The audit's own reading of Avro records in the Confluent wire format: fastavro in plain Python,
not Spark's spark-avro, so a bug in the job's decoding (spark/avro.py) shows as a disagreement.

A record passes the checks of schema/reasons.AVRO_REASONS in their order, then its JSON view
(docs/registry.md#the-json-view), written here from the decoded values, is judged by the JSON
rules (reference.Judge) like any event. The view of each value:
- a record or a map: an object, every field present (null as null); an array: an array;
- a float: the exact value as a double; a NaN or an infinity: the text "NaN", "Infinity", "-Infinity";
- bytes and fixed: standard base64 text; a decimal: its number at its scale;
- a date: `YYYY-MM-DD`; a timestamp: RFC 3339 in UTC with six fraction digits and `Z`; a local
  timestamp: the same without an offset (so a timestamp field refuses it, as it refuses such JSON).
"""

from __future__ import annotations

import base64
import io
import json
import math
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import fastavro

from onceflow.registry import Registry, unframe
from onceflow.schema.avro import VIEWED_LOGICAL, install_minimal_decimals, unsupported
from onceflow.schema.model import Schema
from onceflow.schema.reasons import Reason
from onceflow.schema.reference import Judge, Verdict, read_record

install_minimal_decimals()
# the view can be longer than the record's bytes (base64, a double's digits): it is judged whole, and
# `oversized` is decided on the record's own bytes
_VIEW_BYTES = 1 << 30


class AvroJudge:
    """Judges Avro records by a pipeline's schema, its writer schemas asked of the registry."""

    def __init__(self, schema: Schema, registry: Registry, subject: str):
        self.schema = schema
        self.json = Judge(schema)
        self.registry = registry
        self.subject = subject
        self._readers: dict[int, Any] = {}

    def _empty(self, reason: str) -> Verdict:
        return Verdict(reason, {f.name: None for f in self.schema.fields})

    def judge(self, value: bytes | None) -> Verdict:
        if value is None or len(value) > self.schema.max_bytes:
            return self.json.judge(value)  # no value, or `oversized`: as for JSON
        framed = unframe(value)
        if framed is None:
            return self._empty(Reason.AVRO_NOT_FRAMED)
        schema_id, payload = framed
        text = self.registry.schema(schema_id)
        if text is None:
            return self._empty(Reason.AVRO_UNKNOWN_SCHEMA)
        if self.subject not in self.registry.subjects(schema_id):
            return self._empty(Reason.AVRO_OTHER_SUBJECT)
        if unsupported(text):
            return self._empty(Reason.AVRO_UNSUPPORTED_SCHEMA)
        view = self.view(schema_id, text, payload)
        if view is None:
            return self._empty(Reason.AVRO_UNDECODABLE)
        reason, obj = read_record(view, _VIEW_BYTES)
        if reason:
            return self._empty(reason)
        return self.json.judge_object(obj)

    def view(self, schema_id: int, text: str, payload: bytes) -> bytes | None:
        """The JSON view of the payload, None unless it is exactly one record of the schema: decoded,
        no byte left over, and written again it is the same bytes (shortest integers, UTF-8 strings)."""
        reader = self._readers.get(schema_id)
        if reader is None:
            reader = self._readers[schema_id] = fastavro.parse_schema(_viewed(json.loads(text)))
        try:
            record = fastavro.schemaless_reader(io.BytesIO(payload), reader, None)
            again = io.BytesIO()
            fastavro.schemaless_writer(again, reader, record)
        except Exception:  # whatever fastavro raises on bytes it cannot read is the verdict
            return None
        if again.getvalue() != payload:
            return None
        return _json(record).encode("utf-8")


def _viewed(t: Any) -> Any:
    """The schema with only the logical types the view keeps (Spark reads a `uuid` as its string)."""
    if isinstance(t, list):
        return [_viewed(b) for b in t]
    if not isinstance(t, dict):
        return t
    out = {k: _viewed(v) if k in ("type", "items", "values") else v for k, v in t.items()}
    if "fields" in t:
        out["fields"] = [{**f, "type": _viewed(f["type"])} for f in t["fields"]]
    if out.get("logicalType") not in (None, *VIEWED_LOGICAL):
        del out["logicalType"]
    return out


def _json(v: Any) -> str:
    if v is None:
        return "null"
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
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, bytes):
        return '"' + base64.b64encode(v).decode("ascii") + '"'
    if isinstance(v, datetime):
        at = v.astimezone(UTC) if v.tzinfo is not None else v
        day = f"{at.year:04d}-{at.month:02d}-{at.day:02d}"
        text = f"{day}T{at.hour:02d}:{at.minute:02d}:{at.second:02d}.{at.microsecond:06d}"
        return f'"{text}Z"' if v.tzinfo is not None else f'"{text}"'
    if isinstance(v, date):
        return f'"{v.year:04d}-{v.month:02d}-{v.day:02d}"'
    if isinstance(v, dict):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{_json(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_json(x) for x in v) + "]"
    raise TypeError(f"no JSON view for a {type(v).__name__}")

"""The audit's own reading of JSON records in the Confluent wire format (schema.format: json_schema):
the header unframed in plain Python, its id asked of the registry, then the payload judged by the
JSON rules (reference.Judge) like any event; not the job's Spark reading (spark/framed.py), so a
bug there shows as a disagreement.

A record passes the checks of schema/reasons.JSON_SCHEMA_REASONS in their order, after `oversized`
on the record's own bytes. The registered JSON Schema is not applied: the declared fields are the
pipeline's contract (docs/registry.md).
"""

from __future__ import annotations

from onceflow.registry import JSON_SCHEMA_TYPE, Registry, unframe
from onceflow.schema.model import Schema
from onceflow.schema.reasons import Reason
from onceflow.schema.reference import Judge, Verdict


class FramedJsonJudge:
    """Judges a JSON Schema serializer's records by a pipeline's schema, their ids asked of the registry."""

    def __init__(self, schema: Schema, registry: Registry, subject: str):
        self.schema = schema
        self.json = Judge(schema)
        self.registry = registry
        self.subject = subject

    def _empty(self, reason: str) -> Verdict:
        return Verdict(reason, {f.name: None for f in self.schema.fields})

    def judge(self, value: bytes | None) -> Verdict:
        if value is None or len(value) > self.schema.max_bytes:
            return self.json.judge(value)  # no value, or `oversized`: as for JSON
        framed = unframe(value)
        if framed is None:
            return self._empty(Reason.JSON_SCHEMA_NOT_FRAMED)
        schema_id, payload = framed
        kind = self.registry.schema_type(schema_id)
        if kind is None:
            return self._empty(Reason.JSON_SCHEMA_UNKNOWN_SCHEMA)
        if self.subject not in self.registry.subjects(schema_id):
            return self._empty(Reason.JSON_SCHEMA_OTHER_SUBJECT)
        if kind != JSON_SCHEMA_TYPE:
            return self._empty(Reason.JSON_SCHEMA_UNSUPPORTED_SCHEMA)
        return self.json.judge(payload)

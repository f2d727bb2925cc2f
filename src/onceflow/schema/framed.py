"""The audit's own reading of records in the Confluent wire format, in plain Python: the header
that Avro and JSON Schema records share, and a JSON Schema record's payload. Not the job's Spark
reading (spark/framed.py, spark/avro.py), so a bug there shows as a disagreement.

A record is checked after `oversized` on its own bytes (header included) and the no-value check:
its header (not framed, an unknown id, an id of another subject, in that order), then by its
format: JSON Schema (schema/reasons.JSON_SCHEMA_REASONS) refuses an id whose schema is not a JSON
Schema and judges the payload by the JSON rules (reference.Judge) like any event; Avro's judge
(schema/avro_reference.py) decodes it. The registered JSON Schema is not applied: the declared
fields are the pipeline's contract (docs/registry.md).
"""

from __future__ import annotations

from onceflow.registry import JSON_SCHEMA_TYPE, Registry, unframe
from onceflow.schema.model import Schema
from onceflow.schema.reasons import Reason
from onceflow.schema.reference import Judge, Verdict


class FramedJudge:
    """Judges a registry format's records by a pipeline's schema, the ids asked of the registry:
    the header's checks, with the format's reasons."""

    NOT_FRAMED: Reason
    UNKNOWN_SCHEMA: Reason
    OTHER_SUBJECT: Reason

    def __init__(self, schema: Schema, registry: Registry, subject: str):
        self.schema = schema
        self.json = Judge(schema)
        self.registry = registry
        self.subject = subject

    def _empty(self, reason: str) -> Verdict:
        return Verdict(reason, {f.name: None for f in self.schema.fields})

    def header(self, value: bytes | None) -> Verdict | tuple[int, bytes]:
        """The verdict on a record that fails before its payload, else (schema id, payload)."""
        if value is None or len(value) > self.schema.max_bytes:
            return self.json.judge(value)  # no value, or `oversized`: as for JSON
        framed = unframe(value)
        if framed is None:
            return self._empty(self.NOT_FRAMED)
        if self.registry.schema_type(framed[0]) is None:
            return self._empty(self.UNKNOWN_SCHEMA)
        if self.subject not in self.registry.subjects(framed[0]):
            return self._empty(self.OTHER_SUBJECT)
        return framed


class FramedJsonJudge(FramedJudge):
    """A JSON Schema serializer's records: the payload judged as a JSON event."""

    NOT_FRAMED = Reason.JSON_SCHEMA_NOT_FRAMED
    UNKNOWN_SCHEMA = Reason.JSON_SCHEMA_UNKNOWN_SCHEMA
    OTHER_SUBJECT = Reason.JSON_SCHEMA_OTHER_SUBJECT

    def viewed(self, value: bytes | None) -> Verdict | bytes:
        """A record's JSON payload, or the verdict of a record that has none (its header's, or
        `json_schema_unsupported_schema`)."""
        found = self.header(value)
        if isinstance(found, Verdict):
            return found
        schema_id, payload = found
        if self.registry.schema_type(schema_id) != JSON_SCHEMA_TYPE:
            return self._empty(Reason.JSON_SCHEMA_UNSUPPORTED_SCHEMA)
        return payload

    def judge(self, value: bytes | None) -> Verdict:
        payload = self.viewed(value)
        return payload if isinstance(payload, Verdict) else self.json.judge(payload)

"""How `onceflow produce` (and the demo) frame a registry format's records: a `json_schema`
pipeline's events with the subject's schema id, an `avro` pipeline's in Avro with registered writer
schemas (generate/avro_events.py), a `protobuf` pipeline's in Protobuf the same way
(generate/protobuf_events.py); a Debezium pipeline's change stream in Avro (converter avro:
generate/debezium_avro.py) or framed as JSON Schema's (converter json_schema); a plain JSON or
Debezium topic is not framed (docs/registry.md)."""

from __future__ import annotations

import json
from typing import Any

from onceflow.config import Pipeline
from onceflow.generate.avro_events import register_writers
from onceflow.generate.debezium_avro import register_envelope, table_of
from onceflow.generate.protobuf_events import register_proto_writers
from onceflow.registry import Registry
from onceflow.schema.json_schema import DRAFT, declared_json_schema
from onceflow.schema.model import AVRO, DEBEZIUM, PROTOBUF


def registry_framing(pipeline: Pipeline, malformed: bool) -> dict[str, Any]:
    """produce()'s keyword arguments for the pipeline's format: `frame_id` for JSON Schema (the
    subject's latest version, or the declared fields' JSON Schema registered there when it has none),
    `writers` for Avro and Protobuf (the declared fields' two versions, and for `malformed` records
    the schemas the format's reasons need), `envelope` for Debezium's Avro envelopes (the envelope's
    schema and its id), nothing for a topic of plain JSON."""
    schema = pipeline.schema
    if schema.framing is None or schema.registry is None:
        return {}
    registry, subject = Registry(schema.registry), str(pipeline.registry_subject)
    table = table_of(pipeline.source.topic)
    if schema.format == DEBEZIUM and schema.converter == AVRO:
        return {"envelope": register_envelope(registry, subject, schema, table)}
    if schema.format == DEBEZIUM:  # converter json_schema: the JSON envelope after the header
        found = registry.latest(subject)
        envelope = {"$schema": DRAFT, "title": f"{table} change event", "type": "object"}
        return {"frame_id": found if found is not None else registry.register(subject, json.dumps(envelope), "JSON")}
    if schema.format == AVRO:
        return {"writers": register_writers(registry, subject, schema, pipeline.name, malformed)}
    if schema.format == PROTOBUF:
        return {"writers": register_proto_writers(registry, subject, schema, pipeline.name, malformed)}
    found = registry.latest(subject)
    if found is not None:
        return {"frame_id": found}
    derived = declared_json_schema(schema, title=pipeline.name)
    return {"frame_id": registry.register(subject, json.dumps(derived), "JSON")}

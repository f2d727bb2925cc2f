"""The declared fields' Avro schema (schema/avro_declared.py): what `onceflow produce` registers for an
avro pipeline."""

from __future__ import annotations

import json

from onceflow.schema.avro import unsupported
from onceflow.schema.avro_declared import declared_avro_schema
from tests.unit.generate.test_avro_events import SCHEMA


def test_the_declared_schema_types_each_field_at_its_path_and_optional_ones_default_to_null():
    avro = declared_avro_schema(SCHEMA, "payments-avro")
    assert avro["name"] == "Payments_avro" and unsupported(json.dumps(avro)) is None
    by_name = {f["name"]: f for f in avro["fields"]}
    assert by_name["amount"]["type"] == {"type": "bytes", "logicalType": "decimal", "precision": 18, "scale": 2}
    assert by_name["event_time"]["type"] == {"type": "long", "logicalType": "timestamp-micros"}
    assert by_name["channel"] == {"name": "channel", "type": ["null", "string"], "default": None}
    meta = by_name["meta"]
    assert meta["default"] is None and meta["type"][1]["fields"][0]["name"] == "seen"
    assert "channel" not in {f["name"] for f in declared_avro_schema(SCHEMA, "p", leave_out=("channel",))["fields"]}

"""The declared fields' Avro schema (schema/avro_declared.py): what `onceflow produce` registers for an
avro pipeline."""

from __future__ import annotations

import json

import pytest

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


def test_the_fields_of_our_own_declared_schema_are_the_declaration_again():
    """declared -> Avro -> declared: every field's name, type, optionality and path come back (the rules
    are the declaration's, never in the schema)."""
    from onceflow.schema.avro_declared import fields_of_avro
    from onceflow.schema.model import Schema

    back = Schema.model_validate({**SCHEMA.model_dump(), "fields": fields_of_avro(declared_avro_schema(SCHEMA, "p"))})
    assert [(f.name, f.type, f.required, f.json_path) for f in back.fields] == [
        (f.name, f.type, f.required, f.json_path) for f in SCHEMA.fields
    ]


def test_the_fields_of_a_schema_with_every_readable_kind():
    from onceflow.schema.avro_declared import fields_of_avro

    address = {"type": "record", "name": "Address", "namespace": "x", "fields": [{"name": "city", "type": "string"}]}
    decimal = {"logicalType": "decimal", "precision": 12, "scale": 2}
    schema = {
        "type": "record",
        "name": "Order",
        "namespace": "x",
        "fields": [
            {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
            {"name": "again", "type": ["null", "Status"], "default": None},  # a named type used again
            {"name": "amount", "type": {"type": "fixed", "name": "D", "size": 8, **decimal}},
            {"name": "blob", "type": "bytes"},
            {"name": "ratio", "type": "float"},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "wall", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
            {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
            {"name": "home", "type": address},
            {"name": "work", "type": ["null", "x.Address"], "default": None},  # optional: its leaves too
        ],
    }  # fmt: skip
    assert fields_of_avro(schema) == [
        {"name": "id", "type": "string", "uuid": True, "required": True},
        {"name": "status", "type": "string", "allowed": ["NEW", "PAID"], "required": True},
        {"name": "again", "type": "string", "allowed": ["NEW", "PAID"], "required": False},
        {"name": "amount", "type": "decimal(12,2)", "required": True},
        {"name": "blob", "type": "string", "required": True},
        {"name": "ratio", "type": "double", "required": True},
        {"name": "at", "type": "timestamp", "required": True},
        {"name": "wall", "type": "string", "required": True},
        {"name": "day", "type": "date", "required": False},
        {"name": "home_city", "type": "string", "required": True, "path": "$.home.city"},
        {"name": "work_city", "type": "string", "required": False, "path": "$.work.city"},
    ]


@pytest.mark.parametrize(
    ("field_type", "says"),
    [
        (
            {"type": "array", "items": "long"},
            r"\$\.f is \"array\", which no declared type reads\. Fix: list the fields",
        ),
        ({"type": "map", "values": "long"}, r"\$\.f is \"map\""),
        (["null", "long", "string"], r"\$\.f is a union of 2 non-null types"),
        ({"type": "int", "logicalType": "time-millis"}, r"\$\.f is a time-millis"),
        # Debezium's decimals with no declared precision, as Confluent's AvroData writes them
        ({"type": "bytes", "logicalType": "decimal", "precision": 64, "scale": 2}, r"\$\.f is a decimal of 64 digits"),
        (
            {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]},
            r"Node is inside itself",
        ),
    ],
)
def test_a_field_no_declared_type_reads_is_named_with_the_fix(field_type, says):
    from onceflow.schema.avro_declared import fields_of_avro

    with pytest.raises(ValueError, match=says):
        fields_of_avro({"type": "record", "name": "R", "fields": [{"name": "f", "type": field_type}]})
    with pytest.raises(ValueError, match="not an Avro record"):
        fields_of_avro({"type": "string"})

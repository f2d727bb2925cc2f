"""`schema.fields: registry` for a JSON Schema subject (schema/json_schema_declared.py): the object's
leaves as declared fields, a record valid by the schema valid by them, and what no declared type
reads refused naming the field."""

from __future__ import annotations

import json

import pytest

from onceflow.schema.json_schema_declared import fields_of_json_schema
from onceflow.schema.model import FieldSpec, Schema
from onceflow.schema.reference import Judge

# as Confluent's Java JSON Schema generator writes a class: nullable members as a oneOf with null
ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "additionalProperties": False,
    "definitions": {
        "Meta": {"type": "object", "properties": {"source": {"type": "string"}}, "required": ["source"]},
    },
    "properties": {
        "order_id": {"type": "string", "format": "uuid"},
        "placed_at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "cents": {"type": "integer"},
        "rate": {"type": "number"},
        "paid": {"type": "boolean"},
        "channel": {"type": "string", "enum": ["web", "store"]},
        "note": {"oneOf": [{"type": "null", "title": "Not included"}, {"type": "string"}]},
        "tag": {"type": ["string", "null"]},
        "meta": {"$ref": "#/definitions/Meta"},
    },
    "required": ["order_id", "placed_at", "cents", "channel", "note", "tag", "meta"],
}


def test_each_leaf_is_a_field_required_as_the_schema_says():
    fields = {f["name"]: f for f in fields_of_json_schema(ORDER)}
    assert fields["order_id"] == {"name": "order_id", "type": "string", "uuid": True, "required": True}
    assert (fields["placed_at"]["type"], fields["day"]["type"], fields["day"]["required"]) == (
        "timestamp",
        "date",
        False,
    )
    assert (fields["cents"]["type"], fields["rate"]["type"], fields["paid"]["type"]) == ("long", "double", "boolean")
    assert fields["channel"] == {"name": "channel", "type": "string", "allowed": ["web", "store"], "required": True}
    assert not fields["note"]["required"] and not fields["tag"]["required"]  # listed, but null is allowed
    assert fields["source"] == {"name": "source", "type": "string", "required": True, "path": "$.meta.source"}
    record = {
        "order_id": "123e4567-e89b-12d3-a456-426614174000",
        "placed_at": "2026-11-30T12:00:00Z",
        "cents": 125,
        "channel": "web",
        "note": None,
        "tag": None,
        "meta": {"source": "pos"},
    }
    judge = Judge(Schema.model_construct(fields=tuple(FieldSpec.model_validate(f) for f in fields.values())))
    verdict = judge.judge(json.dumps(record).encode())
    assert verdict.reason is None and verdict.values["source"] == "pos"


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "object", "properties": {"tags": {"type": "array"}}}, "$.tags is array"),
        ({"type": "object", "properties": {"v": {"type": ["string", "integer"]}}}, "$.v is of types"),
        ({"type": "object", "properties": {"v": {}}}, "$.v is of no type"),
        ({"type": "object", "properties": {"v": {"$ref": "other.json#/x"}}}, "outside the schema"),
        (
            {
                "type": "object",
                "properties": {"v": {"$ref": "#/definitions/X"}},
                "definitions": {"X": {"$ref": "#/definitions/X"}},
            },
            "inside itself",
        ),
        ({"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}, "anyOf of 2"),
        ({"type": "array"}, "not a JSON Schema of an object"),
    ],
)
def test_what_no_declared_type_reads_is_refused_naming_the_field(schema, why):
    with pytest.raises(ValueError, match=why.replace("$", r"\$")):
        fields_of_json_schema(schema)

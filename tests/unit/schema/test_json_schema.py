"""The JSON Schema of the declared fields, checked by an independent validator (jsonschema) on
events the generator makes and on ones it must refuse."""

from __future__ import annotations

import jsonschema


def test_the_payments_events_are_valid_and_a_wrong_type_is_not():
    from devkit.pipelines import PAYMENTS_SCHEMA
    from onceflow.generate.records import Generator
    from onceflow.schema.json_schema import declared_json_schema

    derived = declared_json_schema(PAYMENTS_SCHEMA, "Payment")
    jsonschema.Draft7Validator.check_schema(derived)
    validator = jsonschema.Draft7Validator(derived, format_checker=jsonschema.FormatChecker())
    gen = Generator(PAYMENTS_SCHEMA, seed=7, large_ratio=0)
    for _ in range(50):
        event = gen.valid()
        assert not list(validator.iter_errors(event)), event
    event = gen.valid()
    assert list(validator.iter_errors({**event, "amount": True})) and list(
        validator.iter_errors({**event, "amount": "1e3"})
    )
    assert list(validator.iter_errors({k: v for k, v in event.items() if k != "currency"}))


def test_nested_paths_become_nested_objects_and_optional_fields_may_be_null():
    from onceflow.schema.json_schema import declared_json_schema
    from onceflow.schema.model import Schema

    schema = Schema.model_validate(
        {
            "event_time": "ts",
            "fields": [
                {"name": "ts", "type": "timestamp", "path": "$.meta.ts"},
                {"name": "note", "type": "string", "required": False},
            ],
        }
    )
    derived = declared_json_schema(schema, "T")
    validator = jsonschema.Draft7Validator(derived)
    assert not list(validator.iter_errors({"meta": {"ts": "2026-11-30T00:00:00Z"}, "note": None}))
    assert list(validator.iter_errors({"meta": {}}))
    assert derived["properties"]["meta"]["required"] == ["ts"]

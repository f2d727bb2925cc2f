"""A keyed table's declaration resolved against the schema: key fields, the sequence's parts and
where each is read, the delete marker (the refusals at load: tests/unit/test_config_cdc.py)."""

from __future__ import annotations

import pytest

from onceflow.cdc.spec import DIGITS, LONG, POSITIONS, TEXT, DeleteWhen, parse_delete_when, resolve
from onceflow.errors import DeclarationError
from onceflow.schema.model import Schema


def schema(fmt: str) -> Schema:
    return Schema.model_validate(
        {
            "format": fmt,
            "event_time": "ts",
            "fields": [
                {"name": "id", "type": "string"},
                {"name": "ts", "type": "timestamp", "path": "$.meta.ts"},
                {"name": "deleted", "type": "boolean", "required": False},
                {"name": "kind", "type": "string", "required": False},
                {"name": "code", "type": "int", "required": False},
            ],
        }
    )


@pytest.mark.parametrize(
    "text, parsed",
    [
        ("op = 'd'", DeleteWhen("op", "d")),
        ("  op='d'  ", DeleteWhen("op", "d")),
        ("kind = 'it''s gone'", DeleteWhen("kind", "it's gone")),
        ("kind = ''", DeleteWhen("kind", "")),
        ("code = -1", DeleteWhen("code", -1)),
        ("deleted = TRUE", DeleteWhen("deleted", True)),
        ("deleted = false", DeleteWhen("deleted", False)),
        ("deleted", DeleteWhen("deleted", True)),
    ],
)
def test_delete_when_forms(text, parsed):
    assert parse_delete_when(text) == parsed


@pytest.mark.parametrize("text", ["", "op == 'd'", "op = d", "op = 'd' or deleted", "op = 1.5", "'d' = op", "a.b = 1"])
def test_delete_when_refuses_what_it_cannot_read(text):
    with pytest.raises(ValueError, match="delete_when"):
        parse_delete_when(text)


def test_a_delete_marker_matches_a_value_of_its_own_type_only():
    assert DeleteWhen("deleted", True).matches(True) and not DeleteWhen("deleted", True).matches(1)
    assert DeleteWhen("code", 1).matches(1) and not DeleteWhen("code", 1).matches(True)
    assert DeleteWhen("op", "d").matches("d") and not DeleteWhen("op", "d").matches("D")


def test_debezium_sequences_read_positions_from_the_envelope_and_fields_from_the_row():
    spec = resolve(schema("debezium"), ["id"], ["source.ts_ms", "source.lsn", "ts"])
    assert spec.debezium and [k.name for k in spec.keys] == ["id"]
    assert [(p.name, p.position, p.path) for p in spec.sequence] == [
        ("source.ts_ms", LONG, ("source", "ts_ms")),
        ("source.lsn", LONG, ("source", "lsn")),
        ("ts", None, ("meta", "ts")),  # a declared field: read from the row, at its path
    ]
    assert spec.delete_when == DeleteWhen("op", "d")


def test_a_json_keyed_upsert_names_its_own_fields():
    spec = resolve(schema("json"), ["id"], "ts", "deleted")
    assert not spec.debezium and spec.delete_when == DeleteWhen("deleted", True)
    assert resolve(schema("json"), ["id"], "ts", "kind = 'delete'").delete_when == DeleteWhen("kind", "delete")
    assert resolve(schema("json"), ["id"], "ts", "code = 3").delete_when == DeleteWhen("code", 3)


def test_every_position_says_how_it_is_written():
    assert set(POSITIONS.values()) == {LONG, DIGITS, TEXT}
    assert all(name in ("ts_ms", "ts_us", "ts_ns") or name.startswith("source.") for name in POSITIONS)


def test_a_refusal_names_the_field_where_it_is_declared():
    with pytest.raises(DeclarationError) as caught:
        resolve(schema("debezium"), ["nope"], "source.lsn", where="sinks.orders")
    err = caught.value
    assert err.field == "sinks.orders.keys" and err.problem == "'nope' is not a declared field"
    assert err.fix == "name fields of schema.fields (id, ts, deleted, kind, code)"
    assert str(err) == f"{err.field}: {err.problem}. Fix: {err.fix}"

"""A keyed table (`sinks.current`) and `schema.format: debezium` in a pipeline file: loaded with
their defaults, or refused at load naming the file, the field and the fix."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import yaml

from onceflow import config
from onceflow.cdc.spec import LONG, DeleteWhen
from onceflow.errors import ConfigError

DEBEZIUM = {
    "name": "customers",
    "source": {"bootstrap_servers": "localhost:9092", "topic": "shop.public.customers"},
    "checkpoint": "cp",
    "schema": {
        "format": "debezium",
        "event_time": "updated_at",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "email", "type": "string"},
            {"name": "version", "type": "long"},
            {"name": "score", "type": "double"},
            {"name": "nickname", "type": "string", "required": False},
            {"name": "updated_at", "type": "timestamp"},
        ],
    },
    "sinks": {
        "bronze": {"path": "b"},
        "quarantine": {"path": "q"},
        "current": {"path": "c", "keys": ["id"], "sequence_by": "source.lsn"},
    },
}


def json_upsert(body: dict) -> dict:
    """The same table from plain events: a keyed upsert, deletes marked by a field of the event."""
    body["schema"]["format"] = "json"
    body["schema"]["fields"].append({"name": "deleted", "type": "boolean", "required": False})
    body["sinks"]["current"].update(sequence_by="version", delete_when="deleted")
    return body


def load(tmp_path, patch: Callable[[dict], object] = lambda b: None) -> config.Pipeline:
    body = yaml.safe_load(yaml.safe_dump(DEBEZIUM))
    patch(body)
    f = tmp_path / "customers.yaml"
    f.write_text(yaml.safe_dump(body))
    return config.load(f, env={})


def current(body: dict) -> dict:
    return body["sinks"]["current"]


def test_a_debezium_pipeline_loads_with_the_defaults(tmp_path):
    p = load(tmp_path)
    sink = p.sinks.current
    assert sink is not None and p.schema.format == "debezium"
    assert sink.keys == ("id",) and sink.sequence_by == "source.lsn" and sink.delete_when == "op = 'd'"
    assert sink.scd == 1 and sink.tombstone_retention == "7 days" and sink.tombstone_retention_seconds == 7 * 86400
    assert sink.driver_merge_max_mib == 16
    spec = sink.check_against(p.schema)
    assert [(part.name, part.position) for part in spec.sequence] == [("source.lsn", LONG)]
    assert spec.delete_when == DeleteWhen("op", "d") and spec.debezium


def test_a_sequence_may_be_a_list_of_positions_and_fields(tmp_path):
    p = load(tmp_path, lambda b: current(b).update(sequence_by=["source.ts_ms", "source.lsn", "version"]))
    assert p.sinks.current is not None and p.sinks.current.sequence_by == ("source.ts_ms", "source.lsn", "version")


def test_a_keyed_upsert_of_plain_events_loads(tmp_path):
    p = load(tmp_path, json_upsert)
    assert p.sinks.current is not None and p.schema.format == "json"
    assert p.sinks.current.check_against(p.schema).delete_when == DeleteWhen("deleted", True)


def test_a_pipeline_without_a_keyed_table_is_as_before(tmp_path):
    p = load(tmp_path, lambda b: (b["schema"].update(format="json"), b["sinks"].pop("current")))
    assert p.sinks.current is None


CASES = [
    # field, the problem, a patch
    ("sinks.current.keys", "'customer_id' is not a declared field", lambda b: current(b).update(keys=["customer_id"])),
    ("sinks.current.keys", "'id' listed twice", lambda b: current(b).update(keys=["id", "id"])),
    ("sinks.current.keys", "'nickname' is an optional field", lambda b: current(b).update(keys=["nickname"])),
    ("sinks.current.keys", "'score' is a double", lambda b: current(b).update(keys=["score"])),
    (
        "sinks.current.sequence_by",
        "'source.sequence' is not a position",
        lambda b: current(b).update(sequence_by="source.sequence"),
    ),
    ("sinks.current.sequence_by", "'lsn' is not a declared field", lambda b: current(b).update(sequence_by="lsn")),
    (
        "sinks.current.sequence_by",
        "'nickname' is an optional field",
        lambda b: current(b).update(sequence_by="nickname"),
    ),
    ("sinks.current.sequence_by", "no name", lambda b: current(b).update(sequence_by=[])),
    (
        "sinks.current.sequence_by",
        "'ts_ms' is both Debezium's envelope field and a declared field",
        lambda b: (
            b["schema"]["fields"].append({"name": "ts_ms", "type": "long"}),
            current(b).update(sequence_by="ts_ms"),
        ),
    ),
    (
        "sinks.current.delete_when",
        "a soft-delete column is not supported yet",
        lambda b: current(b).update(delete_when="deleted"),
    ),
    (
        "sinks.current.delete_when",
        "is not a quoted text, an integer, true or false",
        lambda b: current(b).update(delete_when="op == 'd'"),
    ),
    # plain events: the sequence and the delete marker must be fields of the event
    (
        "sinks.current.sequence_by",
        "'source.lsn' is not a declared field: positions are Debezium's",
        lambda b: (json_upsert(b), current(b).update(sequence_by="source.lsn")),
    ),
    (
        "sinks.current.delete_when",
        "\"op = 'd'\" names 'op', which is not a declared field",
        lambda b: (json_upsert(b), current(b).pop("delete_when")),
    ),
    (
        "sinks.current.delete_when",
        "compares 'deleted', a boolean field, with 'yes'",
        lambda b: (json_upsert(b), current(b).update(delete_when="deleted = 'yes'")),
    ),
    (
        "sinks.current.delete_when",
        "compares 'updated_at', a timestamp field",
        lambda b: (json_upsert(b), current(b).update(delete_when="updated_at = 'x'")),
    ),
    ("sinks.current", "schema.format debezium reads row changes", lambda b: b["sinks"].pop("current")),
]


@pytest.mark.parametrize("field, problem, patch", CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_a_declaration_that_contradicts_the_schema_is_refused_with_its_field_and_fix(tmp_path, field, problem, patch):
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, patch)
    lines = str(caught.value).splitlines()
    assert lines[0] == f"{tmp_path / 'customers.yaml'}: invalid pipeline config:"
    assert len(lines) == 2 and lines[1].startswith(f"  field `{field}`: ") and problem in lines[1], lines
    assert ". Fix: " in lines[1] and "shop.public" not in lines[1]  # the fix, never the file's contents


@pytest.mark.parametrize(
    "field, hint, patch",
    [
        (
            "sinks.current.scd",
            "scd: 2 (every version of a row, with validity columns) is not supported yet",
            lambda b: current(b).update(scd=2),
        ),
        ("sinks.current.scd", "scd: 3 is not a type", lambda b: current(b).update(scd=3)),
        (
            "sinks.current.tombstone_retention",
            "not a duration",
            lambda b: current(b).update(tombstone_retention="a week"),
        ),
        (
            "sinks.current.tombstone_retention",
            "keeps no tombstone",
            lambda b: current(b).update(tombstone_retention="0 days"),
        ),
        ("sinks.current.keys", "at least 1", lambda b: current(b).update(keys=[])),
        (
            "sinks.current.driver_merge_max_mib",
            "greater than or equal to 0",
            lambda b: current(b).update(driver_merge_max_mib=-1),
        ),
        ("sinks.current.sequence_by", "missing", lambda b: current(b).pop("sequence_by")),
        (
            "sinks.current.key",
            "did you mean `sinks.current.keys`",
            lambda b: current(b).update(key=current(b).pop("keys")),
        ),
        ("schema", "leave event_id out", lambda b: b["schema"].update(event_id="id")),
        ("schema.format", "one of json, debezium, avro", lambda b: b["schema"].update(format="thrift")),
    ],
)
def test_the_keyed_table_own_fields_are_checked(tmp_path, field, hint, patch):
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, patch)
    msg = str(caught.value)
    assert f"field `{field}" in msg and hint in msg and "Fix" in msg, msg


def test_retention_reads_days():
    assert config.duration_seconds("7 days") == config.duration_seconds("1 d") * 7 == 604800
    assert config.duration_seconds("1 day") == config.duration_seconds("24 hours")

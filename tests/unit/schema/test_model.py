"""The `schema:` section and aggregates declaration: refused at load with the field and the fix."""

from __future__ import annotations

import pytest
import yaml

from onceflow import config
from onceflow.errors import ConfigError

BASE = {
    "name": "s1",
    "source": {"bootstrap_servers": "localhost:9092", "topic": "t"},
    "checkpoint": "cp",
    "schema": {
        "event_time": "ts",
        "fields": [
            {"name": "ts", "type": "timestamp"},
            {"name": "site", "type": "string"},
            {"name": "reading", "type": "double"},
        ],
    },
    "sinks": {
        "bronze": {"path": "b"},
        "quarantine": {"path": "q"},
        "aggregates": {"path": "a", "group_by": ["site"], "metrics": {"n": "count", "s": "sum(reading)"}},
    },
}


def load(tmp_path, patch) -> config.Pipeline:
    body = yaml.safe_load(yaml.safe_dump(BASE))
    patch(body)
    f = tmp_path / "s1.yaml"
    f.write_text(yaml.safe_dump(body))
    return config.load(f)


def fields(body) -> list:
    return body["schema"]["fields"]


CASES = [
    ("unknown type", lambda b: fields(b).append({"name": "x", "type": "float"}), "unknown type 'float'"),
    ("bad decimal", lambda b: fields(b).append({"name": "x", "type": "decimal(40,2)"}), "precision 1..38"),
    ("pattern on a double", lambda b: fields(b)[2].update(pattern="^1"), "rule `pattern` does not fit type double"),
    (
        "min on a boolean",
        lambda b: fields(b).append({"name": "x", "type": "boolean", "min": 0}),
        "rule `min` does not fit type boolean",
    ),
    ("uuid on a long", lambda b: fields(b).append({"name": "x", "type": "long", "uuid": True}), "`uuid` does not fit"),
    ("event_time not a timestamp", lambda b: b["schema"].update(event_time="site"), "must be a required timestamp"),
    ("event_time unknown", lambda b: b["schema"].update(event_time="when"), "is not a declared field"),
    ("event_time optional", lambda b: fields(b)[0].update(required=False), "must be a required timestamp"),
    ("event_id a double", lambda b: b["schema"].update(event_id="reading"), "must be a required string, int or long"),
    ("duplicate field", lambda b: fields(b).append({"name": "site", "type": "string"}), "declared twice"),
    ("bad path", lambda b: fields(b)[0].update(path="meta.ts"), "not a JSON path"),
    ("bad regex", lambda b: fields(b)[1].update(pattern="(["), "is not a regular expression"),
    ("min above max", lambda b: fields(b)[2].update(min=5, max=1), "min 5 is above max 1"),
    ("allowed of the wrong type", lambda b: fields(b)[1].update(allowed=[1, 2]), "are not strings"),
    ("avg metric", lambda b: b["sinks"]["aggregates"]["metrics"].update(m="avg(reading)"), "declare sum and count"),
    (
        "unknown metric field",
        lambda b: b["sinks"]["aggregates"]["metrics"].update(m="max(temp)"),
        "field 'temp' is not declared",
    ),
    ("sum of a string", lambda b: b["sinks"]["aggregates"]["metrics"].update(m="sum(site)"), "needs a numeric field"),
    ("unknown group_by", lambda b: b["sinks"]["aggregates"].update(group_by=["device"]), "group_by field 'device'"),
    (
        "metric named like a column",
        lambda b: b["sinks"]["aggregates"]["metrics"].update(window_start="count"),
        "clashes",
    ),
    ("old event section", lambda b: b.update(event={"max_bytes": 10}), "replaced by `schema`"),
    (
        "format thrift",
        lambda b: b["schema"].update(format="thrift"),
        "one of json, debezium, avro, json_schema, protobuf",
    ),
    (
        "format protobuf without a registry",
        lambda b: b["schema"].update(format="protobuf"),
        "format protobuf needs `registry`",
    ),
    ("format avro without a registry", lambda b: b["schema"].update(format="avro"), "format avro needs `registry`"),
    (
        "kafka sink without a key",
        lambda b: (b["sinks"].pop("aggregates"), b["sinks"].update(kafka={"topic": "o"})),
        "sinks.kafka.key is not set",
    ),
]


@pytest.mark.parametrize("case,patch,hint", CASES, ids=[c[0] for c in CASES])
def test_a_bad_declaration_is_refused_naming_file_and_fix(tmp_path, case, patch, hint):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, patch)
    assert "s1.yaml" in str(err.value) and hint in str(err.value)


def test_a_good_declaration_loads_with_defaults(tmp_path):
    p = load(
        tmp_path,
        lambda b: fields(b).append(
            {"name": "fw", "type": "string", "required": False, "path": "$.meta.fw", "pattern": "^v[0-9]+$"}
        ),
    )
    assert p.schema.max_bytes == 16384 and p.schema.event_id is None
    fw, ts, aggregates = p.schema.field("fw"), p.schema.field("ts"), p.sinks.aggregates
    assert fw is not None and ts is not None and aggregates is not None
    assert fw.keys == ("meta", "fw") and ts.json_path == "$.ts"
    assert [m.name for m in aggregates.parsed_metrics()] == ["n", "s"]
    assert p.kafka_key == "site"  # no event_id: the first group_by field


def test_a_zero_bound_is_a_rule():
    from onceflow.schema.model import FieldSpec

    assert FieldSpec(name="x", type="long", min=0).rules() == ["min"]
    assert FieldSpec(name="x", type="string").rules() == []

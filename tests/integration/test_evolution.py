"""Every schema change docs/pipeline-config.md calls compatible keeps a pipeline streaming.

A pipeline runs, its declaration changes compatibly, and the next run goes on with no human:
bronze and the tables derived from it (the aggregates, the keyed table) are evolved in
maintenance commits before the first batch, the new records land exactly once, and the audit,
which recomputes the aggregates from bronze and folds the keyed table's changes on its own, passes.

The matrix: each compatible change (a new optional field, int → long, a decimal given more
digits) against each aggregate function whose stored type changes with it (`sum` of an int is a
bigint, of a long a decimal(38,0); `min`/`max` keep the field's type; a widened group-by key), and
the keyed table's key and fields. Real broker, Spark and Delta; the oracle is a plain-Python sum
over the records produced, not the job's MERGE.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable

from devkit.pipelines import cdc_pipeline_file, write_pipeline
from onceflow import config
from onceflow.audit.run import run_audit
from onceflow.kafka.admin import ensure_topic
from onceflow.ledger import read_ledger
from onceflow.sinks import table_paths
from onceflow.spark.ingest import run_ingest

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # starts a Spark JVM (not in `make test-fast`)

FIELDS: list[dict[str, object]] = [
    {"name": "id", "type": "string"},
    {"name": "grp", "type": "int"},
    {"name": "q", "type": "int"},
    {"name": "amount", "type": "decimal(8,2)"},
    {"name": "ts", "type": "timestamp"},
]
AGGREGATES = {
    "group_by": ["grp"],
    "metrics": {
        "events": "count",
        "q_sum": "sum(q)",
        "q_min": "min(q)",
        "q_max": "max(q)",
        "amount_sum": "sum(amount)",
        "amount_max": "max(amount)",
    },
}
# each step: what changes in the declaration, and the aggregates' stored types after it
STEPS: list[tuple[str, dict[str, dict[str, object]], dict[str, str]]] = [
    (
        "int widened to long (the measured field and the group-by key)",
        {"grp": {"type": "long"}, "q": {"type": "long"}},
        {"grp": "bigint", "q_sum": "decimal(38,0)", "q_min": "bigint", "q_max": "bigint"},
    ),
    (
        "a decimal given more digits, and a new optional field",
        {"amount": {"type": "decimal(12,3)"}, "note": {"type": "string", "required": False}},
        {"amount_sum": "decimal(22,3)", "amount_max": "decimal(12,3)"},
    ),
]


def _declared(changes: dict[str, dict[str, object]]) -> list[dict[str, object]]:
    fields = [dict(f) for f in FIELDS]
    for name, change in changes.items():
        found = next((f for f in fields if f["name"] == name), None)
        if found is None:
            fields.insert(-1, {"name": name, **change})
        else:
            found.update(change)
    return fields


def _produce(bootstrap: str, topic: str, records: list[dict]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for r in records:
        producer.produce(topic, value=json.dumps(r).encode(), partition=0)
    assert producer.flush(30) == 0


def _events(start: int, count: int, big: bool) -> list[dict]:
    out = []
    for i in range(start, start + count):
        q = 2**40 + i if big else i  # past an int once the field is a long
        grp = 2**33 + i % 2 if big else i % 2
        out.append({"id": f"e{i}", "grp": grp, "q": q, "amount": f"{i}.25", "ts": f"2026-01-01T00:0{i % 3}:00Z"})
    return out


def _table(path: str) -> list[dict]:
    """Every row, read by delta-rs's engine (it applies the deletion vectors the MERGEs leave)."""
    return pa.table(DeltaTable(path).scan().read_all()).to_pylist()


def test_each_compatible_change_keeps_the_aggregates_streaming(broker, spark, tmp_path):
    topic = "t-evolution-aggregates"
    ensure_topic(broker.bootstrap, topic, 1)
    schema = {"event_time": "ts", "event_id": "id", "fields": _declared({})}
    file = write_pipeline(tmp_path, broker.bootstrap, topic, schema=schema, aggregates=AGGREGATES)
    produced = _events(0, 6, big=False)
    _produce(broker.bootstrap, topic, produced)
    assert run_ingest(config.load(file), spark=spark).status == "finished"

    changes: dict[str, dict[str, object]] = {}
    for number, (what, change, stored) in enumerate(STEPS, start=1):
        changes.update(change)
        schema = {"event_time": "ts", "event_id": "id", "fields": _declared(changes)}
        name = config.load(file).name
        pipeline = config.load(
            write_pipeline(tmp_path, broker.bootstrap, topic, schema=schema, aggregates=AGGREGATES, name=name)
        )
        batch = _events(100 * number, 4, big=True)
        if "note" in changes:
            batch[0]["note"] = "a new optional field"
        produced += batch
        _produce(broker.bootstrap, topic, batch)
        result = run_ingest(pipeline, spark=spark)
        assert result.status == "finished", (what, result)  # the stream goes on: nothing to move by hand

        paths = table_paths(pipeline)
        types = {f.name: f.dataType.simpleString() for f in spark.read.format("delta").load(paths["aggregates"]).schema}
        assert {k: types[k] for k in stored} == stored, (what, types)
        assert not read_ledger(paths["aggregates"]).foreign_commits, what

    # the aggregates equal a plain-Python sum over every record produced, old and new
    rows = _table(paths["aggregates"])
    for grp in {e["grp"] for e in produced}:
        mine = [e for e in produced if e["grp"] == grp]
        got = [r for r in rows if r["grp"] == grp]
        assert sum(r["events"] for r in got) == len(mine), grp
        assert sum(r["q_sum"] for r in got) == sum(e["q"] for e in mine), grp
        assert min(r["q_min"] for r in got) == min(e["q"] for e in mine), grp
        assert max(r["q_max"] for r in got) == max(e["q"] for e in mine), grp
        assert sum(r["amount_sum"] for r in got) == sum(Decimal(e["amount"]) for e in mine), grp
    bronze = _table(paths["bronze"])
    assert sorted(r["id"] for r in bronze) == sorted(e["id"] for e in produced)
    assert [r["note"] for r in bronze if r["note"]] == ["a new optional field"]
    ledger = read_ledger(paths["bronze"])
    assert len(ledger.maintenance) >= 2 and not ledger.foreign_commits, (ledger.maintenance, ledger.foreign_commits)
    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    assert outcome.status == "passed", outcome.summary["failed_checks"]


def _change(op: str, key: int, lsn: int, row: dict | None) -> bytes:
    return json.dumps(
        {
            "before": {"id": key} if op == "d" else None,
            "after": row,
            "op": op,
            "ts_ms": 1767225600000 + lsn,
            "source": {"lsn": lsn},
        }
    ).encode()


def _customer(key: int, visits: int, **extra) -> dict:
    return {"id": key, "email": f"c{key}@example.com", "tier": "pro", "visits": visits, **extra} | {
        "updated_at": "2026-01-01T00:00:00Z"
    }


def test_the_keyed_table_follows_a_widened_key_and_a_new_optional_column(broker, spark, tmp_path):
    topic = "t-evolution-current"
    ensure_topic(broker.bootstrap, topic, 1)
    fields: list[dict[str, object]] = [
        {"name": "id", "type": "int"},
        {"name": "email", "type": "string"},
        {"name": "tier", "type": "string"},
        {"name": "visits", "type": "int", "required": False},
        {"name": "updated_at", "type": "timestamp"},
    ]
    schema = {"format": "debezium", "event_time": "updated_at", "fields": fields}
    _, pipeline = cdc_pipeline_file(tmp_path, broker.bootstrap, topic, schema=schema)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    changes: list[tuple[str, int, dict | None]] = [
        ("c", 1, _customer(1, 3)),
        ("c", 2, _customer(2, 5)),
        ("u", 1, _customer(1, 4)),
    ]
    for lsn, (op, key, row) in enumerate(changes, start=10):
        producer.produce(topic, value=_change(op, key, lsn, row), partition=0)
    assert producer.flush(30) == 0
    assert run_ingest(pipeline, spark=spark).status == "finished"

    widened = [dict(f) for f in fields]
    for f in widened:
        if f["name"] in ("id", "visits"):
            f["type"] = "long"
    widened.insert(-1, {"name": "phone", "type": "string", "required": False})
    schema = {"format": "debezium", "event_time": "updated_at", "fields": widened}
    _, pipeline = cdc_pipeline_file(tmp_path, broker.bootstrap, topic, schema=schema, name=pipeline.name)
    big = 2**40
    changes = [("c", big, _customer(big, 2**35, phone="555")), ("u", 2, _customer(2, 6, phone="556")), ("d", 1, None)]
    for lsn, (op, key, row) in enumerate(changes, start=20):
        producer.produce(topic, value=_change(op, key, lsn, row), partition=0)
    assert producer.flush(30) == 0
    result = run_ingest(pipeline, spark=spark)
    assert result.status == "finished", result

    paths = table_paths(pipeline)
    types = {f.name: f.dataType.simpleString() for f in spark.read.format("delta").load(paths["current"]).schema}
    assert (types["id"], types["visits"], types["phone"]) == ("bigint", "bigint", "string"), types
    rows = {r["id"]: r for r in _table(paths["current"])}
    assert rows[big]["visits"] == 2**35 and rows[big]["phone"] == "555"
    assert rows[2]["visits"] == 6 and rows[2]["phone"] == "556"
    assert rows[1]["_deleted"] is True
    assert not read_ledger(paths["current"]).foreign_commits
    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    assert outcome.status == "passed", outcome.summary["failed_checks"]

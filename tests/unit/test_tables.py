"""The tables' schemas come from the declaration: bronze's typed fields and provenance, the aggregates'."""

from __future__ import annotations

from devkit.pipelines import PAYMENTS_SCHEMA
from onceflow import tables
from onceflow.config import load_pipeline


def test_bronze_holds_the_declared_fields_typed_then_the_provenance():
    columns = tables.bronze_columns(PAYMENTS_SCHEMA)
    assert list(columns) == [f.name for f in PAYMENTS_SCHEMA.fields]
    ddl = tables.bronze_ddl(PAYMENTS_SCHEMA)
    assert ddl.startswith(f"`{PAYMENTS_SCHEMA.fields[0].name}` ") and ddl.endswith(tables.PROVENANCE_DDL)
    assert [c.split()[0] for c in tables.PROVENANCE_DDL.split(", ")] == list(tables.PROVENANCE)


def test_the_aggregates_hold_group_window_metrics_and_batches():
    pipeline = load_pipeline("payments")
    aggs = pipeline.sinks.aggregates
    assert aggs is not None
    columns = list(tables.aggregate_columns(pipeline.schema, aggs))
    assert columns[: len(aggs.group_by)] == list(aggs.group_by)
    assert columns[len(aggs.group_by) : len(aggs.group_by) + 2] == list(tables.WINDOW_COLUMNS)
    assert columns[-2:] == list(tables.BATCH_COLUMNS)
    assert tables.aggregate_key(aggs) == (*aggs.group_by, "window_start")
    assert tables.aggregates_ddl(pipeline.schema, aggs).count("`") == 2 * len(columns)

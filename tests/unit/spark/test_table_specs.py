"""What each sink's table is created with, and the hint for an existing table without a wanted property."""

from __future__ import annotations

from devkit.pipelines import PAYMENTS_AGGREGATES, load_pipeline
from onceflow import tables
from onceflow.ledger import Ledger
from onceflow.spark.table_specs import table_ddls, table_properties, table_property_hints


def test_every_sink_gets_its_ddl_and_properties_from_the_declaration(tmp_path):
    pipeline = load_pipeline(tmp_path, "localhost:1", "t")
    ddls = table_ddls(pipeline)
    assert list(ddls) == ["bronze", "quarantine", "aggregates"] and ddls["quarantine"] == tables.QUARANTINE_DDL
    assert ddls["bronze"] == tables.bronze_ddl(pipeline.schema)
    assert table_properties(pipeline) == {
        "bronze": {tables.AUTO_COMPACT: "true"},
        "quarantine": {tables.AUTO_COMPACT: "true"},
        "aggregates": {tables.AUTO_COMPACT: "true", tables.DELETION_VECTORS: "true"},
    }
    off = load_pipeline(
        tmp_path / "off",
        "localhost:1",
        "t",
        aggregates={**PAYMENTS_AGGREGATES, "deletion_vectors": False},
    )
    assert table_properties(off)["aggregates"] == {tables.AUTO_COMPACT: "true"}


def test_an_existing_table_without_a_wanted_property_gets_a_hint_with_both_ways_out(tmp_path):
    pipeline = load_pipeline(tmp_path, "localhost:1", "t")
    ledgers = {
        "bronze": Ledger("/t/bronze", [], [], exists=True, properties={tables.AUTO_COMPACT: "true"}),
        "quarantine": Ledger("/t/quarantine", [], [], exists=False),  # created with them
        "aggregates": Ledger("/t/aggregates", [], [], exists=True, properties={tables.AUTO_COMPACT: "false"}),
    }
    hints = table_property_hints(pipeline, ledgers)
    assert len(hints) == 2 and all(h.startswith("the aggregates table /t/aggregates lacks") for h in hints)
    assert "ALTER TABLE delta.`/t/aggregates` SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)" in hints[1]
    assert "sinks.aggregates.deletion_vectors: false" in hints[1] and "sinks.aggregates.auto_compact" in hints[0]

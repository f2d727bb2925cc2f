"""What each sink's Delta table is created with, derived from the pipeline's declaration: its DDL
and its table properties; and a hint per table that exists without a property the pipeline wants."""

from __future__ import annotations

from onceflow import tables
from onceflow.config import DerivedSink, Pipeline
from onceflow.ledger import Ledger
from onceflow.sinks import delta_sinks


def table_ddls(pipeline: Pipeline) -> dict[str, str]:
    """Sink name → the DDL its Delta table is created with, derived from the declaration."""
    keyed = pipeline.keyed
    out = {"bronze": tables.bronze_ddl(pipeline.schema, keyed), "quarantine": tables.QUARANTINE_DDL}
    if pipeline.sinks.aggregates is not None:
        out["aggregates"] = tables.aggregates_ddl(pipeline.schema, pipeline.sinks.aggregates)
    if keyed is not None:
        out["current"] = tables.current_ddl(pipeline.schema, keyed)
    return out


def table_properties(pipeline: Pipeline) -> dict[str, dict[str, str]]:
    """Sink name → the Delta table properties its table is created with (only when created)."""
    out: dict[str, dict[str, str]] = {}
    for name, sink in delta_sinks(pipeline).items():
        out[name] = {tables.AUTO_COMPACT: "true"} if sink.auto_compact else {}
        if isinstance(sink, DerivedSink) and sink.deletion_vectors:
            out[name][tables.DELETION_VECTORS] = "true"
    return out


# why a table wants each property, and the pipeline setting that declines it
_WHY = {
    tables.DELETION_VECTORS: (
        "each MERGE copies every file it touches, so batches slow down as the table grows",
        "deletion_vectors",
    ),
    tables.AUTO_COMPACT: (
        "nothing merges the small files each batch adds, so reads and audits slow down as the table grows",
        "auto_compact",
    ),
}


def table_property_hints(pipeline: Pipeline, ledgers: dict[str, Ledger]) -> list[str]:
    """What to do where the pipeline wants a table property but its existing table was
    created without it (by an older onceflow, or by hand): a line per table and property.
    A table that does not exist yet is created with them."""
    hints = []
    for sink, wanted in table_properties(pipeline).items():
        ledger = ledgers[sink]
        for key in wanted if ledger.exists else ():
            if str(ledger.properties.get(key, "false")).lower() != "false":
                continue
            why, setting = _WHY[key]
            hints.append(
                f"the {sink} table {ledger.table} lacks {key}: {why}. To turn it on, stop the stream and "
                f"run ALTER TABLE delta.`{ledger.table}` SET TBLPROPERTIES ('{key}' = true) (the audit "
                f"lists that commit as one without a ledger entry); or set sinks.{sink}.{setting}: "
                f"false to silence this."
            )
    return hints

"""What each sink's Delta table is created with, derived from the pipeline's declaration: its DDL
and its table properties; and a hint per table that exists without a property the pipeline wants."""

from __future__ import annotations

from collections.abc import Callable

from onceflow import tables
from onceflow.config import AggregateSink, DerivedSink, Pipeline
from onceflow.ledger import Ledger
from onceflow.sink_kinds import SinkName
from onceflow.sinks import delta_sinks


def _aggregates_ddl(pipeline: Pipeline) -> str:
    assert isinstance(pipeline.sinks.aggregates, AggregateSink)  # only asked when the pipeline has one
    return tables.aggregates_ddl(pipeline.schema, pipeline.sinks.aggregates)


def _current_ddl(pipeline: Pipeline) -> str:
    assert pipeline.keyed is not None  # sinks.current declared: the keyed table's spec resolves
    return tables.current_ddl(pipeline.schema, pipeline.keyed)


# each Delta sink kind's DDL from the declaration (every Delta row of sink_kinds has one: tested)
DDLS: dict[SinkName, Callable[[Pipeline], str]] = {
    SinkName.BRONZE: lambda pipeline: tables.bronze_ddl(pipeline.schema, pipeline.keyed),
    SinkName.QUARANTINE: lambda pipeline: tables.QUARANTINE_DDL,
    SinkName.AGGREGATES: _aggregates_ddl,
    SinkName.CURRENT: _current_ddl,
}


def table_ddls(pipeline: Pipeline) -> dict[str, str]:
    """Sink name → the DDL its Delta table is created with, derived from the declaration."""
    return {name: DDLS[SinkName(name)](pipeline) for name in delta_sinks(pipeline)}


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

"""The Delta tables a pipeline writes: their schemas, derived from the declaration.

The streaming job writes them, the audit reads them, the docs describe them;
all three take the column names from here. Bronze holds the declared fields,
typed, then the provenance columns; quarantine's shape is the same for every
pipeline; the aggregates table holds the declared group-by fields and metrics
per event-time window; the keyed table (sinks.current) holds per key the row of its newest
change, or a tombstone (docs/cdc.md#the-table).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.schema.model import EVENT_TIME_COLUMN, AggregatesSpec, Schema

if TYPE_CHECKING:
    from onceflow.cdc.spec import KeyedSpec

# provenance of every row: where in Kafka it came from, which batch wrote it
PROVENANCE_DDL = (
    "_topic STRING, _partition INT, _offset BIGINT, _kafka_ts TIMESTAMP, "
    "_batch_id BIGINT, _generation INT, _ingested_at TIMESTAMP"
)
PROVENANCE = ("_topic", "_partition", "_offset", "_kafka_ts", "_batch_id", "_generation", "_ingested_at")

QUARANTINE_DDL = "_key BINARY, _value BINARY, reason STRING, detail STRING, " + PROVENANCE_DDL
WINDOW_COLUMNS = ("window_start", "window_end")
BATCH_COLUMNS = ("first_batch_id", "last_batch_id")


def bronze_columns(schema: Schema, keyed: KeyedSpec | None = None) -> dict[str, str]:
    """Declared field -> its SQL type, in declaration order; for Debezium's change events (a
    `keyed` spec that reads them) then `_op` (c, u, d, r) and `_sequence` (the `sequence_by`
    values, a struct), and `_event_time` when the event time is an envelope position (docs/cdc.md).
    A delete's row holds its key and sequence fields only."""
    cols = {f.name: f.ftype.sql for f in schema.fields}
    if keyed is not None and keyed.debezium:
        cols |= {"_op": "STRING", "_sequence": keyed.sequence_ddl}
        if schema.event_time_position is not None:  # the change's event time from its envelope
            cols[EVENT_TIME_COLUMN] = "TIMESTAMP"
    return cols


def bronze_ddl(schema: Schema, keyed: KeyedSpec | None = None) -> str:
    return ", ".join(f"`{n}` {t}" for n, t in bronze_columns(schema, keyed).items()) + ", " + PROVENANCE_DDL


# The keyed table's own columns after the declared fields: the winning change's sequence and
# place in the log (what a later change is compared with, fold.py), whether it deleted the key
# (a tombstone: the row's other fields are NULL), the bronze batch that brought it, and when
# the table took it (a tombstone is purged `tombstone_retention` after that).
CURRENT_OWN = ("_sequence", "_partition", "_offset", "_deleted", "_batch_id", "_generation", "_changed_at")


def current_columns(schema: Schema, keyed: KeyedSpec) -> dict[str, str]:
    """The keyed table's columns: the declared fields, then CURRENT_OWN."""
    cols = {f.name: f.ftype.sql for f in schema.fields}
    return cols | {
        "_sequence": keyed.sequence_ddl,
        "_partition": "INT",
        "_offset": "BIGINT",
        "_deleted": "BOOLEAN",
        "_batch_id": "BIGINT",
        "_generation": "INT",
        "_changed_at": "TIMESTAMP",
    }


def current_ddl(schema: Schema, keyed: KeyedSpec) -> str:
    return ", ".join(f"`{n}` {t}" for n, t in current_columns(schema, keyed).items())


def aggregate_columns(schema: Schema, aggs: AggregatesSpec) -> dict[str, str]:
    """The aggregates table's columns: group-by fields, window, metrics, first/last batch."""
    by_name = {f.name: f for f in schema.fields}
    cols = {g: by_name[g].ftype.sql for g in aggs.group_by}
    cols |= {"window_start": "TIMESTAMP", "window_end": "TIMESTAMP"}
    cols |= {m.name: m.sql_type(schema) for m in aggs.parsed_metrics()}
    return cols | {"first_batch_id": "BIGINT", "last_batch_id": "BIGINT"}


def aggregates_ddl(schema: Schema, aggs: AggregatesSpec) -> str:
    return ", ".join(f"`{n}` {t}" for n, t in aggregate_columns(schema, aggs).items())


def aggregate_key(aggs: AggregatesSpec) -> tuple[str, ...]:
    """One row per group and window."""
    return (*aggs.group_by, "window_start")


# The aggregates MERGE updates a few rows per batch: with deletion vectors it marks their old
# versions deleted instead of rewriting every file that holds one (docs/exactly-once.md).
DELETION_VECTORS = "delta.enableDeletionVectors"
# Every batch adds small files; Delta's auto compaction merges them after a write once enough
# have gathered, so reads and audits do not slow down as a long-running stream goes on.
AUTO_COMPACT = "delta.autoOptimize.autoCompact"

# a row of bronze or quarantine is identified by its Kafka coordinates
SOURCE_KEY = ("_topic", "_partition", "_offset")

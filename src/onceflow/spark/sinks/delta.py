"""Writes to the Delta sinks: bronze and quarantine appends, the aggregates MERGE.

Bronze and quarantine get exactly one commit per micro-batch, made idempotent by
Delta's `txnAppId`/`txnVersion` (= batch id) and carrying the batch's ledger entry
in its commit metadata. A replayed batch is therefore skipped table by table, and
each table alone can tell how far it got. Empty batches still commit (an empty
append) so every ledger stays contiguous. The aggregates follower
(onceflow.spark.follower) merges several batches per commit, one entry each.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from onceflow import tables
from onceflow.ledger import LedgerEntry
from onceflow.schema.model import AggregatesSpec, Metric, Schema
from onceflow.storage.commit_lock import commit_lock

_TXN_APP = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def ensure_table(spark: SparkSession, path: str, ddl: str, properties: dict[str, str] | None = None) -> None:
    """Create the Delta table with its schema (and table properties) if it does not
    exist yet (no ledger entry). An existing table is left as it is."""
    from delta.tables import DeltaTable

    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(spark.createDataFrame([], ddl).schema)
    for key, value in (properties or {}).items():
        builder = builder.property(key, value)
    with commit_lock(path):
        builder.execute()


def append(df: DataFrame, path: str, entry: LedgerEntry) -> None:
    """One idempotent append: skipped by Delta if this app id already wrote this batch."""
    with commit_lock(path):  # the whole write: Python has no hook at Delta's commit step
        (
            df.write.format("delta")
            .mode("append")
            .option("txnAppId", entry.app_id)
            .option("txnVersion", entry.batch_id)
            .option("userMetadata", entry.to_json())
            .save(path)
        )


@contextmanager
def _txn(spark: SparkSession, app_id: str, version: int, metadata: str) -> Iterator[None]:
    """Delta's session-level idempotence for DML (MERGE has no writer options)."""
    spark.conf.set(_TXN_APP, app_id)
    spark.conf.set(_TXN_VERSION, str(version))
    spark.conf.set(_USER_METADATA, metadata)
    try:
        yield
    finally:
        for key in (_TXN_APP, _TXN_VERSION, _USER_METADATA):
            spark.conf.unset(key)


def _batch_metric(m: Metric, sql_type: str) -> Column:
    """One metric of a batch's rows, in its stored type; a sum adds in that type, as wide as the
    declaration made it (a long's sum would overflow a bigint)."""
    if m.func == "count":
        return F.count(F.lit(1)).cast(sql_type)
    assert m.field is not None  # every metric but count names its field
    col = F.col(m.field)
    return (F.sum(col.cast(sql_type)) if m.func == "sum" else getattr(F, m.func)(col)).cast(sql_type)


def batch_aggregates(bronze: DataFrame, schema: Schema, aggs: AggregatesSpec, window: str) -> DataFrame:
    """Per declared group and event-time window: the declared metrics of these rows."""
    types = tables.aggregate_columns(schema, aggs)
    exprs = [_batch_metric(m, types[m.name]).alias(m.name) for m in aggs.parsed_metrics()]
    return (
        bronze.groupBy(*aggs.group_by, F.window(schema.event_time, window).alias("w"))
        .agg(*exprs)
        .select(
            *aggs.group_by,
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            *[m.name for m in aggs.parsed_metrics()],
        )
    )


def _merged(m: Metric) -> str:
    """How a metric of the table and one of the batch combine: exactly, in any order."""
    t, s = f"t.`{m.name}`", f"s.`{m.name}`"
    if m.func in ("count", "sum"):  # NULL (no non-null value yet) is the identity
        return f"CASE WHEN {t} IS NULL THEN {s} WHEN {s} IS NULL THEN {t} ELSE {t} + {s} END"
    return f"{'least' if m.func == 'min' else 'greatest'}({t}, {s})"  # both skip NULLs


def merge_aggregates(
    spark: SparkSession,
    path: str,
    partial: DataFrame,
    aggs: AggregatesSpec,
    app_id: str,
    version: int,
    metadata: str,
    first_window: datetime | None = None,
) -> None:
    """Add partial aggregates to the table in one idempotent MERGE whose commit holds `metadata`.

    Increments are only exact if applied once; the txn session conf (`app_id`,
    `version`) makes Delta skip the whole MERGE when it was already committed.
    `first_window` (the earliest window start in `partial`) lets Delta skip, by file
    statistics, the files of older windows, which no row of `partial` can match:
    the MERGE then costs what it touches, not the table's whole history.
    Group keys compare null-safely (`<=>`): an optional group-by field may be null.
    `first_batch_id`/`last_batch_id` of a row record the `version` (the newest bronze
    batch of the merge) that inserted it and that last added to it.
    """
    from delta.tables import DeltaTable

    batch = F.lit(version).cast("bigint")
    source = partial.withColumn("_batch", batch)
    metrics = aggs.parsed_metrics()
    condition = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in tables.aggregate_key(aggs))
    if first_window is not None:
        condition += f" AND t.window_start >= timestamp'{first_window.strftime('%Y-%m-%d %H:%M:%S.%f')}+00:00'"
    inserted = {
        f"`{c}`": f"s.`{c}`" for c in (*aggs.group_by, "window_start", "window_end", *[m.name for m in metrics])
    }
    with commit_lock(path), _txn(spark, app_id, version, metadata):
        (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(source.alias("s"), condition)
            .whenMatchedUpdate(set={**{f"`{m.name}`": _merged(m) for m in metrics}, "last_batch_id": "s._batch"})
            .whenNotMatchedInsert(values={**inserted, "first_batch_id": "s._batch", "last_batch_id": "s._batch"})
            .execute()
        )

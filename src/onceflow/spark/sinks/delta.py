"""Writes to the Delta sinks: bronze and quarantine appends, the aggregates' and the keyed table's MERGEs.

Bronze and quarantine get exactly one commit per micro-batch, made idempotent by
Delta's `txnAppId`/`txnVersion` (= batch id) and carrying the batch's ledger entry
in its commit metadata. A replayed batch is therefore skipped table by table, and
each table alone can tell how far it got. Empty batches still commit (an empty
append) so every ledger stays contiguous. The aggregates follower
(onceflow.spark.follower) merges several batches per commit, one entry each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from onceflow import tables
from onceflow.cdc.spec import KeyedSpec
from onceflow.ledger import MAINTENANCE_KEY, LedgerEntry
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
def _session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Session settings for the DML inside (DML has no writer options), unset after it."""
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in settings:
            spark.conf.unset(key)


def _txn(spark: SparkSession, app_id: str, version: int, metadata: str) -> AbstractContextManager[None]:
    """Delta's session-level idempotence for DML, and the commit's metadata (the ledger entries)."""
    return _session_conf(spark, {_TXN_APP: app_id, _TXN_VERSION: str(version), _USER_METADATA: metadata})


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
        bronze.groupBy(*aggs.group_by, F.window(schema.event_time_column, window).alias("w"))
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


# -- the keyed table (sinks.current, docs/cdc.md) -----------------------------------------------
def _sequence(keyed: KeyedSpec) -> Column:
    """A bronze row's sequence: Debezium's is in bronze (`_sequence`); a plain event's is made
    of its declared fields, into the same struct."""
    if keyed.debezium:
        return F.col("_sequence")
    return F.struct(*[F.col(p.name).alias(p.column) for p in keyed.sequence])


def _deleted(keyed: KeyedSpec) -> Column:
    """Whether a bronze row's change deletes its key: Debezium's op 'd', else `delete_when`."""
    if keyed.debezium:
        return F.col("_op") == "d"
    d = keyed.delete_when
    return F.coalesce(F.col(d.name) == F.lit(d.value), F.lit(False))


def newest_changes(bronze: DataFrame, schema: Schema, keyed: KeyedSpec) -> DataFrame:
    """Per key, the change of these bronze rows that wins (cdc/fold.py): the greatest
    (sequence, partition, offset), so duplicates and arrival order do not matter. A delete keeps
    its key and sequence only: its row in the table is a tombstone. In the table's columns."""
    keys = set(keyed.key_names)
    deleted = _deleted(keyed)
    change = F.struct(
        *[(F.col(f.name) if f.name in keys else F.when(~deleted, F.col(f.name))).alias(f.name) for f in schema.fields],
        _sequence(keyed).alias("_sequence"),
        F.col("_partition"),
        F.col("_offset"),
        deleted.alias("_deleted"),
        F.col("_batch_id"),
        F.col("_generation"),
    )
    order = F.struct(_sequence(keyed), F.col("_partition"), F.col("_offset"))
    return (
        bronze.groupBy(*keyed.key_names)
        .agg(F.max_by(change, order).alias("c"))
        .select("c.*")
        .withColumn("_changed_at", F.current_timestamp())
    )


def merge_current(
    spark: SparkSession, path: str, changes: DataFrame, keyed: KeyedSpec, app_id: str, version: int, metadata: str
) -> None:
    """Apply the newest change per key (newest_changes) in one idempotent MERGE whose commit
    holds `metadata`: a key's row is replaced only by a change that is newer by (sequence,
    partition, offset), so a late older change, a duplicate or a replayed batch changes nothing,
    and a tombstone keeps an older change from bringing its key back. The txn session conf
    makes Delta skip the whole MERGE if this group was already committed."""
    from delta.tables import DeltaTable

    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keyed.key_names)
    newer = "struct(s._sequence, s._partition, s._offset) > struct(t._sequence, t._partition, t._offset)"
    columns: dict[str, str | Column] = {f"`{c}`": f"s.`{c}`" for c in changes.columns}
    with commit_lock(path), _txn(spark, app_id, version, metadata):
        (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(changes.alias("s"), on)
            .whenMatchedUpdate(condition=newer, set=columns)
            .whenNotMatchedInsert(values=columns)
            .execute()
        )


def purge_tombstones(spark: SparkSession, path: str, retention_seconds: float) -> int:
    """Delete the keyed table's tombstones applied more than `retention_seconds` ago, in a commit
    marked as maintenance (it holds no ledger entry: the audit does not count it as a batch).
    The number of tombstones removed."""
    from delta.tables import DeltaTable

    cutoff = f"current_timestamp() - make_dt_interval(0, 0, 0, {float(retention_seconds)})"
    condition = f"_deleted AND _changed_at < {cutoff}"
    table = DeltaTable.forPath(spark, path)
    if table.toDF().where(condition).limit(1).count() == 0:
        return 0  # nothing to purge: no commit at all
    marked = {_USER_METADATA: json.dumps({MAINTENANCE_KEY: "purge tombstones past tombstone_retention"})}
    with commit_lock(path), _session_conf(spark, marked):
        table.delete(condition)
    metrics = table.history(1).select("operationMetrics").first()
    return int((metrics[0] or {}).get("numDeletedRows", 0)) if metrics else 0

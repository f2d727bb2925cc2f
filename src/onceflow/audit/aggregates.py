"""The streaming aggregate table vs a batch recomputation from bronze, row for row.

The job merges each batch's per-window metrics into the table (late events are
added, never dropped), so at every committed point the table must equal
`GROUP BY <group_by>, window(<event_time>)` over the bronze rows of the batches
the aggregates ledger holds, with the declared metrics computed over all of them
at once (not merged batch by batch, as the job does). A full outer join on
(group_by, window_start) finds windows missing on either side and windows whose
metrics differ.

An incremental audit compares only the windows touched by the newly audited
bronze rows, recomputed from every bronze row of those windows.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from onceflow import tables
from onceflow.audit.sink_tables import read_table
from onceflow.config import Pipeline
from onceflow.reconcile import (
    MAX_RANGES,
    MAX_SAMPLES,
    AuditScope,
    Check,
    CheckGroup,
    CheckStatus,
    CommittedPoint,
    check,
    jsonable,
)
from onceflow.schema.model import Metric
from onceflow.sink_kinds import SinkName

# relative difference allowed between a streamed and a recomputed double metric (exact for the others)
DOUBLE_TOLERANCE = 1e-9


def _metric(m: Metric, sql_type: str) -> Column:
    """One metric over all of bronze, in SQL; a sum adds in the column's own type, as wide as
    the declaration made it (a long's sum would overflow a bigint)."""
    if m.func == "count":
        return F.count(F.lit(1)).cast(sql_type)
    arg = f"CAST(`{m.field}` AS {sql_type})" if m.func == "sum" else f"`{m.field}`"
    return F.expr(f"{m.func}({arg})").cast(sql_type)


def recompute(bronze: DataFrame, pipeline: Pipeline) -> DataFrame:
    """Per declared group and event-time window: the declared metrics (the batch truth)."""
    aggs, schema = pipeline.sinks.aggregates, pipeline.schema
    assert aggs is not None  # called for a pipeline with sinks.aggregates
    types = tables.aggregate_columns(schema, aggs)
    metrics = aggs.parsed_metrics()
    exprs = [_metric(m, types[m.name]).alias(m.name) for m in metrics]
    return (
        bronze.groupBy(*aggs.group_by, F.window(schema.event_time_column, aggs.window).alias("w"))
        .agg(*exprs)
        .select(
            *aggs.group_by,
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            *[m.name for m in metrics],
        )
    )


@dataclass
class AggregateReconciliation:
    check: Check
    table: DataFrame | None  # the aggregate rows in scope (validated by the GX aggregates suite)
    recomputed_rows: int
    findings: list[dict]


def reconcile_aggregates(
    spark: SparkSession, pipeline: Pipeline, point: CommittedPoint, audited_bronze: DataFrame
) -> AggregateReconciliation:
    """Compare the aggregate table (pinned version) with bronze recomputed up to the
    aggregates ledger's end; `audited_bronze` (the audited range) selects the windows
    an incremental audit looks at."""
    sink = pipeline.sinks.aggregates
    view = point.sinks.get(SinkName.AGGREGATES)
    title = "streaming aggregates equal a batch recomputation from bronze, row for row"
    if sink is None or view is None or not view.exists:
        return AggregateReconciliation(
            Check(
                "aggregates",
                title,
                CheckStatus.SKIPPED,
                detail="the pipeline has no aggregates sink",
                group=CheckGroup.AGGREGATES,
            ),
            None,
            0,
            [],
        )
    # bronze as the aggregates saw it: every offset below the aggregates ledger's end
    agg_end = view.end
    covered = {p: (point.first.get(p, 0), e) for p, e in agg_end.items() if point.first.get(p, 0) < e}
    if covered == point.ranges():  # a full audit of a stopped job: the audited (cached) rows are exactly these
        bronze = audited_bronze
    else:
        bronze = read_table(
            spark, pipeline.resolve(pipeline.sinks.bronze.path), point.sinks[SinkName.BRONZE].version, covered
        )
    key = list(tables.aggregate_key(sink))
    values = ["window_end", *[m.name for m in sink.parsed_metrics()]]
    columns = [*key, *values]
    table = read_table(spark, pipeline.resolve(sink.path), view.version, None).select(*columns)

    if point.mode == AuditScope.SINCE_LAST and point.watermark:
        touched = recompute(audited_bronze, pipeline).select(*key).distinct()
        bounds = touched.agg(F.min("window_start").alias("lo"), F.max("window_start").alias("hi")).first()
        assert bounds is not None  # an aggregate without groups has one row
        if bounds["lo"] is None:
            return AggregateReconciliation(
                check(
                    "aggregates",
                    title,
                    True,
                    expected=0,
                    observed=0,
                    detail="no new bronze rows: no window to compare",
                    group=CheckGroup.AGGREGATES,
                ),
                table.limit(0),
                0,
                [],
            )
        # only bronze rows that can fall into the touched windows (Delta skips files by event_time stats)
        width = int(sink.window_seconds)
        event_time = F.col(pipeline.schema.event_time_column)
        bronze = bronze.where(
            (event_time >= F.lit(bounds["lo"]))
            & (event_time < F.lit(bounds["hi"]) + F.expr(f"INTERVAL {width} SECONDS"))
        )
        expected = _semi(recompute(bronze, pipeline), touched, key)
        table = _semi(table, touched, key)
    else:
        expected = recompute(bronze, pipeline)

    e = expected.select(*key, *[F.col(c).alias(f"exp_{c}") for c in values]).withColumn("_e", F.lit(True))
    t = table.select(*key, *[F.col(c).alias(f"obs_{c}") for c in values]).withColumn("_t", F.lit(True))
    on = [e[c].eqNullSafe(t[c]) for c in key]  # an optional group-by field may be null
    j = e.join(t, on, "full_outer").select(
        *[F.coalesce(e[c], t[c]).alias(c) for c in key], *[c for c in e.columns + t.columns if c not in key]
    )
    types = tables.aggregate_columns(pipeline.schema, sink)
    differs = F.lit(False)
    for c in values:
        exp, obs = F.col(f"exp_{c}"), F.col(f"obs_{c}")
        if types.get(c) == "DOUBLE":  # a sum of doubles depends on the order it was added in: batch by batch
            same = exp.eqNullSafe(obs) | (F.abs(exp - obs) <= F.greatest(F.lit(1.0), F.abs(exp)) * DOUBLE_TOLERANCE)
        else:
            same = exp.eqNullSafe(obs)
        differs = differs | ~same
    j = j.withColumn(
        "kind",
        F.when(F.col("_t").isNull(), "missing_in_table")
        .when(F.col("_e").isNull(), "not_in_bronze")
        .when(differs, "differs"),
    )
    stats = j.agg(
        F.count(F.col("_e")).alias("expected"),
        F.count(F.col("_t")).alias("observed"),
        F.count(F.col("kind")).alias("bad"),
    ).first()
    assert stats is not None  # an aggregate without groups has one row
    samples, findings = [], []
    if stats["bad"]:
        shown = [f"{side}_{c}" for c in values if c != "window_end" for side in ("exp", "obs")]
        rows = j.where(F.col("kind").isNotNull()).orderBy(*key).select("kind", *key, *shown).limit(MAX_RANGES).collect()
        findings = [
            {
                "check": "aggregates",
                "partition": None,
                "start": None,
                "end": None,
                "count": 1,
                "key": " / ".join(str(r[c]) for c in sink.group_by)
                + f" @ {r['window_start'].isoformat() if r['window_start'] else None}",
                "kind": r["kind"],
            }
            for r in rows
        ]
        samples = [jsonable(r.asDict()) for r in rows[:MAX_SAMPLES]]
    detail = ""
    if stats["bad"]:
        metrics = [c for c in values if c != "window_end"]
        detail = f"{stats['bad']} window(s) differ: " + "; ".join(
            f"{s['kind']} {' / '.join(str(s[c]) for c in sink.group_by)} {s['window_start']}: "
            + ", ".join(f"{m} {s[f'exp_{m}']} expected, {s[f'obs_{m}']} in table" for m in metrics)
            for s in samples
        )
    result = check(
        "aggregates",
        title,
        not stats["bad"],
        expected={"windows": stats["expected"], "differing": 0},
        observed={"windows": stats["observed"], "differing": stats["bad"]},
        samples=samples,
        detail=detail,
        group=CheckGroup.AGGREGATES,
    )
    return AggregateReconciliation(result, table, stats["expected"], findings)


def _semi(df: DataFrame, keys: DataFrame, columns: list[str]) -> DataFrame:
    """The rows of `df` whose key is in `keys`, comparing null-safely."""
    return df.join(keys, [df[c].eqNullSafe(keys[c]) for c in columns], "left_semi")

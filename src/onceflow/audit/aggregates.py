"""The streaming aggregate table vs a batch recomputation from bronze, row for row.

The job merges each batch's per-window sums into the table (late events are
added, never dropped), so at every committed point the table must equal
`GROUP BY account_id, window(event_time)` over the bronze rows of the batches
the aggregates ledger holds. A full outer join on (account_id, window_start)
finds windows missing on either side and windows whose counts or sums differ.

An incremental audit compares only the windows touched by the newly audited
bronze rows, recomputed from every bronze row of those windows.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from onceflow.audit.rows import read_table
from onceflow.config import Pipeline
from onceflow.reconcile import MAX_RANGES, MAX_SAMPLES, SKIPPED, Check, CommittedPoint, check, jsonable

COLUMNS = ("account_id", "window_start", "window_end", "events", "amount_sum")
KEY = ("account_id", "window_start")


def recompute(bronze: DataFrame, window: str) -> DataFrame:
    """Per account and event-time window: events and amount sum (the batch truth)."""
    return (bronze.groupBy("account_id", F.window("event_time", window).alias("w"))
            .agg(F.count(F.lit(1)).alias("events"), F.sum("amount").cast("decimal(28,2)").alias("amount_sum"))
            .select("account_id", F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                    "events", "amount_sum"))


@dataclass
class AggregateReconciliation:
    check: Check
    table: DataFrame | None  # the aggregate rows in scope (validated by the GX aggregates suite)
    recomputed_rows: int
    findings: list[dict]


def reconcile_aggregates(spark: SparkSession, pipeline: Pipeline, point: CommittedPoint,
                         audited_bronze: DataFrame) -> AggregateReconciliation:
    """Compare the aggregate table (pinned version) with bronze recomputed up to the
    aggregates ledger's end; `audited_bronze` (the audited range) selects the windows
    an incremental audit looks at."""
    sink = pipeline.sinks.aggregates
    view = point.sinks.get("aggregates")
    title = "streaming aggregates equal a batch recomputation from bronze, row for row"
    if sink is None or view is None or not view.exists:
        return AggregateReconciliation(
            Check("aggregates", title, SKIPPED, detail="the pipeline has no aggregates sink"), None, 0, [])
    # bronze as the aggregates saw it: every offset below the aggregates ledger's end
    agg_end = view.end
    covered = {p: (point.first.get(p, 0), e) for p, e in agg_end.items() if point.first.get(p, 0) < e}
    if covered == point.ranges():  # a full audit of a stopped job: the audited (cached) rows are exactly these
        bronze = audited_bronze
    else:
        bronze = read_table(spark, pipeline.resolve(pipeline.sinks.bronze.path), point.sinks["bronze"].version,
                            covered)
    table = read_table(spark, pipeline.resolve(sink.path), view.version, None).select(*COLUMNS)

    if point.mode == "since-last" and point.watermark:
        touched = recompute(audited_bronze, sink.window).select(*KEY).distinct()
        bounds = touched.agg(F.min("window_start").alias("lo"), F.max("window_start").alias("hi")).first()
        if bounds["lo"] is None:
            return AggregateReconciliation(check("aggregates", title, True, expected=0, observed=0,
                                                 detail="no new bronze rows: no window to compare"),
                                           table.limit(0), 0, [])
        # only bronze rows that can fall into the touched windows (Delta skips files by event_time stats)
        from onceflow.config import duration_seconds

        width = int(duration_seconds(sink.window))
        bronze = bronze.where((F.col("event_time") >= F.lit(bounds["lo"])) &
                              (F.col("event_time") < F.lit(bounds["hi"]) + F.expr(f"INTERVAL {width} SECONDS")))
        expected = recompute(bronze, sink.window).join(touched, list(KEY), "left_semi")
        table = table.join(touched, list(KEY), "left_semi")
    else:
        expected = recompute(bronze, sink.window)

    e = expected.select(*KEY, *[F.col(c).alias(f"exp_{c}") for c in COLUMNS if c not in KEY])
    t = table.select(*KEY, *[F.col(c).alias(f"obs_{c}") for c in COLUMNS if c not in KEY])
    j = (e.withColumn("_e", F.lit(True)).join(t.withColumn("_t", F.lit(True)), list(KEY), "full_outer")
         .withColumn("kind", F.when(F.col("_t").isNull(), "missing_in_table")
                     .when(F.col("_e").isNull(), "not_in_bronze")
                     .when((F.col("exp_events") != F.col("obs_events")) |
                           (F.col("exp_amount_sum") != F.col("obs_amount_sum")) |
                           (F.col("exp_window_end") != F.col("obs_window_end")), "differs")))
    stats = j.agg(F.count(F.col("_e")).alias("expected"), F.count(F.col("_t")).alias("observed"),
                  F.count(F.col("kind")).alias("bad")).first()
    samples, findings = [], []
    if stats["bad"]:
        rows = (j.where(F.col("kind").isNotNull()).orderBy(*KEY)
                .select("kind", *KEY, "exp_events", "obs_events", "exp_amount_sum", "obs_amount_sum")
                .limit(MAX_RANGES).collect())
        findings = [{"check": "aggregates", "partition": None, "start": None, "end": None, "count": 1,
                     "key": f"{r['account_id']} @ {r['window_start'].isoformat() if r['window_start'] else None}",
                     "kind": r["kind"]} for r in rows]
        samples = [jsonable(r.asDict()) for r in rows[:MAX_SAMPLES]]
    detail = ""
    if stats["bad"]:
        detail = f"{stats['bad']} window(s) differ: " + "; ".join(
            f"{s['kind']} {s['account_id']} {s['window_start']}: events {s['exp_events']} expected, "
            f"{s['obs_events']} in table; amount {s['exp_amount_sum']} expected, {s['obs_amount_sum']} in table"
            for s in samples)
    result = check("aggregates", title, not stats["bad"],
                   expected={"windows": stats["expected"], "differing": 0},
                   observed={"windows": stats["observed"], "differing": stats["bad"]},
                   samples=samples, detail=detail)
    return AggregateReconciliation(result, table, stats["expected"], findings)


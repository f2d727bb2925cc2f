"""The aggregates MERGE with and without deletion vectors, as the table grows.

    .venv/bin/python benchmarks/aggregates_merge.py [--accounts 2000] [--old-windows 0,10,250] [--json F]

For each starting size (`--old-windows` one-minute windows of `--accounts` rows
already in the table), two tables — one with `delta.enableDeletionVectors`, one
without — get the same `--merges` MERGEs, alternating, each shaped like a batch
of a live stream: every account adds to the newest window and opens the next.
It reports the median seconds per MERGE (after two warm-ups) and the rows the
last MERGE copied unchanged into new files (Delta's `numTargetRowsCopied`).
Quote the ratios; the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness import emit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WARM_UP = 2


def partial(spark, accounts: int, first_window: int, windows: int):
    """A batch's partial aggregates: `accounts` rows in each of `windows` windows."""
    from pyspark.sql import functions as F

    return (
        spark.range(accounts * windows)
        .select(
            F.format_string("acct-%05d", (F.col("id") % accounts).cast("int")).alias("account_id"),
            (F.lit(T0) + F.make_interval(mins=F.lit(first_window) + (F.col("id") / accounts).cast("int"))).alias(
                "window_start"
            ),
        )
        .withColumn("window_end", F.col("window_start") + F.expr("interval 1 minute"))
        .withColumn("events", F.lit(3).cast("bigint"))
        .withColumn("amount_sum", F.lit(10).cast("decimal(28,2)"))
    )


def measure(spark, work: Path, accounts: int, old_windows: int, merges: int) -> list[dict]:
    from devkit.delta_history import merge_metrics
    from devkit.pipelines import PAYMENTS_AGGREGATES, PAYMENTS_SCHEMA
    from onceflow import tables
    from onceflow.ledger import LedgerEntry
    from onceflow.schema.model import AggregatesSpec
    from onceflow.spark.sinks import delta

    aggs = AggregatesSpec.model_validate(PAYMENTS_AGGREGATES)

    def merge(path: str, partial_aggregates, batch: int, first_window: datetime | None = None) -> None:
        """One MERGE as the follower makes it: the txn of the batch's ledger entry, the entry as metadata."""
        e = LedgerEntry("bench", "aggregates", 0, batch, "bench", {0: batch}, {0: batch + 1})
        delta.merge_aggregates(spark, path, partial_aggregates, aggs, e.app_id, e.batch_id, e.to_json(), first_window)

    paths = {dv: str(work / f"{old_windows}-{'dv' if dv else 'plain'}") for dv in (True, False)}
    for dv, path in paths.items():
        delta.ensure_table(
            spark, path, tables.aggregates_ddl(PAYMENTS_SCHEMA, aggs), {tables.DELETION_VECTORS: "true"} if dv else None
        )
        if old_windows:
            merge(path, partial(spark, accounts, 0, old_windows), 0)
    seconds: dict[bool, list[float]] = {True: [], False: []}
    for i in range(merges):
        newest = max(old_windows - 1, 0) + i
        for dv, path in paths.items():
            started = time.monotonic()
            merge(path, partial(spark, accounts, newest, 2), i + 1, T0 + timedelta(minutes=newest))
            seconds[dv].append(time.monotonic() - started)
    out = []
    for dv, path in paths.items():
        last = merge_metrics(path)[-1]
        out.append(
            {
                "deletion_vectors": dv,
                "rows_before": old_windows * accounts,
                "median_seconds": round(statistics.median(seconds[dv][WARM_UP:]), 3),
                "seconds": [round(s, 2) for s in seconds[dv]],
                "last_merge_rows_copied": int(last.get("numTargetRowsCopied", 0)),
            }
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--accounts", type=int, default=2000)
    ap.add_argument("--old-windows", default="0,10,250", help="comma-separated starting sizes, in windows")
    ap.add_argument("--merges", type=int, default=8)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    if args.merges <= WARM_UP:
        ap.error(f"--merges must be more than the {WARM_UP} warm-up merges")

    from onceflow.spark.session import build_session

    spark = build_session("onceflow-bench-merge", master="local[*]")
    work = Path(tempfile.mkdtemp(prefix="onceflow-bench-merge-"))
    rows = []
    for old in (int(x) for x in args.old_windows.split(",") if x.strip()):
        print(
            f"{old * args.accounts} rows in the table: {args.merges} MERGEs with and without deletion vectors …",
            flush=True,
        )
        rows += measure(spark, work, args.accounts, old, args.merges)
    spark.stop()
    figures = {"accounts": args.accounts, "merges": args.merges, "cores": os.cpu_count(), "runs": rows}
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a row check broke: runs of offending offsets as ranges [start, end) per partition, the
first of them for the report, and the filter that finds the rows at given coordinates."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from onceflow.reconcile import MAX_RANGES


def islands(df: DataFrame, order_col: str, flag: Column, base: DataFrame | None = None) -> DataFrame:
    """Runs of consecutive flagged rows per partition → (partition, start, end, count).

    With `base`, runs are consecutive in the base's record order (records between
    two lost ones that are not records — transaction markers, aborted records — do
    not split a range); without it, in raw offsets.
    """
    if base is not None:
        w = Window.partitionBy("_partition").orderBy(order_col)
        seq = base.withColumn("_rn_all", F.row_number().over(w)).where(flag)
        seq = seq.withColumn("_grp", F.col("_rn_all") - F.row_number().over(w))
    else:
        seq = df.where(flag).withColumn(
            "_grp", F.col(order_col) - F.row_number().over(Window.partitionBy("_partition").orderBy(order_col))
        )
    return (
        seq.groupBy("_partition", "_grp")
        .agg(F.min(order_col).alias("start"), (F.max(order_col) + 1).alias("end"), F.count(F.lit(1)).alias("count"))
        .select(F.col("_partition").alias("partition"), "start", "end", "count")
    )


def first_ranges(df: DataFrame) -> tuple[list[dict], int]:
    """The first MAX_RANGES ranges (partition, then start order) and how many there are."""
    total = df.count()
    rows = df.orderBy("partition", "start").limit(MAX_RANGES).collect()
    return [r.asDict() for r in rows], total


def at_keys(keys: list[tuple[int, int]]) -> Column:
    """Rows at these (partition, offset) coordinates."""
    wanted = F.lit(False)
    for p, o in keys:
        wanted = wanted | ((F.col("_partition") == p) & (F.col("_offset") == o))
    return wanted


def ranges_text(what: str, ranges: list[dict], total: int) -> str:
    """'lost: partition 0 [5, 9) (4), ...', the first 20 ranges and how many more."""
    if not ranges:
        return ""
    shown = ", ".join(f"partition {r['partition']} [{r['start']}, {r['end']}) ({r['count']})" for r in ranges[:20])
    more = f" … and {total - 20} more ranges" if total > 20 else ""
    return f"{what}: {shown}{more}"

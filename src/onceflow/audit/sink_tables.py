"""The sink tables as the audit reads them: at the Delta version pinned by the committed point,
restricted to the audited ranges (Delta skips files by their statistics)."""

from __future__ import annotations

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F


def range_filter(ranges: dict[int, tuple[int, int]]) -> Column:
    """Rows whose (_partition, _offset) lie in the audited ranges (Delta skips files by their stats)."""
    cond = F.lit(False)
    for p, (start, end) in sorted(ranges.items()):
        cond = cond | ((F.col("_partition") == p) & (F.col("_offset") >= start) & (F.col("_offset") < end))
    return cond


def read_table(spark: SparkSession, path: str, version: int | None, ranges: dict[int, tuple[int, int]] | None):
    """A sink table at the pinned version, restricted to the audited ranges."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(path)
    return df.where(range_filter(ranges)) if ranges is not None else df

"""Sink floors: per Kafka partition, the offset below which a sink already holds every row.

A sink gets a floor when it holds rows an earlier generation committed (a restored
copy, a new checkpoint from the ledgers) and the aggregates have one at their own
committed offsets; rows below it are skipped and a ledger range starts at it. Both
the batch writer and the follower apply it, here.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def above(floor: dict[int, int]) -> Column:
    """True for rows at or above the floor (the sink holds every row below it)."""
    keep = F.lit(True)
    for p, o in floor.items():
        keep = keep & ~((F.col("_partition") == p) & (F.col("_offset") < o))
    return keep


def raised(offsets: dict[int, int], floor: dict[int, int]) -> dict[int, int]:
    """A ledger range bound moved up to the floor: the rows below it are held already."""
    return {p: max(o, floor.get(p, o)) for p, o in offsets.items()}

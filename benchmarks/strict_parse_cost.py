"""What strict input costs: the job's validation with and without the whole-text checks.

`try_parse_json` alone reads the first JSON value and ignores the rest; strict
input also checks the whole text (UTF-8 validity, nesting depth and number length,
one bracketed value and nothing after it, lone surrogate escapes, duplicate keys). This times `parse_events` over
the same generated payments records (no Kafka: a DataFrame of raw values),
alternating the shipped, strict validation (a) with one whose whole-text checks
are switched off (b) in one JVM, and reports the median of the rounds' ratios.

    python benchmarks/strict_parse_cost.py --records 500000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC

from harness import emit


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--large-ratio", type=float, default=0.0, help="share of large valid events (generate/large.py)")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)

    from datetime import datetime

    from pyspark.sql import functions as F

    from devkit.pipelines import PAYMENTS_SCHEMA
    from onceflow.generate.records import Generator
    from onceflow.spark import parse
    from onceflow.spark.session import build_session

    spark = build_session("onceflow-bench-strict-parse", master="local[2]")
    # the same records as before large ones were made (--large-ratio adds them: their bytes cost more)
    gen = Generator(PAYMENTS_SCHEMA, seed=1, group_by=("account_id",), large_ratio=args.large_ratio)
    values = [gen.record(0.01).value for _ in range(min(args.records, 50_000))]
    now = datetime(2026, 1, 1, tzinfo=UTC)
    base = spark.createDataFrame(
        [(None, v, "t", 0, i, now, 0) for i, v in enumerate(values)],
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int",
    )
    copies = max(1, args.records // len(values))  # the same records repeated to the asked count
    raw = base.crossJoin(spark.range(copies).select(F.col("id").alias("_copy"))).drop("_copy").cache()
    total = raw.count()

    def timed(strict: bool) -> float:
        started = time.monotonic()
        # whole_text=False: the first value's own checks only, as before strict input
        parse.parse_events(raw, PAYMENTS_SCHEMA, whole_text=strict).groupBy("reason").count().collect()
        return time.monotonic() - started

    timed(True), timed(False)  # warm-up: code generation, caches
    rounds = []
    for _ in range(args.rounds):
        a, b = timed(True), timed(False)
        rounds.append({"strict_s": round(a, 3), "lenient_s": round(b, 3), "ratio": round(a / b, 3)})
    emit(
        {
            "records": total,
            "rounds": rounds,
            "median_ratio_strict_over_lenient": statistics.median(r["ratio"] for r in rounds),
            "strict_records_per_s": round(total / statistics.median(r["strict_s"] for r in rounds)),
        },
        args.json,
    )
    spark.stop()


if __name__ == "__main__":
    main()

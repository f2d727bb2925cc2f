"""What Delta auto compaction costs and saves over a long run of small batches.

    .venv/bin/python benchmarks/compaction.py [--events 120000] [--max-offsets 2000] [--rounds 2] [--json F]

A stream that runs for days makes many small batches, and every batch adds files:
one or more per Kafka partition to bronze, one to quarantine, a few to aggregates.
The same events are ingested in one Spark session, on fresh tables, after a
warm-up: without auto compaction (`auto_compact: false`) and with it (the
default; Delta compacts once `spark.databricks.delta.autoCompact.minNumFiles`,
default 50, small files have gathered), alternating over `--rounds` (the order
flips each round, so neither side always runs on the colder JVM). Reported per
run: ingest seconds, the median and the slowest batch, compaction commits, data
files left per table, and the median seconds of a full scan of bronze afterwards
(what audits and downstream readers pay); the ratios are of the medians over
rounds. Quote the ratios; the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from harness import emit, run_exactly_once

from devkit.kafka import produce_events, scratch_broker

SCANS = 3


def _pipeline(folder: Path, bootstrap: str, topic: str, max_offsets: int, compact: bool):
    from devkit.pipelines import PAYMENTS_AGGREGATES, pipeline_file

    return pipeline_file(
        folder,
        bootstrap,
        topic,
        name=f"compact_{folder.name.replace('-', '_')}",
        max_offsets=max_offsets,
        sinks={
            "bronze": {"path": str(folder / "bronze"), "auto_compact": compact},
            "quarantine": {"path": str(folder / "quarantine"), "auto_compact": compact},
            "aggregates": {"path": str(folder / "aggregates"), "auto_compact": compact, **PAYMENTS_AGGREGATES},
        },
    )[1]


def measure(spark, pipeline) -> dict:
    """Ingest everything (available-now), then look at what the tables hold."""
    from pyspark.sql import functions as F

    from onceflow.ledger import read_ledger
    from onceflow.sinks import table_paths
    from onceflow.spark.ingest import run_ingest
    from onceflow.state.status import StatusLog

    started = time.monotonic()
    result = run_ingest(pipeline, mode="available-now", spark=spark)
    seconds = time.monotonic() - started
    assert result.status == "finished", result
    batches = [
        e["batch_duration_ms"] / 1000
        for e in StatusLog(pipeline.state_path, pipeline.name).last_run()
        if e["event"] == "progress" and e.get("input_rows")
    ]
    tables = {}
    for name, path in table_paths(pipeline).items():
        ledger = read_ledger(path)
        tables[name] = {
            "files": len(spark.read.format("delta").load(path).inputFiles()),
            "batches": len(ledger.entries),
            "compactions": len(ledger.maintenance),
        }
    bronze = spark.read.format("delta").load(table_paths(pipeline)["bronze"])
    scans = []
    for _ in range(SCANS + 1):  # the first scan warms the file listing; not counted
        t = time.monotonic()
        bronze.agg(F.count(F.lit(1)), F.sum("amount")).collect()
        scans.append(time.monotonic() - t)
    return {
        "auto_compact": any(t["compactions"] for t in tables.values()),
        "ingest_seconds": round(seconds, 1),
        "batches": len(batches),
        "batch_seconds_median": round(statistics.median(batches), 2),
        "batch_seconds_max": round(max(batches), 2),
        "tables": tables,
        "bronze_scan_seconds_median": round(statistics.median(scans[1:]), 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=120_000)
    ap.add_argument("--max-offsets", type=int, default=2000, help="offsets per batch: small, as a live stream's")
    ap.add_argument("--rounds", type=int, default=2, help="alternating runs of each side (order flips)")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()

    from devkit.pipelines import PAYMENTS_SCHEMA
    from onceflow.generate.producer import produce
    from onceflow.spark.session import build_session

    with scratch_broker("onceflow-compaction-") as (work, broker):
        print(f"producing {args.events} events (1% malformed) …", flush=True)
        produce_events(broker.bootstrap, "events", args.events)
        produce(broker.bootstrap, "warm", 10_000, schema=PAYMENTS_SCHEMA, partitions=4, keep_records=False)
        spark = build_session("onceflow-compaction", master="local[*]")
        run_exactly_once(spark, _pipeline(work / "warm", broker.bootstrap, "warm", args.max_offsets, True))
        runs: dict[bool, list[dict]] = {False: [], True: []}
        for r in range(args.rounds):
            for compact in (False, True) if r % 2 == 0 else (True, False):
                print(
                    f"round {r + 1}/{args.rounds}: {args.max_offsets} offsets per batch, auto compaction "
                    f"{'on' if compact else 'off'} …",
                    flush=True,
                )
                folder = work / f"{'on' if compact else 'off'}-{r}"
                runs[compact].append(
                    measure(spark, _pipeline(folder, broker.bootstrap, "events", args.max_offsets, compact))
                )
        spark.stop()

    def ratio(pick) -> float:
        return round(statistics.median(map(pick, runs[True])) / statistics.median(map(pick, runs[False])), 3)

    figures = {
        "events": args.events,
        "max_offsets_per_trigger": args.max_offsets,
        "cores": os.cpu_count(),
        "without": runs[False],
        "with": runs[True],
        "ratios": {
            "ingest_seconds_with_vs_without": ratio(lambda m: m["ingest_seconds"]),
            "batch_seconds_median_with_vs_without": ratio(lambda m: m["batch_seconds_median"]),
            "bronze_files_with_vs_without": ratio(lambda m: m["tables"]["bronze"]["files"]),
            "bronze_scan_with_vs_without": ratio(lambda m: m["bronze_scan_seconds_median"]),
        },
    }
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The exactly-once job's micro-batch against its peer: Spark's own Delta streaming sink.

    .venv/bin/python benchmarks/delta_sink_peer.py [--events 15000] [--max-offsets 1000] [--rounds 2] [--conf K=V] [--json F]

What a user would write without onceflow is `writeStream.format("delta")`, itself
exactly-once for one table (Delta's txn id per batch). So the price of onceflow's extra
guarantees (ledgers, quarantine, aggregates MERGE, audits) is the per-batch time of
(a) onceflow's exactly-once job on the shipped payments pipeline, available-now
    (bronze and quarantine appends, the aggregates MERGE, each with its ledger entry), over
(b) `readStream.format("kafka")` → onceflow's own `parse_events` + `bronze_rows` (the valid
    records: the rows (a) lands in bronze; `_batch_id` is the literal 0, a plain stream has
    no batch id) → `writeStream.format("delta")` with a checkpoint, `availableNow`.
Both read the same topic at read_committed from the earliest offset, `--max-offsets` per
trigger, in one JVM (one SparkSession), each round (a) then (b) into fresh tables and a
fresh checkpoint, after one uncounted warm-up run of each. Seconds per batch = the run's
wall time (query start-up included) / its batches, counted from the query's progress
events: (a) by run_ingest's listener (IngestResult.batches), (b) from the query's
`recentProgress`; both count every batch that ran, also one holding only transaction
markers. Each table must hold exactly the valid records produced, or the run fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from harness import add_conf_option, conf_settings, emit, run_exactly_once, scratch_broker

PARTITIONS = 4


def run_delta_sink(spark, pipeline, folder: Path) -> tuple[float, int]:
    """Seconds and batches of one available-now run of Spark's Delta sink into `folder`/bronze."""
    from onceflow.spark.kafka_read import kafka_options
    from onceflow.spark.parse import bronze_rows, parse_events

    source, schema = pipeline.source, pipeline.schema
    stream = (spark.readStream.format("kafka")
              .options(**kafka_options(source.bootstrap_servers, source.topic, "earliest",
                                       maxOffsetsPerTrigger=str(source.max_offsets(available_now=True))))
              .load())
    rows = bronze_rows(parse_events(stream, schema), schema, 0, 0)
    started = time.monotonic()
    query = (rows.writeStream.format("delta").option("checkpointLocation", str(folder / "checkpoint"))
             .trigger(availableNow=True).start(str(folder / "bronze")))
    query.awaitTermination()
    seconds = time.monotonic() - started
    # the progress list is updated by the stream thread before it ends: complete after awaitTermination
    return seconds, len({p["batchId"] for p in query.recentProgress})


def landed(spark, path: str | Path, expected: int, what: str) -> int:
    """Rows in the Delta table at `path`; fails when they are not the `expected` valid records."""
    count = spark.read.format("delta").load(str(path)).count()
    assert count == expected, f"{what}: {count} rows landed in {path}, expected the {expected} valid records"
    return count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=15_000)
    ap.add_argument("--max-offsets", type=int, default=1_000, help="maxOffsetsPerTrigger of both sides")
    ap.add_argument("--rounds", type=int, default=2, help="(a) then (b), this many times; figures are medians")
    add_conf_option(ap)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    settings = conf_settings(ap, args.conf)

    from onceflow.kafka.producer import produce
    from onceflow.sinks import table_paths
    from onceflow.spark.session import build_session
    from payments import PAYMENTS_SCHEMA, pipeline_file

    with scratch_broker("onceflow-bench-peer-") as (work, broker):
        print(f"producing {args.events} events (1% malformed) …", flush=True)
        summary = produce(broker.bootstrap, "bench", args.events, schema=PAYMENTS_SCHEMA, partitions=PARTITIONS,
                          malformed_ratio=0.01, txn_size=1000, keep_records=False)
        warm = produce(broker.bootstrap, "warm", 3 * args.max_offsets, schema=PAYMENTS_SCHEMA,
                       partitions=PARTITIONS, malformed_ratio=0.01, txn_size=1000, keep_records=False)
        valid = summary.count("committed_valid")
        spark = build_session("onceflow-bench-peer", master="local[*]", extra=settings)

        def pipeline(name: str, topic: str):
            return pipeline_file(work / name, broker.bootstrap, topic, max_offsets=args.max_offsets)[1]

        print("warming up both sides (not counted) …", flush=True)
        warm_a = pipeline("warm-a", "warm")
        run_exactly_once(spark, warm_a)
        landed(spark, table_paths(warm_a)["bronze"], warm.count("committed_valid"), "warm-up (a)")
        run_delta_sink(spark, warm_a, work / "warm-b")
        landed(spark, work / "warm-b" / "bronze", warm.count("committed_valid"), "warm-up (b)")

        side = {"onceflow": {"seconds": [], "batches": [], "rows": []},
                "delta_sink": {"seconds": [], "batches": [], "rows": []}}
        for r in range(args.rounds):  # (a) then (b) back to back: a round's ratio is a pair
            print(f"round {r + 1}/{args.rounds}: (a) onceflow exactly-once …", flush=True)
            a = pipeline(f"a-{r}", "bench")
            seconds, batches = run_exactly_once(spark, a)
            rows = landed(spark, table_paths(a)["bronze"], valid, "(a) onceflow bronze")
            for key, value in zip(("seconds", "batches", "rows"), (seconds, batches, rows)):
                side["onceflow"][key].append(value)
            print(f"round {r + 1}/{args.rounds}: (b) Spark's Delta sink …", flush=True)
            seconds, batches = run_delta_sink(spark, a, work / f"b-{r}")
            rows = landed(spark, work / f"b-{r}" / "bronze", valid, "(b) Delta sink")
            for key, value in zip(("seconds", "batches", "rows"), (seconds, batches, rows)):
                side["delta_sink"][key].append(value)
        spark.stop()

    per_batch = {name: [s / b for s, b in zip(v["seconds"], v["batches"])] for name, v in side.items()}
    medians = {name: statistics.median(v) for name, v in per_batch.items()}
    figures = {
        "events": args.events, "committed_records": summary.count("committed"), "valid_records": valid,
        "max_offsets_per_trigger": args.max_offsets, "partitions": PARTITIONS, "rounds": args.rounds,
        "cores": os.cpu_count(), "conf": args.conf,
        "seconds_per_batch": {**{f"{n}_rounds": [round(x, 2) for x in v] for n, v in per_batch.items()},
                              **{f"{n}_median": round(m, 2) for n, m in medians.items()}},
        "ratio_onceflow_vs_delta_sink_by_round": [round(a / b, 2) for a, b in zip(*per_batch.values())],
        "ratio_onceflow_vs_delta_sink_of_medians": round(medians["onceflow"] / medians["delta_sink"], 2),
        "batches": {name: v["batches"] for name, v in side.items()},
        "seconds": {name: [round(s, 1) for s in v["seconds"]] for name, v in side.items()},
        "rows_landed": {"onceflow_bronze": side["onceflow"]["rows"], "delta_sink": side["delta_sink"]["rows"]},
    }
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What putting a pipeline's tables and checkpoint on an S3 store costs against local disk.

    .venv/bin/python benchmarks/s3_vs_local.py [--events 12000] [--max-offsets 1000]
        [--throughput-events 200000] [--throughput-max-offsets 100000] [--rounds 2] [--json F]

One broker, one S3 API server (S3Proxy on localhost, onceflow.local.s3), one Spark session:
the same pipeline runs available-now over the same topic, read from earliest, once with its
tables and checkpoint on local disk and once with them in the bucket (`s3://onceflow/...`, S3A
for Spark, delta-rs and obstore for the driver's commits). Each run has its own pipeline name
and folders. After a warm-up of both stores (small batches, and one batch through Spark's Delta
writer), `--rounds` rounds alternate the order (local first, then S3 first, ...), each measuring:

1. small batches: `--events` events at `--max-offsets` per trigger (about 12 batches of ~1,000
   records, committed from the driver by delta-rs): the median seconds per batch, from the run's
   status log (`batch_duration_ms` of its `progress` events, as compaction.py reads them);
2. throughput: `--throughput-events` events at `--throughput-max-offsets` per available-now
   trigger (batches large enough for Spark's Delta writer): committed records/s of the whole run,
   the aggregates' merge at its end included.

Each ratio is S3 over local (seconds per batch: above 1 is slower on S3; records/s: below 1 is
slower on S3), the median of the rounds' own ratios: a round runs both stores back to back, so
the machine's drift between rounds cancels. S3Proxy writes to the same local disk, so what the
ratios show is the object-store protocol (HTTP requests, no rename, listing), not a network.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from harness import emit, run_exactly_once

from devkit.kafka import produce_events, scratch_broker

STORES = ("local", "s3")


def _pipeline(folder: Path, bootstrap: str, topic: str, name: str, data: str | None, **options):
    from devkit.pipelines import pipeline_file

    return pipeline_file(folder, bootstrap, topic, name=name, data=data, **options)[1]


def _batch_seconds(pipeline) -> list[float]:
    """Seconds of each batch of the pipeline's last run that read records (trigger to trigger)."""
    from onceflow.state.status import RunEvent, StatusLog

    return [
        e["batch_duration_ms"] / 1000
        for e in StatusLog(pipeline.state_path, pipeline.name).last_run()
        if e["event"] == RunEvent.PROGRESS and e.get("input_rows")
    ]


def small_batches(spark, pipeline) -> dict:
    """One available-now run of small batches: the median batch and the whole run."""
    seconds, batches = run_exactly_once(spark, pipeline)
    durations = _batch_seconds(pipeline)
    return {
        "batches": batches,
        "batch_seconds_median": round(statistics.median(durations), 3),
        "batch_seconds": [round(d, 2) for d in durations],
        "run_seconds": round(seconds, 1),
    }


def throughput(spark, pipeline, committed: int) -> dict:
    """One available-now run of large batches: committed records/s over the whole run."""
    seconds, batches = run_exactly_once(spark, pipeline)
    return {"batches": batches, "run_seconds": round(seconds, 1), "records_per_s": round(committed / seconds)}


def _ratios(s3: list[float], local: list[float]) -> list[float]:
    return [round(a / b, 3) for a, b in zip(s3, local, strict=True)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=12_000, help="events of the small-batch runs")
    ap.add_argument("--max-offsets", type=int, default=1_000, help="offsets per trigger of the small-batch runs")
    ap.add_argument("--throughput-events", type=int, default=200_000, help="events of the throughput runs")
    ap.add_argument(
        "--throughput-max-offsets",
        type=int,
        default=100_000,
        help="available-now offsets per trigger of the throughput runs (over source.driver_commit_max_offsets, "
        "50,000: Spark's Delta writer commits bronze)",
    )
    ap.add_argument(
        "--rounds", type=int, default=2, help="rounds of both stores, the order flipping each round; medians"
    )
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()

    from onceflow.local.s3 import LocalS3
    from onceflow.spark.session import build_session

    with scratch_broker("onceflow-bench-s3-") as (work, broker):
        s3 = LocalS3(home=work)
        s3.start(timeout=60)
        try:
            os.environ.update(s3.env())  # before the session: S3A takes the endpoint from the environment
            print(f"S3Proxy at {s3.endpoint}; producing {args.events} + {args.throughput_events} events …", flush=True)
            produce_events(broker.bootstrap, "warm", 3_000)
            small_committed = produce_events(broker.bootstrap, "small", args.events).count("committed")
            large_committed = produce_events(broker.bootstrap, "large", args.throughput_events).count("committed")
            spark = build_session("onceflow-bench-s3", master="local[*]")

            def data(store: str, run: str) -> str | None:
                return s3.url("bench", run) if store == "s3" else None

            # warm both stores' code paths: the driver's delta-rs commits and Spark's Delta writer
            for store in STORES:
                print(f"warm-up: {store} …", flush=True)
                run_exactly_once(
                    spark,
                    _pipeline(
                        work / f"{store}-warm",
                        broker.bootstrap,
                        "warm",
                        f"s3vl_warm_{store}",
                        data(store, "warm"),
                        max_offsets=args.max_offsets,
                    ),
                )
                spark_writer = {
                    "bootstrap_servers": broker.bootstrap,
                    "topic": "warm",
                    "starting_offsets": "earliest",
                    "max_offsets_per_trigger": args.throughput_max_offsets,
                    "driver_commit_max_offsets": 0,  # every batch through Spark's Delta writer
                }
                run_exactly_once(
                    spark,
                    _pipeline(
                        work / f"{store}-warm-spark",
                        broker.bootstrap,
                        "warm",
                        f"s3vl_warm_spark_{store}",
                        data(store, "warm-spark"),
                        source=spark_writer,
                    ),
                )

            small: dict[str, list[dict]] = {store: [] for store in STORES}
            large: dict[str, list[dict]] = {store: [] for store in STORES}
            for r in range(args.rounds):
                order = STORES if r % 2 == 0 else tuple(reversed(STORES))
                for store in order:
                    print(f"round {r + 1}/{args.rounds}, {store}: small batches ({args.max_offsets}) …", flush=True)
                    pipeline = _pipeline(
                        work / f"{store}-small-{r}",
                        broker.bootstrap,
                        "small",
                        f"s3vl_small_{store}_{r}",
                        data(store, f"small-{r}"),
                        max_offsets=args.max_offsets,
                    )
                    small[store].append(small_batches(spark, pipeline))
                for store in order:
                    print(f"round {r + 1}/{args.rounds}, {store}: throughput …", flush=True)
                    pipeline = _pipeline(
                        work / f"{store}-large-{r}",
                        broker.bootstrap,
                        "large",
                        f"s3vl_large_{store}_{r}",
                        data(store, f"large-{r}"),
                        available_now_max_offsets=args.throughput_max_offsets,
                    )
                    large[store].append(throughput(spark, pipeline, large_committed))
            spark.stop()
        finally:
            s3.stop()

    def per_store(runs: dict[str, list[dict]], key: str) -> dict[str, list[float]]:
        return {store: [run[key] for run in runs[store]] for store in STORES}

    batch = per_store(small, "batch_seconds_median")
    rate = per_store(large, "records_per_s")
    batch_ratios, rate_ratios = _ratios(batch["s3"], batch["local"]), _ratios(rate["s3"], rate["local"])
    sb = {
        "events": args.events,
        "committed_records": small_committed,
        "max_offsets_per_trigger": args.max_offsets,
        "local_batch_seconds_median": round(statistics.median(batch["local"]), 2),
        "s3_batch_seconds_median": round(statistics.median(batch["s3"]), 2),
        "ratio_s3_vs_local": round(statistics.median(batch_ratios), 3),
        "ratio_by_round": batch_ratios,
        "runs": small,
    }
    tp = {
        "events": args.throughput_events,
        "committed_records": large_committed,
        "available_now_max_offsets_per_trigger": args.throughput_max_offsets,
        "local_records_per_s": round(statistics.median(rate["local"])),
        "s3_records_per_s": round(statistics.median(rate["s3"])),
        "ratio_s3_vs_local": round(statistics.median(rate_ratios), 3),
        "ratio_by_round": rate_ratios,
        "runs": large,
    }
    figures = {"cores": os.cpu_count(), "rounds": args.rounds, "small_batches": sb, "throughput": tp}
    print(f"\n{'measure':<46} {'local':>10} {'S3':>10} {'S3/local':>9}")
    print(
        f"{f'seconds per batch ({args.max_offsets:,} offsets), median':<46} "
        f"{sb['local_batch_seconds_median']:>10} {sb['s3_batch_seconds_median']:>10} {sb['ratio_s3_vs_local']:>9}"
    )
    print(
        f"{f'records/s ({args.throughput_events:,} events, available-now)':<46} "
        f"{tp['local_records_per_s']:>10} {tp['s3_records_per_s']:>10} {tp['ratio_s3_vs_local']:>9}\n"
    )
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Ingest throughput and latency, measured in one run on this machine.

    .venv/bin/python benchmarks/ingest_throughput.py [--events 1000000] [--json out.json]
    .venv/bin/python benchmarks/ingest_throughput.py --latency-only --latency-rate 1000 --latency-seconds 75
    .venv/bin/python benchmarks/ingest_throughput.py --latency-only --latency-rate 1000 --latency-seconds 150 # + steady
    .venv/bin/python benchmarks/ingest_throughput.py --latency-only --latency-peer ...  # + Spark's Delta sink alike

(a) the exactly-once job (bronze and quarantine appends per batch, each an idempotent
    Delta commit with its ledger entry; the follower merges the aggregates from bronze,
    at the run's end in available-now, every `merge_every` in continuous mode);
(b) the same query — same parsing, same outputs — written as plain Parquet
    appends with no idempotence (Spark's at-least-once baseline);
(c) a raw confluent-kafka consumer reading the topic at read_committed (the
    ceiling of reading);
(a) and (b) alternate, `--rounds` times per trigger size, on fresh tables; the
rates are medians, the ratio (a)/(b) the median of the rounds' paired ratios.
Then p50/p95 end-to-end latency (Kafka timestamp → Delta commit holding the row)
of (a) in continuous mode with a 1 s trigger under a steady produce rate, for
bronze and, separately, for the aggregates table: over all records, after a 15 s
warm-up, and (runs of 120 s or more) after the first 60 s, the steady state.
Rates are records/s of committed records; quote the ratios, not the absolutes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from harness import emit, run_exactly_once, source_stream

from devkit import ROOT
from devkit.kafka import produce_events, scratch_broker


def _shipped_sizes() -> str:
    """The shipped pipeline's batch sizes: available-now (the headline), then continuous."""
    from onceflow.config import load

    source = load(ROOT / "pipelines" / "payments.yaml").source
    return f"{source.max_offsets(available_now=True)},{source.max_offsets(available_now=False)}"


def _pipeline(folder: Path, bootstrap: str, topic: str, max_offsets: int, trigger: str = "1 second"):
    from devkit.pipelines import pipeline_file

    return pipeline_file(folder, bootstrap, topic, max_offsets=max_offsets, trigger={"processing_time": trigger})


def run_plain_parquet(spark, pipeline, folder: Path) -> float:
    """The same parse and outputs, appended as Parquet: no txn ids, no ledger, no MERGE."""
    from onceflow.spark.parse import bronze_rows, parse_events, quarantine_rows
    from onceflow.spark.sinks.delta import batch_aggregates

    source = pipeline.source

    def write(batch_df, batch_id):
        parsed = parse_events(batch_df, pipeline.schema).persist()
        bronze = bronze_rows(parsed, pipeline.schema, batch_id, 0)
        bronze.write.mode("append").parquet(str(folder / "bronze"))
        quarantine_rows(parsed, batch_id, 0).write.mode("append").parquet(str(folder / "quarantine"))
        aggs = pipeline.sinks.aggregates
        batch_aggregates(bronze, pipeline.schema, aggs, aggs.window).write.mode("append").parquet(
            str(folder / "aggregates")
        )
        parsed.unpersist()

    stream = source_stream(spark, source, source.max_offsets_per_trigger)
    started = time.monotonic()
    (
        stream.writeStream.foreachBatch(write)
        .option("checkpointLocation", str(folder / "checkpoint"))
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )
    return time.monotonic() - started


def merge_rows_copied(pipeline) -> int:
    """Rows the aggregates MERGEs copied unchanged into new files, over the whole run: 0 with
    deletion vectors; with plain rewrites it grows with the table, batch after batch."""
    from devkit.delta_history import merge_metrics
    from onceflow.sinks import table_paths

    return sum(int(m.get("numTargetRowsCopied", 0)) for m in merge_metrics(table_paths(pipeline)["aggregates"]))


def run_raw_consumer(bootstrap: str, topic: str) -> float:
    from onceflow.kafka.consume import committed_counts

    started = time.monotonic()
    committed_counts(bootstrap, topic)
    return time.monotonic() - started


LATENCY_MAX_OFFSETS = 100_000  # maxOffsetsPerTrigger of both latency streams: the shipped continuous size
LATENCY_TRIGGER = "1 second"  # both latency streams' processing-time trigger
STEADY_AFTER = 60  # seconds: by then a fresh driver has compiled its hot code and worked off its first backlog


def measure_latency(
    pipeline_file: Path, pipeline, bootstrap: str, rate: float, seconds: float, warm_up: float = 15
) -> dict:
    """p50/p95 of (Delta commit time of the row's batch) − (the record's Kafka timestamp):
    over all records, and over those produced after the first `warm_up` seconds (a fresh
    JVM's first batches also pay for class loading and JIT compilation)."""
    from deltalake import DeltaTable

    from devkit.driver import IngestProcess
    from devkit.pipelines import PAYMENTS_SCHEMA
    from onceflow.generate.producer import produce
    from onceflow.ledger import read_ledger
    from onceflow.sinks import table_paths

    job = IngestProcess(pipeline, pipeline_file, pipeline_file.parent, driver={}).start()  # the JVM's default JIT
    try:
        job.wait_progress(more_than=0, timeout=300)  # query up and idle-ready before the clock starts
        started_ms = time.time() * 1000
        produce(
            bootstrap,
            pipeline.source.topic,
            int(rate * seconds),
            schema=PAYMENTS_SCHEMA,
            rate=rate,
            txn_size=50,
            keep_records=False,
        )
        time.sleep(5)
        assert job.terminate() == 0, job.tail()
    except BaseException:
        job.kill9()
        raise
    paths = table_paths(pipeline)
    bronze = paths["bronze"]
    rows = DeltaTable(bronze).to_pyarrow_table(columns=["_batch_id", "_kafka_ts"]).to_pylist()

    def figures(table: str) -> dict:
        """Kafka timestamp → the commit of the table's ledger entry for the record's batch (every
        sink's entries carry the stream's batch ids)."""
        commit_ms = {e.batch_id: e.timestamp for e in read_ledger(table).entries}
        # (seconds after producing began, latency) per record; not the topic-creating record before it
        timed = [
            ((ts - started_ms) / 1000, (commit_ms[r["_batch_id"]] - ts) / 1000)
            for r in rows
            if (ts := r["_kafka_ts"].timestamp() * 1000) >= started_ms
        ]
        return _latency_figures(timed, seconds, warm_up)

    # records still in Kafka when the stream stopped (a short run's backlog) are not in the figures
    out = {**figures(bronze), "produced": int(rate * seconds), "rate_per_s": rate, "seconds": seconds}
    if "aggregates" in paths:
        out["aggregates"] = figures(paths["aggregates"])
    return out


def _latency(work: Path, broker, args) -> dict:
    """The continuous job at the shipped size and a 1 s trigger, fed at a steady rate."""
    from devkit.pipelines import PAYMENTS_SCHEMA
    from onceflow.generate.producer import produce

    print(
        f"latency: continuous, 1 s trigger, {args.latency_rate:g} events/s for {args.latency_seconds:g}s …", flush=True
    )
    file, pipeline = _pipeline(work / "latency", broker.bootstrap, "latency", LATENCY_MAX_OFFSETS, LATENCY_TRIGGER)
    # the topic exists before the query
    produce(broker.bootstrap, "latency", 1, schema=PAYMENTS_SCHEMA, partitions=4, keep_records=False)
    return measure_latency(file, pipeline, broker.bootstrap, args.latency_rate, args.latency_seconds)


def measure_peer_latency(work: Path, bootstrap: str, rate: float, seconds: float, warm_up: float = 15) -> dict:
    """The same measure for the peer a user would otherwise write, Spark's own Delta sink
    (delta_sink_peer.peer_stream: the same parse, bronze rows only), as a continuous stream
    in a fresh process with the same trigger and batch size, under the same produce rate."""
    from delta_sink_peer import commit_latencies

    from devkit.driver import DriverProcess
    from devkit.pipelines import PAYMENTS_SCHEMA
    from onceflow.generate.producer import produce

    topic, folder = "latency-peer", work / "latency-peer"
    folder.mkdir(parents=True)
    produce(bootstrap, topic, 1, schema=PAYMENTS_SCHEMA, partitions=4, keep_records=False)  # the topic exists
    peer = DriverProcess(
        [
            sys.executable,
            str(Path(__file__).with_name("delta_sink_peer.py")),
            "--stream-child",
            str(folder),
            bootstrap,
            topic,
            str(LATENCY_MAX_OFFSETS),
            LATENCY_TRIGGER,
        ],
        folder,
        "peer",
        env={"ONCEFLOW_SHUFFLE_PARTITIONS": "2"},
    ).start()
    try:
        # its first batch committed (the child writes the file), as measure_latency waits for onceflow's
        peer.wait_until((folder / "started").exists, "a committed batch", timeout=300)
        started_ms = time.time() * 1000
        produce(
            bootstrap, topic, int(rate * seconds), schema=PAYMENTS_SCHEMA, rate=rate, txn_size=50, keep_records=False
        )
        time.sleep(5)
        assert peer.terminate() == 0, f"the peer stream failed:\n{peer.tail()}"
    except BaseException:
        peer.kill9()
        raise
    return {
        **_latency_figures(commit_latencies(folder / "bronze", started_ms), seconds, warm_up),
        "produced": int(rate * seconds),
        "rate_per_s": rate,
        "seconds": seconds,
    }


def _latency_figures(timed: list[tuple[float, float]], seconds: float, warm_up: float) -> dict:
    """p50/p95 of (seconds after producing began, latency) pairs: over all records, after the
    warm-up, and for a long run also its steady state (the fresh JVM's first minute left out)."""
    out = {
        **_p50_p95([latency for _, latency in timed]),
        "after_warm_up": {"warm_up_s": warm_up, **_p50_p95([lat for after, lat in timed if after >= warm_up])},
    }
    if seconds >= STEADY_AFTER + 60:
        out["steady"] = {"after_s": STEADY_AFTER, **_p50_p95([lat for after, lat in timed if after >= STEADY_AFTER])}
    return out


def _p50_p95(latencies: list[float]) -> dict:
    """Count, p50 and p95 (None with fewer than two records: a run shorter than the warm-up)."""
    if len(latencies) < 2:
        return {"records": len(latencies), "p50_s": None, "p95_s": None}
    q = statistics.quantiles(latencies, n=100)
    return {"records": len(latencies), "p50_s": round(q[49], 3), "p95_s": round(q[94], 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument(
        "--max-offsets",
        default=None,
        help="maxOffsetsPerTrigger of (a) and (b); a comma-separated list measures each size "
        "(the per-batch cost of the Delta commits shows as the ratio's rise with the size); "
        "the first is the headline. Default: pipelines/payments.yaml's available-now size, "
        "then its continuous size",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="(a) and (b) run alternately this many times per size; the figures are medians",
    )
    ap.add_argument("--latency-rate", type=float, default=2000, help="events/s produced while measuring latency")
    ap.add_argument("--latency-seconds", type=float, default=30)
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--latency-only", action="store_true", help="measure the latency alone (no throughput rounds)")
    ap.add_argument(
        "--latency-peer",
        action="store_true",
        help="also measure the latency of Spark's own Delta sink (the peer) the same way, after onceflow's",
    )
    args = ap.parse_args()
    if args.latency_only:
        with scratch_broker("onceflow-bench-") as (work, broker):
            figures: dict[str, object] = {"cores": os.cpu_count(), "latency": _latency(work, broker, args)}
            if args.latency_peer:
                print("latency of the peer, Spark's Delta sink: the same rate, trigger and batch size …", flush=True)
                figures["latency_peer_delta_sink"] = measure_peer_latency(
                    work, broker.bootstrap, args.latency_rate, args.latency_seconds
                )
            emit(figures, args.json)
        return 0

    from devkit.pipelines import PAYMENTS_SCHEMA
    from onceflow.generate.producer import produce
    from onceflow.spark.session import build_session

    with scratch_broker("onceflow-bench-") as (work, broker):
        print(f"producing {args.events} events (1% malformed) …", flush=True)
        summary = produce_events(broker.bootstrap, "bench", args.events)
        committed = summary.count("committed")
        print(f"  {committed} committed in {summary.seconds:.1f}s", flush=True)
        spark = build_session("onceflow-bench", master="local[*]")

        # warm the JVM, the connectors and both code paths once, so neither side pays for it
        produce(
            broker.bootstrap, "warm", min(20_000, args.events), schema=PAYMENTS_SCHEMA, partitions=4, keep_records=False
        )
        sizes = [int(x) for x in str(args.max_offsets or _shipped_sizes()).split(",") if x.strip()]
        _, warm = _pipeline(work / "warm", broker.bootstrap, "warm", sizes[0])
        run_exactly_once(spark, warm)
        run_plain_parquet(spark, warm, work / "warm-b")

        runs: list[dict] = []
        for size in sizes:
            t_as, t_bs, copied = [], [], []
            for r in range(args.rounds):  # alternate (a) and (b) on fresh tables: the JVM warms both alike
                _, pipeline = _pipeline(work / f"a-{size}-{r}", broker.bootstrap, "bench", size)
                print(f"round {r + 1}/{args.rounds}, {size} offsets per trigger: (a) exactly-once Delta …", flush=True)
                seconds, batches = run_exactly_once(spark, pipeline)
                t_as.append(seconds)
                copied.append(merge_rows_copied(pipeline))
                print(f"round {r + 1}/{args.rounds}, {size} offsets per trigger: (b) plain Parquet …", flush=True)
                t_bs.append(run_plain_parquet(spark, pipeline, work / f"b-{size}-{r}"))
            t_a, t_b = statistics.median(t_as), statistics.median(t_bs)
            by_round = [b / a for a, b in zip(t_as, t_bs, strict=True)]
            runs.append(
                {
                    "max_offsets_per_trigger": size,
                    "batches": batches,
                    "exactly_once_records_per_s": round(committed / t_a),
                    "plain_parquet_records_per_s": round(committed / t_b),
                    # each round runs (a) then (b) back to back: its ratio is a pair, so the
                    # machine's drift between rounds cancels; the headline is their median
                    "ratio_exactly_once_vs_parquet": round(statistics.median(by_round), 3),
                    "ratio_by_round": [round(r, 3) for r in by_round],
                    "seconds": {
                        "exactly_once": round(t_a, 1),
                        "plain_parquet": round(t_b, 1),
                        "exactly_once_rounds": [round(t, 1) for t in t_as],
                        "plain_parquet_rounds": [round(t, 1) for t in t_bs],
                    },
                    "extra_seconds_per_batch": round((t_a - t_b) / batches, 2),
                    "aggregates_merge_rows_copied": max(copied),
                }
            )
        t_a, t_b = runs[0]["seconds"]["exactly_once"], runs[0]["seconds"]["plain_parquet"]
        print("(c) raw confluent-kafka consumer …", flush=True)
        t_c = run_raw_consumer(broker.bootstrap, "bench")
        spark.stop()

        latency = _latency(work, broker, args)

    figures = {
        "events": args.events,
        "committed_records": committed,
        "cores": os.cpu_count(),
        "exactly_once_records_per_s": round(committed / t_a),
        "plain_parquet_records_per_s": round(committed / t_b),
        "raw_consumer_records_per_s": round(committed / t_c),
        "ratio_exactly_once_vs_parquet": runs[0]["ratio_exactly_once_vs_parquet"],
        "ratio_exactly_once_vs_raw_read": round(t_c / t_a, 3),
        "max_offsets_per_trigger": sizes[0],
        "seconds": {"exactly_once": round(t_a, 1), "plain_parquet": round(t_b, 1), "raw_consumer": round(t_c, 1)},
        "by_trigger_size": runs,
        "latency": latency,
    }
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

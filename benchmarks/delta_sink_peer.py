"""The exactly-once job's micro-batch against its peer: Spark's own Delta streaming sink.

    .venv/bin/python benchmarks/delta_sink_peer.py [--events 15000] [--max-offsets 1000] [--rounds 3]
                                                   [--conf K=V] [--json F]

What a user would write without onceflow is `writeStream.format("delta")`, itself
exactly-once for one table (Delta's txn id per batch). So the price of onceflow's extra
guarantees (ledgers, quarantine, the aggregates, audits) is the per-batch time of
(a) onceflow's exactly-once job on the shipped payments pipeline, available-now
    (bronze and quarantine commits with their ledger entries; the follower merges the
    aggregates at the run's end, off the batches' path), over
(b) `readStream.format("kafka")` → onceflow's own `parse_events` + `bronze_rows` (the valid
    records: the rows (a) lands in bronze; `_batch_id` is the literal 0, a plain stream has
    no batch id) → `writeStream.format("delta")` with a checkpoint, `availableNow`.
Both read the same topic at read_committed from the earliest offset, `--max-offsets` per
trigger, in one JVM (one SparkSession), each round both sides into fresh tables and a fresh
checkpoint, alternating which goes first, after one uncounted warm-up run of each.

Two figures per side and round:
- seconds per batch: the median of Spark's own `triggerExecution` of each batch (its
  progress events), the same measure for both: what a batch costs, trigger to trigger;
- run seconds per batch: the run's wall time (start-up included; for (a) also the
  aggregates' merge at the end, reported apart) / its batches.
Each table must hold exactly the valid records produced, counted with delta-rs (another
reader than the Spark that wrote them), or the run fails.

The same peer as a continuous stream (`peer_stream`, run by `ingest_throughput.py
--latency-peer`) gives its end-to-end latency beside onceflow's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from harness import add_peer_options, alternate, conf_settings, emit, serve_until_sigterm, source_stream

from devkit.kafka import produce_events, scratch_broker

PARTITIONS = 4


class Durations:
    """Spark's progress events of every query, by query name: each batch's triggerExecution (ms)."""

    def __init__(self, spark):
        from pyspark.sql.streaming import StreamingQueryListener

        self.by_query: dict[str, list[int]] = {}
        durations = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event):
                pass

            def onQueryIdle(self, event):
                pass

            def onQueryTerminated(self, event):
                pass

            def onQueryProgress(self, event):
                p = event.progress
                durations.by_query.setdefault(p.name, []).append(int((p.durationMs or {}).get("triggerExecution", 0)))

        spark.streams.addListener(Listener())

    def median_seconds(self, query: str, batches: int, timeout: float = 10) -> float:
        """The median triggerExecution of `query`'s batches, once all `batches` events arrived."""
        deadline = time.monotonic() + timeout
        while len(self.by_query.get(query, [])) < batches and time.monotonic() < deadline:
            time.sleep(0.05)  # progress events reach the listener asynchronously
        times = self.by_query.get(query) or [0]
        return statistics.median(times) / 1000


def run_onceflow(spark, pipeline) -> tuple[float, int, float]:
    """Seconds and batches of one available-now run of the exactly-once job, and the seconds
    its follower spent merging the aggregates at the end (from its log line)."""
    from onceflow.spark.ingest import run_ingest

    merged: list[float] = []

    def log(msg: str) -> None:
        if "aggregates: merged" in msg:
            merged.append(float(msg.rsplit(" in ", 1)[1].rstrip("s")))

    started = time.monotonic()
    result = run_ingest(pipeline, mode="available-now", spark=spark, log=log)
    assert result.status == "finished", result
    return time.monotonic() - started, result.batches, sum(merged)


def run_delta_sink(spark, pipeline, folder: Path, name: str) -> tuple[float, int]:
    """Seconds and batches of one available-now run of Spark's Delta sink into `folder`/bronze."""
    from onceflow.spark.parse import bronze_rows, parse_events

    source, schema = pipeline.source, pipeline.schema
    stream = source_stream(spark, source, source.max_offsets(available_now=True))
    rows = bronze_rows(parse_events(stream, schema), schema, 0, 0)
    started = time.monotonic()
    query = (
        rows.writeStream.queryName(name)
        .format("delta")
        .option("checkpointLocation", str(folder / "checkpoint"))
        .trigger(availableNow=True)
        .start(str(folder / "bronze"))
    )
    query.awaitTermination()
    seconds = time.monotonic() - started
    # the progress list is updated by the stream thread before it ends: complete after awaitTermination
    return seconds, len({p["batchId"] for p in query.recentProgress})


def peer_stream(folder: str, bootstrap: str, topic: str, max_offsets: int, trigger: str) -> None:
    """The peer as a continuous stream in a process of its own (a fresh driver, as `onceflow
    ingest` runs): `readStream` → `parse_events` + `bronze_rows` → `writeStream.format("delta")`
    into `folder`/bronze with a `trigger` processing-time trigger, until SIGTERM. It writes
    `folder`/started once its first batch is committed (the latency clock starts after that)."""

    from devkit.pipelines import PAYMENTS_SCHEMA as schema
    from onceflow.spark.kafka_read import kafka_options
    from onceflow.spark.parse import bronze_rows, parse_events
    from onceflow.spark.session import build_session

    spark = build_session("onceflow-bench-peer-stream")  # onceflow's own settings, master as `ingest` has it
    stream = (
        spark.readStream.format("kafka")
        .options(**kafka_options(bootstrap, topic, "earliest", maxOffsetsPerTrigger=str(max_offsets)))
        .load()
    )
    query = (
        bronze_rows(parse_events(stream, schema), schema, 0, 0)
        .writeStream.queryName("delta-sink-stream")
        .format("delta")
        .option("checkpointLocation", str(Path(folder) / "checkpoint"))
        .trigger(processingTime=trigger)
        .start(str(Path(folder) / "bronze"))
    )
    serve_until_sigterm(spark, query, folder)


def commit_latencies(table: str | Path, since_ms: float) -> list[tuple[float, float]]:
    """(seconds after `since_ms`, latency) per row of a Delta table whose Kafka timestamp is at or
    after `since_ms`: the commit that added the row's file (its commitInfo timestamp, read from
    the log's JSON) minus the row's `_kafka_ts`. Read with pyarrow, not with the Spark that wrote it."""
    import json
    from urllib.parse import unquote

    import pyarrow.parquet as pq

    out = []
    for log in sorted(Path(table, "_delta_log").glob("*.json")):
        # split on newlines only: a string in the stats may hold U+2028, which splitlines() splits on too
        actions = [json.loads(line) for line in log.read_text().split("\n") if line.strip()]
        committed = next(a["commitInfo"]["timestamp"] for a in actions if "commitInfo" in a)
        # new rows only: a compaction's rewritten files (dataChange false) hold rows committed before
        for add in (a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)):
            for ts in pq.read_table(Path(table, unquote(add["path"])), columns=["_kafka_ts"]).column(0).to_pylist():
                ms = ts.timestamp() * 1000
                if ms >= since_ms:
                    out.append(((ms - since_ms) / 1000, (committed - ms) / 1000))
    return out


def landed(path: str | Path, expected: int, what: str) -> int:
    """Rows in the Delta table at `path`, read with delta-rs; fails unless they are the `expected` valid records."""
    from deltalake import DeltaTable

    count = DeltaTable(str(path)).count()
    assert count == expected, f"{what}: {count} rows landed in {path}, expected the {expected} valid records"
    return count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=15_000)
    add_peer_options(ap, max_offsets=1_000)
    args = ap.parse_args()
    settings = conf_settings(ap, args.conf)

    from devkit.pipelines import pipeline_file
    from onceflow.sinks import table_paths
    from onceflow.spark.session import build_session

    with scratch_broker("onceflow-bench-peer-") as (work, broker):
        print(f"producing {args.events} events (1% malformed) …", flush=True)
        summary = produce_events(broker.bootstrap, "bench", args.events, partitions=PARTITIONS)
        warm = produce_events(broker.bootstrap, "warm", 3 * args.max_offsets, partitions=PARTITIONS)
        valid = summary.count("committed_valid")
        spark = build_session("onceflow-bench-peer", master="local[*]", extra=settings)

        def pipeline(name: str, topic: str):
            """A pipeline of its own name per run: the progress listener groups batches by query
            name, so runs that shared one would pool their batches into later rounds' medians."""
            own = "bench_" + name.replace("-", "_")
            return pipeline_file(work / name, broker.bootstrap, topic, name=own, max_offsets=args.max_offsets)[1]

        print("warming up both sides (not counted) …", flush=True)
        durations = Durations(spark)
        warm_a = pipeline("warm-a", "warm")
        run_onceflow(spark, warm_a)
        landed(table_paths(warm_a)["bronze"], warm.count("committed_valid"), "warm-up (a)")
        run_delta_sink(spark, warm_a, work / "warm-b", "delta-sink-warm")
        landed(work / "warm-b" / "bronze", warm.count("committed_valid"), "warm-up (b)")

        keys = ("batch", "run", "batches", "rows")
        side: dict[str, dict[str, list]] = {
            "onceflow": {k: [] for k in (*keys, "merge")},
            "delta_sink": {k: [] for k in keys},
        }

        def side_a(r: int) -> None:
            print(f"round {r + 1}/{args.rounds}: (a) onceflow exactly-once …", flush=True)
            a = pipeline(f"a-{r}", "bench")
            seconds, batches, merge = run_onceflow(spark, a)
            values = (
                durations.median_seconds(f"onceflow-{a.name}", batches),
                seconds / batches,
                batches,
                landed(table_paths(a)["bronze"], valid, "(a) onceflow bronze"),
                merge,
            )
            for key, value in zip((*keys, "merge"), values, strict=True):
                side["onceflow"][key].append(value)

        def side_b(r: int) -> None:
            print(f"round {r + 1}/{args.rounds}: (b) Spark's Delta sink …", flush=True)
            a = pipeline(f"b-{r}-pipeline", "bench")
            seconds, batches = run_delta_sink(spark, a, work / f"b-{r}", f"delta-sink-{r}")
            values = (
                durations.median_seconds(f"delta-sink-{r}", batches),
                seconds / batches,
                batches,
                landed(work / f"b-{r}" / "bronze", valid, "(b) Delta sink"),
            )
            for key, value in zip(keys, values, strict=True):
                side["delta_sink"][key].append(value)

        alternate(args.rounds, side_a, side_b)
        spark.stop()

    a, b = side["onceflow"], side["delta_sink"]

    def ratios(key: str) -> list[float]:
        return [round(x / y, 2) for x, y in zip(a[key], b[key], strict=True)]

    figures = {
        "events": args.events,
        "committed_records": summary.count("committed"),
        "valid_records": valid,
        "max_offsets_per_trigger": args.max_offsets,
        "partitions": PARTITIONS,
        "rounds": args.rounds,
        "cores": os.cpu_count(),
        "conf": args.conf,
        "seconds_per_batch": {
            "onceflow_rounds": [round(x, 3) for x in a["batch"]],
            "delta_sink_rounds": [round(x, 3) for x in b["batch"]],
            "onceflow_median": round(statistics.median(a["batch"]), 3),
            "delta_sink_median": round(statistics.median(b["batch"]), 3),
        },
        "ratio_by_round": ratios("batch"),
        "ratio_median": statistics.median(ratios("batch")),
        "run_seconds_per_batch": {
            "onceflow_rounds": [round(x, 2) for x in a["run"]],
            "delta_sink_rounds": [round(x, 2) for x in b["run"]],
        },
        "run_ratio_by_round": ratios("run"),
        "run_ratio_median": statistics.median(ratios("run")),
        "onceflow_aggregates_merge_seconds": [round(x, 1) for x in a["merge"]],
        "batches": {"onceflow": a["batches"], "delta_sink": b["batches"]},
        "rows_landed": {"onceflow_bronze": a["rows"], "delta_sink": b["rows"]},
    }
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--stream-child":
        peer_stream(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6])
        sys.exit(0)
    sys.exit(main())

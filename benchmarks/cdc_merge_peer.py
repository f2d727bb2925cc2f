"""The keyed table of a change stream (issue 41) against its peer: a hand-written foreachBatch MERGE.

    .venv/bin/python benchmarks/cdc_merge_peer.py [--records 20000] [--max-offsets 2000] [--rounds 3]
                                                  [--conf K=V] [--json F]

What a user would write without onceflow to keep a current-state table of a Debezium topic is a
`foreachBatch` that keeps the newest change per key and MERGEs it into a Delta table, idempotent
by Delta's `txnAppId`/`txnVersion` session settings (Delta's documented way for foreachBatch).
Both sides read the same topic: `--records` records of the shipped customers_cdc change stream
(cdc/generate.py: a snapshot, creates, updates, deletes with their tombstones, key changes,
re-creations, the generator's default duplicates and out-of-order deliveries, nothing
malformed), on 4 partitions, produced once:
(a) onceflow's exactly-once job on a copy of pipelines/customers_cdc.yaml (tables under a temp
    folder), available-now: each batch commits bronze (every change) and quarantine with their
    ledger entries; the follower thread merges bronze's new changes into the keyed table
    (`newest_changes` + `merge_current`: per key the greatest (sequence, partition, offset),
    tombstones for deletes), every `merge_every` (5 s) and at the run's end, off the batches' path;
(b) `readStream.format("kafka")` → `from_json` of a hand-written envelope schema (op, before.id,
    after, source.lsn; the tombstones' null values dropped) → `foreachBatch(fn)`: per `id` the
    row of the greatest (lsn, partition, offset) (a window `row_number`), then one MERGE into the
    target table: delete a matched key for a newer `d`, update it for a newer change, insert an
    unmatched key unless the change is a `d`; `txnAppId` and `txnVersion` (= the batch id) set on
    the batch's session around it. Its table holds live rows only: a delete removes the row.
Both take `--max-offsets` per trigger at read_committed from the earliest offset, in one JVM (one
SparkSession, its settings shared), each round both into fresh tables and checkpoints,
alternating which goes first, after one uncounted warm-up run of each on a topic of its own.

Figures per side and round:
- seconds per batch: the median of Spark's own `triggerExecution` of each batch (progress
  events). (a)'s batch does not hold the MERGE, (b)'s does: the ratio is what a batch costs;
- run seconds: the run's wall time until the keyed table is current (start-up included; for (a)
  its follower's last merge too), the fairer whole;
- merge milliseconds per change: (a) the follower's merge seconds (its log lines "current: merged
  ... in Xs", reading bronze included) over the bronze rows merged; (b) the seconds inside `fn`
  (the Kafka read of the batch, parse, dedupe and MERGE: Spark evaluates them there) over the
  changes read.
Each table is read with delta-rs's query engine (another reader than the Spark that wrote it;
it applies deletion vectors): (a)'s live rows must be the database's final table
(`summary.changes.expected_rows()`) and its tombstones its deleted keys, or the run fails. (b)'s
rows are compared with the same table and the differences reported (keys it lacks, keys it
brought back, rows that differ), not failed: a late change older than a delete of an earlier
batch finds no row and is inserted, which only a tombstone would stop.

End-to-end latency is not measured here (a continuous run of each side and a commit-time read of
a table whose rows are replaced in place would be needed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import yaml
from delta_sink_peer import Durations
from harness import add_peer_options, conf_settings, emit, source_stream

from devkit import ROOT
from devkit.kafka import scratch_broker

PARTITIONS = 4
SEED = 20261128
CUSTOMERS = yaml.safe_load((ROOT / "pipelines" / "customers_cdc.yaml").read_text())  # its schema and keyed table

# the peer's hand-written schemas: what a user reads of Debezium's envelope, and the table it keeps
ROW = "id BIGINT, email STRING, name STRING, tier STRING, balance DECIMAL(18,2), updated_at TIMESTAMP"
COLUMNS = ("id", "email", "name", "tier", "balance", "updated_at", "lsn")


def _struct(ddl: str) -> str:
    """`a T, b U` as the body of a STRUCT<a: T, b: U>."""
    return ", ".join(": ".join(part.strip().split(" ", 1)) for part in ddl.split(", "))


ENVELOPE = f"op STRING, before STRUCT<id: BIGINT>, after STRUCT<{_struct(ROW)}>, source STRUCT<lsn: BIGINT>"


def run_onceflow(spark, pipeline) -> tuple[float, int, float, int, int]:
    """Seconds and batches of one available-now run of the exactly-once job, and the seconds,
    bronze rows and number of its follower's merges into the keyed table (from its log lines)."""
    from onceflow.spark.ingest import run_ingest

    merged: list[tuple[float, int]] = []

    def log(msg: str) -> None:
        if ": current: merged " in msg:  # "<name>: current: merged batches 0–9 (1,234 rows) in 3.2s"
            rows = int(msg.rsplit("(", 1)[1].split(" rows)")[0].replace(",", ""))
            merged.append((float(msg.rsplit(" in ", 1)[1].rstrip("s")), rows))

    started = time.monotonic()
    result = run_ingest(pipeline, mode="available-now", spark=spark, log=log)
    assert result.status == "finished", result
    seconds = time.monotonic() - started
    return seconds, result.batches, sum(s for s, _ in merged), sum(n for _, n in merged), len(merged)


def run_peer(spark, pipeline, folder: Path, name: str) -> tuple[float, int, float, int]:
    """Seconds and batches of one available-now run of the hand-written foreachBatch MERGE into
    `folder`/current, the seconds spent in its function, and its progress events' input rows."""
    from delta.tables import DeltaTable
    from pyspark.sql import Column, Window
    from pyspark.sql import functions as F

    target = str(folder / "current")
    spark.createDataFrame([], f"{ROW}, lsn BIGINT").write.format("delta").save(target)  # empty, its schema
    app_id = f"{name}-merge"  # one per stream: Delta skips a (app, version) it committed
    source = pipeline.source
    changes = (
        source_stream(spark, source, source.max_offsets(available_now=True))
        .where(F.col("value").isNotNull())  # the tombstone after each delete: Kafka compaction's, a no-op
        .select(F.from_json(F.col("value").cast("string"), ENVELOPE).alias("e"), "partition", "offset")
        .select(
            F.col("e.op").alias("op"),
            F.coalesce(F.col("e.after.id"), F.col("e.before.id")).alias("id"),
            *[F.col(f"e.after.{c}").alias(c) for c in COLUMNS[1:-1]],
            F.col("e.source.lsn").alias("lsn"),
            "partition",
            "offset",
        )
    )
    spent: list[float] = []
    newest = Window.partitionBy("id").orderBy(F.desc("lsn"), F.desc("partition"), F.desc("offset"))
    values: dict[str, str | Column] = {c: f"s.{c}" for c in COLUMNS}

    def merge(batch, batch_id: int) -> None:
        started = time.monotonic()
        session = batch.sparkSession  # the stream's own session: its settings stay the batch's
        rows = batch.withColumn("n", F.row_number().over(newest)).where("n = 1").drop("n", "partition", "offset")
        session.conf.set("spark.databricks.delta.write.txnAppId", app_id)
        session.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        try:
            (
                DeltaTable.forPath(session, target)
                .alias("t")
                .merge(rows.alias("s"), "t.id = s.id")
                .whenMatchedDelete(condition="s.op = 'd' AND s.lsn > t.lsn")
                .whenMatchedUpdate(condition="s.op != 'd' AND s.lsn > t.lsn", set=values)
                .whenNotMatchedInsert(condition="s.op != 'd'", values=values)
                .execute()
            )
        finally:
            session.conf.unset("spark.databricks.delta.write.txnAppId")
            session.conf.unset("spark.databricks.delta.write.txnVersion")
        spent.append(time.monotonic() - started)

    started = time.monotonic()
    query = (
        changes.writeStream.queryName(name)
        .foreachBatch(merge)
        .option("checkpointLocation", str(folder / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.monotonic() - started
    progress = query.recentProgress
    batches = len({p["batchId"] for p in progress})
    # the progress events' input rows, reported, not used: with a MERGE that reads its source more
    # than once (the session's merge.materializeSource=none) they exceed the records read
    read = sum(int(p["numInputRows"]) for p in progress)
    return seconds, batches, sum(spent), read


def last_txn(table: Path) -> dict | None:
    """The `txn` action (appId, version) of the table's latest commit, read from its log."""
    log = max(Path(table, "_delta_log").glob("*.json"))
    actions = [json.loads(line) for line in log.read_text().split("\n") if line.strip()]
    return next((a["txn"] for a in actions if "txn" in a), None)


def rows_of(path: str | Path, columns: list[str]) -> list[dict]:
    """The table's rows, read by delta-rs's query engine (which applies deletion vectors)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    select = ", ".join(f'"{c}"' for c in columns)
    return pa.table(
        QueryBuilder().register("t", DeltaTable(str(path))).execute(f"SELECT {select} FROM t").read_all()
    ).to_pylist()


def check_onceflow(pipeline, stream, what: str) -> dict:
    """(a)'s keyed table: its live rows are the database's final table, its tombstones the keys
    deleted and not created again, one row per key; fails otherwise."""
    from onceflow.sinks import table_paths

    names = pipeline.schema.names
    table = rows_of(table_paths(pipeline)["current"], [*names, "_deleted"])
    keys = [(r["id"],) for r in table]
    assert len(keys) == len(set(keys)), f"{what}: a key twice in the keyed table"
    live = {(r["id"],): {n: r[n] for n in names} for r in table if not r["_deleted"]}
    deleted = {(r["id"],) for r in table if r["_deleted"]}
    want = stream.expected_rows()
    wrong = [k for k in set(live) | set(want) if live.get(k) != want.get(k)]
    assert not wrong, f"{what}: {len(wrong)} keys differ from the database's table, e.g. {sorted(wrong)[:5]}"
    assert deleted == stream.expected_deleted(), f"{what}: tombstones {sorted(deleted ^ stream.expected_deleted())[:5]}"
    return {"rows": len(live), "tombstones": len(deleted)}


def check_peer(path: Path, stream) -> dict:
    """(b)'s table against the database's final table: rows, and the keys it lacks, the keys it
    holds that the database deleted (brought back), and the rows whose values differ."""
    names = list(COLUMNS[:-1])
    table = rows_of(path / "current", names)
    keys = [(r["id"],) for r in table]
    assert len(keys) == len(set(keys)), "(b): a key twice in the peer's table"
    have = {(r["id"],): r for r in table}
    want = stream.expected_rows()
    return {
        "rows": len(have),
        "keys_missing": len(set(want) - set(have)),
        "keys_extra": len(set(have) - set(want)),
        "rows_differing": sum(have[k] != want[k] for k in set(have) & set(want)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=20_000, help="records of the change stream (tombstones included)")
    add_peer_options(ap, max_offsets=2_000)
    args = ap.parse_args()
    settings = conf_settings(ap, args.conf)

    from devkit.pipelines import pipeline_file
    from onceflow import config
    from onceflow.kafka.producer import produce
    from onceflow.spark.session import build_session

    shipped = config.load(ROOT / "pipelines" / "customers_cdc.yaml", env={})  # its schema and keyed table
    with scratch_broker("onceflow-bench-cdc-") as (work, broker):

        def pipeline(name: str, topic: str):
            folder = work / name
            sinks = {
                "bronze": {"path": str(folder / "bronze")},
                "quarantine": {"path": str(folder / "quarantine")},
                "current": {**CUSTOMERS["sinks"]["current"], "path": str(folder / "current")},
            }
            return pipeline_file(
                folder,
                broker.bootstrap,
                topic,
                name=name,
                schema=CUSTOMERS["schema"],
                sinks=sinks,
                max_offsets=args.max_offsets,
            )[1]

        def changes(topic: str, count: int, seed: int):
            summary = produce(
                broker.bootstrap,
                topic,
                count,
                schema=shipped.schema,
                keyed=shipped.keyed,
                partitions=PARTITIONS,
                seed=seed,
                txn_size=1000,
                keep_records=False,
            )
            assert summary.changes is not None
            return summary

        print(f"producing {args.records} change records …", flush=True)
        summary = changes("customers_cdc", args.records, SEED)
        stream = summary.changes
        warm = changes("warm", 3 * args.max_offsets, SEED + 1)
        spark = build_session("onceflow-bench-cdc-peer", master="local[*]", extra=settings)
        durations = Durations(spark)

        print("warming up both sides (not counted) …", flush=True)
        warm_a = pipeline("warm_a", "warm")
        run_onceflow(spark, warm_a)
        check_onceflow(warm_a, warm.changes, "warm-up (a)")
        run_peer(spark, warm_a, work / "warm-b", "cdc-peer-warm")
        print(f"warm-up (b): {check_peer(work / 'warm-b', warm.changes)}", flush=True)

        keys = ("batch", "run", "batches", "merge_s", "merge_rows", "table")
        side: dict[str, dict[str, list]] = {
            "onceflow": {k: [] for k in (*keys, "merges")},
            "peer": {k: [] for k in (*keys, "progress_input_rows")},
        }

        def side_a(r: int) -> None:
            print(f"round {r + 1}/{args.rounds}: (a) onceflow exactly-once …", flush=True)
            a = pipeline(f"cdc_a{r}", "customers_cdc")
            seconds, batches, merge_s, merge_rows, merges = run_onceflow(spark, a)
            side["onceflow"]["merges"].append(merges)
            values = (
                durations.median_seconds(f"onceflow-{a.name}", batches),
                seconds,
                batches,
                merge_s,
                merge_rows,
                check_onceflow(a, stream, "(a) onceflow"),
            )
            for key, value in zip(keys, values, strict=True):
                side["onceflow"][key].append(value)

        def side_b(r: int) -> None:
            print(f"round {r + 1}/{args.rounds}: (b) foreachBatch MERGE …", flush=True)
            a = pipeline(f"cdc_b{r}_pipeline", "customers_cdc")
            folder = work / f"b-{r}"
            seconds, batches, fn_s, read = run_peer(spark, a, folder, f"cdc-peer-{r}")
            txn = last_txn(folder / "current")
            assert txn and txn["appId"] == f"cdc-peer-{r}-merge" and txn["version"] == batches - 1, txn
            values = (
                durations.median_seconds(f"cdc-peer-{r}", batches),
                seconds,
                batches,
                fn_s,
                summary.count("committed") - stream.summary()["tombstones"],  # the changes handed to fn
                check_peer(folder, stream),
            )
            side["peer"]["progress_input_rows"].append(read)
            for key, value in zip(keys, values, strict=True):
                side["peer"][key].append(value)

        for r in range(args.rounds):  # a round's ratio is a pair; which side goes first alternates
            for run in (side_a, side_b) if r % 2 == 0 else (side_b, side_a):
                run(r)
        spark.stop()

    a, b = side["onceflow"], side["peer"]

    def per_change(s: dict) -> list[float]:
        return [round(1000 * x / n, 3) for x, n in zip(s["merge_s"], s["merge_rows"], strict=True)]

    def ratios(x: list[float], y: list[float]) -> list[float]:
        return [round(i / j, 2) for i, j in zip(x, y, strict=True)]

    figures = {
        "records": args.records,
        "stream": stream.summary(),
        "committed_records": summary.count("committed"),
        "max_offsets_per_trigger": args.max_offsets,
        "partitions": PARTITIONS,
        "rounds": args.rounds,
        "cores": os.cpu_count(),
        "conf": args.conf,
        "seconds_per_batch": {
            "onceflow_rounds": [round(x, 3) for x in a["batch"]],
            "peer_rounds": [round(x, 3) for x in b["batch"]],
            "onceflow_median": round(statistics.median(a["batch"]), 3),
            "peer_median": round(statistics.median(b["batch"]), 3),
        },
        "batch_ratio_by_round": ratios(a["batch"], b["batch"]),
        "batch_ratio_median": statistics.median(ratios(a["batch"], b["batch"])),
        "run_seconds": {
            "onceflow_rounds": [round(x, 1) for x in a["run"]],
            "peer_rounds": [round(x, 1) for x in b["run"]],
        },
        "run_ratio_by_round": ratios(a["run"], b["run"]),
        "merge_seconds": {
            "onceflow_follower": [round(x, 2) for x in a["merge_s"]],
            "peer_foreach_batch_fn": [round(x, 2) for x in b["merge_s"]],
        },
        "merge_ms_per_change": {"onceflow": per_change(a), "peer": per_change(b)},
        "merge_cost_ratio_by_round": ratios(per_change(a), per_change(b)),
        "batches": {"onceflow": a["batches"], "peer": b["batches"]},
        "merge_commits": {"onceflow_follower": a["merges"], "peer": b["batches"]},
        "peer_progress_input_rows": b["progress_input_rows"],
        "tables": {"onceflow": a["table"], "peer": b["table"]},
        "expected": {"rows": len(stream.expected_rows()), "deleted": len(stream.expected_deleted())},
    }
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

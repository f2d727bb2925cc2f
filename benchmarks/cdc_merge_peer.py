"""The keyed table of a change stream (issue 41) against its peer: a hand-written foreachBatch MERGE.

    .venv/bin/python benchmarks/cdc_merge_peer.py [--records 20000] [--max-offsets 2000] [--rounds 3]
                                                  [--conf K=V] [--json F]
    .venv/bin/python benchmarks/cdc_merge_peer.py --latency [--latency-rate 200] [--latency-seconds 75]

What a user would write without onceflow to keep a current-state table of a Debezium topic is a
`foreachBatch` that keeps the newest change per key and MERGEs it into a Delta table, idempotent
by Delta's `txnAppId`/`txnVersion` session settings (Delta's documented way for foreachBatch).
Both sides read the same topic: `--records` records of the shipped customers_cdc change stream
(generate/changes.py: a snapshot, creates, updates, deletes with their tombstones, key changes,
re-creations, the generator's default duplicates and out-of-order deliveries, nothing
malformed), on 4 partitions, produced once:
(a) onceflow's exactly-once job on a copy of pipelines/customers_cdc.yaml (tables under a temp
    folder), available-now: each batch commits bronze (every change) and quarantine with their
    ledger entries; the follower thread merges bronze's new changes into the keyed table (per key
    the greatest (sequence, partition, offset), tombstones for deletes; small batches' rows from
    the driver with delta-rs, spark/sinks/current_rs.py, others through Spark), every
    `merge_every` (as shipped: 1 s) and at the run's end, off the batches' path;
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

End-to-end latency (`--latency`, instead of the rounds): each side in turn as a continuous stream
in a fresh process (onceflow: `onceflow ingest` on the copy; the peer: this file's `--stream-child`,
the same MERGE with a 1 s processing-time trigger), the shipped batch size (100,000) and trigger
(1 s), and onceflow's merge_every as shipped (1 s). Once its first batch is committed, the same
change stream (same seed, 4 partitions) is produced into its own topic at `--latency-rate`
records/s for `--latency-seconds`, then 20 s to drain, then SIGTERM. Per change a MERGE applied
(each key's winning change of that MERGE: the rows of every version a MERGE committed, read with
delta-rs time travel): latency = the commit time of that MERGE (the first MERGE commit at or
after the row's `_changed_at`, the MERGE's current_timestamp()) − the winning record's Kafka
timestamp (onceflow: bronze's `_kafka_ts` of the row's `_partition`/`_offset`; the
peer keeps `_kafka_ts` and `_changed_at` in its rows for this). p50/p95 over the records produced
after the first 20 s; onceflow's over its live rows (the peer has no tombstones), with
tombstones beside, and its bronze commit latency (every record) to show what the keyed table's is
made of: the bronze commit + the wait for the follower's next merge (it starts merge_every after the
previous merge ends) + the MERGE.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from delta_sink_peer import Durations
from harness import add_peer_options, alternate, conf_settings, emit, serve_until_sigterm, source_stream

from devkit import ROOT
from devkit.kafka import scratch_broker

PARTITIONS = 4
SEED = 20261128

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


def peer_target(spark, folder: Path, timed: bool = False) -> None:
    """The peer's empty target table, `folder`/current; `timed`: with peer_query's timing columns."""
    own = ", _partition INT, _offset BIGINT, _kafka_ts TIMESTAMP, _changed_at TIMESTAMP" if timed else ""
    spark.createDataFrame([], f"{ROW}, lsn BIGINT{own}").write.format("delta").save(str(folder / "current"))


def peer_query(spark, source, folder: Path, name: str, max_offsets: int, trigger: dict, timed: bool = False):
    """The hand-written foreachBatch MERGE into `folder`/current (peer_target), started with
    `trigger` (DataStreamWriter.trigger's keyword), and the list its function appends its seconds
    to. `timed`: the target rows also keep the winning record's `_partition`, `_offset` and Kafka
    timestamp (`_kafka_ts`) and the MERGE's `_changed_at = current_timestamp()`, for latency."""
    from delta.tables import DeltaTable
    from pyspark.sql import Column, Window
    from pyspark.sql import functions as F

    target = str(folder / "current")
    app_id = f"{name}-merge"  # one per stream: Delta skips a (app, version) it committed
    kafka_ts = ["timestamp"] if timed else []  # the record's Kafka timestamp, read only to be kept
    changes = (
        source_stream(spark, source, max_offsets)
        .where(F.col("value").isNotNull())  # the tombstone after each delete: Kafka compaction's, a no-op
        .select(F.from_json(F.col("value").cast("string"), ENVELOPE).alias("e"), "partition", "offset", *kafka_ts)
        .select(
            F.col("e.op").alias("op"),
            F.coalesce(F.col("e.after.id"), F.col("e.before.id")).alias("id"),
            *[F.col(f"e.after.{c}").alias(c) for c in COLUMNS[1:-1]],
            F.col("e.source.lsn").alias("lsn"),
            "partition",
            "offset",
            *[F.col(c).alias("_kafka_ts") for c in kafka_ts],
        )
    )
    spent: list[float] = []
    newest = Window.partitionBy("id").orderBy(F.desc("lsn"), F.desc("partition"), F.desc("offset"))
    values: dict[str, str | Column] = {c: f"s.{c}" for c in COLUMNS}
    if timed:
        values |= {"_partition": "s.partition", "_offset": "s.offset", "_kafka_ts": "s._kafka_ts"}
        values["_changed_at"] = F.current_timestamp()

    def merge(batch, batch_id: int) -> None:
        started = time.monotonic()
        session = batch.sparkSession  # the stream's own session: its settings stay the batch's
        rows = batch.withColumn("n", F.row_number().over(newest)).where("n = 1").drop("n")
        if not timed:
            rows = rows.drop("partition", "offset")
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

    query = (
        changes.writeStream.queryName(name)
        .foreachBatch(merge)
        .option("checkpointLocation", str(folder / "checkpoint"))
        .trigger(**trigger)
        .start()
    )
    return query, spent


def run_peer(spark, pipeline, folder: Path, name: str) -> tuple[float, int, float, int]:
    """Seconds and batches of one available-now run of the hand-written foreachBatch MERGE into
    `folder`/current, the seconds spent in its function, and its progress events' input rows."""
    source = pipeline.source
    peer_target(spark, folder)
    started = time.monotonic()
    query, spent = peer_query(
        spark, source, folder, name, source.max_offsets(available_now=True), {"availableNow": True}
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


LATENCY_MAX_OFFSETS = 100_000  # maxOffsetsPerTrigger of both continuous streams: the shipped file's
LATENCY_TRIGGER = "1 second"  # both streams' processing-time trigger: the shipped file's
LATENCY_STEADY = 20  # seconds: the figures' steady state leaves out the records of the first 20 s
LATENCY_DRAIN = 20  # seconds after the last record before SIGTERM: > merge_every + a MERGE


def keyed_pipeline(folder: Path, bootstrap: str, topic: str, name: str, max_offsets: int):
    """A copy of pipelines/customers_cdc.yaml (merge_every included) reading `topic`, its tables
    under `folder`: (file, pipeline)."""
    from devkit.pipelines import cdc_pipeline_file

    return cdc_pipeline_file(folder, bootstrap, topic, name=name, max_offsets=max_offsets)


def produce_changes(bootstrap: str, topic: str, count: int, seed: int, rate: float = 0, txn_size: int = 1000):
    """`count` records of the shipped customers_cdc change stream into `topic` (`rate` records/s,
    0: at once); the producer's summary, its stream with the database's final table."""
    from onceflow import config
    from onceflow.generate.producer import produce

    shipped = config.load(ROOT / "pipelines" / "customers_cdc.yaml", env={})
    summary = produce(
        bootstrap,
        topic,
        count,
        schema=shipped.schema,
        keyed=shipped.keyed,
        partitions=PARTITIONS,
        seed=seed,
        rate=rate,
        txn_size=txn_size,
        keep_records=False,
    )
    assert summary.changes is not None
    return summary


def peer_stream(pipeline_file: str, folder: str) -> None:
    """The peer as a continuous stream in a process of its own (a fresh driver, as `onceflow
    ingest` runs): peer_query, timed, into `folder`/current, reading the pipeline file's topic
    with its batch size and a 1 s processing-time trigger, until SIGTERM. It writes
    `folder`/started once its first batch is committed (the latency clock starts after that)."""

    from onceflow import config
    from onceflow.spark.session import build_session

    source, out = config.load(Path(pipeline_file)).source, Path(folder)
    spark = build_session("onceflow-bench-cdc-peer-stream")  # onceflow's own settings, master as `ingest` has it
    peer_target(spark, out, timed=True)
    trigger = {"processingTime": LATENCY_TRIGGER}
    query, _ = peer_query(spark, source, out, "cdc-peer-stream", LATENCY_MAX_OFFSETS, trigger, timed=True)
    serve_until_sigterm(spark, query, out)


def merge_log(table: str | Path) -> list[tuple[int, int]]:
    """(version, commit time in ms: commitInfo's timestamp) of the table's MERGE commits, in order."""
    out = []
    for log in sorted(Path(table, "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in log.read_text().split("\n") if line.strip()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        if info.get("operation") == "MERGE":
            out.append((int(log.stem), info["timestamp"]))
    return out


def merge_commits(table: str | Path) -> list[int]:
    """The commit times (ms) of the table's MERGE commits, in order."""
    return sorted(ts for _, ts in merge_log(table))


def merged_rows(table: str | Path, sql: str, others: dict[str, str] | None = None) -> list[dict]:
    """Every row a MERGE commit of `table` wrote, not only the rows it holds at the end: `sql`
    (over `t`, the table, and `others`, name → path, at their latest version) run on each version
    a MERGE committed (delta-rs time travel; it applies deletion vectors), the rows kept once by
    their (`_partition`, `_offset`, `_changed_at`): a row a MERGE left alone keeps all three."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    seen: dict[tuple, dict] = {}
    for version, _ in merge_log(table):
        qb = QueryBuilder().register("t", DeltaTable(str(table), version=version))
        for name, path in (others or {}).items():
            qb = qb.register(name, DeltaTable(path))
        for r in pa.table(qb.execute(sql).read_all()).to_pylist():
            seen.setdefault((r["_partition"], r["_offset"], r["_changed_at"]), r)
    return list(seen.values())


def applied_latencies(table: str | Path, rows: list[dict], since_ms: float) -> tuple[list, list]:
    """Per row whose winning record's Kafka timestamp (`_kafka_ts`) is at or after `since_ms`:
    (seconds after `since_ms`, latency), latency = the commit time of the MERGE that wrote the
    row − the Kafka timestamp. That MERGE is found by the row's `_changed_at` (the MERGE's
    current_timestamp(), taken as it starts): the first MERGE commit at or after it. Also the
    seconds from `_changed_at` to that commit (the MERGE's own time), per row."""
    import bisect

    commits = merge_commits(table)
    timed, merging = [], []
    for r in rows:
        ts = r["_kafka_ts"].timestamp() * 1000
        if ts < since_ms:
            continue
        changed = r["_changed_at"].timestamp() * 1000
        i = bisect.bisect_left(commits, changed)
        assert i < len(commits), f"{table}: no MERGE commit at or after a row's _changed_at"
        timed.append(((ts - since_ms) / 1000, (commits[i] - ts) / 1000))
        merging.append((commits[i] - changed) / 1000)
    return timed, merging


def p50_p95(values: list[float]) -> dict:
    """Count, p50 and p95 (None with fewer than two values)."""
    if len(values) < 2:
        return {"records": len(values), "p50_s": None, "p95_s": None}
    q = statistics.quantiles(values, n=100)
    return {"records": len(values), "p50_s": round(q[49], 3), "p95_s": round(q[94], 3)}


def latency_figures(timed: list[tuple[float, float]], stop_s: float) -> dict:
    """p50/p95 over every timed row and over the steady state (after LATENCY_STEADY seconds), and
    how many rows a commit at or after the SIGTERM applied (0 if the drain was long enough)."""
    return {
        "all": p50_p95([lat for _, lat in timed]),
        "steady": {"after_s": LATENCY_STEADY, **p50_p95([lat for at, lat in timed if at >= LATENCY_STEADY])},
        "rows_applied_at_stop": sum(at + lat >= stop_s for at, lat in timed),
    }


def measure_latency(work: Path, bootstrap: str, rate: float, seconds: float) -> dict:
    """End-to-end latency of both sides as continuous streams, each in a fresh process, one after
    the other, each fed the same change stream (same seed, same 4 partitions) at `rate` records/s
    for `seconds` once its first batch is committed; then LATENCY_DRAIN seconds, then SIGTERM."""
    from delta_sink_peer import commit_latencies

    from devkit.driver import DriverProcess, IngestProcess
    from onceflow.sinks import table_paths

    def changes(topic: str, count: int, seed: int, rate: float = 0) -> None:
        # 10 Kafka transactions a second at 200 records/s
        produce_changes(bootstrap, topic, count, seed, rate, txn_size=20)

    def feed(topic: str, driver) -> tuple[float, float]:
        """Produce the measured stream, drain, stop the driver: (start ms, SIGTERM s after start)."""
        started_ms = time.time() * 1000
        changes(topic, int(rate * seconds), SEED, rate)
        time.sleep(LATENCY_DRAIN)
        stop_s = (time.time() * 1000 - started_ms) / 1000
        assert driver.terminate() == 0, f"{driver.name} failed:\n{driver.tail()}"
        return started_ms, stop_s

    out: dict = {"rate_per_s": rate, "seconds": seconds, "produced": int(rate * seconds)}
    print(f"latency (a): onceflow's keyed table, continuous, {rate:g} records/s for {seconds:g}s …", flush=True)
    file, a = keyed_pipeline(work / "latency-a", bootstrap, "latency_a", "cdc_latency_a", LATENCY_MAX_OFFSETS)
    changes("latency_a", 1, SEED + 7)  # the topic and a first record (another stream's), so a batch commits
    job = IngestProcess(a, file, file.parent, driver={}).start()  # the JVM's default JIT, as the peer's
    try:
        job.wait_progress(more_than=0, timeout=300)
        started_ms, stop_s = feed("latency_a", job)
    except BaseException:
        job.kill9()
        raise
    paths = table_paths(a)
    rows = merged_rows(
        paths["current"],
        "SELECT t._partition, t._offset, t._deleted, t._changed_at, b._kafka_ts FROM t JOIN b"
        " ON t._partition = b._partition AND t._offset = b._offset",
        {"b": paths["bronze"]},
    )
    timed, merging = applied_latencies(paths["current"], rows, started_ms)
    live, _ = applied_latencies(paths["current"], [r for r in rows if not r["_deleted"]], started_ms)
    bronze = commit_latencies(paths["bronze"], started_ms)
    out["onceflow"] = {
        "merge_every_s": a.sinks.current.merge_every_seconds,
        "rows_timed": len(timed),
        **latency_figures(live, stop_s),
        "with_tombstones": latency_figures(timed, stop_s),
        "bronze_commit": latency_figures(bronze, stop_s),  # every record: Kafka → its bronze batch's commit
        "merge_start_to_commit": p50_p95(merging),  # per row: the follower's MERGE itself
        "merge_commits": len(merge_commits(paths["current"])),
    }

    print(f"latency (b): the foreachBatch MERGE, continuous, {rate:g} records/s for {seconds:g}s …", flush=True)
    file_b, _ = keyed_pipeline(work / "latency-b", bootstrap, "latency_b", "cdc_latency_b", LATENCY_MAX_OFFSETS)
    folder = work / "latency-b" / "peer"
    folder.mkdir(parents=True)
    changes("latency_b", 1, SEED + 7)
    peer = DriverProcess(
        [sys.executable, str(Path(__file__).resolve()), "--stream-child", str(file_b), str(folder)],
        folder,
        "peer",
        env={"ONCEFLOW_SHUFFLE_PARTITIONS": "2"},  # as IngestProcess sets it for onceflow's driver
    ).start()
    try:
        peer.wait_until((folder / "started").exists, "a committed batch", timeout=300)
        started_ms, stop_s = feed("latency_b", peer)
    except BaseException:
        peer.kill9()
        raise
    rows = merged_rows(folder / "current", "SELECT _partition, _offset, _changed_at, _kafka_ts FROM t")
    timed, merging = applied_latencies(folder / "current", rows, started_ms)
    out["peer"] = {
        "rows_timed": len(timed),
        **latency_figures(timed, stop_s),
        "merge_start_to_commit": p50_p95(merging),
        "merge_commits": len(merge_commits(folder / "current")),
    }
    ratio = {}
    for key in ("p50_s", "p95_s"):
        x, y = out["onceflow"]["steady"][key], out["peer"]["steady"][key]
        ratio[key] = round(x / y, 2) if x and y else None
    out["steady_ratio_onceflow_to_peer"] = ratio
    out["trigger"] = LATENCY_TRIGGER
    out["max_offsets_per_trigger"] = LATENCY_MAX_OFFSETS
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=20_000, help="records of the change stream (tombstones included)")
    add_peer_options(ap, max_offsets=2_000)
    ap.add_argument(
        "--latency",
        action="store_true",
        help="measure the end-to-end latency of both sides as continuous streams instead (no rounds)",
    )
    ap.add_argument("--latency-rate", type=float, default=200, help="records/s produced while measuring latency")
    ap.add_argument("--latency-seconds", type=float, default=75, help="seconds of producing per side")
    args = ap.parse_args()
    settings = conf_settings(ap, args.conf)
    if args.latency:
        with scratch_broker("onceflow-bench-cdc-latency-") as (work, broker):
            latency = measure_latency(work, broker.bootstrap, args.latency_rate, args.latency_seconds)
        emit({"cores": os.cpu_count(), "partitions": PARTITIONS, "latency": latency}, args.json)
        return 0

    from onceflow.spark.session import build_session

    with scratch_broker("onceflow-bench-cdc-") as (work, broker):

        def pipeline(name: str, topic: str):
            return keyed_pipeline(work / name, broker.bootstrap, topic, name, args.max_offsets)[1]

        def changes(topic: str, count: int, seed: int):
            return produce_changes(broker.bootstrap, topic, count, seed)

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

        alternate(args.rounds, side_a, side_b)
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
    if len(sys.argv) > 1 and sys.argv[1] == "--stream-child":  # measure_latency's peer process
        peer_stream(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.exit(main())

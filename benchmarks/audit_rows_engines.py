"""The audit's row reconciliation on Spark against the same reconciliation without a JVM (issue #52's
design question, measured before it is built).

    .venv/bin/python benchmarks/audit_rows_engines.py [--events 3000 100000] [--json F]

For each size it starts from a fresh topic (payments events, 2% malformed, transactions), ingests it
available-now, fixes the committed point, and reconciles the rows three ways, checking they agree:
- `spark_warm`: onceflow.audit.rows.RowReconciler in a warm session (its second run), as the test
  suite's in-process audits and a long-lived driver pay;
- `spark_cold`: a fresh process, session included, as every Airflow audit task's spark-submit pays;
- `arrow`: confluent-kafka reads each partition's range at read_committed into Arrow batches, the
  audit's own judge (onceflow.audit.source.record_judge) runs on them in this process, delta-rs reads
  bronze and quarantine at the pinned versions, and one DuckDB union + group by (partition, offset)
  gives the same per-partition counts; `arrow_cold` is the same in a fresh Python process, and
  `arrow_judged_in_processes` has one spawned process per core judge a share of the batches.
The counts of all three must be equal (`same_counts`); the checksums are not compared (each engine
hashes with its own function). One run, 2 cores: quote ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from harness import child_figures, emit

from devkit.kafka import produce_events, scratch_broker

COUNTS = (
    "source_records",
    "source_valid",
    "source_malformed",
    "bronze_rows",
    "quarantine_rows",
    "lost_records",
    "phantom_rows",
    "duplicate_keys",
    "content_mismatches",
)


def _kafka_batches(pipeline, ranges: dict[int, tuple[int, int]], size: int = 20000):
    """The committed records of the ranges as Arrow batches (key, value, topic, partition, offset)."""
    import pyarrow as pa
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from onceflow.kafka.client import source_client

    topic = pipeline.source.topic
    settings = {
        "group.id": "onceflow-bench-audit-rows",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    }
    consumer = Consumer(source_client(pipeline).librdkafka(**settings))
    left = {p: e for p, (s, e) in ranges.items() if e > s}
    consumer.assign([TopicPartition(topic, p, ranges[p][0]) for p in left])
    cols: dict[str, list] = {"key": [], "value": [], "partition": [], "offset": []}

    def batch():
        arrays = [
            pa.array(cols["key"], pa.binary()),
            pa.array(cols["value"], pa.binary()),
            pa.array([topic] * len(cols["offset"]), pa.string()),
            pa.array(cols["partition"], pa.int32()),
            pa.array(cols["offset"], pa.int64()),
        ]
        for v in cols.values():
            v.clear()
        return pa.RecordBatch.from_arrays(arrays, names=["key", "value", "topic", "partition", "offset"])

    try:
        while left:
            for m in consumer.consume(10000, timeout=0.1):  # returns on 10,000 records or the timeout
                p, o, error = int(m.partition() or 0), int(m.offset() or 0), m.error()
                if error is not None:  # the end of a partition: its range is read when the end is past it
                    if error.code() == KafkaError._PARTITION_EOF and p in left and o >= left[p]:
                        del left[p]
                    continue
                if p not in left or o >= left[p]:
                    left.pop(p, None)
                    continue
                cols["key"].append(m.key())
                cols["value"].append(m.value())
                cols["partition"].append(p)
                cols["offset"].append(o)
                if o == left[p] - 1:
                    del left[p]
                if len(cols["offset"]) >= size:
                    yield batch()
        if cols["offset"]:
            yield batch()
    finally:
        consumer.close()


def _judge_part(pipeline, batches: list):
    """One process's share of the records, judged (a process of its own: the judge is pure Python)."""
    import pyarrow as pa

    from onceflow.audit.source import record_judge

    judge, _ = record_judge(pipeline)
    return pa.Table.from_batches(list(judge(iter(batches))))


def _judged(pipeline, raw: list, processes: int):
    import pyarrow as pa

    if processes <= 1:
        return _judge_part(pipeline, raw)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    records = pa.Table.from_batches(raw)
    size = -(-records.num_rows // processes)  # rows per process, rounded up
    shares = [records.slice(i * size, size).to_batches() for i in range(processes) if i * size < records.num_rows]
    # spawned, not forked: this process already runs delta-rs's threads, which a fork would not carry
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pa.concat_tables(pool.map(_judge_part, [pipeline] * len(shares), shares))


def arrow_rows(pipeline, point, processes: int = 1) -> tuple[list[dict], dict]:
    """Per-partition counts without Spark, and the seconds of each phase; `processes` judge the
    records side by side."""
    import duckdb
    from deltalake import DeltaTable

    from onceflow import tables
    from onceflow.sink_kinds import SinkName

    t: dict[str, float] = {}
    started = time.monotonic()
    raw = list(_kafka_batches(pipeline, point.ranges()))
    t["kafka_read"] = time.monotonic() - started
    lap = time.monotonic()
    source = _judged(pipeline, raw, processes)
    t["judge"] = time.monotonic() - lap
    lap = time.monotonic()
    columns = list(tables.bronze_columns(pipeline.schema, pipeline.keyed))
    key = ["_topic", "_partition", "_offset"]
    pinned = {name: point.sinks[name].version for name in (SinkName.BRONZE, SinkName.QUARANTINE)}
    bronze = DeltaTable(pipeline.resolve(pipeline.sinks.bronze.path), version=pinned[SinkName.BRONZE])
    quarantine = DeltaTable(pipeline.resolve(pipeline.sinks.quarantine.path), version=pinned[SinkName.QUARANTINE])
    tables_read = {
        "bronze": bronze.to_pyarrow_table(columns=[*columns, *key]),
        "quarantine": quarantine.to_pyarrow_table(columns=["_key", "_value", "reason", *key]),
    }
    t["delta_read"] = time.monotonic() - lap
    lap = time.monotonic()
    con = duckdb.connect()
    con.register("src", source)
    for name, table in tables_read.items():
        con.register(name, table)
    fields = ", ".join(f'"{c}"' for c in columns)
    rows = con.sql(
        f"""
        WITH u AS (
          SELECT _partition, _offset, 1 AS s, (reason IS NULL)::INT AS v,
                 CASE WHEN reason IS NULL THEN hash('bronze', {fields})
                      ELSE hash('quarantine', _key, _value, reason) END AS h, 0 AS b, 0 AS q
          FROM src
          UNION ALL SELECT _partition, _offset, 0, 0, hash('bronze', {fields}), 1, 0 FROM bronze
          UNION ALL SELECT _partition, _offset, 0, 0, hash('quarantine', _key, _value, reason), 0, 1 FROM quarantine
        ), g AS (
          SELECT _partition, sum(s) > 0 AS in_source, sum(v) > 0 AS valid, max(h) FILTER (WHERE s = 1) AS src_h,
                 sum(b + q) AS copies, min(h) FILTER (WHERE s = 0) AS h_min, max(h) FILTER (WHERE s = 0) AS h_max,
                 sum(b) AS bronze, sum(q) AS quarantine
          FROM u GROUP BY _partition, _offset
        )
        SELECT _partition,
               count(*) FILTER (WHERE in_source), count(*) FILTER (WHERE valid),
               count(*) FILTER (WHERE in_source AND NOT valid), sum(bronze), sum(quarantine),
               count(*) FILTER (WHERE in_source AND copies = 0),
               coalesce(sum(copies) FILTER (WHERE NOT in_source), 0),
               count(*) FILTER (WHERE copies > 1),
               count(*) FILTER (WHERE in_source AND copies > 0 AND (h_min <> src_h OR h_max <> src_h))
        FROM g GROUP BY _partition ORDER BY _partition
        """
    ).fetchall()
    t["reconcile"] = time.monotonic() - lap
    t["total"] = time.monotonic() - started
    counts = [{n: int(v or 0) for n, v in zip(("partition", *COUNTS), row, strict=True)} for row in rows]
    return counts, {k: round(v, 3) for k, v in t.items()}


def spark_rows(spark, pipeline, point) -> tuple[list[dict], float]:
    from onceflow.audit.rows import RowReconciler

    started = time.monotonic()
    rec = RowReconciler(spark, pipeline, point)
    rec.bronze, rec.quarantine = rec.cache(rec.bronze), rec.cache(rec.quarantine)  # as run_audit does
    result = rec.run()
    rec.release()
    counts = [{k: int(r[k]) for k in ("partition", *COUNTS)} for r in result.partitions]
    return counts, round(time.monotonic() - started, 3)


def _pipeline(folder: str, bootstrap: str):
    from devkit.pipelines import pipeline_file

    return pipeline_file(Path(folder), bootstrap, "bench", name="audit_rows", max_offsets=1_000_000)[1]


def child(engine: str, folder: str, bootstrap: str) -> None:
    """A fresh process: the engine's whole cost, imports and session included."""
    started = time.monotonic()
    from onceflow.facts import read_committed_point
    from onceflow.reconcile import AuditScope

    pipeline = _pipeline(folder, bootstrap)
    point = read_committed_point(pipeline, AuditScope.FULL, None)
    if engine == "spark":
        from onceflow.spark.session import build_session

        spark = build_session("onceflow-bench-rows-cold", master="local[*]", extra={"spark.eventLog.enabled": "false"})
        counts, _ = spark_rows(spark, pipeline, point)
        spark.stop()
    else:
        counts, _ = arrow_rows(pipeline, point)
    print("FIGURES " + json.dumps({"seconds": round(time.monotonic() - started, 2), "counts": counts}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, nargs="+", default=[3000, 100000])
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()

    from onceflow.facts import read_committed_point
    from onceflow.reconcile import AuditScope
    from onceflow.spark.ingest import run_ingest
    from onceflow.spark.session import build_session

    sizes = []
    for events in args.events:
        with scratch_broker("onceflow-bench-audit-rows-") as (work, broker):
            produce_events(broker.bootstrap, "bench", events, malformed_ratio=0.02, txn_size=500)
            folder = work / "pipeline"
            pipeline = _pipeline(str(folder), broker.bootstrap)
            spark = build_session("onceflow-bench-rows", master="local[*]", extra={"spark.eventLog.enabled": "false"})
            run_ingest(pipeline, spark=spark)
            point = read_committed_point(pipeline, AuditScope.FULL, None)
            spark_rows(spark, pipeline, point)  # the session's first: compiles and warms
            counts, warm = spark_rows(spark, pipeline, point)
            spark.stop()
            arrow_rows(pipeline, point)  # imports and caches, as a warm process holds them
            arrow_counts, arrow = arrow_rows(pipeline, point)
            split_counts, split = arrow_rows(pipeline, point, processes=os.cpu_count() or 1)
            cold = {e: child_figures(__file__, [e, str(folder), broker.bootstrap]) for e in ("spark", "arrow")}
            same = counts == arrow_counts == split_counts == cold["spark"]["counts"] == cold["arrow"]["counts"]
            records = sum(c["source_records"] for c in counts)
            sizes.append(
                {
                    "events": events,
                    "committed_records": records,
                    "same_counts": same,
                    "spark_warm_s": warm,
                    "arrow_warm_s": arrow["total"],
                    "arrow_phases_s": arrow,
                    "arrow_judged_in_processes_s": split,
                    "spark_cold_s": cold["spark"]["seconds"],
                    "arrow_cold_s": cold["arrow"]["seconds"],
                    "warm_ratio": round(arrow["total"] / warm, 3),
                    "cold_ratio": round(cold["arrow"]["seconds"] / cold["spark"]["seconds"], 3),
                    "arrow_records_per_s": round(records / arrow["total"]),
                }
            )
            if not same:
                sizes[-1]["counts"] = {"spark": counts, "arrow": arrow_counts}
            print(json.dumps(sizes[-1]), flush=True)
    emit({"cores": os.cpu_count(), "sizes": sizes}, args.json)
    return 0 if all(s["same_counts"] for s in sizes) else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
        sys.exit(0)
    sys.exit(main())

"""The training app of the driver's class-data archive (onceflow.spark.class_archive).

    python -m onceflow.spark.archive_training TARGET

`class_archive.build` (run by `onceflow setup`) starts it in a process of its own with
`-XX:ArchiveClassesAtExit=TARGET`: a driver that does the work every onceflow driver does,
then exits, and its JVM writes the classes it loaded to TARGET.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from delta.tables import DeltaTable
from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from onceflow import tables
from onceflow.paths import state_dir
from onceflow.schema.model import AggregatesSpec, FieldSpec, Schema
from onceflow.spark.parse import bronze_rows, parse_events, quarantine_rows
from onceflow.spark.session import build_session
from onceflow.spark.sinks.delta import batch_aggregates, ensure_table, merge_aggregates


def train(spark: SparkSession, work: Path) -> None:
    """Work of the kinds every onceflow driver does, so that their classes are archived: the
    parse of Kafka-shaped rows, Delta creates, idempotent appends, a MERGE, reads, a compaction
    and a stream through foreachBatch. The schema is a made-up one: any declared schema runs
    through the same code."""
    schema = Schema(
        fields=(
            FieldSpec(name="id", type="string", max_length=40),
            FieldSpec(name="kind", type="string", allowed=("a", "b")),
            FieldSpec(name="n", type="long", min=0),
            FieldSpec(name="x", type="decimal(12,2)"),
            FieldSpec(name="note", type="string", required=False, pattern="^[a-z]+$", examples=("ok",)),
            FieldSpec(name="at", type="timestamp"),
        ),
        event_time="at",
        event_id="id",
    )
    aggs = AggregatesSpec(group_by=("kind",), metrics={"events": "count", "n_sum": "sum(n)", "x_max": "max(x)"})
    now = datetime.now(UTC)
    values = [
        json.dumps({"id": f"e{i}", "kind": "ab"[i % 2], "n": i, "x": i / 4, "at": now.isoformat()}).encode()
        for i in range(400)
    ] + [b"{not json", b'{"id": "e1", "kind": "c"}', b"[1]"]
    kafka = spark.createDataFrame(
        [(str(i).encode(), v, "train", i % 2, i, now) for i, v in enumerate(values)],
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp",
    )
    parsed = parse_events(kafka, schema).cache()
    paths = {name: str(work / name) for name in ("bronze", "quarantine", "aggregates", "copy")}
    ensure_table(spark, paths["bronze"], tables.bronze_ddl(schema))
    ensure_table(spark, paths["quarantine"], tables.QUARANTINE_DDL)
    ensure_table(spark, paths["aggregates"], tables.aggregates_ddl(schema, aggs))
    for version in (0, 1):
        for name, rows in (
            ("bronze", bronze_rows(parsed, schema, version, 0)),
            ("quarantine", quarantine_rows(parsed, version, 0)),
        ):
            (
                rows.write.format("delta")
                .mode("append")
                .option("txnAppId", f"train-{name}")
                .option("txnVersion", version)
                .option("userMetadata", "{}")
                .save(paths[name])
            )
        bronze = spark.read.format("delta").load(paths["bronze"]).where(F.col("_batch_id") == version)
        merge_aggregates(
            spark,
            paths["aggregates"],
            batch_aggregates(bronze, schema, aggs, "1 minute"),
            aggs,
            "train-aggregates",
            version,
            "{}",
        )
    DeltaTable.forPath(spark, paths["bronze"]).optimize().executeCompaction()
    spark.read.format("delta").load(paths["aggregates"]).groupBy("kind").agg(F.sum("events")).collect()
    query = (
        spark.readStream.format("delta")
        .load(paths["bronze"])
        .writeStream.foreachBatch(lambda df, batch: df.write.format("delta").mode("append").save(paths["copy"]))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)


def main(target: str) -> int:
    """The training app: a driver that writes the archive of its classes when its JVM exits."""
    spark = build_session(
        "onceflow-class-archive",
        master="local[2]",
        extra={"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={target}"},
    )
    work = state_dir() / "train"
    work.mkdir(parents=True, exist_ok=True)
    train(spark, work)
    gateway = SparkContext._gateway
    assert gateway is not None  # the session above started it
    proc = gateway.proc  # the JVM writes the archive as it exits: wait for that
    spark.stop()
    proc.stdin.close()  # its gateway exits when this pipe closes
    return proc.wait(600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

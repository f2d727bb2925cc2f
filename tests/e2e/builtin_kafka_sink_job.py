"""The baseline of the Kafka-sink proof: the same stream through Spark's built-in Kafka sink.

Kafka (read_committed) → the pipeline's validation → valid events → Spark's own
`format("kafka")` writer (at-least-once), from foreachBatch so the same fault
points as the transactional sink can be placed: `crash_after_tasks:K@batch:N`
writes the task partitions below K (same split: `pmod(hash(key), n)`) and then
kills the driver's process group; `crash_after_write@batch:N` writes the whole
batch first. Every completed write is logged as one JSON line, so the test can
say how many duplicates the replays must have produced.

    python tests/e2e/builtin_kafka_sink_job.py --bootstrap B --source-topic T --output-topic O \
        --checkpoint DIR --log FILE [--max-offsets N] [--partitions 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--source-topic", required=True)
    ap.add_argument("--output-topic", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--log", required=True, help="JSON lines: one per completed write")
    ap.add_argument("--max-offsets", type=int, default=3000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--key", default="account_id")
    ap.add_argument("--value", default="to_json(struct(*))")
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from onceflow import config
    from onceflow.faults import kafka_sink as faults
    from onceflow.spark.kafka_read import kafka_options
    from onceflow.spark.parse import bronze_rows, parse_events
    from onceflow.spark.session import build_session

    fault = faults.from_env()
    # the payments example's declared event (this job stands in for what a user would write by hand)
    schema = config.load(Path(__file__).resolve().parents[2] / "pipelines" / "payments.yaml", env={}).schema
    spark = build_session("onceflow-builtin-kafka-sink", master=os.environ.get("ONCEFLOW_SPARK_MASTER", "local[2]"))
    n = args.partitions

    def log(batch_id: int, rows: int, tasks: list[int], complete: bool) -> None:
        with open(args.log, "a") as f:
            f.write(
                json.dumps({"pid": os.getpid(), "batch": batch_id, "rows": rows, "tasks": tasks, "complete": complete})
                + "\n"
            )

    def write(df) -> int:
        rows = df.count()
        (
            df.select("key", "value")
            .write.format("kafka")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("topic", args.output_topic)
            .save()
        )
        return rows

    def batch(batch_df, batch_id: int) -> None:
        bronze = bronze_rows(parse_events(batch_df, schema), schema, batch_id, 0)
        out = (
            bronze.select(
                F.expr(args.key).cast("binary").alias("key"), F.expr(args.value).cast("binary").alias("value")
            )
            .withColumn("task", F.pmod(F.hash("key"), F.lit(n)))
            .cache()
        )
        try:
            if fault is not None and fault.crashes_task(batch_id, n - 1):
                tasks = list(range(fault.tasks))
                log(batch_id, write(out.where(F.col("task") < fault.tasks)), tasks, False)
                faults.kill_driver(fault, f"built-in sink: batch {batch_id} written for tasks {tasks} only")
            log(batch_id, write(out), list(range(n)), True)
            if fault is not None and fault.crashes_after_write(batch_id):
                faults.kill_driver(fault, f"built-in sink: batch {batch_id} written; Spark has not committed it")
        finally:
            out.unpersist()

    stream = (
        spark.readStream.format("kafka")
        .options(
            **kafka_options(args.bootstrap, args.source_topic, "earliest", maxOffsetsPerTrigger=str(args.max_offsets))
        )
        .load()
    )
    query = (
        stream.writeStream.option("checkpointLocation", args.checkpoint)
        .foreachBatch(batch)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

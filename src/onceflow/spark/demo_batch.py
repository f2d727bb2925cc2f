"""A one-shot batch copy of a topic's committed records into Delta (the
foundation demo; the streaming ingest replaces it)."""

from __future__ import annotations

from onceflow.config import Pipeline
from onceflow.spark.kafka_read import read_committed_batch
from onceflow.spark.session import build_session


def ingest_batch(pipeline: Pipeline) -> dict[int, int]:
    spark = build_session(f"onceflow-demo-{pipeline.name}", master=pipeline.spark_master)
    df = read_committed_batch(spark, pipeline.source.bootstrap_servers, pipeline.source.topic)
    path = pipeline.resolve(pipeline.sinks.bronze.path) + "_raw"
    df.write.format("delta").mode("overwrite").save(path)
    counts = spark.read.format("delta").load(path).groupBy("partition").count().collect()
    return {row["partition"]: row["count"] for row in counts}

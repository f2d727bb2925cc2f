"""Backfill: re-read an offset range of the source and account for every record in it.

The range is read as one batch at read_committed (aborted transactions never
enter) and validated exactly as the stream does (parse_events). Each record is
then looked up in the tables by (topic, partition, offset): a record already in
bronze or quarantine is never written again, so a backfill over a range that was
ingested adds nothing. Records of the range the tables lack are refused, not
written: inside the committed ledger they are a gap `onceflow recover` repairs
from the ledgers, and a write without a ledger entry would break the audit's proof.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from onceflow.config import Pipeline
from onceflow.errors import OnceflowError


class BackfillError(OnceflowError):
    """A backfill range could not be read, or holds records the tables lack."""


@dataclass(frozen=True)
class BackfillResult:
    pipeline: str
    start: dict[str, int]
    end: dict[str, int]
    records: int       # committed records Kafka holds in the range
    present: int       # of those, already in bronze or quarantine
    added: int         # rows written by this backfill

    def as_dict(self) -> dict:
        return asdict(self)


def run_backfill(pipeline: Pipeline, start: dict[int, int], end: dict[int, int], spark=None,
                 log=lambda msg: None) -> BackfillResult:
    """Check [start, end) per partition against the tables; see the module doc."""
    from pyspark.sql import functions as F

    from onceflow.spark.ingest import table_paths
    from onceflow.spark.kafka_read import read_committed_batch
    from onceflow.spark.parse import parse_events
    from onceflow.status import RunLock

    parts = sorted(p for p in start if end.get(p, start[p]) > start[p])
    keyed = {"start": {str(p): start[p] for p in sorted(start)}, "end": {str(p): end[p] for p in sorted(end)}}
    if not parts:
        return BackfillResult(pipeline.name, keyed["start"], keyed["end"], 0, 0, 0)
    topic = pipeline.source.topic
    lock = RunLock(pipeline.state_path)   # the tables must not move under the comparison
    lock.acquire(mode="backfill", pipeline=pipeline.name)
    try:
        if spark is None:
            from onceflow.spark.session import build_session

            spark = build_session(f"onceflow-backfill-{pipeline.name}", master=pipeline.spark_master)
        raw = read_committed_batch(spark, pipeline.source.bootstrap_servers, topic,
                                   starting=json.dumps({topic: {str(p): start[p] for p in parts}}),
                                   ending=json.dumps({topic: {str(p): end[p] for p in parts}}))
        keys = parse_events(raw, pipeline.event).select("_topic", "_partition", "_offset").persist()
        try:
            records = keys.count()
            paths = table_paths(pipeline)
            held = None
            for sink in ("bronze", "quarantine"):
                rows = spark.read.format("delta").load(paths[sink]).select("_topic", "_partition", "_offset")
                held = rows if held is None else held.unionByName(rows)
            missing = keys.join(held.where(F.col("_topic") == topic).distinct(),
                                ["_topic", "_partition", "_offset"], "left_anti")
            lacking = missing.count()
            sample = [(r["_partition"], r["_offset"]) for r in missing.orderBy("_partition", "_offset").limit(5).collect()]
        finally:
            keys.unpersist()
    finally:
        lock.release()
    log(f"{pipeline.name}: backfill {keyed}: {records} committed records, {records - lacking} already in the tables")
    if lacking:
        raise BackfillError(
            f"{pipeline.name}: {lacking} of {records} committed records in the range are in neither bronze nor "
            f"quarantine (first (partition, offset): {sample}). Fix: run `onceflow recover --pipeline "
            f"{pipeline.file or pipeline.name}` — it re-reads from the sink ledgers; `onceflow audit --full` "
            "shows the gap.")
    return BackfillResult(pipeline.name, keyed["start"], keyed["end"], records, records, 0)

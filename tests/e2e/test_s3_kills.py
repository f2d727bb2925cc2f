"""Exactly once under hard kills with the tables and the checkpoint on S3 (a real S3 API server).

A share of the kill schedule of test_hard_kills.py (its budget): one crash in each exactly-once
window of the job (faults.JOB_POINTS), each run a fresh driver that takes the killed one's lease in
the store over, while events (with aborted transactions and malformed records) keep arriving;
then a catch-up run, and the Delta tables, read by delta-rs from the store, hold every committed
record exactly once against an independent read_committed consumer.
"""

from __future__ import annotations

import pytest

from devkit.driver import IngestProcess
from devkit.pipelines import pipeline_file, table_sinks
from onceflow import faults
from onceflow.checkpoint import read_checkpoint
from onceflow.sinks import lease_folder, read_ledgers
from onceflow.spark.ingest import run_ingest
from onceflow.storage.lease import read_lease
from onceflow.storage.location import Location
from tests.e2e.test_hard_kills import Producer
from tests.exactly_once import assert_exactly_once, assert_ledgers_contiguous

pytestmark = pytest.mark.e2e

EVENTS, PER_BATCH, SEED = 12_000, 800, 20261128


def _next_batch(checkpoint: str) -> int:
    planned = read_checkpoint(checkpoint).latest_planned
    return 0 if planned is None else planned + 1


def _unmerged_batch(pipeline) -> int | None:
    ledgers = read_ledgers(pipeline, kafka=False)
    merged = {(e.generation, e.batch_id) for e in ledgers["aggregates"].entries}
    waiting = [e.batch_id for e in ledgers["bronze"].entries if (e.generation, e.batch_id) not in merged]
    return min(waiting, default=None)


def test_hard_kills_in_every_window_with_tables_and_checkpoint_on_s3(broker, spark, s3, topic, tmp_path):
    data = s3.url("kills", topic)
    file, pipeline = pipeline_file(
        tmp_path / "pipeline",
        broker.bootstrap,
        topic,
        sinks=table_sinks(data),
        checkpoint=f"{data}/checkpoint",
        max_offsets=PER_BATCH,
        available_now_max_offsets=60_000,
        trigger={"processing_time": "500 ms"},
    )
    assert Location(pipeline.checkpoint_path).is_s3
    producer = Producer(broker.bootstrap, topic, EVENTS, rate=600, seed=SEED)
    producer.start()
    job = IngestProcess(pipeline, file, tmp_path)
    for point in faults.JOB_POINTS:
        unmerged = _unmerged_batch(pipeline) if point == "before_aggregates_commit" else None
        target = _next_batch(pipeline.checkpoint_path) if unmerged is None else unmerged
        job.start(fault=f"{point}@{target}")
        code = job.wait_exit(timeout=600)
        assert code == faults.EXIT_CODE, f"expected the injected crash at {point}@{target}, got {code}:\n{job.tail()}"
        folder = lease_folder(pipeline)
        assert folder is not None and not (read_lease(folder) or {}).get("released")  # killed: never released

    summary = producer.result()
    final = run_ingest(pipeline, spark=spark)  # takes the last killed driver's lease over at once
    assert final.status == "finished", final
    counts = assert_exactly_once(pipeline, broker.bootstrap, produced=[summary])
    assert counts["committed"] == summary.count("committed")
    assert_ledgers_contiguous(pipeline)
    assert job.runs == len(faults.JOB_POINTS)

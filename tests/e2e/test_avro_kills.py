"""Exactly-once for an Avro topic whose schema evolves mid-stream, through hard kills and a registry
that stops answering for 60 s (issue #51's proofs).

A producer writes Avro in the wire format (generate/avro_events.py) while the stream runs: the
first half with the declared fields' first version, the rest with the second (a field added with
its default), beside aborted transactions and malformed records of every Avro reason. The driver
is killed inside each exactly-once window of the job (one batch, replayed by each next run). Then
the registry is frozen (SIGSTOP: it accepts connections and never answers, as a hung or partitioned
registry does) while a fresh driver, which knows no schema yet, starts: for 60 s it must commit
nothing and quarantine nothing, then resume by itself once the registry answers again, and is
killed at random after that. A last run catches up. Then every committed record is in bronze or
quarantine exactly once, each malformed one with its kind as reason, both versions' records in
bronze (the added field only in the second's), and the audit, whose judge decodes with fastavro,
passes.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter

import pytest
from deltalake import DeltaTable

from devkit.driver import IngestProcess
from devkit.kafka import BackgroundProducer
from devkit.pipelines import PAYMENTS_SCHEMA_BODY, pipeline_file
from onceflow.audit.run import run_audit
from onceflow.generate.framing import registry_framing
from onceflow.generate.producer import VALID
from onceflow.registry import unframe
from onceflow.sinks import table_paths
from onceflow.spark.ingest import run_ingest
from tests.exactly_once import assert_exactly_once, assert_ledgers_contiguous, kill_in_every_job_window

pytestmark = pytest.mark.e2e

EVENTS, PARTITIONS, PER_BATCH = 6000, 3, 400
OUTAGE_SECONDS = 60
SEED = 20261130


def test_an_evolving_avro_stream_lands_exactly_once_through_kills_and_a_frozen_registry(
    broker, spark, registry, topic, tmp_path
):
    rng = random.Random(SEED)
    fields = [*PAYMENTS_SCHEMA_BODY["fields"], {"name": "channel", "type": "string", "required": False}]
    schema = {**PAYMENTS_SCHEMA_BODY, "format": "avro", "registry": {"url": registry.url}, "fields": fields}
    file, pipeline = pipeline_file(
        tmp_path / "pipeline",
        broker.bootstrap,
        topic,
        schema=schema,
        max_offsets=PER_BATCH,
        available_now_max_offsets=60000,
        trigger={"processing_time": "500 ms"},
    )
    framing = registry_framing(pipeline, malformed=True)
    writers = framing["writers"]
    producer = BackgroundProducer(
        broker.bootstrap,
        topic,
        EVENTS,
        schema=pipeline.schema,
        group_by=("account_id",),
        partitions=PARTITIONS,
        rate=500,
        seed=SEED,
        abort_ratio=0.06,
        malformed_ratio=0.03,
        **framing,
    )
    producer.start()
    job = IngestProcess(pipeline, file, tmp_path)

    kill_in_every_job_window(job, pipeline)  # as test_hard_kills.py

    # the registry frozen: a fresh driver must wait, committing and quarantining nothing, then go on
    pid = registry.status().pid
    assert pid is not None
    paths = table_paths(pipeline)
    quarantined = DeltaTable(paths["quarantine"]).to_pyarrow_table().num_rows
    seen = job.progress_count()
    os.kill(pid, signal.SIGSTOP)
    try:
        job.start()
        time.sleep(OUTAGE_SECONDS)  # the outage itself: a deliberate delay, not a wait for something
        assert job.process.poll() is None, f"the job gave up while the registry did not answer:\n{job.tail()}"
        assert job.progress_count() == seen, "a batch was committed without its schemas"
        assert DeltaTable(paths["quarantine"]).to_pyarrow_table().num_rows == quarantined
        assert "does not answer" in job.tail(200), job.tail()
    finally:
        os.kill(pid, signal.SIGCONT)
    job.wait_progress(more_than=seen, timeout=300)  # resumed by itself
    time.sleep(rng.uniform(0.0, 2.0))  # the kill's moment: a deliberate random delay
    job.kill9()

    summary = producer.result()
    final = run_ingest(pipeline, spark=spark)
    assert final.status == "finished", final

    counts = assert_exactly_once(pipeline, broker.bootstrap, produced=[summary])
    assert counts["committed"] == summary.count("committed")
    assert_ledgers_contiguous(pipeline)
    committed = [r for r in summary.records if not r.aborted]
    kinds = Counter(r.kind for r in committed if r.kind != VALID)
    assert {"avro_other_subject", "avro_unsupported_schema", "avro_undecodable", "below_min"} <= set(kinds), kinds
    valid = [r for r in committed if r.kind == VALID and r.value is not None]
    versions = {r.event_id: unframe(r.value)[0] for r in valid}  # type: ignore[index,arg-type]
    assert set(versions.values()) == {writers.first.schema_id, writers.evolved.schema_id}
    bronze = DeltaTable(paths["bronze"]).to_pyarrow_table(columns=["event_id", "channel"]).to_pylist()
    assert all(r["channel"] is None for r in bronze if versions[r["event_id"]] == writers.first.schema_id)
    assert any(r["channel"] is not None for r in bronze)

    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    failed = {c["name"]: c["detail"] for c in outcome.summary["checks"] if c["status"] == "failed"}
    assert outcome.status == "passed", failed
    print(
        f"\n{job.runs + 1} runs, {job.runs} killed, the registry frozen {OUTAGE_SECONDS}s: {counts['committed']} "
        f"committed records exactly once ({counts['bronze']} bronze, {counts['quarantine']} quarantine), "
        f"{Counter(versions.values())} valid per schema id; the audit passed"
    )

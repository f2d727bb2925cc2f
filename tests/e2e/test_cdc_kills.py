"""Change data capture exactly once through kills (issue 41's proof): a Debezium change stream
made by the generator (snapshot reads, creates, updates, deletes with their tombstones, key
changes, duplicate and out-of-order deliveries, malformed envelopes, aborted transactions) is
ingested by a continuous job that is killed in every window of the keyed table's commit, then
loses its checkpoint and is recovered:

  1. `before_sink_commit`: after two batches (and their merges), the run dies before any table
     holds its third;
  2. `before_current_commit`: the next run replays that batch and goes on; the keyed table's
     merge of the batch after it dies (bronze holds it);
  3. `after_current_commit`: the next run's first merge takes it, commits and dies;
  4. the checkpoint is deleted; `recover` starts a new generation from the ledgers; a catch-up
     run reads the rest.
The keyed table's small groups are merged from the driver with delta-rs, the groups a killed
run left pending through Spark: both take part. Each fault is aimed where the run must reach it
whatever the machine's speed: the first two at batches still to be read (the stream holds 16),
the third at a batch bronze holds and the keyed table lacks.

Then the keyed table equals the table the database ended with (the generator's, not a replay of
what the job read), bronze and quarantine hold every committed record once (the tombstones in
neither), the ledgers are contiguous, and the audit, whose check replays bronze with the
reference fold, passes.
"""

from __future__ import annotations

import shutil

import pytest

from devkit.driver import IngestProcess
from devkit.pipelines import cdc_pipeline_file
from onceflow import faults
from onceflow.audit.run import run_audit
from onceflow.generate.producer import produce
from onceflow.recovery import recover
from onceflow.recovery.cases import Case
from onceflow.sinks import read_ledgers
from onceflow.spark.ingest import run_ingest
from tests.exactly_once import assert_current_exactly_once, assert_ledgers_contiguous, first_unmerged, next_batch

pytestmark = pytest.mark.e2e

RECORDS, PARTITIONS, PER_BATCH = 4000, 3, 250


def test_the_keyed_table_is_the_databases_through_kills_in_every_window_and_a_lost_checkpoint(
    broker, spark, topic, tmp_path
):
    file, pipeline = cdc_pipeline_file(
        tmp_path / "pipeline",
        broker.bootstrap,
        topic,
        current={"merge_every": "1 second"},  # a merge a second: the kills land mid-stream
        max_offsets=PER_BATCH,
        trigger={"processing_time": "500 ms"},
    )
    assert pipeline.keyed is not None and pipeline.keyed.debezium
    summary = produce(
        broker.bootstrap,
        topic,
        RECORDS,
        schema=pipeline.schema,
        keyed=pipeline.keyed,
        partitions=PARTITIONS,
        seed=20261128,
        abort_ratio=0.1,
        malformed_ratio=0.03,
        duplicate_ratio=0.1,
        out_of_order_ratio=0.1,
        txn_size=50,
    )
    stream = summary.changes
    assert stream is not None
    counts = stream.summary()
    for kind in ("deletes", "key_changes", "duplicates", "out_of_order", "malformed", "snapshot_reads"):
        assert counts[kind] > 0, f"the stream must hold {kind} for the proof to mean anything: {counts}"

    job = IngestProcess(pipeline, file, tmp_path)
    checkpoint = pipeline.checkpoint_path
    for point, target in (
        ("before_sink_commit", lambda: 2),
        ("before_current_commit", lambda: next_batch(checkpoint)),
        ("after_current_commit", lambda: first_unmerged(pipeline, "current")),
    ):
        at = target()
        assert at is not None, f"{point}: bronze must hold a batch the keyed table lacks"
        job.start(fault=f"{point}@{at}")
        code = job.wait_exit(timeout=600)
        assert code == faults.EXIT_CODE, f"expected the injected crash at {point}@{at}, got exit {code}:\n{job.tail()}"
        ledgers = read_ledgers(pipeline, kafka=False)
        bronze, current = ({e.batch_id for e in ledgers[n].entries} for n in ("bronze", "current"))
        if point == "before_sink_commit":
            assert at not in bronze and at not in current
        elif point == "before_current_commit":
            assert at in bronze and at not in current, (sorted(bronze), sorted(current))
        else:
            assert at in current

    # both ways of merging took part: small batches handed over by the batch thread, with delta-rs;
    # the batches a killed run left in bronze, read back through Spark by the next run
    merges = [
        ln for log in tmp_path.glob("ingest-*.log") for ln in log.read_text().splitlines() if "current: merged" in ln
    ]
    assert any("with delta-rs" in ln for ln in merges) and any("with delta-rs" not in ln for ln in merges), merges

    # 4. the checkpoint is lost: recovery starts a new generation at the sinks' own points
    shutil.rmtree(checkpoint)
    result = recover(pipeline)
    assert result.outcome == "done" and result.plan is not None and result.plan.case == Case.MISSING, result
    final = run_ingest(pipeline, spark=spark)  # the catch-up, in the session's warm driver
    assert final.status == "finished" and final.generation == 1, final

    landed = assert_current_exactly_once(pipeline, broker.bootstrap, stream)
    assert landed["tombstones"] == counts["tombstones"] and landed["deleted"] > 0
    assert_ledgers_contiguous(pipeline)
    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    checks = {c["name"]: c for c in outcome.summary["checks"]}
    assert outcome.status == "passed", {n: c["detail"] for n, c in checks.items() if c["status"] == "failed"}
    assert any(n.startswith("current") and c["status"] == "passed" for n, c in checks.items()), sorted(checks)
    print(
        f"\n{job.runs + 1} runs, {job.runs} killed, the checkpoint lost once: {landed['committed']} committed "
        f"changes exactly once ({landed['tombstones']} tombstones skipped); the keyed table holds the "
        f"database's {landed['rows']} rows and {landed['deleted']} tombstones"
    )

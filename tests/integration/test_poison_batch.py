"""A batch the job cannot process is named, not looped, and an operator moves it aside.

One record makes its batch fail in a Spark task in every run (ONCEFLOW_FAULT_POISON, as a
record meeting an engine bug would). After three failed runs on that batch the health
verdict is `poisoned` with the batch, its offsets and the error; recovery refuses to restart
it and names `onceflow quarantine`. The operator runs it; the next run writes the batch's
records to quarantine as `unprocessable` with their raw bytes, without reading them, and
the stream goes on: exactly once against an independent reader, and the audit passes.
"""

from __future__ import annotations

import json

import pytest

from devkit.kafka import consume_all
from devkit.pipelines import PAYMENTS_SCHEMA, pipeline_file
from onceflow.cli.app import main
from onceflow.errors import IngestError
from onceflow.faults import ENV_POISON
from onceflow.generate.producer import produce
from onceflow.health import pipeline_health
from onceflow.recovery import plan_recovery
from onceflow.schema.reasons import Reason
from onceflow.sinks import table_paths
from onceflow.spark.ingest import run_ingest
from onceflow.state.poison import POISON_AFTER
from onceflow.verdicts import Verdict
from tests.exactly_once import assert_exactly_once, assert_ledgers_contiguous, table_rows

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_poisoned_batch_is_named_refused_for_restart_and_moved_to_quarantine_by_hand(
    broker, spark, tmp_path, topic, monkeypatch
):
    produce(broker.bootstrap, topic, 300, schema=PAYMENTS_SCHEMA, partitions=1, seed=36, malformed_ratio=0.02)
    path, pipeline = pipeline_file(tmp_path, broker.bootstrap, topic, max_offsets=100)
    monkeypatch.setenv(ENV_POISON, "0:150")  # batch 0 is [0, 100); batch 1, [100, 200), holds it

    errors = []
    for _ in range(POISON_AFTER):
        with pytest.raises(IngestError) as failed:
            run_ingest(pipeline, spark=spark)
        errors.append(str(failed.value))
    assert all("poison record at partition 0 offset 150" in e for e in errors), errors

    health = pipeline_health(pipeline).as_json()
    assert health["verdict"] == Verdict.POISONED and health["exit_code"] == 1, health["reasons"]
    poisoned = health["run"]["poisoned"]
    assert poisoned["batch_id"] == 1 and poisoned["ranges"] == {"0": [100, 200]} and poisoned["runs"] == 3
    assert "partition 0 [100, 200)" in health["reasons"][0] and "onceflow quarantine" in health["reasons"][1]

    plan = plan_recovery(pipeline)
    assert plan.refused and plan.case == "poisoned_batch", plan.summary
    assert f"onceflow quarantine --pipeline {path} --batch 1" in (plan.refusal or ""), plan.refusal

    assert main(["quarantine", "--pipeline", str(path), "--batch", "2"]) == 2, "a batch never planned is refused"
    assert main(["quarantine", "--pipeline", str(path), "--batch", "1", "--note", "issue #36 drill"]) == 0
    declared = json.loads((pipeline.state_path / "unprocessable.json").read_text())
    assert [(d["ranges"], d["batch_id"], d["note"]) for d in declared] == [({"0": [100, 200]}, 1, "issue #36 drill")]
    assert pipeline_health(pipeline).verdict == Verdict.FAILED, "handled: the next run gets past it"
    assert not plan_recovery(pipeline).refused

    result = run_ingest(pipeline, spark=spark)  # the fault is still set: the record is never read again
    assert result.status == "finished", result

    assert_exactly_once(pipeline, broker.bootstrap)
    assert_ledgers_contiguous(pipeline)
    raw = {o: v for p, o, _, v in consume_all(broker.bootstrap, topic, "read_committed")}
    quarantine = table_rows(table_paths(pipeline)["quarantine"], ["_offset", "_value", "reason"])
    moved = {r["_offset"]: r for r in quarantine if r["reason"] == Reason.UNPROCESSABLE}
    assert set(moved) == {o for o in raw if 100 <= o < 200}, sorted(moved)[:5]  # (transaction markers take offsets)
    assert all(r["_value"] == raw[o] for o, r in moved.items()), "raw bytes kept"
    assert pipeline_health(pipeline).verdict == Verdict.STOPPED

    from onceflow.audit.run import run_audit

    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    assert outcome.status == "passed", outcome.summary["failed_checks"]

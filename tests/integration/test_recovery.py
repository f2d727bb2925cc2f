"""`onceflow recover` against a real broker, Spark and Delta: one test per way things break.

Each test produces events, runs the stream, breaks things the way they break in
production (a driver killed mid-batch, a truncated offsets file, a deleted
checkpoint, a leftover .tmp file, a removed commit, a table restored from an
older copy, Kafka retention deleting unread segments), runs the recovery,
resumes, and proves zero duplicates and zero loss against an independent
read_committed consumer — or, for retention, that the reported lost ranges are
exactly the deleted ones.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from deltalake import DeltaTable

from devkit.delta_history import write_engines
from devkit.driver import SHORT_LIVED_DRIVER
from devkit.kafka import consume_all
from devkit.pipelines import PAYMENTS_SCHEMA, SENSORS_AGGREGATES, SENSORS_SCHEMA, SENSORS_SCHEMA_BODY, write_pipeline
from onceflow import faults
from onceflow.audit.run import run_audit
from onceflow.checkpoint import read_checkpoint
from onceflow.cli import main
from onceflow.config import load
from onceflow.generate.producer import produce
from onceflow.health import pipeline_health
from onceflow.kafka.admin import admin_client, ensure_topic, watermarks
from onceflow.ledger import EntryKind, read_ledger
from onceflow.recovery import plan_recovery, recover
from onceflow.recovery.cases import Case, Decision
from onceflow.recovery.record import list_records, read_record
from onceflow.sinks import table_paths
from onceflow.spark.ingest import run_ingest
from onceflow.state.generation import read_identity
from onceflow.state.status import RunLock
from tests.exactly_once import assert_exactly_once

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # starts a Spark JVM (not in `make test-fast`)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "docs/schemas/recovery-record.schema.json").read_text())
SUBPROCESS_TIMEOUT = 600  # a fresh JVM on two shared cores


def _pipeline(
    tmp_path: Path,
    bootstrap: str,
    topic: str,
    available_now_max_offsets: int | None = None,
    driver_commit_max_offsets: int | None = None,
    **shape,
):
    """1,000 offsets per batch; `available_now_max_offsets`: a larger batch for available-now runs
    (a test that only needs one batch per run before and after a crash takes its backlog at once);
    `driver_commit_max_offsets`: 0 for Spark's Delta writer on every batch; `shape`: `schema=` and
    `aggregates=` of another event than payments'."""
    source = {
        "bootstrap_servers": bootstrap,
        "topic": topic,
        "starting_offsets": "earliest",
        "max_offsets_per_trigger": 1000,
    }
    if available_now_max_offsets:
        source["available_now_max_offsets_per_trigger"] = available_now_max_offsets
    if driver_commit_max_offsets is not None:
        source["driver_commit_max_offsets"] = driver_commit_max_offsets
    return load(write_pipeline(tmp_path, bootstrap, topic, source=source, spark_master="local[2]", **shape))


def _ingest_and_crash(pipeline, fault: str) -> None:
    """`onceflow ingest` in its own process, killed by the injected fault (os._exit: as hard as kill -9).

    This run keeps its own JVM: the crash ends the whole driver process, and this test session's
    Spark (the `spark` fixture) must outlive it. Everything the crash does not need is ingested
    in-process before it (run_ingest with the session's Spark), so the killed run only starts its
    JVM and crashes in its first batch."""
    faults.parse(fault)
    env = {**os.environ, **SHORT_LIVED_DRIVER, "ONCEFLOW_FAULT": fault}
    cmd = [sys.executable, "-m", "onceflow.cli", "ingest", "--pipeline", pipeline.file, "--mode", "available-now"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert proc.returncode == faults.EXIT_CODE, (
        f"expected the injected crash ({faults.EXIT_CODE}) at {fault}, got exit {proc.returncode}:\n"
        f"{proc.stderr[-3000:]}"
    )


def _records(pipeline) -> list[dict]:
    records = [read_record(p) for p in list_records(pipeline.state_path)]
    for record in records:
        jsonschema.validate(record, SCHEMA)
    return records


def _ledgers(pipeline) -> dict:
    return {name: read_ledger(path) for name, path in table_paths(pipeline).items()}


def _assert_ledgers_contiguous(pipeline) -> dict:
    ledgers = _ledgers(pipeline)
    for name, ledger in ledgers.items():
        assert ledger.problems() == [], f"{name}: {ledger.problems()}"
    return ledgers


def _remove(path: Path) -> None:
    """Delete a checkpoint file and its Hadoop checksum, as an operator or a bad sync would."""
    path.unlink()
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)


def _newest(folder: Path) -> Path:
    return max((f for f in folder.iterdir() if f.name.isdigit()), key=lambda f: int(f.name))


# -- a kill between bronze's commit and the aggregates' merge ------------------------------------
def test_killed_before_the_aggregates_merge_catches_up_from_bronze(broker, spark, topic, tmp_path):
    """The aggregates follow bronze (spark/follower.py): an available-now run merges them at its end.
    Killed there, after bronze, quarantine and the checkpoint committed batch 1 but before the
    aggregates merged it: the audit of that state passes (the aggregates are judged over the batches
    they hold, and trail bronze), recovery says they catch up from bronze, and the next run merges
    batch 1 from bronze with nothing new from Kafka: every record counted exactly once.

    On the sensors pipeline (pipelines/sensors.yaml: a double with bounds, a nested event time, no
    event id, min/max aggregates), the second shipped shape, whose fault proof this is (until issue
    50 a broker restart's test of its own crashed it too)."""
    pipeline = _pipeline(
        tmp_path,
        broker.bootstrap,
        topic,
        available_now_max_offsets=10_000,
        schema=SENSORS_SCHEMA_BODY,
        aggregates=SENSORS_AGGREGATES,
    )
    first = produce(
        broker.bootstrap,
        topic,
        1500,
        schema=SENSORS_SCHEMA,
        partitions=2,
        seed=31,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    assert run_ingest(pipeline, spark=spark).batches == 1
    crashed = produce(
        broker.bootstrap,
        topic,
        1500,
        schema=SENSORS_SCHEMA,
        partitions=2,
        seed=33,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    _ingest_and_crash(pipeline, "before_aggregates_commit@1")
    ledgers = _ledgers(pipeline)
    assert (
        [e.batch_id for e in ledgers["bronze"].entries] == [0, 1] == [e.batch_id for e in ledgers["quarantine"].entries]
    )
    assert [e.batch_id for e in ledgers["aggregates"].entries] == [0]
    assert read_checkpoint(pipeline.checkpoint_path).last_committed == 1

    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    checks = {c["name"]: c for c in outcome.summary["checks"]}
    assert outcome.status == "passed", {n: c["detail"] for n, c in checks.items() if c["status"] == "failed"}
    assert checks["aggregates"]["status"] == "passed" and checks["aggregates"]["expected"]["windows"] > 0
    assert outcome.summary["committed_point"]["sinks"]["aggregates"]["trails"] == 1

    plan = plan_recovery(pipeline)
    assert plan.decision == Decision.RESTART and plan.case == Case.DEAD_QUERY and plan.actions == [], plan.summary
    assert [f.case for f in plan.findings if f.case in (Case.FOLLOWER_LAG, Case.SINKS_DISAGREE)] == [Case.FOLLOWER_LAG]
    assert recover(pipeline).outcome == "done"
    resumed = run_ingest(pipeline, spark=spark)
    assert resumed.status == "finished" and resumed.batches == 0  # nothing new from Kafka
    assert_exactly_once(pipeline, broker.bootstrap, produced=[first, crashed])
    ledgers = _assert_ledgers_contiguous(pipeline)
    assert [e.batch_id for e in ledgers["aggregates"].entries] == [0, 1]


# -- a kill between two sinks' commits: back with its checkpoint, and with the checkpoint lost too --
def test_killed_between_sinks_restarts_from_its_checkpoint_or_with_it_lost_from_each_sinks_point(
    broker, spark, topic, tmp_path
):
    """One driver killed between bronze's and quarantine's commits of batch 1, recovered twice from
    that crash's state. A, as it is: a dead query whose checkpoint is healthy restarts in its
    generation and Delta skips bronze's replay. B, the same state with the checkpoint lost as well:
    the sinks disagree, and a new generation resumes from the lowest committed point, each sink
    skipping what it holds. (Two tests until issue 19, each starting a fresh driver only to crash
    it into this same state; B now starts from a copy of A's tables and status taken at the crash.)"""
    # Spark's Delta writer commits every batch of the crashed run: the kill schedule
    # (tests/e2e/test_hard_kills.py) crashes driver-committed (delta-rs) batches in every window,
    # this test the other writer
    pipeline = _pipeline(
        tmp_path, broker.bootstrap, topic, available_now_max_offsets=10_000, driver_commit_max_offsets=0
    )
    first = produce(
        broker.bootstrap,
        topic,
        1500,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=21,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    assert run_ingest(pipeline, spark=spark).batches == 1  # batch 0: committed everywhere, no kill needed
    crashed = produce(
        broker.bootstrap,
        topic,
        1500,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=23,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    _ingest_and_crash(pipeline, "between_sinks@1")  # bronze has batch 1; quarantine, aggregates, commits/1 not
    at_crash = tmp_path / "at-crash"  # B's starting point: the tables and the status, as the crash left them
    for name, path in table_paths(pipeline).items():
        assert Path(path).is_dir(), name  # batch 0 reached every table
        shutil.copytree(path, at_crash / name)
    shutil.copytree(pipeline.state_path, at_crash / "state")

    # A: the checkpoint is healthy
    assert pipeline_health(pipeline).verdict == "dead"
    plan = plan_recovery(pipeline)
    assert plan.decision == Decision.RESTART and plan.case == Case.DEAD_QUERY and plan.generation == 0, plan.summary
    assert any(f.case == Case.SINKS_DISAGREE for f in plan.findings), plan.findings
    assert plan.facts["sinks"]["bronze"]["last_batch"] == 1 and plan.facts["sinks"]["quarantine"]["last_batch"] == 0
    assert plan.actions == [] and "re-runs batch 1" in plan.summary

    result = recover(pipeline)
    assert result.outcome == "done"
    second = produce(
        broker.bootstrap,
        topic,
        1000,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=22,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    resumed = run_ingest(pipeline, spark=spark)
    assert resumed.status == "finished" and resumed.generation == 0
    assert_exactly_once(pipeline, broker.bootstrap, produced=[first, crashed, second])
    ledgers = _assert_ledgers_contiguous(pipeline)
    # Delta skipped bronze's replay of batch 1: one entry per batch, one generation
    bronze = [e.batch_id for e in ledgers["bronze"].entries]
    assert bronze == list(range(len(bronze))) and {e.generation for e in ledgers["bronze"].entries} == {0}
    engines = set(write_engines(table_paths(pipeline)["bronze"]))
    assert engines == {"Apache-Spark"}, engines  # the writer this test is for
    assert [r["outcome"] for r in _records(pipeline)] == ["done"]

    # B: the crash's state again, in new paths under the same pipeline name (its ledgers and the
    # status belong to that name), and without a checkpoint. `second` is already in the topic.
    lost = _pipeline(tmp_path / "lost", broker.bootstrap, topic, available_now_max_offsets=10_000)
    assert lost.name == pipeline.name and lost.state_path == pipeline.state_path
    for name, path in table_paths(lost).items():
        shutil.copytree(at_crash / name, path)
    shutil.rmtree(lost.state_path)
    shutil.copytree(at_crash / "state", lost.state_path)
    assert not Path(lost.checkpoint_path).exists()  # ...and the checkpoint is lost as well
    ledgers = _ledgers(lost)
    bronze_end, quarantine_end = ledgers["bronze"].committed_offsets(), ledgers["quarantine"].committed_offsets()
    assert bronze_end != quarantine_end

    plan = plan_recovery(lost)
    assert plan.decision == Decision.NEW_GENERATION and any(f.case == Case.SINKS_DISAGREE for f in plan.findings)
    assert plan.resume == quarantine_end  # the lowest committed point
    assert (plan.sink_floors or {})["bronze"] == {str(p): o for p, o in bronze_end.items()}
    assert recover(lost).outcome == "done"

    resumed = run_ingest(lost, spark=spark)
    assert resumed.generation == 1
    assert_exactly_once(lost, broker.bootstrap, produced=[first, crashed, second])
    ledgers = _assert_ledgers_contiguous(lost)
    first_new = next(e for e in ledgers["bronze"].entries if e.generation == 1)
    assert first_new.start == bronze_end  # bronze's first new entry starts at its own floor


def test_removed_commit_and_leftover_tmp_file_replay_the_batch_and_keep_the_file(broker, spark, topic, tmp_path):
    pipeline = _pipeline(tmp_path, broker.bootstrap, topic)
    produce(
        broker.bootstrap,
        topic,
        2500,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=31,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    run_ingest(pipeline, spark=spark)
    cp = Path(pipeline.checkpoint_path)
    last = _newest(cp / "commits")
    _remove(last)  # Spark now believes batch N never committed
    tmp = cp / "offsets" / f".{int(last.name) + 1}.6d1f0f2e-3c1a-4f7e-9a51-1c2f0e5b7a10.tmp"
    tmp.write_text('v1\n{"batchWatermarkMs":0,')  # a write cut short by a crash
    versions = {n: DeltaTable(p).version() for n, p in table_paths(pipeline).items()}

    plan = plan_recovery(pipeline)
    assert plan.decision == Decision.RESTART and plan.case == Case.DEAD_QUERY
    assert f"re-runs batch {last.name}" in plan.summary
    assert any(f.case == Case.LEFTOVERS for f in plan.findings)
    result = recover(pipeline)
    assert result.outcome == "done" and not tmp.exists()
    moved = result.record["actions"][0]["result"]["moved"]
    assert moved[0]["from"] == str(tmp) and Path(moved[0]["to"]).read_text() == 'v1\n{"batchWatermarkMs":0,'

    run_ingest(pipeline, spark=spark)
    assert_exactly_once(pipeline, broker.bootstrap)
    # the replayed batch was skipped by every table: no new Delta version anywhere
    assert {n: DeltaTable(p).version() for n, p in table_paths(pipeline).items()} == versions
    assert pipeline_health(pipeline).checkpoint.problems == []


# -- corrupt checkpoint, through the CLI -----------------------------------------------------
def _replace_with_a_file(path: Path, text: str) -> None:
    shutil.rmtree(path)
    path.write_text(text)


def _generation(checkpoint: str | Path) -> int:
    identity = read_identity(str(checkpoint))
    assert identity is not None, f"no onceflow identity in {checkpoint}"
    return identity.generation


CORRUPTIONS = {  # name: (how, the decision it must get)
    "offsets file of binary junk": (
        lambda cp: _newest(cp / "offsets").write_bytes(b"\x00\xff\xfe junk \x80"),
        Decision.NEW_GENERATION,
    ),
    "empty metadata": (lambda cp: (cp / "metadata").write_text(""), Decision.NEW_GENERATION),
    "commit file of junk": (lambda cp: _newest(cp / "commits").write_text("v9\n[1,2"), Decision.NEW_GENERATION),
    "identity of junk": (lambda cp: (cp / "_onceflow.json").write_text("{not json"), Decision.NEW_GENERATION),
    "identity is a directory": (
        lambda cp: ((cp / "_onceflow.json").unlink(), (cp / "_onceflow.json").mkdir()),
        Decision.NEW_GENERATION,
    ),
    "offsets dir is a file": (
        lambda cp: _replace_with_a_file(cp / "offsets", "x"),
        Decision.NEW_GENERATION,
    ),
    "checkpoint is a file": (lambda cp: _replace_with_a_file(cp, "not a directory"), Decision.NEW_GENERATION),
    # a restart never reads sources/0/0 once batches exist (the offsets log has the start): still healthy,
    # and the run that wrote it finished cleanly: nothing to recover
    "initial offsets junk": (lambda cp: (cp / "sources" / "0" / "0").write_bytes(b'\x00v1\n{"t":'), Decision.NOTHING),
}


def test_truncated_offsets_file_recovers_from_the_ledgers_and_never_shows_a_traceback(
    broker, spark, topic, tmp_path, capsys
):
    pipeline = _pipeline(tmp_path, broker.bootstrap, topic)
    first = produce(
        broker.bootstrap,
        topic,
        2500,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=41,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    run_ingest(pipeline, spark=spark)
    cp = Path(pipeline.checkpoint_path)
    pristine = tmp_path / "pristine-checkpoint"
    shutil.copytree(cp, pristine)

    # every kind of damage gets a plan, never a traceback
    for name, (corrupt, decision) in CORRUPTIONS.items():
        shutil.rmtree(cp) if cp.is_dir() else cp.unlink()
        shutil.copytree(pristine, cp)
        corrupt(cp)
        capsys.readouterr()
        code = main(["recover", "--pipeline", pipeline.file, "--dry-run", "--json"])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err + captured.out, name
        assert code == 0, f"{name}: exit {code}\n{captured.err}"
        record = json.loads(captured.out)
        jsonschema.validate(record, SCHEMA)
        assert record["outcome"] == "dry_run" and record["plan"]["decision"] == decision, (name, record["plan"])
        if decision == Decision.NOTHING:
            assert record["plan"]["case"] == Case.STOPPED and record["plan"]["actions"] == [], name
        if decision == Decision.NEW_GENERATION:
            assert record["plan"]["case"] in (Case.CORRUPT, Case.MISSING), (name, record["plan"]["case"])
            assert record["plan"]["actions"][0]["kind"] == "move_checkpoint_aside", name
    shutil.rmtree(cp) if cp.is_dir() else cp.unlink()
    shutil.copytree(pristine, cp)

    # the production breakage: the newest offsets file cut short, its commit gone
    newest = _newest(cp / "offsets")
    newest.write_text('v1\n{"batchWatermarkMs":0,"batchTim')
    _remove(cp / "commits" / newest.name)
    assert pipeline_health(pipeline).verdict == "broken"
    bronze_end = read_ledger(table_paths(pipeline)["bronze"]).committed_offsets()

    assert main(["recover", "--pipeline", pipeline.file, "--dry-run"]) == 0
    assert cp.exists() and _generation(cp) == 0  # the dry run changed nothing
    second = produce(
        broker.bootstrap,
        topic,
        1500,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=42,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    capsys.readouterr()
    assert main(["recover", "--pipeline", pipeline.file, "--resume"]) == 0  # recover, then run the job
    printed = capsys.readouterr().out
    assert "new generation 1" in printed and "corrupt_checkpoint" in printed
    assert "finished after" in printed and "(generation 1)" in printed

    identity = read_identity(str(cp))
    assert identity is not None
    assert identity.generation == 1
    assert json.loads(identity.starting_offsets or "null") == {topic: {str(p): o for p, o in bronze_end.items()}}
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("checkpoint.broken-")]
    assert len(aside) == 1 and (aside[0] / "offsets" / newest.name).read_text().endswith("batchTim")

    assert_exactly_once(pipeline, broker.bootstrap, produced=[first, second])
    ledgers = _assert_ledgers_contiguous(pipeline)  # generation 1's batch 0 starts where generation 0 ended
    assert ledgers["bronze"].entries[-1].generation == 1
    outcomes = [r["outcome"] for r in _records(pipeline)]
    assert outcomes.count("dry_run") == len(CORRUPTIONS) + 1 and outcomes[-1] == "done"


# -- deleted checkpoint ------------------------------------------------------------------------
def test_deleted_checkpoint_resumes_from_the_ledgers_in_a_new_generation(broker, spark, topic, tmp_path, capsys):
    pipeline = _pipeline(tmp_path, broker.bootstrap, topic)
    first = produce(
        broker.bootstrap,
        topic,
        2500,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=51,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    run_ingest(pipeline, spark=spark)
    shutil.rmtree(pipeline.checkpoint_path)
    second = produce(
        broker.bootstrap,
        topic,
        1500,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=52,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )

    # while the job runs, recovery refuses and changes nothing
    lock = RunLock(pipeline.state_path)
    lock.acquire(run_id="someone-else", mode="continuous", pipeline=pipeline.name)
    try:
        capsys.readouterr()
        assert main(["recover", "--pipeline", pipeline.file]) == 3
        assert "stop it first" in capsys.readouterr().out
    finally:
        lock.release()
    assert not Path(pipeline.checkpoint_path).exists()

    result = recover(pipeline)
    assert result.outcome == "done" and result.plan and result.plan.case == Case.MISSING and result.plan.generation == 1
    # running it again before the job starts plans a restart of the prepared generation, not another one
    again = recover(pipeline)
    assert (
        again.plan
        and again.plan.decision == Decision.RESTART
        and again.plan.generation == 1
        and again.plan.actions == []
    )

    resumed = run_ingest(pipeline, spark=spark)
    assert resumed.generation == 1
    assert_exactly_once(pipeline, broker.bootstrap, produced=[first, second])
    _assert_ledgers_contiguous(pipeline)
    assert [r["outcome"] for r in _records(pipeline)] == ["refused", "done", "done"]


# -- checkpoint ahead of a sink ------------------------------------------------------------------
def test_checkpoint_ahead_of_a_restored_sink_is_refused_then_forced(broker, spark, topic, tmp_path, capsys):
    pipeline = _pipeline(tmp_path, broker.bootstrap, topic)
    first = produce(
        broker.bootstrap,
        topic,
        1500,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=71,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    run_ingest(pipeline, spark=spark)
    bronze = Path(table_paths(pipeline)["bronze"])
    backup = tmp_path / "bronze-backup"
    shutil.copytree(bronze, backup)
    second = produce(
        broker.bootstrap,
        topic,
        1500,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=72,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    run_ingest(pipeline, spark=spark)
    shutil.rmtree(bronze)
    shutil.copytree(backup, bronze)  # "restored from last night's copy"

    capsys.readouterr()
    assert main(["recover", "--pipeline", pipeline.file]) == 3
    out = capsys.readouterr().out
    assert "checkpoint_ahead_of_sink" in out and "--force" in out
    assert _generation(pipeline.checkpoint_path) == 0  # refused: nothing changed

    result = recover(pipeline, force=True)
    assert result.outcome == "done" and result.plan and result.plan.case == Case.AHEAD and result.plan.generation == 1
    run_ingest(pipeline, spark=spark)
    assert_exactly_once(pipeline, broker.bootstrap, produced=[first, second])
    _assert_ledgers_contiguous(pipeline)


# -- Kafka retention ------------------------------------------------------------------------------
def _alter_topic(bootstrap: str, topic: str, **configs: str | None) -> None:
    """Set (or, with None, delete) topic configs with incremental_alter_configs."""
    entries = [
        ConfigEntry(
            k.replace("_", "."),
            v or "",
            incremental_operation=(AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET),
        )
        for k, v in configs.items()
    ]
    admin = admin_client(bootstrap)  # kept referenced until the futures resolve (a collected client cancels them)
    futures = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)])
    for future in futures.values():
        future.result(timeout=30)


def _wait_for_log_start(bootstrap: str, topic: str, beyond: dict[int, int], timeout: float = 120) -> dict[int, int]:
    deadline = time.monotonic() + timeout
    while True:
        low = {p: lo for p, (lo, hi) in watermarks(bootstrap, topic).items()}
        if all(low[p] > o for p, o in beyond.items()):
            return low
        if time.monotonic() > deadline:
            raise AssertionError(
                f"Kafka did not delete the old segments of {topic} within {timeout:.0f}s "
                f"(log start {low}, waiting to pass {beyond})"
            )
        time.sleep(1)


def test_offsets_deleted_by_retention_are_reported_exactly_and_recorded_when_accepted(
    broker, spark, topic, tmp_path, capsys
):
    pipeline = _pipeline(tmp_path, broker.bootstrap, topic)
    ensure_topic(broker.bootstrap, topic, 2)
    read = produce(
        broker.bootstrap,
        topic,
        1200,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=81,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    run_ingest(pipeline, spark=spark)
    committed = read_ledger(table_paths(pipeline)["bronze"]).committed_offsets()
    # will be deleted before it is read
    unread = produce(broker.bootstrap, topic, 1200, schema=PAYMENTS_SCHEMA, partitions=2, seed=82)

    # roll a new segment for what comes next, then delete every closed segment by size retention
    _alter_topic(broker.bootstrap, topic, segment_ms="2000")
    time.sleep(3)
    kept = produce(
        broker.bootstrap, topic, 300, schema=PAYMENTS_SCHEMA, partitions=2, seed=83, txn_size=300, malformed_ratio=0.05
    )
    _alter_topic(broker.bootstrap, topic, segment_ms=None, retention_bytes="1")
    try:
        low = _wait_for_log_start(broker.bootstrap, topic, committed)
    finally:
        _alter_topic(broker.bootstrap, topic, retention_bytes=None)
    first_kept = {p: min(r.offset for r in kept.records if r.partition == p) for p in (0, 1)}
    assert low == first_kept, "the new segment starts at the first kept record"
    unread_offsets = {(r.partition, r.offset) for r in unread.records}
    assert all(committed[p] <= o < low[p] for p, o in unread_offsets), "every unread record is in the lost range"

    # without --accept-loss: refused, with exactly the deleted ranges
    capsys.readouterr()
    assert main(["recover", "--pipeline", pipeline.file]) == 3
    assert "--accept-loss" in capsys.readouterr().out
    plan = plan_recovery(pipeline)
    assert plan.decision == Decision.REFUSE and plan.case == Case.RETENTION
    assert [(r.partition, r.start, r.end) for r in plan.lost] == [(p, committed[p], low[p]) for p in (0, 1)]
    assert all(r.sinks == ["bronze", "quarantine"] for r in plan.lost)  # the aggregates follow bronze
    assert _generation(pipeline.checkpoint_path) == 0

    # with it: a LOSS entry per sink Kafka feeds, then a new generation from the log start
    result = recover(pipeline, accept_loss=True)
    assert result.outcome == "done" and result.plan and result.plan.resume == low
    for name, ledger in _ledgers(pipeline).items():
        loss = [e for e in ledger.entries if e.kind == EntryKind.LOSS]
        assert [(e.generation, e.batch_id, e.start, e.end) for e in loss] == (
            [] if name == "aggregates" else [(1, -1, committed, low)]
        ), name
    resumed = run_ingest(pipeline, spark=spark)
    assert resumed.generation == 1
    # the aggregates' follower copied bronze's LOSS entry when it merged past it
    for name, ledger in _assert_ledgers_contiguous(pipeline).items():
        loss = [e for e in ledger.entries if e.kind == EntryKind.LOSS]
        assert [(e.generation, e.batch_id, e.start, e.end) for e in loss] == [(1, -1, committed, low)], name

    # what landed is exactly: everything read before, plus everything Kafka still holds; none of the lost
    before = {(r.partition, r.offset) for r in read.records if not r.aborted}
    retained = {(p, o) for p, o, _, _ in consume_all(broker.bootstrap, topic, "read_committed")}
    paths = table_paths(pipeline)
    landed = Counter(
        (r["_partition"], r["_offset"])
        for name in ("bronze", "quarantine")
        for r in DeltaTable(paths[name]).to_pyarrow_table(columns=["_partition", "_offset"]).to_pylist()
    )
    assert not [k for k, n in landed.items() if n > 1], "duplicates"
    assert set(landed) == before | retained
    assert not set(landed) & unread_offsets
    assert [r["outcome"] for r in _records(pipeline)] == ["refused", "done"]

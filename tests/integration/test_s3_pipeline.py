"""A pipeline whose tables and checkpoint live on a real S3 API server (S3Proxy): it runs, is killed
between two sinks' commits, loses its checkpoint, recovers from the sink ledgers and audits exactly
once, against an independent read_committed consumer and delta-rs reads; a second driver of the same
pipeline from another ONCEFLOW_HOME (another machine, as far as the local run lock knows) is refused
while the first holds the lease in the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from deltalake import DeltaTable
from pyarrow import fs as pafs

from devkit.driver import SHORT_LIVED_DRIVER
from devkit.pipelines import PAYMENTS_SCHEMA, write_pipeline
from onceflow import faults
from onceflow.audit.run import run_audit
from onceflow.checkpoint import read_checkpoint
from onceflow.config import load
from onceflow.generate.producer import produce
from onceflow.health import pipeline_health
from onceflow.recovery import plan_recovery, recover
from onceflow.recovery.cases import Decision
from onceflow.sinks import lease_folder, table_paths
from onceflow.spark.ingest import run_ingest
from onceflow.storage.lease import read_lease
from onceflow.storage.location import Location
from tests.exactly_once import assert_exactly_once, assert_ledgers_contiguous

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SUBPROCESS_TIMEOUT = 600


def _pipeline(tmp_path, s3, broker, topic):
    return load(
        write_pipeline(
            tmp_path,
            broker.bootstrap,
            topic,
            max_offsets=1000,
            available_now_max_offsets=10_000,
            data=s3.url("pipelines", topic),
            spark_master="local[2]",
        )
    )


def _events(broker, topic, seed):
    return produce(
        broker.bootstrap,
        topic,
        1200,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=seed,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )


def _lease(pipeline) -> dict:
    folder = lease_folder(pipeline)
    assert folder is not None, "the pipeline's tables are on S3: its lease is too"
    return read_lease(folder) or {}


def _store_fs() -> pafs.S3FileSystem:
    return Location("s3://onceflow/x").settings.arrow()  # type: ignore[union-attr]


def test_killed_and_checkpoint_lost_on_s3_recovers_and_audits_exactly_once(broker, spark, s3, topic, tmp_path):
    pipeline = _pipeline(tmp_path, s3, broker, topic)
    assert all(Location(p).is_s3 for p in (*table_paths(pipeline).values(), pipeline.checkpoint_path))
    first = _events(broker, topic, 41)
    assert run_ingest(pipeline, spark=spark).batches == 1
    assert read_checkpoint(pipeline.checkpoint_path).last_committed == 0  # read from the store, no JVM
    assert _lease(pipeline)["released"] is True

    crashed = _events(broker, topic, 42)
    fault = "between_sinks@1"  # bronze has batch 1; quarantine, aggregates and commits/1 do not
    env = {**os.environ, **SHORT_LIVED_DRIVER, "ONCEFLOW_FAULT": fault}
    cmd = [sys.executable, "-m", "onceflow.cli", "ingest", "--pipeline", str(pipeline.file), "--mode", "available-now"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert proc.returncode == faults.EXIT_CODE, proc.stderr[-3000:]
    held = _lease(pipeline)
    assert held and not held["released"]  # the killed driver never released it
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in proc.stdout + proc.stderr

    # ...and the checkpoint is lost as well (a deleted prefix in the bucket)
    bucket_key = Location(pipeline.checkpoint_path).bucket_key
    _store_fs().delete_dir("/".join(bucket_key))
    assert read_checkpoint(pipeline.checkpoint_path).empty
    plan = plan_recovery(pipeline)
    assert plan.decision == Decision.NEW_GENERATION, plan.summary
    started = time.monotonic()
    assert recover(pipeline).outcome == "done"  # takes the dead driver's lease over at once (same machine)
    assert time.monotonic() - started < 20

    second = _events(broker, topic, 43)
    resumed = run_ingest(pipeline, spark=spark)
    assert resumed.status == "finished" and resumed.generation == 1
    counts = assert_exactly_once(pipeline, broker.bootstrap, produced=[first, crashed, second])
    assert counts["bronze"] > 0 and counts["quarantine"] > 0
    assert_ledgers_contiguous(pipeline)
    bronze = DeltaTable(table_paths(pipeline)["bronze"])
    assert bronze.table_uri.startswith("s3") and bronze.version() >= 3

    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    failed = [c for c in outcome.summary["checks"] if c["status"] != "passed"]
    assert outcome.status == "passed", json.dumps(failed, default=str)[:3000]
    health = pipeline_health(pipeline).as_json()
    assert health["checkpoint"]["path"] == pipeline.checkpoint_path and health["checkpoint"]["usable"]
    reports = "".join(p.read_text(errors="replace") for p in (tmp_path / "reports").rglob("*") if p.is_file())
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in reports


def test_a_second_driver_from_another_home_is_refused_while_the_first_holds_the_lease(
    broker, s3, topic, tmp_path, jars
):
    pipeline = _pipeline(tmp_path, s3, broker, topic)
    _events(broker, topic, 44)
    env = {**os.environ, **SHORT_LIVED_DRIVER, "ONCEFLOW_LEASE_TTL": "6"}
    first_cmd = [sys.executable, "-m", "onceflow.cli", "ingest", "--pipeline", str(pipeline.file)]
    first = subprocess.Popen(
        [*first_cmd, "--mode", "continuous", "--max-seconds", "120"],
        env={**env, "ONCEFLOW_HOME": str(tmp_path / "home-a")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not _lease(pipeline).get("holder") and time.monotonic() < deadline:
            assert first.poll() is None, first.stdout.read() if first.stdout else ""
            time.sleep(0.5)
        holder = _lease(pipeline)
        assert holder.get("pid") == first.pid, holder
        with pytest.MonkeyPatch.context() as elsewhere:  # the health seen from the other home
            elsewhere.setenv("ONCEFLOW_HOME", str(tmp_path / "home-b"))
            health = pipeline_health(pipeline).as_json()
        assert health["verdict"] == "remote" and health["exit_code"] == 0, health["reasons"]
        assert f"pid {first.pid}" in health["reasons"][0] and health["lease"]["live"]
        started = time.monotonic()
        second = subprocess.run(
            [*first_cmd, "--mode", "available-now"],
            env={**env, "ONCEFLOW_HOME": str(tmp_path / "home-b")},
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
        )
        took = time.monotonic() - started
        assert second.returncode != 0
        assert "another driver holds" in second.stderr and f"pid {first.pid}" in second.stderr, second.stderr
        assert took < 6 + 5 + 10, took  # one ttl watching the lease stay live, then the refusal
        assert not (tmp_path / "home-b" / "spark").exists()  # refused before a JVM or a write
    finally:
        first.terminate()
        first.wait(120)

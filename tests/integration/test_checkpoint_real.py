"""The checkpoint reader and the health check against a real Spark checkpoint and a real broker.

One real stream: transactional events (some transactions aborted, so commit and
abort markers take offsets) read by Spark's Kafka source at read_committed with
`trigger(availableNow=True)` and a small maxOffsetsPerTrigger, into foreachBatch.
Inside each batch the test asks `batch_offset_range` for the batch's range — as the
ingest job does — and records the offsets Spark actually delivered, so three
accounts are compared: Spark's rows, the checkpoint files, and Kafka's offsets.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from devkit.pipelines import PAYMENTS_SCHEMA, PAYMENTS_SCHEMA_BODY
from onceflow.checkpoint import batch_offset_range, read_checkpoint
from onceflow.config import Pipeline
from onceflow.generate.producer import produce
from onceflow.health import pipeline_health
from onceflow.kafka.admin import list_end_offsets, watermarks
from onceflow.spark.kafka_read import kafka_options
from onceflow.state.status import RunLock, StatusLog

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # starts a Spark JVM (not in `make test-fast`)

TOPIC = "t-checkpoint-real"
PARTITIONS = 3
MAX_OFFSETS = 150
SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs/schemas/checkpoint-status.schema.json").read_text())


@pytest.fixture(scope="module")
def stream(broker, spark, tmp_path_factory):
    """Produce, then run the availableNow query to the end; what each batch saw, per batch id."""
    first = produce(
        broker.bootstrap,
        TOPIC,
        600,
        schema=PAYMENTS_SCHEMA,
        partitions=PARTITIONS,
        seed=4,
        abort_ratio=0.2,
        txn_size=25,
    )
    ck = str(tmp_path_factory.mktemp("ckpt") / "checkpoint")
    seen: dict[int, dict] = {}

    def each_batch(df, batch_id: int) -> None:
        from pyspark.sql import functions as F

        rows = (
            df.groupBy("partition")
            .agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"), F.count("*").alias("n"))
            .collect()
        )
        seen[batch_id] = {
            "range": batch_offset_range(ck, batch_id, TOPIC),
            "rows": {r["partition"]: (r["lo"], r["hi"], r["n"]) for r in rows},
            "offsets": sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect()),
        }

    reader = (
        spark.readStream.format("kafka")
        .options(**kafka_options(broker.bootstrap, TOPIC, maxOffsetsPerTrigger=str(MAX_OFFSETS)))
        .load()
    )
    query = (
        reader.writeStream.foreachBatch(each_batch).option("checkpointLocation", ck).trigger(availableNow=True).start()
    )
    assert query.awaitTermination(300), "the availableNow query did not finish within 300 s"
    assert query.exception() is None, f"the query failed: {query.exception()}"
    return {
        "summary": first,
        "checkpoint": ck,
        "query_id": str(query.id),
        "seen": seen,
        "lso": list_end_offsets(broker.bootstrap, TOPIC),
    }


def test_reader_agrees_with_kafka(stream, broker):
    ck = read_checkpoint(stream["checkpoint"])
    assert ck.usable and ck.problems == (), ck.problems
    assert ck.query_id == stream["query_id"]
    assert len(ck.commits) >= 4, f"maxOffsetsPerTrigger={MAX_OFFSETS} should give several batches: {ck.commits}"
    assert ck.last_committed == ck.latest_planned and ck.uncommitted is None
    assert sorted(stream["seen"]) == list(ck.commits), "one foreachBatch call per committed batch"
    assert ck.initial_offsets == {TOPIC: {p: 0 for p in range(PARTITIONS)}}
    # the last committed end offsets are Kafka's end: the last stable offset, here the high watermark
    assert ck.committed_offsets(TOPIC) == stream["lso"]["latest"]
    assert ck.committed_offsets(TOPIC) == {p: hw for p, (lo, hw) in watermarks(broker.bootstrap, TOPIC).items()}


def test_batch_ranges_are_contiguous_and_hold_exactly_what_spark_read(stream):
    ck = read_checkpoint(stream["checkpoint"])
    summary = stream["summary"]
    committed = sorted((r.partition, r.offset) for r in summary.records if not r.aborted)
    assert ck.initial_offsets is not None
    prev_end = ck.initial_offsets[TOPIC]
    delivered = []
    for batch_id in ck.commits:
        start, end = batch_offset_range(stream["checkpoint"], batch_id, TOPIC)
        assert (start, end) == stream["seen"][batch_id]["range"], "same answer inside and after foreachBatch"
        assert start == prev_end, f"batch {batch_id} starts at {start}, the previous one ended at {prev_end}"
        assert sum(end[p] - start[p] for p in end) <= MAX_OFFSETS
        for p, (lo, hi, _n) in stream["seen"][batch_id]["rows"].items():
            assert start[p] <= lo and hi < end[p], (
                f"batch {batch_id} read partition {p} {lo}..{hi} outside its range [{start[p]}, {end[p]})"
            )
        expected = [(p, o) for p, o in committed if start.get(p, 0) <= o < end.get(p, 0)]
        assert stream["seen"][batch_id]["offsets"] == expected, (
            f"batch {batch_id}: rows differ from the committed records in its range"
        )
        delivered += expected
        prev_end = end
    assert prev_end == stream["lso"]["latest"]
    assert sorted(delivered) == committed, "every committed record in exactly one batch, no aborted record"


def test_uncommitted_batch_keeps_its_planned_range(stream, tmp_path):
    copy = tmp_path / "ck"
    shutil.copytree(stream["checkpoint"], copy)
    last = read_checkpoint(copy).last_committed
    assert last is not None
    (copy / "commits" / str(last)).unlink()
    (copy / "commits" / f".{last}.crc").unlink()
    ck = read_checkpoint(copy)
    assert ck.usable and ck.uncommitted == last and ck.last_committed == last - 1
    assert batch_offset_range(copy, last, TOPIC) == stream["seen"][last]["range"]


# -- health and the CLI -----------------------------------------------------------------
def _pipeline(tmp_path: Path, broker, checkpoint: str, name: str, **health) -> tuple[Pipeline, Path]:
    data = {
        "name": name,
        "checkpoint": checkpoint,
        "source": {"bootstrap_servers": broker.bootstrap, "topic": TOPIC},
        "schema": PAYMENTS_SCHEMA_BODY,
        "sinks": {"bronze": {"path": str(tmp_path / "bronze")}, "quarantine": {"path": str(tmp_path / "q")}},
        "trigger": {"processing_time": "1 second"},
        "health": health,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    return Pipeline.model_validate(data), path


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "onceflow.cli", "checkpoint", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.fixture(scope="module")
def unread(stream, broker):
    """More events after the query stopped: produced, not yet read."""
    before = watermarks(broker.bootstrap, TOPIC)
    second = produce(
        broker.bootstrap,
        TOPIC,
        240,
        schema=PAYMENTS_SCHEMA,
        partitions=PARTITIONS,
        seed=5,
        abort_ratio=0.25,
        txn_size=20,
    )
    after = watermarks(broker.bootstrap, TOPIC)
    return {"summary": second, "span": {p: after[p][1] - before[p][1] for p in after}}


def test_health_lag_equals_what_was_produced_but_not_read(stream, unread, broker, tmp_path):
    pipeline, _ = _pipeline(tmp_path, broker, stream["checkpoint"], "ckreal_lag")
    report = pipeline_health(pipeline).as_json()
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(report)
    assert report["verdict"] == "stopped" and report["exit_code"] == 0, report["reasons"]
    assert report["kafka"]["error"] is None
    lags = {row["partition"]: row["lag"] for row in report["partitions"]}
    assert lags == unread["span"], "lag (offsets) = the offsets produced since the query stopped"
    assert report["lag"]["total"] == sum(unread["span"].values())
    committed = {row["partition"]: row["committed"] for row in report["partitions"]}
    assert committed == stream["lso"]["latest"]
    # the unread span holds exactly the second round's records (plus its transaction markers)
    second = unread["summary"]
    for p in range(PARTITIONS):
        records = [r for r in second.records if r.partition == p]
        assert all(committed[p] <= r.offset < committed[p] + lags[p] for r in records)
        assert lags[p] > len(records), "markers take offsets too"
    assert report["checkpoint"]["last_committed"] == read_checkpoint(stream["checkpoint"]).last_committed


def test_cli_status_prints_and_exits_as_documented(stream, unread, broker, tmp_path):
    total = sum(unread["span"].values())
    _, yaml_file = _pipeline(tmp_path, broker, stream["checkpoint"], "ckreal_cli", max_lag=10, stalled_after_triggers=3)
    # stopped (no run holds the lock): exit 0, JSON on stdout
    done = _cli("status", "--pipeline", str(yaml_file), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"] == "stopped" and report["lag"]["total"] == total

    # a run holds the lock and commits right now, with lag above max_lag: lagging, exit 0
    pipeline, _ = _pipeline(tmp_path, broker, stream["checkpoint"], "ckreal_cli", max_lag=10, stalled_after_triggers=3)
    log = StatusLog(pipeline.state_path, pipeline.name)
    with RunLock(pipeline.state_path) as lock:
        lock.acquire(run_id="r1")
        log.append(
            "started", run_id="r1", query_id="q", pid=os.getpid(), mode="continuous", generation=0, trigger_seconds=1.0
        )
        log.append(
            "progress",
            run_id="r1",
            batch_id=9,
            input_rows=1,
            input_rows_per_second=1.0,
            processed_rows_per_second=1.0,
            batch_duration_ms=100,
            topic=TOPIC,
            end_offsets={},
        )
        ck_commit = Path(stream["checkpoint"]) / "commits" / str(read_checkpoint(stream["checkpoint"]).last_committed)
        os.utime(ck_commit, (time.time() - 3600, time.time() - 3600))  # the checkpoint's commit is old
        done = _cli("status", "--pipeline", str(yaml_file))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "LAGGING" in done.stdout and f"lag {total} is above max_lag=10" in done.stdout
        assert "partition" in done.stdout and "committed" in done.stdout and "latest" in done.stdout

        # no commit for longer than 3 triggers x 1 s while lag > 0, heartbeats still fresh: stalled, exit 1
        deadline = time.monotonic() + 30
        while True:
            time.sleep(1)
            log.append("idle", run_id="r1", query_id="q")
            done = _cli("status", "--pipeline", str(yaml_file), "--json")
            if json.loads(done.stdout)["verdict"] == "stalled" or time.monotonic() > deadline:
                break
        assert done.returncode == 1, f"expected stalled within 30 s: {done.stdout[-800:]}"
        assert "no batch committed" in json.loads(done.stdout)["reasons"][0]


def test_cli_broken_checkpoint_exits_2_and_show_names_the_file(stream, broker, tmp_path):
    copy = tmp_path / "ck"
    shutil.copytree(stream["checkpoint"], copy)
    latest = read_checkpoint(copy).latest_planned
    text = (copy / "offsets" / str(latest)).read_text()
    (copy / "offsets" / str(latest)).write_text(text[: len(text) // 2])  # torn mid-line
    _, yaml_file = _pipeline(tmp_path, broker, str(copy), "ckreal_broken")
    done = _cli("status", "--pipeline", str(yaml_file))
    assert done.returncode == 2 and "BROKEN" in done.stdout, done.stdout + done.stderr
    assert f"offsets/{latest} is unreadable" in done.stdout
    shown = _cli("show", "--path", str(copy))
    assert shown.returncode == 2 and "UNUSABLE" in shown.stdout
    assert f"offsets/{latest}" in shown.stdout
    ok = _cli("show", "--path", stream["checkpoint"], "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["usable"] is True

"""onceflow.lineage: a run's status events become OpenLineage events, through the real OpenLineage
client and its file transport; datasets are named by OpenLineage's naming spec. The whole path
through Airflow's provider and a spark-submit'ed job: tests/e2e/test_airflow_dags.py."""

from __future__ import annotations

import json
import os

import pytest

from devkit.pipelines import load_pipeline
from onceflow import lineage
from onceflow.state.status import RunEvent, RunStatus, StatusLog

RUN = "0d9c5e1e-6c55-4f33-9a55-1f0f0c6c1a01"
PARENT = {"namespace": "airflow", "name": "p_batch.ingest", "run_id": "01932f4e-5b5e-7c3a-8a1b-9a0c2d3e4f50"}


@pytest.fixture
def events_file(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))  # the status logs written here
    path = tmp_path / "lineage.jsonl"
    for key, value in {"TYPE": "file", "LOG_FILE_PATH": str(path), "APPEND": "true"}.items():
        monkeypatch.setenv(f"OPENLINEAGE__TRANSPORT__{key}", value)
    monkeypatch.setenv(lineage.PARENT_ENV, json.dumps(PARENT))
    return path


def test_a_run_tells_its_start_each_batch_with_its_offsets_and_its_end(tmp_path, events_file):
    pipeline = load_pipeline(tmp_path / "p", "b1:9092,b2:9092", "payments")
    observer = lineage.run_observer(pipeline)
    assert observer is not None
    status = StatusLog(pipeline.state_path, pipeline.name, observe=observer)
    status.append(RunEvent.STARTED, run_id=RUN, mode="available-now")
    status.append(
        RunEvent.PROGRESS, run_id=RUN, batch_id=0, topic="payments", end_offsets={"0": 10, "1": 7}, input_rows=15
    )
    status.append(
        RunEvent.PROGRESS,
        run_id=RUN,
        batch_id=1,
        topic="payments",
        start_offsets={"0": 10, "1": 7},
        end_offsets={"0": 12, "1": 9},
        input_rows=4,
    )
    status.append(RunEvent.FINAL, run_id=RUN, status=RunStatus.FINISHED)
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert [e["eventType"] for e in events] == ["START", "RUNNING", "RUNNING", "COMPLETE"]
    assert {e["run"]["runId"] for e in events} == {RUN}
    assert {(e["job"]["namespace"], e["job"]["name"]) for e in events} == {("onceflow", f"{pipeline.name}.ingest")}
    first = events[0]
    assert [(d["namespace"], d["name"]) for d in first["inputs"]] == [("kafka://b1:9092", "payments")]
    outputs = {(d["namespace"], d["name"]) for d in first["outputs"]}
    assert outputs == {("file", str((tmp_path / "p" / t).absolute())) for t in ("bronze", "quarantine", "aggregates")}
    assert first["run"]["facets"]["parent"]["run"]["runId"] == PARENT["run_id"]
    job = first["run"]["facets"]["parent"]["job"]
    assert (job["namespace"], job["name"]) == ("airflow", "p_batch.ingest")
    batches = [e["run"]["facets"][lineage.BATCH_FACET] for e in events[1:3]]
    assert batches[0]["endOffsets"] == {"0": 10, "1": 7} and batches[0]["inputRows"] == 15
    assert batches[1]["startOffsets"] == batches[0]["endOffsets"] and batches[1]["batchId"] == 1


def test_a_failed_run_tells_its_error_and_a_broken_transport_never_stops_the_run(tmp_path, events_file):
    pipeline = load_pipeline(tmp_path / "p", "b:9092", "t")
    observer = lineage.run_observer(pipeline)
    status = StatusLog(pipeline.state_path, pipeline.name, observe=observer)
    status.append(RunEvent.FINAL, run_id=RUN, status=RunStatus.FAILED, error="boom at batch 3")
    (event,) = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert event["eventType"] == "FAIL" and event["run"]["facets"]["errorMessage"]["message"] == "boom at batch 3"
    said: list[str] = []
    events_file.unlink()
    events_file.mkdir()  # the transport can no longer write its file
    broken = lineage.run_observer(pipeline, said.append)
    status = StatusLog(pipeline.state_path, pipeline.name, observe=broken)
    status.append(RunEvent.STARTED, run_id=RUN, mode="continuous")
    status.append(RunEvent.FINAL, run_id=RUN, status=RunStatus.STOPPED)
    assert len(said) == 1 and "could not send" in said[0]  # told once, the run went on


def test_unconfigured_nothing_is_told(tmp_path, monkeypatch):
    for key in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert not lineage.configured()
    assert lineage.run_observer(load_pipeline(tmp_path / "p", "b:9092", "t")) is None
    monkeypatch.setenv("OPENLINEAGE_URL", "http://marquez:5000")
    assert lineage.configured()
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    assert not lineage.configured()


@pytest.mark.parametrize(
    "path, dataset",
    [
        ("s3://lake/tables/bronze", ("s3://lake", "tables/bronze")),
        ("s3a://lake/t", ("s3://lake", "t")),
        ("/data/bronze", ("file", "/data/bronze")),
        ("file:///data/q", ("file", "/data/q")),
    ],
)
def test_tables_are_named_by_the_naming_spec(path, dataset):
    assert lineage.table_dataset(path) == dataset


def test_a_killed_run_is_closed_by_the_next_run_of_the_pipeline(tmp_path, events_file):
    pipeline = load_pipeline(tmp_path / "p", "b:9092", "t")
    StatusLog(pipeline.state_path, pipeline.name).append(RunEvent.STARTED, run_id=RUN)  # then kill -9: no final
    status = StatusLog(pipeline.state_path, pipeline.name, observe=lineage.run_observer(pipeline))
    status.append(RunEvent.STARTED, run_id="5b0e7c1a-0000-4000-8000-000000000001", mode="continuous")
    status.append(RunEvent.FINAL, run_id="5b0e7c1a-0000-4000-8000-000000000001", status=RunStatus.STOPPED)
    status.append(RunEvent.STARTED, run_id="5b0e7c1a-0000-4000-8000-000000000002", mode="continuous")
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert [(e["eventType"], e["run"]["runId"][-2:]) for e in events] == [
        ("FAIL", RUN[-2:]),  # the killed run, closed as the next one starts
        ("START", "01"),
        ("COMPLETE", "01"),
        ("START", "02"),  # the run before it ended: nothing to close
    ]
    assert "without a final event" in events[0]["run"]["facets"]["errorMessage"]["message"]

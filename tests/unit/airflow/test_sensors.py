"""The health sensor turns a trigger's event into the task's outcome; the guard waits out recovery."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from airflow.sdk.exceptions import (  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
    AirflowException,
    AirflowFailException,
    AirflowRescheduleException,
)

from onceflow.airflow.sensors import PipelineHealthSensor, _optional_float  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.verdicts import PROBLEMS, Verdict  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME


def _sensor(**kw) -> PipelineHealthSensor:
    return PipelineHealthSensor(
        task_id="watch", pipeline_file="p.yaml", fire_on=[Verdict.STOPPED, *PROBLEMS], fail_on=list(PROBLEMS), **kw
    )


def test_rendered_template_values_become_numbers_or_none():
    assert [_optional_float(v) for v in (None, "", "None", " null ", "12.5", 3)] == [None, None, None, None, 12.5, 3.0]


def test_the_event_decides_the_outcome():
    run = {"run_id": "r", "batches": 2, "rows": 10, "last_batch_id": 1}
    event = {"verdict": "stopped", "pipeline": "p", "reasons": ["ok"], "run": run}
    assert _sensor().execute_complete({}, event) == event
    with pytest.raises(AirflowFailException, match="verdict dead: gone"):
        _sensor().execute_complete({}, {**event, "verdict": "dead", "reasons": ["gone"]})
    with pytest.raises(AirflowException, match="could not read pipeline p: boom"):
        _sensor().execute_complete({}, {"verdict": "error", "pipeline": "p", "error": "boom"})
    with pytest.raises(AirflowException, match=r"no verdict in .* within 60s"):
        _sensor(wait_timeout=60).execute_complete({}, {**event, "verdict": "timeout", "last_verdict": "healthy"})
    with pytest.raises(AirflowRescheduleException):
        _sensor().execute_complete({}, {**event, "verdict": "not_started"})


def test_a_stream_runs_window_ends_its_watch_without_failing():
    """A stream run watches its window; at its end the app runs on for the next run to adopt."""
    event = {"verdict": "timeout", "last_verdict": "healthy", "pipeline": "p", "reasons": ["ok"], "run": {}}
    assert _sensor(wait_timeout=60, window_ends_wait=True).execute_complete({}, event)["verdict"] == "window_end"
    with pytest.raises(AirflowFailException, match="verdict dead"):  # a problem inside the window still fails
        _sensor(wait_timeout=60, window_ends_wait=True).execute_complete({}, {**event, "verdict": "dead"})


def test_a_run_that_must_make_progress_fails_when_it_committed_nothing_with_records_waiting():
    idle = {"verdict": "stopped", "pipeline": "p", "run": {"batches": 0}, "health": {"lag": {"total": 0}}}
    assert _sensor(require_progress=True).execute_complete({}, idle) == idle  # nothing was left to read
    waiting = {**idle, "health": {"lag": {"total": 500}}}
    with pytest.raises(AirflowFailException, match="without committing a batch while 500 records wait"):
        _sensor(require_progress=True).execute_complete({}, waiting)


def test_the_guard_claims_the_pipeline_for_its_run_and_a_second_run_waits(tmp_path, monkeypatch):
    """Airflow 3.3 started a scheduled run 0.5 s after a queued manual run of the same
    `max_active_runs=1` DAG; the guard makes the second wait until the first releases."""
    from types import SimpleNamespace

    from devkit.pipelines import write_pipeline
    from onceflow.airflow.hooks import OnceflowHook
    from onceflow.airflow.sensors import StreamGuardSensor
    from onceflow.airflow.stream import ReleaseStreamRunOperator

    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    file = str(write_pipeline(tmp_path / "p", "localhost:1", "t", name="p"))
    guard = StreamGuardSensor(task_id="guard", pipeline_file=file)

    def context(run: str) -> dict:
        return {"dag": SimpleNamespace(dag_id="p_stream"), "run_id": run}

    first: Any = guard.poke(context("manual__1"))
    assert first.is_done and first.xcom_value == {"running": None}
    assert guard.poke(context("scheduled__2")) is False  # waits (rescheduled), holds no slot
    assert (OnceflowHook(file).stream_run.holder() or {})["run"] == "p_stream/manual__1"
    ReleaseStreamRunOperator(task_id="release", pipeline_file=file).execute(context("manual__1"))
    again: Any = guard.poke(context("scheduled__2"))
    assert again.is_done

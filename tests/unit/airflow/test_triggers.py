"""The health trigger's round trip through Airflow's trigger table, and the sensor's outcomes.

Firing on each verdict, driven by real checkpoint directories and a real broker, is
tests/integration/test_airflow_trigger.py.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from onceflow.verdicts import PROBLEMS, Verdict

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from onceflow.airflow.triggers import PipelineHealthTrigger  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME

ERROR, NOT_STARTED, TIMEOUT = Verdict.ERROR, Verdict.NOT_STARTED, Verdict.TIMEOUT

KWARGS: dict[str, Any] = {
    "pipeline_file": "/x/pipelines/payments.yaml",
    "fire_on": ["stalled", "healthy", "dead"],
    "since": 1763812345.25,
    "start_grace": 30.0,
    "timeout": 600.0,
    "poll_interval": 2.0,
    "watcher": "payments_stream/manual__1",
}


def test_trigger_round_trips_through_the_trigger_table():
    from airflow.models.trigger import Trigger
    from airflow.sdk._shared.module_loading import import_string

    trigger = PipelineHealthTrigger(**KWARGS)
    classpath, kwargs = trigger.serialize()
    assert classpath == "onceflow.airflow.triggers.PipelineHealthTrigger"
    row = Trigger.from_object(trigger)  # encrypted, as the triggerer stores it
    assert row.encrypted_kwargs and "payments.yaml" not in row.encrypted_kwargs
    rebuilt = import_string(row.classpath)(**row.kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert rebuilt.fire_on == ["dead", "healthy", "stalled"] and rebuilt.since == KWARGS["since"]
    assert rebuilt.watcher == "payments_stream/manual__1"  # a restarted triggerer renews for the same run


def test_trigger_needs_a_verdict_to_wait_for():
    with pytest.raises(ValueError, match="fire_on"):
        PipelineHealthTrigger(pipeline_file="p.yaml", fire_on=[])


def test_sensor_defers_to_the_trigger_with_rendered_values():
    from airflow.sdk.exceptions import TaskDeferred

    from onceflow.airflow.sensors import PipelineHealthSensor

    sensor = PipelineHealthSensor(
        task_id="w",
        pipeline_file="p.yaml",
        fire_on=["healthy"],
        since="1763812345.5",
        start_grace="None",
        wait_timeout="",
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    trigger = deferred.value.trigger
    assert isinstance(trigger, PipelineHealthTrigger)
    assert (trigger.since, trigger.start_grace, trigger.timeout) == (1763812345.5, None, None)
    assert deferred.value.method_name == "execute_complete"


def _sensor(**kw):
    from onceflow.airflow.sensors import PipelineHealthSensor

    return PipelineHealthSensor(task_id="w", pipeline_file="p.yaml", **kw)


def _event(verdict, batches=3, lag=0, **extra):
    return {
        "pipeline": "payments",
        "verdict": verdict,
        "reasons": [f"because {verdict}"],
        "health": {"lag": {"total": lag}},
        "run": {"run_id": "r1", "batches": batches, "rows": 30, "last_batch_id": 2},
        **extra,
    }


def test_sensor_returns_the_event_for_a_verdict_it_routes_on():
    event = _event("dead")
    assert _sensor(fire_on=["stopped", *PROBLEMS]).execute_complete({}, event) is event


@pytest.mark.parametrize(
    "event, exc_name, text",
    [
        ({"verdict": ERROR, "error": "ConfigError: p.yaml: field `sinks`"}, "AirflowException", "field `sinks`"),
        (_event(TIMEOUT, last_verdict="lagging"), "AirflowException", "last verdict lagging"),
        (_event("stalled"), "AirflowFailException", "verdict stalled: because stalled"),
    ],
)
def test_sensor_fails_with_the_reason(event, exc_name, text):
    from airflow.sdk import exceptions

    with pytest.raises(getattr(exceptions, exc_name), match=text):
        _sensor(fire_on=["healthy", "stalled"], fail_on=["stalled"]).execute_complete({}, event)


def test_sensor_reschedules_when_the_run_has_not_started():
    from airflow.sdk.exceptions import AirflowRescheduleException

    with pytest.raises(AirflowRescheduleException):
        _sensor(fire_on=["healthy"]).execute_complete({}, _event(NOT_STARTED))


def test_a_clean_end_without_a_batch_counts_only_when_nothing_was_left():
    from airflow.sdk.exceptions import AirflowFailException

    sensor = _sensor(fire_on=["stopped"], require_progress=True)
    assert sensor.execute_complete({}, _event("stopped", batches=0, lag=0))["verdict"] == "stopped"
    with pytest.raises(AirflowFailException, match="without committing a batch while 40 records wait"):
        sensor.execute_complete({}, _event("stopped", batches=0, lag=40))


def test_end_on_round_trips_and_must_be_verdicts_the_trigger_fires_on():
    """A verdict in `end_on` ends the task in the triggerer (no resume on a worker): it survives the
    trigger table, and it must be one of `fire_on` (the sensor: never one of `fail_on`)."""
    from airflow.models.trigger import Trigger
    from airflow.sdk._shared.module_loading import import_string

    trigger = PipelineHealthTrigger(**KWARGS, end_on=["stalled", "dead"])
    row = Trigger.from_object(trigger)
    assert import_string(row.classpath)(**row.kwargs).end_on == ["dead", "stalled"]
    with pytest.raises(ValueError, match="end_on"):
        PipelineHealthTrigger(pipeline_file="p.yaml", fire_on=["healthy"], end_on=["dead"])
    with pytest.raises(ValueError, match="end_on"):
        _sensor(fire_on=["dead"], fail_on=["dead"], end_on=["dead"])
    assert _sensor(fire_on=list(PROBLEMS), end_on=list(PROBLEMS))._trigger().end_on == sorted(PROBLEMS)


def test_a_task_end_event_resumed_without_its_facts_looks_again(monkeypatch):
    """`dag.test()` resumes a task its trigger ended (TaskSuccessEvent) with the state, not the
    event: the sensor looks again instead of failing on a string."""
    from onceflow.airflow import sensors

    monkeypatch.setattr(sensors, "observe", lambda file, since, watcher: _event("dead", watcher=watcher))
    out = _sensor(fire_on=list(PROBLEMS), end_on=list(PROBLEMS), watcher="s/r").execute_complete({}, "success")
    assert out["verdict"] == "dead" and out["watcher"] == "s/r"

"""The recovery DAG's operators: `onceflow recover`'s command line from the rendered params, its JSON read back."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from devkit.pipelines import write_pipeline  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.airflow.hooks import OnceflowHook  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.airflow.recovery import (  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
    RecoveryMarkerOperator,
    RecoveryOperator,
    _json_or_none,
    _truthy,
)
from tests.unit.airflow.test_hooks import _holder  # noqa: E402 -- the stand-in job that holds the run lock


def test_the_command_carries_the_flags_the_params_turned_on():
    plan = RecoveryOperator(task_id="plan", pipeline_file="pipelines/payments.yaml", action="plan")
    assert plan.command() == [
        sys.executable,
        "-m",
        "onceflow.cli",
        "recover",
        "--pipeline",
        str(Path("pipelines/payments.yaml").resolve()),
        "--json",
        "--dry-run",
    ]
    execute = RecoveryOperator(task_id="x", pipeline_file="p.yaml", action="execute", force="True", accept_loss="on")
    assert execute.command()[-2:] == ["--force", "--accept-loss"] and "--dry-run" not in execute.command()
    assert execute.retries == 0  # a half-done recovery is planned again, not retried
    with pytest.raises(ValueError, match="'plan' or 'execute'"):
        RecoveryOperator(task_id="x", pipeline_file="p.yaml", action="undo")


def test_rendered_booleans_and_the_commands_json():
    assert [_truthy(v) for v in (True, "true", " Yes ", "1", "on")] == [True] * 5
    assert [_truthy(v) for v in (False, "False", "", "0", None)] == [False] * 5
    assert _json_or_none('{"outcome": "done"}') == {"outcome": "done"}
    assert _json_or_none('a log line\n{"outcome": "refused"}') == {"outcome": "refused"}
    assert _json_or_none("") is None and _json_or_none("no json here") is None


def test_begin_marks_the_recovery_then_stops_the_running_copy(tmp_path, monkeypatch):
    """The recover DAG's first task: the marker first (no new copy starts after the stop), then the
    stop, in one task (a task start less between a kill and the recovered app)."""
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    file = write_pipeline(tmp_path / "p", "localhost:1", "t", name="p")
    hook = OnceflowHook(file)
    proc = _holder(hook, "stop")
    try:
        begin = RecoveryMarkerOperator(task_id="begin", pipeline_file=str(file), action="begin", stop_running=True)
        out: Any = begin.execute({"run_id": "rec-1"})
        assert out["run_id"] == "rec-1" and out["stopped"]["pid"] == proc.pid
        assert (hook.recovery_in_progress() or {})["run_id"] == "rec-1"
        assert hook.running_job() is None and proc.wait(10) is not None
        again: Any = RecoveryMarkerOperator(task_id="b", pipeline_file=str(file), action="begin").execute(
            {"run_id": "rec-1"}
        )
        assert "stopped" not in again  # the marker alone: renewed by its own run, nothing stopped
    finally:
        proc.kill()
        proc.wait()
    with pytest.raises(ValueError, match="stop_running goes with action 'begin'"):
        RecoveryMarkerOperator(task_id="end", pipeline_file=str(file), action="end", stop_running=True)

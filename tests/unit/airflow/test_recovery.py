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


class _TI:
    def __init__(self, xcoms: dict):
        self.xcoms = xcoms

    def xcom_pull(self, task_ids, key="return_value"):
        return self.xcoms.get((task_ids, key))


def test_a_recovery_by_hand_is_told_at_begin_one_a_watch_triggered_only_at_its_end(tmp_path, monkeypatch):
    """The watch that triggered a recovery told its incident; the recovery adds its outcome only."""
    from onceflow.airflow import notify

    told: list = []
    monkeypatch.setattr(notify, "send", lambda pipeline, incident, context, log: told.append(incident))
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    file = str(write_pipeline(tmp_path / "p", "localhost:1", "t", name="p"))
    begin = RecoveryMarkerOperator(task_id="begin", pipeline_file=file, action="begin")
    begin.execute({"run_id": "rec-1", "params": {"verdict": "dead", "reasons": "r", "from_run": "stream-7"}})
    assert told == []
    RecoveryMarkerOperator(task_id="end", pipeline_file=file, action="end").execute({"run_id": "rec-1"})
    begin.execute({"run_id": "rec-2", "params": {"verdict": "manual", "reasons": "", "from_run": ""}})
    assert [i.headline for i in told] == ["recovery started"]
    end = RecoveryMarkerOperator(
        task_id="end", pipeline_file=file, action="end", outcome_tasks=("execute", "wait_first_batch")
    )
    xcoms = {
        ("execute", "return_value"): {"plan": {"case": "dead_query", "decision": "restart"}},
        # a sensor its trigger ended: the XCom reads back as JSON text
        ("wait_first_batch", "return_value"): '{"verdict": "healthy", "time": 1.0, "run": {"last_batch_id": 9}}',
    }
    end.execute({"run_id": "rec-2", "ti": _TI(xcoms)})
    end.execute({"run_id": "rec-2", "ti": _TI({("execute", "refusal"): "retention_loss: [0, 40) is gone"})})
    assert [i.headline for i in told[1:]] == ["recovered", "recovery did not finish"]
    assert told[1].evidence[0] == "the recovered app committed batch 9"
    assert told[2].evidence == ["refused: retention_loss: [0, 40) is gone"]

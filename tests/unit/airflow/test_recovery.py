"""The recovery DAG's operators: `onceflow recover`'s command line from the rendered params, its JSON read back."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from onceflow.airflow.recovery import RecoveryOperator, _json_or_none, _truthy  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME


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

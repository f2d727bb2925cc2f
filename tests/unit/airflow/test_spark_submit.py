"""The spark-submit operator: its stop bound, and what it hands the provider."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from onceflow.airflow.spark_submit import STOP_MARGIN, OnceflowSparkSubmitOperator  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME


def test_the_kills_grace_must_leave_the_app_time_to_exit():
    with pytest.raises(ValueError, match=f"must exceed {STOP_MARGIN:g}s"):
        OnceflowSparkSubmitOperator(task_id="x", pipeline_file="p.yaml", app="audit", stop_grace=STOP_MARGIN)


def test_the_apps_arguments_name_the_pipeline_file_absolutely_and_pass_the_rest_through():
    op = OnceflowSparkSubmitOperator(task_id="x", pipeline_file="p.yaml", app="backfill", app_args=("--x", "3"))
    assert op.arguments({}) == ["--pipeline", str(Path("p.yaml").resolve()), "--x", "3"]
    assert op.name == "onceflow-backfill" and op.stop_grace == 60.0


def test_a_kill_before_spark_submit_started_leaves_it_to_the_provider(monkeypatch):
    op = OnceflowSparkSubmitOperator(task_id="x", pipeline_file="p.yaml", app="ingest")
    called: list[str] = []
    monkeypatch.setattr(type(op).__mro__[1], "on_kill", lambda self: called.append("provider"))
    op.on_kill()  # no hook, no submit process: nothing to SIGTERM first
    assert called == ["provider"]

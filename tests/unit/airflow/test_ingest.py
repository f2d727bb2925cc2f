"""The ingest operator's command line: the rendered params, the app's stop bound inside the kill's grace."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from onceflow.airflow.ingest import IngestOperator  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME


def test_ingest_arguments_from_rendered_params():
    op = IngestOperator(
        task_id="stream",
        pipeline_file="pipelines/payments.yaml",
        mode="continuous",
        max_seconds="600",
        until_idle="None",
    )
    args = op.arguments({})
    assert args == [
        "--pipeline",
        str(Path("pipelines/payments.yaml").resolve()),
        "--mode",
        "continuous",
        "--stop-timeout",
        "45",
        "--max-seconds",
        "600",
    ]
    with pytest.raises(ValueError, match="available-now"):
        IngestOperator(task_id="x", pipeline_file="p.yaml", mode="forever")


def test_the_apps_stop_bound_fits_in_the_kills_grace():
    op = IngestOperator(task_id="ingest", pipeline_file="p.yaml", mode="available-now", stop_grace=240)
    args = op.arguments({})
    assert args[args.index("--stop-timeout") + 1] == "225"  # 240 s grace less the app's exit margin
    with pytest.raises(ValueError, match="stop_grace=10: must exceed 15s"):
        IngestOperator(task_id="x", pipeline_file="p.yaml", mode="continuous", stop_grace=10)

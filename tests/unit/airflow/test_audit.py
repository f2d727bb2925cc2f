"""The audit operator's scope: one vocabulary (full, since-last), the DAG params' older 'incremental' accepted."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from airflow.sdk.exceptions import AirflowFailException  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME

from onceflow.airflow.audit import AuditOperator  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.reconcile import AuditScope  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME


def _scope(mode: str) -> list[str]:
    op = AuditOperator(task_id="audit", pipeline_file="pipelines/payments.yaml", audit_mode=mode)
    args = op.arguments({})
    assert args[:2] == ["--pipeline", str(Path("pipelines/payments.yaml").resolve())]
    return args[2:3]


def test_each_spelling_of_the_scope_becomes_the_apps_flag():
    assert _scope("full") == ["--full"]
    assert _scope("since-last") == ["--since-last"]
    assert _scope("incremental") == ["--since-last"]  # the DAG param's first name for it
    assert _scope(AuditScope.SINCE_LAST) == ["--since-last"]
    assert AuditOperator(task_id="a", pipeline_file="p.yaml").audit_mode == "since-last"  # the default


def test_an_unknown_scope_fails_the_task_with_the_ones_it_knows():
    with pytest.raises(AirflowFailException, match="'since-last' \\(or 'incremental'\\) or 'full', not 'weekly'"):
        _scope("weekly")

"""After the watcher, a problem verdict triggers the recovery (one task: the decision and the
trigger) and anything else skips it (the window ended cleanly)."""

from __future__ import annotations

import importlib

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from airflow.sdk.exceptions import AirflowSkipException, DagRunTriggerException  # noqa: E402 -- after AIRFLOW_HOME

from onceflow.airflow.route import RecoverOnProblemOperator  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.verdicts import PROBLEMS, Verdict  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME


class _TaskInstance:
    def __init__(self, event):
        self.event = event

    def xcom_pull(self, task_ids):
        assert task_ids == "watch"
        return self.event


def _op() -> RecoverOnProblemOperator:
    return RecoverOnProblemOperator(task_id="trigger_recover", watch_task="watch", trigger_dag_id="p_recover")


@pytest.mark.parametrize("verdict", PROBLEMS)
def test_a_problem_verdict_triggers_the_recovery_with_its_reasons(verdict):
    context = {"ti": _TaskInstance({"verdict": str(verdict), "reasons": ["a", "b"]}), "run_id": "scheduled__1"}
    with pytest.raises(DagRunTriggerException) as triggered:
        _op().execute(context)
    assert triggered.value.trigger_dag_id == "p_recover" and triggered.value.wait_for_completion is False
    assert triggered.value.conf == {"verdict": str(verdict), "reasons": "a; b", "from_run": "scheduled__1"}


@pytest.mark.parametrize(
    "event", [{"verdict": Verdict.STOPPED}, {"verdict": Verdict.WINDOW_END}, {"verdict": "down"}, None]
)
def test_anything_else_skips_the_recovery(event):
    with pytest.raises(AirflowSkipException, match="no recovery"):
        _op().execute({"ti": _TaskInstance(event), "run_id": "scheduled__1"})

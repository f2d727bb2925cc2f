"""After the watcher, a problem verdict routes to recovery and anything else ends the window."""

from __future__ import annotations

import importlib

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from onceflow.airflow.route import RouteOnVerdictOperator  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.verdicts import PROBLEMS, Verdict  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME


class _TaskInstance:
    def __init__(self, event):
        self.event = event

    def xcom_pull(self, task_ids):
        assert task_ids == "watch"
        return self.event


def test_problem_verdicts_go_to_recovery():
    op = RouteOnVerdictOperator(task_id="route", watch_task="watch", problem_task="recover", ok_task="done")
    for verdict in PROBLEMS:
        assert op.choose_branch({"ti": _TaskInstance({"verdict": str(verdict), "reasons": ["x"]})}) == "recover"
    for verdict in (Verdict.STOPPED, Verdict.HEALTHY, Verdict.TIMEOUT):
        assert op.choose_branch({"ti": _TaskInstance({"verdict": str(verdict)})}) == "done"
    assert op.choose_branch({"ti": _TaskInstance(None)}) == "done"

"""After the watcher, a problem verdict triggers the recovery (one task: the decision and the
trigger) and anything else skips it (the window ended cleanly)."""

from __future__ import annotations

import importlib

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from airflow.sdk.exceptions import AirflowSkipException, DagRunTriggerException  # noqa: E402 -- after AIRFLOW_HOME

from devkit.pipelines import write_pipeline  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.airflow import notify  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.airflow.notify import IncidentKind  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.airflow.route import RecoverOnProblemOperator  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME
from onceflow.verdicts import PROBLEMS, Verdict  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME


class _TaskInstance:
    def __init__(self, event):
        self.event = event

    def xcom_pull(self, task_ids):
        assert task_ids == "watch"
        return self.event


class _Dag:
    dag_id = "p_stream"


@pytest.fixture
def told(monkeypatch) -> list:
    """The incidents the operator hands to notify.send (the sending itself: tests/integration/test_notify.py)."""
    sent: list = []
    monkeypatch.setattr(notify, "send", lambda pipeline, incident, context, log: sent.append(incident))
    return sent


@pytest.fixture
def op(tmp_path) -> RecoverOnProblemOperator:
    file = write_pipeline(tmp_path, "localhost:9092", "t", name="p")
    return RecoverOnProblemOperator(
        task_id="trigger_recover", pipeline_file=str(file), watch_task="watch", trigger_dag_id="p_recover"
    )


def _context(event) -> dict:
    return {"ti": _TaskInstance(event), "run_id": "scheduled__1", "dag": _Dag()}


@pytest.mark.parametrize("verdict", PROBLEMS)
def test_a_problem_verdict_triggers_the_recovery_with_its_reasons_and_is_told_once(verdict, op, told):
    with pytest.raises(DagRunTriggerException) as triggered:
        op.execute(_context({"verdict": str(verdict), "reasons": ["a", "b"]}))
    assert triggered.value.trigger_dag_id == "p_recover" and triggered.value.wait_for_completion is False
    assert triggered.value.conf == {"verdict": str(verdict), "reasons": "a; b", "from_run": "scheduled__1"}
    assert [(i.kind, i.headline) for i in told] == [(IncidentKind.ALERT, f"{verdict}, recovery started")]
    assert told[0].evidence[:2] == [f"verdict {verdict}: a", f"verdict {verdict}: b"]


def test_down_is_told_but_needs_no_recovery(op, told):
    with pytest.raises(AirflowSkipException, match="no recovery"):
        op.execute(_context({"verdict": "down", "reasons": ["wanted, not running"]}))
    assert [i.headline for i in told] == ["down, the next stream run starts the app again"]


@pytest.mark.parametrize("event", [{"verdict": Verdict.STOPPED}, {"verdict": Verdict.WINDOW_END}, None])
def test_anything_else_skips_the_recovery_and_tells_nobody(event, op, told):
    with pytest.raises(AirflowSkipException, match="no recovery"):
        op.execute(_context(event))
    assert told == []

"""RecoverOnProblemOperator: after a stream window's watcher, a problem verdict triggers the recovery."""

from __future__ import annotations

import json
from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk.exceptions import AirflowSkipException

from onceflow.airflow.hooks import OnceflowHook
from onceflow.airflow.notify import alert_incident, tell
from onceflow.verdicts import ALERTS, PROBLEMS


class RecoverOnProblemOperator(TriggerDagRunOperator):
    """After the watcher: a problem verdict triggers `trigger_dag_id` (the pipeline's `<p>_recover`)
    with the verdict, its reasons and this run's id as its conf, without waiting for it; any other
    verdict skips the task (the window ended cleanly). The decision and the trigger are one task, not
    a branch and then a trigger: a recovery starts one task start (seconds on a small machine) sooner.
    An alert verdict (a problem, or `down`) is told to the pipeline's notify targets here, once
    (onceflow.airflow.notify)."""

    def __init__(self, *, pipeline_file: str, watch_task: str, **kwargs: Any) -> None:
        kwargs.setdefault("wait_for_completion", False)
        super().__init__(**kwargs)
        self.pipeline_file = pipeline_file
        self.watch_task = watch_task

    def execute(self, context: Any) -> Any:
        event = context["ti"].xcom_pull(task_ids=self.watch_task) or {}
        if isinstance(event, str):  # the XCom of a task its trigger ended (TaskSuccessEvent) reads back as
            event = json.loads(event)  # its JSON text in Airflow 3.3 (measured: benchmarks/airflow_kills.py)
        verdict = event.get("verdict")
        if verdict in ALERTS:
            hook = OnceflowHook(self.pipeline_file)
            tell(
                lambda: hook.pipeline,
                lambda: alert_incident(
                    hook.name, event, context["dag"].dag_id, context["run_id"], str(self.trigger_dag_id)
                ),
                context,
                self.log.info,
            )
        if verdict not in PROBLEMS:
            raise AirflowSkipException(f"verdict {verdict}: the window ended cleanly; no recovery")
        reasons = "; ".join(event.get("reasons") or [])
        self.log.info("verdict %s (%s): triggering %s", verdict, reasons, self.trigger_dag_id)
        self.conf = {"verdict": str(verdict), "reasons": reasons, "from_run": context["run_id"]}
        return super().execute(context)

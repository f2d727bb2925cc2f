"""RouteOnVerdictOperator: after a stream window's watcher, a problem verdict goes to recovery."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseBranchOperator

from onceflow.verdicts import PROBLEMS


class RouteOnVerdictOperator(BaseBranchOperator):
    """After the watcher: a problem verdict goes to `problem_task`, anything else to `ok_task`."""

    def __init__(self, *, watch_task: str, problem_task: str, ok_task: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.watch_task, self.problem_task, self.ok_task = watch_task, problem_task, ok_task

    def choose_branch(self, context: Any) -> str:
        event = context["ti"].xcom_pull(task_ids=self.watch_task) or {}
        verdict = event.get("verdict")
        if verdict in PROBLEMS:
            self.log.info("verdict %s (%s): recovering", verdict, "; ".join(event.get("reasons") or []))
            return self.problem_task
        self.log.info("verdict %s: the window ended cleanly", verdict)
        return self.ok_task

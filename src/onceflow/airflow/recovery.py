"""The recovery DAG's own operators: `onceflow recover` as a task, and the marker that keeps the
stream DAG from submitting while recovery works (its `begin` also stops a running copy of the query)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from onceflow.airflow.dag_kinds import DagKind, dag_id
from onceflow.airflow.hooks import OnceflowHook
from onceflow.airflow.notify import recovery_ended, recovery_started, tell
from onceflow.errors import RecoveryInProgressError

REFUSAL = "refusal"  # the XCom key of a refused recovery's reason


def renew_marker(hook: OnceflowHook, context: Any) -> None:
    """A step of the recovery is at work: its marker lives on (onceflow.state.control.RecoveryMarker)."""
    with hook.control_lock():
        try:
            hook.recovery_marker.renew(context["run_id"])
        except RecoveryInProgressError as exc:  # ours expired and another recovery began meanwhile
            raise AirflowFailException(f"{hook.name}: {exc}") from exc


class RecoveryOperator(BaseOperator):
    """`onceflow recover` as a task: `plan` (dry run, the plan in the log and XCom) or `execute`.

    Recovery is JVM-free file work on the checkpoint and ledgers, so it runs as a
    plain process on the worker. No retries: a half-done recovery is re-planned.
    """

    template_fields: Sequence[str] = ("pipeline_file", "force", "accept_loss")
    ui_color = "#fbe3e3"

    def __init__(
        self, *, pipeline_file: str, action: str, force: Any = False, accept_loss: Any = False, **kwargs: Any
    ) -> None:
        if action not in ("plan", "execute"):
            raise ValueError(f"action must be 'plan' or 'execute', not {action!r}")
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.pipeline_file = pipeline_file
        self.action = action
        self.force = force
        self.accept_loss = accept_loss

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "onceflow.cli",
            "recover",
            "--pipeline",
            str(Path(self.pipeline_file).resolve()),
            "--json",
        ]
        if self.action == "plan":
            cmd.append("--dry-run")
        if _truthy(self.force):
            cmd.append("--force")
        if _truthy(self.accept_loss):
            cmd.append("--accept-loss")
        return cmd

    def execute(self, context: Any) -> Any:
        renew_marker(OnceflowHook(self.pipeline_file), context)
        cmd = self.command()
        self.log.info("running: %s", " ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        for line in proc.stderr.splitlines():
            self.log.info("%s", line)
        plan = _json_or_none(proc.stdout)
        if plan is None:
            for line in proc.stdout.splitlines():
                self.log.info("%s", line)
        else:
            self.log.info("recovery %s:\n%s", self.action, json.dumps(plan, indent=2))
        if proc.returncode == 3:
            refusal = (plan or {}).get("plan", {}).get("refusal") or proc.stderr[-2000:]
            context["ti"].xcom_push(key=REFUSAL, value=str(refusal))  # the end's message says why
            raise AirflowFailException(
                f"recovery refused: {refusal}"
                " Fix: read the plan above; trigger this DAG again with the flag it names "
                "(force / accept_loss) if that is what you want."
            )
        if proc.returncode != 0:
            raise AirflowFailException(
                f"onceflow recover ({self.action}) exited {proc.returncode}: "
                f"{(proc.stderr or proc.stdout).strip()[-2000:]}"
            )
        return plan if plan is not None else proc.stdout[-10000:]


def _as_dict(value: Any) -> dict | None:
    """A task's XCom as a dict: one a trigger ended reads back as its JSON text (route.py)."""
    if isinstance(value, str):
        value = _json_or_none(value)
    return value if isinstance(value, dict) else None


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _json_or_none(text: str) -> Any:
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        start = text.find("{")
        try:
            return json.loads(text[start:]) if start >= 0 else None
        except ValueError:
            return None


class RecoveryMarkerOperator(BaseOperator):
    """Set (`begin`) or clear (`end`) the marker that keeps any other start of the query, and the
    stream DAG's runs, waiting while this recovery works (onceflow.state.control). With `stop_running`,
    `begin` then stops a copy of the query still running (SIGTERM, SIGKILL after the grace: the
    app's own stop bound plus 30 s): the marker first, so no new copy starts after the stop, and in
    one task, a task start (seconds on a small machine) less between a kill and the recovered app.

    The pipeline's notify targets hear of it (onceflow.airflow.notify): `begin`, of a recovery no
    stream watch triggered (that watch told its incident already); `end`, with `outcome_tasks`
    (the execute task, the first-batch sensor), whether the recovery resolved the incident or why not."""

    template_fields: Sequence[str] = ("pipeline_file",)

    def __init__(
        self,
        *,
        pipeline_file: str,
        action: str,
        stop_running: bool = False,
        outcome_tasks: tuple[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        if action not in ("begin", "end"):
            raise ValueError(f"action must be 'begin' or 'end', not {action!r}")
        if stop_running and action != "begin":
            raise ValueError("stop_running goes with action 'begin'")
        if outcome_tasks and action != "end":
            raise ValueError("outcome_tasks goes with action 'end'")
        super().__init__(**kwargs)
        self.pipeline_file = pipeline_file
        self.action = action
        self.stop_running = stop_running
        self.outcome_tasks = outcome_tasks

    def execute(self, context: Any) -> dict | None:
        hook = OnceflowHook(self.pipeline_file)
        if self.action == "end":
            hook.recovery_marker.clear(context["run_id"])
            if self.outcome_tasks:
                self._tell_outcome(hook, context)
            return None
        params = context.get("params") or {}
        if not params.get("from_run"):  # by hand: no watch told of it
            verdict, reasons = str(params.get("verdict") or ""), str(params.get("reasons") or "")
            tell(
                lambda: hook.pipeline,
                lambda: recovery_started(
                    hook.name, verdict, reasons, dag_id(hook.name, DagKind.RECOVER), context["run_id"]
                ),
                context,
                self.log.info,
            )
        with hook.control_lock():
            try:
                marker = hook.recovery_marker.begin(context["run_id"]).as_dict()
            except RecoveryInProgressError as exc:
                raise AirflowFailException(f"{hook.name}: {exc}") from exc
        if not self.stop_running:
            return marker
        stopped = hook.stop_running(log=self.log.info)
        if stopped is None:
            self.log.info("no copy of the query runs")
        return {**marker, "stopped": stopped}

    def _tell_outcome(self, hook: OnceflowHook, context: Any) -> None:
        assert self.outcome_tasks is not None
        execute_task, first_batch_task = self.outcome_tasks
        ti = context["ti"]
        executed, first_batch = (
            _as_dict(ti.xcom_pull(task_ids=execute_task)),
            _as_dict(ti.xcom_pull(task_ids=first_batch_task)),
        )
        refusal = ti.xcom_pull(task_ids=execute_task, key=REFUSAL)
        began = getattr(context.get("dag_run"), "start_date", None)
        seconds = first_batch["time"] - began.timestamp() if first_batch and began and first_batch.get("time") else None
        recover = dag_id(hook.name, DagKind.RECOVER)
        tell(
            lambda: hook.pipeline,
            lambda: recovery_ended(hook.name, executed, first_batch, refusal, recover, context["run_id"], seconds),
            context,
            self.log.info,
        )

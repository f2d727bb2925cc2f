"""Operators: submit onceflow's Spark apps, turn audit and recovery results into task outcomes.

Spark apps go through the apache-spark provider's SparkSubmitOperator (the
`spark_default` connection picks the master). Two traps of long-lived
spark-submit tasks are closed here: every run is bounded (`--max-seconds`, so the
task always ends), and killing the task first sends SIGTERM to the app, which
stops at a batch boundary, before the provider's SIGKILL (bounded wait). The
ingest app's own stop bound (`--stop-timeout`) is `stop_grace` less STOP_MARGIN,
so it stops, or gives up and says so, before that SIGKILL.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseBranchOperator, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from onceflow.airflow.hooks import OnceflowHook, reports_root
from onceflow.airflow.links import AuditReportLink, report_url
from onceflow.airflow.submit import submit_settings
from onceflow.reconcile import AuditScope, AuditStatus, CheckStatus
from onceflow.status import IngestMode, RunStatus
from onceflow.verdicts import PROBLEMS

_EXIT_CODE = re.compile(r"Error code is: (\d+)")
# seconds of stop_grace kept for the app's exit after its stop (status, checkpoint check, JVM exit; ~2 s measured)
STOP_MARGIN = 15.0


class OnceflowSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of spark_apps/<app>.py for one pipeline, with onceflow's jars, conf and env.

    :param pipeline_file: the pipeline YAML (passed to the app as --pipeline)
    :param app: the entry point in spark_apps/ (ingest, audit, backfill)
    :param app_args: more arguments for the app (templated)
    :param stop_grace: seconds to wait after SIGTERM on kill before the provider's SIGKILL; the
        ingest app gets `stop_grace - STOP_MARGIN` to stop at a batch boundary, so it must exceed
        the longest batch by that margin (docs/airflow.md)
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "pipeline_file", "app_args")
    ui_color = "#fdf0e0"

    def __init__(
        self,
        *,
        pipeline_file: str,
        app: str,
        app_args: Sequence[str] = (),
        conn_id: str = "spark_default",
        stop_grace: float = 60.0,
        **kwargs: Any,
    ) -> None:
        if stop_grace <= STOP_MARGIN:
            raise ValueError(
                f"stop_grace={stop_grace:g}: must exceed {STOP_MARGIN:g}s, the app's exit after "
                "its stop, by at least the longest batch's time"
            )
        kwargs.setdefault("name", f"onceflow-{app}")
        super().__init__(conn_id=conn_id, **kwargs)
        self.pipeline_file = pipeline_file
        self.app = app
        self.app_args = list(app_args)
        self.stop_grace = stop_grace

    @property
    def onceflow(self) -> OnceflowHook:
        return OnceflowHook(self.pipeline_file)

    def arguments(self, context: Any) -> list[str]:
        """The app's command line (subclasses add theirs)."""
        return ["--pipeline", str(Path(self.pipeline_file).resolve()), *[str(a) for a in self.app_args]]

    def prepare(self, context: Any) -> None:
        master = SparkSubmitHook(conn_id=self._conn_id)._connection["master"]
        settings = submit_settings(self.app, master)
        self.application = settings.application
        self.application_args = self.arguments(context)
        self.conf = {**settings.conf, **(self.conf or {})}
        self.jars = ",".join(j for j in (settings.jars, self.jars) if j)
        self.py_files = ",".join(p for p in (settings.py_files, self.py_files) if p) or None
        self.env_vars = {**settings.env_vars, **(self.env_vars or {})}
        self._hook = None
        self.log.info("spark-submit %s on master %s (connection %s)", self.application, master, self._conn_id)

    def execute(self, context: Any) -> Any:
        from onceflow.kafka.admin import require_pipeline_brokers
        from onceflow.spark.session import spark_dir

        require_pipeline_brokers(self.onceflow.pipeline)  # a broker that is down fails here, before spark-submit
        self.prepare(context)
        # the driver JVM starts in this task's working directory and leaves Spark 4.0's
        # artifacts/ there: start spark-submit in <state>/spark instead
        here = Path.cwd()
        spark_dir().mkdir(parents=True, exist_ok=True)
        os.chdir(spark_dir())
        try:
            return super().execute(context)
        finally:
            os.chdir(here)

    def on_kill(self) -> None:
        """SIGTERM the app first (it stops at a batch boundary), then let the provider kill spark-submit."""
        submit = getattr(self._hook, "_submit_sp", None) if self._hook else None
        try:
            holder = self.onceflow.running_job()
        except Exception:
            holder = None
        pid = (holder or {}).get("pid")
        if submit is not None and submit.poll() is None and pid and _descends_from(pid, submit.pid):
            self.log.info("stopping the app (pid %s) with SIGTERM; waiting up to %ss", pid, self.stop_grace)
            os.kill(pid, signal.SIGTERM)
            try:
                submit.wait(timeout=self.stop_grace)
            except subprocess.TimeoutExpired:
                self.log.warning("the app did not stop within %ss: killing spark-submit", self.stop_grace)
        super().on_kill()


def _descends_from(pid: int, ancestor: int) -> bool:
    """True if `pid` is `ancestor` or one of its descendants (Linux /proc)."""
    seen = 0
    while pid and pid != 1 and seen < 64:
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        seen += 1
    return False


class IngestOperator(OnceflowSparkSubmitOperator):
    """One bounded run of the exactly-once ingest app (available-now or a continuous window).

    Skips when another copy of the query runs (the app's own run lock would refuse it
    anyway) and, unless `during_recovery`, while `<p>_recover` works. Returns the
    run's summary (run id, batches, rows, final status) as XCom.
    """

    template_fields: Sequence[str] = (*OnceflowSparkSubmitOperator.template_fields, "max_seconds", "until_idle")

    def __init__(
        self,
        *,
        pipeline_file: str,
        mode: str,
        max_seconds: Any = None,
        until_idle: Any = None,
        during_recovery: bool = False,
        **kwargs: Any,
    ) -> None:
        if mode not in tuple(IngestMode):
            raise ValueError(f"mode must be 'available-now' or 'continuous', not {mode!r}")
        super().__init__(pipeline_file=pipeline_file, app="ingest", **kwargs)
        self.mode = str(mode)  # a plain string: Airflow serializes it
        self.max_seconds = max_seconds
        self.until_idle = until_idle
        self.during_recovery = during_recovery

    def arguments(self, context: Any) -> list[str]:
        # the app's stop bound fits in the kill's grace: it stops, or exits saying it could not, first
        args = [
            *super().arguments(context),
            "--mode",
            self.mode,
            "--stop-timeout",
            f"{self.stop_grace - STOP_MARGIN:g}",
        ]
        if self.max_seconds not in (None, "", "None"):
            args += ["--max-seconds", str(int(float(self.max_seconds)))]
        if self.until_idle not in (None, "", "None"):
            args += ["--until-idle", str(int(float(self.until_idle)))]
        return args

    def execute(self, context: Any) -> dict:  # type: ignore[override]  # the summary is the XCom; the base says None
        hook = self.onceflow
        recovering = hook.recovery_in_progress()
        if recovering and not self.during_recovery:
            raise AirflowSkipException(
                f"{hook.name}: recovery run {recovering.get('run_id')} is in progress; it resubmits the app itself"
            )
        holder = hook.running_job()
        if holder is not None:
            raise AirflowSkipException(
                f"{hook.name}: the query already runs (pid {holder.get('pid')} on "
                f"{holder.get('host')}, started {holder.get('started')}); not starting a "
                "second copy"
            )
        since = time.time()
        context["ti"].xcom_push(key="since", value=since)
        failure: Exception | None = None
        try:
            super().execute(context)
        except AirflowException as exc:
            failure = exc
        run = hook.last_run().as_dict()
        if run["started_epoch"] is None or run["started_epoch"] < since - 2:
            raise AirflowException(f"{hook.name}: the ingest app did not start: {failure or 'no started event'}")
        summary = {**run, "since": since}
        self.log.info(
            "%s run %s (%s): %s batches, %s rows, final %s",
            hook.name,
            run["run_id"],
            run["mode"],
            run["batches"],
            run["rows"],
            run["final_status"],
        )
        if failure is not None or run["final_status"] == RunStatus.FAILED:
            raise AirflowException(f"{hook.name}: ingest run {run['run_id']} failed: {run['error'] or failure}")
        return summary


class AuditOperator(OnceflowSparkSubmitOperator):
    """Run the audit app, publish its report, and fail the task on any duplicate or loss.

    Exit code 1 (the audit found a data problem) fails without retry; exit code 2
    (the audit could not run) fails with retries. The report's URL is the task's
    "Audit report" extra link and its path the XCom `report`.
    """

    template_fields: Sequence[str] = (*OnceflowSparkSubmitOperator.template_fields, "audit_mode")
    operator_extra_links = (AuditReportLink(),)

    def __init__(self, *, pipeline_file: str, audit_mode: str = AuditScope.SINCE_LAST, **kwargs: Any) -> None:
        super().__init__(pipeline_file=pipeline_file, app="audit", **kwargs)
        self.audit_mode = str(audit_mode)  # a plain string: Airflow templates and serializes it
        self.report_link: str | None = None

    def arguments(self, context: Any) -> list[str]:
        try:
            scope = AuditScope.parse(self.audit_mode)
        except ValueError:
            raise AirflowFailException(
                f"audit mode must be 'since-last' (or 'incremental') or 'full', not {self.audit_mode!r}"
            ) from None
        return [*super().arguments(context), f"--{scope}", "--report-dir", str(reports_root())]

    def execute(self, context: Any) -> dict:  # type: ignore[override]  # the summary is the XCom; the base says None
        hook = self.onceflow
        started = time.time()
        code = 0
        try:
            super().execute(context)
        except AirflowException as exc:
            match = _EXIT_CODE.search(str(exc))
            code = int(match.group(1)) if match else 2
            if code != 1:
                raise AirflowException(f"{hook.name}: the audit could not run (exit code {code}): {exc}") from None
        summary = hook.latest_audit()
        if summary is None or Path(summary["report_dir"], "summary.json").stat().st_mtime < started - 1:
            raise AirflowException(f"{hook.name}: the audit wrote no report under {hook.reports_dir}")
        if summary.get("status") == AuditStatus.ERROR:
            raise AirflowException(
                f"{hook.name}: the audit could not run: {summary.get('reason')}. "
                f"Report: {summary['report_dir']}/index.html"
            )
        report_dir = summary["report_dir"]
        self.report_link = report_url(report_dir, reports_root())
        context["ti"].xcom_push(key="report", value=str(Path(report_dir) / "index.html"))
        self.log.info("%s audit report: %s (%s)", hook.name, report_dir, self.report_link)
        verdict = audit_verdict(summary)
        if code == 1 or not verdict["passed"]:
            raise AirflowFailException(
                f"{hook.name}: the audit found data problems: {verdict['problems']}. Report: {report_dir}/index.html"
            )
        return {"report_dir": report_dir, "report_url": self.report_link, **verdict}


def audit_verdict(summary: dict) -> dict:
    """passed + what failed, from an audit's summary.json (docs/schemas/audit-summary.schema.json)."""
    status = summary.get("status")
    failed = [
        c.get("name")
        for c in summary.get("checks") or []
        if isinstance(c, dict) and c.get("status") == CheckStatus.FAILED
    ]
    failed = failed or [str(c) for c in summary.get("failed_checks") or []]
    problems = failed or ([f"the audit could not run: {summary.get('reason')}"] if status == AuditStatus.ERROR else [])
    return {
        "passed": status == AuditStatus.PASSED and not failed,
        "status": status,
        "problems": problems,
        "counts": summary.get("counts") or {},
    }


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
            raise AirflowFailException(
                f"recovery refused: {(plan or {}).get('plan', {}).get('refusal') or proc.stderr[-2000:]}"
                " Fix: read the plan above; trigger this DAG again with the flag it names "
                "(force / accept_loss) if that is what you want."
            )
        if proc.returncode != 0:
            raise AirflowFailException(
                f"onceflow recover ({self.action}) exited {proc.returncode}: "
                f"{(proc.stderr or proc.stdout).strip()[-2000:]}"
            )
        return plan if plan is not None else proc.stdout[-10000:]


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


class StopRunningOperator(BaseOperator):
    """Stop the pipeline's running query, if any (SIGTERM, SIGKILL after the grace: by default
    the app's own stop bound plus 30 s)."""

    template_fields: Sequence[str] = ("pipeline_file",)

    def __init__(self, *, pipeline_file: str, grace_seconds: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline_file = pipeline_file
        self.grace_seconds = grace_seconds

    def execute(self, context: Any) -> dict | None:
        stopped = OnceflowHook(self.pipeline_file).stop_running(self.grace_seconds, log=self.log.info)
        if stopped is None:
            self.log.info("no copy of the query runs")
        return stopped


class InvalidPipelineOperator(BaseOperator):
    """The one task of a pipeline file that does not validate: running it fails with the
    file, the field and the fix (the same text as the DAG's description and docs)."""

    ui_color = "#f8d7da"

    def __init__(self, *, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.message = message

    def execute(self, context: Any) -> None:
        raise AirflowFailException(self.message)


class RecoveryMarkerOperator(BaseOperator):
    """Set (`begin`) or clear (`end`) the marker that keeps `<p>_stream` from submitting during recovery."""

    template_fields: Sequence[str] = ("pipeline_file",)

    def __init__(self, *, pipeline_file: str, action: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline_file = pipeline_file
        self.action = action

    def execute(self, context: Any) -> dict | None:
        hook = OnceflowHook(self.pipeline_file)
        if self.action == "begin":
            other = hook.recovery_in_progress()
            if other and other.get("run_id") != context["run_id"]:
                raise AirflowFailException(
                    f"{hook.name}: recovery run {other.get('run_id')} is already in "
                    f"progress (since {other.get('time')}); wait for it to finish"
                )
            return hook.mark_recovery(context["run_id"])
        hook.clear_recovery()
        return None


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

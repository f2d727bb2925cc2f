"""AuditOperator: the audit app as a task that publishes its report and fails on a data problem."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from onceflow.airflow.hooks import reports_root
from onceflow.airflow.links import AuditReportLink, report_url
from onceflow.airflow.notify import audit_failed, tell
from onceflow.airflow.spark_submit import OnceflowSparkSubmitOperator
from onceflow.audit.report import audit_verdict
from onceflow.reconcile import AuditScope, AuditStatus

_EXIT_CODE = re.compile(r"Error code is: (\d+)")


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
            if context["ti"].try_number > (self.retries or 0):  # the last try: nobody retries it now
                self._tell(hook, context, audit_verdict(summary), summary, "")
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
            self._tell(hook, context, verdict, summary, self.report_link)
            raise AirflowFailException(
                f"{hook.name}: the audit found data problems: {verdict['problems']}. Report: {report_dir}/index.html"
            )
        return {"report_dir": report_dir, "report_url": self.report_link, **verdict}

    def _tell(self, hook: Any, context: Any, verdict: dict, summary: dict, link: str) -> None:
        """The pipeline's notify targets hear of a failed audit (onceflow.airflow.notify)."""
        link = link or f"{summary.get('report_dir')}/index.html"
        tell(
            lambda: hook.pipeline,
            lambda: audit_failed(hook.name, verdict, summary, link, context["dag"].dag_id, context["run_id"]),
            context,
            self.log.info,
        )

"""IngestOperator: one bounded run of the exactly-once ingest app, its summary as the task's XCom."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk.exceptions import AirflowException, AirflowSkipException

from onceflow.airflow.spark_submit import STOP_MARGIN, OnceflowSparkSubmitOperator
from onceflow.state.status import IngestMode, RunStatus


class IngestOperator(OnceflowSparkSubmitOperator):
    """One bounded run of the exactly-once ingest app (available-now or a continuous window).

    Skips when another copy of the query runs (the app's own run lock would refuse it
    anyway) and while `<p>_recover` works (the app would refuse to start). Returns the
    run's summary (run id, batches, rows, final status) as XCom. A continuous pipeline's
    long-lived app is StreamOperator's (onceflow.airflow.stream).
    """

    template_fields: Sequence[str] = (*OnceflowSparkSubmitOperator.template_fields, "max_seconds", "until_idle")

    def __init__(
        self,
        *,
        pipeline_file: str,
        mode: str,
        max_seconds: Any = None,
        until_idle: Any = None,
        **kwargs: Any,
    ) -> None:
        if mode not in tuple(IngestMode):
            raise ValueError(f"mode must be 'available-now' or 'continuous', not {mode!r}")
        super().__init__(pipeline_file=pipeline_file, app="ingest", **kwargs)
        self.mode = str(mode)  # a plain string: Airflow serializes it
        self.max_seconds = max_seconds
        self.until_idle = until_idle

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
        if recovering:
            raise AirflowSkipException(
                f"{hook.name}: recovery run {recovering.get('run_id')} is in progress; it starts the app itself"
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

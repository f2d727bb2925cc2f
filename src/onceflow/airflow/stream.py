"""StreamOperator: keep a pipeline's one long-lived streaming app running, across DAG runs.

A continuous pipeline's app is not bounded by a DAG run: a stream DAG run *adopts* the app that
runs, or *launches* it when none does, and renews the lease that keeps it wanted
(onceflow.state.control.Wanted) for the pipeline's `airflow.lease_grace`; the run's watcher renews it at
every look. The app runs until nobody renews the lease (the stream DAG is paused, Airflow is gone),
then stops itself at a batch boundary, within that grace. So a window's
end costs nothing (the next run adopts the same app: no driver start, no gap) and a scheduler
restart or an Airflow upgrade neither stops the app nor starts a second copy (the run lock).

The app is spark-submit's command as the apache-spark provider builds it from the `spark_default`
connection (client deploy mode), started in a session of its own so that it outlives the task:
its output goes to `<state>/pipelines/<name>/apps/<start>.log` (the newest APP_LOGS kept), which
the app records in its run.json, so every run that adopts it links the same log.
A recovery launches the app the same way, as the one query allowed while it works.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowSkipException

from onceflow import processes
from onceflow.airflow.hooks import OnceflowHook
from onceflow.airflow.sensors import stream_run_id
from onceflow.airflow.spark_submit import STOP_MARGIN, OnceflowSparkSubmitOperator
from onceflow.polling import wait_for
from onceflow.state.control import Launching
from onceflow.state.standby import Standby
from onceflow.state.status import IngestMode

APP_LOGS = 10  # app log files kept per pipeline (one per launch)
LAUNCH_TIMEOUT = 180.0  # seconds for a launched app to take the run lock (a JVM start on a busy machine)


class StreamOperator(OnceflowSparkSubmitOperator):
    """Adopt the pipeline's running app, or launch it detached; either way renew its lease.

    :param lease_seconds: how long from now the stream stays wanted (templated); None: the
        pipeline's `airflow.lease_grace`, and the stream run claims the pipeline (one run at a time)
    :param recovery_run: launched by this recovery run (templated): the one query allowed while
        it works; the recovery's marker is renewed instead of waited for
    Returns {adopted, since, pid, run_id, log, lease_until}: `since` (epoch) is when a launched app
    began, None for an adopted one, so the sensors after it judge the right run.
    """

    template_fields: Sequence[str] = (*OnceflowSparkSubmitOperator.template_fields, "lease_seconds", "recovery_run")
    ui_color = "#e0ecfd"

    def __init__(
        self, *, pipeline_file: str, lease_seconds: Any = None, recovery_run: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(pipeline_file=pipeline_file, app="ingest", **kwargs)
        self.lease_seconds = lease_seconds
        self.recovery_run = recovery_run
        self.app_log: Path | None = None  # the launched app's log, set just before the launch

    def arguments(self, context: Any) -> list[str]:
        args = [
            *super().arguments(context),
            "--mode",
            IngestMode.CONTINUOUS.value,
            "--lease",
            "--stop-timeout",
            f"{self.stop_grace - STOP_MARGIN:g}",
        ]
        args += ["--app-log", str(self.app_log)] if self.app_log else []
        return args + (["--recovery-run", str(self.recovery_run)] if self.recovery_run else [])

    def execute(self, context: Any) -> dict:  # type: ignore[override]  # the outcome is the XCom
        hook = self.onceflow
        by = stream_run_id(context)
        stream_run = self.lease_seconds in (None, "", "None")
        seconds = hook.pipeline.airflow.lease_grace_seconds if stream_run else float(self.lease_seconds)
        with hook.control_lock():  # decided with no recovery beginning in between (onceflow.state.control)
            marker = hook.recovery_in_progress()
            if marker and marker.get("run_id") != self.recovery_run:
                raise AirflowSkipException(
                    f"{hook.name}: recovery run {marker.get('run_id')} is at work; it starts the app itself"
                )
            if stream_run and hook.stream_run.claim(by, seconds) is None:
                other = hook.stream_run.holder() or {}
                raise AirflowSkipException(f"{hook.name}: stream run {other.get('run')} is at work; not a second one")
            if self.recovery_run:
                hook.recovery_marker.renew(str(self.recovery_run))
            holder = hook.running_job()
            if holder is None:  # said before it is wanted: never `down` while the app is on its way
                Launching(hook.pipeline.state_path).begin(LAUNCH_TIMEOUT, by=by, host=socket.gethostname())
            lease = hook.wanted.want(seconds, by=by)
        if holder is not None:
            self.log.info(
                "%s: adopting the running app (pid %s, run %s, since %s); wanted until %s",
                hook.name,
                holder.get("pid"),
                holder.get("run_id"),
                holder.get("started"),
                lease.as_dict()["until"],
            )
            outcome = self._outcome(True, None, holder, lease.until)
        else:
            try:
                outcome = self._launch(context, lease.until, by)
            finally:  # the app holds the run lock now, or the launch failed: no launch is in progress
                Launching(hook.pipeline.state_path).clear()
        self._ensure_standby(context)
        return outcome

    def _ensure_standby(self, context: Any) -> None:
        """With `airflow.standby`, a warm standby driver beside the app (onceflow.state.standby): one
        is launched, detached like the app, unless one is ready or on its way."""
        hook = self.onceflow
        if not hook.pipeline.airflow.standby or self.recovery_run:  # a recovery's next stream run adds it
            return
        standby = Standby(hook.pipeline.state_path)
        if standby.ready() is not None or standby.launched() is not None:
            return
        self.app_log = log_path = _app_log(hook.pipeline.state_path, "standby")
        proc = self._spawn(context, log_path, "--standby")
        standby.launch(proc.pid)
        self.log.info(
            "%s: launched a warm standby driver (spark-submit pid %s); its log: %s", hook.name, proc.pid, log_path
        )

    def _spawn(self, context: Any, log_path: Path, *more: str) -> subprocess.Popen:
        """spark-submit of the app (`more`: arguments after its own), in a session of its own so that
        it outlives this task, its output to `log_path`: the provider's own hook and command line, as
        SparkSubmitOperator would run them."""
        work = self.ready(context)
        self.application_args = [*(self.application_args or []), *more]
        command = self._get_hook()._build_spark_submit_command(self.application)
        with open(log_path, "ab") as out:
            return subprocess.Popen(
                command,
                cwd=work,
                env={**os.environ, **(self.env_vars or {})},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _launch(self, context: Any, lease_until: float, by: str) -> dict:
        hook = self.onceflow
        self.app_log = log_path = _app_log(hook.pipeline.state_path)  # the app records it in run.json
        since = time.time()
        proc = self._spawn(context, log_path)
        # health tells a launch in progress (`starting`) while this process lives, for LAUNCH_TIMEOUT at most
        Launching(hook.pipeline.state_path).begin(LAUNCH_TIMEOUT, by=by, pid=proc.pid, host=socket.gethostname())
        self.log.info("%s: launched the app (spark-submit pid %s); its log: %s", hook.name, proc.pid, log_path)

        def holder() -> dict | None:
            found = hook.running_job()
            if found and found.get("pid") and processes.descends_from(int(found["pid"]), proc.pid):
                return found
            if proc.poll() is not None:
                other = hook.running_job()  # it refused to start: is another copy running now?
                if other is not None:
                    return {**other, "adopted_instead": True}
                raise AirflowException(
                    f"{hook.name}: the app exited with code {proc.returncode} before it started. Its log "
                    f"({log_path}) ends:\n{_tail(log_path)}"
                )
            return None

        found = wait_for(
            holder,
            LAUNCH_TIMEOUT,
            lambda: AirflowException(
                f"{hook.name}: the app (spark-submit pid {proc.pid}) did not take the run lock within "
                f"{LAUNCH_TIMEOUT:g}s; its log ({log_path}) ends:\n{_tail(log_path)}"
            ),
            interval=0.5,
        )
        if found.get("adopted_instead"):
            self.log.info("%s: another copy took the run lock first (pid %s): adopting it", hook.name, found["pid"])
            return self._outcome(True, None, found, lease_until)
        self.log.info("%s: the app runs (pid %s, run %s)", hook.name, found.get("pid"), found.get("run_id"))
        return self._outcome(False, since, found, lease_until)

    def _outcome(self, adopted: bool, since: float | None, holder: dict, lease_until: float) -> dict:
        """The XCom; `log` is the app's own log as its launcher recorded it in run.json."""
        log = holder.get("log")
        if log is None:
            self.log.info("the app (pid %s) recorded no log file: it was not launched by Airflow", holder.get("pid"))
        else:
            self.log.info("the app's log: %s", log)
        return {
            "adopted": adopted,
            "since": since,
            "pid": holder.get("pid"),
            "run_id": holder.get("run_id"),
            "log": log,
            "lease_until": lease_until,
        }

    def on_kill(self) -> None:
        """The app is not this task's to stop: it runs on, wanted until its lease ends."""
        self.log.info("%s: the task was killed; the app runs on until its lease ends", self.pipeline_file)


def _app_log(state_path: Path, role: str = "") -> Path:
    """A new log file for a launched app (or its standby); older ones beyond the newest APP_LOGS are removed."""
    folder = Path(state_path) / "apps"
    folder.mkdir(parents=True, exist_ok=True)
    for old in sorted(folder.glob("*.log"))[: -(APP_LOGS - 1) or None]:
        old.unlink(missing_ok=True)
    suffix = f"-{role}" if role else ""
    return folder / (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}{suffix}.log")


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class ReleaseStreamRunOperator(BaseOperator):
    """The stream run's last task (a teardown: it runs however the run went): give up the run's
    claim on the pipeline, so the next run starts watching at once. The lease is left as the
    watcher last renewed it: the next run renews it, or the app stops within the grace."""

    template_fields: Sequence[str] = ("pipeline_file",)

    def __init__(self, *, pipeline_file: str, **kwargs: Any) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.pipeline_file = pipeline_file

    def execute(self, context: Any) -> None:
        hook = OnceflowHook(self.pipeline_file)
        with hook.control_lock():
            hook.stream_run.release(stream_run_id(context))

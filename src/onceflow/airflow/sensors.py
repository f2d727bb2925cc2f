"""The sensors: PipelineHealthSensor, a deferrable wait for a pipeline verdict (checkpoint
progress), and StreamGuardSensor, the wait before a stream window while recovery runs.

Deferred, the wait costs a worker slot nothing: PipelineHealthTrigger polls in
the triggerer. The sensor returns the trigger's event (verdict, reasons, health,
the run's batches and rows) as its XCom, so a branch downstream can route on
it; verdicts in `fail_on` fail the task instead (no retry: the facts will not
change by asking again). A run that did not start within `start_grace` makes
the sensor reschedule itself, which frees the slot for the task that starts it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue, timezone
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowRescheduleException

from onceflow.airflow.hooks import OnceflowHook
from onceflow.airflow.triggers import POLL_SECONDS, PipelineHealthTrigger, observe
from onceflow.verdicts import Verdict

# the seconds a run's first progress event may follow its commit (Spark's listener bus; a busy driver)
PROGRESS_EVENT_WAIT_SECONDS = 20


def stream_run_id(context: Any) -> str:
    """A stream DAG run as the pipeline's claim and lease name it: `<dag>/<run>`."""
    return f"{context['dag'].dag_id}/{context['run_id']}"


def _optional_float(value: Any) -> float | None:
    """Template output ('None', '', '12.5') or a number -> float | None."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "null")):
        return None
    return float(value)


class PipelineHealthSensor(BaseSensorOperator):
    """Wait until a pipeline's verdict is in `fire_on`; fail on `fail_on`.

    :param pipeline_file: the pipeline YAML
    :param fire_on: verdicts that end the wait (healthy, stalled, dead, failed, broken, stopped, ...)
    :param fail_on: verdicts (subset of fire_on) that fail the task
    :param since: epoch seconds; only a run started after it counts (templated)
    :param start_grace: seconds to wait for that run to start before rescheduling (templated)
    :param require_progress: a clean end (stopped) counts only if the run committed a batch
        or nothing was left to read
    :param window_ends_wait: reaching `wait_timeout` ends the wait successfully (verdict
        `window_end`): a stream run watches its window, then hands the app to the next run
    :param watcher: a stream run's `<dag>/<run>` (templated): every look renews its claim and the
        app's lease (onceflow.state.control.keep_watching)
    :param end_on: verdicts of `fire_on` on which the trigger ends the task itself (success, the
        event as XCom), with no resume on a worker: one task start less on the way to a recovery
    """

    template_fields: Sequence[str] = ("pipeline_file", "since", "start_grace", "wait_timeout", "watcher")
    ui_color = "#e8f4ea"

    def __init__(
        self,
        *,
        pipeline_file: str,
        fire_on: Sequence[str],
        fail_on: Sequence[str] = (),
        since: Any = None,
        start_grace: Any = None,
        wait_timeout: Any = None,
        require_progress: bool = False,
        window_ends_wait: bool = False,
        watcher: str | None = None,
        end_on: Sequence[str] = (),
        poll_interval: float = POLL_SECONDS,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", poll_interval)
        super().__init__(**kwargs)
        self.pipeline_file = pipeline_file
        self.fire_on = [str(v) for v in fire_on]  # Verdict members, kept as plain strings for serialization
        self.fail_on = [str(v) for v in fail_on]
        self.since = since
        self.start_grace = start_grace
        self.wait_timeout = wait_timeout
        self.require_progress = require_progress
        self.window_ends_wait = window_ends_wait
        self.watcher = watcher
        self.end_on = [str(v) for v in end_on]
        if set(self.end_on) & set(self.fail_on):
            raise ValueError(f"end_on {self.end_on} ends the task successfully: not a verdict of fail_on")
        self.poll_interval = poll_interval
        self.deferrable = deferrable

    def _trigger(self) -> PipelineHealthTrigger:
        return PipelineHealthTrigger(
            pipeline_file=self.pipeline_file,
            fire_on=self.fire_on,
            since=_optional_float(self.since),
            start_grace=_optional_float(self.start_grace),
            timeout=_optional_float(self.wait_timeout),
            poll_interval=self.poll_interval,
            watcher=self.watcher or None,
            end_on=self.end_on,
        )

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        self.defer(trigger=self._trigger(), method_name="execute_complete")

    def poke(self, context: Any) -> Any:
        """Non-deferrable mode: the same look the trigger takes, once per poke."""
        snap = observe(self.pipeline_file, _optional_float(self.since), self.watcher or None)
        if snap["verdict"] in self.fire_on:
            return PokeReturnValue(is_done=True, xcom_value=self._outcome(snap))
        return False

    def execute_complete(self, context: Any, event: dict[str, Any] | str) -> dict[str, Any]:
        if not isinstance(event, dict):  # an `end_on` task-end event resumed by a runner that does not
            # end tasks from a trigger (`dag.test()` passes its state, "success"): it carries no facts, look again
            event = observe(self.pipeline_file, _optional_float(self.since), self.watcher or None)
        return self._outcome(event)

    def _outcome(self, event: dict[str, Any]) -> dict[str, Any]:
        verdict = event.get("verdict")
        name = event.get("pipeline") or self.pipeline_file
        reasons = "; ".join(event.get("reasons") or []) or "no reasons given"
        if verdict == Verdict.ERROR:
            raise AirflowException(f"could not read pipeline {name}: {event.get('error')}")
        if verdict == Verdict.TIMEOUT and self.window_ends_wait:
            self.log.info(
                "%s: the window of %ss is over; the app runs on (verdict %s: %s) and the next run adopts it",
                name,
                self.wait_timeout,
                event.get("last_verdict"),
                reasons,
            )
            return {**event, "verdict": Verdict.WINDOW_END.value}
        if verdict == Verdict.TIMEOUT:
            raise AirflowException(
                f"{name}: no verdict in {self.fire_on} within {self.wait_timeout}s "
                f"(last verdict {event.get('last_verdict')}: {reasons})"
            )
        if verdict == Verdict.NOT_STARTED:
            when = timezone.utcnow() + timedelta(seconds=max(self.poll_interval, 5))
            self.log.info("%s: no run has started since %s yet; checking again at %s", name, self.since, when)
            raise AirflowRescheduleException(when)
        run = event.get("run") or {}
        self.log.info(
            "%s: verdict %s (%s); run %s committed %s batches, %s rows, last batch %s",
            name,
            verdict,
            reasons,
            run.get("run_id"),
            run.get("batches"),
            run.get("rows"),
            run.get("last_batch_id"),
        )
        if verdict in self.fail_on:
            raise AirflowFailException(
                f"{name}: verdict {verdict}: {reasons}. Fix: see the run's status log "
                f"and `onceflow checkpoint status --pipeline {self.pipeline_file}`."
            )
        if self.require_progress and not run.get("batches") and verdict in (Verdict.HEALTHY, Verdict.LAGGING):
            # a commit in the checkpoint makes the run healthy before Spark's listener logs its progress
            # event (the status log counts the batches): give that event the seconds it takes
            for _ in range(PROGRESS_EVENT_WAIT_SECONDS):
                time.sleep(1)
                event = observe(self.pipeline_file, _optional_float(self.since), self.watcher or None)
                run = event.get("run") or {}
                if run.get("batches"):
                    break
        if self.require_progress and not run.get("batches"):
            lag = ((event.get("health") or {}).get("lag") or {}).get("total")
            if lag:
                raise AirflowFailException(
                    f"{name}: the run ended ({verdict}) without committing a batch "
                    f"while {lag} records wait to be read ({reasons})"
                )
            self.log.info("%s: the run committed no batch because nothing was left to read (lag 0)", name)
        return event


class StreamGuardSensor(BaseSensorOperator):
    """Before a stream window: wait (rescheduling, no slot held) while recovery runs or another
    stream run holds the pipeline (Airflow may start two: docs/airflow.md); then claim it for this
    run (onceflow.state.control.StreamRun) and say whether a copy of the query already runs (it is
    watched, not started twice)."""

    template_fields: Sequence[str] = ("pipeline_file",)

    def __init__(self, *, pipeline_file: str, **kwargs: Any) -> None:
        kwargs.setdefault("mode", "reschedule")
        kwargs.setdefault("poke_interval", 30)
        super().__init__(**kwargs)
        self.pipeline_file = pipeline_file

    def poke(self, context: Any) -> PokeReturnValue | bool:
        hook = OnceflowHook(self.pipeline_file)
        recovering = hook.recovery_in_progress()
        if recovering:
            self.log.info("%s: recovery run %s is in progress; waiting", hook.name, recovering.get("run_id"))
            return False
        run = stream_run_id(context)
        with hook.control_lock():
            claimed = hook.stream_run.claim(run, hook.pipeline.airflow.lease_grace_seconds)
        if claimed is None:
            other = hook.stream_run.holder() or {}
            self.log.info(
                "%s: stream run %s is at work (since %s); this run waits for it to end",
                hook.name,
                other.get("run"),
                other.get("since"),
            )
            return False
        holder = hook.running_job()
        if holder is not None:
            self.log.info("%s: a copy already runs (pid %s); this window watches it", hook.name, holder.get("pid"))
        return PokeReturnValue(is_done=True, xcom_value={"running": holder})

"""PipelineHealthTrigger: waits in the triggerer until a pipeline reaches a verdict.

It polls `onceflow checkpoint status` (onceflow.health, no JVM) and fires once the
verdict is one of `fire_on`: healthy (commits advancing, lag under threshold),
stalled, dead, failed, broken, stopped ... A task that just submitted a run
passes `since` (epoch seconds): runs that started before it do not count, so the
verdict of last hour's run never answers for this one. If no such run starts
within `start_grace` seconds the trigger fires `not_started`; after `timeout` it
fires `timeout`; a pipeline it cannot read fires `error` with the message.
A verdict in `end_on` ends the task here, in the triggerer (success, the event as its XCom),
instead of resuming it on a worker: the stream run's watch hands a problem to the task that
triggers the recovery one task start sooner (Airflow's TaskSuccessEvent).
A stream run's watcher (`watcher`: its `<dag>/<run>`) also renews, at every look, the
run's claim and the app's lease for the pipeline's `airflow.lease_grace`
(onceflow.state.control.keep_watching): once no run watches, the app stops within that grace.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TaskSuccessEvent, TriggerEvent

from onceflow.airflow.hooks import OnceflowHook
from onceflow.verdicts import Verdict

# a run "started since" the task asked, allowing for clocks a little apart
SINCE_SLACK_SECONDS = 2.0
# a look costs a health read (files, Kafka offsets): about 35 ms of CPU in the triggerer, measured
# on 2 busy cores (docs/benchmarks.md, "Kills through the real scheduler"), so a look a second
# costs under 4 % of a core and a kill is seen within a second
POLL_SECONDS = 1.0
log = logging.getLogger(__name__)


def _started_since(hook: OnceflowHook, logged: float | None, since: float) -> bool:
    """Whether a run began at `since` or later: it logged its start, or it took the run lock (a query's
    run, not a recovery's or a backfill's), which it does first: a driver killed before it logged
    `started` has still begun, and health judges it (`dead`) instead of this look waiting for it."""
    from onceflow.health import iso_epoch
    from onceflow.state.status import LockWork

    holder = hook.run_lock.holder() or {}
    took = None if holder.get("mode") in set(LockWork) else iso_epoch(holder.get("started"))
    return any(t is not None and t >= since - SINCE_SLACK_SECONDS for t in (logged, took))


def observe(pipeline_file: str, since: float | None = None, watcher: str | None = None) -> dict:
    """One look at a pipeline: its health verdict, scoped to the run that started after `since`.
    `watcher` (a stream run's `<dag>/<run>`): the look renews that run's claim and the app's lease."""
    hook = OnceflowHook(pipeline_file)
    if watcher is not None and not hook.keep_watching(watcher):
        log.warning("%s: another stream run holds the claim; %s renews nothing", hook.name, watcher)
    health = hook.health()
    run = hook.last_run().as_dict()
    verdict = str(health.verdict)
    if since is not None and not _started_since(hook, run["started_epoch"], since):
        verdict = Verdict.WAITING.value
    return {  # a dict: it crosses the triggerer's database (its contract: onceflow.airflow.payloads.HealthEvent)
        "pipeline": hook.name,
        "verdict": verdict,
        "reasons": list(health.reasons),
        "health": health.as_json(),
        "run": run,
        "since": since,
        "time": time.time(),
    }


class PipelineHealthTrigger(BaseTrigger):
    """Fires a TriggerEvent when the pipeline's verdict is in `fire_on` (see module docstring)."""

    def __init__(
        self,
        pipeline_file: str,
        fire_on: list[str],
        since: float | None = None,
        start_grace: float | None = None,
        timeout: float | None = None,
        poll_interval: float = POLL_SECONDS,
        watcher: str | None = None,
        end_on: list[str] | None = None,
    ) -> None:
        super().__init__()
        if not fire_on:
            raise ValueError("PipelineHealthTrigger needs at least one verdict in fire_on")
        self.pipeline_file = str(pipeline_file)
        self.fire_on = sorted({str(v) for v in fire_on})
        self.since = float(since) if since is not None else None
        self.start_grace = float(start_grace) if start_grace is not None else None
        self.timeout = float(timeout) if timeout is not None else None
        self.poll_interval = float(poll_interval)
        self.watcher = watcher or None
        self.end_on = sorted({str(v) for v in end_on or ()})
        if not set(self.end_on) <= set(self.fire_on):
            raise ValueError(f"end_on {self.end_on} must be verdicts of fire_on {self.fire_on}")

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "onceflow.airflow.triggers.PipelineHealthTrigger",
            {
                "pipeline_file": self.pipeline_file,
                "fire_on": self.fire_on,
                "since": self.since,
                "start_grace": self.start_grace,
                "timeout": self.timeout,
                "poll_interval": self.poll_interval,
                "watcher": self.watcher,
                "end_on": self.end_on,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        began = time.monotonic()
        while True:
            try:
                snap = await asyncio.to_thread(observe, self.pipeline_file, self.since, self.watcher)
            except Exception as exc:  # an unreadable pipeline will not heal by polling
                yield TriggerEvent(
                    {
                        "verdict": Verdict.ERROR.value,
                        "pipeline_file": self.pipeline_file,
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                )
                return
            waited = time.monotonic() - began
            if snap["verdict"] in self.end_on:  # the task ends here: no worker resumes it
                self.log.info("%s: verdict %s (%s)", snap["pipeline"], snap["verdict"], "; ".join(snap["reasons"]))
                yield TaskSuccessEvent(xcoms={"return_value": {**snap, "waited_seconds": round(waited, 1)}})
                return
            if snap["verdict"] in self.fire_on:
                yield TriggerEvent({**snap, "waited_seconds": round(waited, 1)})
                return
            if snap["verdict"] == Verdict.WAITING and self.start_grace is not None and waited >= self.start_grace:
                yield TriggerEvent({**snap, "verdict": Verdict.NOT_STARTED.value, "waited_seconds": round(waited, 1)})
                return
            if self.timeout is not None and waited >= self.timeout:
                yield TriggerEvent(
                    {
                        **snap,
                        "verdict": Verdict.TIMEOUT.value,
                        "last_verdict": snap["verdict"],
                        "waited_seconds": round(waited, 1),
                    }
                )
                return
            self.log.info("%s: verdict %s (waiting for %s)", snap["pipeline"], snap["verdict"], ", ".join(self.fire_on))
            await asyncio.sleep(self.poll_interval)

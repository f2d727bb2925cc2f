"""One vocabulary for a pipeline's state: the verdicts of `onceflow checkpoint status`
(onceflow.health), which the CLI colours, the Airflow sensors fire on and the Airflow page
shows, plus the outcomes only the Airflow trigger adds. A StrEnum, so reports and trigger
events keep plain strings ("healthy") and compare equal to the members.

Each verdict's facts are one row of VERDICTS (its exit code, terminal style, page colour, whether a
recovery is for it, whether it alerts); EXIT_CODES, STYLES, COLORS, PROBLEMS and ALERTS derive from
it, and so do the verdict lists of the Airflow events and the page (EVENT_VERDICTS, PAGE_VERDICTS)
that the published JSON Schemas carry, so a new verdict is one member and one row."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    HEALTHY = "healthy"  # running, this run committed (or has nothing to read), lag within bounds
    STARTING = "starting"  # a launch or a new run on its way to its first batch (within start grace)
    LAGGING = "lagging"  # running, lag above max_lag, batches still commit
    STOPPED = "stopped"  # not running, and not wanted; the last run ended cleanly
    DOWN = "down"  # not running, but a stream DAG run wants it running (onceflow.state.control.Wanted)
    NOT_STARTED = "not_started"  # no checkpoint and no run recorded
    REMOTE = "remote"  # not running here, but a driver on another machine holds the pipeline's lease in the store
    RECOVERING = "recovering"  # a recovery holds the run lock or is at work (within health.recovery_grace_seconds)
    BACKFILLING = "backfilling"  # a backfill holds the run lock: the stream waits for it
    STALLED = "stalled"  # running, lag > 0, no batch committed for too long (or a recovery is stuck)
    DEAD = "dead"  # a run without a final event and no live process (or killed while it started), or no heartbeat
    FAILED = "failed"  # the last run failed
    POISONED = "poisoned"  # the last runs all failed on the same batch (onceflow.state.poison): restarts cannot help
    BROKEN = "broken"  # the checkpoint is unusable
    UNKNOWN = "unknown"  # the checkpoint or the lag cannot be read
    # outcomes the Airflow trigger adds (onceflow.airflow.triggers)
    WAITING = "waiting"  # the run the task waits for has not started yet
    ERROR = "error"  # the health could not be read at all
    TIMEOUT = "timeout"  # the trigger's own time limit passed
    WINDOW_END = "window_end"  # a stream run's watch window ran out; the app runs on, the next run adopts it


@dataclass(frozen=True)
class Facts:
    """What one verdict means to each reader."""

    exit_code: int | None  # `onceflow checkpoint status`'s; None: not a verdict of that command
    style: str | None = None  # rich style in the terminal
    color: str | None = None  # badge colour on the Airflow page
    problem: bool = False  # a recovery is for it (the stream DAG triggers `<p>_recover`)
    alert: bool = False  # an outage or a fault: non-zero exit, red on the page
    runbook: str | None = None  # what an operator reads first (docs/runbooks/…); alerts and notifications link it


GREEN, BLUE, GREY, ORANGE, RED = "#1b7f3b", "#2a6f97", "#555", "#b26b00", "#b00020"

# docs/checkpoint-status.md's verdict table, row by row
VERDICTS: dict[Verdict, Facts] = {
    Verdict.HEALTHY: Facts(0, "bold green", GREEN),
    Verdict.STARTING: Facts(0, "bold cyan", BLUE),
    Verdict.LAGGING: Facts(0, "bold yellow", ORANGE),
    Verdict.STOPPED: Facts(0, "bold cyan", GREY),
    # an outage the stream DAG's next run repairs by starting the app, no recovery needed
    Verdict.DOWN: Facts(1, "bold red", RED, alert=True, runbook="docs/runbooks/dead-query.md"),
    Verdict.NOT_STARTED: Facts(0, "bold cyan", GREY),
    Verdict.REMOTE: Facts(0, "bold cyan", BLUE),
    # work that repairs or completes the pipeline holds it; a stuck recovery turns into a problem verdict
    Verdict.RECOVERING: Facts(0, "bold cyan", BLUE, runbook="docs/runbooks/stuck-recovery.md"),
    Verdict.BACKFILLING: Facts(0, "bold cyan", BLUE),
    Verdict.STALLED: Facts(1, "bold red", RED, problem=True, alert=True, runbook="docs/runbooks/slow-batch.md"),
    Verdict.DEAD: Facts(1, "bold red", RED, problem=True, alert=True, runbook="docs/runbooks/dead-query.md"),
    Verdict.FAILED: Facts(1, "bold red", RED, problem=True, alert=True, runbook="docs/runbooks/dead-query.md"),
    Verdict.POISONED: Facts(1, "bold red", RED, problem=True, alert=True, runbook="docs/runbooks/poison-batch.md"),
    Verdict.BROKEN: Facts(2, "bold red", RED, problem=True, alert=True, runbook="docs/runbooks/corrupt-checkpoint.md"),
    Verdict.UNKNOWN: Facts(2, "bold magenta", ORANGE),
    Verdict.WAITING: Facts(None),
    Verdict.ERROR: Facts(None, color=RED),
    Verdict.TIMEOUT: Facts(None),
    Verdict.WINDOW_END: Facts(None),
}

# the problems a recovery is for (the stream DAG triggers `<p>_recover` on them)
PROBLEMS = tuple(v for v, f in VERDICTS.items() if f.problem)
# every verdict that is an outage or a fault (non-zero exit, red on the page)
ALERTS = tuple(v for v, f in VERDICTS.items() if f.alert)
# `onceflow checkpoint status` exit codes (docs/checkpoint-status.md); its verdicts are these keys
EXIT_CODES: dict[str, int] = {v: f.exit_code for v, f in VERDICTS.items() if f.exit_code is not None}
STATUS_VERDICTS = tuple(EXIT_CODES)
# how the terminal shows each (rich styles) and the Airflow page (badge colours)
STYLES: dict[str, str] = {v: f.style for v, f in VERDICTS.items() if f.style}
RUNBOOKS: dict[str, str] = {v: f.runbook for v, f in VERDICTS.items() if f.runbook}
COLORS: dict[str, str] = {v: f.color for v, f in VERDICTS.items() if f.color}

# the verdicts an Airflow health event may carry: the command's, and the trigger's own outcomes (an
# error event has a shape of its own; window_end is a stream window's watcher's)
EVENT_VERDICTS = (*STATUS_VERDICTS, Verdict.TIMEOUT, Verdict.WINDOW_END)
# the verdicts a row of the onceflow page may show: the command's, and `error` for a file it cannot read
PAGE_VERDICTS = (*STATUS_VERDICTS, Verdict.ERROR)

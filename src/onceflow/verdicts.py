"""One vocabulary for a pipeline's state: the verdicts of `onceflow checkpoint status`
(onceflow.health), which the CLI colours, the Airflow sensors fire on and the Airflow page
shows, plus the outcomes only the Airflow trigger adds. A StrEnum, so reports and trigger
events keep plain strings ("healthy") and compare equal to the members."""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    HEALTHY = "healthy"  # running, this run committed (or has nothing to read), lag within bounds
    STARTING = "starting"  # running, this run has not committed its first batch yet (within start grace)
    LAGGING = "lagging"  # running, lag above max_lag, batches still commit
    STOPPED = "stopped"  # not running, and not wanted; the last run ended cleanly
    DOWN = "down"  # not running, but a stream DAG run wants it running (onceflow.control.Wanted)
    NOT_STARTED = "not_started"  # no checkpoint and no run recorded
    REMOTE = "remote"  # not running here, but a driver on another machine holds the pipeline's lease in the store
    STALLED = "stalled"  # running, lag > 0, no batch committed for too long
    DEAD = "dead"  # a run without a final event and no live process, or no heartbeat
    FAILED = "failed"  # the last run failed
    POISONED = "poisoned"  # the last runs all failed on the same batch (onceflow.poison): restarts cannot help
    BROKEN = "broken"  # the checkpoint is unusable
    UNKNOWN = "unknown"  # the checkpoint or the lag cannot be read
    # outcomes the Airflow trigger adds (onceflow.airflow.triggers)
    WAITING = "waiting"  # the run the task waits for has not started yet
    ERROR = "error"  # the health could not be read at all
    TIMEOUT = "timeout"  # the trigger's own time limit passed
    WINDOW_END = "window_end"  # a stream run's watch window ran out; the app runs on, the next run adopts it


# the problems a recovery is for (the stream DAG triggers `<p>_recover` on them)
PROBLEMS = (Verdict.STALLED, Verdict.DEAD, Verdict.FAILED, Verdict.POISONED, Verdict.BROKEN)
# every verdict that is an outage or a fault (non-zero exit, red on the page): DOWN is one that the
# stream DAG's next run repairs by starting the app, no recovery needed
ALERTS = (*PROBLEMS, Verdict.DOWN)

# `onceflow checkpoint status` exit codes (docs/checkpoint-status.md)
EXIT_CODES: dict[str, int] = {
    Verdict.HEALTHY: 0,
    Verdict.STARTING: 0,
    Verdict.LAGGING: 0,
    Verdict.STOPPED: 0,
    Verdict.DOWN: 1,
    Verdict.NOT_STARTED: 0,
    Verdict.REMOTE: 0,
    Verdict.STALLED: 1,
    Verdict.DEAD: 1,
    Verdict.FAILED: 1,
    Verdict.POISONED: 1,
    Verdict.BROKEN: 2,
    Verdict.UNKNOWN: 2,
}

# how the terminal shows each (rich styles) and the Airflow page (badge colours)
STYLES: dict[str, str] = {
    Verdict.HEALTHY: "bold green",
    Verdict.STARTING: "bold cyan",
    Verdict.DOWN: "bold red",
    Verdict.LAGGING: "bold yellow",
    Verdict.STOPPED: "bold cyan",
    Verdict.NOT_STARTED: "bold cyan",
    Verdict.REMOTE: "bold cyan",
    Verdict.STALLED: "bold red",
    Verdict.DEAD: "bold red",
    Verdict.FAILED: "bold red",
    Verdict.POISONED: "bold red",
    Verdict.BROKEN: "bold red",
    Verdict.UNKNOWN: "bold magenta",
}
COLORS: dict[str, str] = {
    Verdict.HEALTHY: "#1b7f3b",
    Verdict.STARTING: "#2a6f97",
    Verdict.DOWN: "#b00020",
    Verdict.LAGGING: "#b26b00",
    Verdict.STOPPED: "#555",
    Verdict.NOT_STARTED: "#555",
    Verdict.REMOTE: "#2a6f97",
    Verdict.STALLED: "#b00020",
    Verdict.DEAD: "#b00020",
    Verdict.FAILED: "#b00020",
    Verdict.POISONED: "#b00020",
    Verdict.BROKEN: "#b00020",
    Verdict.UNKNOWN: "#b26b00",
    Verdict.ERROR: "#b00020",
}

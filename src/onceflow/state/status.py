"""The run status of a pipeline's streaming job, as files other processes can read.

The job appends one JSON line per event to `<state>/pipelines/<name>/status.jsonl`:
`started`, `progress` (one per committed micro-batch), `idle` (heartbeat while no
data arrives) and `final` (finished / stopped / failed, with the error). While it
runs it holds an exclusive lock on `run.lock`, so a second copy of the same query
refuses to start, and `run.json` says which process holds it. Health checks
(`onceflow checkpoint status`) and Airflow triggers read these files; they never
talk to the job. Schema: docs/schemas/status-event.schema.json.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import IO

from onceflow.errors import AlreadyRunningError


class RunEvent(StrEnum):
    """What one line of the status log tells (its `event` field)."""

    STARTED = "started"  # the query started: run id, mode, generation
    PROGRESS = "progress"  # a micro-batch committed
    IDLE = "idle"  # a heartbeat while no data arrives
    FINAL = "final"  # the run ended: its status, and the error of a failed run


class RunStatus(StrEnum):
    """How a run ended (its final event's `status`)."""

    FINISHED = "finished"  # an available-now run processed everything and ended
    STOPPED = "stopped"  # stopped at a batch boundary (SIGTERM, its time window, idle)
    FAILED = "failed"


class IngestMode(StrEnum):
    """How the streaming job runs (`onceflow ingest --mode`, the Airflow operators' `mode`)."""

    CONTINUOUS = "continuous"  # a processing-time trigger, until stopped
    AVAILABLE_NOW = "available-now"  # what Kafka holds now, then it ends


class LockWork(StrEnum):
    """Work other than a query that holds the run lock (run.json's `mode`, beside IngestMode's):
    while it does, the stream does not run (onceflow.health says which work, not a verdict of a query)."""

    RECOVERY = "recovery"  # `onceflow recover` executing a plan (onceflow.recovery)
    BACKFILL = "backfill"  # a backfill comparing and writing a range (onceflow.spark.backfill)


# how a run's final status reads in a sentence ("the last run finished at ...")
ENDED: dict[str, str] = {
    RunStatus.FINISHED: "finished",
    RunStatus.STOPPED: "was stopped (at a batch boundary)",
    RunStatus.FAILED: "failed",
}


def ended(status: str | None) -> str:
    """'finished' / 'was stopped (at a batch boundary)' / 'failed'; anything else as 'ended <status>'."""
    return ENDED.get(status or "", f"ended {status}")


def ended_cleanly(status: str | None) -> bool:
    """The run finished or was stopped: not failed, not killed (no status at all)."""
    return status in (RunStatus.FINISHED, RunStatus.STOPPED)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Run:
    """One run of the job as its status events tell it: from its `started` event to its `final`
    event, if it has one (a killed run has none). The one reader of "the last run and how it
    ended" that health, recovery, the poisoned-batch check and the Airflow hook share."""

    events: tuple[dict, ...] = ()

    @property
    def started(self) -> dict | None:
        """The `started` event (a run begins with it; only a log's first run may lack one)."""
        first = self.events[0] if self.events else {}
        return first if first.get("event") == RunEvent.STARTED else None

    @property
    def final(self) -> dict | None:
        """The `final` event, when it is the run's last: None while it runs and after a kill."""
        last = self.events[-1] if self.events else {}
        return last if last.get("event") == RunEvent.FINAL else None

    @property
    def run_id(self) -> str | None:
        return (self.started or self.final or {}).get("run_id")

    @property
    def status(self) -> str | None:
        """How it ended (a RunStatus), None when it has no final event."""
        return (self.final or {}).get("status")

    @property
    def error(self) -> str | None:
        return (self.final or {}).get("error")

    @property
    def progress(self) -> list[dict]:
        """Its `progress` events: one per committed micro-batch."""
        return [e for e in self.events if e.get("event") == RunEvent.PROGRESS]

    @property
    def beats(self) -> list[dict]:
        """Its signs of life: `progress` and `idle` events."""
        return [e for e in self.events if e.get("event") in (RunEvent.PROGRESS, RunEvent.IDLE)]

    @property
    def failed_batch(self) -> dict | None:
        """The batch a failed run was writing (its id, generation, topic and ranges), if recorded."""
        return (self.final or {}).get("batch") if self.status == RunStatus.FAILED else None

    def final_summary(self) -> dict | None:
        """{status, error, time} of its final event, or None."""
        final = self.final
        return (
            {"status": final.get("status"), "error": final.get("error"), "time": final.get("time")} if final else None
        )

    def summary(self) -> dict:
        """{run_id, started_at, final} ({} for no run): what recovery records of the last run."""
        if not self.events:
            return {}
        return {
            "run_id": self.events[0].get("run_id"),
            "started_at": self.events[0].get("time"),
            "final": self.final_summary(),
        }

    def as_dict(self) -> dict:
        """The run in brief, as the Airflow tasks return it: run id, start, mode, batches and rows
        committed, the last batch, how it ended."""
        started, progress = self.started or {}, self.progress
        return {
            "run_id": started.get("run_id"),
            "started_epoch": started.get("epoch"),
            "mode": started.get("mode"),
            "batches": len(progress),
            "rows": sum(int(e.get("input_rows") or 0) for e in progress),
            "last_batch_id": progress[-1].get("batch_id") if progress else None,
            "final_status": self.status,
            "error": self.error,
        }


class StatusLog:
    """Append and read one pipeline's status events. `observe`: called with each appended event,
    after it is written (a run's lineage: onceflow.lineage); it must not raise."""

    def __init__(self, state_path: Path, pipeline: str, observe: Callable[[dict], None] | None = None):
        self.dir = Path(state_path)
        self.pipeline = pipeline
        self.observe = observe

    @property
    def path(self) -> Path:
        return self.dir / "status.jsonl"

    def append(self, event: str, **fields) -> dict:
        self.dir.mkdir(parents=True, exist_ok=True)
        record = {
            "event": event,
            "time": now_iso(),
            "epoch": round(time.time(), 3),
            "pipeline": self.pipeline,
            **fields,
        }
        line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
        with open(self.path, "a") as f:  # one write per line: readers never see half a record
            f.write(line)
        if self.observe is not None:
            self.observe(record)
        return record

    def events(self) -> Iterator[dict]:
        """Every readable event, oldest first; a torn last line is skipped."""
        try:
            with open(self.path) as f:
                for line in f:
                    try:
                        yield json.loads(line)
                    except ValueError:
                        continue
        except FileNotFoundError:
            return

    def runs(self) -> list[list[dict]]:
        """The events of each run, oldest run first (a run is its `started` event and what follows)."""
        runs: list[list[dict]] = []
        for event in self.events():
            if event.get("event") == RunEvent.STARTED or not runs:
                runs.append([])
            runs[-1].append(event)
        return runs

    def last_run(self) -> list[dict]:
        """The events of the newest run (from its `started` event on)."""
        runs = self.runs()
        return runs[-1] if runs else []

    def newest_run(self) -> Run:
        """The newest run (an empty Run when the log holds none)."""
        return Run(tuple(self.last_run()))

    def newest_runs(self, count: int) -> list[Run]:
        """The newest `count` runs (fewer if the log holds fewer), oldest first."""
        return [Run(tuple(events)) for events in self.runs()[-count:]]


class RunLock:
    """An exclusive lock held for the life of a streaming query (one copy per pipeline).

    An flock dies with its process, so a `kill -9`ed job never leaves a stale lock.
    """

    def __init__(self, state_path: str | Path):
        self.dir = Path(state_path)
        self._file: IO | None = None

    @property
    def info_path(self) -> Path:
        return self.dir / "run.json"

    def acquire(self, **info) -> None:
        if not self.try_acquire(PROBE_SECONDS, **info):
            holder = self.holder() or {}
            raise AlreadyRunningError(
                f"this pipeline's query is already running (pid {holder.get('pid')} on {holder.get('host')}, "
                f"started {holder.get('started')}). Two copies of one query would race on the checkpoint. "
                "Fix: stop the running one first (SIGTERM stops it at a batch boundary)."
            )

    def try_acquire(self, seconds: float, **info) -> bool:
        """Take the lock, trying for up to `seconds`; False if another process holds it."""
        self.dir.mkdir(parents=True, exist_ok=True)
        f = open(self.dir / "run.lock", "a+")  # noqa: SIM115 -- held open while the lock is: release() closes it
        if not _flock(f, seconds):
            f.close()
            return False
        self._file = f
        # atomically: a reader sees the last holder's file or this one, never half of one
        tmp = self.info_path.with_name(f".run.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": now_iso(), **info}))
        tmp.replace(self.info_path)
        return True

    def note(self, **info) -> None:
        """Add facts to run.json while holding the lock (e.g. the driver JVM's pid once it runs)."""
        tmp = self.info_path.with_name(f".run.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**(self.holder() or {}), **info}))
        tmp.replace(self.info_path)

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def is_held(self) -> bool:
        """True if some process holds the lock now (checked without taking it for long)."""
        return flock_held(self.dir / "run.lock")

    def holder(self) -> dict | None:
        try:
            return json.loads(self.info_path.read_text())
        except (OSError, ValueError):
            return None

    def state(self) -> tuple[bool, dict | None]:
        """(held, run.json of the holder or None): one look at the lock."""
        held = self.is_held()
        return held, self.holder() if held else None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def flock_held(path: Path) -> bool:
    """True if some process holds an flock on `path` now: taken and let go at once when free."""
    if not path.exists():
        return False
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


# is_held() takes the lock for a few microseconds to see whether it is free: a query (or a recovery)
# that tries to take it in that instant retries this long instead of refusing as if a copy ran
PROBE_SECONDS = 0.5


def _flock(f: IO, seconds: float) -> bool:
    """Take an exclusive flock on `f`, trying for up to `seconds`; False if another process holds it."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

"""Who may start a pipeline's query, and who wants it running: three small files and one lock.

A continuous pipeline under Airflow has one long-lived app; the stream DAG's runs adopt it in turn
and a recovery restarts it. Three facts decide who may do what, each in a file of the pipeline's
state directory, and each expiring with its holder so that a crash never leaves one behind for long:

- `recovering.json`: a recovery works on the checkpoint and tables. Only the app that recovery
  starts may run meanwhile. Renewed by each step of the recovery; it expires
  RECOVERY_LEASE_SECONDS after the last renewal (a recovery whose Airflow stopped).
- `wanted.json`: the stream is wanted running until `until` (a stream DAG run's watcher renews it
  for the pipeline's `airflow.lease_grace` at every look, so once runs stop it ends within that).
  An app started with the lease stops itself at a batch boundary once nobody renews it; a
  pipeline that is wanted and has no app running is `down`.
- `stream_run.json`: the one `<p>_stream` DAG run at work (its id): a second run that Airflow starts
  beside it (a manual run and a scheduled one, docs/airflow.md) waits until it is released or
  lapses. Claimed by the run's first task, renewed with the lease by its watcher, released by its
  last task.
- `launching.json`: a stream run launched the app, which has not taken its run lock yet (a JVM
  start: seconds). Written by the launcher (onceflow.airflow.stream), removed once the app holds
  the lock or the launch failed; it expires at the launcher's own bound (LAUNCH_TIMEOUT there), and
  health ignores it once the launched process is gone, so a launch that never comes up is `down`.
- `control.lock`: an flock under which the decisions are taken (a recovery begins, a stream run
  launches or adopts, a new app checks that no recovery works), so no two of them interleave.
  The app checks while it holds the run lock: a recovery that begins after that check finds the
  app running and stops it; one that began before is seen by the check.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from onceflow.errors import RecoveryInProgressError

RECOVERY_MARKER = "recovering.json"
WANTED = "wanted.json"
STREAM_RUN = "stream_run.json"
LAUNCHING = "launching.json"
CONTROL_LOCK = "control.lock"
# a recovery renews its marker at every step; its longest step (stopping the old app, waiting for
# the new app's first batch) takes minutes, so half an hour without renewal means it is gone
RECOVERY_LEASE_SECONDS = 1800.0


@contextmanager
def control_lock(state_path: str | Path, timeout: float = 60.0) -> Iterator[None]:
    """Hold the pipeline's control lock (blocking up to `timeout` seconds): the decisions above
    are taken under it. An flock: it dies with its process."""
    folder = Path(state_path)
    folder.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    with open(folder / CONTROL_LOCK, "a+") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"{folder / CONTROL_LOCK} was held for {timeout:g}s") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Lease:
    """A fact that holds until `until` (epoch seconds): what is in one of the files above."""

    until: float
    info: dict

    def valid(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) < self.until

    def as_dict(self) -> dict:
        return {**self.info, "until": self.until}


def _read(path: Path) -> Lease | None:
    try:
        data = json.loads(path.read_text())
        return Lease(float(data["until"]), {k: v for k, v in data.items() if k != "until"})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: Path, until: float, info: dict) -> Lease:
    """Atomically (a reader sees the old file or the new one, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({**info, "until": until}))
    tmp.replace(path)
    return Lease(until, info)


class _LeaseFile:
    """One of the lease files of a pipeline's state directory."""

    NAME = ""

    def __init__(self, state_path: str | Path):
        self.path = Path(state_path) / self.NAME

    def current(self, now: float | None = None) -> Lease | None:
        """The lease while it holds; None when there is none or it ran out."""
        lease = _read(self.path)
        return lease if lease is not None and lease.valid(now) else None


class RecoveryMarker(_LeaseFile):
    """`recovering.json`: a recovery run works on this pipeline (see the module doc)."""

    NAME = RECOVERY_MARKER

    def begin(self, run_id: str, now: float | None = None, **info) -> Lease:
        """Mark recovery `run_id` as working (call under control_lock); refused while another works."""
        now = time.time() if now is None else now
        other = self.current(now)
        if other is not None and other.info.get("run_id") != run_id:
            raise RecoveryInProgressError(
                f"recovery run {other.info.get('run_id')} is already in progress (since "
                f"{other.info.get('since')}, until {_when(other.until)} unless renewed); wait for it to finish"
            )
        since = (other.info.get("since") if other else None) or _when(now)
        return _write(self.path, now + RECOVERY_LEASE_SECONDS, {"run_id": run_id, "since": since, **info})

    def renew(self, run_id: str) -> Lease:
        """The recovery is still at work: extend its marker (a step of the recovery calls this)."""
        return self.begin(run_id)

    def clear(self, run_id: str | None = None) -> None:
        """Remove the marker (only `run_id`'s, when given: a late step must not clear another's)."""
        lease = _read(self.path)
        if lease is not None and run_id is not None and lease.info.get("run_id") != run_id:
            return
        self.path.unlink(missing_ok=True)


class Wanted(_LeaseFile):
    """`wanted.json`: the stream is wanted running until a time (see the module doc)."""

    NAME = WANTED

    def want(self, seconds: float, by: str, now: float | None = None, **info) -> Lease:
        """Want the stream running for `seconds` more (never shortens a longer lease)."""
        now = time.time() if now is None else now
        until = now + seconds
        old = _read(self.path)
        if old is not None and old.until > until:
            until = old.until
        return _write(self.path, until, {"by": by, "renewed": _when(now), **info})

    def clear(self) -> None:
        """Nobody wants it any more: a lease-holding app stops at its next look."""
        self.path.unlink(missing_ok=True)


class StreamRun(_LeaseFile):
    """`stream_run.json`: the stream DAG run at work on the pipeline (see the module doc)."""

    NAME = STREAM_RUN

    def claim(self, run: str, seconds: float, now: float | None = None) -> Lease | None:
        """Claim (or renew) the pipeline for stream run `run` for `seconds` (call under control_lock);
        None, and nothing written, while another run's claim holds."""
        now = time.time() if now is None else now
        other = self.current(now)
        if other is not None and other.info.get("run") != run:
            return None
        since = (other.info.get("since") if other else None) or _when(now)
        return _write(self.path, now + seconds, {"run": run, "since": since})

    def holder(self) -> dict | None:
        """The claim of the run at work (its `run`, `since`, `until`), or None."""
        lease = self.current()
        return lease.as_dict() if lease else None

    def release(self, run: str) -> None:
        """`run` is done: the next run may claim at once (another run's claim is left alone)."""
        lease = _read(self.path)
        if lease is not None and lease.info.get("run") == run:
            self.path.unlink(missing_ok=True)


def keep_watching(state_path: str | Path, run: str, seconds: float) -> Lease | None:
    """A stream run's watcher looked again: renew its claim and the lease (`wanted.json`) for
    `seconds`. None, renewing nothing, when another run holds the claim (ours lapsed meanwhile)."""
    with control_lock(state_path):
        if StreamRun(state_path).claim(run, seconds) is None:
            return None
        return Wanted(state_path).want(seconds, by=run)


class Launching(_LeaseFile):
    """`launching.json`: a launch in progress (see the module doc): `starting`, not `down`."""

    NAME = LAUNCHING

    def begin(self, seconds: float, by: str, now: float | None = None, **info) -> Lease:
        """A launch by `by` that must take the run lock within `seconds` (info: the launched pid, host)."""
        now = time.time() if now is None else now
        return _write(self.path, now + seconds, {"by": by, "since": now, **info})

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def require_no_recovery(state_path: str | Path, allowed_run: str | None = None) -> None:
    """Refuse to start a query while a recovery works, unless it is that recovery's own
    (RecoveryInProgressError). The caller holds the run lock, so a recovery that begins after
    this check finds it running and stops it."""
    recovery = RecoveryMarker(state_path)
    with control_lock(state_path):
        marker = recovery.current()
    if marker is not None and marker.info.get("run_id") != allowed_run:
        raise RecoveryInProgressError(
            f"recovery run {marker.info.get('run_id')} is in progress (since {marker.info.get('since')}); "
            "it starts the query itself when it is done. Fix: wait for it, or if that recovery is gone, "
            f"remove {recovery.path} (it expires by itself at {_when(marker.until)})"
        )


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))

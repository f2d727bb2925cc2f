"""A warm standby driver: a second app, its JVM up and its session built, that takes over the
pipeline's query the moment the running one dies (issue 48).

A killed driver's outage is mostly its successor's cold start: a JVM, a Spark session, the first
batch (docs/benchmarks.md, "kills through the real scheduler"). A standby pays the first two ahead
of time, then waits on the run lock (onceflow.state.status.RunLock, an flock that dies with its
holder): when the holder dies, the standby takes the lock within STANDBY_POLL_SECONDS and starts
the query from the last committed offsets, exactly as a restart would.

`standby-launch.json` (written by its launcher, onceflow.airflow.stream) says one is on its way, so
no second is launched while the first builds its session.
`standby.lock` (an flock the standby holds while it waits, so there is at most one) and
`standby.json` beside it (pid, host, the driver JVM's pid, since) say that one is ready. Health
reads a pipeline whose run died while a live standby waits as `starting`, not `dead`: the watcher
must not start a recovery that would stop the standby as it takes over.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import IO

from onceflow.state.status import flock_held

STANDBY_LOCK = "standby.lock"
STANDBY_INFO = "standby.json"
STANDBY_LAUNCH = "standby-launch.json"
# a launched standby holds its place once its session is up: a JVM start, a minute on a busy machine
STANDBY_LAUNCH_SECONDS = 180.0
STANDBY_POLL_SECONDS = 0.25  # how often a waiting standby tries the run lock


class Standby:
    """The standby's side (hold while waiting, release once it runs the query) and everyone
    else's (`ready()`: the live standby's facts, or None)."""

    def __init__(self, state_path: str | Path):
        self.dir = Path(state_path)
        self._file: IO | None = None

    @property
    def info_path(self) -> Path:
        return self.dir / STANDBY_INFO

    def hold(self, **info) -> bool:
        """Become the pipeline's standby; False when another live standby already is."""
        self.dir.mkdir(parents=True, exist_ok=True)
        f = open(self.dir / STANDBY_LOCK, "a+")  # noqa: SIM115 -- held open while the lock is: release() closes it
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            return False
        self._file = f
        tmp = self.info_path.with_name(f".{STANDBY_INFO}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), **info}))
        tmp.replace(self.info_path)
        return True

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def ready(self) -> dict | None:
        """standby.json while a standby holds its lock and, on this host, its processes live."""
        if not flock_held(self.dir / STANDBY_LOCK):
            return None
        try:
            info = json.loads(self.info_path.read_text())
        except (OSError, ValueError):
            return None
        if info.get("host") == socket.gethostname():
            pids = [info.get("pid"), info.get("jvm_pid")]
            if not all(isinstance(p, int) and _alive(p) for p in pids):
                return None  # its JVM is gone: it cannot take over
        return info

    def launch(self, pid: int) -> None:
        """A standby was launched (its spark-submit pid): it is on its way."""
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".{STANDBY_LAUNCH}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "epoch": time.time()}))
        tmp.replace(self.dir / STANDBY_LAUNCH)

    def launched(self) -> dict | None:
        """The launch of a standby still on its way: its process lives and it is younger than
        STANDBY_LAUNCH_SECONDS (on another host: by its age alone)."""
        try:
            info = json.loads((self.dir / STANDBY_LAUNCH).read_text())
        except (OSError, ValueError):
            return None
        if time.time() - float(info.get("epoch") or 0) > STANDBY_LAUNCH_SECONDS:
            return None
        pid = info.get("pid")
        if info.get("host") == socket.gethostname() and not (isinstance(pid, int) and _alive(pid)):
            return None
        return info


def _alive(pid: int) -> bool:
    """The process exists (os.kill's probe: the state package sits below onceflow.processes)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True

"""Stopping a process, in one place: ask it to stop (SIGTERM, or the signal it stops cleanly on),
wait, then SIGKILL, through psutil. The broker, the Airflow hook (the running job), `make airflow`
and the test and benchmark kit (devkit) all stop their processes here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

import psutil  # no inline types, and types-psutil is not in the lock (pyproject: ignore_missing_imports)

from onceflow.polling import wait_until


@dataclass(frozen=True)
class Stopped:
    """How a stop went."""

    running: bool  # there was a process to stop
    killed: bool = False  # it needed SIGKILL
    gone: bool = True  # it is stopped now (False: still there `after_kill` seconds after SIGKILL)
    exit_code: int | None = None  # its exit status, when it is a child started with subprocess


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a child that exited but was not reaped yet)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it exists
        return True


def descends_from(pid: int, ancestor: int) -> bool:
    """True if `pid` is `ancestor` or one of its descendants."""
    if pid == ancestor:
        return bool(pid) and alive(pid)
    try:
        return any(parent.pid == ancestor for parent in psutil.Process(pid).parents())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def stop(
    target: int | subprocess.Popen,
    grace: float,
    first: int = signal.SIGTERM,
    group: bool = False,
    first_to_group: bool | None = None,
    done: Callable[[], bool] | None = None,
    after_kill: float = 30.0,
    on_kill: Callable[[], None] | None = None,
) -> Stopped:
    """Stop `target` (a pid, or a child started with subprocess): send `first`, wait up to `grace`
    seconds until `done()` holds (default: the process has exited), then call `on_kill`, SIGKILL it
    and wait up to `after_kill` seconds more.

    `group`: the target leads a process group of its own (started with start_new_session): SIGKILL
    goes to the whole group, and members that outlive the leader are killed too. `first` goes to
    the group as well unless `first_to_group` is False (a driver that stops its own JVM cleanly)."""
    popen: subprocess.Popen | None = None
    if isinstance(target, subprocess.Popen):
        popen, pid = target, target.pid
    else:
        pid = target

    def exited() -> bool:
        if popen is not None:
            return popen.poll() is not None
        with contextlib.suppress(ChildProcessError):  # our own child: collect it, so it is no zombie
            os.waitpid(pid, os.WNOHANG)
        return not alive(pid)

    finished = done or exited
    if finished():
        return Stopped(running=False, exit_code=popen.returncode if popen else None)
    to_group = group if first_to_group is None else first_to_group
    _send(pid, first, to_group)
    killed = False
    if not wait_until(finished, grace, interval=0.1):
        if on_kill is not None:
            on_kill()
        _send(pid, signal.SIGKILL, group)
        killed = True
    gone = bool(wait_until(finished, after_kill if killed else 0, interval=0.1))
    if group:
        _send(pid, signal.SIGKILL, True)  # members that outlived their leader
    if popen is not None and gone:
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=after_kill)
    return Stopped(running=True, killed=killed, gone=gone, exit_code=popen.returncode if popen else None)


def _send(pid: int, sig: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)

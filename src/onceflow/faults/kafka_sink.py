"""Crash injection for the exactly-once proofs: a hard kill at an exact point of a batch.

A crash "after some tasks of a batch committed, before the others did and before
Spark's own commit" cannot be timed from outside, and `os._exit` in a Python
worker only kills that worker (Spark would retry the task). So the worker that
reaches the fault point kills the whole driver process group with SIGKILL: the
driver JVM, its Python driver and every worker die at once, as in a power loss.
The process group is named explicitly by the test (never guessed):

    ONCEFLOW_FAULT_KAFKA_SINK=crash_after_tasks:2@batch:3   # tasks >= 2 of batch 3 crash before committing
    ONCEFLOW_FAULT_KAFKA_SINK=crash_after_write@batch:5     # batch 5 fully written, Spark not committed
    ONCEFLOW_FAULT_KILL_PGID=<pgid> | self                    # required with any fault

`self` means the driver's own process group, and is accepted only when the
driver leads that group (started with `start_new_session=True` or `setsid`),
so a mistake can never kill the shell or test runner that started it.

Unset (the normal case) nothing here does anything.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import NoReturn

from onceflow import polling
from onceflow.errors import FaultSpecError

ENV_FAULT = "ONCEFLOW_FAULT_KAFKA_SINK"
ENV_KILL_PGID = "ONCEFLOW_FAULT_KILL_PGID"


class FaultPoint(StrEnum):
    """Where in a batch the Kafka sink's fault strikes (the spec's first word)."""

    AFTER_TASKS = "crash_after_tasks"  # tasks >= K crash before committing their transaction
    AFTER_WRITE = "crash_after_write"  # the batch fully written, Spark's commit not yet made


_SPEC = re.compile(r"^(?P<point>crash_after_tasks?|crash_after_write)(?::(?P<k>\d+))?@batch:(?P<batch>\d+)$")


@dataclass(frozen=True)
class Fault:
    point: FaultPoint
    batch_id: int
    tasks: int = 0  # FaultPoint.AFTER_TASKS: task partitions below this number commit first
    pgid: int = 0  # the process group to kill, resolved on the driver

    def crashes_task(self, batch_id: int, task: int) -> bool:
        return self.point == FaultPoint.AFTER_TASKS and batch_id == self.batch_id and task >= self.tasks

    def crashes_after_write(self, batch_id: int) -> bool:
        return self.point == FaultPoint.AFTER_WRITE and batch_id == self.batch_id


def parse(text: str, pgid: int = 0) -> Fault:
    match = _SPEC.match(text.strip())
    if not match:
        raise FaultSpecError(
            f"{ENV_FAULT}={text!r} is not a fault. Fix: write crash_after_tasks:K@batch:N or crash_after_write@batch:N."
        )
    point = FaultPoint.AFTER_WRITE if match["point"] == FaultPoint.AFTER_WRITE else FaultPoint.AFTER_TASKS
    if point == FaultPoint.AFTER_TASKS and match["k"] is None:
        raise FaultSpecError(f"{ENV_FAULT}={text!r}: crash_after_tasks needs K. Fix: crash_after_tasks:K@batch:N.")
    return Fault(point, int(match["batch"]), int(match["k"] or 0), pgid)


def _pgid() -> int:
    raw = os.environ.get(ENV_KILL_PGID, "").strip()
    if raw == "self":
        if os.getpgrp() != os.getpid():
            raise FaultSpecError(
                f"{ENV_KILL_PGID}=self, but this driver (pid {os.getpid()}) does not lead its "
                f"process group ({os.getpgrp()}): killing it would kill its parent too. Fix: "
                "start the driver with setsid / start_new_session=True."
            )
        return os.getpid()
    if not raw.isdigit() or int(raw) <= 1:
        raise FaultSpecError(
            f"{ENV_FAULT} is set but {ENV_KILL_PGID}={raw!r} does not name a process group. "
            f"Fix: set {ENV_KILL_PGID}=self in a driver started with setsid, or to its pgid."
        )
    return int(raw)


def from_env() -> Fault | None:
    """The armed fault of this driver, or None; malformed settings fail here, early."""
    text = os.environ.get(ENV_FAULT, "").strip()
    return parse(text, _pgid()) if text else None


def kill_driver(fault: Fault, reason: str) -> NoReturn:
    """SIGKILL the driver's process group (this process included)."""
    print(f"onceflow fault injection: {reason}; killing process group {fault.pgid}", flush=True)
    os.killpg(fault.pgid, signal.SIGKILL)
    time.sleep(30)  # SIGKILL is asynchronous; never return into the commit path
    os._exit(137)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 180) -> None:
    """Poll `condition` until true; a fault that cannot be placed fails loudly, never silently."""
    polling.wait_for(
        condition, timeout, lambda: FaultSpecError(f"fault injection: gave up waiting {timeout:.0f}s for {what}")
    )

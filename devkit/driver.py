"""A Spark driver (the Python process and its JVM) as a process group of its own, logging to a file:
`onceflow ingest` for the tests that kill -9 and restart it and the benchmarks that time it, or any
other driver command. Started, awaited with a bound, stopped at a batch boundary with SIGTERM
(onceflow.processes), or killed whole with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Self

from onceflow import processes
from onceflow.polling import wait_for
from onceflow.state.status import RunEvent, StatusLog

ONCEFLOW = str(Path(sys.executable).with_name("onceflow"))
# The drivers tests start as processes live for a batch or a few (a kill, a crash, a window): with
# the C1 compiler alone they start sooner on 2 cores (docs/testing.md, "Where the time goes"). The
# session's long-lived in-process driver (the `spark` fixture) keeps the JVM's default, where C2 pays.
# C1 alone reserves 48 MB for compiled code, not 240 MB: a stream that runs for minutes (the cluster
# failover, the CDC kills) filled it ("Out of space in CodeCache"), so the tiered size is kept.
SHORT_LIVED_DRIVER = {"ONCEFLOW_DRIVER_JAVA_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"}


class DriverProcess:
    """`cmd` in a process group of its own, its output in `<log_dir>/<name>-<n>.log` (the first free
    n: several drivers may share a folder)."""

    def __init__(self, cmd: list[str], log_dir: Path, name: str, env: dict[str, str] | None = None):
        self.cmd = cmd
        self.log_dir = log_dir
        self.name = name
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.runs = 0

    def start(self, env: dict[str, str] | None = None) -> Self:
        """Start a run; `env`: more variables for this run only."""
        self.runs += 1
        n = 1
        while (self.log_dir / f"{self.name}-{n}.log").exists():
            n += 1
        self.log = self.log_dir / f"{self.name}-{n}.log"
        with open(self.log, "wb") as out:  # the child writes through its own copy of the descriptor
            self.proc = subprocess.Popen(
                self.cmd,
                env={**self.env, **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    @property
    def process(self) -> subprocess.Popen:
        """The process of the last start()."""
        assert self.proc is not None, "not started"
        return self.proc

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def wait_until(self, ready: Callable[[], bool], what: str, timeout: float = 600) -> None:
        """Poll `ready` until it holds; fail with the log's tail if the process exits first or
        `timeout` seconds pass (a fresh driver's first batch takes 10-30 s)."""

        def check() -> bool:
            if ready():
                return True
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.process.returncode} before {what}:\n{self.tail()}")
            return False

        wait_for(
            check, timeout, lambda: AssertionError(f"waited {timeout:.0f}s for {what} from {self.name}:\n{self.tail()}")
        )

    def wait_exit(self, timeout: float = 600) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"{self.name} did not exit within {timeout}s:\n{self.tail()}") from None

    def kill9(self) -> None:
        """kill -9 the driver and its JVM: no shutdown hook, no final status."""
        if self.proc is not None:
            processes.stop(self.proc, grace=30, first=signal.SIGKILL, group=True)

    def terminate(self, timeout: float = 120) -> int:
        """SIGTERM to the driver (not its JVM): it stops at a batch boundary and exits; killed whole,
        and the call fails, if it does not within `timeout` seconds."""
        stopped = processes.stop(self.process, grace=timeout, group=True, first_to_group=False)
        if stopped.killed:
            raise AssertionError(f"{self.name} did not exit within {timeout}s:\n{self.tail()}")
        return self.process.returncode


class IngestProcess(DriverProcess):
    """`onceflow ingest` (continuous by default) as a DriverProcess, awaited on its status log."""

    def __init__(
        self,
        pipeline,
        pipeline_file: Path,
        log_dir: Path,
        mode: str = "continuous",
        extra_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        driver: dict[str, str] = SHORT_LIVED_DRIVER,
    ):
        super().__init__(
            [ONCEFLOW, "ingest", "--pipeline", str(pipeline_file), "--mode", mode, *extra_args],
            log_dir,
            "ingest",
            env={"ONCEFLOW_SHUFFLE_PARTITIONS": "2", **driver, **(env or {})},
        )
        self.pipeline = pipeline
        self.status = StatusLog(pipeline.state_path, pipeline.name)

    def start(self, env: dict[str, str] | None = None, fault: str | None = None) -> Self:
        """Start a run; `fault`: ONCEFLOW_FAULT of this run only; `env`: more variables of this run
        only (e.g. the Kafka sink's ONCEFLOW_FAULT_KAFKA_SINK)."""
        return super().start({**(env or {}), **({"ONCEFLOW_FAULT": fault} if fault else {})})

    def progress_count(self) -> int:
        return sum(1 for e in self.status.events() if e.get("event") == RunEvent.PROGRESS)

    def wait_progress(self, more_than: int, timeout: float = 600) -> None:
        """Until more than `more_than` progress events exist (a batch committed)."""
        self.wait_until(lambda: self.progress_count() > more_than, "a committed batch", timeout)

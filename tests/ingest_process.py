"""The streaming job as a real OS process that tests can kill -9 and restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from onceflow.status import StatusLog

ONCEFLOW = str(Path(sys.executable).with_name("onceflow"))
# The drivers tests start as processes live for a batch or a few (a kill, a crash, a window): with
# the C1 compiler alone they start sooner on 2 cores (benchmarks/driver_startup.py). The session's
# long-lived in-process driver (the `spark` fixture) keeps the JVM's default, where C2 pays off:
# test_ingest took 300 s with C1 against 253 s without (docs/testing.md).
SHORT_LIVED_DRIVER = {"ONCEFLOW_DRIVER_JAVA_OPTIONS": "-XX:TieredStopAtLevel=1"}


class IngestProcess:
    """`onceflow ingest` in its own process group (Python driver + its Spark JVM)."""

    def __init__(
        self,
        pipeline,
        pipeline_file: Path,
        log_dir: Path,
        mode: str = "continuous",
        extra_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ):
        self.pipeline = pipeline
        self.cmd = [ONCEFLOW, "ingest", "--pipeline", str(pipeline_file), "--mode", mode, *extra_args]
        self.log_dir = log_dir
        self.env = {**os.environ, "ONCEFLOW_SHUFFLE_PARTITIONS": "2", **SHORT_LIVED_DRIVER, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.runs = 0
        self.status = StatusLog(pipeline.state_path, pipeline.name)

    def progress_count(self) -> int:
        return sum(1 for e in self.status.events() if e.get("event") == "progress")

    def start(self, fault: str | None = None, env: dict[str, str] | None = None) -> IngestProcess:
        """Start a run; `fault`: ONCEFLOW_FAULT of this run only; `env`: more variables of this run
        only (e.g. the Kafka sink's ONCEFLOW_FAULT_KAFKA_SINK)."""
        env = {**self.env, **(env or {})}
        if fault:
            env["ONCEFLOW_FAULT"] = fault
        self.runs += 1
        # the first free name: several IngestProcess of one test share its log folder
        n = 1
        while (self.log_dir / f"ingest-{n}.log").exists():
            n += 1
        self.log = self.log_dir / f"ingest-{n}.log"
        with open(self.log, "wb") as out:  # the child writes through its own copy of the descriptor
            self.proc = subprocess.Popen(
                self.cmd,
                env=env,
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

    def wait_progress(self, more_than: int, timeout: float = 600) -> None:
        """Until more than `more_than` progress events exist (a batch committed)."""
        deadline = time.monotonic() + timeout
        while self.progress_count() <= more_than:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"ingest exited with {self.process.returncode} before committing a batch:\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"no committed batch within {timeout}s:\n{self.tail()}")
            time.sleep(0.2)

    def wait_exit(self, timeout: float = 600) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"ingest did not exit within {timeout}s:\n{self.tail()}") from None

    def kill9(self) -> None:
        """kill -9 the driver and its JVM: no shutdown hook, no final status."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def terminate(self, timeout: float = 120) -> int:
        """SIGTERM to the driver: it stops at a batch boundary and exits."""
        os.kill(self.process.pid, signal.SIGTERM)
        return self.wait_exit(timeout)

"""What the benchmarks here do alike: find the jars and the project, run a scratch
broker of their own, read what landed (Delta MERGE metrics, committed Kafka records),
run `onceflow ingest` as a process, and print (and keep, with --json) their figures.

A benchmark run as `python benchmarks/<name>.py` has this folder on its path, so
`from harness import emit, scratch_broker` works from any of them. Benchmarks import
nothing from tests/ (tests/unit/test_architecture.py checks): what they share lives
here and in payments.py (the shipped payments pipeline).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from onceflow.kafka.broker import LocalBroker

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("ONCEFLOW_JARS", str(ROOT / ".onceflow" / "jars"))
os.environ.setdefault("ONCEFLOW_PROJECT", str(ROOT))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@contextmanager
def scratch_broker(prefix: str, timeout: float = 120) -> Iterator[tuple[Path, LocalBroker]]:
    """A fresh temp folder (its `home` is ONCEFLOW_HOME) and a KRaft broker of its own
    in it, stopped at the end; yields (folder, broker)."""
    from onceflow.kafka.broker import LocalBroker, free_port_pair

    work = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["ONCEFLOW_HOME"] = str(work / "home")
    broker = LocalBroker(home=work, port=free_port_pair())
    broker.start(timeout=timeout)
    try:
        yield work, broker
    finally:
        broker.stop()


def child_figures(script: str, args: list[str], env: dict | None = None, timeout: float = 900) -> dict:
    """Run `script --child *args` in a fresh process (a new driver JVM) and return the figures it
    printed as its `FIGURES {json}` line; exit with its output when it failed."""
    out = subprocess.run(
        [sys.executable, script, "--child", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("FIGURES ")), None)
    if out.returncode != 0 or line is None:
        sys.exit(
            f"{Path(script).name} --child {' '.join(args)} failed (exit {out.returncode}):\n"
            f"{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
        )
    return json.loads(line.removeprefix("FIGURES "))


def emit(figures: dict, path: str | Path | None) -> None:
    """Print the figures as JSON, and write them to `path` too when given."""
    text = json.dumps(figures, indent=2)
    print(text)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text + "\n")


def add_conf_option(ap: argparse.ArgumentParser) -> None:
    """`--conf KEY=VALUE` (repeatable): extra Spark settings, to see what one changes."""
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra Spark setting for the session (repeatable), to see what it changes",
    )


def conf_settings(ap: argparse.ArgumentParser, values: list[str]) -> dict[str, str]:
    """The `--conf` values as a dict; a value without `=` stops the command with the fix."""
    settings = {}
    for setting in values:
        key, sep, value = setting.partition("=")
        if not sep:
            ap.error(f"--conf takes KEY=VALUE, not {setting!r}")
        settings[key.strip()] = value.strip()
    return settings


def run_exactly_once(spark, pipeline) -> tuple[float, int]:
    """Seconds and batches of one available-now run of the exactly-once job (batches as its
    listener counts them: one per query progress event; transaction markers take offsets
    too: 1,000,000 records at 1,000,000 per trigger make a second, small batch)."""
    from onceflow.spark.ingest import run_ingest

    started = time.monotonic()
    result = run_ingest(pipeline, mode="available-now", spark=spark)
    assert result.status == "finished", result
    return time.monotonic() - started, result.batches


def merge_metrics(table: str) -> list[dict]:
    """Delta's operation metrics of each MERGE into `table`, oldest first (values as Delta
    wrote them: strings of numbers)."""
    from deltalake import DeltaTable

    history = sorted(DeltaTable(table).history(), key=lambda c: c.get("version", -1))
    return [c.get("operationMetrics") or {} for c in history if c.get("operation") == "MERGE"]


class StreamProcess:
    """A driver (Python + its Spark JVM) in a process group of its own, logging to a file: what
    the benchmarks that run a stream as a process share. It is started, awaited with a bound
    (`wait_until`), stopped at a batch boundary by SIGTERM, or killed whole with SIGKILL."""

    def __init__(self, cmd: list[str], log_dir: Path, name: str, env: dict | None = None):
        self.cmd = cmd
        self.log_dir = log_dir
        self.name = name
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.runs = 0

    def start(self) -> Self:
        self.runs += 1
        self.log = self.log_dir / f"{self.name}-{self.runs}.log"
        with open(self.log, "wb") as out:  # the child writes through its own copy of the descriptor
            self.proc = subprocess.Popen(
                self.cmd,
                env=self.env,
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
        deadline = time.monotonic() + timeout
        while not ready():
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode} before {what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {what} from {self.name} within {timeout:.0f}s:\n{self.tail()}")
            time.sleep(0.2)

    def kill9(self) -> None:
        """kill -9 the driver and its JVM: no shutdown hook, no final status."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def terminate(self, timeout: float = 120) -> int:
        """SIGTERM to the driver: it stops at a batch boundary and exits; killed if it does not."""
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise RuntimeError(f"{self.name} did not exit within {timeout}s:\n{self.tail()}") from None


class IngestProcess(StreamProcess):
    """`onceflow ingest --mode continuous` as a StreamProcess, awaited on its status log."""

    def __init__(self, pipeline, pipeline_file: Path, log_dir: Path):
        from onceflow.status import StatusLog

        super().__init__(
            [
                str(Path(sys.executable).with_name("onceflow")),
                "ingest",
                "--pipeline",
                str(pipeline_file),
                "--mode",
                "continuous",
            ],
            log_dir,
            "ingest",
            env={"ONCEFLOW_SHUFFLE_PARTITIONS": "2"},
        )
        self.status = StatusLog(pipeline.state_path, pipeline.name)

    def progress_count(self) -> int:
        return sum(1 for e in self.status.events() if e.get("event") == "progress")

    def wait_progress(self, more_than: int, timeout: float = 600) -> None:
        """Until more than `more_than` progress events exist (a batch committed)."""
        self.wait_until(lambda: self.progress_count() > more_than, "a committed batch", timeout)

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
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("ONCEFLOW_JARS", str(ROOT / ".onceflow" / "jars"))
os.environ.setdefault("ONCEFLOW_PROJECT", str(ROOT))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@contextmanager
def scratch_broker(prefix: str, timeout: float = 120) -> Iterator[tuple[Path, object]]:
    """A fresh temp folder (its `home` is ONCEFLOW_HOME) and a KRaft broker of its own
    in it, stopped at the end; yields (folder, broker)."""
    from onceflow.kafka.broker import LocalBroker
    from onceflow.kafka.broker import free_port_pair

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
    out = subprocess.run([sys.executable, script, "--child", *args], env={**os.environ, **(env or {})},
                         capture_output=True, text=True, timeout=timeout)
    line = next((x for x in out.stdout.splitlines() if x.startswith("FIGURES ")), None)
    if out.returncode != 0 or line is None:
        sys.exit(f"{Path(script).name} --child {' '.join(args)} failed (exit {out.returncode}):\n"
                 f"{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
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
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra Spark setting for the session (repeatable), to see what it changes")


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


class IngestProcess:
    """`onceflow ingest --mode continuous` in its own process group (Python driver + its
    Spark JVM), logging to `log_dir`/ingest-<n>.log; waits on its status log's progress."""

    def __init__(self, pipeline, pipeline_file: Path, log_dir: Path):
        from onceflow.status import StatusLog

        self.cmd = [str(Path(sys.executable).with_name("onceflow")), "ingest", "--pipeline", str(pipeline_file),
                    "--mode", "continuous"]
        self.log_dir = log_dir
        self.env = {**os.environ, "ONCEFLOW_SHUFFLE_PARTITIONS": "2"}
        self.proc: subprocess.Popen | None = None
        self.runs = 0
        self.status = StatusLog(pipeline.state_path, pipeline.name)

    def progress_count(self) -> int:
        return sum(1 for e in self.status.events() if e.get("event") == "progress")

    def start(self) -> "IngestProcess":
        self.runs += 1
        self.log = self.log_dir / f"ingest-{self.runs}.log"
        self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def wait_progress(self, more_than: int, timeout: float = 600) -> None:
        """Until more than `more_than` progress events exist (a batch committed)."""
        deadline = time.monotonic() + timeout
        while self.progress_count() <= more_than:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ingest exited with {self.proc.returncode} before committing a batch:\n"
                                   f"{self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no committed batch within {timeout}s:\n{self.tail()}")
            time.sleep(0.2)

    def kill9(self) -> None:
        """kill -9 the driver and its JVM: no shutdown hook, no final status."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def terminate(self, timeout: float = 120) -> int:
        """SIGTERM to the driver: it stops at a batch boundary and exits."""
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise RuntimeError(f"ingest did not exit within {timeout}s:\n{self.tail()}") from None

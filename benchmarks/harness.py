"""What only the benchmarks do: print (and keep, with --json) their figures, run a child in a fresh
driver, take `--conf` settings, time one available-now run.

A benchmark run as `python benchmarks/<name>.py` has this folder on its path, so `from harness
import emit` works from any of them; importing harness first puts the checkout on the path and
points onceflow at its jars and project, so the kit tests and benchmarks share (devkit/: the
example pipelines, a broker of one's own, the driver as a process, Delta history) imports next.
Benchmarks import nothing from tests/ (tests/unit/test_architecture.py checks).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the checkout: devkit (and onceflow's sources) importable
    sys.path.insert(0, str(ROOT))

from devkit import use_checkout  # noqa: E402 -- once the checkout is on the path

use_checkout()


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


def add_peer_options(ap: argparse.ArgumentParser, max_offsets: int) -> None:
    """The options of a benchmark against a peer in one JVM: the batch size of both sides, the
    alternating rounds, extra Spark settings and where to write the figures."""
    ap.add_argument("--max-offsets", type=int, default=max_offsets, help="maxOffsetsPerTrigger of both sides")
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="both sides this many times, alternating which goes first; figures are medians",
    )
    add_conf_option(ap)
    ap.add_argument("--json", help="also write the figures here")


def alternate(rounds: int, side_a: Callable[[int], None], side_b: Callable[[int], None]) -> None:
    """Both sides once per round, the first round a then b, the next b then a: a round's ratio is a
    pair, and neither side always runs on the warmer machine."""
    for r in range(rounds):
        for run in (side_a, side_b) if r % 2 == 0 else (side_b, side_a):
            run(r)


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


def source_stream(spark, source, max_offsets: int):
    """A streaming read of a pipeline's source topic from its start, `max_offsets` per trigger, at
    read_committed: the input of the peers onceflow is measured against."""
    from onceflow.spark.kafka_read import kafka_options

    options = kafka_options(source.bootstrap_servers, source.topic, "earliest", maxOffsetsPerTrigger=str(max_offsets))
    return spark.readStream.format("kafka").options(**options).load()


def serve_until_sigterm(spark, query, folder: str | Path) -> None:
    """A peer's continuous stream in a child process: once its first batch is committed, touch
    `folder`/started (the parent starts producing then), run until SIGTERM, let what was
    produced land (no slow last batch left out of the figures), stop the query and the session."""
    import signal
    import threading

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while query.lastProgress is None and not stop.wait(0.2):
        pass  # poll: the first batch (the topic's first record) commits within seconds
    Path(folder, "started").touch()
    stop.wait()
    query.processAllAvailable()
    query.stop()
    spark.stop()

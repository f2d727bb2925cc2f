"""What a poll of a pipeline's health costs: `onceflow checkpoint status --json` started once per
look (what a shell loop or a monitoring agent that runs the command does) against `--watch` (one
process that looks again), in CPU seconds (user + system) per look, on one running stream.

A broker of its own, a payments stream ingesting continuously (a driver of its own), then each way
of polling `--looks` times, in one run. The command's CPU is read from the children's rusage, so
the JVM of the stream is not counted.

    python benchmarks/status_poll.py [--looks 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

from harness import emit

from devkit.driver import IngestProcess
from devkit.kafka import produce_events, scratch_broker
from devkit.pipelines import pipeline_file

ONCEFLOW = os.path.join(os.path.dirname(sys.executable), "onceflow")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(command: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) the command took, run to its end."""
    cpu, wall = _children_cpu(), time.monotonic()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return _children_cpu() - cpu, time.monotonic() - wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--looks", type=int, default=20)
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    with scratch_broker("onceflow-poll-") as (work, broker):
        file, pipeline = pipeline_file(work / "pipelines", broker.bootstrap, "poll", name="poll")
        produce_events(broker.bootstrap, "poll", 5000, partitions=2)
        (work / "logs").mkdir()
        app = IngestProcess(pipeline, file, work / "logs").start()
        try:
            app.wait_progress(0)
            base = [ONCEFLOW, "checkpoint", "status", "--pipeline", str(file), "--json"]
            per_call = [_timed(base) for _ in range(args.looks)]
            watch_cpu, watch_wall = _timed([*base, "--watch", "0.1", "--count", str(args.looks)])
            one_cpu, _ = _timed([*base, "--watch", "0.1", "--count", "1"])
        finally:
            app.terminate()
    call_cpu = sorted(c for c, _ in per_call)[len(per_call) // 2]
    figures = {
        "looks": args.looks,
        "per_call_cpu_seconds_median": round(call_cpu, 3),
        "per_call_wall_seconds_median": round(sorted(w for _, w in per_call)[len(per_call) // 2], 3),
        "watch_cpu_seconds_per_look": round(max(0.0, watch_cpu - one_cpu) / max(1, args.looks - 1), 4),
        "watch_start_cpu_seconds": round(one_cpu, 3),
        "watch_wall_seconds": round(watch_wall, 2),
        "bytecode_cached": not os.environ.get("PYTHONDONTWRITEBYTECODE"),
    }
    emit(figures, args.json)


if __name__ == "__main__":
    main()

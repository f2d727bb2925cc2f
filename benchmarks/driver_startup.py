"""A fresh driver's start-up: what every `onceflow ingest`, Airflow task and restart after a kill pays.

    .venv/bin/python benchmarks/driver_startup.py [--rounds 2] [--events 2300] [--json F]

Each measurement is a new process (so a new driver JVM) that builds the session and runs
the exactly-once job available-now over `--events` payments events in one batch, into
fresh tables: seconds to the session, to the query's start (tables, checkpoint, plan), to
the first batch's commit, and to the end (the aggregates' merge). Three variants,
alternating within each round on the same topic and broker:
- `plain`: no class-data archive (ONCEFLOW_CLASS_ARCHIVE=false);
- `archive`: the archive `onceflow setup` builds (spark/class_archive.py), as shipped;
- `archive+c1`: the archive and `-XX:TieredStopAtLevel=1` (ONCEFLOW_DRIVER_JAVA_OPTIONS),
  what the test suite's short-lived drivers use.
Needs `onceflow setup` to have built the archive (it says so otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

from harness import child_figures, emit

from devkit.kafka import produce_events, scratch_broker

VARIANTS = {
    "plain": {"ONCEFLOW_CLASS_ARCHIVE": "false"},
    "archive": {},
    "archive+c1": {"ONCEFLOW_DRIVER_JAVA_OPTIONS": "-XX:TieredStopAtLevel=1"},
}


def child(folder: str, bootstrap: str, topic: str, events: int) -> None:
    """One fresh driver: prints its figures as one JSON line."""
    started = time.time()
    from devkit.pipelines import pipeline_file
    from onceflow.spark.ingest import run_ingest
    from onceflow.spark.session import build_session
    from onceflow.state.status import RunEvent, StatusLog

    spark = build_session("onceflow-bench-startup", master="local[*]", extra={"spark.eventLog.enabled": "false"})
    marks = {"session": time.time() - started}
    # a name of its own: each run has its own state (status, generation), not only its own tables
    name = "startup_" + re.sub(r"[^a-z0-9_]", "_", Path(folder).name.lower())
    _, pipeline = pipeline_file(Path(folder), bootstrap, topic, name=name, max_offsets=events + 100)
    run_ingest(pipeline, mode="available-now", spark=spark)
    marks["end"] = time.time() - started
    # the query's start and its first commit, from the run's status log (what `checkpoint status` reads)
    run = StatusLog(pipeline.state_path, pipeline.name).last_run()
    marks["query_started"] = next(e["epoch"] for e in run if e["event"] == RunEvent.STARTED) - started
    marks["first_batch"] = next(e["epoch"] for e in run if e["event"] == RunEvent.PROGRESS) - started
    spark.stop()
    print("FIGURES " + json.dumps({k: round(v, 1) for k, v in marks.items()}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--events", type=int, default=2_300)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()

    from onceflow.spark import class_archive

    if not class_archive.usable():
        sys.exit("no usable class-data archive. Fix: run `onceflow setup` (or `make setup`) first.")
    with scratch_broker("onceflow-bench-startup-") as (work, broker):
        produce_events(broker.bootstrap, "bench", args.events)
        runs: dict[str, list[dict]] = {name: [] for name in VARIANTS}
        for r in range(args.rounds):
            order = list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))
            for name in order:
                print(f"round {r + 1}: {name} …", flush=True)
                runs[name].append(
                    child_figures(
                        __file__,
                        [str(work / f"{name}-{r}"), broker.bootstrap, "bench", str(args.events)],
                        env=VARIANTS[name],
                    )
                )
    medians = {name: {k: round(statistics.median(r[k] for r in rs), 1) for k in rs[0]} for name, rs in runs.items()}
    figures = {
        "events": args.events,
        "rounds": args.rounds,
        "cores": os.cpu_count(),
        "median_seconds": medians,
        "runs": runs,
        "end_ratio_to_plain": {n: round(m["end"] / medians["plain"]["end"], 2) for n, m in medians.items()},
    }
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        sys.exit(0)
    sys.exit(main())

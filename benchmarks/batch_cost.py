"""The fixed cost of a micro-batch: seconds and Spark jobs per batch, by step.

    .venv/bin/python benchmarks/batch_cost.py [--events 12000] [--max-offsets 1000] [--conf K=V] [--jfr F] [--json F]

Runs the exactly-once job (available-now) over `--events` events at `--max-offsets`
per trigger, after a warm-up run, and reads Spark's event log of that run: how many
Spark jobs each batch starts and the seconds they take, grouped by what started them
(Delta's snapshot state reconstruction, the MERGE, appends, auto compaction ...),
and how much of the batch the jobs themselves take; the rest is driver work
between them. Job counts do not depend on how busy the machine is, so unlike
seconds they show a change by themselves. `--jfr F` also records a Java Flight Recording of the driver
(`jfr print --events jdk.ThreadPark F` shows what it waits for; docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

from harness import add_conf_option, conf_settings, emit

from devkit.kafka import produce_events, scratch_broker


def step(description: str, call_site: str) -> str:
    """What a Spark job was for, from its job description (Delta names most of its jobs)."""
    d = description.lower()
    for needle, name in (
        ("compute snapshot", "Delta: snapshot state reconstruction"),
        ("merge", "aggregates MERGE (scan, rewrite, deletion vectors)"),
        ("optimizing", "Delta auto compaction"),
        ("filtering files", "Delta: file listing for a scan"),
        ("checkpoint", "Delta log checkpoint"),
    ):
        if needle in d:
            return name
    if call_site.startswith("save at"):
        return "append write jobs"
    return "other (parse, counts, checksums, stats)"


def read_jobs(event_logs: Path, first: int, last: int) -> list[dict]:
    """Jobs `first` ≤ id < `last` from the uncompressed Spark event log(s) under a folder
    (Spark 4 writes a folder of rolling files): step, start, end (ms)."""
    jobs: dict[int, dict] = {}
    files = sorted(p for p in event_logs.rglob("*") if p.is_file() and not p.name.startswith((".", "appstatus")))
    # lines end in \n only: not splitlines(), which also splits at a U+2028 inside a string
    for line in (line for f in files for line in f.read_text().split("\n") if line.strip()):
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerJobStart" and first <= event["Job ID"] < last:
            stages = event.get("Stage Infos") or [{}]
            jobs[event["Job ID"]] = {
                "step": step(
                    event.get("Properties", {}).get("spark.job.description") or "", stages[-1].get("Stage Name", "")
                ),
                "start": event["Submission Time"],
                "end": None,
            }
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
            jobs[event["Job ID"]]["end"] = event["Completion Time"]
    return [jobs[j] for j in sorted(jobs)]


def time_split(jobs: list[dict]) -> tuple[Counter, int]:
    """(seconds per step, ms inside any job). Each job's step gets the wall time from
    the previous job's end (or its own start) to its own end, so the driver's time
    between jobs goes to the job it was planning; overlapping jobs count once."""
    by_step: Counter = Counter()
    busy, reach = 0, None
    for job in sorted(jobs, key=lambda j: j["start"]):
        start, end = job["start"], job["end"] or job["start"]
        if reach is not None and end <= reach:
            continue
        by_step[job["step"]] += (end - (start if reach is None else reach)) / 1000
        busy += end - (start if reach is None else max(start, reach))
        reach = end
    return by_step, busy


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=12_000)
    ap.add_argument("--max-offsets", type=int, default=1_000, help="maxOffsetsPerTrigger of the measured run")
    add_conf_option(ap)
    ap.add_argument("--jfr", help="also record a Java Flight Recording of the driver to this file")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    settings = conf_settings(ap, args.conf)

    from devkit.pipelines import pipeline_file
    from onceflow.spark.ingest import run_ingest
    from onceflow.spark.session import build_session

    with scratch_broker("onceflow-bench-batch-") as (work, broker):
        print(f"producing {args.events} events (1% malformed) …", flush=True)
        produce_events(broker.bootstrap, "warm", 3_000)
        produce_events(broker.bootstrap, "bench", args.events)
        events = work / "events"
        events.mkdir()
        extra = {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.compress": "false",
        }
        extra.update(settings)
        if args.jfr:
            jfr = Path(args.jfr).resolve()
            extra["spark.driver.extraJavaOptions"] = (
                f"-XX:FlightRecorderOptions:stackdepth=256 "
                f"-XX:StartFlightRecording=filename={jfr},settings=profile,dumponexit=true"
            )
        spark = build_session("onceflow-bench-batch", master="local[*]", extra=extra)
        scheduler = spark.sparkContext._jsc.sc().dagScheduler()

        _, warm = pipeline_file(work / "warm", broker.bootstrap, "warm", max_offsets=args.max_offsets)
        run_ingest(warm, mode="available-now", spark=spark)
        _, pipeline = pipeline_file(work / "bench", broker.bootstrap, "bench", max_offsets=args.max_offsets)
        print(f"measuring: {args.max_offsets} offsets per trigger …", flush=True)
        first_job = scheduler.numTotalJobs()
        started = time.monotonic()
        result = run_ingest(pipeline, mode="available-now", spark=spark)
        seconds = time.monotonic() - started
        last_job = scheduler.numTotalJobs()
        spark.stop()

        jobs = read_jobs(events, first_job, last_job)
        batches = result.batches
        by_step = Counter(j["step"] for j in jobs)
        step_seconds, busy = time_split(jobs)
        figures = {
            "events": args.events,
            "max_offsets_per_trigger": args.max_offsets,
            "cores": os.cpu_count(),
            "conf": args.conf,
            "batches": batches,
            "seconds_per_batch": round(seconds / batches, 2),
            "spark_jobs_per_batch": round(len(jobs) / batches, 1),
            "share_of_batch_in_spark_jobs": round(busy / 1000 / seconds, 2),
            "jobs_per_batch_by_step": {name: round(n / batches, 1) for name, n in by_step.most_common()},
            "seconds_per_batch_by_step": {name: round(t / batches, 2) for name, t in step_seconds.most_common()},
        }
        if args.jfr:
            figures["jfr"] = str(jfr)
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

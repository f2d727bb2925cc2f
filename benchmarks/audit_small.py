"""The audit of a small stack: what an Airflow audit task, `onceflow audit` after a short
run and every audit proof of the test suite pay, where the fixed costs dominate.

    .venv/bin/python benchmarks/audit_small.py [--events 2100] [--audits 3] [--cold 1] [--json F]

It starts its own broker, produces `--events` payments events (transactions, 2% malformed),
ingests them available-now, then measures:
- `--audits` full audits in one warm Spark session (the first is the JVM's first): seconds
  per phase and the Spark jobs each audit ran (a job group around the audit);
- `--cold` audits each in a fresh process, as `onceflow audit` and an Airflow task run one:
  seconds to the end, imports and (on a tree whose audit needs one) the Spark session included.
Medians are over the warm audits after the first. Quote them against a run of the same
command on the other tree, back to back (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from harness import child_figures, emit

from devkit.kafka import produce_events, scratch_broker

GROUP = "onceflow-bench-audit"


def _audit(spark, pipeline, reports: Path) -> dict:
    from onceflow.audit.run import run_audit

    spark.sparkContext.setJobGroup(GROUP, "audit")
    before = len(spark.sparkContext.statusTracker().getJobIdsForGroup(GROUP))
    started = time.monotonic()
    outcome = run_audit(pipeline, report_dir=reports)
    seconds = time.monotonic() - started
    if outcome.status != "passed":
        sys.exit(f"the audit did not pass: {outcome.summary.get('reason') or outcome.summary['failed_checks']}")
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(GROUP)) - before
    return {
        "seconds": round(seconds, 2),
        "spark_jobs": jobs,
        **{k: v for k, v in outcome.summary["timings"].items() if k not in ("total", "report")},
    }


def child(folder: str, bootstrap: str, topic: str) -> None:
    """A fresh process running one audit as `onceflow audit` does (run_audit builds a Spark session
    itself if its tree's audit needs one); prints its figures as one JSON line."""
    started = time.monotonic()
    from devkit.pipelines import pipeline_file
    from onceflow.audit.run import run_audit

    _, pipeline = pipeline_file(Path(folder), bootstrap, topic, name="audit_small", max_offsets=1_000_000)
    outcome = run_audit(pipeline, report_dir=Path(folder) / "cold")
    figures = {
        "status": str(outcome.status),
        **{k: v for k, v in outcome.summary["timings"].items() if k != "report"},
        "end": round(time.monotonic() - started, 2),
    }
    print("FIGURES " + json.dumps(figures), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=2100)
    ap.add_argument("--audits", type=int, default=3)
    ap.add_argument("--cold", type=int, default=1)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()

    from devkit.pipelines import pipeline_file
    from onceflow.spark.ingest import run_ingest
    from onceflow.spark.session import build_session

    with scratch_broker("onceflow-bench-audit-small-") as (work, broker):
        produce_events(broker.bootstrap, "bench", args.events, malformed_ratio=0.02, txn_size=500)
        folder = work / "pipeline"
        _, pipeline = pipeline_file(folder, broker.bootstrap, "bench", name="audit_small", max_offsets=1_000_000)
        spark = build_session(
            "onceflow-bench-audit-small", master="local[*]", extra={"spark.eventLog.enabled": "false"}
        )
        run_ingest(pipeline, mode="available-now", spark=spark)
        warm = []
        for i in range(args.audits):
            warm.append(_audit(spark, pipeline, work / "reports"))
            print(f"warm audit {i + 1}: {warm[-1]}", flush=True)
        spark.stop()
        cold = []
        for i in range(args.cold):
            cold.append(child_figures(__file__, [str(folder), broker.bootstrap, "bench"]))
            print(f"cold audit {i + 1}: {cold[-1]}", flush=True)
    later = warm[1:] or warm
    figures = {
        "events": args.events,
        "cores": os.cpu_count(),
        "warm_median": {k: round(statistics.median(a[k] for a in later), 2) for k in later[0]},
        "warm": warm,
        "cold": cold,
    }
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
        sys.exit(0)
    sys.exit(main())

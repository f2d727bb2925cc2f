"""A warm driver's CPU per batch and per audit, with Spark's default compiled-code cache
(100 classes) against onceflow's (`spark.sql.codegen.cache.maxEntries`, spark/session.py).

    .venv/bin/python benchmarks/codegen_cache.py [--rounds 4] [--pairs 2] [--json F]

It starts its own broker. Each driver is a fresh process (`local[2]`, C1 only, as the suite's
drivers) that ingests 2,100 events available-now and audits them, then `--rounds` - 1 times
adds 300 events, ingests them and audits again in the same session: what a streaming driver
and a test worker's session do, query after query. It prints each round's JVM CPU seconds;
the medians are over the rounds after the first (the JVM's cold start). The two settings
alternate, `--pairs` times each, in one run: quote their ratio. (The audit ran on Spark until
2026-11-30; since, it starts no JVM work, and its JVM CPU here is the idle driver's.)
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

from devkit.cpu_sampler import cpu_seconds
from devkit.driver import SHORT_LIVED_DRIVER
from devkit.kafka import produce_events, scratch_broker

VARIANTS = {"spark_default_100": {"spark.sql.codegen.cache.maxEntries": "100"}, "onceflow": {}}


def child(folder: str, bootstrap: str, topic: str, variant: str, rounds: str) -> None:
    from devkit.pipelines import pipeline_file
    from onceflow.audit.run import run_audit
    from onceflow.spark.ingest import run_ingest
    from onceflow.spark.session import build_session

    spark = build_session("onceflow-bench-codegen", master="local[2]", extra=VARIANTS[variant])
    jvm = spark.sparkContext._gateway.proc.pid
    _, pipeline = pipeline_file(Path(folder), bootstrap, topic, name=f"codegen_{topic}", max_offsets=100_000)
    out = []
    for r in range(int(rounds)):
        if r:
            produce_events(bootstrap, topic, 300, seed=r + 10)
        c0, t0 = cpu_seconds(jvm), time.monotonic()
        run_ingest(pipeline, mode="available-now", spark=spark)
        c1, t1 = cpu_seconds(jvm), time.monotonic()
        outcome = run_audit(pipeline, report_dir=Path(folder) / "reports")
        if outcome.status != "passed":
            sys.exit(f"round {r + 1}: the audit did not pass")
        c2, t2 = cpu_seconds(jvm), time.monotonic()
        out.append(
            {
                "ingest_cpu": round(c1 - c0, 1),
                "ingest_s": round(t1 - t0, 1),
                "audit_cpu": round(c2 - c1, 1),
                "audit_s": round(t2 - t1, 1),
            }
        )
    spark.stop()
    print("FIGURES " + json.dumps({"rounds": out}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    with scratch_broker("onceflow-bench-codegen-") as (work, broker):
        order = [v for p in range(args.pairs) for v in (list(VARIANTS) if p % 2 == 0 else reversed(VARIANTS))]
        for i, variant in enumerate(order):
            topic = f"codegen{i}"
            produce_events(broker.bootstrap, topic, 2100, malformed_ratio=0.02, txn_size=500)
            started = time.monotonic()
            fig = child_figures(
                __file__,
                [str(work / topic), broker.bootstrap, topic, variant, str(args.rounds)],
                env=SHORT_LIVED_DRIVER,
            )
            print(f"{variant}: {fig} ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
            runs[variant].extend(fig["rounds"][1:])
    medians = {
        v: {k: statistics.median(r[k] for r in rs) for k in ("ingest_cpu", "audit_cpu", "ingest_s", "audit_s")}
        for v, rs in runs.items()
    }
    base, ours = medians["spark_default_100"], medians["onceflow"]
    figures = {
        "cores": os.cpu_count(),
        "medians_after_first_round": medians,
        "cpu_ratio_ingest": round(ours["ingest_cpu"] / base["ingest_cpu"], 2),
        "cpu_ratio_audit": round(ours["audit_cpu"] / base["audit_cpu"], 2),
        "rounds": runs,
    }
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:7])
        sys.exit(0)
    sys.exit(main())

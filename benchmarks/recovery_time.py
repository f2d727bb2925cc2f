"""Recovery time: how long a pipeline is down after it breaks, until it commits again.

Two scenarios, each repeated --runs times (median reported), against a real
broker and a continuous `onceflow ingest` in its own process, with a producer
writing new events all the time:

  kill-9              kill -9 the driver (its whole process group: Python + JVM), start
                      `onceflow ingest` again → first new committed batch (a `progress`
                      event of the new run in status.jsonl)
  deleted-checkpoint  kill -9 the driver, delete the checkpoint, run `onceflow recover`
                      (new writer generation from the sink ledgers), start `onceflow
                      ingest` → first new committed batch

Every time is wall clock from the break to the commit, so it includes process and
JVM start-up, the Spark session, query start and the first batch; "to start" is the
part from the restart until the query reported `started`. At the end the
tables are checked for duplicates and loss against a read_committed consumer.

    .venv/bin/python benchmarks/recovery_time.py [--runs 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import harness  # the project and its jars on the path; emit

from devkit.driver import DriverProcess

WAIT = 600  # seconds: bound on every wait (a JVM start on shared cores can be slow)
CATCH_UP = 3600  # seconds: bound on the final catch-up run before the exactly-once check


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Producer(threading.Thread):
    """Writes small transactional batches until stopped, so every restart has new data to commit."""

    def __init__(self, bootstrap: str, topic: str, per_batch: int, pause: float):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.per_batch, self.pause = bootstrap, topic, per_batch, pause
        self.stop = threading.Event()
        self.produced = 0
        self.error: Exception | None = None

    def run(self) -> None:
        from devkit.pipelines import PAYMENTS_SCHEMA
        from onceflow.generate.producer import produce

        seed = 0
        while not self.stop.is_set():
            try:
                produce(
                    self.bootstrap,
                    self.topic,
                    self.per_batch,
                    schema=PAYMENTS_SCHEMA,
                    partitions=2,
                    seed=seed,
                    txn_size=50,
                    abort_ratio=0.1,
                    malformed_ratio=0.02,
                    keep_records=False,
                )
                self.produced += self.per_batch
            except Exception as exc:  # reported at the end; a benchmark must not hang on it
                self.error = exc
                return
            seed += 1
            self.stop.wait(self.pause)


def start_job(pipeline_file: Path, logs: Path) -> DriverProcess:
    """One `onceflow ingest --mode continuous` process, in its own process group."""
    return DriverProcess(
        [sys.executable, "-m", "onceflow.cli", "ingest", "--pipeline", str(pipeline_file), "--mode", "continuous"],
        logs,
        f"ingest-{uuid.uuid4().hex[:8]}",
    ).start()


def first_progress(status, pid: int, since: float, timeout: float = WAIT) -> tuple[dict, dict]:
    """The `started` and first `progress` events of the run started by process `pid`, written after `since`."""
    deadline = time.monotonic() + timeout
    run_id: str | None = None
    started: dict = {}
    while time.monotonic() < deadline:
        for event in status.events():
            if event.get("epoch", 0) < since:
                continue
            if event.get("event") == "started" and event.get("pid") == pid:
                run_id, started = event["run_id"], event
            elif run_id and event.get("event") == "progress" and event.get("run_id") == run_id:
                return started, event
            elif run_id and event.get("event") == "final" and event.get("run_id") == run_id:
                raise RuntimeError(f"the ingest run {run_id} ended before committing a batch: {event}")
        time.sleep(0.2)
    raise RuntimeError(f"no committed batch from process {pid} within {timeout:.0f}s (see its log)")


def scenario(name: str, pipeline, pipeline_file: Path, logs: Path, runs: int) -> list[dict]:
    from onceflow.state.status import StatusLog

    status = StatusLog(pipeline.state_path, pipeline.name)
    results = []
    for i in range(1, runs + 1):
        job = start_job(pipeline_file, logs)
        first_progress(status, job.process.pid, time.time() - 1)  # running and committing
        time.sleep(3)
        job.kill9()
        broke = time.time()
        row = {"run": i, "load_average_1m": round(os.getloadavg()[0], 2)}
        if name == "deleted-checkpoint":
            shutil.rmtree(pipeline.checkpoint_path)
            started = time.time()
            proc = subprocess.run(
                [sys.executable, "-m", "onceflow.cli", "recover", "--pipeline", str(pipeline_file), "--json"],
                capture_output=True,
                text=True,
                timeout=WAIT,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"onceflow recover exited {proc.returncode}: {proc.stderr[-2000:]}")
            record = json.loads(proc.stdout)
            row["recover_seconds"] = round(time.time() - started, 3)
            row["generation"] = record["plan"]["generation"]
        restarted = time.time()
        job = start_job(pipeline_file, logs)
        query_started, event = first_progress(status, job.process.pid, restarted - 1)
        row["seconds"] = round(event["epoch"] - broke, 3)
        row["restart_to_query_started_seconds"] = round(query_started["epoch"] - restarted, 3)
        row["restart_to_commit_seconds"] = round(event["epoch"] - restarted, 3)
        row["batch_id"] = event["batch_id"]
        job.terminate()
        recover_note = f", recover {row['recover_seconds']}s" if "recover_seconds" in row else ""
        log(
            f"{name} run {i}: {row['seconds']:.1f}s to the first new committed batch "
            f"(batch {row['batch_id']}{recover_note})"
        )
        results.append(row)
    return results


def check_exactly_once(pipeline, bootstrap: str) -> dict:
    """Catch up (available-now), then compare the tables with a read_committed consumer."""
    from deltalake import DeltaTable

    from onceflow.kafka.consume import read_records
    from onceflow.sinks import table_paths

    try:
        proc = subprocess.run(
            [sys.executable, "-m", "onceflow.cli", "ingest", "--pipeline", pipeline.file, "--mode", "available-now"],
            capture_output=True,
            text=True,
            timeout=CATCH_UP,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"the catch-up run did not finish within {CATCH_UP}s; not checked"}
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    committed = {(p, o) for p, o, _, _ in read_records(bootstrap, pipeline.source.topic, "read_committed")}
    paths = table_paths(pipeline)
    landed = Counter(
        (r["_partition"], r["_offset"])
        for name in ("bronze", "quarantine")
        for r in DeltaTable(paths[name]).to_pyarrow_table(columns=["_partition", "_offset"]).to_pylist()
    )
    return {
        "committed_records": len(committed),
        "duplicates": sum(1 for n in landed.values() if n > 1),
        "missing": len(committed - set(landed)),
        "unexpected": len(set(landed) - committed),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per scenario (median reported); at least 3")
    parser.add_argument("--per-batch", type=int, default=50, help="events the producer writes each round")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between producer rounds")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE")
    parser.add_argument("--keep", action="store_true", help="keep the temporary state directory")
    args = parser.parse_args(argv)
    if args.runs < 3:
        parser.error("--runs must be at least 3 (the median of fewer says little)")

    home = Path(tempfile.mkdtemp(prefix="onceflow-bench-recovery-"))
    os.environ["ONCEFLOW_HOME"] = str(home)
    import yaml

    from devkit.pipelines import PAYMENTS_AGGREGATES, PAYMENTS_SCHEMA_BODY
    from onceflow import config
    from onceflow.local.broker import LocalBroker, free_port_pair

    broker = LocalBroker(home=home / "broker", port=free_port_pair())
    producer = None
    try:
        log(f"starting a broker in {home}")
        broker.start(timeout=WAIT)
        topic = f"bench-recovery-{uuid.uuid4().hex[:8]}"
        body = {
            "name": "bench_recovery",
            "source": {
                "bootstrap_servers": broker.bootstrap,
                "topic": topic,
                "starting_offsets": "earliest",
                "max_offsets_per_trigger": 2000,
            },
            "schema": PAYMENTS_SCHEMA_BODY,
            "sinks": {
                "bronze": {"path": "tables/bronze"},
                "quarantine": {"path": "tables/quarantine"},
                "aggregates": {
                    "path": "tables/aggregates",
                    "window": "1 minute",
                    "watermark": "10 minutes",
                    **PAYMENTS_AGGREGATES,
                },
            },
            "checkpoint": "checkpoints/bench_recovery",
            "trigger": {"processing_time": "1 second"},
            "spark_master": "local[2]",
        }
        pipeline_file = home / "bench_recovery.yaml"
        pipeline_file.write_text(yaml.safe_dump(body, sort_keys=False))
        pipeline = config.load(pipeline_file)
        logs = home / "logs"
        logs.mkdir()
        producer = Producer(broker.bootstrap, topic, args.per_batch, args.pause)
        producer.start()

        results = {
            name: scenario(name, pipeline, pipeline_file, logs, args.runs) for name in ("kill-9", "deleted-checkpoint")
        }
        producer.stop.set()
        producer.join(timeout=120)
        report = {
            "benchmark": "recovery_time",
            "runs": args.runs,
            "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "spark_master": "local[2]",
            "trigger": "1 second",
            "scenarios": {name: summarize(rows) for name, rows in results.items()},
            "events_produced": producer.produced,
            "producer_error": str(producer.error) if producer.error else None,
            "exactly_once_check": None,
        }
        emit(report, args.json)  # the timings are kept even if the check below fails
        log("checking the tables for duplicates and loss (catch-up run first)")
        report["exactly_once_check"] = check_exactly_once(pipeline, broker.bootstrap)
        emit(report, args.json)
        return 0
    finally:
        if producer is not None:
            producer.stop.set()
        broker.stop()
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


def summarize(rows: list[dict]) -> dict:
    out = {
        "median_seconds": statistics.median(r["seconds"] for r in rows),
        "min_seconds": min(r["seconds"] for r in rows),
        "max_seconds": max(r["seconds"] for r in rows),
        "median_restart_to_query_started_seconds": statistics.median(
            r["restart_to_query_started_seconds"] for r in rows
        ),
    }
    if "recover_seconds" in rows[0]:
        out["median_recover_seconds"] = statistics.median(r["recover_seconds"] for r in rows)
    return {**out, "runs": rows}


def emit(report: dict, path: Path | None) -> None:
    """The JSON (kept in `path` too), then a table people can read."""
    harness.emit(report, path)
    print_table(report)


def print_table(report: dict) -> None:
    print()
    print(f"{'scenario':<22}{'median s':>10}{'min s':>9}{'max s':>9}{'recover s':>11}{'to start s':>12}   runs (s)")
    for name, s in report["scenarios"].items():
        runs = ", ".join(f"{r['seconds']:.1f}" for r in s["runs"])
        rec = s.get("median_recover_seconds")
        print(
            f"{name:<22}{s['median_seconds']:>10.1f}{s['min_seconds']:>9.1f}{s['max_seconds']:>9.1f}"
            f"{(f'{rec:.1f}' if rec is not None else '—'):>11}"
            f"{s['median_restart_to_query_started_seconds']:>12.1f}   {runs}"
        )
    print(f"exactly-once check after the runs: {report['exactly_once_check']}")
    print(f"({report['cpus']} CPUs, 1-minute load average {report['load_average_1m']} at the end)")


if __name__ == "__main__":
    sys.exit(main())

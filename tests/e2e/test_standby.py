"""A warm standby driver takes over a killed driver (issue 48: kill → first commit).

A continuous `onceflow ingest` runs with a backlog to read; a second one, `--standby`, builds and
warms its session and waits on the run lock. Then the running driver's JVM is killed (kill -9 of
the pid its run.json names, as benchmarks/airflow_kills.py kills it under Airflow). The standby
must take the lock and commit the next batch with no cold start; `onceflow checkpoint status`
(pipeline_health), sampled all along, must never say `dead`, `down` or `failed` (the watcher would
start a recovery that stops the standby as it takes over); and the tables hold every committed
record exactly once (the read_committed consumer and delta-rs as the oracle).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from devkit.driver import IngestProcess
from devkit.pipelines import PAYMENTS_SCHEMA, pipeline_file
from onceflow.generate.producer import produce
from onceflow.health import pipeline_health
from onceflow.state.standby import Standby
from onceflow.state.status import RunEvent, RunLock
from tests.exactly_once import assert_exactly_once, assert_ledgers_contiguous

pytestmark = pytest.mark.e2e

PROBLEMS = {"dead", "down", "failed", "stalled", "unknown", "broken", "poisoned", "not_started", "stopped"}


def _commits(checkpoint: str) -> set[int]:
    folder = Path(checkpoint) / "commits"
    return {int(f.name) for f in folder.iterdir() if f.name.isdigit()} if folder.exists() else set()


def test_a_warm_standby_takes_over_a_killed_driver_and_no_look_says_dead(broker, topic, tmp_path):
    def events(count: int, seed: int):
        return produce(
            broker.bootstrap,
            topic,
            count,
            schema=PAYMENTS_SCHEMA,
            partitions=4,
            seed=seed,
            abort_ratio=0.05,
            malformed_ratio=0.02,
        )

    first = events(2000, 48)
    file, pipeline = pipeline_file(
        tmp_path / "pipeline", broker.bootstrap, topic, max_offsets=500, trigger={"processing_time": "500 ms"}
    )
    job = IngestProcess(pipeline, file, tmp_path).start()
    job.wait_progress(more_than=0, timeout=300)
    (tmp_path / "standby").mkdir()
    standby = IngestProcess(pipeline, file, tmp_path / "standby", extra_args=("--standby",)).start()
    standby.wait_until(lambda: Standby(pipeline.state_path).ready() is not None, "the standby to be ready", 300)
    assert job.process.poll() is None, job.tail()
    assert pipeline_health(pipeline).run.standby is not None, "health reports the ready standby"

    looks: list[tuple[float, str, str]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            report = pipeline_health(pipeline)
            looks.append((time.monotonic(), report.verdict, report.reasons[0]))
            done.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    second = events(2000, 49)  # a backlog at the kill: the standby's first batch has work to commit
    jvm = (RunLock(pipeline.state_path).holder() or {})["jvm_pid"]
    before = _commits(pipeline.checkpoint_path)
    killed = time.monotonic()
    os.kill(int(jvm), signal.SIGKILL)
    standby.wait_until(
        lambda: bool(_commits(pipeline.checkpoint_path) - before) and job.process.poll() is not None,
        "the standby's first commit",
        300,
    )
    kill_to_commit = time.monotonic() - killed
    done.set()
    sampler.join(30)

    started = [e for e in standby.status.events() if e.get("event") == RunEvent.STARTED]
    assert started[-1]["pid"] == standby.process.pid, "the query that runs now is the standby's"
    assert "took the run lock" in standby.log.read_text(errors="replace"), standby.tail()
    # judged from the kill on: before it, a 0.5 s trigger's `stalled` rule (10 triggers) is the primary's
    false = [(round(t - killed, 1), v, why) for t, v, why in looks if v in PROBLEMS and t >= killed]
    assert not false, f"verdicts that would start a recovery: {false[:5]}"
    assert any(t > killed for t, _, _ in looks), "no look after the kill"
    after = sum(1 for t, _, _ in looks if t >= killed)
    print(f"\nstandby: kill → first commit {kill_to_commit:.1f}s; {after} looks after the kill, 0 false")

    standby.wait_until(lambda: pipeline_health(pipeline).lag.total == 0, "the standby to catch up with the topic", 300)
    assert standby.terminate() == 0, standby.tail()
    assert_exactly_once(pipeline, broker.bootstrap, produced=[first, second])
    assert_ledgers_contiguous(pipeline)

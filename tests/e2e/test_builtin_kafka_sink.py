"""The gap the transactional Kafka sink closes, shown: Spark's built-in Kafka sink duplicates under a kill.

The transactional sink's proof runs in tests/e2e/test_hard_kills.py (the hard-kill
pipeline has `sinks.kafka`, so the same kills prove the Delta sinks and the Kafka
output exactly once). Here the peer: an input topic with aborted transactions and
malformed records goes through a query writing the valid events with Spark's own
`format("kafka")` writer (tests/e2e/builtin_kafka_sink_job.py), killed once with
SIGKILL (whole process group) after it wrote a batch and before Spark committed
it, then run to the end. Its output holds every valid event (at-least-once), and
duplicates, as many as its log of replayed writes predicts.

Why one kill: `crash_after_write@batch:0` makes the duplicates certain, not a
matter of timing: batch 0 is fully written (acknowledged, non-transactional
writes) when the group dies, and the restart replays batch 0 over the same
offsets (offsets/0 without commits/0), writing every row of it again. So the
output holds exactly batch 0's rows twice. More kills (the former schedule had a
partial-task crash, a crash after a full write and an external kill, 204 s)
only add more duplicates of the same kind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from devkit.driver import SHORT_LIVED_DRIVER
from devkit.kafka import consume_all, value_json
from devkit.pipelines import PAYMENTS_SCHEMA
from onceflow.generate.producer import VALID, produce

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

EVENTS = 6_000
MAX_OFFSETS = 3000
TASKS = 4
RUN_TIMEOUT = 900
FAULT_BATCH = 0
SCHEDULE = [f"crash_after_write@batch:{FAULT_BATCH}", None]  # the fault of each run; the last runs to the end
BASELINE_JOB = Path(__file__).with_name("builtin_kafka_sink_job.py")


def _env(state: Path, fault: str | None) -> dict[str, str]:
    env = dict(
        os.environ,
        ONCEFLOW_HOME=str(state),
        ONCEFLOW_SPARK_MASTER="local[2]",
        PYSPARK_PYTHON=sys.executable,
        ONCEFLOW_SPARK_LOG_LEVEL="ERROR",
        **SHORT_LIVED_DRIVER,
    )
    env.pop("ONCEFLOW_FAULT_KAFKA_SINK", None)
    if fault:
        env.update(ONCEFLOW_FAULT_KAFKA_SINK=fault, ONCEFLOW_FAULT_KILL_PGID="self")
    return env


def _run(cmd: list[str], env: dict[str, str], log: Path) -> int:
    """One run in its own process group (the fault kills the whole group). Returns the exit code
    (-9 when killed)."""
    with open(log, "ab") as out:
        out.write(f"\n=== {' '.join(cmd[-6:])} fault={env.get('ONCEFLOW_FAULT_KAFKA_SINK')}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        try:
            return proc.wait(RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{cmd} did not finish within {RUN_TIMEOUT}s; see {log}") from None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(60)


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _ids(bootstrap: str, topic: str, isolation: str) -> Counter:
    return Counter(value_json(v)["event_id"] for _, _, _, v in consume_all(bootstrap, topic, isolation, timeout=120))


@pytest.fixture(scope="module")
def source(broker):
    topic = "t-e2e-kafka-sink-source"
    summary = produce(
        broker.bootstrap,
        topic,
        EVENTS,
        schema=PAYMENTS_SCHEMA,
        partitions=4,
        seed=11,
        abort_ratio=0.1,
        malformed_ratio=0.02,
        txn_size=100,
    )
    valid = Counter(r.event_id for r in summary.records if r.kind == VALID and not r.aborted)
    aborted = {r.event_id for r in summary.records if r.aborted and r.event_id}
    assert aborted, "the input must hold aborted transactions for the proof to mean anything"
    return {"topic": topic, "summary": summary, "valid": valid, "aborted": aborted}


def test_builtin_kafka_sink_duplicates_under_a_kill(broker, source, tmp_path):
    out_topic = "t-e2e-builtin-out"
    from onceflow.kafka.admin import ensure_topic

    ensure_topic(broker.bootstrap, out_topic, TASKS)
    checkpoint = tmp_path / "checkpoint"
    writes = tmp_path / "writes.jsonl"
    cmd = [
        sys.executable,
        str(BASELINE_JOB),
        "--bootstrap",
        broker.bootstrap,
        "--source-topic",
        source["topic"],
        "--output-topic",
        out_topic,
        "--checkpoint",
        str(checkpoint),
        "--log",
        str(writes),
        "--max-offsets",
        str(MAX_OFFSETS),
        "--partitions",
        str(TASKS),
    ]
    log = tmp_path / "runs.log"
    for step, fault in enumerate(SCHEDULE, 1):
        rc = _run(cmd, _env(tmp_path / "state", fault), log)
        if fault:
            assert rc == -signal.SIGKILL, f"run {step} should die by the injected SIGKILL, exit {rc}:\n{_tail(log)}"
            assert not (checkpoint / "commits" / str(FAULT_BATCH)).exists(), "Spark must not have committed it"
    assert rc == 0, f"the last run must finish, exit {rc}:\n{_tail(log)}"

    out = _ids(broker.bootstrap, out_topic, "read_committed")
    duplicates = sum(out.values()) - len(out)
    assert set(out) == set(source["valid"]), "the built-in sink loses nothing: at-least-once"
    # every write that a later run repeated for the same batch is a duplicate
    lines = [json.loads(line) for line in writes.read_text().splitlines()]
    last_complete = {}
    for i, line in enumerate(lines):
        if line["complete"]:
            last_complete[line["batch"]] = i
    repeated = [line for i, line in enumerate(lines) if last_complete.get(line["batch"]) != i]
    predicted = sum(line["rows"] for line in repeated)
    from_faults = sum(line["rows"] for line in repeated if line["batch"] == FAULT_BATCH)
    assert from_faults > 0 and duplicates >= predicted >= from_faults, (duplicates, predicted, from_faults)
    print(
        f"\nbuilt-in Kafka sink, one kill after batch {FAULT_BATCH}'s write: {duplicates} duplicate records in "
        f"{sum(out.values())} ({from_faults} predicted from the replayed batch)"
    )

"""Kafka in → Kafka out exactly once, under hard kills — and the gap it closes, shown.

One input topic (with aborted transactions and malformed records) goes through
the same kill schedule twice:

- `onceflow ingest` with `sinks.kafka` enabled (the transactional sink), and
- a query writing the same valid events with Spark's built-in Kafka sink.

The schedule, each step a real process killed with SIGKILL (whole process group):
1. batch 1: task partitions 0 and 1 committed, 2 and 3 crash before their commit
   (their records are already in the log), Spark has not committed the batch;
2. batch 3: every task wrote, Spark has not committed the batch;
3. an external `kill -9` once the checkpoint has committed batch 5;
4. a run to the end.

Then: a read_committed consumer of the transactional sink's output sees every
committed input event exactly once and nothing from aborted input; a
read_uncommitted consumer sees more (the killed attempts), so the transactions
were real. The built-in sink's output holds duplicates, as many as its log of
replayed writes predicts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from onceflow import config
from onceflow.kafka.producer import VALID, produce
from onceflow.kafka.ledger import read_kafka_ledger
from tests.exactly_once import assert_exactly_once
from tests.kafka_helpers import consume_all
from tests.pipeline_helpers import PAYMENTS_SCHEMA, write_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

EVENTS = 24_000
MAX_OFFSETS = 3000
TASKS = 4
RUN_TIMEOUT = 900
SCHEDULE = [  # (fault env, external kill after this committed batch)
    ("crash_after_tasks:2@batch:1", None),
    ("crash_after_write@batch:3", None),
    (None, 5),
    (None, None),
]
BASELINE_JOB = Path(__file__).with_name("builtin_kafka_sink_job.py")


def _env(state: Path, fault: str | None) -> dict[str, str]:
    env = dict(os.environ, ONCEFLOW_HOME=str(state), ONCEFLOW_SPARK_MASTER="local[2]",
               PYSPARK_PYTHON=sys.executable, ONCEFLOW_SPARK_LOG_LEVEL="ERROR")
    env.pop("ONCEFLOW_FAULT_KAFKA_SINK", None)
    if fault:
        env.update(ONCEFLOW_FAULT_KAFKA_SINK=fault, ONCEFLOW_FAULT_KILL_PGID="self")
    return env


def _run(cmd: list[str], env: dict[str, str], checkpoint: Path, kill_after: int | None, log: Path) -> int:
    """One run in its own process group; with kill_after, SIGKILL the group once
    commits/<kill_after> exists. Returns the exit code (-9 when killed)."""
    with open(log, "ab") as out:
        out.write(f"\n=== {' '.join(cmd[-6:])} fault={env.get('ONCEFLOW_FAULT_KAFKA_SINK')} "
                  f"kill_after={kill_after}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=Path(__file__).resolve().parents[2])
        deadline = time.monotonic() + RUN_TIMEOUT
        try:
            while proc.poll() is None:
                if kill_after is not None and (checkpoint / "commits" / str(kill_after)).exists():
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(60)
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"{cmd} did not finish within {RUN_TIMEOUT}s; see {log}")
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(60)
    return proc.returncode


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _committed_batches(checkpoint: Path) -> set[int]:
    return {int(f.name) for f in (checkpoint / "commits").glob("[0-9]*")}


def _planned_batches(checkpoint: Path) -> set[int]:
    return {int(f.name) for f in (checkpoint / "offsets").glob("[0-9]*")}


def _ids(bootstrap: str, topic: str, isolation: str) -> Counter:
    return Counter(json.loads(v)["event_id"] for _, _, _, v in consume_all(bootstrap, topic, isolation, timeout=120))


@pytest.fixture(scope="module")
def source(broker):
    topic = "t-e2e-kafka-sink-source"
    summary = produce(broker.bootstrap, topic, EVENTS, schema=PAYMENTS_SCHEMA, partitions=4, seed=11, abort_ratio=0.1,
                      malformed_ratio=0.02, txn_size=100)
    valid = Counter(r.event_id for r in summary.records if r.kind == VALID and not r.aborted)
    aborted = {r.event_id for r in summary.records if r.aborted and r.event_id}
    assert aborted, "the input must hold aborted transactions for the proof to mean anything"
    return {"topic": topic, "summary": summary, "valid": valid, "aborted": aborted}


def test_transactional_sink_is_exactly_once_through_the_kill_schedule(broker, source, tmp_path):
    name = "kafka_e2e"
    out_topic, ledger_topic = "t-e2e-txn-out", "t-e2e-txn-ledger"
    path = write_pipeline(tmp_path, broker.bootstrap, source["topic"], name=name, max_offsets=MAX_OFFSETS,
                          sinks={"bronze": {"path": str(tmp_path / "bronze")},
                                 "quarantine": {"path": str(tmp_path / "quarantine")},
                                 "kafka": {"topic": out_topic, "ledger_topic": ledger_topic,
                                           "key": "account_id", "partitions": TASKS}})
    pipeline = config.load(path)
    checkpoint = Path(pipeline.checkpoint_path)
    cmd = [str(Path(sys.executable).with_name("onceflow")), "ingest", "--pipeline", str(path),
           "--mode", "available-now"]
    log = tmp_path / "runs.log"
    state = tmp_path / "state"

    # 1. batch 1: tasks 0-1 commit, tasks 2-3 die before their commit
    rc = _run(cmd, _env(state, SCHEDULE[0][0]), checkpoint, None, log)
    assert rc == -signal.SIGKILL, f"run 1 should die by the injected SIGKILL, exit {rc}:\n{_tail(log)}"
    ledger = read_kafka_ledger(broker.bootstrap, ledger_topic, name)
    assert [(p.batch_id, p.committed, p.missing) for p in ledger.partial] == [(1, [0, 1], [2, 3])], ledger.as_dict()
    assert 1 in _planned_batches(checkpoint) and 1 not in _committed_batches(checkpoint)
    in_doubt = sum(_ids(broker.bootstrap, out_topic, "read_uncommitted").values()) - \
        sum(_ids(broker.bootstrap, out_topic, "read_committed").values())
    assert in_doubt > 0, "the killed tasks' records must sit in the log, uncommitted"

    # 2. batch 3: every task committed, Spark did not
    rc = _run(cmd, _env(state, SCHEDULE[1][0]), checkpoint, None, log)
    assert rc == -signal.SIGKILL, f"run 2 should die by the injected SIGKILL, exit {rc}:\n{_tail(log)}"
    ledger = read_kafka_ledger(broker.bootstrap, ledger_topic, name)
    assert 3 in [e.batch_id for e in ledger.entries] and ledger.partial == []
    assert 3 not in _committed_batches(checkpoint)

    # 3. an external kill -9 after batch 5 committed; 4. run to the end
    _run(cmd, _env(state, None), checkpoint, SCHEDULE[2][1], log)
    rc = _run(cmd, _env(state, None), checkpoint, None, log)
    assert rc == 0, f"the last run must finish, exit {rc}:\n{_tail(log)}"

    committed = _ids(broker.bootstrap, out_topic, "read_committed")
    duplicated = {i: n for i, n in committed.items() if n > 1}
    assert not duplicated, f"{len(duplicated)} events more than once at read_committed, e.g. {list(duplicated)[:5]}"
    lost = set(source["valid"]) - set(committed)
    assert not lost, f"{len(lost)} committed input events missing from the output, e.g. {sorted(lost)[:5]}"
    assert not set(committed) & source["aborted"], "events of aborted input transactions reached the output"
    assert set(committed) == set(source["valid"])

    uncommitted = _ids(broker.bootstrap, out_topic, "read_uncommitted")
    aborted_attempts = sum(uncommitted.values()) - sum(committed.values())
    assert aborted_attempts >= in_doubt, "read_uncommitted shows the aborted attempts of the killed tasks"

    ledger = read_kafka_ledger(broker.bootstrap, ledger_topic, name)
    assert ledger.problems() == [] and ledger.partial == []
    assert sum(e.rows for e in ledger.entries) == len(source["valid"])
    assert_exactly_once(pipeline, broker.bootstrap)  # the Delta sinks of the same job, through the same kills
    print(f"\ntransactional Kafka sink: {len(committed)} events, 0 duplicates at read_committed; "
          f"{aborted_attempts} records of killed attempts visible only at read_uncommitted; "
          f"{len(ledger.entries)} batches in the ledger")


def test_builtin_kafka_sink_duplicates_under_the_same_schedule(broker, source, tmp_path):
    out_topic = "t-e2e-builtin-out"
    from onceflow.kafka.admin import ensure_topic

    ensure_topic(broker.bootstrap, out_topic, TASKS)
    checkpoint = tmp_path / "checkpoint"
    writes = tmp_path / "writes.jsonl"
    cmd = [sys.executable, str(BASELINE_JOB), "--bootstrap", broker.bootstrap, "--source-topic", source["topic"],
           "--output-topic", out_topic, "--checkpoint", str(checkpoint), "--log", str(writes),
           "--max-offsets", str(MAX_OFFSETS), "--partitions", str(TASKS)]
    log = tmp_path / "runs.log"
    for step, (fault, kill_after) in enumerate(SCHEDULE, 1):
        rc = _run(cmd, _env(tmp_path / "state", fault), checkpoint, kill_after, log)
        if fault:
            assert rc == -signal.SIGKILL, f"run {step} should die by the injected SIGKILL, exit {rc}:\n{_tail(log)}"
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
    from_faults = sum(line["rows"] for line in repeated if line["batch"] in (1, 3))
    assert from_faults > 0 and duplicates >= predicted >= from_faults, (duplicates, predicted, from_faults)
    print(f"\nbuilt-in Kafka sink, same schedule: {duplicates} duplicate records in {sum(out.values())} "
          f"({from_faults} from the batch 1 and batch 3 crashes, {predicted - from_faults} from the external "
          f"kill's replayed writes, {duplicates - predicted} from a kill that landed inside a write)")

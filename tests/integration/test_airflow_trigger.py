"""PipelineHealthTrigger fires on each verdict, driven by real checkpoint directories,
real status logs and run locks, and a real broker for the lag.

Each test lays out a pipeline's files the way Spark and the ingest job write them
(offsets/N, commits/N, metadata, sources/0/0; status.jsonl; run.lock held by a live
process) and runs the trigger as the triggerer does (its async generator), until
its first event.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from devkit.pipelines import PAYMENTS_SCHEMA
from onceflow.airflow.triggers import PipelineHealthTrigger
from onceflow.generate.producer import produce
from onceflow.kafka.admin import ensure_topic, list_end_offsets
from onceflow.state.status import RunLock
from tests.airflow_helpers import ROOT

pytestmark = pytest.mark.integration
QUERY_ID = "5a3a8e3e-1111-4222-8333-444455556666"
ALL = ["healthy", "lagging", "stalled", "dead", "failed", "broken", "stopped", "not_started"]


@pytest.fixture(scope="module")
def source(broker):
    """A topic with committed records on 2 partitions; its last stable offsets."""
    topic = f"t-airflow-trigger-{os.getpid()}"
    ensure_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 40, schema=PAYMENTS_SCHEMA, partitions=2, seed=7, keep_records=False)
    latest = list_end_offsets(broker.bootstrap, topic)["latest"]
    assert sum(latest.values()) >= 40
    return broker.bootstrap, topic, latest


class Layout:
    """One pipeline's YAML, checkpoint and status log, written in the real formats."""

    def __init__(self, tmp_path: Path, name: str, bootstrap: str, topic: str):
        self.name, self.topic = name, topic
        self.ck = tmp_path / "checkpoint"
        self.file = tmp_path / f"{name}.yaml"
        self.file.write_text(
            f"name: {name}\nsource: {{bootstrap_servers: '{bootstrap}', topic: {topic}}}\n"
            "schema: {event_time: ts, fields: [{name: ts, type: timestamp}]}\n"
            f"sinks: {{bronze: {{path: {tmp_path}/bronze}}, quarantine: {{path: {tmp_path}/quarantine}}}}\n"
            f"checkpoint: {self.ck}\ntrigger: {{processing_time: 1 second}}\n"
            "health: {max_lag: 1000, stalled_after_triggers: 2, dead_after_seconds: 60}\n"
        )
        from onceflow import config

        self.pipeline = config.load(self.file)
        self.state = self.pipeline.state_path
        self.state.mkdir(parents=True, exist_ok=True)
        (self.state / "status.jsonl").unlink(missing_ok=True)

    def checkpoint(
        self, initial: dict[int, int], batches: dict[int, dict[int, int]], commits: list[int], commit_age: float = 0
    ) -> None:
        (self.ck / "offsets").mkdir(parents=True, exist_ok=True)
        (self.ck / "commits").mkdir(parents=True, exist_ok=True)
        (self.ck / "sources" / "0").mkdir(parents=True, exist_ok=True)
        (self.ck / "metadata").write_text(json.dumps({"id": QUERY_ID}) + "\n")
        (self.ck / "sources" / "0" / "0").write_bytes(
            b"\x00v1\n" + json.dumps({self.topic: {str(p): o for p, o in initial.items()}}).encode()
        )
        for n, offs in batches.items():
            meta = {"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000), "conf": {}}
            (self.ck / "offsets" / str(n)).write_text(
                "v1\n" + json.dumps(meta) + "\n" + json.dumps({self.topic: {str(p): o for p, o in offs.items()}})
            )
        for n in commits:
            path = self.ck / "commits" / str(n)
            path.write_text('v1\n{"nextBatchWatermarkMs":0}')
            then = time.time() - commit_age
            os.utime(path, (then, then))

    def events(self, *events: tuple[str, float, dict]) -> None:
        """Status events (kind, age in seconds, fields) as the job appends them."""
        with open(self.state / "status.jsonl", "a") as f:
            for kind, age, fields in events:
                epoch = time.time() - age
                f.write(
                    json.dumps(
                        {
                            "event": kind,
                            "time": "2026-11-22T12:00:00.000Z",
                            "epoch": round(epoch, 3),
                            "pipeline": self.name,
                            **fields,
                        }
                    )
                    + "\n"
                )


def _validator():
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    schemas = ROOT / "docs" / "schemas"
    health = json.loads((schemas / "checkpoint-status.schema.json").read_text())
    event = json.loads((schemas / "airflow-health-event.schema.json").read_text())
    registry = Registry().with_resource(
        "https://onceflow.dev/schemas/checkpoint-status.schema.json", Resource.from_contents(health)
    )
    return Draft202012Validator(event, registry=registry)


VALIDATOR = _validator()


def fire(layout: Layout, fire_on=ALL, **kwargs) -> dict:
    trigger = PipelineHealthTrigger(
        pipeline_file=str(layout.file), fire_on=fire_on, poll_interval=0.5, **{"timeout": 60, **kwargs}
    )

    async def first():
        async for event in trigger.run():
            return event.payload

    event = asyncio.run(asyncio.wait_for(first(), timeout=120))
    VALIDATOR.validate(event)  # docs/schemas/airflow-health-event.schema.json
    return event


STARTED = (
    "started",
    100,
    {"run_id": "r1", "query_id": QUERY_ID, "pid": 1, "mode": "continuous", "generation": 0, "trigger_seconds": 1},
)


def progress(batch: int, age: float) -> tuple:
    return ("progress", age, {"run_id": "r1", "batch_id": batch, "input_rows": 10, "batch_duration_ms": 300})


@pytest.fixture
def layout(tmp_path, source, request):
    bootstrap, topic, _ = source
    return Layout(tmp_path, request.node.name.split("[")[0].removeprefix("test_")[:40], bootstrap, topic)


def test_fires_not_started_for_a_pipeline_that_never_ran(layout):
    assert fire(layout)["verdict"] == "not_started"


def test_fires_healthy_when_commits_advance_and_lag_is_zero(layout, source):
    latest = source[2]
    layout.checkpoint({p: 0 for p in latest}, {0: dict(latest)}, [0])
    layout.events(STARTED, progress(0, 1))
    with RunLock(layout.state) as lock:
        lock.acquire(run_id="r1")
        event = fire(layout, fire_on=["healthy"])
    assert event["verdict"] == "healthy"
    assert event["health"]["lag"]["total"] == 0 and event["run"]["batches"] == 1


def test_fires_stalled_when_lag_waits_and_nothing_commits(layout, source):
    latest = source[2]
    layout.checkpoint({p: 0 for p in latest}, {0: {p: 1 for p in latest}}, [0], commit_age=100)
    layout.events(STARTED, progress(0, 100), ("idle", 1, {"run_id": "r1"}))
    with RunLock(layout.state) as lock:
        lock.acquire(run_id="r1")
        event = fire(layout, fire_on=["stalled", "dead"])
    assert event["verdict"] == "stalled", event["reasons"]
    assert event["health"]["lag"]["total"] == sum(latest.values()) - len(latest)


def test_fires_dead_when_the_job_vanished_without_a_final_event(layout, source):
    latest = source[2]
    layout.checkpoint({p: 0 for p in latest}, {0: dict(latest)}, [0])
    layout.events(STARTED, progress(0, 5))  # and no lock holder: killed
    event = fire(layout)
    assert event["verdict"] == "dead" and "no final event" in event["reasons"][0]


def test_a_problem_in_end_on_ends_the_task_in_the_triggerer_with_the_event_as_its_xcom(layout, source):
    """The stream run's watch: a kill's `dead` ends the task where the trigger runs (no worker
    resumes it to return the event), and the task that triggers the recovery reads the same event."""
    from airflow.triggers.base import TaskSuccessEvent

    latest = source[2]
    layout.checkpoint({p: 0 for p in latest}, {0: dict(latest)}, [0])
    layout.events(STARTED, progress(0, 5))  # and no lock holder: killed
    trigger = PipelineHealthTrigger(
        pipeline_file=str(layout.file), fire_on=ALL, end_on=["dead", "stalled"], poll_interval=0.5, timeout=60
    )

    async def first():
        async for event in trigger.run():
            return event

    event = asyncio.run(asyncio.wait_for(first(), timeout=120))
    assert isinstance(event, TaskSuccessEvent) and set(event.xcoms or {}) == {"return_value"}
    xcom: Any = (event.xcoms or {})["return_value"]
    VALIDATOR.validate(xcom)  # the same event a resumed sensor returns
    assert xcom["verdict"] == "dead" and "no final event" in xcom["reasons"][0]
    assert json.loads(json.dumps(xcom)) == xcom  # stored as JSON in the XCom table


def test_fires_failed_with_the_jobs_error(layout, source):
    latest = source[2]
    layout.checkpoint({p: 0 for p in latest}, {0: dict(latest)}, [0])
    layout.events(STARTED, ("final", 1, {"run_id": "r1", "status": "failed", "error": "Boom: disk full"}))
    event = fire(layout)
    assert event["verdict"] == "failed" and "disk full" in event["reasons"][0]


def test_fires_broken_for_an_unusable_checkpoint(layout, source):
    latest = source[2]
    layout.checkpoint({p: 0 for p in latest}, {0: {p: 1 for p in latest}, 1: dict(latest)}, [0, 1])
    (layout.ck / "offsets" / "1").write_text("v1\n{not json")
    event = fire(layout)
    assert event["verdict"] == "broken" and "unusable" in event["reasons"][0]


def test_fires_stopped_after_a_clean_end_and_scopes_to_runs_since(layout, source):
    latest = source[2]
    layout.checkpoint({p: 0 for p in latest}, {0: dict(latest)}, [0])
    layout.events(STARTED, progress(0, 50), ("final", 40, {"run_id": "r1", "status": "stopped"}))
    event = fire(layout, fire_on=["stopped"])
    assert event["verdict"] == "stopped" and event["run"]["final_status"] == "stopped"
    # a task that submitted a run at `since` does not take the older run's verdict for its own
    waited = fire(layout, fire_on=["stopped"], since=time.time(), start_grace=2)
    assert waited["verdict"] == "not_started" and waited["waited_seconds"] >= 2


def test_a_launch_killed_before_it_logged_its_start_fires_dead_not_a_wait(layout, source):
    """The docker drill's scheduler kill: the stream task launched the app (`since`), the app took the
    run lock, and its driver died with the scheduler before it logged `started`. The wait after the
    launch sees that run (it took the lock since) and fires `dead` at once, instead of waiting for a
    start that never comes while the older run's `failed` is hidden."""
    latest = source[2]
    layout.checkpoint({p: 0 for p in latest}, {0: dict(latest)}, [0])
    layout.events(STARTED, ("final", 40, {"run_id": "r1", "status": "failed", "error": "Boom: store down"}))
    since = time.time()
    lock = RunLock(layout.state)
    lock.acquire(run_id="r2", mode="continuous")
    lock.release()  # killed: the lock is free, run.json stays
    event = fire(layout, since=since, start_grace=30)
    assert event["verdict"] == "dead" and "r2" in event["reasons"][0], event["reasons"]
    assert event["waited_seconds"] < 5


def test_fires_timeout_and_error(layout, source, tmp_path):
    latest = source[2]
    layout.checkpoint({p: 0 for p in latest}, {0: dict(latest)}, [0])
    layout.events(STARTED, progress(0, 50), ("final", 40, {"run_id": "r1", "status": "stopped"}))
    timed_out = fire(layout, fire_on=["healthy"], timeout=2)
    assert timed_out["verdict"] == "timeout" and timed_out["last_verdict"] == "stopped"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsource: {topic: x}\n")
    trigger = PipelineHealthTrigger(pipeline_file=str(bad), fire_on=["healthy"], poll_interval=0.5)

    async def first():
        async for event in trigger.run():
            return event.payload

    error = asyncio.run(first())
    VALIDATOR.validate(error)
    assert error["verdict"] == "error" and "bad.yaml" in error["error"] and "source.bootstrap_servers" in error["error"]

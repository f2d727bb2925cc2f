"""What recovery reads before it decides, and what it refuses to guess past."""

from __future__ import annotations

import pytest

from devkit.pipelines import load_pipeline
from onceflow import facts as pipeline_facts
from onceflow.checkpoint import Checkpoint
from onceflow.errors import LedgerReadError, RecoveryError
from onceflow.ledger import Ledger
from onceflow.recovery.facts import gather
from onceflow.state.status import RunEvent, RunStatus, StatusLog


def _facts(**kw) -> pipeline_facts.PipelineFacts:
    fields: dict = dict(
        running=False,
        holder=None,
        checkpoint=Checkpoint(path="/cp", exists=False),
        checkpoint_error=None,
        identity=None,
        identity_error=None,
        paths={"bronze": "/b"},
        ledgers={"bronze": Ledger("/b", [], [], exists=False)},
        kafka={"earliest": {0: 0}, "latest": {0: 10}},
    )
    return pipeline_facts.PipelineFacts(**{**fields, **kw})


@pytest.fixture
def pipeline(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    return load_pipeline(tmp_path, "localhost:1", "t", name="p")


def test_the_facts_hold_the_last_run_and_kafkas_offsets(pipeline, monkeypatch):
    log = StatusLog(pipeline.state_path, pipeline.name)
    log.append(RunEvent.STARTED, run_id="r1")
    log.append(RunEvent.FINAL, run_id="r1", status=RunStatus.STOPPED)
    monkeypatch.setattr(pipeline_facts, "read_facts", lambda p, **kw: _facts())
    f = gather(pipeline)
    assert f.topic == "t" and f.kafka.latest == {0: 10} and f.kafka.partitions == [0]
    assert f.last_run["run_id"] == "r1" and f.last_run["final"]["status"] == "stopped"
    assert f.poisoned is None and not f.running


@pytest.mark.parametrize(
    "broken, words",
    [
        (dict(kafka=None, kafka_error=RuntimeError("no broker")), "without Kafka's offsets"),
        (dict(ledgers={}, ledger_errors={"bronze": LedgerReadError("bronze", "/b", "bad log")}), "Delta log at /b"),
        (dict(ledgers={}, ledger_errors={"kafka": LedgerReadError("kafka", "its ledger topic", "x")}), "Kafka sink"),
        (dict(checkpoint=None, checkpoint_error=RuntimeError("s3a://")), "cannot plan a recovery: s3a://"),
    ],
)
def test_what_cannot_be_read_is_refused_not_guessed(pipeline, monkeypatch, broken, words):
    monkeypatch.setattr(pipeline_facts, "read_facts", lambda p, **kw: _facts(**broken))
    with pytest.raises(RecoveryError, match=words):
        gather(pipeline)

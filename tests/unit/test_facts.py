"""A pipeline's facts, read once for every caller: what could not be read is reported, not raised."""

from __future__ import annotations

import pytest

from devkit.pipelines import load_pipeline
from onceflow import sinks
from onceflow.errors import AuditError
from onceflow.facts import read_committed_point, read_facts
from onceflow.reconcile import AuditScope
from onceflow.state.generation import new_identity, write_identity


@pytest.fixture
def pipeline(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    return load_pipeline(tmp_path, "localhost:1", "t", name="p")


def test_the_facts_of_a_pipeline_that_never_ran(pipeline):
    facts = read_facts(pipeline, kafka_offsets=lambda bootstrap, topic: {"earliest": {0: 0}, "latest": {0: 5}})
    assert not facts.running and facts.holder is None and facts.checkpoint is not None
    assert not facts.checkpoint.exists and facts.identity is None and facts.identity_error is None
    assert {n: led.exists for n, led in facts.ledgers.items()} == dict.fromkeys(
        ("bronze", "quarantine", "aggregates"), False
    )
    assert facts.kafka == {"earliest": {0: 0}, "latest": {0: 5}} and facts.kafka_error is None
    assert list(sinks.fed_by_kafka(facts.ledgers)) == ["bronze", "quarantine"]  # the aggregates follow bronze


def test_what_cannot_be_read_is_reported_for_each_caller_to_judge(pipeline, tmp_path):
    write_identity(pipeline.checkpoint_path, new_identity("p", 0, None, "new pipeline"))
    (tmp_path / "checkpoint" / "_onceflow.json").write_text("{broken")
    (tmp_path / "checkpoint" / "metadata").write_text('{"id": "q"}')

    def no_kafka(bootstrap, topic):
        raise RuntimeError("unreachable")

    facts = read_facts(pipeline, kafka_offsets=no_kafka)
    assert facts.identity is None and facts.identity_error is not None
    assert facts.identity_error.startswith(str(tmp_path / "checkpoint" / "_onceflow.json") + " is unreadable (")
    assert "Fix:" not in facts.identity_error  # the problem without the fix: health and recovery say their own
    assert isinstance(facts.kafka_error, RuntimeError)


def test_a_pipeline_that_wrote_nothing_has_no_committed_point_to_audit(pipeline):
    with pytest.raises(AuditError, match="nothing to audit: no sink of topic 't' holds a committed batch"):
        read_committed_point(pipeline, AuditScope.SINCE_LAST)  # and Kafka was not asked

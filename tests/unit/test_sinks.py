"""Which sinks a pipeline has, where, and what their ledgers say: one reader for every caller."""

from __future__ import annotations

import pytest

from devkit.pipelines import load_pipeline
from onceflow import sinks
from onceflow.errors import SinkError


@pytest.fixture
def pipeline(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    return load_pipeline(tmp_path, "localhost:1", "t", name="p")


def test_the_sinks_in_write_order_and_in_the_audits(pipeline, tmp_path):
    assert list(sinks.delta_sinks(pipeline)) == ["bronze", "quarantine", "aggregates"]
    paths = sinks.table_paths(pipeline)
    assert paths == {name: str(tmp_path / name) for name in ("bronze", "quarantine", "aggregates")}
    assert list(sinks.table_paths(pipeline, audit_order=True)) == ["aggregates", "quarantine", "bronze"]
    assert sinks.table_path(pipeline, "quarantine") == str(tmp_path / "quarantine")
    with pytest.raises(ValueError, match="has no Delta sink 'kafka'"):
        sinks.table_path(pipeline, "kafka")
    with pytest.raises(SinkError, match=r"has no sinks\.kafka section"):
        sinks.kafka_ledger(pipeline)

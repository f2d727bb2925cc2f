"""The warm standby's place (onceflow.state.standby): one standby at a time, ready only while it
holds its lock and its processes live."""

from __future__ import annotations

import os

import pytest

from devkit.pipelines import PAYMENTS_SCHEMA_BODY
from onceflow.config import Pipeline
from onceflow.state.standby import Standby


@pytest.fixture
def pipeline(tmp_path, monkeypatch) -> Pipeline:
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    return Pipeline.model_validate(
        {
            "name": "standby_p",
            "checkpoint": str(tmp_path / "ck"),
            "source": {"bootstrap_servers": "localhost:1", "topic": "t"},
            "schema": PAYMENTS_SCHEMA_BODY,
            "sinks": {"bronze": {"path": str(tmp_path / "bronze")}, "quarantine": {"path": str(tmp_path / "quar")}},
        }
    )


def test_one_standby_at_a_time_and_ready_only_while_it_holds(pipeline):
    first, second = Standby(pipeline.state_path), Standby(pipeline.state_path)
    assert first.ready() is None
    assert first.hold(jvm_pid=os.getpid(), since="now")
    assert not second.hold(jvm_pid=os.getpid(), since="now"), "a second standby must leave"
    assert (first.ready() or {}).get("pid") == os.getpid()
    first.release()
    assert first.ready() is None, "a standby that left is not ready, whatever its file says"


def test_a_standby_whose_jvm_is_gone_is_not_ready(pipeline):
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    standby = Standby(pipeline.state_path)
    assert standby.hold(jvm_pid=gone.pid, since="now")
    try:
        assert standby.ready() is None
    finally:
        standby.release()

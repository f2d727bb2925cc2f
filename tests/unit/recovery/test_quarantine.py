"""Moving offsets to quarantine by hand: recorded for the next run; refused while the job runs."""

from __future__ import annotations

import pytest

from devkit.pipelines import load_pipeline
from onceflow.errors import RecoveryError
from onceflow.recovery.quarantine import declare_unprocessable
from onceflow.state.status import RunLock
from onceflow.state.unprocessable import Unprocessable


def test_a_range_is_recorded_for_the_next_run(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    pipeline = load_pipeline(tmp_path, "localhost:1", "t")
    declared = declare_unprocessable(pipeline, start={0: 120, 1: 5}, end={0: 121, 1: 5}, note="engine bug")
    assert declared.ranges == {0: (120, 121)} and declared.note == "engine bug"  # partition 1: nothing in it
    assert Unprocessable.load(pipeline.state_path).covers("t", 0, 120, 121)
    with pytest.raises(RecoveryError, match="the range holds no offsets"):
        declare_unprocessable(pipeline, start={0: 7}, end={0: 7})


def test_nothing_is_recorded_while_the_job_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    pipeline = load_pipeline(tmp_path, "localhost:1", "t")
    with RunLock(pipeline.state_path) as lock:
        lock.acquire(run_id="r")
        with pytest.raises(RecoveryError, match="the job runs"):
            declare_unprocessable(pipeline, start={0: 1}, end={0: 2})

"""`onceflow recover`: plan, then act under the run lock; every outcome recorded."""

from __future__ import annotations

import pytest

import onceflow.recovery as recovery
from devkit.pipelines import load_pipeline
from onceflow.errors import RecoveryError
from onceflow.recovery.record import Outcome, read_record
from onceflow.state.status import RunLock
from tests.unit.recovery.made_facts import MISSING_CK, B, all_sinks, checkpoint, facts, ledgers


@pytest.fixture
def pipeline(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    return load_pipeline(tmp_path, "localhost:1", "t", name="p")


def _gathered(monkeypatch, made):
    seen: list[bool | None] = []

    def gather(pipeline, running=None):
        seen.append(running)
        return made

    monkeypatch.setattr(recovery, "gather", gather)
    return seen


def test_each_outcome_is_recorded(pipeline, monkeypatch):
    _gathered(monkeypatch, facts(MISSING_CK, ledgers(), generation=None))
    assert recovery.recover(pipeline).outcome == Outcome.NOTHING_TO_DO
    assert recovery.recover(pipeline, dry_run=True).outcome == Outcome.DRY_RUN
    _gathered(monkeypatch, facts(checkpoint(B, 2), all_sinks(), running=True))
    refused = recovery.recover(pipeline)
    assert refused.outcome == Outcome.REFUSED and refused.plan is not None
    assert read_record(refused.record_path)["error"] == refused.plan.refusal


def test_the_plan_is_made_under_the_run_lock_so_the_job_cannot_start_halfway(pipeline, monkeypatch):
    seen = _gathered(monkeypatch, facts(MISSING_CK, ledgers(), generation=None))
    recovery.recover(pipeline)
    assert seen == [False]  # it held the lock: nothing else runs
    with RunLock(pipeline.state_path) as lock:
        lock.acquire(run_id="job")
        recovery.recover(pipeline)
    assert seen == [False, None]  # another process holds it: ask the lock (the plan then refuses)
    assert not RunLock(pipeline.state_path).is_held()


def test_an_unexpected_failure_is_recorded_and_told_without_a_traceback(pipeline, monkeypatch):
    def broken(pipeline, running=None):
        raise KeyError("surprise")

    monkeypatch.setattr(recovery, "gather", broken)
    with pytest.raises(RecoveryError, match="recovery failed unexpectedly \\(KeyError: 'surprise'\\)"):
        recovery.recover(pipeline)
    assert not RunLock(pipeline.state_path).is_held()

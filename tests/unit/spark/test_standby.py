"""The warm standby's wait (onceflow.spark.standby), without Spark: it leaves when the stream is no
longer wanted, takes the run lock the moment it is free, and a recovery at work keeps it waiting."""

from __future__ import annotations

import os
import threading
import time

import pytest

from devkit.pipelines import PAYMENTS_SCHEMA_BODY
from onceflow.config import Pipeline
from onceflow.spark.standby import wait_for_turn
from onceflow.state.control import RecoveryMarker, Wanted
from onceflow.state.standby import Standby
from onceflow.state.status import RunLock


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


def _turn(pipeline, leased: bool = False, lock: RunLock | None = None) -> bool:
    lock = lock or RunLock(pipeline.state_path)
    return wait_for_turn(pipeline, lock, {"run_id": "r", "mode": "continuous"}, os.getpid(), leased, None, print)


def test_a_leased_standby_leaves_when_the_stream_is_not_wanted(pipeline):
    running = RunLock(pipeline.state_path)
    running.acquire(run_id="primary", mode="continuous")
    try:
        assert _turn(pipeline, leased=True) is False
        assert Standby(pipeline.state_path).ready() is None, "it gave its place up"
    finally:
        running.release()


def test_the_standby_takes_the_lock_the_moment_the_holder_lets_go(pipeline):
    Wanted(pipeline.state_path).want(300, by="test")
    running = RunLock(pipeline.state_path)
    running.acquire(run_id="primary", mode="continuous")
    mine = RunLock(pipeline.state_path)
    took: list[float] = []
    waiter = threading.Thread(target=lambda: took.append(_turn(pipeline, leased=True, lock=mine) and time.monotonic()))
    waiter.start()
    deadline = time.monotonic() + 10
    while Standby(pipeline.state_path).ready() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Standby(pipeline.state_path).ready() is not None
    time.sleep(0.6)
    assert waiter.is_alive(), "it took a lock that is held"
    released = time.monotonic()
    running.release()
    waiter.join(5)
    assert took and took[0] - released < 1.0, took
    assert (mine.holder() or {}).get("run_id") == "r" and Standby(pipeline.state_path).ready() is None
    mine.release()


def test_a_recovery_at_work_keeps_the_standby_waiting(pipeline):
    marker = RecoveryMarker(pipeline.state_path)
    marker.begin("recover-1")
    mine = RunLock(pipeline.state_path)
    took: list[bool] = []
    waiter = threading.Thread(target=lambda: took.append(_turn(pipeline, lock=mine)))
    waiter.start()
    time.sleep(1.0)
    assert waiter.is_alive() and not took, "a standby must not start while a recovery works"
    marker.clear("recover-1")
    waiter.join(5)
    assert took == [True]
    mine.release()

"""The Kafka sink's fault specs: where a task or the driver is killed, refused when malformed."""

from __future__ import annotations

import os

import pytest

from onceflow.errors import FaultSpecError
from onceflow.faults import kafka_sink


def test_a_spec_names_the_window_and_the_batch():
    after_tasks = kafka_sink.parse("crash_after_tasks:2@batch:7", pgid=99)
    assert after_tasks.crashes_task(7, 2) and after_tasks.crashes_task(7, 3) and not after_tasks.crashes_task(7, 1)
    assert not after_tasks.crashes_task(8, 3) and not after_tasks.crashes_after_write(7) and after_tasks.pgid == 99
    after_write = kafka_sink.parse("crash_after_write@batch:3")
    assert after_write.crashes_after_write(3) and not after_write.crashes_task(3, 0)


@pytest.mark.parametrize("spec", ["crash", "crash_after_tasks@batch:1", "crash_after_write@batch:x"])
def test_a_malformed_spec_is_refused_with_the_fix(spec):
    with pytest.raises(FaultSpecError, match="Fix:"):
        kafka_sink.parse(spec)


def test_a_driver_that_does_not_lead_its_group_is_never_killed_with_its_parent(monkeypatch):
    monkeypatch.setenv(kafka_sink.ENV_FAULT, "crash_after_write@batch:1")
    monkeypatch.setenv(kafka_sink.ENV_KILL_PGID, "self")
    if os.getpgrp() != os.getpid():
        with pytest.raises(FaultSpecError, match="does not lead its process group"):
            kafka_sink.from_env()
    monkeypatch.setenv(kafka_sink.ENV_KILL_PGID, "1")
    with pytest.raises(FaultSpecError, match="does not name a process group"):
        kafka_sink.from_env()
    monkeypatch.delenv(kafka_sink.ENV_FAULT)
    assert kafka_sink.from_env() is None


def test_a_wait_for_a_fault_that_cannot_be_placed_fails_loudly():
    with pytest.raises(FaultSpecError, match="gave up waiting 0s for the other tasks"):
        kafka_sink.wait_for(lambda: False, "the other tasks", timeout=0.05)

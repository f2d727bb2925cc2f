"""Waiting in one place: until a condition holds or the deadline passes, and retries with backoff."""

from __future__ import annotations

import time

import pytest

from onceflow import polling


def test_a_condition_that_comes_true_returns_its_value():
    calls = iter([None, 0, "ready"])
    assert polling.wait_until(lambda: next(calls), timeout=5, interval=0.01) == "ready"


def test_a_condition_that_never_holds_times_out_after_a_last_look():
    calls: list[float] = []

    def never() -> bool:
        calls.append(time.monotonic())
        return False

    began = time.monotonic()
    assert polling.wait_until(never, timeout=0.2, interval=0.05) is None
    assert time.monotonic() - began >= 0.2 and calls[-1] - began >= 0.2 and len(calls) >= 3
    with pytest.raises(TimeoutError, match="never"):
        polling.wait_for(lambda: False, 0.05, lambda: TimeoutError("it never happened"), interval=0.01)


def test_a_condition_ends_a_hopeless_wait_by_raising():
    def gone():
        raise RuntimeError("the process exited")

    with pytest.raises(RuntimeError, match="exited"):
        polling.wait_until(gone, timeout=60)


def test_a_deadline_counts_down_on_the_monotonic_clock():
    deadline = polling.Deadline(60)
    assert not deadline.passed and 59 < deadline.left() <= 60
    assert polling.Deadline(0).passed and polling.Deadline(0).left() == 0


def test_backoff_doubles_up_to_its_cap():
    assert [polling.backoff(a) for a in range(7)] == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]


def test_retry_retries_what_may_be_retried_and_raises_the_rest():
    attempts: list[int] = []

    def flaky():
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return "done"

    assert (
        polling.retry(flaky, retries=5, retryable=lambda e: isinstance(e, ConnectionError), delay=lambda a: 0) == "done"
    )
    assert len(attempts) == 3
    with pytest.raises(ConnectionError):
        polling.retry(lambda: (_ for _ in ()).throw(ConnectionError()), 2, lambda e: True, delay=lambda a: 0)
    with pytest.raises(ValueError):
        polling.retry(lambda: int("x"), 5, lambda e: isinstance(e, ConnectionError), delay=lambda a: 0)

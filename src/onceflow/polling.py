"""Waiting, in one place: a deadline on the monotonic clock, a poll until something holds (with
what to say when it never does), and a retry with exponential backoff."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Deadline:
    """A time limit `seconds` from now, on the monotonic clock (wall-clock jumps do not move it)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    @property
    def passed(self) -> bool:
        return time.monotonic() >= self.end

    def left(self) -> float:
        """Seconds left, 0 once passed."""
        return max(0.0, self.end - time.monotonic())


def wait_until(condition: Callable[[], T | None], timeout: float, interval: float = 0.2) -> T | None:
    """Call `condition` every `interval` seconds until it returns something truthy, which is
    returned; None when `timeout` seconds pass first (it is always called at least once, and once
    more at the deadline). An exception from `condition` ends the wait (that is how a condition
    says the wait is hopeless, e.g. the process it waits on exited)."""
    deadline = Deadline(timeout)
    while True:
        result = condition()
        if result:
            return result
        if deadline.passed:
            return None
        time.sleep(min(interval, max(deadline.left(), 0.001)))


def wait_for(
    condition: Callable[[], T | None], timeout: float, failure: Callable[[], BaseException], interval: float = 0.2
) -> T:
    """wait_until, raising `failure()` (an exception that says what did not happen, and where)
    when `timeout` seconds pass first."""
    result = wait_until(condition, timeout, interval)
    if not result:
        raise failure()
    return result


def backoff(attempt: int, first: float = 0.2, most: float = 5.0) -> float:
    """Seconds before retry number `attempt` (0, 1, ...): `first`, doubling, at most `most`."""
    return min(first * 2**attempt, most)


def retry(
    call: Callable[[], T],
    retries: int,
    retryable: Callable[[BaseException], bool],
    delay: Callable[[int], float] = backoff,
) -> T:
    """`call()`, called again up to `retries` times while it raises an exception `retryable` accepts,
    after `delay(attempt)` seconds; the last exception (or one not retryable) is raised."""
    for attempt in range(retries + 1):
        try:
            return call()
        except Exception as exc:
            if attempt >= retries or not retryable(exc):
                raise
            time.sleep(delay(attempt))
    raise AssertionError("unreachable: the last attempt returns or raises")

"""One line per committed batch, at a rate a person can read: what a running ingest prints.

The StatusListener feeds every progress (and idle) event here; a line is printed when
at least `every` seconds have passed since the last one, summing the batches in
between, so a 1-second trigger prints every few seconds and a 60-second batch prints
once per batch. Lag is computed from the progress event itself (Kafka's latest offset
when the batch was planned minus the batch's end offset, per partition): no extra
Kafka call. The verdict is `lagging` above the pipeline's health.max_lag, else `healthy`
(`onceflow checkpoint status` gives the full verdict from outside).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

LINE_EVERY = 5.0  # seconds: at most one batch line this often
IDLE_EVERY = 60.0  # seconds: at most one "idle" line this often while no data arrives


@dataclass
class _Pending:
    first: int
    last: int
    batches: int = 0
    rows: int = 0
    seconds: float = 0.0
    lag: int | None = None
    last_seconds: float = 0.0


def lag_of(latest: dict[str, int], end: dict[str, int]) -> int | None:
    """Offsets between the batch's end and Kafka's latest, summed over partitions (None: unknown)."""
    if not latest or not end:
        return None
    return sum(max(0, int(latest[p]) - int(end.get(p, latest[p]))) for p in latest)


class BatchLog:
    """Batch lines for `log`, at most one every `every` seconds (the clock is injectable for tests)."""

    def __init__(
        self,
        log: Callable[[str], None],
        max_lag: int | None = None,
        every: float = LINE_EVERY,
        idle_every: float = IDLE_EVERY,
        clock: Callable[[], float] = time.monotonic,
        trigger_seconds: float | None = None,
    ):
        self.log = log
        self.trigger_seconds = trigger_seconds  # a continuous run's interval (None: available-now)
        self.behind_said = False
        self.max_lag = max_lag
        self.every = every
        self.idle_every = idle_every
        self.clock = clock
        self.pending: _Pending | None = None
        self.last_line = clock()
        self.last_batch: int | None = None

    def batch(self, batch_id: int, rows: int, seconds: float, lag: int | None) -> None:
        """A committed batch; printed now, or summed into the next line."""
        p = self.pending or _Pending(first=batch_id, last=batch_id)
        p.last, p.batches, p.rows = batch_id, p.batches + 1, p.rows + rows
        p.seconds, p.last_seconds, p.lag = p.seconds + seconds, seconds, lag
        self.pending, self.last_batch = p, batch_id
        if not self.behind_said and self.trigger_seconds is not None and seconds > self.trigger_seconds:
            self.behind_said = True  # said once a run: Spark's own warning is silenced (onceflow.spark.session)
            self.log(
                f"batch {batch_id} took {seconds:.1f} s, longer than the trigger interval "
                f"({self.trigger_seconds:g} s): the next batch starts at once, and batches run back to back "
                "while they take this long (said once a run; the lag on each line tells whether they keep up)"
            )
        if self.clock() - self.last_line >= self.every:
            self.flush()

    def idle(self) -> None:
        """No new data: a line now and then, so a quiet stream does not look dead."""
        if self.pending is not None:
            self.flush()
        elif self.clock() - self.last_line >= self.idle_every:
            after = f" after batch {self.last_batch}" if self.last_batch is not None else ""
            self.log(f"idle: no new data{after}; lag 0 (healthy)")
            self.last_line = self.clock()

    def flush(self) -> None:
        """Print what is pending (also at the end of a run, so the last batches are not lost)."""
        p, self.pending = self.pending, None
        if p is None:
            return
        self.log(self.line(p))
        self.last_line = self.clock()

    def line(self, p: _Pending) -> str:
        which = f"batch {p.first}" if p.batches == 1 else f"batches {p.first}–{p.last}"
        timing = f"{p.seconds:.1f} s" if p.batches == 1 else f"{p.seconds:.1f} s (last {p.last_seconds:.1f} s)"
        rows = f"{p.rows:,} row" + ("" if p.rows == 1 else "s")
        return f"{which}: {rows} in {timing}; {self._lag_text(p.lag)}"

    def _lag_text(self, lag: int | None) -> str:
        if lag is None:
            return "lag unknown"
        verdict = "lagging" if self.max_lag is not None and lag > self.max_lag else "healthy"
        limit = f" > max_lag {self.max_lag:,}" if verdict == "lagging" else ""
        return f"lag {lag:,}{limit} ({verdict})"

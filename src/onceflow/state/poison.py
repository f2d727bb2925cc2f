"""A batch the job cannot get past: the same batch failing run after run.

Structured Streaming re-runs an uncommitted batch with the same offsets, so a batch whose data
the job cannot process (an engine bug we have not met) fails every restart the same way, and
a self-repairing orchestrator would restart it forever. Each failed run records the batch it
was writing (its id, generation and offsets) in its final status event; when the newest
POISON_AFTER runs all failed on the same batch, the pipeline is `poisoned`: health says so
with the batch, its offsets and the error, recovery refuses to restart it, and
`onceflow quarantine` moves those offsets to quarantine by hand (onceflow.state.unprocessable).
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow import offsets
from onceflow.state.status import StatusLog
from onceflow.state.unprocessable import Unprocessable

POISON_AFTER = 3  # failed runs in a row on one batch


@dataclass(frozen=True)
class PoisonedBatch:
    batch_id: int
    generation: int | None
    topic: str
    ranges: dict[int, tuple[int, int]]  # per partition [start, end) of the batch
    runs: int  # failed runs in a row on it
    error: str  # the newest run's error
    since: str  # when the first of those runs failed

    def as_dict(self) -> dict:
        return {
            "batch_id": self.batch_id,
            "generation": self.generation,
            "topic": self.topic,
            "ranges": offsets.ranges_as_json(self.ranges),
            "runs": self.runs,
            "error": self.error,
            "since": self.since,
        }

    def describe(self) -> str:
        spans = ", ".join(f"partition {p} [{a}, {b})" for p, (a, b) in sorted(self.ranges.items()))
        return (
            f"batch {self.batch_id} (generation {self.generation}; {spans or 'no offsets'}) failed "
            f"{self.runs} runs in a row since {self.since}: {self.error}"
        )


def poisoned_batch(
    status: StatusLog, handled: Unprocessable | None = None, after: int = POISON_AFTER
) -> PoisonedBatch | None:
    """The batch the newest `after` runs all failed on, or None; also None once every offset of it
    is declared unprocessable (`handled`): the next run gets past it."""
    runs = status.newest_runs(after)
    if len(runs) < after:
        return None
    batches = [r.failed_batch for r in runs]
    first = batches[0]
    if first is None or any(b != first for b in batches):
        return None
    final = runs[-1].final or {}
    batch = PoisonedBatch(
        batch_id=int(first["id"]),
        generation=first.get("generation"),
        topic=first.get("topic", ""),
        ranges=offsets.ranges_from_json(first.get("ranges")),
        runs=after,
        error=str(final.get("error") or "no error recorded"),
        since=str((runs[0].final or {}).get("time")),
    )
    if handled is not None and all(handled.covers(batch.topic, p, a, b) for p, (a, b) in batch.ranges.items()):
        return None
    return batch

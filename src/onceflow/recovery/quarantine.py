"""Moving offsets the job cannot process to quarantine by hand (`onceflow quarantine`).

The decision is recorded (onceflow.state.unprocessable); the job acts on it from its next run, so
the records reach quarantine through the same commits, ledgers and transactions as any
other, exactly once. Refused, with the fix, while the job runs (it would not see the
decision until its next run) and for offsets a sink already holds (they would then be in
two places).
"""

from __future__ import annotations

from onceflow import sinks
from onceflow.checkpoint import batch_offset_range, read_checkpoint
from onceflow.config import Pipeline
from onceflow.errors import OnceflowError, RecoveryError
from onceflow.state.generation import read_identity
from onceflow.state.status import RunLock
from onceflow.state.unprocessable import Declared, Unprocessable


def declare_unprocessable(
    pipeline: Pipeline,
    *,
    batch_id: int | None = None,
    start: dict[int, int] | None = None,
    end: dict[int, int] | None = None,
    note: str = "",
) -> Declared:
    """Record batch `batch_id`'s offsets, or [start, end) per partition, as unprocessable."""
    topic, checkpoint = pipeline.source.topic, pipeline.checkpoint_path
    if RunLock(pipeline.state_path).is_held():
        raise RecoveryError(
            f"{pipeline.name}: the job runs; it reads the offsets to quarantine when a run starts. Fix: stop "
            "it first (SIGTERM stops it at a batch boundary), then run `onceflow quarantine` again."
        )
    if batch_id is not None:
        ck = read_checkpoint(checkpoint)
        if ck.last_committed is not None and batch_id <= ck.last_committed:
            raise RecoveryError(
                f"{pipeline.name}: batch {batch_id} is committed (the checkpoint holds batches up to "
                f"{ck.last_committed}); only a batch the job could not commit can be moved. Fix: name the "
                "batch `onceflow checkpoint status` reports as poisoned, or give --start-offsets/--end-offsets."
            )
        try:
            start, end = batch_offset_range(checkpoint, batch_id, topic)
        except OnceflowError as exc:
            raise RecoveryError(f"{pipeline.name}: the offsets of batch {batch_id} cannot be read: {exc}") from None
    assert start is not None and end is not None  # one of the two forms, checked by the caller
    ranges = {p: (start.get(p, 0), o) for p, o in sorted(end.items()) if o > start.get(p, 0)}
    if not ranges:
        raise RecoveryError(f"{pipeline.name}: the range holds no offsets; nothing to move")
    try:
        ledgers = sinks.fed_by_kafka(sinks.read_ledgers(pipeline))
    except OnceflowError as exc:
        raise RecoveryError(f"{pipeline.name}: the sink ledgers cannot be read ({exc}); nothing was changed") from None
    for name, ledger in ledgers.items():
        held = ledger.committed_offsets()
        for p, (a, _) in ranges.items():
            if a < held.get(p, 0):
                raise RecoveryError(
                    f"{pipeline.name}: {name} already holds partition {p} up to offset {held[p]}, so offsets "
                    f"from {a} would be in two places. Fix: start at {held[p]} (--start-offsets), or recover "
                    "first (`onceflow recover`)."
                )
    identity = read_identity(checkpoint)
    return Unprocessable.load(pipeline.state_path).add(
        Declared(topic, ranges, note, batch_id, identity.generation if identity else None)
    )

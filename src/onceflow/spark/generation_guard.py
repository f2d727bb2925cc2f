"""The generation guard: the writer generation a run writes under and where a fresh checkpoint starts,
or a refusal with the fix when the checkpoint and the sinks disagree (onceflow.state.generation)."""

from __future__ import annotations

from onceflow.config import Pipeline
from onceflow.errors import RecoveryError
from onceflow.ledger import Ledger
from onceflow.state.generation import CheckpointIdentity, has_spark_state, new_identity, read_identity, write_identity


def prepare_checkpoint(pipeline: Pipeline, ledgers: dict[str, Ledger]) -> CheckpointIdentity:
    """Decide the writer generation and starting offsets, or refuse with the fix.

    A fresh checkpoint beside sinks that already hold batches would restart batch
    ids at 0 under an app id Delta has seen: every write would be skipped.
    """
    cp = pipeline.checkpoint_path
    identity = read_identity(cp)
    written = {name: led for name, led in ledgers.items() if led.entries}
    newest = max((led.entries[-1].generation for led in written.values()), default=None)
    fix = f"Fix: run `onceflow recover --pipeline {pipeline.file or pipeline.name}`."
    if identity is None:
        if written:
            state = "has no onceflow identity" if has_spark_state(cp) else "is missing"
            held = ", ".join(
                f"{n}: generation {led.generation} batch {led.entries[-1].batch_id}" for n, led in written.items()
            )
            raise RecoveryError(
                f"the checkpoint {cp} {state}, but the sinks already hold batches ({held}). "
                f"Starting over would re-read or skip data. {fix}"
            )
        identity = new_identity(pipeline.name, 0, None, "new pipeline")
        write_identity(cp, identity)
    elif newest is not None and newest > identity.generation:
        raise RecoveryError(
            f"the checkpoint {cp} is generation {identity.generation}, but the sinks were already written by "
            f"generation {newest}: this checkpoint is older than the tables (restored from a copy?). {fix}"
        )
    return identity

"""A run writes under the checkpoint's generation, or is refused when the checkpoint and the sinks disagree."""

from __future__ import annotations

import pytest

from devkit.pipelines import load_pipeline
from onceflow.errors import RecoveryError
from onceflow.ledger import Ledger, LedgerEntry
from onceflow.spark.generation_guard import prepare_checkpoint
from onceflow.state.generation import new_identity, read_identity, write_identity


def _ledgers(generation: int | None) -> dict[str, Ledger]:
    entries = [] if generation is None else [LedgerEntry("p", "bronze", generation, 4, "t", {0: 0}, {0: 5})]
    return {"bronze": Ledger("/t/bronze", entries, []), "quarantine": Ledger("/t/quarantine", [], [])}


def test_a_first_run_starts_generation_0_and_records_it(tmp_path):
    pipeline = load_pipeline(tmp_path, "localhost:1", "t")
    identity = prepare_checkpoint(pipeline, _ledgers(None))
    assert identity.generation == 0 and identity.reason == "new pipeline"
    assert read_identity(pipeline.checkpoint_path) == identity


def test_a_fresh_checkpoint_beside_written_sinks_is_refused_with_the_fix(tmp_path):
    pipeline = load_pipeline(tmp_path, "localhost:1", "t")
    with pytest.raises(RecoveryError, match="is missing, but the sinks already hold batches") as caught:
        prepare_checkpoint(pipeline, _ledgers(0))
    assert "bronze: generation 0 batch 4" in str(caught.value) and "onceflow recover --pipeline" in str(caught.value)


def test_a_checkpoint_older_than_the_tables_is_refused(tmp_path):
    pipeline = load_pipeline(tmp_path, "localhost:1", "t")
    write_identity(pipeline.checkpoint_path, new_identity(pipeline.name, 1, None, "recovered"))
    assert prepare_checkpoint(pipeline, _ledgers(1)).generation == 1
    with pytest.raises(RecoveryError, match="is generation 1, but the sinks were already written by generation 2"):
        prepare_checkpoint(pipeline, _ledgers(2))

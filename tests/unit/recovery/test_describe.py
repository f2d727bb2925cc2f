"""How a recovery plan words what it found: offsets, where a sink stands, the last run, the next step."""

from __future__ import annotations

from onceflow.ledger import EntryKind, Ledger, LedgerEntry
from onceflow.recovery import describe
from tests.unit.recovery.made_facts import MISSING_CK, B, T, all_sinks, checkpoint, entries, facts, ledgers


def test_offsets_read_in_partition_order():
    assert describe.offsets_text({1: 7, 0: 5}) == "{0: 5, 1: 7}"
    assert describe.offsets_text({}) == describe.offsets_text(None) == "{}"


def test_a_sink_stands_at_its_newest_batch_not_at_a_loss_entry():
    batches = entries("bronze", B)
    loss = LedgerEntry(T, "bronze", 1, 0, T, {0: 300}, {0: 400}, kind=EntryKind.LOSS)
    ledger = Ledger("/state/bronze", [*batches, loss], [])
    assert describe.last_batch(ledger) == batches[-1] and describe.position_key(ledger) == (0, 2)
    assert describe.where(ledger) == "batch 2 of generation 0 (up to {0: 400, 1: 160})"
    empty = Ledger("/state/bronze", [], [])
    assert (
        describe.last_batch(empty) is None
        and describe.position_key(empty) == (-1, -1)
        and describe.where(empty) == "no batch"
    )


def test_the_last_run_is_told_as_it_ended():
    ck, led = checkpoint(B, 2), all_sinks()
    assert describe.run_text(facts(ck, led, last_run={})) == "the query is not running (no run in the status log)"
    assert "its last run (r1) has no final event (killed or crashed)" in describe.run_text(facts(ck, led))
    failed = {"run_id": "r2", "final": {"status": "failed", "error": "boom " * 100, "time": "T1"}}
    text = describe.run_text(facts(ck, led, last_run=failed))
    assert text.startswith("the query is not running: its last run (r2) failed at T1: boom")
    assert len(text) < len("the query is not running: its last run (r2) failed at T1: ") + 301  # the error is cut
    stopped = {"run_id": "r3", "final": {"status": "stopped", "error": None, "time": None}}
    assert describe.run_text(facts(ck, led, last_run=stopped)).endswith("(r3) was stopped (at a batch boundary)")


def test_the_next_step_names_the_pipeline_and_its_recover_dag():
    hint = describe.start_hint(facts(checkpoint(B, 2), all_sinks()))
    assert f"onceflow ingest --pipeline {T}" in hint and f"{T}_recover DAG" in hint


def test_the_facts_go_to_the_record_as_json():
    summary = describe.facts_summary(facts(checkpoint(B, 2), all_sinks()))
    assert summary["checkpoint"]["committed_offsets"] == {"0": 300, "1": 160}
    assert summary["sinks"]["bronze"]["last_batch"] == 2 and summary["sinks"]["bronze"]["committed_offsets"] == {
        "0": 300,
        "1": 160,
    }
    assert summary["kafka"] == {"topic": T, "earliest": {"0": 0, "1": 0}, "latest": {"0": 1000, "1": 1000}}
    assert summary["run"]["last_run"] == {"run_id": "r1", "final": None}
    missing = describe.facts_summary(facts(MISSING_CK, ledgers(), generation=None))
    assert missing["checkpoint"]["exists"] is False and missing["checkpoint"]["committed_offsets"] is None

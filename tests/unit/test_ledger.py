"""Pure logic of the Delta sink ledgers: entries, contiguity, backfill entries."""

from __future__ import annotations

import pytest

from onceflow.ledger import LOSS, LedgerEntry, app_id, contiguity_problems


def entry(batch: int, start: dict, end: dict, generation: int = 0, kind: str = "batch") -> LedgerEntry:
    return LedgerEntry("p", "bronze", generation, batch, "t", start, end, rows=1, kind=kind)


def test_entry_round_trips_through_commit_metadata():
    e = entry(3, {0: 10, 1: 5}, {0: 20, 1: 9})
    back = LedgerEntry.from_json(e.to_json(), version=7, timestamp=1)
    assert (back.batch_id, back.start, back.end, back.version) == (3, {0: 10, 1: 5}, {0: 20, 1: 9}, 7)
    assert back.app_id == "onceflow:p:bronze:g0" == app_id("p", "bronze", 0)
    assert LedgerEntry.from_json("someone's own metadata") is None
    assert LedgerEntry.from_json('{"other": 1}') is None


def test_contiguous_ledger_has_no_problems_across_generations_and_losses():
    entries = [entry(0, {0: 0}, {0: 10}), entry(1, {0: 10}, {0: 25}),
               entry(-1, {0: 25}, {0: 40}, generation=1, kind=LOSS), entry(0, {0: 40}, {0: 50}, generation=1)]
    assert contiguity_problems(entries) == []


@pytest.mark.parametrize("entries, expected", [
    ([entry(0, {0: 0}, {0: 10}), entry(1, {0: 11}, {0: 20})], "starts partition 0 at 11"),
    ([entry(0, {0: 0}, {0: 10}), entry(2, {0: 10}, {0: 20})], "batch 2 follows batch 0"),
    ([entry(0, {0: 0}, {0: 10}, generation=1), entry(1, {0: 10}, {0: 20}, generation=0)], "follows generation 1"),
])
def test_broken_chains_are_named(entries, expected):
    problems = contiguity_problems(entries)
    assert problems and expected in problems[0]


def test_a_backfill_entry_commits_under_its_own_app_id_never_a_generations():
    from onceflow.ledger import app_id, backfill_entry

    entry = backfill_entry("p", "bronze", 2, 0, "t", {0: 0}, {0: 10}, 3, [])
    assert entry.app_id == "onceflow:p:bronze:backfill" != app_id("p", "bronze", 2)
    assert entry.batch_id == 0  # its txnVersion: the sink's backfill count

"""Pure logic of the Delta sink ledgers: entries, contiguity, backfill entries."""

from __future__ import annotations

import pytest

from onceflow.ledger import EntryKind, LedgerEntry, app_id, contiguity_problems


def entry(batch: int, start: dict, end: dict, generation: int = 0, kind: EntryKind = EntryKind.BATCH) -> LedgerEntry:
    return LedgerEntry("p", "bronze", generation, batch, "t", start, end, rows=1, kind=kind)


def test_entry_round_trips_through_commit_metadata():
    e = entry(3, {0: 10, 1: 5}, {0: 20, 1: 9})
    back = LedgerEntry.from_json(e.to_json(), version=7, timestamp=1)
    assert back is not None
    assert (back.batch_id, back.start, back.end, back.version) == (3, {0: 10, 1: 5}, {0: 20, 1: 9}, 7)
    assert back.app_id == "onceflow:p:bronze:g0" == app_id("p", "bronze", 0)
    assert LedgerEntry.from_json("someone's own metadata") is None
    assert LedgerEntry.from_json('{"other": 1}') is None


def test_contiguous_ledger_has_no_problems_across_generations_and_losses():
    entries = [
        entry(0, {0: 0}, {0: 10}),
        entry(1, {0: 10}, {0: 25}),
        entry(-1, {0: 25}, {0: 40}, generation=1, kind=EntryKind.LOSS),
        entry(0, {0: 40}, {0: 50}, generation=1),
    ]
    assert contiguity_problems(entries) == []


@pytest.mark.parametrize(
    "entries, expected",
    [
        ([entry(0, {0: 0}, {0: 10}), entry(1, {0: 11}, {0: 20})], "starts partition 0 at 11"),
        ([entry(0, {0: 0}, {0: 10}), entry(2, {0: 10}, {0: 20})], "batch 2 follows batch 0"),
        ([entry(0, {0: 0}, {0: 10}, generation=1), entry(1, {0: 10}, {0: 20}, generation=0)], "follows generation 1"),
    ],
)
def test_broken_chains_are_named(entries, expected):
    problems = contiguity_problems(entries)
    assert problems and expected in problems[0]


def test_a_backfill_entry_commits_under_its_own_app_id_never_a_generations():
    from onceflow.ledger import app_id, backfill_entry

    entry = backfill_entry("p", "bronze", 2, 0, "t", {0: 0}, {0: 10}, 3, [])
    assert entry.app_id == "onceflow:p:bronze:backfill" != app_id("p", "bronze", 2)
    assert entry.batch_id == 0  # its txnVersion: the sink's backfill count


def test_a_group_commit_holds_each_batch_entry_in_order():
    """The aggregates follower merges several bronze batches in one commit; its metadata keeps
    one entry per batch, so the ledger still reads batch by batch, all at the commit's version."""
    from onceflow.ledger import entries_from_json, group_json

    batches = [
        entry(4, {0: 10}, {0: 20}),
        entry(-1, {0: 20}, {0: 30}, generation=1, kind=EntryKind.LOSS),
        entry(0, {0: 30}, {0: 31}, generation=1),
    ]
    back = entries_from_json(group_json(batches), version=9, timestamp=5)
    assert back is not None
    assert [(e.generation, e.batch_id, e.kind, e.start, e.end, e.version) for e in back] == [
        (0, 4, "batch", {0: 10}, {0: 20}, 9),
        (1, -1, EntryKind.LOSS, {0: 20}, {0: 30}, 9),
        (1, 0, "batch", {0: 30}, {0: 31}, 9),
    ]
    assert contiguity_problems(back) == []
    single = entries_from_json(batches[0].to_json())
    assert single is not None and single[0].batch_id == 4  # a single entry reads as a list of one
    assert entries_from_json("not ours") is None and entries_from_json(None) is None
    assert LedgerEntry.from_json(group_json(batches)) is None  # not one entry
    with pytest.raises(ValueError, match="at least one entry"):
        group_json([])


def test_a_follower_continues_past_its_own_offsets():
    """follower_lag: the bronze batches that reach past the aggregates' committed offsets, oldest
    first, and where the aggregates hold offsets bronze does not (bronze restored from a copy)."""
    from onceflow.ledger import Ledger, follower_lag

    bronze = [
        entry(0, {0: 0}, {0: 10}),
        entry(1, {0: 10}, {0: 20}),
        entry(-1, {0: 20}, {0: 30}, generation=1, kind=EntryKind.LOSS),
        entry(0, {0: 30}, {0: 40}, generation=1),
    ]

    def ledger(entries):
        return Ledger(table="t", entries=list(entries), foreign_commits=[])

    assert follower_lag(ledger(bronze), ledger([])) == (bronze, {})
    assert follower_lag(ledger(bronze), ledger(bronze[:2])) == (bronze[2:], {})
    assert follower_lag(ledger(bronze), ledger(bronze[:3])) == (bronze[3:], {})  # after the LOSS entry
    assert follower_lag(ledger(bronze), ledger(bronze)) == ([], {})
    assert follower_lag(ledger(bronze[:1]), ledger(bronze[:2])) == ([], {0: 20})  # it holds more than bronze
    # bronze restored and re-read by generation 2 in other batches: only the one reaching past 20 is missing
    reread = [*bronze[:1], entry(0, {0: 10}, {0: 15}, generation=2), entry(1, {0: 15}, {0: 25}, generation=2)]
    assert follower_lag(ledger(reread), ledger(bronze[:2])) == (reread[2:], {})


def test_a_compaction_carrying_a_copy_of_an_entry_is_maintenance_not_a_step(tmp_path):
    """Delta's own auto compaction, run right after a MERGE by a session with the MERGE's
    userMetadata (an older onceflow, or a user's job), commits a copy of its ledger entry: the
    reader counts that OPTIMIZE as maintenance, never as a second step. (delta-rs, no JVM.)"""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from deltalake.transaction import CommitProperties

    from onceflow.ledger import read_ledger

    path = str(tmp_path / "t")
    first = entry(0, {0: 0}, {0: 10})
    for i, e in enumerate((first, entry(1, {0: 10}, {0: 20}))):
        write_deltalake(
            path,
            pa.table({"x": [i]}),
            mode="append",
            commit_properties=CommitProperties(custom_metadata={"userMetadata": e.to_json()}),
        )
    DeltaTable(path).optimize.compact(
        commit_properties=CommitProperties(custom_metadata={"userMetadata": first.to_json()})
    )
    ledger = read_ledger(path)
    assert [e.batch_id for e in ledger.entries] == [0, 1] and ledger.problems() == []
    assert [c["operation"] for c in ledger.maintenance] == ["OPTIMIZE"] and ledger.foreign_commits == []


def test_quarantine_rows_per_reason_add_up_and_an_entry_without_them_is_unrecorded():
    from onceflow.ledger import LedgerEntry, rows_by_reason

    def entry(rows: int, extra: dict) -> LedgerEntry:
        return LedgerEntry("p", "quarantine", 1, 0, "t", {0: 0}, {0: rows}, rows, extra=extra)

    entries = [
        entry(5, {}),  # written before reasons were counted
        entry(3, {"reasons": {"invalid_json": 2, "missing_field": 1}}),
        entry(4, {"reasons": {"invalid_json": 4}}),
        entry(0, {}),  # an empty batch counts nothing
    ]
    assert rows_by_reason(entries) == {"invalid_json": 6, "missing_field": 1, "unrecorded": 5}
    assert sum(rows_by_reason(entries).values()) == sum(e.rows for e in entries)

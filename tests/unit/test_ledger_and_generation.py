"""Pure logic of ledgers, writer generations, faults and the run lock."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from onceflow import faults
from onceflow.errors import RecoveryError
from onceflow.generation import has_spark_state, new_identity, read_identity, write_identity
from onceflow.ledger import LOSS, LedgerEntry, app_id, contiguity_problems
from onceflow.status import AlreadyRunningError, RunLock, StatusLog


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


def test_identity_round_trip_and_unreadable_identity(tmp_path):
    cp = tmp_path / "cp"
    assert read_identity(str(cp)) is None and not has_spark_state(str(cp))
    write_identity(str(cp), new_identity("p", 2, '{"t":{"0":5}}', "recovered", {"bronze": {"0": 9}}))
    got = read_identity(str(cp))
    assert (got.generation, got.starting_offsets, got.floor("bronze"), got.floor("quarantine")) == \
        (2, '{"t":{"0":5}}', {0: 9}, {})
    (cp / "_onceflow.json").write_text("{not json")
    with pytest.raises(RecoveryError, match="unreadable.*onceflow recover"):
        read_identity(str(cp))


def test_fault_specs():
    assert faults.parse(None) is None
    assert faults.parse("between_sinks@4") == ("between_sinks", 4)
    for bad in ("between_sinks", "nowhere@1", "after_sink_commit@x"):
        with pytest.raises(ValueError, match="expected <point>@<batch id>"):
            faults.parse(bad)


def _try_lock(path: str, queue) -> None:
    try:
        RunLock(path).acquire()
        queue.put("acquired")
    except AlreadyRunningError as exc:
        queue.put(str(exc))


def test_run_lock_admits_one_process_and_dies_with_it(tmp_path):
    lock = RunLock(tmp_path)
    lock.acquire(run_id="r1")
    try:
        assert lock.is_held() and lock.holder()["pid"] == os.getpid()
        queue = multiprocessing.get_context("fork").Queue()
        p = multiprocessing.get_context("fork").Process(target=_try_lock, args=(str(tmp_path), queue))
        p.start()
        p.join(30)
        message = queue.get(timeout=5)
        assert "already running" in message and "Fix" in message
    finally:
        lock.release()
    assert not lock.is_held()


def test_status_log_keeps_the_last_run_and_skips_torn_lines(tmp_path):
    log = StatusLog(tmp_path, "p")
    log.append("started", run_id="a")
    log.append("final", run_id="a", status="finished")
    log.append("started", run_id="b")
    with open(log.path, "a") as f:
        f.write('{"event": "progr')  # a reader racing a writer sees a torn last line
    assert [e["run_id"] for e in log.last_run()] == ["b"]


def test_a_backfill_entry_commits_under_its_own_app_id_never_a_generations():
    from onceflow.ledger import app_id, backfill_entry

    entry = backfill_entry("p", "bronze", 2, 0, "t", {0: 0}, {0: 10}, 3, [])
    assert entry.app_id == "onceflow:p:bronze:backfill" != app_id("p", "bronze", 2)
    assert entry.batch_id == 0  # its txnVersion: the sink's backfill count

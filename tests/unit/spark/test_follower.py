"""The follower: the aggregates MERGE prunes target files below the batch's first window (the
floor must be exact), and its schedule pauses after a cycle ends."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from onceflow.spark.follower import AVAILABLE_NOW_GROUP_ROWS, MAX_GROUP_BATCHES, Schedule, window_floor
from tests.manual_clock import ManualClock


def test_the_floor_is_the_epoch_aligned_window_start_as_spark_computes_it():
    assert window_floor(datetime(2026, 11, 22, 10, 7, 31, 5000), 60) == datetime(2026, 11, 22, 10, 7, tzinfo=UTC)
    assert window_floor(datetime(2026, 11, 22, 10, 7, 31), 600) == datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def test_a_moment_on_a_boundary_is_its_own_window_start_and_zones_are_honoured():
    boundary = datetime(2026, 11, 22, 10, 8, tzinfo=UTC)
    assert window_floor(boundary, 60) == boundary
    assert window_floor(boundary.astimezone(timezone(timedelta(hours=5, minutes=30))), 60) == boundary


def test_no_valid_event_means_no_pruning():
    assert window_floor(None, 60) is None


def test_the_pause_counts_from_the_end_of_a_cycle_not_its_start():
    """A MERGE slower than `merge_every` must not start the next one at once: the follower
    would hold a core for good and the batches' latency would pay (docs/benchmarks.md)."""
    clock = ManualClock()
    schedule = Schedule(10.0, clock)
    assert not schedule.due(batches=0, rows=0, new=False)
    clock.now = 9.9
    assert not schedule.due(batches=3, rows=3000, new=True)
    assert schedule.wait() == pytest.approx(0.1)
    clock.now = 10.0
    assert schedule.due(batches=3, rows=3000, new=True)
    clock.now = 25.0  # the cycle that started at 10 s took 15 s
    schedule.cycle_ended()
    clock.now = 30.0  # 20 s after it started, 5 s after it ended: not yet
    assert not schedule.due(batches=5, rows=5000, new=True)
    assert schedule.wait() == pytest.approx(5.0)
    clock.now = 35.0
    assert schedule.due(batches=5, rows=5000, new=True)
    assert not schedule.due(batches=0, rows=0, new=False), "nothing waits: nothing to do"
    assert schedule.due(batches=0, rows=0, new=True), "a pipeline without aggregates still compacts"


def test_an_available_now_run_merges_at_its_end_unless_much_has_gathered():
    clock = ManualClock()
    schedule = Schedule(None, clock)
    clock.now = 1e6
    assert not schedule.due(batches=10, rows=AVAILABLE_NOW_GROUP_ROWS - 1, new=True)
    assert schedule.wait() is None
    assert schedule.due(batches=10, rows=AVAILABLE_NOW_GROUP_ROWS, new=True)
    assert schedule.due(batches=MAX_GROUP_BATCHES, rows=0, new=True), "a commit holds at most this many entries"


def test_a_merge_across_a_generation_change_names_its_batches_per_generation():
    """The log read `aggregates: merged batches 56–3` across a generation change (issue 48)."""
    from onceflow.spark.follower import merged_span

    assert merged_span([(0, 7)]) == "batch 7"
    assert merged_span([(0, 3), (0, 4), (0, 9)]) == "batches 3–9"
    assert merged_span([(0, 56), (0, 57), (1, 0), (1, 3)]) == "batches 56–57 of generation 0, 0–3 of generation 1"
    assert merged_span([(0, 56), (1, 0)]) == "batches 56 of generation 0, 0 of generation 1"

"""The aggregates MERGE prunes target files below the batch's first window: the floor must be exact."""

from datetime import datetime, timedelta, timezone

from onceflow.spark.follower import window_floor


def test_the_floor_is_the_epoch_aligned_window_start_as_spark_computes_it():
    assert window_floor(datetime(2026, 11, 22, 10, 7, 31, 5000), 60) == datetime(2026, 11, 22, 10, 7,
                                                                                 tzinfo=timezone.utc)
    assert window_floor(datetime(2026, 11, 22, 10, 7, 31), 600) == datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)


def test_a_moment_on_a_boundary_is_its_own_window_start_and_zones_are_honoured():
    boundary = datetime(2026, 11, 22, 10, 8, tzinfo=timezone.utc)
    assert window_floor(boundary, 60) == boundary
    assert window_floor(boundary.astimezone(timezone(timedelta(hours=5, minutes=30))), 60) == boundary


def test_no_valid_event_means_no_pruning():
    assert window_floor(None, 60) is None

"""Backfill range validation: every bad range is refused with the field and the fix."""

from __future__ import annotations

import importlib

import pytest

importlib.import_module("tests.airflow_helpers")  # sets AIRFLOW_HOME before airflow is imported

from onceflow.airflow.backfill import RangeError, validate_range  # noqa: E402 -- after tests.airflow_helpers sets AIRFLOW_HOME

MARKS = {0: (10, 200), 1: (0, 50)}


def test_offsets_are_checked_and_keyed_by_partition_strings():
    got = validate_range({"start_offsets": {"0": 10, "1": 0}, "end_offsets": '{"0": 200, "1": 50}'}, MARKS)
    assert got == {"start": {"0": 10, "1": 0}, "end": {"0": 200, "1": 50}}


def test_a_time_range_becomes_offsets_through_kafka():
    seen = []

    def lookup(ms):
        seen.append(ms)
        return {0: 20, 1: 5} if len(seen) == 1 else {0: 120, 1: 40}

    got = validate_range({"start_time": "2026-11-22T10:00:00Z", "end_time": "2026-11-22T11:00:00+00:00"}, MARKS, lookup)
    assert got == {"start": {"0": 20, "1": 5}, "end": {"0": 120, "1": 40}}
    assert seen == [1795341600000, 1795345200000]


@pytest.mark.parametrize(
    "params, message",
    [
        ({}, "either start_offsets + end_offsets or start_time + end_time"),
        ({"start_offsets": {"0": 1}, "end_offsets": {"0": 2}, "start_time": "2026-11-22T10:00:00Z"}, "not both"),
        ({"start_offsets": {"0": 10}}, "go together"),
        ({"start_offsets": "{nope", "end_offsets": {"0": 2}}, "start_offsets: '{nope' is not JSON"),
        ({"start_offsets": {"0": 10}, "end_offsets": {"1": 20}}, "the same partitions"),
        ({"start_offsets": {"x": 10}, "end_offsets": {"x": 20}}, "not integer"),
        ({"start_offsets": {"0": 50}, "end_offsets": {"0": 20}}, "start offset 50 is after end offset 20"),
        ({"start_offsets": {"0": 5}, "end_offsets": {"0": 20}}, "offsets below 10 are gone from Kafka"),
        ({"start_offsets": {"1": 5}, "end_offsets": {"1": 60}}, "past the log end 50. Fix: end at 50"),
        ({"start_offsets": {"7": 0}, "end_offsets": {"7": 1}}, "partition 7 does not exist"),
        ({"start_time": "yesterday", "end_time": "2026-11-22T11:00:00Z"}, "not an ISO-8601 time"),
        ({"start_time": "2026-11-22T10:00:00", "end_time": "2026-11-22T11:00:00Z"}, "has no time zone"),
        ({"start_time": "2026-11-22T12:00:00Z", "end_time": "2026-11-22T11:00:00Z"}, "is not before"),
    ],
)
def test_bad_ranges_are_refused_with_the_reason(params, message):
    with pytest.raises(RangeError) as err:
        validate_range(params, MARKS, lambda ms: {0: 20, 1: 5})
    assert message in str(err.value)

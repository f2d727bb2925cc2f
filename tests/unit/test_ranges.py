"""Offset ranges a person asks for, parsed and checked once for the CLI and Airflow alike."""

from __future__ import annotations

import pytest

from onceflow.errors import RangeError
from onceflow.ranges import offset_range, parse_offsets


def test_json_text_or_a_mapping_becomes_offsets_per_partition():
    assert parse_offsets('{"0": 100, "1": 0}', "start") == {0: 100, 1: 0}
    assert parse_offsets({"2": "7"}, "start") == {2: 7}


@pytest.mark.parametrize(
    "value, words",
    [
        ("not json", "is not JSON"),
        ("{}", "expected a non-empty object"),
        ('{"a": 1}', "is not integer -> integer"),
        ('{"0": -1}', "partitions and offsets are >= 0"),
    ],
)
def test_a_malformed_value_names_the_field_and_the_fix(value, words):
    with pytest.raises(RangeError, match=f"^start_offsets: .*{words}"):
        parse_offsets(value, "start_offsets")


def test_a_range_has_the_same_partitions_at_both_ends_and_runs_forwards():
    assert offset_range('{"0": 1}', '{"0": 1}') == ({0: 1}, {0: 1})
    with pytest.raises(RangeError, match="start_offsets has partitions \\[0\\] but end_offsets \\[0, 1\\]"):
        offset_range('{"0": 1}', '{"0": 2, "1": 3}')
    with pytest.raises(RangeError, match="partition 0: start offset 5 is after end offset 2"):
        offset_range('{"0": 5}', '{"0": 2}')

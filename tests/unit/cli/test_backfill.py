"""`onceflow backfill` checks its range before Kafka is asked (onceflow.ranges, shared with Airflow)."""

from __future__ import annotations

import pytest

from onceflow.cli.app import build_parser
from onceflow.cli.backfill import check_range
from onceflow.errors import RangeError


def _args(start: str, end: str):
    return build_parser().parse_args(["backfill", "--start-offsets", start, "--end-offsets", end])


def test_the_range_becomes_offsets_per_partition():
    args = _args('{"0": 1, "1": 5}', '{"0": 10, "1": 5}')
    check_range(args)
    assert args.start_offsets == {0: 1, 1: 5} and args.end_offsets == {0: 10, 1: 5}


def test_a_backwards_range_is_refused_with_the_flags_names():
    with pytest.raises(RangeError, match="partition 0: start offset 9 is after end offset 2 \\(--start-offsets"):
        check_range(_args('{"0": 9}', '{"0": 2}'))

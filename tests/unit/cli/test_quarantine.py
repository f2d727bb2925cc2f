"""`onceflow quarantine` takes a batch or a range, one of the two."""

from __future__ import annotations

import pytest

from onceflow.cli.app import build_parser
from onceflow.cli.quarantine import check_args
from onceflow.errors import RangeError


def test_a_batch_or_a_range_and_not_both():
    parse = build_parser().parse_args
    batch = parse(["quarantine", "--batch", "7"])
    check_args(batch)
    assert batch.batch == 7 and batch.start_offsets is None
    span = parse(["quarantine", "--start-offsets", '{"0": 120}', "--end-offsets", '{"0": 121}'])
    check_args(span)
    assert span.start_offsets == {0: 120} and span.end_offsets == {0: 121}
    for argv in (["quarantine"], ["quarantine", "--batch", "7", "--start-offsets", '{"0": 1}']):
        with pytest.raises(RangeError, match="either --batch N or --start-offsets/--end-offsets"):
            check_args(parse(argv))

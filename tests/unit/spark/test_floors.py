"""A sink's floor raises its ledger ranges: rows below it are held already."""

from __future__ import annotations

from onceflow.spark.floors import raised


def test_a_range_bound_moves_up_to_the_floor_only():
    assert raised({0: 10, 1: 50, 2: 5}, {0: 30, 1: 20}) == {0: 30, 1: 50, 2: 5}
    assert raised({0: 10}, {}) == {0: 10}

"""Which type changes spark/evolve.py applies by itself: exactly those whose every old value casts
to the new type without loss (the integration proof is tests/integration/test_evolution.py)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import DecimalType, DoubleType, IntegerType, LongType, StringType

from onceflow.spark.evolve import widens


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (IntegerType(), LongType()),  # a field declared long instead of int; min/max of it; a group key
        (LongType(), DecimalType(38, 0)),  # sum(int) was a bigint, sum(long) is a decimal(38,0)
        (IntegerType(), DecimalType(10, 0)),
        (IntegerType(), DecimalType(12, 2)),
        (DecimalType(8, 2), DecimalType(12, 3)),  # more integer and fraction digits
        (DecimalType(18, 2), DecimalType(20, 2)),  # sum of a decimal(8,2) -> of a decimal(10,2)
    ],
)
def test_a_lossless_widening_is_applied(old, new):
    assert widens(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (LongType(), IntegerType()),  # narrowed
        (IntegerType(), IntegerType()),  # unchanged: nothing to do
        (LongType(), DecimalType(18, 0)),  # 2^63 needs 19 digits
        (IntegerType(), DecimalType(10, 1)),  # 9 integer digits left: 2^31 does not fit
        (DecimalType(8, 2), DecimalType(8, 3)),  # a digit moved from the integer part to the fraction
        (DecimalType(8, 2), DecimalType(10, 1)),  # a fraction digit lost
        (LongType(), DoubleType()),  # not every long is a double
        (IntegerType(), StringType()),
    ],
)
def test_anything_else_is_not(old, new):
    assert not widens(old, new)

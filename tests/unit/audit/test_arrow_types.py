"""The declared types in Arrow: what the judges give and the reconciliation compares."""

from __future__ import annotations

import pyarrow as pa
import pytest

from onceflow.audit.arrow_types import arrow_type
from onceflow.schema.model import parse_type


@pytest.mark.parametrize(
    ("declared", "arrow"),
    [
        ("string", pa.string()),
        ("int", pa.int32()),
        ("long", pa.int64()),
        ("double", pa.float64()),
        ("boolean", pa.bool_()),
        ("date", pa.date32()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("decimal(18,2)", pa.decimal128(18, 2)),
        ("decimal(38,0)", pa.decimal128(38, 0)),
    ],
)
def test_each_declared_type(declared, arrow):
    assert arrow_type(parse_type(declared)) == arrow

"""The sink tables as the audit reads them with delta-rs: pinned version, audited ranges, columns."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from onceflow.audit.sink_tables import read_table
from onceflow.errors import OnceflowError


def _rows(partition: int, offsets: range) -> pa.Table:
    return pa.table(
        {
            "_partition": pa.array([partition] * len(offsets), pa.int32()),
            "_offset": pa.array(list(offsets), pa.int64()),
            "v": pa.array([f"v{o}" for o in offsets], pa.string()),
        }
    )


def test_the_pinned_version_and_only_the_audited_ranges_are_read(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, _rows(0, range(0, 10)))  # version 0
    write_deltalake(path, _rows(1, range(0, 10)), mode="append")  # version 1
    write_deltalake(path, _rows(0, range(10, 20)), mode="append")  # version 2: after the pinned one
    got = read_table(path, 1, {0: (3, 15), 1: (8, 100)})
    assert sorted(zip(got["_partition"].to_pylist(), got["_offset"].to_pylist(), strict=True)) == [
        *[(0, o) for o in range(3, 10)],
        (1, 8),
        (1, 9),
    ]
    assert read_table(path, None, {0: (12, 14)}, columns=["v"]).column_names == ["v"]
    assert read_table(path, None, None).num_rows == 30
    nothing = read_table(path, 2, {}, columns=["_offset", "v"])
    assert nothing.num_rows == 0 and nothing.column_names == ["_offset", "v"]
    assert read_table(path, 2, None, predicate="\"v\" = 'v15'").num_rows == 1


def test_a_missing_table_is_an_audit_error_naming_it(tmp_path):
    with pytest.raises(OnceflowError, match="does not exist"):
        read_table(str(tmp_path / "nowhere"), None, None)
